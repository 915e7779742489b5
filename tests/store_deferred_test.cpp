// Store::WriteDeferred on SQLite: writes (the LLM reply cache's rows, chunks' extractions) that
// skip a commit of their own. They must be seen by the store's own reads at once, be committed
// within the window without anyone flushing, by FlushDeferred, or when the store closes, and a
// process killed at any moment must leave each of them stored whole or not at all.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <map>
#include <string>
#include <thread>

#include "grag/store.h"
#include "store/reply_codec.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::TempDir;

// Rows of llm_cache as another connection sees them (committed ones only): key -> value.
std::map<std::string, std::string> CommittedRows(const std::string& path) {
  std::map<std::string, std::string> out;
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT key, value FROM llm_cache", -1, &stmt, nullptr),
            SQLITE_OK);
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    std::string value(reinterpret_cast<const char*>(sqlite3_column_blob(stmt, 1)),
                      static_cast<size_t>(sqlite3_column_bytes(stmt, 1)));
    // Long replies are stored compressed (a BLOB).
    if (sqlite3_column_type(stmt, 1) == SQLITE_BLOB) value = *store::DecompressReply(value);
    out[reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0))] = value;
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return out;
}

// A value spanning several overflow pages, different for every key.
std::string ValueOf(int i) {
  std::string v = "reply " + std::to_string(i) + ":";
  while (v.size() < 20000) v += std::to_string(i * 7919 + static_cast<int>(v.size()));
  return v;
}

TEST(StoreDeferredTest, ReadsSeeADeferredReplyAtOnceAndTheWindowCommitsIt) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  // One after the other, each once the last is committed (the flusher then sleeps with an empty
  // queue, and a write must wake it).
  for (int i = 0; i < 3; ++i) {
    const std::string key = "k" + std::to_string(i);
    ASSERT_TRUE((*store)->ReplyCache().Put(key, "v", "m", "chat").ok());
    EXPECT_EQ((*store)->ReplyCache().Get(key).value_or(""), "v");
    // Nobody flushes: the flusher commits it within the window (a slow machine gets 20 times
    // that).
    const auto deadline = std::chrono::steady_clock::now() + 20 * Store::kDeferredWindow;
    while (CommittedRows(path).count(key) == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(CommittedRows(path)[key], "v");
    EXPECT_EQ((*store)->ReplyCache().Get(key).value_or(""), "v");
  }
}

TEST(StoreDeferredTest, FlushAndCloseCommitEverythingDeferredBefore) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(
          (*store)->ReplyCache().Put("a" + std::to_string(i), ValueOf(i), "m", "chat").ok());
    }
    ASSERT_TRUE((*store)->FlushDeferred().ok());
    EXPECT_EQ(CommittedRows(path).size(), 10u);
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(
          (*store)->ReplyCache().Put("b" + std::to_string(i), ValueOf(i), "m", "chat").ok());
    }
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(
          (*store)->ReplyCache().Put("c" + std::to_string(i), ValueOf(i), "m", "chat").ok());
    }
  }  // closed: the last ten are committed too
  const auto rows = CommittedRows(path);
  EXPECT_EQ(rows.size(), 30u);
  EXPECT_EQ(rows.at("c9"), ValueOf(9));
}

TEST(StoreDeferredTest, AFailingDeferredWriteIsReportedAndRolledBackAlone) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Store& s = **store;
  bool committed = false;
  ASSERT_TRUE(s.ReplyCache().Put("before", "1", "m", "chat").ok());
  ASSERT_TRUE(s.WriteDeferred(
                   [&s]() -> Status {
                     // Half a write, then a failure: the half must not be stored.
                     GRAG_RETURN_IF_ERROR(s.SetMeta("half", "written"));
                     return Status::Internal("the write failed");
                   },
                   [&committed] { committed = true; })
                  .ok());
  ASSERT_TRUE(s.ReplyCache().Put("after", "2", "m", "chat").ok());
  const Status flushed = s.FlushDeferred();
  EXPECT_EQ(flushed.code(), ErrorCode::kInternal) << flushed.ToString();
  EXPECT_FALSE(committed);
  EXPECT_TRUE(s.FlushDeferred().ok());  // reported once
  auto half = s.GetMeta("half");
  ASSERT_TRUE(half.ok());
  EXPECT_FALSE(half->has_value());
  const auto rows = CommittedRows(path);
  EXPECT_EQ(rows.count("before"), 1u);
  EXPECT_EQ(rows.count("after"), 1u);
}

// A flush from inside a transaction of the same thread neither waits for the flusher (whose
// commit would wait for that transaction) nor loses anything.
TEST(StoreDeferredTest, AFlushInsideATransactionDoesNotWaitForTheFlusher) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Store& s = **store;
  auto done = std::async(std::launch::async, [&s] {
    for (int round = 0; round < 20; ++round) {
      const std::string r = std::to_string(round);
      if (!s.ReplyCache().Put("before" + r, "1", "m", "chat").ok()) return false;
      // Let the flusher's window pass now and then, so that it is committing when we flush.
      std::this_thread::sleep_for(std::chrono::milliseconds(round % 3 == 0 ? 110 : 0));
      auto tx = s.Begin();
      if (!tx.ok()) return false;
      if (!s.ReplyCache().Put("inside" + r, "2", "m", "chat").ok()) return false;
      if (!s.FlushDeferred().ok()) return false;
      if (!tx->Commit().ok()) return false;
    }
    return s.FlushDeferred().ok();
  });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "deadlocked";
  ASSERT_TRUE(done.get());
  const auto rows = CommittedRows(path);
  EXPECT_EQ(rows.size(), 40u);
}

// A writer killed (SIGKILL) at a random moment while it defers large replies: each reply found
// afterwards is whole, and they are a prefix of what was written (committed in order).
TEST(StoreDeferredTest, AKilledWriterLeavesEachReplyWholeOrAbsent) {
  for (int round = 0; round < 6; ++round) {
    TempDir dir;
    const std::string path = dir.File("index.db");
    { ASSERT_TRUE(Store::Open(path).ok()); }
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto store = Store::Open(path);
      if (!store.ok()) _exit(1);
      for (int i = 0;; ++i) {
        if (!(*store)->ReplyCache().Put("k" + std::to_string(i), ValueOf(i), "m", "chat").ok()) {
          _exit(1);
        }
        if (i == 20) (void)!write(ready[1], "x", 1);
        if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    char byte = 0;
    ASSERT_EQ(read(ready[0], &byte, 1), 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + 40 * round));
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    close(ready[0]);
    close(ready[1]);
    auto store = Store::Open(path);  // recovers the WAL
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    const auto rows = CommittedRows(path);
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string key = "k" + std::to_string(i);
      ASSERT_EQ(rows.count(key), 1u)
          << "round " << round << ": " << key << " missing, " << rows.size() << " rows";
      EXPECT_EQ(rows.at(key), ValueOf(static_cast<int>(i))) << key;
    }
  }
}

}  // namespace
}  // namespace grag
