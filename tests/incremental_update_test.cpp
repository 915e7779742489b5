// Incremental updates (issue 6): adding, removing and editing documents redoes only what changed,
// ends with the same graph as indexing from scratch, and survives a failure mid-update.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "grag/extract.h"
#include "grag/hash.h"
#include "grag/indexer.h"
#include "grag/local_search.h"
#include "grag/report.h"
#include "grag/store.h"
#include "grag/tokenizer.h"
#include "support/fake_graphrag_llm.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::FakeGraphRagReply;
using testing::PromptKind;
using testing::TempDir;

constexpr int kGroups = 25;
constexpr int kDocs = 50;

// 125 distinct two-word names, five per group.
std::string Person(int group, int member) {
  static const char* kFirst[] = {"Abel", "Berta", "Cyril", "Delia", "Emil"};
  static const char* kLast[] = {"Amsel", "Birke",  "Corvin", "Dorn",   "Eibe",   "Falk",  "Gerste",
                                "Hagen", "Ilse",   "Jordan", "Kiefer", "Linde",  "Moos",  "Nessel",
                                "Olm",   "Pappel", "Quitte", "Rabe",   "Salbei", "Tanne", "Ulme",
                                "Veit",  "Weide",  "Xaver",  "Ysop"};
  return std::string(kFirst[member]) + " " + kLast[group];
}

// A document about one group; it also names the next group's first member once, so the graph
// is one component with a community per group. `variant` changes the wording (an edit).
std::string DocumentText(int doc, int variant = 0) {
  const int g = doc % kGroups;
  std::string text;
  for (int s = 0; s < 24; ++s) {
    const int a = (s * 2 + doc + variant) % 5;
    const int b = (s * 3 + 1 + doc) % 5;
    if (a == b) continue;
    text += "then " + Person(g, a) + " met " + Person(g, b) +
            (variant == 0 ? " near the harbour and they talked. " : " in the market at dawn. ");
    if (s == 11) text += "later " + Person((g + 1) % kGroups, 0) + " came by. ";
  }
  return text;
}

// A model that answers like FakeGraphRagResponder, but whose extracted descriptions differ from
// chunk to chunk (so merged descriptions are summarised and a removed chunk's description is
// visibly gone), counting real calls by prompt kind, and failing on demand.
class CountingModel {
 public:
  explicit CountingModel(KeyValueCache* cache) {
    ScriptedModelOptions mo;
    mo.cache = cache;
    model_ = std::make_unique<ScriptedChatModel>(
        [this](const ChatRequest& req) -> Result<std::string> {
          std::string last;
          for (const auto& m : req.messages) {
            if (m.role == "user") last = m.content;
          }
          const std::string kind = PromptKind(last);
          {
            std::lock_guard<std::mutex> lock(mu_);
            if (fail_after_ >= 0 && total_ >= fail_after_) {
              return Status::Unavailable("injected failure: HTTP 503 after 6 retries");
            }
            ++calls_[kind];
            ++total_;
          }
          std::string reply = FakeGraphRagReply(last);
          if (kind != "extract") return reply;
          const std::string tag = Sha256Hex(last).substr(0, 8);
          auto j = nlohmann::json::parse(reply);
          for (auto& e : j["entities"]) {
            e["description"] = e["name"].get<std::string>() + " is seen in passage " + tag;
          }
          for (auto& r : j["relationships"]) {
            r["description"] = r["source"].get<std::string>() + " meets " +
                               r["target"].get<std::string>() + " in passage " + tag;
          }
          return j.dump();
        },
        mo);
  }
  ChatModel* get() { return model_.get(); }
  int Calls(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[kind];
  }
  int Total() {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }
  void Reset(int fail_after = -1) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.clear();
    total_ = 0;
    fail_after_ = fail_after;
  }

 private:
  std::unique_ptr<ScriptedChatModel> model_;
  std::mutex mu_;
  std::map<std::string, int> calls_;
  int total_ = 0;
  int fail_after_ = -1;  // fail every call once this many succeeded
};

struct Project {
  TempDir dir;
  Config config;
  std::unique_ptr<Store> store;
  std::unique_ptr<CountingModel> model;

  explicit Project(int docs = kDocs) {
    for (int d = 0; d < docs; ++d) WriteDoc(d);
    config.root = dir / "proj";
    config.chunks.size = 120;
    config.chunks.overlap = 10;
    config.llm.concurrency = 4;
    config.communities.max_cluster_size = 4;
    store = std::move(Store::Open(config.Resolve(config.store.path))).value();
    model = std::make_unique<CountingModel>(&store->ReplyCache());
  }

  std::string DocPath(int d) const { return dir / ("proj/input/doc" + std::to_string(d) + ".txt"); }
  void WriteDoc(int d, int variant = 0) const {
    dir.Write("proj/input/doc" + std::to_string(d) + ".txt", DocumentText(d, variant));
  }

  Result<IndexSummary> Run(IndexRequest request = {}) {
    IndexContext ctx;
    ctx.store = store.get();
    ctx.chat = model->get();
    return RunIndex(config, request, ctx);
  }
  Result<IndexSummary> Add(const std::string& path) {
    IndexRequest r;
    r.paths = {path};
    r.sync_folders = false;
    return Run(r);
  }
};

// The graph as comparable values: entity key -> type and description; pair -> weight and
// description.
struct GraphSnapshot {
  std::map<std::string, std::string> entities;
  std::map<std::string, std::string> relationships;
  bool operator==(const GraphSnapshot&) const = default;
};

