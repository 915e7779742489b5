// The OpenAI wire format, kept apart from the client so each piece is unit-tested on its own:
// request bodies, reply parsing into plain structs, server-sent events, error messages,
// Retry-After and backoff. Internal to src/llm. Nothing here throws.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/json_write.h"
#include "grag/llm.h"
#include "grag/status.h"

namespace grag::llm_internal {

// ---- requests ----

// grag/json_write.h (core): prompts are the bulk of every request.
using grag::AppendJsonString;

struct ChatBodyOptions {
  std::string model;
  const nlohmann::json* extra = nullptr;  // object merged last (RFC 7396); may be null
  bool stream = false;
  bool stream_usage = true;
  std::string max_tokens_field = "max_tokens";
  // What the endpoint was found to accept (EndpointCaps): false leaves the request's
  // response_format or temperature out.
  bool send_json_mode = true;
  bool send_json_schema = true;  // false: json_object even when the request has a schema
  bool send_temperature = true;
  std::string reasoning_effort;  // non-empty: sent as "reasoning_effort"
  // Set: chat_template_kwargs {"enable_thinking": value} (vLLM, llama.cpp's server, LM Studio).
  std::optional<bool> enable_thinking;
};

std::string BuildChatBody(const ChatRequest& request, const ChatBodyOptions& options);
// BuildChatBody without extra body parameters (options.extra == nullptr), written directly, in
// the key order of nlohmann's objects (sorted): the prompts are copied once, not into a json tree
// and out again.
std::string BuildChatBodyDirect(const ChatRequest& request, const ChatBodyOptions& options);

std::string BuildEmbeddingBody(const std::vector<std::string_view>& inputs,
                               const std::string& model, std::optional<int> dimensions,
                               const nlohmann::json* extra);

// Parses `text` as a JSON object (empty text: an empty object).
Result<nlohmann::json> ParseExtraBody(std::string_view text);

// ---- replies ----

struct ChatReply {
  std::string content;
  // The content's JSON string literal in the reply body when it is byte for byte what
  // AppendJsonString writes for `content` (EncodeChatReply copies it instead of escaping the
  // content again); else empty. Points into the body: valid while the body is.
  std::string_view content_json;
  std::optional<int64_t> prompt_tokens;  // nullopt: the reply had no usage
  std::optional<int64_t> completion_tokens;
  std::string model;
  std::string finish_reason;
  // What a reasoning model thought, when the server sends it apart from the content
  // (reasoning_content: DeepSeek, vLLM; reasoning: OpenRouter, LM Studio; thinking: Ollama).
  std::string reasoning;
  // usage.completion_tokens_details.reasoning_tokens (OpenAI), part of completion_tokens.
  std::optional<int64_t> reasoning_tokens;
};

// A whole (non-streamed) chat completion body. kParse when it is not JSON, has no choices, or
// its content is null (the message then says why: finish_reason, refusal).
Result<ChatReply> ParseChatReply(std::string_view body);

// Assembles a streamed chat completion from the data of its server-sent events.
class ChatStreamAssembler {
 public:
  explicit ChatStreamAssembler(std::function<void(std::string_view)> on_delta)
      : on_delta_(std::move(on_delta)) {}

  // One event's data. kParse for a non-JSON chunk, kUnavailable for an error event.
  Status OnEvent(std::string_view data);

  bool done() const { return done_; }            // saw [DONE]
  int events() const { return events_; }         // data events seen, [DONE] included
  bool delivered() const { return delivered_; }  // passed at least one delta on
  // The assembled reply; kParse when the stream carried no chunk at all.
  Result<ChatReply> Finish() const;

