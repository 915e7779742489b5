// Store: embeddings, the LLM reply cache and run state.
#include <bit>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "grag/log.h"
#include "grag/store.h"
#include "compressed_text.h"
#include "json_fields.h"
#include "names.h"
#include "reply_codec.h"
#include "store_impl.h"
#include "vector_codec.h"

namespace grag {

// Vectors are stored as the raw bytes of float32 (or float16, or int8 with a float32 scale)
// values, little-endian, which is the native layout on every platform grag builds for; these
// guard that assumption.
static_assert(sizeof(float) == 4, "embeddings are stored as 4-byte floats");
static_assert(std::endian::native == std::endian::little,
              "embeddings are stored little-endian; add byte swapping for this platform");

// ---------------------------------------------------------------- embeddings

namespace {

std::string SpaceName(EmbeddingOwner owner, std::string_view model, int64_t dimension) {
  return std::string(EmbeddingOwnerName(owner)) + " embeddings of model " + std::string(model) +
         " (dimension " + std::to_string(dimension) + ")";
}

Result<EmbeddingRecord> ReadEmbedding(const sqlite::Stmt& stmt) {
  // Columns: kEmbeddingColumns.
  EmbeddingRecord r;
  r.owner = store::ParseEmbeddingOwner(stmt.Text(0));
  r.owner_id = stmt.Text(1);
  r.model = stmt.Text(2);
  r.encoding = ParseVectorEncoding(stmt.Text(6)).value_or(VectorEncoding::kF32);
  r.vector.resize(static_cast<size_t>(std::max<int64_t>(0, stmt.Int(3))));
  GRAG_RETURN_IF_ERROR(
      store::DecodeVector(stmt.Blob(4), r.encoding, r.vector)
          .WithContext("the embedding of " + std::string(stmt.Text(0)) + " " + r.owner_id));
  r.input_hash = sqlite::HashText(stmt, 5);
  return r;
}

constexpr std::string_view kEmbeddingColumns =
    "owner_kind, owner_id, model, dimension, vector, input_hash, encoding";

}  // namespace

Status SqliteStore::PutEmbeddings(const std::vector<EmbeddingRecord>& records) {
  // The space (model, dimension) each owner kind gets from this batch.
  std::map<EmbeddingOwner, std::pair<std::string, int64_t>> batch_space;
  for (const EmbeddingRecord& r : records) {
    if (r.owner_id.empty() || r.model.empty() || r.vector.empty()) {
      return Status::InvalidArgument("an embedding needs an owner id, a model and a vector");
    }
    const int64_t dim = static_cast<int64_t>(r.vector.size());
    auto [it, added] = batch_space.try_emplace(r.owner, r.model, dim);
    if (!added && (it->second.first != r.model || it->second.second != dim)) {
      return Status::InvalidArgument("one batch mixes " +
                                     SpaceName(r.owner, it->second.first, it->second.second) +
                                     " with " + SpaceName(r.owner, r.model, dim));
    }
  }
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  sqlite::Connection& conn = impl_->conn;
  for (const auto& [owner, space] : batch_space) {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt stmt,
        conn.Prepare("SELECT model, dimension FROM embeddings WHERE owner_kind = ? LIMIT 1"));
    GRAG_ASSIGN_OR_RETURN(bool found, stmt.BindAll(EmbeddingOwnerName(owner)).Step());
    if (found && (stmt.Text(0) != space.first || stmt.Int(1) != space.second)) {
      return Status::InvalidArgument(
          "the index holds " + SpaceName(owner, stmt.Text(0), stmt.Int(1)) + "; refusing " +
          SpaceName(owner, space.first, space.second) +
          ": vectors of different models cannot be compared (delete the old ones to switch)");
    }
  }
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt insert,
      conn.Prepare("INSERT INTO embeddings (owner_kind, owner_id, model, dimension, vector, "
                   "input_hash, encoding) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT "
                   "(owner_kind, owner_id) DO UPDATE SET model = excluded.model, dimension = "
                   "excluded.dimension, vector = excluded.vector, input_hash = "
                   "excluded.input_hash, encoding = excluded.encoding"));
  for (const EmbeddingRecord& r : records) {
    insert.BindAll(EmbeddingOwnerName(r.owner), r.owner_id, r.model,
                   static_cast<int64_t>(r.vector.size()));
    const std::string bytes = store::EncodeVector(r.vector, r.encoding);
    insert.BindBlob(5, bytes.data(), bytes.size());
    sqlite::BindHash(insert, 6, r.input_hash);  // as bytes: half the room
    insert.Bind(7, VectorEncodingName(r.encoding));
    GRAG_RETURN_IF_ERROR(insert.Run());
  }
  return tx.Commit();
}

