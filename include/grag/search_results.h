// What each query method found and answered: global, local, basic/hybrid (passages), DRIFT
// and lazy search's results, retrieval's ranking, the router's decision, and the citations
// down to the character in the source documents.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grag/llm_types.h"
#include "grag/records.h"
#include "grag/status.h"

namespace grag {

enum class QuestionKind { kGlobal, kMultiHop, kLookup };

struct RouteDecision {
  QuestionKind kind = QuestionKind::kLookup;
  std::string reason;   // one line for people, e.g. "asks about the main themes"
  bool by_llm = false;  // decided by the model (query.router = "llm")
};

enum class RetrievalMethod { kVector, kBm25, kGraph, kHybrid };

// Every method, in the order front ends offer them (the CLI's choices, the HTTP and MCP enums).
inline constexpr RetrievalMethod kRetrievalMethods[] = {
    RetrievalMethod::kVector, RetrievalMethod::kBm25, RetrievalMethod::kGraph,
    RetrievalMethod::kHybrid};

std::string_view RetrievalMethodName(RetrievalMethod method);  // "vector", "bm25", ...

// Their names, joined with `separator` ("vector, bm25, graph, hybrid").
std::string RetrievalMethodNames(std::string_view separator);

Result<RetrievalMethod> ParseRetrievalMethod(std::string_view name);

// The three signals, in the order of RetrievedChunk::ranks.
inline constexpr size_t kSignalCount = 3;

enum class Signal { kVector = 0, kBm25 = 1, kGraph = 2 };

std::string_view SignalName(Signal signal);

// An entity the graph signal started from.
struct SeedEntity {
  int64_t entity_id = 0;
  std::string name_key;
  double weight = 0;            // its share of the seed mass (0-1)
  bool by_name = false;         // named in the question
  bool by_fact = false;         // named in a sentence of a best passage that matches the question
  double specificity = 0;       // of its name (0-1), when named
  int64_t chunk_frequency = 0;  // chunks whose text holds its name, when named
  std::optional<double> similarity;  // when matched by embedding
  // When found as a fact: the share of the question's specific words (by specificity) held by
  // the best sentence that names it together with the sentences either side (0-1).
  double fact_match = 0;
};

struct RetrievedChunk {
  std::string chunk_id;
  std::string document_id;
  int64_t index = 0;  // position in its document
  std::string text;
  double score = 0;  // the method's score (the fused RRF score for hybrid)
  // Each signal's 1-based rank of this chunk among its candidates; nullopt: not among them.
  std::array<std::optional<int>, kSignalCount> ranks{};
  std::array<double, kSignalCount> signal_scores{};  // cosine, BM25, walk probability
  std::optional<double> rerank_score;                // when the reranker saw it
  // Hybrid: moved up to follow the first chunk by the evidence chain (RetrievalTuning::
  // chain_links): the key of the entity the first chunk names and this chunk's document is
  // titled by; empty: in its fused place.
  std::string chained_by;
};

struct RetrievalStats {
  int64_t chunks = 0;                              // in the index
  int64_t entities = 0;                            // in the graph
  std::array<int64_t, kSignalCount> candidates{};  // each signal's list length
  std::array<std::chrono::microseconds, kSignalCount> signal_time{};
  std::chrono::microseconds total_time{0};
  bool used_embeddings = false;  // the vector signal ran
  bool lexical_embeddings = false;
  bool reranked = false;
  std::chrono::microseconds rerank_time{0};
  // Hybrid: the graph's weight in the fusion, by how well the question anchors the walk
  // (RetrievalTuning::anchored_specificity), and the sentence-window list's (passage_weight, by
  // how many windows the candidates' chunks hold; 0: not used).
  double graph_weight = 0;
  double window_weight = 0;
};

struct RetrievalResult {
  RetrievalMethod method = RetrievalMethod::kHybrid;  // the method that ranked them
  std::vector<RetrievedChunk> chunks;                 // best first, at most top_k
  std::vector<SeedEntity> seeds;                      // the graph signal's, heaviest first
  // Entities by the walk's probability of ending on them, highest first (at most 200): what
  // local search ranks relationships and reports by.
  std::vector<std::pair<int64_t, double>> entity_scores;
  std::vector<std::string> diagnostics;  // why a signal did not run, and similar
  RetrievalStats stats;
};

enum class SpanPrecision { kQuote, kSentence, kChunk };

struct SourceSpan {
  std::string document_id;
  std::string source_path;
  std::string title;
  std::string content_hash;  // of the document text the offsets index
  std::string chunk_id;      // the chunk the span was found in
  int64_t byte_start = 0;    // UTF-8 bytes of the document's text: [byte_start, byte_end)
  int64_t byte_end = 0;
  int64_t start = 0;  // the same in Unicode code points ("characters": Python text[start:end])
  int64_t end = 0;
  SpanPrecision precision = SpanPrecision::kChunk;
  double overlap = 0;    // share of the claim's weighted content words the span holds, 0-1
  bool located = false;  // the chunk had no stored offsets: found by searching its text
  std::string text;      // document.text[byte_start, byte_end)
};

struct SourceCitation {
  std::string id;                 // as cited: "S3", "C7", "E12", "R40", "T5"
  std::string kind;               // chunk | report | entity | relationship
  std::string claim;              // the answer's sentence that cites it, markers removed
  std::vector<SourceSpan> spans;  // best first, at most SpanOptions::max_spans
};

struct PassageCitation {
  std::string id;    // "S2", as the answer cites it
  size_t chunk = 0;  // index into PassageSearchResult::retrieval.chunks
};

struct PassageSearchResult {
  std::string answer;
  bool nothing_found = false;  // no passage retrieved: `answer` is nothing_found_answer
  bool llm = false;            // the answer came from the chat model
  RetrievalResult retrieval;   // the ranked passages; the first `placed` are in the context
  size_t placed = 0;
  int64_t context_tokens = 0;
  std::vector<PassageCitation> citations;  // in order of first mention
  std::string prompt;                      // the filled prompt; empty without a model
  ChatResponse response;
};

struct GlobalReportInfo {
  int64_t community_id = 0;
  int64_t level = 0;
  std::string title;
  int64_t weight = 0;            // the community's weight: distinct chunks of its members
  std::optional<double> rating;  // the report's importance 0-10, if it has one
  int64_t tokens = 0;            // of the report as placed in a map prompt
  bool truncated = false;        // cut to fit one map prompt on its own
};

enum class MapCallOutcome {
  kOk,           // parsed; its points (if any) went on to ranking
  kFailed,       // the model call failed (HTTP error, network, refused request...)
  kTimedOut,     // the client's timeout, or no reply within map_timeout
  kUnparseable,  // a reply without a single readable point
};

struct GlobalMapCall {
  size_t batch = 0;                    // index into the plan's batches
  std::vector<int64_t> community_ids;  // the batch's reports
  MapCallOutcome outcome = MapCallOutcome::kOk;
  std::string error;          // why it dropped out; empty when ok
  int64_t points = 0;         // points read from the reply, zero-scored included
  int64_t prompt_tokens = 0;  // 0 unless ok (a failed call's spending is in Usage())
  int64_t completion_tokens = 0;
  bool cache_hit = false;
  std::chrono::milliseconds latency{0};
};

enum class PointFate {
  kKept,        // in the reduce prompt
  kZeroScore,   // scored 0: not helpful
  kOverBudget,  // did not fit the reduce budget after the higher-scored points
};

struct GlobalPoint {
  std::string description;
  int score = 0;                       // 0-100
  std::vector<int64_t> community_ids;  // ascending
  // Budgeted search's claims: the passage labels ("T3") it rests on, shown in the reduce prompt
  // instead of the communities. Empty for global search.
  std::vector<std::string> source_ids;
  bool named_by_model = false;  // the model named these ids; else the whole batch's
  size_t batch = 0;
  PointFate fate = PointFate::kKept;
};

struct GlobalCitation {
  int64_t community_id = 0;
  int64_t level = 0;
  std::string title;
};

struct GlobalSearchStats {
  int64_t level = 0;
  int64_t communities_selected = 0;
  int64_t reports_used = 0;       // placed in a map prompt
  int64_t reports_left_out = 0;   // over the map-call cap
  int64_t reports_missing = 0;    // selected communities without a report (or with a gap)
  int64_t reports_truncated = 0;  // cut to fit a map prompt on their own
  int64_t map_calls = 0;          // made: one per batch
  int64_t map_calls_failed = 0;   // all that dropped out: failed + timed out + unparseable
  int64_t map_calls_timed_out = 0;
  int64_t map_calls_unparseable = 0;
  int64_t points_total = 0;  // = kept + zero_score + over_budget
  int64_t points_kept = 0;
  int64_t points_zero_score = 0;
  int64_t points_over_budget = 0;
  int64_t reduce_calls = 0;          // 0 (not covered) or 1
  int64_t reduce_prompt_tokens = 0;  // counted locally; <= reduce_budget_tokens
  int64_t tokens_in = 0;   // prompt tokens of the map calls that answered, plus the reduce
  int64_t tokens_out = 0;  // completion tokens, likewise
  int64_t cache_hits = 0;  // calls answered from the reply cache
  std::chrono::milliseconds plan_time{0};
  bool plan_from_route = false;  // the router's plan was used: made once, to estimate the cost
  // reports.mode = lazy: LLM reports this question wrote before its map calls (stored for the
  // questions after it), their calls and tokens (not in tokens_in/out), and the communities read
  // from their extractive stand-in because the question's budget was spent.
  int64_t reports_written = 0;
  int64_t report_calls = 0;
  int64_t report_tokens_in = 0;
  int64_t report_tokens_out = 0;
  int64_t reports_pending = 0;
  std::chrono::milliseconds map_time{0};
  std::chrono::milliseconds reduce_time{0};
  std::chrono::milliseconds wall_time{0};  // the whole call
};

struct GlobalSearchResult {
  std::string answer;
  bool not_covered = false;  // the answer is not_covered_answer; no reduce call was made
  // The union of the kept points' communities, in order of first appearance (most helpful
  // first). Empty when not covered.
  std::vector<GlobalCitation> citations;
  std::vector<GlobalPoint> points;         // every point read, by score (highest first)
  std::vector<GlobalMapCall> map_calls;    // one per batch, in batch order
  std::vector<GlobalReportInfo> left_out;  // reports over the map-call cap
  GlobalSearchStats stats;
};

enum class LocalItemType { kEntity, kRelationship, kReport, kChunk };

// An entity the question matched.
struct LocalMatch {
  int64_t entity_id = 0;
  std::string name;
  // Cosine similarity of its description embedding to the question, when it was among the k
  // nearest; nullopt otherwise (matched by name only, or no embeddings).
  std::optional<double> similarity;
  bool by_name = false;       // its normalised name appears in the question
  bool by_embedding = false;  // among the k nearest and cleared the floor
  // Named by a sentence of the hybrid ranking's best passages that matches the question (a
  // fact seed) well enough to clear the floor: matched only when nothing was named and no
  // description was near enough. Its match: the share of the question's specific words that
  // sentence holds with the sentences either side (a fact often takes two: "Dick Humbert was an
  // end. He played ... from 1945 to 1949").
  bool by_fact = false;
  double fact_match = 0;
};

// One item placed in the context. The fields after `text` say what the id stands for; those
// of other types stay empty.
struct LocalContextItem {
  LocalItemType type = LocalItemType::kEntity;
  std::string id;      // "E12", "R40", "C7", "S3": what the model sees and cites
  int64_t rank = 0;    // 1-based place in its type's ranking (entities: match order)
  int64_t tokens = 0;  // charged to the budget, counted with the tokenizer
  // The matched entities that brought it in (for an entity line, itself).
  std::vector<int64_t> via;
  std::string text;  // exactly as placed in the prompt

