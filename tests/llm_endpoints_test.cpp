// Several endpoints behind one model: which endpoint takes a request (the pure choice), benching
// and probing in virtual time (FakeClock), and the client against real loopback servers with
// different latencies plus failing ones. No assertion is on wall time: a loaded machine changes
// how long things take, not how many requests go where.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "grag/indexer.h"
#include "grag/llm.h"
#include "grag/parallel.h"
#include "llm/endpoint_pool.h"
#include "llm/model_common.h"
#include "support/fake_openai_server.h"

namespace grag {
namespace {

using namespace std::chrono_literals;
using llm_internal::BenchPolicy;
using llm_internal::EndpointPool;
using llm_internal::EndpointView;
using llm_internal::Outcome;
using llm_internal::PickEndpoint;
using testing::Answering;
using testing::ChatCompletion;
using testing::FakeClock;
using testing::FakeOpenAIServer;
using testing::FakeReply;
using testing::FakeRequest;
using testing::OpenAIError;

// ---- the choice ----

EndpointView View(int in_flight, int max_concurrency, double weight = 1.0) {
  EndpointView v;
  v.in_flight = in_flight;
  v.max_concurrency = max_concurrency;
  v.weight = weight;
  return v;
}

const Clock::TimePoint kNow = Clock::TimePoint(std::chrono::hours(1000));

TEST(EndpointPickTest, TheLeastLoadedRelativeToItsConcurrencyIsChosen) {
  EXPECT_EQ(PickEndpoint({View(3, 4), View(1, 4), View(2, 4)}, {}, kNow, 0).index, 1u);
  // 2 of 8 is less loaded than 1 of 2.
  EXPECT_EQ(PickEndpoint({View(1, 2), View(2, 8)}, {}, kNow, 0).index, 1u);
}

TEST(EndpointPickTest, TiesGoToTheHeavierThenTakeTurns) {
  EXPECT_EQ(PickEndpoint({View(0, 4, 1), View(0, 4, 2), View(0, 4, 2)}, {}, kNow, 0).index, 1u);
  EXPECT_EQ(PickEndpoint({View(0, 4, 1), View(0, 4, 2), View(0, 4, 2)}, {}, kNow, 2).index, 2u);
  const std::vector<EndpointView> equal = {View(0, 4), View(0, 4), View(0, 4)};
  EXPECT_EQ(PickEndpoint(equal, {}, kNow, 0).index, 0u);
  EXPECT_EQ(PickEndpoint(equal, {}, kNow, 1).index, 1u);
  EXPECT_EQ(PickEndpoint(equal, {}, kNow, 2).index, 2u);
  EXPECT_EQ(PickEndpoint(equal, {}, kNow, 3).index, 0u);
}

TEST(EndpointPickTest, FullEndpointsAreSkippedAndAllFullMeansWaitForASlot) {
  EXPECT_EQ(PickEndpoint({View(4, 4), View(3, 4)}, {}, kNow, 0).index, 1u);
  auto pick = PickEndpoint({View(4, 4), View(2, 2)}, {}, kNow, 0);
  EXPECT_FALSE(pick.index);
  EXPECT_FALSE(pick.wake_at);
}

TEST(EndpointPickTest, BenchedEndpointsAreSkippedAndAllBenchedWakesAtTheFirstReturn) {
  std::vector<EndpointView> v = {View(0, 4), View(3, 4), View(0, 4)};
  v[0].benched = true;
  v[0].benched_until = kNow + 30s;
  EXPECT_EQ(PickEndpoint(v, {}, kNow, 0).index, 2u);
  v[1].benched = v[2].benched = true;
  v[1].benched_until = kNow + 10s;
  v[2].benched_until = kNow + 20s;
  auto pick = PickEndpoint(v, {}, kNow, 0);
  EXPECT_FALSE(pick.index);
  ASSERT_TRUE(pick.wake_at);
  EXPECT_EQ(*pick.wake_at, kNow + 10s);
}

TEST(EndpointPickTest, AnEndpointTheCallFailedOnIsChosenOnlyWhenNoOtherIsInRotation) {
  // The other one is full: wait for it rather than go back to the one that failed.
  auto pick = PickEndpoint({View(0, 4), View(4, 4)}, {true, false}, kNow, 0);
  EXPECT_FALSE(pick.index);
  EXPECT_FALSE(pick.wake_at);
  EXPECT_EQ(PickEndpoint({View(0, 4), View(1, 4)}, {true, false}, kNow, 0).index, 1u);
  // Every endpoint failed this call: any of them.
  EXPECT_EQ(PickEndpoint({View(2, 4), View(1, 4)}, {true, true}, kNow, 0).index, 1u);
  // The others are benched: back to the one that failed.
  std::vector<EndpointView> v = {View(0, 4), View(0, 4)};
  v[1].benched = true;
  v[1].benched_until = kNow + 5s;
  EXPECT_EQ(PickEndpoint(v, {true, false}, kNow, 0).index, 0u);
}

TEST(EndpointPickTest, AProbedEndpointTakesOneRequestAtATime) {
  std::vector<EndpointView> v = {View(0, 4), View(3, 4)};
  v[0].probing = true;
  EXPECT_EQ(PickEndpoint(v, {}, kNow, 0).index, 0u);
  v[0].in_flight = 1;
  EXPECT_EQ(PickEndpoint(v, {}, kNow, 0).index, 1u);
}

TEST(EndpointPickTest, AnEndpointItsRateLimitHoldsBackGoesAfterOneThatCanSendNow) {
  std::vector<EndpointView> v = {View(0, 4), View(3, 4)};
  v[0].ready_at = kNow + 2s;
  v[1].ready_at = kNow;
  EXPECT_EQ(PickEndpoint(v, {}, kNow, 0).index, 1u);
  v[1].in_flight = 4;  // full: the rate-limited one, which waits its turn
  EXPECT_EQ(PickEndpoint(v, {}, kNow, 0).index, 0u);
}

// ---- benching, in virtual time ----

std::vector<EndpointOptions> TwoEndpoints() {
  std::vector<EndpointOptions> e(2);
  e[0].name = "a";
  e[0].base_url = "http://a/v1";
  e[1].name = "b";
  e[1].base_url = "http://b/v1";
  for (auto& x : e) x.max_concurrency = 2;
  return e;
}

BenchPolicy Bench() {
  BenchPolicy p;
  p.enabled = true;
  p.after_failures = 3;
  p.base = 5s;
  p.cap = 20s;
  return p;
}

const Status kBroken = Status::Unavailable("HTTP 500");

TEST(EndpointPoolTest, RepeatedFailuresBenchThenAProbeWithDoublingBenches) {
  FakeClock clock;
  EndpointPool pool(TwoEndpoints(), "llm", clock, Bench());
  const std::vector<bool> only_a = {false, true};
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(pool.Benched(0)) << i;
    ASSERT_EQ(pool.Acquire(10, only_a), 0u);
    pool.Release(0, Outcome::kFailed, 1ms, kBroken);
  }
  EXPECT_TRUE(pool.Benched(0));
  EXPECT_EQ(pool.Usage()[0].benched, 1);
  EXPECT_EQ(pool.Usage()[0].errors, 3);
  // Benched: every request goes to b, even one that would rather avoid b.
  EXPECT_EQ(pool.Acquire(10, only_a), 1u);
  pool.Release(1, Outcome::kOk, 1ms, Status::Ok());
  EXPECT_FALSE(pool.AnyOtherInRotation({false, true})) << "a is benched: only b is left";
  EXPECT_TRUE(pool.AnyOtherInRotation({true, false}));

