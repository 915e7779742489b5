#include "grag/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>

namespace grag {
namespace {

spdlog::level::level_enum ToSpd(LogLevel l) {
  switch (l) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
    case LogLevel::kOff:
      return spdlog::level::off;
  }
  return spdlog::level::info;
}

// The process-wide log sink. Logging is inherently global (stderr is), so this is the one
// piece of shared state; it is created on first use and guarded by spdlog's own locks.
struct Sink {
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> console;
  std::shared_ptr<spdlog::logger> logger;
  Sink() {
    console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    console->set_level(spdlog::level::info);
    console->set_pattern("%^%l%$: %v");
    logger = std::make_shared<spdlog::logger>("grag", console);
    logger->set_level(spdlog::level::trace);
    logger->flush_on(spdlog::level::warn);
  }
};

Sink& TheSink() {
  static Sink sink;
  return sink;
}

}  // namespace

Result<LogLevel> ParseLogLevel(std::string_view name) {
  if (name == "trace") return LogLevel::kTrace;
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn" || name == "warning") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  if (name == "off") return LogLevel::kOff;
  return Status::InvalidArgument("unknown log level '" + std::string(name) +
                                 "' (expected trace, debug, info, warn, error or off)");
}

void SetLogLevel(LogLevel level) { TheSink().console->set_level(ToSpd(level)); }

Status AddLogFile(const std::string& path) {
  try {
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);
    file->set_level(spdlog::level::debug);
    file->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
    TheSink().logger->sinks().push_back(std::move(file));
  } catch (const spdlog::spdlog_ex& e) {
    return Status::IoError("cannot open log file " + path + ": " + e.what());
  }
  return Status::Ok();
}

void Log(LogLevel level, std::string_view component, std::string_view message) {
  TheSink().logger->log(ToSpd(level), "[{}] {}", component, message);
}

}  // namespace grag
