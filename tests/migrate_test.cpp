// Copying an index between stores (grag migrate, grag/store_copy.h): every table comes across
// with its ids, verified by counts and checksums, and the copy answers as the source does.
// SQLite to SQLite always; SQLite to PostgreSQL and back with a server (the *Postgres* cases,
// a separate ctest entry reported as skipped without one).
#include "grag/store_copy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "grag/engine.h"
#include "engine/engine_internal.h"
#include "support/postgres.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::TempDir;

// The first stave of the book, indexed without an LLM, plus a reply in the cache, a person's
// override and a state key: what an index holds beyond the graph.
class MigrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string book =
        testing::ReadFile(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
    dir_.Write("proj/input/stave1.txt", book.substr(0, 40000));
    config_.root = dir_ / "proj";
    source_ = config_.IndexLocation();
    {
      EngineOptions o;
      o.writable = true;
      auto engine = Engine::Open(config_, o);
      ASSERT_TRUE(engine.ok()) << engine.status().ToString();
      auto summary = (*engine)->Index({});
      ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    }
    auto store = Store::Open(source_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->ReplyCache().Put("cache-key", "a cached reply", "model-x", "chat").ok());
    ASSERT_TRUE((*store)->PutEntityOverride("bob cratchit", "scrooge", false).ok());
    ASSERT_TRUE((*store)->SetMeta("pending_changes", "{\"x\": 1}").ok());
    auto run = (*store)->BeginRun("test");
    ASSERT_TRUE(run.ok());
    StageProgress stage;
    stage.stage = "extract";
    stage.done = 3;
    stage.total = 4;
    ASSERT_TRUE((*store)->SetStageProgress(*run, stage).ok());
    ASSERT_TRUE((*store)->FinishRun(*run, RunStatus::kOk).ok());
  }

  // What a reader of the index at `location` answers, to compare two indexes by.
  struct Answers {
    std::string global;
    std::string local;
    std::vector<std::string> hits;
    StoreStats stats;
  };
  Answers Ask(const std::string& location) {
    Config c = config_;
    if (location.starts_with("postgresql://")) {
      c.store.url = location;
    } else {
      c.store.path = location;
    }
    Answers a;
    auto engine = Engine::Open(c);
    EXPECT_TRUE(engine.ok()) << engine.status().ToString();
    if (!engine.ok()) return a;
    QueryRequest q;
    q.question = "What are the main themes of this story?";
    q.method = QueryMethod::kGlobal;
    auto global = (*engine)->Query(q);
    EXPECT_TRUE(global.ok()) << global.status().ToString();
    if (global.ok()) a.global = global->answer;
    q.question = "Who is Jacob Marley?";
    q.method = QueryMethod::kLocal;
    auto local = (*engine)->Query(q);
    EXPECT_TRUE(local.ok()) << local.status().ToString();
    if (local.ok()) a.local = local->answer;
    SearchRequest s;
    s.question = "Who is Jacob Marley?";
    auto hits = (*engine)->Search(s);
    EXPECT_TRUE(hits.ok()) << hits.status().ToString();
    if (hits.ok()) {
      for (const auto& h : hits->chunks) a.hits.push_back(h.chunk_id);
    }
    auto stats = EngineInternals::store(**engine).Stats();
    EXPECT_TRUE(stats.ok());
    if (stats.ok()) a.stats = *stats;
    return a;
  }

  static std::map<std::string, TableCopy> ByTable(const CopyReport& r) {
    std::map<std::string, TableCopy> out;
    for (const auto& t : r.tables) out[t.table] = t;
    return out;
  }

  static void ExpectAllMatch(const CopyReport& r) {
    ASSERT_EQ(r.tables.size(), IndexTables().size());
    for (const auto& t : r.tables) {
      EXPECT_TRUE(t.matches()) << t.table;
      EXPECT_EQ(t.source_checksum.size(), 64u) << t.table;
    }
    // The index's substance is there (a copy of nothing would match too).
    auto by = ByTable(r);
    for (const char* table :
         {"documents", "chunks", "extractions", "entity_mentions", "entities", "relationships",
          "entity_chunks", "communities", "reports", "embeddings", "llm_cache", "runs",
          "run_stages", "entity_aliases", "entity_overrides", "meta"}) {
      EXPECT_GT(by[table].source_rows, 0) << table;
    }
  }

  TempDir dir_;
  Config config_;
  std::string source_;
};

TEST_F(MigrateTest, SqliteToSqliteCopiesEveryTableAndAnswersAlike) {
  const std::string target = dir_ / "copy/index.db";
  auto report = MigrateIndex(source_, target);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ExpectAllMatch(*report);
  EXPECT_EQ(report->source, source_);
  EXPECT_EQ(report->target, target);

  const Answers before = Ask(source_);
  const Answers after = Ask(target);
  EXPECT_FALSE(before.global.empty());
  EXPECT_EQ(before.global, after.global);
  EXPECT_EQ(before.local, after.local);
  EXPECT_EQ(before.hits, after.hits);
  EXPECT_EQ(before.stats.entities, after.stats.entities);
  EXPECT_EQ(before.stats.communities, after.stats.communities);

  auto copy = Store::Open(target);
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ((*copy)->ReplyCache().Get("cache-key").value_or(""), "a cached reply");
  EXPECT_EQ((*copy)->GetMeta("pending_changes")->value_or(""), "{\"x\": 1}");
  EXPECT_TRUE((*copy)->Check().ok() && (*copy)->Check()->ok());
  copy->reset();

  // An index run on the copy with the same input finds nothing to redo.
  Config c = config_;
  c.store.path = target;
  EngineOptions o;
  o.writable = true;
  auto engine = Engine::Open(c, o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto again = (*engine)->Index({});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->documents_unchanged, 1);
  EXPECT_EQ(again->chunks_extracted, 0);
}

