// The indexing pipeline with a scripted model: every stage, resumability and "no work twice".
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "grag/hash.h"
#include "grag/indexer.h"
#include "grag/lexical_embedder.h"
#include "grag/nlp_extract.h"
#include "grag/store.h"
#include "support/fake_graphrag_llm.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::FakeGraphRagResponder;
using testing::PromptKind;
using testing::TempDir;

// Documents about groups of people: names of one group appear together, so the graph has
// communities to find.
void WriteCorpus(const TempDir& dir, int docs, uint32_t seed = 1) {
  const std::vector<std::vector<std::string>> groups = {
      {"Alice Archer", "Bruno Baker", "Clara Cole", "Dmitri Dane", "Elena Estes"},
      {"Farid Fox", "Greta Gale", "Hiro Hale", "Ines Irwin", "Jonas Judd"},
      {"Kira Knox", "Liam Lowe", "Maya Moss", "Nils Nash", "Olga Orr"},
      {"Pavel Pike", "Quinn Quay", "Rosa Reed", "Sven Sloan", "Tara Tate"}};
  std::mt19937 rng(seed);
  for (int d = 0; d < docs; ++d) {
    std::string text;
    const auto& g = groups[static_cast<size_t>(d) % groups.size()];
    for (int s = 0; s < 40; ++s) {
      const auto& a = g[rng() % g.size()];
      const auto& b = g[rng() % g.size()];
      text += "Yesterday " + a + " met " + b + " near the old harbour and they talked for hours. ";
      if (s % 13 == 0)
        text += "Later " + groups[(static_cast<size_t>(d) + 1) % groups.size()][0] + " arrived. ";
    }
    dir.Write("proj/input/doc" + std::to_string(d) + ".txt", text);
  }
}

Config TestConfig(const TempDir& dir) {
  Config c;
  c.root = dir / "proj";
  c.chunks.size = 200;
  c.chunks.overlap = 20;
  c.llm.concurrency = 4;
  c.communities.max_cluster_size = 4;
  return c;
}

struct Harness {
  TempDir dir;
  Config config;
  std::unique_ptr<Store> store;
  std::unique_ptr<ScriptedChatModel> model;

  explicit Harness(int docs = 8) {
    WriteCorpus(dir, docs);
    config = TestConfig(dir);
    store = std::move(Store::Open(config.Resolve(config.store.path))).value();
    ScriptedModelOptions mo;
    mo.cache = &store->ReplyCache();
    model = std::make_unique<ScriptedChatModel>(FakeGraphRagResponder(), mo);
  }

  Result<IndexSummary> Index(ChatModel* chat = nullptr) {
    IndexContext ctx;
    ctx.store = store.get();
    ctx.chat = chat ? chat : model.get();
    return RunIndex(config, {}, ctx);
  }
};

TEST(IndexPipelineTest, IndexesEveryStageAndEveryEntityHasACommunityAndReport) {
  Harness h;
  auto s = h.Index();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->documents_added, 8);
  EXPECT_GT(s->chunks, 8);
  EXPECT_EQ(s->chunks_extracted, s->chunks);
  EXPECT_GE(s->entities, 20);
  EXPECT_GT(s->relationships, 20);
  EXPECT_FALSE(s->communities_per_level.empty());
  EXPECT_GT(s->modularity, 0.2);

  auto entities = h.store->ListEntities();
  auto communities = h.store->ListCommunities();
  ASSERT_TRUE(entities.ok() && communities.ok());
  std::set<int64_t> in_level0;
  std::set<int64_t> parents;
  for (const auto& c : *communities) {
    if (c.parent_id) parents.insert(*c.parent_id);
  }
  for (const auto& c : *communities) {
    if (c.level == 0) in_level0.insert(c.entity_ids.begin(), c.entity_ids.end());
    // A community above max_cluster_size is split at the next level.
    if (c.entity_ids.size() > 4u) {
      EXPECT_TRUE(parents.count(c.id)) << "community " << c.id << " at level " << c.level
                                       << " exceeds max_cluster_size and is not split";
    }
    auto report = h.store->GetReport(c.id);
    ASSERT_TRUE(report.ok());
    EXPECT_TRUE(report->has_value()) << "community " << c.id << " has neither report nor gap";
  }
  for (const auto& e : *entities)
    EXPECT_TRUE(in_level0.count(e.id)) << e.name << " has no community";
  // Entities remember their chunks, for local search.
  auto chunks = h.store->GetEntityChunks(entities->front().id);
  ASSERT_TRUE(chunks.ok());
  EXPECT_FALSE(chunks->empty());
}

