// Store: embeddings, the LLM reply cache and run state.
#include <bit>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "grag/log.h"
#include "grag/store.h"
#include "json_fields.h"
#include "names.h"
#include "store_impl.h"

namespace grag {

// Vectors are stored as the raw bytes of float32 values, little-endian, which is the native
// layout on every platform grag builds for; these guard that assumption.
static_assert(sizeof(float) == 4, "embeddings are stored as 4-byte floats");
static_assert(std::endian::native == std::endian::little,
              "embeddings are stored little-endian; add byte swapping for this platform");

// ---------------------------------------------------------------- embeddings

namespace {

std::string SpaceName(EmbeddingOwner owner, std::string_view model, int64_t dimension) {
  return std::string(EmbeddingOwnerName(owner)) + " embeddings of model " + std::string(model) +
         " (dimension " + std::to_string(dimension) + ")";
}

EmbeddingRecord ReadEmbedding(const sqlite::Stmt& stmt) {
  // Columns: owner_kind, owner_id, model, dimension, vector, input_hash.
  EmbeddingRecord r;
  r.owner = store::ParseEmbeddingOwner(stmt.Text(0));
  r.owner_id = stmt.Text(1);
  r.model = stmt.Text(2);
  std::string_view bytes = stmt.Blob(4);
  r.vector.resize(bytes.size() / sizeof(float));
  if (!r.vector.empty()) std::memcpy(r.vector.data(), bytes.data(), r.vector.size() * 4);
  r.input_hash = stmt.Text(5);
  return r;
}

constexpr std::string_view kEmbeddingColumns =
    "owner_kind, owner_id, model, dimension, vector, input_hash";

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
                   "input_hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (owner_kind, "
                   "owner_id) DO UPDATE SET model = excluded.model, dimension = "
                   "excluded.dimension, vector = excluded.vector, input_hash = "
                   "excluded.input_hash, created_at = " GRAG_SQL_NOW));
  for (const EmbeddingRecord& r : records) {
    insert.BindAll(EmbeddingOwnerName(r.owner), r.owner_id, r.model,
                   static_cast<int64_t>(r.vector.size()));
    insert.BindBlob(5, r.vector.data(), r.vector.size() * sizeof(float));
    insert.Bind(6, r.input_hash);
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
  return std::optional<EmbeddingRecord>(ReadEmbedding(stmt));
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
    out.push_back(ReadEmbedding(stmt));
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
    out.emplace(stmt.Text(0), stmt.Text(1));
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

// ---------------------------------------------------------------- reply cache

KeyValueCache& SqliteStore::ReplyCache() { return impl_->reply_cache; }

std::optional<std::string> ReplyCacheTable::Get(std::string_view key) {
  {
    std::lock_guard lock(pending_mu_);
    if (auto it = pending_.find(std::string(key)); it != pending_.end()) return it->second.value;
  }
  Result<ReadHandle> read = impl_->Read();
  Result<sqlite::Stmt> stmt =
      read.ok() ? read->conn().Prepare("SELECT value FROM llm_cache WHERE key = ?")
                : Result<sqlite::Stmt>(read.status());
  Result<bool> found = stmt.ok() ? stmt->BindAll(key).Step() : Result<bool>(stmt.status());
  if (!found.ok()) {
    // A cache that cannot be read costs an LLM call, not the run.
    Log(LogLevel::kWarn, "store", "reply cache read failed: " + found.status().ToString());
    return std::nullopt;
  }
  if (!*found) return std::nullopt;
  return stmt->Text(0);
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
    return stmt.BindAll(key, value, model, kind).Run();
  };
  auto committed = [this, key = std::string(key), generation] {
    std::lock_guard lock(pending_mu_);
    if (auto it = pending_.find(key); it != pending_.end() && it->second.generation == generation) {
      pending_.erase(it);
    }
  };
  return impl_->WriteDeferred({std::move(write), std::move(committed)});
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