GraphSnapshot Snapshot(Store& store) {
  GraphSnapshot s;
  std::map<int64_t, std::string> key_of;
  const auto entities = store.ListEntities().value();
  for (const auto& e : entities) {
    key_of[e.id] = e.name_key;
    s.entities[e.name_key] = e.type + " | " + e.description;
  }
  const auto relationships = store.ListRelationships().value();
  for (const auto& r : relationships) {
    std::string a = key_of[r.source_id];
    std::string b = key_of[r.target_id];
    if (b < a) std::swap(a, b);
    s.relationships[a + " -- " + b] = std::to_string(r.weight) + " | " + r.description;
  }
  return s;
}

// community id -> (level, member keys)
std::map<int64_t, std::pair<int64_t, std::set<std::string>>> Communities(Store& store) {
  std::map<int64_t, std::pair<int64_t, std::set<std::string>>> out;
  const auto communities = store.ListCommunities().value();
  for (const auto& c : communities) {
    std::set<std::string> keys;
    for (int64_t e : c.entity_ids) keys.insert(store.GetEntity(e).value()->name_key);
    out[c.id] = {c.level, keys};
  }
  return out;
}

std::map<int64_t, std::string> ReportHashes(Store& store) {
  std::map<int64_t, std::string> out;
  const auto reports = store.ListReports().value();
  for (const auto& r : reports) out[r.community_id] = r.input_hash;
  return out;
}

// Reports whose (community id, input hash) was not stored before: the ones that had to be
// written.
int ChangedReports(const std::map<int64_t, std::string>& before,
                   const std::map<int64_t, std::string>& after) {
  int changed = 0;
  for (const auto& [id, hash] : after) {
    auto it = before.find(id);
    if (it == before.end() || it->second != hash) ++changed;
  }
  return changed;
}

void ExpectEveryCommunityReported(Store& store) {
  const auto reports = ReportHashes(store);
  const auto communities = store.ListCommunities().value();
  for (const auto& c : communities) {
    EXPECT_TRUE(reports.count(c.id)) << "community " << c.id << " has no report";
  }
}

// The index a from-scratch run over `docs` documents (with doc `extra` written too) builds.
GraphSnapshot FromScratch(int docs, const std::function<void(Project&)>& edit = {}) {
  Project p(docs);
  if (edit) edit(p);
  auto s = p.Run();
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return Snapshot(*p.store);
}

// Document 50: about group 3, with a person no other document names.
void WriteNewDocument(Project& p) {
  p.dir.Write("proj/input/doc50.txt", DocumentText(3, 2) + "then Zora Quill met " + Person(3, 1) +
                                          " on the pier. then Zora Quill met " + Person(3, 2) +
                                          " again. ");
}

// Document 50, small: one passage in which a newcomer meets members of group 3 (a small change
// to that group's communities and to its people's descriptions).
void WriteSmallNewDocument(Project& p) {
  p.dir.Write("proj/input/doc50.txt", "then Zora Quill met " + Person(3, 1) +
                                          " on the pier. then " + Person(3, 0) + " met " +
                                          Person(3, 2) + " at dawn. ");
}

TEST(IncrementalUpdateTest, ReindexingUnchangedInputMakesNoLlmCall) {
  Project p;
  ASSERT_TRUE(p.Run().ok());
  p.model->Reset();
  auto again = p.Run();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->usage.calls, 0);
  EXPECT_EQ(p.model->Total(), 0);
  EXPECT_TRUE(again->communities_unchanged);
  EXPECT_EQ(again->plan.chunks_to_extract, 0);
  EXPECT_EQ(again->plan.documents_unchanged, kDocs);
}

TEST(IncrementalUpdateTest, AnUnchangedReRunKeepsTheGraphAndChunksWithoutRedoingThem) {
  Project p;
  auto first = p.Run();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->graph_unchanged);
  const GraphSnapshot graph = Snapshot(*p.store);
  const std::vector<std::string> chunks = p.store->ListChunkIds().value();
  auto again = p.Run();
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->graph_unchanged);
  EXPECT_EQ(again->entities, first->entities);
  EXPECT_EQ(again->relationships, first->relationships);
  EXPECT_EQ(again->resolution_merged, first->resolution_merged);
  EXPECT_EQ(again->documents_unchanged, kDocs);
  EXPECT_EQ(again->chunks, first->chunks);
  EXPECT_EQ(again->chunks_added + again->chunks_removed, 0);
  EXPECT_EQ(Snapshot(*p.store), graph);
  EXPECT_EQ(p.store->ListChunkIds().value(), chunks);
}