  int64_t entity_id = 0;        // kEntity
  std::string name;             // kEntity: display name; kReport: the report's title
  std::string entity_type;      // kEntity
  int64_t relationship_id = 0;  // kRelationship, with its two ends
  int64_t source_id = 0;
  int64_t target_id = 0;
  std::string source_name;
  std::string target_name;
  int64_t community_id = 0;  // kReport
  int64_t level = 0;
  std::string chunk_id;  // kChunk: the chunk, its document and its position in it
  std::string document_id;
  int64_t chunk_index = 0;
};

// One line of description for people: "entity FTC", "relationship FTC -- Digital Markets Act",
// "report of community 7 (level 1): Title", "chunk 3 of document news/ftc.txt".
std::string DescribeLocalItem(const LocalContextItem& item);

// How one type fared against the budget.
struct LocalTypeUsage {
  LocalItemType type = LocalItemType::kEntity;
  int64_t candidates = 0;    // collected
  int64_t placed = 0;        // in the context
  int64_t share_tokens = 0;  // its first share (entities: the whole budget)
  int64_t used_tokens = 0;   // what its placed items take, spare shares included
};

struct LocalContext {
  std::vector<LocalMatch> matches;      // named first (question order), then by similarity
  std::vector<LocalContextItem> items;  // entities, relationships, reports, chunks; by rank
  std::vector<LocalTypeUsage> usage;    // one per type, in that order
  int64_t budget_tokens = 0;
  int64_t used_tokens = 0;  // sum of the items' tokens, <= budget_tokens
  // The prompt's sections, each the concatenation of its items' text.
  std::string entities_text;
  std::string relationships_text;
  std::string reports_text;
  std::string chunks_text;
  bool used_embeddings = false;  // false: entities were matched by name only
  // Things the user should know: why matching fell back to names, how close the nearest entity
  // came when none cleared the floor, communities without a report. Logged at debug level
  // only: callers show them (the CLI on stderr, and in --json).
  std::vector<std::string> diagnostics;
  std::chrono::microseconds build_time{0};

