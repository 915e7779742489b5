// Map replies in, reduce prompt out. Models are loose with JSON (code fences, prose around it,
// scores as strings, a reply cut off by its token cap), so reading is tolerant: anything that
// holds a description and a score is a point, and only a reply with no point at all is a failure.
#include "global_points.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>

#include "grag/prompts.h"

namespace grag::query {
namespace {

using nlohmann::json;

constexpr std::string_view kDescriptionKeys[] = {"description", "point",   "answer",
                                                 "text",        "content", "summary"};
constexpr std::string_view kScoreKeys[] = {"score", "importance", "helpfulness", "rating",
                                           "relevance"};
// Not "id": a model numbering its points would have those numbers read as report ids.
constexpr std::string_view kIdKeys[] = {
    "reports",   "report_ids",    "report_id",   "report",    "ids",        "sources", "source_ids",
    "community", "community_ids", "communities", "citations", "references", "data"};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

const json* Member(const json& obj, std::string_view key) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (EqualsIgnoreCase(it.key(), key)) return &it.value();
  }
  return nullptr;
}

template <size_t N>
const json* AnyMember(const json& obj, const std::string_view (&keys)[N]) {
  for (std::string_view k : keys) {
    if (const json* v = Member(obj, k)) return v;
  }
  return nullptr;
}

bool IsAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool IsDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// `s` has `word` (any case) at `i`.
bool HasAt(std::string_view s, size_t i, std::string_view word) {
  return i <= s.size() && s.size() - i >= word.size() &&
         EqualsIgnoreCase(s.substr(i, word.size()), word);
}

// `s` has the whole word `word` at `i` (no letter follows).
bool HasWordAt(std::string_view s, size_t i, std::string_view word) {
  return HasAt(s, i, word) && (i + word.size() == s.size() || !IsAlpha(s[i + word.size()]));
}

// Reads the digits at *i (advancing past them); nullopt when there are none or too many.
std::optional<int64_t> ReadNumber(std::string_view s, size_t* i) {
  const size_t start = *i;
  while (*i < s.size() && IsDigit(s[*i])) ++*i;
  if (*i == start || *i - start > 18) return std::nullopt;
  return std::strtoll(std::string(s.substr(start, *i - start)).c_str(), nullptr, 10);
}

// Every run of digits in `s`, as numbers.
void AppendIntegers(std::string_view s, std::vector<int64_t>* out) {
  size_t i = 0;
  while (i < s.size()) {
    if (!IsDigit(s[i])) {
      ++i;
      continue;
    }
    if (std::optional<int64_t> n = ReadNumber(s, &i)) out->push_back(*n);
  }
}

void AppendIds(const json& v, std::vector<int64_t>* out) {
  if (v.is_number_integer() || v.is_number_unsigned()) {
    out->push_back(v.get<int64_t>());
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d >= 0 && d == std::floor(d) && d < 1e18) {
      out->push_back(static_cast<int64_t>(d));
    }
  } else if (v.is_string()) {
    AppendIntegers(v.get_ref<const std::string&>(), out);
  } else if (v.is_array()) {
    for (const json& e : v) AppendIds(e, out);
  }
}

std::optional<int> ReadScore(const json& v) {
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
  return static_cast<int>(std::lround(std::clamp(d, 0.0, 100.0)));
}

std::optional<MapPoint> ReadPoint(const json& v) {
  if (!v.is_object()) return std::nullopt;
  const json* desc = AnyMember(v, kDescriptionKeys);
  const json* score = AnyMember(v, kScoreKeys);
  if (desc == nullptr || !desc->is_string() || score == nullptr) return std::nullopt;
  std::optional<int> s = ReadScore(*score);
  if (!s) return std::nullopt;
  MapPoint p;
  p.description = desc->get<std::string>();
  p.score = *s;
  for (std::string_view k : kIdKeys) {
    if (const json* ids = Member(v, k)) AppendIds(*ids, &p.named_ids);
  }
  std::vector<int64_t> in_text = IdsNamedInText(p.description);
  p.named_ids.insert(p.named_ids.end(), in_text.begin(), in_text.end());
  return p;
}

bool LooksLikePointList(const json& v) {
  if (!v.is_array()) return false;
  return std::any_of(v.begin(), v.end(), [](const json& e) { return ReadPoint(e).has_value(); });
}

// false when the list holds entries but none is a readable point (an empty list is a valid
// "nothing here").
bool ReadPointList(const json& list, std::vector<MapPoint>* out) {
  bool any = false;
  for (const json& e : list) {
    if (auto p = ReadPoint(e)) {
      out->push_back(std::move(*p));
      any = true;
    }
  }
  return any || list.empty();
}

// true when `v` is a reply shape we know (the list may hold no point).
bool ReadReply(const json& v, std::vector<MapPoint>* out) {
  if (v.is_array()) return ReadPointList(v, out);
  if (!v.is_object()) return false;
  if (const json* points = Member(v, "points")) {
    if (points->is_array()) return ReadPointList(*points, out);
    if (auto p = ReadPoint(*points)) {
      out->push_back(std::move(*p));
      return true;
    }
  }
  if (auto p = ReadPoint(v)) {
    out->push_back(std::move(*p));
    return true;
  }
  for (const auto& [key, value] : v.items()) {
    if (LooksLikePointList(value)) return ReadPointList(value, out);
  }
  return false;
}

// The end (one past the closing brace) of the JSON object starting at s[start] == '{', skipping
// braces inside strings; npos when it is not closed (a cut-off reply).
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

