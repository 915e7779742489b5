// Store: opening, transactions, documents, chunks, full-text search and inspection.
#include "grag/store.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "grag/log.h"
#include "compressed_text.h"
#include "document_text.h"
#include "store_impl.h"

namespace grag {

// ---------------------------------------------------------------- opening and closing

namespace store {

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const StoreOptions& options) {
  return OpenStore(path, options, DefaultMigrations());
}

}  // namespace store

int64_t Store::LatestSchemaVersion() { return store::DefaultMigrations().back().version; }

SqliteStore::SqliteStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SqliteStore::~SqliteStore() {
  if (impl_ == nullptr) return;
  impl_->StopFlusher();
  impl_->CloseReaders();
  if (impl_->read_only) return;
  auto lock = impl_->Lock();
  // Refreshes the query planner's statistics where they have drifted; cheap when nothing did.
  (void)impl_->conn.Exec("PRAGMA optimize");
}

// ---------------------------------------------------------------- transactions

Result<Transaction> SqliteStore::Impl::Begin(bool write, bool all_or_nothing) {
  std::unique_lock lock(mu);
  const int depth = open_transactions();
  Status st;
  if (depth == 0) {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt begin, conn.Prepare(write ? "BEGIN IMMEDIATE" : "BEGIN"));
    st = begin.Run();
    all_or_nothing_open = st.ok() && write && all_or_nothing;
    part_rolled_back = false;
  } else if (sqlite3_get_autocommit(conn.get()) != 0) {
    st = Status::Internal("the enclosing transaction was already rolled back after an error");
  } else if (all_or_nothing_open) {
    // No savepoint: the part commits with the whole or dooms it (FinishTransaction).
    if (part_rolled_back) {
      st = Status::Internal(
          "an earlier write of this all-or-nothing transaction failed: it can only roll back");
    }
  } else {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt savepoint,
                          conn.Prepare("SAVEPOINT sp" + std::to_string(depth)));
    st = savepoint.Run();
  }
  if (!st.ok()) return st;
  Opened();
  if (depth == 0) {
    tx_thread.store(std::this_thread::get_id());
    graph_image_dropped = false;
  }
  return Transaction(this, std::move(lock), depth);
}

Status SqliteStore::Impl::FinishTransaction(int depth, bool commit) {
  const bool doomed = part_rolled_back;
  if (depth == 0) {
    tx_thread.store(std::thread::id());
    all_or_nothing_open = false;
    part_rolled_back = false;
  }
  if (!commit) graph_image_dropped = false;  // the drop may be undone with the rest
  // SQLite rolls a whole transaction back by itself after some errors (disk full, I/O): then
  // there is nothing left to commit or roll back.
  if (sqlite3_get_autocommit(conn.get()) != 0) {
    if (commit) return Status::IoError("the transaction was rolled back after an earlier error");
    return Status::Ok();
  }
  if (depth == 0) {
    if (!commit) return conn.Exec("ROLLBACK");
    if (doomed) {
      (void)conn.Exec("ROLLBACK");
      return Status::Internal(
          "a write of this all-or-nothing transaction failed: it was rolled back whole");
    }
    Status st = conn.Exec("COMMIT");
    if (!st.ok()) (void)conn.Exec("ROLLBACK");
    return st;
  }
  if (all_or_nothing_open) {  // a part without a savepoint (Begin)
    if (!commit) part_rolled_back = true;
    return Status::Ok();
  }
  const std::string sp = "sp" + std::to_string(depth);
  return conn.Exec(commit ? "RELEASE " + sp : "ROLLBACK TO " + sp + "; RELEASE " + sp);
}

Result<Transaction> SqliteStore::Begin() { return impl_->Begin(/*write=*/true); }

Result<Transaction> SqliteStore::BeginAllOrNothing() {
  return impl_->Begin(/*write=*/true, /*all_or_nothing=*/true);
}

Status SqliteStore::WriteGrouped(const std::function<Status()>& write) {
  return impl_->WriteGrouped(write);
}

Status SqliteStore::Impl::WriteGrouped(const std::function<Status()>& write) {
  {
    // Inside this thread's own transaction (the lock is recursive and a transaction holds it
    // throughout, so an open one found here is ours): write there, committed with it.
    auto lock = Lock();
    if (open_transactions() > 0) return write();
  }
  return group_commit.Run(write);
}

Status SqliteStore::WriteDeferred(std::function<Status()> write, std::function<void()> committed) {
  return impl_->WriteDeferred({std::move(write), std::move(committed)});
}

Status SqliteStore::FlushDeferred() { return impl_->FlushDeferred(); }

Status SqliteStore::Impl::WriteDeferred(DeferredWrite w) {
  // In this thread's own transaction: there, as WriteGrouped does. (Not Lock(): that would
  // wait for the flusher's commit, which deferring is meant to spare the caller.)
  const bool own_transaction = tx_thread.load() == std::this_thread::get_id();
  std::unique_lock lock(deferred_mu);
  if (own_transaction || flusher_stopping) {  // or the store is closing: no later commit
    lock.unlock();
    Status st = own_transaction ? w.write() : group_commit.Run(w.write);
    if (st.ok() && w.committed) w.committed();
    return st;
  }
  const bool first = deferred.empty();
  if (first) deferred_since = std::chrono::steady_clock::now();
  deferred.push_back(std::move(w));
  if (!flusher.joinable()) flusher = std::thread([this] { FlusherLoop(); });
  // The flusher sleeps without a deadline while the queue is empty.
  if (first || deferred.size() >= kDeferredBatch) deferred_cv.notify_all();
  return std::exchange(deferred_error, Status::Ok());
}

