// Hierarchical community detection: Leiden (modularity) with igraph, recursively refined.
//
// Level 0 is Leiden over the whole weighted graph (every connected component, isolated nodes
// included, so no node is left without a community). Each community larger than
// max_cluster_size is clustered again on its induced subgraph, giving its children at the next
// level, and so on. When modularity keeps a large community whole (a clique, say), the
// resolution is raised on its subgraph until it splits. Same graph + same seed gives the same
// hierarchy.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grag/status.h"

namespace grag {

struct GraphEdge {
  uint32_t source;
  uint32_t target;
  double weight;  // > 0; parallel edges are summed, self-loops ignored
};

struct LeidenOptions {
  size_t max_cluster_size = 10;  // Microsoft GraphRAG's default
  double resolution = 1.0;       // modularity resolution (gamma); higher gives smaller communities
  uint64_t seed = 0xDEADBEEF;    // Microsoft GraphRAG's default seed
  // igraph 0.10.2 runs one iteration for a negative count (igraph bug #2798): pass a count.
  // Two iterations cost ~1.5x one and find noticeably better partitions on large graphs.
  int iterations = 2;
  int max_levels = 32;  // safety bound on recursion depth
};

struct Cluster {
  int32_t id = 0;     // index into ClusterHierarchy::clusters
  int32_t level = 0;  // 0 = coarsest
  int32_t parent = -1;
  std::vector<uint32_t> members;  // node ids, ascending
  std::vector<int32_t> children;
};

struct ClusterHierarchy {
  std::vector<Cluster> clusters;  // ordered by level, then by first member
  double modularity = 0;          // of the level-0 partition on the whole graph
  int32_t levels = 0;
  size_t leiden_calls = 0;
};

// A previous partition to start from, for incremental updates: Leiden then moves nodes only
// where the changed graph makes that worthwhile, so untouched regions keep their communities.
// levels[l][node] is the node's community at level l of the previous hierarchy (any
// non-negative ids), or -1 when it had none there (a new node, or its community was not split
// that deep). Missing levels, or vectors shorter than the node count, count as -1.
struct LeidenStart {
  std::vector<std::vector<int32_t>> levels;
  // Empty: every node may move. Otherwise movable[node] != 0 marks the nodes Leiden may move
  // (those near a change); at each level, the nodes of one start community that may not move are
  // kept together as one block (which may still join another community whole), so regions far
  // from a change keep their communities. Nodes beyond the vector may move.
  std::vector<char> movable;
};

// Not thread-safe with other igraph users (igraph's RNG is global): call from one thread.
// With `start`, every Leiden run (the whole graph at level 0, each split community below) starts
// from the previous membership of its nodes at that level; a node without one starts alone.
Result<ClusterHierarchy> HierarchicalLeiden(size_t node_count, std::span<const GraphEdge> edges,
                                            const LeidenOptions& options,
                                            const LeidenStart* start = nullptr);

// A community of a previous hierarchy, in the node ids of the current graph (nodes that are
// gone left out), for warm starts and stable ids.
struct PriorCluster {
  int64_t id = 0;
  int32_t level = 0;
  std::vector<uint32_t> members;  // ascending
};

// The warm start a previous hierarchy gives (see LeidenStart).
LeidenStart StartFrom(size_t node_count, std::span<const PriorCluster> previous);

// Ids for the clusters of `h` that stay stable across updates: each cluster takes the id of the
// previous community of the same level it overlaps most, best pairs first (by Jaccard
// similarity of the member sets, which must reach `min_jaccard`), each previous id used once.
// The others get new ids above every previous one, in hierarchy order. Result[i] is the id of
// h.clusters[i].
std::vector<int64_t> MatchClusterIds(const ClusterHierarchy& h,
                                     std::span<const PriorCluster> previous,
                                     double min_jaccard = 0.5);

// Modularity of `membership` (one community id per node) on the weighted graph.
Result<double> Modularity(size_t node_count, std::span<const GraphEdge> edges,
                          std::span<const int32_t> membership, double resolution = 1.0);

}  // namespace grag
