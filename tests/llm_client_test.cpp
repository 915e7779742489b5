// OpenAIClient against a real loopback HTTP server speaking the OpenAI protocol, through the real
// libcurl transport. Waits for retries and rate limits run in virtual time (FakeClock) unless a
// test is about real waiting; timing assertions are lower bounds only, so a loaded machine
// cannot make them fail.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "grag/llm.h"
#include "support/fake_openai_server.h"

namespace grag {
namespace {

using namespace std::chrono_literals;
using testing::Answering;
using testing::ChatCompletion;
using testing::ChatStream;
using testing::FakeClock;
using testing::FakeOpenAIServer;
using testing::FakeReply;
using testing::FakeRequest;
using testing::FakeUsage;
using ::testing::HasSubstr;
using testing::OpenAIError;
using testing::RawReply;

OpenAIOptions Options(const FakeOpenAIServer& server) {
  OpenAIOptions o;
  o.base_url = server.base_url();
  o.model = "test-model";
  o.timeout = 60s;  // generous: the suite runs under sanitizers on a shared 2-core machine
  o.backoff_base = 10ms;
  o.backoff_cap = 100ms;
  o.jitter_seed = 42;
  return o;
}

std::unique_ptr<OpenAIClient> MakeClient(const OpenAIOptions& o) {
  auto client = OpenAIClient::Create(o);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(client).value() : nullptr;
}

ChatRequest Ask(std::string prompt) {
  ChatRequest r;
  r.messages.push_back({"system", "You are terse."});
  r.messages.push_back({"user", std::move(prompt)});
  return r;
}

size_t CountWords(std::string_view s) {
  std::istringstream in{std::string(s)};
  size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

// ---- the basic exchange ----

TEST(LlmClientTest, ChatRoundTrip) {
  FakeOpenAIServer server(
      Answering([](const FakeRequest& r) { return "echo: " + r.LastUserMessage(); }));
  OpenAIOptions o = Options(server);
  o.api_key = "sk-test";
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);

  auto r = client->Chat(Ask("hello"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->content, "echo: hello");
  EXPECT_EQ(r->model, "fake-model");
  EXPECT_EQ(r->finish_reason, "stop");
  EXPECT_FALSE(r->cache_hit);
  EXPECT_FALSE(r->tokens_estimated);
  EXPECT_EQ(r->retries, 0);
  EXPECT_GT(r->prompt_tokens, 0);
  EXPECT_GT(r->completion_tokens, 0);

  FakeRequest seen = server.request(0);
  EXPECT_EQ(seen.path, "/v1/chat/completions");
  EXPECT_EQ(seen.Header("Authorization"), "Bearer sk-test");
  EXPECT_THAT(seen.Header("Content-Type"), HasSubstr("application/json"));
  EXPECT_EQ(seen.Model(), "test-model");
  EXPECT_EQ(seen.json["temperature"], 0.0);
  ASSERT_EQ(seen.json["messages"].size(), 2u);
  EXPECT_EQ(seen.json["messages"][0]["role"], "system");
  EXPECT_FALSE(seen.json.contains("stream"));
  EXPECT_FALSE(seen.json.contains("response_format"));
  EXPECT_FALSE(seen.json.contains("max_tokens"));

  LlmUsage u = client->Usage();
  EXPECT_EQ(u.calls, 1);
  EXPECT_EQ(u.http_requests, 1);
  EXPECT_EQ(u.failures, 0);
  EXPECT_EQ(u.prompt_tokens, r->prompt_tokens);
  EXPECT_EQ(u.completion_tokens, r->completion_tokens);
}

TEST(LlmClientTest, NoApiKeyMeansNoAuthHeader) {
  FakeOpenAIServer server;
  auto client = MakeClient(Options(server));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Chat(Ask("hi")).ok());
  EXPECT_EQ(server.request(0).Header("authorization"), "");
  EXPECT_EQ(server.request(0).Header("api-key"), "");
}

TEST(LlmClientTest, EmptyMessagesAreRefusedWithoutACall) {
  FakeOpenAIServer server;
  auto client = MakeClient(Options(server));
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(ChatRequest{});
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(server.request_count(), 0);
  EXPECT_EQ(client->Usage().failures, 1);
}

TEST(LlmClientTest, BadOptionsAreRefusedByName) {
  OpenAIOptions o;
  o.model = "m";
  o.base_url = "localhost:8080/v1";
  EXPECT_THAT(OpenAIClient::Create(o).status().message(), HasSubstr("base_url"));
  o.base_url = "http://localhost:8080/v1";
  o.extra_body_json = "{not json";
  EXPECT_THAT(OpenAIClient::Create(o).status().message(), HasSubstr("not valid JSON"));
  o.extra_body_json = "[1, 2]";
  EXPECT_THAT(OpenAIClient::Create(o).status().message(), HasSubstr("JSON object"));
  o.extra_body_json = "";
  o.max_concurrency = 0;
  EXPECT_THAT(OpenAIClient::Create(o).status().message(), HasSubstr("max_concurrency"));
  o.max_concurrency = 1;
  o.model = "";
  EXPECT_THAT(OpenAIClient::Create(o).status().message(), HasSubstr("model"));
  OpenAIOptions azure;
  azure.api_style = ApiStyle::kAzure;
  azure.model = "gpt-4o";
  EXPECT_EQ(OpenAIClient::Create(azure).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ParseApiStyle("azure").value(), ApiStyle::kAzure);
  EXPECT_EQ(ParseApiStyle("bedrock").status().code(), ErrorCode::kInvalidArgument);
}

// ---- concurrency ----

TEST(LlmClientTest, RequestsInFlightNeverExceedTheLimitAndReachIt) {
  FakeOpenAIServer server([](const FakeRequest& r) {
    FakeReply reply = ChatCompletion("answer to " + r.LastUserMessage());
    reply.delay = 100ms;  // each request is held, so waiting callers pile up behind the limit
    return reply;
  });
  InMemoryCache cache;
  OpenAIOptions o = Options(server);
  o.max_concurrency = 4;
  o.cache = &cache;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);

