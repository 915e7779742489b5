// Status and Result<T>: how every fallible call that crosses a module boundary reports failure.
//
// A Status is either OK or an error kind plus a human-readable message that names what failed
// (the file, the byte offset, the HTTP status...). Result<T> holds either a T or a non-OK Status.
// Exceptions never cross grag's public API; modules catch third-party exceptions at their edge
// and turn them into a Status.
#pragma once

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace grag {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (bad flag, bad file, bad config)
  kNotFound,         // a file, document, index or record does not exist
  kAlreadyExists,
  kIoError,           // the OS refused a read or write
  kCorruption,        // stored data is not what it should be
  kUnavailable,       // a remote service failed (network error, 5xx after retries)
  kTimeout,           // a deadline passed
  kRateLimited,       // 429 after retries
  kPermissionDenied,  // a service refused the credentials (HTTP 401/403)
  kParse,             // a reply or a file could not be parsed
  kCancelled,
  kResourceExhausted,  // a configured budget is spent (llm.max_calls, llm.max_cost)
  kUnimplemented,
  kInternal,  // a bug in grag
};

// Short, stable name of an error kind ("invalid_argument", ...), used in JSON output.
std::string_view ErrorCodeName(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) {
    return {ErrorCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {ErrorCode::kAlreadyExists, std::move(m)}; }
  static Status IoError(std::string m) { return {ErrorCode::kIoError, std::move(m)}; }
  static Status Corruption(std::string m) { return {ErrorCode::kCorruption, std::move(m)}; }
  static Status Unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
  static Status Timeout(std::string m) { return {ErrorCode::kTimeout, std::move(m)}; }
  static Status RateLimited(std::string m) { return {ErrorCode::kRateLimited, std::move(m)}; }
  static Status PermissionDenied(std::string m) {
    return {ErrorCode::kPermissionDenied, std::move(m)};
  }
  static Status Parse(std::string m) { return {ErrorCode::kParse, std::move(m)}; }
  static Status Cancelled(std::string m) { return {ErrorCode::kCancelled, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {ErrorCode::kUnimplemented, std::move(m)}; }
  static Status Internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: <message>", or "ok".
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(std::string_view context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

// A value or an error. Construct from a T (success) or a non-OK Status (failure).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result built from an OK status carries no value");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  // The error; OK when this holds a value.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  // By value, so `for (auto& x : f().value())` does not dangle when f() returns a temporary.
  T value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace grag

// Propagate a non-OK Status from an expression returning Status.
#define GRAG_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::grag::Status grag_status_ = (expr);        \
    if (!grag_status_.ok()) return grag_status_; \
  } while (0)

#define GRAG_CONCAT_INNER_(a, b) a##b
#define GRAG_CONCAT_(a, b) GRAG_CONCAT_INNER_(a, b)
// `GRAG_ASSIGN_OR_RETURN(auto x, Foo());` assigns Foo()'s value or returns its error.
#define GRAG_ASSIGN_OR_RETURN(lhs, expr) \
  GRAG_ASSIGN_OR_RETURN_IMPL_(GRAG_CONCAT_(grag_result_, __LINE__), lhs, expr)
#define GRAG_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
