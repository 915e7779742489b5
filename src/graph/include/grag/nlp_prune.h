// Pruning a graph built by the NLP extractor (no-LLM mode), as Microsoft GraphRAG's fast
// method does: PMI edge weights, then rare and isolated phrases and weak edges go. It works on
// the merged graph (grag/merge.h), so it belongs to the graph module; the extractor only makes
// the mentions.
#pragma once

#include <cstdint>

#include "grag/merge.h"

namespace grag {

struct NlpPruneOptions {
  // Entities mentioned in fewer distinct chunks are dropped, with their relationships.
  // Microsoft's default for the fast method: a phrase seen once is mostly noise. Document titles
  // (type "title") are never dropped, by this rule or the degree rule below.
  int64_t min_node_freq = 2;
  // A chunk whose names would all be dropped keeps its most frequent one (ties: the first by
  // key), exempt from both node rules: in a corpus of one short passage per document most
  // subjects occur once, and a chunk without a name cannot be reached through the graph.
  bool keep_sole_names = true;
  // Entities with fewer relationships are dropped. The degree is counted after the frequency
  // pruning (Microsoft counts it on the unpruned graph) and before the edge pruning, so, as in
  // Microsoft GraphRAG, an entity left without edges by the percentile below stays. Microsoft's
  // default 1: a phrase that co-occurs with nothing is no part of the graph.
  int64_t min_node_degree = 1;
  // Relationships whose weight is below this percentile (0-100, linear interpolation as numpy's
  // default) of the remaining relationships' weights are dropped; 0 keeps them all. Values
  // outside 0-100 are clamped. Microsoft's default.
  double min_edge_weight_pct = 40;
  // Replace each weight by Microsoft's PMI variant, p(x,y) * log2(p(x,y) / (p(x) p(y))), with
  // p(x,y) = weight / total weight and p(x) = frequency / total frequency, computed on the
  // unpruned graph; scaled by the total weight (weight * log2(...)), which changes neither the
  // ranking nor modularity but keeps values readable. Relationships with a PMI <= 0 (phrases
  // that co-occur no more than chance) are dropped, as community detection needs positive
  // weights. On by default, as in Microsoft GraphRAG (normalize_edge_weights): raw counts favour
  // whatever co-occurs with the most frequent phrase (the protagonist), and most pairs occur
  // once, so with counts the 40th percentile is the minimum weight and prunes nothing.
  bool pmi_weights = true;
};

struct NlpPruneStats {
  int64_t entities_before = 0;
  int64_t entities_after = 0;
  int64_t relationships_before = 0;
  int64_t relationships_after = 0;
  double edge_weight_threshold = 0;  // the percentile weight; edges below it were dropped
};

// Prunes a graph merged from NLP extractions (MergeMentions), in place: PMI weights (when
// asked), then entities below min_node_freq (frequency = distinct chunk_ids), then entities
// below min_node_degree, then relationships below the weight percentile. Relationships whose
// endpoints were dropped go too. Keeps the graph's sort order; deterministic. Thread-safe for
// distinct graphs.
NlpPruneStats PruneNlpGraph(MergedGraph& graph, const NlpPruneOptions& options);

}  // namespace grag