  constexpr int kCalls = 40;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      auto r = client->Chat(Ask("question " + std::to_string(i)));
      if (r.ok() && r->content == "answer to question " + std::to_string(i)) ++ok;
    });
  }
  for (auto& t : threads) t.join();

  EXPECT_EQ(ok.load(), kCalls);
  EXPECT_EQ(server.request_count(), kCalls);
  EXPECT_LE(server.max_in_flight(), 4);
  EXPECT_EQ(server.max_in_flight(), 4) << "the limit was never reached: calls were serialised";
  EXPECT_EQ(cache.size(), static_cast<size_t>(kCalls));
  EXPECT_EQ(client->Usage().calls, kCalls);
}

// ---- retries ----

TEST(LlmClientTest, RetryAfterSecondsIsWaitedOut) {
  FakeOpenAIServer server([](const FakeRequest& r) {
    if (r.index == 0) {
      FakeReply reply =
          OpenAIError(429, "Rate limit reached for requests", "requests", "rate_limit_exceeded");
      reply.headers.push_back({"Retry-After", "7"});
      return reply;
    }
    return ChatCompletion("ok");
  });
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(server);
  o.clock = clock;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);

  auto r = client->Chat(Ask("hi"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->retries, 1);
  EXPECT_EQ(server.request_count(), 2);
  ASSERT_EQ(clock->sleeps().size(), 1u);
  EXPECT_GE(clock->sleeps()[0], 7s);
  EXPECT_GE(r->latency, 7s);  // measured on the same clock
  EXPECT_EQ(client->Usage().retries, 1);
  // The retry sends the same request again: body and headers (the transport reuses its handle's
  // header list, the client lends the body it built once).
  const auto requests = server.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_FALSE(requests[0].body.empty());
  EXPECT_EQ(requests[1].body, requests[0].body);
  EXPECT_EQ(requests[1].headers.at("content-type"), "application/json");
  EXPECT_EQ(requests[1].Header("authorization"), requests[0].Header("authorization"));
  EXPECT_EQ(requests[1].Header("expect"), "");
}

TEST(LlmClientTest, RetryAfterIsWaitedOutInRealTime) {
  FakeOpenAIServer server([](const FakeRequest& r) {
    if (r.index == 0) {
      FakeReply reply = OpenAIError(503, "overloaded", "server_error");
      reply.headers.push_back({"Retry-After", "1"});
      return reply;
    }
    return ChatCompletion("ok");
  });
  auto client = MakeClient(Options(server));
  ASSERT_NE(client, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto r = client->Chat(Ask("hi"));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(server.request_count(), 2);
  EXPECT_GE(elapsed, 1s);
}

TEST(LlmClientTest, RetryAfterAsHttpDateAndInMilliseconds) {
  FakeOpenAIServer server([](const FakeRequest& r) {
    FakeReply reply = OpenAIError(429, "slow down", "requests");
    // FakeClock's wall clock starts at 2024-01-01T00:00:00Z, a Monday.
    if (r.index == 0) reply.headers.push_back({"Retry-After", "Mon, 01 Jan 2024 00:00:30 GMT"});
    if (r.index == 1) reply.headers.push_back({"retry-after-ms", "2500"});
    if (r.index == 2) return ChatCompletion("ok");
    return reply;
  });
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(server);
  o.clock = clock;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("hi"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto sleeps = clock->sleeps();
  ASSERT_EQ(sleeps.size(), 2u);
  EXPECT_GE(sleeps[0], 30s);
  EXPECT_GE(sleeps[1], 2500ms);
}

TEST(LlmClientTest, RetryAfterBeyondTheMaximumFailsAtOnce) {
  FakeOpenAIServer server([](const FakeRequest&) {
    FakeReply reply = OpenAIError(429, "daily limit reached", "requests");
    reply.headers.push_back({"Retry-After", "3600"});
    return reply;
  });
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(server);
  o.clock = clock;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("hi"));
  EXPECT_EQ(r.status().code(), ErrorCode::kRateLimited);
  EXPECT_THAT(r.status().message(), HasSubstr("3600"));
  EXPECT_THAT(r.status().message(), HasSubstr("daily limit reached"));
  EXPECT_EQ(server.request_count(), 1);
  EXPECT_TRUE(clock->sleeps().empty());
}

TEST(LlmClientTest, ServerErrorsAreRetriedWithBackoffThenReportedClearly) {
  FakeOpenAIServer server([](const FakeRequest&) {
    return OpenAIError(500, "The server had an error while processing your request.",
                       "server_error");
  });
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(server);
  o.clock = clock;
  o.max_retries = 3;
  o.backoff_base = 1s;
  o.backoff_cap = 60s;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);

  auto r = client->Chat(Ask("hi"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("HTTP 500"));
  EXPECT_THAT(r.status().message(), HasSubstr(server.base_url() + "/chat/completions"));
  EXPECT_THAT(r.status().message(), HasSubstr("The server had an error"));
  EXPECT_THAT(r.status().message(), HasSubstr("gave up after 4 attempts"));
  EXPECT_EQ(server.request_count(), 4);

  // Exponential backoff with jitter: the n-th wait lies in [base * 2^n / 2, base * 2^n].
  auto sleeps = clock->sleeps();
  ASSERT_EQ(sleeps.size(), 3u);
  for (size_t n = 0; n < sleeps.size(); ++n) {
    auto full = std::chrono::milliseconds(1000 << n);
    EXPECT_GE(sleeps[n], full / 2) << n;
    EXPECT_LE(sleeps[n], full) << n;  // virtual time: exact, not a timing assertion
  }
  LlmUsage u = client->Usage();
  EXPECT_EQ(u.retries, 3);
  EXPECT_EQ(u.http_requests, 4);
  EXPECT_EQ(u.failures, 1);
}

TEST(LlmClientTest, TransientServerErrorsThenSuccess) {
  FakeOpenAIServer server([](const FakeRequest& r) {
    if (r.index == 0) return OpenAIError(503, "busy", "server_error");
    if (r.index == 1) {
      return RawReply(502, "<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html");
    }
    return ChatCompletion("finally");
  });
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(server);
  o.clock = clock;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("hi"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->content, "finally");
  EXPECT_EQ(r->retries, 2);
  EXPECT_EQ(server.request_count(), 3);
}

TEST(LlmClientTest, HtmlErrorPageIsQuotedInTheError) {
  FakeOpenAIServer server([](const FakeRequest&) {
    return RawReply(502, "<html>\n<body>\n<h1>502 Bad Gateway</h1>\n</body>\n</html>", "text/html");
  });
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(server);
  o.clock = clock;
  o.max_retries = 1;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("hi"));
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("HTTP 502"));
  EXPECT_THAT(r.status().message(), HasSubstr("502 Bad Gateway"));
  EXPECT_EQ(server.request_count(), 2);
}