// The merge is skipped only when nothing it reads has changed: a replaced extraction result, a
// person's override, a resolution setting or a removed document each make it run again.
TEST(IncrementalUpdateTest, TheMergeRunsAgainWhenAnyOfItsInputsChanges) {
  Project p;
  ASSERT_TRUE(p.Run().ok());
  const ExtractorId extractor{ExtractorKind::kLlm, p.model->get()->model()};

  // One chunk's result replaced (as a re-extraction does) with a newcomer in it.
  const std::string chunk = p.store->ListChunkIds().value().at(3);
  ExtractionRecord result = p.store->GetExtraction(chunk, extractor).value().value();
  result.entities.push_back({"Qwerty Zed", "qwerty zed", "PERSON", "A newcomer."});
  ASSERT_TRUE(p.store->PutExtraction(result).ok());
  auto s = p.Run();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->graph_unchanged);
  EXPECT_TRUE(Snapshot(*p.store).entities.count("qwerty zed"));
  s = p.Run();
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->graph_unchanged);

  // A person's override: two entities become one.
  const GraphSnapshot before = Snapshot(*p.store);
  auto it = before.entities.begin();
  const std::string a = it->first;
  const std::string b = (++it)->first;
  ASSERT_TRUE(p.store->PutEntityOverride(a, b, /*merge=*/true).ok());
  IndexRequest graph_only;
  graph_only.graph_only = true;
  s = p.Run(graph_only);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->graph_unchanged);
  EXPECT_EQ(Snapshot(*p.store).entities.size(), before.entities.size() - 1);

  // A resolution setting.
  p.config.resolution.merge_threshold += 0.01;
  s = p.Run();
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->graph_unchanged);

  // A document removed: the graph is the one a fresh index of the others builds.
  std::filesystem::remove(p.DocPath(3));
  s = p.Run();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->graph_unchanged);
  s = p.Run();
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->graph_unchanged);
}

// Entity and relationship keys ("e:name_key", "r:source_id-target_id") that `sql` lists.
std::set<std::string> Keys(Store& store, const std::string& sql) {
  std::set<std::string> out;
  auto rows = store.RunReadOnlySql(sql, 1000000, std::chrono::milliseconds(0));
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  if (!rows.ok()) return out;
  for (const auto& r : rows->rows) out.insert(r[0].text);
  return out;
}

std::set<std::string> GraphKeys(Store& store) {
  return Keys(store,
              "SELECT 'e:' || name_key FROM main.entities UNION ALL SELECT "
              "'r:' || source_id || '-' || target_id FROM main.relationships");
}

