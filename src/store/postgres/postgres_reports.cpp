// PostgresStore: communities, reports, embeddings and runs.
#include "postgres_store_internal.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "../community_checks.h"
#include "../group_commit.h"
#include "../json_fields.h"
#include "../names.h"
#include "../neighbourhood.h"
#include "../table_sql.h"
#include "grag/hash.h"
#include "grag/log.h"
#include "grag/utf8_sequence.h"
#include "postgres_schema.h"

namespace grag::store::postgres_internal {

// ---------------------------------------------------------------- communities

Result<int64_t> PostgresStore::ReplaceCommunities(const ClusteringRecord& clustering,
                                                  const std::vector<CommunityRecord>& communities) {
  GRAG_RETURN_IF_ERROR(store::CheckCommunityHierarchy(communities));
  std::unordered_set<int64_t> kept;  // the new hierarchy's ids
  for (const CommunityRecord& c : communities) kept.insert(c.id);

  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_ASSIGN_OR_RETURN(
      const int64_t clustering_id,
      conn_.QueryInt("INSERT INTO clusterings (id, method, seed, resolution, max_cluster_size, "
                     "modularity, warm_start, note, graph_hash, fresh_modularity) VALUES ((SELECT "
                     "coalesce(max(id), 0) + 1 FROM clusterings), $1, $2, $3, $4, $5, $6, $7, "
                     "$8, $9) RETURNING id",
                     {clustering.method, clustering.seed, clustering.resolution,
                      clustering.max_cluster_size, clustering.modularity, clustering.warm_start,
                      clustering.note, clustering.graph_hash, clustering.fresh_modularity}));
  // Upsert first and delete afterwards: a kept community whose old parent goes must already
  // point at its new parent, or the parent's ON DELETE CASCADE would take it (and its report).
  for (const CommunityRecord& c : communities) {
    GRAG_RETURN_IF_ERROR(conn_.Exec(
        "INSERT INTO communities (id, level, parent_id, clustering_id) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (id) DO UPDATE SET level = excluded.level, parent_id = excluded.parent_id, "
        "clustering_id = excluded.clustering_id, updated_at = grag_now()",
        {c.id, c.level, c.parent_id, clustering_id}));
    GRAG_RETURN_IF_ERROR(
        conn_.Exec("DELETE FROM community_members WHERE community_id = $1", {c.id}));
    if (c.entity_ids.empty()) continue;
    std::vector<std::string> ids;
    for (int64_t e : c.entity_ids) ids.push_back(std::to_string(e));
    Status st = conn_.Exec(
        "INSERT INTO community_members (community_id, entity_id) SELECT $1::bigint, e FROM "
        "unnest($2::bigint[]) AS e ON CONFLICT DO NOTHING",
        {c.id, pq::TextArray(ids)});
    if (!st.ok()) {
      return st.WithContext("community " + std::to_string(c.id) +
                            " members (do the entities exist?)");
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(Rows all, conn_.Query("SELECT id FROM communities"));
    std::vector<std::string> stale;
    for (int i = 0; i < all.size(); ++i) {
      if (kept.count(all.Int(i, 0)) == 0) stale.push_back(all.Text(i, 0));
    }
    if (!stale.empty()) {
      GRAG_RETURN_IF_ERROR(conn_.Exec("DELETE FROM communities WHERE id = ANY($1::bigint[])",
                                      {pq::TextArray(stale)}));
    }
  }
  GRAG_RETURN_IF_ERROR(conn_.Exec(
      "UPDATE communities c SET size = coalesce(s.size, 0), weight = coalesce(s.weight, 0) "
      "FROM communities x LEFT JOIN (SELECT m.community_id, count(DISTINCT m.entity_id) AS size, "
      "count(DISTINCT l.chunk_id) AS weight FROM community_members m LEFT JOIN entity_chunks l "
      "ON l.entity_id = m.entity_id GROUP BY m.community_id) s ON s.community_id = x.id "
      "WHERE c.id = x.id"));
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return clustering_id;
}

Result<std::vector<CommunityRecord>> PostgresStore::ListCommunities(std::optional<int64_t> level) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  std::vector<CommunityRecord> out;
  std::unordered_map<int64_t, size_t> index_of;
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT id, level, parent_id, size, weight, clustering_id FROM communities "
                        "WHERE $1::bigint IS NULL OR level = $1 ORDER BY level, id",
                        {level}));
  for (int i = 0; i < rows.size(); ++i) {
    CommunityRecord& c = out.emplace_back();
    c.id = rows.Int(i, 0);
    c.level = rows.Int(i, 1);
    c.parent_id = rows.OptInt(i, 2);
    c.size = rows.Int(i, 3);
    c.weight = rows.Int(i, 4);
    c.clustering_id = rows.OptInt(i, 5).value_or(0);
    index_of[c.id] = out.size() - 1;
  }
  GRAG_ASSIGN_OR_RETURN(
      Rows members,
      read.conn().Query(
          "SELECT m.community_id, m.entity_id FROM community_members m JOIN communities "
          "c ON c.id = m.community_id WHERE $1::bigint IS NULL OR c.level = $1 "
          "ORDER BY m.community_id, m.entity_id",
          {level}));
  for (int i = 0; i < members.size(); ++i) {
    auto it = index_of.find(members.Int(i, 0));
    if (it != index_of.end()) out[it->second].entity_ids.push_back(members.Int(i, 1));
  }
  return out;
}

