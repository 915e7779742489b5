#include "grag/extract.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "grag/json_view.h"
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

// Without the leading and trailing whitespace (the string's own buffer, trimmed).
std::string Trim(std::string s) {
  const auto e = s.find_last_not_of(" \t\r\n");
  if (e == std::string::npos) return {};
  s.erase(e + 1);
  s.erase(0, s.find_first_not_of(" \t\r\n"));
  return s;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The members of an extraction's entries that ParseExtractionReply reads, each under any of
// several names (what models write instead), in the order they are tried.
// clang-format off
constexpr std::array<std::string_view, 10> kEntityFields = {
    "name",        "entity_name",   "entity",   "title",               // the name
    "type",        "entity_type",   "category",                        // the type
    "description", "entity_description", "summary"};                   // the description
constexpr std::array<std::string_view, 14> kRelationshipFields = {
    "source",      "source_entity", "from",     "head",                // the source
    "target",      "target_entity", "to",       "tail",                // the target
    "description", "relationship_description", "relationship",         // the description
    "strength",    "weight",        "relationship_strength"};          // the strength
// clang-format on

// An entry's members under the names in `names` (the last of repeated keys, as nlohmann keeps).
template <size_t N>
std::array<std::optional<JsonView>, N> Fields(const JsonView& entry,
                                              const std::array<std::string_view, N>& names) {
  std::array<std::optional<JsonView>, N> out;
  JsonView::Cursor cursor(entry);
  std::string_view key;
  JsonView value;
  while (cursor.NextMember(&key, &value)) {
    for (size_t k = 0; k < N; ++k) {
      if (key == names[k]) {
        out[k] = value;
        break;
      }
    }
  }
  return out;
}

// A field as text, from the first of `values` that is a string or a number: strings trimmed,
// numbers as nlohmann prints them.
std::string Text(std::initializer_list<const std::optional<JsonView>*> values) {
  for (const std::optional<JsonView>* v : values) {
    if (!*v) continue;
    if ((*v)->is_string()) return Trim((*v)->String());
    if ((*v)->is_number()) return json::parse((*v)->raw()).dump();
  }
  return {};
}

// The first of `values` that is a number or a string, clamped to [1, 10]; 1 when none is.
double Strength(std::initializer_list<const std::optional<JsonView>*> values) {
  for (const std::optional<JsonView>* it : values) {
    if (!*it) continue;
    double v = 1;
    if ((*it)->is_number()) {
      v = (*it)->GetNumber().AsDouble();
    } else if ((*it)->is_string()) {
      v = std::strtod((*it)->String().c_str(), nullptr);
    } else {
      continue;
    }
    if (!std::isfinite(v) || v <= 0) return 1;
    return std::clamp(v, 1.0, 10.0);
  }
  return 1;
}

// Finds the JSON object in a reply: the whole reply, a ```json fenced block, or the span from
// the first '{' to the last '}'. The view reads through `index`.
std::optional<JsonView> FindObject(std::string_view reply, JsonIndex* index) {
  auto try_parse = [index](std::string_view text) -> std::optional<JsonView> {
    std::optional<JsonView> j = ParseJsonView(text, index);
    if (!j || !j->is_object()) return std::nullopt;
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

// What the extraction prompt asks for, as a JSON Schema for servers that constrain replies to one.
constexpr std::string_view kExtractionSchema = R"({"type":"object","properties":{
"entities":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},
"type":{"type":"string"},"description":{"type":"string"}},"required":["name","type","description"]}},
"relationships":{"type":"array","items":{"type":"object","properties":{"source":{"type":"string"},
"target":{"type":"string"},"description":{"type":"string"},"strength":{"type":"integer"}},
"required":["source","target","description","strength"]}}},"required":["entities","relationships"]})";

std::string JoinTypes(const std::vector<std::string>& types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i];
  return s;
}

}  // namespace

std::string_view ExtractionSchema() { return kExtractionSchema; }

Result<ParsedExtraction> ParseExtractionReply(std::string_view reply) {
  std::optional<JsonView> entities;
  std::optional<JsonView> relationships;
  JsonIndex index;
  if (std::optional<JsonView> obj = FindObject(reply, &index)) {
    JsonView::Cursor cursor(*obj);
    std::string_view key;
    JsonView value;
    while (cursor.NextMember(&key, &value)) {
      if (key == "entities") entities = value;
      if (key == "relationships") relationships = value;
    }
  }
  if (!entities && !relationships) {
    return Status::Parse("the reply holds no JSON object with \"entities\" or \"relationships\"");
  }
  ParsedExtraction out;
  if (entities && entities->is_array()) {
    JsonView::Cursor items(*entities);
    JsonView e;
    while (items.NextElement(&e)) {
      if (!e.is_object()) continue;
      const auto f = Fields(e, kEntityFields);
      EntityMention m;
      m.name = Text({&f[0], &f[1], &f[2], &f[3]});
      m.name_key = NormalizeEntityName(m.name);
      if (m.name_key.empty()) continue;
      m.type = Lower(Text({&f[4], &f[5], &f[6]}));
      m.description = Text({&f[7], &f[8], &f[9]});
      out.entities.push_back(std::move(m));
    }
  }
  if (relationships && relationships->is_array()) {
    JsonView::Cursor items(*relationships);
    JsonView r;
    while (items.NextElement(&r)) {
      if (!r.is_object()) continue;
      const auto f = Fields(r, kRelationshipFields);
      RelationshipMention m;
      m.source = Text({&f[0], &f[1], &f[2], &f[3]});
      m.target = Text({&f[4], &f[5], &f[6], &f[7]});
      m.source_key = NormalizeEntityName(m.source);
      m.target_key = NormalizeEntityName(m.target);
      if (m.source_key.empty() || m.target_key.empty() || m.source_key == m.target_key) continue;
      m.description = Text({&f[8], &f[9], &f[10]});
      m.strength = Strength({&f[11], &f[12], &f[13]});
      out.relationships.push_back(std::move(m));
    }
  }
  return out;
}

