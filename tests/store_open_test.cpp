// Opening an index: schema creation, pragmas, reopening, migrations, and the errors for files
// that are not (readable) grag indexes.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "grag/hash.h"
#include "grag/store.h"
#include "grag/store_copy.h"
#include "support/temp_dir.h"
#include "store/sqlite/store_impl.h"

namespace grag {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

// A raw SQLite connection for looking at (or tampering with) an index behind the store's back.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
  }
  ~RawDb() { sqlite3_close(db_); }
  void Exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << (err ? err : "");
    sqlite3_free(err);
  }
  std::string Text(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
    std::string out;
    if (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
      const unsigned char* p = sqlite3_column_text(stmt, 0);
      if (p != nullptr) out = reinterpret_cast<const char*>(p);
    }
    sqlite3_finalize(stmt);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

// A chunk row as an index before schema 8 holds it (this build's store writes its offsets too,
// into columns an older schema lacks).
void InsertOldChunk(const std::string& path, const std::string& id, const std::string& doc,
                    const std::string& text) {
  RawDb(path).Exec(
      "INSERT INTO chunks (id, document_id, chunk_index, text, n_tokens, start_token) VALUES ('" +
      id + "', '" + doc + "', 0, '" + text + "', 1, 0)");
}

Document Doc(const std::string& id, const std::string& text) {
  return Document{id, id + " title", "/in/" + id, text, "hash-of-" + text};
}

TEST(StoreOpenTest, CreatesSchemaInWalModeWithForeignKeys) {
  TempDir dir;
  const std::string path = dir.File("output/index.db");  // parent folder does not exist yet
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();

  auto info = (*store)->Info();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->journal_mode, "wal");
  EXPECT_TRUE(info->foreign_keys);
  EXPECT_EQ(info->synchronous, 1);  // NORMAL
  EXPECT_EQ(info->busy_timeout_ms, 10000);
  EXPECT_EQ(info->schema_version, Store::LatestSchemaVersion());
  EXPECT_EQ(info->max_schema_version, Store::LatestSchemaVersion());
  EXPECT_TRUE((*store)->CheckIntegrity().ok());

  // Seen from outside: WAL is a property of the file, and the file says who wrote it.
  RawDb raw(path);
  EXPECT_EQ(raw.Text("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.Text("PRAGMA application_id"), std::to_string(store::kApplicationId));
  EXPECT_EQ(raw.Text("PRAGMA user_version"), std::to_string(Store::LatestSchemaVersion()));
  EXPECT_EQ(raw.Text("SELECT value FROM meta WHERE key = 'schema_version'"),
            std::to_string(Store::LatestSchemaVersion()));
  EXPECT_EQ(raw.Text("SELECT value FROM meta WHERE key = 'created_by'"), "grag");
  EXPECT_FALSE(raw.Text("SELECT value FROM meta WHERE key = 'created_at'").empty());
  for (const char* table :
       {"documents", "chunks", "chunks_fts", "extractions", "entities", "relationships",
        "entity_chunks", "relationship_chunks", "clusterings", "communities", "community_members",
        "reports", "embeddings", "llm_cache", "runs", "run_stages"}) {
    EXPECT_EQ(
        raw.Text(std::string("SELECT count(*) FROM sqlite_master WHERE name = '") + table + "'"),
        "1")
        << table;
  }
}

TEST(StoreOpenTest, ReopenKeepsData) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->UpsertDocument(Doc("a", "alpha")).ok());
    ASSERT_TRUE((*store)->ReplyCache().Put("k", "v", "m", "chat").ok());
  }
  StoreOptions existing;
  existing.create_if_missing = false;
  auto store = Store::Open(path, existing);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto doc = (*store)->GetDocument("a");
  ASSERT_TRUE(doc.ok());
  ASSERT_TRUE(doc->has_value());
  EXPECT_EQ((*doc)->text, "alpha");
  EXPECT_EQ((*store)->ReplyCache().Get("k"), "v");
}

TEST(StoreOpenTest, MissingFileWithoutCreateIsNotFound) {
  TempDir dir;
  const std::string path = dir.File("nope/index.db");
  StoreOptions existing;
  existing.create_if_missing = false;
  auto store = Store::Open(path, existing);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(store.status().message().find(path), std::string::npos);
  EXPECT_FALSE(fs::exists(path));
}

TEST(StoreOpenTest, FolderIsRefused) {
  TempDir dir;
  fs::create_directories(dir.File("folder"));
  auto store = Store::Open(dir.File("folder"));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kInvalidArgument);
}

