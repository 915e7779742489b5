// Store internals shared by the store module's source files (and its tests).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "grag/cache.h"
#include "grag/store.h"
#include "file_lock.h"
#include "../group_commit.h"
#include "../query_image.h"
#include "sqlite.h"
#include "sqlite_store.h"
#include "verify.h"

// The current time as the store writes it: UTC ISO 8601 with milliseconds. A macro so it can be
// pasted into SQL string literals.
#define GRAG_SQL_NOW "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

namespace grag {

// The KeyValueCache the LLM client uses, over table llm_cache. Put defers its row
// (Store::WriteDeferred): a reply is committed within the deferred window, with the chunk's
// extraction and the other replies of that window, not in a commit of its own; Get sees the
// rows not yet committed. A process killed before the commit asks for those replies again.
class ReplyCacheTable final : public KeyValueCache {
 public:
  explicit ReplyCacheTable(SqliteStore::Impl* impl) : impl_(impl) {}
  std::optional<std::string> Get(std::string_view key) override;
  Status Put(std::string_view key, std::string_view value, std::string_view model,
             std::string_view kind) override;

 private:
  struct Pending {
    std::string value;
    uint64_t generation = 0;  // which Put of the key: only its commit removes it
  };
  SqliteStore::Impl* impl_;  // not owned; the Store owns both
  std::mutex pending_mu_;
  std::unordered_map<std::string, Pending> pending_;  // guarded by pending_mu_: not committed yet
  uint64_t generations_ = 0;                          // guarded by pending_mu_
};

// A read-only connection of the reader pool, with the per-connection state SearchChunks keeps.
struct PooledReader {
  explicit PooledReader(sqlite::Connection c) : conn(std::move(c)) {}
  sqlite::Connection conn;
  bool query_vocab_ready = false;  // the temporary tables SearchChunks uses exist
};

// The connection one read call uses (SqliteStore::Impl::Read): the write connection, under the
// write mutex, when this thread has a transaction open (its reads must see its own writes) or
// the index has no reader pool; else a connection of the pool, which sees the last commit and
// waits for nobody. Returns the pooled connection when it goes.
class ReadHandle {
 public:
  ReadHandle(SqliteStore::Impl* impl, std::unique_lock<std::recursive_mutex> lock)
      : impl_(impl), lock_(std::move(lock)) {}
  ReadHandle(SqliteStore::Impl* impl, std::unique_ptr<PooledReader> reader)
      : impl_(impl), reader_(std::move(reader)) {}
  ReadHandle(ReadHandle&&) noexcept = default;
  ReadHandle& operator=(ReadHandle&&) = delete;
  ~ReadHandle();

  sqlite::Connection& conn();
  bool& query_vocab_ready();
  // Makes the handle's later statements read one snapshot (a read transaction until the handle
  // goes), for reads of several statements that must agree.
  Status BeginSnapshot();

 private:
  SqliteStore::Impl* impl_;
  std::unique_lock<std::recursive_mutex> lock_;  // the write path
  std::unique_ptr<PooledReader> reader_;         // the pool path
  std::optional<Transaction> snapshot_;          // the write path's read transaction
  bool in_snapshot_ = false;                     // the pool path's read transaction
};

struct SqliteStore::Impl final : TransactionOwner {
  Impl(std::string path_in, sqlite::Connection conn_in)
      : path(std::move(path_in)), conn(std::move(conn_in)) {}

  // Records the files' state as checked when the Store closes (after the connection, which is
  // declared later and so closed first, has checkpointed): see store/verify.h.
  struct StampOnClose {
    std::string path;
    bool enabled = false;
    ~StampOnClose() {
      if (enabled) store::RecordStamp(path);
    }
  };
  StampOnClose stamp;  // first member: destroyed last

