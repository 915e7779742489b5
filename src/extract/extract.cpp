#include "grag/extract.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "grag/prompts.h"

namespace grag {
namespace {

using nlohmann::json;

constexpr std::string_view kGleanPrompt =
    "Many entities and relationships were missed in the last extraction. Add the missing ones, "
    "using the same entity types and the same JSON format. Return only what is new; return empty "
    "lists if nothing was missed.";
constexpr std::string_view kRetryPrompt =
    "Your reply was not valid JSON. Reply again with only the JSON object, in the format asked "
    "for above.";

bool IsSeparator(utf8proc_int32_t cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
      return true;
    default:
      return false;
  }
}

std::string Trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// A field as text: strings as they are, numbers printed.
std::string Text(const json& obj, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = obj.find(n);
    if (it == obj.end() || it->is_null()) continue;
    if (it->is_string()) return Trim(it->get<std::string>());
    if (it->is_number()) return it->dump();
  }
  return {};
}

double Strength(const json& obj) {
  for (const char* n : {"strength", "weight", "relationship_strength"}) {
    auto it = obj.find(n);
    if (it == obj.end()) continue;
    double v = 1;
    if (it->is_number()) {
      v = it->get<double>();
    } else if (it->is_string()) {
      v = std::strtod(it->get<std::string>().c_str(), nullptr);
    } else {
      continue;
    }
    if (!std::isfinite(v) || v <= 0) return 1;
    return std::clamp(v, 1.0, 10.0);
  }
  return 1;
}

// Finds the JSON object in a reply: the whole reply, a ```json fenced block, or the span from
// the first '{' to the last '}'.
std::optional<json> FindObject(std::string_view reply) {
  auto try_parse = [](std::string_view text) -> std::optional<json> {
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    return j;
  };
  if (auto j = try_parse(reply)) return j;
  if (auto fence = reply.find("```"); fence != std::string_view::npos) {
    auto start = reply.find('\n', fence);
    auto end = start == std::string_view::npos ? start : reply.find("```", start);
    if (end != std::string_view::npos) {
      if (auto j = try_parse(reply.substr(start + 1, end - start - 1))) return j;
    }
  }
  const auto open = reply.find('{');
  const auto close = reply.rfind('}');
  if (open != std::string_view::npos && close != std::string_view::npos && close > open) {
    if (auto j = try_parse(reply.substr(open, close - open + 1))) return j;
  }
  return std::nullopt;
}

std::string MentionKey(const EntityMention& e) {
  return e.name_key + "\x1f" + e.type + "\x1f" + e.description;
}
std::string MentionKey(const RelationshipMention& r) {
  return r.source_key + "\x1f" + r.target_key + "\x1f" + r.description;
}

void MergeInto(ParsedExtraction& into, ParsedExtraction&& more) {
  std::set<std::string> seen_e;
  std::set<std::string> seen_r;
  for (const auto& e : into.entities) seen_e.insert(MentionKey(e));
  for (const auto& r : into.relationships) seen_r.insert(MentionKey(r));
  for (auto& e : more.entities) {
    if (seen_e.insert(MentionKey(e)).second) into.entities.push_back(std::move(e));
  }
  for (auto& r : more.relationships) {
    if (seen_r.insert(MentionKey(r)).second) into.relationships.push_back(std::move(r));
  }
}

std::string JoinTypes(const std::vector<std::string>& types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i];
  return s;
}

}  // namespace

std::vector<std::string> SplitNormalizedName(std::string_view normalized) {
  std::vector<std::string> words;
  size_t start = 0;
  while (start < normalized.size()) {
    size_t end = normalized.find(' ', start);
    if (end == std::string_view::npos) end = normalized.size();
    if (end > start) words.emplace_back(normalized.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

std::string NormalizeEntityName(std::string_view name) {
  // ASCII (nearly all of an English text: the reports stage folds every sentence) folds to lower
  // case byte for byte, as utf8proc would, at a fraction of its cost.
  static const std::array<bool, 128> kAsciiSeparator = [] {
    std::array<bool, 128> t{};
    for (int c = 0; c < 128; ++c) t[static_cast<size_t>(c)] = IsSeparator(c);
    return t;
  }();
  if (std::all_of(name.begin(), name.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u != 0 && u < 0x80;
      })) {
    std::string out;
    out.reserve(name.size());
    bool pending_space = false;
    for (char c : name) {
      if (kAsciiSeparator[static_cast<unsigned char>(c)]) {
        pending_space = !out.empty();
      } else {
        if (pending_space) out += ' ';
        pending_space = false;
        out += c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
      }
    }
    return out;
  }
  utf8proc_uint8_t* folded = nullptr;
  const auto len =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(name.data()),
                   static_cast<utf8proc_ssize_t>(name.size()), &folded,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE |
                                                  UTF8PROC_COMPAT | UTF8PROC_CASEFOLD));
  std::string out;
  if (len < 0) {  // not UTF-8: fall back to ASCII lower-casing
    out = Lower(std::string(name));
  } else {
    std::string f(reinterpret_cast<char*>(folded), static_cast<size_t>(len));
    std::free(folded);
    out.reserve(f.size());
    bool pending_space = false;
    utf8proc_ssize_t i = 0;
    const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(f.data());
    while (i < len) {
      utf8proc_int32_t cp = 0;
      const auto n = utf8proc_iterate(p + i, len - i, &cp);
      if (n <= 0) break;
      if (IsSeparator(cp)) {
        pending_space = !out.empty();
      } else {
        if (pending_space) out += ' ';
        pending_space = false;
        out.append(f, static_cast<size_t>(i), static_cast<size_t>(n));
      }
      i += n;
    }
  }
  return out;
}