Result<std::vector<int64_t>> PostgresStore::CommunitiesOfEntity(int64_t entity_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT c.id FROM community_members m JOIN communities c ON c.id = "
                        "m.community_id WHERE m.entity_id = $1 ORDER BY c.level, c.id",
                        {entity_id}));
  std::vector<int64_t> out;
  for (int i = 0; i < rows.size(); ++i) out.push_back(rows.Int(i, 0));
  return out;
}

Result<std::map<int64_t, std::vector<std::string>>> PostgresStore::CommunityChunks(
    std::optional<int64_t> level) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  std::string sql =
      "SELECT k.community_id, k.chunk_id FROM (SELECT DISTINCT m.community_id, l.chunk_id FROM "
      "community_members m JOIN entity_chunks l ON l.entity_id = m.entity_id";
  if (level) sql += " JOIN communities o ON o.id = m.community_id WHERE o.level = $1";
  sql +=
      ") k JOIN chunks c ON c.id = k.chunk_id ORDER BY k.community_id, c.document_id, "
      "c.chunk_index";
  Args args;
  if (level) args.emplace_back(*level);
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query(sql, args));
  std::map<int64_t, std::vector<std::string>> out;
  for (int i = 0; i < rows.size(); ++i) out[rows.Int(i, 0)].push_back(rows.Text(i, 1));
  return out;
}

Result<std::optional<ClusteringRecord>> PostgresStore::LatestClustering() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT id, method, seed, resolution, max_cluster_size, modularity, "
                        "warm_start, note, created_at, graph_hash, fresh_modularity "
                        "FROM clusterings ORDER BY id DESC LIMIT 1"));
  if (rows.empty()) return std::optional<ClusteringRecord>();
  ClusteringRecord c;
  c.id = rows.Int(0, 0);
  c.method = rows.Text(0, 1);
  c.seed = rows.Int(0, 2);
  c.resolution = rows.Double(0, 3);
  c.max_cluster_size = rows.Int(0, 4);
  c.modularity = rows.OptDouble(0, 5);
  c.warm_start = rows.Bool(0, 6);
  c.note = rows.Text(0, 7);
  c.created_at = rows.Text(0, 8);
  c.graph_hash = rows.Text(0, 9);
  c.fresh_modularity = rows.OptDouble(0, 10);
  return std::optional<ClusteringRecord>(std::move(c));
}

