#include "sqlite.h"

#include <string>
#include <utility>

namespace grag::sqlite {

Status ErrorStatus(sqlite3* db, int rc, std::string_view what) {
  std::string message(what);
  message += ": ";
  // sqlite3_errmsg describes the most recent failure on `db`, which is this one as long as the
  // caller asks straight away (the Store's mutex guarantees no other call intervenes).
  message += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (rc & 0xFF) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(message + " (another process holds the index; try again)");
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
      return Status::InvalidArgument(std::move(message));
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return Status::IoError(std::move(message));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::Corruption(std::move(message));
    case SQLITE_INTERRUPT:
      return Status::Cancelled(std::move(message));
    default:
      return Status::Internal(std::move(message));
  }
}

// ---- Stmt ----

Stmt::Stmt(sqlite3* db, sqlite3_stmt* stmt, bool* in_use, StmtHandle owned)
    : db_(db), stmt_(stmt), in_use_(in_use), owned_(std::move(owned)) {}

Stmt::Stmt(Stmt&& other) noexcept
    : db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      in_use_(std::exchange(other.in_use_, nullptr)),
      owned_(std::move(other.owned_)),
      bind_rc_(other.bind_rc_),
      stepped_(other.stepped_) {}

Stmt::~Stmt() {
  if (stmt_ == nullptr) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  if (in_use_ != nullptr) *in_use_ = false;
}

void Stmt::BindText(int index, std::string_view v) {
  ResetIfStepped();
  // SQLITE_TRANSIENT copies: a caller may bind a temporary string that dies before Step().
  // An empty view may have a null data pointer, which SQLite would bind as NULL, not ''.
  Check(sqlite3_bind_text64(stmt_, index, v.data() != nullptr ? v.data() : "", v.size(),
                            SQLITE_TRANSIENT, SQLITE_UTF8));
}

Stmt& Stmt::BindBlob(int index, const void* data, size_t size) {
  ResetIfStepped();
  Check(sqlite3_bind_blob64(stmt_, index, size == 0 ? "" : data, size, SQLITE_TRANSIENT));
  return *this;
}

Result<bool> Stmt::Step() {
  if (bind_rc_ != SQLITE_OK) return ErrorStatus(db_, bind_rc_, "binding a parameter");
  stepped_ = true;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  std::string what = "running `";
  std::string_view sql = Sql();
  what += sql.substr(0, 80);
  if (sql.size() > 80) what += "...";
  what += "`";
  return ErrorStatus(db_, rc, what);
}

Status Stmt::Run() {
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::Ok();
  }
}

std::string Stmt::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return {};
  int n = sqlite3_column_bytes(stmt_, col);
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
}

std::string_view Stmt::TextView(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return {};
  return {reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col))};
}

std::string_view Stmt::Blob(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  if (p == nullptr || n <= 0) return {};
  return {static_cast<const char*>(p), static_cast<size_t>(n)};
}

std::string_view Stmt::Sql() const {
  const char* s = sqlite3_sql(stmt_);
  return s != nullptr ? std::string_view(s) : std::string_view();
}

// ---- Connection ----

Result<Connection> Connection::Open(const std::string& path, int flags) {
  // No memory statistics: with them (SQLite's default) every sqlite3_malloc and sqlite3_free
  // takes one process-wide mutex, which the index's threads contend for. Nothing reads them
  // (no sqlite3_status, no heap limits). Set once, before SQLite initialises; refused (and
  // harmless) if something in the process initialised it first.
  static const bool configured = [] {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK;
  }();
  (void)configured;
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  DbHandle db(raw);  // sqlite3_open_v2 may allocate a handle even when it fails
  if (rc != SQLITE_OK) return ErrorStatus(db.get(), rc, "opening " + path);
  sqlite3_extended_result_codes(db.get(), 1);
  return Connection(std::move(db));
}

Connection::~Connection() = default;

Result<Stmt> Connection::Prepare(std::string_view sql) {
  auto it = cache_.find(std::string(sql));
  if (it != cache_.end() && !it->second->in_use) {
    it->second->in_use = true;
    return Stmt(db_.get(), it->second->stmt.get(), &it->second->in_use, nullptr);
  }
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v3(db_.get(), sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
  StmtHandle stmt(raw);
  if (rc != SQLITE_OK) {
    return ErrorStatus(db_.get(), rc, "preparing `" + std::string(sql.substr(0, 80)) + "`");
  }
  if (stmt == nullptr) return Status::Internal("empty SQL statement");
  if (it != cache_.end()) {
    // The cached one is busy further up the stack: hand out a private copy.
    sqlite3_stmt* p = stmt.get();
    return Stmt(db_.get(), p, nullptr, std::move(stmt));
  }
  auto slot = std::make_unique<Slot>();
  slot->stmt = std::move(stmt);
  slot->in_use = true;
  Slot* s = slot.get();
  cache_.emplace(std::string(sql), std::move(slot));
  return Stmt(db_.get(), s->stmt.get(), &s->in_use, nullptr);
}

Status Connection::Exec(std::string_view sql) {
  std::string text(sql);  // sqlite3_exec wants a NUL-terminated string
  char* err = nullptr;
  int rc = sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, &err);
  std::unique_ptr<char, decltype(&sqlite3_free)> err_holder(err, &sqlite3_free);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string what = "running `" + text.substr(0, 80) + (text.size() > 80 ? "...`" : "`");
  return ErrorStatus(db_.get(), rc, what);
}

Result<std::string> Connection::QueryText(std::string_view sql) {
  GRAG_ASSIGN_OR_RETURN(Stmt stmt, Prepare(sql));
  GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.Text(0) : std::string();
}

Result<int64_t> Connection::QueryInt(std::string_view sql) {
  GRAG_ASSIGN_OR_RETURN(Stmt stmt, Prepare(sql));
  GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.Int(0) : int64_t{0};
}

Result<bool> Connection::ReadBlob(const char* table, const char* column, int64_t rowid,
                                  const std::function<char*(size_t)>& into) {
  sqlite3_blob* raw = nullptr;
  const int rc = sqlite3_blob_open(db_.get(), "main", table, column, rowid, 0, &raw);
  std::unique_ptr<sqlite3_blob, decltype(&sqlite3_blob_close)> blob(raw, &sqlite3_blob_close);
  if (rc != SQLITE_OK) {
    // A missing row is plain SQLITE_ERROR with this message (sqlite3_blob_open's documentation).
    if (rc == SQLITE_ERROR &&
        std::string_view(sqlite3_errmsg(db_.get())).starts_with("no such rowid")) {
      return false;
    }
    return ErrorStatus(db_.get(), rc, std::string("reading ") + table + "." + column);
  }
  const int size = sqlite3_blob_bytes(blob.get());
  char* out = into(static_cast<size_t>(size));
  if (size > 0) {
    const int read = sqlite3_blob_read(blob.get(), out, size, 0);
    if (read != SQLITE_OK) {
      return ErrorStatus(db_.get(), read, std::string("reading ") + table + "." + column);
    }
  }
  return true;
}

}  // namespace grag::sqlite