  clock.Advance(5s);  // the bench is over: a is probed, and its probe fails
  EXPECT_FALSE(pool.Benched(0));
  ASSERT_EQ(pool.Acquire(10, only_a), 0u);
  pool.Release(0, Outcome::kFailed, 1ms, kBroken);
  EXPECT_TRUE(pool.Benched(0)) << "a failed probe benches again at once";
  clock.Advance(5s);
  EXPECT_TRUE(pool.Benched(0)) << "the second bench is twice as long";
  clock.Advance(5s);
  EXPECT_FALSE(pool.Benched(0));
  ASSERT_EQ(pool.Acquire(10, only_a), 0u);
  pool.Release(0, Outcome::kOk, 1ms, Status::Ok());  // the probe succeeds: healthy again
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(pool.Acquire(10, only_a), 0u);
    pool.Release(0, Outcome::kFailed, 1ms, kBroken);
  }
  EXPECT_FALSE(pool.Benched(0)) << "back to three failures in a row before a bench";
  EXPECT_EQ(pool.Usage()[0].benched, 2);
}

TEST(EndpointPoolTest, BenchesAreCapped) {
  FakeClock clock;
  EndpointPool pool(TwoEndpoints(), "llm", clock, Bench());
  for (int round = 0; round < 6; ++round) {
    ASSERT_EQ(pool.Acquire(10, {false, true}), 0u);
    pool.Release(0, Outcome::kDown, 1ms, kBroken);
    ASSERT_TRUE(pool.Benched(0));
    clock.Advance(20s);  // the cap: never longer
    ASSERT_FALSE(pool.Benched(0)) << "round " << round;
  }
}

