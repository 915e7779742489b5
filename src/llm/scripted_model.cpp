// In-process models for tests, and the in-memory cache they (and client tests) use.
#include <fmt/format.h>

#include <cctype>
#include <cmath>

#include "grag/llm.h"
#include "grag/log.h"
#include "model_common.h"
#include "thinking.h"

namespace grag {
namespace {

std::chrono::milliseconds Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

// ---- InMemoryCache ----

std::optional<std::string> InMemoryCache::Get(std::string_view key) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.value;
}

Status InMemoryCache::Put(std::string_view key, std::string_view value, std::string_view model,
                          std::string_view kind) {
  std::lock_guard lock(mu_);
  entries_.insert_or_assign(std::string(key),
                            Entry{std::string(value), std::string(model), std::string(kind)});
  return Status::Ok();
}

size_t InMemoryCache::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

std::map<std::string, InMemoryCache::Entry, std::less<>> InMemoryCache::entries() const {
  std::lock_guard lock(mu_);
  return entries_;
}

void InMemoryCache::Clear() {
  std::lock_guard lock(mu_);
  entries_.clear();
}

// ---- ScriptedChatModel ----

ScriptedChatModel::ScriptedChatModel(ScriptedModelOptions options) : options_(std::move(options)) {
  if (!options_.token_counter) options_.token_counter = &EstimateTokens;
}

ScriptedChatModel::ScriptedChatModel(Responder responder, ScriptedModelOptions options)
    : ScriptedChatModel(std::move(options)) {
  responder_ = std::move(responder);
}

void ScriptedChatModel::Push(Result<std::string> reply) {
  std::lock_guard lock(mu_);
  queue_.push_back(std::move(reply));
}

Result<ChatResponse> ScriptedChatModel::Chat(const ChatRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  auto finish = [&](Result<ChatResponse> result) {
    {
      std::lock_guard lock(mu_);
      ++usage_.calls;
      if (!result.ok()) ++usage_.failures;
    }
    llm_internal::LogChatCall(options_.model, result, Since(start), 0);
    return result;
  };
  if (request.messages.empty()) {
    return finish(Status::InvalidArgument("a chat request needs at least one message"));
  }

  const bool use_cache = options_.cache != nullptr && request.use_cache;
  std::string key;
  if (use_cache) {
    key = llm_internal::ChatCacheKey(options_.model, request, nullptr);
    if (std::optional<std::string> value = options_.cache->Get(key)) {
      if (std::optional<ChatResponse> cached = llm_internal::DecodeChatReply(*value)) {
        {
          std::lock_guard lock(mu_);
          ++usage_.cache_hits;
        }
        cached->cache_hit = true;
        if (request.on_delta && !cached->content.empty()) request.on_delta(cached->content);
        return finish(std::move(*cached));
      }
    }
  }

  std::optional<Result<std::string>> reply;
  size_t index = 0;
  {
    std::lock_guard lock(mu_);
    index = requests_.size();
    requests_.push_back(request);
    if (!responder_) {
      if (queue_.empty()) {
        reply.emplace(Status::Internal(
            fmt::format("ScriptedChatModel: no scripted reply left for request #{}", index + 1)));
      } else {
        reply.emplace(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
  }
  if (responder_) reply.emplace(responder_(request));  // outside the lock: it may be slow
  if (!reply->ok()) return finish(reply->status());

  ChatResponse out;
  out.content = std::move(*reply).value();
  out.model = options_.model;
  out.finish_reason = "stop";
  out.tokens_estimated = true;
  out.prompt_tokens = llm_internal::CountPromptTokens(request.messages, options_.token_counter);
  out.completion_tokens = static_cast<int64_t>(options_.token_counter(out.content));
  // As OpenAIClient: a scripted reasoning model's thinking is spent, never answered.
  if (llm_internal::ThinkingSplit split = llm_internal::SplitThinking(out.content);
      !split.thinking.empty() || split.unclosed) {
    out.reasoning_tokens = static_cast<int64_t>(options_.token_counter(split.thinking));
    out.content = std::move(split.answer);
  }
  {
    std::lock_guard lock(mu_);
    usage_.http_requests += 1;  // the script stands in for the server
    usage_.prompt_tokens += out.prompt_tokens;
    usage_.completion_tokens += out.completion_tokens;
  }
  if (request.on_delta && !out.content.empty()) request.on_delta(out.content);
  if (request.validator) {
    Status verdict = request.validator(out.content);
    if (!verdict.ok()) {
      {
        std::lock_guard lock(mu_);
        ++usage_.rejected;
      }
      return finish(verdict);
    }
  }
  if (use_cache) {
    Status stored = options_.cache->Put(key, llm_internal::EncodeChatReply(out), options_.model,
                                        ChatCacheKind(request.role));
    if (!stored.ok()) Log(LogLevel::kWarn, "llm", "reply not cached: " + stored.ToString());
  }
  out.latency = Since(start);
  return finish(std::move(out));
}

LlmUsage ScriptedChatModel::Usage() const {
  std::lock_guard lock(mu_);
  return usage_;
}

std::vector<ChatRequest> ScriptedChatModel::Requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

size_t ScriptedChatModel::RequestCount() const {
  std::lock_guard lock(mu_);
  return requests_.size();
}

// ---- ScriptedEmbeddingModel ----

ScriptedEmbeddingModel::ScriptedEmbeddingModel(size_t dimension, std::string model)
    : ScriptedEmbeddingModel(
          [dimension](const std::string& input) -> Result<std::vector<float>> {
            return HashEmbedding(input, dimension);
          },
          std::move(model)) {}

ScriptedEmbeddingModel::ScriptedEmbeddingModel(Embedder embedder, std::string model)
    : embedder_(std::move(embedder)), model_(std::move(model)) {}

std::vector<float> ScriptedEmbeddingModel::HashEmbedding(std::string_view text, size_t dimension) {
  dimension = std::max<size_t>(dimension, 1);
  std::vector<float> v(dimension, 0.0f);
  std::string word;
  auto flush = [&] {
    if (word.empty()) return;
    uint64_t h = Fnv1a(word);
    v[h % dimension] += (h >> 63) != 0 ? -1.0f : 1.0f;
    word.clear();
  };
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || u >= 0x80) {
      word += static_cast<char>(std::tolower(u));
    } else {
      flush();
    }
  }
  flush();
  double norm = 0;
  for (float x : v) norm += static_cast<double>(x) * x;
  if (norm == 0) {  // no words: still a unit vector, and still a function of the text
    v[Fnv1a(text) % dimension] = 1.0f;
    return v;
  }
  const auto scale = static_cast<float>(1.0 / std::sqrt(norm));
  for (float& x : v) x *= scale;
  return v;
}

Result<EmbeddingResponse> ScriptedEmbeddingModel::Embed(const std::vector<std::string>& inputs) {
  const auto start = std::chrono::steady_clock::now();
  EmbeddingResponse out;
  out.model = model_;
  out.tokens_estimated = true;
  Status failure;
  for (const std::string& input : inputs) {
    {
      std::lock_guard lock(mu_);
      inputs_.push_back(input);
    }
    Result<std::vector<float>> v = embedder_(input);
    if (!v.ok()) {
      failure = v.status();
      break;
    }
    if (out.vectors.empty()) out.dimension = v->size();
    if (v->size() != out.dimension || v->empty()) {
      failure = Status::Internal(
          fmt::format("ScriptedEmbeddingModel: the embedder returned {} values after {}", v->size(),
                      out.dimension));
      break;
    }
    out.vectors.push_back(std::move(*v));
    out.prompt_tokens += static_cast<int64_t>(EstimateTokens(input));
  }
  Result<EmbeddingResponse> result =
      failure.ok() ? Result<EmbeddingResponse>(std::move(out)) : Result<EmbeddingResponse>(failure);
  {
    std::lock_guard lock(mu_);
    ++usage_.calls;
    if (result.ok()) {
      usage_.http_requests += 1;
      usage_.prompt_tokens += result->prompt_tokens;
    } else {
      ++usage_.failures;
    }
  }
  if (result.ok()) result->latency = Since(start);
  llm_internal::LogEmbeddingCall(model_, inputs.size(), result, Since(start), 0);
  return result;
}

LlmUsage ScriptedEmbeddingModel::Usage() const {
  std::lock_guard lock(mu_);
  return usage_;
}

std::vector<std::string> ScriptedEmbeddingModel::Inputs() const {
  std::lock_guard lock(mu_);
  return inputs_;
}

}  // namespace grag