 private:
  std::function<void(std::string_view)> on_delta_;
  ChatReply reply_;
  bool done_ = false;
  bool delivered_ = false;
  int events_ = 0;
  int chunks_ = 0;
};

struct EmbeddingReply {
  std::vector<std::vector<float>> vectors;  // in input order
  std::optional<int64_t> prompt_tokens;
  std::string model;
};

// kParse unless the body holds exactly `expected` vectors of one non-zero dimension.
Result<EmbeddingReply> ParseEmbeddingReply(std::string_view body, size_t expected);

// ---- Ollama's own API (/api/chat, /api/embed, /api/show) ----

struct OllamaChatOptions {
  std::string model;
  int64_t num_ctx = 0;     // the context window to load the model with; 0: not sent
  std::string keep_alive;  // e.g. "30m"; "": not sent
  std::optional<bool> think;
  bool send_json_mode = true;
  bool send_json_schema = true;
};
// {model, messages, stream: false, format: "json" when json_mode, options {temperature,
// num_predict, num_ctx}, keep_alive, think}, then the extra body merged (RFC 7396).
std::string BuildOllamaChatBody(const ChatRequest& request, const OllamaChatOptions& options,
                                const nlohmann::json* extra);
// {model, message {content, thinking}, done_reason, prompt_eval_count, eval_count}.
Result<ChatReply> ParseOllamaChatReply(std::string_view body);
std::string BuildOllamaEmbedBody(const std::vector<std::string_view>& inputs,
                                 const std::string& model, int64_t num_ctx,
                                 const std::string& keep_alive, const nlohmann::json* extra);
// {embeddings: [[...]], prompt_eval_count}; kParse unless it holds `expected` vectors.
Result<EmbeddingReply> ParseOllamaEmbedReply(std::string_view body, size_t expected);
// The model's context window from /api/show: model_info's "<architecture>.context_length", else
// a num_ctx in its parameters; nullopt when the reply names neither.
std::optional<int64_t> ParseOllamaContextLength(std::string_view body);
// The num_ctx to load a model with for a prompt of `prompt_tokens` and a reply of up to
// `output_tokens`: both with a margin (the model's tokenizer is not ours), rounded up to a power
// of two (so a run loads the model with few distinct windows: each change reloads it), at least
// 2,048, at most `model_max` when known (> 0). kInvalidArgument when the prompt alone does not fit
// in `model_max`.
Result<int64_t> OllamaContextFor(int64_t prompt_tokens, int64_t output_tokens, int64_t model_max,
                                 std::string_view model);

// ---- parameters a server refuses ----

// The request parameter a 400/422 reply refuses, among those grag may send and can do without:
// "response_format", "max_tokens", "max_completion_tokens", "temperature", "reasoning_effort",
// "chat_template_kwargs", "stream_options", "think", "format". "" when the reply names none of
// them (or is not a 400/422).
std::string RefusedParameter(int status, std::string_view body);

// ---- server-sent events ----

// Splits a text/event-stream into events. Bytes may arrive cut anywhere (mid-line, mid-CRLF).
class SseParser {
 public:
  // The data of one event (data lines joined by '\n'); `field` is "data", or "error" for
  // llama.cpp's error events. A non-OK return stops the parse and is returned by Feed.
  using Handler = std::function<Status(std::string_view field, std::string_view data)>;

  Status Feed(std::string_view bytes, const Handler& handler);
  // Dispatches an event the stream ended without a blank line after.
  Status Finish(const Handler& handler);

 private:
  Status Line(std::string_view line, const Handler& handler);
  Status Dispatch(const Handler& handler);

  std::string partial_;  // an incomplete line
  std::string data_;     // the current event's data so far
  std::string field_ = "data";
  bool has_data_ = false;
};

// ---- errors, retries ----

// The human part of an error body: OpenAI's error.message (+ code), Ollama's "error" string,
// vLLM's "message", FastAPI's "detail"; else the body's start, shortened. "" for an empty body.
std::string ErrorMessageFromBody(std::string_view body);

// true for a 429 the server says will not pass by waiting (OpenAI's "insufficient_quota").
bool IsQuotaExhausted(std::string_view body);

// The Status for a non-2xx reply: kInvalidArgument for most 4xx, kNotFound for 404, kTimeout for
// 408, kRateLimited for 429, kUnavailable for 5xx. The message names the status, the URL and the
// server's message.
Status HttpErrorStatus(int status, std::string_view body, std::string_view url);

// Ok when a 2xx `response` may be an OpenAI-compatible API's: labelled JSON or an event stream
// (or unlabelled), and not an HTML page; kUnavailable naming the content type and `url` when it
// is a web page or other text, which means the base URL points at something else.
Status CheckReplyIsApi(const HttpResponse& response, std::string_view url, bool streaming);

// Whether a reply body is an HTML page rather than an API's JSON.
bool LooksLikeHtml(std::string_view body);

// true for the statuses worth retrying: 408, 429 and 5xx.
bool IsRetryableStatus(int status);

// How long the server asks us to wait: retry-after-ms (Azure, OpenAI), else Retry-After in
// seconds or as an HTTP date (relative to `wall_now`). nullopt when absent or unreadable.
std::optional<std::chrono::milliseconds> ParseRetryAfter(
    const HttpResponse& response, std::chrono::system_clock::time_point wall_now);

// Exponential backoff with "equal jitter": d = min(cap, base * 2^attempt), then d/2 + u * d/2
// for u in [0, 1). Never near zero (a retry storm), never above cap.
std::chrono::milliseconds BackoffDelay(int attempt, std::chrono::milliseconds base,
                                       std::chrono::milliseconds cap, double u);

// ---- small helpers ----

std::string Base64Encode(std::string_view bytes);
std::optional<std::string> Base64Decode(std::string_view text);
// Float vectors as base64 of little-endian float32, compact for the cache.
std::string EncodeFloats(const std::vector<float>& values);
std::optional<std::vector<float>> DecodeFloats(std::string_view text);

// At most `max` bytes of `text`, cut on a UTF-8 boundary, with "..." when cut.
std::string Shorten(std::string_view text, size_t max);

}  // namespace grag::llm_internal
