// OpenAIClient: the OpenAI chat/embeddings protocol with the limits, retries, cache and
// accounting every grag LLM call goes through.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <exception>
#include <random>
#include <system_error>
#include <thread>

#include "grag/hash.h"
#include "grag/llm.h"
#include "grag/parallel.h"
#include "grag/log.h"
#include "endpoint_pool.h"
#include "limits.h"
#include "model_common.h"
#include "openai_options.h"
#include "thinking.h"
#include "wire.h"

namespace grag {

using llm_internal::ChatStreamAssembler;
using llm_internal::EndpointPool;
using llm_internal::Outcome;
using llm_internal::SseParser;

namespace {

std::chrono::milliseconds Since(Clock& clock, Clock::TimePoint start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock.Now() - start);
}

// The per-attempt state of a streamed chat reply, fed by the transport as bytes arrive.
class StreamState {
 public:
  explicit StreamState(std::function<void(std::string_view)> on_delta)
      : on_delta_(std::move(on_delta)) {}

  // A new HTTP attempt starts from scratch.
  void Begin() {
    parser_ = SseParser();
    assembler_.emplace(on_delta_);
    error_ = Status::Ok();
  }

  bool OnBody(std::string_view bytes) {
    error_ = parser_.Feed(bytes, Handler());
    return error_.ok();
  }

  // After a complete 2xx transfer: flushes the last event.
  Status Finish() {
    if (error_.ok()) error_ = parser_.Finish(Handler());
    return error_;
  }

  // The error that made OnBody stop the transfer, if any.
  const Status& error() const { return error_; }
  // A retry would repeat deltas the caller has already seen.
  bool MayRetry() const { return !assembler_ || !assembler_->delivered(); }
  const ChatStreamAssembler& assembler() const { return *assembler_; }

 private:
  SseParser::Handler Handler() {
    return [this](std::string_view field, std::string_view data) -> Status {
      if (field == "error") {
        return Status::Unavailable("server reported an error mid-stream: " +
                                   llm_internal::ErrorMessageFromBody(data));
      }
      return assembler_->OnEvent(data);
    };
  }

  std::function<void(std::string_view)> on_delta_;
  SseParser parser_;
  std::optional<ChatStreamAssembler> assembler_;
  Status error_;
};

// A failed attempt of Send: which one, on which endpoint, and what it came to.
struct FailedAttempt {
  int attempt = 0;
  size_t ep = 0;
  Status failure;
  bool retryable = false;
  bool never_reached = false;
  Outcome outcome = Outcome::kCallerError;
  std::optional<std::chrono::milliseconds> server_wait;
};

uint64_t RandomSeed() {
  try {
    return std::random_device()();
  } catch (const std::exception&) {  // no entropy source: the time will do for jitter
    return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
}

struct Counters {
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> cache_hits{0};
  std::atomic<int64_t> http_requests{0};
  std::atomic<int64_t> retries{0};
  std::atomic<int64_t> failures{0};
  std::atomic<int64_t> rejected{0};
  std::atomic<int64_t> prompt_tokens{0};
  std::atomic<int64_t> completion_tokens{0};

  LlmUsage Snapshot() const {
    LlmUsage u;
    u.calls = calls.load();
    u.cache_hits = cache_hits.load();
    u.http_requests = http_requests.load();
    u.retries = retries.load();
    u.failures = failures.load();
    u.rejected = rejected.load();
    u.prompt_tokens = prompt_tokens.load();
    u.completion_tokens = completion_tokens.load();
    return u;
  }
};

}  // namespace

// What an endpoint was found to accept. Every server starts as accepting all; a 400 naming a
// parameter turns it off (or switches max_tokens to max_completion_tokens) and the request goes
// again at once. Kept in the reply cache, so a resume does not probe again.
struct EndpointCaps {
  std::atomic<bool> json_mode{true};
  std::atomic<bool> json_schema{true};  // false: json_object instead of a schema
  std::atomic<bool> temperature{true};
  std::atomic<int> max_tokens_field{0};  // 0: as configured; 1: max_tokens; 2: max_completion_
  std::atomic<bool> reasoning_effort{true};
  std::atomic<bool> template_kwargs{true};
  std::atomic<bool> stream_options{true};
  std::atomic<bool> think{true};
  // Ollama: the model's context window; 0 not asked yet; -1 asked and not told.
  std::atomic<int64_t> context_length{0};