struct ClientErrorCase {
  int status;
  std::string message;
  ErrorCode code;
};

class LlmClientErrorTest : public ::testing::TestWithParam<ClientErrorCase> {};

TEST_P(LlmClientErrorTest, OtherClientErrorsAreNotRetried) {
  const ClientErrorCase c = GetParam();
  FakeOpenAIServer server([c](const FakeRequest&) {
    return OpenAIError(c.status, c.message, "invalid_request_error");
  });
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(server);
  o.clock = clock;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("hi"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), c.code);
  EXPECT_THAT(r.status().message(), HasSubstr("HTTP " + std::to_string(c.status)));
  EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  EXPECT_EQ(server.request_count(), 1);
  EXPECT_EQ(client->Usage().retries, 0);
  EXPECT_TRUE(clock->sleeps().empty());
}

INSTANTIATE_TEST_SUITE_P(
    Statuses, LlmClientErrorTest,
    ::testing::Values(
        // Every refusal by the endpoint is a service failure (exit code 1), never a usage error.
        ClientErrorCase{401, "Incorrect API key provided: sk-bad", ErrorCode::kPermissionDenied},
        ClientErrorCase{400, "'messages' must contain the word 'json'", ErrorCode::kUnavailable},
        ClientErrorCase{403, "Project does not have access to model", ErrorCode::kPermissionDenied},
        ClientErrorCase{404, "The model `gpt-9` does not exist", ErrorCode::kUnavailable},
        ClientErrorCase{422, "Unprocessable", ErrorCode::kUnavailable},
        ClientErrorCase{501, "Not Implemented", ErrorCode::kUnavailable}));

TEST(LlmClientTest, ExhaustedQuotaIsNotRetried) {
  FakeOpenAIServer server([](const FakeRequest&) {
    return OpenAIError(429, "You exceeded your current quota", "insufficient_quota",
                       "insufficient_quota");
  });
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(server);
  o.clock = clock;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("hi"));
  EXPECT_EQ(r.status().code(), ErrorCode::kRateLimited);
  EXPECT_THAT(r.status().message(), HasSubstr("exceeded your current quota"));
  EXPECT_EQ(server.request_count(), 1);
}

TEST(LlmClientTest, TimeoutsFireAndAreRetried) {
  FakeOpenAIServer server([](const FakeRequest&) {
    FakeReply reply = ChatCompletion("too late");
    reply.delay = 10s;  // cut short when the server stops
    return reply;
  });
  OpenAIOptions o = Options(server);
  o.timeout = 200ms;
  o.max_retries = 1;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  const auto start = std::chrono::steady_clock::now();
  auto r = client->Chat(Ask("hi"));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout);
  EXPECT_THAT(r.status().message(), HasSubstr("timed out"));
  EXPECT_THAT(r.status().message(), HasSubstr("gave up after 2 attempts"));
  EXPECT_GE(elapsed, 400ms);  // two attempts of 200 ms each
  EXPECT_LT(elapsed, 10s) << "the timeout did not fire";
  EXPECT_EQ(client->Usage().http_requests, 2);
}

