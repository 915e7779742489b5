// The LLM client's pieces on their own: OpenAI reply parsing, server-sent events, error
// messages, Retry-After, backoff, cache keys, the rate limiter in virtual time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "grag/llm.h"
#include "llm/limits.h"
#include "llm/model_common.h"
#include "llm/wire.h"
#include "support/fake_openai_server.h"

namespace grag::llm_internal {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// ---- chat replies ----

TEST(ParseChatReplyTest, ReadsContentUsageModelAndFinishReason) {
  auto r = ParseChatReply(R"({"id":"x","model":"gpt-4o-mini","choices":[{"index":0,
      "message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],
      "usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->content, "Hi");
  EXPECT_EQ(r->model, "gpt-4o-mini");
  EXPECT_EQ(r->finish_reason, "stop");
  EXPECT_EQ(r->prompt_tokens, 12);
  EXPECT_EQ(r->completion_tokens, 3);
}

TEST(ParseChatReplyTest, ToleratesWhatLocalServersSend) {
  // No usage, no id; content as an array of parts; float token counts; usage of nulls.
  auto parts = ParseChatReply(R"({"choices":[{"message":{"content":[{"type":"text","text":"a"},)"
                              R"({"type":"text","text":"b"}]}}], "usage":null})");
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  EXPECT_EQ(parts->content, "ab");
  EXPECT_FALSE(parts->prompt_tokens.has_value());

  auto floats = ParseChatReply(R"({"choices":[{"message":{"content":"x"}}],)"
                               R"("usage":{"prompt_tokens":5.0,"total_tokens":9}})");
  ASSERT_TRUE(floats.ok());
  EXPECT_EQ(floats->prompt_tokens, 5);
  EXPECT_EQ(floats->completion_tokens, 4);  // from total_tokens

  auto legacy = ParseChatReply(R"({"choices":[{"text":"old style","finish_reason":"stop"}]})");
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ(legacy->content, "old style");

  auto empty = ParseChatReply(R"({"choices":[{"message":{"content":""}}]})");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->content, "");
}

TEST(ParseChatReplyTest, ExplainsWhatIsWrong) {
  EXPECT_THAT(ParseChatReply("<html>oops</html>").status().message(), HasSubstr("not JSON"));
  EXPECT_THAT(ParseChatReply("{}").status().message(), HasSubstr("no choices"));
  EXPECT_THAT(ParseChatReply(R"({"choices":[{"message":{"refusal":"no"}}]})").status().message(),
              HasSubstr("refused"));
  EXPECT_THAT(ParseChatReply(R"({"choices":[{"message":{"content":null,"tool_calls":[{}]},
                                "finish_reason":"tool_calls"}]})")
                  .status()
                  .message(),
              HasSubstr("tool calls"));
  auto error = ParseChatReply(R"({"error":{"message":"upstream failed"}})");
  EXPECT_EQ(error.status().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(error.status().message(), HasSubstr("upstream failed"));
}

