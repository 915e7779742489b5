// Budgeted search, --method lazy (issue 38): on a no-LLM index of the book, built by the real
// pipeline, with a scripted model only at query time. What is asked of the model, the budget
// kept exactly, deepening where relevant text is, the stop on misses, windows not whole chunks,
// the seed's reduce prompt, a bad reply handled; and the router's choice.
#include "grag/lazy_search.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "engine/engine_citations.h"
#include "grag/engine.h"
#include "engine/engine_internal.h"
#include "grag/engine_json.h"
#include "grag/prompts.h"
#include "support/fake_graphrag_llm.h"
#include "support/fake_openai_server.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::TempDir;

std::string LastUser(const ChatRequest& r) {
  std::string last;
  for (const auto& m : r.messages) {
    if (m.role == "user") last = m.content;
  }
  return last;
}

enum class Kind { kRefine, kRelevance, kClaims, kReduce, kOther };

Kind KindOf(const std::string& prompt) {
  if (prompt.starts_with("Prepare a search")) return Kind::kRefine;
  if (prompt.starts_with("Rate how relevant")) return Kind::kRelevance;
  if (prompt.starts_with("Draw from the passages")) return Kind::kClaims;
  if (prompt.starts_with("Write a complete answer")) return Kind::kReduce;
  return Kind::kOther;
}

// The passages of a relevance or claims prompt: id -> text. (No std::regex: GCC 12 warns inside
// it at -O1, an error in the sanitizer build.)
std::map<std::string, std::string> Passages(const std::string& prompt) {
  std::map<std::string, std::string> out;
  const std::string open = "<passage id=\"";
  const std::string close = "\n</passage>";
  for (size_t at = prompt.find(open); at != std::string::npos; at = prompt.find(open, at)) {
    const size_t id_begin = at + open.size();
    const size_t id_end = prompt.find("\">\n", id_begin);
    if (id_end == std::string::npos) break;
    const size_t text_begin = id_end + 3;
    const size_t text_end = prompt.find(close, text_begin);
    if (text_end == std::string::npos) break;
    out[prompt.substr(id_begin, id_end - id_begin)] =
        prompt.substr(text_begin, text_end - text_begin);
    at = text_end + close.size();
  }
  return out;
}

// Every passage rated `score(text)`.
std::string Ratings(const std::string& prompt,
                    const std::function<int(const std::string&)>& score) {
  nlohmann::json r = nlohmann::json::array();
  for (const auto& [id, text] : Passages(prompt)) r.push_back({{"id", id}, {"score", score(text)}});
  return nlohmann::json{{"ratings", r}}.dump();
}

std::string OneClaim(const std::string& prompt) {
  const auto p = Passages(prompt);
  return nlohmann::json{{"claims",
                         {{{"claim", "Scrooge changes his ways."},
                           {"score", 70},
                           {"sources", {p.empty() ? "T1" : p.begin()->first}}}}}}
      .dump();
}

// A scripted model for lazy search: refine adds nothing, relevance by `relevant`, one claim per
// claims call, a fixed answer.
ScriptedChatModel::Responder Lazy(std::function<int(const std::string&)> relevant) {
  return [relevant](const ChatRequest& req) -> Result<std::string> {
    const std::string p = LastUser(req);
    switch (KindOf(p)) {
      case Kind::kRefine:
        return std::string(R"({"subqueries": [], "terms": []})");
      case Kind::kRelevance:
        return Ratings(p, relevant);
      case Kind::kClaims:
        return OneClaim(p);
      case Kind::kReduce:
        return std::string("Scrooge learns to keep Christmas.");
      case Kind::kOther:
        break;
    }
    return Status::Internal("unexpected prompt: " + p.substr(0, 80));
  };
}

std::map<Kind, int> CountKinds(const ScriptedChatModel& m) {
  std::map<Kind, int> out;
  for (const ChatRequest& r : m.Requests()) ++out[KindOf(LastUser(r))];
  return out;
}

