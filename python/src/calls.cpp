#include "calls.h"

#include <chrono>

namespace py = pybind11;

namespace grag::python {

Watch::Watch(const std::atomic<uint64_t>& cancel_epoch)
    : cancel_epoch_(cancel_epoch), epoch_at_start_(cancel_epoch.load()) {}

void Watch::Post(std::function<void()> event) {
  std::lock_guard lock(mu_);
  events_.push_back(std::move(event));
  cv_.notify_all();
}

void Watch::Wait() {
  // Ctrl-C is seen within this long (Python runs signal handlers only between its own steps).
  constexpr auto kSignalCheck = std::chrono::milliseconds(100);
  for (;;) {
    std::deque<std::function<void()>> batch;
    bool finished = false;
    {
      py::gil_scoped_release released;
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, kSignalCheck, [this] { return done_ || !events_.empty(); });
      batch.swap(events_);
      finished = done_;  // every event of the work was posted before it was done
    }
    for (auto& event : batch) {
      if (error_) break;  // after a failed callback, the rest of its events are dropped
      try {
        event();
      } catch (...) {
        error_ = std::current_exception();
        cancel_ = true;
      }
    }
    if (!error_ && PyErr_CheckSignals() != 0) {
      try {
        throw py::error_already_set();
      } catch (...) {
        error_ = std::current_exception();
      }
      cancel_ = true;
    }
    if (cancel_epoch_.load() != epoch_at_start_) cancel_ = true;
    if (finished) return;
  }
}

}  // namespace grag::python
