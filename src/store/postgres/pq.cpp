#include "pq.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "grag/config.h"
#include "grag/lazy_library.h"

namespace grag::store::pq {

Arg::Arg(double v) {
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%.17g", v);
  value_ = std::string(buf, static_cast<size_t>(n));
}

std::string TextArray(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  out += '}';
  return out;
}

std::string RealArray(const std::vector<float>& values) {
  std::string out;
  out.reserve(values.size() * 12 + 2);
  out += '{';
  char buf[32];
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    // Shortest text that reads back as the same float.
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, values[i]);
    if (ec != std::errc()) {
      out += '0';
      continue;
    }
    std::string_view s(buf, static_cast<size_t>(end - buf));
    if (s == "inf") s = "Infinity";
    if (s == "-inf") s = "-Infinity";
    if (s == "nan" || s == "-nan") s = "NaN";
    out += s;
  }
  out += '}';
  return out;
}

std::vector<float> ParseRealArray(std::string_view text) {
  std::vector<float> out;
  if (text.size() < 2 || text.front() != '{') return out;
  text = text.substr(1, text.size() - 2);
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string item(text.substr(0, comma));
    out.push_back(item == "NULL" ? 0.0f : std::strtof(item.c_str(), nullptr));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

int64_t Rows::Int(int row, int col) const {
  std::string_view v = View(row, col);
  if (v == "t") return 1;
  if (v == "f") return 0;
  int64_t out = 0;
  std::from_chars(v.data(), v.data() + v.size(), out);
  return out;
}

double Rows::Double(int row, int col) const {
  if (IsNull(row, col)) return 0;
  return std::strtod(Pq().getvalue(res_.get(), row, col), nullptr);
}

std::optional<int64_t> Rows::OptInt(int row, int col) const {
  if (IsNull(row, col)) return std::nullopt;
  return Int(row, col);
}

std::optional<double> Rows::OptDouble(int row, int col) const {
  if (IsNull(row, col)) return std::nullopt;
  return Double(row, col);
}

int64_t Rows::Affected() const {
  if (!res_) return 0;
  const char* n = Pq().cmdTuples(res_.get());
  return n == nullptr || *n == '\0' ? 0 : std::strtoll(n, nullptr, 10);
}

namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The password never reaches a message: libpq's own messages do not repeat it, and ours name
// the redacted URL only.
ErrorCode CodeOf(std::string_view state) {
  if (state.size() < 2) return ErrorCode::kInternal;
  const std::string_view cls = state.substr(0, 2);
  if (cls == "23") return ErrorCode::kInvalidArgument;       // integrity constraint violation
  if (cls == "22") return ErrorCode::kInvalidArgument;       // data exception (bad value)
  if (state == "P0001") return ErrorCode::kInvalidArgument;  // RAISE in a trigger of ours
  if (state == "25006") return ErrorCode::kIoError;  // read-only transaction: as a read-only file
  if (state == "40001" || state == "40P01") return ErrorCode::kUnavailable;  // retry later
  if (state == "55P03") return ErrorCode::kUnavailable;                      // lock not available
  if (cls == "08" || cls == "57") return ErrorCode::kUnavailable;            // connection, shutdown
  if (cls == "53") return ErrorCode::kIoError;           // disk full, out of memory
  if (cls == "58") return ErrorCode::kIoError;           // system error
  if (cls == "28") return ErrorCode::kPermissionDenied;  // authorization
  if (cls == "42" && state == "42501") return ErrorCode::kPermissionDenied;
  if (state == "XX001" || state == "XX002") return ErrorCode::kCorruption;
  return ErrorCode::kInternal;
}

}  // namespace

Status ErrorStatus(const PGresult* res, PGconn* conn, std::string* sqlstate) {
  const char* state = res != nullptr ? Pq().resultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string message = res != nullptr ? Trim(Pq().resultErrorMessage(res)) : "";
  if (message.empty() && conn != nullptr) message = Trim(Pq().errorMessage(conn));
  if (message.empty()) message = "unknown PostgreSQL error";
  if (sqlstate != nullptr) *sqlstate = state != nullptr ? state : "";
  if (state == nullptr) {
    // No SQLSTATE: the connection failed (server gone, network).
    if (conn != nullptr && Pq().status(conn) == CONNECTION_BAD) {
      return Status::Unavailable("PostgreSQL connection lost: " + message);
    }
    return Status::Internal(message);
  }
  return Status(CodeOf(state), message);
}

