// One extraction's mentions in one value: see mention_record.h.
#include "mention_record.h"

#include <nlohmann/json.hpp>

#include "compressed_text.h"

namespace grag::store {
namespace {

using nlohmann::json;

Status Damaged(std::string_view what) {
  return Status::Corruption("an extraction's stored mentions are damaged (" + std::string(what) +
                            ")");
}

// The text of element `i` of a mention's array, or false.
bool TextAt(const json& row, size_t i, std::string& out) {
  if (i >= row.size() || !row[i].is_string()) return false;
  out = row[i].get_ref<const std::string&>();
  return true;
}

}  // namespace

void BindMentions(sqlite::Stmt& stmt, int index, const std::vector<EntityMention>& entities,
                  const std::vector<RelationshipMention>& relationships) {
  json e = json::array();
  for (const EntityMention& m : entities) {
    e.push_back(json::array({m.name, m.name_key, m.type, m.description}));
  }
  json r = json::array();
  for (const RelationshipMention& m : relationships) {
    r.push_back(
        json::array({m.source, m.target, m.source_key, m.target_key, m.description, m.strength}));
  }
  // Text the extractor gave is valid UTF-8 by the time it is stored; replace keeps a stray byte
  // from failing the write.
  sqlite::BindCompressible(stmt, index,
                           json{{"e", std::move(e)}, {"r", std::move(r)}}.dump(
                               -1, ' ', false, json::error_handler_t::replace));
}

Status ReadMentions(const sqlite::Stmt& stmt, int col, std::vector<EntityMention>* entities,
                    std::vector<RelationshipMention>* relationships) {
  Result<std::string> text = sqlite::CompressibleText(stmt, col);
  if (!text.ok()) return Damaged(text.status().message());
  const json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Damaged("not a JSON object");
  if (entities != nullptr) {
    auto it = doc.find("e");
    if (it == doc.end() || !it->is_array()) return Damaged("no entity list");
    for (const json& row : *it) {
      EntityMention& m = entities->emplace_back();
      if (!row.is_array() || !TextAt(row, 0, m.name) || !TextAt(row, 1, m.name_key) ||
          !TextAt(row, 2, m.type) || !TextAt(row, 3, m.description)) {
        return Damaged("an entity is not [name, key, type, description]");
      }
    }
  }
  if (relationships != nullptr) {
    auto it = doc.find("r");
    if (it == doc.end() || !it->is_array()) return Damaged("no relationship list");
    for (const json& row : *it) {
      RelationshipMention& m = relationships->emplace_back();
      if (!row.is_array() || row.size() != 6 || !row[5].is_number() || !TextAt(row, 0, m.source) ||
          !TextAt(row, 1, m.target) || !TextAt(row, 2, m.source_key) ||
          !TextAt(row, 3, m.target_key) || !TextAt(row, 4, m.description)) {
        return Damaged("a relationship is not [source, target, keys, description, strength]");
      }
      m.strength = row[5].get<double>();
    }
  }
  return Status::Ok();
}

}  // namespace grag::store