TEST(StoreOpenTest, NonSqliteFileIsAClearErrorAndLeftAlone) {
  TempDir dir;
  const std::string path = dir.File("notes.txt");
  const std::string content = "These are my notes, not a database. They are long enough.\n";
  std::ofstream(path) << content;
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  // Not a usage error: the index file is damaged or was replaced (exit code 1, with advice).
  EXPECT_EQ(store.status().code(), ErrorCode::kCorruption);
  EXPECT_NE(store.status().message().find("is damaged or is not a grag index"), std::string::npos)
      << store.status().message();
  std::ifstream in(path, std::ios::binary);
  std::stringstream after;
  after << in.rdbuf();
  EXPECT_EQ(after.str(), content);
}

TEST(StoreOpenTest, OtherApplicationsSqliteFileIsRefused) {
  TempDir dir;
  const std::string path = dir.File("other.db");
  { RawDb(path).Exec("CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('x')"); }
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kCorruption);  // exit 1, as a damaged index
  EXPECT_NE(store.status().message().find("is an SQLite database but not a grag index"),
            std::string::npos)
      << store.status().message();
  EXPECT_EQ(RawDb(path).Text("SELECT name FROM contacts"), "x");
}

TEST(StoreOpenTest, NewerSchemaIsRefusedWithBothVersions) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  { ASSERT_TRUE(Store::Open(path).ok()); }
  { RawDb(path).Exec("PRAGMA user_version = 99"); }
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kInvalidArgument);
  const std::string expected =
      "index was written by a newer grag (schema 99); this grag reads "
      "up to " +
      std::to_string(Store::LatestSchemaVersion());
  EXPECT_NE(store.status().message().find(expected), std::string::npos) << store.status().message();
}

TEST(StoreOpenTest, EmptySqliteFileIsVersionZeroAndGetsInitialised) {
  TempDir dir;
  // A zero-byte file and an SQLite file with no tables are both "version 0".
  const std::string empty = dir.File("empty.db");
  std::ofstream(empty).close();
  const std::string blank = dir.File("blank.db");
  { RawDb(blank).Exec("PRAGMA page_size = 4096; VACUUM"); }
  for (const std::string& path : {empty, blank}) {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << path << ": " << store.status().ToString();
    auto info = (*store)->Info();
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->schema_version, Store::LatestSchemaVersion());
    EXPECT_TRUE((*store)->UpsertDocument(Doc("a", "alpha")).ok());
  }
}

TEST(StoreOpenTest, EmptyFileIsNotAnIndexForAReader) {
  TempDir dir;
  const std::string empty = dir.File("empty.db");
  std::ofstream(empty).close();
  StoreOptions so;
  so.create_if_missing = false;
  auto store = Store::Open(empty, so);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(store.status().message().find("is an empty file (0 bytes)"), std::string::npos)
      << store.status().message();
  EXPECT_EQ(std::filesystem::file_size(empty), 0u);  // left as it was
}

// A fake "next release": version 2 rebuilds the documents table with a new column (the way
// SQLite needs most schema changes done) and adds a table.
constexpr std::string_view kV2 = R"sql(
CREATE TABLE documents_new (
  id           TEXT PRIMARY KEY,
  title        TEXT NOT NULL,
  source_path  TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  text         TEXT NOT NULL,
  language     TEXT NOT NULL DEFAULT 'en',
  created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  updated_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);
INSERT INTO documents_new (id, title, source_path, content_hash, text, created_at, updated_at)
  SELECT id, title, source_path, content_hash, text, created_at, updated_at FROM documents;
DROP TABLE documents;
ALTER TABLE documents_new RENAME TO documents;
CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
)sql";

std::array<store::Migration, 2> MigrationsUpToV2(std::string_view v2_sql) {
  return {store::DefaultMigrations()[0], store::Migration{2, "test step", v2_sql}};
}