namespace {

// The extraction prompt for `chunk_text`, as the first turn of extraction and of gleaning.
ChatRequest ExtractionRequest(const ExtractorOptions& options, std::string_view chunk_text) {
  ChatRequest req;
  req.messages.push_back(
      {"user", FillPrompt(options.prompt, {{"entity_types", JoinTypes(options.entity_types)},
                                           {"chunk", std::string(chunk_text)}})});
  req.role = ChatRole::kExtract;
  req.json_mode = options.json_mode;
  req.json_schema = std::string(kExtractionSchema);
  req.max_tokens = options.max_tokens;
  return req;
}

}  // namespace

Result<ChunkExtraction> ExtractChunk(ChatModel& model, const ExtractorOptions& options,
                                     std::string_view chunk_text) {
  ChunkExtraction out;
  ChatRequest req = ExtractionRequest(options, chunk_text);
  std::string rejected;  // the last reply the validator refused (the call is synchronous)
  // The last reply the validator accepted, parsed: a reply is parsed once, not again after the
  // call (a cached reply is not validated, and is parsed after it).
  std::string accepted;
  std::optional<ParsedExtraction> accepted_parse;
  req.validator = [&](const std::string& content) {
    Result<ParsedExtraction> parsed = ParseExtractionReply(content);
    if (!parsed.ok()) {
      rejected = content;
      return parsed.status();
    }
    accepted = content;
    accepted_parse = std::move(parsed).value();
    return Status::Ok();
  };
  // The reply's extraction: the validator's when it accepted this very reply.
  auto parse = [&](const std::string& content) -> Result<ParsedExtraction> {
    if (accepted_parse && accepted == content) {
      ParsedExtraction parsed = std::move(*accepted_parse);
      accepted_parse.reset();
      return parsed;
    }
    return ParseExtractionReply(content);
  };

  auto reply = model.Chat(req);
  ++out.calls;
  if (reply.ok()) {
    out.first_reply = reply->content;
  } else {
    out.first_reply = rejected.empty() ? reply.status().message() : rejected;
  }
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
  GRAG_ASSIGN_OR_RETURN(out.result, parse(reply->content));
  out.first_calls = out.calls;
  if (options.gleanings > 0) GRAG_RETURN_IF_ERROR(GleanChunk(model, options, chunk_text, out));
  return out;
}

std::string CompactExtraction(const ParsedExtraction& found) {
  json entities = json::array();
  for (const auto& e : found.entities) entities.push_back({{"name", e.name}, {"type", e.type}});
  json relationships = json::array();
  for (const auto& r : found.relationships) {
    relationships.push_back({{"source", r.source}, {"target", r.target}});
  }
  return json{{"entities", std::move(entities)}, {"relationships", std::move(relationships)}}
      .dump();
}

double ExtractionYield(const ParsedExtraction& found, int64_t chunk_tokens) {
  return static_cast<double>(found.entities.size() + found.relationships.size()) /
         static_cast<double>(std::max<int64_t>(1, chunk_tokens));
}

Status GleanChunk(ChatModel& model, const ExtractorOptions& options, std::string_view chunk_text,
                  ChunkExtraction& so_far) {
  if (so_far.skipped) return Status::Ok();
  ChatRequest req = ExtractionRequest(options, chunk_text);
  req.validator = [](const std::string& content) {
    Result<ParsedExtraction> parsed = ParseExtractionReply(content);
    return parsed.ok() ? Status::Ok() : parsed.status();
  };
  // The same conversation, asking for what was missed. What was found stands in the model's
  // turn by name and type only: the model needs to know what not to repeat, not the
  // descriptions it wrote (re-sending the whole first reply made a gleaning call cost five times
  // the extraction's prompt on short passages).
  std::vector<ChatMessage> conversation = req.messages;
  ParsedExtraction last = so_far.result;
  for (int round = 0; round < options.gleanings; ++round) {
    conversation.push_back({"assistant", CompactExtraction(last)});
    conversation.push_back({"user", std::string(kGleanPrompt)});
    ChatRequest glean = req;
    glean.messages = conversation;
    auto more = model.Chat(glean);
    ++so_far.calls;
    if (!more.ok()) {
      if (more.status().code() != ErrorCode::kParse) return more.status();
      break;  // a bad gleaning reply costs the round, not what we already have
    }
    ++so_far.gleaning_rounds;
    auto parsed = ParseExtractionReply(more->content);
    if (!parsed.ok()) break;  // cannot happen: it passed the validator, before or when cached
    const bool nothing_new = parsed->entities.empty() && parsed->relationships.empty();
    last = *parsed;
    MergeInto(so_far.result, std::move(parsed).value());
    if (nothing_new) break;
  }
  return Status::Ok();
}

}  // namespace grag
