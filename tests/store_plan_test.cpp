// How SQLite plans the store's mention scan: the merge reads every mention of an index through
// it, so a plan that sorts the rows holds them all in memory (SQLite's sorter), which the scans
// are there to avoid. Checked without statistics, as on a first index, where the planner is left
// to its defaults.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "grag/store.h"
#include "store/sqlite/mention_sql.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

// The plan's lines (EXPLAIN QUERY PLAN's detail column).
std::vector<std::string> Plan(sqlite3* db, std::string_view sql) {
  const std::string explain = "EXPLAIN QUERY PLAN " + std::string(sql);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, explain.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  std::vector<std::string> lines;
  while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
    lines.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3)));
  }
  sqlite3_finalize(stmt);
  return lines;
}

TEST(StorePlanTest, MentionScansComeInOrderWithoutASort) {
  testing::TempDir dir;
  const std::string path = dir / "index.db";
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Document doc;
    doc.id = "d";
    doc.text = "one\ntwo\n";
    doc.content_hash = "h";
    ASSERT_TRUE((*store)->UpsertDocument(doc).ok());
    std::vector<ChunkRecord> chunks(2);
    for (int i = 0; i < 2; ++i) {
      chunks[i].id = "d#" + std::to_string(i);
      chunks[i].document_id = "d";
      chunks[i].index = i;
      chunks[i].text = i == 0 ? "one" : "two";
      chunks[i].n_tokens = 1;
    }
    ASSERT_TRUE((*store)->ReplaceDocumentChunks("d", chunks).ok());
    for (const auto& c : chunks) {
      ExtractionRecord r;
      r.chunk_id = c.id;
      r.extractor = {ExtractorKind::kNlp, "regex-en/1"};
      r.entities = {{"A", "a", "PERSON", "x"}, {"B", "b", "PERSON", "y"}};
      r.relationships = {{"A", "B", "a", "b", "x", 1}};
      ASSERT_TRUE((*store)->PutExtraction(r).ok());
    }
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  // No statistics, as on a first index (closing the store may have left some).
  sqlite3_exec(db, "DROP TABLE IF EXISTS sqlite_stat1", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  for (std::string_view sql : {sqlite::kScanMentionsSql}) {
    const std::vector<std::string> plan = Plan(db, sql);
    ASSERT_FALSE(plan.empty()) << sql;
    std::string all;
    for (const auto& line : plan) all += line + "\n";
    EXPECT_EQ(all.find("TEMP B-TREE"), std::string::npos) << sql << "\n" << all;
    EXPECT_NE(all.find("SCAN c"), std::string::npos) << all;  // the chunks lead, in order
  }
  sqlite3_close(db);
}

}  // namespace
}  // namespace grag