TEST(StoreOpenTest, MigratesAnOlderIndexForwardKeepingData) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  const auto v1_only = store::DefaultMigrations().first(1);
  {
    auto store = store::OpenStore(path, {}, v1_only);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->UpsertDocument(Doc("a", "alpha beta")).ok());
  }
  InsertOldChunk(path, "a#0", "a", "alpha beta");
  EXPECT_EQ(RawDb(path).Text("PRAGMA user_version"), "1");

  const auto steps = MigrationsUpToV2(kV2);
  auto store = store::OpenStore(path, {}, steps);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto info = (*store)->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->schema_version, 2);
  EXPECT_TRUE(info->foreign_keys);  // back on after the step
  auto doc = (*store)->GetDocument("a");
  ASSERT_TRUE(doc.ok() && doc->has_value());
  EXPECT_EQ((*doc)->text, "alpha beta");
  // Rebuilding the parent table did not cascade into chunks or break the full-text index.
  EXPECT_EQ(*(*store)->CountChunks(), 1);
  auto hits = (*store)->SearchChunks("beta", 5);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(hits->size(), 1u);
  EXPECT_TRUE((*store)->CheckIntegrity().ok()) << (*store)->CheckIntegrity().ToString();
  // The cascade still works on the rebuilt table.
  ASSERT_TRUE((*store)->DeleteDocument("a").ok());
  EXPECT_EQ(*(*store)->CountChunks(), 0);
  store->reset();

  RawDb raw(path);
  EXPECT_EQ(raw.Text("SELECT value FROM meta WHERE key = 'schema_version'"), "2");
  EXPECT_FALSE(raw.Text("SELECT value FROM meta WHERE key = 'migrated_at'").empty());
  EXPECT_EQ(raw.Text("SELECT count(*) FROM sqlite_master WHERE name = 'notes'"), "1");

  // This build (schema 1) now refuses the file.
  auto old = store::OpenStore(path, {}, v1_only);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("newer grag (schema 2); this grag reads up to 1"),
            std::string::npos);
}

// Schema 5 drops the indexes of mentions by name (nothing reads by them; they cost most of an
// index run's disk writes): an index of schema 4 loses them and keeps its mentions.
TEST(StoreOpenTest, SchemaFiveDropsTheMentionNameIndexesAndKeepsTheMentions) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  const ExtractorId nlp{ExtractorKind::kNlp, "nlp"};
  {
    auto store = store::OpenStore(path, {}, store::DefaultMigrations().first(4));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->UpsertDocument(Doc("a", "alpha beta")).ok());
    InsertOldChunk(path, "a#0", "a", "alpha beta");
  }
  // As that schema kept them: a row per mention (schema 11 moves them into the extraction).
  RawDb(path).Exec(
      "INSERT INTO extractions (id, chunk_id, extractor, model, status) "
      "VALUES (1, 'a#0', 'nlp', 'nlp', 'ok');"
      "INSERT INTO entity_mentions (extraction_id, name, name_key, type, description) "
      "VALUES (1, 'Alpha', 'alpha', 'CONCEPT', 'the first');"
      "INSERT INTO relationship_mentions (extraction_id, source, target, source_key, "
      "target_key, description, strength) VALUES (1, 'Alpha', 'Beta', 'alpha', 'beta', "
      "'together', 1);");
  const std::string named_indexes =
      "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN "
      "('entity_mentions_key', 'relationship_mentions_keys')";
  EXPECT_EQ(RawDb(path).Text(named_indexes), "2");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Info()->schema_version, Store::LatestSchemaVersion());
  EXPECT_EQ((*store)->ListEntityMentions(nlp)->size(), 1u);
  EXPECT_EQ((*store)->ListRelationshipMentions(nlp)->size(), 1u);
  store->reset();
  EXPECT_EQ(RawDb(path).Text(named_indexes), "0");
}