TEST(EndpointPoolTest, AnUnusableEndpointIsBenchedAtOnce) {
  FakeClock clock;
  EndpointPool pool(TwoEndpoints(), "llm", clock, Bench());
  ASSERT_EQ(pool.Acquire(10, {}), 0u);
  pool.Release(0, Outcome::kDown, 1ms, Status::Unavailable("cannot connect"));
  EXPECT_TRUE(pool.Benched(0));
  // The request's own fault (a 400) says nothing about the endpoint.
  ASSERT_EQ(pool.Acquire(10, {}), 1u);
  pool.Release(1, Outcome::kCallerError, 1ms, Status::InvalidArgument("HTTP 400"));
  EXPECT_FALSE(pool.Benched(1));
  EXPECT_EQ(pool.Usage()[1].errors, 1);
}

TEST(EndpointPoolTest, WithNowhereElseToGoNothingIsBenched) {
  FakeClock clock;
  std::vector<EndpointOptions> one = TwoEndpoints();
  one.pop_back();
  EndpointPool pool(one, "llm", clock, BenchPolicy{});  // what a single base_url gets
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(pool.Acquire(10, {true}), 0u);
    pool.Release(0, i % 2 ? Outcome::kDown : Outcome::kFailed, 1ms, kBroken);
  }
  EXPECT_FALSE(pool.Benched(0));
  EXPECT_EQ(pool.Usage()[0].benched, 0);
  EXPECT_EQ(clock.total_slept(), 0ms);
}

TEST(EndpointPoolTest, WhenEveryEndpointIsBenchedARequestWaitsForTheFirstBack) {
  FakeClock clock;
  EndpointPool pool(TwoEndpoints(), "llm", clock, Bench());
  for (size_t i : {0u, 1u}) {
    ASSERT_EQ(pool.Acquire(10, {i != 0, i != 1}), i);
    pool.Release(i, Outcome::kDown, 1ms, kBroken);
  }
  ASSERT_TRUE(pool.Benched(0) && pool.Benched(1));
  const size_t chosen = pool.Acquire(10, {});
  EXPECT_EQ(clock.total_slept(), 5s);
  EXPECT_EQ(chosen, 0u);
  pool.Release(chosen, Outcome::kOk, 1ms, Status::Ok());
}

TEST(EndpointPoolTest, EachEndpointKeepsItsOwnRateLimit) {
  FakeClock clock;
  std::vector<EndpointOptions> e = TwoEndpoints();
  e[0].requests_per_minute = 60;  // one a second
  e[1].requests_per_minute = 60;
  EndpointPool pool(e, "llm", clock, Bench());
  // Four requests: two per endpoint, so each waits one second once, not three in a row.
  for (int i = 0; i < 4; ++i) {
    const size_t at = pool.Acquire(10, {});
    pool.Release(at, Outcome::kOk, 1ms, Status::Ok());
  }
  EXPECT_EQ(pool.Usage()[0].requests, 2);
  EXPECT_EQ(pool.Usage()[1].requests, 2);
  EXPECT_EQ(clock.elapsed(), 1s);
}

