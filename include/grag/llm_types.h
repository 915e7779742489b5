// What a chat model answered and what the models spent: the figures query results and
// index summaries carry.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace grag {

// What a call is for: a model per role may serve it (RoleChatModel; llm.extract.model, ...).
enum class ChatRole {
  kDefault,    // no role: the [llm] model
  kExtract,    // entity and relationship extraction, gleaning
  kSummarize,  // description summaries and community reports
  kResolve,    // the entity-resolution judge
  kQuery,      // the router, global search's map and reduce, answers
};

// "extract", "summarize", "resolve", "query"; "default" for kDefault.
std::string_view ChatRoleName(ChatRole role);
// The kind a chat reply is kept under in the reply cache: "chat" for kDefault, else
// "chat/<role>" ("chat/extract", ...). An index run that completes drops the "chat/extract"
// replies (the extractions it stored say what they said) and the embedding replies (its
// vectors are in the embeddings table).
std::string ChatCacheKind(ChatRole role);
// The kind an embedding reply is kept under.
inline constexpr std::string_view kEmbeddingCacheKind = "embedding";

struct ChatResponse {
  std::string content;
  int64_t prompt_tokens = 0;             // from the reply's usage, else counted locally
  int64_t completion_tokens = 0;         // likewise
  bool tokens_estimated = false;         // true: the server sent no usage; the counts are local
  bool cache_hit = false;                // true: from the reply cache; no HTTP call, nothing spent
  int retries = 0;                       // HTTP attempts beyond the first
  std::chrono::milliseconds latency{0};  // the whole call, waits and retries included
  std::string model;          // who answered: the reply's "model", else the configured one
  std::string finish_reason;  // "stop", "length", ...; "" when the server does not say
  std::string endpoint;       // the endpoint that answered (its name); "" for a cache hit
  // Of completion_tokens, those a reasoning model spent thinking (the server's count, else ours
  // of the thinking it sent). The thinking itself is never part of `content`.
  int64_t reasoning_tokens = 0;
};

// What one endpoint of a model did (OpenAIOptions::endpoints), since the client was created.
struct EndpointUsage {
  std::string role;      // "llm" or "embeddings" (OpenAIOptions::usage_role)
  std::string name;      // EndpointOptions::name
  std::string base_url;  // as configured
  std::string model;     // the name sent to it
  int64_t requests = 0;  // HTTP requests sent to it, failed ones included
  int64_t errors = 0;    // requests that failed: transport errors and non-2xx replies
  int64_t benched = 0;   // times it was taken out of rotation after failing repeatedly
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t latency_ms_sum = 0;  // over the requests it answered (2xx)
  // The requests it answered, per latency bucket (LatencyBucket): subtractable, so a run's share
  // of a long-lived client still has a median.
  std::vector<int64_t> latency_histogram;

  int64_t answered() const;  // requests with a latency: the histogram's total
  double LatencyMeanMs() const;
  double LatencyP50Ms() const;  // interpolated within its bucket (buckets are 2^(1/8) wide)
  void RecordLatency(std::chrono::milliseconds latency);

  EndpointUsage& operator+=(const EndpointUsage& other);  // counters only; names kept
  EndpointUsage& operator-=(const EndpointUsage& other);
};

// Counters since a model was created. Tokens are those spent: cache hits cost nothing.
struct LlmUsage {
  int64_t calls = 0;          // Chat / Embed calls, cache hits and failures included
  int64_t cache_hits = 0;     // chat calls, or embedding inputs, answered from the cache
  int64_t http_requests = 0;  // HTTP requests sent, retries included
  int64_t retries = 0;        // HTTP requests that repeated a failed one
  int64_t failures = 0;       // calls that returned an error
  int64_t rejected = 0;       // replies the caller's validator refused (also in failures)
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // Per endpoint, when the model was given a list of endpoints (empty for a single base_url).
  // += and -= match entries by role and name.
  std::vector<EndpointUsage> endpoints;

  LlmUsage& operator+=(const LlmUsage& other);
  LlmUsage& operator-=(const LlmUsage& other);  // e.g. a run's share: now minus at its start
  friend LlmUsage operator-(LlmUsage a, const LlmUsage& b) { return a -= b; }
};

}  // namespace grag
