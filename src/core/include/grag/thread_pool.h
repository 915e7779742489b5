// One bounded pool of threads for the whole process: the pipeline's stages, the LLM client's
// batches and global search's map step borrow its threads instead of starting their own per
// call (ParallelFor in parallel.h is the usual way in).
//
// Threads are started on demand, when a task arrives and none is idle, up to `max_threads`; an
// idle thread waits for the next task and ends after `idle_seconds` without one, so a process
// that stops working gives its threads back. A task that finds the pool full is refused (never
// queued): the caller does the work itself, which keeps nested parallel loops (a stage whose
// items make parallel model calls) from waiting on threads that wait on them.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

namespace grag {

class ThreadPool {
 public:
  explicit ThreadPool(size_t max_threads, double idle_seconds = 30);
  ~ThreadPool();  // waits for running tasks; idle threads end
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process's pool: at most 256 threads (far above any sensible llm.concurrency, low
  // enough that a runaway loop cannot exhaust the system).
  static ThreadPool& Shared();

  // Runs `task` on an idle pool thread, or a new one while fewer than max_threads exist.
  // Returns false, without running it, when every thread is busy and the pool is full (or the
  // system refuses a new thread). `task` must not throw.
  bool TrySubmit(std::function<void()> task);

  size_t threads() const;  // started and not yet ended
  size_t max_threads() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace grag
