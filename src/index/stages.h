// The stages of an index run, in the order RunIndex calls them. Each works on the store through
// the run (run.h) and fills only its own summary (grag/indexer.h): what it did, for the run's
// IndexSummary. Each unit of work is its own transaction, so a stage stopped at any point (an
// error, cancellation, a kill) leaves what it finished stored and the next run goes on from there.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/extract.h"
#include "grag/indexer.h"
#include "grag/store.h"
#include "run.h"

namespace grag {

// Load: reads the input the request names, chunks it and brings the stored documents and
// chunks in line (removed documents go with everything extracted from them). Streams: documents
// are read, chunked and written by batches, so the input is never held whole. Works out the plan
// as it reads and hands it to the run's on_plan once the input is read, before any document is
// removed.
Status LoadAndChunk(Run& run, const IndexRequest& request, const ExtractorId& extractor,
                    LoadSummary& s, IndexPlan& plan);

// Extract: every chunk without a result from `extractor` (the LLM with its gleaning rounds,
// or the built-in NLP extractor), in parallel within the model's concurrency.
Status Extract(Run& run, const ExtractorId& extractor, ExtractSummary& s);

// How a run extracts with a model: the options of the whole extraction and of a chunk's first
// pass (what a worker sends), and what identifies them (with the model) in the work table.
struct ExtractionSetup {
  ExtractorOptions opts;
  ExtractorOptions first_opts;  // without gleaning when gleaning is selective
  double glean_below = 0;
  std::string params;
};
Result<ExtractionSetup> ExtractionSetupFor(const Config& config, const ChatModel& chat);

// Takes part in shared extraction work (Store::PublishWork) as `name`: claims chunks, runs
// their first pass with `setup.first_opts` on `chat` (the replies land in the reply cache),
// marks them done, renewing its leases meanwhile. Returns when cancelled, or with `until_done`
// once the published work is all done (or withdrawn) after it saw some; otherwise it waits
// for work. `on_chunk` after each chunk it finished.
struct WorkLoopOptions {
  std::string name;
  size_t concurrency = 1;
  std::chrono::milliseconds lease{30000};
  std::chrono::milliseconds poll{1000};
  bool until_done = true;
  const std::atomic<bool>* cancel = nullptr;
  std::function<void(const WorkState&, int64_t chunks_done, bool waiting)> on_progress;
};
Result<int64_t> RunWorkLoop(Store& store, ChatModel& chat, const ExtractionSetup& setup,
                            const WorkLoopOptions& options);

// Merge: the extracted names and relationships into one graph: entity resolution, merged
// descriptions (summarised by the LLM when too long), only the changed entities rewritten.
Status Merge(Run& run, const ExtractorId& extractor, MergeSummary& s);

// Communities: Leiden's hierarchy over the graph, warm-started from the last one where it can be,
// skipped when the graph has not changed since.
Status DetectCommunities(Run& run, CommunitiesSummary& s);

// Reports: one per community whose inputs changed (LLM, or extractive for small communities and
// without a model); `refresh_all` rewrites the stale ones too.
Status Reports(Run& run, ReportsSummary& s, bool refresh_all);

// Embed: vectors for the chunks, entity descriptions and reports whose text changed.
Status Embed(Run& run, EmbedSummary& s);

// A text to embed for an owner, and the input hash kept beside its vector.
struct EmbedItem {
  std::string owner_id;
  std::string text;
  std::string hash;
};
// A report's item: its whole text (the embed stage's and a question's lazy reports alike).
EmbedItem ReportEmbedItem(const ReportRecord& report);
// Embeds `todo` in groups of embeddings.batch_size × the embedding concurrency, storing each
// group as it arrives (in embeddings.encoding); `written` counts the vectors stored and
// `progress` (may be empty) hears how many are done after each group. kCancelled when `cancel`
// is set between groups; the embedding model's and the store's errors, in `stage`'s context.
Status EmbedItems(const Config& config, Store& store, EmbeddingModel& embedder,
                  EmbeddingOwner owner, const std::vector<EmbedItem>& todo,
                  const std::atomic<bool>* cancel, std::string_view stage,
                  const std::function<void(int64_t done)>& progress, int64_t& written);

// Before a run with a model (and its dry run): every prompt file the run may use (extraction,
// the judge, reports) is readable and keeps its placeholders, so an edited prompt that would
// fail the run after it has paid for extraction fails it before the first call. One error names
// every broken file.
Status CheckIndexPrompts(const Config& config);

}  // namespace grag