// Schema 11 moves an extraction's mentions into its row: each one kept, in the order extracted,
// quotes, non-ASCII text and strengths intact; counts and the empty-extraction check from the new
// columns; an extraction stored afterwards is compressed.
TEST(StoreOpenTest, SchemaElevenMovesMentionsIntoTheirExtraction) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  const ExtractorId nlp{ExtractorKind::kNlp, "nlp"};
  {
    auto store = store::OpenStore(path, {}, store::DefaultMigrations().first(10));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->UpsertDocument(Doc("a", "alpha beta")).ok());
  }
  RawDb(path).Exec(
      "INSERT INTO chunks (seq, id, document_id, chunk_index, text, n_tokens, start_token) "
      "VALUES (1, 'a#0', 'a', 0, 'x', 1, 0), (2, 'a#1', 'a', 1, 'y', 1, 0), "
      "(3, 'a#2', 'a', 2, 'z', 1, 0);"
      "INSERT INTO extractions (id, chunk_id, extractor, model, status) VALUES "
      "(1, 'a#1', 'nlp', 'nlp', 'ok'), (2, 'a#0', 'nlp', 'nlp', 'ok'), "
      "(3, 'a#2', 'nlp', 'nlp', 'ok');"
      "INSERT INTO entity_mentions (id, extraction_id, name, name_key, type, description) VALUES "
      "(5, 1, 'Zeta', 'zeta', 'X', 'second chunk'), "
      "(1, 2, 'Bêta \"B\"', 'bêta b', 'Y', 'said ''hi'''), (2, 2, 'Alpha', 'alpha', 'X', '');"
      "INSERT INTO relationship_mentions (extraction_id, source, target, source_key, target_key, "
      "description, strength) VALUES (2, 'Alpha', 'Zeta', 'alpha', 'zeta', 'r', 7.5);"
      "INSERT INTO communities (id, level, size) VALUES (4, 0, 1);"
      "INSERT INTO reports (community_id, status, title, summary, findings, generator) VALUES "
      "(4, 'ok', 'T', 'S', '[{\"summary\": \"f\", \"explanation\": \"e\", "
      "\"entities\": [\"Alpha\"]}]', 'extractive');"
      "INSERT INTO embeddings (owner_kind, owner_id, model, dimension, encoding, vector) "
      "VALUES ('report', '4', 'm', 1, 'f32', x'0000803f');");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto entities = (*store)->ListEntityMentions(nlp);
  ASSERT_TRUE(entities.ok()) << entities.status().ToString();
  ASSERT_EQ(entities->size(), 3u);
  EXPECT_EQ((*entities)[0].chunk_id, "a#0");
  EXPECT_EQ((*entities)[0].mention.name, "Bêta \"B\"");
  EXPECT_EQ((*entities)[0].mention.name_key, "bêta b");
  EXPECT_EQ((*entities)[0].mention.description, "said 'hi'");
  EXPECT_EQ((*entities)[1].mention.name, "Alpha");
  EXPECT_EQ((*entities)[2].chunk_id, "a#1");
  EXPECT_EQ((*entities)[2].mention.type, "X");
  auto relationships = (*store)->ListRelationshipMentions(nlp);
  ASSERT_TRUE(relationships.ok()) << relationships.status().ToString();
  ASSERT_EQ(relationships->size(), 1u);
  EXPECT_EQ((*relationships)[0].mention.target_key, "zeta");
  EXPECT_EQ((*relationships)[0].mention.strength, 7.5);
  auto stats = (*store)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->entity_mentions, 3);
  EXPECT_EQ(stats->relationship_mentions, 1);
  EXPECT_EQ(stats->extractions_empty, 1);  // a#2's
  auto got = (*store)->GetExtraction("a#0", nlp);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->entities.size(), 2u);
  EXPECT_EQ((*got)->relationships.size(), 1u);

  // Migrated, the mentions are plain JSON; a compaction compresses them.
  EXPECT_EQ(RawDb(path).Text("SELECT group_concat(typeof(mentions)) FROM extractions"),
            "text,text,text");
  EXPECT_TRUE((*store)->GetFileSpace().value()->compact_requested);  // the next run compacts
  ASSERT_TRUE((*store)->Compact().ok());
  EXPECT_FALSE((*store)->GetFileSpace().value()->compact_requested);
  EXPECT_EQ(RawDb(path).Text("SELECT typeof(mentions) FROM extractions WHERE id = 2"), "blob");
  EXPECT_EQ((*store)->ListEntityMentions(nlp)->size(), 3u);
  EXPECT_EQ((*store)->GetExtraction("a#0", nlp)->value().entities[0].description, "said 'hi'");

  // The reports table, rebuilt, keeps its rows; its findings may now be stored compressed.
  auto report = (*store)->GetReport(4);
  ASSERT_TRUE(report.ok() && report->has_value()) << report.status().ToString();
  ASSERT_EQ((*report)->findings.size(), 1u);
  EXPECT_EQ((*report)->findings[0].entities, std::vector<std::string>{"Alpha"});
  ReportRecord longer = **report;
  for (int i = 0; i < 10; ++i) longer.findings.push_back(longer.findings[0]);
  ASSERT_TRUE((*store)->PutReport(longer).ok());
  report = (*store)->GetReport(4);
  ASSERT_TRUE(report.ok() && report->has_value()) << report.status().ToString();
  EXPECT_EQ((*report)->findings.size(), 11u);
  EXPECT_EQ((*report)->full_content, longer.full_content);

  // Stored now: one compressed value, read back whole.
  ExtractionRecord r;
  r.chunk_id = "a#2";
  r.extractor = nlp;
  for (int i = 0; i < 20; ++i) {
    r.entities.push_back({"Name " + std::to_string(i), "name " + std::to_string(i), "X",
                          "a description that repeats itself"});
  }
  r.relationships = {{"Name 0", "Name 1", "name 0", "name 1", "linked", 2.25}};
  ASSERT_TRUE((*store)->PutExtraction(r).ok());
  got = (*store)->GetExtraction("a#2", nlp);
  ASSERT_TRUE(got.ok() && got->has_value());
  ASSERT_EQ((*got)->entities.size(), 20u);
  EXPECT_EQ((*got)->entities[19].name_key, "name 19");
  EXPECT_EQ((*got)->relationships[0].strength, 2.25);
  store->reset();
  RawDb raw(path);
  EXPECT_EQ(raw.Text("SELECT typeof(mentions) FROM extractions WHERE chunk_id = 'a#2'"), "blob");
  EXPECT_EQ(raw.Text("SELECT entity_count || ',' || relationship_count FROM extractions WHERE "
                     "chunk_id = 'a#2'"),
            "20,1");
  EXPECT_EQ(raw.Text("SELECT count(*) FROM sqlite_master WHERE name LIKE '%_mentions%'"), "0");
  EXPECT_EQ(raw.Text("SELECT typeof(findings) FROM reports WHERE community_id = 4"), "blob");
  // Its trigger came back with it: a report's vector goes with the report.
  raw.Exec("DELETE FROM reports WHERE community_id = 4");
  EXPECT_EQ(raw.Text("SELECT count(*) FROM embeddings WHERE owner_kind = 'report'"), "0");
  EXPECT_EQ(raw.Text("PRAGMA integrity_check"), "ok");
}