// From now on, triggers in the index file log each entity and relationship row written (an
// insert, or an update even of the same values) into a table `written`.
void LogGraphWrites(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(
      db,
      "CREATE TABLE written (key TEXT NOT NULL);"
      "CREATE TRIGGER entity_inserted AFTER INSERT ON entities BEGIN "
      "INSERT INTO written VALUES ('e:' || new.name_key); END;"
      "CREATE TRIGGER entity_updated AFTER UPDATE ON entities BEGIN "
      "INSERT INTO written VALUES ('e:' || new.name_key); END;"
      "CREATE TRIGGER relationship_inserted AFTER INSERT ON relationships BEGIN "
      "INSERT INTO written VALUES ('r:' || new.source_id || '-' || new.target_id); END;"
      "CREATE TRIGGER relationship_updated AFTER UPDATE ON relationships BEGIN "
      "INSERT INTO written VALUES ('r:' || new.source_id || '-' || new.target_id); END;",
      nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err != nullptr ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// An update writes the entities and relationships its change reaches and leaves the others'
// rows alone, yet the graph is the one a fresh index builds.
TEST(IncrementalUpdateTest, AnUpdateRewritesOnlyTheGraphRowsItChanges) {
  Project p;
  ASSERT_TRUE(p.Run().ok());
  const std::set<std::string> before = GraphKeys(*p.store);
  LogGraphWrites(p.config.Resolve(p.config.store.path));
  WriteSmallNewDocument(p);
  auto s = p.Run();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const std::set<std::string> written = Keys(*p.store, "SELECT key FROM main.written");
  int rewritten = 0;
  int kept = 0;
  for (const std::string& key : GraphKeys(*p.store)) {
    if (!before.contains(key)) continue;
    (written.contains(key) ? rewritten : kept) += 1;
  }
  EXPECT_GT(rewritten, 0);
  EXPECT_GT(kept, 4 * rewritten) << kept << " kept, " << rewritten << " rewritten";
  EXPECT_EQ(Snapshot(*p.store), FromScratch(kDocs, [](Project& q) { WriteSmallNewDocument(q); }));
  ExpectEveryCommunityReported(*p.store);
}

// Unchanged documents keep their chunks only while the chunk settings stay those they were cut
// with; a run over part of the input applies new settings to that part only, and the next run
// over the whole input to the rest.
TEST(IncrementalUpdateTest, NewChunkSettingsCutEveryDocumentAgain) {
  Project p(6);
  ASSERT_TRUE(p.Run().ok());
  auto max_tokens = [&](const std::string& doc) {
    int64_t m = 0;
    for (const auto& c : p.store->ListChunks(doc).value()) m = std::max(m, c.n_tokens);
    return m;
  };
  ASSERT_GT(max_tokens("doc1.txt"), 60);
  p.config.chunks.size = 60;
  p.config.chunks.overlap = 5;
  ASSERT_TRUE(p.Add(p.DocPath(0)).ok());
  EXPECT_LE(max_tokens("doc0.txt"), 60);
  EXPECT_GT(max_tokens("doc1.txt"), 60);  // not read by that run
  auto s = p.Run();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_GT(s->chunks_added, 0);
  for (int d = 0; d < 6; ++d) EXPECT_LE(max_tokens("doc" + std::to_string(d) + ".txt"), 60) << d;
  const std::vector<std::string> chunks = p.store->ListChunkIds().value();
  s = p.Run();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->chunks_added + s->chunks_removed, 0);
  EXPECT_EQ(p.store->ListChunkIds().value(), chunks);
  EXPECT_TRUE(s->graph_unchanged);
}

TEST(IncrementalUpdateTest, AddingOneDocumentExtractsOnlyItsChunksAndRewritesOnlyChangedReports) {
  Project p;
  auto full = p.Run();
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  const auto reports_before = ReportHashes(*p.store);
  const auto communities_before = Communities(*p.store);

  WriteNewDocument(p);
  p.model->Reset();
  auto added = p.Add(p.dir / "proj/input/doc50.txt");
  ASSERT_TRUE(added.ok()) << added.status().ToString();

  // The plan named the work before doing it.
  EXPECT_EQ(added->plan.documents_added, std::vector<std::string>{"doc50.txt"});
  EXPECT_TRUE(added->plan.documents_removed.empty());
  const auto new_chunks = static_cast<int>(p.store->ListChunks("doc50.txt")->size());
  EXPECT_EQ(added->plan.chunks_to_extract, new_chunks);
  // Extraction calls only for the new document's chunks.
  EXPECT_EQ(p.model->Calls("extract"), new_chunks);
  EXPECT_LE(p.model->Calls("glean"), new_chunks);
  EXPECT_EQ(added->chunks_extracted, new_chunks);

  // Reports: exactly those whose inputs changed were written, and that is a small part.
  const auto reports_after = ReportHashes(*p.store);
  const int changed = ChangedReports(reports_before, reports_after);
  EXPECT_EQ(added->reports_generated, changed);
  // A report prompt seen before (same text under another community id) comes from the cache.
  EXPECT_LE(p.model->Calls("report"), changed);
  EXPECT_GT(changed, 0);
  EXPECT_LT(changed, static_cast<int>(reports_after.size()) / 3)
      << changed << " of " << reports_after.size() << " reports rewritten";
  EXPECT_GT(added->reports_reused, 0);
  ExpectEveryCommunityReported(*p.store);

  // Untouched regions kept their communities, ids included.
  EXPECT_TRUE(added->communities_warm_start);
  EXPECT_GT(added->communities_kept, 0);
  const auto communities_after = Communities(*p.store);
  int same = 0;
  for (const auto& [id, c] : communities_after) {
    auto it = communities_before.find(id);
    if (it != communities_before.end() && it->second == c) ++same;
  }
  EXPECT_GT(same, static_cast<int>(communities_after.size()) / 2);

  // The same graph as indexing the 51 documents from scratch.
  EXPECT_EQ(Snapshot(*p.store), FromScratch(kDocs, WriteNewDocument));
  EXPECT_TRUE(p.store->GetEntityByKey("zora quill").value().has_value());

  std::cout << "[ figures ] full index: " << full->usage.calls
            << " LLM calls; adding 1 document: " << added->usage.calls << " calls ("
            << p.model->Calls("extract") << " extract, " << p.model->Calls("glean") << " glean, "
            << p.model->Calls("summarize") << " summarize, " << changed << " of "
            << reports_after.size() << " reports)\n";
}

TEST(IncrementalUpdateTest, RemovingADocumentDropsItsExclusiveEntitiesAndRewritesAffectedReports) {
  Project p;
  WriteNewDocument(p);
  ASSERT_TRUE(p.Run().ok());
  const auto zora = p.store->GetEntityByKey("zora quill").value();
  ASSERT_TRUE(zora.has_value());
  const auto reports_before = ReportHashes(*p.store);

  p.model->Reset();
  IndexRequest remove;
  remove.remove = {"doc50.txt"};
  auto s = p.Run(remove);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->documents_removed, 1);
  EXPECT_EQ(s->plan.documents_removed, std::vector<std::string>{"doc50.txt"});
  EXPECT_EQ(p.model->Calls("extract"), 0);
  // The file is still there: remove does not scan the input or touch files.
  EXPECT_TRUE(std::filesystem::exists(p.dir / "proj/input/doc50.txt"));

  // Its exclusive entity is gone, from the graph and from every community.
  EXPECT_FALSE(p.store->GetEntityByKey("zora quill").value().has_value());
  for (const auto& [id, c] : Communities(*p.store)) {
    EXPECT_FALSE(c.second.count("zora quill")) << "community " << id;
  }
  // Shared entities lost its descriptions: the graph equals the 50 documents' from scratch.
  std::filesystem::remove(p.dir / "proj/input/doc50.txt");
  EXPECT_EQ(Snapshot(*p.store), FromScratch(kDocs));

  // Affected reports were rewritten, the others kept, and none is stale: another run writes none.
  const int changed = ChangedReports(reports_before, ReportHashes(*p.store));
  EXPECT_GT(changed, 0);
  EXPECT_EQ(s->reports_generated, changed);
  EXPECT_LE(p.model->Calls("report"), changed);
  ExpectEveryCommunityReported(*p.store);
  p.model->Reset();
  auto again = p.Run();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(p.model->Total(), 0);
}

TEST(IncrementalUpdateTest, RemovingAnUnknownDocumentIsAClearError) {
  Project p(2);
  ASSERT_TRUE(p.Run().ok());
  IndexRequest remove;
  remove.remove = {"nope.txt"};
  auto s = p.Run(remove);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(s.status().message().find("nope.txt"), std::string::npos);
  EXPECT_EQ(p.store->ListDocuments()->size(), 2u);
}

