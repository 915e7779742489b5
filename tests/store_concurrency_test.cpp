// The store under threads, under a second writer, and under crashes: the reply cache from many
// threads, isolation of an open transaction, BEGIN IMMEDIATE against another connection, and a
// process killed mid-transaction leaving a consistent index.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "grag/store.h"
#include "store/sqlite/store_impl.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

Document Doc(const std::string& id, const std::string& text) {
  return Document{id, id, id, text, "hash:" + text};
}

std::unique_ptr<Store> OpenOrDie(const std::string& path, StoreOptions options = {}) {
  auto store = Store::Open(path, options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

TEST(StoreConcurrencyTest, ReplyCacheFromManyThreads) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("index.db"));
  ASSERT_NE(store, nullptr);
  KeyValueCache& cache = store->ReplyCache();
  constexpr int kThreads = 8;
  constexpr int kKeys = 150;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&cache, &failures, t] {
      for (int i = 0; i < kKeys; ++i) {
        const std::string key = "t" + std::to_string(t) + "-" + std::to_string(i);
        if (!cache.Put(key, "value of " + key, "model-" + std::to_string(t % 2), "chat").ok()) {
          ++failures;
        }
        if (cache.Get(key) != "value of " + key) ++failures;
        // Read a neighbour's keys while it writes them: present or absent, never garbage.
        const std::string other =
            "t" + std::to_string((t + 1) % kThreads) + "-" + std::to_string(i);
        auto v = cache.Get(other);
        if (v.has_value() && *v != "value of " + other) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  // The rows are deferred (Store::WriteDeferred): committed within the window, or now.
  ASSERT_TRUE(store->FlushDeferred().ok());
  auto stats = store->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->cache_entries, kThreads * kKeys);
  EXPECT_EQ(cache.Get("t3-17"), "value of t3-17");
  EXPECT_FALSE(cache.Get("absent").has_value());
  // Put replaces.
  ASSERT_TRUE(cache.Put("t3-17", "newer", "model-1", "chat").ok());
  EXPECT_EQ(cache.Get("t3-17"), "newer");
}

// Opening a reader parses the whole schema; a read that finds the only reader lent out for a
// moment takes it back rather than opening a second connection.
TEST(StoreConcurrencyTest, AReadWaitsBrieflyForALentReaderRatherThanOpeningAnother) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  ASSERT_NE(OpenOrDie(path), nullptr);  // a WAL index
  auto conn = sqlite::Connection::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  SqliteStore::Impl impl(path, std::move(conn).value());
  impl.pool_enabled = true;
  // Long enough that the first read surely ends within it, however loaded the machine (the
  // default is a millisecond): the second read then takes the first's connection.
  impl.reader_wait = std::chrono::seconds(60);
  std::optional<Result<ReadHandle>> first(impl.Read());
  ASSERT_TRUE(first->ok()) << first->status().ToString();
  std::atomic<bool> asking{false};
  Status second_status;
  std::thread second([&] {
    asking = true;
    Result<ReadHandle> read = impl.Read();
    second_status = read.status();
  });
  while (!asking) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::microseconds(200));
  first.reset();  // the first read ends
  second.join();
  EXPECT_TRUE(second_status.ok()) << second_status.ToString();
  std::lock_guard lock(impl.pool_mu);
  EXPECT_EQ(impl.readers_open, 1);
  EXPECT_EQ(impl.readers_out, 0);
}

TEST(StoreConcurrencyTest, WritersOnManyThreadsAreSerialised) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("index.db"));
  ASSERT_NE(store, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, &failures, t] {
      for (int i = 0; i < 25; ++i) {
        const std::string id = std::to_string(t) + "/" + std::to_string(i);
        // One unit of work: a document and its chunk, in one transaction.
        auto tx = store->Begin();
        if (!tx.ok() || !store->UpsertDocument(Doc(id, "text " + id)).ok() ||
            !store->ReplaceDocumentChunks(id, {{id + "#0", id, 0, "text " + id, 2, 0}}).ok() ||
            !tx->Commit().ok()) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->ListDocuments()->size(), 100u);
  EXPECT_EQ(*store->CountChunks(), 100);
  EXPECT_TRUE(store->CheckIntegrity().ok());
}

