// LLM-free ("extractive") community reports and query answers: the no-LLM mode (issue 7).
//
// Everything here works from what the index already holds (entities, relationships,
// communities, chunk texts, reports) and calls no model. It is what `grag` uses when no LLM is
// configured; the results fill the same records as the LLM paths (ReportRecord,
// GlobalSearchResult, LocalSearchResult), so embedding, `grag stats`, the CLI and the server
// need no second code path.
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
// Global search (ExtractiveGlobalSearch) selects the reports PlanGlobalSearch would (level N
// plus the coarser childless communities), but does not cap them: scoring costs no model call.
// The "map" step scores every report 0-100:
//   question terms  the question's words, normalised, stop words and question words ("what",
//                   "main", "themes", "story"...) dropped, lightly stemmed.
//   lexical         BM25 (SQLite FTS5's: k1 1.2, b 0.75, Porter stems, the IDF over the selected
//                   reports; Store::RankTexts) of the question's content words over the
//                   reports' title (twice), summary and findings (or full_content), divided by
//                   the best report's, so in (0, 1] for a report that matches.
//   prior           0.75 * log(1 + weight) / log(1 + max weight)
//                   + 0.25 * log(1 + size) / log(1 + max size), over the selected communities.
//   score           no question terms (a generic question): max(1, 100 * prior), so the
//                   largest communities come first; otherwise 0 when lexical is 0, else
//                   max(1, 100 * (relevance_weight * lexical + (1 - relevance_weight) * prior)).
// Then the LLM path's drop-zero / sort / budget logic: a point per scored report, zero-scored
// ones dropped, the rest by score, as many whole points as fit the answer (max_answer_points,
// and reduce_reply_max_tokens or else reduce_budget_tokens) kept. The "reduce" lists the kept
// points: each the report's title and summary and its findings most relevant to the question,
// ending with "[Data: Reports (id)]". Nothing above zero: not_covered, as the LLM path.
//
// Local search (ExtractiveLocalSearch) builds the context exactly as LocalSearch does
// (BuildLocalContext), then renders its top items instead of sending them to a model: the
// matched entities' descriptions, their strongest relationships, the sentences of the top
// chunks that name a matched entity, and the top community reports, each followed by the id
// of its context item ([E12], [R40], [S1], [C7]), so FindLocalCitations maps the answer's
// citations back to the items as it does for a model's answer.
//
// Thread-safety: no state is kept between calls; any number may run at once on the same Store
// and Tokenizer. GenerateExtractiveReports writes reports: run one at a time per index, and do
// not change the graph or the hierarchy while it runs. Every argument is borrowed for the call;
// callbacks run on the calling thread. Errors come back as Status, never as exceptions.
#pragma once

#include <atomic>
#include <functional>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grag/global_search.h"
#include "grag/llm.h"
#include "grag/local_search.h"
#include "grag/report.h"
#include "grag/status.h"
#include "grag/store.h"
#include "grag/tokenizer.h"
#include "grag/vector_index.h"

