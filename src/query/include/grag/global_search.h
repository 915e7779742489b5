// Global search: answers whole-corpus questions ("what are the main themes?") by map-reducing
// over community reports, as seed 000 specifies.
//
//   1. Select the reports of one community level: the communities of level N plus the coarser
//      communities that have no children, so every clustered entity is represented exactly once.
//   2. Shuffle them (seeded, so a query is reproducible) into batches whose whole map prompt fits
//      `map_batch_tokens`, counted with the real tokenizer. When more than `max_map_calls`
//      batches would be needed, the highest-weight reports are kept and the rest left out.
//   3. One map call per batch, all concurrent, each with its own timeout. A failed, timed-out or
//      unparseable reply drops out (and shows in `map_calls`); the query goes on without it.
//   4. Drop zero-scored points, sort the rest by score, keep as many whole points as fit the
//      reduce budget, and make one reduce call. One map round and one reduce call, never more.
//      If no map reply holds a point scored above zero, the answer says the corpus does not
//      cover the question and the reduce model is not called.
//
// Every point keeps the ids of the communities it came from (its batch's, narrowed to those the
// map model named), and the points in the reduce prompt show them, so the answer can cite them.
//
// Thread-safety: GlobalSearch and PlanGlobalSearch keep no state between calls; any number may
// run at once on the same Store, models and Tokenizer (all of which are thread-safe). Nothing
// is owned: every argument is borrowed for the duration of the call. Callbacks in the options
// run on the calling thread. Errors come back as Status, never as exceptions.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/search_results.h"
#include "grag/llm.h"
#include "grag/prompts.h"
#include "grag/question.h"
#include "grag/status.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag {

struct GlobalSearchOptions {
  // Community level (0 is the coarsest). Microsoft GraphRAG's default: fine enough that reports
  // are specific, coarse enough that a book-sized index needs a handful of map calls. A level
  // deeper than the index goes uses its finest communities (the childless ones).
  int64_t level = 2;
  // Longest question accepted (CheckQuestion): each map prompt carries it whole.
  int64_t max_question_tokens = kDefaultMaxQuestionTokens;
  // Tokens of one whole map prompt (template, question and reports). 12,000 is GraphRAG's
  // max_data_tokens for one map context; it leaves room for the reply in a 16k-token window.
  int64_t map_batch_tokens = 12'000;
  // Map calls per query (seed 000's default), so query cost stays bounded at fine levels.
  int max_map_calls = 50;
  // Tokens of the whole reduce prompt (template, question and points); GraphRAG's 12,000.
  int64_t reduce_budget_tokens = 12'000;
  // Reply caps (GraphRAG's map_max_tokens / reduce_max_tokens): a list of points rarely needs
  // more, and the complete points of a reply cut off mid-JSON are still used. nullopt: not sent.
  std::optional<int> map_reply_max_tokens = 1'000;
  std::optional<int> reduce_reply_max_tokens = 2'000;
  // Per map call, from when it starts: a call still running then is dropped from the reduce.
  // Give the map model's client a timeout no longer than this (see GlobalSearch).
  std::chrono::milliseconds map_timeout{120'000};
  // Map calls in flight at once: the LLM client's own default limit; more would only queue there.
  int concurrency = 16;
  // Seed of the report shuffle (GraphRAG's random_state): same index and seed, same batches.
  uint64_t shuffle_seed = 86;
  // Ask for a JSON object (response_format) in map calls; turn off for servers that reject it.
  bool map_json_mode = true;
  // Prompt texts with the placeholders {{question}} {{report_batch}} and {{question}}
  // {{ranked_points}}; default seed 000's. The CLI passes LoadPrompt's text (editable files).
  std::string map_prompt = std::string(GetPromptInfo(PromptId::kGlobalMap).default_text);
  std::string reduce_prompt = std::string(GetPromptInfo(PromptId::kGlobalReduce).default_text);
  // The answer when no map reply holds a useful point (seed 000's stop rule).
  std::string not_covered_answer =
      "The indexed corpus does not cover this question: none of the community reports searched "
      "holds anything that helps answer it.";
  // Called with each piece of the answer as the reduce model streams it (once with the whole
  // not-covered answer). Empty: the reduce call does not stream.
  std::function<void(std::string_view delta)> on_answer_delta;
  // Called once per map call as it settles (answered, failed or timed out), for progress.
  std::function<void(size_t settled, size_t total)> on_map_progress;
};

// ---------------------------------------------------------------------------------------------
// The plan: which reports go to which map call. No model is called to make it.
// ---------------------------------------------------------------------------------------------

struct GlobalBatch {
  std::vector<int64_t> community_ids;  // the reports in it, in prompt order
  std::string prompt;                  // the filled map prompt
  int64_t prompt_tokens = 0;           // <= map_batch_tokens
};

struct GlobalSearchPlan {
  int64_t level = 0;
  int64_t max_level = -1;                  // the index's finest level (-1: no communities)
  int64_t communities_selected = 0;        // level N plus the coarser childless communities
  std::vector<GlobalReportInfo> reports;   // the reports used, in shuffled (prompt) order
  std::vector<GlobalReportInfo> left_out;  // over the map-call cap: the lowest weights
  std::vector<int64_t> missing_reports;    // selected communities with no report yet
  std::vector<int64_t> gap_reports;        // selected communities whose report is a gap
  std::vector<GlobalBatch> batches;        // one map call each, at most max_map_calls
};

// Selects, caps, shuffles and batches the reports for `question`. Errors: kInvalidArgument (an
// option out of range, a prompt without its placeholders, a question too long to leave room
// for any report), kNotFound (no report to search at that level), the store's errors.
Result<GlobalSearchPlan> PlanGlobalSearch(Store& store, const Tokenizer& tokenizer,
                                          std::string_view question,
                                          const GlobalSearchOptions& options = {});

// The communities `plan` selected, heaviest first: those whose reports it reads and those over
// the map-call cap (by weight), then those without a usable report (none, or a gap). What
// reports.mode = lazy writes reports for (WriteDeferredReports, grag/indexer.h).
std::vector<int64_t> CommunitiesByWeight(const GlobalSearchPlan& plan);

// ---------------------------------------------------------------------------------------------
// The result
// ---------------------------------------------------------------------------------------------

// Runs one global query: PlanGlobalSearch (or `plan`, when the caller made it already with the
// same question and options: the engine's router does, to estimate the cost), the map calls on
// `map_model`, and (unless nothing is covered) one reduce call on `reduce_model` (which may be
// the same model).
//
// A map call past map_timeout is dropped at once and the reduce goes ahead; its thread is
// joined before GlobalSearch returns, so the models must only outlive this call, and a hung call
// delays the return (not the answer) until the map client's own timeout ends it.
//
// Errors: those of PlanGlobalSearch; kUnavailable (or the calls' own error code) when every
// map call dropped out, naming the reasons; the reduce call's error (prefixed "reduce");
// kInvalidArgument when the reduce budget cannot hold even the highest-scored point.
Result<GlobalSearchResult> GlobalSearch(Store& store, ChatModel& map_model, ChatModel& reduce_model,
                                        const Tokenizer& tokenizer, std::string_view question,
                                        const GlobalSearchOptions& options = {},
                                        std::optional<GlobalSearchPlan> plan = std::nullopt);

}  // namespace grag