Status SqliteStore::Impl::CommitDeferred(std::vector<DeferredWrite>& batch) {
  Status failed;              // the first write that failed (rolled back alone)
  std::vector<char> written;  // by write: it succeeded
  // Group commit may run this twice (group_commit.h): each attempt starts afresh.
  const auto run = [&]() -> Status {
    failed = Status::Ok();
    written.assign(batch.size(), 0);
    for (size_t i = 0; i < batch.size(); ++i) {
      Result<Transaction> savepoint = Begin(/*write=*/true);
      if (!savepoint.ok()) return savepoint.status();
      Status one = batch[i].write();
      if (one.ok()) one = savepoint->Commit();
      if (!one.ok() && failed.ok()) failed = one;
      written[i] = one.ok() ? 1 : 0;
    }
    return Status::Ok();
  };
  // A FlushDeferred inside this thread's own transaction writes there (group commit would wait
  // for another thread's commit, which waits for this transaction).
  const Status st = tx_thread.load() == std::this_thread::get_id() ? run() : group_commit.Run(run);
  if (!st.ok()) return st;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (written[i] != 0 && batch[i].committed) batch[i].committed();
  }
  return failed;
}

void SqliteStore::Impl::FlusherLoop() {
  std::unique_lock lock(deferred_mu);
  for (;;) {
    if (deferred.empty()) {
      if (flusher_stopping) return;
      deferred_cv.wait(lock);
      continue;
    }
    const auto due = deferred_since + kDeferredWindow;
    if (!flusher_stopping && deferred.size() < kDeferredBatch &&
        std::chrono::steady_clock::now() < due) {
      deferred_cv.wait_until(lock, due);
      continue;
    }
    if (deferred_committing) {  // a FlushDeferred is committing: it takes what it finds
      deferred_cv.wait(lock);
      continue;
    }
    std::vector<DeferredWrite> batch;
    batch.swap(deferred);
    deferred_committing = true;
    lock.unlock();
    const Status st = CommitDeferred(batch);
    batch.clear();  // the writes' captures go outside the lock
    lock.lock();
    deferred_committing = false;
    if (!st.ok() && deferred_error.ok()) deferred_error = st;
    deferred_cv.notify_all();
  }
}

Status SqliteStore::Impl::FlushDeferred() {
  std::unique_lock lock(deferred_mu);
  if (tx_thread.load() == std::this_thread::get_id()) {
    // Inside this thread's transaction: what is queued goes into it, now (a commit the flusher
    // has begun waits for this transaction, so it cannot be waited for here).
    std::vector<DeferredWrite> batch;
    batch.swap(deferred);
    lock.unlock();
    Status st = batch.empty() ? Status::Ok() : CommitDeferred(batch);
    lock.lock();
    if (!st.ok() && deferred_error.ok()) deferred_error = st;
    return std::exchange(deferred_error, Status::Ok());
  }
  deferred_cv.wait(lock, [&] { return !deferred_committing; });
  if (!deferred.empty()) {
    std::vector<DeferredWrite> batch;
    batch.swap(deferred);
    deferred_committing = true;
    lock.unlock();
    const Status st = CommitDeferred(batch);
    batch.clear();
    lock.lock();
    deferred_committing = false;
    if (!st.ok() && deferred_error.ok()) deferred_error = st;
    deferred_cv.notify_all();
  }
  return std::exchange(deferred_error, Status::Ok());
}

void SqliteStore::Impl::StopFlusher() {
  {
    std::lock_guard lock(deferred_mu);
    flusher_stopping = true;
  }
  deferred_cv.notify_all();
  if (flusher.joinable()) flusher.join();
  const Status st = FlushDeferred();
  if (!st.ok()) Log(LogLevel::kWarn, "store", "deferred writes lost at close: " + st.ToString());
}

// ---------------------------------------------------------------- reads

Result<ReadHandle> SqliteStore::Impl::Read() {
  if (!pool_enabled || tx_thread.load() == std::this_thread::get_id()) {
    return ReadHandle(this, std::unique_lock(mu));
  }
  {
    std::unique_lock lock(pool_mu);
    // A reader lent out comes back when its call ends, which for most reads is sooner than
    // another connection opens (it parses the whole schema first: a millisecond or so, and
    // memory). So wait about that long (reader_wait) for one before opening another.
    if (idle_readers.empty() && readers_open > 0) {
      pool_cv.wait_for(lock, reader_wait, [&] { return !idle_readers.empty(); });
    }
    pool_cv.wait(lock, [&] { return !idle_readers.empty() || readers_open < kMaxReaders; });
    ++readers_out;
    if (!idle_readers.empty()) {
      std::unique_ptr<PooledReader> reader = std::move(idle_readers.back());
      idle_readers.pop_back();
      return ReadHandle(this, std::move(reader));
    }
    ++readers_open;
  }
  // A store being indexed has readers that scan whole tables once (the merge reads every
  // mention), and a map would leave every page they touched resident in this process, so its
  // memory would grow with the index (12,500 transcripts: 1,237 MiB peak, 923 MiB of it the
  // map). Those read into SQLite's bounded cache instead; a store that answers questions maps
  // (StoreOptions::map_reads).
  Result<sqlite::Connection> opened = store::OpenForReading(path, map_reads);
  if (!opened.ok()) {
    {
      std::lock_guard lock(pool_mu);
      --readers_out;
      --readers_open;
    }
    pool_cv.notify_one();
    // The write connection still works: read there, as without a pool.
    Log(LogLevel::kDebug, "store",
        "opening a read connection: " + opened.status().ToString() + "; reading via the writer's");
    return ReadHandle(this, std::unique_lock(mu));
  }
  sqlite3_busy_timeout(opened->get(), busy_timeout_ms);
  (void)opened->Exec("PRAGMA temp_store = MEMORY");
  return ReadHandle(this, std::make_unique<PooledReader>(std::move(*opened)));
}

