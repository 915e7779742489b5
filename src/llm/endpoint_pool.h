// Several endpoints serving one model: which one takes the next request, each one's limits and
// health, and what each did. Internal to src/llm; OpenAIClient sends every request through it
// (a single base_url is a pool of one, whose behaviour is the client's of old: no benching).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "grag/llm.h"
#include "grag/status.h"
#include "limits.h"

namespace grag::llm_internal {

// What the pool knows of one endpoint when it chooses.
struct EndpointView {
  int in_flight = 0;
  int max_concurrency = 1;
  double weight = 1.0;
  bool benched = false;         // out of rotation until its bench ends
  bool probing = false;         // back from the bench: one request at a time until one succeeds
  Clock::TimePoint ready_at{};  // when its rate limits let the next request start
  Clock::TimePoint benched_until{};
};

// The choice for one request.
struct EndpointPick {
  std::optional<size_t> index;  // send here now
  // No endpoint can take it now: wait for a request to end (nullopt), or until this time when
  // every endpoint is benched.
  std::optional<Clock::TimePoint> wake_at;
};

// Chooses the endpoint for the next request: among those not benched and not in `avoid` (those
// this call already failed on), falling back to the avoided ones only when no other is in
// rotation; of those with a free slot, the one whose rate limits let it start first, then the
// least loaded (in flight / max_concurrency), then the heavier, then the next after `turn`
// (so equal endpoints take turns). Pure: the unit tests drive it directly.
EndpointPick PickEndpoint(const std::vector<EndpointView>& endpoints,
                          const std::vector<bool>& avoid, Clock::TimePoint now, size_t turn);

// How the last request to an endpoint went, for its health.
enum class Outcome {
  kOk,          // a 2xx reply
  kFailed,      // worth retrying: network error, timeout, 408, 429, 5xx
  kDown,        // this endpoint is unusable as configured: a refused connection before it ever
                // answered, 401, 403, 404 (benched at once when benching is on)
  kCallerError  // the request's own fault (other 4xx): says nothing about the endpoint
};

struct BenchPolicy {
  bool enabled = false;  // only with somewhere else to go (two endpoints or more)
  int after_failures = 3;
  std::chrono::milliseconds base{5'000};
  std::chrono::milliseconds cap{300'000};
};

// Thread-safe. Waits (for a slot, a rate-limit slot, the end of a bench) through the Clock for
// timed waits and a condition variable for slots, so the tests' FakeClock drives it.
class EndpointPool {
 public:
  // `clock` is borrowed and must outlive the pool.
  EndpointPool(std::vector<EndpointOptions> endpoints, std::string role, Clock& clock,
               BenchPolicy policy);

  size_t size() const { return endpoints_.size(); }
  const EndpointOptions& endpoint(size_t i) const { return endpoints_[i]->options; }
  int total_concurrency() const;

  // Waits until an endpoint can take a request of `tokens` prompt tokens, books a slot and a
  // rate-limit slot there, and returns it. Never returns an endpoint flagged in `avoid` while
  // another is in rotation. Every Acquire is followed by one Release.
  size_t Acquire(int64_t tokens, const std::vector<bool>& avoid);
  // Ends the request Acquire booked on endpoint `i`: frees the slot and records the outcome
  // (`latency`: of the HTTP request alone; `error`: for the log when it benches the endpoint).
  void Release(size_t i, Outcome outcome, std::chrono::milliseconds latency, const Status& error);
  // The server asked for a pause (Retry-After): with benching on, no request goes there before.
  void PauseUntil(size_t i, Clock::TimePoint until);
  // Books tokens learnt after the reply against endpoint `i`'s token limit.
  void Charge(size_t i, int64_t tokens);
  void AddTokens(size_t i, int64_t prompt, int64_t completion);

  // Whether some endpoint not in `avoid` is in rotation now (a failed call can go there at once).
  bool AnyOtherInRotation(const std::vector<bool>& avoid);
  bool Benched(size_t i);

  std::vector<EndpointUsage> Usage() const;

 private:
  struct Endpoint {
    Endpoint(EndpointOptions o, Clock& clock)
        : options(std::move(o)),
          rate(clock, options.requests_per_minute, options.tokens_per_minute) {}
    const EndpointOptions options;
    RateLimiter rate;
    // guarded by mu_:
    int in_flight = 0;
    int failures_in_a_row = 0;
    int bench_level = 0;              // benchings since it last answered; 0: healthy
    Clock::TimePoint available_at{};  // benched or paused until
    EndpointUsage usage;
  };

  void BenchLocked(Endpoint& e, const Status& error);  // requires mu_

  const std::string role_;
  Clock& clock_;
  const BenchPolicy policy_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  mutable std::mutex mu_;
  std::condition_variable freed_;  // a slot was released
  size_t turn_ = 0;                // guarded by mu_
};

}  // namespace grag::llm_internal