// A document's text is kept compressed where that saves room and read back byte for byte; a
// short one stays text; grag sql counts the characters of either.
TEST(StoreOpenTest, ADocumentsTextIsKeptCompressedAndReadBackWhole) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "Línea " + std::to_string(i) + ": the same words again.\n";
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->UpsertDocument(Doc("long", text)).ok());
    ASSERT_TRUE((*store)->UpsertDocument(Doc("short", "tiny")).ok());
    auto got = (*store)->GetDocument("long");
    ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
    EXPECT_EQ((*got)->text, text);
    EXPECT_EQ((*(*store)->GetDocument("short"))->text, "tiny");
    auto chars = (*store)->RunReadOnlySql("SELECT characters FROM documents WHERE id = 'long'", 1,
                                          std::chrono::milliseconds(0));
    ASSERT_TRUE(chars.ok()) << chars.status().ToString();
    // Each "í" is two bytes and one character.
    EXPECT_EQ(chars->rows[0][0].integer, static_cast<int64_t>(text.size()) - 200);
    // A changed text replaces the stored one.
    ASSERT_TRUE((*store)->UpsertDocument(Doc("long", text + "more")).ok());
    EXPECT_EQ((*(*store)->GetDocument("long"))->text, text + "more");
  }
  RawDb raw(path);
  EXPECT_EQ(raw.Text("SELECT typeof(text) FROM documents WHERE id = 'long'"), "blob");
  EXPECT_EQ(raw.Text("SELECT typeof(text) FROM documents WHERE id = 'short'"), "text");
  EXPECT_LT(std::stoll(raw.Text("SELECT length(text) FROM documents WHERE id = 'long'")),
            static_cast<long long>(text.size() / 3));
}

// Input and description digests in hex are kept as their bytes (half the room) and read back as
// the same hex; anything else stays text.
TEST(StoreOpenTest, DigestsAreKeptAsBytesAndReadBackAsTheirHex) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  const std::string h16 = Sha256Hex("a").substr(0, 16);
  const std::string h64 = Sha256Hex("b");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EntityRecord e;
    e.name_key = "alpha";
    e.name = "Alpha";
    e.type = "X";
    e.description_hash = h16;
    auto a = (*store)->UpsertEntity(e);
    e.name_key = "beta";
    e.name = "Beta";
    e.description_hash = "not-hex";
    auto b = (*store)->UpsertEntity(e);
    ASSERT_TRUE(a.ok() && b.ok());
    RelationshipRecord r;
    r.source_id = *a;
    r.target_id = *b;
    r.description_hash = h64;
    ASSERT_TRUE((*store)->UpsertRelationship(r).ok());
    EmbeddingRecord v;
    v.owner = EmbeddingOwner::kEntity;
    v.owner_id = std::to_string(*a);
    v.model = "m";
    v.vector = {1.0f};
    v.input_hash = h16;
    ASSERT_TRUE((*store)->PutEmbeddings({v}).ok());
    EXPECT_EQ((*store)->GetEntityByKey("alpha")->value().description_hash, h16);
    EXPECT_EQ((*store)->GetEntityByKey("beta")->value().description_hash, "not-hex");
    EXPECT_EQ((*store)->ListRelationships()->at(0).description_hash, h64);
    EXPECT_EQ((*store)->ListEmbeddingHashes(EmbeddingOwner::kEntity)->at(v.owner_id), h16);
  }
  RawDb raw(path);
  EXPECT_EQ(raw.Text("SELECT group_concat(typeof(description_hash) || length(description_hash)) "
                     "FROM (SELECT description_hash FROM entities ORDER BY name_key)"),
            "blob8,text7");
  EXPECT_EQ(raw.Text("SELECT typeof(description_hash) || length(description_hash) FROM "
                     "relationships"),
            "blob32");
  EXPECT_EQ(raw.Text("SELECT typeof(input_hash) || length(input_hash) FROM embeddings"), "blob8");
}