Result<std::optional<EmbeddingRecord>> SqliteStore::GetEmbedding(EmbeddingOwner owner,
                                                                 std::string_view owner_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        read.conn().Prepare("SELECT " + std::string(kEmbeddingColumns) +
                                            " FROM embeddings WHERE owner_kind = ? AND "
                                            "owner_id = ?"));
  GRAG_ASSIGN_OR_RETURN(bool found, stmt.BindAll(EmbeddingOwnerName(owner), owner_id).Step());
  if (!found) return std::optional<EmbeddingRecord>();
  GRAG_ASSIGN_OR_RETURN(EmbeddingRecord r, ReadEmbedding(stmt));
  return std::optional<EmbeddingRecord>(std::move(r));
}

Result<std::vector<EmbeddingRecord>> SqliteStore::ListEmbeddings(EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        read.conn().Prepare("SELECT " + std::string(kEmbeddingColumns) +
                                            " FROM embeddings WHERE owner_kind = ? "
                                            "ORDER BY owner_id"));
  stmt.BindAll(EmbeddingOwnerName(owner));
  std::vector<EmbeddingRecord> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    GRAG_ASSIGN_OR_RETURN(EmbeddingRecord r, ReadEmbedding(stmt));
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::map<std::string, std::string>> SqliteStore::ListEmbeddingHashes(EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT owner_id, input_hash FROM embeddings WHERE owner_kind = ?"));
  stmt.BindAll(EmbeddingOwnerName(owner));
  std::map<std::string, std::string> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.emplace(stmt.Text(0), sqlite::HashText(stmt, 1));
  }
  return out;
}

Result<std::optional<EmbeddingSpace>> SqliteStore::GetEmbeddingSpace(EmbeddingOwner owner) {
  // The schema's triggers keep one model and dimension per owner kind, so one row tells them;
  // the count comes from the primary key's index, without reading the vectors (a GROUP BY over
  // the rows read every vector: 75 ms for 100k of them).
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT model, dimension FROM embeddings WHERE owner_kind = ? LIMIT 1"));
  GRAG_ASSIGN_OR_RETURN(bool found, stmt.BindAll(EmbeddingOwnerName(owner)).Step());
  if (!found) return std::optional<EmbeddingSpace>();
  EmbeddingSpace space{stmt.Text(0), stmt.Int(1), 0};
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt count,
      read.conn().Prepare("SELECT count(*) FROM embeddings WHERE owner_kind = ?"));
  GRAG_ASSIGN_OR_RETURN(bool counted, count.BindAll(EmbeddingOwnerName(owner)).Step());
  if (counted) space.count = count.Int(0);
  return std::optional<EmbeddingSpace>(std::move(space));
}

Result<int64_t> SqliteStore::DeleteEmbeddings(EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        impl_->conn.Prepare("DELETE FROM embeddings WHERE owner_kind = ?"));
  GRAG_RETURN_IF_ERROR(stmt.BindAll(EmbeddingOwnerName(owner)).Run());
  const int64_t n = sqlite3_changes64(impl_->conn.get());
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return n;
}

Result<int64_t> SqliteStore::DeleteEmbeddingsOf(EmbeddingOwner owner,
                                                const std::vector<std::string>& owner_ids) {
  if (owner_ids.empty()) return int64_t{0};
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      impl_->conn.Prepare("DELETE FROM embeddings WHERE owner_kind = ? AND owner_id = ?"));
  int64_t n = 0;
  for (const std::string& id : owner_ids) {
    GRAG_RETURN_IF_ERROR(stmt.BindAll(EmbeddingOwnerName(owner), id).Run());
    n += sqlite3_changes64(impl_->conn.get());
  }
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return n;
}

