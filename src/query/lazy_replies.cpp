// Budgeted search's replies in. Models are loose with JSON: read what can be read.
#include "lazy_replies.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>

namespace grag::query {
namespace {

using nlohmann::json;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

const json* Member(const json& obj, std::initializer_list<std::string_view> keys) {
  if (!obj.is_object()) return nullptr;
  for (std::string_view k : keys) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (EqualsIgnoreCase(it.key(), k)) return &it.value();
    }
  }
  return nullptr;
}

std::optional<double> Number(const json& v) {
  double d = 0;
  if (v.is_number()) {
    d = v.get<double>();
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    d = std::strtod(s.c_str(), &end);
    if (end == s.c_str()) return std::nullopt;
  } else {
    return std::nullopt;
  }
  if (!std::isfinite(d)) return std::nullopt;
  return d;
}

// "T3", "t 3", "3", 3 -> "T3"; "" when it is no label.
std::string Label(const json& v) {
  std::string s;
  if (v.is_number_integer() || v.is_number_unsigned()) {
    s = std::to_string(v.get<int64_t>());
  } else if (v.is_string()) {
    s = v.get<std::string>();
  } else {
    return "";
  }
  std::string digits;
  bool seen_t = false;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
      digits += c;
    } else if (!digits.empty()) {
      break;
    } else if ((c == 'T' || c == 't') && !seen_t) {
      seen_t = true;
    } else if (c != ' ' && c != '[' && c != '#') {
      return "";
    }
  }
  if (digits.empty() || digits.size() > 9) return "";
  std::string out = "T";
  out += std::to_string(std::strtoll(digits.c_str(), nullptr, 10));
  return out;
}

// The "T<n>" labels written in a text.
void LabelsInText(std::string_view s, std::vector<std::string>* out) {
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    if (s[i] != 'T' || (i > 0 && std::isalnum(static_cast<unsigned char>(s[i - 1])) != 0)) continue;
    size_t j = i + 1;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])) != 0) ++j;
    if (j == i + 1 || j - i > 10) continue;
    if (j < s.size() && std::isalpha(static_cast<unsigned char>(s[j])) != 0) continue;
    out->push_back(std::string(s.substr(i, j - i)));
  }
}

std::vector<std::string> Strings(const json* v) {
  std::vector<std::string> out;
  if (v == nullptr) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const json& e : *v) {
      if (e.is_string()) out.push_back(e.get<std::string>());
    }
  }
  return out;
}

// The JSON of a reply: whole, or between its first { or [ and its last } or ].
std::optional<json> ReplyJson(std::string_view reply) {
  json whole = json::parse(reply, nullptr, false, true);
  if (!whole.is_discarded()) return whole;
  const size_t first = reply.find_first_of("{[");
  const size_t last = reply.find_last_of("}]");
  if (first != std::string_view::npos && last != std::string_view::npos && last > first) {
    json inner = json::parse(reply.substr(first, last - first + 1), nullptr, false, true);
    if (!inner.is_discarded()) return inner;
  }
  return std::nullopt;
}

// The end (one past the closing brace) of the object starting at s[start] == '{'; npos when cut.
size_t ObjectEnd(std::string_view s, size_t start) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = start; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// Every complete innermost-first object of a cut-off reply that `read` accepts.
template <typename Fn>
void Salvage(std::string_view s, Fn read) {
  size_t i = s.find('{');
  while (i != std::string_view::npos) {
    const size_t end = ObjectEnd(s, i);
    if (end != std::string_view::npos) {
      json v = json::parse(s.substr(i, end - i), nullptr, false);
      if (!v.is_discarded() && read(v)) {
        i = s.find('{', end);
        continue;
      }
    }
    i = s.find('{', i + 1);
  }
}

std::string Snippet(std::string_view s) {
  std::string out(s.substr(0, 160));
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s.size() > 160 ? out + "..." : out;
}

bool ReadRating(const json& e, std::map<std::string, int>* out) {
  if (!e.is_object()) return false;
  const json* id = Member(e, {"id", "passage", "label", "passage_id"});
  const json* score = Member(e, {"score", "rating", "relevance"});
  if (id == nullptr || score == nullptr) return false;
  const std::string label = Label(*id);
  const std::optional<double> d = Number(*score);
  if (label.empty() || !d) return false;
  (*out)[label] = static_cast<int>(std::lround(std::clamp(*d, 0.0, 3.0)));
  return true;
}

