// Bounded parallelism for LLM-bound work: a fixed number of workers pull items in order.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "grag/status.h"

namespace grag {

// Calls fn(i) for every i in [0, count) on up to `workers` threads (the calling thread is one of
// them; fewer when the system has no more threads to give) and returns when all calls have
// returned. Items start in index order. fn must be
// thread-safe and must not throw. When `stop` becomes true, no further item starts.
inline void ParallelFor(size_t count, size_t workers, const std::function<void(size_t)>& fn,
                        const std::atomic<bool>* stop = nullptr) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (;;) {
      if (stop != nullptr && stop->load()) return;
      const size_t i = next.fetch_add(1);
      if (i >= count) return;
      fn(i);
    }
  };
  workers = std::max<size_t>(1, std::min(workers, count));
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  for (size_t t = 1; t < workers; ++t) {
    try {
      threads.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // out of threads: fewer workers, same result
    }
  }
  work();
  for (auto& t : threads) t.join();
}

// ParallelFor for work that can fail: fn(i) returns a Status. The first error stops further
// items from starting; the items in flight finish, then that error is returned. A `cancel` flag
// (may be null) that becomes true stops new items too, and the result is kCancelled
// ("interrupted") unless an error came first.
inline Status ParallelForStatus(size_t count, size_t workers,
                                const std::function<Status(size_t)>& fn,
                                const std::atomic<bool>* cancel = nullptr) {
  std::mutex mu;
  Status first_error;  // guarded by mu
  std::atomic<bool> stop{false};
  ParallelFor(
      count, workers,
      [&](size_t i) {
        if (cancel != nullptr && cancel->load()) {
          stop = true;
          return;
        }
        Status st = fn(i);
        if (st.ok()) return;
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = std::move(st);
        stop = true;
      },
      &stop);
  if (!first_error.ok()) return first_error;
  if (cancel != nullptr && cancel->load()) return Status::Cancelled("interrupted");
  return Status::Ok();
}

}  // namespace grag
