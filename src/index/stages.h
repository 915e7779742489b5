// The stages of an index run, in the order RunIndex calls them. Each works on the store through
// the run (run.h) and fills only its own summary (grag/indexer.h): what it did, for the run's
// IndexSummary. Each unit of work is its own transaction, so a stage stopped at any point (an
// error, cancellation, a kill) leaves what it finished stored and the next run goes on from there.
#pragma once

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

// Before a run with a model (and its dry run): every prompt file the run may use (extraction,
// the judge, reports) is readable and keeps its placeholders, so an edited prompt that would
// fail the run after it has paid for extraction fails it before the first call. One error names
// every broken file.
Status CheckIndexPrompts(const Config& config);

}  // namespace grag
