// Internal to the report module: the graph snapshot a run works from, and prompt building.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grag/report.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag::report_internal {

// One table row without its local id: ",name,type,description,degree\n". The id is prepended
// when the table is written; ids are digits, which the cl100k/o200k pre-tokenisers always split
// from a following comma, so a row's tokens are Count(id) + body_tokens.
struct Row {
  std::string body;
  int64_t body_tokens = 0;
};

struct GraphEntity {
  int64_t id = 0;
  std::string name;
  int64_t degree = 0;  // relationships touching it, over the whole graph
  Row row;
  std::string brief;  // the description on one line, shortened (for stale-report notes)
};

struct GraphRelationship {
  int64_t id = 0;
  int64_t source_id = 0;
  int64_t target_id = 0;
  double weight = 0;
  int64_t combined_degree = 0;  // degree(source) + degree(target)
  Row row;
};

// The graph and hierarchy as read at the start of a run, with every row rendered and counted
// once. Immutable after LoadGraph: shared by all workers without locking.
struct ReportGraph {
  std::vector<GraphEntity> entities;
  std::unordered_map<int64_t, size_t> entity_index;  // entity id -> index in `entities`
  std::vector<GraphRelationship> relationships;
  // Entity id -> indices of the relationships whose smaller endpoint (source_id) it is, so each
  // internal relationship is found once, from its source.
  std::unordered_map<int64_t, std::vector<size_t>> relationships_from;
  std::vector<CommunityRecord> communities;             // as ListCommunities: coarsest first
  std::unordered_map<int64_t, size_t> community_index;  // community id -> index in `communities`
  std::unordered_map<int64_t, std::vector<int64_t>> children;  // community id -> child ids
};

// Reads entities, relationships and communities, renders and counts every row (on `workers`
// threads).
Result<ReportGraph> LoadGraph(Store& store, const Tokenizer& tokenizer, int workers);

// What a child contributes to its parent's prompt when substituted.
struct ChildReport {
  std::string full_content;
  std::string input_hash;
};
// Community id -> its ok report. Read-only while a level is being built.
using ChildReports = std::unordered_map<int64_t, ChildReport>;

// The prompt of `community` within `options.max_context_tokens` (see grag/report.h).
ReportInput BuildReportInput(const ReportGraph& graph, const CommunityRecord& community,
                             const ChildReports& reports, const Tokenizer& tokenizer,
                             const ReportOptions& options, std::string_view model_name);

}  // namespace grag::report_internal
