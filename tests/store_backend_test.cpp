// The Store contract on every backend: each test runs on SQLite (a temporary file) and on
// PostgreSQL (a fresh database of the server GRAG_TEST_PG_URL names, or of the throwaway cluster
// the suite starts: scripts/pg_test_cluster.sh). Without a server the PostgreSQL cases are
// skipped, saying why. Backend-specific behaviour (SQLite files, WAL, damage screening,
// `grag sql`) is tested in store_open_test, store_robustness_test and store_sql_test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "grag/store.h"
#include "support/postgres.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::TempDir;

// A fresh, empty index location of one backend, removed again at the end.
class Backend {
 public:
  explicit Backend(std::string kind) : kind_(std::move(kind)) {}
  // Sets location(); an empty string when ready, else why the backend cannot be tested here.
  std::string Prepare() {
    if (kind_ == "sqlite") {
      location_ = dir_.File("index.db");
      return "";
    }
    const std::string why = db_.CreateForTest();
    if (!why.empty()) return why;
    location_ = db_.url();
    return "";
  }
  const std::string& location() const { return location_; }

 private:
  std::string kind_;
  TempDir dir_;
  testing::TestDatabase db_;
  std::string location_;
};

std::string BackendName(const ::testing::TestParamInfo<const char*>& info) { return info.param; }

Document Doc(const std::string& id, const std::string& text) {
  return Document{id, id + ".txt", "/in/" + id + ".txt", text, "hash:" + text};
}

ChunkRecord Chunk(const std::string& doc, int64_t index, const std::string& text) {
  return ChunkRecord{doc + "#" + text, doc, index, text, 3, index * 100};
}

// Builders: -Wextra flags aggregates initialised with some fields left out.
RelationshipRecord Rel(int64_t a, int64_t b, const std::string& description, double weight) {
  RelationshipRecord r;
  r.source_id = a;
  r.target_id = b;
  r.description = description;
  r.weight = weight;
  return r;
}

CommunityRecord Community(int64_t id, int64_t level, std::optional<int64_t> parent,
                          std::vector<int64_t> members) {
  CommunityRecord c;
  c.id = id;
  c.level = level;
  c.parent_id = parent;
  c.entity_ids = std::move(members);
  return c;
}

EmbeddingRecord Emb(EmbeddingOwner owner, const std::string& id, const std::string& model,
                    std::vector<float> vector, const std::string& input_hash = "") {
  EmbeddingRecord r;
  r.owner = owner;
  r.owner_id = id;
  r.model = model;
  r.vector = std::move(vector);
  r.input_hash = input_hash;
  return r;
}

StageProgress Stage(const std::string& name, StageStatus status, int64_t done, int64_t total,
                    const std::string& checkpoint = "") {
  StageProgress p;
  p.stage = name;
  p.status = status;
  p.done = done;
  p.total = total;
  p.checkpoint = checkpoint;
  return p;
}

ReportRecord Report(int64_t community_id, ReportStatus status = ReportStatus::kOk) {
  ReportRecord r;
  r.community_id = community_id;
  r.status = status;
  return r;
}

class StoreBackendTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string why = backend_.Prepare();
    if (!why.empty()) GTEST_SKIP() << why;
    auto opened = Store::Open(backend_.location());
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
  }
  void TearDown() override { store_.reset(); }

  // Adds a document with one chunk per text.
  void AddDoc(const std::string& id, const std::vector<std::string>& texts) {
    std::string all;
    std::vector<ChunkRecord> chunks;
    for (size_t i = 0; i < texts.size(); ++i) {
      all += texts[i] + "\n";
      chunks.push_back(Chunk(id, static_cast<int64_t>(i), texts[i]));
    }
    ASSERT_TRUE(store_->UpsertDocument(Doc(id, all)).ok());
    auto changes = store_->ReplaceDocumentChunks(id, chunks);
    ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  }

  int64_t AddEntity(const std::string& key, const std::string& type = "PERSON") {
    EntityRecord e;
    e.name_key = key;
    e.name = key;
    e.type = type;
    e.type_counts = {{type, 1}};
    e.description = key + " is someone";
    auto id = store_->UpsertEntity(e);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.value_or(0);
  }

  std::vector<std::string> Search(const std::string& q, int k = 10) {
    auto hits = store_->SearchChunks(q, k);
    EXPECT_TRUE(hits.ok()) << "query [" << q << "]: " << hits.status().ToString();
    std::vector<std::string> ids;
    if (hits.ok()) {
      for (const ChunkHit& h : *hits) ids.push_back(h.chunk_id);
    }
    return ids;
  }

  Backend backend_{GetParam()};
  std::unique_ptr<Store> store_;
};

// ---------------------------------------------------------------- documents and chunks

TEST_P(StoreBackendTest, DocumentUpsertReportsWhatChanged) {
  EXPECT_EQ(*store_->UpsertDocument(Doc("a", "one")), DocumentChange::kAdded);
  EXPECT_EQ(*store_->UpsertDocument(Doc("a", "one")), DocumentChange::kUnchanged);
  Document renamed = Doc("a", "one");
  renamed.title = "new title";
  EXPECT_EQ(*store_->UpsertDocument(renamed), DocumentChange::kUnchanged);
  EXPECT_EQ((*store_->GetDocument("a"))->title, "new title");
  EXPECT_EQ(*store_->UpsertDocument(Doc("a", "two")), DocumentChange::kChanged);
  EXPECT_EQ((*store_->GetDocument("a"))->text, "two");
  EXPECT_FALSE(store_->GetDocument("missing")->has_value());
  EXPECT_EQ(store_->UpsertDocument(Doc("", "x")).status().code(), ErrorCode::kInvalidArgument);

  ASSERT_TRUE(store_->UpsertDocument(Doc("b", "three")).ok());
  auto list = store_->ListDocuments();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].id, "a");
  EXPECT_EQ((*list)[0].content_hash, "hash:two");
  EXPECT_EQ((*list)[1].id, "b");
  EXPECT_FALSE((*list)[1].created_at.empty());

  EXPECT_TRUE(*store_->DeleteDocument("b"));
  EXPECT_FALSE(*store_->DeleteDocument("b"));
}

TEST_P(StoreBackendTest, ReplaceChunksKeepsUnchangedChunksAndTheirExtractions) {
  AddDoc("d", {"first part", "second part", "third part"});
  ExtractorId llm{ExtractorKind::kLlm, "gpt-test"};
  for (const char* text : {"first part", "second part"}) {
    ExtractionRecord r;
    r.chunk_id = std::string("d#") + text;
    r.extractor = llm;
    r.entities = {{"X", "x", "PERSON", "an x"}};
    ASSERT_TRUE(store_->PutExtraction(r).ok());
  }
  // Edit: the first chunk stays (and moves to index 1), the second goes, two are new.
  auto changes = store_->ReplaceDocumentChunks(
      "d", {Chunk("d", 0, "new start"), Chunk("d", 1, "first part"), Chunk("d", 2, "new end")});
  ASSERT_TRUE(changes.ok()) << changes.status().ToString();
  EXPECT_EQ(changes->kept, 1);
  EXPECT_EQ(changes->added, 2);
  EXPECT_EQ(changes->removed, 2);

  auto chunks = store_->ListChunks("d");
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 3u);
  EXPECT_EQ((*chunks)[1].id, "d#first part");
  EXPECT_EQ((*chunks)[1].index, 1);
  EXPECT_EQ((*chunks)[1].start_token, 100);
  EXPECT_TRUE(store_->GetExtraction("d#first part", llm)->has_value());
  EXPECT_FALSE(store_->GetExtraction("d#second part", llm)->has_value());
  EXPECT_EQ(*store_->ChunksNeedingExtraction(llm),
            (std::vector<std::string>{"d#new start", "d#new end"}));
  EXPECT_EQ(*store_->CountChunks(), 3);
  EXPECT_EQ(Search("second"), std::vector<std::string>{});
  EXPECT_EQ(Search("end"), std::vector<std::string>{"d#new end"});
}

TEST_P(StoreBackendTest, ReplaceChunksRejectsBadInput) {
  AddDoc("a", {"alpha"});
  ASSERT_TRUE(store_->UpsertDocument(Doc("b", "beta")).ok());
  EXPECT_EQ(store_->ReplaceDocumentChunks("zzz", {}).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(store_->ReplaceDocumentChunks("b", {Chunk("a", 0, "x")}).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      store_->ReplaceDocumentChunks("b", {Chunk("b", 0, "x"), Chunk("b", 1, "x")}).status().code(),
      ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      store_->ReplaceDocumentChunks("b", {Chunk("b", 0, "x"), Chunk("b", 0, "y")}).status().code(),
      ErrorCode::kInvalidArgument);
  // An id that already belongs to another document; nothing of the call stays.
  ChunkRecord stolen{"a#alpha", "b", 1, "alpha", 1, 0};
  auto r = store_->ReplaceDocumentChunks("b", {Chunk("b", 0, "fine"), stolen});
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("already belongs to document a"), std::string::npos);
  EXPECT_TRUE(store_->ListChunks("b")->empty());
  EXPECT_EQ(store_->ListChunks("a")->size(), 1u);
}

