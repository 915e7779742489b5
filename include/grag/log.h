// Logging: stderr for the process, plus a log file per index. Every line goes to stderr (at
// its level) and to the log file the calling thread works for, if any (ScopedLogFile), so a
// process serving several indexes writes each index's lines to that index's grag.log only.
// ParallelFor hands the caller's log file to its workers. Results never go through the log;
// they go to stdout.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "grag/status.h"

namespace grag {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// Parses "trace", "debug", "info", "warn", "error", "off".
Result<LogLevel> ParseLogLevel(std::string_view name);

// Sets the level of the stderr sink (default: info). Thread-safe.
void SetLogLevel(LogLevel level);

// A file that receives the debug-level-and-above lines of the threads that install it
// (appending; "2026-12-02T11:02:54.123 info [index] ..."). Shared by the threads of one index.
class LogFile : public std::enable_shared_from_this<LogFile> {
 public:
  static Result<std::shared_ptr<LogFile>> Open(const std::string& path);
  ~LogFile();
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  const std::string& path() const;
  void Write(LogLevel level, std::string_view component, std::string_view message);

 private:
  struct Impl;
  explicit LogFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Makes `file` (may be null: stderr only) the calling thread's log file until destroyed, when
// the previous one is restored. Not movable: it lives on the stack of the work it covers, so
// scopes nest and the one it restores (held by an outer scope) is still alive.
class ScopedLogFile {
 public:
  explicit ScopedLogFile(std::shared_ptr<LogFile> file);
  ~ScopedLogFile();
  ScopedLogFile(const ScopedLogFile&) = delete;
  ScopedLogFile& operator=(const ScopedLogFile&) = delete;

 private:
  std::shared_ptr<LogFile> file_;
  LogFile* previous_;
};

// The calling thread's log file (null when none): what a thread that starts workers passes on.
std::shared_ptr<LogFile> CurrentLogFile();

// Writes one line "[component] message" at `level` to stderr and to the calling thread's log
// file. Thread-safe.
void Log(LogLevel level, std::string_view component, std::string_view message);

}  // namespace grag