  // The item with this id, or nullptr.
  const LocalContextItem* Find(std::string_view id) const;
};

struct LocalCitation {
  std::string id;   // as the answer cites it ("S3")
  size_t item = 0;  // index into LocalContext::items
};

struct LocalSearchResult {
  std::string answer;
  bool nothing_found = false;  // no entity matched: `answer` is nothing_found_answer, no call
  LocalContext context;
  // Ids the answer cites that are in the context, in order of first mention.
  std::vector<LocalCitation> citations;
  std::string prompt;  // the filled prompt sent; empty when nothing was found
  // The answer call's reply (content == answer); default when no call was made.
  ChatResponse response;
};

enum class DriftOutcome {
  kOk,            // parsed
  kUnparseable,   // no JSON: the raw reply is kept as the answer, score 0, no follow-ups
  kFailed,        // the call failed: dropped
  kNothingFound,  // local search matched no entity: no call was made
  kNotAsked,      // over the call cap
};

// One node of the research tree: a primer fold (depth 0) or a follow-up (depth >= 1).
struct DriftAction {
  std::string query;  // the follow-up; the question itself for a primer fold
  int64_t depth = 0;
  std::optional<size_t> parent;  // index into DriftSearchResult::actions
  double priority = 0;           // what selected it
  std::string answer;
  int score = 0;  // 0-100: how much the answer helps the overall question
  std::vector<std::string> follow_ups;
  DriftOutcome outcome = DriftOutcome::kOk;
  std::string error;                // kFailed: why
  std::vector<int64_t> report_ids;  // primer fold: the reports it read
  std::vector<std::string> cited;   // ids the answer cites that its context held
  int64_t prompt_tokens = 0;        // of the reply (0 when no call)
  int64_t completion_tokens = 0;
  bool cache_hit = false;
};

struct DriftStats {
  int64_t hyde_calls = 0;
  int64_t primer_calls = 0;
  int64_t local_calls = 0;
  int64_t reduce_calls = 0;
  int64_t failed = 0;       // calls that failed (primer, follow-up or HyDE)
  int64_t unparseable = 0;  // replies kept as raw text
  int64_t duplicates = 0;   // follow-ups dropped as near-duplicates
  int64_t max_calls = 0;    // the bound the run kept to
  int64_t calls() const { return hyde_calls + primer_calls + local_calls + reduce_calls; }
  int64_t tokens_in = 0;
  int64_t tokens_out = 0;
  int64_t cache_hits = 0;
  int64_t embedding_requests = 0;
  bool reports_by_words = false;  // no report embeddings: matched by BM25
  std::chrono::milliseconds primer_time{0};
  std::chrono::milliseconds followup_time{0};
  std::chrono::milliseconds reduce_time{0};
  std::chrono::milliseconds wall_time{0};
};

// What a cited id stands for: a chunk (S<k>), an entity (E<id>), a relationship (R<id>) or a
// community report (C<id>).
struct DriftCitation {
  std::string id;
  LocalItemType kind = LocalItemType::kChunk;
  std::string chunk_id;  // kChunk, with its document and position
  std::string document_id;
  int64_t chunk_index = 0;
  int64_t entity_id = 0;        // kEntity
  int64_t relationship_id = 0;  // kRelationship, with its two ends
  int64_t source_id = 0;
  int64_t target_id = 0;
  int64_t community_id = 0;  // kReport
  std::string title;         // kReport: the report's title; kEntity: the name
};

struct DriftReportMatch {
  int64_t community_id = 0;
  int64_t level = 0;
  std::string title;
  double score = 0;  // cosine (max of HyDE and question), or BM25 when matched by words
};

struct DriftSearchResult {
  std::string answer;
  std::string hyde_text;  // the hypothetical answer (empty: HyDE off or failed)
  std::vector<DriftReportMatch> primer_reports;  // the reports the primer read, best first
  std::vector<DriftAction> actions;              // primer folds first, then follow-ups as asked
  std::vector<DriftCitation> citations;          // ids the answer cites, in order of first mention
  std::vector<std::string> diagnostics;
  DriftStats stats;
};

// One passage tested for relevance.
struct LazyTest {
  std::string label;  // "T<n>", n in test order from 1: what the claims cite
  std::string chunk_id;
  std::string document_id;
  int64_t chunk_index = 0;   // its position in the document
  int64_t community_id = 0;  // the community it was tested for
  size_t window_begin = 0;   // bytes of the passage in the chunk's text
  size_t window_end = 0;
  int64_t tokens = 0;  // of the passage
  int score = 0;       // the model's rating 0-3 (0 when missing or unreadable)
  int call = 0;        // relevance call, from 0
  bool relevant = false;
};

// One community's turn in the best-first loop.
struct LazyVisit {
  int64_t community_id = 0;
  int64_t level = 0;
  double rank = 0;
  int tested = 0;
  int hits = 0;
  int wave = 0;
};

enum class LazyStop { kBudget, kMisses, kExhausted };

struct LazyStats {
  int64_t refine_calls = 0;
  int64_t relevance_calls = 0;
  int64_t relevance_failed = 0;       // the call failed: its passages count as not relevant
  int64_t relevance_unparseable = 0;  // the reply held no rating: likewise
  int64_t claim_calls = 0;
  int64_t claim_calls_failed = 0;
  int64_t reduce_calls = 0;
  int64_t passages_tested = 0;
  int64_t passages_relevant = 0;
  int64_t relevant_left_out = 0;  // relevant chunks past max_claim_calls
  int64_t communities_visited = 0;
  int64_t deepest_level = -1;  // of a community tested
  int64_t chunks_total = 0;    // chunks the communities hold
  int64_t candidates = 0;      // chunks the retrieval lists ranked (0: generic question)
  bool generic = false;        // no content word: ranked by community size only
  bool budget_exhausted = false;
  LazyStop stop = LazyStop::kExhausted;
  int64_t tokens_in = 0;
  int64_t tokens_out = 0;
  int64_t cache_hits = 0;
  std::chrono::milliseconds wall_time{0};
  int64_t calls() const { return refine_calls + relevance_calls + claim_calls + reduce_calls; }
};

struct LazySearchResult {
  std::string answer;
  bool not_covered = false;  // no relevant passage (or no useful claim): no reduce call
  bool budget_exhausted = false;
  std::vector<std::string> subqueries;  // from the refine call
  std::vector<std::string> terms;
  std::vector<LazyVisit> visits;  // in the order they were tested
  std::vector<LazyTest> tests;    // every passage tested, in label order
  // Every claim read, by score (GlobalPoint::source_ids: the T labels it cites; community_ids:
  // the communities those passages were tested for).
  std::vector<GlobalPoint> claims;
  // The passages the kept claims cite, most helpful claim first: indices into `tests`.
  std::vector<size_t> citations;
  LazyStats stats;
};

// One question of an evaluation file: the question and any of the four kinds of gold.
struct EvalQuestion {
  int64_t line = 0;  // 1-based line in the file, for messages
  std::string question;
  std::vector<std::string> gold_chunks;     // chunk ids (grag search --json shows them)
  std::vector<std::string> gold_documents;  // document ids
  std::vector<std::string> answers;         // short answers, any one of which is enough
  std::vector<std::string> evidence;        // sentences the retrieved text should hold
};

// The enums' names, as the JSON results write them.
std::string_view SpanPrecisionName(SpanPrecision p);          // "quote", "sentence", "chunk"
std::string_view DriftOutcomeName(DriftOutcome outcome);      // "ok", "unparseable", ...
std::string_view MapCallOutcomeName(MapCallOutcome outcome);  // "ok", "failed", ...
std::string_view PointFateName(PointFate fate);               // "kept", "zero_score", "over_budget"
std::string_view LazyStopName(LazyStop stop);                 // "budget", "misses", "exhausted"
std::string_view LocalItemTypeName(LocalItemType type);       // "entity", "relationship", ...
std::string_view QuestionKindName(QuestionKind kind);         // "global", "multi_hop", "lookup"

// Parses JSON Lines: one object per line, {"question": ..., "gold_chunks"?, "gold_documents"?,
// "answers"?, "evidence"?} (arrays of strings), blank lines skipped. Errors (kInvalidArgument,
// each naming the line): text that is not JSON, not an object, an unknown field, a question
// that is missing or empty, a gold field that is not an array of strings, a line with no gold
// at all; and a file without any question.
Result<std::vector<EvalQuestion>> ParseEvalQuestions(std::string_view jsonl);

}  // namespace grag
