// Store::RunReadOnlySql (grag sql) on a no-LLM index of part of A Christmas Carol: every view
// answers, the issue's example agrees with the graph read through the Store API, writes of every
// kind are refused, and the index file does not change by a byte.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "grag/engine.h"
#include "grag/store.h"
#include "grag/engine_json.h"
#include "grag/export.h"
#include "grag/hash.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::ReadFile;
using testing::TempDir;

class StoreSqlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    const std::string book =
        ReadFile(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
    dir_->Write("proj/input/carol.txt", book.substr(0, 60000));
    Config config;
    config.root = *dir_ / "proj";
    {
      EngineOptions o;
      o.writable = true;
      auto writer = Engine::Open(config, o);
      ASSERT_TRUE(writer.ok()) << writer.status().ToString();
      auto summary = (*writer)->Index({});
      ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    }
    StoreOptions so;
    so.read_only = true;
    auto store = Store::Open(config.Resolve(config.store.path), so);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    path_ = new std::string(config.Resolve(config.store.path));
    store_ = std::move(store).value().release();
  }
  static void TearDownTestSuite() {
    delete store_;
    delete path_;
    delete dir_;
  }

  static SqlRows Run(const std::string& sql, int64_t max_rows = -1) {
    auto r = store_->RunReadOnlySql(sql, max_rows, std::chrono::seconds(60));
    EXPECT_TRUE(r.ok()) << sql << ": " << r.status().ToString();
    return r.ok() ? *r : SqlRows{};
  }

  // The index's files as bytes (the WAL too, when there is one).
  static std::string Fingerprint() {
    std::string all = ReadFile(*path_);
    if (std::filesystem::exists(*path_ + "-wal")) all += ReadFile(*path_ + "-wal");
    return Sha256Hex(all);
  }

  static TempDir* dir_;
  static std::string* path_;
  static Store* store_;
};

TempDir* StoreSqlTest::dir_ = nullptr;
std::string* StoreSqlTest::path_ = nullptr;
Store* StoreSqlTest::store_ = nullptr;

TEST_F(StoreSqlTest, EveryViewAnswersWithItsDocumentedColumns) {
  const std::map<std::string, std::vector<std::string>> views = {
      {"entities", {"id", "name", "name_key", "type", "description", "degree", "frequency"}},
      {"relationships",
       {"id", "source_id", "source", "source_type", "target_id", "target", "target_type",
        "description", "weight", "frequency", "combined_degree"}},
      {"entity_communities",
       {"entity_id", "entity", "entity_type", "community_id", "level", "parent_id"}},
      {"communities",
       {"id", "level", "parent_id", "size", "weight", "child_count", "title", "rating",
        "report_status"}},
      {"reports",
       {"community_id", "level", "size", "status", "title", "summary", "rating",
        "rating_explanation", "findings", "finding_count", "full_content", "generator"}},
      {"chunks",
       {"id", "document_id", "document_title", "chunk_index", "n_tokens", "start_token",
        "start_byte", "end_byte", "text", "entity_count"}},
      {"documents", {"id", "title", "source_path", "content_hash", "characters", "chunk_count"}},
      {"entity_mentions",
       {"extraction_id", "chunk_id", "extractor", "extractor_model", "position", "name", "name_key",
        "type", "description"}},
      {"relationship_mentions",
       {"extraction_id", "chunk_id", "extractor", "extractor_model", "position", "source", "target",
        "source_key", "target_key", "description", "strength"}},
  };
  for (const auto& [view, columns] : views) {
    SqlRows rows = Run("SELECT * FROM " + view);
    EXPECT_FALSE(rows.rows.empty()) << view;
    const std::set<std::string> got(rows.columns.begin(), rows.columns.end());
    for (const auto& c : columns) EXPECT_TRUE(got.count(c)) << view << "." << c;
  }
  // Counts agree with the store's.
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(Run("SELECT count(*) FROM entities").rows[0][0].integer, stats->entities);
  EXPECT_EQ(Run("SELECT count(*) FROM relationships").rows[0][0].integer, stats->relationships);
  EXPECT_EQ(Run("SELECT count(*) FROM communities").rows[0][0].integer, stats->communities);
  EXPECT_EQ(Run("SELECT count(*) FROM chunks").rows[0][0].integer, stats->chunks);
  EXPECT_EQ(Run("SELECT count(*) FROM reports WHERE status = 'ok'").rows[0][0].integer,
            stats->reports_ok);
  EXPECT_EQ(Run("SELECT count(*) FROM entity_mentions").rows[0][0].integer, stats->entity_mentions);
  EXPECT_EQ(Run("SELECT count(*) FROM relationship_mentions").rows[0][0].integer,
            stats->relationship_mentions);
  // What the store keeps compressed reads as its JSON: the findings and each extraction's first
  // mention, as the Store API gives them.
  SqlRows compressed =
      Run("SELECT count(*) FROM main.reports WHERE typeof(findings) = 'blob' UNION ALL "
          "SELECT count(*) FROM main.extractions WHERE typeof(mentions) = 'blob'");
  EXPECT_GT(compressed.rows[0][0].integer, 0);
  EXPECT_GT(compressed.rows[1][0].integer, 0);
  auto reports = store_->ListReports();
  ASSERT_TRUE(reports.ok());
  const ReportRecord& first = reports->front();
  SqlRows findings =
      Run("SELECT finding_count, json_extract(findings, '$[0].summary') FROM reports WHERE "
          "community_id = " +
          std::to_string(first.community_id));
  ASSERT_EQ(findings.rows.size(), 1u);
  EXPECT_EQ(findings.rows[0][0].integer, static_cast<int64_t>(first.findings.size()));
  if (!first.findings.empty()) {
    EXPECT_EQ(findings.rows[0][1].text, first.findings[0].summary);
  }
  const ExtractorId nlp{ExtractorKind::kNlp, Run("SELECT extractor_model FROM entity_mentions "
                                                 "LIMIT 1")
                                                 .rows[0][0]
                                                 .text};
  auto mentions = store_->ListEntityMentions(nlp);
  ASSERT_TRUE(mentions.ok() && !mentions->empty());
  SqlRows mention = Run("SELECT name, description FROM entity_mentions WHERE chunk_id = '" +
                        mentions->front().chunk_id + "' AND position = 0");
  ASSERT_EQ(mention.rows.size(), 1u);
  EXPECT_EQ(mention.rows[0][0].text, mentions->front().mention.name);
  EXPECT_EQ(mention.rows[0][1].text, mentions->front().mention.description);
  // Names, not only ids.
  SqlRows r = Run("SELECT source, target FROM relationships ORDER BY weight DESC LIMIT 1");
  EXPECT_EQ(r.rows[0][0].kind, SqlValue::Kind::kText);
  EXPECT_FALSE(r.rows[0][0].text.empty());
}

