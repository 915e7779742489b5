// Local and reasoning models: thinking kept out of answers, parameters a server refuses dropped
// and remembered, Ollama's own API with the context window each request needs. The wire pieces
// on their own, then OpenAIClient against loopback servers that behave like those models.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "grag/llm.h"
#include "llm/thinking.h"
#include "llm/wire.h"
#include "support/fake_openai_server.h"

namespace grag {
namespace {

using namespace std::chrono_literals;
using llm_internal::SplitThinking;
using llm_internal::ThinkingFilter;
using testing::Answering;
using testing::ChatCompletion;
using testing::ChatStream;
using testing::FakeOpenAIServer;
using testing::FakeReply;
using testing::FakeRequest;
using ::testing::HasSubstr;
using testing::OpenAIError;
using testing::RawReply;

// ---- thinking ----

TEST(SplitThinkingTest, LeadingBlockWithBracesIsNotTheAnswer) {
  auto s = SplitThinking(
      "<think>The user wants {\"entities\": ...}; maybe {x}.</think>\n\n{\"entities\": []}");
  EXPECT_EQ(s.answer, "{\"entities\": []}");
  EXPECT_THAT(s.thinking, HasSubstr("maybe {x}"));
  EXPECT_FALSE(s.unclosed);
}

TEST(SplitThinkingTest, OtherTagsSeveralBlocksAndCase) {
  EXPECT_EQ(SplitThinking("  <Thinking>a</Thinking><reasoning>b</reasoning> answer").answer,
            "answer");
  EXPECT_EQ(SplitThinking("<reflection>r</reflection>ok").thinking, "r");
}

TEST(SplitThinkingTest, OnlyTheClosingTagWhenTheTemplateOpenedIt) {
  auto s = SplitThinking("I should list names.\n</think>\nanswer");
  EXPECT_EQ(s.answer, "answer");
  EXPECT_EQ(s.thinking, "I should list names.");
}

TEST(SplitThinkingTest, UnclosedBlockLeavesNoAnswer) {
  auto s = SplitThinking("<think>still thinking about {");
  EXPECT_TRUE(s.unclosed);
  EXPECT_EQ(s.answer, "");
}

TEST(SplitThinkingTest, PlainRepliesAndQuotedTagsAreLeftAlone) {
  EXPECT_EQ(SplitThinking("{\"a\": 1}").answer, "{\"a\": 1}");
  EXPECT_TRUE(SplitThinking("{\"a\": 1}").thinking.empty());
  EXPECT_EQ(SplitThinking("Use <think> tags like <think>x</think>.").answer,
            "Use <think> tags like <think>x</think>.");
}

TEST(ThinkingFilterTest, StreamedThinkingIsHeldBackWhereverTheDeltasCut) {
  const std::string reply = "<think>plan {a}</think>\n\nThe answer is 42.";
  for (size_t cut = 1; cut < reply.size(); ++cut) {
    ThinkingFilter f;
    std::string out = f.Feed(reply.substr(0, cut));
    out += f.Feed(reply.substr(cut));
    out += f.Finish();
    EXPECT_EQ(out, "The answer is 42.") << "cut at " << cut;
    EXPECT_TRUE(f.saw_thinking());
  }
  ThinkingFilter plain;
  EXPECT_EQ(plain.Feed("Hello"), "Hello");
  EXPECT_EQ(plain.Feed(" <think>"), " <think>");  // mid-answer: text, not a block
}

// ---- refused parameters ----

TEST(RefusedParameterTest, NamesTheFieldAServerRefuses) {
  using llm_internal::RefusedParameter;
  EXPECT_EQ(RefusedParameter(400, R"({"error":{"message":"Unsupported parameter: 'max_tokens' is
      not supported with this model. Use 'max_completion_tokens' instead."}})"),
            "max_tokens");
  EXPECT_EQ(RefusedParameter(400, R"({"error":{"message":"'response_format.type' must be
      'json_schema' or 'text'"}})"),
            "response_format");
  EXPECT_EQ(RefusedParameter(400, R"({"error":"json_object is not supported"})"),
            "response_format");
  EXPECT_EQ(RefusedParameter(400, R"({"error":{"message":"Unsupported value: 'temperature' does
      not support 0 with this model."}})"),
            "temperature");
  EXPECT_EQ(RefusedParameter(400, R"({"error":"\"llama3.1\" does not support thinking"})"),
            "think");
  EXPECT_EQ(RefusedParameter(401, R"({"error":"response_format"})"), "");
  EXPECT_EQ(RefusedParameter(400, R"({"error":"bad key"})"), "");
}

// ---- Ollama's API ----

TEST(OllamaWireTest, ContextWindowIsRoundedClampedOrRefused) {
  using llm_internal::OllamaContextFor;
  EXPECT_EQ(*OllamaContextFor(100, 200, 0, "m"), 2048);
  EXPECT_EQ(*OllamaContextFor(3000, 4096, 0, "m"), 8192);
  EXPECT_EQ(*OllamaContextFor(3000, 4096, 6000, "m"), 6000);  // the model's own maximum
  auto too_big = OllamaContextFor(9000, 100, 4096, "small");
  ASSERT_FALSE(too_big.ok());
  EXPECT_THAT(too_big.status().message(), HasSubstr("chunks.size"));
}

TEST(OllamaWireTest, ReadsShowChatAndEmbedReplies) {
  EXPECT_EQ(llm_internal::ParseOllamaContextLength(
                R"({"model_info":{"general.architecture":"qwen3","qwen3.context_length":40960}})"),
            40960);
  EXPECT_EQ(llm_internal::ParseOllamaContextLength(R"({"parameters":"stop x\nnum_ctx 8192\n"})"),
            8192);
  EXPECT_FALSE(llm_internal::ParseOllamaContextLength(R"({"details":{}})").has_value());
  auto chat = llm_internal::ParseOllamaChatReply(
      R"({"model":"qwen3","message":{"role":"assistant","content":"hi","thinking":"hmm"},
          "done_reason":"stop","prompt_eval_count":12,"eval_count":5})");
  ASSERT_TRUE(chat.ok()) << chat.status().ToString();
  EXPECT_EQ(chat->content, "hi");
  EXPECT_EQ(chat->reasoning, "hmm");
  EXPECT_EQ(chat->prompt_tokens, 12);
  auto embed = llm_internal::ParseOllamaEmbedReply(R"({"embeddings":[[0.5,1],[2,3]]})", 2);
  ASSERT_TRUE(embed.ok()) << embed.status().ToString();
  EXPECT_EQ(embed->vectors[1][1], 3.0f);
}

