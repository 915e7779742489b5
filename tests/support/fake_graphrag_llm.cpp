#include "support/fake_graphrag_llm.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

namespace grag::testing {
namespace {

using nlohmann::json;

const std::set<std::string> kStop = {
    "The",   "A",     "An",    "He",   "She",  "It",   "I",    "But",    "And",   "Or",    "If",
    "In",    "On",    "At",    "To",   "Of",   "As",   "So",   "No",     "Yes",   "Oh",    "What",
    "When",  "Then",  "There", "This", "That", "They", "We",   "You",    "His",   "Her",   "My",
    "Your",  "Our",   "Their", "Not",  "For",  "With", "By",   "From",   "Who",   "Why",   "How",
    "Where", "Which", "All",   "Now",  "One",  "Be",   "Is",   "Was",    "Were",  "Do",    "Did",
    "Have",  "Had",   "Come",  "Said", "Well", "Let",  "Upon", "Though", "After", "Before"};

std::string Between(std::string_view s, std::string_view open, std::string_view close) {
  const auto a = s.find(open);
  if (a == std::string_view::npos) return {};
  const auto b = s.find(close, a + open.size());
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(a + open.size(), b - a - open.size()));
}

// Runs of capitalised ASCII words ("Ebenezer Scrooge", "London"), most frequent first.
std::vector<std::string> Names(const std::string& text, size_t max) {
  std::map<std::string, int> count;
  std::vector<std::string> order;
  size_t i = 0;
  while (i < text.size()) {
    if (!std::isupper(static_cast<unsigned char>(text[i])) ||
        (i > 0 && std::isalpha(static_cast<unsigned char>(text[i - 1])))) {
      ++i;
      continue;
    }
    std::vector<std::string> words;
    size_t j = i;
    while (j < text.size() && std::isupper(static_cast<unsigned char>(text[j]))) {
      size_t k = j + 1;
      while (k < text.size() && std::islower(static_cast<unsigned char>(text[k]))) ++k;
      if (k - j < 3) break;
      std::string w = text.substr(j, k - j);
      if (kStop.count(w) && words.empty()) break;
      words.push_back(w);
      j = k;
      if (j < text.size() && text[j] == ' ' && j + 1 < text.size() &&
          std::isupper(static_cast<unsigned char>(text[j + 1]))) {
        ++j;
      } else {
        break;
      }
    }
    if (!words.empty()) {
      std::string name;
      for (const auto& w : words) name += (name.empty() ? "" : " ") + w;
      if (count[name]++ == 0) order.push_back(name);
      i = j + 1;
    } else {
      ++i;
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) { return count[a] > count[b]; });
  if (order.size() > max) order.resize(max);
  return order;
}

std::string Extract(std::string_view prompt) {
  const std::string text = Between(prompt, "<text>", "</text>");
  const auto names = Names(text, 8);
  json entities = json::array();
  json rels = json::array();
  for (size_t i = 0; i < names.size(); ++i) {
    const char* type =
        names[i].find(' ') != std::string::npos ? "person" : (i % 3 == 2 ? "geo" : "person");
    entities.push_back({{"name", names[i]},
                        {"type", type},
                        {"description", names[i] + " appears in a passage of the story"}});
    if (i > 0) {
      rels.push_back({{"source", names[i - 1]},
                      {"target", names[i]},
                      {"description", names[i - 1] + " and " + names[i] + " appear together"},
                      {"strength", static_cast<int>(1 + (i % 9))}});
    }
  }
  return json{{"entities", entities}, {"relationships", rels}}.dump();
}

std::string Report(std::string_view prompt) {
  const std::string ents = Between(prompt, "<entities>", "</entities>");
  std::vector<std::string> names;
  size_t pos = 0;
  while ((pos = ents.find('\n', pos)) != std::string::npos && names.size() < 3) {
    ++pos;
    const auto comma1 = ents.find(',', pos);
    const auto comma2 = comma1 == std::string::npos ? comma1 : ents.find(',', comma1 + 1);
    if (comma2 == std::string::npos) break;
    std::string name = ents.substr(comma1 + 1, comma2 - comma1 - 1);
    if (!name.empty() && name != "entity") names.push_back(name);
  }
  if (names.empty()) names.push_back("Unnamed");
  json findings = json::array();
  for (const auto& n : names) {
    findings.push_back({{"summary", n + " matters"},
                        {"explanation", n + " is central to this community."},
                        {"entities", {n}}});
  }
  while (findings.size() < 3) findings.push_back(findings[0]);
  return json{{"title", "Community of " + names[0]},
              {"summary", "These entities revolve around " + names[0] + "."},
              {"rating", 5},
              {"rating_explanation", "moderate"},
              {"findings", findings}}
      .dump();
}

}  // namespace

