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
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "grag/chunker.h"
#include "grag/config.h"
#include "grag/index_types.h"
#include "grag/llm.h"
#include "grag/loader.h"
#include "grag/status.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag {

// What the pipeline works with. Borrowed; all must outlive the call.
struct IndexContext {
  Store* store = nullptr;
  ChatModel* chat = nullptr;                              // nullptr: no LLM configured
  EmbeddingModel* embedder = nullptr;                     // nullptr: no embeddings
  std::function<void(const IndexProgress&)> on_progress;  // called from worker threads too
  std::function<void(const IndexPlan&)> on_plan;  // once, after loading and before any model call
  const std::atomic<bool>* cancel = nullptr;      // set to stop early (e.g. on Ctrl-C)
};

// Brings the index in line with the input and runs every stage. A model failure other than an
// unparseable reply (network down, bad key) stops the run with that error after the calls in
// flight finish; everything done so far stays stored.
Result<IndexSummary> RunIndex(const Config& config, const IndexRequest& request,
                              IndexContext& context);

// ---- indexing workers (PostgreSQL): extraction spread over processes and machines

// `grag index --worker`: takes part in the extraction a run with extraction.distribute shares
// (Store::PublishWork), with `context.chat` (its own endpoints): claims chunks under a lease it
// renews, sends their extraction calls (the replies go to the index's reply cache, where the
// run finds them) and marks them done, until cancelled or, with `once`, the work is done.
// The chat model must be the run's (model, prompts, extraction settings), else
// kInvalidArgument before any call. Needs a PostgreSQL index (kUnimplemented otherwise).
Result<WorkerSummary> RunExtractionWorker(const Config& config, IndexContext& context,
                                          const WorkerOptions& options);

// ---- reports.mode = lazy: community reports written when a question needs them

struct DeferredReports {
  int64_t written = 0;  // LLM reports written (and stored) now
  int64_t gaps = 0;     // communities whose reply was unusable: a gap stored
  int64_t pending = 0;  // over reports.lazy_per_question: still on their extractive stand-in
  int64_t calls = 0;    // chat calls, retries included
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t embedded = 0;  // of the reports written, those embedded (see WriteDeferredReports)
};

// Writes the LLM reports of those of `community_ids` (the heaviest first: the order given) that
// have none yet (an extractive stand-in, a gap or no report) and are worth one
// (communities.llm_report_min_size, literal values not counted), at most
// reports.lazy_per_question of them, with the `summarize` role's model as `grag index`
// does; each is stored as it is written. With `embedder`, when the index's report vectors are
// that model's, the new reports are embedded too (as the embed stage would: DRIFT ranks reports
// by them). Not thread-safe against itself on one index: callers serialise (two would write the
// same reports). Errors: the store's, the models' (a chat failure other than an unparseable
// reply), kCancelled when `cancel` is set.
Result<DeferredReports> WriteDeferredReports(const Config& config, Store& store, ChatModel& chat,
                                             const std::vector<int64_t>& community_ids,
                                             const std::atomic<bool>* cancel = nullptr,
                                             EmbeddingModel* embedder = nullptr);

// What RunIndex would do with `request`, without changing the index or calling a model.
Result<IndexPlan> PlanIndex(const Config& config, const IndexRequest& request,
                            IndexContext& context);

// ---- a person's corrections to entity resolution (grag entities merge/split)
// Each is stored as an override on the extracted names, kept across re-indexing and winning over
// the resolver; it takes effect at the next run (RunIndex with request.graph_only applies it at
// once). Names are matched as the index matches them (NormalizeEntityName): an entity's name or
// any extracted name resolved into it.

// Records that the things named `a` and `b` are one entity. kNotFound names a name the index does
// not know; kInvalidArgument when both name the same extracted name. Returns false (and records
// nothing) when they are already one entity.
Result<bool> RecordEntityMerge(Store& store, std::string_view a, std::string_view b);

// Records that the extracted name `alias` is not the entity named `entity` (it will stand alone),
// or, with `alias` empty, that no two names of the entity are one thing. Returns how many names
// were split off (0: the entity had only its own name). kNotFound for an unknown name,
// kInvalidArgument when `alias` is not a name of that entity.
Result<int64_t> RecordEntitySplit(Store& store, std::string_view entity, std::string_view alias);

// ---- grag chunk: what files would give, without indexing them

// Per-endpoint usage as run counters (runs.counters), one key per figure:
// "endpoint:<role>:<name>:<figure>" with figure requests, errors, benched, tokens_in, tokens_out,
// latency_ms_sum and answered. Summed over runs they give each endpoint's totals (grag stats).
std::map<std::string, int64_t> EndpointRunCounters(const std::vector<EndpointUsage>& endpoints);
// The endpoints such counters describe (other keys are ignored), by role then name. The latency
// median is not recoverable from sums: only the mean (latency_ms_sum / answered) is.
std::vector<EndpointUsage> EndpointsFromRunCounters(const std::map<std::string, int64_t>& counters);

// extract, summarize and resolve's calls and tokens in an index's run counters (summed over
// runs: Store::TotalRunCounters; "tokens_in_<role>", "tokens_out_<role>"), costed at `llm`'s
// prices (LlmConfig::InputPrice) when it has some. Runs before tokens were kept by role count
// their calls only.
std::vector<RoleCost> SpendByRole(const std::map<std::string, int64_t>& counters,
                                  const LlmConfig& llm);

// The extractor whose results the pipeline uses with `context`'s models.
ExtractorId ExtractorFor(const IndexContext& context);

// The chunking options the configuration describes.
ChunkOptions ChunkOptionsFor(const Config& config);

// The loader options the configuration describes, with document ids relative to the input
// folder (so `grag index` and `grag index input/x.txt` give a file the same id).
LoadOptions LoadOptionsFor(const Config& config);

}  // namespace grag
