// PostgresStore: every Store method over one libpq connection (see postgres_store.h).
#include "postgres_store_internal.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "../community_checks.h"
#include "../group_commit.h"
#include "../json_fields.h"
#include "../names.h"
#include "../neighbourhood.h"
#include "../table_sql.h"
#include "grag/hash.h"
#include "grag/log.h"
#include "grag/utf8_sequence.h"
#include "postgres_schema.h"

namespace grag::store::postgres_internal {

namespace {

// Advisory lock keys (two int4): "grag" in ASCII, then what the lock is for.
constexpr int64_t kLockClass = 0x67726167;
constexpr int64_t kWriterLock = 1;
constexpr int64_t kMigrationLock = 2;

// Length of the valid UTF-8 sequence at s[i], 0 when the byte there starts none.
size_t Utf8Length(std::string_view s, size_t i) {
  return Utf8SequenceLength(reinterpret_cast<const unsigned char*>(s.data()), i, s.size());
}

}  // namespace

// Words of a plain-text query: runs of ASCII letters and digits and of non-ASCII characters,
// as the SQLite store splits them, so no input means anything but words. Bytes that are not
// UTF-8 separate words (PostgreSQL refuses them in text).
std::vector<std::string> QueryWords(std::string_view query, size_t max_words) {
  // Length of the word character at i, 0 for a separator.
  auto word_char = [&](size_t i) -> size_t {
    const auto ch = static_cast<unsigned char>(query[i]);
    if (ch >= 0x80) return Utf8Length(query, i);
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ? 1 : 0;
  };
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  size_t i = 0;
  while (i < query.size() && out.size() < max_words) {
    while (i < query.size() && word_char(i) == 0) ++i;
    const size_t start = i;
    for (size_t n = 0; i < query.size() && (n = word_char(i)) > 0;) i += n;
    if (i == start) break;
    std::string word(query.substr(start, i - start));
    if (seen.insert(word).second) out.push_back(std::move(word));
  }
  return out;
}

std::vector<std::string> TextColumn(const Rows& rows) {
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) out.push_back(rows.Text(i, 0));
  return out;
}

// ---------------------------------------------------------------- transactions