TEST(ParseChatReplyTest, SurvivesGarbage) {
  // Every prefix of a valid reply, and some random bytes: errors, never a crash.
  const std::string valid = R"({"choices":[{"message":{"role":"assistant","content":"Hi"}}],)"
                            R"("usage":{"prompt_tokens":1}})";
  for (size_t n = 0; n < valid.size(); ++n) {
    EXPECT_FALSE(ParseChatReply(valid.substr(0, n)).ok()) << n;
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string junk(rng() % 64, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    EXPECT_FALSE(ParseChatReply(junk).ok());
  }
}

TEST(BuildChatBodyTest, InvalidUtf8DoesNotThrow) {
  ChatRequest r;
  r.messages.push_back({"user", std::string("caf\xC3", 4)});
  ChatBodyOptions o;
  o.model = "m";
  std::string body = BuildChatBody(r, o);
  EXPECT_TRUE(nlohmann::json::accept(body));
}

// The request body as nlohmann writes it: what BuildChatBody wrote before it wrote the JSON
// itself, and what it must still write byte for byte.
std::string NlohmannChatBody(const ChatRequest& request, const ChatBodyOptions& options) {
  nlohmann::json body = nlohmann::json::object();
  body["model"] = options.model;
  nlohmann::json messages = nlohmann::json::array();
  for (const ChatMessage& m : request.messages) {
    messages.push_back(nlohmann::json{{"role", m.role}, {"content", m.content}});
  }
  body["messages"] = std::move(messages);
  if (request.temperature) body["temperature"] = *request.temperature;
  if (request.max_tokens) body[options.max_tokens_field] = *request.max_tokens;
  if (request.json_mode) body["response_format"] = nlohmann::json{{"type", "json_object"}};
  if (options.stream) {
    body["stream"] = true;
    if (options.stream_usage) body["stream_options"] = nlohmann::json{{"include_usage", true}};
  }
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

TEST(AppendJsonStringTest, WritesWhatNlohmannWrites) {
  std::mt19937 rng(7);
  // Control characters, quotes, backslashes, DEL, valid multi-byte characters of every length,
  // and invalid sequences (lone continuation bytes, truncated, overlong, surrogates, > U+10FFFF).
  const std::vector<std::string> pieces = {"a",
                                           " ",
                                           "\"",
                                           "\\",
                                           "/",
                                           "\n",
                                           "\r",
                                           "\t",
                                           "\b",
                                           "\f",
                                           std::string(1, '\0'),
                                           "\x01",
                                           "\x1f",
                                           "\x7f",
                                           "é",
                                           "中",
                                           "😀",
                                           "\x80",
                                           "\xC3",
                                           "\xE4\xB8",
                                           "\xC0\xAF",
                                           "\xED\xA0\x80",
                                           "\xF4\x90\x80\x80",
                                           "\xF0\x9F\x98",
                                           "\xFF",
                                           "\xEF\xBF\xBD"};
  // Long texts too, mostly plain, so escapes fall anywhere in and across 8- and 16-byte blocks.
  const std::string plain = "The quick brown fox jumps over the lazy dog. ";
  for (int i = 0; i < 5000; ++i) {
    std::string text;
    const size_t n = rng() % (i % 2 ? 24 : 120);
    for (size_t k = 0; k < n; ++k) {
      if (i % 2 == 0 && rng() % 3 != 0) {
        text += plain.substr(0, 1 + rng() % plain.size());
      } else {
        text += pieces[rng() % pieces.size()];
      }
    }
    std::string fast;
    AppendJsonString(fast, text);
    const std::string slow =
        nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    ASSERT_EQ(fast, slow) << ::testing::PrintToString(text);
  }
}

TEST(BuildChatBodyTest, SameBytesAsNlohmann) {
  ChatRequest r;
  r.messages.push_back({"system", "Be \"brief\".\n\tOK\x01"});
  r.messages.push_back({"user", std::string("caf\xC3 \u00e9", 8)});
  ChatBodyOptions o;
  o.model = "gpt-\"x\"";
  EXPECT_EQ(BuildChatBody(r, o), NlohmannChatBody(r, o));
  r.temperature = 0.2;
  r.max_tokens = 512;
  r.json_mode = true;
  o.stream = true;
  EXPECT_EQ(BuildChatBody(r, o), NlohmannChatBody(r, o));
  o.stream_usage = false;
  o.max_tokens_field = "max_completion_tokens";
  r.temperature = 0.0;
  EXPECT_EQ(BuildChatBody(r, o), NlohmannChatBody(r, o));
}

TEST(ChatReplyCodingTest, EncodesAsTheJsonObjectDid) {
  ChatResponse r;
  r.content = "{\"entities\": []}\n\xC3";
  r.prompt_tokens = 1234;
  r.completion_tokens = -1;
  r.tokens_estimated = true;
  r.model = "m\\";
  r.finish_reason = "length";
  const nlohmann::json j = {{"content", r.content},
                            {"prompt_tokens", r.prompt_tokens},
                            {"completion_tokens", r.completion_tokens},
                            {"tokens_estimated", r.tokens_estimated},
                            {"model", r.model},
                            {"finish_reason", r.finish_reason}};
  EXPECT_EQ(EncodeChatReply(r), j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// ---- streams ----

std::vector<std::pair<std::string, std::string>> Events(const std::vector<std::string>& pieces) {
  std::vector<std::pair<std::string, std::string>> out;
  SseParser parser;
  SseParser::Handler h = [&](std::string_view field, std::string_view data) {
    out.emplace_back(field, data);
    return Status::Ok();
  };
  for (const std::string& p : pieces) EXPECT_TRUE(parser.Feed(p, h).ok());
  EXPECT_TRUE(parser.Finish(h).ok());
  return out;
}

TEST(SseParserTest, SplitsEventsWhereverTheBytesAreCut) {
  const std::string stream =
      ": keep-alive\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: message\nid: 3\ndata: two\ndata: "
      "lines\n\ndata:[DONE]\n\n";
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"data", "{\"a\":1}"}, {"data", "two\nlines"}, {"data", "[DONE]"}};
  EXPECT_EQ(Events({stream}), expected);
  for (size_t cut = 1; cut < stream.size(); ++cut) {
    EXPECT_EQ(Events({stream.substr(0, cut), stream.substr(cut)}), expected) << cut;
  }
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  EXPECT_EQ(Events(bytes), expected);
}

TEST(SseParserTest, AnEventWithoutTheFinalBlankLineIsKept) {
  EXPECT_EQ(Events({"data: last"}),
            (std::vector<std::pair<std::string, std::string>>{{"data", "last"}}));
}

TEST(SseParserTest, ErrorEventsAreMarked) {
  auto events = Events({"error: {\"message\":\"boom\"}\n\nevent: error\ndata: x\n\ndata: y\n\n"});
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].first, "error");
  EXPECT_EQ(events[1].first, "error");
  EXPECT_EQ(events[2].first, "data");
}

