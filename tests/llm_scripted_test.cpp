// The in-process models later modules test against, and the in-memory cache.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "grag/llm.h"

namespace grag {
namespace {

using ::testing::HasSubstr;

ChatRequest Ask(std::string prompt) {
  ChatRequest r;
  r.messages.push_back({"user", std::move(prompt)});
  return r;
}

TEST(ScriptedChatModelTest, RepliesFromTheQueueInOrderAndRecordsRequests) {
  ScriptedChatModel model;
  model.Push(std::string("first"));
  model.Push(Status::Unavailable("scripted outage"));
  model.Push(std::string("third"));

  auto a = model.Chat(Ask("1"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->content, "first");
  EXPECT_EQ(a->model, "scripted");
  EXPECT_TRUE(a->tokens_estimated);
  EXPECT_GT(a->completion_tokens, 0);
  EXPECT_EQ(model.Chat(Ask("2")).status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(model.Chat(Ask("3"))->content, "third");
  auto empty = model.Chat(Ask("4"));
  EXPECT_EQ(empty.status().code(), ErrorCode::kInternal);
  EXPECT_THAT(empty.status().message(), HasSubstr("no scripted reply left for request #4"));

  ASSERT_EQ(model.RequestCount(), 4u);
  EXPECT_EQ(model.Requests()[1].messages[0].content, "2");
  LlmUsage u = model.Usage();
  EXPECT_EQ(u.calls, 4);
  EXPECT_EQ(u.failures, 2);
}

TEST(ScriptedChatModelTest, RepliesFromAFunctionOfTheRequest) {
  ScriptedChatModel model([](const ChatRequest& r) -> Result<std::string> {
    return "you said " + r.messages.back().content;
  });
  EXPECT_EQ(model.Chat(Ask("hi"))->content, "you said hi");
}

TEST(ScriptedChatModelTest, ValidatesCachesAndStreamsLikeTheRealClient) {
  InMemoryCache cache;
  ScriptedModelOptions options;
  options.cache = &cache;
  options.model = "m1";
  ScriptedChatModel model(options);
  model.Push(std::string("not json"));
  model.Push(std::string("{}"));

  ChatRequest req = Ask("json please");
  req.validator = [](const std::string& c) {
    return c == "{}" ? Status::Ok() : Status::Parse("not JSON");
  };
  std::string shown;
  req.on_delta = [&](std::string_view d) { shown += d; };

  EXPECT_EQ(model.Chat(req).status().code(), ErrorCode::kParse);
  EXPECT_EQ(cache.size(), 0u);
  auto ok = model.Chat(req);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(cache.size(), 1u);
  shown.clear();
  auto hit = model.Chat(req);  // the queue is empty: only the cache can answer
  ASSERT_TRUE(hit.ok()) << hit.status().ToString();
  EXPECT_TRUE(hit->cache_hit);
  EXPECT_EQ(shown, "{}");
  EXPECT_EQ(model.RequestCount(), 2u);
  LlmUsage u = model.Usage();
  EXPECT_EQ(u.calls, 3);
  EXPECT_EQ(u.cache_hits, 1);
  EXPECT_EQ(u.rejected, 1);

  // Another model name misses the same cache.
  ScriptedModelOptions other = options;
  other.model = "m2";
  ScriptedChatModel second(other);
  second.Push(std::string("{}"));
  auto miss = second.Chat(req);
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->cache_hit);
}

TEST(ScriptedChatModelTest, IsThreadSafe) {
  ScriptedChatModel model(
      [](const ChatRequest& r) -> Result<std::string> { return r.messages.back().content; });
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::string p = std::to_string(t) + "/" + std::to_string(i);
        auto r = model.Chat(Ask(p));
        EXPECT_TRUE(r.ok() && r->content == p);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(model.RequestCount(), 400u);
  EXPECT_EQ(model.Usage().calls, 400);
}

TEST(ScriptedEmbeddingModelTest, DeterministicUnitVectorsThatShareWords) {
  ScriptedEmbeddingModel model(16);
  auto r = model.Embed({"Scrooge and Marley", "scrooge AND marley", "a lamp post", ""});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->dimension, 16u);
  ASSERT_EQ(r->vectors.size(), 4u);
  EXPECT_EQ(r->vectors[0], r->vectors[1]);  // case-insensitive words
  for (const auto& v : r->vectors) {
    double norm = 0;
    for (float x : v) norm += static_cast<double>(x) * x;
    EXPECT_NEAR(norm, 1.0, 1e-5);
  }
  EXPECT_EQ(ScriptedEmbeddingModel::HashEmbedding("Scrooge and Marley", 16), r->vectors[0]);
  EXPECT_EQ(model.Inputs().size(), 4u);
  EXPECT_EQ(model.Usage().calls, 1);
}

TEST(ScriptedEmbeddingModelTest, CustomEmbedderAndErrors) {
  ScriptedEmbeddingModel model([](const std::string& s) -> Result<std::vector<float>> {
    if (s == "bad") return Status::Unavailable("scripted failure");
    return std::vector<float>{static_cast<float>(s.size()), 1.0f};
  });
  auto ok = model.Embed({"abc"});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->vectors[0], (std::vector<float>{3.0f, 1.0f}));
  EXPECT_EQ(model.Embed({"x", "bad"}).status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(model.Usage().failures, 1);
}

TEST(InMemoryCacheTest, StoresReplacesAndKeepsModelAndKind) {
  InMemoryCache cache;
  EXPECT_FALSE(cache.Get("k").has_value());
  ASSERT_TRUE(cache.Put("k", "v1", "m", "chat").ok());
  ASSERT_TRUE(cache.Put("k", "v2", "m", "chat").ok());
  EXPECT_EQ(cache.Get("k"), "v2");
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.entries().at("k").kind, "chat");
  cache.Clear();
  EXPECT_EQ(cache.size(), 0u);
}

TEST(LlmUsageTest, Adds) {
  LlmUsage a;
  a.calls = 1;
  a.prompt_tokens = 10;
  LlmUsage b;
  b.calls = 2;
  b.completion_tokens = 5;
  a += b;
  EXPECT_EQ(a.calls, 3);
  EXPECT_EQ(a.prompt_tokens, 10);
  EXPECT_EQ(a.completion_tokens, 5);
  EXPECT_EQ(EstimateTokens(""), 0u);
  EXPECT_EQ(EstimateTokens("abcd"), 1u);
  EXPECT_EQ(EstimateTokens("abcde"), 2u);
}

}  // namespace
}  // namespace grag