  // Which bodies are alike: a body built under other caps is built again.
  std::string Signature() const {
    return fmt::format("{}{}{}{}{}{}{}{}", json_mode.load() ? 1 : 0, json_schema.load() ? 1 : 0,
                       temperature.load() ? 1 : 0, max_tokens_field.load(),
                       reasoning_effort.load() ? 1 : 0, template_kwargs.load() ? 1 : 0,
                       stream_options.load() ? 1 : 0, think.load() ? 1 : 0);
  }
};

// Where and how requests to one endpoint go.
struct Target {
  std::string name;   // the endpoint's name (EndpointOptions::name)
  std::string model;  // sent in request bodies
  std::string chat_url;
  std::string embeddings_url;
  std::string rerank_url;
  std::string show_url;  // Ollama: /api/show
  std::vector<HttpHeader> auth;
  std::atomic<bool> reached{false};  // some request got an HTTP response
  EndpointCaps caps;
  std::string caps_key;  // where caps are kept in the reply cache
  std::once_flag caps_loaded;
  std::mutex probe_mu;  // one /api/show at a time
};

// A request body for an endpoint (the model name it knows, what it accepts).
using BodyFor = std::function<std::string(const Target& target)>;
// Given a 4xx reply's refused parameter: adapts the endpoint's caps and returns true when the
// request should go again at once without it.
using OnRefused = std::function<bool(Target& target, const std::string& field)>;

// A 2xx reply and the endpoint (index) that sent it.
struct Sent {
  HttpResponse response;
  size_t endpoint = 0;
};

struct OpenAIClient::Impl {
  Impl(OpenAIOptions o, nlohmann::json extra_body, std::shared_ptr<HttpTransport> t,
       std::shared_ptr<Clock> c)
      : options(std::move(o)),
        extra(std::move(extra_body)),
        transport(std::move(t)),
        clock(std::move(c)),
        count(options.token_counter ? options.token_counter : TokenCounter(&EstimateTokens)),
        pool(llm_internal::EffectiveEndpoints(options), options.usage_role, *clock,
             llm_internal::BenchPolicy{llm_internal::EffectiveEndpoints(options).size() > 1,
                                       options.bench_after_failures, options.bench_base,
                                       options.bench_cap}),
        rng(options.jitter_seed != 0 ? options.jitter_seed : RandomSeed()) {
    for (size_t i = 0; i < pool.size(); ++i) {
      const EndpointOptions& e = pool.endpoint(i);
      token_limited = token_limited || e.tokens_per_minute > 0;
      auto target = std::make_unique<Target>();
      target->name = e.name;
      target->model = e.model;
      std::string base = e.base_url;
      while (base.ends_with('/')) base.pop_back();
      if (options.api_style == ApiStyle::kOllama) {
        // Ollama's own API lives at the host's root; its OpenAI-compatible one under /v1.
        std::string root = base;
        if (root.ends_with("/v1")) root.resize(root.size() - 3);
        target->chat_url = root + "/api/chat";
        target->embeddings_url = root + "/api/embed";
        target->rerank_url = base + "/rerank";
        target->show_url = root + "/api/show";
        if (!e.api_key.empty()) target->auth.push_back({"Authorization", "Bearer " + e.api_key});
      } else if (options.api_style == ApiStyle::kAzure) {
        // The deployment: the endpoint's own model name, else the configured deployment.
        std::string deployment = !options.endpoints.empty() && !options.endpoints[i].model.empty()
                                     ? options.endpoints[i].model
                                 : options.azure_deployment.empty() ? options.model
                                                                    : options.azure_deployment;
        std::string prefix = base + "/openai/deployments/" + deployment;
        std::string query = "?api-version=" + options.azure_api_version;
        target->chat_url = prefix + "/chat/completions" + query;
        target->embeddings_url = prefix + "/embeddings" + query;
        target->rerank_url = prefix + "/rerank" + query;
        if (!e.api_key.empty()) target->auth.push_back({"api-key", e.api_key});
      } else {
        target->chat_url = base + "/chat/completions";
        target->embeddings_url = base + "/embeddings";
        target->rerank_url = base + "/rerank";
        if (!e.api_key.empty()) target->auth.push_back({"Authorization", "Bearer " + e.api_key});
      }
      target->caps_key = "caps:v1:" + Sha256Hex(target->chat_url + "\n" + target->model);
      targets.push_back(std::move(target));
    }
  }

  const nlohmann::json* Extra() const { return extra.empty() ? nullptr : &extra; }

  double Uniform() {
    std::lock_guard lock(rng_mu);
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  }

  Result<Sent> Send(std::string_view what, std::string Target::*url, const BodyFor& body_for,
                    int64_t tokens, StreamState* stream, int* retries,
                    const std::atomic<bool>* cancel = nullptr,
                    const OnRefused* on_refused = nullptr);
  // Send: what a non-2xx reply that refuses no parameter makes of the attempt.
  void HttpFailure(const HttpResponse& response, const std::string& where, FailedAttempt& f);
  // Send: nullopt when the call goes again (at once on another endpoint, or after a backoff),
  // else the error it ends with.
  std::optional<Status> RetryOrGiveUp(std::string_view what, const FailedAttempt& f, bool several,
                                      const std::vector<bool>& failed, StreamState* stream,
                                      int* retries);
  // Reads what the cache remembers of an endpoint, once.
  void LoadCaps(Target& target);
  void SaveCaps(const Target& target);
  // Adapts a chat endpoint to a refused parameter that `request` sent; false when it did not
  // send it (or there is nothing left to adapt).
  bool AdaptChat(Target& target, const std::string& field, const ChatRequest& request);
  void Note(const Target& target, std::string what);
  // Ollama: the model's context window (0 when the server does not tell); kNotFound when the
  // server does not have the model.
  Result<int64_t> OllamaModelWindow(Target& target);
  // Ollama: the num_ctx a request of `prompt_tokens` and `output_tokens` is sent with.
  Result<int64_t> OllamaNumCtx(int64_t prompt_tokens, int64_t output_tokens);
  Result<ChatResponse> ChatOnce(const ChatRequest& request, int* retries);
  // ChatOnce: the reply the cache holds under `key`, if any (passed on to on_delta).
  std::optional<ChatResponse> CachedChat(const ChatRequest& request, const std::string& key);
  // ChatOnce: the request body for `target`.
  std::string ChatBody(const Target& target, const ChatRequest& request, bool ollama,
                       int64_t num_ctx, const llm_internal::ChatBodyOptions& body_options);
  // ChatOnce: the response to `reply`, its tokens counted (when the server does not say) and
  // charged to the endpoint that sent it.
  ChatResponse ResponseOf(llm_internal::ChatReply& reply, const llm_internal::ThinkingSplit& split,
                          const ChatRequest& request, bool count_first, int64_t prompt_estimate,
                          size_t endpoint);
  Result<EmbeddingResponse> EmbedOnce(const std::vector<std::string>& inputs, int* retries);

