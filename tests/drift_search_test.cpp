// DRIFT search on a small fixed graph with scripted chat and embedding models: the call bound,
// report matching (with and without HyDE), follow-up selection and duplicates, bad replies,
// citations across calls; and its reply parsers and follow-up selection on their own.
#include "grag/drift_search.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_citations.h"
#include "grag/extract.h"
#include "grag/store.h"
#include "grag/tokenizer.h"
#include "query/drift_replies.h"
#include "query/drift_select.h"
#include "support/fake_graphrag_llm.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::PromptKind;

constexpr char kEmbedModel[] = "scripted-embedding";
constexpr char kQuestion[] = "How did the ghosts change the old miser?";

const Tokenizer& Tok() {
  static const Tokenizer* tok = Tokenizer::Get("o200k_base").value();
  return *tok;
}

std::string LastUser(const ChatRequest& r) { return r.messages.back().content; }

// A report long enough (about 275 tokens) that a 500-token primer prompt holds only one.
std::string LongReport(const std::string& title, const std::string& sentence) {
  std::string out = "# " + title + "\n\n";
  for (int i = 0; i < 25; ++i) out += sentence + " ";
  return out;
}

// Three communities of A Christmas Carol's people, with chunks, reports and report embeddings
// that put report 1 nearest the question, then 2, then 3 (4 dimensions).
class DriftTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(dir_ / "index.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    for (const char* name : {"Scrooge", "Marley", "Cratchit", "Tiny Tim", "Fezziwig"}) {
      EntityRecord e;
      e.name = name;
      e.name_key = NormalizeEntityName(name);
      e.type = "person";
      e.description = std::string(name) + " is a person in the story.";
      ids_[name] = store_->UpsertEntity(e).value();
    }
    Document d;
    d.id = "carol.txt";
    d.title = "carol.txt";
    d.source_path = "carol.txt";
    d.content_hash = "h";
    const std::vector<std::string> texts = {
        "Marley was dead, and Scrooge was his partner.",
        "Bob Cratchit and Tiny Tim kept Christmas in Camden Town.",
        "Old Fezziwig gave a ball for his apprentices.",
    };
    for (const auto& t : texts) d.text += t + "\n";
    ASSERT_TRUE(store_->UpsertDocument(d).ok());
    std::vector<ChunkRecord> chunks;
    for (size_t i = 0; i < texts.size(); ++i) {
      ChunkRecord c;
      c.id = "carol.txt#" + std::to_string(i);
      c.document_id = d.id;
      c.index = static_cast<int64_t>(i);
      c.text = texts[i];
      chunks.push_back(c);
      chunk_ids_.push_back(c.id);
    }
    ASSERT_TRUE(store_->ReplaceDocumentChunks(d.id, chunks).ok());
    Link("Scrooge", {chunk_ids_[0]});
    Link("Marley", {chunk_ids_[0]});
    Link("Cratchit", {chunk_ids_[1]});
    Link("Tiny Tim", {chunk_ids_[1]});
    Link("Fezziwig", {chunk_ids_[2]});
    ASSERT_TRUE(store_->RecomputeGraphStats().ok());
    std::vector<CommunityRecord> communities = {Community(1, {ids_["Scrooge"], ids_["Marley"]}),
                                                Community(2, {ids_["Cratchit"], ids_["Tiny Tim"]}),
                                                Community(3, {ids_["Fezziwig"]})};
    ASSERT_TRUE(store_->ReplaceCommunities(ClusteringRecord{}, communities).ok());
    Report(1, "Scrooge and Marley", "Scrooge and Marley were partners in the counting-house.",
           {1, 0, 0, 0});
    Report(2, "The Cratchit family", "Bob Cratchit and Tiny Tim keep a poor but merry home.",
           {0.8f, 0.6f, 0, 0});
    Report(3, "Fezziwig's ball", "Fezziwig was a kind master who gave a Christmas ball.",
           {0, 0, 1, 0});
    embedder_ = std::make_unique<ScriptedEmbeddingModel>(
        [](const std::string& input) -> Result<std::vector<float>> {
          if (input == kQuestion) return std::vector<float>{1, 0, 0, 0};
          if (input == "HYDE TEXT") return std::vector<float>{0, 0, 1, 0};
          return std::vector<float>{0, 0, 0, 1};
        },
        kEmbedModel);
  }

  static CommunityRecord Community(int64_t id, std::vector<int64_t> members) {
    CommunityRecord c;
    c.id = id;
    c.entity_ids = std::move(members);
    return c;
  }
  void Link(const std::string& entity, const std::vector<std::string>& chunks) {
    ASSERT_TRUE(store_->SetEntityChunks(ids_[entity], chunks).ok());
  }
  void Report(int64_t community, const std::string& title, const std::string& sentence,
              std::vector<float> vector) {
    ReportRecord r;
    r.community_id = community;
    r.title = title;
    r.summary = sentence;
    r.full_content = LongReport(title, sentence);
    ASSERT_TRUE(store_->PutReport(r).ok());
    EmbeddingRecord e;
    e.owner = EmbeddingOwner::kReport;
    e.owner_id = std::to_string(community);
    e.model = kEmbedModel;
    e.vector = std::move(vector);
    ASSERT_TRUE(store_->PutEmbeddings({e}).ok());
  }

  // Small folds (one report each), two of them, no hybrid chunk lane (names only).
  DriftSearchOptions Options() const {
    DriftSearchOptions o;
    o.primer_fold_tokens = 500;
    o.primer_top_k = 3;
    o.primer_folds = 2;
    o.local.hybrid_chunks = false;
    o.concurrency = 1;  // requests in a fixed order
    return o;
  }

  static std::string Reply(const std::string& answer_key, const std::string& answer, int score,
                           const std::vector<std::string>& follow_ups) {
    nlohmann::json j = {{answer_key, answer}, {"score", score}, {"follow_up_queries", follow_ups}};
    return j.dump();
  }

  std::vector<std::string> PromptsOf(const ScriptedChatModel& chat, const std::string& kind) {
    std::vector<std::string> out;
    for (const auto& r : chat.Requests()) {
      if (PromptKind(LastUser(r)) == kind) out.push_back(LastUser(r));
    }
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  std::map<std::string, int64_t> ids_;
  std::vector<std::string> chunk_ids_;
  std::unique_ptr<ScriptedEmbeddingModel> embedder_;
};

