#include "grag/leiden.h"

#include <igraph/igraph.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

namespace grag {
namespace {

// igraph's default error handler aborts the process; ours must return errors instead.
void QuietIgraphErrors() {
  static std::once_flag once;
  std::call_once(once, [] {
    igraph_set_error_handler(igraph_error_handler_ignore);
    igraph_set_warning_handler(igraph_warning_handler_ignore);
  });
}

Status IgraphStatus(igraph_error_t err, const char* what) {
  if (err == IGRAPH_SUCCESS) return Status::Ok();
  return Status::Internal(std::string("igraph ") + what + " failed: " + igraph_strerror(err));
}

// RAII owners of igraph objects.
struct Graph {
  igraph_t g;
  bool live = false;
  ~Graph() {
    if (live) igraph_destroy(&g);
  }
};
struct RealVec {
  igraph_vector_t v;
  explicit RealVec(igraph_integer_t n) { igraph_vector_init(&v, n); }
  ~RealVec() { igraph_vector_destroy(&v); }
};
struct IntVec {
  igraph_vector_int_t v;
  explicit IntVec(igraph_integer_t n) { igraph_vector_int_init(&v, n); }
  ~IntVec() { igraph_vector_int_destroy(&v); }
};

// A simple weighted graph in local ids 0..n-1 (edges deduplicated, u < v).
struct LocalGraph {
  size_t n = 0;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  std::vector<double> weights;
};

// Runs Leiden for modularity on `lg`; membership gets a community id per local node.
Status RunLeiden(const LocalGraph& lg, const LeidenOptions& options,
                 std::vector<int32_t>& membership, double* modularity) {
  const auto n = static_cast<igraph_integer_t>(lg.n);
  IntVec edge_list(static_cast<igraph_integer_t>(lg.pairs.size() * 2));
  for (size_t i = 0; i < lg.pairs.size(); ++i) {
    VECTOR(edge_list.v)[2 * i] = lg.pairs[i].first;
    VECTOR(edge_list.v)[2 * i + 1] = lg.pairs[i].second;
  }
  Graph graph;
  GRAG_RETURN_IF_ERROR(IgraphStatus(igraph_create(&graph.g, &edge_list.v, n, IGRAPH_UNDIRECTED),
                                    "create"));
  graph.live = true;
  RealVec weights(static_cast<igraph_integer_t>(lg.weights.size()));
  double total = 0;
  for (size_t i = 0; i < lg.weights.size(); ++i) {
    VECTOR(weights.v)[i] = lg.weights[i];
    total += lg.weights[i];
  }
  membership.assign(lg.n, 0);
  if (total <= 0) {  // no edges: every node is its own community
    for (size_t i = 0; i < lg.n; ++i) membership[i] = static_cast<int32_t>(i);
    if (modularity != nullptr) *modularity = 0;
    return Status::Ok();
  }
  // Modularity through igraph's CPM formulation: node weights = strengths and
  // resolution = gamma / (2m).
  RealVec strength(n);
  GRAG_RETURN_IF_ERROR(IgraphStatus(igraph_strength(&graph.g, &strength.v, igraph_vss_all(),
                                                    IGRAPH_ALL, IGRAPH_LOOPS, &weights.v),
                                    "strength"));
  IntVec result(n);
  igraph_integer_t clusters = 0;
  igraph_real_t quality = 0;
  igraph_rng_seed(igraph_rng_default(), options.seed);
  GRAG_RETURN_IF_ERROR(IgraphStatus(
      igraph_community_leiden(&graph.g, &weights.v, &strength.v,
                              options.resolution / (2.0 * total), 0.01, false,
                              std::max(1, options.iterations), &result.v, &clusters, &quality),
      "community_leiden"));
  for (size_t i = 0; i < lg.n; ++i) membership[i] = static_cast<int32_t>(VECTOR(result.v)[i]);
  if (modularity != nullptr) {
    igraph_real_t q = 0;
    GRAG_RETURN_IF_ERROR(IgraphStatus(
        igraph_modularity(&graph.g, &result.v, &weights.v, options.resolution, false, &q),
        "modularity"));
    *modularity = q;
  }
  return Status::Ok();
}

// Compressed adjacency of the whole graph, to cut induced subgraphs in O(sum of degrees).
struct Adjacency {
  std::vector<size_t> offsets;
  std::vector<uint32_t> targets;
  std::vector<double> weights;
};

LocalGraph Dedup(size_t node_count, std::span<const GraphEdge> edges, Status* status) {
  std::unordered_map<uint64_t, double> merged;
  merged.reserve(edges.size());
  for (const auto& e : edges) {
    if (e.source >= node_count || e.target >= node_count) {
      *status = Status::InvalidArgument("edge (" + std::to_string(e.source) + ", " +
                                        std::to_string(e.target) + ") names a node beyond " +
                                        std::to_string(node_count));
      return {};
    }
    if (!(e.weight > 0)) {
      *status = Status::InvalidArgument("edge weights must be positive");
      return {};
    }
    if (e.source == e.target) continue;
    const uint32_t a = std::min(e.source, e.target);
    const uint32_t b = std::max(e.source, e.target);
    merged[(static_cast<uint64_t>(a) << 32) | b] += e.weight;
  }
  std::vector<std::pair<uint64_t, double>> sorted(merged.begin(), merged.end());
  std::sort(sorted.begin(), sorted.end());
  LocalGraph lg;
  lg.n = node_count;
  lg.pairs.reserve(sorted.size());
  lg.weights.reserve(sorted.size());
  for (const auto& [key, w] : sorted) {
    lg.pairs.emplace_back(static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key));
    lg.weights.push_back(w);
  }
  return lg;
}

Adjacency BuildAdjacency(const LocalGraph& lg) {
  Adjacency adj;
  adj.offsets.assign(lg.n + 1, 0);
  for (const auto& [a, b] : lg.pairs) {
    ++adj.offsets[a + 1];
    ++adj.offsets[b + 1];
  }
  for (size_t i = 0; i < lg.n; ++i) adj.offsets[i + 1] += adj.offsets[i];
  adj.targets.resize(adj.offsets[lg.n]);
  adj.weights.resize(adj.offsets[lg.n]);
  std::vector<size_t> fill(adj.offsets.begin(), adj.offsets.end() - 1);
  for (size_t i = 0; i < lg.pairs.size(); ++i) {
    const auto [a, b] = lg.pairs[i];
    adj.targets[fill[a]] = b;
    adj.weights[fill[a]++] = lg.weights[i];
    adj.targets[fill[b]] = a;
    adj.weights[fill[b]++] = lg.weights[i];
  }
  return adj;
}

// Groups `nodes` (global ids) by membership into clusters sorted by their first member.
std::vector<std::vector<uint32_t>> Group(const std::vector<uint32_t>& nodes,
                                         const std::vector<int32_t>& membership) {
  std::unordered_map<int32_t, size_t> index;
  std::vector<std::vector<uint32_t>> groups;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto [it, fresh] = index.try_emplace(membership[i], groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(nodes[i]);
  }
  for (auto& g : groups) std::sort(g.begin(), g.end());
  std::sort(groups.begin(), groups.end());
  return groups;
}

}  // namespace

