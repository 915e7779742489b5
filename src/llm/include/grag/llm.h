// The LLM client: the one way grag talks to chat and embedding models.
//
// ChatModel and EmbeddingModel are what the pipeline and the query engine use. OpenAIClient
// implements both over the OpenAI HTTP protocol (OpenAI, Azure OpenAI, and the OpenAI endpoints
// of Ollama, vLLM and llama.cpp's server); it owns the concurrency limit, rate limits, timeouts,
// retries, the reply cache and token accounting, so no caller re-implements them.
// ScriptedChatModel / ScriptedEmbeddingModel answer in-process, for unit tests of later modules.
//
// Every model is thread-safe: one instance is shared by all the pipeline's workers. Calls block
// (waiting for a concurrency slot, a rate-limit slot or a retry) but never throw.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/cache.h"
#include "grag/status.h"
#include "grag/llm_types.h"

namespace grag {

// Counts the tokens of a text. The CLI wires the real tokenizer (grag::Tokenizer::Count).
using TokenCounter = std::function<size_t(std::string_view text)>;

// The fallback when no tokenizer is wired: about one token per 4 bytes of English text.
size_t EstimateTokens(std::string_view text);

// ---------------------------------------------------------------------------------------------
// Chat
// ---------------------------------------------------------------------------------------------

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  ChatRole role = ChatRole::kDefault;
  // Default 0: extraction and reports should be repeatable, and so worth caching.
  // nullopt: not sent (some reasoning models reject any value but their own).
  std::optional<double> temperature = 0.0;
  // Upper bound on the reply's tokens; nullopt: not sent, the server's default applies.
  std::optional<int> max_tokens;
  // Ask for a JSON object (response_format {"type": "json_object"}). The prompt itself must
  // still ask for JSON: OpenAI rejects json_mode otherwise.
  bool json_mode = false;
  // With json_mode: a JSON Schema of the reply (an object, as JSON text). Sent as response_format
  // {"type": "json_schema"} (Ollama: as "format") where the server takes it; a server that refuses
  // it gets json_object, and one that refuses that too the prompt alone. Not part of the cache
  // key: the prompt that asks for the JSON decides the schema.
  std::string json_schema;
  // When set, the reply is streamed and every text delta is passed here as it arrives, in order,
  // on the calling thread. A cache hit calls it once with the whole reply.
  std::function<void(std::string_view delta)> on_delta;
  // When set, judges the complete reply before it is cached. A non-OK Status (use kParse) makes
  // Chat return that error and nothing is cached, so a later identical call reaches the model.
  std::function<Status(const std::string& content)> validator;
  // false: neither read nor write the reply cache for this call.
  bool use_cache = true;
  // When set and true, the call stops with kCancelled: before it starts, between retries, or
  // mid-transfer (a question whose asker has gone). Nothing is cached.
  const std::atomic<bool>* cancel = nullptr;
};

class ChatModel {
 public:
  virtual ~ChatModel() = default;
  // One chat completion. Thread-safe. Errors: kInvalidArgument (bad request, bad key: 4xx),
  // kNotFound (404: wrong URL or model), kRateLimited / kUnavailable / kTimeout (after the
  // retries), kParse (unusable reply, or the validator's verdict).
  virtual Result<ChatResponse> Chat(const ChatRequest& request) = 0;
  // The configured model name; part of every cache key.
  virtual const std::string& model() const = 0;
  // The model that answers calls of `role` (RoleChatModel: the role's own, when it has one).
  virtual const std::string& model_for(ChatRole /*role*/) const { return model(); }
  virtual LlmUsage Usage() const = 0;  // thread-safe snapshot
};

// A chat model per role: each call goes to its role's model, or to the default one when its role
// has none. Usage is the sum over the distinct models. Thread-safe when they are.
class RoleChatModel final : public ChatModel {
 public:
  RoleChatModel(std::unique_ptr<ChatModel> default_model,
                std::map<ChatRole, std::unique_ptr<ChatModel>> by_role);
  Result<ChatResponse> Chat(const ChatRequest& request) override;
  const std::string& model() const override { return default_->model(); }
  const std::string& model_for(ChatRole role) const override { return For(role).model(); }
  LlmUsage Usage() const override;
  // The usage of each role's own model ("extract", ...), and of the default one ("default").
  std::map<std::string, LlmUsage> UsageByRole() const;

