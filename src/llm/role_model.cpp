// RoleChatModel: a chat model per role.
#include <set>

#include "grag/llm.h"

namespace grag {

std::string_view ChatRoleName(ChatRole role) {
  switch (role) {
    case ChatRole::kExtract:
      return "extract";
    case ChatRole::kSummarize:
      return "summarize";
    case ChatRole::kResolve:
      return "resolve";
    case ChatRole::kQuery:
      return "query";
    case ChatRole::kDefault:
      break;
  }
  return "default";
}

std::string ChatCacheKind(ChatRole role) {
  if (role == ChatRole::kDefault) return "chat";
  return "chat/" + std::string(ChatRoleName(role));
}

RoleChatModel::RoleChatModel(std::unique_ptr<ChatModel> default_model,
                             std::map<ChatRole, std::unique_ptr<ChatModel>> by_role)
    : default_(std::move(default_model)), by_role_(std::move(by_role)) {}

ChatModel& RoleChatModel::For(ChatRole role) const {
  auto it = by_role_.find(role);
  return it != by_role_.end() && it->second ? *it->second : *default_;
}

Result<ChatResponse> RoleChatModel::Chat(const ChatRequest& request) {
  return For(request.role).Chat(request);
}

LlmUsage RoleChatModel::Usage() const {
  LlmUsage u = default_->Usage();
  for (const auto& [role, model] : by_role_) {
    if (model) u += model->Usage();
  }
  return u;
}

std::map<std::string, LlmUsage> RoleChatModel::UsageByRole() const {
  std::map<std::string, LlmUsage> out;
  out["default"] = default_->Usage();
  for (const auto& [role, model] : by_role_) {
    if (model) out[std::string(ChatRoleName(role))] = model->Usage();
  }
  return out;
}

}  // namespace grag