TEST_P(StoreBackendTest, DeletingADocumentCascadesToEverythingHangingOffIt) {
  AddDoc("gone", {"marley was dead", "scrooge signed it"});
  AddDoc("kept", {"tiny tim"});
  ExtractorId llm{ExtractorKind::kLlm, "m"};
  ExtractionRecord r;
  r.chunk_id = "gone#marley was dead";
  r.extractor = llm;
  r.entities = {{"Marley", "marley", "PERSON", "dead"}};
  r.relationships = {{"Marley", "Scrooge", "marley", "scrooge", "partners", 8}};
  ASSERT_TRUE(store_->PutExtraction(r).ok());
  const int64_t marley = AddEntity("marley");
  const int64_t scrooge = AddEntity("scrooge");
  ASSERT_TRUE(store_->SetEntityChunks(marley, {"gone#marley was dead"}).ok());
  auto rel = store_->UpsertRelationship(Rel(marley, scrooge, "partners", 8));
  ASSERT_TRUE(rel.ok());
  ASSERT_TRUE(store_->SetRelationshipChunks(*rel, {"gone#marley was dead"}).ok());
  ASSERT_TRUE(store_
                  ->PutEmbeddings({Emb(EmbeddingOwner::kChunk, "gone#marley was dead", "e", {1, 2}),
                                   Emb(EmbeddingOwner::kChunk, "kept#tiny tim", "e", {3, 4})})
                  .ok());

  ASSERT_TRUE(*store_->DeleteDocument("gone"));
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->documents, 1);
  EXPECT_EQ(stats->chunks, 1);
  EXPECT_EQ(stats->extractions_ok, 0);
  EXPECT_EQ(stats->entity_mentions, 0);
  EXPECT_EQ(stats->relationship_mentions, 0);
  EXPECT_EQ(stats->embeddings_per_owner["chunk"], 1);
  // Merged entities stay until the graph is rebuilt; their links to the chunks do not.
  EXPECT_EQ(stats->entities, 2);
  EXPECT_TRUE(store_->GetEntityChunks(marley)->empty());
  EXPECT_TRUE(Search("marley").empty());
  EXPECT_EQ(Search("tim"), std::vector<std::string>{"kept#tiny tim"});
  EXPECT_TRUE(store_->CheckIntegrity().ok()) << store_->CheckIntegrity().ToString();
}

// ---------------------------------------------------------------- full-text search

TEST_P(StoreBackendTest, SearchRanksByBm25WithStemmingAndDiacritics) {
  AddDoc("d", {"The ghost of Christmas past visits Scrooge.",
               "Ghosts and ghosts and more ghosts haunt the counting-house.",
               "Bob Cratchit eats goose at the café.", "Nothing relevant here at all."});
  auto hits = store_->SearchChunks("ghost", 10);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 2u);
  EXPECT_EQ((*hits)[0].chunk_id, "d#Ghosts and ghosts and more ghosts haunt the counting-house.");
  EXPECT_GT((*hits)[0].score, (*hits)[1].score);
  EXPECT_GT((*hits)[1].score, 0);
  EXPECT_EQ((*hits)[0].document_id, "d");
  EXPECT_EQ((*hits)[0].index, 1);
  EXPECT_EQ(Search("CAFE"), std::vector<std::string>{"d#Bob Cratchit eats goose at the café."});
  EXPECT_EQ(Search("ghost", 1).size(), 1u);
  EXPECT_TRUE(Search("ghost", 0).empty());
  // Any word may match: a question finds the chunk naming its subject.
  EXPECT_EQ(Search("Who is Bob Cratchit?").front(), "d#Bob Cratchit eats goose at the café.");
}

TEST_P(StoreBackendTest, SearchSurvivesOddQueries) {
  AddDoc("d", {"alpha AND beta", "near the end OR not", "naïve café 圣诞快乐 🎄 ok"});
  const std::vector<std::string> odd = {
      "",
      "   ",
      "\"",
      "\"unbalanced quote",
      "\"\"\"",
      "AND",
      "OR",
      "NOT",
      "alpha AND",
      "AND OR NOT",
      "*",
      "alph*",
      "(",
      ")",
      "((alpha",
      "beta))",
      "NEAR(alpha beta, 2)",
      "text:alpha",
      "{text}: alpha",
      "^alpha",
      "-alpha +beta",
      "alpha\"beta",
      "'; DROP TABLE chunks; --",
      "圣诞",
      "🎄",
      "naïve",
      std::string("bad \xff\xfe utf8 \xc3"),
      std::string("nul\0byte", 8),
      std::string(5000, '('),
      std::string(20000, 'a') + " alpha",
  };
  for (const std::string& q : odd) Search(q);
  EXPECT_EQ(Search("\"alpha").size(), 1u);
  EXPECT_EQ(Search("alpha AND").size(), 1u);  // AND is a plain word here
  EXPECT_EQ(Search("NOT").size(), 1u);
  EXPECT_EQ(Search("naive").size(), 1u);
  EXPECT_EQ(Search("圣诞快乐").size(), 1u);
  EXPECT_EQ(*store_->CountChunks(), 3);  // the injection attempt stayed a query
}

// ---------------------------------------------------------------- extraction results

TEST_P(StoreBackendTest, ExtractionResultsAreKeptPerExtractor) {
  AddDoc("d", {"c zero", "c one"});
  ExtractorId llm{ExtractorKind::kLlm, "gpt-4o-mini"};
  ExtractorId nlp{ExtractorKind::kNlp, "regex-en/1"};
  ExtractionRecord ok;
  ok.chunk_id = "d#c zero";
  ok.extractor = llm;
  ok.gleaning_rounds = 1;
  ok.params_hash = "p1";
  ok.entities = {{"Scrooge", "scrooge", "PERSON", "a miser"},
                 {"London", "london", "GEO", "a city"}};
  ok.relationships = {{"Scrooge", "London", "scrooge", "london", "lives in", 7}};
  ASSERT_TRUE(store_->PutExtraction(ok).ok());
  ExtractionRecord skipped;
  skipped.chunk_id = "d#c one";
  skipped.extractor = llm;
  skipped.status = ExtractionStatus::kSkipped;
  skipped.reason = "reply was not JSON after one retry";
  ASSERT_TRUE(store_->PutExtraction(skipped).ok());

  auto got = store_->GetExtraction("d#c zero", llm);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->gleaning_rounds, 1);
  EXPECT_EQ((*got)->params_hash, "p1");
  ASSERT_EQ((*got)->entities.size(), 2u);
  EXPECT_EQ((*got)->entities[1].name_key, "london");
  ASSERT_EQ((*got)->relationships.size(), 1u);
  EXPECT_EQ((*got)->relationships[0].strength, 7);
  EXPECT_EQ((*store_->GetExtraction("d#c one", llm))->reason, "reply was not JSON after one retry");

  // Skipped chunks are retried; another extractor has everything left to do.
  EXPECT_EQ(*store_->ChunksNeedingExtraction(llm), std::vector<std::string>{"d#c one"});
  EXPECT_EQ(store_->ChunksNeedingExtraction(nlp)->size(), 2u);
  EXPECT_EQ(store_->ChunksNeedingExtraction({ExtractorKind::kLlm, "gpt-4o"})->size(), 2u);

  // Replacing a result replaces its mentions.
  ok.entities = {{"Ebenezer Scrooge", "ebenezer scrooge", "PERSON", "the same miser"}};
  ok.relationships.clear();
  ASSERT_TRUE(store_->PutExtraction(ok).ok());
  auto mentions = store_->ListEntityMentions(llm);
  ASSERT_TRUE(mentions.ok());
  ASSERT_EQ(mentions->size(), 1u);
  EXPECT_EQ((*mentions)[0].chunk_id, "d#c zero");
  EXPECT_EQ((*mentions)[0].mention.name, "Ebenezer Scrooge");
  EXPECT_TRUE(store_->ListRelationshipMentions(llm)->empty());
  EXPECT_TRUE(store_->ListEntityMentions(nlp)->empty());

  ExtractionRecord orphan = ok;
  orphan.chunk_id = "no such chunk";
  EXPECT_EQ(store_->PutExtraction(orphan).code(), ErrorCode::kInvalidArgument);
}