void SqliteStore::Impl::ReturnReader(std::unique_ptr<PooledReader> reader) {
  {
    std::lock_guard lock(pool_mu);
    --readers_out;
    idle_readers.push_back(std::move(reader));
  }
  pool_cv.notify_one();
}

void SqliteStore::Impl::CloseReaders() {
  std::unique_lock lock(pool_mu);
  pool_enabled = false;  // from now on reads use the write connection
  // Readers still lent out belong to calls in flight on other threads; a Store is not destroyed
  // while its methods run, so there are none here.
  readers_open -= static_cast<int>(idle_readers.size());
  idle_readers.clear();
}

ReadHandle::~ReadHandle() {
  if (reader_ == nullptr) {
    if (snapshot_.has_value() && snapshot_->active()) (void)snapshot_->Commit();
    return;
  }
  if (in_snapshot_) (void)reader_->conn.Exec("COMMIT");
  impl_->ReturnReader(std::move(reader_));
}

sqlite::Connection& ReadHandle::conn() { return reader_ ? reader_->conn : impl_->conn; }

bool& ReadHandle::query_vocab_ready() {
  return reader_ ? reader_->query_vocab_ready : impl_->query_vocab_ready;
}

Status ReadHandle::BeginSnapshot() {
  if (reader_ == nullptr) {
    GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(/*write=*/false));
    snapshot_.emplace(std::move(tx));
    return Status::Ok();
  }
  GRAG_RETURN_IF_ERROR(reader_->conn.Exec("BEGIN"));
  in_snapshot_ = true;
  return Status::Ok();
}

// ---------------------------------------------------------------- documents

Result<DocumentChange> SqliteStore::UpsertDocument(const Document& doc) {
  if (doc.id.empty()) return Status::InvalidArgument("a document needs an id");
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  sqlite::Connection& conn = impl_->conn;
  DocumentChange change = DocumentChange::kAdded;
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt find,
                          conn.Prepare("SELECT content_hash FROM documents WHERE id = ?"));
    find.BindAll(doc.id);
    GRAG_ASSIGN_OR_RETURN(bool found, find.Step());
    if (found) {
      change = sqlite::HashText(find, 0) == doc.content_hash ? DocumentChange::kUnchanged
                                                             : DocumentChange::kChanged;
    }
  }
  if (change != DocumentChange::kUnchanged) {
    // The text compressed where that saves room (a BLOB, reply_codec.h): the chunks hold it
    // again for search, so this copy is read only to cite and to chunk anew.
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt write,
        conn.Prepare(change == DocumentChange::kAdded
                         ? "INSERT INTO documents (id, title, source_path, content_hash, text) "
                           "VALUES (?1, ?2, ?3, ?4, ?5)"
                         : "UPDATE documents SET title = ?2, source_path = ?3, content_hash = ?4, "
                           "text = ?5, updated_at = " GRAG_SQL_NOW " WHERE id = ?1"));
    write.BindAll(doc.id, doc.title, doc.source_path, doc.content_hash, std::nullopt);
    sqlite::BindCompressible(write, 5, doc.text);
    sqlite::BindHash(write, 4, doc.content_hash);  // as bytes: half the room
    GRAG_RETURN_IF_ERROR(write.Run());
  } else {
    // Same content: leave the (possibly large) text alone, follow a rename or retitle.
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt update,
        conn.Prepare("UPDATE documents SET title = ?2, source_path = ?3, updated_at = " GRAG_SQL_NOW
                     " WHERE id = ?1 AND (title IS NOT ?2 OR source_path IS NOT ?3)"));
    GRAG_RETURN_IF_ERROR(update.BindAll(doc.id, doc.title, doc.source_path).Run());
  }
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return change;
}

Result<std::optional<Document>> SqliteStore::GetDocument(std::string_view id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare(
          "SELECT id, title, source_path, text, content_hash FROM documents WHERE id = ?"));
  stmt.BindAll(id);
  GRAG_ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) return std::optional<Document>();
  Document doc;
  doc.id = stmt.Text(0);
  doc.title = stmt.Text(1);
  doc.source_path = stmt.Text(2);
  GRAG_ASSIGN_OR_RETURN(doc.text, sqlite::StoredDocumentText(read.conn(), doc.id, stmt, 3));
  doc.content_hash = sqlite::HashText(stmt, 4);
  return std::optional<Document>(std::move(doc));
}

Result<std::vector<DocumentInfo>> SqliteStore::ListDocuments() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare(
          "SELECT d.id, d.title, d.source_path, d.content_hash, "
          "(SELECT count(*) FROM chunks c WHERE c.document_id = d.id), d.created_at, "
          "d.updated_at FROM documents d ORDER BY d.id"));
  std::vector<DocumentInfo> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    DocumentInfo& info = out.emplace_back();
    info.id = stmt.Text(0);
    info.title = stmt.Text(1);
    info.source_path = stmt.Text(2);
    info.content_hash = sqlite::HashText(stmt, 3);
    info.chunk_count = stmt.Int(4);
    info.created_at = stmt.Text(5);
    info.updated_at = stmt.Text(6);
  }
  return out;
}

Result<bool> SqliteStore::DeleteDocument(std::string_view id) {
  // A transaction of its own: the cascade touches many tables and must be all or nothing.
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        impl_->conn.Prepare("DELETE FROM documents WHERE id = ?"));
  GRAG_RETURN_IF_ERROR(stmt.BindAll(id).Run());
  const bool deleted = sqlite3_changes(impl_->conn.get()) > 0;
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return deleted;
}