TEST(EndpointUsageTest, MedianAndMeanLatencyAndARunsShare) {
  EndpointUsage u;
  for (int ms : {10, 20, 30, 40, 1000}) u.RecordLatency(std::chrono::milliseconds(ms));
  EXPECT_EQ(u.answered(), 5);
  EXPECT_DOUBLE_EQ(u.LatencyMeanMs(), 220.0);
  EXPECT_NEAR(u.LatencyP50Ms(), 30.0, 3.0);  // buckets are 9% wide
  EndpointUsage before = u;
  for (int i = 0; i < 9; ++i) u.RecordLatency(500ms);
  u.requests = 14;
  EndpointUsage run = u;
  run -= before;
  EXPECT_EQ(run.answered(), 9);
  EXPECT_NEAR(run.LatencyP50Ms(), 500.0, 45.0);
  EXPECT_DOUBLE_EQ(run.LatencyMeanMs(), 500.0);
}

TEST(EndpointUsageTest, RunCountersRoundTripNamesWithColons) {
  EndpointUsage a;
  a.role = "llm";
  a.name = "gpu-a:11434";
  a.requests = 12;
  a.errors = 2;
  a.benched = 1;
  a.prompt_tokens = 1000;
  a.completion_tokens = 200;
  a.RecordLatency(100ms);
  a.RecordLatency(300ms);
  EndpointUsage b;
  b.role = "embeddings";
  b.name = "gpu-a:11434";
  b.requests = 3;
  std::map<std::string, int64_t> counters = EndpointRunCounters({a, b});
  EXPECT_EQ(counters["endpoint:llm:gpu-a:11434:requests"], 12);
  counters["llm_calls"] = 7;  // other counters are ignored
  std::vector<EndpointUsage> back = EndpointsFromRunCounters(counters);
  ASSERT_EQ(back.size(), 2u);
  const EndpointUsage& llm = back[0].role == "llm" ? back[0] : back[1];
  EXPECT_EQ(llm.name, "gpu-a:11434");
  EXPECT_EQ(llm.requests, 12);
  EXPECT_EQ(llm.errors, 2);
  EXPECT_EQ(llm.benched, 1);
  EXPECT_EQ(llm.prompt_tokens, 1000);
  EXPECT_EQ(llm.completion_tokens, 200);
  EXPECT_EQ(llm.answered(), 2);
  EXPECT_DOUBLE_EQ(llm.LatencyMeanMs(), 200.0);
}

// ---- the client against loopback servers ----

OpenAIOptions Options() {
  OpenAIOptions o;
  o.model = "logical-model";
  o.timeout = 60s;  // generous: the suite runs under sanitizers on a shared 2-core machine
  o.backoff_base = 10ms;
  o.backoff_cap = 100ms;
  o.jitter_seed = 42;
  o.bench_base = 1h;  // a benched endpoint stays out for the whole test
  o.bench_cap = 1h;
  return o;
}

EndpointOptions Endpoint(std::string name, std::string base_url, int concurrency) {
  EndpointOptions e;
  e.name = std::move(name);
  e.base_url = std::move(base_url);
  e.max_concurrency = concurrency;
  return e;
}

std::unique_ptr<OpenAIClient> MakeClient(const OpenAIOptions& o) {
  auto client = OpenAIClient::Create(o);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(client).value() : nullptr;
}

ChatRequest Ask(std::string prompt) {
  ChatRequest r;
  r.messages.push_back({"user", std::move(prompt)});
  return r;
}

