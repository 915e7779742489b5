#include "grag/leiden.h"

#include <igraph/igraph.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "grag/lazy_library.h"

namespace grag {
namespace {

// igraph's functions, resolved on the first clustering (grag/lazy_library.h: linking igraph put
// 17 shared objects into every command's start-up, questions included).
struct IgraphApi {
  decltype(&::igraph_community_leiden) community_leiden;
  decltype(&::igraph_create) create;
  decltype(&::igraph_destroy) destroy;
  decltype(&::igraph_modularity) modularity;
  decltype(&::igraph_rng_default) rng_default;
  decltype(&::igraph_rng_seed) rng_seed;
  decltype(&::igraph_strength) strength;
  decltype(&::igraph_strerror) strerror;
  decltype(&::igraph_vector_destroy) vector_destroy;
  decltype(&::igraph_vector_init) vector_init;
  decltype(&::igraph_vector_int_destroy) vector_int_destroy;
  decltype(&::igraph_vector_int_init) vector_int_init;
  decltype(&::igraph_vss_all) vss_all;
};

Result<IgraphApi> ResolveIgraph() {
  static LazyLibrary lib(GRAG_LIBIGRAPH_SONAME, "clustering the graph (Leiden)",
                         "igraph (Debian: apt install libigraph3)");
  IgraphApi api{};
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.community_leiden, "igraph_community_leiden"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.create, "igraph_create"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.destroy, "igraph_destroy"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.modularity, "igraph_modularity"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.rng_default, "igraph_rng_default"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.rng_seed, "igraph_rng_seed"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.strength, "igraph_strength"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.strerror, "igraph_strerror"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.vector_destroy, "igraph_vector_destroy"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.vector_init, "igraph_vector_init"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.vector_int_destroy, "igraph_vector_int_destroy"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.vector_int_init, "igraph_vector_int_init"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(api.vss_all, "igraph_vss_all"));
  decltype(&::igraph_set_error_handler) set_error_handler = nullptr;
  decltype(&::igraph_set_warning_handler) set_warning_handler = nullptr;
  igraph_error_handler_t* ignore_errors = nullptr;
  igraph_warning_handler_t* ignore_warnings = nullptr;
  GRAG_RETURN_IF_ERROR(lib.Resolve(set_error_handler, "igraph_set_error_handler"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(set_warning_handler, "igraph_set_warning_handler"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(ignore_errors, "igraph_error_handler_ignore"));
  GRAG_RETURN_IF_ERROR(lib.Resolve(ignore_warnings, "igraph_warning_handler_ignore"));
  // igraph's default error handler aborts the process; ours must return errors instead.
  set_error_handler(ignore_errors);
  set_warning_handler(ignore_warnings);
  return api;
}

const IgraphApi* loaded_igraph = nullptr;

// Loads igraph (once; the same answer every time after). Every entry point calls it first.
Status LoadIgraph() {
  static const Result<IgraphApi> api = ResolveIgraph();
  if (!api.ok()) return api.status();
  loaded_igraph = &*api;
  return Status::Ok();
}

// igraph, once LoadIgraph has succeeded.
const IgraphApi& Ig() { return *loaded_igraph; }

Status IgraphStatus(igraph_error_t err, const char* what) {
  if (err == IGRAPH_SUCCESS) return Status::Ok();
  return Status::Internal(std::string("igraph ") + what + " failed: " + Ig().strerror(err));
}

// RAII owners of igraph objects.
struct Graph {
  igraph_t g;
  bool live = false;
  ~Graph() {
    if (live) Ig().destroy(&g);
  }
};
struct RealVec {
  igraph_vector_t v;
  explicit RealVec(igraph_integer_t n) { Ig().vector_init(&v, n); }
  ~RealVec() { Ig().vector_destroy(&v); }
};
struct IntVec {
  igraph_vector_int_t v;
  explicit IntVec(igraph_integer_t n) { Ig().vector_int_init(&v, n); }
  ~IntVec() { Ig().vector_int_destroy(&v); }
};

// A simple weighted graph in local ids 0..n-1 (edges deduplicated, u < v).
struct LocalGraph {
  size_t n = 0;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  std::vector<double> weights;
};

// Turns a start membership (any ids, -1 for none) into igraph's form: ids 0..k-1, each node
// without one alone in a community of its own.
std::vector<int32_t> CompactStart(const std::vector<int32_t>& start) {
  std::unordered_map<int32_t, int32_t> id_of;
  std::vector<int32_t> out(start.size());
  int32_t next = 0;
  for (size_t i = 0; i < start.size(); ++i) {
    if (start[i] < 0) {
      out[i] = next++;
      continue;
    }
    auto [it, fresh] = id_of.try_emplace(start[i], next);
    if (fresh) ++next;
    out[i] = it->second;
  }
  return out;
}

// Runs Leiden for modularity on `lg`; membership gets a community id per local node. A
// non-empty `start` (one entry per node, -1 for none) is the partition Leiden starts from.
// `node_weights` and `total_weight` (when given) stand for the strengths and summed edge weight
// of a graph `lg` was contracted from; `modularity` is then that of `lg` itself.
Status RunLeidenOn(const LocalGraph& lg, const LeidenOptions& options,
                   const std::vector<int32_t>& start, std::vector<int32_t>& membership,
                   double* modularity, const std::vector<double>* node_weights = nullptr,
                   double total_weight = 0) {
  const auto n = static_cast<igraph_integer_t>(lg.n);
  IntVec edge_list(static_cast<igraph_integer_t>(lg.pairs.size() * 2));
  for (size_t i = 0; i < lg.pairs.size(); ++i) {
    VECTOR(edge_list.v)[2 * i] = lg.pairs[i].first;
    VECTOR(edge_list.v)[2 * i + 1] = lg.pairs[i].second;
  }
  Graph graph;
  GRAG_RETURN_IF_ERROR(
      IgraphStatus(Ig().create(&graph.g, &edge_list.v, n, IGRAPH_UNDIRECTED), "create"));
  graph.live = true;
  RealVec weights(static_cast<igraph_integer_t>(lg.weights.size()));
  double total = 0;
  for (size_t i = 0; i < lg.weights.size(); ++i) {
    VECTOR(weights.v)[i] = lg.weights[i];
    total += lg.weights[i];
  }
  if (node_weights != nullptr) total = total_weight;
  membership.assign(lg.n, 0);
  if (total <= 0) {  // no edges: every node is its own community
    for (size_t i = 0; i < lg.n; ++i) membership[i] = static_cast<int32_t>(i);
    if (modularity != nullptr) *modularity = 0;
    return Status::Ok();
  }
  // Modularity through igraph's CPM formulation: node weights = strengths and
  // resolution = gamma / (2m).
  RealVec strength(n);
  if (node_weights != nullptr) {
    for (size_t i = 0; i < lg.n; ++i) VECTOR(strength.v)[i] = (*node_weights)[i];
  } else {
    GRAG_RETURN_IF_ERROR(IgraphStatus(
        Ig().strength(&graph.g, &strength.v, Ig().vss_all(), IGRAPH_ALL, IGRAPH_LOOPS, &weights.v),
        "strength"));
  }
  IntVec result(n);
  const bool warm = !start.empty();
  if (warm) {
    const std::vector<int32_t> compact = CompactStart(start);
    for (size_t i = 0; i < lg.n; ++i) VECTOR(result.v)[i] = compact[i];
  }
  igraph_integer_t clusters = 0;
  igraph_real_t quality = 0;
  Ig().rng_seed(Ig().rng_default(), options.seed);
  GRAG_RETURN_IF_ERROR(IgraphStatus(
      Ig().community_leiden(&graph.g, &weights.v, &strength.v, options.resolution / (2.0 * total),
                            0.01, warm, std::max(1, options.iterations), &result.v, &clusters,
                            &quality),
      "community_leiden"));
  for (size_t i = 0; i < lg.n; ++i) membership[i] = static_cast<int32_t>(VECTOR(result.v)[i]);
  if (modularity != nullptr) {
    igraph_real_t q = 0;
    GRAG_RETURN_IF_ERROR(IgraphStatus(
        Ig().modularity(&graph.g, &result.v, &weights.v, options.resolution, false, &q),
        "modularity"));
    *modularity = q;
  }
  return Status::Ok();
}

// RunLeidenOn with the nodes that may not move (fixed[i] != 0) held together by start community:
// each such group becomes one node of a contracted graph (weighted by its members' strengths,
// its inner edges left out: they stay inner whatever Leiden does), so Leiden can move the group
// only whole. Modularity is the same objective up to a constant, so the result is the best
// partition Leiden finds among those that keep the groups together.
Status RunLeiden(const LocalGraph& lg, const LeidenOptions& options,
                 const std::vector<int32_t>& start, const std::vector<char>& fixed,
                 std::vector<int32_t>& membership, double* modularity) {
  if (start.empty() || fixed.empty())
    return RunLeidenOn(lg, options, start, membership, modularity);
  std::vector<int32_t> group(lg.n, -1);
  std::unordered_map<int32_t, int32_t> group_of_start;
  std::vector<int32_t> group_start;
  for (size_t i = 0; i < lg.n; ++i) {
    if (fixed[i] && start[i] >= 0) {
      auto [it, fresh] =
          group_of_start.try_emplace(start[i], static_cast<int32_t>(group_start.size()));
      if (fresh) group_start.push_back(start[i]);
      group[i] = it->second;
    } else {
      group[i] = static_cast<int32_t>(group_start.size());
      group_start.push_back(start[i]);
    }
  }
  if (group_start.size() == lg.n) return RunLeidenOn(lg, options, start, membership, modularity);
  LocalGraph contracted;
  contracted.n = group_start.size();
  std::vector<double> strength(contracted.n, 0);
  double total = 0;
  std::unordered_map<uint64_t, double> merged;
  for (size_t e = 0; e < lg.pairs.size(); ++e) {
    const auto [u, v] = lg.pairs[e];
    const double w = lg.weights[e];
    total += w;
    const auto a = static_cast<uint32_t>(group[u]);
    const auto b = static_cast<uint32_t>(group[v]);
    strength[a] += w;
    strength[b] += w;
    if (a == b) continue;
    merged[(static_cast<uint64_t>(std::min(a, b)) << 32) | std::max(a, b)] += w;
  }
  std::vector<std::pair<uint64_t, double>> sorted(merged.begin(), merged.end());
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [key, w] : sorted) {
    contracted.pairs.emplace_back(static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key));
    contracted.weights.push_back(w);
  }
  std::vector<int32_t> contracted_membership;
  GRAG_RETURN_IF_ERROR(RunLeidenOn(contracted, options, group_start, contracted_membership, nullptr,
                                   &strength, total));
  membership.assign(lg.n, 0);
  for (size_t i = 0; i < lg.n; ++i) {
    membership[i] = contracted_membership[static_cast<size_t>(group[i])];
  }
  if (modularity != nullptr) {
    *modularity = 0;
    if (total > 0) {
      std::vector<GraphEdge> edges;
      edges.reserve(lg.pairs.size());
      for (size_t e = 0; e < lg.pairs.size(); ++e) {
        edges.push_back({lg.pairs[e].first, lg.pairs[e].second, lg.weights[e]});
      }
      GRAG_ASSIGN_OR_RETURN(*modularity, Modularity(lg.n, edges, membership, options.resolution));
    }
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

// The start membership of `nodes` (global ids) at `level`, or empty without a start.
std::vector<int32_t> StartOf(const LeidenStart* start, size_t level,
                             const std::vector<uint32_t>& nodes) {
  if (start == nullptr || level >= start->levels.size()) return {};
  const auto& at = start->levels[level];
  std::vector<int32_t> out(nodes.size(), -1);
  bool any = false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] < at.size() && at[nodes[i]] >= 0) {
      out[i] = at[nodes[i]];
      any = true;
    }
  }
  if (!any) out.clear();
  return out;
}