// ---------------------------------------------------------------- chunks

namespace {

constexpr std::string_view kChunkColumns =
    "id, document_id, chunk_index, text, n_tokens, start_token, start_byte, end_byte";

ChunkRecord ReadChunk(const sqlite::Stmt& stmt) {
  ChunkRecord c;
  c.id = stmt.Text(0);
  c.document_id = stmt.Text(1);
  c.index = stmt.Int(2);
  c.text = stmt.Text(3);
  c.n_tokens = stmt.Int(4);
  c.start_token = stmt.Int(5);
  c.start_byte = stmt.Int(6);
  c.end_byte = stmt.Int(7);
  return c;
}

}  // namespace

Result<ChunkChanges> SqliteStore::ReplaceDocumentChunks(std::string_view document_id,
                                                        const std::vector<ChunkRecord>& chunks) {
  std::unordered_set<std::string_view> new_ids;
  std::unordered_set<int64_t> new_indexes;
  for (const ChunkRecord& c : chunks) {
    if (c.document_id != document_id) {
      return Status::InvalidArgument("chunk " + c.id + " belongs to document " + c.document_id +
                                     ", not " + std::string(document_id));
    }
    if (c.id.empty()) return Status::InvalidArgument("a chunk needs an id");
    if (!new_ids.insert(c.id).second) {
      return Status::InvalidArgument("chunk id " + c.id + " appears twice in document " +
                                     std::string(document_id));
    }
    if (c.index < 0 || !new_indexes.insert(c.index).second) {
      return Status::InvalidArgument("chunk index " + std::to_string(c.index) +
                                     " is negative or repeated in document " +
                                     std::string(document_id));
    }
  }

  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  sqlite::Connection& conn = impl_->conn;
  // The document's text, read (from the chunks about to go, if it is kept in them) before they
  // change: kept in the new chunks if they cover it (document_text.h).
  std::string text;
  bool kept_in_chunks = false;
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt doc,
                          conn.Prepare("SELECT text FROM documents WHERE id = ?"));
    GRAG_ASSIGN_OR_RETURN(bool found, doc.BindAll(document_id).Step());
    if (!found) return Status::NotFound("no document " + std::string(document_id));
    kept_in_chunks = doc.Blob(0).empty();
    GRAG_ASSIGN_OR_RETURN(text, sqlite::StoredDocumentText(conn, document_id, doc, 0));
  }
  std::vector<std::string> existing;
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt list,
                          conn.Prepare("SELECT id FROM chunks WHERE document_id = ?"));
    list.BindAll(document_id);
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, list.Step());
      if (!row) break;
      existing.push_back(list.Text(0));
    }
  }
  ChunkChanges changes;
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt del, conn.Prepare("DELETE FROM chunks WHERE id = ?"));
    for (const std::string& id : existing) {
      if (new_ids.count(id) != 0) {
        ++changes.kept;
        continue;
      }
      GRAG_RETURN_IF_ERROR(del.BindAll(id).Run());
      ++changes.removed;
    }
  }
  changes.added = static_cast<int64_t>(chunks.size()) - changes.kept;
  // Kept chunks may move: park their indexes out of the way so UNIQUE(document_id, chunk_index)
  // holds at every step of the update below.
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt park,
        conn.Prepare("UPDATE chunks SET chunk_index = -1 - chunk_index WHERE document_id = ?"));
    GRAG_RETURN_IF_ERROR(park.BindAll(document_id).Run());
  }
  // Keeps the row (and so its extraction results) when the id and the text are unchanged.
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt upsert,
      conn.Prepare("INSERT INTO chunks (id, document_id, chunk_index, text, n_tokens, "
                   "start_token, start_byte, end_byte) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                   "ON CONFLICT (id) DO UPDATE SET chunk_index = excluded.chunk_index, "
                   "n_tokens = excluded.n_tokens, start_token = excluded.start_token, "
                   "start_byte = excluded.start_byte, end_byte = excluded.end_byte "
                   "WHERE chunks.document_id = excluded.document_id AND chunks.text = "
                   "excluded.text"));
  for (const ChunkRecord& c : chunks) {
    GRAG_RETURN_IF_ERROR(upsert
                             .BindAll(c.id, c.document_id, c.index, c.text, c.n_tokens,
                                      c.start_token, c.start_byte, c.end_byte)
                             .Run());
    if (sqlite3_changes(conn.get()) > 0) continue;
    // The id exists but for another document, or with another text.
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt owner,
                          conn.Prepare("SELECT document_id FROM chunks WHERE id = ?"));
    GRAG_ASSIGN_OR_RETURN(bool found, owner.BindAll(c.id).Step());
    std::string owner_doc = found ? owner.Text(0) : std::string();
    if (owner_doc != c.document_id) {
      return Status::InvalidArgument("chunk id " + c.id + " already belongs to document " +
                                     owner_doc);
    }
    // Same id, new text: the caller's ids are not content-derived. Treat it as a new chunk so
    // stale extraction results go.
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt del, conn.Prepare("DELETE FROM chunks WHERE id = ?"));
    GRAG_RETURN_IF_ERROR(del.BindAll(c.id).Run());
    GRAG_RETURN_IF_ERROR(upsert
                             .BindAll(c.id, c.document_id, c.index, c.text, c.n_tokens,
                                      c.start_token, c.start_byte, c.end_byte)
                             .Run());
    --changes.kept;
    ++changes.added;
    ++changes.removed;
  }
  if (const bool covered = sqlite::ChunksCoverText(text, chunks); covered != kept_in_chunks) {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt keep,
                          conn.Prepare("UPDATE documents SET text = ?2 WHERE id = ?1"));
    keep.BindAll(document_id, std::string());  // '': the chunks hold it
    if (!covered) sqlite::BindCompressible(keep, 2, text);
    GRAG_RETURN_IF_ERROR(keep.Run());
  }
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return changes;
}

