// The process's thread pool (core): threads on demand up to the bound, a full pool refuses
// rather than queues, idle threads end, and ParallelFor borrows from it, nested loops included.
#include "grag/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "grag/parallel.h"

namespace grag {
namespace {

TEST(ThreadPoolTest, StartsThreadsOnDemandUpToTheBoundAndRefusesWhenFull) {
  ThreadPool pool(3, 60);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> running{0};
  auto blocker = [&] {
    ++running;
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return release; });
  };
  EXPECT_TRUE(pool.TrySubmit(blocker));
  EXPECT_TRUE(pool.TrySubmit(blocker));
  EXPECT_TRUE(pool.TrySubmit(blocker));
  EXPECT_FALSE(pool.TrySubmit([] {}));  // three busy threads: refused, not queued
  EXPECT_EQ(pool.threads(), 3u);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  // The threads come back idle and take new work without new threads: three more tasks are
  // accepted (a refusal, while a thread is still on its way back, is retried) and all three run.
  std::atomic<int> done{0};
  int accepted = 0;
  for (int attempt = 0; attempt < 5000 && accepted < 3; ++attempt) {
    if (pool.TrySubmit([&] { ++done; })) {
      ++accepted;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  EXPECT_EQ(accepted, 3);
  for (int i = 0; i < 5000 && done.load() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(done.load(), 3);
  EXPECT_EQ(running.load(), 3);
  EXPECT_LE(pool.threads(), 3u);
}

TEST(ThreadPoolTest, IdleThreadsEnd) {
  ThreadPool pool(4, 0.05);
  std::atomic<int> done{0};
  ASSERT_TRUE(pool.TrySubmit([&] { ++done; }));
  for (int i = 0; i < 5000 && pool.threads() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(done.load(), 1);
  EXPECT_EQ(pool.threads(), 0u);
}

TEST(ThreadPoolTest, ParallelForRunsEveryItemOnPoolThreadsAndNestedLoopsFinish) {
  std::vector<std::atomic<int>> hits(200);
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::thread::id> ids;
  ParallelFor(20, 8, [&](size_t i) {
    {
      // The first items wait (5 s at most) until a second thread has joined: the loop runs on
      // borrowed threads, not only on the caller.
      std::unique_lock lock(mu);
      ids.insert(std::this_thread::get_id());
      cv.notify_all();
      cv.wait_for(lock, std::chrono::seconds(5), [&] { return ids.size() > 1; });
    }
    // A stage whose items make parallel calls of their own.
    ParallelFor(10, 8, [&](size_t j) {
      ++hits[i * 10 + j];
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    });
  });
  for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
  EXPECT_GT(ids.size(), 1u);
  EXPECT_LE(ThreadPool::Shared().threads(), ThreadPool::Shared().max_threads());
}

TEST(ThreadPoolTest, ParallelForStatusStopsAtTheFirstError) {
  std::atomic<int> started{0};
  const Status st = ParallelForStatus(1000, 4, [&](size_t i) -> Status {
    ++started;
    if (i == 5) return Status::Internal("item 5 failed");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    return Status::Ok();
  });
  EXPECT_EQ(st.code(), ErrorCode::kInternal);
  EXPECT_EQ(st.message(), "item 5 failed");
  EXPECT_LT(started.load(), 1000);
}

}  // namespace
}  // namespace grag
