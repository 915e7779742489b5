// Basic and hybrid search answers (grag/passage_search.h), the reranker through the loopback
// server, and the query router (grag/router.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "grag/indexer.h"
#include "grag/lexical_embedder.h"
#include "grag/passage_search.h"
#include "grag/router.h"
#include "support/fake_openai_server.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::FakeOpenAIServer;
using testing::FakeRequest;
using ::testing::HasSubstr;
using testing::RawReply;
using testing::TempDir;

const Tokenizer& Tok() { return *Tokenizer::Get("o200k_base").value(); }

class PassageSearchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<std::pair<std::string, std::string>> docs = {
        {"Ada Lovelace",
         "Ada Lovelace was an English mathematician. She wrote the first published algorithm "
         "for Charles Babbage's Analytical Engine."},
        {"Analytical Engine",
         "The Analytical Engine was a proposed mechanical general-purpose computer designed by "
         "Charles Babbage. It was never built in his lifetime."},
        {"Charles Babbage",
         "Charles Babbage was an English polymath and mechanical engineer who originated the "
         "concept of a digital programmable computer."},
        {"Bread",
         "Bread is a staple food prepared from a dough of flour and water, usually by "
         "baking. Sourdough bread uses wild yeast."},
    };
    std::filesystem::create_directories(dir_.path() / "input");
    std::ofstream out(dir_ / "input/docs.jsonl");
    for (const auto& [title, text] : docs) {
      out << nlohmann::json{{"id", title}, {"title", title}, {"text", title + "\n\n" + text}}.dump()
          << "\n";
    }
    out.close();
    Config config;
    config.root = dir_.path().string();
    store_ = Store::Open(dir_ / "output/index.db").value();
    IndexContext ctx;
    ctx.store = store_.get();
    ctx.embedder = &embedder_;
    auto s = RunIndex(config, {}, ctx);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
  }

  std::unique_ptr<Retriever> Open(RerankModel* reranker = nullptr) {
    RetrieverOptions o;
    o.reranker = reranker;
    auto r = Retriever::Open(*store_, &embedder_, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : nullptr;
  }

  TempDir dir_;
  LexicalEmbedder embedder_;
  std::unique_ptr<Store> store_;
};

TEST_F(PassageSearchTest, ExtractiveAnswerQuotesTheBestSentencesWithCitations) {
  auto retriever = Open();
  ASSERT_NE(retriever, nullptr);
  std::string streamed;
  PassageSearchOptions o;
  o.on_answer_delta = [&](std::string_view d) { streamed += d; };
  auto r =
      PassageSearch(*store_, *retriever, nullptr, Tok(), "Who designed the Analytical Engine?", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->llm);
  EXPECT_FALSE(r->nothing_found);
  EXPECT_THAT(r->answer, HasSubstr("designed by Charles Babbage"));
  EXPECT_EQ(streamed, r->answer);
  ASSERT_FALSE(r->citations.empty());
  bool cites_the_engine = false;
  for (const auto& c : r->citations) {
    cites_the_engine |= r->retrieval.chunks.at(c.chunk).document_id == "Analytical Engine";
  }
  EXPECT_TRUE(cites_the_engine) << r->answer;
  EXPECT_GE(r->placed, 1u);
  EXPECT_LE(r->context_tokens, o.context_budget_tokens);
  EXPECT_TRUE(r->prompt.empty());
}

TEST_F(PassageSearchTest, TheModelGetsThePassagesInRankOrderAndItsCitationsResolve) {
  auto retriever = Open();
  ASSERT_NE(retriever, nullptr);
  ScriptedChatModel chat;
  chat.Push(std::string("Charles Babbage designed it [S1]; Ada Lovelace wrote for it (S2). [S99]"));
  PassageSearchOptions o;
  o.retrieval.method = RetrievalMethod::kVector;  // basic search
  auto r =
      PassageSearch(*store_, *retriever, &chat, Tok(), "Who designed the Analytical Engine?", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->llm);
  ASSERT_EQ(chat.RequestCount(), 1u);
  const std::string prompt = chat.Requests()[0].messages.back().content;
  EXPECT_EQ(prompt, r->prompt);
  EXPECT_THAT(prompt, HasSubstr("<question>Who designed the Analytical Engine?</question>"));
  EXPECT_THAT(prompt, HasSubstr("[S1] " + r->retrieval.chunks[0].document_id));
  // S99 is no placed passage: not a citation.
  ASSERT_EQ(r->citations.size(), 2u);
  EXPECT_EQ(r->citations[0].id, "S1");
  EXPECT_EQ(r->citations[1].id, "S2");
  // A tight budget places fewer passages, never half of one.
  o.context_budget_tokens = 60;
  chat.Push(std::string("ok"));
  auto tight =
      PassageSearch(*store_, *retriever, &chat, Tok(), "Who designed the Analytical Engine?", o);
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->placed, 1u);
  o.prompt = "no placeholders";
  EXPECT_EQ(PassageSearch(*store_, *retriever, &chat, Tok(), "x y", o).status().code(),
            ErrorCode::kInvalidArgument);
}