TEST(StoreConcurrencyTest, GroupedWritesAllLandAndAFailingOneIsRolledBackAlone) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("index.db"));
  ASSERT_NE(store, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  std::atomic<int> refused{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&store, &failures, &refused, t] {
      for (int i = 0; i < 25; ++i) {
        const std::string id = std::to_string(t) + "/" + std::to_string(i);
        // Every fifth write fails after writing: none of it may stay, and the writes it was
        // committed with must.
        const bool fail = i % 5 == 4;
        const Status st = store->WriteGrouped([&]() -> Status {
          if (!store->UpsertDocument(Doc(id, "text " + id)).ok()) return Status::Internal("doc");
          if (!store->ReplaceDocumentChunks(id, {{id + "#0", id, 0, "text " + id, 2, 0}}).ok()) {
            return Status::Internal("chunks");
          }
          return fail ? Status::InvalidArgument("refused") : Status::Ok();
        });
        if (fail) {
          if (st.code() == ErrorCode::kInvalidArgument) ++refused;
        } else if (!st.ok()) {
          ++failures;
        } else if (!store->GetDocument(id)->has_value()) {
          ++failures;  // committed before WriteGrouped returned
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(refused.load(), 8 * 5);
  EXPECT_EQ(store->ListDocuments()->size(), 8u * 20u);
  EXPECT_EQ(*store->CountChunks(), 8 * 20);
  EXPECT_FALSE(store->GetDocument("0/4")->has_value());
  EXPECT_TRUE(store->CheckIntegrity().ok());

  // Inside this thread's own transaction a grouped write is part of it.
  {
    auto tx = store->Begin();
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE(
        store->WriteGrouped([&] { return store->UpsertDocument(Doc("in-tx", "x")).status(); })
            .ok());
    ASSERT_TRUE(tx->Rollback().ok());
  }
  EXPECT_FALSE(store->GetDocument("in-tx")->has_value());
}

TEST(StoreConcurrencyTest, OtherThreadsReadBesideAnOpenTransactionWithoutSeeingIt) {
  TempDir dir;
  auto store = OpenOrDie(dir.File("index.db"));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->UpsertDocument(Doc("a", "committed text")).ok());
  ASSERT_TRUE(store->ReplyCache().Put("k", "cached", "m", "chat").ok());
  ASSERT_TRUE(store->FlushDeferred().ok());
  auto tx = store->Begin();
  ASSERT_TRUE(tx.ok()) << tx.status().ToString();
  ASSERT_TRUE(store->UpsertDocument(Doc("a", "uncommitted text")).ok());
  ASSERT_TRUE(store->UpsertDocument(Doc("b", "uncommitted")).ok());
  // The thread holding the transaction reads its own writes.
  EXPECT_EQ((*store->GetDocument("a"))->text, "uncommitted text");
  // Another thread reads meanwhile (as a server's query does while an index runs): it does not
  // wait for the transaction, and sees the index as of the last commit.
  auto reads = std::async(std::launch::async, [&] {
    std::string seen;
    auto a_doc = store->GetDocument("a");
    seen += a_doc.ok() && a_doc->has_value() ? (*a_doc)->text : "?";
    auto b_doc = store->GetDocument("b");
    seen += b_doc.ok() && !b_doc->has_value() ? " | no b" : " | b?";
    auto docs = store->ListDocuments();
    seen += " | " + (docs.ok() ? std::to_string(docs->size()) : docs.status().ToString());
    auto stats = store->Stats();
    seen += " | " + (stats.ok() ? std::to_string(stats->documents) : stats.status().ToString());
    seen += " | " + store->ReplyCache().Get("k").value_or("miss");
    auto snapshot = store->LoadGraphSnapshot();
    seen += snapshot.ok() ? " | graph" : " | " + snapshot.status().ToString();
    return seen;
  });
  const bool finished = reads.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  EXPECT_TRUE(finished) << "reads on another thread waited for the open transaction";
  ASSERT_TRUE(tx->Commit().ok());
  EXPECT_EQ(reads.get(), "committed text | no b | 1 | 1 | cached | graph");
  // After the commit every thread sees it.
  auto after = std::async(std::launch::async, [&] { return store->ListDocuments(); }).get();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), 2u);
}

TEST(StoreConcurrencyTest, SecondWriterWaitsThenFailsClearlyWhenTheIndexStaysLocked) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  auto first = OpenOrDie(path);
  StoreOptions quick;
  quick.busy_timeout_ms = 200;
  auto second = OpenOrDie(path, quick);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  {
    auto tx = first->Begin();
    ASSERT_TRUE(tx.ok());
    ASSERT_TRUE(first->UpsertDocument(Doc("a", "alpha")).ok());
    // Readers are not blocked by a writer in WAL mode; they see the last commit.
    auto doc = second->GetDocument("a");
    ASSERT_TRUE(doc.ok()) << doc.status().ToString();
    EXPECT_FALSE(doc->has_value());
    // A second writer waits out its busy timeout, then gives up with kUnavailable.
    auto start = std::chrono::steady_clock::now();
    auto blocked = second->Begin();
    ASSERT_FALSE(blocked.ok());
    EXPECT_EQ(blocked.status().code(), ErrorCode::kUnavailable);
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
    ASSERT_TRUE(tx->Commit().ok());
  }
  EXPECT_TRUE(second->GetDocument("a")->has_value());
  EXPECT_TRUE(second->UpsertDocument(Doc("b", "beta")).ok());
}

