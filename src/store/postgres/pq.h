// A small RAII layer over libpq for the PostgreSQL store: one connection, parameterised
// statements in text format, results read by row and column, errors as Status.
//
// Not thread-safe: the store serialises every use of a Connection with its mutex.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/status.h"

namespace grag::store::pq {

// libpq's functions, resolved when the first connection is opened (grag/lazy_library.h: linking
// libpq put it and its dependencies into every command's start-up, PostgreSQL or not).
struct Api {
  decltype(&::PQclear) clear;
  decltype(&::PQcmdTuples) cmdTuples;
  decltype(&::PQconnectdb) connectdb;
  decltype(&::PQerrorMessage) errorMessage;
  decltype(&::PQexec) exec;
  decltype(&::PQexecParams) execParams;
  decltype(&::PQfinish) finish;
  decltype(&::PQfname) fname;
  decltype(&::PQftype) ftype;
  decltype(&::PQgetisnull) getisnull;
  decltype(&::PQgetlength) getlength;
  decltype(&::PQgetvalue) getvalue;
  decltype(&::PQnfields) nfields;
  decltype(&::PQntuples) ntuples;
  decltype(&::PQresultErrorField) resultErrorField;
  decltype(&::PQresultErrorMessage) resultErrorMessage;
  decltype(&::PQresultStatus) resultStatus;
  decltype(&::PQserverVersion) serverVersion;
  decltype(&::PQsetNoticeProcessor) setNoticeProcessor;
  decltype(&::PQstatus) status;
  decltype(&::PQtransactionStatus) transactionStatus;
};
// Loads libpq (once; the same answer every time after). Connection::Open calls it first.
Status LoadLibpq();
// libpq, once LoadLibpq has succeeded: everything below is reached through a Connection.
const Api& Pq();

// One statement parameter in text format; nullopt is SQL NULL.
class Arg {
 public:
  Arg(std::nullopt_t) {}                               // NOLINT(google-explicit-constructor)
  Arg(std::string_view s) : value_(std::string(s)) {}  // NOLINT
  Arg(const std::string& s) : value_(s) {}             // NOLINT
  Arg(const char* s) : value_(std::string(s)) {}       // NOLINT
  Arg(int64_t v) : value_(std::to_string(v)) {}        // NOLINT
  Arg(int v) : value_(std::to_string(v)) {}            // NOLINT
  Arg(double v);                                       // NOLINT
  Arg(bool v) : value_(v ? "true" : "false") {}        // NOLINT
  Arg(std::optional<int64_t> v) {                      // NOLINT
    if (v) value_ = std::to_string(*v);
  }
  Arg(std::optional<double> v) {  // NOLINT
    if (v) *this = Arg(*v);
  }
  const std::optional<std::string>& value() const { return value_; }

 private:
  std::optional<std::string> value_;
};

using Args = std::vector<Arg>;

// A text array literal ({"a","b"}) for a text[] parameter.
std::string TextArray(const std::vector<std::string>& items);
// A real[] literal ({1.5,2}) with every float written so that it reads back exactly.
std::string RealArray(const std::vector<float>& values);
// Parses PostgreSQL's text form of a one-dimensional real[] (NULL elements read as 0).
std::vector<float> ParseRealArray(std::string_view text);

// A query's result rows.
class Rows {
 public:
  Rows() = default;
  explicit Rows(PGresult* res) : res_(res) {}
  int size() const { return res_ ? Pq().ntuples(res_.get()) : 0; }
  bool empty() const { return size() == 0; }
  int columns() const { return res_ ? Pq().nfields(res_.get()) : 0; }
  std::string ColumnName(int col) const { return Pq().fname(res_.get(), col); }
  Oid ColumnType(int col) const { return Pq().ftype(res_.get(), col); }
  bool IsNull(int row, int col) const { return Pq().getisnull(res_.get(), row, col) != 0; }
  std::string_view View(int row, int col) const {
    return {Pq().getvalue(res_.get(), row, col),
            static_cast<size_t>(Pq().getlength(res_.get(), row, col))};
  }
  std::string Text(int row, int col) const { return std::string(View(row, col)); }
  int64_t Int(int row, int col) const;
  double Double(int row, int col) const;
  bool Bool(int row, int col) const { return View(row, col) == "t"; }
  std::optional<int64_t> OptInt(int row, int col) const;
  std::optional<double> OptDouble(int row, int col) const;
  // Rows a command changed (UPDATE, DELETE, INSERT).
  int64_t Affected() const;

 private:
  struct Clear {
    void operator()(PGresult* r) const { Pq().clear(r); }
  };
  std::unique_ptr<PGresult, Clear> res_;
};

class Connection {
 public:
  // Connects to `url` (a libpq connection URI). `redacted` names the server in messages (the
  // URL without its password). Unreachable server: kUnavailable; refused login: kPermissionDenied.
  static Result<Connection> Open(const std::string& url, const std::string& redacted);

  Connection() = default;
  bool valid() const { return conn_ != nullptr; }
  PGconn* get() const { return conn_.get(); }

  // Runs one statement with parameters ($1, $2, ...), returning its rows. A server error is a
  // Status whose kind follows the SQLSTATE (see pq.cpp) and whose message is the server's.
  Result<Rows> Query(std::string_view sql, const Args& args = {});
  // Runs one statement (or, without args, several separated by semicolons) for its effect.
  Status Exec(std::string_view sql, const Args& args = {});
  Result<int64_t> QueryInt(std::string_view sql, const Args& args = {});
  // Rows changed.
  Result<int64_t> Changes(std::string_view sql, const Args& args = {});
  // The SQLSTATE of the last failed statement ("" when none).
  const std::string& last_sqlstate() const { return last_sqlstate_; }
  // The server's version ("15.18").
  std::string ServerVersion() const;
  // True while inside a transaction block (or a failed one).
  bool InTransaction() const;
  bool InFailedTransaction() const;

 private:
  struct Finish {
    void operator()(PGconn* c) const { Pq().finish(c); }
  };
  std::unique_ptr<PGconn, Finish> conn_;
  std::string redacted_;
  std::string last_sqlstate_;
};

// The URL with any password removed (user:secret@ and password=...), for messages and Info().
std::string RedactUrl(std::string_view url);

// Maps a failed result to a Status (the SQLSTATE's kind, the server's message).
Status ErrorStatus(const PGresult* res, PGconn* conn, std::string* sqlstate);

}  // namespace grag::store::pq