// Which of `nodes` (global ids) may not move (see LeidenStart::movable); empty when all may.
std::vector<char> FixedOf(const LeidenStart* start, const std::vector<uint32_t>& nodes) {
  if (start == nullptr || start->movable.empty()) return {};
  std::vector<char> out(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    out[i] = nodes[i] < start->movable.size() && start->movable[nodes[i]] == 0 ? 1 : 0;
  }
  return out;
}

}  // namespace

Result<double> Modularity(size_t node_count, std::span<const GraphEdge> edges,
                          std::span<const int32_t> membership, double resolution) {
  GRAG_RETURN_IF_ERROR(LoadIgraph());
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
  GRAG_RETURN_IF_ERROR(
      IgraphStatus(Ig().create(&graph.g, &edge_list.v, static_cast<igraph_integer_t>(node_count),
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
  GRAG_RETURN_IF_ERROR(IgraphStatus(
      Ig().modularity(&graph.g, &m.v, &weights.v, resolution, false, &q), "modularity"));
  return q;
}

Result<ClusterHierarchy> HierarchicalLeiden(size_t node_count, std::span<const GraphEdge> edges,
                                            const LeidenOptions& options,
                                            const LeidenStart* start) {
  GRAG_RETURN_IF_ERROR(LoadIgraph());
  if (options.max_cluster_size < 1) {
    return Status::InvalidArgument("max_cluster_size must be at least 1");
  }
  if (node_count > UINT32_MAX) return Status::InvalidArgument("too many nodes");
  Status st;
  LocalGraph whole = Dedup(node_count, edges, &st);
  GRAG_RETURN_IF_ERROR(st);
  ClusterHierarchy h;
  if (node_count == 0) return h;

  std::vector<uint32_t> all(node_count);
  for (size_t i = 0; i < node_count; ++i) all[i] = static_cast<uint32_t>(i);
  std::vector<int32_t> membership;
  GRAG_RETURN_IF_ERROR(RunLeiden(whole, options, StartOf(start, 0, all), FixedOf(start, all),
                                 membership, &h.modularity));
  ++h.leiden_calls;
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
    // The previous split of this community is the first attempt's start; a raised resolution
    // starts afresh.
    std::vector<int32_t> sub_start =
        StartOf(start, static_cast<size_t>(h.clusters[next].level) + 1, members);
    const std::vector<char> sub_fixed = FixedOf(start, members);
    for (int attempt = 0; attempt < 12 && groups.size() < 2; ++attempt) {
      std::vector<int32_t> sub_membership;
      GRAG_RETURN_IF_ERROR(
          RunLeiden(sub, sub_options, sub_start, sub_fixed, sub_membership, nullptr));
      sub_start.clear();
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

LeidenStart StartFrom(size_t node_count, std::span<const PriorCluster> previous) {
  LeidenStart start;
  for (const auto& c : previous) {
    if (c.level < 0) continue;
    const auto level = static_cast<size_t>(c.level);
    if (start.levels.size() <= level) start.levels.resize(level + 1);
    auto& at = start.levels[level];
    if (at.empty()) at.assign(node_count, -1);
    for (uint32_t m : c.members) {
      if (m < node_count) at[m] = static_cast<int32_t>(c.id);
    }
  }
  return start;
}

std::vector<int64_t> MatchClusterIds(const ClusterHierarchy& h,
                                     std::span<const PriorCluster> previous, double min_jaccard) {
  // Overlap counts through a node -> previous community index per level.
  std::unordered_map<int32_t, std::unordered_map<uint32_t, size_t>> prior_of;  // level -> node -> i
  int64_t max_id = 0;
  for (size_t i = 0; i < previous.size(); ++i) {
    max_id = std::max(max_id, previous[i].id);
    for (uint32_t m : previous[i].members) prior_of[previous[i].level][m] = i;
  }
  struct Pair {
    double jaccard;
    size_t cluster;
    size_t prior;
  };
  std::vector<Pair> pairs;
  for (size_t c = 0; c < h.clusters.size(); ++c) {
    const auto level_it = prior_of.find(h.clusters[c].level);
    if (level_it == prior_of.end()) continue;
    std::unordered_map<size_t, size_t> overlap;
    for (uint32_t m : h.clusters[c].members) {
      if (auto it = level_it->second.find(m); it != level_it->second.end()) ++overlap[it->second];
    }
    for (const auto& [prior, shared] : overlap) {
      const double uni = static_cast<double>(h.clusters[c].members.size() +
                                             previous[prior].members.size() - shared);
      const double jaccard = static_cast<double>(shared) / uni;
      if (jaccard >= min_jaccard) pairs.push_back({jaccard, c, prior});
    }
  }
  // Best pairs first; ties by position, so the result does not depend on hash order.
  std::sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
    return std::tie(b.jaccard, a.cluster, a.prior) < std::tie(a.jaccard, b.cluster, b.prior);
  });
  std::vector<int64_t> ids(h.clusters.size(), 0);
  std::vector<bool> prior_used(previous.size(), false);
  for (const auto& p : pairs) {
    if (ids[p.cluster] != 0 || prior_used[p.prior]) continue;
    ids[p.cluster] = previous[p.prior].id;
    prior_used[p.prior] = true;
  }
  for (auto& id : ids) {
    if (id == 0) id = ++max_id;
  }
  return ids;
}

}  // namespace grag