// Communities below communities.llm_report_min_size get an extractive report (no call); the
// others an LLM report; at 0 every community gets an LLM report.
TEST(IndexPipelineTest, SmallCommunitiesGetExtractiveReportsWithoutACall) {
  for (int64_t min_size : {0, 3}) {
    Harness h;
    h.config.communities.llm_report_min_size = min_size;
    auto s = h.Index();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const auto communities = h.store->ListCommunities().value();
    int64_t small = 0, report_calls = 0;
    for (const auto& c : communities) {
      const auto report = h.store->GetReport(c.id).value();
      ASSERT_TRUE(report.has_value()) << "community " << c.id;
      const bool is_small = c.size < min_size;
      small += is_small ? 1 : 0;
      EXPECT_EQ(report->generator, is_small ? ReportGenerator::kExtractive : ReportGenerator::kLlm)
          << "community " << c.id << " of " << c.size << " members, min " << min_size;
    }
    for (const auto& r : h.model->Requests()) {
      report_calls += PromptKind(r.messages.back().content) == "report" ? 1 : 0;
    }
    EXPECT_EQ(report_calls, static_cast<int64_t>(communities.size()) - small) << min_size;
    EXPECT_EQ(s->reports_extractive, small);
    if (min_size > 0) {
      EXPECT_GT(small, 0) << "the corpus should have communities below 3 members";
    }
    // An unchanged re-run writes nothing and calls nothing.
    auto again = h.Index();
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->reports_generated, 0);
    EXPECT_EQ(again->usage.calls, 0);
  }
}

// reports.mode = lazy, two reports a question, communities of three members and more worth one.
void MakeLazy(Config& c) {
  c.communities.llm_report_min_size = 3;
  c.reports.mode = "lazy";
  c.reports.lazy_per_question = 2;
}

// reports.mode = lazy: the index makes no report call and gives every community an extractive
// report; a question's WriteDeferredReports writes the LLM reports of the communities it reads,
// heaviest first and within reports.lazy_per_question, and they stand for the questions and
// index runs after it. The dry run says what each mode costs.
TEST(IndexPipelineTest, LazyReportsAreWrittenByTheQuestionsThatReadThem) {
  Harness h;
  MakeLazy(h.config);
  {
    IndexContext ctx;
    ctx.store = h.store.get();
    ctx.chat = h.model.get();
    auto plan = PlanIndex(h.config, {}, ctx);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->estimate.calls.report, 0);
    EXPECT_GT(plan->estimate.deferred_reports, 0);
    Config eager = h.config;
    eager.reports.mode = "eager";
    auto eager_plan = PlanIndex(eager, {}, ctx);
    ASSERT_TRUE(eager_plan.ok());
    EXPECT_EQ(eager_plan->estimate.calls.report, plan->estimate.deferred_reports);
    EXPECT_EQ(eager_plan->estimate.deferred_reports, 0);
    EXPECT_GT(eager_plan->estimate.prompt_tokens, plan->estimate.prompt_tokens);
  }
  auto count_report_calls = [&h] {
    int64_t n = 0;
    for (const auto& r : h.model->Requests()) {
      n += PromptKind(r.messages.back().content) == "report" ? 1 : 0;
    }
    return n;
  };
  auto s = h.Index();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(count_report_calls(), 0);
  EXPECT_EQ(s->calls.report, 0);
  std::vector<CommunityRecord> communities = h.store->ListCommunities().value();
  std::stable_sort(communities.begin(), communities.end(),
                   [](const auto& a, const auto& b) { return a.weight > b.weight; });
  std::vector<int64_t> ids;
  std::vector<int64_t> worthy;  // in the order a question reads them
  for (const auto& c : communities) {
    ids.push_back(c.id);
    if (c.size >= 3) worthy.push_back(c.id);
    const auto report = h.store->GetReport(c.id).value();
    ASSERT_TRUE(report.has_value()) << "community " << c.id;
    EXPECT_EQ(report->generator, ReportGenerator::kExtractive) << "community " << c.id;
  }
  ASSERT_GE(worthy.size(), 5u);
  EXPECT_EQ(s->reports_deferred, static_cast<int64_t>(worthy.size()));
  auto generator = [&h](int64_t id) { return h.store->GetReport(id).value()->generator; };

  // The first question writes the two heaviest; the next the two after them.
  auto first = WriteDeferredReports(h.config, *h.store, *h.model, ids);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->written, 2);
  EXPECT_EQ(first->calls, 2);
  EXPECT_GT(first->prompt_tokens, 0);
  EXPECT_EQ(first->pending, static_cast<int64_t>(worthy.size()) - 2);
  EXPECT_EQ(count_report_calls(), 2);
  EXPECT_EQ(generator(worthy[0]), ReportGenerator::kLlm);
  EXPECT_EQ(generator(worthy[1]), ReportGenerator::kLlm);
  EXPECT_EQ(generator(worthy[2]), ReportGenerator::kExtractive);
  auto second = WriteDeferredReports(h.config, *h.store, *h.model, ids);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->written, 2);
  EXPECT_EQ(second->pending, static_cast<int64_t>(worthy.size()) - 4);
  EXPECT_EQ(generator(worthy[2]), ReportGenerator::kLlm);
  EXPECT_EQ(generator(worthy[3]), ReportGenerator::kLlm);
  // A question reading only communities that have their reports, or are too small for one,
  // writes nothing.
  std::vector<int64_t> done = {worthy[0], worthy[1]};
  for (const auto& c : communities) {
    if (c.size < 3) done.push_back(c.id);
  }
  auto none = WriteDeferredReports(h.config, *h.store, *h.model, done);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->written, 0);
  EXPECT_EQ(none->pending, 0);
  EXPECT_EQ(count_report_calls(), 4);

  // An index run keeps what the questions wrote: no call, nothing turned back to extractive.
  auto again = h.Index();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->usage.calls, 0);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(generator(worthy[i]), ReportGenerator::kLlm) << i;
  EXPECT_EQ(generator(worthy[4]), ReportGenerator::kExtractive);
  // Switched to eager, the next run writes the rest and reuses the four.
  h.config.reports.mode = "eager";
  auto eager = h.Index();
  ASSERT_TRUE(eager.ok()) << eager.status().ToString();
  EXPECT_EQ(eager->reports_deferred, 0);
  for (int64_t id : worthy) EXPECT_EQ(generator(id), ReportGenerator::kLlm) << id;
  EXPECT_EQ(count_report_calls(), static_cast<int64_t>(worthy.size()));
}

