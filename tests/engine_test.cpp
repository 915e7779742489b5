// The engine façade (issue 12): one object opens a project and offers indexing, questions,
// search, stats, documents and entity corrections; the shells (CLI, server) only map to it.
#include "grag/engine.h"
#include "engine/engine_internal.h"

#include <gtest/gtest.h>

#include <map>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "grag/engine_json.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::TempDir;

// A small no-LLM project: the first staves of the book, in two files.
class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string book = ReadBook();
    dir_.Write("proj/input/part1.txt", book.substr(0, 60000));
    dir_.Write("proj/input/part2.txt", book.substr(60000, 60000));
    config_.root = dir_ / "proj";
  }

  static std::string ReadBook() {
    return testing::ReadFile(std::string(GRAG_TEST_DATA_DIR) +
                             "/christmas_carol/christmas_carol.txt");
  }

  std::unique_ptr<Engine> OpenWritable() {
    EngineOptions o;
    o.writable = true;
    auto e = Engine::Open(config_, o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  }

  TempDir dir_;
  Config config_;
};

TEST_F(EngineTest, IndexesWithCallbacksAndReportsStatsDocumentsAndEntities) {
  auto engine = OpenWritable();
  ASSERT_NE(engine, nullptr);
  auto plan = engine->Plan({});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->documents_added.size(), 2u);

  std::atomic<int> progress{0};
  int plans = 0;
  IndexCallbacks cb;
  cb.on_progress = [&](const IndexProgress&) { ++progress; };
  cb.on_plan = [&](const IndexPlan& p) {
    ++plans;
    EXPECT_EQ(p.documents_added.size(), 2u);
  };
  auto summary = engine->Index({}, cb);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(plans, 1);
  EXPECT_GT(progress.load(), 0);
  EXPECT_EQ(summary->documents_added, 2);
  EXPECT_GT(summary->entities, 20);

  auto stats = engine->Stats(5);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->store.documents, 2);
  EXPECT_EQ(stats->store.entities, summary->entities);
  EXPECT_EQ(stats->top_entities.size(), 5u);
  EXPECT_GT(stats->resolved_names, stats->store.entities);  // names before the NLP prune
  auto stats_json = nlohmann::json::parse(IndexStatsJson(*stats, false));
  EXPECT_EQ(stats_json["documents"], 2);
  EXPECT_EQ(stats_json["resolution"]["merged"], stats->merged_names);

  auto docs = engine->Documents();
  ASSERT_TRUE(docs.ok());
  std::set<std::string> ids;
  for (const auto& d : *docs) ids.insert(d.id);
  EXPECT_EQ(ids, (std::set<std::string>{"part1.txt", "part2.txt"}));

  auto scrooge = engine->Entities("scrooge");
  ASSERT_TRUE(scrooge.ok());
  ASSERT_FALSE(scrooge->empty());
  auto listing = nlohmann::json::parse(EntitiesJson(*scrooge, 1, false));
  ASSERT_EQ(listing.size(), 1u);
  EXPECT_NE(listing[0]["name"].get<std::string>().find("Scrooge"), std::string::npos);

  // The same engine answers; the retriever it kept is rebuilt after an update.
  SearchRequest search;
  search.question = "Who is Marley?";
  auto hits = engine->Search(search);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_FALSE(hits->chunks.empty());
  IndexRequest remove;
  remove.remove = {"part2.txt"};
  ASSERT_TRUE(engine->Index(remove).ok());
  hits = engine->Search(search);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  for (const auto& h : hits->chunks) EXPECT_EQ(h.document_id, "part1.txt");
}

TEST_F(EngineTest, ACancelledIndexStopsCleanlyAndTheNextOneCompletes) {
  auto engine = OpenWritable();
  ASSERT_NE(engine, nullptr);
  std::atomic<bool> cancel{true};
  IndexCallbacks cb;
  cb.cancel = &cancel;
  auto stopped = engine->Index({}, cb);
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), ErrorCode::kCancelled);
  cancel = false;
  auto done = engine->Index({}, cb);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_GT(done->entities, 0);
}

TEST_F(EngineTest, AQueryCompletesWhileAnIndexingTransactionIsOpen) {
  auto writer = OpenWritable();
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Index({}).ok());
  // The writer holds the index's write transaction, as the merge stage does for a whole graph.
  auto tx = EngineInternals::store(*writer).Begin();
  ASSERT_TRUE(tx.ok()) << tx.status().ToString();
  // A reading engine on the same index (a server's query side) answers meanwhile.
  auto reader = Engine::Open(config_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  QueryRequest q;
  q.question = "Who is Jacob Marley?";
  q.method = QueryMethod::kLocal;
  auto answer = (*reader)->Query(q);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_NE(answer->answer.find("Marley"), std::string::npos);
  SearchRequest s;
  s.question = "Marley's ghost";
  auto hits = (*reader)->Search(s);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_FALSE(hits->chunks.empty());
  ASSERT_TRUE(tx->Commit().ok());
}

TEST_F(EngineTest, AQueryOnTheIndexingEngineCompletesWhileItsTransactionIsOpen) {
  // One engine (one Store) for both sides, as a server that indexes and answers: a query on
  // another thread reads beside the open write transaction instead of queueing behind it.
  auto engine = OpenWritable();
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->Index({}).ok());
  auto tx = EngineInternals::store(*engine).Begin();
  ASSERT_TRUE(tx.ok()) << tx.status().ToString();
  auto query = std::async(std::launch::async, [&] {
    QueryRequest q;
    q.question = "Who is Jacob Marley?";
    q.method = QueryMethod::kLocal;
    return engine->Query(q);
  });
  const bool finished = query.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  EXPECT_TRUE(finished) << "the query waited for the indexing transaction";
  ASSERT_TRUE(tx->Commit().ok());
  auto answer = query.get();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_NE(answer->answer.find("Marley"), std::string::npos);
}

