// Local search: answers a question about specific entities from their neighbourhood in the
// graph, as seed 000's "Local search" specifies. It reads the index global search uses.
//
//   1. Match entities. The question is embedded and the k entities whose description
//      embeddings are nearest are taken if they clear the similarity floor; an entity whose
//      normalised name (NormalizeEntityName) appears in the question on word boundaries is
//      matched too. Named entities come first (in question order), then the others by
//      similarity, and never more than k in all.
//   2. Collect candidates: the matched entities' relationships (and so their neighbours), the
//      reports of the communities they belong to (every level), and the chunks they were
//      extracted from.
//   3. Rank each type by its link to the matched entities:
//        relationships  both ends matched first; then how many matched entities the other end
//                       is linked to; then weight, combined degree, id.
//        reports        how many matched entities the community holds; then finer level (more
//                       specific); then rating, community id.
//        chunks         how many matched entities were extracted from it; then the best match's
//                       rank; then document order.
//   4. Fill the token budget (counted with the tokenizer): the matched entities' own lines
//      first, then each type up to its share of what is left, in rank order. A type stops at its
//      first item that does not fit (truncation by rank, never mid-item: every item placed
//      outranks every item of its type left out). Budget a type leaves unused (it ran out of
//      items, or its next item is too big for its share) is shared again among the types that
//      still have items, in proportion to their shares (when no slice fits its type's next
//      item, the whole spare is offered to one type at a time, largest share first), until
//      nothing more fits. A type with a zero share gets nothing.
//   5. One call with the Local search prompt. Every item in the context carries an id the
//      model can cite: E<entity id>, R<relationship id>, C<community id> (its report) and
//      S<n> (the source chunk ranked n-th); the result maps each id the answer cites back to
//      what it stands for.
//   If no entity is matched, the answer says the index has nothing on the question and no
//   model is called (seed 000's stop rule).
//
// Without entity embeddings (no embedding model at index time, or none now) entities are
// matched by name only, and `LocalContext::diagnostics` says so.
//
// Thread-safety: the functions keep no state between calls; any number may run at once on the
// same Store, models, Tokenizer and VectorIndex (all thread-safe). Every argument is borrowed
// for the duration of the call; callbacks run on the calling thread. Errors come back as
// Status, never as exceptions.
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
#include "grag/retrieval.h"
#include "grag/status.h"
#include "grag/store.h"
#include "grag/tokenizer.h"
#include "grag/vector_index.h"

