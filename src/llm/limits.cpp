#include "limits.h"

#include <algorithm>

namespace grag::llm_internal {
namespace {

std::chrono::nanoseconds Interval(int per_minute) {
  if (per_minute <= 0) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(std::chrono::minutes(1)) / per_minute;
}

}  // namespace

RateLimiter::RateLimiter(Clock& clock, int requests_per_minute, int tokens_per_minute)
    : clock_(clock),
      per_request_(Interval(requests_per_minute)),
      per_token_(Interval(tokens_per_minute)),
      next_request_(clock.Now()),
      next_token_(next_request_) {}

void RateLimiter::Acquire(int64_t tokens) {
  if (per_request_.count() == 0 && per_token_.count() == 0) return;
  Clock::TimePoint start;
  Clock::TimePoint now;
  {
    std::lock_guard lock(mu_);
    now = clock_.Now();
    start = now;
    if (per_request_.count() > 0) {
      start = std::max(start, next_request_);
      next_request_ = start + per_request_;
    }
    if (per_token_.count() > 0) {
      start = std::max(start, next_token_);
      next_token_ = start + per_token_ * std::max<int64_t>(tokens, 0);
    }
  }
  if (start > now) clock_.SleepUntil(start);
}

void RateLimiter::Charge(int64_t tokens) {
  if (per_token_.count() == 0 || tokens <= 0) return;
  std::lock_guard lock(mu_);
  next_token_ = std::max(next_token_, clock_.Now()) + per_token_ * tokens;
}

Clock::TimePoint RateLimiter::NextStart() {
  Clock::TimePoint start{};  // no limit: any time (not Now(), which differs call to call)
  if (per_request_.count() == 0 && per_token_.count() == 0) return start;
  std::lock_guard lock(mu_);
  if (per_request_.count() > 0) start = std::max(start, next_request_);
  if (per_token_.count() > 0) start = std::max(start, next_token_);
  return start;
}

}  // namespace grag::llm_internal