Result<ParsedExtraction> ParseExtractionReply(std::string_view reply) {
  auto obj = FindObject(reply);
  if (!obj || (!obj->contains("entities") && !obj->contains("relationships"))) {
    return Status::Parse("the reply holds no JSON object with \"entities\" or \"relationships\"");
  }
  ParsedExtraction out;
  if (auto it = obj->find("entities"); it != obj->end() && it->is_array()) {
    for (const auto& e : *it) {
      if (!e.is_object()) continue;
      EntityMention m;
      m.name = Text(e, {"name", "entity_name", "entity", "title"});
      m.name_key = NormalizeEntityName(m.name);
      if (m.name_key.empty()) continue;
      m.type = Lower(Text(e, {"type", "entity_type", "category"}));
      m.description = Text(e, {"description", "entity_description", "summary"});
      out.entities.push_back(std::move(m));
    }
  }
  if (auto it = obj->find("relationships"); it != obj->end() && it->is_array()) {
    for (const auto& r : *it) {
      if (!r.is_object()) continue;
      RelationshipMention m;
      m.source = Text(r, {"source", "source_entity", "from", "head"});
      m.target = Text(r, {"target", "target_entity", "to", "tail"});
      m.source_key = NormalizeEntityName(m.source);
      m.target_key = NormalizeEntityName(m.target);
      if (m.source_key.empty() || m.target_key.empty() || m.source_key == m.target_key) continue;
      m.description = Text(r, {"description", "relationship_description", "relationship"});
      m.strength = Strength(r);
      out.relationships.push_back(std::move(m));
    }
  }
  return out;
}

Result<ChunkExtraction> ExtractChunk(ChatModel& model, const ExtractorOptions& options,
                                     std::string_view chunk_text) {
  ChunkExtraction out;
  ChatRequest req;
  req.messages.push_back(
      {"user", FillPrompt(options.prompt, {{"entity_types", JoinTypes(options.entity_types)},
                                           {"chunk", std::string(chunk_text)}})});
  req.json_mode = options.json_mode;
  req.max_tokens = options.max_tokens;
  std::string rejected;  // the last reply the validator refused (the call is synchronous)
  req.validator = [&rejected](const std::string& content) {
    Status st = ParseExtractionReply(content).status();
    if (!st.ok()) rejected = content;
    return st;
  };

  auto reply = model.Chat(req);
  ++out.calls;
  if (!reply.ok() && reply.status().code() == ErrorCode::kParse) {
    // Retry once, showing the model its bad reply and asking for JSON only. The bad reply was
    // not cached, so nothing poisons a later run.
    ChatRequest retry = req;
    if (!rejected.empty()) {
      retry.messages.push_back({"assistant", rejected});
      retry.messages.push_back({"user", std::string(kRetryPrompt)});
    }
    reply = model.Chat(retry);
    ++out.calls;
  }
  if (!reply.ok()) {
    if (reply.status().code() != ErrorCode::kParse) return reply.status();
    out.skipped = true;
    out.reason = "extraction reply not valid JSON after one retry: " + reply.status().message();
    return out;
  }
  out.result = std::move(ParseExtractionReply(reply->content)).value();

  // Gleaning: the same conversation, asking for what was missed.
  std::vector<ChatMessage> conversation = req.messages;
  std::string last = reply->content;
  for (int round = 0; round < options.gleanings; ++round) {
    conversation.push_back({"assistant", last});
    conversation.push_back({"user", std::string(kGleanPrompt)});
    ChatRequest glean = req;
    glean.messages = conversation;
    glean.validator = [](const std::string& content) {
      return ParseExtractionReply(content).status();
    };
    auto more = model.Chat(glean);
    ++out.calls;
    if (!more.ok()) {
      if (more.status().code() != ErrorCode::kParse) return more.status();
      break;  // a bad gleaning reply costs the round, not what we already have
    }
    ++out.gleaning_rounds;
    auto parsed = ParseExtractionReply(more->content);
    const bool nothing_new = parsed->entities.empty() && parsed->relationships.empty();
    MergeInto(out.result, std::move(parsed).value());
    if (nothing_new) break;
    last = more->content;
  }
  return out;
}

}  // namespace grag
