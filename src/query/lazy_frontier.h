// Internal to budgeted search: the community hierarchy as budgeted search walks it, the ranking
// of communities by their passages, and the best-first frontier. Pure (no store, no model), so
// the tests check each rule on its own.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "grag/store_types.h"

namespace grag::query {

struct LazyCommunity {
  int64_t id = 0;
  int64_t level = 0;
  std::optional<int64_t> parent;
  int64_t weight = 0;             // distinct chunks of its members
  std::vector<size_t> chunks;     // indices into CommunityTree::chunk_ids, document order
  std::vector<int64_t> children;  // ascending
};

// Communities with their chunks. Chunks are numbered in first-seen order (document order within
// a community); `chunk_ids[i]` is chunk i's id.
struct CommunityTree {
  std::map<int64_t, LazyCommunity> communities;
  std::vector<std::string> chunk_ids;
  std::vector<int64_t> roots;  // communities without a (known) parent, ascending
  // Largest weight at each level: the prior's denominator.
  std::map<int64_t, int64_t> max_weight;
};

// Builds the tree from ListCommunities (members unused) and CommunityChunks. A community with no
// chunk is left out (nothing to test), its children attached to its parent's place as roots when
// the parent is missing. With no community at all, `all_chunks` (document order) become one root
// community with id -1, so an index without communities can still be searched.
CommunityTree BuildCommunityTree(const std::vector<CommunityRecord>& communities,
                                 const std::map<int64_t, std::vector<std::string>>& chunks,
                                 const std::vector<std::string>& all_chunks = {});

// rank(K) = mean of K's best `k` chunk scores (zeros count when K has fewer than k scored chunks)
//         + prior_weight x log(1 + weight) / log(1 + max weight at K's level).
// `scores[i]` is chunk i's s(c) in [0, 1].
double RankCommunity(const CommunityTree& tree, const LazyCommunity& community,
                     const std::vector<double>& scores, int k, double prior_weight);

// K's chunks in test order: s(c) descending, then document order (their index), leaving out
// those in `tested`. `only_scored`: only chunks with s(c) > 0.
std::vector<size_t> TestQueue(const LazyCommunity& community, const std::vector<double>& scores,
                              const std::set<size_t>& tested, bool only_scored);

// The communities waiting to be tested, best rank first (ties: lower id first). A dropped
// community (and everything under it) is never pushed again.
class Frontier {
 public:
  explicit Frontier(const CommunityTree& tree) : tree_(tree) {}
  void Push(int64_t id, double rank);
  // The best community, removed; nullopt when empty.
  std::optional<std::pair<int64_t, double>> Pop();
  // Drops `id` and its whole subtree, those already queued included.
  void Drop(int64_t id);
  bool empty() const { return queue_.empty(); }
  size_t size() const { return queue_.size(); }
  bool dropped(int64_t id) const { return dropped_.count(id) != 0; }

 private:
  struct Entry {
    double rank;
    int64_t id;
    bool operator<(const Entry& o) const { return rank != o.rank ? rank > o.rank : id < o.id; }
  };
  const CommunityTree& tree_;
  std::set<Entry> queue_;
  std::set<int64_t> dropped_;
};

}  // namespace grag::query