TEST_P(StoreBackendTest, ExtractionsDigestFollowsTheResultsAMergeReads) {
  AddDoc("d", {"c zero", "c one"});
  const ExtractorId llm{ExtractorKind::kLlm, "gpt-4o-mini"};
  const ExtractorId nlp{ExtractorKind::kNlp, "regex-en/1"};
  auto digest = [&](const ExtractorId& e) { return store_->ExtractionsDigest(e).value(); };
  const std::string empty = digest(llm);
  ExtractionRecord zero;
  zero.chunk_id = "d#c zero";
  zero.extractor = llm;
  zero.entities = {{"Scrooge", "scrooge", "PERSON", "a miser"}};
  ASSERT_TRUE(store_->PutExtraction(zero).ok());
  const std::string one_result = digest(llm);
  EXPECT_NE(one_result, empty);
  EXPECT_EQ(digest(llm), one_result);  // reading changes nothing

  // Results the merge does not read leave it alone: a skipped chunk, another extractor's.
  ExtractionRecord one;
  one.chunk_id = "d#c one";
  one.extractor = llm;
  one.status = ExtractionStatus::kSkipped;
  ASSERT_TRUE(store_->PutExtraction(one).ok());
  ExtractionRecord other = zero;
  other.extractor = nlp;
  ASSERT_TRUE(store_->PutExtraction(other).ok());
  EXPECT_EQ(digest(llm), one_result);

  // A result added, then replaced: the newest row, whose id an SQLite table may hand out again
  // (runs are milliseconds apart at least: the time tells the two apart).
  one.status = ExtractionStatus::kOk;
  one.entities = {{"Marley", "marley", "PERSON", "a ghost"}};
  ASSERT_TRUE(store_->PutExtraction(one).ok());
  const std::string two_results = digest(llm);
  EXPECT_NE(two_results, one_result);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  one.entities = {{"Jacob Marley", "jacob marley", "PERSON", "a ghost"}};
  ASSERT_TRUE(store_->PutExtraction(one).ok());
  EXPECT_NE(digest(llm), two_results);

  // A chunk gone takes its result with it.
  const std::string before_removal = digest(llm);
  ASSERT_TRUE(store_->DeleteDocument("d").ok());
  EXPECT_NE(digest(llm), before_removal);
  EXPECT_EQ(digest(llm), empty);
}

TEST_P(StoreBackendTest, MentionsAreScannedOneAtATimeInListOrder) {
  // Mentions come by document, chunk and mention (not as they were stored), as listed.
  AddDoc("b", {"b zero", "b one"});
  AddDoc("a", {"a zero"});
  const ExtractorId nlp{ExtractorKind::kNlp, "regex-en/1"};
  int n = 0;
  for (const char* chunk : {"b#b one", "a#a zero", "b#b zero"}) {
    ExtractionRecord r;
    r.chunk_id = chunk;
    r.extractor = nlp;
    // More rows than one batch of a cursor (PostgreSQL fetches 2000 at a time).
    for (int i = 0; i < 1100; ++i, ++n) {
      const std::string k = std::to_string(n);
      r.entities.push_back({"E" + k, "e" + k, "PERSON", "described " + k});
      r.relationships.push_back({"E" + k, "F" + k, "e" + k, "f" + k, "related " + k, 0.25 * n});
    }
    ASSERT_TRUE(store_->PutExtraction(r).ok());
  }
  auto listed = store_->ListEntityMentions(nlp);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 3300u);
  EXPECT_EQ((*listed)[0].chunk_id, "a#a zero");
  EXPECT_EQ((*listed)[1100].chunk_id, "b#b zero");
  EXPECT_EQ((*listed)[2200].chunk_id, "b#b one");
  std::vector<ChunkEntityMention> scanned;
  ASSERT_TRUE(store_
                  ->ScanEntityMentions(nlp,
                                       [&](const ChunkEntityMention& m) {
                                         scanned.push_back(m);
                                         return Status::Ok();
                                       })
                  .ok());
  ASSERT_EQ(scanned.size(), listed->size());
  for (size_t i = 0; i < scanned.size(); ++i) {
    ASSERT_EQ(scanned[i].chunk_id, (*listed)[i].chunk_id) << i;
    ASSERT_EQ(scanned[i].mention.name, (*listed)[i].mention.name) << i;
    ASSERT_EQ(scanned[i].mention.name_key, (*listed)[i].mention.name_key) << i;
    ASSERT_EQ(scanned[i].mention.type, (*listed)[i].mention.type) << i;
    ASSERT_EQ(scanned[i].mention.description, (*listed)[i].mention.description) << i;
  }
  EXPECT_EQ(scanned[0].mention.name_key, "e1100");  // "a#a zero" was extracted second

  auto rels = store_->ListRelationshipMentions(nlp);
  ASSERT_TRUE(rels.ok());
  ASSERT_EQ(rels->size(), 3300u);
  size_t i = 0;
  ASSERT_TRUE(
      store_
          ->ScanRelationshipMentions(nlp,
                                     [&](const ChunkRelationshipMention& m) {
                                       const auto& want = (*rels)[i++];
                                       EXPECT_EQ(m.chunk_id, want.chunk_id);
                                       EXPECT_EQ(m.mention.source, want.mention.source);
                                       EXPECT_EQ(m.mention.target, want.mention.target);
                                       EXPECT_EQ(m.mention.source_key, want.mention.source_key);
                                       EXPECT_EQ(m.mention.target_key, want.mention.target_key);
                                       EXPECT_EQ(m.mention.description, want.mention.description);
                                       EXPECT_EQ(m.mention.strength, want.mention.strength);
                                       return Status::Ok();
                                     })
          .ok());
  EXPECT_EQ(i, rels->size());
  EXPECT_EQ((*rels)[2200].mention.strength, 0.25 * 0);

  // An error from the callback ends the scan and is what it returns; the store goes on.
  int calls = 0;
  Status st = store_->ScanRelationshipMentions(nlp, [&](const ChunkRelationshipMention&) {
    return ++calls == 2500 ? Status::Cancelled("enough") : Status::Ok();
  });
  EXPECT_EQ(st.code(), ErrorCode::kCancelled);
  EXPECT_EQ(calls, 2500);
  calls = 0;
  st = store_->ScanEntityMentions(nlp, [&](const ChunkEntityMention&) {
    return ++calls == 1 ? Status::Internal("first") : Status::Ok();
  });
  EXPECT_EQ(st.code(), ErrorCode::kInternal);
  EXPECT_EQ(calls, 1);
  // Inside a write transaction too (the merge reads and then writes), and again afterwards.
  {
    auto tx = store_->Begin();
    ASSERT_TRUE(tx.ok()) << tx.status().ToString();
    calls = 0;
    ASSERT_TRUE(store_
                    ->ScanEntityMentions(nlp,
                                         [&](const ChunkEntityMention&) {
                                           ++calls;
                                           return Status::Ok();
                                         })
                    .ok());
    EXPECT_EQ(calls, 3300);
    AddEntity("scrooge");
    ASSERT_TRUE(tx->Commit().ok());
  }
  EXPECT_EQ(store_->ListEntityMentions(nlp)->size(), 3300u);
  EXPECT_TRUE(store_->GetEntityByKey("scrooge")->has_value());
  // Another extractor has none.
  calls = 0;
  EXPECT_TRUE(store_
                  ->ScanEntityMentions({ExtractorKind::kLlm, "x"},
                                       [&](const ChunkEntityMention&) {
                                         ++calls;
                                         return Status::Ok();
                                       })
                  .ok());
  EXPECT_EQ(calls, 0);
}

// ---------------------------------------------------------------- entities and relationships

TEST_P(StoreBackendTest, EntitiesAndRelationships) {
  AddDoc("d", {"c0", "c1", "c2"});
  const int64_t a = AddEntity("scrooge");
  const int64_t b = AddEntity("marley");
  const int64_t c = AddEntity("london", "GEO");
  EntityRecord again;
  again.name_key = "scrooge";
  again.name = "Ebenezer Scrooge";
  again.type = "PERSON";
  again.type_counts = {{"PERSON", 3}, {"ORGANIZATION", 1}};
  again.description = "merged";
  again.description_hash = "h";
  again.description_model = "summarizer";
  EXPECT_EQ(*store_->UpsertEntity(again), a);  // same key, same id
  auto got = store_->GetEntityByKey("scrooge");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->name, "Ebenezer Scrooge");
  EXPECT_EQ((*got)->type_counts,
            (std::map<std::string, int64_t>{{"ORGANIZATION", 1}, {"PERSON", 3}}));
  EXPECT_EQ((*got)->description_model, "summarizer");
  EXPECT_EQ(store_->UpsertEntity(EntityRecord{}).status().code(), ErrorCode::kInvalidArgument);

  // Either direction names the same undirected pair.
  auto ab = store_->UpsertRelationship(Rel(b, a, "partners", 9));
  ASSERT_TRUE(ab.ok());
  EXPECT_EQ(*store_->UpsertRelationship(Rel(a, b, "partners!", 10)), *ab);
  ASSERT_TRUE(store_->UpsertRelationship(Rel(a, c, "lives in", 2)).ok());
  EXPECT_EQ(store_->UpsertRelationship(Rel(a, a, "self", 1)).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(store_->UpsertRelationship(Rel(a, 9999, "ghost", 1)).status().code(),
            ErrorCode::kInvalidArgument);

  ASSERT_TRUE(store_->SetEntityChunks(a, {"d#c0", "d#c1", "d#c1"}).ok());
  ASSERT_TRUE(store_->SetEntityChunks(b, {"d#c2"}).ok());
  EXPECT_FALSE(store_->SetEntityChunks(b, {"d#nope"}).ok());
  EXPECT_EQ(*store_->GetEntityChunks(b), std::vector<std::string>{"d#c2"});  // rolled back
  ASSERT_TRUE(store_->SetRelationshipChunks(*ab, {"d#c0"}).ok());
  ASSERT_TRUE(store_->RecomputeGraphStats().ok());

  auto top = store_->ListEntities(1);
  ASSERT_TRUE(top.ok());
  ASSERT_EQ(top->size(), 1u);
  EXPECT_EQ((*top)[0].id, a);
  EXPECT_EQ((*top)[0].degree, 2);
  EXPECT_EQ((*top)[0].frequency, 2);
  EXPECT_EQ(store_->ListEntities()->size(), 3u);

  auto rels = store_->ListRelationshipsOf(b);
  ASSERT_TRUE(rels.ok());
  ASSERT_EQ(rels->size(), 1u);
  EXPECT_EQ((*rels)[0].source_id, std::min(a, b));
  EXPECT_EQ((*rels)[0].target_id, std::max(a, b));
  EXPECT_EQ((*rels)[0].weight, 10);
  EXPECT_EQ((*rels)[0].description, "partners!");
  EXPECT_EQ((*rels)[0].frequency, 1);
  EXPECT_EQ((*rels)[0].combined_degree, 3);
  EXPECT_EQ(store_->ListRelationships()->size(), 2u);

  // Deleting an entity takes its relationships along.
  ASSERT_TRUE(*store_->DeleteEntity(b));
  EXPECT_EQ(store_->ListRelationships()->size(), 1u);
  EXPECT_FALSE(store_->GetEntity(b)->has_value());
  auto ac = store_->ListRelationshipsOf(c);
  ASSERT_TRUE(ac.ok() && ac->size() == 1u);
  EXPECT_TRUE(*store_->DeleteRelationship((*ac)[0].id));
  EXPECT_FALSE(*store_->DeleteRelationship((*ac)[0].id));
  EXPECT_TRUE(store_->ListRelationships()->empty());
}

