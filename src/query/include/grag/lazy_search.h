// Budgeted search ("lazy", after Microsoft's LazyGraphRAG): answers a question over an index
// whose communities have no model-written reports (a no-LLM index) by spending a fixed budget of
// cheap relevance tests on passages, best first over the community hierarchy, then drawing
// claims from the passages found relevant and map-reducing them into one answer.
//
//   0. Plan (no call): every community's chunks (Store::CommunityChunks), the hierarchy.
//   1. Refine (one call, optional): sub-questions and search terms the text would use.
//   2. Rank chunks (no call): hybrid retrieval for the question and each sub-question, fused by
//      RRF into s(c) in [0, 1]. A generic question (no content word) ranks none: the community
//      prior below decides, breadth first.
//   3. Rank communities: mean of their best `community_rank_k` s(c), plus `prior_weight` x the
//      community's size (log weight relative to the largest of its level).
//   4. Best first, in waves of `concurrency` calls: each popped community's next
//      `tests_per_call` untested passages go to one relevance call (communities with fewer share
//      a call). A community with a relevant passage pushes its children (deepening) and stays
//      while it has ranked passages left; one without is dropped with its subtree and counts a
//      miss. Stops when `budget` calls are made, `max_misses` communities in a row yield
//      nothing, or nothing is left to test.
//   5. A passage is the chunk's best window of at most `test_window_tokens` tokens (the run of
//      sentences holding most of the question's words), never the whole chunk.
//   6. Claims (map): the relevant chunks, whole, in prompts of `claim_batch_tokens`, at most
//      `max_claim_calls` calls; each claim scored 0-100 and citing its passages (T<n>).
//   7. Reduce: seed 000's global reduce prompt over the ranked claims, one call.
//
// Calls: refine (0-1) + relevance (<= budget) + claims (<= max_claim_calls) + reduce (0-1).
//
// Thread-safety: as GlobalSearch: no state between calls; arguments are borrowed for the call.
// Callbacks run on the calling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/search_results.h"
#include "grag/global_search.h"
#include "grag/llm.h"
#include "grag/prompts.h"
#include "grag/question.h"
#include "grag/retrieval.h"
#include "grag/status.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag {

struct LazySearchOptions {
  // Relevance-test calls at most (--budget): 20 x 5 passages = 100 tests, LazyGraphRAG's lowest
  // reported budget.
  int budget = 20;
  // Passages per relevance call: 5 x 400 tokens is a cheap prompt, still one decision each.
  int tests_per_call = 5;
  // Tokens of one tested passage: a 1,200-token chunk tested whole would triple the cost; its
  // best window carries the evidence.
  int64_t test_window_tokens = 400;
  // Rating (0-3) a passage needs to count as relevant: "tangential" (1) passages dilute claims.
  int relevance_threshold = 2;
  // Communities in a row without a relevant passage before the search stops (LazyGraphRAG's z).
  int max_misses = 4;
  // A community ranks by the mean of its best this many passages, not by all of them.
  int community_rank_k = 3;
  // Weight of the community-size prior: breaks near-ties; decides alone for generic questions.
  double prior_weight = 0.1;
  // Chunks each retrieval list (question, sub-questions) contributes to the ranking.
  int candidate_chunks = 200;
  // One call that gives the lexical retriever the words the text uses; up to `subqueries`.
  bool refine = true;
  int subqueries = 3;
  // Relevance calls per wave (in flight at once): keeps best-first order meaningful.
  int concurrency = 8;
  // Relevant text read whole by the claims calls: tokens per prompt, calls at most.
  int64_t claim_batch_tokens = 8'000;
  int max_claim_calls = 8;
  // Tokens of the whole reduce prompt, as global search's.
  int64_t reduce_budget_tokens = 12'000;
  std::optional<int> reply_max_tokens = 1'000;         // refine, relevance and claims replies
  std::optional<int> reduce_reply_max_tokens = 2'000;  // the answer
  bool json_mode = true;
  int64_t max_question_tokens = kDefaultMaxQuestionTokens;
  // The chunk ranking's retrieval (method and top_k are set by the search).
  RetrievalOptions retrieval;
  // Prompt texts: lazy_refine ({{question}} {{max_subqueries}}), lazy_relevance ({{question}}
  // {{passages}}), lazy_claims ({{question}} {{passages}}), and seed 000's global_reduce.
  std::string refine_prompt = std::string(GetPromptInfo(PromptId::kLazyRefine).default_text);
  std::string relevance_prompt = std::string(GetPromptInfo(PromptId::kLazyRelevance).default_text);
  std::string claims_prompt = std::string(GetPromptInfo(PromptId::kLazyClaims).default_text);
  std::string reduce_prompt = std::string(GetPromptInfo(PromptId::kGlobalReduce).default_text);
  std::string not_covered_answer =
      "The indexed corpus does not cover this question: none of the passages tested holds "
      "anything that helps answer it.";
  // Each piece of the answer as the reduce streams it (and the budget note). Empty: no stream.
  std::function<void(std::string_view delta)> on_answer_delta;
  // After each wave: relevance calls made so far and the budget.
  std::function<void(int calls, int budget)> on_progress;
};

// Checks the options. kInvalidArgument names the field.
Status ValidateLazyOptions(const LazySearchOptions& options);

// What a question will cost at most and about, without a model call.
struct LazyPlan {
  int64_t chunks_total = 0;
  int64_t communities = 0;
  int64_t max_calls = 0;       // 1 (refine) + budget + max_claim_calls + 1 (reduce)
  int64_t expected_calls = 0;  // refine + min(budget, passages / tests_per_call) + claims + 1
  std::string cost_note;       // "at most 30 calls (refine 1 + relevance <= 20 + ...)"
};
Result<LazyPlan> PlanLazySearch(Store& store, const LazySearchOptions& options);

// Runs one budgeted search. Errors: kInvalidArgument (options, question), kNotFound (an index
// without chunks), the store's; kUnavailable when every claims call failed; the reduce call's
// error. Failed relevance calls are counted, not errors: the budget is spent either way.
Result<LazySearchResult> LazySearch(Store& store, const Retriever& retriever, ChatModel& chat,
                                    const Tokenizer& tokenizer, std::string_view question,
                                    const LazySearchOptions& options = {});

}  // namespace grag