// A document whose chunks cover its text keeps it once, in them; read back whole, through a
// re-chunking and into a copy, and stored again when new chunks no longer cover it.
TEST(StoreOpenTest, ADocumentsTextCoveredByItsChunksIsKeptOnlyInThem) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  const std::string text = "Ébène one. Two words here. And the third sentence.";
  auto chunk = [&](const std::string& id, int64_t index, size_t from, size_t to) {
    ChunkRecord c;
    c.id = id;
    c.document_id = "d";
    c.index = index;
    c.text = text.substr(from, to - from);
    c.n_tokens = 3;
    c.start_byte = static_cast<int64_t>(from);
    c.end_byte = static_cast<int64_t>(to);
    return c;
  };
  auto stored_type = [&] {
    return RawDb(path).Text("SELECT typeof(text) || ':' || length(text) FROM documents");
  };
  auto characters = [&](Store& s) {
    auto r = s.RunReadOnlySql("SELECT characters FROM documents", 1, std::chrono::milliseconds(0));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->rows[0][0].integer : -1;
  };
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->UpsertDocument(Doc("d", text)).ok());
    // Overlapping slices that cover it: the row keeps ''.
    ASSERT_TRUE(
        (*store)->ReplaceDocumentChunks("d", {chunk("a", 0, 0, 20), chunk("b", 1, 12, 52)}).ok());
    EXPECT_EQ((*(*store)->GetDocument("d"))->text, text);
    EXPECT_EQ(characters(**store), 50);  // 52 bytes: "É" and "è" are two each
  }
  EXPECT_EQ(stored_type(), "text:0");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    // Chunked anew from the text the old chunks gave: still whole.
    ASSERT_TRUE(
        (*store)->ReplaceDocumentChunks("d", {chunk("c", 0, 0, 30), chunk("e", 1, 30, 52)}).ok());
    EXPECT_EQ((*(*store)->GetDocument("d"))->text, text);
    // A copy gets the whole text.
    auto copy = Store::Open(dir.File("copy.db"));
    ASSERT_TRUE(copy.ok()) << copy.status().ToString();
    ASSERT_TRUE(CopyIndex(**store, **copy).ok());
    EXPECT_EQ((*(*copy)->GetDocument("d"))->text, text);
    // Chunks that leave a gap: the text goes back into the row.
    ASSERT_TRUE((*store)->ReplaceDocumentChunks("d", {chunk("f", 0, 0, 10)}).ok());
    EXPECT_EQ((*(*store)->GetDocument("d"))->text, text);
  }
  EXPECT_EQ(stored_type(), "text:50");
  // A row kept '' whose chunks leave a gap (a write around the store) is damage.
  RawDb(path).Exec(
      "UPDATE documents SET text = ''; UPDATE chunks SET start_byte = 5, end_byte = 15");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto damaged = (*store)->GetDocument("d");
  EXPECT_EQ(damaged.status().code(), ErrorCode::kCorruption) << damaged.status().ToString();
}

// A damaged mention value is an error naming the chunk, not a crash or a silent empty list.
TEST(StoreOpenTest, DamagedStoredMentionsAreReported) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  const ExtractorId nlp{ExtractorKind::kNlp, "nlp"};
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->UpsertDocument(Doc("a", "alpha beta")).ok());
  }
  RawDb(path).Exec(
      "INSERT INTO chunks (seq, id, document_id, chunk_index, text, n_tokens, start_token) "
      "VALUES (1, 'a#0', 'a', 0, 'x', 1, 0);"
      "INSERT INTO extractions (chunk_id, extractor, model, status, mentions) "
      "VALUES ('a#0', 'nlp', 'nlp', 'ok', '{\"e\": [[\"A\"]], \"r\": []}');");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto entities = (*store)->ListEntityMentions(nlp);
  ASSERT_FALSE(entities.ok());
  EXPECT_EQ(entities.status().code(), ErrorCode::kCorruption);
  EXPECT_NE(entities.status().message().find("a#0"), std::string::npos)
      << entities.status().message();
}

TEST(StoreOpenTest, MigratesVersionZeroThroughEveryStep) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  { RawDb(path).Exec("VACUUM"); }
  const auto steps = MigrationsUpToV2(kV2);
  auto store = store::OpenStore(path, {}, steps);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Info()->schema_version, 2);
  store->reset();
  EXPECT_EQ(RawDb(path).Text("SELECT value FROM meta WHERE key = 'created_by'"), "grag");
}