namespace {

Result<Api> ResolveLibpq() {
  static LazyLibrary lib(GRAG_LIBPQ_SONAME, "the PostgreSQL store",
                         "libpq (Debian: apt install libpq5)");
  Api api{};
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.clear, "PQclear"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.cmdTuples, "PQcmdTuples"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.connectdb, "PQconnectdb"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.errorMessage, "PQerrorMessage"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.exec, "PQexec"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.execParams, "PQexecParams"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.finish, "PQfinish"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.fname, "PQfname"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.ftype, "PQftype"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.getisnull, "PQgetisnull"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.getlength, "PQgetlength"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.getvalue, "PQgetvalue"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.nfields, "PQnfields"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.ntuples, "PQntuples"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.resultErrorField, "PQresultErrorField"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.resultErrorMessage, "PQresultErrorMessage"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.resultStatus, "PQresultStatus"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.serverVersion, "PQserverVersion"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.setNoticeProcessor, "PQsetNoticeProcessor"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.status, "PQstatus"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.transactionStatus, "PQtransactionStatus"));
  return api;
}

const Api* loaded_libpq = nullptr;

}  // namespace

Status LoadLibpq() {
  static const Result<Api> api = ResolveLibpq();
  if (!api.ok()) return api.status();
  loaded_libpq = &*api;
  return Status::Ok();
}

const Api& Pq() { return *loaded_libpq; }

Result<Connection> Connection::Open(const std::string& url, const std::string& redacted) {
  GRAG_RETURN_IF_ERROR(LoadLibpq());
  Connection c;
  c.redacted_ = redacted;
  c.conn_.reset(Pq().connectdb(url.c_str()));
  if (c.conn_ == nullptr) return Status::Internal("libpq could not allocate a connection");
  if (Pq().status(c.conn_.get()) != CONNECTION_OK) {
    std::string message = Trim(Pq().errorMessage(c.conn_.get()));
    // Messages about the password name no password; say which server was refused.
    if (message.find("authentication failed") != std::string::npos ||
        message.find("password") != std::string::npos) {
      return Status::PermissionDenied("PostgreSQL at " + redacted +
                                      " refused the login: " + message);
    }
    if (message.find("does not exist") != std::string::npos) {
      return Status::NotFound("PostgreSQL at " + redacted + ": " + message);
    }
    return Status::Unavailable("cannot connect to PostgreSQL at " + redacted + ": " + message);
  }
  // Notices (e.g. "relation already exists, skipping") are not for the user's terminal.
  Pq().setNoticeProcessor(
      c.conn_.get(), [](void*, const char*) {}, nullptr);
  return c;
}

Result<Rows> Connection::Query(std::string_view sql, const Args& args) {
  if (!conn_) return Status::Internal("no PostgreSQL connection");
  const std::string query(sql);
  std::vector<const char*> values;
  values.reserve(args.size());
  for (const Arg& a : args) values.push_back(a.value() ? a.value()->c_str() : nullptr);
  PGresult* res = args.empty()
                      ? Pq().exec(conn_.get(), query.c_str())
                      : Pq().execParams(conn_.get(), query.c_str(), static_cast<int>(values.size()),
                                        nullptr, values.data(), nullptr, nullptr, 0);
  Rows rows(res);
  const ExecStatusType status = res != nullptr ? Pq().resultStatus(res) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
    last_sqlstate_.clear();
    return rows;
  }
  return ErrorStatus(res, conn_.get(), &last_sqlstate_);
}

Status Connection::Exec(std::string_view sql, const Args& args) {
  Result<Rows> rows = Query(sql, args);
  return rows.status();
}

Result<int64_t> Connection::QueryInt(std::string_view sql, const Args& args) {
  GRAG_ASSIGN_OR_RETURN(Rows rows, Query(sql, args));
  if (rows.empty() || rows.columns() == 0) return Status::Internal("query returned no row");
  return rows.Int(0, 0);
}

Result<int64_t> Connection::Changes(std::string_view sql, const Args& args) {
  GRAG_ASSIGN_OR_RETURN(Rows rows, Query(sql, args));
  return rows.Affected();
}

std::string Connection::ServerVersion() const {
  if (!conn_) return "";
  const int v = Pq().serverVersion(conn_.get());
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000);
}

bool Connection::InTransaction() const {
  if (!conn_) return false;
  const PGTransactionStatusType t = Pq().transactionStatus(conn_.get());
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR;
}

bool Connection::InFailedTransaction() const {
  return conn_ && Pq().transactionStatus(conn_.get()) == PQTRANS_INERROR;
}

std::string RedactUrl(std::string_view url) { return RedactUrlPassword(url); }

}  // namespace grag::store::pq