// The light read local search ranks with: the same relationships as ListRelationshipsOf (both
// directions, the combined degree), by id, without their text; the text read afterwards.
TEST_P(StoreBackendTest, RelationshipEdgesAndDescriptions) {
  const int64_t a = AddEntity("a");
  const int64_t b = AddEntity("b");
  const int64_t c = AddEntity("c");
  const int64_t d = AddEntity("d");
  RelationshipRecord ab = Rel(b, a, "a and b", 3);
  ab.description_hash = "h1";
  ab.description_basis = "basis";
  const int64_t ab_id = store_->UpsertRelationship(ab).value();
  const int64_t bc_id = store_->UpsertRelationship(Rel(b, c, "", 7)).value();
  const int64_t cd_id = store_->UpsertRelationship(Rel(c, d, "c and d", 1)).value();
  const int64_t bd_id = store_->UpsertRelationship(Rel(d, b, "d and b", 3)).value();
  ASSERT_TRUE(store_->RecomputeGraphStats().ok());

  for (int64_t e : {a, b, c, d}) {
    SCOPED_TRACE("entity " + std::to_string(e));
    auto full = store_->ListRelationshipsOf(e);
    auto light = store_->ListRelationshipEdgesOf(e);
    ASSERT_TRUE(full.ok() && light.ok());
    auto by_id = [](const RelationshipRecord& x, const RelationshipRecord& y) {
      return x.id < y.id;
    };
    std::sort(full->begin(), full->end(), by_id);
    std::sort(light->begin(), light->end(), by_id);
    ASSERT_EQ(light->size(), full->size());
    for (size_t i = 0; i < full->size(); ++i) {
      const RelationshipRecord& f = (*full)[i];
      const RelationshipRecord& l = (*light)[i];
      EXPECT_EQ(l.id, f.id);
      EXPECT_EQ(l.source_id, f.source_id);
      EXPECT_EQ(l.target_id, f.target_id);
      EXPECT_EQ(l.weight, f.weight);
      EXPECT_EQ(l.frequency, f.frequency);
      EXPECT_EQ(l.combined_degree, f.combined_degree);
      EXPECT_EQ(l.description, "");
      EXPECT_EQ(l.description_hash, "");
      EXPECT_EQ(l.description_basis, "");
    }
  }
  auto of_b = store_->ListRelationshipEdgesOf(b);
  ASSERT_TRUE(of_b.ok());
  std::map<int64_t, int64_t> degree_of_b;  // relationship -> combined degree
  for (const auto& r : *of_b) degree_of_b[r.id] = r.combined_degree;
  // b has degree 3; a 1, c 2, d 2.
  EXPECT_EQ(degree_of_b, (std::map<int64_t, int64_t>{{ab_id, 4}, {bc_id, 5}, {bd_id, 5}}));
  EXPECT_TRUE(store_->ListRelationshipEdgesOf(9999)->empty());

  auto texts = store_->GetRelationshipDescriptions({cd_id, 9999, ab_id, bc_id, ab_id});
  ASSERT_TRUE(texts.ok()) << texts.status().ToString();
  EXPECT_EQ(*texts, (std::vector<std::optional<std::string>>{"c and d", std::nullopt, "a and b", "",
                                                             "a and b"}));
  EXPECT_TRUE(store_->GetRelationshipDescriptions({})->empty());
}

// ---------------------------------------------------------------- communities and reports