// A report a question writes is embedded at once when the index's report vectors are the
// question's embedder's (DRIFT ranks reports by them), as the embed stage would have.
TEST(IndexPipelineTest, LazyReportsWrittenByAQuestionAreEmbedded) {
  Harness h;
  MakeLazy(h.config);
  LexicalEmbedder embedder;
  IndexContext ctx;
  ctx.store = h.store.get();
  ctx.chat = h.model.get();
  ctx.embedder = &embedder;
  ASSERT_TRUE(RunIndex(h.config, {}, ctx).ok());
  std::vector<CommunityRecord> communities = h.store->ListCommunities().value();
  std::stable_sort(communities.begin(), communities.end(),
                   [](const auto& a, const auto& b) { return a.weight > b.weight; });
  std::vector<int64_t> ids;
  for (const auto& c : communities) ids.push_back(c.id);
  auto wrote = WriteDeferredReports(h.config, *h.store, *h.model, ids, nullptr, &embedder);
  ASSERT_TRUE(wrote.ok()) << wrote.status().ToString();
  EXPECT_EQ(wrote->written, 2);
  EXPECT_EQ(wrote->embedded, 2);
  int64_t llm = 0;
  for (const auto& c : communities) {
    const auto report = h.store->GetReport(c.id).value();
    ASSERT_TRUE(report.has_value());
    const auto vector = h.store->GetEmbedding(EmbeddingOwner::kReport, std::to_string(c.id));
    ASSERT_TRUE(vector.ok() && vector->has_value()) << c.id;
    // Every report's vector is of its text as it stands: the stand-ins' from the index run, the
    // new ones' from the question.
    EXPECT_EQ((*vector)->input_hash, InputHash(report->full_content)) << c.id;
    llm += report->generator == ReportGenerator::kLlm ? 1 : 0;
  }
  EXPECT_EQ(llm, 2);
  // The next index run has nothing to embed again.
  auto again = RunIndex(h.config, {}, ctx);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->embeddings_written, 0);
}

