// PostgresStore: inspection (stats, integrity checks, read-only SQL) and whole tables (grag
// migrate).
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

// ---------------------------------------------------------------- inspection

Result<StoreStats> PostgresStore::Stats() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  StoreStats s;
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks), "
                        "(SELECT count(*) FROM extractions WHERE status = 'ok'), "
                        "(SELECT count(*) FROM extractions WHERE status = 'skipped'), "
                        "(SELECT count(*) FROM entity_mentions), "
                        "(SELECT count(*) FROM relationship_mentions), "
                        "(SELECT count(*) FROM entities), (SELECT count(*) FROM relationships), "
                        "(SELECT count(*) FROM communities), "
                        "(SELECT count(*) FROM reports WHERE status = 'ok'), "
                        "(SELECT count(*) FROM reports WHERE status = 'gap'), "
                        "(SELECT count(*) FROM llm_cache), (SELECT count(*) FROM runs), "
                        "(SELECT count(*) FROM reports WHERE status = 'ok' AND stale), "
                        "pg_database_size(current_database()), "
                        "(SELECT count(*) FROM reports WHERE status = 'ok' AND generator = "
                        "'llm'), "
                        "(SELECT count(*) FROM extractions x WHERE x.status = 'ok' AND NOT "
                        "EXISTS (SELECT 1 FROM entity_mentions m WHERE m.extraction_id = x.id)), "
                        "(SELECT modularity FROM clusterings ORDER BY id DESC LIMIT 1)"));
  int col = 0;
  for (int64_t* field :
       {&s.documents, &s.chunks, &s.extractions_ok, &s.extractions_skipped, &s.entity_mentions,
        &s.relationship_mentions, &s.entities, &s.relationships, &s.communities, &s.reports_ok,
        &s.reports_gap, &s.cache_entries, &s.runs, &s.reports_stale, &s.file_bytes, &s.reports_llm,
        &s.extractions_empty}) {
    *field = rows.Int(0, col++);
  }
  s.modularity = rows.OptDouble(0, col);
  GRAG_ASSIGN_OR_RETURN(
      Rows levels,
      read.conn().Query("SELECT level, count(*) FROM communities GROUP BY level ORDER BY level"));
  for (int i = 0; i < levels.size(); ++i)
    s.communities_per_level[levels.Int(i, 0)] = levels.Int(i, 1);
  GRAG_ASSIGN_OR_RETURN(
      Rows owners,
      read.conn().Query("SELECT owner_kind, count(*) FROM embeddings GROUP BY owner_kind"));
  for (int i = 0; i < owners.size(); ++i)
    s.embeddings_per_owner[owners.Text(i, 0)] = owners.Int(i, 1);
  GRAG_ASSIGN_OR_RETURN(
      Rows cache, read.conn().Query("SELECT model, kind, count(*), sum(octet_length(value)) FROM "
                                    "llm_cache GROUP BY model, kind ORDER BY model, kind"));
  for (int i = 0; i < cache.size(); ++i) {
    s.cache_by_model.push_back(
        {cache.Text(i, 0), cache.Text(i, 1), cache.Int(i, 2), cache.Int(i, 3)});
  }
  GRAG_ASSIGN_OR_RETURN(
      Rows space,
      read.conn().Query("SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid) FROM "
                        "pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE "
                        "c.relkind = 'r' AND n.nspname = current_schema() ORDER BY "
                        "pg_total_relation_size(c.oid) DESC, c.relname"));
  for (int i = 0; i < space.size(); ++i)
    s.space.push_back({space.Text(i, 0), space.Int(i, 1), space.Int(i, 2)});
  return s;
}

Result<StoreInfo> PostgresStore::Info() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  StoreInfo info;
  info.path = redacted_;
  GRAG_ASSIGN_OR_RETURN(
      info.schema_version,
      read.conn().QueryInt("SELECT coalesce(max(version), 0) FROM grag_migrations"));
  info.max_schema_version = postgres::Migrations().back().version;
  info.journal_mode = "postgresql";
  info.foreign_keys = true;
  GRAG_ASSIGN_OR_RETURN(Rows sync,
                        read.conn().Query("SELECT current_setting('synchronous_commit')"));
  info.synchronous = sync.View(0, 0) == "off" ? 0 : 1;
  info.busy_timeout_ms = busy_timeout_ms_;
  // No SQLite here: the server that holds the index.
  info.sqlite_version = "postgresql " + read.conn().ServerVersion();
  return info;
}

Status PostgresStore::CheckIntegrity() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows,
                        read.conn().Query("SELECT id FROM chunks WHERE tsv IS DISTINCT FROM "
                                          "to_tsvector('grag_text', text) OR tsv IS NULL LIMIT 1"));
  if (!rows.empty()) {
    return Status::Corruption(redacted_ + ": full-text index out of step with chunk " +
                              rows.Text(0, 0));
  }
  return Status::Ok();
}