Result<std::optional<ChunkRecord>> SqliteStore::GetChunk(std::string_view id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT " + std::string(kChunkColumns) + " FROM chunks WHERE id = ?"));
  GRAG_ASSIGN_OR_RETURN(bool found, stmt.BindAll(id).Step());
  if (!found) return std::optional<ChunkRecord>();
  return std::optional<ChunkRecord>(ReadChunk(stmt));
}

Result<std::vector<ChunkRecord>> SqliteStore::ListChunks(std::string_view document_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        read.conn().Prepare("SELECT " + std::string(kChunkColumns) +
                                            " FROM chunks WHERE document_id = ? "
                                            "ORDER BY chunk_index"));
  stmt.BindAll(document_id);
  std::vector<ChunkRecord> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back(ReadChunk(stmt));
  }
  return out;
}

Result<std::vector<std::string>> SqliteStore::ListChunkIds() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT id FROM chunks ORDER BY document_id, chunk_index"));
  std::vector<std::string> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back(stmt.Text(0));
  }
  return out;
}

Result<int64_t> SqliteStore::CountEntities() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  return read.conn().QueryInt("SELECT count(*) FROM entities");
}

Result<int64_t> SqliteStore::CountChunks() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  return read.conn().QueryInt("SELECT count(*) FROM chunks");
}

namespace {

std::string JoinMatch(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += " OR ";
    out += '"' + w + '"';
  }
  return out;
}

// How many chunks hold each word, as the index tokenises it: a temporary FTS5 table with the
// same tokenizer gives each word's terms (a word that tokenises into several terms counts as
// its most frequent one), and each term's count comes from the words image (`counts`, the
// common terms) or, for a term it does not list or without one, from the chunks' vocabulary,
// which walks the term's posting list.
Result<std::vector<int64_t>> WordFrequencies(sqlite::Connection& conn, bool& ready,
                                             const store::TermCounts* counts,
                                             const std::vector<std::string>& words) {
  std::vector<int64_t> df(words.size(), 0);
  if (words.empty()) return df;
  if (!ready) {
    GRAG_RETURN_IF_ERROR(conn.Exec(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.grag_query_words USING fts5(w, tokenize = "
        "'porter unicode61 remove_diacritics 2');"
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.grag_query_terms USING "
        "fts5vocab(temp, grag_query_words, instance);"
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.grag_chunk_terms USING "
        "fts5vocab(main, chunks_fts, row);"));
    ready = true;
  }
  GRAG_RETURN_IF_ERROR(conn.Exec("DELETE FROM temp.grag_query_words"));
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt insert,
        conn.Prepare("INSERT INTO temp.grag_query_words (rowid, w) VALUES (?, ?)"));
    for (size_t i = 0; i < words.size(); ++i) {
      GRAG_RETURN_IF_ERROR(insert.BindAll(static_cast<int64_t>(i), words[i]).Run());
    }
  }
  std::vector<std::pair<int64_t, std::string>> terms;  // (word, term)
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                          conn.Prepare("SELECT DISTINCT doc, term FROM temp.grag_query_terms"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      terms.emplace_back(stmt.Int(0), stmt.Text(1));
    }
  }
  (void)conn.Exec("DELETE FROM temp.grag_query_words");
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt lookup,
                        conn.Prepare("SELECT doc FROM temp.grag_chunk_terms WHERE term = ?"));
  for (const auto& [i, term] : terms) {
    if (i < 0 || static_cast<size_t>(i) >= words.size()) continue;
    std::optional<int64_t> n = counts != nullptr ? counts->Find(term) : std::nullopt;
    if (!n) {
      GRAG_ASSIGN_OR_RETURN(bool found, lookup.BindAll(term).Step());
      n = found ? lookup.Int(0) : 0;
    }
    df[static_cast<size_t>(i)] = std::max(df[static_cast<size_t>(i)], *n);
  }
  return df;
}

// The words of an OR query without those in more than half the chunks. FTS5's BM25 gives such a
// term an IDF of about zero, so the ranking keeps its order without them; but each still makes
// every chunk that holds it a match to score and sort ("the", "and", "with": nearly all of them),
// which made BM25 over 20k chunks cost 50 ms.
Result<std::vector<std::string>> WithoutCommonWords(sqlite::Connection& conn, bool& ready,
                                                    const store::TermCounts* counts,
                                                    const std::vector<std::string>& words) {
  GRAG_ASSIGN_OR_RETURN(std::vector<int64_t> df, WordFrequencies(conn, ready, counts, words));
  GRAG_ASSIGN_OR_RETURN(int64_t chunks, conn.QueryInt("SELECT count(*) FROM chunks"));
  std::vector<std::string> kept;
  std::vector<std::string> present;
  for (size_t i = 0; i < words.size(); ++i) {
    if (df[i] == 0) continue;
    present.push_back(words[i]);
    if (2 * df[i] <= chunks) kept.push_back(words[i]);
  }
  // Only common words: in a small index (where half the chunks is a handful) they are all there
  // is to go by; in a large one they would match nearly everything at a score of about zero.
  if (kept.empty() && chunks < 20) return present;
  return kept;
}

}  // namespace