// Entities that are literal values (dates, amounts) get no vector unless
// embeddings.literal_values: a question finds them by name. Turned off on an index that has
// them, the next run removes theirs.
TEST(IndexPipelineTest, LiteralValuesAreNotEmbeddedUnlessAsked) {
  Harness h(4);
  // The scripted extraction, plus a year and an amount tied to the passage's first name.
  auto base = FakeGraphRagResponder();
  ScriptedModelOptions mo;
  mo.cache = &h.store->ReplyCache();
  ScriptedChatModel model(
      [base](const ChatRequest& req) -> Result<std::string> {
        GRAG_ASSIGN_OR_RETURN(std::string reply, base(req));
        if (PromptKind(req.messages.back().content) != "extract") return reply;
        nlohmann::json j = nlohmann::json::parse(reply);
        if (j["entities"].empty()) return reply;
        const std::string first = j["entities"][0]["name"];
        j["entities"].push_back(
            {{"name", "1987"}, {"type", "date"}, {"description", "the year of the meeting"}});
        j["entities"].push_back(
            {{"name", "300 dollars"}, {"type", "money"}, {"description", "what was paid"}});
        for (const char* value : {"1987", "300 dollars"}) {
          j["relationships"].push_back({{"source", first},
                                        {"target", value},
                                        {"description", first + " and " + value},
                                        {"strength", 2}});
        }
        return j.dump();
      },
      mo);
  LexicalEmbedder embedder;
  auto index = [&]() {
    IndexContext ctx;
    ctx.store = h.store.get();
    ctx.chat = &model;
    ctx.embedder = &embedder;
    return RunIndex(h.config, {}, ctx);
  };
  auto vectors_of = [&h](const std::string& key) {
    const auto e = h.store->GetEntityByKey(key).value();
    EXPECT_TRUE(e.has_value()) << key;
    if (!e) return false;
    return h.store->GetEmbedding(EmbeddingOwner::kEntity, std::to_string(e->id))->has_value();
  };
  h.config.embeddings.literal_values = true;
  ASSERT_TRUE(index().ok());
  EXPECT_TRUE(vectors_of("1987"));
  EXPECT_TRUE(vectors_of("300 dollars"));
  EXPECT_TRUE(vectors_of("alice archer"));
  const size_t all = h.store->ListEmbeddings(EmbeddingOwner::kEntity)->size();
  h.config.embeddings.literal_values = false;
  ASSERT_TRUE(index().ok());
  EXPECT_FALSE(vectors_of("1987"));
  EXPECT_FALSE(vectors_of("300 dollars"));
  EXPECT_TRUE(vectors_of("alice archer"));
  EXPECT_EQ(h.store->ListEmbeddings(EmbeddingOwner::kEntity)->size(), all - 2);
}

// store.compact: a run that builds an index from nothing leaves the file dense (VACUUM): smaller
// than the same run's file left as written, with the same index in it; an update run (a
// clustering already there, few free pages) leaves the file as written; "never" never compacts.
TEST(IndexPipelineTest, AFirstRunLeavesTheFileCompactedAndAnUpdateDoesNot) {
  auto file_bytes = [](Store& store) {
    auto space = store.GetFileSpace();
    EXPECT_TRUE(space.ok() && space->has_value());
    return space.ok() && space->has_value() ? (*space)->file_bytes : int64_t{0};
  };
  Harness as_written(12);
  as_written.config.store.compact = "never";
  ASSERT_TRUE(as_written.Index().ok());
  Harness compacted(12);
  ASSERT_EQ(compacted.config.store.compact, "auto");  // the default
  ASSERT_TRUE(compacted.Index().ok());
  const int64_t dense = file_bytes(*compacted.store);
  // Compacted: no free page, and B-tree pages filled (a run fills them in no particular order,
  // splitting them half-full): a smaller file.
  EXPECT_EQ((*compacted.store->GetFileSpace())->free_bytes, 0);
  EXPECT_LT(dense, file_bytes(*as_written.store));
  EXPECT_EQ(compacted.store->ListEntities()->size(), as_written.store->ListEntities()->size());
  EXPECT_EQ(compacted.store->ListReports()->size(), as_written.store->ListReports()->size());
  EXPECT_TRUE(compacted.store->CheckIntegrity().ok());

  // An update that removes a third of the documents leaves pages free, too few (under a fifth of
  // the file) for "auto" to rewrite the file; "always" does.
  for (const char* gone : {"doc8.txt", "doc9.txt", "doc10.txt", "doc11.txt"}) {
    std::filesystem::remove(std::filesystem::path(compacted.dir / "proj/input") / gone);
  }
  ASSERT_TRUE(compacted.Index().ok());
  const Store::FileSpace updated = *compacted.store->GetFileSpace().value();
  EXPECT_GT(updated.free_bytes, 0) << updated.file_bytes;
  EXPECT_LT(updated.free_bytes * 5, updated.file_bytes) << updated.free_bytes;
  compacted.config.store.compact = "always";  // the same input again: only the compaction
  ASSERT_TRUE(compacted.Index().ok());
  EXPECT_EQ((*compacted.store->GetFileSpace())->free_bytes, 0);
  EXPECT_LT(file_bytes(*compacted.store), updated.file_bytes);
}