TEST(ChatStreamAssemblerTest, AssemblesDeltasUsageAndModel) {
  std::string shown;
  ChatStreamAssembler a([&](std::string_view d) { shown += d; });
  for (const std::string& e : testing::ChatStream({"a", "b"}, testing::FakeUsage{5, 2}).events) {
    ASSERT_TRUE(a.OnEvent(e).ok()) << e;
  }
  EXPECT_TRUE(a.done());
  EXPECT_TRUE(a.delivered());
  auto r = a.Finish();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->content, "ab");
  EXPECT_EQ(shown, "ab");
  EXPECT_EQ(r->prompt_tokens, 5);
  EXPECT_EQ(r->completion_tokens, 2);
  EXPECT_EQ(r->model, "fake-model");
  EXPECT_EQ(r->finish_reason, "stop");
}

TEST(ChatStreamAssemblerTest, NoChunksIsAnError) {
  ChatStreamAssembler a(nullptr);
  ASSERT_TRUE(a.OnEvent("[DONE]").ok());
  EXPECT_EQ(a.Finish().status().code(), ErrorCode::kParse);
  EXPECT_EQ(a.OnEvent("nope").code(), ErrorCode::kParse);
}

// ---- embeddings ----

TEST(ParseEmbeddingReplyTest, ChecksCountIndicesAndDimensions) {
  EXPECT_TRUE(ParseEmbeddingReply(R"({"data":[{"embedding":[1,2]},{"embedding":[3,4]}]})", 2).ok());
  EXPECT_THAT(ParseEmbeddingReply(R"({"data":[{"embedding":[1,2]}]})", 2).status().message(),
              HasSubstr("1 vectors for 2 inputs"));
  EXPECT_THAT(ParseEmbeddingReply(
                  R"({"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]})", 2)
                  .status()
                  .message(),
              HasSubstr("repeated index"));
  EXPECT_THAT(ParseEmbeddingReply(R"({"data":[{"embedding":[1,2]},{"embedding":[3]}]})", 2)
                  .status()
                  .message(),
              HasSubstr("mixes dimensions"));
  EXPECT_EQ(ParseEmbeddingReply(R"({"data":[{"embedding":["x"]}]})", 1).status().code(),
            ErrorCode::kParse);
  EXPECT_EQ(ParseEmbeddingReply("nope", 1).status().code(), ErrorCode::kParse);
  // encoding_format=base64
  std::string b64 = EncodeFloats({0.5f, -1.0f});
  auto r = ParseEmbeddingReply(R"({"data":[{"embedding":")" + b64 + R"("}]})", 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->vectors[0], (std::vector<float>{0.5f, -1.0f}));
}

TEST(EncodeFloatsTest, RoundTrips) {
  std::vector<float> v = {0.0f, -0.0f, 1.5f, -3.25e-8f, 1e30f, 0.1f};
  auto back = DecodeFloats(EncodeFloats(v));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, v);
  for (std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
    EXPECT_EQ(Base64Decode(Base64Encode(s)), s);
  }
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_FALSE(Base64Decode("!!!!").has_value());
}

// ---- errors and retries ----