// ---------------------------------------------------------------- reports

constexpr std::string_view kReportSelect =
    "SELECT r.community_id, r.status, r.reason, r.title, r.summary, r.full_content, r.findings, "
    "r.rating, r.rating_explanation, r.input_hash, r.generator, r.model, c.level, r.updated_at, "
    "r.stale, r.basis, r.stale_note FROM reports r JOIN communities c ON c.id = r.community_id ";

// `findings`: false leaves them out where full_content holds the rendering, and the basis out
// (ListReports for global search's prompts).
ReportRecord ReadReport(const Rows& rows, int i, bool findings = true) {
  ReportRecord r;
  r.community_id = rows.Int(i, 0);
  r.status = ParseReportStatus(rows.View(i, 1));
  r.reason = rows.Text(i, 2);
  r.title = rows.Text(i, 3);
  r.summary = rows.Text(i, 4);
  r.full_content = rows.Text(i, 5);
  if (findings || r.full_content.empty()) r.findings = FindingsFromJson(rows.View(i, 6));
  r.rating = rows.OptDouble(i, 7);
  r.rating_explanation = rows.Text(i, 8);
  r.input_hash = rows.Text(i, 9);
  r.generator = ParseReportGenerator(rows.View(i, 10));
  r.model = rows.Text(i, 11);
  r.level = rows.Int(i, 12);
  r.updated_at = rows.Text(i, 13);
  r.stale = rows.Bool(i, 14);
  if (findings) r.basis = ReportBasisFromJson(rows.View(i, 15));
  r.stale_note = rows.Text(i, 16);
  if (r.stale && !r.stale_note.empty()) r.full_content += "\n\n" + r.stale_note;
  return r;
}

Status PostgresStore::PutReport(const ReportRecord& r) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_ASSIGN_OR_RETURN(Rows found,
                        conn_.Query("SELECT 1 FROM communities WHERE id = $1", {r.community_id}));
  if (found.empty()) {
    return Status::InvalidArgument("no community " + std::to_string(r.community_id) +
                                   " for a report");
  }
  GRAG_RETURN_IF_ERROR(conn_.Exec(
      "INSERT INTO reports (community_id, status, reason, title, summary, full_content, "
      "findings, rating, rating_explanation, input_hash, generator, model, stale, basis) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) "
      "ON CONFLICT (community_id) DO UPDATE SET status = excluded.status, "
      "reason = excluded.reason, title = excluded.title, summary = excluded.summary, "
      "full_content = excluded.full_content, findings = excluded.findings, "
      "rating = excluded.rating, rating_explanation = excluded.rating_explanation, "
      "input_hash = excluded.input_hash, generator = excluded.generator, "
      "model = excluded.model, stale = excluded.stale, basis = excluded.basis, "
      "stale_note = '', updated_at = grag_now()",
      {r.community_id, ReportStatusName(r.status), r.reason, r.title, r.summary, r.full_content,
       FindingsToJson(r.findings), r.rating, r.rating_explanation, r.input_hash,
       ReportGeneratorName(r.generator), r.model, r.stale, ReportBasisToJson(r.basis)}));
  return tx.Commit();
}

Status PostgresStore::MarkReportStale(int64_t community_id, std::string_view note) {
  return Write("UPDATE reports SET stale = true, stale_note = $1 WHERE community_id = $2",
               {note, community_id})
      .status();
}

Result<std::optional<ReportRecord>> PostgresStore::GetReport(int64_t community_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query(std::string(kReportSelect) + "WHERE r.community_id = $1", {community_id}));
  if (rows.empty()) return std::optional<ReportRecord>();
  return std::optional<ReportRecord>(ReadReport(rows, 0));
}