TEST(IndexPipelineTest, TwoRunsGiveIdenticalCommunities) {
  Harness a;
  Harness b;
  ASSERT_TRUE(a.Index().ok());
  ASSERT_TRUE(b.Index().ok());
  auto ca = a.store->ListCommunities();
  auto cb = b.store->ListCommunities();
  ASSERT_TRUE(ca.ok() && cb.ok());
  ASSERT_EQ(ca->size(), cb->size());
  auto names = [](Store& s, const std::vector<int64_t>& ids) {
    std::set<std::string> out;
    for (auto id : ids) out.insert(s.GetEntity(id).value()->name_key);
    return out;
  };
  for (size_t i = 0; i < ca->size(); ++i) {
    EXPECT_EQ((*ca)[i].level, (*cb)[i].level);
    EXPECT_EQ(names(*a.store, (*ca)[i].entity_ids), names(*b.store, (*cb)[i].entity_ids));
  }
}

TEST(IndexPipelineTest, ReRunOnUnchangedInputMakesNoLlmCall) {
  Harness h;
  ASSERT_TRUE(h.Index().ok());
  const auto before = h.model->RequestCount();
  auto again = h.Index();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->usage.calls, 0);
  EXPECT_EQ(h.model->RequestCount(), before);
  EXPECT_EQ(again->documents_unchanged, 8);
  EXPECT_EQ(again->reports_generated, 0);
  EXPECT_GT(again->reports_reused, 0);
}

TEST(IndexPipelineTest, UnparseableChunkIsSkippedRecordedAndRetriedByTheNextRun) {
  Harness h(2);
  std::atomic<int> bad_left{2};
  ScriptedModelOptions mo;
  mo.cache = &h.store->ReplyCache();
  ScriptedChatModel flaky(
      [&](const ChatRequest& req) -> Result<std::string> {
        const auto& last = req.messages.back().content;
        if (PromptKind(last) == "extract" || PromptKind(last) == "retry") {
          if (bad_left.fetch_sub(1) > 0) return std::string("Sorry, I cannot help with that.");
        }
        return FakeGraphRagResponder()(req);
      },
      mo);
  h.config.llm.concurrency = 1;  // the first chunk gets both bad replies
  auto s = h.Index(&flaky);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->chunks_skipped, 1);
  auto stats = h.store->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->extractions_skipped, 1);

  auto again = h.Index(&flaky);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->chunks_extracted, 1);
  EXPECT_EQ(again->chunks_skipped, 0);
  EXPECT_EQ(h.store->Stats()->extractions_skipped, 0);
}

TEST(IndexPipelineTest, ModelOutageStopsTheRunKeepsTheWorkAndTheNextRunResumes) {
  Harness h(4);
  std::atomic<int> ok_left{3};
  ScriptedChatModel dying([&](const ChatRequest& req) -> Result<std::string> {
    if (ok_left.fetch_sub(1) <= 0) return Status::Unavailable("HTTP 503 after 6 retries");
    return FakeGraphRagResponder()(req);
  });
  h.config.llm.concurrency = 1;
  h.config.extraction.gleanings = 0;
  auto s = h.Index(&dying);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(h.store->Stats()->extractions_ok, 3);
  auto runs = h.store->ListRuns();
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->front().status, RunStatus::kFailed);

  const auto calls_before = h.model->RequestCount();
  auto resumed = h.Index();
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->chunks_extracted, resumed->chunks - 3);
  EXPECT_GT(h.model->RequestCount(), calls_before);
}

