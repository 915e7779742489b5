// Hierarchical Leiden: coverage, max_cluster_size at every level, determinism, hierarchy shape.
#include "grag/leiden.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

namespace grag {
namespace {

void AddClique(std::vector<GraphEdge>& edges, uint32_t first, uint32_t size, double w = 1.0) {
  for (uint32_t i = first; i < first + size; ++i) {
    for (uint32_t j = i + 1; j < first + size; ++j) edges.push_back({i, j, w});
  }
}

// Planted partition: `groups` groups of `size` nodes, dense inside, sparse between.
std::vector<GraphEdge> Planted(uint32_t groups, uint32_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<GraphEdge> edges;
  const uint32_t n = groups * size;
  for (uint32_t i = 0; i < n; ++i) {
    for (uint32_t j = i + 1; j < n; ++j) {
      const bool same = i / size == j / size;
      if (u(rng) < (same ? 0.3 : 0.005)) edges.push_back({i, j, 1.0 + u(rng) * 9});
    }
  }
  return edges;
}

TEST(LeidenTest, TwoCliquesJoinedByABridge) {
  std::vector<GraphEdge> edges;
  AddClique(edges, 0, 5);
  AddClique(edges, 5, 5);
  edges.push_back({4, 5, 0.1});
  auto h = HierarchicalLeiden(10, edges, {});
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  ASSERT_EQ(h->clusters.size(), 2u);
  EXPECT_EQ(h->clusters[0].members, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(h->clusters[1].members, (std::vector<uint32_t>{5, 6, 7, 8, 9}));
  EXPECT_EQ(h->levels, 1);
  EXPECT_GT(h->modularity, 0.4);
}

TEST(LeidenTest, EveryNodeHasALevelZeroCommunityIncludingIsolatedOnes) {
  std::vector<GraphEdge> edges;
  AddClique(edges, 0, 4);
  AddClique(edges, 10, 3);  // a second component; nodes 4..9 isolated
  auto h = HierarchicalLeiden(13, edges, {});
  ASSERT_TRUE(h.ok());
  std::set<uint32_t> seen;
  for (const auto& c : h->clusters) {
    if (c.level != 0) continue;
    for (auto m : c.members) EXPECT_TRUE(seen.insert(m).second) << "node in two communities";
  }
  EXPECT_EQ(seen.size(), 13u);
}

TEST(LeidenTest, EveryLevelRespectsMaxClusterSizeAndChildrenPartitionParents) {
  auto edges = Planted(12, 40, 7);
  LeidenOptions opts;
  opts.max_cluster_size = 10;
  auto h = HierarchicalLeiden(480, edges, opts);
  ASSERT_TRUE(h.ok());
  EXPECT_GE(h->levels, 2);
  for (const auto& c : h->clusters) {
    if (c.children.empty()) {
      EXPECT_LE(c.members.size(), 10u) << "leaf " << c.id << " at level " << c.level;
      continue;
    }
    std::vector<uint32_t> joined;
    for (auto child : c.children) {
      const auto& k = h->clusters[static_cast<size_t>(child)];
      EXPECT_EQ(k.parent, c.id);
      EXPECT_EQ(k.level, c.level + 1);
      joined.insert(joined.end(), k.members.begin(), k.members.end());
    }
    std::sort(joined.begin(), joined.end());
    EXPECT_EQ(joined, c.members);
  }
  for (size_t i = 1; i < h->clusters.size(); ++i) {
    EXPECT_LE(h->clusters[i - 1].level, h->clusters[i].level) << "not ordered by level";
  }
}

TEST(LeidenTest, ACliqueLargerThanTheLimitIsStillSplit) {
  std::vector<GraphEdge> edges;
  AddClique(edges, 0, 15);
  LeidenOptions opts;
  opts.max_cluster_size = 10;
  auto h = HierarchicalLeiden(15, edges, opts);
  ASSERT_TRUE(h.ok());
  for (const auto& c : h->clusters) {
    if (c.children.empty()) {
      EXPECT_LE(c.members.size(), 10u);
    }
  }
}

TEST(LeidenTest, SameSeedSameCommunities) {
  auto edges = Planted(8, 30, 3);
  auto a = HierarchicalLeiden(240, edges, {});
  auto b = HierarchicalLeiden(240, edges, {});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->clusters.size(), b->clusters.size());
  for (size_t i = 0; i < a->clusters.size(); ++i) {
    EXPECT_EQ(a->clusters[i].members, b->clusters[i].members);
    EXPECT_EQ(a->clusters[i].parent, b->clusters[i].parent);
  }
  EXPECT_DOUBLE_EQ(a->modularity, b->modularity);
}

TEST(LeidenTest, ModularityMatchesPartition) {
  std::vector<GraphEdge> edges;
  AddClique(edges, 0, 5);
  AddClique(edges, 5, 5);
  edges.push_back({4, 5, 1});
  std::vector<int32_t> good = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
  std::vector<int32_t> one(10, 0);
  auto q_good = Modularity(10, edges, good);
  auto q_one = Modularity(10, edges, one);
  ASSERT_TRUE(q_good.ok() && q_one.ok());
  EXPECT_GT(*q_good, 0.4);
  EXPECT_NEAR(*q_one, 0.0, 1e-9);
}

TEST(LeidenTest, BadInputIsAnErrorNotACrash) {
  std::vector<GraphEdge> edges = {{0, 5, 1.0}};
  EXPECT_EQ(HierarchicalLeiden(3, edges, {}).status().code(), ErrorCode::kInvalidArgument);
  edges = {{0, 1, -1.0}};
  EXPECT_EQ(HierarchicalLeiden(3, edges, {}).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(HierarchicalLeiden(0, {}, {}).ok());
}

// The previous hierarchy of `h` as PriorCluster records with ids 100, 101, ...
std::vector<PriorCluster> AsPrior(const ClusterHierarchy& h) {
  std::vector<PriorCluster> prior;
  for (const auto& c : h.clusters) prior.push_back({100 + c.id, c.level, c.members});
  return prior;
}

TEST(LeidenTest, WarmStartOnTheSameGraphKeepsThePartitionAndTheIds) {
  const auto edges = Planted(6, 12, 3);
  LeidenOptions o;
  o.max_cluster_size = 5;
  auto cold = HierarchicalLeiden(72, edges, o);
  ASSERT_TRUE(cold.ok());
  const auto prior = AsPrior(*cold);
  const LeidenStart start = StartFrom(72, prior);
  auto warm = HierarchicalLeiden(72, edges, o, &start);
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  EXPECT_GE(warm->modularity, cold->modularity - 1e-9);
  const auto ids = MatchClusterIds(*warm, prior);
  std::map<int64_t, std::vector<uint32_t>> after;
  for (size_t i = 0; i < warm->clusters.size(); ++i) after[ids[i]] = warm->clusters[i].members;
  // Level 0 is identical, ids included.
  for (const auto& c : cold->clusters) {
    if (c.level == 0) {
      EXPECT_EQ(after[100 + c.id], c.members);
    }
  }
}

TEST(LeidenTest, WarmStartAfterAddingNodesKeepsUntouchedCommunities) {
  // Six planted groups; then a seventh group joins, attached to group 0 only.
  auto edges = Planted(6, 12, 5);
  LeidenOptions o;
  o.max_cluster_size = 100;  // one level, to compare partitions directly
  auto before = HierarchicalLeiden(72, edges, o);
  ASSERT_TRUE(before.ok());
  const auto old_count = static_cast<int64_t>(before->clusters.size());
  ASSERT_GE(old_count, 6);
  AddClique(edges, 72, 6);
  edges.push_back({72, 0, 1.0});
  const auto prior = AsPrior(*before);
  const LeidenStart start = StartFrom(78, prior);
  auto after = HierarchicalLeiden(78, edges, o, &start);
  ASSERT_TRUE(after.ok());
  const auto ids = MatchClusterIds(*after, prior);
  int kept = 0;
  for (size_t i = 0; i < after->clusters.size(); ++i) {
    for (const auto& p : prior) {
      if (p.id == ids[i] && p.members == after->clusters[i].members) ++kept;
    }
  }
  EXPECT_GE(kept, old_count - 1) << "untouched groups should keep their community and id";
  // The new group got a new id above the old ones.
  std::set<int64_t> fresh;
  for (auto id : ids) {
    if (id >= 100 + old_count) fresh.insert(id);
  }
  EXPECT_EQ(fresh.size(), 1u);
}

TEST(LeidenTest, MatchClusterIdsNeedsEnoughOverlapAndUsesEachIdOnce) {
  ClusterHierarchy h;
  h.clusters.push_back({0, 0, -1, {0, 1, 2, 3}, {}});
  h.clusters.push_back({1, 0, -1, {4, 5}, {}});
  h.clusters.push_back({2, 0, -1, {6, 7, 8, 9}, {}});
  std::vector<PriorCluster> prior = {
      {7, 0, {0, 1, 2}},          // Jaccard 3/4 with cluster 0
      {9, 0, {3, 4, 5, 10, 11}},  // 2/6 with cluster 1: below 0.5
      {12, 0, {6, 7, 8, 9}},      // identical to cluster 2
      {3, 1, {0, 1, 2, 3}},       // another level: never matched at level 0
  };
  const auto ids = MatchClusterIds(h, prior);
  EXPECT_EQ(ids, (std::vector<int64_t>{7, 13, 12}));
}

TEST(LeidenTest, StartFromIgnoresNodesBeyondTheGraph) {
  std::vector<PriorCluster> prior = {{1, 0, {0, 1, 50}}, {2, 1, {0}}};
  const LeidenStart start = StartFrom(3, prior);
  ASSERT_EQ(start.levels.size(), 2u);
  EXPECT_EQ(start.levels[0], (std::vector<int32_t>{1, 1, -1}));
  EXPECT_EQ(start.levels[1], (std::vector<int32_t>{2, -1, -1}));
}

}  // namespace
}  // namespace grag
