// The index's tables as both backends hold them (grag/store_tables.h). Keep in step with
// sqlite/schema.cpp and postgres/postgres_schema.cpp: a column missing here is not copied.
#include "grag/store_tables.h"

#include "table_sql.h"

namespace grag {

namespace {

constexpr ColumnType I = ColumnType::kInt;
constexpr ColumnType R = ColumnType::kReal;
constexpr ColumnType T = ColumnType::kText;
constexpr ColumnType B = ColumnType::kBool;
constexpr ColumnType J = ColumnType::kJson;
constexpr ColumnType V = ColumnType::kVector;

void Add(std::vector<IndexTable>& t, std::string_view name, std::vector<IndexColumn> columns,
         std::string_view order_by) {
  IndexTable& table = t.emplace_back();
  table.name = name;
  table.columns = std::move(columns);
  table.order_by = order_by;
}

std::vector<IndexTable> MakeTables() {
  std::vector<IndexTable> t;
  Add(t, "meta", {{"key", T}, {"value", T}}, "key");
  // schema_version and migrated_at describe the backend's own schema;
  // compact_requested asks the SQLite file's next index run to compact it.
  t.back().exclude = "key IN ('schema_version', 'migrated_at', 'compact_requested')";
  t.back().preset_keys = {"created_by", "created_at"};
  Add(t, "documents",
      {{"id", T},
       {"title", T},
       {"source_path", T},
       {"content_hash", T},
       {"text", T},
       {"created_at", T},
       {"updated_at", T}},
      "id");
  Add(t, "chunks",
      {{"seq", I},
       {"id", T},
       {"document_id", T},
       {"chunk_index", I},
       {"text", T},
       {"n_tokens", I},
       {"start_token", I},
       {"created_at", T},
       {"start_byte", I},
       {"end_byte", I}},
      "seq");
  Add(t, "extractions",
      {{"id", I},
       {"chunk_id", T},
       {"extractor", T},
       {"model", T},
       {"status", T},
       {"reason", T},
       {"gleaning_rounds", I},
       {"params_hash", T},
       {"created_at", T}},
      "id");
  // Mentions without their row ids: the SQLite store keeps an extraction's mentions in one
  // value (its schema 11), so their order within the extraction is what the two forms share.
  Add(t, "entity_mentions",
      {{"extraction_id", I}, {"name", T}, {"name_key", T}, {"type", T}, {"description", T}},
      "extraction_id, id");
  Add(t, "relationship_mentions",
      {{"extraction_id", I},
       {"source", T},
       {"target", T},
       {"source_key", T},
       {"target_key", T},
       {"description", T},
       {"strength", R}},
      "extraction_id, id");
  Add(t, "entities",
      {{"id", I},
       {"name_key", T},
       {"name", T},
       {"type", T},
       {"type_counts", T},
       {"description", T},
       {"description_hash", T},
       {"description_model", T},
       {"description_basis", T},
       {"degree", I},
       {"frequency", I}},
      "id");
  Add(t, "relationships",
      {{"id", I},
       {"source_id", I},
       {"target_id", I},
       {"description", T},
       {"description_hash", T},
       {"description_model", T},
       {"description_basis", T},
       {"weight", R},
       {"frequency", I}},
      "id");
  Add(t, "entity_chunks", {{"entity_id", I}, {"chunk_id", T}}, "entity_id, chunk_id");
  Add(t, "relationship_chunks", {{"relationship_id", I}, {"chunk_id", T}},
      "relationship_id, chunk_id");
  Add(t, "clusterings",
      {{"id", I},
       {"method", T},
       {"seed", I},
       {"resolution", R},
       {"max_cluster_size", I},
       {"modularity", R},
       {"warm_start", B},
       {"note", T},
       {"graph_hash", T},
       {"fresh_modularity", R},
       {"created_at", T}},
      "id");
  Add(t, "communities",
      {{"id", I},
       {"level", I},
       {"parent_id", I},
       {"size", I},
       {"weight", I},
       {"clustering_id", I},
       {"created_at", T},
       {"updated_at", T}},
      "id");
  Add(t, "community_members", {{"community_id", I}, {"entity_id", I}}, "community_id, entity_id");
  Add(t, "reports",
      {{"community_id", I},
       {"status", T},
       {"reason", T},
       {"title", T},
       {"summary", T},
       {"full_content", T},
       {"findings", T},
       {"rating", R},
       {"rating_explanation", T},
       {"input_hash", T},
       {"generator", T},
       {"model", T},
       {"stale", B},
       {"basis", T},
       {"stale_note", T},
       {"created_at", T},
       {"updated_at", T}},
      "community_id");
  Add(t, "embeddings",
      {{"owner_kind", T},
       {"owner_id", T},
       {"model", T},
       {"dimension", I},
       {"vector", V},
       {"input_hash", T}},
      "owner_kind, owner_id");
  Add(t, "llm_cache", {{"key", T}, {"value", T}, {"model", T}, {"kind", T}, {"created_at", T}},
      "key");
  Add(t, "runs",
      {{"id", I},
       {"command", T},
       {"status", T},
       {"stage", T},
       {"message", T},
       {"counters", J},
       {"started_at", T},
       {"finished_at", T}},
      "id");
  // Listed in insertion order (ListStageProgress's order), which a copy keeps.
  Add(t, "run_stages",
      {{"run_id", I},
       {"stage", T},
       {"status", T},
       {"done", I},
       {"total", I},
       {"checkpoint", T},
       {"started_at", T},
       {"updated_at", T}},
      "");
  Add(t, "entity_aliases",
      {{"name_key", T},
       {"name", T},
       {"canonical_key", T},
       {"score", R},
       {"method", T},
       {"reason", T}},
      "name_key");
  Add(t, "resolution_links",
      {{"key_a", T}, {"key_b", T}, {"score", R}, {"method", T}, {"reason", T}, {"created_at", T}},
      "key_a, key_b");
  Add(t, "entity_overrides", {{"key_a", T}, {"key_b", T}, {"decision", T}, {"created_at", T}},
      "key_a, key_b");
  return t;
}

}  // namespace

const std::vector<IndexTable>& IndexTables() {
  static const std::vector<IndexTable> tables = MakeTables();
  return tables;
}

}  // namespace grag

namespace grag::store {

std::string ColumnList(const IndexTable& table, std::string_view json_suffix) {
  std::string out;
  for (const IndexColumn& c : table.columns) {
    if (!out.empty()) out += ", ";
    out += c.name;
    if (c.type == ColumnType::kJson) out += json_suffix;
  }
  return out;
}

std::string ExcludeClause(const IndexTable& table) {
  return table.exclude.empty() ? std::string() : " WHERE NOT (" + std::string(table.exclude) + ")";
}

}  // namespace grag::store