TEST_F(MigrateTest, RefusesATargetThatHoldsAnIndex) {
  const std::string target = dir_ / "copy.db";
  ASSERT_TRUE(MigrateIndex(source_, target).ok());
  auto again = MigrateIndex(source_, target);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), ErrorCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find(target), std::string::npos) << again.status().message();
  EXPECT_NE(again.status().message().find("already holds an index"), std::string::npos);
  // The refused target is untouched (and still there).
  auto copy = Store::Open(target);
  ASSERT_TRUE(copy.ok());
  EXPECT_GT(*(*copy)->CountChunks(), 0);

  auto same = MigrateIndex(source_, source_);
  EXPECT_EQ(same.status().code(), ErrorCode::kInvalidArgument);
  auto missing = MigrateIndex(dir_ / "nothing.db", dir_ / "other.db");
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "other.db"));
}

TEST_F(MigrateTest, AFailureMidCopyLeavesTheTargetEmpty) {
  const std::string target = dir_ / "empty.db";
  ASSERT_TRUE(Store::Open(target).ok());  // an existing, empty index
  CopyOptions fail;
  std::vector<std::string> seen;
  fail.on_progress = [&](std::string_view table, int64_t, int64_t) {
    seen.emplace_back(table);
    return table == "communities" ? Status::IoError("disk unplugged") : Status::Ok();
  };
  auto failed = MigrateIndex(source_, target, fail);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("disk unplugged"), std::string::npos);
  EXPECT_GT(seen.size(), 5u);  // it failed part way, after chunks and entities were written
  {
    auto store = Store::Open(target);
    ASSERT_TRUE(store.ok());
    EXPECT_EQ(*(*store)->CountChunks(), 0);
    EXPECT_EQ(*(*store)->CountEntities(), 0);
    EXPECT_TRUE((*store)->ListDocuments()->empty());
  }
  // Empty indeed: a copy into it now succeeds.
  auto ok = MigrateIndex(source_, target);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ExpectAllMatch(*ok);

  // A target file the failed copy created is removed again.
  const std::string fresh = dir_ / "fresh.db";
  EXPECT_FALSE(MigrateIndex(source_, fresh, fail).ok());
  EXPECT_FALSE(std::filesystem::exists(fresh));
}

// ---------------------------------------------------------------- PostgreSQL

class MigratePostgresTest : public MigrateTest {
 protected:
  void SetUp() override {
    const std::string why = db_.CreateForTest();
    if (!why.empty()) GTEST_SKIP() << why;
    MigrateTest::SetUp();
  }
  testing::TestDatabase db_;
};

TEST_F(MigratePostgresTest, SqliteToPostgresAndBackIsExact) {
  auto to_pg = MigrateIndex(source_, db_.url());
  ASSERT_TRUE(to_pg.ok()) << to_pg.status().ToString();
  ExpectAllMatch(*to_pg);
  const std::string back = dir_ / "back.db";
  auto to_sqlite = MigrateIndex(db_.url(), back);
  ASSERT_TRUE(to_sqlite.ok()) << to_sqlite.status().ToString();
  ExpectAllMatch(*to_sqlite);
  // The same rows, bit for bit, on the way out and back.
  for (size_t i = 0; i < to_pg->tables.size(); ++i) {
    EXPECT_EQ(to_pg->tables[i].source_checksum, to_sqlite->tables[i].target_checksum)
        << to_pg->tables[i].table;
  }

  const Answers source = Ask(source_);
  const Answers pg = Ask(db_.url());
  const Answers round_trip = Ask(back);
  EXPECT_EQ(source.global, round_trip.global);
  EXPECT_EQ(source.local, round_trip.local);
  EXPECT_EQ(source.hits, round_trip.hits);
  // PostgreSQL answers as it would have indexed the book itself (e2e_postgres_test): the same.
  EXPECT_FALSE(pg.local.empty());
  EXPECT_EQ(source.local, pg.local);
  EXPECT_EQ(source.stats.entities, pg.stats.entities);
  EXPECT_EQ(source.stats.chunks, pg.stats.chunks);

  // Ids the PostgreSQL store assigns next come after the copied ones: indexing one more
  // document there (new chunks, mentions, run stages) works.
  Config c = config_;
  c.store.url = db_.url();
  dir_.Write("proj/input/stave2.txt", testing::ReadFile(std::string(GRAG_TEST_DATA_DIR) +
                                                        "/christmas_carol/christmas_carol.txt")
                                          .substr(40000, 20000));
  EngineOptions o;
  o.writable = true;
  o.log_file = false;
  auto engine = Engine::Open(c, o);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  auto more = (*engine)->Index({});
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  EXPECT_EQ(more->documents_added, 1);
  EXPECT_EQ(more->documents_unchanged, 1);
}

TEST_F(MigratePostgresTest, RefusesANonEmptyDatabaseAndAFailedCopyWritesNothing) {
  CopyOptions fail;
  fail.on_progress = [&](std::string_view table, int64_t, int64_t) {
    return table == "reports" ? Status::IoError("stopped on purpose") : Status::Ok();
  };
  auto failed = MigrateIndex(source_, db_.url(), fail);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("stopped on purpose"), std::string::npos);
  {
    StoreOptions ro;
    ro.read_only = true;
    auto store = Store::Open(db_.url(), ro);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ(*(*store)->CountChunks(), 0);
    EXPECT_TRUE((*store)->ListDocuments()->empty());
  }
  ASSERT_TRUE(MigrateIndex(source_, db_.url()).ok());
  auto again = MigrateIndex(source_, db_.url());
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), ErrorCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find("already holds an index"), std::string::npos);
}

}  // namespace
}  // namespace grag