  const OpenAIOptions options;
  const nlohmann::json extra;  // the parsed extra body: an object, maybe empty
  const std::shared_ptr<HttpTransport> transport;
  const std::shared_ptr<Clock> clock;
  const TokenCounter count;
  EndpointPool pool;  // chooses the endpoint of each request; bounds and spaces them
  // Some endpoint limits tokens per minute: a prompt's tokens are counted before it is sent.
  bool token_limited = false;
  std::vector<std::unique_ptr<Target>> targets;  // one per pool endpoint, same order
  std::mutex rng_mu;
  std::mt19937_64 rng;  // guarded by rng_mu; jitter only
  Counters counters;
  mutable std::mutex notes_mu;
  std::vector<std::string> notes;  // guarded by notes_mu: Adaptations()
};

void OpenAIClient::Impl::LoadCaps(Target& target) {
  std::call_once(target.caps_loaded, [&] {
    if (options.cache == nullptr) return;
    std::optional<std::string> value = options.cache->Get(target.caps_key);
    if (!value) return;
    nlohmann::json j = nlohmann::json::parse(*value, nullptr, false);
    if (!j.is_object()) return;
    auto flag = [&](const char* name, std::atomic<bool>& into) {
      if (j.contains(name) && j[name].is_boolean()) into.store(j[name].get<bool>());
    };
    flag("json_mode", target.caps.json_mode);
    flag("json_schema", target.caps.json_schema);
    flag("temperature", target.caps.temperature);
    flag("reasoning_effort", target.caps.reasoning_effort);
    flag("chat_template_kwargs", target.caps.template_kwargs);
    flag("stream_options", target.caps.stream_options);
    flag("think", target.caps.think);
    if (j.contains("max_tokens_field") && j["max_tokens_field"].is_number_integer()) {
      target.caps.max_tokens_field.store(std::clamp(j["max_tokens_field"].get<int>(), 0, 2));
    }
    if (j.contains("context_length") && j["context_length"].is_number_integer() &&
        j["context_length"].get<int64_t>() > 0) {
      target.caps.context_length.store(j["context_length"].get<int64_t>());
    }
    if (j.contains("notes") && j["notes"].is_array()) {
      for (const auto& n : j["notes"]) {
        if (n.is_string()) Note(target, n.get<std::string>());
      }
    }
  });
}

void OpenAIClient::Impl::SaveCaps(const Target& target) {
  if (options.cache == nullptr) return;
  nlohmann::json j = {{"json_mode", target.caps.json_mode.load()},
                      {"json_schema", target.caps.json_schema.load()},
                      {"temperature", target.caps.temperature.load()},
                      {"max_tokens_field", target.caps.max_tokens_field.load()},
                      {"reasoning_effort", target.caps.reasoning_effort.load()},
                      {"chat_template_kwargs", target.caps.template_kwargs.load()},
                      {"stream_options", target.caps.stream_options.load()},
                      {"think", target.caps.think.load()}};
  if (target.caps.context_length.load() > 0)
    j["context_length"] = target.caps.context_length.load();
  nlohmann::json notes_of = nlohmann::json::array();
  {
    std::lock_guard lock(notes_mu);
    const std::string prefix = target.name + " ";
    for (const std::string& n : notes) {
      if (n.starts_with(prefix)) notes_of.push_back(n.substr(prefix.size()));
    }
  }
  j["notes"] = std::move(notes_of);
  Status st = options.cache->Put(target.caps_key, j.dump(), options.model, "caps");
  if (!st.ok()) Log(LogLevel::kWarn, "llm", "endpoint findings not kept: " + st.ToString());
}

void OpenAIClient::Impl::Note(const Target& target, std::string what) {
  std::string line = target.name + " " + what;
  std::lock_guard lock(notes_mu);
  if (std::find(notes.begin(), notes.end(), line) == notes.end()) notes.push_back(std::move(line));
}

bool OpenAIClient::Impl::AdaptChat(Target& target, const std::string& field,
                                   const ChatRequest& request) {
  EndpointCaps& caps = target.caps;
  const bool ollama = options.api_style == ApiStyle::kOllama;
  std::string note;
  auto turn_off = [&](std::atomic<bool>& flag, bool sent, std::string why) {
    if (!sent || !flag.load()) return false;
    flag.store(false);
    note = std::move(why);
    return true;
  };
  bool changed = false;
  if ((field == "response_format" || field == "format") && request.json_mode &&
      !request.json_schema.empty() && caps.json_schema.load() && caps.json_mode.load()) {
    changed =
        turn_off(caps.json_schema, true,
                 "refused a JSON schema in " + field + ": a JSON object is asked for instead");
  } else if (field == "response_format" || field == "format") {
    changed = turn_off(caps.json_mode, request.json_mode,
                       "refused " + field + ": JSON is asked for in the prompt only");
  } else if (field == "temperature") {
    changed = turn_off(caps.temperature, request.temperature.has_value(),
                       "refused temperature: the model's own is used");
  } else if (field == "reasoning_effort") {
    changed = turn_off(caps.reasoning_effort, !options.reasoning_effort.empty(),
                       "refused reasoning_effort: not sent");
  } else if (field == "chat_template_kwargs") {
    changed = turn_off(caps.template_kwargs, options.think.has_value() && !ollama,
                       "refused chat_template_kwargs: thinking is left to the model");
  } else if (field == "think") {
    changed = turn_off(caps.think, options.think.has_value() && ollama,
                       "refused think: thinking is left to the model");
  } else if (field == "stream_options") {
    changed = turn_off(caps.stream_options, static_cast<bool>(request.on_delta),
                       "refused stream_options: streamed replies are counted locally");
  } else if ((field == "max_tokens" || field == "max_completion_tokens") && request.max_tokens &&
             !ollama) {
    const int current = caps.max_tokens_field.load();
    const std::string sent = current == 1   ? "max_tokens"
                             : current == 2 ? "max_completion_tokens"
                                            : options.max_tokens_field;
    if (sent == field) {
      const bool to_completion = field == "max_tokens";
      caps.max_tokens_field.store(to_completion ? 2 : 1);
      note = "refused " + field + ": " + (to_completion ? "max_completion_tokens" : "max_tokens") +
             " is sent instead";
      changed = true;
    }
  }
  if (!changed) return false;
  Log(LogLevel::kWarn, "llm",
      fmt::format("{} {}: the server {}", options.model, target.name, note));
  Note(target, note);
  SaveCaps(target);
  return true;
}

Result<int64_t> OpenAIClient::Impl::OllamaModelWindow(Target& target) {
  LoadCaps(target);
  if (int64_t known = target.caps.context_length.load(); known != 0)
    return std::max<int64_t>(0, known);
  std::lock_guard lock(target.probe_mu);
  if (int64_t known = target.caps.context_length.load(); known != 0)
    return std::max<int64_t>(0, known);
  HttpRequest request;
  request.url = target.show_url;
  request.headers = target.auth;
  request.headers.push_back({"Content-Type", "application/json"});
  request.body = nlohmann::json{{"model", target.model}}.dump();
  request.timeout = std::min(options.timeout, std::chrono::milliseconds(30'000));
  request.connect_timeout = options.connect_timeout;
  counters.http_requests.fetch_add(1);
  Result<HttpResponse> reply = transport->Post(request);
  if (!reply.ok()) return int64_t{0};  // the request itself will say what is wrong
  target.reached.store(true);
  if (reply->status == 404) {
    return Status::NotFound(fmt::format(
        "the Ollama server at {} does not have model {}: run `ollama pull {}` there, or check "
        "llm.model (`ollama list` shows what it has)",
        target.show_url.substr(0, target.show_url.size() - 9), target.model, target.model));
  }
  std::optional<int64_t> window;
  if (reply->status >= 200 && reply->status < 300) {
    window = llm_internal::ParseOllamaContextLength(reply->body);
  }
  if (options.context_window > 0) window = options.context_window;  // the user knows better
  target.caps.context_length.store(window ? *window : -1);
  if (window) {
    Log(LogLevel::kDebug, "llm",
        fmt::format("{} {}: context window {} tokens", options.model, target.name, *window));
    SaveCaps(target);
  }
  return window.value_or(0);
}

Result<int64_t> OpenAIClient::Impl::OllamaNumCtx(int64_t prompt_tokens, int64_t output_tokens) {
  // The smallest window among the endpoints: a request may go to any of them.
  int64_t model_max = options.context_window;
  for (auto& t : targets) {
    GRAG_ASSIGN_OR_RETURN(int64_t w, OllamaModelWindow(*t));
    if (w > 0 && (model_max <= 0 || w < model_max)) model_max = w;
  }
  return llm_internal::OllamaContextFor(prompt_tokens, output_tokens, model_max, options.model);
}

// One request with its retries. Each attempt goes to the endpoint the pool chooses: after a
// failure, another one when one is in rotation (at once, no backoff), else the backoff below.
// Holds an endpoint's slot only while the request is in flight, never while waiting to retry.
Result<Sent> OpenAIClient::Impl::Send(std::string_view what, std::string Target::*url,
                                      const BodyFor& body_for, int64_t tokens, StreamState* stream,
                                      int* retries, const std::atomic<bool>* cancel,
                                      const OnRefused* on_refused) {
  const bool several = pool.size() > 1;
  std::vector<bool> failed(pool.size(), false);  // endpoints this call failed on
  // By model name and what the endpoint accepts: built once each.
  std::vector<std::pair<std::string, std::string>> bodies;
  auto body = [&](const Target& target, const std::string& caps) -> std::string& {
    const std::string key = target.model + '\x1f' + caps;
    for (auto& [m, b] : bodies) {
      if (m == key) return b;
    }
    bodies.emplace_back(key, body_for(target));
    return bodies.back().second;
  };
  int adaptations = 0;  // requests sent again without a refused parameter

  for (int attempt = 0;; ++attempt) {
    if (cancel != nullptr && cancel->load()) {
      return Status::Cancelled(std::string(what) + " " + options.model + ": cancelled");
    }
    if (stream != nullptr) stream->Begin();
    const size_t ep = pool.Acquire(tokens, failed);
    Target& target = *targets[ep];
    LoadCaps(target);
    const std::string& where = target.*url;
    HttpRequest request;
    request.url = where;
    request.headers = target.auth;
    request.headers.push_back({"Content-Type", "application/json"});
    request.headers.push_back(
        {"Accept", stream != nullptr ? "text/event-stream" : "application/json"});
    // Lent to the request, not copied (a prompt is tens of KB), and taken back after the call.
    // What the endpoint was taken to accept when this body was built: when another call has
    // learnt more by the time this one is refused, it only needs to go again.
    const std::string sent_caps = target.caps.Signature();
    std::string& lent = body(target, sent_caps);
    request.body = std::move(lent);
    request.timeout = options.timeout;
    request.connect_timeout = options.connect_timeout;
    request.cancel = cancel;
    if (stream != nullptr) {
      request.on_body = [stream](std::string_view bytes) { return stream->OnBody(bytes); };
    }
    counters.http_requests.fetch_add(1);
    const Clock::TimePoint sent_at = clock->Now();
    Result<HttpResponse> result = transport->Post(request);
    const std::chrono::milliseconds latency = Since(*clock, sent_at);
    lent = std::move(request.body);

    FailedAttempt f;
    f.attempt = attempt;
    f.ep = ep;
    if (result.ok()) {
      target.reached.store(true);
      const HttpResponse& response = *result;
      if (response.status >= 200 && response.status < 300) {
        // A web page (a proxy's, a wrong port's, a UI's) is not a model's reply: retrying or
        // parsing it as a bad answer would only spend calls.
        f.failure = llm_internal::CheckReplyIsApi(response, where, stream != nullptr);
        if (f.failure.ok()) {
          pool.Release(ep, Outcome::kOk, latency, f.failure);
          return Sent{std::move(result).value(), ep};
        }
        f.outcome = Outcome::kDown;
      } else if (const std::string refused =
                     on_refused != nullptr && adaptations < 6
                         ? llm_internal::RefusedParameter(response.status, response.body)
                         : std::string();
                 !refused.empty() &&
                 (target.caps.Signature() != sent_caps || (*on_refused)(target, refused))) {
        // The server refuses a parameter it can do without: send the request again without it
        // at once. Not a failure of the endpoint, nor a retry of the call.
        pool.Release(ep, Outcome::kCallerError, latency, Status::Ok());
        ++adaptations;
        --attempt;
        continue;
      } else {
        HttpFailure(response, where, f);
      }
    } else {
      f.failure = result.status();
      if (stream != nullptr && !stream->error().ok()) f.failure = stream->error();
      f.retryable =
          f.failure.code() == ErrorCode::kTimeout || f.failure.code() == ErrorCode::kUnavailable;
      if (f.retryable) f.outcome = Outcome::kFailed;
      if (IsConnectFailure(f.failure) && !target.reached.load()) {
        f.never_reached = true;
        f.outcome = Outcome::kDown;
      }
    }
    pool.Release(ep, f.outcome, latency, f.failure);
    failed[ep] = true;
    if (f.server_wait) pool.PauseUntil(ep, clock->Now() + *f.server_wait);
    if (std::optional<Status> last = RetryOrGiveUp(what, f, several, failed, stream, retries)) {
      return std::move(*last);
    }
  }
}

void OpenAIClient::Impl::HttpFailure(const HttpResponse& response, const std::string& where,
                                     FailedAttempt& f) {
  f.failure = llm_internal::HttpErrorStatus(response.status, response.body, where);
  const bool quota = response.status == 429 && llm_internal::IsQuotaExhausted(response.body);
  f.retryable = llm_internal::IsRetryableStatus(response.status) && !quota;
  f.server_wait = llm_internal::ParseRetryAfter(response, clock->WallNow());
  if (f.retryable) {
    f.outcome = Outcome::kFailed;
  } else if (quota || response.status == 401 || response.status == 403 || response.status == 404) {
    f.outcome = Outcome::kDown;  // this endpoint's key, quota, URL or model
  }
}

std::optional<Status> OpenAIClient::Impl::RetryOrGiveUp(std::string_view what,
                                                        const FailedAttempt& f, bool several,
                                                        const std::vector<bool>& failed,
                                                        StreamState* stream, int* retries) {
  const int attempt = f.attempt;
  const size_t ep = f.ep;
  const Status& failure = f.failure;
  const bool may_repeat = stream == nullptr || stream->MayRetry();
  if (several && f.outcome != Outcome::kCallerError && may_repeat &&
      attempt < options.max_retries && pool.AnyOtherInRotation(failed)) {
    Log(LogLevel::kInfo, "llm",
        fmt::format("{} {}: endpoint {}: {}; retry {} of {} on another endpoint", what,
                    options.model, pool.endpoint(ep).name, failure.ToString(), attempt + 1,
                    options.max_retries));
    ++*retries;
    counters.retries.fetch_add(1);
    return std::nullopt;
  }
  if (f.never_reached) {
    bool any_reached = false;
    for (const auto& t : targets) any_reached = any_reached || t->reached.load();
    if (!any_reached) {
      // Never reached: a wrong URL or a server that is not running. Fail now, not after a
      // minute of backoff. (Once it has answered, a refused connection is a restart: retried.)
      return Status::Unavailable(failure.message() +
                                 " (the model endpoint does not answer: is the server "
                                 "running, and is the base URL right?)");
    }
  }
  if (f.retryable && !may_repeat) {
    return Status(failure.code(),
                  failure.message() + " (the stream broke after part of the reply was shown)");
  }
  if (!f.retryable) return failure;
  if (attempt >= options.max_retries) {
    return Status(failure.code(),
                  fmt::format("{} (gave up after {} attempts)", failure.message(), attempt + 1));
  }

  std::chrono::milliseconds wait =
      llm_internal::BackoffDelay(attempt, options.backoff_base, options.backoff_cap, Uniform());
  if (f.server_wait) {
    if (*f.server_wait > options.max_retry_after) {
      return Status(failure.code(),
                    fmt::format("{} (the server asks to retry after {} s, longer than "
                                "max_retry_after {} s)",
                                failure.message(), f.server_wait->count() / 1000.0,
                                options.max_retry_after.count() / 1000.0));
    }
    // Wait what the server asks, plus a little jitter so parallel callers do not return at once.
    wait = *f.server_wait + std::chrono::milliseconds(static_cast<int64_t>(
                                Uniform() * static_cast<double>(options.backoff_base.count()) / 4));
  }
  Log(LogLevel::kInfo, "llm",
      fmt::format("{} {}{}: {}; retry {} of {} in {:.1f} s", what, options.model,
                  several ? " (endpoint " + pool.endpoint(ep).name + ")" : std::string(),
                  failure.ToString(), attempt + 1, options.max_retries, wait.count() / 1000.0));
  ++*retries;
  counters.retries.fetch_add(1);
  clock->SleepUntil(clock->Now() + wait);
  return std::nullopt;
}

Result<ChatResponse> OpenAIClient::Impl::ChatOnce(const ChatRequest& request, int* retries) {
  if (request.messages.empty()) {
    return Status::InvalidArgument("a chat request needs at least one message");
  }
  const bool use_cache = options.cache != nullptr && request.use_cache;
  std::string key;
  if (use_cache) {
    key = llm_internal::ChatCacheKey(options.model, request, Extra());
    if (std::optional<ChatResponse> cached = CachedChat(request, key)) return std::move(*cached);
  }

  const bool ollama = options.api_style == ApiStyle::kOllama;
  // Ollama streams in its own format; its replies come whole and are passed on as one delta.
  const bool streaming = static_cast<bool>(request.on_delta) && !ollama;
  llm_internal::ChatBodyOptions body_options;
  body_options.extra = Extra();
  body_options.stream = streaming;
  body_options.reasoning_effort = options.reasoning_effort;
  body_options.enable_thinking = options.think;
  // Tokenising the prompt costs more CPU than the rest of the call (a gleaning prompt carries the
  // whole conversation), and only a token limit or Ollama's context window needs the count before
  // the call: otherwise it is counted after, and only when the reply gives no usage.
  const bool count_first = token_limited || ollama;
  const int64_t prompt_estimate =
      count_first ? llm_internal::CountPromptTokens(request.messages, count) : 0;
  int64_t num_ctx = 0;
  if (ollama) {
    GRAG_ASSIGN_OR_RETURN(
        num_ctx,
        OllamaNumCtx(prompt_estimate, request.max_tokens ? static_cast<int64_t>(*request.max_tokens)
                                                         : options.default_output_tokens));
  }
  const BodyFor body_for = [&](const Target& target) {
    return ChatBody(target, request, ollama, num_ctx, body_options);
  };
  const OnRefused on_refused = [&](Target& target, const std::string& field) {
    return AdaptChat(target, field, request);
  };

  // Streamed deltas reach the caller without the model's thinking.
  llm_internal::ThinkingFilter filter;
  std::function<void(std::string_view)> on_answer_delta;
  if (streaming) {
    on_answer_delta = [&](std::string_view delta) {
      if (std::string answer = filter.Feed(delta); !answer.empty()) request.on_delta(answer);
    };
  }
  StreamState stream(on_answer_delta);
  GRAG_ASSIGN_OR_RETURN(
      Sent sent, Send("chat", &Target::chat_url, body_for, token_limited ? prompt_estimate : 0,
                      streaming ? &stream : nullptr, retries, request.cancel, &on_refused));
  const HttpResponse& response = sent.response;
  llm_internal::ChatReply reply;
  bool delivered = false;  // the caller has seen the answer's deltas
  if (ollama) {
    GRAG_ASSIGN_OR_RETURN(reply, llm_internal::ParseOllamaChatReply(response.body));
  } else if (streaming) {
    GRAG_RETURN_IF_ERROR(stream.Finish());
    if (stream.assembler().events() == 0) {
      // The server ignored "stream" and sent the reply whole.
      GRAG_ASSIGN_OR_RETURN(reply, llm_internal::ParseChatReply(response.body));
    } else {
      GRAG_ASSIGN_OR_RETURN(reply, stream.assembler().Finish());
      if (std::string rest = filter.Finish(); !rest.empty()) request.on_delta(rest);
      delivered = true;
    }
  } else {
    GRAG_ASSIGN_OR_RETURN(reply, llm_internal::ParseChatReply(response.body));
  }

  // The model's thinking is never part of the answer (nor of what the caller parses).
  llm_internal::ThinkingSplit split = llm_internal::SplitThinking(reply.content);
  const bool thought_inline = !split.thinking.empty() || split.unclosed;
  if (thought_inline) {
    reply.content = std::move(split.answer);
    reply.content_json = {};
  }
  if (reply.content.empty() && (split.unclosed || !reply.reasoning.empty())) {
    return Status::Parse(fmt::format(
        "model {} spent its reply thinking and gave no answer{}: let it answer sooner with "
        "llm.reasoning_effort = \"low\" or llm.think = \"off\", or raise the reply's length",
        options.model,
        reply.finish_reason.empty() ? "" : " (finish_reason=" + reply.finish_reason + ")"));
  }
  if (request.on_delta && !delivered && !reply.content.empty()) request.on_delta(reply.content);

  ChatResponse out = ResponseOf(reply, split, request, count_first, prompt_estimate, sent.endpoint);

  if (request.validator) {
    Status verdict = request.validator(out.content);
    if (!verdict.ok()) {
      counters.rejected.fetch_add(1);
      return verdict;
    }
  }
  if (use_cache) {
    Status stored = options.cache->Put(key, llm_internal::EncodeChatReply(out, reply.content_json),
                                       options.model, ChatCacheKind(request.role));
    if (!stored.ok()) Log(LogLevel::kWarn, "llm", "reply not cached: " + stored.ToString());
  }
  return out;
}

std::optional<ChatResponse> OpenAIClient::Impl::CachedChat(const ChatRequest& request,
                                                           const std::string& key) {
  if (std::optional<std::string> value = options.cache->Get(key)) {
    if (std::optional<ChatResponse> cached = llm_internal::DecodeChatReply(*value)) {
      counters.cache_hits.fetch_add(1);
      cached->cache_hit = true;
      if (request.on_delta && !cached->content.empty()) request.on_delta(cached->content);
      return cached;
    }
    Log(LogLevel::kWarn, "llm", "ignoring an unreadable reply-cache entry " + key);
  }
  return std::nullopt;
}

std::string OpenAIClient::Impl::ChatBody(const Target& target, const ChatRequest& request,
                                         bool ollama, int64_t num_ctx,
                                         const llm_internal::ChatBodyOptions& body_options) {
  const EndpointCaps& caps = target.caps;
  if (ollama) {
    llm_internal::OllamaChatOptions o;
    o.model = target.model;
    o.num_ctx = num_ctx;
    o.keep_alive = options.keep_alive;
    if (caps.think.load()) o.think = options.think;
    o.send_json_mode = caps.json_mode.load();
    o.send_json_schema = caps.json_schema.load();
    return llm_internal::BuildOllamaChatBody(request, o, Extra());
  }
  llm_internal::ChatBodyOptions o = body_options;
  o.model = target.model;
  o.send_json_mode = caps.json_mode.load();
  o.send_json_schema = caps.json_schema.load();
  o.send_temperature = caps.temperature.load();
  o.stream_usage = options.stream_usage && caps.stream_options.load();
  const int field = caps.max_tokens_field.load();
  o.max_tokens_field = field == 1   ? "max_tokens"
                       : field == 2 ? "max_completion_tokens"
                                    : options.max_tokens_field;
  if (!caps.reasoning_effort.load()) o.reasoning_effort.clear();
  if (!caps.template_kwargs.load()) o.enable_thinking.reset();
  return llm_internal::BuildChatBody(request, o);
}

ChatResponse OpenAIClient::Impl::ResponseOf(llm_internal::ChatReply& reply,
                                            const llm_internal::ThinkingSplit& split,
                                            const ChatRequest& request, bool count_first,
                                            int64_t prompt_estimate, size_t endpoint) {
  ChatResponse out;
  out.content = std::move(reply.content);
  out.model = reply.model.empty() ? options.model : reply.model;
  out.finish_reason = reply.finish_reason;
  out.tokens_estimated = !reply.prompt_tokens || !reply.completion_tokens;
  out.prompt_tokens = reply.prompt_tokens ? *reply.prompt_tokens
                      : count_first       ? prompt_estimate
                                    : llm_internal::CountPromptTokens(request.messages, count);
  // Thinking is spent like the answer: counted in the completion when the server does not say.
  const std::string thinking = split.thinking + reply.reasoning;
  const int64_t thinking_tokens = thinking.empty() ? 0 : static_cast<int64_t>(count(thinking));
  // Not value_or(count(...)): that would tokenise every reply, usage or not.
  out.completion_tokens = reply.completion_tokens
                              ? *reply.completion_tokens
                              : static_cast<int64_t>(count(out.content)) + thinking_tokens;
  out.reasoning_tokens = reply.reasoning_tokens ? *reply.reasoning_tokens : thinking_tokens;
  out.endpoint = pool.endpoint(endpoint).name;
  counters.prompt_tokens.fetch_add(out.prompt_tokens);
  counters.completion_tokens.fetch_add(out.completion_tokens);
  pool.AddTokens(endpoint, out.prompt_tokens, out.completion_tokens);
  pool.Charge(endpoint,
              out.completion_tokens +
                  std::max<int64_t>(0, out.prompt_tokens - (token_limited ? prompt_estimate : 0)));
  return out;
}

Result<EmbeddingResponse> OpenAIClient::Impl::EmbedOnce(const std::vector<std::string>& inputs,
                                                        int* retries) {
  EmbeddingResponse out;
  out.model = options.model;
  out.vectors.resize(inputs.size());
  if (inputs.empty()) return out;

  std::vector<std::string> keys;
  std::vector<size_t> missing;
  if (options.cache != nullptr) keys.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (options.cache != nullptr) {
      keys[i] = llm_internal::EmbeddingCacheKey(options.model, options.embedding_dimensions,
                                                Extra(), inputs[i]);
      if (std::optional<std::string> value = options.cache->Get(keys[i])) {
        if (auto v = llm_internal::DecodeFloats(*value); v && !v->empty()) {
          out.vectors[i] = std::move(*v);
          ++out.cache_hits;
          continue;
        }
      }
    }
    missing.push_back(i);
  }
  counters.cache_hits.fetch_add(static_cast<int64_t>(out.cache_hits));

  // Batches of at most embedding_batch_size inputs and embedding_batch_max_tokens tokens (an
  // input longer than that goes alone: the server truncates or refuses it).
  struct Batch {
    std::vector<size_t> items;
    int64_t tokens = 0;
  };
  std::vector<Batch> batches;
  for (size_t i : missing) {
    auto tokens = static_cast<int64_t>(count(inputs[i]));
    if (batches.empty() ||
        batches.back().items.size() >= static_cast<size_t>(options.embedding_batch_size) ||
        batches.back().tokens + tokens > options.embedding_batch_max_tokens) {
      batches.emplace_back();
    }
    batches.back().items.push_back(i);
    batches.back().tokens += tokens;
  }

  std::mutex mu;
  bool estimated = false;     // guarded by mu
  std::string reply_model;    // guarded by mu
  int64_t prompt_tokens = 0;  // guarded by mu
  int batch_retries = 0;      // guarded by mu

  auto run = [&](const Batch& batch) -> Status {
    std::vector<std::string_view> texts;
    texts.reserve(batch.items.size());
    for (size_t i : batch.items) texts.push_back(inputs[i]);
    int64_t num_ctx = 0;
    if (options.api_style == ApiStyle::kOllama) {
      int64_t longest = 0;
      for (size_t i : batch.items)
        longest = std::max(longest, static_cast<int64_t>(count(inputs[i])));
      GRAG_ASSIGN_OR_RETURN(num_ctx, OllamaNumCtx(longest, 0));
    }
    const BodyFor body_for = [&](const Target& target) {
      if (options.api_style == ApiStyle::kOllama) {
        return llm_internal::BuildOllamaEmbedBody(texts, target.model, num_ctx, options.keep_alive,
                                                  Extra());
      }
      return llm_internal::BuildEmbeddingBody(texts, target.model, options.embedding_dimensions,
                                              Extra());
    };
    int tries = 0;
    Result<Sent> sent =
        Send("embed", &Target::embeddings_url, body_for, batch.tokens, nullptr, &tries);
    {
      std::lock_guard lock(mu);
      batch_retries += tries;
    }
    if (!sent.ok()) return sent.status();
    GRAG_ASSIGN_OR_RETURN(
        llm_internal::EmbeddingReply reply,
        options.api_style == ApiStyle::kOllama
            ? llm_internal::ParseOllamaEmbedReply(sent->response.body, batch.items.size())
            : llm_internal::ParseEmbeddingReply(sent->response.body, batch.items.size()));
    int64_t spent = reply.prompt_tokens.value_or(batch.tokens);
    counters.prompt_tokens.fetch_add(spent);
    pool.AddTokens(sent->endpoint, spent, 0);
    pool.Charge(sent->endpoint, std::max<int64_t>(0, spent - batch.tokens));
    for (size_t k = 0; k < batch.items.size(); ++k) {
      size_t i = batch.items[k];
      if (options.cache != nullptr) {
        Status stored = options.cache->Put(keys[i], llm_internal::EncodeFloats(reply.vectors[k]),
                                           options.model, kEmbeddingCacheKind);
        if (!stored.ok()) Log(LogLevel::kWarn, "llm", "embedding not cached: " + stored.ToString());
      }
      out.vectors[i] = std::move(reply.vectors[k]);  // each batch owns distinct slots
    }
    std::lock_guard lock(mu);
    prompt_tokens += spent;
    estimated = estimated || !reply.prompt_tokens;
    if (!reply.model.empty()) reply_model = reply.model;
    return Status::Ok();
  };
  // Batches go out in parallel (the semaphore still bounds the requests in flight); the calling
  // thread is one of the workers; the first failure stops the batches not yet started.
  const Status sent =
      ParallelForStatus(batches.size(), static_cast<size_t>(pool.total_concurrency()),
                        [&](size_t b) { return run(batches[b]); });
  *retries += batch_retries;
  if (!sent.ok()) return sent;
  out.prompt_tokens = prompt_tokens;
  out.tokens_estimated = estimated;
  if (!reply_model.empty()) out.model = reply_model;
  out.dimension = out.vectors.front().size();
  for (const std::vector<float>& v : out.vectors) {
    if (v.size() != out.dimension) {
      return Status::Parse(fmt::format(
          "embeddings of different dimensions ({} and {}) for model {}: the cache holds vectors "
          "from another setting",
          out.dimension, v.size(), options.model));
    }
  }
  return out;
}

// ---- OpenAIClient ----

Result<std::unique_ptr<OpenAIClient>> OpenAIClient::Create(OpenAIOptions options) {
  GRAG_RETURN_IF_ERROR(llm_internal::CheckOpenAIOptions(options));
  if (options.model.empty()) options.model = options.azure_deployment;  // Azure: names the model
  GRAG_ASSIGN_OR_RETURN(nlohmann::json extra,
                        llm_internal::ParseExtraBody(options.extra_body_json));
  std::shared_ptr<HttpTransport> transport = options.transport;
  if (!transport) {
    GRAG_ASSIGN_OR_RETURN(std::unique_ptr<HttpTransport> curl, MakeCurlTransport());
    transport = std::move(curl);
  }
  std::shared_ptr<Clock> clock = options.clock;
  if (!clock) clock = MakeSystemClock();
  auto impl = std::make_unique<Impl>(std::move(options), std::move(extra), std::move(transport),
                                     std::move(clock));
  return std::make_unique<OpenAIClient>(PrivateTag(), std::move(impl));
}

OpenAIClient::OpenAIClient(PrivateTag, std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OpenAIClient::~OpenAIClient() = default;

Result<ChatResponse> OpenAIClient::Chat(const ChatRequest& request) {
  Impl& d = *impl_;
  const Clock::TimePoint start = d.clock->Now();
  d.counters.calls.fetch_add(1);
  int retries = 0;
  Result<ChatResponse> result = d.ChatOnce(request, &retries);
  const std::chrono::milliseconds latency = Since(*d.clock, start);
  if (result.ok()) {
    result->latency = latency;
    result->retries = retries;
  } else {
    d.counters.failures.fetch_add(1);
  }
  llm_internal::LogChatCall(d.options.model, result, latency, retries);
  return result;
}

Result<EmbeddingResponse> OpenAIClient::Embed(const std::vector<std::string>& inputs) {
  Impl& d = *impl_;
  const Clock::TimePoint start = d.clock->Now();
  d.counters.calls.fetch_add(1);
  int retries = 0;
  Result<EmbeddingResponse> result = d.EmbedOnce(inputs, &retries);
  const std::chrono::milliseconds latency = Since(*d.clock, start);
  if (result.ok()) {
    result->latency = latency;
    result->retries = retries;
  } else {
    d.counters.failures.fetch_add(1);
  }
  llm_internal::LogEmbeddingCall(d.options.model, inputs.size(), result, latency, retries);
  return result;
}

Result<std::vector<RerankHit>> OpenAIClient::Rerank(std::string_view query,
                                                    const std::vector<std::string>& documents,
                                                    size_t top_n) {
  Impl& d = *impl_;
  std::vector<RerankHit> out;
  if (documents.empty() || top_n == 0) return out;
  d.counters.calls.fetch_add(1);
  // The cache key is the body with the logical model; each endpoint gets its own model name.
  auto body_for = [&](const std::string& model) {
    nlohmann::json body = {{"model", model},
                           {"query", std::string(query)},
                           {"documents", documents},
                           {"top_n", std::min(top_n, documents.size())}};
    if (const nlohmann::json* extra = d.Extra()) body.merge_patch(*extra);
    return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  const std::string text = body_for(d.options.model);
  std::string key;
  if (d.options.cache != nullptr) key = "rerank:" + Sha256Hex(text);
  std::optional<std::string> cached;
  if (!key.empty()) cached = d.options.cache->Get(key);
  std::string reply;
  if (cached) {
    d.counters.cache_hits.fetch_add(1);
    reply = *cached;
  } else {
    int64_t tokens = static_cast<int64_t>(d.count(query));
    for (const auto& doc : documents) tokens += static_cast<int64_t>(d.count(doc));
    int retries = 0;
    auto sent = d.Send(
        "rerank", &Target::rerank_url, [&](const Target& target) { return body_for(target.model); },
        tokens, nullptr, &retries);
    if (!sent.ok()) {
      d.counters.failures.fetch_add(1);
      return sent.status().WithContext("reranking");
    }
    reply = std::move(sent->response.body);
    d.counters.prompt_tokens.fetch_add(tokens);
    d.pool.AddTokens(sent->endpoint, tokens, 0);
  }
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  const nlohmann::json* results = nullptr;
  if (j.is_object() && j.contains("results") && j["results"].is_array()) {
    results = &j["results"];
  } else if (j.is_array()) {
    results = &j;  // TEI
  }
  if (results == nullptr) {
    d.counters.failures.fetch_add(1);
    return Status::Parse("reranking: the reply holds no results list: " +
                         llm_internal::Shorten(reply, 200));
  }
  for (const auto& r : *results) {
    if (!r.is_object() || !r.contains("index") || !r["index"].is_number_integer()) continue;
    const auto index = r["index"].get<int64_t>();
    if (index < 0 || static_cast<size_t>(index) >= documents.size()) continue;
    double score = 0;
    for (const char* field : {"relevance_score", "score"}) {
      if (r.contains(field) && r[field].is_number()) {
        score = r[field].get<double>();
        break;
      }
    }
    out.push_back({static_cast<size_t>(index), score});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const RerankHit& a, const RerankHit& b) { return a.score > b.score; });
  if (out.size() > top_n) out.resize(top_n);
  if (!cached && !key.empty()) {
    Status st = d.options.cache->Put(key, reply, d.options.model, "rerank");
    if (!st.ok()) Log(LogLevel::kWarn, "llm", "rerank reply not cached: " + st.ToString());
  }
  return out;
}

const std::string& OpenAIClient::model() const { return impl_->options.model; }

std::vector<std::string> OpenAIClient::Adaptations() const {
  for (auto& t : impl_->targets) impl_->LoadCaps(*t);
  std::lock_guard lock(impl_->notes_mu);
  return impl_->notes;
}

std::optional<int64_t> OpenAIClient::ModelContextWindow() const {
  if (impl_->options.api_style != ApiStyle::kOllama) return std::nullopt;
  int64_t smallest = 0;
  for (auto& t : impl_->targets) {
    Result<int64_t> w = impl_->OllamaModelWindow(*t);
    if (w.ok() && *w > 0 && (smallest == 0 || *w < smallest)) smallest = *w;
  }
  if (smallest <= 0) return std::nullopt;
  return smallest;
}

LlmUsage OpenAIClient::Usage() const {
  LlmUsage u = impl_->counters.Snapshot();
  // Per endpoint only when a list was configured (a single base_url's usage is the total), or for
  // a model role's own client (llm.extract, ...), so that each role's server shows apart.
  if (!impl_->options.endpoints.empty() || impl_->options.usage_role.starts_with("llm.")) {
    u.endpoints = impl_->pool.Usage();
  }
  return u;
}

}  // namespace grag