Result<double> Modularity(size_t node_count, std::span<const GraphEdge> edges,
                          std::span<const int32_t> membership, double resolution) {
  QuietIgraphErrors();
  if (membership.size() != node_count) {
    return Status::InvalidArgument("membership has " + std::to_string(membership.size()) +
                                   " entries for " + std::to_string(node_count) + " nodes");
  }
  Status st;
  LocalGraph lg = Dedup(node_count, edges, &st);
  GRAG_RETURN_IF_ERROR(st);
  if (lg.pairs.empty()) return 0.0;
  IntVec edge_list(static_cast<igraph_integer_t>(lg.pairs.size() * 2));
  for (size_t i = 0; i < lg.pairs.size(); ++i) {
    VECTOR(edge_list.v)[2 * i] = lg.pairs[i].first;
    VECTOR(edge_list.v)[2 * i + 1] = lg.pairs[i].second;
  }
  Graph graph;
  GRAG_RETURN_IF_ERROR(IgraphStatus(
      igraph_create(&graph.g, &edge_list.v, static_cast<igraph_integer_t>(node_count),
                    IGRAPH_UNDIRECTED),
      "create"));
  graph.live = true;
  RealVec weights(static_cast<igraph_integer_t>(lg.weights.size()));
  for (size_t i = 0; i < lg.weights.size(); ++i) VECTOR(weights.v)[i] = lg.weights[i];
  IntVec m(static_cast<igraph_integer_t>(node_count));
  for (size_t i = 0; i < node_count; ++i) {
    if (membership[i] < 0) return Status::InvalidArgument("negative community id");
    VECTOR(m.v)[i] = membership[i];
  }
  igraph_real_t q = 0;
  GRAG_RETURN_IF_ERROR(
      IgraphStatus(igraph_modularity(&graph.g, &m.v, &weights.v, resolution, false, &q),
                   "modularity"));
  return q;
}

