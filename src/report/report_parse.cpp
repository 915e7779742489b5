// Tolerant parsing of report replies, and the markdown global search reads.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "grag/report.h"

namespace grag {
namespace {

using nlohmann::json;

std::string Trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// nlohmann throws on nothing with this overload (allow_exceptions = false); comments are
// accepted because some local models annotate their JSON.
std::optional<json> ParseJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (j.is_discarded()) return std::nullopt;
  if (j.is_array() && !j.empty() && j.front().is_object()) return j.front();
  if (!j.is_object()) return std::nullopt;
  return j;
}

// The JSON object in a reply: the whole reply, a fenced block, or the span from the first '{'
// to the last '}'.
std::optional<json> FindObject(std::string_view reply) {
  if (auto j = ParseJson(reply)) return j;
  if (auto fence = reply.find("```"); fence != std::string_view::npos) {
    const auto start = reply.find('\n', fence);
    const auto end = start == std::string_view::npos ? start : reply.find("```", start);
    if (end != std::string_view::npos) {
      if (auto j = ParseJson(reply.substr(start + 1, end - start - 1))) return j;
    }
  }
  const auto open = reply.find('{');
  const auto close = reply.rfind('}');
  if (open != std::string_view::npos && close != std::string_view::npos && close > open) {
    if (auto j = ParseJson(reply.substr(open, close - open + 1))) return j;
  }
  return std::nullopt;
}

// A scalar as text: strings trimmed, numbers printed (integers without a fraction).
std::string ScalarText(const json& v) {
  if (v.is_string()) return Trim(v.get<std::string>());
  if (v.is_number_integer()) return v.dump();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e15) {
      return std::to_string(static_cast<int64_t>(d));
    }
    return v.dump();
  }
  return {};
}

// The first of `names` that holds a non-empty scalar.
std::string Field(const json& obj, std::initializer_list<const char*> names) {
  for (const char* n : names) {
    auto it = obj.find(n);
    if (it == obj.end()) continue;
    std::string s = ScalarText(*it);
    if (!s.empty()) return s;
  }
  return {};
}

bool LooksLikeReport(const json& obj) {
  return obj.contains("summary") || obj.contains("findings") || obj.contains("title");
}

// {"report": {...}} or {"community_report": {...}}: the one nested object that looks like one.
const json& Unwrap(const json& obj) {
  if (LooksLikeReport(obj)) return obj;
  for (const auto& [key, value] : obj.items()) {
    if (value.is_object() && LooksLikeReport(value)) return value;
  }
  return obj;
}

// "8", "8.5", "8/10", "Rating: 7" -> the first number, clamped to [0, 10].
std::optional<double> Rating(const json& obj) {
  for (const char* n : {"rating", "rank", "importance", "impact_severity_rating", "score"}) {
    auto it = obj.find(n);
    if (it == obj.end()) continue;
    double v = NAN;
    if (it->is_number()) {
      v = it->get<double>();
    } else if (it->is_string()) {
      const std::string s = it->get<std::string>();
      const auto digit = s.find_first_of("0123456789");
      if (digit == std::string::npos) continue;
      v = std::strtod(s.c_str() + digit, nullptr);
    }
    if (std::isfinite(v)) return std::clamp(v, 0.0, 10.0);
  }
  return std::nullopt;
}

void AddEntity(std::vector<std::string>& out, std::set<std::string>& seen, std::string name) {
  name = Trim(name);
  if (!name.empty() && seen.insert(name).second) out.push_back(std::move(name));
}

// `entities` as an array (of names, ids, or objects with a name or id) or as one string of
// names separated by commas or semicolons.
std::vector<std::string> FindingEntities(const json& finding) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const char* n : {"entities", "entity_names", "entity_ids", "data_entities"}) {
    auto it = finding.find(n);
    if (it == finding.end()) continue;
    if (it->is_string()) {
      const std::string s = it->get<std::string>();
      size_t start = 0;
      while (start <= s.size()) {
        size_t end = s.find_first_of(",;", start);
        if (end == std::string::npos) end = s.size();
        AddEntity(out, seen, s.substr(start, end - start));
        start = end + 1;
      }
    } else if (it->is_array()) {
      for (const auto& e : *it) {
        if (e.is_object()) {
          AddEntity(out, seen, Field(e, {"name", "entity", "title", "id"}));
        } else {
          AddEntity(out, seen, ScalarText(e));
        }
      }
    } else {
      AddEntity(out, seen, ScalarText(*it));
    }
    if (!out.empty()) break;
  }
  return out;
}

// The first sentence of `text` (up to 160 bytes), for a finding that came without a summary.
std::string FirstSentence(const std::string& text) {
  size_t end = text.find_first_of(".!?\n");
  if (end == std::string::npos) end = text.size();
  end = std::min<size_t>(end, 160);
  while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
  return Trim(text.substr(0, end));
}

std::optional<Finding> ParseFinding(const json& f) {
  Finding out;
  if (f.is_string()) {
    out.summary = Trim(f.get<std::string>());
  } else if (f.is_object()) {
    out.summary = Field(f, {"summary", "title", "finding", "insight", "headline"});
    out.explanation = Field(f, {"explanation", "details", "detail", "description", "text"});
    out.entities = FindingEntities(f);
    if (out.summary.empty()) out.summary = FirstSentence(out.explanation);
  }
  if (out.summary.empty() && out.explanation.empty()) return std::nullopt;
  return out;
}

std::vector<Finding> Findings(const json& obj) {
  std::vector<Finding> out;
  for (const char* n : {"findings", "key_findings", "insights"}) {
    auto it = obj.find(n);
    if (it == obj.end()) continue;
    if (it->is_array()) {
      for (const auto& f : *it) {
        if (auto finding = ParseFinding(f)) out.push_back(std::move(*finding));
      }
    } else if (it->is_object()) {  // {"<summary>": "<explanation>" or {...}}
      for (const auto& [key, value] : it->items()) {
        std::optional<Finding> finding =
            value.is_object() ? ParseFinding(value) : std::optional<Finding>(Finding{});
        if (!finding) finding = Finding{};
        if (finding->summary.empty()) finding->summary = Trim(key);
        if (finding->explanation.empty() && value.is_string()) {
          finding->explanation = Trim(value.get<std::string>());
        }
        if (!finding->summary.empty()) out.push_back(std::move(*finding));
      }
    } else if (it->is_string()) {
      if (auto finding = ParseFinding(*it)) out.push_back(std::move(*finding));
    }
    if (!out.empty()) break;
  }
  return out;
}

}  // namespace

Result<ParsedReport> ParseReportReply(std::string_view reply) {
  std::optional<json> found = FindObject(reply);
  if (!found) return Status::Parse("the reply holds no JSON object");
  const json& obj = Unwrap(*found);
  ParsedReport out;
  out.title = Field(obj, {"title", "name", "report_title"});
  out.summary = Field(obj, {"summary", "overview", "description", "executive_summary"});
  out.rating = Rating(obj);
  out.rating_explanation =
      Field(obj, {"rating_explanation", "rank_explanation", "rating_reason", "rating_rationale"});
  out.findings = Findings(obj);
  if (out.summary.empty() && out.findings.empty()) {
    return Status::Parse("the reply's JSON object has neither a \"summary\" nor any \"findings\"");
  }
  return out;
}

std::string RenderReportMarkdown(const ParsedReport& report) {
  return RenderReportMarkdown(report.title, report.summary, report.findings);
}

}  // namespace grag