// Every complete object that reads as a point, outermost first, left to right.
void SalvagePoints(std::string_view s, std::vector<MapPoint>* out) {
  size_t i = s.find('{');
  while (i != std::string_view::npos) {
    const size_t end = ObjectEnd(s, i);
    if (end != std::string_view::npos) {
      json v = json::parse(s.substr(i, end - i), nullptr, /*allow_exceptions=*/false);
      if (!v.is_discarded()) {
        if (auto p = ReadPoint(v)) {
          out->push_back(std::move(*p));
          i = s.find('{', end);
          continue;
        }
      }
    }
    i = s.find('{', i + 1);
  }
}

std::string Snippet(std::string_view s) {
  constexpr size_t kMax = 160;
  std::string out(s.substr(0, kMax));
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (s.size() > kMax) out += "...";
  return out;
}

std::string_view Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

Result<std::vector<MapPoint>> ParseMapReply(std::string_view reply) {
  try {
    std::vector<MapPoint> points;
    json whole = json::parse(reply, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
    if (!whole.is_discarded() && ReadReply(whole, &points)) return points;
    // Fences or prose around the JSON.
    const size_t first = reply.find_first_of("{[");
    const size_t last = reply.find_last_of("}]");
    if (first != std::string_view::npos && last != std::string_view::npos && last > first) {
      json inner = json::parse(reply.substr(first, last - first + 1), nullptr, false, true);
      if (!inner.is_discarded() && ReadReply(inner, &points)) return points;
    }
    SalvagePoints(reply, &points);
    if (!points.empty()) return points;
  } catch (const std::exception& e) {  // nlohmann type errors: a shape we did not foresee
    return Status::Parse(std::string("map reply: ") + e.what());
  }
  return Status::Parse("map reply holds no point with a description and a score: \"" +
                       Snippet(reply) + "\"");
}

std::vector<int64_t> IdsNamedInText(std::string_view s) {
  std::vector<int64_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    // A word starting "report" or "communit" here, and only the noun: "report(s)",
    // "community", "communities"; not "reported" or "communitarian".
    const bool starts_word = i == 0 || !IsAlpha(s[i - 1]);
    size_t j = i;
    if (starts_word && (HasWordAt(s, i, "report") || HasWordAt(s, i, "reports") ||
                        HasWordAt(s, i, "community") || HasWordAt(s, i, "communities"))) {
      while (j < s.size() && IsAlpha(s[j])) ++j;
    }
    if (j == i) {
      ++i;
      continue;
    }
    // Then "(", ":", "#", "[", "id", "ids" in any mix, then numbers joined by ", ", "; ",
    // " and ", " & ", "/", "+more".
    for (;;) {
      if (j < s.size() && std::string_view(" \t:#([").find(s[j]) != std::string_view::npos) {
        ++j;
      } else if (HasWordAt(s, j, "ids")) {
        j += 3;
      } else if (HasWordAt(s, j, "id")) {
        j += 2;
      } else {
        break;
      }
    }
    while (std::optional<int64_t> id = ReadNumber(s, &j)) {
      ids.push_back(*id);
      size_t m = j;
      for (;;) {
        if (m < s.size() && std::string_view(" ,;&/").find(s[m]) != std::string_view::npos) {
          ++m;
        } else if (HasWordAt(s, m, "and")) {
          m += 3;
        } else if (HasAt(s, m, "+more")) {
          m += 5;
        } else {
          break;
        }
      }
      if (m == s.size() || !IsDigit(s[m])) break;
      j = m;
    }
    i = j;
  }
  return ids;
}

std::string PointBlock(const GlobalPoint& point) {
  std::string ids;
  for (int64_t id : point.community_ids) {
    if (!ids.empty()) ids += ", ";
    ids += std::to_string(id);
  }
  std::string sources;
  for (const std::string& id : point.source_ids) {
    if (!sources.empty()) sources += ", ";
    sources += id;
  }
  std::string out = "<point score=\"" + std::to_string(point.score) + "\" " +
                    (point.source_ids.empty() ? "communities=\"" + ids : "sources=\"" + sources) +
                    "\">\n";
  out.append(Trim(point.description));
  out += "\n</point>";
  return out;
}

ReducePrompt BuildReducePrompt(std::string_view templ, std::string_view question,
                               const std::vector<const GlobalPoint*>& ranked, int64_t budget,
                               const Tokenizer& tokenizer) {
  const auto fill = [&](const std::string& points) {
    return FillPrompt(templ, {{"question", std::string(question)}, {"ranked_points", points}});
  };
  std::vector<std::string> blocks;
  int64_t used = static_cast<int64_t>(tokenizer.Count(fill("\n")));
  for (const GlobalPoint* p : ranked) {
    std::string block = PointBlock(*p);
    const auto tokens = static_cast<int64_t>(tokenizer.Count(block + "\n"));
    if (used + tokens > budget) break;
    used += tokens;
    blocks.push_back(std::move(block));
  }
  // BPE counts are not quite additive across joins: check the real prompt, dropping from the end.
  ReducePrompt out;
  while (!blocks.empty()) {
    std::string points = "\n";
    for (const std::string& b : blocks) points += b + "\n";
    out.prompt = fill(points);
    out.tokens = static_cast<int64_t>(tokenizer.Count(out.prompt));
    if (out.tokens <= budget) break;
    blocks.pop_back();
  }
  out.kept = blocks.size();
  if (blocks.empty()) {
    out.prompt = fill("\n");
    out.tokens = static_cast<int64_t>(tokenizer.Count(out.prompt));
  }
  return out;
}

}  // namespace grag::query