TEST(IndexPipelineTest, DocumentsGoneFromTheInputAreRemoved) {
  Harness h(4);
  ASSERT_TRUE(h.Index().ok());
  std::filesystem::remove(h.dir / "proj/input/doc3.txt");
  auto s = h.Index();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->documents_removed, 1);
  EXPECT_EQ(h.store->ListDocuments()->size(), 3u);
  // No entity is left that only the removed document mentioned.
  auto entities = h.store->ListEntities();
  ASSERT_TRUE(entities.ok());
  for (const auto& e : *entities) {
    EXPECT_FALSE(h.store->GetEntityChunks(e.id)->empty()) << e.name;
  }
}

TEST(IndexPipelineTest, WithoutAnLlmEveryStageRunsOnTheBuiltInExtractorAndReports) {
  Harness h(8);
  IndexContext ctx;
  ctx.store = h.store.get();
  auto s = RunIndex(h.config, {}, ctx);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->usage.calls, 0);
  EXPECT_EQ(h.model->RequestCount(), 0u);
  EXPECT_EQ(s->chunks_extracted, s->chunks);
  EXPECT_GT(s->entities, 5);
  EXPECT_GT(s->reports_generated, 0);
  const auto reports = h.store->ListReports().value();
  ASSERT_FALSE(reports.empty());
  for (const auto& r : reports) EXPECT_EQ(r.generator, ReportGenerator::kExtractive);
  // Stored as the NLP extractor's results, apart from any LLM's.
  const auto chunk_ids = h.store->ListChunkIds().value();
  const ExtractorId nlp{ExtractorKind::kNlp, std::string(kNlpExtractorModel)};
  EXPECT_TRUE(h.store->GetExtraction(chunk_ids.front(), nlp).value().has_value());
  EXPECT_TRUE(h.store->ChunksNeedingExtraction(nlp).value().empty());
  EXPECT_EQ(h.store->ChunksNeedingExtraction({ExtractorKind::kLlm, "scripted"}).value().size(),
            chunk_ids.size());
}

TEST(IndexPipelineTest, ConfiguringAModelLaterReExtractsWithItAndGoingBackReusesTheNlpResults) {
  Harness h(4);
  h.config.communities.llm_report_min_size = 0;  // every report by the model, to tell them apart
  IndexContext offline;
  offline.store = h.store.get();
  auto first = RunIndex(h.config, {}, offline);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  const auto nlp_entities = h.store->ListEntities().value().size();

  auto with_llm = h.Index();  // the scripted model now
  ASSERT_TRUE(with_llm.ok()) << with_llm.status().ToString();
  EXPECT_EQ(with_llm->chunks_extracted, with_llm->chunks);
  for (const auto& r : h.store->ListReports().value()) {
    EXPECT_EQ(r.generator, ReportGenerator::kLlm) << "community " << r.community_id;
  }
  // The graph is the LLM's: its fake extractor names people, never lower-case phrases.
  for (const auto& e : h.store->ListEntities().value()) EXPECT_NE(e.type, "noun phrase") << e.name;

  auto back = RunIndex(h.config, {}, offline);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->chunks_extracted, 0);  // the NLP results were kept
  EXPECT_EQ(h.store->ListEntities().value().size(), nlp_entities);
}

// The load stage streams: documents are read, chunked and written by batches (64 at most), so a
// file is read only when its batch comes. Progress counts each document once its batch is
// committed; the plan comes once, when the input has been read, before any model call.
TEST(IndexPipelineTest, LoadReadsAndWritesTheInputByBatches) {
  Harness h(150);
  // The last document in id order: rewritten once the first batch is committed, it is stored as
  // rewritten (a load that read the whole input first would store what it read before).
  const std::string rewritten = "Zora Zeller met Yuri Young near the old harbour. ";
  std::vector<std::pair<int64_t, int64_t>> load_progress;
  int plans = 0;
  IndexPlan plan;
  IndexContext ctx;
  ctx.store = h.store.get();
  ctx.on_progress = [&](const IndexProgress& p) {
    if (p.stage != "load") return;
    if (load_progress.empty()) h.dir.Write("proj/input/doc99.txt", rewritten);
    load_progress.emplace_back(p.done, p.total);
  };
  ctx.on_plan = [&](const IndexPlan& p) {
    ++plans;
    plan = p;
  };
  auto s = RunIndex(h.config, {}, ctx);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->documents_added, 150);
  ASSERT_EQ(load_progress.size(), 150u);
  for (size_t i = 0; i < load_progress.size(); ++i) {
    EXPECT_EQ(load_progress[i].first, static_cast<int64_t>(i) + 1);
    EXPECT_EQ(load_progress[i].second, 150);
  }
  EXPECT_EQ(plans, 1);
  EXPECT_EQ(plan.documents_added.size(), 150u);
  EXPECT_EQ(plan.chunks_to_extract, s->chunks);
  auto doc = h.store->GetDocument("doc99.txt");
  ASSERT_TRUE(doc.ok() && doc->has_value());
  EXPECT_EQ((*doc)->text, rewritten);
}