TEST(IncrementalUpdateTest, EditingADocumentIsADeleteAndAnAdd) {
  Project p;
  ASSERT_TRUE(p.Run().ok());
  p.WriteDoc(7, /*variant=*/1);
  IndexContext ctx;
  ctx.store = p.store.get();
  ctx.chat = p.model->get();
  auto plan = PlanIndex(p.config, {}, ctx);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->documents_changed, std::vector<std::string>{"doc7.txt"});
  EXPECT_GT(plan->chunks_to_extract, 0);
  EXPECT_GT(plan->chunks_removed, 0);

  p.model->Reset();
  auto s = p.Run();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->documents_changed, 1);
  EXPECT_EQ(p.model->Calls("extract"), plan->chunks_to_extract);
  EXPECT_EQ(s->chunks_removed, plan->chunks_removed);
  EXPECT_EQ(Snapshot(*p.store), FromScratch(kDocs, [](Project& q) { q.WriteDoc(7, 1); }));
  ExpectEveryCommunityReported(*p.store);
}

TEST(IncrementalUpdateTest, DryRunChangesNothingAndCallsNoModel) {
  Project p(4);
  ASSERT_TRUE(p.Run().ok());
  WriteNewDocument(p);
  std::filesystem::remove(p.DocPath(1));
  p.model->Reset();
  IndexContext ctx;
  ctx.store = p.store.get();
  ctx.chat = p.model->get();
  auto plan = PlanIndex(p.config, {}, ctx);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->documents_added, std::vector<std::string>{"doc50.txt"});
  EXPECT_EQ(plan->documents_removed, std::vector<std::string>{"doc1.txt"});
  EXPECT_EQ(plan->documents_unchanged, 3);
  EXPECT_GT(plan->extraction_calls_max, 0);
  EXPECT_EQ(p.model->Total(), 0);
  EXPECT_EQ(p.store->ListDocuments()->size(), 4u);
}

// A failure injected after `fail_after` successful calls of the update, then a clean run: the
// result is the uninterrupted update's.
void ExpectFailureMidUpdateRecovers(int fail_after) {
  Project reference;
  ASSERT_TRUE(reference.Run().ok());
  WriteNewDocument(reference);
  ASSERT_TRUE(reference.Add(reference.dir / "proj/input/doc50.txt").ok());

  Project p;
  ASSERT_TRUE(p.Run().ok());
  WriteNewDocument(p);
  p.model->Reset(fail_after);
  auto failed = p.Add(p.dir / "proj/input/doc50.txt");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(p.store->ListRuns().value().front().status, RunStatus::kFailed);

  p.model->Reset();
  auto resumed = p.Add(p.dir / "proj/input/doc50.txt");
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(Snapshot(*p.store), Snapshot(*reference.store));
  EXPECT_EQ(Communities(*p.store), Communities(*reference.store));
  EXPECT_EQ(ReportHashes(*p.store), ReportHashes(*reference.store));
  ExpectEveryCommunityReported(*p.store);
}

TEST(IncrementalUpdateTest, FailureDuringExtractionOfAnUpdateResumesToTheSameIndex) {
  ExpectFailureMidUpdateRecovers(1);
}

TEST(IncrementalUpdateTest, FailureDuringReportsOfAnUpdateResumesToTheSameIndex) {
  // The new document's chunks and gleanings come first; a few calls later the reports run.
  Project probe;
  ASSERT_TRUE(probe.Run().ok());
  WriteNewDocument(probe);
  probe.model->Reset();
  ASSERT_TRUE(probe.Add(probe.dir / "proj/input/doc50.txt").ok());
  const int before_reports = probe.model->Total() - probe.model->Calls("report");
  ExpectFailureMidUpdateRecovers(before_reports + 1);
}

TEST(IncrementalUpdateTest, DriftBeyondTheThresholdFallsBackToAFullRedetection) {
  Project p;
  ASSERT_TRUE(p.Run().ok());
  WriteNewDocument(p);
  p.config.communities.drift_threshold = 0;  // any loss against a fresh run is too much
  auto s = p.Add(p.dir / "proj/input/doc50.txt");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto clustering = p.store->LatestClustering().value();
  ASSERT_TRUE(clustering.has_value());
  ASSERT_TRUE(clustering->fresh_modularity.has_value());
  ASSERT_TRUE(clustering->modularity.has_value());
  if (clustering->warm_start) {
    // Kept only because it lost nothing to the fresh run.
    EXPECT_LE(*clustering->fresh_modularity, *clustering->modularity + 1e-12);
    EXPECT_TRUE(clustering->note.empty());
  } else {
    // The fresh partition was taken, and the index and the run say why.
    EXPECT_DOUBLE_EQ(*clustering->modularity, *clustering->fresh_modularity);
    EXPECT_NE(clustering->note.find("full re-detection"), std::string::npos);
    EXPECT_EQ(s->community_note, clustering->note);
  }
  // With a generous threshold the warm start is kept.
  WriteNewDocument(p);
  p.dir.Write("proj/input/doc51.txt", DocumentText(9, 2));
  p.config.communities.drift_threshold = 1.0;
  auto kept = p.Add(p.dir / "proj/input/doc51.txt");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_TRUE(kept->communities_warm_start);
  EXPECT_TRUE(kept->community_note.empty());
  ExpectEveryCommunityReported(*p.store);
}

TEST(IncrementalUpdateTest, WarmStartCanBeTurnedOff) {
  Project p(8);
  ASSERT_TRUE(p.Run().ok());
  WriteNewDocument(p);
  p.config.communities.incremental = false;
  auto s = p.Add(p.dir / "proj/input/doc50.txt");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->communities_warm_start);
  EXPECT_FALSE(p.store->LatestClustering().value()->warm_start);
}

// Community id -> whether an LLM report of it stands stale, for the communities with a report.
std::map<int64_t, bool> StaleFlags(Store& store) {
  std::map<int64_t, bool> out;
  const auto reports = store.ListReports().value();
  for (const auto& r : reports) out[r.community_id] = r.stale;
  return out;
}