TEST(LlmClientTest, AServerThatNeverAnsweredFailsAtOnce) {
  int port = 0;
  {
    FakeOpenAIServer gone;  // take a free port, then close it
    port = gone.port();
  }
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  o.model = "m";
  o.clock = clock;
  o.max_retries = 6;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("hi"));
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  // A wrong URL or a server that is not running: said at once, not after a minute of backoff.
  EXPECT_THAT(r.status().message(), HasSubstr("cannot connect to " + o.base_url));
  EXPECT_THAT(r.status().message(), HasSubstr("does not answer"));
  EXPECT_EQ(client->Usage().http_requests, 1);
  EXPECT_TRUE(clock->sleeps().empty());
}

TEST(LlmClientTest, AServerThatAnsweredBeforeIsRetriedWhenItGoesAway) {
  auto server = std::make_unique<FakeOpenAIServer>();
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(*server);
  o.clock = clock;
  o.max_retries = 2;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Chat(Ask("first")).ok());
  server.reset();  // a restart, as far as the client can tell
  auto r = client->Chat(Ask("second"));
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("gave up after 3 attempts"));
  EXPECT_EQ(client->Usage().http_requests, 4);
  EXPECT_EQ(clock->sleeps().size(), 2u);
}

TEST(LlmClientTest, AWebPageIsNotTakenForAnAnswer) {
  FakeOpenAIServer server([](const FakeRequest&) {
    return RawReply(200, "<!doctype html><html><title>LM UI</title></html>", "text/html");
  });
  InMemoryCache cache;
  OpenAIOptions o = Options(server);
  o.cache = &cache;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("hi"));
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable) << r.status().ToString();
  EXPECT_THAT(r.status().message(), HasSubstr("text/html"));
  EXPECT_THAT(r.status().message(), HasSubstr("not an OpenAI-compatible API"));
  EXPECT_EQ(server.request_count(), 1);
  EXPECT_EQ(cache.size(), 0u);
  // Plain text that is not JSON either; JSON labelled text/plain is accepted.
  server.SetHandler(
      [](const FakeRequest&) { return RawReply(200, "Hello from nginx", "text/plain"); });
  EXPECT_THAT(client->Chat(Ask("hi")).status().message(), HasSubstr("not an OpenAI-compatible"));
  server.SetHandler([](const FakeRequest&) {
    return RawReply(200, R"({"choices":[{"message":{"content":"fine"}}]})", "text/plain");
  });
  auto plain = client->Chat(Ask("plain"));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->content, "fine");
}

// ---- malformed replies ----

class LlmClientMalformedTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LlmClientMalformedTest, IsAParseErrorNotACrashAndNotRetried) {
  const std::string body = GetParam();
  FakeOpenAIServer server([body](const FakeRequest&) { return RawReply(200, body); });
  InMemoryCache cache;
  OpenAIOptions o = Options(server);
  o.cache = &cache;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("hi"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kParse) << r.status().ToString();
  EXPECT_FALSE(r.status().message().empty());
  EXPECT_EQ(server.request_count(), 1);
  EXPECT_EQ(cache.size(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Bodies, LlmClientMalformedTest,
    ::testing::Values("this is not json", "", "{\"choices\": [", "[1, 2, 3]", "{\"foo\": 1}",
                      "{\"choices\": []}", "{\"choices\": \"many\"}", "{\"choices\": [null]}",
                      "{\"choices\": [{\"message\": {\"role\": \"assistant\", \"content\": null},"
                      " \"finish_reason\": \"length\"}]}",
                      "{\"choices\": [{\"message\": {\"content\": 42}}]}",
                      "{\"choices\": [{\"message\": {\"refusal\": \"I can't help\"}}]}"));

TEST(LlmClientTest, NullContentNamesTheFinishReason) {
  FakeOpenAIServer server([](const FakeRequest&) {
    return RawReply(200, R"({"choices":[{"message":{"content":null},"finish_reason":"length"}]})");
  });
  auto client = MakeClient(Options(server));
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("hi"));
  EXPECT_THAT(r.status().message(), HasSubstr("finish_reason=length"));
}

TEST(LlmClientTest, MissingUsageIdAndModelAreToleratedAndTokensCounted) {
  // What a minimal local server may send: no id, no model, no usage, fields we do not know.
  FakeOpenAIServer server([](const FakeRequest&) {
    return RawReply(200, R"({"object":"chat.completion","choices":[{"index":0,
        "message":{"role":"assistant","content":"three word reply","tool_calls":[]},
        "logprobs":null}],"system_fingerprint":"b1234","timings":{"predicted_ms":12.5}})");
  });
  OpenAIOptions o = Options(server);
  o.token_counter = &CountWords;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Chat(Ask("count these four words"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->content, "three word reply");
  EXPECT_TRUE(r->tokens_estimated);
  EXPECT_EQ(r->completion_tokens, 3);
  // 3 to prime the reply + per message 3 + role + content: system (1 + 3) and user (1 + 4).
  EXPECT_EQ(r->prompt_tokens, 3 + (3 + 1 + 3) + (3 + 1 + 4));
  EXPECT_EQ(r->model, "test-model");
  EXPECT_EQ(client->Usage().completion_tokens, 3);
}

// ---- the reply cache ----