// One no-LLM index of the whole book (300-token chunks: enough of them for a budget of 50),
// built once for the suite by the real pipeline.
class LazySearchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    dir_->Write("proj/input/christmas_carol.txt",
                testing::ReadFile(std::string(GRAG_TEST_DATA_DIR) +
                                  "/christmas_carol/christmas_carol.txt"));
    config_ = new Config();
    config_->root = *dir_ / "proj";
    config_->chunks.size = 300;
    config_->chunks.overlap = 30;
    EngineOptions o;
    o.writable = true;
    o.log_file = false;
    auto e = Engine::Open(*config_, o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    auto summary = (*e)->Index({});
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    engine_ = std::move(e).value().release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete config_;
    delete dir_;
  }

  Result<LazySearchResult> Run(ChatModel& chat, std::string_view question,
                               const LazySearchOptions& o) {
    auto r = EngineInternals::retriever(*engine_);
    if (!r.ok()) return r.status();
    return LazySearch(EngineInternals::store(*engine_), **r, chat,
                      EngineInternals::tokenizer(*engine_), question, o);
  }

  static TempDir* dir_;
  static Config* config_;
  static Engine* engine_;
};

TempDir* LazySearchTest::dir_ = nullptr;
Config* LazySearchTest::config_ = nullptr;
Engine* LazySearchTest::engine_ = nullptr;