// ---------------------------------------------------------------- crashes

// Runs `child` in a forked process (which must not return) and returns its wait status. The
// parent holds no open store across the fork: SQLite connections must not cross one.
template <typename F>
int RunInChild(F child) {
  pid_t pid = fork();
  if (pid == 0) {
    child();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

TEST(StoreCrashTest, ProcessExitingInsideATransactionLeavesOnlyCommittedWork) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  int status = RunInChild([&] {
    auto store = Store::Open(path);
    if (!store.ok()) _exit(2);
    if (!(*store)->UpsertDocument(Doc("committed", "safe text")).ok()) _exit(3);
    auto tx = (*store)->Begin();
    if (!tx.ok()) _exit(4);
    if (!(*store)->UpsertDocument(Doc("uncommitted", "lost text")).ok()) _exit(5);
    if (!(*store)
             ->ReplaceDocumentChunks("uncommitted", {{"u#0", "uncommitted", 0, "lost text", 2, 0}})
             .ok()) {
      _exit(6);
    }
    _exit(0);  // no commit, no destructors: as abrupt as a crash short of a signal
  });
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);

  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->GetDocument("committed")->has_value());
  EXPECT_FALSE(store->GetDocument("uncommitted")->has_value());
  EXPECT_EQ(*store->CountChunks(), 0);
  EXPECT_TRUE(store->SearchChunks("lost", 5)->empty());
  EXPECT_TRUE(store->CheckIntegrity().ok()) << store->CheckIntegrity().ToString();
}

TEST(StoreCrashTest, SigkillMidTransactionLeavesAConsistentIndex) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  constexpr int kChunksPerDoc = 3;
  constexpr int kKillAt = 7;  // killed while writing document 7

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(pipe_fds[0]);
    auto store = Store::Open(path);
    if (!store.ok()) _exit(2);
    for (int d = 0;; ++d) {
      const std::string id = "doc" + std::to_string(d);
      auto tx = (*store)->Begin();
      if (!tx.ok()) _exit(3);
      if (!(*store)->UpsertDocument(Doc(id, "text of " + id)).ok()) _exit(4);
      std::vector<ChunkRecord> chunks;
      for (int c = 0; c < kChunksPerDoc; ++c) {
        chunks.push_back({id + "#" + std::to_string(c), id, c,
                          "word" + std::to_string(d) + " chunk " + std::to_string(c), 3, c});
      }
      if (!(*store)->ReplaceDocumentChunks(id, chunks).ok()) _exit(5);
      // Tell the parent we are inside the transaction, then wait to be killed.
      char byte = static_cast<char>(d);
      if (write(pipe_fds[1], &byte, 1) != 1) _exit(6);
      if (d == kKillAt) {
        while (true) pause();
      }
      if (!tx->Commit().ok()) _exit(7);
    }
  }
  close(pipe_fds[1]);
  for (int d = 0; d <= kKillAt; ++d) {
    char byte = 0;
    ASSERT_EQ(read(pipe_fds[0], &byte, 1), 1);
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(pipe_fds[0]);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(WTERMSIG(status), SIGKILL);
  // The WAL holds the killed transaction's frames, uncommitted.
  EXPECT_TRUE(fs::exists(path + "-wal"));

  auto store = OpenOrDie(path);
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->CheckIntegrity().ok()) << store->CheckIntegrity().ToString();
  auto docs = store->ListDocuments();
  ASSERT_TRUE(docs.ok());
  ASSERT_EQ(docs->size(), static_cast<size_t>(kKillAt));
  for (const DocumentInfo& d : *docs) EXPECT_EQ(d.chunk_count, kChunksPerDoc) << d.id;
  EXPECT_EQ(*store->CountChunks(), kKillAt * kChunksPerDoc);
  EXPECT_EQ(store->SearchChunks("word" + std::to_string(kKillAt - 1), 10)->size(),
            static_cast<size_t>(kChunksPerDoc));
  EXPECT_TRUE(store->SearchChunks("word" + std::to_string(kKillAt), 10)->empty());
  // The index is fully usable: the next run picks up where the killed one stopped.
  const std::string id = "doc" + std::to_string(kKillAt);
  ASSERT_TRUE(store->UpsertDocument(Doc(id, "text of " + id)).ok());
  EXPECT_EQ(store->ListDocuments()->size(), static_cast<size_t>(kKillAt + 1));
}

}  // namespace
}  // namespace grag