TEST(IncrementalUpdateTest, SmallChangesKeepReportsStaleWithANoteUntilRefreshed) {
  Project p;
  ASSERT_TRUE(p.Run().ok());
  WriteSmallNewDocument(p);
  p.model->Reset();
  auto added = p.Add(p.dir / "proj/input/doc50.txt");
  ASSERT_TRUE(added.ok()) << added.status().ToString();

  // Some communities changed too little to be worth a call: their reports stand, marked stale,
  // counted in the run and in the index's stats, and carry a note on what changed.
  EXPECT_GT(added->reports_kept_stale, 0);
  const auto reports = p.store->ListReports().value();
  int64_t stale = 0;
  for (const auto& r : reports) {
    if (!r.stale) continue;
    ++stale;
    EXPECT_NE(r.full_content.find("## Since this report was written"), std::string::npos)
        << "community " << r.community_id;
    EXPECT_EQ(r.generator, ReportGenerator::kLlm);
  }
  EXPECT_EQ(stale, added->reports_kept_stale);
  EXPECT_EQ(p.store->Stats()->reports_stale, stale);
  EXPECT_EQ(added->usage.calls - added->usage.cache_hits, p.model->Total());

  // The new document's entity reaches every report above it: written after it joined (its
  // basis has it) or stale with a note naming it.
  const auto zora = p.store->GetEntityByKey("zora quill").value();
  ASSERT_TRUE(zora.has_value());
  int reached = 0;
  for (const auto& c : p.store->ListCommunities().value()) {
    if (std::find(c.entity_ids.begin(), c.entity_ids.end(), zora->id) == c.entity_ids.end()) {
      continue;
    }
    const auto r = p.store->GetReport(c.id).value();
    ASSERT_TRUE(r.has_value()) << "community " << c.id;
    if (r->generator != ReportGenerator::kLlm) continue;
    ++reached;
    if (r->stale) {
      EXPECT_NE(r->full_content.find("Zora Quill"), std::string::npos) << "community " << c.id;
    } else {
      EXPECT_TRUE(std::binary_search(r->basis.members.begin(), r->basis.members.end(), zora->id))
          << "community " << c.id;
    }
  }
  EXPECT_GT(reached, 0);
  // Local search finds it, with the new document's passage.
  const Tokenizer* tok = Tokenizer::Get(p.config.chunks.encoding).value();
  auto context = BuildLocalContext(*p.store, nullptr, *tok, "Who is Zora Quill?");
  ASSERT_TRUE(context.ok()) << context.status().ToString();
  ASSERT_FALSE(context->matches.empty());
  EXPECT_NE(context->entities_text.find("Zora Quill"), std::string::npos);
  EXPECT_NE(context->chunks_text.find("Zora Quill met"), std::string::npos);

  // --refresh-reports rewrites every stale report and nothing else is needed afterwards: the
  // reports are what generating them afresh on these communities gives.
  p.model->Reset();
  IndexRequest refresh;
  refresh.refresh_reports = true;
  auto refreshed = p.Run(refresh);
  ASSERT_TRUE(refreshed.ok()) << refreshed.status().ToString();
  EXPECT_EQ(refreshed->reports_kept_stale, 0);
  EXPECT_GE(refreshed->reports_generated, stale);
  EXPECT_EQ(p.model->Calls("extract"), 0);
  EXPECT_EQ(p.store->Stats()->reports_stale, 0);
  for (const auto& [id, is_stale] : StaleFlags(*p.store)) EXPECT_FALSE(is_stale) << id;
  ReportOptions ro;
  const int64_t min_size = p.config.communities.llm_report_min_size;
  ro.include = [min_size](const CommunityRecord& c) { return c.size >= min_size; };
  ro.refresh_threshold = 0;
  auto plan = PlanReports(*p.store, *tok, ro, p.model->get()->model());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_FALSE(plan->empty());
  for (const auto& planned : *plan) {
    EXPECT_TRUE(planned.up_to_date) << "community " << planned.input.community_id;
  }
  p.model->Reset();
  ASSERT_TRUE(p.Run().ok());
  EXPECT_EQ(p.model->Total(), 0);
}

TEST(IncrementalUpdateTest, AThresholdOfZeroRewritesEveryChangedReport) {
  Project p;
  p.config.communities.report_refresh_threshold = 0;
  ASSERT_TRUE(p.Run().ok());
  const auto before = ReportHashes(*p.store);
  WriteNewDocument(p);
  auto added = p.Add(p.dir / "proj/input/doc50.txt");
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(added->reports_kept_stale, 0);
  EXPECT_EQ(p.store->Stats()->reports_stale, 0);
  EXPECT_EQ(added->reports_generated, ChangedReports(before, ReportHashes(*p.store)));
}

// Entity key -> description, of the entities whose description is an LLM summary.
std::map<std::string, std::string> Summaries(Store& store) {
  std::map<std::string, std::string> out;
  const auto entities = store.ListEntities().value();
  for (const auto& e : entities) {
    if (!e.description_model.empty()) out[e.name_key] = e.description;
  }
  return out;
}