Result<std::vector<ChunkHit>> SqliteStore::SearchChunks(std::string_view query, int k) {
  std::vector<ChunkHit> out;
  std::vector<std::string> words = store::FtsWords(query);
  if (words.empty() || k <= 0) return out;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  if (words.size() > 1) {
    GRAG_ASSIGN_OR_RETURN(std::shared_ptr<const store::TermCounts> counts,
                          store::CachedWordsImage(*impl_, read.conn()));
    GRAG_ASSIGN_OR_RETURN(
        words, WithoutCommonWords(read.conn(), read.query_vocab_ready(), counts.get(), words));
    if (words.empty()) return out;  // nothing specific to search for
  }
  const std::string match = JoinMatch(words);
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare(
          "SELECT c.id, c.document_id, c.chunk_index, f.rank FROM "
          "(SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY rank LIMIT ?2)"
          " AS f JOIN chunks c ON c.seq = f.rowid ORDER BY f.rank, c.id"));
  stmt.BindAll(match, k);
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    ChunkHit& hit = out.emplace_back();
    hit.chunk_id = stmt.Text(0);
    hit.document_id = stmt.Text(1);
    hit.index = stmt.Int(2);
    hit.score = -stmt.Double(3);
  }
  return out;
}

Result<std::vector<double>> SqliteStore::RankTexts(const std::vector<std::string>& texts,
                                                   std::string_view query) {
  std::vector<double> scores(texts.size(), 0.0);
  const std::vector<std::string> words = store::FtsWords(query);
  if (words.empty() || texts.empty()) return scores;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  sqlite::Connection& conn = read.conn();
  GRAG_RETURN_IF_ERROR(conn.Exec(
      "CREATE VIRTUAL TABLE IF NOT EXISTS temp.grag_rank_texts USING fts5(text, tokenize = "
      "'porter unicode61 remove_diacritics 2');"
      "DELETE FROM temp.grag_rank_texts;"));
  // Whatever happens below, the texts do not outlive the call.
  struct Clear {
    sqlite::Connection& conn;
    ~Clear() { (void)conn.Exec("DELETE FROM temp.grag_rank_texts"); }
  } clear{conn};
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt insert,
        conn.Prepare("INSERT INTO temp.grag_rank_texts (rowid, text) VALUES (?, ?)"));
    for (size_t i = 0; i < texts.size(); ++i) {
      GRAG_RETURN_IF_ERROR(insert.BindAll(static_cast<int64_t>(i), texts[i]).Run());
    }
  }
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        conn.Prepare("SELECT rowid, rank FROM temp.grag_rank_texts WHERE "
                                     "grag_rank_texts MATCH ?1"));
  stmt.BindAll(JoinMatch(words));
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    const int64_t i = stmt.Int(0);
    if (i >= 0 && static_cast<size_t>(i) < texts.size()) {
      // FTS5's rank is minus BM25; a term in every text has an IDF of about 1e-6, never 0.
      scores[static_cast<size_t>(i)] = std::max(0.0, -stmt.Double(1));
    }
  }
  return scores;
}

Result<std::vector<int64_t>> SqliteStore::CountChunksWithWords(
    const std::vector<std::string>& words) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(std::shared_ptr<const store::TermCounts> counts,
                        store::CachedWordsImage(*impl_, read.conn()));
  return WordFrequencies(read.conn(), read.query_vocab_ready(), counts.get(), words);
}