std::string PromptKind(std::string_view p) {
  if (p.find("were missed in the last extraction") != std::string_view::npos) return "glean";
  if (p.find("was not valid JSON") != std::string_view::npos) return "retry";
  if (p.find("Extract the entities and relationships") != std::string_view::npos) return "extract";
  if (p.find("Descriptions:") != std::string_view::npos &&
      p.find("Name: ") != std::string_view::npos) {
    return "summarize";
  }
  if (p.find("Write a report on the community") != std::string_view::npos) return "report";
  // DRIFT's prompts first: its primer and follow-up prompts share phrases with map and local.
  if (p.find("hypothetical answer to the question") != std::string_view::npos) return "drift_hyde";
  if (p.find("then say what to look up next") != std::string_view::npos) return "drift_primer";
  if (p.find("one step of research") != std::string_view::npos) return "drift_local";
  if (p.find("from the research notes below") != std::string_view::npos) return "drift_reduce";
  if (p.find("as far as the community reports below allow") != std::string_view::npos) return "map";
  if (p.find("from the analysts' points below") != std::string_view::npos) return "reduce";
  if (p.find("knowledge-graph context below") != std::string_view::npos) return "local";
  if (p.find("using the source passages below") != std::string_view::npos) return "basic";
  if (p.find("Classify the question below") != std::string_view::npos) return "route";
  if (p.find("Prepare a search of a document collection") != std::string_view::npos) {
    return "lazy_refine";
  }
  if (p.find("Rate how relevant each passage") != std::string_view::npos) return "lazy_relevance";
  if (p.find("Draw from the passages below the claims") != std::string_view::npos) {
    return "lazy_claims";
  }
  if (p.find("\"verdicts\"") != std::string_view::npos &&
      p.find("Pair 1:") != std::string_view::npos) {
    return "adjudicate";
  }
  return "unknown";
}

std::string FakeGraphRagReply(std::string_view prompt) {
  const std::string kind = PromptKind(prompt);
  if (kind == "extract") return Extract(prompt);
  if (kind == "glean" || kind == "retry") return R"({"entities": [], "relationships": []})";
  if (kind == "summarize") {
    return "Summary of " + Between(prompt, "Name: ", "\n") + ": " + Between(prompt, "- ", "\n");
  }
  if (kind == "report") return Report(prompt);
  if (kind == "map") {
    return R"({"points": [{"description": "The reports describe the main characters.", "score": 60}]})";
  }
  if (kind == "reduce") return "The story is about its main characters.";
  if (kind == "drift_hyde") return "# Hypothetical report\n\nThe main characters and what they do.";
  if (kind == "drift_primer" || kind == "drift_local") {
    // Follow-ups about the names of the reports or context (one per name, at most two).
    const std::string context =
        Between(prompt, "<reports>", "</reports>") + Between(prompt, "<entities>", "</entities>");
    json follow_ups = json::array();
    for (const auto& n : Names(context, 2)) follow_ups.push_back("Who is " + n + "?");
    const std::string cite = kind == "drift_primer" ? Between(prompt, "[C", "]") : "";
    const std::string chunk = Between(prompt, "[S", "]");
    const std::string answer = kind == "drift_primer"
                                   ? "The reports name the main characters [C" + cite + "]."
                                   : "The passages describe " +
                                         Between(prompt, "<question>Who is ", "?") +
                                         (chunk.empty() ? std::string(".") : " [S" + chunk + "].");
    return json{{kind == "drift_primer" ? "intermediate_answer" : "response", answer},
                {"score", 70},
                {"follow_up_queries", follow_ups}}
        .dump();
  }
  if (kind == "drift_reduce") {
    // Keeps the first ids the notes cite, as a model merging them would.
    std::string out = "The story follows its main characters";
    const std::string c = Between(prompt, "[C", "]");
    const std::string sref = Between(prompt, "[S", "]");
    if (!c.empty()) out += " [C" + c + "]";
    if (!sref.empty()) out += " [S" + sref + "]";
    return out + ".";
  }
  if (kind == "local") return "Answer from the local context.";
  if (kind == "basic") return "Answer from the passages [S1].";
  if (kind == "route") return R"({"kind": "lookup", "reason": "one thing"})";
  if (kind == "lazy_refine") return R"({"subqueries": [], "terms": []})";
  if (kind == "lazy_relevance" || kind == "lazy_claims") {
    // Every passage relevant (2); one claim citing the first passage.
    std::vector<std::string> ids;
    for (size_t at = prompt.find("<passage id=\""); at != std::string_view::npos;
         at = prompt.find("<passage id=\"", at + 1)) {
      ids.push_back(Between(prompt.substr(at), "id=\"", "\""));
    }
    if (kind == "lazy_claims") {
      return json{{"claims",
                   {{{"claim", "The passages tell of the main characters."},
                     {"score", 70},
                     {"sources", ids.empty() ? json::array() : json::array({ids.front()})}}}}}
          .dump();
    }
    json ratings = json::array();
    for (const std::string& id : ids) ratings.push_back({{"id", id}, {"score", 2}});
    return json{{"ratings", ratings}}.dump();
  }
  if (kind == "adjudicate") {  // entity resolution: every pair judged different
    json verdicts = json::array();
    for (int pair = 1; prompt.find("Pair " + std::to_string(pair) + ":") != std::string_view::npos;
         ++pair) {
      verdicts.push_back({{"pair", pair}, {"same", false}, {"reason", "not enough evidence"}});
    }
    return json{{"verdicts", verdicts}}.dump();
  }
  return "I do not know this prompt.";
}

ScriptedChatModel::Responder FakeGraphRagResponder() {
  return [](const ChatRequest& req) -> Result<std::string> {
    std::string last;
    for (const auto& m : req.messages) {
      if (m.role == "user") last = m.content;
    }
    return FakeGraphRagReply(last);
  };
}

FakeHandler FakeGraphRagHandler() {
  return Answering([](const FakeRequest& r) { return FakeGraphRagReply(r.LastUserMessage()); }, 16);
}

}  // namespace grag::testing
