#include "endpoint_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "grag/log.h"

namespace grag {

// ---- EndpointUsage ----

namespace {

constexpr size_t kLatencyBuckets = 8 * 24 + 1;  // up to 2^24 ms (4.6 hours)

// Bucket 0 holds [0, 1) ms; bucket b >= 1 holds [2^((b-1)/8), 2^(b/8)) ms: 9% wide.
size_t LatencyBucket(int64_t ms) {
  if (ms < 1) return 0;
  const auto b = static_cast<size_t>(1 + std::floor(8 * std::log2(static_cast<double>(ms))));
  return std::min(b, kLatencyBuckets - 1);
}

double BucketLow(size_t b) { return b == 0 ? 0.0 : std::exp2((static_cast<double>(b) - 1) / 8); }
double BucketHigh(size_t b) { return b == 0 ? 1.0 : std::exp2(static_cast<double>(b) / 8); }

void AddHistogram(std::vector<int64_t>& into, const std::vector<int64_t>& from, int64_t sign) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) into[i] += sign * from[i];
}

}  // namespace

int64_t EndpointUsage::answered() const {
  int64_t n = 0;
  for (int64_t c : latency_histogram) n += c;
  return n;
}

double EndpointUsage::LatencyMeanMs() const {
  const int64_t n = answered();
  return n == 0 ? 0.0 : static_cast<double>(latency_ms_sum) / static_cast<double>(n);
}

double EndpointUsage::LatencyP50Ms() const {
  const int64_t n = answered();
  if (n == 0) return 0.0;
  const double target = static_cast<double>(n) / 2;
  double below = 0;
  for (size_t b = 0; b < latency_histogram.size(); ++b) {
    const auto here = static_cast<double>(latency_histogram[b]);
    if (here > 0 && below + here >= target) {
      const double f = (target - below) / here;
      return BucketLow(b) + f * (BucketHigh(b) - BucketLow(b));
    }
    below += here;
  }
  return 0.0;
}

void EndpointUsage::RecordLatency(std::chrono::milliseconds latency) {
  if (latency_histogram.size() < kLatencyBuckets) latency_histogram.resize(kLatencyBuckets, 0);
  ++latency_histogram[LatencyBucket(latency.count())];
  latency_ms_sum += latency.count();
}

EndpointUsage& EndpointUsage::operator+=(const EndpointUsage& o) {
  requests += o.requests;
  errors += o.errors;
  benched += o.benched;
  prompt_tokens += o.prompt_tokens;
  completion_tokens += o.completion_tokens;
  latency_ms_sum += o.latency_ms_sum;
  AddHistogram(latency_histogram, o.latency_histogram, 1);
  return *this;
}

EndpointUsage& EndpointUsage::operator-=(const EndpointUsage& o) {
  requests -= o.requests;
  errors -= o.errors;
  benched -= o.benched;
  prompt_tokens -= o.prompt_tokens;
  completion_tokens -= o.completion_tokens;
  latency_ms_sum -= o.latency_ms_sum;
  AddHistogram(latency_histogram, o.latency_histogram, -1);
  return *this;
}

