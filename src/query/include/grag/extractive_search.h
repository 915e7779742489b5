// LLM-free ("extractive") answers to global and local questions: the no-LLM mode (issue 7).
//
// Everything here works from what the index already holds (entities, relationships,
// communities, chunk texts, reports) and calls no model. The results fill the same records as
// the LLM paths (GlobalSearchResult, LocalSearchResult), so the CLI and the server need no
// second code path. Community reports made without a model are in extractive_report.h.
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
// and Tokenizer. Every argument is borrowed for the call; callbacks run on the calling thread.
// Errors come back as Status, never as exceptions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "grag/global_search.h"
#include "grag/llm.h"
#include "grag/local_search.h"
#include "grag/retrieval.h"
#include "grag/status.h"
#include "grag/store.h"
#include "grag/tokenizer.h"
#include "grag/vector_index.h"

namespace grag {

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

}  // namespace grag