namespace store {

std::string FtsMatchQuery(std::string_view query) { return JoinMatch(FtsWords(query)); }

std::vector<std::string> FtsWords(std::string_view query) {
  // Words are runs of ASCII letters and digits and of any non-ASCII bytes (UTF-8 sequences);
  // everything else separates them. Quoting each word as an FTS5 string leaves the tokenizer to
  // split further (Unicode punctuation) and takes away every operator: quotes cannot occur
  // inside a word, so no input can produce a syntax error.
  constexpr size_t kMaxWords = 128;  // a pasted document is not a query; bound the work
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  size_t i = 0;
  while (i < query.size() && seen.size() < kMaxWords) {
    auto is_word = [](unsigned char ch) {
      return ch >= 0x80 || (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
             (ch >= 'A' && ch <= 'Z');
    };
    while (i < query.size() && !is_word(static_cast<unsigned char>(query[i]))) ++i;
    size_t start = i;
    while (i < query.size() && is_word(static_cast<unsigned char>(query[i]))) ++i;
    if (i == start) break;
    std::string word(query.substr(start, i - start));
    if (!seen.insert(word).second) continue;
    out.push_back(std::move(word));
  }
  return out;
}

std::string FtsPhraseQuery(std::string_view phrase) {
  // One FTS5 string holding the words in order is a phrase query; the same word rule as above
  // keeps quotes and operators out.
  constexpr size_t kMaxWords = 16;
  std::string words;
  size_t n = 0;
  size_t i = 0;
  auto is_word = [](unsigned char ch) {
    return ch >= 0x80 || (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
           (ch >= 'A' && ch <= 'Z');
  };
  while (i < phrase.size() && n < kMaxWords) {
    while (i < phrase.size() && !is_word(static_cast<unsigned char>(phrase[i]))) ++i;
    const size_t start = i;
    while (i < phrase.size() && is_word(static_cast<unsigned char>(phrase[i]))) ++i;
    if (i == start) break;
    if (!words.empty()) words += ' ';
    words.append(phrase.substr(start, i - start));
    ++n;
  }
  return words.empty() ? std::string() : '"' + words + '"';
}

}  // namespace store

// ---------------------------------------------------------------- inspection

Result<StoreStats> SqliteStore::Stats() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  sqlite::Connection& conn = read.conn();
  StoreStats s;
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt stmt,
        conn.Prepare("SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks), "
                     "(SELECT count(*) FROM extractions WHERE status = 'ok'), "
                     "(SELECT count(*) FROM extractions WHERE status = 'skipped'), "
                     "(SELECT coalesce(sum(entity_count), 0) FROM extractions), "
                     "(SELECT coalesce(sum(relationship_count), 0) FROM extractions), "
                     "(SELECT count(*) FROM entities), (SELECT count(*) FROM relationships), "
                     "(SELECT count(*) FROM communities), "
                     "(SELECT count(*) FROM reports WHERE status = 'ok'), "
                     "(SELECT count(*) FROM reports WHERE status = 'gap'), "
                     "(SELECT count(*) FROM llm_cache), (SELECT count(*) FROM runs), "
                     "(SELECT count(*) FROM reports WHERE status = 'ok' AND stale), "
                     "(SELECT count(*) FROM reports WHERE status = 'ok' AND generator = 'llm'), "
                     "(SELECT count(*) FROM extractions WHERE status = 'ok' AND "
                     "entity_count = 0), "
                     "(SELECT modularity FROM clusterings ORDER BY id DESC LIMIT 1)"));
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return Status::Internal("stats query returned no row");
    int col = 0;
    for (int64_t* field :
         {&s.documents, &s.chunks, &s.extractions_ok, &s.extractions_skipped, &s.entity_mentions,
          &s.relationship_mentions, &s.entities, &s.relationships, &s.communities, &s.reports_ok,
          &s.reports_gap, &s.cache_entries, &s.runs, &s.reports_stale, &s.reports_llm,
          &s.extractions_empty}) {
      *field = stmt.Int(col++);
    }
    s.modularity = stmt.OptDouble(col);
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt stmt,
        conn.Prepare("SELECT level, count(*) FROM communities GROUP BY level ORDER BY level"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      s.communities_per_level[stmt.Int(0)] = stmt.Int(1);
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt stmt,
        conn.Prepare("SELECT owner_kind, count(*) FROM embeddings GROUP BY owner_kind"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      s.embeddings_per_owner[stmt.Text(0)] = stmt.Int(1);
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt stmt,
        conn.Prepare("SELECT model, kind, count(*), sum(length(CAST(value AS BLOB))) "
                     "FROM llm_cache GROUP BY model, kind ORDER BY model, kind"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      s.cache_by_model.push_back({stmt.Text(0), stmt.Text(1), stmt.Int(2), stmt.Int(3)});
    }
  }
  GRAG_ASSIGN_OR_RETURN(int64_t pages, conn.QueryInt("PRAGMA page_count"));
  GRAG_ASSIGN_OR_RETURN(int64_t free_pages, conn.QueryInt("PRAGMA freelist_count"));
  GRAG_ASSIGN_OR_RETURN(int64_t page_size, conn.QueryInt("PRAGMA page_size"));
  s.file_bytes = (pages - free_pages) * page_size;
  s.free_bytes = free_pages * page_size;
  {
    // Every page of the file by the table or index it belongs to (SQLite's dbstat, built into
    // Debian's SQLite): one pass over the file. An index counts for its table; the full-text
    // index's shadow tables count as chunks_fts.
    Result<sqlite::Stmt> stmt = conn.Prepare(
        "SELECT CASE WHEN m.tbl_name LIKE 'chunks_fts%' THEN 'chunks_fts' "
        "ELSE coalesce(m.tbl_name, d.name) END, m.type = 'index', sum(d.pgsize) "
        "FROM dbstat('main', 1) d LEFT JOIN sqlite_master m ON m.name = d.name "
        "GROUP BY 1, 2");
    if (!stmt.ok()) {
      Log(LogLevel::kDebug, "store", "no space by table: " + stmt.status().message());
      return s;
    }
    std::map<std::string, TableSpace> by_table;
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt->Step());
      if (!row) break;
      TableSpace& t = by_table[stmt->Text(0)];
      t.table = stmt->Text(0);
      (stmt->Int(1) != 0 ? t.index_bytes : t.bytes) += stmt->Int(2);
    }
    for (auto& [name, t] : by_table) s.space.push_back(std::move(t));
    std::sort(s.space.begin(), s.space.end(), [](const TableSpace& a, const TableSpace& b) {
      return a.bytes + a.index_bytes > b.bytes + b.index_bytes;
    });
  }
  return s;
}

Result<StoreInfo> SqliteStore::Info() {
  auto lock = impl_->Lock();
  sqlite::Connection& conn = impl_->conn;
  StoreInfo info;
  info.path = impl_->path;
  GRAG_ASSIGN_OR_RETURN(info.schema_version, conn.QueryInt("PRAGMA user_version"));
  info.max_schema_version = LatestSchemaVersion();
  GRAG_ASSIGN_OR_RETURN(info.journal_mode, conn.QueryText("PRAGMA journal_mode"));
  GRAG_ASSIGN_OR_RETURN(int64_t fk, conn.QueryInt("PRAGMA foreign_keys"));
  info.foreign_keys = fk == 1;
  GRAG_ASSIGN_OR_RETURN(info.synchronous, conn.QueryInt("PRAGMA synchronous"));
  GRAG_ASSIGN_OR_RETURN(info.busy_timeout_ms, conn.QueryInt("PRAGMA busy_timeout"));
  info.sqlite_version = sqlite3_libversion();
  GRAG_ASSIGN_OR_RETURN(info.query_images, store::ListQueryImages(conn));
  return info;
}

Status SqliteStore::CheckIntegrity() {
  auto lock = impl_->Lock();
  sqlite::Connection& conn = impl_->conn;
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt, conn.Prepare("PRAGMA integrity_check(10)"));
    std::string problems;
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      std::string line = stmt.Text(0);
      if (line == "ok") continue;
      problems += (problems.empty() ? "" : "; ") + line;
    }
    if (!problems.empty()) return Status::Corruption(impl_->path + ": " + problems);
  }
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt, conn.Prepare("PRAGMA foreign_key_check"));
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (row) {
      return Status::Corruption(impl_->path + ": a row of table " + stmt.Text(0) +
                                " points at a missing row of " + stmt.Text(2));
    }
  }
  Status fts = conn.Exec("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')");
  if (!fts.ok()) {
    return Status::Corruption(impl_->path +
                              ": full-text index out of step with chunks: " + fts.message());
  }
  return Status::Ok();
}