TEST_F(EngineTest, EachIndexLogsToItsOwnFileOnly) {
  // A second project beside the first, each written by its own engine on its own thread at
  // the same time (a server indexing two projects): each grag.log holds its own lines only.
  dir_.Write("other/input/notes.txt",
             "Jacob Marley kept the counting-house with Ebenezer Scrooge.");
  dir_.Write("other/input/extra.txt", "Bob Cratchit copied letters for Scrooge in London.");
  Config other;
  other.root = dir_ / "other";
  auto first = OpenWritable();
  ASSERT_NE(first, nullptr);
  EngineOptions o;
  o.writable = true;
  auto second = Engine::Open(other, o);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  auto run = [](Engine& e, const std::string& doc) -> Status {
    GRAG_RETURN_IF_ERROR(e.Index({}).status());
    IndexRequest remove;
    remove.remove = {doc};
    return e.Index(remove).status();
  };
  Status a, b;
  std::thread t([&] { a = run(*first, "part2.txt"); });
  b = run(**second, "extra.txt");
  t.join();
  ASSERT_TRUE(a.ok()) << a.ToString();
  ASSERT_TRUE(b.ok()) << b.ToString();
  first.reset();
  second->reset();
  const std::string log1 = testing::ReadFile(dir_ / "proj/output/grag.log");
  const std::string log2 = testing::ReadFile(dir_ / "other/output/grag.log");
  EXPECT_NE(log1.find("[index] removed part2.txt"), std::string::npos) << log1;
  EXPECT_EQ(log1.find("extra.txt"), std::string::npos) << log1;
  EXPECT_NE(log2.find("[index] removed extra.txt"), std::string::npos) << log2;
  EXPECT_EQ(log2.find("part2.txt"), std::string::npos) << log2;
}

TEST_F(EngineTest, AReadingEngineNeedsAnIndexAndAWritableOneMakesIt) {
  auto reader = Engine::Open(config_);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(reader.status().message().find("grag index"), std::string::npos);
  auto check = CheckIndex(config_, 5);
  EXPECT_EQ(check.status().code(), ErrorCode::kNotFound);
  auto writer = OpenWritable();
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Index({}).ok());
  check = CheckIndex(config_, 5);
  ASSERT_TRUE(check.ok()) << check.status().ToString();
  EXPECT_TRUE(check->ok());
}

}  // namespace
}  // namespace grag

namespace grag {

// The compact JSON the engine writes (the HTTP API, --json off a terminal, the Python package)
// is nlohmann's own dump byte for byte, though its strings are written by AppendJsonString:
// quotes, control characters, non-ASCII, invalid UTF-8 (replaced), floats of every size.
// query.method and search.method are checked in core, below the engine, so their word lists are
// written there again; this keeps them the engine's methods (kQueryMethods, kRetrievalMethods).
TEST(EngineSettingsTest, MethodSettingsTakeExactlyTheEnginesMethods) {
  std::map<std::string, std::string> allowed;
  for (const SettingInfo& s : ListSettings(Config{})) allowed[s.key] = s.allowed;
  EXPECT_EQ(allowed["query.method"], "one of " + QueryMethodNames(", ") + ", budgeted");
  EXPECT_EQ(allowed["search.method"], "one of " + RetrievalMethodNames(", "));
}

TEST(EngineJsonTest, CompactOutputIsNlohmannsDumpByteForByte) {
  RetrievalResult result;
  const std::vector<std::string> texts = {"plain",
                                          "with \"quotes\" and \\ backslash",
                                          "tab\there\nnew line\r\x01\x1f control",
                                          "caf\xc3\xa9 \xe2\x80\x94 \xf0\x9f\x8e\x84 \xe4\xb8\xad",
                                          "bad \xff\xfe bytes \xc3",
                                          std::string("nul \0 inside", 12),
                                          ""};
  const std::vector<double> scores = {0.1, 1e-7, 1e21, -0.0, 123456.789, 2.5e-310, 1.0 / 3};
  for (size_t i = 0; i < texts.size(); ++i) {
    RetrievedChunk c;
    c.chunk_id = "c" + std::to_string(i);
    c.document_id = texts[i];
    c.text = texts[i];
    c.index = static_cast<int64_t>(i) - 3;
    c.score = scores[i];
    c.ranks[0] = static_cast<int>(i);
    c.signal_scores[0] = scores[(i + 1) % scores.size()];
    if (i % 2) c.rerank_score = scores[i] * 7;
    result.chunks.push_back(c);
  }
  result.diagnostics = {"a \"diagnostic\"\n", "\xe2\x9c\x93"};
  const std::string out = RetrievalResultJson(result, "Who is \"Marley\"?\n\xff", false);
  const auto reparsed = nlohmann::json::parse(out);
  EXPECT_EQ(reparsed.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), out);
  EXPECT_EQ(reparsed["chunks"][1]["text"], texts[1]);
  EXPECT_EQ(reparsed["chunks"][5]["text"].get<std::string>().size(), 12u);
  // Pretty output is nlohmann's, indented.
  const std::string pretty = RetrievalResultJson(result, "q", true);
  EXPECT_EQ(nlohmann::json::parse(pretty).dump(2), pretty);
}

}  // namespace grag
