// Concurrency and rate limits of the LLM client. Internal to src/llm.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "grag/llm.h"

namespace grag::llm_internal {

// A counting semaphore sized at run time (std::counting_semaphore's bound is compile-time).
// Waiters are woken one per release; no fairness is promised. Thread-safe.
class Semaphore {
 public:
  explicit Semaphore(int permits) : available_(permits) {}
  void Acquire();
  void Release();

  // Holds one permit for its lifetime.
  class Permit {
   public:
    explicit Permit(Semaphore& s) : s_(s) { s_.Acquire(); }
    ~Permit() { s_.Release(); }
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;

   private:
    Semaphore& s_;
  };

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int available_;  // guarded by mu_
};

// Requests-per-minute and tokens-per-minute limits, as evenly spaced slots (a generic cell rate
// algorithm without burst): providers enforce their per-minute limits over shorter windows, so
// a burst of a minute's worth at once would be refused anyway. Thread-safe; sleeps through the
// Clock, so tests run it in virtual time.
class RateLimiter {
 public:
  // 0 disables a limit. `clock` is borrowed and must outlive the limiter.
  RateLimiter(Clock& clock, int requests_per_minute, int tokens_per_minute);

  // Waits until one more request of `tokens` (estimated) tokens fits both limits, and books it.
  void Acquire(int64_t tokens);
  // Books tokens learnt only after the reply (completion tokens); later requests wait for them.
  void Charge(int64_t tokens);

 private:
  Clock& clock_;
  const std::chrono::nanoseconds per_request_;  // 0: no request limit
  const std::chrono::nanoseconds per_token_;    // 0: no token limit
  std::mutex mu_;
  Clock::TimePoint next_request_;  // guarded by mu_: earliest start of the next request
  Clock::TimePoint next_token_;    // guarded by mu_: when the tokens booked so far are paid off
};

}  // namespace grag::llm_internal