TEST_F(DriftTest, HydeMatchesReportsAndPrimerSeesTheTopOnes) {
  ScriptedChatModel chat([&](const ChatRequest& r) -> Result<std::string> {
    const std::string kind = PromptKind(LastUser(r));
    if (kind == "drift_hyde") return std::string("HYDE TEXT");
    if (kind == "drift_primer") return Reply("intermediate_answer", "Partial [C1].", 50, {});
    return std::string("The answer.");
  });
  DriftSearchOptions o = Options();
  o.primer_top_k = 2;
  auto r = DriftSearch(*store_, chat, embedder_.get(), Tok(), kQuestion, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // The HyDE prompt imitates the highest-weight report (each community's members share one
  // chunk, so all weigh 1): the lowest id on the tie.
  const auto hyde = PromptsOf(chat, "drift_hyde");
  ASSERT_EQ(hyde.size(), 1u);
  EXPECT_THAT(hyde[0], HasSubstr("# Scrooge and Marley"));
  // HyDE's text matches report 3 exactly, the question report 1: those two, HyDE's first.
  ASSERT_EQ(r->primer_reports.size(), 2u);
  EXPECT_EQ(r->primer_reports[0].community_id, 1);  // cosine 1 with the question, lower id
  EXPECT_EQ(r->primer_reports[1].community_id, 3);  // cosine 1 with HyDE's text
  const auto primer = PromptsOf(chat, "drift_primer");
  ASSERT_EQ(primer.size(), 2u);  // one report per fold
  EXPECT_THAT(primer[0], HasSubstr("[C1]"));
  EXPECT_THAT(primer[1], HasSubstr("[C3]"));
  for (const auto& p : primer) EXPECT_THAT(p, Not(HasSubstr("[C2]")));

  // Without HyDE the question alone matches: reports 1 and 2.
  ScriptedChatModel chat2([&](const ChatRequest& req) -> Result<std::string> {
    if (PromptKind(LastUser(req)) == "drift_primer")
      return Reply("intermediate_answer", "Partial.", 50, {});
    return std::string("The answer.");
  });
  o.hyde = false;
  auto r2 = DriftSearch(*store_, chat2, embedder_.get(), Tok(), kQuestion, o);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  ASSERT_EQ(r2->primer_reports.size(), 2u);
  EXPECT_EQ(r2->primer_reports[1].community_id, 2);
  EXPECT_EQ(chat2.RequestCount(), 3u);  // primer 2 + reduce 1
}

TEST_F(DriftTest, CallBoundIsExactWhenEveryReplyHasFollowUps) {
  // Every follow-up names an entity, so each one is asked.
  std::vector<std::string> names = {"Scrooge", "Marley", "Cratchit", "Tiny Tim", "Fezziwig"};
  std::atomic<int> n{0};
  ScriptedChatModel chat([&](const ChatRequest& r) -> Result<std::string> {
    const std::string kind = PromptKind(LastUser(r));
    if (kind == "drift_hyde") return std::string("HYDE TEXT");
    std::vector<std::string> f;
    const int k = n++;
    for (size_t i = 0; i < names.size(); ++i)
      f.push_back("What did " + names[i] + " think of w" + std::string(1, char('a' + k)) +
                  std::string(1, char('a' + i)) + "x?");  // one new word each: no duplicates
    if (kind == "drift_primer") return Reply("intermediate_answer", "Partial.", 90, f);
    if (kind == "drift_local") return Reply("response", "A fact.", 90, f);
    return std::string("The answer.");
  });
  const DriftSearchOptions o = Options();
  auto plan = PlanDriftSearch(*store_, embedder_.get(), Tok(), kQuestion, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->max_calls, 10);
  EXPECT_EQ(plan->cost_note,
            "at most 10 calls: hyde 1 + primer 2 + 2\u00d73 follow-ups + reduce 1");
  auto r = DriftSearch(*store_, chat, embedder_.get(), Tok(), kQuestion, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(chat.RequestCount(), 10u);
  EXPECT_EQ(r->stats.calls(), 10);
  EXPECT_EQ(r->stats.max_calls, plan->max_calls);
  EXPECT_EQ(r->stats.local_calls, 6);
  EXPECT_EQ(PromptsOf(chat, "drift_local").size(), 6u);

  // A lower cap trims the follow-ups, never the reduce.
  ScriptedChatModel capped([&](const ChatRequest& req) -> Result<std::string> {
    const std::string kind = PromptKind(LastUser(req));
    if (kind == "drift_primer")
      return Reply("intermediate_answer", "Partial.", 90, {"Who is Marley?", "Who is Fezziwig?"});
    if (kind == "drift_local") return Reply("response", "A fact.", 90, {});
    return std::string("The answer.");
  });
  DriftSearchOptions c = o;
  c.max_calls = 5;
  auto r2 = DriftSearch(*store_, capped, embedder_.get(), Tok(), kQuestion, c);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(capped.RequestCount(), 5u);  // hyde 1 + primer 2 + 1 follow-up + reduce 1
  EXPECT_EQ(r2->stats.max_calls, 5);
  EXPECT_EQ(PromptsOf(capped, "drift_reduce").size(), 1u);
}

TEST_F(DriftTest, SelectionIsByScore) {
  // The fold with report 1 proposes Marley (score 80), the fold with report 2 Cratchit (20).
  auto responder = [&](const ChatRequest& r) -> Result<std::string> {
    const std::string p = LastUser(r);
    const std::string kind = PromptKind(p);
    if (kind == "drift_primer") {
      if (p.find("[C1]") != std::string::npos)
        return Reply("intermediate_answer", "Partners.", 80, {"Who is Marley?"});
      return Reply("intermediate_answer", "A family.", 20, {"Who is Cratchit?"});
    }
    if (kind == "drift_local") return Reply("response", "A fact.", 50, {});
    return std::string("The answer.");
  };
  DriftSearchOptions o = Options();
  o.hyde = false;
  o.primer_top_k = 2;
  o.depth = 1;
  o.breadth = 1;
  ScriptedChatModel chat(responder);
  auto r = DriftSearch(*store_, chat, embedder_.get(), Tok(), kQuestion, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto local = PromptsOf(chat, "drift_local");
  ASSERT_EQ(local.size(), 1u);
  EXPECT_THAT(local[0], HasSubstr("<question>Who is Marley?</question>"));
  EXPECT_THAT(local[0], HasSubstr("<overall_question>" + std::string(kQuestion)));

  // Room for both, but the 20-scored answer's follow-ups are off-track.
  o.breadth = 3;
  o.min_parent_score = 30;
  ScriptedChatModel chat2(responder);
  auto r2 = DriftSearch(*store_, chat2, embedder_.get(), Tok(), kQuestion, o);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  local = PromptsOf(chat2, "drift_local");
  ASSERT_EQ(local.size(), 1u);
  EXPECT_THAT(local[0], HasSubstr("Who is Marley?"));
}

TEST_F(DriftTest, DuplicatesAreAskedOnce) {
  ScriptedChatModel chat([&](const ChatRequest& r) -> Result<std::string> {
    const std::string kind = PromptKind(LastUser(r));
    if (kind == "drift_primer") {
      return Reply("intermediate_answer", "Partial.", 60,
                   {"Who was Marley?", "who was MARLEY", "1. \"Who was Marley?\"",
                    "How did the ghosts change the old miser?", "Who is Fezziwig?"});
    }
    if (kind == "drift_local") return Reply("response", "A fact.", 50, {"Who was Marley ?"});
    return std::string("The answer.");
  });
  DriftSearchOptions o = Options();
  o.hyde = false;
  o.primer_folds = 1;
  o.primer_fold_tokens = 2000;
  auto r = DriftSearch(*store_, chat, embedder_.get(), Tok(), kQuestion, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto local = PromptsOf(chat, "drift_local");
  ASSERT_EQ(local.size(), 2u);  // Marley once, Fezziwig once; the question itself never
  EXPECT_THAT(local[0], HasSubstr("<question>Who was Marley?</question>"));
  EXPECT_THAT(local[1], HasSubstr("<question>Who is Fezziwig?</question>"));
  EXPECT_GE(r->stats.duplicates, 3);
}

TEST_F(DriftTest, BadRepliesAreHandled) {
  ScriptedChatModel chat([&](const ChatRequest& r) -> Result<std::string> {
    const std::string p = LastUser(r);
    const std::string kind = PromptKind(p);
    if (kind == "drift_primer") {
      return Reply("intermediate_answer", "Partial.", 60,
                   {"Who is Marley?", "Who is Cratchit?", "Who is Fezziwig?"});
    }
    if (kind == "drift_local") {
      if (p.find("<question>Who is Marley?") != std::string::npos)
        return std::string("Marley was dead: to begin with.");  // prose
      if (p.find("<question>Who is Cratchit?") != std::string::npos)
        return Status::Unavailable("HTTP 503");
      return std::string(R"(```json
{"response": "Fezziwig gave a ball.", "score": "40", "follow_up_queries": ["Who danced at)");
    }
    return std::string("The answer.");
  });
  DriftSearchOptions o = Options();
  o.hyde = false;
  o.primer_folds = 1;
  o.primer_fold_tokens = 2000;
  o.depth = 1;
  auto r = DriftSearch(*store_, chat, embedder_.get(), Tok(), kQuestion, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.unparseable, 1);
  EXPECT_EQ(r->stats.failed, 1);
  ASSERT_EQ(r->actions.size(), 4u);
  EXPECT_EQ(r->actions[1].outcome, DriftOutcome::kUnparseable);
  EXPECT_EQ(r->actions[1].answer, "Marley was dead: to begin with.");
  EXPECT_EQ(r->actions[1].score, 0);
  EXPECT_EQ(r->actions[2].outcome, DriftOutcome::kFailed);
  EXPECT_EQ(r->actions[3].outcome, DriftOutcome::kOk);
  EXPECT_EQ(r->actions[3].answer, "Fezziwig gave a ball.");
  EXPECT_EQ(r->actions[3].score, 40);
  const auto reduce = PromptsOf(chat, "drift_reduce");
  ASSERT_EQ(reduce.size(), 1u);
  EXPECT_THAT(reduce[0], HasSubstr("Marley was dead: to begin with."));
  EXPECT_THAT(reduce[0], HasSubstr("Fezziwig gave a ball."));
  // The 40-scored note before the 0-scored one, the primer's first.
  EXPECT_LT(reduce[0].find("Partial."), reduce[0].find("Fezziwig gave a ball."));
  EXPECT_LT(reduce[0].find("Fezziwig gave a ball."), reduce[0].find("Marley was dead"));
  EXPECT_EQ(r->answer, "The answer.");
}

TEST_F(DriftTest, AllPrimerCallsFailing) {
  ScriptedChatModel chat([&](const ChatRequest& r) -> Result<std::string> {
    if (PromptKind(LastUser(r)) == "drift_hyde") return std::string("HYDE TEXT");
    return Status::Unavailable("HTTP 503 from the model server");
  });
  auto r = DriftSearch(*store_, chat, embedder_.get(), Tok(), kQuestion, Options());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("all 2 primer calls failed"));
  EXPECT_THAT(r.status().message(), HasSubstr("HTTP 503"));
}

TEST_F(DriftTest, NoFollowUpsReducesThePrimer) {
  ScriptedChatModel chat([&](const ChatRequest& r) -> Result<std::string> {
    const std::string kind = PromptKind(LastUser(r));
    if (kind == "drift_hyde") return std::string("HYDE TEXT");
    if (kind == "drift_primer") return Reply("intermediate_answer", "Only the primer.", 70, {});
    return std::string("The answer.");
  });
  auto r = DriftSearch(*store_, chat, embedder_.get(), Tok(), kQuestion, Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(chat.RequestCount(), 4u);  // hyde, 2 primer folds, reduce
  EXPECT_EQ(r->stats.local_calls, 0);
  const auto reduce = PromptsOf(chat, "drift_reduce");
  ASSERT_EQ(reduce.size(), 1u);
  EXPECT_THAT(reduce[0], HasSubstr("Only the primer."));
}

TEST_F(DriftTest, OneChunkNumberingAcrossCalls) {
  // Marley and Scrooge were both extracted from chunk 0; Fezziwig from chunk 2.
  ScriptedChatModel chat([&](const ChatRequest& r) -> Result<std::string> {
    const std::string p = LastUser(r);
    const std::string kind = PromptKind(p);
    if (kind == "drift_primer") {
      return Reply("intermediate_answer", "Partners [C1].", 60,
                   {"Who is Fezziwig?", "Who is Marley?", "Who is Scrooge?"});
    }
    if (kind == "drift_local") return Reply("response", "A fact.", 50, {});
    return std::string("Marley was Scrooge's partner [S2] [C1]; Fezziwig danced [S1].");
  });
  DriftSearchOptions o = Options();
  o.hyde = false;
  o.primer_folds = 1;
  o.primer_fold_tokens = 2000;
  o.depth = 1;
  auto r = DriftSearch(*store_, chat, embedder_.get(), Tok(), kQuestion, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto local = PromptsOf(chat, "drift_local");
  ASSERT_EQ(local.size(), 3u);
  // Fezziwig's context is first: its chunk is S1; chunk 0 is S2 in both later contexts.
  EXPECT_THAT(local[0], HasSubstr("[S1] carol.txt, chunk 2:"));
  EXPECT_THAT(local[1], HasSubstr("[S2] carol.txt, chunk 0:"));
  EXPECT_THAT(local[2], HasSubstr("[S2] carol.txt, chunk 0:"));
  EXPECT_THAT(local[2], Not(HasSubstr("[S1]")));
  ASSERT_EQ(r->citations.size(), 3u);
  EXPECT_EQ(r->citations[0].id, "S2");
  EXPECT_EQ(r->citations[0].chunk_id, chunk_ids_[0]);
  EXPECT_EQ(r->citations[1].id, "C1");
  EXPECT_EQ(r->citations[1].kind, LocalItemType::kReport);
  EXPECT_EQ(r->citations[1].community_id, 1);
  EXPECT_EQ(r->citations[2].id, "S1");
  EXPECT_EQ(r->citations[2].chunk_id, chunk_ids_[2]);
  EXPECT_EQ(r->actions[0].cited, std::vector<std::string>{"C1"});
}

// Chunk labels follow the order of the actions, not the order in which their contexts finish
// building: asked twice, with a different context slowed down each time, the question gives
// byte-identical prompts, so the second run is answered wholly from the reply cache.
TEST_F(DriftTest, LabelsDoNotDependOnCompletionOrder) {
  // Entity embeddings, so each follow-up's context embeds its question (orthogonal to every
  // entity: matching stays by name).
  std::vector<EmbeddingRecord> vectors;
  for (const auto& [name, id] : ids_) {
    EmbeddingRecord e;
    e.owner = EmbeddingOwner::kEntity;
    e.owner_id = std::to_string(id);
    e.model = kEmbedModel;
    e.vector = {0, 1, 0, 0};
    vectors.push_back(e);
  }
  ASSERT_TRUE(store_->PutEmbeddings(vectors).ok());
  std::string slow;  // the follow-up whose context is built last
  ScriptedEmbeddingModel embedder(
      [&slow](const std::string& input) -> Result<std::vector<float>> {
        if (input == slow) std::this_thread::sleep_for(std::chrono::milliseconds(150));
        if (input == kQuestion) return std::vector<float>{1, 0, 0, 0};
        return std::vector<float>{0, 0, 0, 1};
      },
      kEmbedModel);
  std::atomic<int> calls{0};
  InMemoryCache cache;
  ScriptedModelOptions mo;
  mo.cache = &cache;
  ScriptedChatModel chat(
      [&](const ChatRequest& r) -> Result<std::string> {
        ++calls;
        const std::string kind = PromptKind(LastUser(r));
        if (kind == "drift_primer") {
          return Reply("intermediate_answer", "Partners [C1].", 60,
                       {"Who is Fezziwig?", "Who is Marley?", "Who is Scrooge?"});
        }
        if (kind == "drift_local") return Reply("response", "A fact.", 50, {});
        return std::string("Marley was Scrooge's partner [S2]; Fezziwig danced [S1].");
      },
      mo);
  DriftSearchOptions o = Options();
  o.hyde = false;
  o.primer_folds = 1;
  o.primer_fold_tokens = 2000;
  o.depth = 1;
  o.concurrency = 3;  // the three contexts are built at once
  slow = "Who is Fezziwig?";
  auto first = DriftSearch(*store_, chat, &embedder, Tok(), kQuestion, o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(calls.load(), 5);  // primer, 3 follow-ups, reduce
  for (const std::string& p : PromptsOf(chat, "drift_local")) {
    if (p.find("Who is Fezziwig?") != std::string::npos) {
      EXPECT_THAT(p, HasSubstr("[S1] carol.txt, chunk 2:"));  // first action, though built last
    } else {
      EXPECT_THAT(p, HasSubstr("[S2] carol.txt, chunk 0:"));
    }
  }
  slow = "Who is Scrooge?";
  auto second = DriftSearch(*store_, chat, &embedder, Tok(), kQuestion, o);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(calls.load(), 5);  // every prompt the same: all from the cache
  EXPECT_EQ(second->answer, first->answer);
  ASSERT_EQ(second->citations.size(), 2u);
  EXPECT_EQ(second->citations[0].chunk_id, chunk_ids_[0]);
  EXPECT_EQ(second->citations[1].chunk_id, chunk_ids_[2]);
}

// Character-level citations through DRIFT: a cited chunk's span is in the follow-up prompt that
// placed it; a cited report's in its community's chunks. This index predates chunk offsets
// (none stored), so the chunks are located in the document's text.
TEST_F(DriftTest, CitationsGetSpansInsideTheContextsUsed) {
  ScriptedChatModel chat([&](const ChatRequest& r) -> Result<std::string> {
    const std::string kind = PromptKind(LastUser(r));
    if (kind == "drift_primer") {
      return Reply("intermediate_answer", "Partners [C1].", 60,
                   {"Who is Fezziwig?", "Who is Marley?"});
    }
    if (kind == "drift_local") return Reply("response", "A fact.", 50, {});
    return std::string(
        "Marley was Scrooge's partner [S2]. Scrooge and Marley kept a counting-house [C1]. "
        "Fezziwig gave a ball for his apprentices [S1].");
  });
  DriftSearchOptions o = Options();
  o.hyde = false;
  o.primer_folds = 1;
  o.primer_fold_tokens = 2000;
  o.depth = 1;
  auto r = DriftSearch(*store_, chat, embedder_.get(), Tok(), kQuestion, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  QueryResult result;
  result.method = QueryMethod::kDrift;
  result.drift = *r;
  auto cited = LocateCitations(*store_, SpanOptions{}, result);
  ASSERT_TRUE(cited.ok()) << cited.status().ToString();
  ASSERT_EQ(cited->size(), 3u);
  const auto local = PromptsOf(chat, "drift_local");
  std::map<std::string, SourceCitation> by_id;
  for (const auto& c : *cited) by_id[c.id] = c;
  ASSERT_EQ(by_id.count("S2"), 1u);
  const SourceCitation& s2 = by_id["S2"];
  EXPECT_EQ(s2.kind, "chunk");
  EXPECT_EQ(s2.claim, "Marley was Scrooge's partner.");
  ASSERT_EQ(s2.spans.size(), 1u);
  EXPECT_EQ(s2.spans[0].text, "Marley was dead, and Scrooge was his partner.");
  EXPECT_EQ(s2.spans[0].precision, SpanPrecision::kSentence);
  EXPECT_TRUE(s2.spans[0].located);
  EXPECT_EQ(s2.spans[0].byte_start, 0);
  bool in_prompt = false;
  for (const auto& p : local)
    in_prompt = in_prompt || p.find(s2.spans[0].text) != std::string::npos;
  EXPECT_TRUE(in_prompt);
  const SourceCitation& s1 = by_id["S1"];
  ASSERT_EQ(s1.spans.size(), 1u);
  EXPECT_EQ(s1.spans[0].chunk_id, chunk_ids_[2]);
  EXPECT_EQ(s1.spans[0].precision, SpanPrecision::kQuote);  // the sentence, word for word
  const SourceCitation& c1 = by_id["C1"];
  EXPECT_EQ(c1.kind, "report");
  ASSERT_FALSE(c1.spans.empty());
  EXPECT_EQ(c1.spans[0].chunk_id, chunk_ids_[0]);  // Scrooge's and Marley's only chunk
}

TEST_F(DriftTest, BadOptionsAndPrompts) {
  ScriptedChatModel chat(
      [](const ChatRequest&) -> Result<std::string> { return std::string("x"); });
  DriftSearchOptions o = Options();
  o.max_calls = 2;  // hyde + primer + reduce need 3
  auto r = DriftSearch(*store_, chat, embedder_.get(), Tok(), kQuestion, o);
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  o = Options();
  o.primer_prompt = "no placeholders";
  r = DriftSearch(*store_, chat, embedder_.get(), Tok(), kQuestion, o);
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("{{question}}"));
  EXPECT_EQ(chat.RequestCount(), 0u);
}

// ---- the parsers and the selection, on their own

TEST(DriftRepliesTest, PrimerAndLocalReplies) {
  struct Case {
    std::string reply;
    bool ok;
    std::string answer;
    int score;
    std::vector<std::string> follow_ups;
  };
  const std::vector<Case> primer = {
      {R"({"intermediate_answer": "A", "score": 80, "follow_up_queries": ["q1", "q2"]})",
       true,
       "A",
       80,
       {"q1", "q2"}},
      {"Sure:\n```json\n{\"intermediate_answer\": \"B\", \"score\": \"55\", \"followups\": "
       "[\"q\"]}\n```\nDone.",
       true,
       "B",
       55,
       {"q"}},
      {R"({"intermediate_answer": "C", "score": 150, "follow_ups": [{"query": "q"}]})",
       true,
       "C",
       100,
       {"q"}},
      {R"({"intermediate_answer": "D \"quoted\"\nline", "follow_up_queries": ["q1", "q2 cut)",
       true,
       "D \"quoted\"\nline",
       0,
       {"q1"}},
      {R"({"intermediate_answer": "E cut off mid)", true, "E cut off mid", 0, {}},
      // \u escapes in a reply cut off, read by the scan: one, two and three UTF-8 bytes.
      {R"({"intermediate_answer": "F \u0041 caf\u00e9 \u2014 cut)",
       true,
       "F A caf\xC3\xA9 \xE2\x80\x94 cut",
       0,
       {}},
      {"no json at all", false, "", 0, {}},
      {R"({"score": 40})", false, "", 0, {}},
  };
  for (const Case& c : primer) {
    auto r = query::ParsePrimerReply(c.reply);
    ASSERT_EQ(r.ok(), c.ok) << c.reply;
    if (!c.ok) {
      EXPECT_EQ(r.status().code(), ErrorCode::kParse);
      continue;
    }
    EXPECT_EQ(r->answer, c.answer) << c.reply;
    EXPECT_EQ(r->score, c.score) << c.reply;
    EXPECT_EQ(r->follow_ups, c.follow_ups) << c.reply;
  }
  auto local = query::ParseDriftLocalReply(R"({"response": "R [S1]", "score": 30.6})");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->answer, "R [S1]");
  EXPECT_EQ(local->score, 31);
  EXPECT_TRUE(local->follow_ups.empty());
  EXPECT_FALSE(query::ParseDriftLocalReply("Marley was dead.").ok());
}

TEST(DriftSelectTest, NormaliseCompareAndRank) {
  EXPECT_EQ(query::NormalizeFollowUp("  1. \"Who   is Marley?\" "), "Who is Marley?");
  EXPECT_EQ(query::NormalizeFollowUp("- * 2) Why?"), "Why?");
  EXPECT_EQ(query::NormalizeFollowUp("   "), "");
  EXPECT_DOUBLE_EQ(query::TermJaccard({"a", "b"}, {"b", "c"}), 1.0 / 3);
  EXPECT_DOUBLE_EQ(query::TermJaccard({}, {}), 0);
  std::vector<query::FollowUpCandidate> open = {
      {50, 0.1, 0}, {80, 0.0, 1}, {50, 0.9, 2}, {50, 0.9, 3}, {10, 1.0, 4}};
  EXPECT_EQ(query::SelectFollowUps(open, 3), (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(query::SelectFollowUps(open, 10), (std::vector<size_t>{1, 2, 3, 0, 4}));
  EXPECT_TRUE(query::SelectFollowUps(open, 0).empty());
}

}  // namespace
}  // namespace grag