Result<std::vector<ReportRecord>> PostgresStore::ListReports(std::optional<int64_t> level,
                                                             bool findings) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query(std::string(kReportSelect) +
                                                         "WHERE $1::bigint IS NULL OR c.level = $1 "
                                                         "ORDER BY c.level, r.community_id",
                                                     {level}));
  std::vector<ReportRecord> out;
  for (int i = 0; i < rows.size(); ++i) out.push_back(ReadReport(rows, i, findings));
  return out;
}

// ---------------------------------------------------------------- embeddings

std::string SpaceName(EmbeddingOwner owner, std::string_view model, int64_t dimension) {
  return std::string(EmbeddingOwnerName(owner)) + " embeddings of model " + std::string(model) +
         " (dimension " + std::to_string(dimension) + ")";
}

constexpr std::string_view kEmbeddingColumns =
    "owner_kind, owner_id, model, dimension, vector, input_hash";

EmbeddingRecord ReadEmbedding(const Rows& rows, int i) {
  EmbeddingRecord r;
  r.owner = ParseEmbeddingOwner(rows.View(i, 0));
  r.owner_id = rows.Text(i, 1);
  r.model = rows.Text(i, 2);
  r.vector = pq::ParseRealArray(rows.View(i, 4));
  r.input_hash = rows.Text(i, 5);
  return r;
}

Status PostgresStore::PutEmbeddings(const std::vector<EmbeddingRecord>& records) {
  std::map<EmbeddingOwner, std::pair<std::string, int64_t>> batch_space;
  for (const EmbeddingRecord& r : records) {
    if (r.owner_id.empty() || r.model.empty() || r.vector.empty()) {
      return Status::InvalidArgument("an embedding needs an owner id, a model and a vector");
    }
    const int64_t dim = static_cast<int64_t>(r.vector.size());
    auto [it, added] = batch_space.try_emplace(r.owner, r.model, dim);
    if (!added && (it->second.first != r.model || it->second.second != dim)) {
      return Status::InvalidArgument("one batch mixes " +
                                     SpaceName(r.owner, it->second.first, it->second.second) +
                                     " with " + SpaceName(r.owner, r.model, dim));
    }
  }
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  for (const auto& [owner, space] : batch_space) {
    GRAG_ASSIGN_OR_RETURN(
        Rows rows,
        conn_.Query("SELECT model, dimension FROM embeddings WHERE owner_kind = $1 LIMIT 1",
                    {EmbeddingOwnerName(owner)}));
    if (!rows.empty() && (rows.View(0, 0) != space.first || rows.Int(0, 1) != space.second)) {
      return Status::InvalidArgument(
          "the index holds " + SpaceName(owner, rows.View(0, 0), rows.Int(0, 1)) + "; refusing " +
          SpaceName(owner, space.first, space.second) +
          ": vectors of different models cannot be compared (delete the old ones to switch)");
    }
  }
  for (const EmbeddingRecord& r : records) {
    GRAG_RETURN_IF_ERROR(conn_.Exec(
        "INSERT INTO embeddings (owner_kind, owner_id, model, dimension, vector, input_hash) "
        "VALUES ($1, $2, $3, $4, $5::real[], $6) ON CONFLICT (owner_kind, owner_id) DO UPDATE "
        "SET model = excluded.model, dimension = excluded.dimension, vector = excluded.vector, "
        "input_hash = excluded.input_hash, created_at = grag_now()",
        {EmbeddingOwnerName(r.owner), r.owner_id, r.model, static_cast<int64_t>(r.vector.size()),
         pq::RealArray(r.vector), r.input_hash}));
  }
  return tx.Commit();
}

Result<std::optional<EmbeddingRecord>> PostgresStore::GetEmbedding(EmbeddingOwner owner,
                                                                   std::string_view owner_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows,
                        read.conn().Query("SELECT " + std::string(kEmbeddingColumns) +
                                              " FROM embeddings WHERE owner_kind = $1 AND "
                                              "owner_id = $2",
                                          {EmbeddingOwnerName(owner), owner_id}));
  if (rows.empty()) return std::optional<EmbeddingRecord>();
  return std::optional<EmbeddingRecord>(ReadEmbedding(rows, 0));
}

