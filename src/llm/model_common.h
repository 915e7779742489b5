// What OpenAIClient and the scripted models share, so they cache, count and log alike:
// reply-cache keys and encodings, prompt token counting, the per-call log line. Internal.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/llm.h"

namespace grag::llm_internal {

// The cache key of a chat reply: SHA-256 over the model, every message, and each parameter that
// changes the reply (temperature, max_tokens, json_mode, the extra body). Streaming does not
// change the reply, so a streamed answer serves a later plain call and the reverse.
std::string ChatCacheKey(std::string_view model, const ChatRequest& request,
                         const nlohmann::json* extra);

// A cached chat reply (content, tokens, model, finish reason) as JSON text. `content_json`, when
// not empty, is the content already written as a JSON string (ChatReply::content_json), copied
// as it is.
std::string EncodeChatReply(const ChatResponse& response, std::string_view content_json = {});
// nullopt when `value` is not what EncodeChatReply wrote (a corrupt or foreign entry).
std::optional<ChatResponse> DecodeChatReply(std::string_view value);

// The cache key of one input's embedding.
std::string EmbeddingCacheKey(std::string_view model, std::optional<int> dimensions,
                              const nlohmann::json* extra, std::string_view input);

// Prompt tokens of a chat, as OpenAI counts them: 3 per message plus its role and content,
// plus 3 that prime the reply.
int64_t CountPromptTokens(const std::vector<ChatMessage>& messages, const TokenCounter& count);

// The debug line every chat call logs (model, tokens, latency, retries, cache hit, error).
void LogChatCall(std::string_view model, const Result<ChatResponse>& result,
                 std::chrono::milliseconds latency, int retries);
void LogEmbeddingCall(std::string_view model, size_t inputs,
                      const Result<EmbeddingResponse>& result, std::chrono::milliseconds latency,
                      int retries);

}  // namespace grag::llm_internal