const EndpointUsage* Find(const LlmUsage& u, const std::string& name) {
  for (const auto& e : u.endpoints) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

// Answers after `delay`, counting the requests in flight over every server that shares `load`.
struct SharedLoad {
  std::atomic<int> now{0};
  std::atomic<int> peak{0};
};

testing::FakeHandler Slow(std::chrono::milliseconds delay, SharedLoad& load) {
  return [delay, &load](const FakeRequest& r) {
    const int n = ++load.now;
    int peak = load.peak.load();
    while (n > peak && !load.peak.compare_exchange_weak(peak, n)) {
    }
    std::this_thread::sleep_for(delay);
    --load.now;
    return ChatCompletion("answer to " + r.LastUserMessage());
  };
}

TEST(LlmEndpointsTest, ThreeServersAndTwoBrokenOnesAnswerEveryCall) {
  SharedLoad load;
  FakeOpenAIServer fast(Slow(20ms, load));
  FakeOpenAIServer medium(Slow(40ms, load));
  FakeOpenAIServer slow(Slow(80ms, load));
  FakeOpenAIServer failing([](const FakeRequest&) {
    return OpenAIError(500, "the GPU fell off the bus", "server_error");
  });
  InMemoryCache cache;
  OpenAIOptions o = Options();
  o.cache = &cache;
  o.endpoints = {Endpoint("fast", fast.base_url(), 3), Endpoint("medium", medium.base_url(), 3),
                 Endpoint("slow", slow.base_url(), 3), Endpoint("failing", failing.base_url(), 3),
                 Endpoint("refused", "http://127.0.0.1:9/v1", 3)};
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);

  constexpr size_t kCalls = 150;
  std::atomic<int> ok{0};
  std::mutex mu;
  std::vector<std::string> errors;  // guarded by mu
  // As many callers as the endpoints take at once (the pipeline's LLM workers).
  ParallelFor(kCalls, 15, [&](size_t i) {
    auto r = client->Chat(Ask("question " + std::to_string(i)));
    if (r.ok() && r->content == "answer to question " + std::to_string(i)) {
      ++ok;
    } else {
      std::lock_guard lock(mu);
      errors.push_back(r.ok() ? r->content : r.status().ToString());
    }
  });

  // Nothing lost: every call answered, each once, by a working server.
  EXPECT_EQ(ok.load(), static_cast<int>(kCalls)) << (errors.empty() ? "" : errors.front());
  EXPECT_EQ(cache.size(), kCalls);
  EXPECT_EQ(fast.request_count() + medium.request_count() + slow.request_count(),
            static_cast<int>(kCalls));
  const LlmUsage u = client->Usage();
  EXPECT_EQ(u.calls, static_cast<int64_t>(kCalls));
  EXPECT_EQ(u.failures, 0);
  ASSERT_EQ(u.endpoints.size(), 5u);

  // The broken ones were benched (for the rest of the test) after a few failures: the refused
  // one at its first, the failing one after three in a row (plus what was in flight then).
  const EndpointUsage* failing_usage = Find(u, "failing");
  const EndpointUsage* refused_usage = Find(u, "refused");
  ASSERT_TRUE(failing_usage && refused_usage);
  EXPECT_EQ(failing_usage->benched, 1);
  EXPECT_EQ(refused_usage->benched, 1);
  EXPECT_LE(failing.request_count(), o.bench_after_failures + 3);
  EXPECT_EQ(failing_usage->errors, failing.request_count());
  EXPECT_LE(refused_usage->requests, 3);
  EXPECT_EQ(failing_usage->prompt_tokens, 0);

  // Throughput scales with the sum of the working endpoints' concurrency: each was used up to
  // its limit, never beyond, and all at the same time.
  for (const FakeOpenAIServer* s : {&fast, &medium, &slow}) {
    EXPECT_LE(s->max_in_flight(), 3);
    EXPECT_EQ(s->max_in_flight(), 3) << "an endpoint never reached its concurrency";
  }
  EXPECT_EQ(load.peak.load(), 9) << "the working endpoints never all served at once";

  // Faster endpoints free their slots sooner, so they answer more.
  const EndpointUsage* f = Find(u, "fast");
  const EndpointUsage* s = Find(u, "slow");
  ASSERT_TRUE(f && s);
  EXPECT_GT(f->requests, s->requests);
  EXPECT_EQ(f->requests, fast.request_count());
  EXPECT_EQ(f->errors, 0);
  EXPECT_GT(f->prompt_tokens, 0);
  EXPECT_EQ(f->answered(), f->requests);
  EXPECT_GT(s->LatencyP50Ms(), f->LatencyP50Ms());
  EXPECT_EQ(u.retries, failing_usage->errors + refused_usage->errors)
      << "each failed request was retried elsewhere once";
}

