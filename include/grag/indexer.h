// The indexing pipeline: load → chunk → extract → merge → communities → reports → embeddings.
//
// Every stage starts from what the index already holds and does only the missing work: chunks
// keep their content-derived ids, so unchanged text keeps its extraction; merged descriptions,
// reports and embeddings carry fingerprints of their inputs and are rebuilt only when those
// change. Re-running on unchanged input therefore makes no LLM call. Each unit of work is
// committed on its own as it completes, so an interrupted run loses at most the calls in
// flight and the next run resumes.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "grag/config.h"
#include "grag/llm.h"
#include "grag/loader.h"
#include "grag/status.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag {

struct IndexRequest {
  // Files and folders to index. Empty: the configured input folder (config.input.dir), and
  // then documents no longer in it are removed from the index.
  std::vector<std::string> paths;
};

struct IndexProgress {
  std::string stage;  // load, extract, summarize, communities, reports, embed
  int64_t done = 0;
  int64_t total = 0;  // 0 when unknown
  LlmUsage usage;     // chat and embedding calls of this run so far
  double elapsed_seconds = 0;
};

struct IndexSummary {
  int64_t run_id = 0;
  int64_t documents_added = 0;
  int64_t documents_changed = 0;
  int64_t documents_unchanged = 0;
  int64_t documents_removed = 0;
  std::vector<LoadIssue> load_issues;
  int64_t chunks = 0;
  int64_t chunks_added = 0;
  int64_t chunks_removed = 0;
  int64_t chunks_extracted = 0;  // extracted in this run
  int64_t chunks_skipped = 0;    // unparseable replies in this run (retried by the next run)
  int64_t entities = 0;
  int64_t relationships = 0;
  int64_t descriptions_summarized = 0;
  std::map<int64_t, int64_t> communities_per_level;
  double modularity = 0;
  int64_t reports_generated = 0;
  int64_t reports_reused = 0;
  int64_t report_gaps = 0;
  int64_t embeddings_written = 0;
  LlmUsage usage;  // this run's chat and embedding usage
  double elapsed_seconds = 0;
};

// What the pipeline works with. Borrowed; all must outlive the call.
struct IndexContext {
  Store* store = nullptr;
  ChatModel* chat = nullptr;           // nullptr: no LLM configured
  EmbeddingModel* embedder = nullptr;  // nullptr: no embeddings
  std::function<void(const IndexProgress&)> on_progress;  // called from worker threads too
  const std::atomic<bool>* cancel = nullptr;  // set to stop early (e.g. on Ctrl-C)
};

// Brings the index in line with the input and runs every stage. A model failure other than an
// unparseable reply (network down, bad key) stops the run with that error after the calls in
// flight finish; everything done so far stays stored.
Result<IndexSummary> RunIndex(const Config& config, const IndexRequest& request,
                              IndexContext& context);

// The loader options the configuration describes, with document ids relative to the input
// folder (so `grag index` and `grag index input/x.txt` give a file the same id).
LoadOptions LoadOptionsFor(const Config& config);

}  // namespace grag