Result<IntegrityReport> PostgresStore::Check(int max_per_check) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  IntegrityReport report;
  const std::string limit = std::to_string(std::max(1, max_per_check));
  report.notes.push_back(
      "sqlite, foreign_keys: not applicable (PostgreSQL checks its pages and enforces foreign "
      "keys itself)");
  auto rows = [&](const std::string& check, const std::string& sql) {
    report.checks_run.push_back(check);
    Result<Rows> result = read.conn().Query(sql);
    if (!result.ok()) {
      report.problems.push_back({check, "could not run: " + result.status().message()});
      if (open_transactions() > 0 && read.conn().InFailedTransaction()) return;
      return;
    }
    for (int i = 0; i < result->size(); ++i) report.problems.push_back({check, result->Text(i, 0)});
  };
  rows("fts",
       "SELECT 'chunk ' || id || ': its tsvector is out of step with its text' FROM chunks "
       "WHERE tsv IS NULL OR tsv IS DISTINCT FROM to_tsvector('grag_text', text) LIMIT " +
           limit);
  rows("orphans",
       "(SELECT 'vector of entity ' || owner_id || ' which is gone' FROM embeddings "
       "WHERE owner_kind = 'entity' AND owner_id NOT IN (SELECT id::text FROM entities) "
       "UNION ALL SELECT 'vector of chunk ' || owner_id || ' which is gone' FROM embeddings "
       "WHERE owner_kind = 'chunk' AND owner_id NOT IN (SELECT id FROM chunks) "
       "UNION ALL SELECT 'vector of the report of community ' || owner_id || ' which is gone' "
       "FROM embeddings WHERE owner_kind = 'report' AND owner_id NOT IN "
       "(SELECT community_id::text FROM reports) "
       "UNION ALL SELECT 'entity ' || id || ' (' || name || ') is linked to no chunk' FROM "
       "entities WHERE id NOT IN (SELECT entity_id FROM entity_chunks) "
       "UNION ALL SELECT 'relationship ' || id || ' joins entity ' || source_id || ' to itself' "
       "FROM relationships WHERE source_id = target_id) LIMIT " +
           limit);
  rows("communities",
       "(SELECT 'community ' || id || ' has no members' FROM communities "
       "WHERE id NOT IN (SELECT community_id FROM community_members) "
       "UNION ALL SELECT 'community ' || c.id || ' is at level ' || c.level || ' under community ' "
       "|| p.id || ' at level ' || p.level FROM communities c JOIN communities p "
       "ON c.parent_id = p.id WHERE c.level != p.level + 1 "
       "UNION ALL SELECT 'community ' || id || ' at level ' || level || ' has no parent' "
       "FROM communities WHERE level > 0 AND parent_id IS NULL "
       "UNION ALL SELECT 'entity ' || id || ' (' || name || ') is in no community' FROM entities "
       "WHERE EXISTS (SELECT 1 FROM communities) "
       "AND (SELECT status FROM runs ORDER BY id DESC LIMIT 1) IS NOT DISTINCT FROM 'ok' "
       "AND id NOT IN (SELECT m.entity_id FROM community_members m JOIN communities c "
       "ON c.id = m.community_id WHERE c.level = 0)) LIMIT " +
           limit);
  return report;
}

Result<SqlRows> PostgresStore::RunReadOnlySql(std::string_view, int64_t,
                                              std::chrono::milliseconds) {
  return Status::Unimplemented("grag sql reads SQLite indexes; this index is in PostgreSQL at " +
                               redacted_ +
                               ": query it with psql (the tables are those of docs/schema.md)");
}

// ---------------------------------------------------------------- whole tables (grag migrate)

// Reads through a cursor, a batch at a time, so a large table is never held whole in memory.
class PgTableSnapshot final : public TableSnapshot {
 public:
  explicit PgTableSnapshot(ReadHandle read) : read_(std::move(read)) {}

  Status Scan(const IndexTable& table,
              const std::function<Status(const TableRow& row)>& row_fn) override {
    pq::Connection& conn = read_.conn();
    const std::string cursor = "grag_copy_" + std::to_string(++cursors_);
    // jsonb is selected as its text (SQLite's JSON text goes back in as is).
    GRAG_RETURN_IF_ERROR(conn.Exec("DECLARE " + cursor + " NO SCROLL CURSOR FOR SELECT " +
                                   ColumnList(table, "::text") + " FROM " +
                                   std::string(table.name) + ExcludeClause(table) + " ORDER BY " +
                                   (table.order_by.empty() ? "ord" : std::string(table.order_by))));
    Status st = ReadCursor(conn, cursor, table, row_fn);
    Status closed = conn.Exec("CLOSE " + cursor);
    return st.ok() ? closed : st;
  }

  Result<int64_t> Count(const IndexTable& table) override {
    return read_.conn().QueryInt("SELECT count(*) FROM " + std::string(table.name) +
                                 ExcludeClause(table));
  }