TEST(IncrementalUpdateTest, SummariesTakeNewDescriptionsWithoutACallUntilMaterialIsGone) {
  Project p;
  p.config.summaries.max_joined_tokens = 30;  // so that the people's descriptions get summaries
  ASSERT_TRUE(p.Run().ok());
  const auto before = Summaries(*p.store);
  ASSERT_FALSE(before.empty());

  WriteSmallNewDocument(p);
  p.model->Reset();
  auto added = p.Add(p.dir / "proj/input/doc50.txt");
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_GT(added->descriptions_appended, 0);
  // The summaries stand, with the new descriptions after them.
  int extended = 0;
  for (const auto& [key, description] : Summaries(*p.store)) {
    auto it = before.find(key);
    if (it == before.end() || it->second == description) continue;
    if (description.rfind(it->second + "\n", 0) == 0) ++extended;
  }
  EXPECT_GT(extended, 0);

  // Without the allowance every changed summary is written again.
  Project strict;
  strict.config.summaries.max_joined_tokens = 30;
  strict.config.summaries.refresh_share = 0;
  ASSERT_TRUE(strict.Run().ok());
  WriteSmallNewDocument(strict);
  strict.model->Reset();
  auto strict_added = strict.Add(strict.dir / "proj/input/doc50.txt");
  ASSERT_TRUE(strict_added.ok()) << strict_added.status().ToString();
  EXPECT_EQ(strict_added->descriptions_appended, 0);
  EXPECT_GT(strict.model->Calls("summarize"), p.model->Calls("summarize"));

  // Removing the document removes what it brought: summaries are written again from what is
  // left, which is what the first index summarised.
  IndexRequest remove;
  remove.remove = {"doc50.txt"};
  auto removed = p.Run(remove);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(Summaries(*p.store), before);
}

TEST(IncrementalUpdateTest, CommunitiesAwayFromTheChangeKeepTheirMembersAndIds) {
  Project p;
  ASSERT_TRUE(p.Run().ok());
  const auto before = Communities(*p.store);
  WriteNewDocument(p);  // about group 3, naming group 4's first member, and Zora Quill
  auto added = p.Add(p.dir / "proj/input/doc50.txt");
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_GT(added->entities_changed, 0);
  EXPECT_TRUE(added->communities_warm_start);
  std::set<std::string> touched = {"zora quill"};
  for (int m = 0; m < 5; ++m) touched.insert(NormalizeEntityName(Person(3, m)));
  touched.insert(NormalizeEntityName(Person(4, 0)));
  const auto after = Communities(*p.store);
  int untouched = 0;
  for (const auto& [id, c] : before) {
    bool near = false;
    for (const auto& key : c.second) near = near || touched.count(key) > 0;
    if (near) continue;
    ++untouched;
    auto it = after.find(id);
    ASSERT_NE(it, after.end()) << "community " << id << " is gone";
    EXPECT_EQ(it->second, c) << "community " << id << " changed";
  }
  EXPECT_GT(untouched, 0);
  // Nothing is pending once the communities are written.
  EXPECT_EQ(p.store->GetMeta("communities_pending_changes").value().value_or(""), "");
}

TEST(IncrementalUpdateTest, DryRunEstimatesCallsByKindLearningFromEarlierRuns) {
  Project p;
  p.config.llm.price_input_per_million = 2;
  p.config.llm.price_output_per_million = 8;
  IndexContext ctx;
  ctx.store = p.store.get();
  ctx.chat = p.model->get();
  // A first index: extraction exact, the rest from typical ratios.
  auto first = PlanIndex(p.config, {}, ctx);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->estimate.update);
  EXPECT_EQ(first->estimate.history_runs, 0);
  EXPECT_EQ(first->estimate.calls.extract, first->chunks_to_extract);
  // Gleaning only for the chunks the model under-extracts: about one in five.
  EXPECT_GT(first->estimate.calls.glean, 0);
  EXPECT_LT(first->estimate.calls.glean, first->chunks_to_extract * p.config.extraction.gleanings);
  EXPECT_LE(first->estimate.calls.resolve,
            std::max<int64_t>(
                1, static_cast<int64_t>(std::ceil(p.config.resolution.max_judge_share *
                                                  static_cast<double>(first->chunks_to_extract)))));
  {
    // Gleaning every chunk (the old way) is estimated as such.
    Config all = p.config;
    all.extraction.glean_below_yield = 0;
    auto every = PlanIndex(all, {}, ctx);
    ASSERT_TRUE(every.ok());
    EXPECT_EQ(every->estimate.calls.glean, first->chunks_to_extract * all.extraction.gleanings);
  }
  EXPECT_GT(first->estimate.calls.report, 0);
  ASSERT_TRUE(first->estimate.cost.has_value());
  EXPECT_GT(*first->estimate.cost, 0);
  auto full = p.Run();
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->calls.Total(), full->usage.calls);
  EXPECT_EQ(full->calls.extract, first->chunks_to_extract);

  // The first update of it: typical update ratios; the second learns from the first.
  WriteNewDocument(p);
  auto plan1 = PlanIndex(p.config, {}, ctx);
  ASSERT_TRUE(plan1.ok()) << plan1.status().ToString();
  EXPECT_TRUE(plan1->estimate.update);
  EXPECT_EQ(plan1->estimate.history_runs, 0);
  auto update1 = p.Run();
  ASSERT_TRUE(update1.ok()) << update1.status().ToString();
  p.dir.Write("proj/input/doc51.txt",
              DocumentText(9, 2) + "then Zora Quill met " + Person(9, 1) + " at the fair. ");
  auto plan2 = PlanIndex(p.config, {}, ctx);
  ASSERT_TRUE(plan2.ok()) << plan2.status().ToString();
  EXPECT_EQ(plan2->estimate.history_runs, 1);
  const double per_chunk =
      static_cast<double>(update1->calls.report) / static_cast<double>(update1->calls.extract);
  EXPECT_EQ(plan2->estimate.calls.report,
            std::llround(per_chunk * static_cast<double>(plan2->chunks_to_extract)));
  const int calls = p.model->Total();
  ASSERT_TRUE(PlanIndex(p.config, {}, ctx).ok());
  EXPECT_EQ(p.model->Total(), calls);  // a plan calls nothing
}