TEST_P(StoreBackendTest, CommunitiesReplaceKeepsStableIdsAndTheirReports) {
  AddDoc("d", {"c0", "c1", "c2"});
  const int64_t a = AddEntity("a");
  const int64_t b = AddEntity("b");
  const int64_t c = AddEntity("c");
  ASSERT_TRUE(store_->SetEntityChunks(a, {"d#c0", "d#c1"}).ok());
  ASSERT_TRUE(store_->SetEntityChunks(b, {"d#c1"}).ok());
  ASSERT_TRUE(store_->SetEntityChunks(c, {"d#c2"}).ok());

  ClusteringRecord run;
  run.seed = 42;
  run.max_cluster_size = 10;
  run.modularity = 0.5;
  // Children before parents is fine.
  std::vector<CommunityRecord> hierarchy = {Community(10, 1, 1, {a}), Community(11, 1, 1, {b}),
                                            Community(1, 0, std::nullopt, {a, b}),
                                            Community(2, 0, std::nullopt, {c})};
  auto clustering = store_->ReplaceCommunities(run, hierarchy);
  ASSERT_TRUE(clustering.ok()) << clustering.status().ToString();

  auto all = store_->ListCommunities();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].id, 1);
  EXPECT_EQ((*all)[0].size, 2);
  EXPECT_EQ((*all)[0].weight, 2);  // distinct chunks c0, c1
  EXPECT_EQ((*all)[0].entity_ids, (std::vector<int64_t>{a, b}));
  EXPECT_EQ((*all)[0].clustering_id, *clustering);
  EXPECT_EQ((*all)[2].parent_id, 1);
  EXPECT_EQ(store_->ListCommunities(1)->size(), 2u);
  EXPECT_EQ(*store_->CommunitiesOfEntity(a), (std::vector<int64_t>{1, 10}));
  // Each community's distinct chunks through its members, in document order.
  using ChunkMap = std::map<int64_t, std::vector<std::string>>;
  auto chunks = store_->CommunityChunks();
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  EXPECT_EQ(
      *chunks,
      (ChunkMap{{1, {"d#c0", "d#c1"}}, {2, {"d#c2"}}, {10, {"d#c0", "d#c1"}}, {11, {"d#c1"}}}));
  EXPECT_EQ(*store_->CommunityChunks(1), (ChunkMap{{10, {"d#c0", "d#c1"}}, {11, {"d#c1"}}}));
  EXPECT_TRUE(store_->CommunityChunks(7)->empty());
  EXPECT_EQ((*store_->LatestClustering())->modularity, 0.5);

  ReportRecord report;
  report.community_id = 11;
  report.title = "B alone";
  report.summary = "b";
  report.full_content = "# B alone\n\nb";
  report.findings = {{"B exists", "because", {"B"}}, {"B is alone", "no friends", {}}};
  report.rating = 6.5;
  report.input_hash = "in-11";
  report.model = "gpt";
  report.basis = {{a, b}, 2.5, "params-1"};
  ASSERT_TRUE(store_->PutReport(report).ok());
  ReportRecord gap;
  gap.community_id = 10;
  gap.status = ReportStatus::kGap;
  gap.reason = "unparseable reply";
  ASSERT_TRUE(store_->PutReport(gap).ok());
  ReportRecord root = Report(1);
  root.title = "root";
  root.input_hash = "in-1";
  root.findings = {{"Root finding", "stored without a rendering", {}}};
  ASSERT_TRUE(store_->PutReport(root).ok());
  report.community_id = 999;
  EXPECT_EQ(store_->PutReport(report).code(), ErrorCode::kInvalidArgument);

  auto got = store_->GetReport(11);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->level, 1);
  ASSERT_EQ((*got)->findings.size(), 2u);
  EXPECT_EQ((*got)->findings[0].entities, std::vector<std::string>{"B"});
  EXPECT_EQ((*got)->findings[1].explanation, "no friends");
  EXPECT_EQ((*got)->rating, 6.5);
  EXPECT_EQ((*store_->GetReport(10))->status, ReportStatus::kGap);
  EXPECT_FALSE((*store_->GetReport(1))->rating.has_value());
  EXPECT_EQ(store_->ListReports(1)->size(), 2u);
  EXPECT_EQ(store_->ListReports()->size(), 3u);
  EXPECT_EQ((*got)->basis.params, "params-1");
  // Without findings: left out where the rendering is stored, parsed where it is not; the
  // basis left out.
  auto lean = store_->ListReports(std::nullopt, /*findings=*/false);
  ASSERT_TRUE(lean.ok()) << lean.status().ToString();
  ASSERT_EQ(lean->size(), 3u);
  for (const ReportRecord& r : *lean) {
    if (r.community_id == 11) {
      EXPECT_TRUE(r.findings.empty());
      EXPECT_EQ(r.full_content, "# B alone\n\nb");
      EXPECT_TRUE(r.basis.params.empty());
      EXPECT_TRUE(r.basis.members.empty());
    }
    if (r.community_id == 1) {
      ASSERT_EQ(r.findings.size(), 1u);
      EXPECT_EQ(r.findings[0].summary, "Root finding");
    }
  }

  // New hierarchy: 11 survives under a new parent 3, old parent 1 and child 10 go.
  run.warm_start = true;
  ASSERT_TRUE(store_
                  ->ReplaceCommunities(run, {Community(3, 0, std::nullopt, {a, b, c}),
                                             Community(11, 1, 3, {b}), Community(12, 1, 3, {a, c})})
                  .ok());
  EXPECT_EQ(store_->ListCommunities()->size(), 3u);
  auto kept = store_->GetReport(11);
  ASSERT_TRUE(kept.ok() && kept->has_value());
  EXPECT_EQ((*kept)->input_hash, "in-11");
  EXPECT_FALSE(store_->GetReport(1)->has_value());
  EXPECT_FALSE(store_->GetReport(10)->has_value());
  EXPECT_TRUE((*store_->LatestClustering())->warm_start);

  // A bad hierarchy changes nothing.
  EXPECT_EQ(store_->ReplaceCommunities(run, {Community(5, 1, 77, {a})}).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(store_->ReplaceCommunities(run, {Community(5, 0, 4, {a})}).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(store_
                ->ReplaceCommunities(
                    run, {Community(5, 0, std::nullopt, {a}), Community(5, 0, std::nullopt, {b})})
                .status()
                .code(),
            ErrorCode::kInvalidArgument);
  EXPECT_FALSE(store_->ReplaceCommunities(run, {Community(5, 0, std::nullopt, {4242})}).ok());
  EXPECT_EQ(store_->ListCommunities()->size(), 3u);
  EXPECT_TRUE(store_->CheckIntegrity().ok());
}

// ---------------------------------------------------------------- embeddings

TEST_P(StoreBackendTest, EmbeddingsRoundTripAndRefuseMixedSpaces) {
  const int64_t a = AddEntity("a");
  const int64_t b = AddEntity("b");
  const std::string ida = std::to_string(a);
  const std::string idb = std::to_string(b);
  ASSERT_TRUE(
      store_
          ->PutEmbeddings({Emb(EmbeddingOwner::kEntity, ida, "emb-1", {0.5f, -1.25f, 3e-8f}, "ha")})
          .ok());
  auto got = store_->GetEmbedding(EmbeddingOwner::kEntity, ida);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->vector, (std::vector<float>{0.5f, -1.25f, 3e-8f}));
  EXPECT_EQ((*got)->model, "emb-1");
  EXPECT_EQ((*got)->input_hash, "ha");

  // Another dimension or model for the same kind is refused, naming what is stored.
  Status mixed = store_->PutEmbeddings({Emb(EmbeddingOwner::kEntity, idb, "emb-1", {1, 2})});
  EXPECT_EQ(mixed.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(mixed.message().find("model emb-1 (dimension 3)"), std::string::npos)
      << mixed.message();
  EXPECT_FALSE(store_->PutEmbeddings({Emb(EmbeddingOwner::kEntity, idb, "emb-2", {1, 2, 3})}).ok());
  EXPECT_FALSE(store_
                   ->PutEmbeddings({Emb(EmbeddingOwner::kReport, "1", "emb-1", {1, 2}),
                                    Emb(EmbeddingOwner::kReport, "2", "emb-1", {1, 2, 3})})
                   .ok());
  // Replacing the only vector with another dimension is refused too (delete first).
  EXPECT_FALSE(store_->PutEmbeddings({Emb(EmbeddingOwner::kEntity, ida, "emb-1", {1, 2})}).ok());
  EXPECT_FALSE(store_->PutEmbeddings({Emb(EmbeddingOwner::kEntity, ida, "emb-1", {})}).ok());
  // Other kinds are separate spaces.
  ASSERT_TRUE(
      store_->PutEmbeddings({Emb(EmbeddingOwner::kChunk, "c", "lexical", {1, 2, 3, 4})}).ok());
  ASSERT_TRUE(store_->PutEmbeddings({Emb(EmbeddingOwner::kEntity, idb, "emb-1", {7, 8, 9})}).ok());

  auto space = store_->GetEmbeddingSpace(EmbeddingOwner::kEntity);
  ASSERT_TRUE(space.ok() && space->has_value());
  EXPECT_EQ((*space)->model, "emb-1");
  EXPECT_EQ((*space)->dimension, 3);
  EXPECT_EQ((*space)->count, 2);
  EXPECT_FALSE(store_->GetEmbeddingSpace(EmbeddingOwner::kReport)->has_value());
  EXPECT_EQ(store_->ListEmbeddings(EmbeddingOwner::kEntity)->size(), 2u);

  // An entity's vector goes with it.
  ASSERT_TRUE(*store_->DeleteEntity(a));
  EXPECT_FALSE(store_->GetEmbedding(EmbeddingOwner::kEntity, ida)->has_value());

  // Switching models: delete, then write.
  EXPECT_EQ(*store_->DeleteEmbeddings(EmbeddingOwner::kEntity), 1);
  ASSERT_TRUE(store_->PutEmbeddings({Emb(EmbeddingOwner::kEntity, idb, "emb-2", {1, 2})}).ok());
  EXPECT_EQ((*store_->GetEmbeddingSpace(EmbeddingOwner::kEntity))->dimension, 2);
}

// ---------------------------------------------------------------- runs

TEST_P(StoreBackendTest, RunStateAndCounters) {
  auto first = store_->BeginRun("index");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(store_->UpdateRun(*first, "extract", {{"llm_calls", 5}, {"tokens_in", 100}}).ok());
  ASSERT_TRUE(store_->UpdateRun(*first, "", {{"llm_calls", 7}}).ok());
  ASSERT_TRUE(
      store_->SetStageProgress(*first, Stage("extract", StageStatus::kRunning, 3, 10, "chunk-3"))
          .ok());
  ASSERT_TRUE(
      store_->SetStageProgress(*first, Stage("extract", StageStatus::kDone, 10, 10, "")).ok());
  ASSERT_TRUE(
      store_->SetStageProgress(*first, Stage("communities", StageStatus::kRunning, 0, 0, "")).ok());
  EXPECT_FALSE(store_->SetStageProgress(9999, Stage("x", StageStatus::kRunning, 0, 0, "")).ok());

  auto run = store_->GetRun(*first);
  ASSERT_TRUE(run.ok() && run->has_value());
  EXPECT_EQ((*run)->stage, "extract");
  EXPECT_EQ((*run)->status, RunStatus::kRunning);
  EXPECT_EQ((*run)->counters,
            (std::map<std::string, int64_t>{{"llm_calls", 7}, {"tokens_in", 100}}));
  EXPECT_TRUE((*run)->finished_at.empty());
  auto stages = store_->ListStageProgress(*first);
  ASSERT_TRUE(stages.ok());
  ASSERT_EQ(stages->size(), 2u);
  EXPECT_EQ((*stages)[0].stage, "extract");
  EXPECT_EQ((*stages)[0].status, StageStatus::kDone);
  EXPECT_EQ((*stages)[0].done, 10);

  // A new run marks the one left running (its process died) as interrupted.
  auto second = store_->BeginRun("add");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*store_->GetRun(*first))->status, RunStatus::kInterrupted);
  ASSERT_TRUE(store_->UpdateRun(*second, "extract", {{"llm_calls", 2}}).ok());
  ASSERT_TRUE(store_->FinishRun(*second, RunStatus::kFailed, "disk full").ok());
  EXPECT_EQ((*store_->GetRun(*second))->message, "disk full");
  EXPECT_FALSE((*store_->GetRun(*second))->finished_at.empty());
  EXPECT_EQ(store_->FinishRun(4242, RunStatus::kOk).code(), ErrorCode::kNotFound);
  EXPECT_EQ(store_->UpdateRun(4242, "x", {}).code(), ErrorCode::kNotFound);
  EXPECT_FALSE(store_->FinishRun(*second, RunStatus::kRunning).ok());

  auto runs = store_->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].id, *second);
  EXPECT_EQ(*store_->TotalRunCounters(),
            (std::map<std::string, int64_t>{{"llm_calls", 9}, {"tokens_in", 100}}));
}

// ---------------------------------------------------------------- stats

