// DRIFT search: questions that are neither a lookup nor "the main themes". A global primer over
// the community reports drafts an answer and asks follow-up questions; the best follow-ups are
// answered by local search, a bounded number of rounds; one reduce call writes the answer.
//
//   1. HyDE (optional, 1 call): the model writes a hypothetical answer shaped like the
//      highest-weight report. It and the question are embedded; each report (all levels, gaps
//      skipped) scores the larger of its two cosines with them, and the top `primer_top_k` are
//      kept. No report embeddings: the reports are ranked by BM25 of the question instead.
//   2. Primer (<= primer_folds calls, concurrent): the kept reports, token-packed into folds;
//      each call returns an intermediate answer, a 0-100 score and follow-up questions. Every
//      follow-up gets the score of the answer that proposed it as its priority.
//   3. `depth` rounds: the `breadth` open follow-ups of highest priority (then closest to the
//      question by embedding, then first asked) are answered by a DRIFT local search each
//      (concurrent): one local context (grag/local_search.h) and one call that returns a
//      response, a score and follow-ups; children get priority = score x depth_decay^depth.
//      Near-duplicates of anything queued or asked, and follow-ups of an answer scored under
//      `min_parent_score`, are never asked.
//   4. One reduce call over the primer and follow-up answers (primer first, then by score,
//      whole notes only, within `reduce_budget_tokens`).
//
// Deterministic: the same index and question send the same requests (the reply cache makes a
// re-asked question free). Every chunk placed in any follow-up's context gets one label
// (S<k>, k in first-seen order) for the whole question, so the reduce's citations are
// unambiguous; E/R/C ids are the index's own.
//
// Call bound: MaxDriftCalls = H + F + D x B + 1 (H = hyde ? 1 : 0, F = folds, D = depth,
// B = breadth), capped by max_calls when set; never exceeded.
//
// Thread-safety: the functions keep no state between calls; the store, models and tokenizer must
// be thread-safe (they are). Callbacks run on the calling thread. Errors come back as Status.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/search_results.h"
#include "grag/llm.h"
#include "grag/local_search.h"
#include "grag/prompts.h"
#include "grag/retrieval.h"
#include "grag/status.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag {

struct DriftSearchOptions {
  // Write a report-shaped hypothetical answer and match it to the reports (1 call); off matches
  // the bare question (cheaper, usually a worse match for report-shaped texts).
  bool hyde = true;
  // Reports the primer reads: about two folds of 12k tokens; the 11th-20th rarely change the
  // follow-ups (Microsoft reads 20 in 5 folds).
  int64_t primer_top_k = 10;
  // Primer calls at most: the reports are packed into at most this many folds.
  int64_t primer_folds = 2;
  // Tokens of one whole primer prompt (template, question, reports), as global's map batch.
  int64_t primer_fold_tokens = 12'000;
  // Follow-ups asked of each call ({{max_followups}}); only `breadth` are answered per round.
  int64_t followups_per_answer = 3;
  // Rounds of follow-ups, and follow-ups answered per round.
  int64_t depth = 2;
  int64_t breadth = 3;
  // A follow-up proposed at depth d has priority score x depth_decay^d: a grandchild must be
  // better supported than a child to be asked before it.
  double depth_decay = 0.8;
  // Follow-ups of an answer the model scored below this are off-track and never asked.
  int64_t min_parent_score = 10;
  // Hard cap on chat calls; 0: the formula's bound. The loop starts no call past it.
  int64_t max_calls = 0;
  // Tokens of the whole reduce prompt.
  int64_t reduce_budget_tokens = 12'000;
  // Reply caps: the primer's and follow-ups' JSON, and the answer. nullopt: not sent.
  std::optional<int> reply_max_tokens = 1'500;
  std::optional<int> reduce_reply_max_tokens = 2'000;
  // Calls in flight at once (the LLM client's limit).
  int concurrency = 16;
  // Follow-ups whose content words overlap this much (Jaccard) with the question or with one
  // already queued or asked are duplicates.
  double duplicate_jaccard = 0.6;
  // Each follow-up's local context: the local search options (budget 8k, shares 0.8 chunks,
  // 0.1 relationships, 0.1 reports by default: follow-ups need facts; the primer read reports).
  // Its prompt, answer cap and streaming are not used (DRIFT's own prompt is).
  LocalSearchOptions local = [] {
    LocalSearchOptions o;
    o.context_budget_tokens = 8'000;
    o.chunk_share = 0.8;
    o.relationship_share = 0.1;
    o.report_share = 0.1;
    return o;
  }();
  // Prompt texts (editable files: see grag/prompts.h).
  std::string hyde_prompt = std::string(GetPromptInfo(PromptId::kDriftHyde).default_text);
  std::string primer_prompt = std::string(GetPromptInfo(PromptId::kDriftPrimer).default_text);
  std::string local_prompt = std::string(GetPromptInfo(PromptId::kDriftLocal).default_text);
  std::string reduce_prompt = std::string(GetPromptInfo(PromptId::kDriftReduce).default_text);
  // Called with each piece of the answer as the reduce streams it. Empty: no streaming.
  std::function<void(std::string_view delta)> on_answer_delta;
};

// The bound on chat calls for `folds` primer calls: hyde + folds + depth x breadth + reduce,
// capped by options.max_calls when set.
int64_t MaxDriftCalls(const DriftSearchOptions& options, int64_t folds);
// "at most 10 calls: hyde 1 + primer 2 + 2×3 follow-ups + reduce 1"
std::string DriftCostNote(const DriftSearchOptions& options, int64_t folds);

// What DriftSearch will cost, without a chat call: the reports the question alone matches,
// packed into folds. With HyDE on, the reports actually read depend on its reply, so `folds`
// is then an upper bound (folds_exact false).
struct DriftPlan {
  std::vector<int64_t> candidate_reports;
  int64_t folds = 0;
  bool folds_exact = true;
  int64_t max_calls = 0;
  int64_t estimated_tokens = 0;
  std::string cost_note;
};
Result<DriftPlan> PlanDriftSearch(Store& store, EmbeddingModel* embedder,
                                  const Tokenizer& tokenizer, std::string_view question,
                                  const DriftSearchOptions& options = {});

// Runs one DRIFT query. `embedder` may be null (reports then matched by words, follow-ups
// ranked without similarity, local contexts by names). `retriever` ranks the local contexts'
// chunk lanes; null: one is opened per follow-up.
// Errors: kInvalidArgument (an option out of range, a prompt without its placeholders, a
// question too long), kNotFound (no community report to read), kUnavailable (or the calls' own
// code) when every primer call failed, naming the reasons; the reduce call's error.
Result<DriftSearchResult> DriftSearch(Store& store, ChatModel& chat, EmbeddingModel* embedder,
                                      const Tokenizer& tokenizer, std::string_view question,
                                      const DriftSearchOptions& options = {},
                                      const Retriever* retriever = nullptr);

}  // namespace grag