TEST(LlmClientTest, ACacheHitMakesNoHttpCall) {
  FakeOpenAIServer server(
      Answering([](const FakeRequest& r) { return "answer to " + r.LastUserMessage(); }));
  InMemoryCache cache;
  OpenAIOptions o = Options(server);
  o.cache = &cache;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);

  auto first = client->Chat(Ask("q"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->cache_hit);
  auto second = client->Chat(Ask("q"));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(second->content, first->content);
  EXPECT_EQ(second->prompt_tokens, first->prompt_tokens);
  EXPECT_EQ(server.request_count(), 1);

  LlmUsage u = client->Usage();
  EXPECT_EQ(u.calls, 2);
  EXPECT_EQ(u.cache_hits, 1);
  EXPECT_EQ(u.http_requests, 1);
  EXPECT_EQ(u.prompt_tokens, first->prompt_tokens) << "a cache hit spends no tokens";
  ASSERT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.entries().begin()->second.model, "test-model");
  EXPECT_EQ(cache.entries().begin()->second.kind, "chat");

  // A streamed call is served from the same entry, in one delta.
  std::vector<std::string> deltas;
  ChatRequest streamed = Ask("q");
  streamed.on_delta = [&](std::string_view d) { deltas.emplace_back(d); };
  auto third = client->Chat(streamed);
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE(third->cache_hit);
  EXPECT_EQ(deltas, std::vector<std::string>{first->content});
  EXPECT_EQ(server.request_count(), 1);
}

TEST(LlmClientTest, TheKeyCoversModelAndOutputParameters) {
  FakeOpenAIServer server;
  InMemoryCache cache;
  OpenAIOptions o = Options(server);
  o.cache = &cache;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Chat(Ask("q")).ok());
  ASSERT_EQ(server.request_count(), 1);

  ChatRequest warmer = Ask("q");
  warmer.temperature = 0.7;
  ASSERT_TRUE(client->Chat(warmer).ok());
  EXPECT_EQ(server.request_count(), 2);

  ChatRequest json = Ask("q");
  json.json_mode = true;
  ASSERT_TRUE(client->Chat(json).ok());
  EXPECT_EQ(server.request_count(), 3);

  ChatRequest shorter = Ask("q");
  shorter.max_tokens = 10;
  ASSERT_TRUE(client->Chat(shorter).ok());
  EXPECT_EQ(server.request_count(), 4);

  ChatRequest uncached = Ask("q");
  uncached.use_cache = false;
  auto r = client->Chat(uncached);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->cache_hit);
  EXPECT_EQ(server.request_count(), 5);

  OpenAIOptions other = o;
  other.model = "other-model";  // same cache, same prompt, another model: not a hit
  auto other_client = MakeClient(other);
  ASSERT_NE(other_client, nullptr);
  auto r2 = other_client->Chat(Ask("q"));
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->cache_hit);
  EXPECT_EQ(server.request_count(), 6);

  OpenAIOptions extra = o;
  extra.extra_body_json = R"({"seed": 1})";
  auto extra_client = MakeClient(extra);
  ASSERT_NE(extra_client, nullptr);
  ASSERT_TRUE(extra_client->Chat(Ask("q")).ok());
  EXPECT_EQ(server.request_count(), 7);

  // And everything asked before is now a hit.
  for (const ChatRequest& again : {Ask("q"), warmer, json, shorter}) {
    auto hit = client->Chat(again);
    ASSERT_TRUE(hit.ok());
    EXPECT_TRUE(hit->cache_hit);
  }
  EXPECT_EQ(server.request_count(), 7);
}

TEST(LlmClientTest, AReplyTheValidatorRejectsIsNotCached) {
  FakeOpenAIServer server([](const FakeRequest& r) {
    return ChatCompletion(r.index == 0 ? "Sure! Here is your JSON:" : R"({"ok": true})");
  });
  InMemoryCache cache;
  OpenAIOptions o = Options(server);
  o.cache = &cache;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  ChatRequest req = Ask("give me JSON");
  req.validator = [](const std::string& content) {
    return nlohmann::json::accept(content) ? Status::Ok() : Status::Parse("reply is not JSON");
  };

  auto bad = client->Chat(req);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kParse);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(client->Usage().rejected, 1);
  EXPECT_EQ(client->Usage().failures, 1);

  auto good = client->Chat(req);  // the retry reaches the model again
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_FALSE(good->cache_hit);
  EXPECT_EQ(server.request_count(), 2);
  EXPECT_EQ(cache.size(), 1u);

  auto cached = client->Chat(req);
  ASSERT_TRUE(cached.ok());
  EXPECT_TRUE(cached->cache_hit);
  EXPECT_EQ(server.request_count(), 2);
}

// ---- what reaches the server ----

TEST(LlmClientTest, ExtraBodyAndJsonModeReachTheServer) {
  FakeOpenAIServer server;
  OpenAIOptions o = Options(server);
  o.extra_body_json = R"({"top_p": 0.5, "seed": 7, "options": {"num_ctx": 8192}})";
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  ChatRequest req = Ask("answer in JSON");
  req.json_mode = true;
  req.max_tokens = 100;
  ASSERT_TRUE(client->Chat(req).ok());
  nlohmann::json body = server.request(0).json;
  EXPECT_EQ(body["response_format"], nlohmann::json({{"type", "json_object"}}));
  EXPECT_EQ(body["top_p"], 0.5);
  EXPECT_EQ(body["seed"], 7);
  EXPECT_EQ(body["options"]["num_ctx"], 8192);
  EXPECT_EQ(body["max_tokens"], 100);
  EXPECT_EQ(body["model"], "test-model");
}

