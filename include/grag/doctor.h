// grag doctor: before anything is spent, one extraction, one answer and one embedding request to
// every configured endpoint, and a report of what came back and what to change.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "grag/config.h"
#include "grag/status.h"

namespace grag {

// One request sent and what came back.
struct DoctorProbe {
  std::string name;      // "extraction", "answer" or "embedding"
  std::string base_url;  // where it went
  std::string model;
  bool ok = false;           // the request did what grag needs of it
  bool reachable = false;    // some HTTP answer came back
  bool model_found = false;  // the server knows the model
  std::string error;         // why not ok ("" when ok)
  int64_t latency_ms = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t reasoning_tokens = 0;  // of completion_tokens, spent thinking
  bool thinking_seen = false;
  std::string finish_reason;
  std::string reply_excerpt;  // the reply's start (thinking removed)
  // extraction: the reply is the JSON the prompt asks for, and what it held.
  bool json_valid = false;
  int64_t entities = 0;
  int64_t relationships = 0;
  int64_t dimension = 0;  // embedding
};

struct DoctorReport {
  bool llm_configured = false;  // false: the no-LLM mode (nothing to probe but the embedder)
  std::string api_style;
  bool ollama_detected = false;           // the chat server answered Ollama's /api/show
  std::optional<int64_t> context_window;  // the model's, when the server told it
  int64_t extraction_prompt_tokens = 0;   // the sample extraction prompt, counted by grag
  int64_t sample_names = 0;               // names the built-in extractor finds in the sample
  std::vector<DoctorProbe> probes;
  std::vector<std::string> adaptations;  // what the client changed to suit the servers
  // Extraction (and gleaning) at the configured prices, from the sample's tokens.
  std::optional<double> cost_per_1000_chunks;  // at the extract role's prices
  int64_t calls_per_chunk = 0;
  std::vector<std::string> advice;  // what to change, most important first
  bool ok = true;                   // every probe ok and nothing that stops an index
};

struct DoctorOptions {
  // The text extraction is tried on; empty: a built-in passage (names, dates, places).
  std::string sample_text;
};

// Runs the probes. Nothing is read from or written to the index; replies are not cached. Errors
// only for a configuration that cannot make clients (the probes' own failures are in the report).
Result<DoctorReport> RunDoctor(const Config& config, const DoctorOptions& options = {});

}  // namespace grag
