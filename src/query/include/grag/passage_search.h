// Basic and hybrid search: answer from the best passages alone (Microsoft GraphRAG's "basic
// search" is the vector-only case). The passages come from Retriever (grag/retrieval.h) and fill
// a token budget in rank order, never cut mid-passage; each carries an id (S1, S2, ...) the
// answer cites. With a chat model the answer is one call with the basic search prompt; without
// one it is extractive: the sentences of the top passages that share the most with the
// question, each followed by its passage's id.
//
// Thread-safety and ownership as for local search: nothing is kept between calls; every argument
// is borrowed for the call.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/search_results.h"
#include "grag/llm.h"
#include "grag/prompts.h"
#include "grag/question.h"
#include "grag/retrieval.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag {

struct PassageSearchOptions {
  // kVector is basic search; kHybrid fuses all three signals. kBm25 and kGraph work too.
  RetrievalOptions retrieval = [] {
    RetrievalOptions r;
    r.top_k = 20;  // candidates for the budget below
    return r;
  }();
  // Tokens of passages in the prompt (GraphRAG's basic search default is 12k as well).
  int64_t context_budget_tokens = 12'000;
  int64_t max_question_tokens = kDefaultMaxQuestionTokens;
  // The answer prompt with {{question}} and {{sources}}; the built-in default unless the CLI
  // passes the edited prompt file.
  std::string prompt = std::string(GetPromptInfo(PromptId::kBasicSearch).default_text);
  std::optional<double> temperature = 0.0;
  std::optional<int> answer_max_tokens = 2'000;
  // Extractive answers (no chat model): this many sentences at most.
  int extractive_sentences = 5;
  std::string nothing_found_answer =
      "The index has nothing on this question: no passage matches it.";
  std::function<void(std::string_view delta)> on_answer_delta;
};

// Retrieves with `retriever` and answers with `chat` (nullptr: extractively). Errors: the
// retriever's, kInvalidArgument for a prompt without its placeholders, the chat model's
// (prefixed "passage search answer").
Result<PassageSearchResult> PassageSearch(Store& store, const Retriever& retriever, ChatModel* chat,
                                          const Tokenizer& tokenizer, std::string_view question,
                                          const PassageSearchOptions& options = {});

}  // namespace grag