TEST(LlmClientTest, ExtraBodyCanRemoveAndRenameFields) {
  FakeOpenAIServer server;
  OpenAIOptions o = Options(server);
  o.extra_body_json = R"({"temperature": null})";  // a reasoning model that refuses it
  o.max_tokens_field = "max_completion_tokens";
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  ChatRequest req = Ask("hi");
  req.max_tokens = 50;
  ASSERT_TRUE(client->Chat(req).ok());
  nlohmann::json body = server.request(0).json;
  EXPECT_FALSE(body.contains("temperature"));
  EXPECT_FALSE(body.contains("max_tokens"));
  EXPECT_EQ(body["max_completion_tokens"], 50);
}

TEST(LlmClientTest, AzureUrlAndApiKeyHeader) {
  FakeOpenAIServer server;
  OpenAIOptions o = Options(server);
  o.api_style = ApiStyle::kAzure;
  o.base_url = server.endpoint() + "/";
  o.model = "gpt-4o";
  o.azure_deployment = "my-gpt4o";
  o.api_key = "azure-secret";
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);

  ASSERT_TRUE(client->Chat(Ask("hi")).ok());
  FakeRequest chat = server.request(0);
  EXPECT_EQ(chat.path, "/openai/deployments/my-gpt4o/chat/completions");
  EXPECT_EQ(chat.query["api-version"], "2024-10-21");
  EXPECT_EQ(chat.Header("api-key"), "azure-secret");
  EXPECT_EQ(chat.Header("authorization"), "");

  auto e = client->Embed({"some text"});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  FakeRequest embed = server.request(1);
  EXPECT_EQ(embed.path, "/openai/deployments/my-gpt4o/embeddings");
  EXPECT_EQ(embed.query["api-version"], "2024-10-21");
  EXPECT_EQ(embed.Header("api-key"), "azure-secret");
}

// ---- embeddings ----

std::vector<std::string> Texts(int n) {
  std::vector<std::string> texts;
  for (int i = 0; i < n; ++i) texts.push_back("text number " + std::to_string(i));
  return texts;
}

TEST(LlmClientTest, EmbeddingsAreBatchedAndComeBackInOrder) {
  FakeOpenAIServer server(Answering([](const FakeRequest&) { return "unused"; }, 8));
  OpenAIOptions o = Options(server);
  o.embedding_batch_size = 16;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);

  const std::vector<std::string> texts = Texts(37);
  auto r = client->Embed(texts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->dimension, 8u);
  ASSERT_EQ(r->vectors.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(r->vectors[i], testing::FakeEmbedding(texts[i], 8)) << i;
  }
  EXPECT_EQ(server.request_count(), 3);  // 16 + 16 + 5
  std::multiset<std::string> sent;
  for (const FakeRequest& req : server.requests()) {
    EXPECT_EQ(req.path, "/v1/embeddings");
    EXPECT_LE(req.EmbeddingInputs().size(), 16u);
    for (const std::string& s : req.EmbeddingInputs()) sent.insert(s);
  }
  EXPECT_EQ(sent, std::multiset<std::string>(texts.begin(), texts.end()));
  EXPECT_GT(r->prompt_tokens, 0);
  EXPECT_FALSE(r->tokens_estimated);
  EXPECT_EQ(client->Usage().prompt_tokens, r->prompt_tokens);
}

TEST(LlmClientTest, EmbeddingBatchesRespectTheTokenBudgetAndSendDimensions) {
  FakeOpenAIServer server;
  OpenAIOptions o = Options(server);
  o.token_counter = &CountWords;
  o.embedding_batch_max_tokens = 7;  // three-word texts: two per batch
  o.embedding_dimensions = 256;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Embed(Texts(6));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(server.request_count(), 3);
  for (const FakeRequest& req : server.requests()) {
    EXPECT_EQ(req.EmbeddingInputs().size(), 2u);
    EXPECT_EQ(req.json["dimensions"], 256);
  }
}

TEST(LlmClientTest, EmbeddingsOutOfOrderIndicesAreReordered) {
  FakeOpenAIServer server([](const FakeRequest& r) {
    auto inputs = r.EmbeddingInputs();
    nlohmann::json data = nlohmann::json::array();
    for (size_t i = inputs.size(); i-- > 0;) {
      data.push_back({{"index", i}, {"embedding", {static_cast<float>(i), 1.0f}}});
    }
    return RawReply(200, nlohmann::json{{"data", data}}.dump());  // and no usage
  });
  OpenAIOptions o = Options(server);
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Embed({"a", "b", "c"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->vectors[0], (std::vector<float>{0.0f, 1.0f}));
  EXPECT_EQ(r->vectors[2], (std::vector<float>{2.0f, 1.0f}));
  EXPECT_TRUE(r->tokens_estimated);
  EXPECT_EQ(r->model, "test-model");
}

TEST(LlmClientTest, EmbeddingReplyWithTooFewVectorsIsAnError) {
  FakeOpenAIServer server([](const FakeRequest&) { return testing::Embeddings({{1.0f, 2.0f}}); });
  auto client = MakeClient(Options(server));
  ASSERT_NE(client, nullptr);
  auto r = client->Embed({"a", "b"});
  EXPECT_EQ(r.status().code(), ErrorCode::kParse);
  EXPECT_THAT(r.status().message(), HasSubstr("1 vectors for 2 inputs"));
}

TEST(LlmClientTest, EmbeddingsAreCachedPerInput) {
  FakeOpenAIServer server;
  InMemoryCache cache;
  OpenAIOptions o = Options(server);
  o.cache = &cache;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto first = client->Embed({"a", "b"});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(server.request_count(), 1);
  auto second = client->Embed({"b", "c", "a"});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->cache_hits, 2u);
  EXPECT_EQ(server.request_count(), 2);
  EXPECT_EQ(server.request(1).EmbeddingInputs(), std::vector<std::string>{"c"});
  EXPECT_EQ(second->vectors[0], first->vectors[1]);
  EXPECT_EQ(second->vectors[2], first->vectors[0]);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(client->Usage().cache_hits, 2);
}