TEST_P(StoreBackendTest, StatsCountEveryTable) {
  AddDoc("a", {"one", "two"});
  AddDoc("b", {"three"});
  ExtractorId llm{ExtractorKind::kLlm, "m"};
  ExtractionRecord r;
  r.chunk_id = "a#one";
  r.extractor = llm;
  r.entities = {{"X", "x", "PERSON", ""}, {"Y", "y", "PERSON", ""}};
  r.relationships = {{"X", "Y", "x", "y", "", 1}};
  ASSERT_TRUE(store_->PutExtraction(r).ok());
  r.chunk_id = "a#two";
  r.status = ExtractionStatus::kSkipped;
  r.entities.clear();
  r.relationships.clear();
  ASSERT_TRUE(store_->PutExtraction(r).ok());
  const int64_t x = AddEntity("x");
  const int64_t y = AddEntity("y");
  ASSERT_TRUE(store_->UpsertRelationship(Rel(x, y, "", 1)).ok());
  ClusteringRecord clustering;
  clustering.modularity = 0.25;
  ASSERT_TRUE(store_
                  ->ReplaceCommunities(
                      clustering, {Community(1, 0, std::nullopt, {x, y}), Community(2, 1, 1, {x})})
                  .ok());
  ASSERT_TRUE(store_->PutReport(Report(1)).ok());
  ASSERT_TRUE(store_->PutReport(Report(2, ReportStatus::kGap)).ok());
  ASSERT_TRUE(
      store_->PutEmbeddings({Emb(EmbeddingOwner::kEntity, std::to_string(x), "e", {1})}).ok());
  ASSERT_TRUE(store_->ReplyCache().Put("k1", "12345", "gpt", "chat").ok());
  ASSERT_TRUE(store_->ReplyCache().Put("k2", "123", "gpt", "chat").ok());
  ASSERT_TRUE(store_->ReplyCache().Put("k3", "1", "emb", "embedding").ok());
  ASSERT_TRUE(store_->FlushDeferred().ok());  // the reply cache's rows are deferred
  ASSERT_TRUE(store_->BeginRun("index").ok());

  auto s = store_->Stats();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->documents, 2);
  EXPECT_EQ(s->chunks, 3);
  EXPECT_EQ(s->extractions_ok, 1);
  EXPECT_EQ(s->extractions_skipped, 1);
  EXPECT_EQ(s->entity_mentions, 2);
  EXPECT_EQ(s->relationship_mentions, 1);
  EXPECT_EQ(s->entities, 2);
  EXPECT_EQ(s->relationships, 1);
  EXPECT_EQ(s->communities, 2);
  EXPECT_EQ(s->communities_per_level, (std::map<int64_t, int64_t>{{0, 1}, {1, 1}}));
  EXPECT_EQ(s->modularity, 0.25);
  EXPECT_EQ(s->reports_ok, 1);
  EXPECT_EQ(s->reports_gap, 1);
  EXPECT_EQ(s->reports_llm, 1);
  EXPECT_EQ(s->embeddings_per_owner, (std::map<std::string, int64_t>{{"entity", 1}}));
  EXPECT_EQ(s->cache_entries, 3);
  ASSERT_EQ(s->cache_by_model.size(), 2u);
  EXPECT_EQ(s->cache_by_model[0].model, "emb");
  EXPECT_EQ(s->cache_by_model[1].model, "gpt");
  EXPECT_EQ(s->cache_by_model[1].entries, 2);
  EXPECT_EQ(s->cache_by_model[1].bytes, 8);
  EXPECT_EQ(s->runs, 1);
  EXPECT_GT(s->file_bytes, 0);
}

// ---------------------------------------------------------------- transactions

TEST_P(StoreBackendTest, TransactionCommitsOrRollsBackAsAUnit) {
  {
    auto tx = store_->Begin();
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE(store_->UpsertDocument(Doc("a", "alpha")).ok());
    ASSERT_TRUE(store_->ReplaceDocumentChunks("a", {Chunk("a", 0, "alpha")}).ok());
    // Destroyed without Commit(): rolled back.
  }
  EXPECT_FALSE(store_->GetDocument("a")->has_value());
  EXPECT_EQ(*store_->CountChunks(), 0);
  EXPECT_TRUE(store_->SearchChunks("alpha", 5)->empty());

  {
    auto tx = store_->Begin();
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE(store_->UpsertDocument(Doc("a", "alpha")).ok());
    {
      auto inner = store_->Begin();  // nested: a savepoint
      ASSERT_TRUE(inner.ok());
      ASSERT_TRUE(store_->UpsertDocument(Doc("b", "beta")).ok());
      ASSERT_TRUE(inner->Rollback().ok());
    }
    {
      auto inner = store_->Begin();
      ASSERT_TRUE(inner.ok());
      ASSERT_TRUE(store_->UpsertDocument(Doc("c", "gamma")).ok());
      ASSERT_TRUE(inner->Commit().ok());
    }
    ASSERT_TRUE(tx->Commit().ok());
    EXPECT_FALSE(tx->Commit().ok());  // finished already
  }
  EXPECT_TRUE(store_->GetDocument("a")->has_value());
  EXPECT_FALSE(store_->GetDocument("b")->has_value());
  EXPECT_TRUE(store_->GetDocument("c")->has_value());

  // Finishing an outer transaction before its inner one is a caller bug, reported as such.
  {
    auto outer = store_->Begin();
    ASSERT_TRUE(outer.ok());
    auto inner = store_->Begin();
    ASSERT_TRUE(inner.ok());
    EXPECT_EQ(outer->Commit().code(), ErrorCode::kInternal);
    ASSERT_TRUE(inner->Commit().ok());
    ASSERT_TRUE(outer->Commit().ok());
  }
}

TEST_P(StoreBackendTest, AFailedCallInsideATransactionUndoesOnlyItsOwnPart) {
  AddDoc("b", {"beta"});
  auto tx = store_->Begin();
  ASSERT_TRUE(tx.ok());
  ASSERT_TRUE(store_->UpsertDocument(Doc("a", "alpha")).ok());
  // Fails half-way: the first chunk is written before the second turns out to belong to b.
  EXPECT_FALSE(store_
                   ->ReplaceDocumentChunks(
                       "a", {Chunk("a", 0, "x"), ChunkRecord{"b#beta", "a", 1, "beta", 1, 0}})
                   .ok());
  EXPECT_TRUE(store_->ListChunks("a")->empty());
  ASSERT_TRUE(store_->ReplaceDocumentChunks("a", {Chunk("a", 0, "alpha")}).ok());
  ASSERT_TRUE(tx->Commit().ok());
  EXPECT_EQ(*store_->CountChunks(), 2);
  EXPECT_EQ(store_->ListChunks("a")->size(), 1u);
}

TEST_P(StoreBackendTest, AnAllOrNothingTransactionKeepsItsPartsTogether) {
  {
    auto tx = store_->BeginAllOrNothing();
    ASSERT_TRUE(tx.ok()) << tx.status().ToString();
    ASSERT_TRUE(store_->UpsertDocument(Doc("a", "alpha")).ok());
    ASSERT_TRUE(store_->ReplaceDocumentChunks("a", {Chunk("a", 0, "alpha")}).ok());
    {
      auto part = store_->Begin();
      ASSERT_TRUE(part.ok());
      ASSERT_TRUE(store_->UpsertDocument(Doc("b", "beta")).ok());
      ASSERT_TRUE(part->Commit().ok());
    }
    ASSERT_TRUE(tx->Commit().ok());
  }
  EXPECT_TRUE(store_->GetDocument("a")->has_value());
  EXPECT_TRUE(store_->GetDocument("b")->has_value());
  EXPECT_EQ(store_->SearchChunks("alpha", 5)->size(), 1u);
  {
    auto tx = store_->BeginAllOrNothing();
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE(store_->UpsertDocument(Doc("c", "gamma")).ok());
    // Destroyed without Commit(): nothing of it stays.
  }
  EXPECT_FALSE(store_->GetDocument("c")->has_value());

  if (GetParam() != std::string("sqlite")) return;  // the others keep their savepoints
  // SQLite nests without savepoints: a failed part dooms the whole, which a caller that went on
  // past the error cannot commit.
  auto tx = store_->BeginAllOrNothing();
  ASSERT_TRUE(tx.ok());
  ASSERT_TRUE(store_->UpsertDocument(Doc("d", "delta")).ok());
  EXPECT_FALSE(store_
                   ->ReplaceDocumentChunks(
                       "d", {Chunk("d", 0, "x"), ChunkRecord{"a#alpha", "d", 1, "alpha", 1, 0}})
                   .ok());
  auto after = store_->Begin();
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), ErrorCode::kInternal);
  EXPECT_EQ(store_->UpsertDocument(Doc("e", "epsilon")).status().code(), ErrorCode::kInternal);
  const Status committed = tx->Commit();
  EXPECT_EQ(committed.code(), ErrorCode::kInternal) << committed.ToString();
  EXPECT_FALSE(store_->GetDocument("d")->has_value());
  EXPECT_FALSE(store_->GetDocument("e")->has_value());
  EXPECT_EQ(*store_->CountChunks(), 1);
  // The next transaction is an ordinary one again.
  {
    auto next = store_->Begin();
    ASSERT_TRUE(next.ok());
    ASSERT_TRUE(store_->UpsertDocument(Doc("f", "phi")).ok());
    {
      auto inner = store_->Begin();
      ASSERT_TRUE(inner.ok());
      ASSERT_TRUE(store_->UpsertDocument(Doc("g", "gamma")).ok());
      ASSERT_TRUE(inner->Rollback().ok());
    }
    ASSERT_TRUE(next->Commit().ok());
  }
  EXPECT_TRUE(store_->GetDocument("f")->has_value());
  EXPECT_FALSE(store_->GetDocument("g")->has_value());
}