namespace llm_internal {

// ---- choosing ----

EndpointPick PickEndpoint(const std::vector<EndpointView>& endpoints,
                          const std::vector<bool>& avoid, Clock::TimePoint now, size_t turn) {
  EndpointPick pick;
  const size_t n = endpoints.size();
  if (n == 0) return pick;
  auto avoided = [&](size_t i) { return i < avoid.size() && avoid[i]; };
  std::vector<size_t> tier;
  for (size_t i = 0; i < n; ++i) {
    if (!endpoints[i].benched && !avoided(i)) tier.push_back(i);
  }
  if (tier.empty()) {
    for (size_t i = 0; i < n; ++i) {
      if (!endpoints[i].benched) tier.push_back(i);
    }
  }
  if (tier.empty()) {  // every endpoint is benched: wait for the first to come back
    Clock::TimePoint first = endpoints[0].benched_until;
    for (const EndpointView& e : endpoints) first = std::min(first, e.benched_until);
    pick.wake_at = first;
    return pick;
  }
  // Smaller is better: start time, load, -weight, distance from the turn.
  using Key = std::tuple<Clock::TimePoint, double, double, size_t>;
  std::optional<Key> best;
  for (size_t i : tier) {
    const EndpointView& e = endpoints[i];
    const int cap = e.probing ? 1 : std::max(e.max_concurrency, 1);
    if (e.in_flight >= cap) continue;
    const Key key{std::max(e.ready_at, now),
                  static_cast<double>(e.in_flight) / std::max(e.max_concurrency, 1), -e.weight,
                  (i + n - turn % n) % n};
    if (!best || key < *best) {
      best = key;
      pick.index = i;
    }
  }
  return pick;  // no index, no wake_at: every candidate is full; a request in flight will end
}

// ---- the pool ----

EndpointPool::EndpointPool(std::vector<EndpointOptions> endpoints, std::string role, Clock& clock,
                           BenchPolicy policy)
    : role_(std::move(role)), clock_(clock), policy_(policy) {
  for (EndpointOptions& o : endpoints) {
    auto e = std::make_unique<Endpoint>(std::move(o), clock);
    e->usage.role = role_;
    e->usage.name = e->options.name;
    e->usage.base_url = e->options.base_url;
    e->usage.model = e->options.model;
    e->available_at = clock.Now();
    endpoints_.push_back(std::move(e));
  }
}

int EndpointPool::total_concurrency() const {
  int total = 0;
  for (const auto& e : endpoints_) total += e->options.max_concurrency;
  return total;
}

size_t EndpointPool::Acquire(int64_t tokens, const std::vector<bool>& avoid) {
  size_t chosen = 0;
  {
    std::unique_lock lock(mu_);
    std::vector<EndpointView> views(endpoints_.size());
    for (;;) {
      const Clock::TimePoint now = clock_.Now();
      for (size_t i = 0; i < endpoints_.size(); ++i) {
        Endpoint& e = *endpoints_[i];
        EndpointView& v = views[i];
        v.in_flight = e.in_flight;
        v.max_concurrency = e.options.max_concurrency;
        v.weight = e.options.weight;
        v.benched = e.available_at > now;
        v.benched_until = e.available_at;
        v.probing = !v.benched && e.bench_level > 0;
        v.ready_at = e.rate.NextStart();
      }
      const EndpointPick pick = PickEndpoint(views, avoid, now, turn_);
      if (pick.index) {
        chosen = *pick.index;
        Endpoint& e = *endpoints_[chosen];
        ++e.in_flight;
        ++e.usage.requests;
        turn_ = chosen + 1;
        break;
      }
      if (pick.wake_at) {
        lock.unlock();
        clock_.SleepUntil(*pick.wake_at);
        lock.lock();
        continue;
      }
      freed_.wait(lock);
    }
  }
  endpoints_[chosen]->rate.Acquire(tokens);  // holds the slot while it waits, as one client did
  return chosen;
}

void EndpointPool::BenchLocked(Endpoint& e, const Status& error) {
  ++e.bench_level;
  std::chrono::milliseconds wait = policy_.cap;
  if (e.bench_level - 1 < 30) {
    wait = std::min(policy_.cap, policy_.base * (int64_t{1} << (e.bench_level - 1)));
  }
  e.available_at = clock_.Now() + wait;
  e.failures_in_a_row = 0;
  ++e.usage.benched;
  Log(LogLevel::kWarn, "llm",
      fmt::format("{} endpoint {} benched for {:.1f} s (other endpoints take its requests): {}",
                  role_, e.options.name, wait.count() / 1000.0, error.ToString()));
}

void EndpointPool::Release(size_t i, Outcome outcome, std::chrono::milliseconds latency,
                           const Status& error) {
  {
    std::lock_guard lock(mu_);
    Endpoint& e = *endpoints_[i];
    --e.in_flight;
    // A request that was in flight when its endpoint was benched does not bench it again.
    const bool in_rotation = e.available_at <= clock_.Now();
    switch (outcome) {
      case Outcome::kOk:
        e.failures_in_a_row = 0;
        if (e.bench_level > 0) {
          Log(LogLevel::kInfo, "llm",
              fmt::format("{} endpoint {} answers again", role_, e.options.name));
        }
        e.bench_level = 0;
        e.usage.RecordLatency(latency);
        break;
      case Outcome::kFailed:
        ++e.usage.errors;
        ++e.failures_in_a_row;
        if (policy_.enabled && in_rotation &&
            (e.bench_level > 0 || e.failures_in_a_row >= policy_.after_failures)) {
          BenchLocked(e, error);
        }
        break;
      case Outcome::kDown:
        ++e.usage.errors;
        ++e.failures_in_a_row;
        if (policy_.enabled && in_rotation) BenchLocked(e, error);
        break;
      case Outcome::kCallerError:
        ++e.usage.errors;
        break;
    }
  }
  freed_.notify_all();
}

void EndpointPool::PauseUntil(size_t i, Clock::TimePoint until) {
  if (!policy_.enabled) return;
  std::lock_guard lock(mu_);
  Endpoint& e = *endpoints_[i];
  e.available_at = std::max(e.available_at, until);
}

void EndpointPool::Charge(size_t i, int64_t tokens) { endpoints_[i]->rate.Charge(tokens); }

void EndpointPool::AddTokens(size_t i, int64_t prompt, int64_t completion) {
  std::lock_guard lock(mu_);
  endpoints_[i]->usage.prompt_tokens += prompt;
  endpoints_[i]->usage.completion_tokens += completion;
}

bool EndpointPool::AnyOtherInRotation(const std::vector<bool>& avoid) {
  std::lock_guard lock(mu_);
  const Clock::TimePoint now = clock_.Now();
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    if ((i >= avoid.size() || !avoid[i]) && endpoints_[i]->available_at <= now) return true;
  }
  return false;
}

bool EndpointPool::Benched(size_t i) {
  std::lock_guard lock(mu_);
  return endpoints_[i]->available_at > clock_.Now();
}

std::vector<EndpointUsage> EndpointPool::Usage() const {
  std::lock_guard lock(mu_);
  std::vector<EndpointUsage> out;
  out.reserve(endpoints_.size());
  for (const auto& e : endpoints_) out.push_back(e->usage);
  return out;
}

}  // namespace llm_internal
}  // namespace grag
