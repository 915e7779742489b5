#include "ppr.h"

#include <algorithm>
#include <deque>

namespace grag::query {

std::vector<std::pair<uint32_t, double>> PersonalizedPageRank(
    const TransitionGraph& graph, std::span<const std::pair<uint32_t, double>> seeds,
    const PprOptions& options) {
  const size_t n = graph.nodes();
  std::vector<std::pair<uint32_t, double>> out;
  double total = 0;
  for (const auto& [node, w] : seeds) {
    if (node < n && w > 0) total += w;
  }
  if (total <= 0) return out;

  std::vector<double> residual(n, 0.0);
  std::vector<double> estimate(n, 0.0);
  std::vector<uint8_t> queued(n, 0);
  std::vector<uint32_t> touched;
  std::deque<uint32_t> queue;
  auto threshold = [&](uint32_t u) {
    const uint32_t degree = graph.offsets[u + 1] - graph.offsets[u];
    return options.epsilon * std::max<uint32_t>(1, degree);
  };
  auto touch = [&](uint32_t u) {
    if (residual[u] == 0 && estimate[u] == 0) touched.push_back(u);
  };
  for (const auto& [node, w] : seeds) {
    if (node >= n || w <= 0) continue;
    touch(node);
    residual[node] += w / total;
  }
  for (uint32_t u : touched) {
    if (residual[u] >= threshold(u) && !queued[u]) {
      queued[u] = 1;
      queue.push_back(u);
    }
  }
  const double stop = 1.0 - options.damping;
  size_t pushes = 0;
  while (!queue.empty() && pushes < options.max_pushes) {
    const uint32_t u = queue.front();
    queue.pop_front();
    queued[u] = 0;
    const double r = residual[u];
    residual[u] = 0;
    const uint32_t begin = graph.offsets[u];
    const uint32_t end = graph.offsets[u + 1];
    if (begin == end) {  // nowhere to go: the walk stops here
      estimate[u] += r;
      continue;
    }
    estimate[u] += stop * r;
    const double spread = options.damping * r;
    for (uint32_t e = begin; e < end; ++e) {
      const uint32_t v = graph.targets[e];
      touch(v);
      residual[v] += spread * graph.probabilities[e];
      if (!queued[v] && residual[v] >= threshold(v)) {
        queued[v] = 1;
        queue.push_back(v);
      }
    }
    pushes += end - begin;
  }
  out.reserve(touched.size());
  for (uint32_t u : touched) {
    // What is left unpushed counts where it lies: a small, local error.
    const double score = estimate[u] + residual[u];
    if (score > 0) out.emplace_back(u, score);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  return out;
}

}  // namespace grag::query