TEST(IncrementalUpdateTest, ABudgetStopsARunCleanlyAndTheNextRunResumes) {
  Project p;
  p.config.llm.max_calls = 10;
  auto stopped = p.Run();
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(stopped.status().message().find("llm.max_calls"), std::string::npos)
      << stopped.status().message();
  // Calls in flight may finish past the limit, no more.
  EXPECT_LE(p.model->Total(), 10 + p.config.llm.concurrency);
  EXPECT_EQ(p.store->ListRuns().value().front().status, RunStatus::kFailed);

  p.config.llm.max_calls = 0;
  auto resumed = p.Run();
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(Snapshot(*p.store), FromScratch(kDocs));
  ExpectEveryCommunityReported(*p.store);

  // A cost budget needs prices, and stops the same way.
  Project priced(4);
  priced.config.llm.price_input_per_million = 1000000;  // a token costs 1
  priced.config.llm.max_cost = 1;
  auto over = priced.Run();
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("llm.max_cost"), std::string::npos);
}

// A model per role at its own prices (llm.<role>.price_*): the run keeps its tokens by role,
// grag stats costs them at each role's prices, and a budget counts each role's calls at its own.
TEST(IncrementalUpdateTest, EachRoleIsCostedAtItsOwnPrices) {
  Project p(4);
  auto done = p.Run();
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  const std::map<std::string, int64_t> counters = p.store->TotalRunCounters().value();
  auto at = [&](const std::string& key) { return counters.count(key) ? counters.at(key) : 0; };
  ASSERT_GT(at("tokens_in_extract"), 0);
  ASSERT_GT(at("tokens_in_summarize"), 0);
  EXPECT_LE(at("tokens_in_extract") + at("tokens_in_summarize") + at("tokens_in_resolve"),
            at("tokens_in"));

  LlmConfig llm;
  llm.price_input_per_million = 2;
  llm.price_output_per_million = 8;
  llm.extract.price_input_per_million = 0;  // a free local model extracts
  llm.extract.price_output_per_million = 0;
  llm.resolve.price_input_per_million = 1;  // output stays at [llm]'s
  const std::vector<RoleCost> by_role = SpendByRole(counters, llm);
  ASSERT_EQ(by_role.size(), 3u);
  for (const RoleCost& r : by_role) {
    ASSERT_TRUE(r.cost.has_value()) << r.role;
    const double in = r.role == "summarize" ? 2 : r.role == "resolve" ? 1 : 0;
    const double out = r.role == "extract" ? 0 : 8;
    EXPECT_DOUBLE_EQ(*r.cost, (static_cast<double>(at("tokens_in_" + r.role)) * in +
                               static_cast<double>(at("tokens_out_" + r.role)) * out) /
                                  1e6)
        << r.role;
  }
  EXPECT_EQ(by_role[0].role, "extract");
  EXPECT_EQ(by_role[0].calls, at("calls_extract") + at("calls_glean"));
  EXPECT_EQ(*by_role[0].cost, 0);

  // Only extraction is priced: the budget counts its tokens and stops the run in extraction.
  Project priced(4);
  priced.config.llm.extract.price_input_per_million = 1000000;  // a token costs 1
  priced.config.llm.max_cost = 1;
  ASSERT_TRUE(ValidateConfig(priced.config).ok());
  auto over = priced.Run();
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("llm.max_cost"), std::string::npos);
  // Extraction free, everything else unpriced: no budget is reached.
  Project free_run(4);
  free_run.config.llm.extract.price_input_per_million = 0;
  free_run.config.llm.summarize.price_input_per_million = 0.000001;
  free_run.config.llm.max_cost = 1000;
  ASSERT_TRUE(free_run.Run().ok());
}

// The closing note's figures: LLM calls of adding 1%, 5% and 10% new documents, as a fraction
// of a full index's calls. Asserted loosely (well under a full rebuild), printed exactly.
TEST(IncrementalUpdateTest, AddingAFewPercentCostsAFewPercentOfAFullIndex) {
  constexpr int kBase = 100;
  for (int percent : {1, 5, 10}) {
    Project p(kBase);
    auto full = p.Run();
    ASSERT_TRUE(full.ok()) << full.status().ToString();
    const int added = kBase * percent / 100;
    for (int d = kBase; d < kBase + added; ++d) p.WriteDoc(d, 1);
    p.model->Reset();
    auto update = p.Run();
    ASSERT_TRUE(update.ok()) << update.status().ToString();
    EXPECT_EQ(update->documents_added, added);
    const double fraction =
        static_cast<double>(update->usage.calls) / static_cast<double>(full->usage.calls);
    std::cout << "[ figures ] adding " << added << " documents (" << percent << "%) to " << kBase
              << ": " << update->usage.calls << " LLM calls vs " << full->usage.calls
              << " for the full index = " << fraction * 100 << "% (" << update->reports_generated
              << " reports rewritten, " << update->reports_reused << " kept)\n";
    EXPECT_LT(fraction, 0.05 + 3.0 * percent / 100);
  }
}

}  // namespace
}  // namespace grag
