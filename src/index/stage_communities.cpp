// The index pipeline's communities stage: what RunIndex calls (stages.h).
#include "stages.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "grag/hash.h"
#include "grag/leiden.h"
#include "grag/log.h"

namespace grag {
namespace {

// The graph community detection sees, in a fixed node order (by entity id).
struct CommunityGraph {
  std::vector<EntityRecord> entities;  // node i = entities[i]
  std::unordered_map<int64_t, uint32_t> node_of;
  std::vector<GraphEdge> edges;  // sorted
  std::string hash;              // of the graph and the clustering settings
};

Result<CommunityGraph> LoadCommunityGraph(Store& store, const CommunityConfig& cc) {
  CommunityGraph g;
  GRAG_ASSIGN_OR_RETURN(g.entities, store.ListEntities());
  GRAG_ASSIGN_OR_RETURN(std::vector<RelationshipRecord> rels, store.ListRelationships());
  std::sort(g.entities.begin(), g.entities.end(),
            [](const EntityRecord& a, const EntityRecord& b) { return a.id < b.id; });
  for (size_t i = 0; i < g.entities.size(); ++i) {
    g.node_of[g.entities[i].id] = static_cast<uint32_t>(i);
  }
  g.edges.reserve(rels.size());
  for (const auto& r : rels) {
    g.edges.push_back(
        {g.node_of.at(r.source_id), g.node_of.at(r.target_id), std::max(r.weight, 1e-6)});
  }
  std::sort(g.edges.begin(), g.edges.end(), [](const GraphEdge& a, const GraphEdge& b) {
    return std::tie(a.source, a.target) < std::tie(b.source, b.target);
  });
  Hasher h;
  h.Add("seed=" + std::to_string(cc.seed) + " resolution=" + std::to_string(cc.resolution) +
        " max_cluster_size=" + std::to_string(cc.max_cluster_size));
  for (const auto& e : g.entities) h.Add(std::to_string(e.id) + " " + e.name_key);
  for (const auto& e : g.edges) {
    h.Add(std::to_string(e.source) + "-" + std::to_string(e.target) + ":" +
          std::to_string(e.weight));
  }
  g.hash = h.HexDigest();
  return g;
}

// The stored hierarchy in the graph's node ids (members no longer in the graph left out).
Result<std::vector<PriorCluster>> LoadPriorClusters(Store& store, const CommunityGraph& g) {
  GRAG_ASSIGN_OR_RETURN(std::vector<CommunityRecord> stored, store.ListCommunities());
  std::vector<PriorCluster> prior;
  prior.reserve(stored.size());
  for (const auto& c : stored) {
    PriorCluster p;
    p.id = c.id;
    p.level = static_cast<int32_t>(c.level);
    for (int64_t e : c.entity_ids) {
      if (auto it = g.node_of.find(e); it != g.node_of.end()) p.members.push_back(it->second);
    }
    std::sort(p.members.begin(), p.members.end());
    prior.push_back(std::move(p));
  }
  return prior;
}

}  // namespace

Status DetectCommunities(Run& run, CommunitiesSummary& s) {
  Store& store = run.store();
  const auto& cc = run.config().communities;
  GRAG_ASSIGN_OR_RETURN(CommunityGraph g, LoadCommunityGraph(store, cc));
  GRAG_ASSIGN_OR_RETURN(std::optional<ClusteringRecord> last, store.LatestClustering());
  GRAG_ASSIGN_OR_RETURN(std::vector<PriorCluster> prior, LoadPriorClusters(store, g));
  if (last && last->graph_hash == g.hash && !prior.empty()) {
    // Same graph, same settings: the stored hierarchy stands.
    GRAG_RETURN_IF_ERROR(store.SetMeta(kPendingChangesKey, ""));
    for (const auto& p : prior) ++s.communities_per_level[p.level];
    s.modularity = last->modularity.value_or(0);
    s.communities_unchanged = true;
    run.Progress("communities", 1, 1);
    return Status::Ok();
  }

  LeidenOptions lo;
  lo.max_cluster_size = static_cast<size_t>(cc.max_cluster_size);
  lo.resolution = cc.resolution;
  lo.seed = static_cast<uint64_t>(cc.seed);
  GRAG_ASSIGN_OR_RETURN(ClusterHierarchy fresh, HierarchicalLeiden(g.entities.size(), g.edges, lo));
  ClusterHierarchy h;
  ClusteringRecord clustering;
  const bool warm = cc.incremental && !prior.empty();
  if (warm) {
    // Start from the previous partition so untouched regions keep their communities; compare
    // with the fresh run to catch a warm start stuck in a worse optimum.
    LeidenStart start = StartFrom(g.entities.size(), prior);
    // Only the changed entities (both ends of every new, reweighted or removed relationship
    // among them) may move; the rest keep their communities, as blocks. Not their neighbours
    // too: a hub's neighbours are half the graph. Without a known change set (a resumed run)
    // every node may move.
    GRAG_ASSIGN_OR_RETURN(const std::set<std::string> changed, PendingChanges(store));
    if (cc.local_updates && !changed.empty()) {
      start.movable.assign(g.entities.size(), 0);
      for (size_t i = 0; i < g.entities.size(); ++i) {
        if (changed.count(g.entities[i].name_key)) start.movable[i] = 1;
      }
    }
    GRAG_ASSIGN_OR_RETURN(ClusterHierarchy warmed,
                          HierarchicalLeiden(g.entities.size(), g.edges, lo, &start));
    const double drift = fresh.modularity - warmed.modularity;
    clustering.fresh_modularity = fresh.modularity;
    if (drift > cc.drift_threshold) {
      h = std::move(fresh);
      clustering.note = fmt::format(
          "full re-detection: the warm start's modularity {:.4f} was {:.4f} below a fresh "
          "run's {:.4f} (communities.drift_threshold {})",
          warmed.modularity, drift, h.modularity, cc.drift_threshold);
      s.community_note = clustering.note;
      Log(LogLevel::kInfo, "communities", clustering.note);
    } else {
      h = std::move(warmed);
      clustering.warm_start = true;
    }
  } else {
    h = std::move(fresh);
  }
  s.communities_warm_start = clustering.warm_start;

  // Ids stay stable: a community takes the id of the previous one it overlaps most.
  const std::vector<int64_t> ids = MatchClusterIds(h, prior);
  std::set<int64_t> old_ids;
  for (const auto& p : prior) old_ids.insert(p.id);
  std::vector<CommunityRecord> records;
  records.reserve(h.clusters.size());
  for (size_t i = 0; i < h.clusters.size(); ++i) {
    const auto& cl = h.clusters[i];
    CommunityRecord r;
    r.id = ids[i];
    r.level = cl.level;
    if (cl.parent >= 0) r.parent_id = ids[static_cast<size_t>(cl.parent)];
    r.entity_ids.reserve(cl.members.size());
    for (uint32_t m : cl.members) r.entity_ids.push_back(g.entities[m].id);
    records.push_back(std::move(r));
    ++s.communities_per_level[cl.level];
    if (old_ids.erase(ids[i]) > 0) {
      ++s.communities_kept;
    } else {
      ++s.communities_new;
    }
  }
  s.communities_removed = static_cast<int64_t>(old_ids.size());
  clustering.seed = cc.seed;
  clustering.resolution = cc.resolution;
  clustering.max_cluster_size = cc.max_cluster_size;
  clustering.modularity = h.modularity;
  clustering.graph_hash = g.hash;
  GRAG_ASSIGN_OR_RETURN(Transaction tx, store.BeginAllOrNothing());
  GRAG_RETURN_IF_ERROR(store.ReplaceCommunities(clustering, records).status());
  GRAG_RETURN_IF_ERROR(store.SetMeta(kPendingChangesKey, ""));
  GRAG_RETURN_IF_ERROR(tx.Commit());
  s.modularity = h.modularity;
  run.Progress("communities", 1, 1);
  return Status::Ok();
}

}  // namespace grag
