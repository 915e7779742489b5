// Logging: one sink (stderr, optionally also a file) with levels and a component prefix.
// Results never go through the log; they go to stdout.
#pragma once

#include <string>
#include <string_view>

#include "grag/status.h"

namespace grag {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

// Parses "trace", "debug", "info", "warn", "error", "off".
Result<LogLevel> ParseLogLevel(std::string_view name);

// Sets the level of the stderr sink (default: info). Thread-safe.
void SetLogLevel(LogLevel level);

// Also writes every message at debug level and above to `path` (appending). Call at start-up,
// before other threads log.
Status AddLogFile(const std::string& path);

// Writes one line "[component] message" at `level`. Thread-safe.
void Log(LogLevel level, std::string_view component, std::string_view message);

}  // namespace grag