// Stopped after its first batch, the load leaves that batch stored and nothing else; a plan then
// sees it, and the next run finishes the index as one uninterrupted run would have.
TEST(IndexPipelineTest, LoadCancelledAfterABatchResumesToTheSameIndex) {
  Harness h(150);
  std::atomic<bool> cancel{false};
  IndexContext ctx;
  ctx.store = h.store.get();
  ctx.cancel = &cancel;
  ctx.on_progress = [&](const IndexProgress& p) {
    if (p.stage == "load" && p.done == 64) cancel = true;
  };
  auto stopped = RunIndex(h.config, {}, ctx);
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), ErrorCode::kCancelled);
  auto docs = h.store->ListDocuments();
  ASSERT_TRUE(docs.ok());
  EXPECT_EQ(docs->size(), 64u);

  IndexContext plain;
  plain.store = h.store.get();
  auto plan = PlanIndex(h.config, {}, plain);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->documents_added.size(), 86u);
  EXPECT_EQ(plan->documents_unchanged, 64);
  docs = h.store->ListDocuments();  // planning writes nothing
  ASSERT_TRUE(docs.ok());
  EXPECT_EQ(docs->size(), 64u);

  auto resumed = RunIndex(h.config, {}, plain);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->documents_added, 86);

  Harness clean(150);
  IndexContext clean_ctx;
  clean_ctx.store = clean.store.get();
  auto whole = RunIndex(clean.config, {}, clean_ctx);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto a = h.store->ListChunkIds();
  auto b = clean.store->ListChunkIds();
  ASSERT_TRUE(a.ok() && b.ok());
  std::sort(a->begin(), a->end());
  std::sort(b->begin(), b->end());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(resumed->entities, whole->entities);
  EXPECT_EQ(resumed->relationships, whole->relationships);
}

TEST(IndexPipelineTest, MissingInputFolderIsNotFound) {
  Harness h(1);
  h.config.input.dir = "nowhere";
  auto s = h.Index();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace grag

namespace grag {
namespace {

// Selective gleaning: a chunk whose first reply found far fewer entities and relationships per
// token than the run's median is gleaned; the others are not (extraction.glean_below_yield).
TEST(IndexPipelineTest, OnlyUnderExtractedChunksAreGleaned) {
  TempDir dir;
  for (int d = 0; d < 40; ++d) {
    std::string text = "Document " + std::to_string(d) + " tells how Alice Archer met Bruno Baker";
    if (d == 7 || d == 23) text += " (SPARSE)";
    text += " at the harbour of Port Ellen in the spring of that year, and what followed.";
    dir.Write("proj/input/doc" + std::to_string(d) + ".txt", text);
  }
  auto run = [&](double glean_below, int64_t* gleans, std::set<std::string>* gleaned) {
    Config c = TestConfig(dir);
    c.extraction.glean_below_yield = glean_below;
    std::filesystem::remove(c.Resolve(c.store.path));
    auto store = std::move(Store::Open(c.Resolve(c.store.path))).value();
    std::atomic<int64_t> n{0};
    std::mutex mu;
    ScriptedChatModel model([&](const ChatRequest& req) -> Result<std::string> {
      const std::string& first = req.messages.front().content;
      const std::string kind = PromptKind(req.messages.back().content);
      const bool sparse = first.find("SPARSE") != std::string::npos;
      if (kind == "glean") {
        ++n;
        const size_t at = first.find("Document ");
        const std::string doc = first.substr(at, first.find(' ', at + 9) - at);
        std::lock_guard lock(mu);
        gleaned->insert(doc);
        return std::string(R"({"entities": [{"name": "Gleaned )" + doc.substr(9) +
                           R"(", "type": "person", "description": "found late"}],
                           "relationships": []})");
      }
      if (kind == "extract") {
        if (sparse) {
          return std::string(
              R"({"entities": [{"name": "Alice Archer", "type": "person", "description": "d"}],
              "relationships": []})");
        }
        return std::string(R"({"entities": [
          {"name": "Alice Archer", "type": "person", "description": "d"},
          {"name": "Bruno Baker", "type": "person", "description": "d"},
          {"name": "Port Ellen", "type": "geo", "description": "d"}],
          "relationships": [
          {"source": "Alice Archer", "target": "Bruno Baker", "description": "met", "strength": 5},
          {"source": "Alice Archer", "target": "Port Ellen", "description": "at", "strength": 5}]})");
      }
      return FakeGraphRagResponder()(req);
    });
    IndexContext ctx;
    ctx.store = store.get();
    ctx.chat = &model;
    auto s = RunIndex(c, {}, ctx);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    *gleans = n.load();
  };
  int64_t gleans = 0;
  std::set<std::string> gleaned;
  run(0.75, &gleans, &gleaned);
  EXPECT_EQ(gleans, 2);
  EXPECT_EQ(gleaned, (std::set<std::string>{"Document 7", "Document 23"}));
  gleaned.clear();
  run(0, &gleans, &gleaned);  // every chunk, as before
  EXPECT_EQ(gleans, 40);
}

}  // namespace
}  // namespace grag

