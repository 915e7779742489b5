#include "model_common.h"

#include <fmt/format.h>

#include <algorithm>

#include "grag/hash.h"
#include "grag/log.h"
#include "wire.h"

namespace grag::llm_internal {
namespace {

using nlohmann::json;

std::string Canonical(const json* extra) {
  // nlohmann's objects are ordered maps, so equal objects dump to equal text.
  if (extra == nullptr || extra->empty()) return "";
  return extra->dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string ChatCacheKey(std::string_view model, const ChatRequest& request,
                         const nlohmann::json* extra) {
  Hasher h;
  h.Add("grag-chat-v1").Add(model);
  h.Add(std::to_string(request.messages.size()));
  for (const ChatMessage& m : request.messages) h.Add(m.role).Add(m.content);
  h.Add(request.temperature ? fmt::format("t={}", *request.temperature) : "t=none");
  h.Add(request.max_tokens ? fmt::format("m={}", *request.max_tokens) : "m=none");
  h.Add(request.json_mode ? "json" : "text");
  h.Add(Canonical(extra));
  return h.HexDigest();
}

std::string EncodeChatReply(const ChatResponse& response, std::string_view content_json) {
  // What dumping the object {content, prompt_tokens, completion_tokens, tokens_estimated, model,
  // finish_reason} gives (keys sorted), without copying the reply into a json tree first.
  std::string out;
  out.reserve(response.content.size() + response.model.size() + 128);
  out += "{\"completion_tokens\":";
  out += std::to_string(response.completion_tokens);
  out += ",\"content\":";
  if (content_json.empty()) {
    AppendJsonString(out, response.content);
  } else {
    out += content_json;
  }
  out += ",\"finish_reason\":";
  AppendJsonString(out, response.finish_reason);
  out += ",\"model\":";
  AppendJsonString(out, response.model);
  out += ",\"prompt_tokens\":";
  out += std::to_string(response.prompt_tokens);
  out += ",\"tokens_estimated\":";
  out += response.tokens_estimated ? "true" : "false";
  out += '}';
  return out;
}

std::optional<ChatResponse> DecodeChatReply(std::string_view value) {
  json j = json::parse(value, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto content = j.find("content");
  if (content == j.end() || !content->is_string()) return std::nullopt;
  ChatResponse r;
  r.content = content->get<std::string>();
  auto count = [&](const char* name) -> int64_t {
    auto it = j.find(name);
    return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
  };
  auto text = [&](const char* name) -> std::string {
    auto it = j.find(name);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  r.prompt_tokens = count("prompt_tokens");
  r.completion_tokens = count("completion_tokens");
  auto estimated = j.find("tokens_estimated");
  r.tokens_estimated = estimated != j.end() && estimated->is_boolean() && estimated->get<bool>();
  r.model = text("model");
  r.finish_reason = text("finish_reason");
  return r;
}

std::string EmbeddingCacheKey(std::string_view model, std::optional<int> dimensions,
                              const nlohmann::json* extra, std::string_view input) {
  Hasher h;
  h.Add("grag-embedding-v1").Add(model);
  h.Add(dimensions ? std::to_string(*dimensions) : "d=none");
  h.Add(Canonical(extra));
  h.Add(input);
  return h.HexDigest();
}

int64_t CountPromptTokens(const std::vector<ChatMessage>& messages, const TokenCounter& count) {
  int64_t total = 3;
  for (const ChatMessage& m : messages) {
    total += 3 + static_cast<int64_t>(count(m.role)) + static_cast<int64_t>(count(m.content));
  }
  return total;
}

void LogChatCall(std::string_view model, const Result<ChatResponse>& result,
                 std::chrono::milliseconds latency, int retries) {
  if (result.ok()) {
    const ChatResponse& r = *result;
    Log(LogLevel::kDebug, "llm",
        fmt::format("chat model={} prompt_tokens={} completion_tokens={}{} latency_ms={} "
                    "retries={} cache_hit={}",
                    model, r.prompt_tokens, r.completion_tokens,
                    r.tokens_estimated ? " (estimated)" : "", latency.count(), retries,
                    r.cache_hit));
  } else {
    Log(LogLevel::kDebug, "llm",
        fmt::format("chat model={} failed latency_ms={} retries={} cache_hit=false: {}", model,
                    latency.count(), retries, result.status().ToString()));
  }
}

void LogEmbeddingCall(std::string_view model, size_t inputs,
                      const Result<EmbeddingResponse>& result, std::chrono::milliseconds latency,
                      int retries) {
  if (result.ok()) {
    const EmbeddingResponse& r = *result;
    Log(LogLevel::kDebug, "llm",
        fmt::format("embed model={} inputs={} dimension={} prompt_tokens={}{} latency_ms={} "
                    "retries={} cache_hits={}",
                    model, inputs, r.dimension, r.prompt_tokens,
                    r.tokens_estimated ? " (estimated)" : "", latency.count(), retries,
                    r.cache_hits));
  } else {
    Log(LogLevel::kDebug, "llm",
        fmt::format("embed model={} inputs={} failed latency_ms={} retries={}: {}", model, inputs,
                    latency.count(), retries, result.status().ToString()));
  }
}

}  // namespace grag::llm_internal

namespace grag {

// ---- small public helpers (grag/llm.h) ----

size_t EstimateTokens(std::string_view text) { return (text.size() + 3) / 4; }

LlmUsage& LlmUsage::operator+=(const LlmUsage& other) {
  calls += other.calls;
  cache_hits += other.cache_hits;
  http_requests += other.http_requests;
  retries += other.retries;
  failures += other.failures;
  rejected += other.rejected;
  prompt_tokens += other.prompt_tokens;
  completion_tokens += other.completion_tokens;
  for (const EndpointUsage& e : other.endpoints) {
    auto it = std::find_if(endpoints.begin(), endpoints.end(), [&](const EndpointUsage& m) {
      return m.role == e.role && m.name == e.name;
    });
    if (it == endpoints.end()) {
      endpoints.push_back(e);
    } else {
      *it += e;
    }
  }
  return *this;
}

LlmUsage& LlmUsage::operator-=(const LlmUsage& other) {
  calls -= other.calls;
  cache_hits -= other.cache_hits;
  http_requests -= other.http_requests;
  retries -= other.retries;
  failures -= other.failures;
  rejected -= other.rejected;
  prompt_tokens -= other.prompt_tokens;
  completion_tokens -= other.completion_tokens;
  for (const EndpointUsage& e : other.endpoints) {
    auto it = std::find_if(endpoints.begin(), endpoints.end(), [&](const EndpointUsage& m) {
      return m.role == e.role && m.name == e.name;
    });
    if (it != endpoints.end()) *it -= e;
  }
  return *this;
}

Result<ApiStyle> ParseApiStyle(std::string_view name) {
  if (name == "openai") return ApiStyle::kOpenAI;
  if (name == "azure") return ApiStyle::kAzure;
  if (name == "ollama") return ApiStyle::kOllama;
  return Status::InvalidArgument("unknown API style '" + std::string(name) +
                                 "' (expected openai, azure or ollama)");
}

}  // namespace grag