TEST(LlmEndpointsTest, ARefusedEndpointIsBenchedAndTheCallAnsweredElsewhere) {
  FakeOpenAIServer good;
  OpenAIOptions o = Options();
  o.endpoints = {Endpoint("refused", "http://127.0.0.1:9/v1", 4),
                 Endpoint("good", good.base_url(), 4)};
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("hi"));  // the first goes to the first endpoint: refused
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->endpoint, "good");
  EXPECT_EQ(r->retries, 1);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client->Chat(Ask("more " + std::to_string(i))).ok());
  EXPECT_EQ(good.request_count(), 6);
  const LlmUsage u = client->Usage();
  EXPECT_EQ(Find(u, "refused")->requests, 1);
  EXPECT_EQ(Find(u, "refused")->benched, 1);
}

TEST(LlmEndpointsTest, EveryEndpointRefusingStillFailsFastAndClearly) {
  OpenAIOptions o = Options();
  o.endpoints = {Endpoint("a", "http://127.0.0.1:9/v1", 2),
                 Endpoint("b", "http://127.0.0.1:9/v2", 2)};
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("hi"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(r.status().message().find("does not answer"), std::string::npos)
      << r.status().message();
}

TEST(LlmEndpointsTest, AWrongKeyOnOneEndpointSendsTheCallToAnother) {
  FakeOpenAIServer locked([](const FakeRequest&) {
    return OpenAIError(401, "Incorrect API key provided", "invalid_request_error",
                       "invalid_api_key");
  });
  FakeOpenAIServer open;
  OpenAIOptions o = Options();
  o.endpoints = {Endpoint("locked", locked.base_url(), 2), Endpoint("open", open.base_url(), 2)};
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 4; ++i) {
    auto r = client->Chat(Ask("q" + std::to_string(i)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->endpoint, "open");
  }
  EXPECT_EQ(locked.request_count(), 1);
  EXPECT_EQ(Find(client->Usage(), "locked")->benched, 1);
}

TEST(LlmEndpointsTest, ABadRequestIsNotRetriedOnEveryEndpoint) {
  FakeOpenAIServer a([](const FakeRequest&) { return OpenAIError(400, "context too long"); });
  FakeOpenAIServer b([](const FakeRequest&) { return OpenAIError(400, "context too long"); });
  OpenAIOptions o = Options();
  o.endpoints = {Endpoint("a", a.base_url(), 2), Endpoint("b", b.base_url(), 2)};
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("a very long question"));
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(a.request_count() + b.request_count(), 1);
  EXPECT_EQ(client->Usage().endpoints[0].benched + client->Usage().endpoints[1].benched, 0);
}

TEST(LlmEndpointsTest, EachEndpointGetsItsOwnKeyAndModelName) {
  FakeOpenAIServer a;
  FakeOpenAIServer b;
  OpenAIOptions o = Options();
  o.api_key = "sk-role";  // not sent to a listed endpoint
  o.endpoints = {Endpoint("a", a.base_url(), 1), Endpoint("b", b.base_url(), 1)};
  o.endpoints[0].api_key = "sk-a";
  o.endpoints[0].model = "llama3.1:8b";
  o.endpoints[1].model = "meta-llama/Llama-3.1-8B-Instruct";
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Chat(Ask("one")).ok());
  ASSERT_TRUE(client->Chat(Ask("two")).ok());
  ASSERT_EQ(a.request_count(), 1);
  ASSERT_EQ(b.request_count(), 1);
  EXPECT_EQ(a.request(0).Header("authorization"), "Bearer sk-a");
  EXPECT_EQ(a.request(0).Model(), "llama3.1:8b");
  EXPECT_EQ(b.request(0).Header("authorization"), "");
  EXPECT_EQ(b.request(0).Model(), "meta-llama/Llama-3.1-8B-Instruct");
  EXPECT_EQ(client->model(), "logical-model");
}