TEST(ErrorMessageTest, ReadsEachServersShape) {
  EXPECT_EQ(ErrorMessageFromBody(R"({"error":{"message":"Incorrect API key provided",)"
                                 R"("type":"invalid_request_error","code":"invalid_api_key"}})"),
            "Incorrect API key provided (invalid_api_key)");
  EXPECT_EQ(ErrorMessageFromBody(R"({"error":"model 'llama9' not found"})"),
            "model 'llama9' not found");  // Ollama
  EXPECT_EQ(ErrorMessageFromBody(R"({"object":"error","message":"max_tokens is too large",)"
                                 R"("type":"BadRequestError","code":400})"),
            "max_tokens is too large (400)");  // vLLM
  EXPECT_EQ(ErrorMessageFromBody(R"({"detail":"Not Found"})"), "Not Found");
  EXPECT_EQ(ErrorMessageFromBody("<html>\n  <h1>Bad   Gateway</h1>\n</html>"),
            "an HTML page: Bad Gateway");
  EXPECT_EQ(ErrorMessageFromBody("<html><head><title>404 Not Found</title></head><body>x</body>"),
            "an HTML page titled \"404 Not Found\"");
  EXPECT_EQ(ErrorMessageFromBody(""), "");
  EXPECT_LE(ErrorMessageFromBody(std::string(5000, 'x')).size(), 303u);
}

TEST(HttpErrorStatusTest, MapsStatusesToKinds) {
  EXPECT_EQ(HttpErrorStatus(400, "", "u").code(), ErrorCode::kUnavailable);
  EXPECT_EQ(HttpErrorStatus(401, "", "u").code(), ErrorCode::kPermissionDenied);
  EXPECT_THAT(HttpErrorStatus(401, "", "u").message(), HasSubstr("API key"));
  EXPECT_EQ(HttpErrorStatus(404, "", "u").code(), ErrorCode::kUnavailable);
  EXPECT_THAT(HttpErrorStatus(404, "", "u").message(), HasSubstr("base URL"));
  EXPECT_FALSE(IsRetryableStatus(501));
  EXPECT_EQ(HttpErrorStatus(408, "", "u").code(), ErrorCode::kTimeout);
  EXPECT_EQ(HttpErrorStatus(429, "", "u").code(), ErrorCode::kRateLimited);
  EXPECT_EQ(HttpErrorStatus(500, "", "u").code(), ErrorCode::kUnavailable);
  EXPECT_EQ(HttpErrorStatus(503, "", "http://h/v1/chat/completions").message(),
            "HTTP 503 from http://h/v1/chat/completions");
  EXPECT_TRUE(IsRetryableStatus(429));
  EXPECT_TRUE(IsRetryableStatus(408));
  EXPECT_TRUE(IsRetryableStatus(500));
  EXPECT_TRUE(IsRetryableStatus(504));
  EXPECT_FALSE(IsRetryableStatus(400));
  EXPECT_FALSE(IsRetryableStatus(401));
  EXPECT_FALSE(IsRetryableStatus(404));
  EXPECT_TRUE(IsQuotaExhausted(R"({"error":{"code":"insufficient_quota"}})"));
  EXPECT_FALSE(IsQuotaExhausted(R"({"error":{"code":"rate_limit_exceeded"}})"));
  EXPECT_FALSE(IsQuotaExhausted("garbage"));
}

HttpResponse WithHeader(std::string name, std::string value) {
  HttpResponse r;
  r.status = 429;
  r.headers.push_back({std::move(name), std::move(value)});
  return r;
}

TEST(ParseRetryAfterTest, SecondsMillisecondsAndDates) {
  const auto now = std::chrono::system_clock::from_time_t(1704067200);  // 2024-01-01 00:00:00Z
  EXPECT_EQ(ParseRetryAfter(WithHeader("retry-after", "7"), now), 7000ms);
  EXPECT_EQ(ParseRetryAfter(WithHeader("retry-after", " 1.5 "), now), 1500ms);
  EXPECT_EQ(ParseRetryAfter(WithHeader("retry-after-ms", "250"), now), 250ms);
  EXPECT_EQ(ParseRetryAfter(WithHeader("retry-after", "Mon, 01 Jan 2024 00:01:00 GMT"), now),
            60000ms);
  EXPECT_EQ(ParseRetryAfter(WithHeader("retry-after", "Sun, 31 Dec 2023 23:00:00 GMT"), now),
            0ms);  // already past
  EXPECT_EQ(ParseRetryAfter(WithHeader("retry-after", "soon"), now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter(WithHeader("retry-after", "-3"), now), std::nullopt);
  EXPECT_EQ(ParseRetryAfter(WithHeader("x-other", "3"), now), std::nullopt);
  HttpResponse both = WithHeader("Retry-After", "9");
  both.headers.push_back({"retry-after-ms", "100"});
  EXPECT_EQ(ParseRetryAfter(both, now), 100ms);  // the finer one wins
}

TEST(BackoffTest, GrowsExponentiallyWithJitterUpToTheCap) {
  for (double u : {0.0, 0.3, 0.999}) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      auto full = std::min<std::chrono::milliseconds>(1000ms * (1 << attempt), 60s);
      auto d = BackoffDelay(attempt, 1000ms, 60s, u);
      EXPECT_GE(d, full / 2);
      EXPECT_LE(d, full);
    }
  }
  EXPECT_EQ(BackoffDelay(100, 1000ms, 60s, 1.0), 60s);  // no overflow
  EXPECT_EQ(BackoffDelay(0, 0ms, 0ms, 0.5), 0ms);
}

