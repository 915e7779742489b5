// LLM-free ("extractive") community reports: the no-LLM mode's reports (issue 7).
//
// Works from what the index already holds (entities, relationships, communities, chunk texts)
// and calls no model. It is what `grag` uses when no LLM is configured, and what an LLM run
// uses for communities too small to be worth a call; the results fill the same ReportRecord as
// the LLM path, so embedding, `grag stats`, the CLI and the server need no second code path.
// The extractive answers to queries are in extractive_search.h (query module).
//
// Extractive reports (GenerateExtractiveReports). For each community:
//   title      its top entities by degree (over the whole graph): "A, B and C".
//   findings   3 to 6 source sentences (from the chunks its members were extracted from) chosen
//              greedily: each pick is the sentence naming the most members, members not yet
//              named by an earlier finding counting double, complete sentences preferred. Its
//              summary is the sentence (shortened); its explanation names the members it
//              mentions, adds the descriptions of the internal relationships between them, and
//              cites like Microsoft GraphRAG's reports:
//                [Data: Entities (3, 7); Relationships (12); Sources (chunk 1a2b3c4d5e6f)]
//              with store ids (entity and relationship ids, the chunk id's first 12
//              characters). When the text yields fewer than 3, the strongest internal
//              relationships, then the top members' descriptions, make up the rest.
//   summary    how many entities and relationships, who is central, how much text it spans,
//              and the best sentence.
//   rating     min(10, 1.5 * log2(1 + weight) + 0.5 * log2(1 + size)), one decimal: weight is
//              the community's distinct source chunks, size its members. A community spanning
//              one chunk with two members rates 2.3; 20 chunks and 10 members 8.3. Absolute, not
//              relative to other communities, so a report's rating never goes stale.
//   full_content  RenderReportMarkdown of the above, as global search and embeddings use it.
// Sentences are matched to entities on normalised words (NormalizeEntityName: case-folded,
// punctuation as spaces), so "Scrooge's" names the entity "Scrooge".
//
// Input hashes. Each report stores a hash of a version tag, the options that shape it, every
// member (id, name, type, description, degree, the ids of its chunks), every internal
// relationship (id, ends, description, weight) and the community's weight. Chunk ids are
// content-derived (document id + text), so they stand for the chunk texts. A community whose
// stored report is ok, extractive and has the same hash is reused without reading any chunk;
// a changed description, membership or chunk regenerates it. Gaps (no members) are written
// again each run.
//
// Thread-safety: no state is kept between calls. GenerateExtractiveReports writes reports: run
// one at a time per index, and do not change the graph or the hierarchy while it runs. Every
// argument is borrowed for the call; callbacks run on the calling thread. Errors come back as
// Status, never as exceptions.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "grag/report.h"
#include "grag/status.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag {

struct ExtractiveReportOptions {
  // Findings per report: the seed prompt asks an LLM for 3 to 6, and an extractive report keeps
  // the same shape. Fewer than min_findings only when the community's text, relationships and
  // descriptions hold less.
  int min_findings = 3;
  int max_findings = 6;
  // Entities named in the title: enough to tell communities apart, short enough to read.
  int title_entities = 3;
  // A finding's headline is its sentence cut (at a word) to this many bytes; the whole sentence,
  // up to max_sentence_chars, then goes in the explanation. Dickens writes 100-word sentences.
  size_t headline_chars = 160;
  size_t max_sentence_chars = 400;
  // Tokens of full_content at most (the last findings are dropped to fit): keeps a report well
  // inside one global-search map batch and one embedding input.
  int64_t max_report_tokens = 2000;
  // Borrowed; when it becomes true no new community starts and kCancelled is returned (what was
  // stored stays). nullptr: never cancelled.
  const std::atomic<bool>* cancel = nullptr;
  // The communities to write reports for (an LLM writes the others); empty: every community.
  std::function<bool(const CommunityRecord&)> include;
};

// Writes an extractive report (or, for a community without members, a gap) for every community,
// finest level first, each with its own PutReport, skipping those whose stored extractive report
// has the same input hash (see the file comment). An LLM report is replaced. The summary counts
// as GenerateReports' does (llm_calls and tokens stay 0; context_tokens in an outcome is the
// tokens of the report's full_content). Errors: kInvalidArgument for bad options, kCancelled,
// the store's errors (what was stored before stays).
Result<ReportStageSummary> GenerateExtractiveReports(Store& store, const Tokenizer& tokenizer,
                                                     const ExtractiveReportOptions& options = {},
                                                     const ReportProgressFn& progress = {});

}  // namespace grag
