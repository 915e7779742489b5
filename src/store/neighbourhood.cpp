// The neighbourhood walk both store backends share: see neighbourhood.h.
#include "neighbourhood.h"

#include <algorithm>
#include <unordered_set>

namespace grag::store {

Result<GraphSnapshot> WalkNeighbourhood(const std::vector<int64_t>& entity_ids,
                                        const std::vector<std::string>& chunk_ids,
                                        const Store::NeighbourhoodLimits& limits,
                                        NeighbourhoodReader& reader) {
  std::unordered_map<int64_t, std::vector<std::pair<int64_t, double>>> edges_of;
  std::unordered_map<std::string, std::vector<int64_t>> chunk_entities;
  std::unordered_map<int64_t, int> entity_depth;
  std::unordered_map<std::string, int> chunk_depth;
  struct Node {
    bool is_entity;
    int64_t entity;
    std::string chunk;
  };
  std::vector<Node> frontier;
  auto add_entity = [&](int64_t id, int depth) {
    if (entity_depth.count(id) || entity_depth.size() >= limits.max_entities) return;
    entity_depth.emplace(id, depth);
    frontier.push_back({true, id, {}});
  };
  auto add_chunk = [&](const std::string& id, int depth) {
    if (chunk_depth.count(id) || chunk_depth.size() >= limits.max_chunks) return;
    chunk_depth.emplace(id, depth);
    frontier.push_back({false, 0, id});
  };
  for (int64_t id : entity_ids) add_entity(id, 0);
  for (const auto& id : chunk_ids) add_chunk(id, 0);
  while (!frontier.empty()) {
    const std::vector<Node> wave = std::move(frontier);
    frontier.clear();
    // The wave's rows: every entity's relationships (the snapshot's edges come from them), the
    // chunks of the entities it expands, every chunk's entities (the snapshot's links).
    std::vector<int64_t> entities, expanding;
    std::vector<std::string> chunks;
    for (const Node& n : wave) {
      if (!n.is_entity) {
        chunks.push_back(n.chunk);
      } else {
        entities.push_back(n.entity);
        if (entity_depth.at(n.entity) < limits.hops) expanding.push_back(n.entity);
      }
    }
    std::unordered_map<int64_t, std::vector<std::string>> chunks_of;
    if (!entities.empty() && limits.relationships) {
      GRAG_RETURN_IF_ERROR(reader.Edges(entities, &edges_of));
    }
    if (!expanding.empty()) {
      GRAG_RETURN_IF_ERROR(reader.ChunksOf(expanding, limits.max_fanout, &chunks_of));
    }
    if (!chunks.empty()) GRAG_RETURN_IF_ERROR(reader.EntitiesOf(chunks, &chunk_entities));
    for (const Node& n : wave) {
      if (n.is_entity) {
        const int depth = entity_depth.at(n.entity);
        if (depth >= limits.hops) continue;
        // The strongest relationships first when there are too many to follow.
        std::vector<std::pair<int64_t, double>> by_weight = edges_of[n.entity];
        std::stable_sort(by_weight.begin(), by_weight.end(),
                         [](const auto& a, const auto& b) { return a.second > b.second; });
        for (size_t k = 0; k < by_weight.size() && k < limits.max_fanout; ++k) {
          add_entity(by_weight[k].first, depth + 1);
        }
        for (const auto& chunk : chunks_of[n.entity]) add_chunk(chunk, depth + 1);
      } else {
        const int depth = chunk_depth.at(n.chunk);
        if (depth >= limits.hops) continue;
        const auto& ents = chunk_entities[n.chunk];
        for (size_t k = 0; k < ents.size() && k < limits.max_fanout; ++k) {
          add_entity(ents[k], depth + 1);
        }
      }
    }
  }

  GraphSnapshot g;
  std::vector<int64_t> ids;
  ids.reserve(entity_depth.size());
  for (const auto& [id, d] : entity_depth) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  GRAG_RETURN_IF_ERROR(reader.Entities(ids, &g.entities));
  std::unordered_set<int64_t> present;
  for (const auto& e : g.entities) present.insert(e.id);
  for (const auto& [id, edges] : edges_of) {
    for (const auto& [other, w] : edges) {
      if (id < other && present.count(other)) g.edges.push_back({id, other, w});
    }
  }
  std::vector<std::string> chunk_keys;
  chunk_keys.reserve(chunk_depth.size());
  for (const auto& [id, d] : chunk_depth) chunk_keys.push_back(id);
  std::sort(chunk_keys.begin(), chunk_keys.end());
  std::vector<std::pair<std::string, std::string>> titles;
  GRAG_RETURN_IF_ERROR(reader.ChunkTitles(chunk_keys, &titles));
  for (auto& [id, title] : titles) {
    const auto index = static_cast<uint32_t>(g.chunk_ids.size());
    auto it = chunk_entities.find(id);
    if (it != chunk_entities.end()) {
      for (int64_t e : it->second) {
        if (present.count(e)) g.links.push_back({e, index});
      }
    }
    g.chunk_ids.push_back(std::move(id));
    g.chunk_titles.push_back(std::move(title));
  }
  return g;
}

}  // namespace grag::store