  // Locks `mu` for a single-statement read or write.
  std::unique_lock<std::recursive_mutex> Lock() { return std::unique_lock(mu); }
  // Begins a transaction, or a savepoint when one is already open on this thread. A read
  // transaction (write == false) gives multi-statement reads one snapshot. `all_or_nothing`
  // (a write transaction, depth 0 only; Store::BeginAllOrNothing): what nests in it takes no
  // savepoint, and a part rolled back dooms the whole.
  Result<Transaction> Begin(bool write, bool all_or_nothing = false);
  Status FinishTransaction(int depth, bool commit) override;
  // Guarded by mu, set while a transaction is open: it is all-or-nothing, and a part of it has
  // rolled back.
  bool all_or_nothing_open = false;
  bool part_rolled_back = false;

  // The connection for one read call (see ReadHandle).
  Result<ReadHandle> Read();
  // Closes the pool's connections (before the write connection closes and checkpoints).
  void CloseReaders();
  void ReturnReader(std::unique_ptr<PooledReader> reader);

  // SqliteStore::WriteGrouped: group commit (group_commit.h) on this connection.
  Status WriteGrouped(const std::function<Status()>& write);
  store::GroupCommit group_commit{
      [this] { return Begin(/*write=*/true); },
      [this] { return Begin(/*write=*/true, /*all_or_nothing=*/true); }};

  // SqliteStore::WriteDeferred and FlushDeferred. The flusher thread (started with the first
  // deferred write) commits the queue when its oldest write is kDeferredWindow old or
  // kDeferredBatch writes wait; FlushDeferred commits it on the calling thread. One commit of
  // the queue at a time (deferred_committing), so a flush that finds none running and takes the
  // queue has every earlier write committed when its own commit is.
  struct DeferredWrite {
    std::function<Status()> write;
    std::function<void()> committed;
  };
  Status WriteDeferred(DeferredWrite write);
  Status FlushDeferred();
  void StopFlusher();  // commits what is queued; before the connection closes
  void FlusherLoop();
  Status CommitDeferred(std::vector<DeferredWrite>& batch);  // deferred_committing held
  std::mutex deferred_mu;
  std::condition_variable deferred_cv;
  std::vector<DeferredWrite> deferred;  // guarded by deferred_mu: queued, oldest first
  std::chrono::steady_clock::time_point deferred_since;  // guarded by deferred_mu: oldest queued
  bool deferred_committing = false;                      // guarded by deferred_mu
  bool flusher_stopping = false;                         // guarded by deferred_mu
  Status deferred_error;  // guarded by deferred_mu: the first failure not yet reported
  std::thread flusher;    // started under deferred_mu; joined by StopFlusher

  const std::string path;
  // Recursive so that the thread holding an open Transaction can call store methods, which lock
  // again. Guards `conn` (and every Stmt it hands out) and the open-transaction count.
  std::recursive_mutex mu;
  sqlite::Connection conn;  // guarded by mu
  // The thread whose transaction is open on `conn`, if any (set and cleared under mu; read
  // without it, to tell whether the calling thread is that one).
  std::atomic<std::thread::id> tx_thread;
  ReplyCacheTable reply_cache{this};
  bool read_only = false;
  bool map_reads = false;          // StoreOptions::map_reads, or read_only
  bool query_vocab_ready = false;  // guarded by mu: the temporary tables SearchChunks uses
  store::FileLock writer_lock;     // held for the Store's lifetime when StoreOptions::writer_lock

  // The reader pool: read-only connections to the same file, opened on demand, at most
  // kMaxReaders at once (callers beyond wait for one). Off when the file is not in WAL mode,
  // where a reader would block the writer.
  static constexpr int kMaxReaders = 8;
  bool pool_enabled = false;
  int busy_timeout_ms = 10000;
  std::mutex pool_mu;
  std::condition_variable pool_cv;
  std::vector<std::unique_ptr<PooledReader>> idle_readers;  // guarded by pool_mu
  int readers_out = 0;                                      // guarded by pool_mu: lent out
  int readers_open = 0;                                     // guarded by pool_mu: idle + lent
  // How long a read waits for a lent-out reader before opening another: a reader comes back
  // when its call ends, which for most reads is sooner than a connection opens (it parses the
  // whole schema first).
  std::chrono::microseconds reader_wait{1000};