TEST_F(LazySearchTest, BudgetRespectedExactlyAndTheAnswerSaysItRanOut) {
  ScriptedChatModel chat(Lazy([](const std::string&) { return 3; }));
  LazySearchOptions o = EngineInternals::LazyOptions(*engine_);
  o.budget = 50;
  o.tests_per_call = 1;  // 50 calls need only 50 passages
  o.max_misses = 1000;
  auto r = Run(chat, "What does Scrooge do with Bob Cratchit?", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto kinds = CountKinds(chat);
  EXPECT_EQ(kinds.at(Kind::kRelevance), 50);
  EXPECT_EQ(r->stats.relevance_calls, 50);
  EXPECT_EQ(r->stats.refine_calls, 1);
  EXPECT_EQ(r->stats.reduce_calls, 1);
  EXPECT_GE(r->stats.claim_calls, 1);
  EXPECT_LE(r->stats.claim_calls, o.max_claim_calls);
  EXPECT_EQ(kinds.at(Kind::kClaims), r->stats.claim_calls);
  // Everything the model was asked is counted, by kind.
  EXPECT_EQ(static_cast<int64_t>(chat.RequestCount()), r->stats.calls());
  EXPECT_EQ(r->stats.calls(), 1 + 50 + r->stats.claim_calls + 1);
  EXPECT_TRUE(r->budget_exhausted);
  EXPECT_EQ(r->stats.stop, LazyStop::kBudget);
  EXPECT_EQ(r->stats.passages_tested, 50);
  EXPECT_NE(r->answer.find("Budget of 50 relevance calls used up after testing 50 of"),
            std::string::npos)
      << r->answer;
  EXPECT_TRUE(r->answer.starts_with("Scrooge learns to keep Christmas."));
  EXPECT_FALSE(r->citations.empty());
}

// Character-level citations: each cited passage's spans lie in the chunk text the claims calls
// read, at the document's offsets.
TEST_F(LazySearchTest, CitedPassagesHaveSpansInsideWhatTheClaimsRead) {
  ScriptedChatModel chat(Lazy(
      [](const std::string& text) { return text.find("Marley") != std::string::npos ? 3 : 0; }));
  LazySearchOptions o = EngineInternals::LazyOptions(*engine_);
  o.budget = 10;
  auto r = Run(chat, "What happened to Marley?", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->citations.empty());
  QueryResult result;
  result.method = QueryMethod::kLazy;
  result.lazy = *r;
  auto cited = LocateCitations(EngineInternals::store(*engine_), SpanOptions{}, result);
  ASSERT_TRUE(cited.ok()) << cited.status().ToString();
  ASSERT_EQ(cited->size(), r->citations.size());
  std::string claims_prompts;
  for (const ChatRequest& req : chat.Requests()) {
    if (KindOf(LastUser(req)) == Kind::kClaims) claims_prompts += LastUser(req);
  }
  const std::string book =
      testing::ReadFile(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
  const size_t bom = book.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  for (const SourceCitation& c : *cited) {
    EXPECT_EQ(c.claim, "Scrooge changes his ways.");
    ASSERT_FALSE(c.spans.empty()) << c.id;
    for (const SourceSpan& s : c.spans) {
      EXPECT_NE(claims_prompts.find(s.text), std::string::npos) << c.id << ": " << s.text;
      // The offsets index the file's text after its byte-order mark.
      EXPECT_EQ(s.text, book.substr(bom + static_cast<size_t>(s.byte_start),
                                    static_cast<size_t>(s.byte_end - s.byte_start)));
    }
  }
}

TEST_F(LazySearchTest, NothingRelevantMeansNotCoveredWithoutClaimsOrReduce) {
  ScriptedChatModel chat(Lazy([](const std::string&) { return 0; }));
  LazySearchOptions o = EngineInternals::LazyOptions(*engine_);
  o.budget = 50;
  o.max_misses = 1000;
  auto r = Run(chat, "What does Scrooge do with Bob Cratchit?", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->not_covered);
  EXPECT_LE(r->stats.relevance_calls, 50);
  EXPECT_EQ(CountKinds(chat).count(Kind::kClaims), 0u);
  EXPECT_EQ(CountKinds(chat).count(Kind::kReduce), 0u);
  EXPECT_EQ(r->stats.passages_relevant, 0);
  EXPECT_TRUE(r->answer.starts_with(o.not_covered_answer));
  // Nothing relevant: no community was deepened, only roots were tested.
  for (const LazyVisit& v : r->visits) EXPECT_EQ(v.hits, 0);
}

TEST_F(LazySearchTest, DeepensWhereRelevantAndNeverUnderABarrenCommunity) {
  ScriptedChatModel chat(Lazy(
      [](const std::string& text) { return text.find("Marley") != std::string::npos ? 3 : 0; }));
  LazySearchOptions o = EngineInternals::LazyOptions(*engine_);
  o.budget = 40;
  o.max_misses = 1000;
  auto r = Run(chat, "Who was Marley and what happened to him?", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto communities = EngineInternals::store(*engine_).ListCommunities();
  ASSERT_TRUE(communities.ok());
  std::map<int64_t, std::optional<int64_t>> parent;
  for (const auto& c : *communities) parent[c.id] = c.parent_id;
  std::map<int64_t, int> hits;  // over all its visits
  for (const LazyVisit& v : r->visits) hits[v.community_id] += v.hits;
  bool deepened = false;
  for (const LazyVisit& v : r->visits) {
    const auto p = parent[v.community_id];
    if (!p || !hits.count(*p)) continue;
    // A child is only ever visited under a parent whose test found something.
    EXPECT_GT(hits[*p], 0) << "community " << v.community_id << " under barren " << *p;
    deepened = true;
  }
  EXPECT_TRUE(deepened) << "no child of a relevant community was tested";
  EXPECT_GT(r->stats.deepest_level, 0);
  // Every relevant passage holds the word: the ratings were applied to the right passages.
  for (const LazyTest& t : r->tests) {
    if (!t.relevant) continue;
    auto chunk = EngineInternals::store(*engine_).GetChunk(t.chunk_id);
    ASSERT_TRUE(chunk.ok() && chunk->has_value());
    EXPECT_NE((*chunk)->text.substr(t.window_begin, t.window_end - t.window_begin).find("Marley"),
              std::string::npos);
  }
}

TEST_F(LazySearchTest, StopsAfterMissesInARow) {
  std::atomic<int> calls{0};
  ScriptedChatModel chat(Lazy([&](const std::string&) { return calls.load() <= 1 ? 3 : 0; }));
  ScriptedChatModel counting([&](const ChatRequest& req) -> Result<std::string> {
    if (KindOf(LastUser(req)) == Kind::kRelevance) ++calls;
    return chat.Chat(req).value().content;
  });
  LazySearchOptions o = EngineInternals::LazyOptions(*engine_);
  o.budget = 100;
  o.max_misses = 2;
  o.concurrency = 1;  // one call per wave: "the first" is well defined
  auto r = Run(counting, "What does Scrooge see with the Ghost of Christmas Past?", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.stop, LazyStop::kMisses);
  EXPECT_LT(r->stats.relevance_calls, 100);
  EXPECT_FALSE(r->budget_exhausted);
  EXPECT_EQ(r->answer.find("Budget of"), std::string::npos);
  // The first community was relevant, then exactly max_misses barren ones in a row.
  ASSERT_GE(r->visits.size(), 3u);
  EXPECT_GT(r->visits.front().hits, 0);
  EXPECT_EQ(r->visits[r->visits.size() - 1].hits, 0);
  EXPECT_EQ(r->visits[r->visits.size() - 2].hits, 0);
}

TEST_F(LazySearchTest, PassagesAreWindowsNotWholeChunks) {
  ScriptedChatModel chat(Lazy([](const std::string&) { return 0; }));
  LazySearchOptions o = EngineInternals::LazyOptions(*engine_);
  o.budget = 10;
  o.test_window_tokens = 60;
  auto r = Run(chat, "What does Scrooge say about Christmas?", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  int shorter = 0;
  for (const ChatRequest& req : chat.Requests()) {
    const std::string p = LastUser(req);
    if (KindOf(p) != Kind::kRelevance) continue;
    const auto passages = Passages(p);
    EXPECT_LE(passages.size(), static_cast<size_t>(o.tests_per_call));
    for (const auto& [id, text] : passages) {
      EXPECT_LE(EngineInternals::tokenizer(*engine_).Count(text), 60u) << id << ": " << text;
    }
  }
  for (const LazyTest& t : r->tests) {
    auto chunk = EngineInternals::store(*engine_).GetChunk(t.chunk_id);
    ASSERT_TRUE(chunk.ok() && chunk->has_value());
    if (t.window_end - t.window_begin < (*chunk)->text.size()) ++shorter;
  }
  EXPECT_EQ(shorter, static_cast<int>(r->tests.size()));
}

TEST_F(LazySearchTest, ClaimsGoToTheSeedReducePromptRankedWithZeroesDropped) {
  std::string reduce_prompt;
  std::mutex mu;
  ScriptedChatModel chat([&](const ChatRequest& req) -> Result<std::string> {
    const std::string p = LastUser(req);
    switch (KindOf(p)) {
      case Kind::kClaims: {
        const std::string first = Passages(p).begin()->first;
        return nlohmann::json{{"claims",
                               {{{"claim", "Minor point."}, {"score", 40}, {"sources", {first}}},
                                {{"claim", "Useless point."}, {"score", 0}, {"sources", {first}}},
                                {{"claim", "Main point."}, {"score", 80}, {"sources", {first}}}}}}
            .dump();
      }
      case Kind::kReduce: {
        std::lock_guard lock(mu);
        reduce_prompt = p;
        return std::string("answer");
      }
      default:
        return Lazy([](const std::string&) { return 3; })(req);
    }
  });
  LazySearchOptions o = EngineInternals::LazyOptions(*engine_);
  o.budget = 1;  // one relevance call: one claims call
  auto r = Run(chat, "Who is Tiny Tim?", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->stats.claim_calls, 1);
  const std::string seed(GetPromptInfo(PromptId::kGlobalReduce).default_text);
  EXPECT_TRUE(reduce_prompt.starts_with(seed.substr(0, seed.find("<question>"))));
  EXPECT_NE(reduce_prompt.find("<question>Who is Tiny Tim?</question>"), std::string::npos);
  const size_t main = reduce_prompt.find("score=\"80\" sources=\"T");
  const size_t minor = reduce_prompt.find("score=\"40\" sources=\"T");
  ASSERT_NE(main, std::string::npos) << reduce_prompt;
  ASSERT_NE(minor, std::string::npos);
  EXPECT_LT(main, minor);
  EXPECT_EQ(reduce_prompt.find("Useless point."), std::string::npos);
  EXPECT_EQ(reduce_prompt.find("score=\"0\""), std::string::npos);
  ASSERT_EQ(r->claims.size(), 3u);
  EXPECT_EQ(r->claims.back().fate, PointFate::kZeroScore);
}

TEST_F(LazySearchTest, AnUnreadableRelevanceReplyCostsItsCallAndTheSearchGoesOn) {
  std::atomic<int> relevance{0};
  ScriptedChatModel chat([&](const ChatRequest& req) -> Result<std::string> {
    if (KindOf(LastUser(req)) == Kind::kRelevance && relevance++ == 0) {
      return std::string("I am sorry, I cannot rate these passages.");
    }
    return Lazy([](const std::string&) { return 3; })(req);
  });
  LazySearchOptions o = EngineInternals::LazyOptions(*engine_);
  o.budget = 6;
  o.concurrency = 1;
  o.max_misses = 1000;
  auto r = Run(chat, "What does Scrooge see in the churchyard?", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.relevance_unparseable, 1);
  EXPECT_EQ(r->stats.relevance_calls, 6);  // the bad reply spent its unit; the loop went on
  EXPECT_GT(r->stats.passages_relevant, 0);
  EXPECT_EQ(r->stats.reduce_calls, 1);
  for (const LazyTest& t : r->tests) {
    if (t.call == 0) {
      EXPECT_FALSE(t.relevant);  // the unread call's passages count as 0
    }
  }
}

TEST_F(LazySearchTest, NoRelevanceReplyAtAllIsAnErrorNotAnUncoveredQuestion) {
  ScriptedChatModel chat([](const ChatRequest& req) -> Result<std::string> {
    if (KindOf(LastUser(req)) == Kind::kRelevance) {
      return Status::Unavailable("cannot connect to the model");
    }
    return Lazy([](const std::string&) { return 3; })(req);
  });
  LazySearchOptions o = EngineInternals::LazyOptions(*engine_);
  o.budget = 4;
  auto r = Run(chat, "Who is Tiny Tim?", o);
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(r.status().message().find("all 4 relevance calls failed"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("cannot connect"), std::string::npos);
}

TEST_F(LazySearchTest, AGenericQuestionGoesBreadthFirstByCommunitySize) {
  ScriptedChatModel chat(Lazy([](const std::string&) { return 0; }));
  LazySearchOptions o = EngineInternals::LazyOptions(*engine_);
  o.budget = 3;
  o.concurrency = 1;
  auto r = Run(chat, "What are the main themes?", o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->stats.generic);
  auto communities = EngineInternals::store(*engine_).ListCommunities(0);
  ASSERT_TRUE(communities.ok());
  int64_t heaviest = 0, id = 0;
  for (const auto& c : *communities) {
    if (c.weight > heaviest) {
      heaviest = c.weight;
      id = c.id;
    }
  }
  ASSERT_FALSE(r->visits.empty());
  EXPECT_EQ(r->visits.front().community_id, id);
}

TEST_F(LazySearchTest, OptionsOutOfRangeAreRefused) {
  ScriptedChatModel chat(Lazy([](const std::string&) { return 0; }));
  LazySearchOptions o = EngineInternals::LazyOptions(*engine_);
  o.budget = 0;
  auto r = Run(chat, "Who is Scrooge?", o);
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("lazy.budget"), std::string::npos);
  EXPECT_EQ(chat.RequestCount(), 0u);
}

// ---- the router and the engine (a model at query time only, on the loopback server)

class LazyRouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string book =
        testing::ReadFile(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
    dir_.Write("proj/input/part1.txt", book.substr(0, 60000));
    config_.root = dir_ / "proj";
    EngineOptions o;
    o.writable = true;
    o.log_file = false;
    auto e = Engine::Open(config_, o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ASSERT_TRUE((*e)->Index({}).ok());
  }
  std::unique_ptr<Engine> Open(bool with_model) {
    Config c = config_;
    if (with_model) {
      c.llm.base_url = server_.base_url();
      c.llm.model = "query-model";
    }
    auto e = Engine::Open(c);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  }

  testing::FakeOpenAIServer server_{testing::FakeGraphRagHandler()};
  TempDir dir_;
  Config config_;
};

TEST_F(LazyRouterTest, GlobalQuestionsGoToLazyOnlyWithAModelAndNoModelWrittenReports) {
  {
    auto engine = Open(/*with_model=*/true);
    ASSERT_NE(engine, nullptr);
    auto route = engine->Route("What are the main themes?");
    ASSERT_TRUE(route.ok()) << route.status().ToString();
    EXPECT_EQ(route->method, QueryMethod::kLazy);
    EXPECT_EQ(route->decision.kind, QuestionKind::kGlobal);
    EXPECT_NE(route->decision.reason.find("budgeted search"), std::string::npos);
    EXPECT_EQ(route->max_calls, 1 + 20 + 8 + 1);
    EXPECT_NE(route->cost_note.find("at most 30 calls"), std::string::npos) << route->cost_note;
    // A lookup stays where it was.
    auto lookup = engine->Route("Who is Bob Cratchit?");
    ASSERT_TRUE(lookup.ok());
    EXPECT_NE(lookup->method, QueryMethod::kLazy);
    // An explicit method gets its own bound.
    auto asked = engine->Route("Who is Bob Cratchit?", QueryMethod::kLazy);
    ASSERT_TRUE(asked.ok());
    EXPECT_EQ(asked->method, QueryMethod::kLazy);
    EXPECT_EQ(asked->max_calls, 30);

    QueryRequest q;
    q.question = "What are the main themes?";
    auto r = engine->Query(q);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->method, QueryMethod::kLazy);
    ASSERT_TRUE(r->lazy.has_value());
    EXPECT_GT(r->lazy->stats.relevance_calls, 0);
    EXPECT_LE(r->lazy->stats.relevance_calls, 20);
    auto j = nlohmann::json::parse(QueryResultJson(*r, q.question, false));
    EXPECT_EQ(j["method"], "lazy");
    EXPECT_EQ(j["route"]["method"], "lazy");
    EXPECT_EQ(j["route"]["max_llm_calls"], 30);
    EXPECT_EQ(j["stats"]["calls"].get<int64_t>(), r->lazy->stats.calls());

    q.budget = 0;
    EXPECT_EQ(engine->Query(q).status().code(), ErrorCode::kInvalidArgument);
  }
  {
    auto engine = Open(/*with_model=*/false);
    ASSERT_NE(engine, nullptr);
    auto route = engine->Route("What are the main themes?");
    ASSERT_TRUE(route.ok());
    EXPECT_EQ(route->method, QueryMethod::kGlobal);  // extractive
    QueryRequest q;
    q.question = "What are the main themes?";
    q.method = QueryMethod::kLazy;
    auto r = engine->Query(q);
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("none is configured"), std::string::npos);
  }
  {
    // One report written by a model: the index's reports are worth map-reducing.
    EngineOptions o;
    o.writable = true;
    o.log_file = false;
    auto writer = Engine::Open(config_, o);
    ASSERT_TRUE(writer.ok());
    auto reports = EngineInternals::store(**writer).ListReports();
    ASSERT_TRUE(reports.ok() && !reports->empty());
    ReportRecord r = reports->front();
    r.generator = ReportGenerator::kLlm;
    ASSERT_TRUE(EngineInternals::store(**writer).PutReport(r).ok());
  }
  {
    auto engine = Open(/*with_model=*/true);
    ASSERT_NE(engine, nullptr);
    auto route = engine->Route("What are the main themes?");
    ASSERT_TRUE(route.ok());
    EXPECT_EQ(route->method, QueryMethod::kGlobal);
  }
}

TEST(LazyQueryMethodTest, NamesParse) {
  EXPECT_EQ(*ParseQueryMethod("lazy"), QueryMethod::kLazy);
  EXPECT_EQ(*ParseQueryMethod("budgeted"), QueryMethod::kLazy);
  EXPECT_EQ(QueryMethodName(QueryMethod::kLazy), "lazy");
}

}  // namespace
}  // namespace grag