Result<ClusterHierarchy> HierarchicalLeiden(size_t node_count, std::span<const GraphEdge> edges,
                                            const LeidenOptions& options) {
  QuietIgraphErrors();
  if (options.max_cluster_size < 1) {
    return Status::InvalidArgument("max_cluster_size must be at least 1");
  }
  if (node_count > UINT32_MAX) return Status::InvalidArgument("too many nodes");
  Status st;
  LocalGraph whole = Dedup(node_count, edges, &st);
  GRAG_RETURN_IF_ERROR(st);
  ClusterHierarchy h;
  if (node_count == 0) return h;

  std::vector<int32_t> membership;
  GRAG_RETURN_IF_ERROR(RunLeiden(whole, options, membership, &h.modularity));
  ++h.leiden_calls;
  std::vector<uint32_t> all(node_count);
  for (size_t i = 0; i < node_count; ++i) all[i] = static_cast<uint32_t>(i);
  for (auto& members : Group(all, membership)) {
    Cluster c;
    c.id = static_cast<int32_t>(h.clusters.size());
    c.members = std::move(members);
    h.clusters.push_back(std::move(c));
  }
  h.levels = 1;

  const Adjacency adj = BuildAdjacency(whole);
  std::vector<int32_t> local(node_count, -1);  // global -> local id of the cluster being cut
  // Breadth-first over clusters, so ids stay ordered by level.
  for (size_t next = 0; next < h.clusters.size(); ++next) {
    if (h.clusters[next].members.size() <= options.max_cluster_size) continue;
    if (h.clusters[next].level + 1 >= options.max_levels) continue;
    const std::vector<uint32_t> members = h.clusters[next].members;
    LocalGraph sub;
    sub.n = members.size();
    for (size_t i = 0; i < members.size(); ++i) local[members[i]] = static_cast<int32_t>(i);
    for (size_t i = 0; i < members.size(); ++i) {
      const uint32_t u = members[i];
      for (size_t k = adj.offsets[u]; k < adj.offsets[u + 1]; ++k) {
        const uint32_t v = adj.targets[k];
        if (v > u && local[v] >= 0) {
          sub.pairs.emplace_back(static_cast<uint32_t>(i), static_cast<uint32_t>(local[v]));
          sub.weights.push_back(adj.weights[k]);
        }
      }
    }
    for (uint32_t u : members) local[u] = -1;
    // A dense cluster can be modularity-optimal as one piece (a clique, say). Raising the
    // resolution on its subgraph splits it, so every level honours max_cluster_size.
    std::vector<std::vector<uint32_t>> groups;
    LeidenOptions sub_options = options;
    for (int attempt = 0; attempt < 12 && groups.size() < 2; ++attempt) {
      std::vector<int32_t> sub_membership;
      GRAG_RETURN_IF_ERROR(RunLeiden(sub, sub_options, sub_membership, nullptr));
      ++h.leiden_calls;
      groups = Group(members, sub_membership);
      sub_options.resolution *= 2;
    }
    if (groups.size() < 2) continue;  // cannot be split at all: a leaf
    const int32_t level = h.clusters[next].level + 1;
    for (auto& g : groups) {
      Cluster c;
      c.id = static_cast<int32_t>(h.clusters.size());
      c.level = level;
      c.parent = static_cast<int32_t>(next);
      c.members = std::move(g);
      h.clusters[next].children.push_back(c.id);
      h.clusters.push_back(std::move(c));
    }
    h.levels = std::max(h.levels, level + 1);
  }
  return h;
}

}  // namespace grag