// ---- the client against servers that behave like local and reasoning models ----

OpenAIOptions Options(const FakeOpenAIServer& server) {
  OpenAIOptions o;
  o.base_url = server.base_url();
  o.model = "test-model";
  o.timeout = 60s;
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

ChatRequest Ask(std::string prompt, bool json = false) {
  ChatRequest r;
  r.messages.push_back({"user", std::move(prompt)});
  r.json_mode = json;
  return r;
}

TEST(ReasoningClientTest, InlineThinkingIsStrippedCountedAndNeverCached) {
  FakeOpenAIServer server(Answering([](const FakeRequest&) {
    return "<think>They want JSON like {\"x\": 1}. Fine.</think>{\"x\": 2}";
  }));
  InMemoryCache cache;
  OpenAIOptions o = Options(server);
  o.cache = &cache;
  auto client = MakeClient(o);
  ChatRequest req = Ask("give x", true);
  std::string validated;
  req.validator = [&](const std::string& content) {
    validated = content;
    return Status::Ok();
  };
  auto r = client->Chat(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->content, "{\"x\": 2}");
  EXPECT_EQ(validated, "{\"x\": 2}");
  EXPECT_GT(r->reasoning_tokens, 0);
  auto again = client->Chat(Ask("give x", true));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->cache_hit);
  EXPECT_EQ(again->content, "{\"x\": 2}");
}

TEST(ReasoningClientTest, SeparateReasoningFieldsAndUsageDetails) {
  FakeOpenAIServer server([](const FakeRequest&) {
    return RawReply(200, R"({"model":"r1","choices":[{"message":{"role":"assistant",
        "content":"Paris.","reasoning_content":"The capital..."},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":9,"completion_tokens":40,
                 "completion_tokens_details":{"reasoning_tokens":33}}})");
  });
  auto client = MakeClient(Options(server));
  auto r = client->Chat(Ask("capital?"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->content, "Paris.");
  EXPECT_EQ(r->completion_tokens, 40);
  EXPECT_EQ(r->reasoning_tokens, 33);
}