std::optional<ClaimReply> ReadClaim(const json& e) {
  if (!e.is_object()) return std::nullopt;
  const json* text = Member(e, {"claim", "description", "point", "text", "statement"});
  const json* score = Member(e, {"score", "importance", "helpfulness", "rating"});
  if (text == nullptr || !text->is_string() || score == nullptr) return std::nullopt;
  const std::optional<double> d = Number(*score);
  if (!d) return std::nullopt;
  ClaimReply c;
  c.claim = text->get<std::string>();
  c.score = static_cast<int>(std::lround(std::clamp(*d, 0.0, 100.0)));
  for (const std::string& s : Strings(Member(e, {"sources", "source", "ids", "passages"}))) {
    const std::string label = Label(json(s));
    if (!label.empty()) {
      c.sources.push_back(label);
    } else {
      LabelsInText(s, &c.sources);
    }
  }
  if (const json* src = Member(e, {"sources", "ids", "passages"}); src && src->is_array()) {
    for (const json& x : *src) {
      if (x.is_number()) c.sources.push_back(Label(x));
    }
  }
  LabelsInText(c.claim, &c.sources);
  std::sort(c.sources.begin(), c.sources.end());
  c.sources.erase(std::unique(c.sources.begin(), c.sources.end()), c.sources.end());
  if (const json* q = Member(e, {"quote"}); q && q->is_string()) c.quote = q->get<std::string>();
  return c;
}

}  // namespace

Result<RefineReply> ParseRefineReply(std::string_view reply) {
  try {
    std::optional<json> v = ReplyJson(reply);
    if (v && v->is_object()) {
      RefineReply out;
      out.subqueries = Strings(Member(*v, {"subqueries", "sub_queries", "questions", "queries"}));
      out.terms = Strings(Member(*v, {"terms", "keywords", "search_terms"}));
      const auto clean = [](std::vector<std::string>* list) {
        std::vector<std::string> kept;
        for (std::string& s : *list) {
          const size_t b = s.find_first_not_of(" \t\r\n");
          if (b == std::string::npos) continue;
          s = s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
          if (s.size() <= 500) kept.push_back(std::move(s));
        }
        *list = std::move(kept);
      };
      clean(&out.subqueries);
      clean(&out.terms);
      if (Member(*v, {"subqueries", "sub_queries", "questions", "queries", "terms", "keywords",
                      "search_terms"}) != nullptr) {
        return out;
      }
    }
  } catch (const std::exception& e) {
    return Status::Parse(std::string("refine reply: ") + e.what());
  }
  return Status::Parse("refine reply holds no subqueries or terms: \"" + Snippet(reply) + "\"");
}

Result<std::map<std::string, int>> ParseRelevanceReply(std::string_view reply) {
  try {
    std::map<std::string, int> out;
    if (std::optional<json> v = ReplyJson(reply)) {
      const json* list = v->is_array() ? &*v : Member(*v, {"ratings", "scores", "passages"});
      if (list != nullptr && list->is_array()) {
        bool any = list->empty();
        for (const json& e : *list) any = ReadRating(e, &out) || any;
        if (any) return out;
      } else if (list != nullptr && list->is_object()) {
        v = *list;
      }
      if (v->is_object()) {  // {"T3": 2, "T4": 0}
        for (auto it = v->begin(); it != v->end(); ++it) {
          const std::string label = Label(json(it.key()));
          const std::optional<double> d = Number(it.value());
          if (!label.empty() && d)
            out[label] = static_cast<int>(std::lround(std::clamp(*d, 0.0, 3.0)));
        }
        if (!out.empty()) return out;
      }
    }
    Salvage(reply, [&](const json& e) { return ReadRating(e, &out); });
    if (!out.empty()) return out;
  } catch (const std::exception& e) {
    return Status::Parse(std::string("relevance reply: ") + e.what());
  }
  return Status::Parse("relevance reply holds no rating: \"" + Snippet(reply) + "\"");
}

Result<std::vector<ClaimReply>> ParseClaimsReply(std::string_view reply) {
  try {
    std::vector<ClaimReply> out;
    if (std::optional<json> v = ReplyJson(reply)) {
      const json* list = v->is_array() ? &*v : Member(*v, {"claims", "points"});
      if (list != nullptr && list->is_array()) {
        for (const json& e : *list) {
          if (auto c = ReadClaim(e)) out.push_back(std::move(*c));
        }
        if (!out.empty() || list->empty()) return out;
      }
      if (auto c = ReadClaim(*v)) return std::vector<ClaimReply>{std::move(*c)};
    }
    Salvage(reply, [&](const json& e) {
      auto c = ReadClaim(e);
      if (c) out.push_back(std::move(*c));
      return c.has_value();
    });
    if (!out.empty()) return out;
  } catch (const std::exception& e) {
    return Status::Parse(std::string("claims reply: ") + e.what());
  }
  return Status::Parse("claims reply holds no claim with a score: \"" + Snippet(reply) + "\"");
}

}  // namespace grag::query