Result<Transaction> PostgresStore::BeginTx(bool write) {
  std::unique_lock lock(mu_);
  const int depth = open_transactions();
  Status st;
  if (depth == 0) {
    st = conn_.Exec(write ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  } else if (conn_.InFailedTransaction()) {
    st = Status::Internal("the enclosing transaction failed and must be rolled back");
  } else {
    st = conn_.Exec("SAVEPOINT sp" + std::to_string(depth));
  }
  if (!st.ok()) return st.WithContext("beginning a transaction on " + redacted_);
  if (depth == 0) tx_thread_ = std::this_thread::get_id();
  Opened();
  return Transaction(this, std::move(lock), depth);
}

Status PostgresStore::FinishTransaction(int depth, bool commit) {
  // Called by Transaction with mu_ held and the transaction already counted out.
  if (depth == 0) tx_thread_ = std::thread::id();
  Status st;
  if (depth == 0) {
    if (!conn_.InTransaction()) {
      if (commit) st = Status::IoError("the transaction was lost (connection reset)");
    } else if (commit && conn_.InFailedTransaction()) {
      (void)conn_.Exec("ROLLBACK");
      st = Status::IoError("the transaction was rolled back after an earlier error");
    } else if (commit) {
      st = conn_.Exec("COMMIT");
      if (!st.ok() && conn_.InTransaction()) (void)conn_.Exec("ROLLBACK");
    } else {
      st = conn_.Exec("ROLLBACK");
    }
  } else {
    const std::string sp = "sp" + std::to_string(depth);
    if (commit && !conn_.InFailedTransaction()) {
      st = conn_.Exec("RELEASE SAVEPOINT " + sp);
    } else {
      st = conn_.Exec("ROLLBACK TO SAVEPOINT " + sp);
      if (st.ok()) st = conn_.Exec("RELEASE SAVEPOINT " + sp);
      if (st.ok() && commit) st = Status::IoError("the savepoint was rolled back after an error");
    }
  }
  return st;
}

Status PostgresStore::WriteGrouped(const std::function<Status()>& write) {
  {
    auto lock = Lock();
    if (open_transactions() > 0) return write();
  }
  return group_commit_.Run(write);
}

Result<Rows> PostgresStore::Write(std::string_view sql, const Args& args) {
  auto lock = Lock();
  if (open_transactions() == 0) return conn_.Query(sql, args);
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_ASSIGN_OR_RETURN(Rows rows, conn_.Query(sql, args));
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return rows;
}

Result<ReadHandle> PostgresStore::Read() {
  if (tx_thread_.load() == std::this_thread::get_id()) return ReadHandle(this, Lock());
  {
    std::unique_lock lock(pool_mu_);
    pool_cv_.wait(lock, [&] { return !idle_readers_.empty() || readers_open_ < kMaxReaders; });
    if (!idle_readers_.empty()) {
      std::unique_ptr<pq::Connection> reader = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return ReadHandle(this, std::move(reader));
    }
    ++readers_open_;
  }
  Result<pq::Connection> opened = pq::Connection::Open(url_, redacted_);
  Status st = opened.status();
  if (st.ok()) {
    st = opened->Exec(
        "SET default_transaction_read_only = on; SET application_name = 'grag reader'");
  }
  if (!st.ok()) {
    {
      std::lock_guard lock(pool_mu_);
      --readers_open_;
    }
    pool_cv_.notify_one();
    // The writer's connection still works: read there.
    Log(LogLevel::kDebug, "store",
        "opening a read connection: " + st.ToString() + "; reading via the writer's");
    return ReadHandle(this, Lock());
  }
  return ReadHandle(this, std::make_unique<pq::Connection>(std::move(opened).value()));
}

void PostgresStore::ReturnReader(std::unique_ptr<pq::Connection> reader) {
  {
    std::lock_guard lock(pool_mu_);
    if (reader != nullptr && pq::Pq().status(reader->get()) == CONNECTION_OK &&
        !reader->InTransaction()) {
      idle_readers_.push_back(std::move(reader));
    } else {
      --readers_open_;  // broken: the next reader opens a new one
    }
  }
  pool_cv_.notify_one();
}

ReadHandle::~ReadHandle() {
  if (reader_ == nullptr) {
    if (snapshot_.has_value() && snapshot_->active()) (void)snapshot_->Commit();
    return;
  }
  if (in_snapshot_) (void)reader_->Exec("COMMIT");
  store_->ReturnReader(std::move(reader_));
}

pq::Connection& ReadHandle::conn() { return reader_ ? *reader_ : store_->conn(); }

Status ReadHandle::BeginSnapshot() {
  if (reader_ == nullptr) {
    GRAG_ASSIGN_OR_RETURN(Transaction tx, store_->BeginRead());
    snapshot_.emplace(std::move(tx));
    return Status::Ok();
  }
  GRAG_RETURN_IF_ERROR(reader_->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  in_snapshot_ = true;
  return Status::Ok();
}

// ---------------------------------------------------------------- reply cache

std::optional<std::string> PgReplyCache::Get(std::string_view key) {
  Result<ReadHandle> read = store_->Read();
  Result<Rows> rows = read.ok()
                          ? read->conn().Query("SELECT value FROM llm_cache WHERE key = $1", {key})
                          : Result<Rows>(read.status());
  if (!rows.ok()) {
    Log(LogLevel::kWarn, "store", "reply cache read failed: " + rows.status().ToString());
    return std::nullopt;
  }
  if (rows->empty()) return std::nullopt;
  return rows->Text(0, 0);
}

Status PgReplyCache::Put(std::string_view key, std::string_view value, std::string_view model,
                         std::string_view kind) {
  if (store_->read_only()) return Status::Ok();
  return store_->WriteGrouped([&]() -> Status {
    return store_->conn().Exec(
        "INSERT INTO llm_cache (key, value, model, kind) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value, model = excluded.model, "
        "kind = excluded.kind, created_at = grag_now()",
        {key, value, model, kind});
  });
}

// PostgreSQL compresses large values itself (TOAST), so replies are stored as text; the room
// a DELETE frees is reused by later writes (plain VACUUM), not given back to the file system.
Result<CachePruneResult> PostgresStore::PruneReplyCache(const CachePruneOptions& options) {
  if (read_only()) return Status::InvalidArgument("the index is open read-only");
  GRAG_RETURN_IF_ERROR(FlushDeferred());
  CachePruneResult out;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(out.file_bytes_before,
                        read.conn().QueryInt("SELECT pg_database_size(current_database())"));
  // Which entries: those of one kind, or those written before a time.
  const bool by_kind = !options.kind.empty();
  const std::string where = by_kind ? "kind = $1" : "created_at < $1";
  out.before = options.before;
  if (!by_kind && out.before.empty()) {
    GRAG_ASSIGN_OR_RETURN(Rows last, read.conn().Query("SELECT started_at FROM runs WHERE command "
                                                       "= 'index' AND status = 'ok' ORDER BY id "
                                                       "DESC LIMIT 1"));
    if (!last.empty()) out.before = last.Text(0, 0);
  }
  const std::string& which = by_kind ? options.kind : out.before;
  GRAG_ASSIGN_OR_RETURN(
      Rows counts, read.conn().Query("SELECT count(*) FILTER (WHERE " + where +
                                         "), coalesce(sum(octet_length(value)) FILTER (WHERE " +
                                         where + "), 0), count(*) FROM llm_cache",
                                     {which}));
  if (!which.empty()) {
    out.entries = counts.Int(0, 0);
    out.value_bytes = counts.Int(0, 1);
  }
  out.entries_left = counts.Int(0, 2) - out.entries;
  out.file_bytes_after = out.file_bytes_before;
  if (options.dry_run || out.entries == 0) return out;
  GRAG_ASSIGN_OR_RETURN(Rows removed, Write("DELETE FROM llm_cache WHERE " + where, {which}));
  out.entries = removed.Affected();
  if (!options.compact) return out;
  GRAG_RETURN_IF_ERROR(read.conn().Exec("VACUUM llm_cache"));
  GRAG_ASSIGN_OR_RETURN(out.file_bytes_after,
                        read.conn().QueryInt("SELECT pg_database_size(current_database())"));
  return out;
}

// ---------------------------------------------------------------- opening

// Who holds the writer lock, from the server's view of sessions.
std::string WriterLockHolder(pq::Connection& conn) {
  Result<Rows> rows = conn.Query(
      "SELECT a.application_name, a.pid, coalesce(host(a.client_addr), 'local') FROM pg_locks l "
      "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND "
      "l.classid = $1 AND l.objid = $2 AND l.objsubid = 2 AND l.database = (SELECT oid FROM "
      "pg_database WHERE datname = current_database()) LIMIT 1",
      {kLockClass, kWriterLock});
  if (!rows.ok() || rows->empty()) return "another session";
  return rows->Text(0, 0) + " (server pid " + rows->Text(0, 1) + ", from " + rows->Text(0, 2) + ")";
}

Status TakeWriterLock(pq::Connection& conn, const std::string& redacted,
                      const StoreOptions& options) {
  GRAG_ASSIGN_OR_RETURN(Rows got, conn.Query("SELECT pg_try_advisory_lock($1::int, $2::int)",
                                             {kLockClass, kWriterLock}));
  if (got.Bool(0, 0)) return Status::Ok();
  const std::string holder = WriterLockHolder(conn);
  if (!options.wait_for_writer) {
    return Status::Unavailable("another grag process is writing the index at " + redacted + ": " +
                               holder + " (wait for it, or pass --wait)");
  }
  if (options.on_wait) options.on_wait(holder);
  // lock_timeout would cut the wait short.
  GRAG_RETURN_IF_ERROR(conn.Exec("SET lock_timeout = 0"));
  GRAG_RETURN_IF_ERROR(
      conn.Exec("SELECT pg_advisory_lock($1::int, $2::int)", {kLockClass, kWriterLock}));
  return conn.Exec("SET lock_timeout = " + std::to_string(std::max(0, options.busy_timeout_ms)));
}

// The version recorded in the database, 0 when it holds no index; an error for tables that are
// not one.
Result<int64_t> SchemaVersion(pq::Connection& conn, const std::string& redacted) {
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, conn.Query("SELECT to_regclass('grag_migrations') IS NOT NULL, (SELECT count(*) "
                            "FROM pg_tables WHERE schemaname = current_schema())"));
  const bool has_migrations = rows.Bool(0, 0);
  if (!has_migrations) {
    if (rows.Int(0, 1) > 0) {
      return Status::Corruption("the database at " + redacted +
                                " holds tables but no grag index (use an empty database)");
    }
    return int64_t{0};
  }
  return conn.QueryInt("SELECT coalesce(max(version), 0) FROM grag_migrations");
}

Status Migrate(pq::Connection& conn, const std::string& redacted) {
  const auto steps = postgres::Migrations();
  GRAG_ASSIGN_OR_RETURN(const int64_t initial, SchemaVersion(conn, redacted));
  for (const postgres::PgMigration& step : steps) {
    if (initial >= step.version) continue;
    GRAG_RETURN_IF_ERROR(conn.Exec("BEGIN"));
    // Another process may be migrating too: one at a time, and re-read the version under the
    // lock.
    Status st =
        conn.Exec("SELECT pg_advisory_xact_lock($1::int, $2::int)", {kLockClass, kMigrationLock});
    if (st.ok()) {
      st = conn.Exec(
          "CREATE TABLE IF NOT EXISTS grag_migrations (version bigint PRIMARY KEY, description "
          "text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
    }
    Result<int64_t> current = st.ok() ? conn.QueryInt(
                                            "SELECT coalesce(max(version), 0) FROM "
                                            "grag_migrations")
                                      : Result<int64_t>(st);
    st = current.status();
    if (st.ok() && *current < step.version) {
      if (step.version != *current + 1) {
        st = Status::Internal("no migration step to schema " + std::to_string(*current + 1));
      }
      if (st.ok()) st = conn.Exec(step.sql);
      if (st.ok()) {
        st = conn.Exec("INSERT INTO grag_migrations (version, description) VALUES ($1, $2)",
                       {step.version, step.description});
      }
      if (st.ok()) {
        st = conn.Exec(
            "INSERT INTO meta (key, value) VALUES ('schema_version', $1) ON CONFLICT (key) DO "
            "UPDATE SET value = excluded.value",
            {std::to_string(step.version)});
      }
      if (st.ok()) {
        st = conn.Exec(*current == 0
                           ? "INSERT INTO meta (key, value) VALUES ('created_by', 'grag'), "
                             "('created_at', grag_now()) ON CONFLICT (key) DO NOTHING"
                           : "INSERT INTO meta (key, value) VALUES ('migrated_at', grag_now()) "
                             "ON CONFLICT (key) DO UPDATE SET value = excluded.value");
      }
    }
    if (st.ok()) st = conn.Exec("COMMIT");
    if (!st.ok()) {
      (void)conn.Exec("ROLLBACK");
      return st.WithContext("migrating the index at " + redacted + " to schema " +
                            std::to_string(step.version) + " (" + std::string(step.description) +
                            ")");
    }
    if (initial > 0) {
      Log(LogLevel::kInfo, "store",
          "migrated " + redacted + " to schema " + std::to_string(step.version) + " (" +
              std::string(step.description) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace grag::store::postgres_internal

namespace grag::store {

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url,
                                                 const StoreOptions& options) {
  using namespace postgres_internal;  // NOLINT
  const std::string redacted = pq::RedactUrl(url);
  GRAG_ASSIGN_OR_RETURN(pq::Connection conn, pq::Connection::Open(url, redacted));
  const bool read_only = options.read_only;
  std::string app = "grag: " + options.lock_holder + " (pid " + std::to_string(getpid()) + ")";
  if (app.size() > 63) app.resize(63);
  GRAG_RETURN_IF_ERROR(
      conn.Exec("SELECT set_config('application_name', $1, false), "
                "set_config('lock_timeout', $2, false)",
                {app, std::to_string(std::max(0, options.busy_timeout_ms))}));
  if (read_only) {
    GRAG_RETURN_IF_ERROR(conn.Exec("SET default_transaction_read_only = on"));
  }
  if (options.writer_lock && !read_only) {
    GRAG_RETURN_IF_ERROR(TakeWriterLock(conn, redacted, options));
  }
  const int64_t latest = postgres::Migrations().back().version;
  GRAG_ASSIGN_OR_RETURN(const int64_t version, SchemaVersion(conn, redacted));
  if (version > latest) {
    return Status::InvalidArgument(
        "the index at " + redacted + " was written by a newer grag (schema " +
        std::to_string(version) + "); this grag reads up to " + std::to_string(latest));
  }
  const bool create = options.create_if_missing && !read_only;
  if (version == 0 && !create) {
    return Status::NotFound("no index at " + redacted + " (run `grag index` first)");
  }
  if (read_only) {
    if (version < latest) {
      return Status::InvalidArgument(
          "the index at " + redacted + " was written by an older grag (schema " +
          std::to_string(version) + ", this grag uses " + std::to_string(latest) +
          "): run a writing command (grag index) on it once to upgrade it");
    }
  } else {
    GRAG_RETURN_IF_ERROR(Migrate(conn, redacted));
  }
  return std::unique_ptr<Store>(std::make_unique<PostgresStore>(
      url, redacted, std::move(conn), read_only, std::max(0, options.busy_timeout_ms)));
}

}  // namespace grag::store
