#include "grag/router.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <nlohmann/json.hpp>
#include <vector>

#include "grag/prompts.h"

namespace grag {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Lower-case words of `s` (ASCII letters, digits and apostrophes; anything else separates).
std::vector<std::string> Words(std::string_view s) {
  std::vector<std::string> out;
  std::string w;
  for (char c : Lower(s)) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '\'') {
      w += c;
    } else if (!w.empty()) {
      out.push_back(std::move(w));
      w.clear();
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

bool HasPhrase(const std::vector<std::string>& words, std::string_view phrase) {
  const std::vector<std::string> p = Words(phrase);
  if (p.empty() || p.size() > words.size()) return false;
  for (size_t i = 0; i + p.size() <= words.size(); ++i) {
    if (std::equal(p.begin(), p.end(), words.begin() + static_cast<std::ptrdiff_t>(i))) return true;
  }
  return false;
}

// What makes a question about the whole collection rather than a thing in it.
constexpr std::array<std::string_view, 30> kGlobalCues = {
    "main themes", "the themes",      "key themes",      "major themes",    "recurring",
    "overall",     "across",          "in general",      "summarize",       "summarise",
    "summary of",  "an overview",     "main ideas",      "key ideas",       "main topics",
    "the topics",  "trends",          "most common",     "main characters", "main actors",
    "key players", "this collection", "these documents", "the documents",   "the corpus",
    "this corpus", "the dataset",     "what is this",    "what happens in", "the story about"};

// What makes a question join facts or reach one thing through another.
constexpr std::array<std::string_view, 16> kMultiHopCues = {
    "both", "compared", "older",   "younger",      "larger",   "smaller",   "earlier", "later than",
    "same", "which of", "between", "the one that", "that was", "that were", "whose",   "whom"};

}  // namespace

std::string_view QuestionKindName(QuestionKind kind) {
  switch (kind) {
    case QuestionKind::kGlobal:
      return "global";
    case QuestionKind::kMultiHop:
      return "multi_hop";
    case QuestionKind::kLookup:
      return "lookup";
  }
  return "lookup";
}

RouteDecision RouteByRules(std::string_view question, size_t named_entities) {
  const std::vector<std::string> words = Words(question);
  RouteDecision d;
  for (std::string_view cue : kGlobalCues) {
    if (HasPhrase(words, cue)) {
      d.kind = QuestionKind::kGlobal;
      d.reason = "asks about the collection as a whole (\"" + std::string(cue) + "\")";
      return d;
    }
  }
  if (named_entities >= 2) {
    d.kind = QuestionKind::kMultiHop;
    d.reason = "names " + std::to_string(named_entities) + " things of the index";
    return d;
  }
  for (std::string_view cue : kMultiHopCues) {
    if (HasPhrase(words, cue)) {
      d.kind = QuestionKind::kMultiHop;
      d.reason = "joins facts (\"" + std::string(cue) + "\")";
      return d;
    }
  }
  d.kind = QuestionKind::kLookup;
  d.reason = named_entities == 1 ? "asks one thing about one named thing"
                                 : "asks for a fact (no collection-wide or multi-hop cue)";
  return d;
}

Result<RouteDecision> RouteWithModel(ChatModel& chat, const std::string& prompt,
                                     std::string_view question, size_t named_entities) {
  ChatRequest request;
  request.role = ChatRole::kQuery;
  request.messages.push_back({"user", FillPrompt(prompt, {{"question", std::string(question)}})});
  request.json_mode = true;
  request.max_tokens = 200;
  auto reply = chat.Chat(request);
  if (!reply.ok()) return reply.status().WithContext("routing the question");
  const std::string& text = reply->content;
  const size_t open = text.find('{');
  const size_t close = text.rfind('}');
  if (open != std::string::npos && close != std::string::npos && close > open) {
    nlohmann::json j = nlohmann::json::parse(text.substr(open, close - open + 1), nullptr, false);
    if (j.is_object() && j.contains("kind") && j["kind"].is_string()) {
      const std::string kind = Lower(j["kind"].get<std::string>());
      RouteDecision d;
      d.by_llm = true;
      d.reason = j.contains("reason") && j["reason"].is_string() ? j["reason"].get<std::string>()
                                                                 : "the model's classification";
      if (kind == "global") {
        d.kind = QuestionKind::kGlobal;
        return d;
      }
      if (kind == "multi_hop" || kind == "multi-hop" || kind == "multihop") {
        d.kind = QuestionKind::kMultiHop;
        return d;
      }
      if (kind == "lookup") {
        d.kind = QuestionKind::kLookup;
        return d;
      }
    }
  }
  RouteDecision d = RouteByRules(question, named_entities);
  d.reason += " (the model's reply could not be read, so the rules decided)";
  return d;
}

}  // namespace grag
