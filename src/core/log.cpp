#include "grag/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <mutex>
#include <utility>

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

// The process-wide stderr sink. stderr is global, so this is the one piece of shared state;
// it is created on first use and guarded by spdlog's own locks. Log files are per index.
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

struct LogFile::Impl {
  std::string path;
  std::shared_ptr<spdlog::logger> logger;
};

LogFile::LogFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LogFile::~LogFile() {
  if (impl_ && impl_->logger) impl_->logger->flush();
}

Result<std::shared_ptr<LogFile>> LogFile::Open(const std::string& path) {
  try {
    auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);
    file->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->logger = std::make_shared<spdlog::logger>("grag-file", std::move(file));
    impl->logger->set_level(spdlog::level::debug);
    impl->logger->flush_on(spdlog::level::info);
    return std::shared_ptr<LogFile>(new LogFile(std::move(impl)));
  } catch (const spdlog::spdlog_ex& e) {
    return Status::IoError("cannot open log file " + path + ": " + e.what());
  }
}

const std::string& LogFile::path() const { return impl_->path; }

void LogFile::Write(LogLevel level, std::string_view component, std::string_view message) {
  impl_->logger->log(ToSpd(level), "[{}] {}", component, message);
}

namespace {
// A plain pointer: the ScopedLogFile that installed it owns the file. A thread_local with a
// destructor (a shared_ptr) registers that destructor on its thread's first use, under the
// dynamic loader's lock, and so waited out a concurrent dlopen: a one-off question stalled
// 11 ms while another thread loaded libcurl and its 30 libraries (LazyLibrary::Preload).
thread_local LogFile* tls_log_file = nullptr;
}  // namespace

ScopedLogFile::ScopedLogFile(std::shared_ptr<LogFile> file)
    : file_(std::move(file)), previous_(std::exchange(tls_log_file, file_.get())) {}
ScopedLogFile::~ScopedLogFile() { tls_log_file = previous_; }

std::shared_ptr<LogFile> CurrentLogFile() {
  return tls_log_file != nullptr ? tls_log_file->shared_from_this() : nullptr;
}

void Log(LogLevel level, std::string_view component, std::string_view message) {
  TheSink().logger->log(ToSpd(level), "[{}] {}", component, message);
  if (tls_log_file && level >= LogLevel::kDebug && level != LogLevel::kOff) {
    tls_log_file->Write(level, component, message);
  }
}

}  // namespace grag