// ---- cache keys ----

TEST(ChatCacheKeyTest, ChangesWithEverythingThatChangesTheReply) {
  ChatRequest base;
  base.messages = {{"system", "s"}, {"user", "u"}};
  const std::string key = ChatCacheKey("m", base, nullptr);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(ChatCacheKey("m", base, nullptr), key);

  ChatRequest streamed = base;
  streamed.on_delta = [](std::string_view) {};
  streamed.validator = [](const std::string&) { return Status::Ok(); };
  EXPECT_EQ(ChatCacheKey("m", streamed, nullptr), key) << "streaming does not change the reply";

  EXPECT_NE(ChatCacheKey("m2", base, nullptr), key);
  ChatRequest c = base;
  c.messages[0].role = "user";
  EXPECT_NE(ChatCacheKey("m", c, nullptr), key);
  c = base;
  c.messages = {{"system", "su"}};
  EXPECT_NE(ChatCacheKey("m", c, nullptr), key);
  c = base;
  c.temperature = std::nullopt;
  EXPECT_NE(ChatCacheKey("m", c, nullptr), key);
  c = base;
  c.temperature = 0.0000001;
  EXPECT_NE(ChatCacheKey("m", c, nullptr), key);
  c = base;
  c.max_tokens = 5;
  EXPECT_NE(ChatCacheKey("m", c, nullptr), key);
  c = base;
  c.json_mode = true;
  EXPECT_NE(ChatCacheKey("m", c, nullptr), key);
  nlohmann::json extra = {{"seed", 1}};
  EXPECT_NE(ChatCacheKey("m", base, &extra), key);
  nlohmann::json empty = nlohmann::json::object();
  EXPECT_EQ(ChatCacheKey("m", base, &empty), key);
}

TEST(ChatReplyCodingTest, RoundTripsAndRejectsForeignValues) {
  ChatResponse r;
  r.content = "héllo \"world\"";
  r.prompt_tokens = 12;
  r.completion_tokens = 3;
  r.model = "m";
  r.finish_reason = "stop";
  auto back = DecodeChatReply(EncodeChatReply(r));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->content, r.content);
  EXPECT_EQ(back->prompt_tokens, 12);
  EXPECT_EQ(back->completion_tokens, 3);
  EXPECT_EQ(back->model, "m");
  EXPECT_FALSE(DecodeChatReply("not json").has_value());
  EXPECT_FALSE(DecodeChatReply(R"({"content": 5})").has_value());
}

// ---- limits ----

TEST(RateLimiterTest, SpacesRequestsEvenly) {
  testing::FakeClock clock;
  RateLimiter limiter(clock, 120, 0);
  for (int i = 0; i < 5; ++i) limiter.Acquire(0);
  EXPECT_EQ(clock.elapsed(), 2000ms);  // 5 requests 500 ms apart
}

TEST(RateLimiterTest, TokensDelayLaterRequests) {
  testing::FakeClock clock;
  RateLimiter limiter(clock, 0, 6000);  // 100 tokens a second
  limiter.Acquire(500);
  EXPECT_EQ(clock.elapsed(), 0ms);
  limiter.Acquire(100);  // waits for the first request's 500 tokens
  EXPECT_EQ(clock.elapsed(), 5000ms);
  limiter.Charge(200);  // its completion, learnt afterwards
  limiter.Acquire(1);
  EXPECT_EQ(clock.elapsed(), 8000ms);
}

TEST(RateLimiterTest, UnlimitedNeverWaits) {
  testing::FakeClock clock;
  RateLimiter limiter(clock, 0, 0);
  for (int i = 0; i < 100; ++i) limiter.Acquire(1000000);
  EXPECT_EQ(clock.elapsed(), 0ms);
}

TEST(RateLimiterTest, IdleTimeIsNotBankedIntoABurst) {
  testing::FakeClock clock;
  RateLimiter limiter(clock, 60, 0);
  limiter.Acquire(0);
  clock.Advance(10s);
  limiter.Acquire(0);
  limiter.Acquire(0);
  EXPECT_EQ(clock.elapsed(), 11s);
}

}  // namespace
}  // namespace grag::llm_internal