Result<IntegrityReport> SqliteStore::Check(int max_per_check) {
  auto lock = impl_->Lock();
  sqlite::Connection& conn = impl_->conn;
  IntegrityReport report;
  const std::string limit = std::to_string(std::max(1, max_per_check));
  auto add = [&](const std::string& check, const std::string& detail) {
    report.problems.push_back({check, detail});
  };
  // Runs `sql` and reports each row's first column as a problem of `check`.
  auto rows = [&](const std::string& check, const std::string& sql) {
    report.checks_run.push_back(check);
    auto stmt = conn.Prepare(sql);
    if (!stmt.ok()) {
      add(check, "could not run: " + stmt.status().message());
      return;
    }
    while (true) {
      auto row = stmt->Step();
      if (!row.ok()) {
        add(check, "could not finish: " + row.status().message());
        return;
      }
      if (!*row) return;
      add(check, stmt->Text(0));
    }
  };
  {
    report.checks_run.push_back("sqlite");
    auto stmt = conn.Prepare("PRAGMA integrity_check(" + limit + ")");
    if (!stmt.ok()) {
      add("sqlite", stmt.status().message());
      return report;  // nothing else can be read either
    }
    while (true) {
      auto row = stmt->Step();
      if (!row.ok()) {
        add("sqlite", row.status().message());
        break;
      }
      if (!*row) break;
      std::istringstream lines(stmt->Text(0));
      for (std::string line; std::getline(lines, line);) {
        if (line == "ok" || line.empty() || line.starts_with("***")) continue;
        add("sqlite", line);
      }
    }
  }
  report.checks_run.push_back("foreign_keys");
  {
    auto stmt = conn.Prepare("PRAGMA foreign_key_check");
    int n = 0;
    if (stmt.ok()) {
      while (n < max_per_check) {
        auto row = stmt->Step();
        if (!row.ok()) {
          add("foreign_keys", "could not finish: " + row.status().message());
          break;
        }
        if (!*row) break;
        add("foreign_keys", "row " + stmt->Text(1) + " of table " + stmt->Text(0) +
                                " points at a missing row of " + stmt->Text(2));
        ++n;
      }
    } else {
      add("foreign_keys", "could not run: " + stmt.status().message());
    }
  }
  if (impl_->read_only) {
    // FTS5 checks itself through an INSERT, which a read-only connection cannot run.
    report.notes.push_back("fts: not checked (the index is open read-only)");
  } else {
    report.checks_run.push_back("fts");
    Status fts = conn.Exec("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')");
    if (!fts.ok()) {
      add("fts", "the full-text index is out of step with the chunks: " + fts.message());
    }
  }
  rows(
      "orphans",
      "SELECT 'vector of entity ' || owner_id || ' which is gone' FROM embeddings "
      "WHERE owner_kind = 'entity' AND CAST(owner_id AS INTEGER) NOT IN (SELECT id FROM entities) "
      "UNION ALL SELECT 'vector of chunk ' || owner_id || ' which is gone' FROM embeddings "
      "WHERE owner_kind = 'chunk' AND owner_id NOT IN (SELECT id FROM chunks) "
      "UNION ALL SELECT 'vector of the report of community ' || owner_id || ' which is gone' "
      "FROM embeddings WHERE owner_kind = 'report' AND CAST(owner_id AS INTEGER) NOT IN "
      "(SELECT community_id FROM reports) "
      "UNION ALL SELECT 'entity ' || id || ' (' || name || ') is linked to no chunk' FROM entities "
      "WHERE id NOT IN (SELECT entity_id FROM entity_chunks) "
      "UNION ALL SELECT 'relationship ' || id || ' joins entity ' || source_id || ' to itself' "
      "FROM relationships WHERE source_id = target_id "
      "LIMIT " +
          limit);
  rows("communities",
       "SELECT 'community ' || id || ' has no members' FROM communities "
       "WHERE id NOT IN (SELECT community_id FROM community_members) "
       "UNION ALL SELECT 'community ' || c.id || ' is at level ' || c.level || ' under community ' "
       "|| p.id || ' at level ' || p.level FROM communities c JOIN communities p "
       "ON c.parent_id = p.id WHERE c.level != p.level + 1 "
       "UNION ALL SELECT 'community ' || id || ' at level ' || level || ' has no parent' "
       "FROM communities WHERE level > 0 AND parent_id IS NULL "
       "UNION ALL SELECT 'entity ' || id || ' (' || name || ') is in no community' FROM entities "
       "WHERE EXISTS (SELECT 1 FROM communities) "
       // An interrupted update leaves new entities for the next run to place: not damage.
       "AND (SELECT status FROM runs ORDER BY id DESC LIMIT 1) IS 'ok' AND id NOT IN "
       "(SELECT m.entity_id FROM community_members m JOIN communities c ON c.id = m.community_id "
       "WHERE c.level = 0) "
       "LIMIT " +
           limit);
  report.checks_run.push_back("query_images");
  {
    Result<std::vector<std::string>> images = store::CheckQueryImages(conn);
    if (!images.ok()) {
      add("query_images", "could not run: " + images.status().message());
    } else {
      for (const std::string& problem : *images) add("query_images", problem);
    }
  }
  // Sound: later opens need not screen these files again (store/verify.h).
  if (report.ok()) impl_->stamp.enabled = true;
  return report;
}

}  // namespace grag
