// The graph as retrieval walks it, internal to the query module (grag/retrieval.h's Retriever
// keeps one for the whole index, or reads one per question).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grag/store_types.h"
#include "ppr.h"

namespace grag {

// The one rule for whether a name is specific enough to point somewhere (seed a walk, lead
// the evidence chain): its specificity reaches `min_specificity`, or it is in too few chunks
// (under 5) to judge: in a small index every name is in a large share of the chunks.
inline bool SpecificEnoughName(double specificity, int64_t chunks, double min_specificity) {
  return specificity >= min_specificity || chunks < 5;
}

// The graph as retrieval walks it: the whole index's (kept by a Retriever) or the
// neighbourhood of one question's seeds (read for that question). Node ids: entities [0, E),
// then chunks [E, E + C).
struct GraphData {
  std::vector<int64_t> entity_ids;
  std::vector<std::string> entity_keys;
  std::vector<int64_t> entity_frequency;  // chunks the entity is linked to, index-wide
  std::unordered_map<std::string, uint32_t> node_of_key;
  std::unordered_map<int64_t, uint32_t> node_of_entity;
  std::vector<std::string> chunk_ids;
  std::unordered_map<std::string, uint32_t> chunk_of_id;  // chunk id -> index in chunk_ids
  // Raw adjacency: entity -> (entity, weight); entity -> chunk indexes; chunk -> entity nodes.
  std::vector<std::vector<std::pair<uint32_t, double>>> related;
  std::vector<std::vector<uint32_t>> entity_chunks;
  std::vector<std::vector<uint32_t>> chunk_entities;
  std::vector<uint32_t> title_entity;  // by chunk: the entity its document's title names, or none
  static constexpr uint32_t kNone = UINT32_MAX;
  int64_t total_chunks = 0;  // in the index (not only here)

  // Transition graphs by the options that shape them, built on first use.
  mutable std::mutex graphs_mu;
  mutable std::map<std::tuple<double, double, bool>, std::shared_ptr<const query::TransitionGraph>>
      graphs;

  static std::unique_ptr<GraphData> Build(GraphSnapshot g, int64_t total_chunks);

  uint32_t entity_count() const { return static_cast<uint32_t>(entity_ids.size()); }
  std::shared_ptr<const query::TransitionGraph> Graph(double entity_to_chunk, double titled_share,
                                                      bool specific) const;
  // The evidence chain (RetrievalTuning::chain_links): of `ranked` (chunk ids, best first), the
  // positions after the first whose document is titled by an entity the first chunk names, as
  // (position, that entity's node), in order, at most `links`: one per entity, each specific
  // enough to seed a walk (`min_specificity`, or in fewer than 5 chunks) and not the first
  // chunk's own title.
  std::vector<std::pair<size_t, uint32_t>> ChainLinks(const std::vector<std::string>& ranked,
                                                      double min_specificity, size_t links) const;
  // The entity node the document of the chunk `chunk_id` is titled by; kNone: none, or the
  // chunk is not here.
  uint32_t TitleOf(const std::string& chunk_id) const {
    auto c = chunk_of_id.find(chunk_id);
    return c == chunk_of_id.end() ? kNone : title_entity[c->second];
  }
  // How specific an entity is by the chunks it occurs in (0-1).
  double EntitySpecificity(uint32_t node) const {
    const double n = static_cast<double>(total_chunks);
    const double f = static_cast<double>(entity_frequency[node]);
    if (n < 1) return 1;
    return std::clamp(std::log((n + 1) / (f + 0.5)) / std::log(n + 1), 0.0, 1.0);
  }
};

}  // namespace grag