Result<int64_t> SqliteStore::ReencodeEmbeddings(VectorEncoding encoding) {
  if (impl_->read_only) return int64_t{0};
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  sqlite::Connection& conn = impl_->conn;
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt select,
                        conn.Prepare("SELECT " + std::string(kEmbeddingColumns) +
                                     " FROM embeddings WHERE encoding <> ?"));
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt update,
                        conn.Prepare("UPDATE embeddings SET vector = ?, encoding = ? WHERE "
                                     "owner_kind = ? AND owner_id = ?"));
  select.BindAll(VectorEncodingName(encoding));
  // Read first, then write: the update would move rows under the running select.
  struct Recoded {
    std::string kind, id, bytes;
  };
  std::vector<Recoded> recoded;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, select.Step());
    if (!row) break;
    GRAG_ASSIGN_OR_RETURN(EmbeddingRecord r, ReadEmbedding(select));
    recoded.push_back({select.Text(0), select.Text(1), store::EncodeVector(r.vector, encoding)});
  }
  for (const Recoded& r : recoded) {
    update.BindBlob(1, r.bytes.data(), r.bytes.size());
    update.Bind(2, VectorEncodingName(encoding));
    update.Bind(3, r.kind);
    update.Bind(4, r.id);
    GRAG_RETURN_IF_ERROR(update.Run());
  }
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return static_cast<int64_t>(recoded.size());
}

// ---------------------------------------------------------------- reply cache

KeyValueCache& SqliteStore::ReplyCache() { return impl_->reply_cache; }

std::optional<std::string> ReplyCacheTable::Get(std::string_view key) {
  {
    std::lock_guard lock(pending_mu_);
    if (auto it = pending_.find(std::string(key)); it != pending_.end()) return it->second.value;
  }
  Result<ReadHandle> read = impl_->Read();
  Result<sqlite::Stmt> stmt =
      read.ok()
          ? read->conn().Prepare("SELECT value FROM llm_cache WHERE key = ?1 OR key = ?2 LIMIT 1")
          : Result<sqlite::Stmt>(read.status());
  // The key as its bytes (Put), or as the hex text older builds wrote.
  if (stmt.ok()) {
    stmt->BindAll(std::nullopt, key);
    sqlite::BindHash(*stmt, 1, key);
  }
  Result<bool> found = stmt.ok() ? stmt->Step() : Result<bool>(stmt.status());
  if (!found.ok()) {
    // A cache that cannot be read costs an LLM call, not the run.
    Log(LogLevel::kWarn, "store", "reply cache read failed: " + found.status().ToString());
    return std::nullopt;
  }
  if (!*found) return std::nullopt;
  // Written plain (short, or by an older build) or compressed.
  Result<std::string> reply = sqlite::CompressibleText(*stmt, 0);
  if (!reply.ok()) {
    Log(LogLevel::kWarn, "store", "reply cache entry unreadable: " + reply.status().ToString());
    return std::nullopt;
  }
  return std::move(*reply);
}

Status ReplyCacheTable::Put(std::string_view key, std::string_view value, std::string_view model,
                            std::string_view kind) {
  if (impl_->read_only) return Status::Ok();  // a read-only index answers without caching
  uint64_t generation = 0;
  {
    std::lock_guard lock(pending_mu_);
    generation = ++generations_;
    pending_[std::string(key)] = Pending{std::string(value), generation};
  }
  auto write = [impl = impl_, key = std::string(key), value = std::string(value),
                model = std::string(model), kind = std::string(kind)]() -> Status {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt stmt,
        impl->conn.Prepare("INSERT INTO llm_cache (key, value, model, kind) VALUES (?, ?, ?, ?) "
                           "ON CONFLICT (key) DO UPDATE SET value = excluded.value, model = "
                           "excluded.model, kind = excluded.kind, created_at = " GRAG_SQL_NOW));
    stmt.BindAll(std::nullopt, std::nullopt, model, kind);
    sqlite::BindHash(stmt, 1, key);  // a SHA-256 in hex: as its 32 bytes
    // Compressed where that saves room: a reply is JSON, a third of its size as zlib.
    sqlite::BindCompressible(stmt, 2, value);
    return stmt.Run();
  };
  auto committed = [this, key = std::string(key), generation] {
    std::lock_guard lock(pending_mu_);
    if (auto it = pending_.find(key); it != pending_.end() && it->second.generation == generation) {
      pending_.erase(it);
    }
  };
  return impl_->WriteDeferred({std::move(write), std::move(committed)});
}

