// Bounded parallelism for LLM-bound work: a fixed number of workers pull items in order, on
// threads borrowed from the process's ThreadPool.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <vector>

#include "grag/log.h"
#include "grag/status.h"
#include "grag/thread_pool.h"

namespace grag {

// Calls fn(i) for every i in [0, count) on up to `workers` threads: the calling thread and
// threads borrowed from ThreadPool::Shared() (fewer when the pool has none to give) and returns
// when all calls have returned. Items start in index order. fn must be thread-safe and must
// not throw. When `stop` becomes true, no further item starts. Workers log to the caller's log
// file (CurrentLogFile).
inline void ParallelFor(size_t count, size_t workers, const std::function<void(size_t)>& fn,
                        const std::atomic<bool>* stop = nullptr) {
  // What the borrowed threads share with the caller. A helper that starts after the caller has
  // finished every item (and returned) must not touch fn or stop: it finds `closed` set.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool closed = false;  // guarded by mu
    size_t active = 0;    // helpers inside work(), guarded by mu
    std::atomic<size_t> next{0};
  };
  auto shared = std::make_shared<Shared>();
  auto work = [&fn, stop, count, &next = shared->next] {
    for (;;) {
      if (stop != nullptr && stop->load()) return;
      const size_t i = next.fetch_add(1);
      if (i >= count) return;
      fn(i);
    }
  };
  workers = std::max<size_t>(1, std::min(workers, count));
  const std::shared_ptr<LogFile> log_file = CurrentLogFile();  // workers log where we do
  for (size_t t = 1; t < workers; ++t) {
    const bool started = ThreadPool::Shared().TrySubmit([shared, &work, log_file] {
      {
        std::lock_guard lock(shared->mu);
        if (shared->closed) return;
        ++shared->active;
      }
      {
        ScopedLogFile log_scope(log_file);
        work();
      }
      std::lock_guard lock(shared->mu);
      if (--shared->active == 0) shared->cv.notify_all();
    });
    if (!started) break;  // the pool is full: fewer workers, same result
  }
  work();
  std::unique_lock lock(shared->mu);
  shared->closed = true;
  shared->cv.wait(lock, [&] { return shared->active == 0; });
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