Result<std::vector<EmbeddingRecord>> PostgresStore::ListEmbeddings(EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query("SELECT " + std::string(kEmbeddingColumns) +
                                                         " FROM embeddings WHERE owner_kind = $1 "
                                                         "ORDER BY owner_id",
                                                     {EmbeddingOwnerName(owner)}));
  std::vector<EmbeddingRecord> out;
  out.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) out.push_back(ReadEmbedding(rows, i));
  return out;
}

Result<std::map<std::string, std::string>> PostgresStore::ListEmbeddingHashes(
    EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT owner_id, input_hash FROM embeddings WHERE owner_kind = $1",
                        {EmbeddingOwnerName(owner)}));
  std::map<std::string, std::string> out;
  for (int i = 0; i < rows.size(); ++i) out.emplace(rows.Text(i, 0), rows.Text(i, 1));
  return out;
}

Result<std::optional<EmbeddingSpace>> PostgresStore::GetEmbeddingSpace(EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT model, dimension, (SELECT count(*) FROM embeddings WHERE "
                        "owner_kind = $1) FROM embeddings WHERE owner_kind = $1 LIMIT 1",
                        {EmbeddingOwnerName(owner)}));
  if (rows.empty()) return std::optional<EmbeddingSpace>();
  return std::optional<EmbeddingSpace>(
      EmbeddingSpace{rows.Text(0, 0), rows.Int(0, 1), rows.Int(0, 2)});
}

Result<int64_t> PostgresStore::DeleteEmbeddings(EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(Rows rows, Write("DELETE FROM embeddings WHERE owner_kind = $1",
                                         {EmbeddingOwnerName(owner)}));
  return rows.Affected();
}

Result<int64_t> PostgresStore::DeleteEmbeddingsOf(EmbeddingOwner owner,
                                                  const std::vector<std::string>& owner_ids) {
  if (owner_ids.empty()) return int64_t{0};
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      Write("DELETE FROM embeddings WHERE owner_kind = $1 AND owner_id = ANY($2::text[])",
            {EmbeddingOwnerName(owner), pq::TextArray(owner_ids)}));
  return rows.Affected();
}

// ---------------------------------------------------------------- runs

constexpr std::string_view kRunColumns =
    "id, command, status, stage, message, counters::text, started_at, finished_at";

RunRecord ReadRun(const Rows& rows, int i) {
  RunRecord r;
  r.id = rows.Int(i, 0);
  r.command = rows.Text(i, 1);
  r.status = ParseRunStatus(rows.View(i, 2));
  r.stage = rows.Text(i, 3);
  r.message = rows.Text(i, 4);
  r.counters = CountsFromJson(rows.View(i, 5));
  r.started_at = rows.Text(i, 6);
  r.finished_at = rows.IsNull(i, 7) ? std::string() : rows.Text(i, 7);
  return r;
}

Result<int64_t> PostgresStore::BeginRun(std::string_view command) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_RETURN_IF_ERROR(conn_.Exec(
      "UPDATE runs SET status = 'interrupted', finished_at = grag_now() WHERE status = 'running'"));
  GRAG_ASSIGN_OR_RETURN(
      const int64_t id,
      conn_.QueryInt("INSERT INTO runs (id, command, status) VALUES ((SELECT coalesce(max(id), 0) "
                     "+ 1 FROM runs), $1, 'running') RETURNING id",
                     {command}));
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return id;
}

Status PostgresStore::UpdateRun(int64_t run_id, std::string_view stage,
                                const std::map<std::string, int64_t>& counters) {
  GRAG_ASSIGN_OR_RETURN(Rows rows,
                        Write("UPDATE runs SET stage = CASE WHEN $2 = '' THEN stage ELSE $2 END, "
                              "counters = counters || $3::jsonb WHERE id = $1",
                              {run_id, stage, CountsToJson(counters)}));
  if (rows.Affected() == 0) return Status::NotFound("no run " + std::to_string(run_id));
  return Status::Ok();
}

