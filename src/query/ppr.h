// Personalised PageRank by forward push (Andersen, Chung and Lang, FOCS 2006), internal to the
// query module.
//
// A walk starts at a seed (chosen by the seed weights), continues along an out-edge with
// probability `damping` (the edge picked by its transition probability) and stops otherwise;
// a node's score is the probability that the walk stops there. Forward push computes it
// locally: only nodes that receive at least `epsilon` of mass (relative to their out-degree)
// are ever touched, so a query costs microseconds to milliseconds whatever the graph's size,
// where a power iteration over the whole graph (igraph's PRPACK) costs time proportional to
// it. The result differs from the exact vector by at most epsilon × out-degree per node (the
// mass left unpushed); tests compare it with igraph's exact answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace grag::query {

// A directed graph whose out-edges of each node carry transition probabilities summing to 1
// (or no out-edges: a walk that reaches such a node stops there).
struct TransitionGraph {
  std::vector<uint32_t> offsets;  // node u's edges are [offsets[u], offsets[u+1])
  std::vector<uint32_t> targets;
  std::vector<float> probabilities;
  size_t nodes() const { return offsets.empty() ? 0 : offsets.size() - 1; }
};

struct PprOptions {
  double damping = 0.5;  // HippoRAG's: a walk rarely needs more than two or three steps
  double epsilon = 1e-6;
  size_t max_pushes = 2'000'000;  // a bound on the work, whatever epsilon says
};

// Scores of the nodes the walk reached, highest first (ties by node). `seeds` are (node,
// weight) with weights >= 0, normalised here; nodes out of range are ignored. Thread-safe: the
// graph is only read.
std::vector<std::pair<uint32_t, double>> PersonalizedPageRank(
    const TransitionGraph& graph, std::span<const std::pair<uint32_t, double>> seeds,
    const PprOptions& options = {});

}  // namespace grag::query
