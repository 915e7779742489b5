// Writing JSON by hand where nlohmann's tree would copy every prompt twice (wire.h).
#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "wire.h"

namespace grag::llm_internal {

using nlohmann::json;

std::string BuildChatBodyDirect(const ChatRequest& request, const ChatBodyOptions& options) {
  auto dump = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
  std::vector<std::pair<std::string_view, std::string>> fields;
  std::string messages = "[";
  size_t size = 0;
  for (const ChatMessage& m : request.messages) size += m.content.size() + m.role.size() + 32;
  messages.reserve(size + 2);
  for (const ChatMessage& m : request.messages) {
    if (messages.size() > 1) messages += ',';
    messages += "{\"content\":";
    AppendJsonString(messages, m.content);
    messages += ",\"role\":";
    AppendJsonString(messages, m.role);
    messages += '}';
  }
  messages += ']';
  fields.emplace_back("messages", std::move(messages));
  {
    std::string model;
    AppendJsonString(model, options.model);
    fields.emplace_back("model", std::move(model));
  }
  if (request.temperature && options.send_temperature) {
    fields.emplace_back("temperature", dump(*request.temperature));
  }
  if (request.max_tokens) fields.emplace_back(options.max_tokens_field, dump(*request.max_tokens));
  if (request.json_mode && options.send_json_mode) {
    const json schema = options.send_json_schema && !request.json_schema.empty()
                            ? json::parse(request.json_schema, nullptr, false)
                            : json();
    if (schema.is_object()) {
      fields.emplace_back(
          "response_format",
          dump(json{{"type", "json_schema"},
                    {"json_schema", {{"name", "reply"}, {"schema", schema}, {"strict", false}}}}));
    } else {
      fields.emplace_back("response_format", "{\"type\":\"json_object\"}");
    }
  }
  if (!options.reasoning_effort.empty()) {
    std::string effort;
    AppendJsonString(effort, options.reasoning_effort);
    fields.emplace_back("reasoning_effort", std::move(effort));
  }
  if (options.enable_thinking) {
    fields.emplace_back("chat_template_kwargs", *options.enable_thinking
                                                    ? "{\"enable_thinking\":true}"
                                                    : "{\"enable_thinking\":false}");
  }
  if (options.stream) {
    fields.emplace_back("stream", "true");
    if (options.stream_usage) fields.emplace_back("stream_options", "{\"include_usage\":true}");
  }
  std::stable_sort(fields.begin(), fields.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t total = 2;
  for (const auto& field : fields) total += field.first.size() + field.second.size() + 4;
  std::string out = "{";
  out.reserve(total);
  for (const auto& [key, value] : fields) {
    if (out.size() > 1) out += ',';
    AppendJsonString(out, key);
    out += ':';
    out += value;
  }
  out += '}';
  return out;
}

}  // namespace grag::llm_internal
