#include "json_fields.h"

#include <nlohmann/json.hpp>

namespace grag::store {

using nlohmann::json;

std::string CountsToJson(const std::map<std::string, int64_t>& counts) {
  json j = json::object();
  for (const auto& [key, n] : counts) j[key] = n;
  // `replace` keeps invalid UTF-8 in a key from throwing; keys come from model output.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::map<std::string, int64_t> CountsFromJson(std::string_view text) {
  std::map<std::string, int64_t> out;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return out;
  for (const auto& [key, value] : j.items()) {
    if (value.is_number_integer()) out[key] = value.get<int64_t>();
  }
  return out;
}

std::string FindingsToJson(const std::vector<Finding>& findings) {
  json j = json::array();
  for (const Finding& f : findings) {
    j.push_back({{"summary", f.summary}, {"explanation", f.explanation}, {"entities", f.entities}});
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<Finding> FindingsFromJson(std::string_view text) {
  std::vector<Finding> out;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return out;
  auto str = [](const json& obj, const char* key) {
    auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  for (const json& item : j) {
    if (!item.is_object()) continue;
    Finding& f = out.emplace_back();
    f.summary = str(item, "summary");
    f.explanation = str(item, "explanation");
    auto ents = item.find("entities");
    if (ents != item.end() && ents->is_array()) {
      for (const json& e : *ents) {
        if (e.is_string()) f.entities.push_back(e.get<std::string>());
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
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return out;
  auto members = j.find("members");
  auto weight = j.find("internal_weight");
  auto params = j.find("params");
  if (members == j.end() || !members->is_array() || weight == j.end() || !weight->is_number() ||
      params == j.end() || !params->is_string()) {
    return out;  // unreadable: as if none was recorded (the report is then rewritten)
  }
  for (const json& m : *members) {
    if (m.is_number_integer()) out.members.push_back(m.get<int64_t>());
  }
  out.internal_weight = weight->get<double>();
  out.params = params->get<std::string>();
  return out;
}

}  // namespace grag::store