TEST(LlmClientTest, ParallelEmbeddingBatchesRespectTheConcurrencyLimit) {
  FakeOpenAIServer server([](const FakeRequest& r) {
    std::vector<std::vector<float>> vectors;
    for (const std::string& s : r.EmbeddingInputs())
      vectors.push_back(testing::FakeEmbedding(s, 4));
    FakeReply reply = testing::Embeddings(vectors);
    reply.delay = 50ms;
    return reply;
  });
  OpenAIOptions o = Options(server);
  o.max_concurrency = 3;
  o.embedding_batch_size = 2;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto r = client->Embed(Texts(20));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(server.request_count(), 10);
  EXPECT_LE(server.max_in_flight(), 3);
  EXPECT_GE(server.max_in_flight(), 2) << "batches were not sent in parallel";
}

TEST(LlmClientTest, NoInputsNoRequest) {
  FakeOpenAIServer server;
  auto client = MakeClient(Options(server));
  ASSERT_NE(client, nullptr);
  auto r = client->Embed({});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->vectors.empty());
  EXPECT_EQ(server.request_count(), 0);
}

// ---- streaming ----

TEST(LlmClientTest, StreamedDeltasArriveInOrder) {
  FakeOpenAIServer server([](const FakeRequest&) {
    FakeReply reply = ChatStream({"Hel", "lo", " wor", "ld"}, FakeUsage{20, 4});
    reply.event_gap = 10ms;
    return reply;
  });
  auto client = MakeClient(Options(server));
  ASSERT_NE(client, nullptr);
  std::vector<std::string> deltas;
  ChatRequest req = Ask("greet");
  req.on_delta = [&](std::string_view d) { deltas.emplace_back(d); };
  auto r = client->Chat(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(deltas, (std::vector<std::string>{"Hel", "lo", " wor", "ld"}));
  EXPECT_EQ(r->content, "Hello world");
  EXPECT_EQ(r->prompt_tokens, 20);
  EXPECT_EQ(r->completion_tokens, 4);
  EXPECT_FALSE(r->tokens_estimated);
  EXPECT_EQ(r->finish_reason, "stop");

  FakeRequest seen = server.request(0);
  EXPECT_EQ(seen.json["stream"], true);
  EXPECT_EQ(seen.json["stream_options"]["include_usage"], true);
  EXPECT_EQ(seen.Header("accept"), "text/event-stream");
}

TEST(LlmClientTest, ACancelledCallStopsInFlightAndIsNotCached) {
  // The server holds the reply for 20 s; the call is cancelled after a moment: it must come back
  // cancelled (not with the reply 20 s later), and leave nothing in the cache.
  FakeOpenAIServer server([](const FakeRequest&) {
    FakeReply reply = ChatCompletion("late answer");
    reply.delay = 20s;
    return reply;
  });
  InMemoryCache cache;
  OpenAIOptions o = Options(server);
  o.cache = &cache;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  std::atomic<bool> cancel{false};
  ChatRequest req = Ask("slow question");
  req.cancel = &cancel;
  std::thread canceller([&] {
    while (server.request_count() == 0) std::this_thread::sleep_for(5ms);
    std::this_thread::sleep_for(50ms);
    cancel = true;
  });
  auto r = client->Chat(req);
  canceller.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kCancelled) << r.status().ToString();
  EXPECT_EQ(cache.size(), 0u);
  // Already cancelled: no request at all.
  auto again = client->Chat(req);
  EXPECT_EQ(again.status().code(), ErrorCode::kCancelled);
  EXPECT_EQ(server.request_count(), 1);
}

TEST(LlmClientTest, ACancelledStreamStopsMidway) {
  std::vector<std::string> many(200, "word ");
  FakeOpenAIServer server([&](const FakeRequest&) {
    FakeReply reply = ChatStream(many);
    reply.event_gap = 10ms;
    return reply;
  });
  auto client = MakeClient(Options(server));
  ASSERT_NE(client, nullptr);
  std::atomic<bool> cancel{false};
  int deltas = 0;
  ChatRequest req = Ask("long answer");
  req.cancel = &cancel;
  req.on_delta = [&](std::string_view) {
    if (++deltas == 3) cancel = true;  // the asker has gone
  };
  auto r = client->Chat(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kCancelled) << r.status().ToString();
  EXPECT_LT(deltas, 200);
}

TEST(LlmClientTest, TheDefaultHandlerStreamsWhenAsked) {
  FakeOpenAIServer server(
      Answering([](const FakeRequest& r) { return "you asked: " + r.LastUserMessage(); }));
  auto client = MakeClient(Options(server));
  ASSERT_NE(client, nullptr);
  std::vector<std::string> deltas;
  ChatRequest req = Ask("three little words");
  req.on_delta = [&](std::string_view d) { deltas.emplace_back(d); };
  auto r = client->Chat(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->content, "you asked: three little words");
  EXPECT_EQ(deltas.size(), 5u);
  EXPECT_FALSE(r->tokens_estimated);
}