TEST(ReasoningClientTest, AReplyThatNeverStopsThinkingIsAClearParseError) {
  FakeOpenAIServer server(
      [](const FakeRequest&) { return ChatCompletion("<think>first I will consider every {"); });
  auto client = MakeClient(Options(server));
  auto r = client->Chat(Ask("x"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kParse);
  EXPECT_THAT(r.status().message(), HasSubstr("llm.reasoning_effort"));
}

TEST(ReasoningClientTest, StreamedAnswersReachTheCallerWithoutThinking) {
  FakeOpenAIServer server(
      Answering([](const FakeRequest&) { return "<think>let me see</think>Forty-two."; }));
  auto client = MakeClient(Options(server));
  ChatRequest req = Ask("answer?");
  std::string seen;
  req.on_delta = [&](std::string_view d) { seen += d; };
  auto r = client->Chat(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(seen, "Forty-two.");
  EXPECT_EQ(r->content, "Forty-two.");
}

TEST(ReasoningClientTest, ThinkingSettingsAreSent) {
  FakeOpenAIServer server;
  OpenAIOptions o = Options(server);
  o.reasoning_effort = "low";
  o.think = false;
  auto client = MakeClient(o);
  ASSERT_TRUE(client->Chat(Ask("x")).ok());
  const FakeRequest req = server.request(0);
  EXPECT_EQ(req.json["reasoning_effort"], "low");
  EXPECT_EQ(req.json["chat_template_kwargs"]["enable_thinking"], false);
}

// A strict server: refuses response_format and max_tokens as OpenAI's newer models and some
// local servers do, and answers otherwise.
FakeReply Strict(const FakeRequest& r) {
  if (r.json.contains("response_format")) {
    return OpenAIError(400, "response_format of type json_object is not supported by this model");
  }
  if (r.json.contains("max_tokens")) {
    return OpenAIError(400,
                       "Unsupported parameter: 'max_tokens' is not supported with this model. "
                       "Use 'max_completion_tokens' instead.");
  }
  return ChatCompletion("{\"ok\": true}");
}

TEST(NegotiationTest, RefusedParametersAreDroppedAtOnceAndRememberedInTheCache) {
  FakeOpenAIServer server(Strict);
  InMemoryCache cache;
  OpenAIOptions o = Options(server);
  o.cache = &cache;
  {
    auto client = MakeClient(o);
    ChatRequest req = Ask("x", true);
    req.max_tokens = 50;
    auto r = client->Chat(req);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->retries, 0);  // adapting is not retrying
    EXPECT_EQ(server.request_count(), 3);
    const FakeRequest last = server.request(2);
    EXPECT_FALSE(last.json.contains("response_format"));
    EXPECT_EQ(last.json["max_completion_tokens"], 50);
    EXPECT_EQ(client->Adaptations().size(), 2u);
    // Later calls go out adapted.
    ChatRequest other = Ask("y", true);
    other.max_tokens = 60;
    ASSERT_TRUE(client->Chat(other).ok());
    EXPECT_EQ(server.request_count(), 4);
  }
  // A new client (a resumed run) starts from what the index remembers: no probing again.
  auto client = MakeClient(o);
  ChatRequest req = Ask("z", true);
  req.max_tokens = 70;
  ASSERT_TRUE(client->Chat(req).ok());
  EXPECT_EQ(server.request_count(), 5);
  EXPECT_THAT(client->Adaptations(), ::testing::Contains(HasSubstr("response_format")));
}

TEST(NegotiationTest, AJsonSchemaFallsBackToAJsonObjectThenToThePrompt) {
  std::atomic<bool> takes_object{true};
  FakeOpenAIServer server([&](const FakeRequest& r) -> FakeReply {
    if (r.json.contains("response_format")) {
      const std::string type = r.json["response_format"].value("type", "");
      if (type == "json_schema") {
        return OpenAIError(400, "'response_format.type' json_schema is not supported");
      }
      if (!takes_object) return OpenAIError(400, "response_format is not supported");
    }
    return ChatCompletion("{}");
  });
  auto client = MakeClient(Options(server));
  ChatRequest req = Ask("x", true);
  req.json_schema = R"({"type":"object","properties":{"a":{"type":"string"}}})";
  ASSERT_TRUE(client->Chat(req).ok());
  ASSERT_EQ(server.request_count(), 2);
  EXPECT_EQ(server.request(0).json["response_format"]["json_schema"]["schema"]["type"], "object");
  EXPECT_EQ(server.request(1).json["response_format"]["type"], "json_object");
  takes_object = false;
  req.messages[0].content = "y";
  ASSERT_TRUE(client->Chat(req).ok());
  ASSERT_EQ(server.request_count(), 4);
  EXPECT_FALSE(server.request(3).json.contains("response_format"));
}

TEST(NegotiationTest, ConcurrentCallsAllAdaptWhicheverLearnsFirst) {
  FakeOpenAIServer server([](const FakeRequest& r) -> FakeReply {
    if (r.json.contains("response_format")) {
      return OpenAIError(400, "response_format is not supported");
    }
    return ChatCompletion("{}", testing::FakeUsage{}, "fake-model");
  });
  auto client = MakeClient(Options(server));
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int i = 0; i < 12; ++i) {
    threads.emplace_back([&, i] {
      ChatRequest req = Ask("q" + std::to_string(i), true);
      req.json_schema = R"({"type":"object"})";
      auto r = client->Chat(req);
      if (!r.ok()) {
        ++failed;
        ADD_FAILURE() << r.status().ToString();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
}

TEST(NegotiationTest, ARefusalOfSomethingNotSentIsAnErrorNotALoop) {
  FakeOpenAIServer server([](const FakeRequest&) {
    return OpenAIError(400, "response_format is required for this deployment");
  });
  auto client = MakeClient(Options(server));
  auto r = client->Chat(Ask("x", /*json=*/false));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("HTTP 400"));
  EXPECT_EQ(server.request_count(), 1);
}

// An Ollama server: /api/show tells the model's window; /api/chat keeps only the last num_ctx
// tokens of a prompt (2,048 when none is sent), as Ollama does, and says so in the reply.
struct OllamaLike {
  std::atomic<int> truncated{0};
  std::atomic<int> chats{0};
  std::mutex mu;
  std::vector<int64_t> num_ctx_seen;

  FakeReply operator()(const FakeRequest& r) {
    if (r.path == "/api/show") {
      if (r.json.value("model", "") != "qwen3")
        return RawReply(404, R"({"error":"model not found"})");
      return RawReply(200, R"({"model_info":{"qwen3.context_length":32768},"details":{}})");
    }
    if (r.path == "/api/chat") {
      ++chats;
      int64_t ctx = 2048;
      if (r.json.contains("options") && r.json["options"].contains("num_ctx")) {
        ctx = r.json["options"]["num_ctx"].get<int64_t>();
      }
      {
        std::lock_guard lock(mu);
        num_ctx_seen.push_back(ctx);
      }
      size_t bytes = 0;
      for (const auto& m : r.json["messages"]) bytes += m["content"].get<std::string>().size();
      const bool cut = static_cast<int64_t>(bytes / 4) > ctx;
      if (cut) ++truncated;
      nlohmann::json reply = {{"model", "qwen3"},
                              {"message", {{"role", "assistant"}, {"content", cut ? "?" : "{}"}}},
                              {"done_reason", "stop"},
                              {"prompt_eval_count", std::min<int64_t>(bytes / 4, ctx)},
                              {"eval_count", 3}};
      return RawReply(200, reply.dump());
    }
    if (r.path == "/api/embed") {
      nlohmann::json vectors = nlohmann::json::array();
      for (size_t i = 0; i < r.json["input"].size(); ++i) vectors.push_back({0.5, 0.25, 1.0});
      return RawReply(200, nlohmann::json{{"embeddings", vectors}}.dump());
    }
    return RawReply(404, R"({"error":"not found"})");
  }
};

TEST(OllamaClientTest, EachRequestCarriesTheWindowItNeedsAndKeepAlive) {
  auto ollama = std::make_shared<OllamaLike>();
  FakeOpenAIServer server([ollama](const FakeRequest& r) { return (*ollama)(r); });
  OpenAIOptions o = Options(server);
  o.api_style = ApiStyle::kOllama;
  o.model = "qwen3";
  o.think = false;
  auto client = MakeClient(o);
  const std::string long_prompt(30'000, 'a');  // ~7,500 tokens: past Ollama's default window
  ChatRequest req = Ask(long_prompt + " reply in JSON", true);
  req.max_tokens = 1000;
  auto r = client->Chat(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->content, "{}");
  EXPECT_EQ(ollama->truncated.load(), 0);
  EXPECT_EQ(client->ModelContextWindow(), 32768);
  FakeRequest chat;
  for (const auto& q : server.requests()) {
    if (q.path == "/api/chat") chat = q;
  }
  EXPECT_EQ(chat.json["keep_alive"], "30m");
  EXPECT_EQ(chat.json["format"], "json");
  EXPECT_EQ(chat.json["think"], false);
  EXPECT_EQ(chat.json["options"]["num_predict"], 1000);
  EXPECT_GE(chat.json["options"]["num_ctx"].get<int64_t>(), 7500 + 1000);

  auto e = client->Embed({"one", "two"});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->dimension, 3u);
}

TEST(OllamaClientTest, AModelTheServerLacksAndAPromptTooLongAreClearErrors) {
  auto ollama = std::make_shared<OllamaLike>();
  FakeOpenAIServer server([ollama](const FakeRequest& r) { return (*ollama)(r); });
  OpenAIOptions o = Options(server);
  o.api_style = ApiStyle::kOllama;
  o.model = "llama9";
  auto missing = MakeClient(o)->Chat(Ask("x"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("ollama pull llama9"));

  o.model = "qwen3";
  auto too_long = MakeClient(o)->Chat(Ask(std::string(200'000, 'a')));
  ASSERT_FALSE(too_long.ok());
  EXPECT_THAT(too_long.status().message(), HasSubstr("does not fit the context window"));
  EXPECT_EQ(ollama->chats.load(), 0);  // refused before anything was sent
}

}  // namespace
}  // namespace grag
