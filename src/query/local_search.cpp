// Local search, step 5: one answer call on the assembled context, and its citations.
#include "grag/local_search.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "grag/log.h"

namespace grag {

std::string_view LocalItemTypeName(LocalItemType type) {
  switch (type) {
    case LocalItemType::kEntity:
      return "entity";
    case LocalItemType::kRelationship:
      return "relationship";
    case LocalItemType::kReport:
      return "report";
    case LocalItemType::kChunk:
      return "chunk";
  }
  return "unknown";
}

std::string DescribeLocalItem(const LocalContextItem& item) {
  switch (item.type) {
    case LocalItemType::kEntity:
      return "entity " + item.name;
    case LocalItemType::kRelationship:
      return "relationship " + item.source_name + " -- " + item.target_name;
    case LocalItemType::kReport:
      return fmt::format("report of community {} (level {}): {}", item.community_id, item.level,
                         item.name.empty() ? "untitled" : item.name);
    case LocalItemType::kChunk:
      return fmt::format("chunk {} of document {}", item.chunk_index, item.document_id);
  }
  return item.id;
}

const LocalContextItem* LocalContext::Find(std::string_view id) const {
  for (const auto& item : items) {
    if (item.id == id) return &item;
  }
  return nullptr;
}

std::vector<LocalCitation> FindLocalCitations(std::string_view answer,
                                              const LocalContext& context) {
  std::map<std::string, size_t, std::less<>> index;
  for (size_t i = 0; i < context.items.size(); ++i) index.emplace(context.items[i].id, i);
  auto is_alnum = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  };
  std::vector<LocalCitation> out;
  std::set<std::string, std::less<>> seen;
  for (size_t i = 0; i < answer.size(); ++i) {
    const char c = answer[i];
    if (c != 'E' && c != 'R' && c != 'C' && c != 'S') continue;
    if (i > 0 && is_alnum(answer[i - 1])) continue;  // inside a word
    size_t end = i + 1;
    while (end < answer.size() && answer[end] >= '0' && answer[end] <= '9') ++end;
    if (end == i + 1 || (end < answer.size() && is_alnum(answer[end]))) continue;
    const std::string_view id = answer.substr(i, end - i);
    auto it = index.find(id);
    if (it == index.end() || seen.count(id) != 0) continue;
    seen.emplace(id);
    out.push_back({std::string(id), it->second});
    i = end - 1;
  }
  return out;
}

Result<LocalSearchResult> LocalSearch(Store& store, ChatModel& chat, EmbeddingModel* embedder,
                                      const Tokenizer& tokenizer, std::string_view question,
                                      const LocalSearchOptions& options,
                                      const VectorIndex* entity_index, const Retriever* retriever) {
  for (std::string_view placeholder :
       {"{{question}}", "{{entities}}", "{{relationships}}", "{{reports}}", "{{chunks}}"}) {
    if (options.prompt.find(placeholder) == std::string::npos) {
      return Status::InvalidArgument("the local search prompt lacks the placeholder " +
                                     std::string(placeholder));
    }
  }
  GRAG_ASSIGN_OR_RETURN(
      LocalContext context,
      BuildLocalContext(store, embedder, tokenizer, question, options, entity_index, retriever));
  LocalSearchResult result;
  if (context.matches.empty()) {
    // Seed 000's stop rule: nothing cleared the floor and nothing was named, so no model call.
    Log(LogLevel::kInfo, "local", "no entity matched the question: not calling the model");
    result.nothing_found = true;
    result.answer = options.nothing_found_answer;
    result.context = std::move(context);
    if (options.on_answer_delta) options.on_answer_delta(result.answer);
    return result;
  }

  result.prompt = FillPrompt(options.prompt, {{"question", std::string(question)},
                                              {"entities", context.entities_text},
                                              {"relationships", context.relationships_text},
                                              {"reports", context.reports_text},
                                              {"chunks", context.chunks_text}});
  ChatRequest request;
  request.role = ChatRole::kQuery;
  request.messages.push_back({"user", result.prompt});
  request.temperature = options.temperature;
  request.max_tokens = options.answer_max_tokens;
  request.on_delta = options.on_answer_delta;
  auto reply = chat.Chat(request);
  if (!reply.ok()) return reply.status().WithContext("local search answer");
  Log(LogLevel::kDebug, "local",
      fmt::format("answer from {}: {} prompt + {} completion tokens, {} ms{}", reply->model,
                  reply->prompt_tokens, reply->completion_tokens, reply->latency.count(),
                  reply->cache_hit ? " (cache hit)" : ""));
  result.response = std::move(reply).value();
  result.answer = result.response.content;
  result.citations = FindLocalCitations(result.answer, context);
  result.context = std::move(context);
  return result;
}

}  // namespace grag
