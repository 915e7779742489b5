// The one place results become JSON: `--json` output of the CLI and the HTTP API's bodies.
// The shapes are documented in the README; keep them stable (front ends parse them).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grag/engine.h"
#include "grag/project.h"
#include "grag/search_results.h"

namespace grag {

// pretty: indented for people (a terminal); else one line.
std::string QueryResultJson(const QueryResult& result, std::string_view question, bool pretty);
std::string RetrievalResultJson(const RetrievalResult& result, std::string_view question,
                                bool pretty);
std::string QueryRouteJson(const QueryRoute& route, std::string_view question, bool pretty);

// What an OpenAI-compatible chat answer carries besides the answer: the citations as
// QueryResultJson writes them (a JSON array), "Sources:" lines to end the answer with ("" when
// nothing is cited), and the tokens the answer's model calls spent (0 without a model).
struct ChatAnswerParts {
  std::string citations_json = "[]";
  std::string sources_text;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};
ChatAnswerParts ChatAnswer(const QueryResult& result, std::string_view question);

// grag index / add / remove: the run's summary, with the plan it started from when given.
std::string IndexSummaryJson(const IndexSummary& summary, const IndexPlan* plan, bool pretty);
std::string IndexPlanJson(const IndexPlan& plan, bool pretty);
std::string IndexStatsJson(const IndexStats& stats, bool pretty);
// grag cache prune --json.
std::string CachePruneJson(const CachePruneResult& result, bool pretty);
std::string DocumentsJson(const std::vector<DocumentInfo>& documents, bool pretty);
// The first `limit` entities.
std::string EntitiesJson(const std::vector<EntityListing>& entities, size_t limit, bool pretty);
std::string AliasesJson(const AliasListing& listing, bool pretty);
std::string IntegrityJson(const IntegrityReport& report, std::string_view index, bool pretty);
// grag doctor, GET /v1/doctor.
std::string DoctorJson(const DoctorReport& report, bool pretty);
std::string ChunkPreviewJson(const ChunkPreview& preview, bool pretty);
std::string SettingsJson(const std::vector<SettingInfo>& settings, bool pretty);
// The graph for front ends (HTTP API, MCP, web UI).
std::string EntityDetailJson(const EntityDetail& detail, bool pretty);
std::string RelationshipsJson(const std::vector<RelationshipInfo>& relationships, bool pretty);
std::string CommunitiesJson(const std::vector<CommunityInfo>& communities, bool pretty);
std::string CommunityDetailJson(const CommunityDetail& detail, bool pretty);
std::string ChunkJson(const ChunkRecord& chunk, bool pretty);
std::string DocumentDetailJson(const DocumentDetail& detail, bool pretty);
// {id, title, source_path, content_hash, file, note, characters, bytes, text}: GET
// /v1/documents/{id}/text (docs/server.md).
std::string DocumentTextJson(const DocumentText& text, bool pretty);
std::string GraphViewJson(const GraphView& view, bool pretty);
// grag export: the files written and what each holds.
std::string ExportSummaryJson(const ExportSummary& summary, bool pretty);
// grag sql: the rows as an array of objects keyed by column (NULL as null). The truncation is
// not in the array; callers say it elsewhere (stderr).
std::string SqlRowsJson(const SqlRows& rows, bool pretty);
std::string InitJson(const InitResult& result, std::string_view root, bool pretty);
std::string WorkspacesJson(const std::vector<WorkspaceInfo>& workspaces, bool pretty);

}  // namespace grag