Result<CachePruneResult> SqliteStore::PruneReplyCache(const CachePruneOptions& options) {
  if (impl_->read_only) return Status::InvalidArgument("the index is open read-only");
  GRAG_RETURN_IF_ERROR(FlushDeferred());
  CachePruneResult out;
  auto file_bytes = [&]() -> Result<int64_t> {
    GRAG_ASSIGN_OR_RETURN(int64_t pages, impl_->conn.QueryInt("PRAGMA page_count"));
    GRAG_ASSIGN_OR_RETURN(int64_t page_size, impl_->conn.QueryInt("PRAGMA page_size"));
    return pages * page_size;
  };
  {
    GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
    sqlite::Connection& conn = impl_->conn;
    GRAG_ASSIGN_OR_RETURN(out.file_bytes_before, file_bytes());
    // Which entries: those of one kind, or those written before a time.
    const bool by_kind = !options.kind.empty();
    const std::string where = by_kind ? "kind = ?" : "created_at < ?";
    out.before = options.before;
    if (!by_kind && out.before.empty()) {
      GRAG_ASSIGN_OR_RETURN(
          sqlite::Stmt last,
          conn.Prepare("SELECT started_at FROM runs WHERE command = 'index' AND status = 'ok' "
                       "ORDER BY id DESC LIMIT 1"));
      GRAG_ASSIGN_OR_RETURN(bool found, last.Step());
      if (found) out.before = last.Text(0);
    }
    const std::string& which = by_kind ? options.kind : out.before;
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt count,
        conn.Prepare("SELECT count(*), coalesce(sum(length(CAST(value AS BLOB))), 0), "
                     "(SELECT count(*) FROM llm_cache) FROM llm_cache WHERE " +
                     where));
    GRAG_ASSIGN_OR_RETURN(bool row, count.BindAll(which).Step());
    if (row && !which.empty()) {
      out.entries = count.Int(0);
      out.value_bytes = count.Int(1);
    }
    out.entries_left = (row ? count.Int(2) : 0) - out.entries;
    if (options.dry_run || out.entries == 0) {
      out.file_bytes_after = out.file_bytes_before;
      return out;  // the transaction rolls back: nothing was written
    }
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt remove,
                          conn.Prepare("DELETE FROM llm_cache WHERE " + where));
    GRAG_RETURN_IF_ERROR(remove.BindAll(which).Run());
    GRAG_RETURN_IF_ERROR(tx.Commit());
  }
  if (!options.compact) {
    out.file_bytes_after = out.file_bytes_before;  // freed pages stay in the file, for reuse
    return out;
  }
  // The file shrinks only when its free pages are given back; VACUUM rewrites it whole.
  GRAG_ASSIGN_OR_RETURN(auto sizes, Compact());
  out.file_bytes_after = sizes ? sizes->second : out.file_bytes_before;
  return out;
}

Result<std::optional<Store::FileSpace>> SqliteStore::GetFileSpace() {
  auto lock = impl_->Lock();
  GRAG_ASSIGN_OR_RETURN(int64_t pages, impl_->conn.QueryInt("PRAGMA page_count"));
  GRAG_ASSIGN_OR_RETURN(int64_t free_pages, impl_->conn.QueryInt("PRAGMA freelist_count"));
  GRAG_ASSIGN_OR_RETURN(int64_t page_size, impl_->conn.QueryInt("PRAGMA page_size"));
  GRAG_ASSIGN_OR_RETURN(
      int64_t requested,
      impl_->conn.QueryInt("SELECT count(*) FROM meta WHERE key = 'compact_requested'"));
  return std::optional<FileSpace>(
      FileSpace{pages * page_size, free_pages * page_size, requested > 0});
}