  // Drops the graph's query image in the transaction open on this thread (the caller holds `mu`
  // and writes entities, relationships or entity-chunk links next): at most once a transaction
  // while no part of it rolled back. These tables are written a row at a time by the thousand
  // in a merge, where a trigger per row cost more than the merge (store_images.cpp).
  Status DropGraphImage();
  bool graph_image_dropped = false;  // guarded by mu: in the open transaction

  // The decoded query images last read (store_images.cpp), by the id they were stored under:
  // an image is never changed, so a stored id that is still the same is the same image.
  std::mutex image_mu;
  int64_t graph_image_id = 0;                            // guarded by image_mu
  std::shared_ptr<const store::GraphImage> graph_image;  // guarded by image_mu
  int64_t words_image_id = 0;                            // guarded by image_mu
  std::shared_ptr<const store::TermCounts> words_image;  // guarded by image_mu
};

namespace store {

// A forward migration: `sql` takes a schema at version - 1 to `version`. Runs inside one
// transaction with foreign-key enforcement off (so tables can be rebuilt); the runner checks
// foreign keys before committing and records the version in PRAGMA user_version and meta.
struct Migration {
  int64_t version;
  std::string_view description;
  std::string_view sql;
};

// PRAGMA application_id of a grag index: "grag" in ASCII.
inline constexpr int64_t kApplicationId = 0x67726167;

// The migrations of this build, versions 1..N.
std::span<const Migration> DefaultMigrations();

// Store::Open with an explicit migration list (tests use it to fake older and newer builds).
Result<std::unique_ptr<Store>> OpenStore(const std::string& path, const StoreOptions& options,
                                         std::span<const Migration> migrations);

// Opens `path` with SQLITE_OPEN_READONLY (as immutable on read-only media, where no -shm file
// can be made), reading through a memory map of the file when `map` says so. Checks nothing: the
// caller makes sure it is a grag index.
Result<sqlite::Connection> OpenForReading(const std::string& path, bool map = true);

// The FTS5 MATCH expression for a user's plain-text query: each word quoted as a string, joined
// with OR. Empty when the query has no word.
std::string FtsMatchQuery(std::string_view query);
// The distinct words of a plain-text query, as FtsMatchQuery quotes them.
std::vector<std::string> FtsWords(std::string_view query);

// The FTS5 MATCH expression for `phrase` as a phrase (its words in a row). Empty without words.
std::string FtsPhraseQuery(std::string_view phrase);

// LoadGraphNeighbourhood read from the tables, a hop at a time (store_graph.cpp), on a
// connection whose snapshot is open; the store reads its graph image instead where it has one.
Result<GraphSnapshot> LoadNeighbourhoodFromTables(sqlite::Connection& conn,
                                                  const std::vector<int64_t>& entity_ids,
                                                  const std::vector<std::string>& chunk_ids,
                                                  const Store::NeighbourhoodLimits& limits);
// The stored graph and words images as decoded, from `impl`'s cache while their ids are the
// stored ones (store_images.cpp); null when there is none (or it cannot be decoded, which is
// logged): read the tables.
Result<std::shared_ptr<const GraphImage>> CachedGraphImage(SqliteStore::Impl& impl,
                                                           sqlite::Connection& conn);
Result<std::shared_ptr<const TermCounts>> CachedWordsImage(SqliteStore::Impl& impl,
                                                           sqlite::Connection& conn);
// The names of the query images stored (store_images.cpp).
Result<std::vector<std::string>> ListQueryImages(sqlite::Connection& conn);
// Each stored query image checked against one built afresh from the tables: a problem per image
// that differs or cannot be read.
Result<std::vector<std::string>> CheckQueryImages(sqlite::Connection& conn);

}  // namespace store
}  // namespace grag
