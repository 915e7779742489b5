// Progress display for long work: one self-rewriting line on a terminal, sparse log lines
// otherwise (so CI logs stay readable).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "grag/llm_types.h"

namespace grag::cli {

struct ProgressLine {
  std::string stage;
  int64_t done = 0;
  int64_t total = 0;
  int64_t llm_calls = 0;
  int64_t tokens = 0;
  double elapsed_seconds = 0;
};

class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool enabled);
  ~ProgressPrinter();
  void Update(const ProgressLine& p);
  void Finish();  // ends the current line

 private:
  bool enabled_;
  bool tty_;
  std::string stage_;
  double stage_start_ = 0;  // run time when the current stage began
  int last_percent_ = -1;
  std::chrono::steady_clock::time_point last_draw_{};
  bool line_open_ = false;
};

// "1m02s", "3.4s".
std::string FormatDuration(double seconds);
// "1.2M", "12.3k", "950".
std::string FormatCount(int64_t n);
// One endpoint's line in a summary: "llm gpu-a: 120 requests (2 errors, benched 1 time),
// 45.1k tokens in, 3.2k out; latency p50 230 ms, mean 245 ms" (no p50 when `median` is false).
std::string FormatEndpoint(const EndpointUsage& e, bool median);

}  // namespace grag::cli