TEST_F(PassageSearchTest, TheRerankerReordersTheHeadThroughTheRealClient) {
  // A reranker that puts the last document first: whatever the fusion said, "Bread" leads.
  FakeOpenAIServer server([](const FakeRequest& r) {
    if (r.path != "/v1/rerank") return RawReply(404, "{}");
    const auto& docs = r.json["documents"];
    nlohmann::json results = nlohmann::json::array();
    for (size_t i = 0; i < docs.size(); ++i) {
      const size_t index = docs.size() - 1 - i;
      results.push_back(
          {{"index", index}, {"relevance_score", 1.0 - 0.1 * static_cast<double>(i)}});
    }
    return RawReply(200, nlohmann::json{{"results", results}}.dump());
  });
  OpenAIOptions oo;
  oo.base_url = server.base_url();
  oo.model = "rerank-test";
  InMemoryCache cache;
  oo.cache = &cache;
  auto client = OpenAIClient::Create(oo);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto retriever = Open(client->get());
  RetrievalOptions o;
  o.top_k = 4;
  o.rerank_top_n = 3;
  auto plain = Open()->Retrieve("Who designed the Analytical Engine?", o);
  auto reranked = retriever->Retrieve("Who designed the Analytical Engine?", o);
  ASSERT_TRUE(plain.ok() && reranked.ok()) << reranked.status().ToString();
  ASSERT_GE(plain->chunks.size(), 3u);
  EXPECT_TRUE(reranked->stats.reranked);
  EXPECT_EQ(reranked->chunks[0].chunk_id, plain->chunks[2].chunk_id);
  EXPECT_EQ(reranked->chunks[2].chunk_id, plain->chunks[0].chunk_id);
  EXPECT_TRUE(reranked->chunks[0].rerank_score.has_value());
  if (plain->chunks.size() > 3) {
    EXPECT_EQ(reranked->chunks[3].chunk_id, plain->chunks[3].chunk_id);
  }
  ASSERT_EQ(server.request_count(), 1);
  const FakeRequest req = server.request(0);
  EXPECT_EQ(req.json["model"], "rerank-test");
  EXPECT_EQ(req.json["query"], "Who designed the Analytical Engine?");
  EXPECT_EQ(req.json["documents"].size(), 3u);
  EXPECT_EQ(req.json["top_n"], 3);
  // The same question again is a cache hit: no request.
  ASSERT_TRUE(retriever->Retrieve("Who designed the Analytical Engine?", o).ok());
  EXPECT_EQ(server.request_count(), 1);
  // A TEI-style bare list is read too; a reply without results is a parse error.
  server.SetHandler([](const FakeRequest&) {
    return RawReply(200, R"([{"index": 1, "score": 0.9}, {"index": 0, "score": 0.1}])");
  });
  auto tei = (*client)->Rerank("q", {"a", "b"}, 2);
  ASSERT_TRUE(tei.ok()) << tei.status().ToString();
  ASSERT_EQ(tei->size(), 2u);
  EXPECT_EQ((*tei)[0].index, 1u);
  server.SetHandler([](const FakeRequest&) { return RawReply(200, R"({"nothing": 1})"); });
  EXPECT_EQ((*client)->Rerank("q2", {"a", "b"}, 2).status().code(), ErrorCode::kParse);
}

// ---------------------------------------------------------------- the router

TEST(QueryRouterTest, RulesSendCorpusQuestionsToGlobalAndNamedThingsToLocalOrHybrid) {
  EXPECT_EQ(RouteByRules("What are the main themes?", 0).kind, QuestionKind::kGlobal);
  EXPECT_EQ(RouteByRules("Summarize the recurring problems across these documents", 0).kind,
            QuestionKind::kGlobal);
  EXPECT_EQ(RouteByRules("Who is Jacob Marley?", 1).kind, QuestionKind::kLookup);
  EXPECT_EQ(RouteByRules("Are Christopher Nolan and Sathish Kalathil both film directors?", 2).kind,
            QuestionKind::kMultiHop);
  EXPECT_EQ(RouteByRules("Which of the two tornado outbreaks killed the most people?", 0).kind,
            QuestionKind::kMultiHop);
  EXPECT_EQ(RouteByRules("When was the Eiffel Tower built?", 1).kind, QuestionKind::kLookup);
  EXPECT_THAT(RouteByRules("What are the main themes?", 0).reason, HasSubstr("main themes"));
  EXPECT_EQ(QuestionKindName(QuestionKind::kMultiHop), "multi_hop");
}

TEST(QueryRouterTest, TheModelCanDecideAndAnUnreadableReplyFallsBackToTheRules) {
  ScriptedChatModel chat;
  chat.Push(std::string(R"(```json
{"kind": "multi_hop", "reason": "joins two films"}
```)"));
  auto d = RouteWithModel(chat, "Q: {{question}}", "Who directed it?", 0);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->kind, QuestionKind::kMultiHop);
  EXPECT_TRUE(d->by_llm);
  EXPECT_EQ(d->reason, "joins two films");
  EXPECT_EQ(chat.Requests().at(0).messages.back().content, "Q: Who directed it?");
  EXPECT_TRUE(chat.Requests().at(0).json_mode);
  chat.Push(std::string("I think it is global"));
  auto fallback = RouteWithModel(chat, "{{question}}", "What are the main themes?", 0);
  ASSERT_TRUE(fallback.ok());
  EXPECT_EQ(fallback->kind, QuestionKind::kGlobal);
  EXPECT_FALSE(fallback->by_llm);
  EXPECT_THAT(fallback->reason, HasSubstr("could not be read"));
  chat.Push(Status::Unavailable("down"));
  EXPECT_EQ(RouteWithModel(chat, "{{question}}", "x", 0).status().code(), ErrorCode::kUnavailable);
}

}  // namespace
}  // namespace grag