TEST(LlmEndpointsTest, TheReplyCacheKeyDoesNotDependOnWhichEndpointAnswered) {
  FakeOpenAIServer a(Answering([](const FakeRequest&) { return std::string("from a"); }));
  FakeOpenAIServer b(Answering([](const FakeRequest&) { return std::string("from b"); }));
  InMemoryCache cache;
  OpenAIOptions o = Options();
  o.cache = &cache;
  o.endpoints = {Endpoint("a", a.base_url(), 1)};
  o.endpoints[0].model = "name-on-a";
  auto first = MakeClient(o);
  ASSERT_NE(first, nullptr);
  auto r1 = first->Chat(Ask("same question"));
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->content, "from a");
  // Another configuration of the same logical model, on other servers: the cached reply serves.
  o.endpoints = {Endpoint("b", b.base_url(), 1), Endpoint("b2", b.base_url(), 1)};
  o.endpoints[0].model = "name-on-b";
  auto second = MakeClient(o);
  ASSERT_NE(second, nullptr);
  auto r2 = second->Chat(Ask("same question"));
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->cache_hit);
  EXPECT_EQ(r2->content, "from a");
  EXPECT_EQ(b.request_count(), 0);
  // The key is the one a single base_url with the logical model computes.
  ASSERT_EQ(cache.size(), 1u);
  const auto entries = cache.entries();
  EXPECT_EQ(entries.begin()->first,
            llm_internal::ChatCacheKey("logical-model", Ask("same question"), nullptr));
  EXPECT_EQ(entries.begin()->second.model, "logical-model");
}

TEST(LlmEndpointsTest, EmbeddingBatchesSpreadOverEndpointsAndComeBackInOrder) {
  auto slow_embed = [](const FakeRequest& r) {
    FakeReply reply = Answering([](const FakeRequest&) { return std::string(); }, 8)(r);
    reply.delay = 20ms;
    return reply;
  };
  FakeOpenAIServer a(slow_embed);
  FakeOpenAIServer b(slow_embed);
  OpenAIOptions o = Options();
  o.embedding_batch_size = 2;
  o.usage_role = "embeddings";
  o.endpoints = {Endpoint("a", a.base_url(), 2), Endpoint("b", b.base_url(), 2)};
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  std::vector<std::string> inputs;
  for (int i = 0; i < 16; ++i) inputs.push_back("text number " + std::to_string(i));
  auto r = client->Embed(inputs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->vectors.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    EXPECT_EQ(r->vectors[i], testing::FakeEmbedding(inputs[i], 8)) << i;
  }
  EXPECT_EQ(a.request_count() + b.request_count(), 8);
  EXPECT_GT(a.request_count(), 0);
  EXPECT_GT(b.request_count(), 0);
  const LlmUsage u = client->Usage();
  ASSERT_EQ(u.endpoints.size(), 2u);
  EXPECT_EQ(u.endpoints[0].role, "embeddings");
  EXPECT_EQ(u.endpoints[0].prompt_tokens + u.endpoints[1].prompt_tokens, r->prompt_tokens);
}

TEST(LlmEndpointsTest, ASingleBaseUrlReportsNoEndpoints) {
  FakeOpenAIServer server;
  OpenAIOptions o = Options();
  o.base_url = server.base_url();
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Chat(Ask("hi")).ok());
  EXPECT_TRUE(client->Usage().endpoints.empty());
}

TEST(LlmEndpointsTest, BadEndpointOptionsAreRefusedByName) {
  OpenAIOptions o = Options();
  o.endpoints = {Endpoint("a", "http://a/v1", 1), Endpoint("b", "localhost:1234", 1)};
  auto r = OpenAIClient::Create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("endpoints[1]: base_url"), std::string::npos);
  o.endpoints[1].base_url = "http://b/v1";
  o.endpoints[1].weight = 0;
  r = OpenAIClient::Create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("endpoints[1]: weight"), std::string::npos);
  o.endpoints[1].weight = 1;
  o.endpoints[1].name = "a";
  r = OpenAIClient::Create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("name 'a' is taken"), std::string::npos);
  // Unnamed endpoints are named after their host, made unique.
  o.endpoints = {Endpoint("", "http://h:1/v1", 1), Endpoint("", "http://h:1/v1", 1)};
  auto ok = OpenAIClient::Create(o);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  // The names show in Usage once a request has been made; they are set at creation.
  const LlmUsage u = (*ok)->Usage();
  ASSERT_EQ(u.endpoints.size(), 2u);
  EXPECT_EQ(u.endpoints[0].name, "h:1");
  EXPECT_EQ(u.endpoints[1].name, "h:1#2");
}

}  // namespace
}  // namespace grag
