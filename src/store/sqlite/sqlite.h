// A thin RAII layer over the SQLite C API, private to the store module.
//
// Handles own their sqlite3* / sqlite3_stmt*; a Connection caches prepared statements by SQL
// text so hot paths prepare once. Nothing here locks: the Store serialises every use of a
// Connection with its own mutex, so a Connection and the Stmts it hands out are confined to
// whichever thread holds that mutex.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "grag/status.h"

namespace grag::sqlite {

struct CloseDb {
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};
using DbHandle = std::unique_ptr<sqlite3, CloseDb>;

struct FinalizeStmt {
  void operator()(sqlite3_stmt* stmt) const noexcept { sqlite3_finalize(stmt); }
};
using StmtHandle = std::unique_ptr<sqlite3_stmt, FinalizeStmt>;

// A Status for SQLite result code `rc` on `db` (may be null), naming `what` was being done.
// Busy/locked map to kUnavailable, constraint violations to kInvalidArgument, I/O and full disk
// to kIoError, corrupt/not-a-database to kCorruption.
Status ErrorStatus(sqlite3* db, int rc, std::string_view what);

// A prepared statement in use. Borrowed from a Connection's cache (or owned when the cached one
// is already in use further up the stack); on destruction it is reset, its bindings cleared and
// it goes back to the cache. Must not outlive the Connection that made it.
class Stmt {
 public:
  Stmt(sqlite3* db, sqlite3_stmt* stmt, bool* in_use, StmtHandle owned);
  ~Stmt();
  Stmt(Stmt&& other) noexcept;
  Stmt& operator=(Stmt&&) = delete;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // Binds parameter `index` (1-based). Integers, floating point, strings (copied), std::nullopt
  // and std::optional of those. A failed bind is reported by the next Step()/Run(). Binding after
  // stepping resets the statement first, so one Stmt can run in a loop with fresh parameters.
  template <typename T>
  Stmt& Bind(int index, const T& value);
  Stmt& BindBlob(int index, const void* data, size_t size);
  // Binds the arguments to parameters 1, 2, ...
  template <typename... Args>
  Stmt& BindAll(const Args&... args) {
    int i = 0;
    (Bind(++i, args), ...);
    return *this;
  }

  // Advances: true when a row is ready, false when done.
  Result<bool> Step();
  // Steps to completion, discarding any rows.
  Status Run();

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  bool IsBlob(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_BLOB; }
  std::string Text(int col) const;
  // The text in place, without a copy; valid until the next Step() or the Stmt's destruction.
  std::string_view TextView(int col) const;
  std::optional<int64_t> OptInt(int col) const {
    return IsNull(col) ? std::nullopt : std::optional<int64_t>(Int(col));
  }
  std::optional<double> OptDouble(int col) const {
    return IsNull(col) ? std::nullopt : std::optional<double>(Double(col));
  }
  // Valid until the next Step() or the Stmt's destruction.
  std::string_view Blob(int col) const;

  // The statement's SQL, for error messages.
  std::string_view Sql() const;

 private:
  void BindInt(int index, int64_t v) {
    ResetIfStepped();
    Check(sqlite3_bind_int64(stmt_, index, v));
  }
  void BindDouble(int index, double v) {
    ResetIfStepped();
    Check(sqlite3_bind_double(stmt_, index, v));
  }
  void BindText(int index, std::string_view v);
  void BindNull(int index) {
    ResetIfStepped();
    Check(sqlite3_bind_null(stmt_, index));
  }
  // SQLite refuses binds on a statement that has been stepped until it is reset (which keeps
  // the other bindings).
  void ResetIfStepped() {
    if (!stepped_) return;
    sqlite3_reset(stmt_);
    stepped_ = false;
    bind_rc_ = SQLITE_OK;
  }
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  bool* in_use_;      // the cache slot's flag; null for an owned statement
  StmtHandle owned_;  // set when this Stmt is not from the cache
  int bind_rc_ = SQLITE_OK;
  bool stepped_ = false;  // stepped since the last reset
};

template <typename T>
Stmt& Stmt::Bind(int index, const T& value) {
  if constexpr (std::is_same_v<T, std::nullopt_t>) {
    BindNull(index);
  } else if constexpr (std::is_same_v<T, bool>) {
    BindInt(index, value ? 1 : 0);
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    BindInt(index, static_cast<int64_t>(value));
  } else if constexpr (std::is_floating_point_v<T>) {
    BindDouble(index, static_cast<double>(value));
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    BindText(index, std::string_view(value));
  } else {
    // std::optional<U>
    if (value.has_value()) {
      Bind(index, *value);
    } else {
      BindNull(index);
    }
  }
  return *this;
}

// One open database connection with a prepared-statement cache. Movable, not copyable.
class Connection {
 public:
  // Opens `path` with sqlite3_open_v2 `flags` and extended result codes on.
  static Result<Connection> Open(const std::string& path, int flags);

  Connection(Connection&&) noexcept = default;
  Connection& operator=(Connection&&) noexcept = default;
  ~Connection();

  sqlite3* get() const { return db_.get(); }

  // The cached statement for `sql` (prepared on first use). If that statement is already in use
  // (a caller iterating it calls something that needs it again), a fresh one is prepared.
  Result<Stmt> Prepare(std::string_view sql);
  // Runs one or more ';'-separated statements without caching (DDL, BEGIN, PRAGMA...).
  Status Exec(std::string_view sql);
  // Runs a single-row, single-column query and returns the column as text ("" for no row).
  Result<std::string> QueryText(std::string_view sql);
  // Same, as an integer (0 for no row).
  Result<int64_t> QueryInt(std::string_view sql);
  // Reads the blob in `column` of the row `rowid` of main.`table` by incremental blob I/O
  // straight into the memory `into(size)` returns for its `size` bytes: no copy in between, as a
  // column read makes. False when there is no such row.
  Result<bool> ReadBlob(const char* table, const char* column, int64_t rowid,
                        const std::function<char*(size_t)>& into);

 private:
  explicit Connection(DbHandle db) : db_(std::move(db)) {}

  struct Slot {
    StmtHandle stmt;
    bool in_use = false;
  };
  // Declared first so it is destroyed last, after the statements that belong to it.
  DbHandle db_;
  // unique_ptr so a Slot's address (handed to Stmt as in_use) survives rehashing.
  std::unordered_map<std::string, std::unique_ptr<Slot>> cache_;
};

}  // namespace grag::sqlite