 private:
  ChatModel& For(ChatRole role) const;
  std::unique_ptr<ChatModel> default_;
  std::map<ChatRole, std::unique_ptr<ChatModel>> by_role_;
};

// ---------------------------------------------------------------------------------------------
// Embeddings
// ---------------------------------------------------------------------------------------------

struct EmbeddingResponse {
  std::vector<std::vector<float>> vectors;  // one per input, in input order
  size_t dimension = 0;                     // every vector's length (0 when there were no inputs)
  std::string model;
  int64_t prompt_tokens = 0;      // spent by this call (cache hits cost nothing)
  bool tokens_estimated = false;  // true: some batch came back without usage
  size_t cache_hits = 0;          // inputs answered from the cache
  int retries = 0;                // summed over the call's batches
  std::chrono::milliseconds latency{0};
};

class EmbeddingModel {
 public:
  virtual ~EmbeddingModel() = default;
  // Embeds every input (batched as the implementation sees fit). Thread-safe. Errors as Chat's.
  virtual Result<EmbeddingResponse> Embed(const std::vector<std::string>& inputs) = 0;
  virtual const std::string& model() const = 0;
  virtual LlmUsage Usage() const = 0;
};

// One reranked document: its index among the inputs and the model's relevance score.
struct RerankHit {
  size_t index = 0;
  double score = 0;
};

// A cross-encoder that orders documents by relevance to a query (Cohere's /v1/rerank protocol,
// which Jina, vLLM, llama.cpp's server and Hugging Face TEI speak too).
class RerankModel {
 public:
  virtual ~RerankModel() = default;
  // The documents most relevant to `query`, best first, at most `top_n`. Thread-safe. Errors as
  // Chat's.
  virtual Result<std::vector<RerankHit>> Rerank(std::string_view query,
                                                const std::vector<std::string>& documents,
                                                size_t top_n) = 0;
  virtual const std::string& model() const = 0;
};

// ---------------------------------------------------------------------------------------------
// Side effects, behind interfaces so tests can inject faults and time
// ---------------------------------------------------------------------------------------------

struct HttpHeader {
  std::string name;
  std::string value;
};

struct HttpRequest {
  std::string url;
  std::vector<HttpHeader> headers;
  std::string body;  // POSTed as is
  std::chrono::milliseconds timeout{120'000};
  std::chrono::milliseconds connect_timeout{10'000};
  // When set, receives the body of a 2xx reply piece by piece as it arrives (streaming).
  // Returning false aborts the transfer (Post then returns kCancelled).
  std::function<bool(std::string_view bytes)> on_body;
  // When set and true, the transfer is aborted (Post returns kCancelled).
  const std::atomic<bool>* cancel = nullptr;
};

struct HttpResponse {
  int status = 0;
  std::vector<HttpHeader> headers;  // names lower-cased
  std::string body;                 // the whole body, also when on_body saw it
  // The first header called `name` (case-insensitive), or nullopt.
  std::optional<std::string> Header(std::string_view name) const;
};

// The failure a transport reports when it could not connect at all (no such host, connection
// refused, connect timeout): kUnavailable, recognisable by IsConnectFailure. The client fails
// fast on it when the endpoint has never answered (a wrong URL or a server that is not running
// is not worth a minute of retries).
Status ConnectFailure(std::string_view url, std::string_view detail);
bool IsConnectFailure(const Status& status);

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  // POSTs one request. Any HTTP status is a successful result; only transport failures are
  // errors: kTimeout when the timeout passes, ConnectFailure when the host cannot be reached,
  // kUnavailable when the connection breaks, kCancelled when on_body aborted. Thread-safe.
  virtual Result<HttpResponse> Post(const HttpRequest& request) = 0;
};

// The libcurl transport. Keeps idle easy handles in a pool so connections and TLS sessions are
// reused across calls. Honours the usual *_proxy environment variables.
Result<std::unique_ptr<HttpTransport>> MakeCurlTransport();

// Time, for backoff, rate limits and latency. Tests use a fake that sleeps instantly.
class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~Clock() = default;
  virtual TimePoint Now() = 0;
  virtual void SleepUntil(TimePoint deadline) = 0;
  // Wall-clock time, only to read Retry-After given as an HTTP date.
  virtual std::chrono::system_clock::time_point WallNow() = 0;
};