// ---------------------------------------------------------------- entity resolution

TEST_P(StoreBackendTest, AliasesLinksAndOverridesRoundTripAndAliasesFindTheirEntity) {
  const int64_t jm = AddEntity("jacob marley");
  AddEntity("scrooge");
  ASSERT_TRUE(
      store_
          ->ReplaceResolution({{"jacob marley", "Jacob Marley", "jacob marley", 1, "", ""},
                               {"marley", "Marley", "jacob marley", 0.91, "similarity", "surname"},
                               {"scrooge", "Scrooge", "scrooge", 1, "", ""}},
                              {{"marley", "jacob marley", 0.91, "similarity", "surname"}})
          .ok());
  auto aliases = store_->ListAliases();
  ASSERT_TRUE(aliases.ok()) << aliases.status().ToString();
  ASSERT_EQ(aliases->size(), 3u);
  EXPECT_EQ((*aliases)[1].name_key, "marley");
  EXPECT_EQ((*aliases)[1].method, "similarity");
  auto links = store_->ListResolutionLinks();
  ASSERT_TRUE(links.ok());
  ASSERT_EQ(links->size(), 1u);
  EXPECT_EQ((*links)[0].key_a, "jacob marley");  // ordered on the way in
  EXPECT_EQ((*links)[0].key_b, "marley");

  // A resolved name finds its entity; an unknown one finds nothing.
  auto found = store_->GetEntityByKey("marley");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->id, jm);
  EXPECT_FALSE(store_->GetEntityByKey("jacob")->has_value());
  // Many names at once: the canonical key of each the resolver placed, the others absent.
  auto canonical = store_->CanonicalKeys({"marley", "jacob", "scrooge", "marley"});
  ASSERT_TRUE(canonical.ok()) << canonical.status().ToString();
  EXPECT_EQ(*canonical, (std::unordered_map<std::string, std::string>{{"marley", "jacob marley"},
                                                                      {"scrooge", "scrooge"}}));
  EXPECT_TRUE(store_->CanonicalKeys({})->empty());
  auto snapshot = store_->LoadGraphSnapshot();
  ASSERT_TRUE(snapshot.ok());
  ASSERT_EQ(snapshot->aliases.size(), 1u);
  EXPECT_EQ(snapshot->aliases[0], (std::pair<std::string, int64_t>{"marley", jm}));

  // Replacing drops what is not given again, but for an entity's own name: an entity stands
  // for it (its row is not stored, ListAliases gives it back from the entity).
  ASSERT_TRUE(store_->ReplaceResolution({{"scrooge", "Scrooge", "scrooge", 1, "", ""}}, {}).ok());
  aliases = store_->ListAliases();
  ASSERT_TRUE(aliases.ok()) << aliases.status().ToString();
  ASSERT_EQ(aliases->size(), 2u);
  EXPECT_EQ((*aliases)[0].name_key, "jacob marley");
  EXPECT_EQ((*aliases)[0].canonical_key, "jacob marley");
  EXPECT_EQ((*aliases)[0].score, 1);
  EXPECT_EQ((*aliases)[0].method, "");
  EXPECT_TRUE(store_->ListResolutionLinks()->empty());
  EXPECT_FALSE(store_->GetEntityByKey("marley")->has_value());

  // A person's decisions: one per pair, the latest wins, order of the names does not matter.
  ASSERT_TRUE(store_->PutEntityOverride("marley", "jacob", true).ok());
  ASSERT_TRUE(store_->PutEntityOverride("jacob", "marley", false).ok());
  auto overrides = store_->ListEntityOverrides();
  ASSERT_TRUE(overrides.ok());
  ASSERT_EQ(overrides->size(), 1u);
  EXPECT_EQ((*overrides)[0].key_a, "jacob");
  EXPECT_FALSE((*overrides)[0].merge);
  EXPECT_EQ(store_->PutEntityOverride("x", "x", true).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(*store_->DeleteEntityOverride("marley", "jacob"));
  EXPECT_FALSE(*store_->DeleteEntityOverride("marley", "jacob"));

  // Meta values.
  EXPECT_FALSE(store_->GetMeta("resolution_params")->has_value());
  ASSERT_TRUE(store_->SetMeta("resolution_params", "v1").ok());
  ASSERT_TRUE(store_->SetMeta("resolution_params", "v2").ok());
  EXPECT_EQ(store_->GetMeta("resolution_params")->value_or(""), "v2");
}

// ---------------------------------------------------------------- graph reads

TEST_P(StoreBackendTest, GraphSnapshotNeighbourhoodAndChunkLinks) {
  AddDoc("d", {"c0", "c1", "c2", "c3"});
  const int64_t a = AddEntity("a");
  const int64_t b = AddEntity("b");
  const int64_t c = AddEntity("c");
  const int64_t far = AddEntity("far");
  ASSERT_TRUE(store_->SetEntityChunks(a, {"d#c0", "d#c1"}).ok());
  ASSERT_TRUE(store_->SetEntityChunks(b, {"d#c1"}).ok());
  ASSERT_TRUE(store_->SetEntityChunks(c, {"d#c2"}).ok());
  ASSERT_TRUE(store_->SetEntityChunks(far, {"d#c3"}).ok());
  auto ab = store_->UpsertRelationship(Rel(a, b, "ab", 2));
  auto bc = store_->UpsertRelationship(Rel(c, b, "bc", 5));
  auto cf = store_->UpsertRelationship(Rel(c, far, "cf", 1));
  ASSERT_TRUE(ab.ok() && bc.ok() && cf.ok());
  ASSERT_TRUE(store_->SetRelationshipChunks(*ab, {"d#c1", "d#c0"}).ok());
  ASSERT_TRUE(store_->RecomputeGraphStats().ok());

  auto g = store_->LoadGraphSnapshot();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->entities.size(), 4u);
  EXPECT_EQ(g->entities[0].id, a);
  EXPECT_EQ(g->entities[0].frequency, 2);
  ASSERT_EQ(g->edges.size(), 3u);
  EXPECT_EQ(g->edges[1].source_id, std::min(b, c));
  EXPECT_EQ(g->edges[1].weight, 5);
  EXPECT_EQ(g->chunk_ids, (std::vector<std::string>{"d#c0", "d#c1", "d#c2", "d#c3"}));
  EXPECT_EQ(g->chunk_titles[0], "d.txt");
  ASSERT_EQ(g->links.size(), 5u);
  EXPECT_EQ(g->links[1].entity_id, a);
  EXPECT_EQ(g->links[1].chunk, 1u);

  // One hop from a: b over the relationship, c0 and c1 over its links, then nothing further.
  Store::NeighbourhoodLimits one;
  one.hops = 1;
  auto near = store_->LoadGraphNeighbourhood({a}, {}, one);
  ASSERT_TRUE(near.ok()) << near.status().ToString();
  std::vector<int64_t> ids;
  for (const auto& e : near->entities) ids.push_back(e.id);
  EXPECT_EQ(ids, (std::vector<int64_t>{a, b}));
  EXPECT_EQ(near->chunk_ids, (std::vector<std::string>{"d#c0", "d#c1"}));
  ASSERT_EQ(near->edges.size(), 1u);
  EXPECT_EQ(near->edges[0].weight, 2);
  EXPECT_EQ(near->links.size(), 3u);  // a-c0, a-c1, b-c1
  // Without relationships: the same walk, no edges (the evidence chain's read of chunks and
  // their entities).
  Store::NeighbourhoodLimits bare = one;
  bare.relationships = false;
  auto chunks_only = store_->LoadGraphNeighbourhood({}, {"d#c1"}, bare);
  ASSERT_TRUE(chunks_only.ok()) << chunks_only.status().ToString();
  EXPECT_TRUE(chunks_only->edges.empty());
  EXPECT_EQ(chunks_only->chunk_ids, (std::vector<std::string>{"d#c1"}));
  EXPECT_EQ(chunks_only->links.size(), 2u);  // a-c1, b-c1
  EXPECT_EQ(chunks_only->entities.size(), 2u);
  // Three hops from chunk c3: far, c, b (a would be a fourth); a limit of two entities stops
  // the walk there.
  Store::NeighbourhoodLimits three;
  auto all = store_->LoadGraphNeighbourhood({}, {"d#c3"}, three);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->entities.size(), 3u);
  Store::NeighbourhoodLimits two = three;
  two.max_entities = 2;
  EXPECT_EQ(store_->LoadGraphNeighbourhood({a}, {}, two)->entities.size(), 2u);

  auto links = store_->ListChunkLinks();
  ASSERT_TRUE(links.ok());
  ASSERT_EQ(links->entities.size(), 5u);
  EXPECT_EQ(links->entities[0], (std::pair<int64_t, std::string>{a, "d#c0"}));
  ASSERT_EQ(links->relationships.size(), 2u);
  EXPECT_EQ(links->relationships[0], (std::pair<int64_t, std::string>{*ab, "d#c0"}));
  EXPECT_EQ(*store_->CountEntities(), 4);
}

