// Rate limits of the LLM client (EndpointPool bounds concurrency). Internal to src/llm.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

#include "grag/llm.h"

namespace grag::llm_internal {

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
  // The earliest time Acquire would let a request start, without booking anything; a time in the
  // past means now.
  Clock::TimePoint NextStart();

 private:
  Clock& clock_;
  const std::chrono::nanoseconds per_request_;  // 0: no request limit
  const std::chrono::nanoseconds per_token_;    // 0: no token limit
  std::mutex mu_;
  Clock::TimePoint next_request_;  // guarded by mu_: earliest start of the next request
  Clock::TimePoint next_token_;    // guarded by mu_: when the tokens booked so far are paid off
};

}  // namespace grag::llm_internal