namespace {

// Values the store keeps compressed where that saves room, left plain by older builds or by
// schema 11's migration (SQL has no zlib): compressed here, in batches, before the VACUUM packs
// the pages.
Status PackPlainValues(SqliteStore::Impl& impl) {
  constexpr int64_t kBatch = 500;
  for (const auto& [table, column] : sqlite::kCompressedColumns) {
    int64_t after = 0;
    while (true) {
      GRAG_ASSIGN_OR_RETURN(Transaction tx, impl.Begin(true));
      GRAG_ASSIGN_OR_RETURN(
          sqlite::Stmt select,
          impl.conn.Prepare(fmt::format("SELECT rowid, {1} FROM {0} WHERE rowid > ? AND "
                                        "typeof({1}) = 'text' ORDER BY rowid LIMIT {2}",
                                        table, column, kBatch)));
      GRAG_ASSIGN_OR_RETURN(
          sqlite::Stmt update,
          impl.conn.Prepare(fmt::format("UPDATE {0} SET {1} = ? WHERE rowid = ?", table, column)));
      select.BindAll(after);
      std::vector<std::pair<int64_t, std::string>> packed;
      int64_t rows = 0;
      while (true) {
        GRAG_ASSIGN_OR_RETURN(bool row, select.Step());
        if (!row) break;
        ++rows;
        after = select.Int(0);
        if (std::optional<std::string> z = store::CompressReply(select.TextView(1))) {
          packed.emplace_back(after, std::move(*z));
        }
      }
      for (const auto& [rowid, bytes] : packed) {
        update.BindBlob(1, bytes.data(), bytes.size());
        update.Bind(2, rowid);
        GRAG_RETURN_IF_ERROR(update.Run());
      }
      GRAG_RETURN_IF_ERROR(tx.Commit());
      if (rows < kBatch) break;
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::optional<std::pair<int64_t, int64_t>>> SqliteStore::Compact() {
  if (impl_->read_only) return Status::InvalidArgument("the index is open read-only");
  GRAG_RETURN_IF_ERROR(FlushDeferred());
  GRAG_ASSIGN_OR_RETURN(std::optional<FileSpace> before, GetFileSpace());
  GRAG_RETURN_IF_ERROR(PackPlainValues(*impl_).WithContext("compressing plain values"));
  auto lock = impl_->Lock();
  GRAG_RETURN_IF_ERROR(impl_->conn.Exec("DELETE FROM meta WHERE key = 'compact_requested'"));
  GRAG_RETURN_IF_ERROR(impl_->conn.Exec("VACUUM").WithContext("giving the room back (VACUUM)"));
  GRAG_RETURN_IF_ERROR(impl_->conn.Exec("PRAGMA wal_checkpoint(TRUNCATE)"));
  GRAG_ASSIGN_OR_RETURN(int64_t pages, impl_->conn.QueryInt("PRAGMA page_count"));
  GRAG_ASSIGN_OR_RETURN(int64_t page_size, impl_->conn.QueryInt("PRAGMA page_size"));
  return std::optional<std::pair<int64_t, int64_t>>(
      std::make_pair(before->file_bytes, pages * page_size));
}

// ---------------------------------------------------------------- runs

namespace {

constexpr std::string_view kRunColumns =
    "id, command, status, stage, message, counters, started_at, finished_at";

RunRecord ReadRun(const sqlite::Stmt& stmt) {
  RunRecord r;
  r.id = stmt.Int(0);
  r.command = stmt.Text(1);
  r.status = store::ParseRunStatus(stmt.Text(2));
  r.stage = stmt.Text(3);
  r.message = stmt.Text(4);
  r.counters = store::CountsFromJson(stmt.Text(5));
  r.started_at = stmt.Text(6);
  r.finished_at = stmt.Text(7);
  return r;
}

}  // namespace

Result<int64_t> SqliteStore::BeginRun(std::string_view command) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  sqlite::Connection& conn = impl_->conn;
  GRAG_RETURN_IF_ERROR(
      conn.Exec("UPDATE runs SET status = 'interrupted', finished_at = " GRAG_SQL_NOW
                " WHERE status = 'running'"));
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt insert,
      conn.Prepare("INSERT INTO runs (command, status) VALUES (?, 'running') RETURNING id"));
  GRAG_ASSIGN_OR_RETURN(bool row, insert.BindAll(command).Step());
  if (!row) return Status::Internal("INSERT ... RETURNING gave no row");
  const int64_t id = insert.Int(0);
  GRAG_RETURN_IF_ERROR(insert.Run());
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return id;
}

Status SqliteStore::UpdateRun(int64_t run_id, std::string_view stage,
                              const std::map<std::string, int64_t>& counters) {
  auto lock = impl_->Lock();
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      impl_->conn.Prepare("UPDATE runs SET stage = CASE WHEN ?2 = '' THEN stage ELSE ?2 END, "
                          "counters = json_patch(counters, ?3) WHERE id = ?1"));
  GRAG_RETURN_IF_ERROR(stmt.BindAll(run_id, stage, store::CountsToJson(counters)).Run());
  if (sqlite3_changes(impl_->conn.get()) == 0) {
    return Status::NotFound("no run " + std::to_string(run_id));
  }
  return Status::Ok();
}

Status SqliteStore::FinishRun(int64_t run_id, RunStatus status, std::string_view message) {
  if (status == RunStatus::kRunning) {
    return Status::InvalidArgument("a run cannot finish as running");
  }
  auto lock = impl_->Lock();
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      impl_->conn.Prepare("UPDATE runs SET status = ?2, message = ?3, finished_at = " GRAG_SQL_NOW
                          " WHERE id = ?1"));
  GRAG_RETURN_IF_ERROR(stmt.BindAll(run_id, RunStatusName(status), message).Run());
  if (sqlite3_changes(impl_->conn.get()) == 0) {
    return Status::NotFound("no run " + std::to_string(run_id));
  }
  return Status::Ok();
}