  Status Begin() {
    GRAG_RETURN_IF_ERROR(read_.BeginSnapshot());
    // Every double as the digits that read back exactly (PostgreSQL 12+ does so by default).
    return read_.conn().Exec("SET LOCAL extra_float_digits = 3");
  }

 private:
  static Status ReadCursor(pq::Connection& conn, const std::string& cursor, const IndexTable& table,
                           const std::function<Status(const TableRow& row)>& row_fn) {
    TableRow row(table.columns.size());
    while (true) {
      GRAG_ASSIGN_OR_RETURN(Rows rows, conn.Query("FETCH 2000 FROM " + cursor));
      if (rows.empty()) return Status::Ok();
      for (int r = 0; r < rows.size(); ++r) {
        for (size_t i = 0; i < table.columns.size(); ++i) {
          const int col = static_cast<int>(i);
          if (rows.IsNull(r, col)) {
            row[i] = std::monostate();
            continue;
          }
          switch (table.columns[i].type) {
            case ColumnType::kInt:
              row[i] = rows.Int(r, col);
              break;
            case ColumnType::kBool:
              row[i] = int64_t{rows.Bool(r, col) ? 1 : 0};
              break;
            case ColumnType::kReal:
              row[i] = rows.Double(r, col);
              break;
            case ColumnType::kText:
            case ColumnType::kJson:
              row[i] = rows.Text(r, col);
              break;
            case ColumnType::kVector:
              row[i] = pq::ParseRealArray(rows.View(r, col));
              break;
          }
        }
        GRAG_RETURN_IF_ERROR(row_fn(row));
      }
    }
  }

  ReadHandle read_;
  int cursors_ = 0;
};

Result<std::unique_ptr<TableSnapshot>> PostgresStore::SnapshotTables() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  auto snapshot = std::make_unique<PgTableSnapshot>(std::move(read));
  GRAG_RETURN_IF_ERROR(snapshot->Begin());
  return std::unique_ptr<TableSnapshot>(std::move(snapshot));
}

Status PostgresStore::InsertRows(const IndexTable& table, const std::vector<TableRow>& rows) {
  if (rows.empty()) return Status::Ok();
  const size_t ncols = table.columns.size();
  // Several rows per statement (a round trip each), within libpq's 65535 parameters.
  const size_t per_statement = std::max<size_t>(1, std::min<size_t>(500, 30000 / ncols));
  std::string conflict;
  if (!table.preset_keys.empty()) {
    conflict = " ON CONFLICT (" + std::string(table.columns[0].name) + ") DO UPDATE SET ";
    for (size_t i = 1; i < ncols; ++i) {
      const std::string name(table.columns[i].name);
      conflict += (i == 1 ? "" : ", ") + name + " = excluded." + name;
    }
  }
  auto lock = Lock();
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  for (size_t start = 0; start < rows.size(); start += per_statement) {
    const size_t end = std::min(rows.size(), start + per_statement);
    std::string sql =
        "INSERT INTO " + std::string(table.name) + " (" + ColumnList(table) + ") VALUES ";
    Args args;
    args.reserve((end - start) * ncols);
    for (size_t r = start; r < end; ++r) {
      if (rows[r].size() != ncols) {
        return Status::InvalidArgument("a row of " + std::to_string(rows[r].size()) +
                                       " values for table " + std::string(table.name));
      }
      sql += r == start ? "(" : ", (";
      for (size_t i = 0; i < ncols; ++i) {
        const CellValue& cell = rows[r][i];
        if (const auto* v = std::get_if<int64_t>(&cell)) {
          args.emplace_back(table.columns[i].type == ColumnType::kBool ? pq::Arg(*v != 0)
                                                                       : pq::Arg(*v));
        } else if (const auto* d = std::get_if<double>(&cell)) {
          args.emplace_back(*d);
        } else if (const auto* s = std::get_if<std::string>(&cell)) {
          args.emplace_back(*s);
        } else if (const auto* f = std::get_if<std::vector<float>>(&cell)) {
          args.emplace_back(pq::RealArray(*f));
        } else {
          args.emplace_back(std::nullopt);
        }
        sql += (i == 0 ? "$" : ", $") + std::to_string(args.size());
      }
      sql += ")";
    }
    sql += conflict;
    Status st = conn_.Exec(sql, args);
    if (!st.ok()) return st.WithContext("copying into table " + std::string(table.name));
  }
  return tx.Commit();
}

Status PostgresStore::FinishInsertRows() {
  auto lock = Lock();
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  for (const auto& [table, column] : {std::pair{"chunks", "seq"},
                                      {"entity_mentions", "id"},
                                      {"relationship_mentions", "id"},
                                      {"run_stages", "ord"}}) {
    GRAG_RETURN_IF_ERROR(conn_.Exec(std::string("SELECT setval(pg_get_serial_sequence('") + table +
                                    "', '" + column + "'), coalesce((SELECT max(" + column +
                                    ") FROM " + table + "), 0) + 1, false)"));
  }
  return tx.Commit();
}

}  // namespace grag::store::postgres_internal
