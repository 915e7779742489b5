// The graph retrieval walks (retrieval_graph.h): built from the store's snapshot, and its
// transition graphs.
#include "retrieval_graph.h"

#include <unordered_set>

#include "grag/nlp_extract.h"
#include "grag/words.h"

namespace grag {

std::unique_ptr<GraphData> GraphData::Build(GraphSnapshot g, int64_t total_chunks) {
  auto d = std::make_unique<GraphData>();
  d->total_chunks = total_chunks;
  d->entity_ids.reserve(g.entities.size());
  for (auto& e : g.entities) {
    const auto node = static_cast<uint32_t>(d->entity_ids.size());
    d->node_of_entity.emplace(e.id, node);
    d->node_of_key.emplace(e.name_key, node);
    d->entity_ids.push_back(e.id);
    d->entity_keys.push_back(std::move(e.name_key));
    d->entity_frequency.push_back(e.frequency);
  }
  for (const auto& [alias, id] : g.aliases) {
    if (auto it = d->node_of_entity.find(id); it != d->node_of_entity.end()) {
      d->node_of_key.emplace(alias, it->second);  // a resolved name finds its entity
    }
  }
  d->chunk_ids = std::move(g.chunk_ids);
  for (size_t c = 0; c < d->chunk_ids.size(); ++c) {
    d->chunk_of_id.emplace(d->chunk_ids[c], static_cast<uint32_t>(c));
  }
  const uint32_t e_count = d->entity_count();
  d->related.resize(e_count);
  d->entity_chunks.resize(e_count);
  d->chunk_entities.resize(d->chunk_ids.size());
  for (const auto& edge : g.edges) {
    auto a = d->node_of_entity.find(edge.source_id);
    auto b = d->node_of_entity.find(edge.target_id);
    if (a == d->node_of_entity.end() || b == d->node_of_entity.end()) continue;
    const double w = std::max(edge.weight, 1e-9);
    d->related[a->second].emplace_back(b->second, w);
    d->related[b->second].emplace_back(a->second, w);
  }
  d->title_entity.assign(d->chunk_ids.size(), kNone);
  for (size_t c = 0; c < g.chunk_titles.size() && c < d->chunk_ids.size(); ++c) {
    const std::string name = TitleEntityName(g.chunk_titles[c]);
    if (name.empty()) continue;
    auto it = d->node_of_key.find(NormalizeEntityName(name));
    if (it != d->node_of_key.end()) d->title_entity[c] = it->second;
  }
  for (const auto& link : g.links) {
    auto e = d->node_of_entity.find(link.entity_id);
    if (e == d->node_of_entity.end() || link.chunk >= d->chunk_ids.size()) continue;
    d->entity_chunks[e->second].push_back(link.chunk);
    d->chunk_entities[link.chunk].push_back(e->second);
  }
  return d;
}

std::shared_ptr<const query::TransitionGraph> GraphData::Graph(double entity_to_chunk,
                                                               double titled_share,
                                                               bool specific) const {
  std::lock_guard lock(graphs_mu);
  const auto key = std::make_tuple(entity_to_chunk, titled_share, specific);
  if (auto it = graphs.find(key); it != graphs.end()) return it->second;
  auto g = std::make_shared<query::TransitionGraph>();
  const uint32_t e_count = entity_count();
  const auto nodes = static_cast<size_t>(e_count) + chunk_ids.size();
  g->offsets.reserve(nodes + 1);
  g->offsets.push_back(0);
  for (uint32_t u = 0; u < e_count; ++u) {
    double total = 0;
    for (const auto& [v, w] : related[u]) total += w;
    const bool has_rel = total > 0;
    const bool has_chunks = !entity_chunks[u].empty();
    const double to_chunks = !has_chunks ? 0.0 : !has_rel ? 1.0 : entity_to_chunk;
    if (has_rel && to_chunks < 1.0) {
      for (const auto& [v, w] : related[u]) {
        g->targets.push_back(v);
        g->probabilities.push_back(static_cast<float>((1.0 - to_chunks) * w / total));
      }
    }
    if (to_chunks > 0) {
      // The chunks of documents the entity titles get their share, the others the rest.
      const auto& chunks = entity_chunks[u];
      double titled = 0;
      for (uint32_t c : chunks) titled += title_entity[c] == u ? 1 : 0;
      const double others = static_cast<double>(chunks.size()) - titled;
      const double titled_mass = titled == 0   ? 0.0
                                 : others == 0 ? to_chunks
                                               : to_chunks * titled_share;
      for (uint32_t c : chunks) {
        const double p =
            title_entity[c] == u ? titled_mass / titled : (to_chunks - titled_mass) / others;
        g->targets.push_back(e_count + c);
        g->probabilities.push_back(static_cast<float>(p));
      }
    }
    g->offsets.push_back(static_cast<uint32_t>(g->targets.size()));
  }
  const double n = static_cast<double>(total_chunks);
  std::vector<double> w;
  for (size_t c = 0; c < chunk_ids.size(); ++c) {
    const auto& ents = chunk_entities[c];
    w.assign(ents.size(), 1.0);
    if (specific) {
      for (size_t k = 0; k < ents.size(); ++k) {
        const double freq = static_cast<double>(entity_frequency[ents[k]]);
        w[k] = std::max(1e-3, std::log((n + 1) / (freq + 0.5)));
      }
    }
    double total = 0;
    for (double x : w) total += x;
    for (size_t k = 0; k < ents.size(); ++k) {
      g->targets.push_back(ents[k]);
      g->probabilities.push_back(static_cast<float>(w[k] / total));
    }
    g->offsets.push_back(static_cast<uint32_t>(g->targets.size()));
  }
  graphs.emplace(key, g);
  return g;
}

std::vector<std::pair<size_t, uint32_t>> GraphData::ChainLinks(
    const std::vector<std::string>& ranked, double min_specificity, size_t links) const {
  std::vector<std::pair<size_t, uint32_t>> out;
  if (ranked.empty() || links == 0) return out;
  auto first = chunk_of_id.find(ranked[0]);
  if (first == chunk_of_id.end()) return out;
  const uint32_t own = title_entity[first->second];
  std::unordered_set<uint32_t> named;  // what the first chunk points to
  for (uint32_t e : chunk_entities[first->second]) {
    if (e != own &&
        SpecificEnoughName(EntitySpecificity(e), entity_frequency[e], min_specificity)) {
      named.insert(e);
    }
  }
  std::unordered_set<uint32_t> followed;
  for (size_t r = 1; r < ranked.size() && out.size() < links; ++r) {
    const uint32_t title = TitleOf(ranked[r]);
    if (title == kNone || !named.count(title) || !followed.insert(title).second) continue;
    out.emplace_back(r, title);
  }
  return out;
}

}  // namespace grag