TEST_F(StoreSqlTest, TheIssuesExampleAgreesWithTheGraph) {
  // Every entity connected to more than three entities of type X (docs/schema.md).
  const std::string type =
      Run("SELECT type FROM entities GROUP BY type ORDER BY count(*) DESC").rows.at(0)[0].text;
  SqlRows rows =
      Run("SELECT e.name, count(DISTINCT o.id) AS n FROM entities e "
          "JOIN relationships r ON e.id IN (r.source_id, r.target_id) "
          "JOIN entities o ON o.id = CASE WHEN r.source_id = e.id THEN r.target_id ELSE "
          "r.source_id END "
          "WHERE o.type = '" +
          type + "' GROUP BY e.id HAVING n > 3 ORDER BY e.name");
  // The same through the Store API.
  auto entities = store_->ListEntities();
  auto relationships = store_->ListRelationships();
  ASSERT_TRUE(entities.ok() && relationships.ok());
  std::map<int64_t, const EntityRecord*> by_id;
  for (const auto& e : *entities) by_id[e.id] = &e;
  std::map<int64_t, std::set<int64_t>> of_type;
  for (const auto& r : *relationships) {
    if (by_id[r.target_id]->type == type) of_type[r.source_id].insert(r.target_id);
    if (by_id[r.source_id]->type == type) of_type[r.target_id].insert(r.source_id);
  }
  std::map<std::string, int64_t> expected;
  for (const auto& [id, set] : of_type) {
    if (set.size() > 3) expected[by_id[id]->name] = static_cast<int64_t>(set.size());
  }
  std::map<std::string, int64_t> got;
  for (const auto& row : rows.rows) got[row[0].text] = row[1].integer;
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(got, expected);
}

TEST_F(StoreSqlTest, WritesOfEveryKindAreRefusedAndTheFileDoesNotChange) {
  const std::string before = Fingerprint();
  for (const char* sql : {
           "INSERT INTO main.meta (key, value) VALUES ('x', 'y')",
           "INSERT INTO entities (name) VALUES ('x')",
           "UPDATE main.entities SET name = 'x'",
           "SELECT * FROM pragma_query_only",
           "DELETE FROM main.entities",
           "DROP TABLE main.entities",
           "DROP VIEW entities",
           "CREATE TABLE t (x)",
           "CREATE TEMP TABLE t (x)",
           "ALTER TABLE main.entities ADD COLUMN x",
           "ATTACH DATABASE ':memory:' AS other",
           "DETACH DATABASE temp",
           "PRAGMA query_only = OFF",
           "PRAGMA user_version = 99",
           "PRAGMA journal_mode = DELETE",
           "PRAGMA writable_schema = ON",
           "BEGIN",
           "VACUUM",
           "REINDEX",
           "ANALYZE",
           "SELECT 1; SELECT 2",
           "SELECT 1; DELETE FROM main.entities",
           "WITH x AS (SELECT 1) DELETE FROM main.entities",
       }) {
    auto r = store_->RunReadOnlySql(sql, 10, std::chrono::seconds(60));
    ASSERT_FALSE(r.ok()) << sql;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << sql;
    EXPECT_NE(r.status().message().find("refused"), std::string::npos)
        << sql << ": " << r.status().message();
  }
  // Errors in the SQL itself are the caller's too, and say what SQLite said.
  for (const char* sql : {"SELECT * FROM nosuch", "SELEKT 1", "", "  -- nothing",
                          "UPDATE main.sqlite_master SET sql = ''"}) {
    auto r = store_->RunReadOnlySql(sql, 10, std::chrono::seconds(60));
    ASSERT_FALSE(r.ok()) << sql;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << sql;
  }
  EXPECT_EQ(Fingerprint(), before);
  // The schema is as it was: no view was written into the file, and the store's own
  // connection still reads the tables, not the views.
  EXPECT_EQ(Run("SELECT count(*) FROM main.sqlite_master WHERE type = 'view'").rows[0][0].integer,
            0);
  auto info = store_->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->schema_version, Store::LatestSchemaVersion());
  auto entities = store_->ListEntities(1);
  ASSERT_TRUE(entities.ok()) << entities.status().ToString();
  EXPECT_FALSE(entities->at(0).name_key.empty());
}

