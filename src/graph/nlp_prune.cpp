// PruneNlpGraph (grag/nlp_prune.h).
#include "grag/nlp_prune.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace grag {
namespace {

// ------------------------------------------------------------------------------ pruning

// numpy.percentile's default (linear interpolation between closest ranks).
double Percentile(std::vector<double> values, double pct) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = pct / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (rank - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

void ApplyPmi(MergedGraph& graph, const std::unordered_map<std::string_view, size_t>& index) {
  double total_freq = 0;
  for (const auto& e : graph.entities) total_freq += static_cast<double>(e.chunk_ids.size());
  double total_weight = 0;
  for (const auto& r : graph.relationships) total_weight += r.weight;
  if (total_freq <= 0 || total_weight <= 0) return;
  auto prob = [&](const std::string& key) {
    auto it = index.find(key);
    return it == index.end()
               ? 0.0
               : static_cast<double>(graph.entities[it->second].chunk_ids.size()) / total_freq;
  };
  for (auto& r : graph.relationships) {
    const double px = prob(r.source_key);
    const double py = prob(r.target_key);
    const double pxy = r.weight / total_weight;
    r.weight = px > 0 && py > 0 && pxy > 0 ? r.weight * std::log2(pxy / (px * py)) : 0;
  }
  std::erase_if(graph.relationships, [](const MergedRelationship& r) {
    return !(r.weight > 0) || !std::isfinite(r.weight);
  });
}

}  // namespace

NlpPruneStats PruneNlpGraph(MergedGraph& graph, const NlpPruneOptions& options) {
  NlpPruneStats stats;
  stats.entities_before = static_cast<int64_t>(graph.entities.size());
  stats.relationships_before = static_cast<int64_t>(graph.relationships.size());

  std::unordered_map<std::string_view, size_t> index;
  for (size_t i = 0; i < graph.entities.size(); ++i) index.emplace(graph.entities[i].name_key, i);
  if (options.pmi_weights) ApplyPmi(graph, index);

  // Nodes: frequency, then degree over the edges that are left. Two kinds stay whatever their
  // counts: document titles, and the one name of a chunk that would keep no name at all (in a
  // corpus of one short passage per document most subjects occur once; without them a passage
  // is unreachable through the graph).
  const size_t n = graph.entities.size();
  auto is_name = [&](const MergedEntity& e) {
    return e.type_counts.count(std::string(kNlpTitleType)) > 0 ||
           e.type_counts.count(std::string(kNlpProperNounType)) > 0;
  };
  std::vector<bool> keep(n);
  std::vector<bool> protect(n, false);
  for (size_t i = 0; i < n; ++i) {
    protect[i] = graph.entities[i].type_counts.count(std::string(kNlpTitleType)) > 0;
    keep[i] = protect[i] ||
              static_cast<int64_t>(graph.entities[i].chunk_ids.size()) >= options.min_node_freq;
  }
  if (options.keep_sole_names) {
    std::unordered_map<std::string_view, bool> named;   // chunk -> keeps a name
    std::unordered_map<std::string_view, size_t> best;  // chunk -> its most frequent name
    for (size_t i = 0; i < n; ++i) {
      const MergedEntity& e = graph.entities[i];
      if (!is_name(e)) continue;
      for (const auto& c : e.chunk_ids) {
        bool& has = named[c];
        has = has || keep[i];
        auto [it, added] = best.try_emplace(c, i);
        if (!added && graph.entities[it->second].chunk_ids.size() < e.chunk_ids.size())
          it->second = i;
      }
    }
    for (const auto& [chunk, has] : named) {
      if (has) continue;
      const size_t i = best.at(chunk);
      keep[i] = true;
      protect[i] = true;
    }
  }
  auto kept = [&](const std::string& key) {
    auto it = index.find(key);
    return it != index.end() && keep[it->second];
  };
  auto drop_dangling = [&] {
    std::erase_if(graph.relationships, [&](const MergedRelationship& r) {
      return !kept(r.source_key) || !kept(r.target_key);
    });
  };
  drop_dangling();
  if (options.min_node_degree > 0) {
    std::vector<int64_t> degree(graph.entities.size(), 0);
    for (const auto& r : graph.relationships) {
      ++degree[index.at(r.source_key)];
      ++degree[index.at(r.target_key)];
    }
    for (size_t i = 0; i < keep.size(); ++i)
      keep[i] = keep[i] && (protect[i] || degree[i] >= options.min_node_degree);
    drop_dangling();
  }

  // Edges: below the weight percentile of those left.
  const double pct = std::clamp(
      std::isfinite(options.min_edge_weight_pct) ? options.min_edge_weight_pct : 0.0, 0.0, 100.0);
  if (pct > 0 && !graph.relationships.empty()) {
    std::vector<double> weights;
    weights.reserve(graph.relationships.size());
    for (const auto& r : graph.relationships) weights.push_back(r.weight);
    stats.edge_weight_threshold = Percentile(std::move(weights), pct);
    std::erase_if(graph.relationships, [&](const MergedRelationship& r) {
      return r.weight < stats.edge_weight_threshold;
    });
  }

  size_t out = 0;
  for (size_t i = 0; i < graph.entities.size(); ++i) {
    if (!keep[i]) continue;
    if (out != i) graph.entities[out] = std::move(graph.entities[i]);
    ++out;
  }
  graph.entities.resize(out);
  stats.entities_after = static_cast<int64_t>(graph.entities.size());
  stats.relationships_after = static_cast<int64_t>(graph.relationships.size());
  return stats;
}

}  // namespace grag