TEST(StoreOpenTest, FailedMigrationStepLeavesTheOlderIndexIntact) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  const auto v1_only = store::DefaultMigrations().first(1);
  {
    auto store = store::OpenStore(path, {}, v1_only);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->UpsertDocument(Doc("a", "alpha")).ok());
  }
  const auto broken =
      MigrationsUpToV2("CREATE TABLE half_done (x); INSERT INTO no_such_table VALUES (1);");
  auto failed = store::OpenStore(path, {}, broken);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("to schema 2"), std::string::npos)
      << failed.status().message();

  auto store = store::OpenStore(path, {}, v1_only);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Info()->schema_version, 1);
  EXPECT_TRUE((*(*store)->GetDocument("a")).has_value());
  store->reset();
  EXPECT_EQ(RawDb(path).Text("SELECT count(*) FROM sqlite_master WHERE name = 'half_done'"), "0");
}

TEST(StoreOpenTest, MigrationLeavingDanglingReferencesIsRolledBack) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  const auto v1_only = store::DefaultMigrations().first(1);
  {
    auto store = store::OpenStore(path, {}, v1_only);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->UpsertDocument(Doc("a", "alpha")).ok());
  }
  InsertOldChunk(path, "a#0", "a", "alpha");
  // Foreign keys are off during a step, so this delete would orphan the chunk.
  const auto bad = MigrationsUpToV2("DELETE FROM documents;");
  auto failed = store::OpenStore(path, {}, bad);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), ErrorCode::kCorruption);
  auto store = store::OpenStore(path, {}, v1_only);
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE((*(*store)->GetDocument("a")).has_value());
}

// Schema 8 gives chunks their window in the document's text: rows written before get -1 (the
// citations then locate their text), and re-chunking fills it in for a kept row.
TEST(StoreOpenTest, SchemaEightAddsChunkOffsetsUnknownOnOlderRows) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  {
    auto store = store::OpenStore(path, {}, store::DefaultMigrations().first(7));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->UpsertDocument(Doc("a", "alpha beta")).ok());
  }
  InsertOldChunk(path, "a#0", "a", "alpha beta");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Info()->schema_version, Store::LatestSchemaVersion());
  auto old = (*store)->GetChunk("a#0");
  ASSERT_TRUE(old.ok() && old->has_value());
  EXPECT_EQ((*old)->start_byte, -1);
  EXPECT_EQ((*old)->end_byte, -1);
  ChunkRecord again = **old;
  again.start_byte = 0;
  again.end_byte = 10;
  auto changes = (*store)->ReplaceDocumentChunks("a", {again});
  ASSERT_TRUE(changes.ok());
  EXPECT_EQ(changes->kept, 1);
  auto now = (*store)->GetChunk("a#0");
  ASSERT_TRUE(now.ok() && now->has_value());
  EXPECT_EQ((*now)->start_byte, 0);
  EXPECT_EQ((*now)->end_byte, 10);
  store->reset();
  EXPECT_EQ(RawDb(path).Text("SELECT end_byte FROM chunks WHERE id = 'a#0'"), "10");
}

// Schema 9 names a link's chunk by its seq: links written before keep linking the same chunks,
// every reader gives chunk ids as before (grag sql's views too), and a chunk's removal still
// takes its links with it.
TEST(StoreOpenTest, SchemaNineLinksChunksBySeqKeepingEveryLink) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  {
    auto store = store::OpenStore(path, {}, store::DefaultMigrations().first(8));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->UpsertDocument(Doc("a", "alpha beta gamma")).ok());
  }
  RawDb(path).Exec(
      "INSERT INTO chunks (seq, id, document_id, chunk_index, text, n_tokens, start_token) VALUES "
      "(7, 'a#1', 'a', 1, 'gamma', 1, 2), (9, 'a#0', 'a', 0, 'alpha beta', 2, 0);"
      "INSERT INTO entities (id, name_key, name, type) VALUES (1, 'alpha', 'Alpha', 'X'), "
      "(2, 'gamma', 'Gamma', 'X');"
      "INSERT INTO relationships (id, source_id, target_id) VALUES (5, 1, 2);"
      "INSERT INTO entity_chunks (entity_id, chunk_id) VALUES (1, 'a#0'), (1, 'a#1'), "
      "(2, 'a#1');"
      "INSERT INTO relationship_chunks (relationship_id, chunk_id) VALUES (5, 'a#1');");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Info()->schema_version, store::DefaultMigrations().back().version);
  EXPECT_EQ(*(*store)->GetEntityChunks(1), (std::vector<std::string>{"a#0", "a#1"}));
  auto links = (*store)->ListChunkLinks();
  ASSERT_TRUE(links.ok()) << links.status().ToString();
  using Links = std::vector<std::pair<int64_t, std::string>>;
  EXPECT_EQ(links->entities, (Links{{1, "a#0"}, {1, "a#1"}, {2, "a#1"}}));
  EXPECT_EQ(links->relationships, (Links{{5, "a#1"}}));
  auto sql = (*store)->RunReadOnlySql(
      "SELECT group_concat(entity_id || ':' || chunk_id, ' ') FROM (SELECT * FROM entity_chunks "
      "ORDER BY entity_id, chunk_id)",
      10, std::chrono::milliseconds(0));
  ASSERT_TRUE(sql.ok()) << sql.status().ToString();
  EXPECT_EQ(sql->rows[0][0].text, "1:a#0 1:a#1 2:a#1");
  // Written now: by seq; a chunk that does not exist is refused.
  ASSERT_TRUE((*store)->SetEntityChunks(2, {"a#0"}).ok());
  EXPECT_EQ(*(*store)->GetEntityChunks(2), std::vector<std::string>{"a#0"});
  EXPECT_FALSE((*store)->SetEntityChunks(2, {"a#9"}).ok());
  ASSERT_TRUE((*store)->ReplaceDocumentChunks("a", {**(*store)->GetChunk("a#0")}).ok());
  EXPECT_EQ(*(*store)->GetEntityChunks(1), std::vector<std::string>{"a#0"});
  store->reset();
  RawDb raw(path);
  EXPECT_EQ(raw.Text("SELECT group_concat(typeof(chunk_seq)) FROM relationship_chunks"), "");
  EXPECT_EQ(raw.Text("SELECT group_concat(entity_id || ':' || chunk_seq, ' ') FROM (SELECT * "
                     "FROM entity_chunks ORDER BY entity_id)"),
            "1:9 2:9");
  EXPECT_EQ(raw.Text("PRAGMA integrity_check"), "ok");
  EXPECT_EQ(raw.Text("PRAGMA foreign_key_check"), "");
}