namespace grag {

// ---------------------------------------------------------------------------------------------
// Extractive community reports
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Extractive global search
// ---------------------------------------------------------------------------------------------

struct ExtractiveGlobalOptions {
  // Points listed in the answer at most: a reader takes in a handful; the rest are in `points`.
  int max_answer_points = 6;
  // Findings shown under each point (those naming question terms first).
  int findings_per_point = 2;
  // Share of a report's score that is lexical relevance; the rest is its size and weight. High,
  // so that the report that matches the question comes first, with size breaking near-ties.
  double relevance_weight = 0.75;
  // The answer's first line, before the points, for a generic and for a specific question.
  std::string generic_intro =
      "The main threads of the indexed text, from its largest communities (an extractive "
      "answer: passages of the community reports, not a written synthesis):";
  std::string specific_intro =
      "The community reports most relevant to the question, most relevant first (an extractive "
      "answer: passages of the community reports, not a written synthesis):";
};

// Answers a whole-corpus question from the stored reports without a model (see the file
// comment). Reads options.level, reduce_budget_tokens, reduce_reply_max_tokens,
// not_covered_answer and on_answer_delta (called once with the whole answer); the map and
// reduce prompts, batching and timeouts do not apply. The result is filled as GlobalSearch's:
// points (one per report, by score), citations (the kept points' communities, most relevant
// first) and stats, with map_calls and reduce_calls 0 and no map_calls entries. Errors:
// kInvalidArgument (bad options, a budget that cannot hold the top point), kNotFound (no report
// at that level), the store's errors.
Result<GlobalSearchResult> ExtractiveGlobalSearch(Store& store, const Tokenizer& tokenizer,
                                                  std::string_view question,
                                                  const GlobalSearchOptions& options = {},
                                                  const ExtractiveGlobalOptions& extractive = {});

// ---------------------------------------------------------------------------------------------
// Extractive local search
// ---------------------------------------------------------------------------------------------

struct ExtractiveLocalOptions {
  // Matched entities described in full (their description); further matches are only named.
  int max_entities = 3;
  // Items of each kind rendered at most, in the context's rank order: a readable answer, not
  // the whole context (which stays in LocalSearchResult::context).
  int max_relationships = 5;
  int max_chunks = 4;
  int max_reports = 2;
  // Sentences quoted from one chunk, and the bytes kept of each quote and description (the
  // NLP extractor's descriptions are the mentions' sentences, which run long).
  int sentences_per_chunk = 2;
  size_t max_quote_chars = 300;
  size_t max_description_chars = 400;
  size_t max_relationship_chars = 200;
};

// Builds the context as LocalSearch does (BuildLocalContext, same options and errors) and
// renders the answer from it without a model (see the file comment). nothing_found when no
// entity matched (answer: options.nothing_found_answer). `prompt` stays empty and `response`
// default; options.on_answer_delta is called once with the whole answer.
Result<LocalSearchResult> ExtractiveLocalSearch(
    Store& store, EmbeddingModel* embedder, const Tokenizer& tokenizer, std::string_view question,
    const LocalSearchOptions& options = {}, const ExtractiveLocalOptions& extractive = {},
    const VectorIndex* entity_index = nullptr, const Retriever* retriever = nullptr);

// ---------------------------------------------------------------------------------------------
// Text helpers the three share (public so the NLP extractor and tests can use them too)
// ---------------------------------------------------------------------------------------------

struct Sentence {
  std::string text;      // whitespace runs collapsed to one space, trimmed
  size_t offset = 0;     // byte offset in the input where it starts
  bool complete = true;  // starts like a sentence (not lower case) and ends with . ! or ?
};

// Splits prose into sentences: at . ! ? (with closing quotes and brackets) followed by space
// and not by a lower-case word ('"Bah!" said Scrooge' stays one), never after a common
// abbreviation (Mr. Mrs. Dr. St. ...) or a single initial, and always at a blank line. A chunk's
// "title: ...\n" prefix (chunks.prepend_title) is skipped. Cut-off pieces at a chunk's edges
// come back with complete == false.
std::vector<Sentence> SplitSentences(std::string_view text);

// The search terms of `text`: NormalizeEntityName's words, without stop words and the words of
// questions about a corpus ("what", "main", "themes", "story", ...), without numbers-only
// words of one or two digits, lightly stemmed ("ghosts" and "ghost" agree). In text order,
// repeats kept.
std::vector<std::string> ContentTerms(std::string_view text);

// `text` on one line (whitespace runs, line breaks included, collapsed to one space, trimmed),
// then cut to at most `max_bytes` bytes at a word boundary (never inside a UTF-8 character),
// with "…" appended when cut.
std::string ShortenAtWord(std::string_view text, size_t max_bytes);

}  // namespace grag