Result<std::optional<RunRecord>> SqliteStore::GetRun(int64_t run_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT " + std::string(kRunColumns) + " FROM runs WHERE id = ?"));
  GRAG_ASSIGN_OR_RETURN(bool found, stmt.BindAll(run_id).Step());
  if (!found) return std::optional<RunRecord>();
  return std::optional<RunRecord>(ReadRun(stmt));
}

Result<std::vector<RunRecord>> SqliteStore::ListRuns(int64_t limit) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        read.conn().Prepare("SELECT " + std::string(kRunColumns) +
                                            " FROM runs ORDER BY id DESC LIMIT ?"));
  stmt.BindAll(limit);
  std::vector<RunRecord> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back(ReadRun(stmt));
  }
  return out;
}

Status SqliteStore::SetStageProgress(int64_t run_id, const StageProgress& p) {
  if (p.stage.empty()) return Status::InvalidArgument("stage progress needs a stage name");
  auto lock = impl_->Lock();
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      impl_->conn.Prepare("INSERT INTO run_stages (run_id, stage, status, done, total, "
                          "checkpoint) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, stage) "
                          "DO UPDATE SET status = excluded.status, done = excluded.done, "
                          "total = excluded.total, checkpoint = excluded.checkpoint, "
                          "updated_at = " GRAG_SQL_NOW));
  Status st =
      stmt.BindAll(run_id, p.stage, store::StageStatusName(p.status), p.done, p.total, p.checkpoint)
          .Run();
  return st.ok() ? st : st.WithContext("progress of run " + std::to_string(run_id));
}

Result<std::vector<StageProgress>> SqliteStore::ListStageProgress(int64_t run_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT stage, status, done, total, checkpoint, updated_at FROM "
                          "run_stages WHERE run_id = ? ORDER BY rowid"));
  stmt.BindAll(run_id);
  std::vector<StageProgress> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    StageProgress& p = out.emplace_back();
    p.stage = stmt.Text(0);
    p.status = store::ParseStageStatus(stmt.Text(1));
    p.done = stmt.Int(2);
    p.total = stmt.Int(3);
    p.checkpoint = stmt.Text(4);
    p.updated_at = stmt.Text(5);
  }
  return out;
}

Result<std::map<std::string, int64_t>> SqliteStore::TotalRunCounters() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT j.key, sum(j.value) FROM runs, json_each(runs.counters) AS j "
                          "WHERE j.type = 'integer' GROUP BY j.key ORDER BY j.key"));
  std::map<std::string, int64_t> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out[stmt.Text(0)] = stmt.Int(1);
  }
  return out;
}

}  // namespace grag
