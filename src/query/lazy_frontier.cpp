// Budgeted search's community tree, ranking and frontier.
#include "lazy_frontier.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <unordered_map>

namespace grag::query {

CommunityTree BuildCommunityTree(const std::vector<CommunityRecord>& communities,
                                 const std::map<int64_t, std::vector<std::string>>& chunks,
                                 const std::vector<std::string>& all_chunks) {
  CommunityTree tree;
  std::unordered_map<std::string, size_t> index_of;
  auto number = [&](const std::string& id) {
    auto [it, fresh] = index_of.emplace(id, tree.chunk_ids.size());
    if (fresh) tree.chunk_ids.push_back(id);
    return it->second;
  };
  for (const CommunityRecord& c : communities) {
    auto it = chunks.find(c.id);
    if (it == chunks.end() || it->second.empty()) continue;
    LazyCommunity& k = tree.communities[c.id];
    k.id = c.id;
    k.level = c.level;
    k.parent = c.parent_id;
    k.weight = std::max<int64_t>(c.weight, static_cast<int64_t>(it->second.size()));
    for (const std::string& id : it->second) k.chunks.push_back(number(id));
  }
  if (tree.communities.empty() && !all_chunks.empty()) {
    LazyCommunity& k = tree.communities[-1];
    k.id = -1;
    k.weight = static_cast<int64_t>(all_chunks.size());
    for (const std::string& id : all_chunks) k.chunks.push_back(number(id));
  }
  for (auto& [id, k] : tree.communities) {
    int64_t& m = tree.max_weight[k.level];
    m = std::max(m, k.weight);
    if (k.parent && tree.communities.count(*k.parent) != 0) {
      tree.communities[*k.parent].children.push_back(id);
    } else {
      tree.roots.push_back(id);
    }
  }
  return tree;
}

double RankCommunity(const CommunityTree& tree, const LazyCommunity& community,
                     const std::vector<double>& scores, int k, double prior_weight) {
  std::vector<double> s;
  s.reserve(community.chunks.size());
  for (size_t c : community.chunks) s.push_back(c < scores.size() ? scores[c] : 0.0);
  const size_t n = std::min(s.size(), static_cast<size_t>(std::max(1, k)));
  std::partial_sort(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n), s.end(),
                    std::greater<>());
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += s[i];
  const double mean = sum / static_cast<double>(std::max(1, k));
  double prior = 0;
  auto it = tree.max_weight.find(community.level);
  if (it != tree.max_weight.end() && it->second > 0) {
    prior = std::log1p(static_cast<double>(community.weight)) /
            std::log1p(static_cast<double>(it->second));
  }
  return mean + prior_weight * prior;
}

std::vector<size_t> TestQueue(const LazyCommunity& community, const std::vector<double>& scores,
                              const std::set<size_t>& tested, bool only_scored) {
  std::vector<size_t> out;
  for (size_t c : community.chunks) {
    if (tested.count(c) != 0) continue;
    const double s = c < scores.size() ? scores[c] : 0.0;
    if (only_scored && s <= 0) continue;
    out.push_back(c);
  }
  std::stable_sort(out.begin(), out.end(), [&](size_t a, size_t b) {
    const double sa = a < scores.size() ? scores[a] : 0.0;
    const double sb = b < scores.size() ? scores[b] : 0.0;
    return sa > sb;
  });
  return out;
}

void Frontier::Push(int64_t id, double rank) {
  if (dropped_.count(id) != 0) return;
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->id == id) {
      queue_.erase(it);
      break;
    }
  }
  queue_.insert({rank, id});
}

std::optional<std::pair<int64_t, double>> Frontier::Pop() {
  if (queue_.empty()) return std::nullopt;
  const Entry e = *queue_.begin();
  queue_.erase(queue_.begin());
  return std::make_pair(e.id, e.rank);
}

void Frontier::Drop(int64_t id) {
  std::vector<int64_t> stack = {id};
  while (!stack.empty()) {
    const int64_t k = stack.back();
    stack.pop_back();
    if (!dropped_.insert(k).second) continue;
    for (auto it = queue_.begin(); it != queue_.end();) {
      it = it->id == k ? queue_.erase(it) : std::next(it);
    }
    auto c = tree_.communities.find(k);
    if (c != tree_.communities.end()) {
      stack.insert(stack.end(), c->second.children.begin(), c->second.children.end());
    }
  }
}

}  // namespace grag::query