std::unique_ptr<Clock> MakeSystemClock();

// ---------------------------------------------------------------------------------------------
// The OpenAI-compatible client
// ---------------------------------------------------------------------------------------------

enum class ApiStyle {
  kOpenAI,  // {base_url}/chat/completions, "Authorization: Bearer KEY"
  kAzure,   // {base_url}/openai/deployments/{deployment}/chat/completions?api-version=V, "api-key"
  // Ollama's own API ({host}/api/chat, /api/embed, /api/show; a base_url ending in /v1 is taken
  // to its host): each request carries the context window it needs (options.num_ctx), which the
  // OpenAI-compatible endpoint cannot (Ollama silently cuts prompts to its default window there),
  // and keep_alive.
  kOllama,
};

// "openai", "azure" or "ollama".
Result<ApiStyle> ParseApiStyle(std::string_view name);

// One server of a model: several serve one model role side by side (OpenAIOptions::endpoints).
struct EndpointOptions {
  std::string name;          // in logs, summaries and run counters; empty: host[:port] of base_url
  std::string base_url;      // required, as OpenAIOptions::base_url
  std::string api_key;       // empty: no auth header (OpenAIOptions::api_key is not used)
  std::string model;         // the name this server knows the model by; empty: OpenAIOptions::model
  double weight = 1.0;       // > 0; among equally loaded endpoints, the heavier is chosen first
  int max_concurrency = 16;  // requests in flight at once at this endpoint
  int requests_per_minute = 0;  // this endpoint's own limits; 0: unlimited
  int tokens_per_minute = 0;
};

struct OpenAIOptions {
  // ---- where and who ----
  ApiStyle api_style = ApiStyle::kOpenAI;  // what OpenAI, Ollama, vLLM and llama.cpp all speak
  // OpenAI's; Ollama: http://localhost:11434/v1; Azure: https://NAME.openai.azure.com.
  std::string base_url = "https://api.openai.com/v1";
  std::string api_key;           // empty: no auth header, as local servers need none
  std::string model;             // required: sent with each request and part of every cache key
  std::string azure_deployment;  // Azure: the deployment in the URL; empty: same as model
  std::string azure_api_version = "2024-10-21";  // the latest GA data-plane version we know
  // A JSON object merged (RFC 7396 merge patch) into every request body: provider knobs such as
  // top_p, seed or Ollama's "options" without a code change. A null member removes a field.
  std::string extra_body_json;
  // OpenAI's reasoning models only accept "max_completion_tokens"; the rest want "max_tokens".
  std::string max_tokens_field = "max_tokens";
  // Ask for usage at the end of a stream (stream_options); a few old servers reject the field.
  bool stream_usage = true;
  // Reasoning models: "low", "medium", "high" (or what the server knows) sent as
  // reasoning_effort; empty: not sent.
  std::string reasoning_effort;
  // Set: turn thinking on or off where the server allows it (Ollama's "think"; elsewhere
  // chat_template_kwargs.enable_thinking, which vLLM, llama.cpp's server and LM Studio read).
  std::optional<bool> think;
  // Ollama: how long the model stays loaded after a request ("30m", "-1" for ever; "": the
  // server's default, 5 minutes), and its context window when /api/show does not tell it (0).
  std::string keep_alive = "30m";
  int64_t context_window = 0;
  // Output budget assumed for Ollama's context window when a request sets no max_tokens.
  int64_t default_output_tokens = 4096;