// Schema 10 keeps every vector and what tells a stale one (the first 16 hex digits of the input
// hashes, which the code now writes: nothing is embedded or summarised again), drops the graph's
// timestamps and keeps the vectors without a rowid.
TEST(StoreOpenTest, SchemaTenKeepsVectorsAndShortensInputHashes) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  const std::string text_hash = Sha256Hex("alpha: the first");
  {
    auto store = store::OpenStore(path, {}, store::DefaultMigrations().first(9));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EntityRecord e;
    e.name_key = "alpha";
    e.name = "Alpha";
    e.type = "X";
    e.description = "the first";
    e.description_hash = Sha256Hex("descriptions");
    auto id = (*store)->UpsertEntity(e);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    EmbeddingRecord v;
    v.owner = EmbeddingOwner::kEntity;
    v.owner_id = std::to_string(*id);
    v.model = "m";
    v.vector = {0.5f, -0.25f, 1.0f};
    v.input_hash = text_hash;
    ASSERT_TRUE((*store)->PutEmbeddings({v}).ok());
  }
  // As the builds of schema 9 wrote them: hex text (this build stores a digest's bytes).
  RawDb(path).Exec(
      "UPDATE entities SET description_hash = lower(hex(description_hash)) WHERE "
      "typeof(description_hash) = 'blob'; UPDATE embeddings SET input_hash = "
      "lower(hex(input_hash)) "
      "WHERE typeof(input_hash) = 'blob'");
  EXPECT_EQ(RawDb(path).Text("SELECT count(*) FROM pragma_table_info('entities') WHERE name = "
                             "'updated_at'"),
            "1");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Info()->schema_version, Store::LatestSchemaVersion());
  auto entity = (*store)->GetEntityByKey("alpha");
  ASSERT_TRUE(entity.ok() && entity->has_value());
  EXPECT_EQ((*entity)->description_hash, Sha256Hex("descriptions").substr(0, 16));
  auto vector = (*store)->GetEmbedding(EmbeddingOwner::kEntity, std::to_string((*entity)->id));
  ASSERT_TRUE(vector.ok() && vector->has_value());
  EXPECT_EQ((*vector)->vector, (std::vector<float>{0.5f, -0.25f, 1.0f}));
  EXPECT_EQ((*vector)->input_hash, InputHash("alpha: the first"));
  store->reset();
  RawDb raw(path);
  for (const char* table : {"entities", "relationships"}) {
    EXPECT_EQ(raw.Text(std::string("SELECT count(*) FROM pragma_table_info('") + table +
                       "') WHERE name IN ('created_at', 'updated_at')"),
              "0")
        << table;
  }
  EXPECT_EQ(raw.Text("SELECT sql LIKE '%WITHOUT ROWID' FROM sqlite_master WHERE name = "
                     "'embeddings'"),
            "1");
  EXPECT_EQ(raw.Text("PRAGMA integrity_check"), "ok");
}

}  // namespace
}  // namespace grag