TEST_F(StoreSqlTest, ReadsTrailingSemicolonsCtesAndIntrospection) {
  EXPECT_EQ(Run("SELECT 1;  -- done\n").rows.size(), 1u);
  EXPECT_EQ(Run("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5) "
                "SELECT i FROM n")
                .rows.size(),
            5u);
  EXPECT_GT(Run("PRAGMA table_info(entities)").rows.size(), 5u);
  EXPECT_GT(Run("SELECT name FROM pragma_table_info('relationships')").rows.size(), 5u);
  EXPECT_EQ(Run("SELECT value FROM json_each('[1, 2, 3]')").rows.size(), 3u);
  EXPECT_GT(
      Run("SELECT f.value ->> 'summary' FROM reports r, json_each(r.findings) AS f").rows.size(),
      0u);
  EXPECT_GT(Run("SELECT count(*) FROM main.entity_chunks").rows[0][0].integer, 0);
  // Issue 42: a full-text MATCH was refused as "PRAGMA data_version", which FTS5 runs itself.
  EXPECT_GT(
      Run("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH 'Marley'").rows[0][0].integer, 0);
}

TEST_F(StoreSqlTest, ValuesKeepTheirKindsAndRowsAreCut) {
  SqlRows r = Run("SELECT NULL, 42, 2.5, 'text', x'0102'");
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0][0].kind, SqlValue::Kind::kNull);
  EXPECT_EQ(r.rows[0][1].integer, 42);
  EXPECT_EQ(r.rows[0][2].real, 2.5);
  EXPECT_EQ(r.rows[0][3].text, "text");
  EXPECT_EQ(r.rows[0][4].text, "<blob: 2 bytes>");

  SqlRows cut = Run("SELECT name FROM entities", 3);
  EXPECT_EQ(cut.rows.size(), 3u);
  EXPECT_TRUE(cut.truncated);
  const int64_t n = Run("SELECT count(*) FROM entities").rows[0][0].integer;
  SqlRows exact = Run("SELECT name FROM entities", n);
  EXPECT_EQ(static_cast<int64_t>(exact.rows.size()), n);
  EXPECT_FALSE(exact.truncated);

  // The text forms.
  SqlRows t = Run("SELECT 'a,b' AS x, NULL AS y, 7 AS z UNION ALL SELECT 'long\nline', 1.5, 10");
  EXPECT_EQ(FormatSqlCsv(t), "x,y,z\n\"a,b\",,7\n\"long\nline\",1.5,10\n");
  EXPECT_EQ(FormatSqlTable(t),
            "x             y   z\n"
            "---------  ----  --\n"
            "a,b        NULL   7\n"
            "long line   1.5  10\n"
            "(2 rows)\n");
  const auto json = nlohmann::json::parse(SqlRowsJson(t, false));
  EXPECT_EQ(json[0]["x"], "a,b");
  EXPECT_TRUE(json[0]["y"].is_null());
  EXPECT_EQ(json[1]["z"], 10);
  EXPECT_EQ(SqlRowsJson(t, false).substr(0, 8), "[{\"x\":\"a");  // the query's column order
  EXPECT_NE(FormatSqlTable(cut).find("more were left out"), std::string::npos);
}

// A runaway statement (a recursive CTE with no end, which returns no row until it ends) is
// stopped at its time limit, not left to run forever; the file is untouched.
TEST_F(StoreSqlTest, ARunawayQueryIsStoppedAtItsTimeLimit) {
  const auto before = Fingerprint();
  auto r = store_->RunReadOnlySql(
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", 10,
      std::chrono::milliseconds(200));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout) << r.status().ToString();
  EXPECT_NE(r.status().message().find("--timeout"), std::string::npos) << r.status().message();
  EXPECT_EQ(Fingerprint(), before);
}

}  // namespace
}  // namespace grag