TEST(LlmClientTest, StreamWithoutUsageIsCounted) {
  FakeOpenAIServer server([](const FakeRequest&) {
    return ChatStream({"one ", "two ", "three"}, std::nullopt);
  });
  OpenAIOptions o = Options(server);
  o.token_counter = &CountWords;
  o.stream_usage = false;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  ChatRequest req = Ask("count");
  std::string shown;
  req.on_delta = [&](std::string_view d) { shown += d; };
  auto r = client->Chat(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(shown, "one two three");
  EXPECT_TRUE(r->tokens_estimated);
  EXPECT_EQ(r->completion_tokens, 3);
  EXPECT_FALSE(server.request(0).json.contains("stream_options"));
}

TEST(LlmClientTest, AServerThatIgnoresStreamStillAnswers) {
  FakeOpenAIServer server([](const FakeRequest&) { return ChatCompletion("whole reply"); });
  auto client = MakeClient(Options(server));
  ASSERT_NE(client, nullptr);
  std::vector<std::string> deltas;
  ChatRequest req = Ask("hi");
  req.on_delta = [&](std::string_view d) { deltas.emplace_back(d); };
  auto r = client->Chat(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->content, "whole reply");
  EXPECT_EQ(deltas, std::vector<std::string>{"whole reply"});
}

TEST(LlmClientTest, AnErrorMidStreamAfterDeltasIsReportedNotRetried) {
  FakeOpenAIServer server([](const FakeRequest&) {
    FakeReply reply = ChatStream({"partial "}, std::nullopt);
    reply.events.insert(reply.events.begin() + 2,
                        R"({"error": {"message": "model crashed", "type": "server_error"}})");
    return reply;
  });
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(server);
  o.clock = clock;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  std::string shown;
  ChatRequest req = Ask("hi");
  req.on_delta = [&](std::string_view d) { shown += d; };
  auto r = client->Chat(req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("model crashed"));
  EXPECT_EQ(shown, "partial ");
  EXPECT_EQ(server.request_count(), 1);
}

TEST(LlmClientTest, AnErrorBeforeAnyDeltaIsRetried) {
  FakeOpenAIServer server([](const FakeRequest& r) {
    if (r.index == 0) {
      FakeReply reply;
      reply.events = {R"({"error": {"message": "loading model", "type": "server_error"}})"};
      return reply;
    }
    return ChatStream({"fine"});
  });
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(server);
  o.clock = clock;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  std::string shown;
  ChatRequest req = Ask("hi");
  req.on_delta = [&](std::string_view d) { shown += d; };
  auto r = client->Chat(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(shown, "fine");
  EXPECT_EQ(r->retries, 1);
}

TEST(LlmClientTest, MalformedStreamIsAParseError) {
  FakeOpenAIServer server([](const FakeRequest&) {
    FakeReply reply;
    reply.events = {"{not json"};
    return reply;
  });
  auto client = MakeClient(Options(server));
  ASSERT_NE(client, nullptr);
  ChatRequest req = Ask("hi");
  req.on_delta = [](std::string_view) {};
  auto r = client->Chat(req);
  EXPECT_EQ(r.status().code(), ErrorCode::kParse);
  EXPECT_EQ(server.request_count(), 1);
}

// ---- rate limits (virtual time) ----

TEST(LlmClientTest, RequestsPerMinuteSpacesRequests) {
  auto clock = std::make_shared<FakeClock>();
  std::mutex mu;
  std::vector<Clock::TimePoint> sent;  // guarded by mu
  FakeOpenAIServer server([&](const FakeRequest&) {
    std::lock_guard lock(mu);
    sent.push_back(clock->Now());
    return ChatCompletion("ok");
  });
  OpenAIOptions o = Options(server);
  o.clock = clock;
  o.requests_per_minute = 60;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(client->Chat(Ask("q" + std::to_string(i))).ok());
  std::lock_guard lock(mu);
  ASSERT_EQ(sent.size(), 5u);
  for (size_t i = 1; i < sent.size(); ++i) EXPECT_GE(sent[i] - sent[i - 1], 1s) << i;
}

TEST(LlmClientTest, RequestsPerMinuteHoldsAcrossThreads) {
  FakeOpenAIServer server;
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(server);
  o.clock = clock;
  o.requests_per_minute = 120;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] { EXPECT_TRUE(client->Chat(Ask(std::to_string(i))).ok()); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(server.request_count(), 8);
  EXPECT_GE(clock->elapsed(), 3500ms);  // 8 requests, 500 ms apart
}

TEST(LlmClientTest, TokensPerMinuteSpacesRequests) {
  FakeOpenAIServer server([](const FakeRequest&) { return ChatCompletion("ok", FakeUsage{1, 1}); });
  auto clock = std::make_shared<FakeClock>();
  OpenAIOptions o = Options(server);
  o.clock = clock;
  o.tokens_per_minute = 600;  // 10 tokens a second
  o.token_counter = [](std::string_view) -> size_t { return 10; };
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  // Each prompt counts 3 + 2 * (3 + 10 + 10) = 49 tokens: 4.9 s of budget.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client->Chat(Ask(std::to_string(i))).ok());
  EXPECT_GE(clock->elapsed(), 9800ms);
}

}  // namespace
}  // namespace grag