namespace grag {

struct LocalSearchOptions {
  // Matched entities at most (k). GraphRAG's top_k_mapped_entities: enough for a question that
  // names a few things plus their closest relatives. Exactly k, where Microsoft's code quietly
  // takes up to 2k.
  int top_k_entities = 10;
  // Longest question accepted (CheckQuestion): the answer prompt carries it on top of the
  // context budget.
  int64_t max_question_tokens = kDefaultMaxQuestionTokens;
  // Cosine similarity an entity's description embedding must reach to be matched (seed 000's
  // default): below it the nearest entity is merely the least unrelated one.
  double similarity_floor = 0.5;
  // Tokens of context items (entity lines, relationships, reports, chunks); the prompt template
  // and the question come on top. GraphRAG's max_context_tokens: leaves room for the answer in
  // a 16k-token window.
  int64_t context_budget_tokens = 12'000;
  // Shares of the budget left after the matched entities' own lines (any non-negative numbers,
  // normalised by their sum). Chunks get half because the prompt tells the model to prefer
  // source text for specific facts; relationships and reports split the rest.
  double chunk_share = 0.5;
  double relationship_share = 0.25;
  double report_share = 0.25;
  // The matched entities' own lines take at most this share of the budget (they come first):
  // uncapped, long descriptions crowded out the passages at small budgets.
  double entity_share = 0.1;
  // Rank the chunk lane by hybrid retrieval (vector + BM25 + graph walk, grag/retrieval.h)
  // instead of by how many matched entities each chunk names: a passage whose subject the
  // question never names is reached through the walk, and a broad match ("American", in 200
  // chunks) no longer buries the passage the question is about. Named entities too common to
  // point anywhere (RetrievalOptions::min_name_specificity) do not take matched-entity slots.
  bool hybrid_chunks = true;
  RetrievalOptions retrieval = [] {
    RetrievalOptions r;
    r.top_k = 100;  // the lane's candidates: more than a 12k budget holds
    return r;
  }();
  // Longest entity name, in words, looked for in the question (0: no name matching). Six covers
  // long names such as "Federal Trade Commission Act of 1914"; each extra word costs a few more
  // store look-ups per question word.
  int max_name_words = 6;
  // The answer prompt, with {{question}} {{entities}} {{relationships}} {{reports}} {{chunks}};
  // seed 000's by default. The CLI passes LoadPrompt's text so edited prompt files apply.
  std::string prompt = std::string(GetPromptInfo(PromptId::kLocalSearch).default_text);
  // Sampling temperature of the answer: 0 so one context gives one (cacheable) answer.
  std::optional<double> temperature = 0.0;
  // Cap on the answer's tokens (GraphRAG's local search uses 2,000); nullopt: not sent.
  std::optional<int> answer_max_tokens = 2'000;
  // The answer when no entity is matched; no model is called (seed 000's stop rule).
  std::string nothing_found_answer =
      "The index has nothing on this question: no entity in it is named in the question or "
      "close enough to it (similarity floor not cleared).";
  // Called with each piece of the answer as the model streams it (once with the whole
  // nothing-found answer). Empty: the call does not stream.
  std::function<void(std::string_view delta)> on_answer_delta;
  // Labels chunk items instead of "S<rank>" (DRIFT search: one numbering across all of a
  // question's local contexts, so the answer's citations are unambiguous). Called with the
  // chunk's id when its item is rendered (a rendered chunk that does not fit keeps its label
  // unused); must return "S<digits>" and be thread-safe. Empty: S<rank>.
  std::function<std::string(const std::string& chunk_id)> chunk_label;
};

// Matches entities and assembles the context, without calling a chat model: what LocalSearch
// sends, for tests, benchmarks and `--json` inspection.
//
// `embedder` may be null (then names only). `entity_index` is the entities' VectorIndex when
// the caller keeps one; null: the retriever's (Retriever::EntityVectors) when the chunk lane
// used one that read them, else this call scans the stored entity embeddings (the right thing
// for one question; building an HNSW graph would cost more than the scan).
// Errors: kInvalidArgument (an option out of range, a question with no text), the embedding
// model's error (prefixed "embedding the question"), the store's errors.
//
// `retriever` ranks the chunk lane (options.hybrid_chunks); null: one is opened for this call
// (what a single question from the command line does; a server keeps one).
Result<LocalContext> BuildLocalContext(Store& store, EmbeddingModel* embedder,
                                       const Tokenizer& tokenizer, std::string_view question,
                                       const LocalSearchOptions& options = {},
                                       const VectorIndex* entity_index = nullptr,
                                       const Retriever* retriever = nullptr);

// What a context item says without the label line it is placed under: a chunk's text without
// its "[S1] doc, chunk 6:" line (what `grag eval` measures, as it measures every method's
// passages without their prompt's labels); other items' text as placed.
std::string_view LocalItemBody(const LocalContextItem& item);

// Runs one local query: BuildLocalContext and, if any entity matched, one call on `chat` with
// the filled prompt. Errors: those of BuildLocalContext; kInvalidArgument for a prompt without
// its placeholders; the chat model's error (prefixed "local search answer").
Result<LocalSearchResult> LocalSearch(Store& store, ChatModel& chat, EmbeddingModel* embedder,
                                      const Tokenizer& tokenizer, std::string_view question,
                                      const LocalSearchOptions& options = {},
                                      const VectorIndex* entity_index = nullptr,
                                      const Retriever* retriever = nullptr);

// The context ids cited in `answer` (E12, [S3], (R40, C7) ...), in order of first mention;
// ids not in `context` are ignored.
std::vector<LocalCitation> FindLocalCitations(std::string_view answer, const LocalContext& context);

}  // namespace grag