Status PostgresStore::FinishRun(int64_t run_id, RunStatus status, std::string_view message) {
  if (status == RunStatus::kRunning) {
    return Status::InvalidArgument("a run cannot finish as running");
  }
  GRAG_ASSIGN_OR_RETURN(Rows rows, Write("UPDATE runs SET status = $2, message = $3, "
                                         "finished_at = grag_now() WHERE id = $1",
                                         {run_id, RunStatusName(status), message}));
  if (rows.Affected() == 0) return Status::NotFound("no run " + std::to_string(run_id));
  return Status::Ok();
}

Result<std::optional<RunRecord>> PostgresStore::GetRun(int64_t run_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query(
                     "SELECT " + std::string(kRunColumns) + " FROM runs WHERE id = $1", {run_id}));
  if (rows.empty()) return std::optional<RunRecord>();
  return std::optional<RunRecord>(ReadRun(rows, 0));
}

Result<std::vector<RunRecord>> PostgresStore::ListRuns(int64_t limit) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  const std::optional<int64_t> lim = limit < 0 ? std::nullopt : std::optional<int64_t>(limit);
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query("SELECT " + std::string(kRunColumns) +
                                                         " FROM runs ORDER BY id DESC LIMIT $1",
                                                     {lim}));
  std::vector<RunRecord> out;
  for (int i = 0; i < rows.size(); ++i) out.push_back(ReadRun(rows, i));
  return out;
}

Status PostgresStore::SetStageProgress(int64_t run_id, const StageProgress& p) {
  if (p.stage.empty()) return Status::InvalidArgument("stage progress needs a stage name");
  Status st = Write(
                  "INSERT INTO run_stages (run_id, stage, status, done, total, checkpoint) "
                  "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, stage) DO UPDATE SET "
                  "status = excluded.status, done = excluded.done, total = excluded.total, "
                  "checkpoint = excluded.checkpoint, updated_at = grag_now()",
                  {run_id, p.stage, StageStatusName(p.status), p.done, p.total, p.checkpoint})
                  .status();
  return st.ok() ? st : st.WithContext("progress of run " + std::to_string(run_id));
}

Result<std::vector<StageProgress>> PostgresStore::ListStageProgress(int64_t run_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query("SELECT stage, status, done, total, checkpoint, updated_at "
                                   "FROM run_stages WHERE run_id = $1 ORDER BY ord",
                                   {run_id}));
  std::vector<StageProgress> out;
  for (int i = 0; i < rows.size(); ++i) {
    StageProgress& p = out.emplace_back();
    p.stage = rows.Text(i, 0);
    p.status = ParseStageStatus(rows.View(i, 1));
    p.done = rows.Int(i, 2);
    p.total = rows.Int(i, 3);
    p.checkpoint = rows.Text(i, 4);
    p.updated_at = rows.Text(i, 5);
  }
  return out;
}

Result<std::map<std::string, int64_t>> PostgresStore::TotalRunCounters() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  // Integers only, as the SQLite store sums json_each's 'integer' values.
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query(
          "SELECT j.key, sum((j.value #>> '{}')::numeric)::bigint FROM runs, "
          "jsonb_each(runs.counters) AS j WHERE jsonb_typeof(j.value) = 'number' AND "
          "(j.value #>> '{}') ~ '^-?[0-9]+$' GROUP BY j.key ORDER BY j.key COLLATE \"C\""));
  std::map<std::string, int64_t> out;
  for (int i = 0; i < rows.size(); ++i) out[rows.Text(i, 0)] = rows.Int(i, 1);
  return out;
}

}  // namespace grag::store::postgres_internal