// ---------------------------------------------------------------- ranking and word counts

TEST_P(StoreBackendTest, RankTextsAndWordCountsFollowTheFullTextRules) {
  AddDoc("d", {"Jacob Marley was dead to begin with.", "Old Marley was as dead as a door-nail.",
               "Scrooge knew he was dead? Of course he did.", "The ghost of Jacob Marley came."});
  EXPECT_EQ(*store_->CountChunksWithPhrase("Jacob Marley"), 2);
  EXPECT_EQ(*store_->CountChunksWithPhrase("marley jacob"), 0);
  EXPECT_EQ(*store_->CountChunksWithPhrase("  \"MARLEY\" "), 3);
  EXPECT_EQ(*store_->CountChunksWithPhrase("?!"), 0);
  EXPECT_EQ(*store_->CountChunksWithWords({"dead", "ghosts", "nobody", "was"}),
            (std::vector<int64_t>{3, 1, 0, 3}));
  EXPECT_TRUE(store_->CountChunksWithWords({})->empty());

  const std::vector<std::string> texts = {"Marley and Scrooge were partners.",
                                          "Bob Cratchit and Tiny Tim.", "Marley, Marley, Marley!",
                                          ""};
  auto scores = store_->RankTexts(texts, "Who was Marley?");
  ASSERT_TRUE(scores.ok()) << scores.status().ToString();
  ASSERT_EQ(scores->size(), 4u);
  EXPECT_GT((*scores)[2], (*scores)[0]);
  EXPECT_GT((*scores)[0], 0);
  EXPECT_EQ((*scores)[1], 0);
  EXPECT_EQ((*scores)[3], 0);
  EXPECT_EQ(*store_->RankTexts(texts, "?!"), std::vector<double>(4, 0.0));
  EXPECT_TRUE(store_->RankTexts({}, "marley")->empty());
  // Ranking writes nothing.
  EXPECT_EQ(*store_->CountChunks(), 4);
}

// ---------------------------------------------------------------- opening and inspection

TEST_P(StoreBackendTest, ReopenKeepsDataAndInfoDescribesTheIndex) {
  AddDoc("d", {"kept across opens"});
  auto info = store_->Info();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_GT(info->schema_version, 0);
  EXPECT_EQ(info->schema_version, info->max_schema_version);
  EXPECT_TRUE(info->foreign_keys);
  EXPECT_FALSE(info->path.empty());
  store_.reset();
  StoreOptions options;
  options.create_if_missing = false;
  auto again = Store::Open(backend_.location(), options);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  store_ = std::move(again).value();
  EXPECT_EQ(Search("opens"), std::vector<std::string>{"d#kept across opens"});

  // A location that holds no index yet is kNotFound without create_if_missing.
  Backend fresh(GetParam());
  ASSERT_EQ(fresh.Prepare(), "");
  EXPECT_EQ(Store::Open(fresh.location(), options).status().code(), ErrorCode::kNotFound);
}

TEST_P(StoreBackendTest, ReadOnlyReadsAndRefusesWrites) {
  AddDoc("d", {"read me"});
  StoreOptions ro;
  ro.read_only = true;
  auto reader = Store::Open(backend_.location(), ro);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->ListChunkIds()->size(), 1u);
  EXPECT_EQ((*reader)->SearchChunks("read", 5)->size(), 1u);
  EXPECT_EQ((*reader)->UpsertDocument(Doc("x", "y")).status().code(), ErrorCode::kIoError);
  EXPECT_TRUE((*reader)->ReplyCache().Put("k", "v", "m", "chat").ok());  // answers, caches nothing
  EXPECT_FALSE((*reader)->ReplyCache().Get("k").has_value());
  EXPECT_FALSE(store_->GetDocument("x")->has_value());
}

TEST_P(StoreBackendTest, ASecondWriterIsRefusedWhileTheFirstHoldsTheLock) {
  StoreOptions writer;
  writer.writer_lock = true;
  writer.lock_holder = "grag test";
  store_.reset();
  auto first = Store::Open(backend_.location(), writer);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = Store::Open(backend_.location(), writer);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(second.status().message().find("grag test"), std::string::npos)
      << second.status().message();
  first->reset();  // released with the store
  auto third = Store::Open(backend_.location(), writer);
  EXPECT_TRUE(third.ok()) << third.status().ToString();
}

TEST_P(StoreBackendTest, CheckPassesASoundIndexAndReportsOrphans) {
  AddDoc("d", {"c0"});
  const int64_t a = AddEntity("a");
  const int64_t lonely = AddEntity("lonely");
  ASSERT_TRUE(store_->SetEntityChunks(a, {"d#c0"}).ok());
  ASSERT_TRUE(store_->SetEntityChunks(lonely, {"d#c0"}).ok());
  auto sound = store_->Check(10);
  ASSERT_TRUE(sound.ok()) << sound.status().ToString();
  EXPECT_TRUE(sound->ok()) << sound->problems[0].detail;
  EXPECT_NE(std::find(sound->checks_run.begin(), sound->checks_run.end(), "orphans"),
            sound->checks_run.end());
  ASSERT_TRUE(store_->SetEntityChunks(lonely, {}).ok());
  auto report = store_->Check(10);
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->problems.size(), 1u);
  EXPECT_EQ(report->problems[0].check, "orphans");
  EXPECT_NE(report->problems[0].detail.find("lonely"), std::string::npos);
  EXPECT_TRUE(store_->CheckIntegrity().ok());
}

// ---------------------------------------------------------------- threads

TEST_P(StoreBackendTest, ReplyCacheAndGroupedWritesFromManyThreads) {
  AddDoc("d", {"c0"});
  constexpr int kThreads = 6;
  constexpr int kEach = 20;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string key = std::to_string(t) + ":" + std::to_string(i);
        if (!store_->ReplyCache().Put(key, "v" + key, "m", "chat").ok()) ++failures;
        // Every fifth grouped write fails half-way and must leave nothing behind.
        Status st = store_->WriteGrouped([&]() -> Status {
          GRAG_RETURN_IF_ERROR(store_->SetMeta("g" + key, "1"));
          if (i % 5 == 0) return Status::InvalidArgument("planned failure");
          return Status::Ok();
        });
        if (st.ok() == (i % 5 == 0)) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  ASSERT_TRUE(store_->FlushDeferred().ok());  // the reply cache's rows are deferred
  EXPECT_EQ((*store_->Stats()).cache_entries, kThreads * kEach);
  EXPECT_EQ(store_->ReplyCache().Get("3:7").value_or(""), "v3:7");
  EXPECT_FALSE(store_->GetMeta("g2:5")->has_value());
  EXPECT_TRUE(store_->GetMeta("g2:6")->has_value());
}

TEST_P(StoreBackendTest, ReadsOnOtherThreadsSeeTheLastCommitWithoutWaiting) {
  AddDoc("a", {"alpha"});
  auto tx = store_->Begin();
  ASSERT_TRUE(tx.ok());
  ASSERT_TRUE(store_->UpsertDocument(Doc("b", "beta")).ok());
  EXPECT_TRUE(store_->GetDocument("b")->has_value());  // the transaction's thread sees its writes
  std::atomic<int> state{0};                           // 1: saw the last commit, 2: saw more
  std::thread reader([&] {
    auto a = store_->GetDocument("a");
    auto b = store_->GetDocument("b");
    state = a.ok() && b.ok() && a->has_value() && !b->has_value() ? 1 : 2;
  });
  for (int i = 0; i < 500 && state == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const int seen = state;  // 0: the read waited for the open transaction
  ASSERT_TRUE(tx->Commit().ok());
  reader.join();
  EXPECT_EQ(seen, 1);
  EXPECT_TRUE(store_->GetDocument("b")->has_value());
}

// ---------------------------------------------------------------- PostgreSQL without a server

TEST(PostgresOpenTest, AnUnreachableServerIsUnavailableAndThePasswordIsNeverShown) {
  for (const std::string url :
       {"postgresql://grag:s3cret@127.0.0.1:1/grag?connect_timeout=2",
        "postgres:///grag?host=/nonexistent-grag-socket-dir&user=grag&password=s3cret"}) {
    auto opened = Store::Open(url);
    ASSERT_FALSE(opened.ok()) << url;
    EXPECT_EQ(opened.status().code(), ErrorCode::kUnavailable) << opened.status().ToString();
    EXPECT_EQ(opened.status().message().find("s3cret"), std::string::npos)
        << opened.status().message();
    EXPECT_NE(opened.status().message().find("grag"), std::string::npos)
        << opened.status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreBackendTest, ::testing::Values("sqlite", "postgresql"),
                         BackendName);

}  // namespace
}  // namespace grag
