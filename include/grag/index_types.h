// Updating an index: what to do (IndexRequest), what it would cost (IndexPlan), how it goes
// (IndexProgress) and what it did (IndexSummary); the extraction workers' options and results.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "grag/config.h"
#include "grag/documents.h"
#include "grag/llm_types.h"
#include "grag/records.h"
#include "grag/status.h"

namespace grag {

struct IndexRequest {
  // Files and folders to index. Empty (and nothing to remove): the configured input folder
  // (config.input.dir), and documents no longer in it are removed from the index.
  std::vector<std::string> paths;
  // Ids of documents to remove (`grag remove`); each must be in the index (else kNotFound).
  std::vector<std::string> remove;
  // With `paths`: a stored document that came from a folder named in `paths` and is gone from
  // it is removed (`grag index DIR`). Off for `grag add`, which only adds and updates.
  bool sync_folders = true;
  // Leave the documents and extractions as they are: only the graph is rebuilt from the stored
  // mentions, with the communities, reports and embeddings that follow (what `grag entities
  // merge/split` runs to apply a correction).
  bool graph_only = false;
  // Rewrite every report whose community changed since it was written, however little, stale
  // ones included (`grag index --refresh-reports`); otherwise small changes leave the report
  // standing, marked stale (communities.report_refresh_threshold).
  bool refresh_reports = false;
};

// What each stage of a run did: the stage's own summary, which the stage alone fills
// (src/index/stages.h). IndexSummary is all of them together.
struct LoadSummary {
  int64_t documents_added = 0;
  int64_t documents_changed = 0;
  int64_t documents_unchanged = 0;
  int64_t documents_removed = 0;
  std::vector<LoadIssue> load_issues;
  int64_t chunks = 0;
  int64_t chunks_added = 0;
  int64_t chunks_removed = 0;
};

struct ExtractSummary {
  int64_t chunks_extracted = 0;  // extracted in this run
  int64_t chunks_skipped = 0;    // unparseable replies in this run (retried by the next run)
  int64_t chunks_empty = 0;      // extracted in this run with no entity in the reply
};

struct MergeSummary {
  int64_t entities = 0;
  int64_t relationships = 0;
  int64_t entities_changed = 0;        // new, or with changed mentions or relationships, this run
  int64_t resolution_fresh = 0;        // extracted names resolved this run (new ones)
  int64_t resolution_merged = 0;       // names folded into another entity (all, not only new)
  int64_t resolution_adjudicated = 0;  // candidate pairs judged by the LLM this run
  int64_t resolution_llm_calls = 0;    // adjudication calls this run (cache hits included)
  int64_t descriptions_summarized = 0;
  int64_t descriptions_appended = 0;  // new descriptions added to a stored summary (no call)
  bool graph_unchanged = false;       // the merge's inputs were those of the last merge: not redone
};

struct CommunitiesSummary {
  std::map<int64_t, int64_t> communities_per_level;
  double modularity = 0;
  bool communities_unchanged = false;   // same graph as the last clustering: not re-detected
  bool communities_warm_start = false;  // Leiden started from the previous partition
  int64_t communities_kept = 0;         // matched a previous community and kept its id
  int64_t communities_new = 0;
  int64_t communities_removed = 0;  // previous communities with no successor
  std::string community_note;       // why a full re-detection was done, if one was
};

struct ReportsSummary {
  int64_t reports_generated = 0;
  int64_t reports_reused = 0;
  int64_t reports_extractive = 0;  // with an LLM: small communities reported without a call
  int64_t report_gaps = 0;
  int64_t reports_kept_stale = 0;  // community changed too little to rewrite: report kept, stale
  // reports.mode = lazy: communities that would get an LLM report, given an extractive one until
  // a global question writes theirs.
  int64_t reports_deferred = 0;
};

struct EmbedSummary {
  int64_t embeddings_written = 0;
};

// Chat calls of one run by what they were for.
struct CallsByKind {
  int64_t extract = 0;    // one per chunk extracted (or skipped)
  int64_t glean = 0;      // gleaning rounds and retries of unparseable extraction replies
  int64_t resolve = 0;    // entity-resolution adjudications
  int64_t summarize = 0;  // description summaries
  int64_t report = 0;     // community reports, retries included
  int64_t Total() const { return extract + glean + resolve + summarize + report; }
};

// What a run is expected to cost, before any call. Extraction calls are exact; the rest depend on
// what extraction finds, so they are estimated per chunk extracted from this index's earlier
// runs of the same kind (a first index, or an update of an existing graph), or, with none, from
// typical ratios (bench/incremental_cost's transcript corpus). Tokens likewise; a cost when the
// prices are configured.
// One model role's calls, tokens and cost (an estimate's share, or an index's spend in grag
// stats): extract (extraction and gleaning), summarize (summaries and reports), resolve (the
// judge).
struct RoleCost {
  std::string role;
  int64_t calls = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::optional<double> cost;  // at the role's prices (LlmConfig::InputPrice); nullopt: none set
};

struct CallEstimate {
  CallsByKind calls;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // At each role's prices (llm.<role>.price_*, else llm.price_*_per_million); nullopt when no
  // price is set.
  std::optional<double> cost;
  std::vector<RoleCost> by_role;  // extract, summarize, resolve; they sum to the above
  int64_t history_runs = 0;       // earlier runs the ratios come from; 0: typical ratios
  bool update = false;            // estimated as an update of an existing graph
  // reports.mode = lazy: the report calls eager mode would make now (calls.report is 0), left
  // to the global questions that read the reports.
  int64_t deferred_reports = 0;
};

// What an update will do, worked out from content hashes before any model is called.
struct IndexPlan {
  std::vector<std::string> documents_added;    // ids
  std::vector<std::string> documents_changed;  // ids; an edit is a delete plus an add
  std::vector<std::string> documents_removed;  // ids
  int64_t documents_unchanged = 0;
  // New chunks plus stored ones an earlier run skipped or did not reach.
  int64_t chunks_to_extract = 0;
  int64_t chunks_removed = 0;  // with their mentions
  // At most this many extraction calls: one per chunk plus the gleaning rounds (which stop
  // early when a round finds nothing new). Summaries and reports depend on what extraction
  // finds; the summary of the run counts them.
  int64_t extraction_calls_max = 0;
  CallEstimate estimate;  // with a chat model; all zero without one
  std::vector<LoadIssue> load_issues;
};

struct IndexSummary : LoadSummary,
                      ExtractSummary,
                      MergeSummary,
                      CommunitiesSummary,
                      ReportsSummary,
                      EmbedSummary {
  int64_t run_id = 0;
  bool no_llm = false;          // built-in extractor, extractive reports (no chat model)
  std::string embedding_model;  // empty: none
  IndexPlan plan;               // as worked out at the start of the run
  CallsByKind calls;            // this run's chat calls by kind (cache hits included)
  LlmUsage usage;               // this run's chat and embedding usage
  double elapsed_seconds = 0;
};

struct IndexProgress {
  std::string stage;  // load, extract, resolve, summarize, communities, reports, embed
  int64_t done = 0;
  int64_t total = 0;  // 0 when unknown
  LlmUsage usage;     // chat and embedding calls of this run so far
  double elapsed_seconds = 0;
};

struct WorkerOptions {
  std::string name;  // unique among the workers (default: host:pid)
  // Stop once the work it took part in is all done (else wait for the next run's).
  bool once = false;
  std::chrono::milliseconds poll{250};  // how often to look for work when there is none
  // Called after each chunk it finished, and while it waits (done = 0, waiting = true).
  std::function<void(const WorkState& state, int64_t chunks_done, bool waiting)> on_progress;
  const std::atomic<bool>* cancel = nullptr;
};

struct WorkerSummary {
  std::string name;
  int64_t chunks = 0;  // extracted by this worker
  LlmUsage usage;      // what its model calls spent
  double elapsed_seconds = 0;
};

struct ChunkedDocument {
  Document document;
  std::vector<Chunk> chunks;
  int64_t tokens = 0;  // of all its chunks
};

struct ChunkPreview {
  std::vector<ChunkedDocument> documents;
  std::vector<LoadIssue> issues;  // files skipped or loaded with a note
  int64_t chunks = 0;
  int64_t tokens = 0;
};

// grag chunk: loads `paths` (document ids relative to `base_dir`) and chunks them as `grag
// index` would with `config` (its input.* and chunks.* settings), without an index.
Result<ChunkPreview> ChunkFiles(const std::vector<std::string>& paths, const Config& config,
                                const std::string& base_dir);

}  // namespace grag