  // ---- limits ----
  int max_concurrency = 16;     // requests in flight at once (GraphRAG's default)
  int requests_per_minute = 0;  // 0: unlimited; set to the account's limit to avoid 429 storms
  int tokens_per_minute = 0;    // 0: unlimited; prompt (counted) + completion (reported) tokens
  // Per HTTP attempt, streams included: a long report on a slow local model takes a minute.
  std::chrono::milliseconds timeout{120'000};
  std::chrono::milliseconds connect_timeout{10'000};  // a dead host should fail fast

  // ---- retries (on 408, 429, 5xx, timeouts and network errors; never on other 4xx) ----
  int max_retries = 6;  // attempts after the first: with the backoff below, ~1 minute of outage
  std::chrono::milliseconds backoff_base{1'000};  // the first retry waits 0.5-1 s
  std::chrono::milliseconds backoff_cap{60'000};  // no single wait is longer (before jitter)
  // A longer Retry-After (a quota spent for the day) fails the call instead of hanging it.
  std::chrono::milliseconds max_retry_after{120'000};
  uint64_t jitter_seed = 0;  // 0: from std::random_device; tests fix it for reproducible waits

  // ---- several endpoints ----
  // Empty: one endpoint, from base_url, api_key, model and the limits above (max_concurrency,
  // requests_per_minute, tokens_per_minute). Otherwise these serve the model instead, and those
  // fields are not used (but `model` is): each request goes to the least-loaded endpoint that is
  // not benched (in flight / its max_concurrency; ties: higher weight, then in turn) within that
  // endpoint's own limits. A request that fails (network, 5xx, 429; with several endpoints also
  // 401/403/404 and a refused connection) is retried on another endpoint at once when one is
  // free to take it, else after the usual backoff. `model` stays the logical name: the reply
  // cache and ChatModel::model() use it, so which endpoint answered never changes a cache key;
  // every endpoint must serve that same model (their `model` only spells it their way).
  std::vector<EndpointOptions> endpoints;
  // With two endpoints or more: an endpoint failing this many requests in a row is benched (no
  // requests) for bench_base, doubling up to bench_cap each time it fails again; then one request
  // probes it, and a success puts it back in rotation. A refused connection to an endpoint that
  // never answered, and 401/403/404, bench it at once.
  int bench_after_failures = 3;
  std::chrono::milliseconds bench_base{5'000};
  std::chrono::milliseconds bench_cap{300'000};
  std::string usage_role = "llm";  // EndpointUsage::role of this client's endpoints

  // ---- embeddings ----
  int embedding_batch_size = 16;            // inputs per request (GraphRAG's default)
  int embedding_batch_max_tokens = 8191;    // tokens per request (GraphRAG's default)
  std::optional<int> embedding_dimensions;  // "dimensions", for models that shorten vectors

  // ---- collaborators ----
  KeyValueCache* cache = nullptr;  // borrowed, must outlive the client; nullptr: no reply cache
  TokenCounter token_counter;      // for replies without usage and for TPM; empty: EstimateTokens
  std::shared_ptr<HttpTransport> transport;  // empty: MakeCurlTransport()
  std::shared_ptr<Clock> clock;              // empty: MakeSystemClock()
};

// Chat and embeddings over HTTP. One instance serves one model; the CLI creates one for chat and
// one for embeddings. Thread-safe; must outlive every call made on it.
class OpenAIClient final : public ChatModel, public EmbeddingModel, public RerankModel {
 public:
  // Checks the options (kInvalidArgument naming the bad field) and creates the client.
  static Result<std::unique_ptr<OpenAIClient>> Create(OpenAIOptions options);
  ~OpenAIClient() override;
  OpenAIClient(const OpenAIClient&) = delete;
  OpenAIClient& operator=(const OpenAIClient&) = delete;

  Result<ChatResponse> Chat(const ChatRequest& request) override;
  Result<EmbeddingResponse> Embed(const std::vector<std::string>& inputs) override;
  // POST <base_url>/rerank {model, query, documents, top_n}; reads {"results": [{"index",
  // "relevance_score"}]} (Cohere, Jina, vLLM) or a bare [{"index", "score"}] list (TEI). Cached
  // like every call.
  Result<std::vector<RerankHit>> Rerank(std::string_view query,
                                        const std::vector<std::string>& documents,
                                        size_t top_n) override;
  const std::string& model() const override;
  LlmUsage Usage() const override;  // chat and embedding calls together

  // What the client learnt about its endpoints and changed to suit them, one line each, e.g.
  // "127.0.0.1:8080 refused response_format: JSON is asked for in the prompt only". Each
  // endpoint's findings are kept in the reply cache (when there is one), so a later run or a
  // resume starts from them instead of probing again.
  std::vector<std::string> Adaptations() const;
  // Ollama: the model's context window as its server reported it (the smallest over the
  // endpoints); nullopt when not known (or not Ollama).
  std::optional<int64_t> ModelContextWindow() const;

 private:
  struct Impl;
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

 public:
  OpenAIClient(PrivateTag, std::unique_ptr<Impl> impl);  // use Create

 private:
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// In-process implementations for tests
// ---------------------------------------------------------------------------------------------

// A KeyValueCache in memory. Thread-safe.
class InMemoryCache final : public KeyValueCache {
 public:
  struct Entry {
    std::string value;
    std::string model;
    std::string kind;
  };

  std::optional<std::string> Get(std::string_view key) override;
  Status Put(std::string_view key, std::string_view value, std::string_view model,
             std::string_view kind) override;

  size_t size() const;
  std::map<std::string, Entry, std::less<>> entries() const;  // a copy
  void Clear();

 private:
  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_;  // guarded by mu_
};

struct ScriptedModelOptions {
  std::string model = "scripted";  // reported in replies and part of cache keys
  KeyValueCache* cache = nullptr;  // borrowed; nullptr: no cache (as OpenAIOptions::cache)
  TokenCounter token_counter;      // empty: EstimateTokens
};

// Answers chat requests in-process, deterministically: from a function of the request, or else
// from a queue of replies. Caches, validates, streams (one delta per reply) and counts like
// OpenAIClient, so code tested against it behaves the same against a real model. Thread-safe.
class ScriptedChatModel final : public ChatModel {
 public:
  // A reply's content, or an error that the call returns as is.
  using Responder = std::function<Result<std::string>(const ChatRequest& request)>;

  // Replies from the queue (see Push); a call with the queue empty fails with kInternal.
  explicit ScriptedChatModel(ScriptedModelOptions options = {});
  // Replies from `responder`, which may be called from several threads at once.
  explicit ScriptedChatModel(Responder responder, ScriptedModelOptions options = {});

  void Push(Result<std::string> reply);

  Result<ChatResponse> Chat(const ChatRequest& request) override;
  const std::string& model() const override { return options_.model; }
  LlmUsage Usage() const override;

  // Every request that reached the script (cache hits did not), in arrival order.
  std::vector<ChatRequest> Requests() const;
  size_t RequestCount() const;

 private:
  ScriptedModelOptions options_;
  Responder responder_;
  mutable std::mutex mu_;
  std::deque<Result<std::string>> queue_;  // guarded by mu_
  std::vector<ChatRequest> requests_;      // guarded by mu_
  LlmUsage usage_;                         // guarded by mu_
};

// Embeds in-process. The default embedder hashes words into `dimension` buckets and normalises,
// so equal texts get equal vectors and texts sharing words point the same way. Thread-safe.
class ScriptedEmbeddingModel final : public EmbeddingModel {
 public:
  using Embedder = std::function<Result<std::vector<float>>(const std::string& input)>;

  explicit ScriptedEmbeddingModel(size_t dimension = 32, std::string model = "scripted-embedding");
  ScriptedEmbeddingModel(Embedder embedder, std::string model = "scripted-embedding");

  Result<EmbeddingResponse> Embed(const std::vector<std::string>& inputs) override;
  const std::string& model() const override { return model_; }
  LlmUsage Usage() const override;

  std::vector<std::string> Inputs() const;  // every input embedded, in order

  // The default embedder, for tests that want the expected vector.
  static std::vector<float> HashEmbedding(std::string_view text, size_t dimension);

 private:
  Embedder embedder_;
  std::string model_;
  mutable std::mutex mu_;
  std::vector<std::string> inputs_;  // guarded by mu_
  LlmUsage usage_;                   // guarded by mu_
};

}  // namespace grag
