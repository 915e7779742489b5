#include "progress.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace grag::cli {

std::string FormatDuration(double s) {
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600,
                  (static_cast<int>(s) % 3600) / 60);
  }
  return buf;
}

std::string FormatCount(int64_t n) {
  char buf[32];
  if (n >= 1'000'000) {
    std::snprintf(buf, sizeof buf, "%.1fM", static_cast<double>(n) / 1e6);
  } else if (n >= 10'000) {
    std::snprintf(buf, sizeof buf, "%.1fk", static_cast<double>(n) / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  }
  return buf;
}

ProgressPrinter::ProgressPrinter(bool enabled)
    : enabled_(enabled), tty_(isatty(STDERR_FILENO) != 0) {}

ProgressPrinter::~ProgressPrinter() { Finish(); }

void ProgressPrinter::Update(const ProgressLine& p) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool new_stage = p.stage != stage_;
  const int percent = p.total > 0 ? static_cast<int>(100 * p.done / p.total) : -1;
  const bool complete = p.total > 0 && p.done >= p.total;
  if (tty_) {
    if (!new_stage && !complete && now - last_draw_ < std::chrono::milliseconds(100)) return;
  } else if (!new_stage && !complete && percent / 10 == last_percent_ / 10) {
    return;  // off a terminal: a line per stage and per 10%
  }
  if (new_stage && line_open_ && tty_) std::cerr << "\n";
  if (new_stage) stage_start_ = p.elapsed_seconds;
  stage_ = p.stage;
  last_percent_ = percent;
  last_draw_ = now;
  std::string line = p.stage;
  line.resize(std::max<size_t>(line.size(), 14), ' ');
  if (p.total > 0) {
    line += std::to_string(p.done) + "/" + std::to_string(p.total) + " (" +
            std::to_string(percent) + "%)";
  } else {
    line += std::to_string(p.done);
  }
  line += "  LLM calls " + FormatCount(p.llm_calls) + "  tokens " + FormatCount(p.tokens) +
          "  elapsed " + FormatDuration(p.elapsed_seconds);
  const double stage_seconds = p.elapsed_seconds - stage_start_;
  if (p.total > 0 && p.done > 0 && p.done < p.total && stage_seconds > 1) {
    // The stage's ETA from its own pace so far.
    const double rate = static_cast<double>(p.done) / stage_seconds;
    line += "  ETA " + FormatDuration(static_cast<double>(p.total - p.done) / rate);
  }
  if (tty_) {
    std::cerr << "\r\033[K" << line << std::flush;
    line_open_ = true;
  } else {
    std::cerr << line << "\n";
  }
}

void ProgressPrinter::Finish() {
  if (line_open_ && tty_) std::cerr << "\n";
  line_open_ = false;
}

std::string FormatEndpoint(const EndpointUsage& e, bool median) {
  std::string line = e.role + " " + e.name + ": " + std::to_string(e.requests) +
                     (e.requests == 1 ? " request (" : " requests (") + std::to_string(e.errors) +
                     (e.errors == 1 ? " error" : " errors");
  if (e.benched > 0) {
    line += ", benched " + std::to_string(e.benched) + (e.benched == 1 ? " time" : " times");
  }
  line += "), " + FormatCount(e.prompt_tokens) + " tokens in, " + FormatCount(e.completion_tokens) +
          " out";
  if (e.answered() > 0) {
    char buf[96];
    if (median) {
      std::snprintf(buf, sizeof buf, "; latency p50 %.0f ms, mean %.0f ms", e.LatencyP50Ms(),
                    e.LatencyMeanMs());
    } else {
      std::snprintf(buf, sizeof buf, "; mean latency %.0f ms", e.LatencyMeanMs());
    }
    line += buf;
  }
  return line;
}

}  // namespace grag::cli
