// DRIFT replies in. Models are loose with JSON, so reading falls back, field by field, from a
// whole parse to a scan of the text for each key's value (which also reads a reply cut off at
// its token cap).
#include "drift_replies.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <vector>
#include <nlohmann/json.hpp>
#include <optional>

#include <utf8proc.h>

namespace grag::query {
namespace {

using nlohmann::json;

const std::vector<std::string_view> kFollowUpKeys = {"follow_up_queries", "followups", "follow_ups",
                                                     "follow_up_questions", "followup_queries"};
const std::vector<std::string_view> kScoreKeys = {"score", "rating", "relevance"};

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const json* Member(const json& obj, const std::vector<std::string_view>& keys) {
  for (std::string_view k : keys) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (Lower(it.key()) == k) return &it.value();
    }
  }
  return nullptr;
}

std::optional<int> ScoreOf(double d) {
  if (!std::isfinite(d)) return std::nullopt;
  return static_cast<int>(std::lround(std::clamp(d, 0.0, 100.0)));
}

std::optional<int> ReadScore(const json& v) {
  if (v.is_number()) return ScoreOf(v.get<double>());
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (end == s.c_str()) return std::nullopt;
    return ScoreOf(d);
  }
  return std::nullopt;
}

void AddFollowUp(const json& v, std::vector<std::string>* out) {
  if (v.is_string()) {
    out->push_back(v.get<std::string>());
  } else if (v.is_object()) {
    if (const json* q = Member(v, {"query", "question", "text"}); q && q->is_string()) {
      out->push_back(q->get<std::string>());
    }
  }
}

// The text without code fences, from its first '{' (npos: none).
size_t ObjectStart(std::string_view text) { return text.find('{'); }

// A JSON string literal starting at text[i] == '"': its decoded value and the index after it.
// An unterminated literal (cut off) decodes what there is; `closed` says which.
std::string ReadStringLiteral(std::string_view text, size_t i, size_t* end, bool* closed) {
  std::string out;
  *closed = false;
  ++i;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') {
      *closed = true;
      ++i;
      break;
    }
    if (c == '\\' && i + 1 < text.size()) {
      const char e = text[i + 1];
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          break;
        case 'u': {
          if (i + 5 < text.size()) {
            const unsigned cp = static_cast<unsigned>(
                std::strtoul(std::string(text.substr(i + 2, 4)).c_str(), nullptr, 16));
            utf8proc_uint8_t bytes[4];
            const utf8proc_ssize_t n =
                utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), bytes);
            out.append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(n));
            i += 6;
            continue;
          }
          break;
        }
        default:
          out += e;
      }
      i += 2;
      continue;
    }
    out += c;
    ++i;
  }
  *end = i;
  return out;
}

// Where the value of "key" starts (after the colon and spaces), or npos.
size_t ValueOf(std::string_view text, std::string_view key) {
  const std::string lower = Lower(text);
  const std::string needle = "\"" + std::string(key) + "\"";
  size_t at = lower.find(needle);
  while (at != std::string::npos) {
    size_t i = at + needle.size();
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i < text.size() && text[i] == ':') {
      ++i;
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      return i;
    }
    at = lower.find(needle, at + 1);
  }
  return std::string_view::npos;
}

// The reply read by scanning for each key: what a cut-off or slightly broken JSON still holds.
std::optional<DriftReply> Scan(std::string_view text, std::string_view answer_key) {
  DriftReply r;
  r.complete = false;
  const size_t a = ValueOf(text, answer_key);
  if (a == std::string_view::npos || a >= text.size() || text[a] != '"') return std::nullopt;
  size_t end = 0;
  bool closed = false;
  r.answer = ReadStringLiteral(text, a, &end, &closed);
  for (std::string_view k : kScoreKeys) {
    size_t s = ValueOf(text, k);
    if (s == std::string_view::npos) continue;
    if (s < text.size() && text[s] == '"') ++s;
    const std::string rest(text.substr(s, 16));
    char* stop = nullptr;
    const double d = std::strtod(rest.c_str(), &stop);
    if (stop != rest.c_str()) {
      if (auto sc = ScoreOf(d)) r.score = *sc;
    }
    break;
  }
  for (std::string_view k : kFollowUpKeys) {
    size_t f = ValueOf(text, k);
    if (f == std::string_view::npos || f >= text.size() || text[f] != '[') continue;
    ++f;
    while (f < text.size()) {
      while (f < text.size() &&
             (std::isspace(static_cast<unsigned char>(text[f])) || text[f] == ',')) {
        ++f;
      }
      if (f >= text.size() || text[f] != '"') break;
      bool done = false;
      std::string q = ReadStringLiteral(text, f, &f, &done);
      if (!done) break;  // cut off inside this one: drop it
      r.follow_ups.push_back(std::move(q));
    }
    break;
  }
  return r;
}

Result<DriftReply> Parse(std::string_view reply, std::string_view answer_key) {
  const size_t start = ObjectStart(reply);
  if (start != std::string_view::npos) {
    const size_t last = reply.rfind('}');
    if (last != std::string_view::npos && last > start) {
      json j = json::parse(reply.substr(start, last - start + 1), nullptr, false);
      if (j.is_object()) {
        const json* answer = Member(j, {answer_key, "answer", "response", "intermediate_answer"});
        if (answer != nullptr && answer->is_string()) {
          DriftReply r;
          r.answer = answer->get<std::string>();
          if (const json* s = Member(j, kScoreKeys)) r.score = ReadScore(*s).value_or(0);
          if (const json* f = Member(j, kFollowUpKeys)) {
            if (f->is_array()) {
              for (const json& e : *f) AddFollowUp(e, &r.follow_ups);
            } else {
              AddFollowUp(*f, &r.follow_ups);
            }
          }
          return r;
        }
      }
    }
    if (auto scanned = Scan(reply.substr(start), answer_key)) return *std::move(scanned);
  }
  return Status::Parse("no \"" + std::string(answer_key) + "\" in the reply");
}

}  // namespace

Result<DriftReply> ParsePrimerReply(std::string_view reply) {
  return Parse(reply, "intermediate_answer");
}

Result<DriftReply> ParseDriftLocalReply(std::string_view reply) { return Parse(reply, "response"); }

}  // namespace grag::query
