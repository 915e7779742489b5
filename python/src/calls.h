// Long engine calls (index, query, eval) from Python: the work runs on a thread of its own while
// the calling thread, holding the GIL only between waits, hands the work's events (progress,
// streamed answer text) to Python callbacks and watches for Ctrl-C and Engine.cancel(). Either
// one stops the work through its cancel flag: the engine finishes or aborts the calls in flight
// and stores what is done, so an index stays resumable.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "errors.h"
#include "grag/status.h"

namespace grag::python {

class Watch {
 public:
  // `cancel_epoch`: the engine's cancel counter; the work stops when it moves.
  explicit Watch(const std::atomic<uint64_t>& cancel_epoch);
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // The flag the engine call watches.
  const std::atomic<bool>* cancel_flag() const { return &cancel_; }

  // From any thread: `event` runs on the waiting Python thread, with the GIL, in posting order.
  // An exception it raises stops the work and is raised by Run.
  void Post(std::function<void()> event);

  // Runs `work` (which must not touch Python) and returns its value. Raises: the exception an
  // event raised, KeyboardInterrupt after Ctrl-C, the work's error (errors.h).
  template <typename T>
  T Run(const std::function<Result<T>()>& work) {
    std::optional<Result<T>> result;
    std::thread thread([&] {
      Result<T> r = Status::Internal("no result");
      try {
        r = work();
      } catch (const std::exception& e) {
        r = Status::Internal(e.what());
      }
      std::lock_guard lock(mu_);
      result.emplace(std::move(r));
      done_ = true;
      cv_.notify_all();
    });
    Wait();
    thread.join();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
    if (!result->ok()) Raise(result->status());
    return std::move(*result).value();
  }

 private:
  // Until the work is done: runs posted events, checks signals and the cancel counter.
  void Wait();

  const std::atomic<uint64_t>& cancel_epoch_;
  const uint64_t epoch_at_start_;
  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> events_;
  bool done_ = false;
  std::exception_ptr error_;  // what an event or a signal raised
};

}  // namespace grag::python
