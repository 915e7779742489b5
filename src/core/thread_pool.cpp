// ThreadPool (grag/thread_pool.h).
#include "grag/thread_pool.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace grag {

struct ThreadPool::Impl {
  size_t max_threads = 1;
  std::chrono::duration<double> idle_time{30};
  std::mutex mu;
  std::condition_variable work_cv;          // a task for an idle thread, or stopping
  std::condition_variable done_cv;          // a thread ended (the destructor waits for all)
  std::deque<std::function<void()>> tasks;  // handed to idle threads, at most `idle` long
  size_t threads = 0;                       // started and not ended
  size_t idle = 0;                          // waiting for a task and not yet promised one
  bool stopping = false;

  // A pool thread: runs the tasks it is handed until it has been idle too long.
  void Run() {
    std::unique_lock lock(mu);
    for (;;) {
      if (tasks.empty()) {
        ++idle;
        const bool woke =
            work_cv.wait_for(lock, idle_time, [&] { return !tasks.empty() || stopping; });
        if (!woke || (tasks.empty() && stopping)) {
          --idle;
          break;
        }
        // The submitter counted this thread as busy when it queued the task (idle--).
      }
      std::function<void()> task = std::move(tasks.front());
      tasks.pop_front();
      lock.unlock();
      task();
      task = nullptr;  // captured state goes before the next wait
      lock.lock();
    }
    --threads;
    done_cv.notify_all();
  }
};

ThreadPool::ThreadPool(size_t max_threads, double idle_seconds) : impl_(std::make_shared<Impl>()) {
  impl_->max_threads = max_threads == 0 ? 1 : max_threads;
  impl_->idle_time = std::chrono::duration<double>(idle_seconds > 0 ? idle_seconds : 0.001);
}

ThreadPool::~ThreadPool() {
  std::unique_lock lock(impl_->mu);
  impl_->stopping = true;
  impl_->work_cv.notify_all();
  impl_->done_cv.wait(lock, [&] { return impl_->threads == 0; });
}

ThreadPool& ThreadPool::Shared() {
  // Never destroyed: a ParallelFor during static destruction still finds it; its idle threads
  // end on their own.
  static ThreadPool* pool = new ThreadPool(256);
  return *pool;
}

bool ThreadPool::TrySubmit(std::function<void()> task) {
  std::unique_lock lock(impl_->mu);
  if (impl_->stopping) return false;
  if (impl_->idle > 0) {
    --impl_->idle;  // promised to this task
    impl_->tasks.push_back(std::move(task));
    impl_->work_cv.notify_one();
    return true;
  }
  if (impl_->threads >= impl_->max_threads) return false;
  impl_->tasks.push_back(std::move(task));
  ++impl_->threads;
  try {
    // The thread holds the pool's state, so a pool destroyed meanwhile cannot pull it away.
    std::thread([impl = impl_] { impl->Run(); }).detach();
  } catch (const std::system_error&) {
    --impl_->threads;
    impl_->tasks.pop_back();
    return false;
  }
  return true;
}

size_t ThreadPool::threads() const {
  std::lock_guard lock(impl_->mu);
  return impl_->threads;
}

size_t ThreadPool::max_threads() const { return impl_->max_threads; }

}  // namespace grag