namespace grag {
namespace {

// A community made of one entity and its literal values (dates, amounts) gets an extractive
// report, however many values it holds: only members that are things count toward
// communities.llm_report_min_size.
TEST(IndexPipelineTest, AHubAndItsLiteralValuesGetNoLlmReport) {
  TempDir dir;
  dir.Write("proj/input/hub.txt",
            "HUB: Hanna Ives was born on 3 May 1901, moved in 1925, "
            "earned $4.5 million by 1950 and died on 9 June 1977.");
  dir.Write("proj/input/group.txt",
            "GROUP: Alice Archer, Bruno Baker, Clara Cole, Dmitri Dane "
            "and Elena Estes founded a choir together.");
  Config c = TestConfig(dir);
  c.communities.max_cluster_size = 10;
  auto store = std::move(Store::Open(c.Resolve(c.store.path))).value();
  std::mutex mu;
  std::vector<std::string> report_prompts;
  ScriptedChatModel model([&](const ChatRequest& req) -> Result<std::string> {
    const std::string& first = req.messages.front().content;
    const std::string kind = PromptKind(req.messages.back().content);
    if (kind == "extract") {
      nlohmann::json e = nlohmann::json::array(), r = nlohmann::json::array();
      if (first.find("HUB:") != std::string::npos) {
        e.push_back({{"name", "Hanna Ives"}, {"type", "person"}, {"description", "a person"}});
        for (const char* v : {"3 May 1901", "1925", "$4.5 million", "1950", "9 June 1977"}) {
          e.push_back({{"name", v}, {"type", "date"}, {"description", "a value"}});
          r.push_back(
              {{"source", "Hanna Ives"}, {"target", v}, {"description", "has"}, {"strength", 5}});
        }
      } else {
        const std::vector<std::string> people = {"Alice Archer", "Bruno Baker", "Clara Cole",
                                                 "Dmitri Dane", "Elena Estes"};
        for (const auto& p : people) {
          e.push_back({{"name", p}, {"type", "person"}, {"description", "a singer"}});
        }
        for (size_t a = 0; a < people.size(); ++a) {
          for (size_t b = a + 1; b < people.size(); ++b) {
            r.push_back({{"source", people[a]},
                         {"target", people[b]},
                         {"description", "sings with"},
                         {"strength", 5}});
          }
        }
      }
      return nlohmann::json{{"entities", e}, {"relationships", r}}.dump();
    }
    if (kind == "report") {
      std::lock_guard lock(mu);
      report_prompts.push_back(req.messages.back().content);
    }
    return FakeGraphRagResponder()(req);
  });
  IndexContext ctx;
  ctx.store = store.get();
  ctx.chat = &model;
  auto s = RunIndex(c, {}, ctx);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_FALSE(report_prompts.empty());  // the choir's community
  for (const auto& p : report_prompts) {
    EXPECT_EQ(p.find("Hanna Ives"), std::string::npos);
    EXPECT_NE(p.find("Alice Archer"), std::string::npos);
  }
  EXPECT_GE(s->reports_extractive, 1);
}

}  // namespace
}  // namespace grag
