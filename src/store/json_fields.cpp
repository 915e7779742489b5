#include "json_fields.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "grag/json_view.h"
#include "grag/json_write.h"

namespace grag::store {

using nlohmann::json;

// The writers below write by hand what nlohmann's dump wrote (compact, members in key order,
// invalid UTF-8 replaced), byte for byte: the stored text must not change, and the index writes
// every report's findings and every entity's counts. tests/store_json_fields_test.cpp compares.

std::string CountsToJson(const std::map<std::string, int64_t>& counts) {
  // Keys come from model output: AppendJsonString replaces invalid UTF-8 in them, as nlohmann's
  // `replace` handler did. std::map's order is nlohmann's object order.
  std::string out = "{";
  for (const auto& [key, n] : counts) {
    if (out.size() > 1) out += ',';
    AppendJsonString(out, key);
    out += ':';
    out += std::to_string(n);
  }
  out += '}';
  return out;
}

// The readers below read the stored text in place (JsonView) rather than through nlohmann's tree:
// they run for every entity and report the index reads back. JsonView accepts exactly what
// json::parse accepts and gives the same values; tests/store_json_fields_test.cpp compares the two.

namespace {

// nlohmann's is_number_integer() and get<int64_t>(): an unsigned value above INT64_MAX wraps.
std::optional<int64_t> Integer(const JsonView& v) {
  if (!v.is_number()) return std::nullopt;
  const JsonView::Number n = v.GetNumber();
  switch (n.type) {
    case JsonView::Number::Type::kUnsigned:
      return static_cast<int64_t>(n.u);
    case JsonView::Number::Type::kInteger:
      return n.i;
    case JsonView::Number::Type::kFloat:
      break;
  }
  return std::nullopt;
}

}  // namespace

std::map<std::string, int64_t> CountsFromJson(std::string_view text) {
  std::map<std::string, int64_t> out;
  const std::optional<JsonView> j = ParseJsonView(text);
  if (!j || !j->is_object()) return out;
  JsonView::Cursor cursor(*j);
  std::string_view key;
  JsonView value;
  while (cursor.NextMember(&key, &value)) {
    // Of repeated keys the last counts, as in nlohmann's object: a later non-integer drops it.
    if (const std::optional<int64_t> n = Integer(value)) {
      out.insert_or_assign(std::string(key), *n);
    } else {
      out.erase(std::string(key));
    }
  }
  return out;
}

std::string FindingsToJson(const std::vector<Finding>& findings) {
  std::string out = "[";
  for (const Finding& f : findings) {
    if (out.size() > 1) out += ',';
    out += "{\"entities\":[";  // nlohmann's objects keep their keys sorted
    for (size_t i = 0; i < f.entities.size(); ++i) {
      if (i > 0) out += ',';
      AppendJsonString(out, f.entities[i]);
    }
    out += "],\"explanation\":";
    AppendJsonString(out, f.explanation);
    out += ",\"summary\":";
    AppendJsonString(out, f.summary);
    out += '}';
  }
  out += ']';
  return out;
}

std::vector<Finding> FindingsFromJson(std::string_view text) {
  std::vector<Finding> out;
  JsonIndex index;
  const std::optional<JsonView> j = ParseJsonView(text, &index);
  if (!j || !j->is_array()) return out;
  JsonView::Cursor items(*j);
  JsonView item;
  while (items.NextElement(&item)) {
    if (!item.is_object()) continue;
    Finding& f = out.emplace_back();
    // One pass over the members; a repeated key overwrites, so the last one counts.
    JsonView::Cursor members(item);
    std::string_view key;
    JsonView value;
    while (members.NextMember(&key, &value)) {
      if (key == "summary") {
        f.summary = value.is_string() ? value.String() : std::string();
      } else if (key == "explanation") {
        f.explanation = value.is_string() ? value.String() : std::string();
      } else if (key == "entities") {
        f.entities.clear();
        if (!value.is_array()) continue;
        JsonView::Cursor ents(value);
        JsonView e;
        while (ents.NextElement(&e)) {
          if (e.is_string()) f.entities.push_back(e.String());
        }
      }
    }
  }
  return out;
}

std::string ReportBasisToJson(const ReportBasis& basis) {
  if (basis.params.empty()) return "";
  return json{{"members", basis.members},
              {"internal_weight", basis.internal_weight},
              {"params", basis.params}}
      .dump();
}

ReportBasis ReportBasisFromJson(std::string_view text) {
  ReportBasis out;
  if (text.empty()) return out;
  const std::optional<JsonView> j = ParseJsonView(text);
  if (!j || !j->is_object()) return out;
  const std::optional<JsonView> members = j->Find("members");
  const std::optional<JsonView> weight = j->Find("internal_weight");
  const std::optional<JsonView> params = j->Find("params");
  if (!members || !members->is_array() || !weight || !weight->is_number() || !params ||
      !params->is_string()) {
    return out;  // unreadable: as if none was recorded (the report is then rewritten)
  }
  JsonView::Cursor cursor(*members);
  JsonView m;
  while (cursor.NextElement(&m)) {
    if (const std::optional<int64_t> n = Integer(m)) out.members.push_back(*n);
  }
  out.internal_weight = weight->GetNumber().AsDouble();
  out.params = params->String();
  return out;
}

}  // namespace grag::store

namespace grag {

std::string RenderReportMarkdown(std::string_view title, std::string_view summary,
                                 const std::vector<Finding>& findings) {
  std::string md;
  md.reserve(title.size() + summary.size() + 8 + findings.size() * 300);
  md.append("# ").append(title).append("\n\n").append(summary);
  for (const Finding& f : findings) {
    md.append("\n\n## ").append(f.summary);
    if (!f.explanation.empty()) md.append("\n\n").append(f.explanation);
  }
  return md;
}

}  // namespace grag
