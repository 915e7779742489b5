// Whole tables as plain rows (grag/store_tables.h): the SQLite side of copying an index.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compressed_text.h"
#include "document_text.h"
#include "mention_record.h"
#include "store_impl.h"
#include "table_sql.h"
#include "vector_codec.h"

namespace grag {
namespace {

// The link tables name a chunk by its seq (schema 9); the backends' common form, by its id.
bool LinkTable(std::string_view name) {
  return name == "entity_chunks" || name == "relationship_chunks";
}

// What a table's rows are read from, in the common form.
std::string Source(std::string_view name) {
  if (!LinkTable(name)) return std::string(name);
  const std::string owner = name == "entity_chunks" ? "entity_id" : "relationship_id";
  return fmt::format(
      "(SELECT l.{0}, c.id AS chunk_id FROM main.{1} l JOIN main.chunks c ON c.seq = "
      "l.chunk_seq) AS {1}",
      owner, name);
}

// Text columns the store keeps compressed where that saves room (a BLOB: reply_codec.h).
bool CompressedColumn(std::string_view table, std::string_view column) {
  return sqlite::Lists(sqlite::kCompressedColumns, table, column);
}

// Digests the store keeps as their bytes (sqlite::BindHash), read back as hex.
bool HashColumn(std::string_view table, std::string_view column) {
  return sqlite::Lists(sqlite::kDigestColumns, table, column);
}

bool MentionTable(std::string_view name) {
  return name == "entity_mentions" || name == "relationship_mentions";
}

// A mention table's rows in the common form, read from each extraction's stored mentions
// (mention_record.h), by extraction and in the order extracted.
Status ScanMentionRows(sqlite::Connection& conn, const IndexTable& table,
                       const std::function<Status(const TableRow& row)>& row_fn) {
  const bool entities = table.name == "entity_mentions";
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        conn.Prepare("SELECT id, mentions FROM extractions ORDER BY id"));
  std::vector<EntityMention> em;
  std::vector<RelationshipMention> rm;
  TableRow row(table.columns.size());
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool has_row, stmt.Step());
    if (!has_row) return Status::Ok();
    em.clear();
    rm.clear();
    GRAG_RETURN_IF_ERROR(
        store::ReadMentions(stmt, 1, entities ? &em : nullptr, entities ? nullptr : &rm));
    row[0] = stmt.Int(0);
    for (const EntityMention& m : em) {
      row[1] = m.name;
      row[2] = m.name_key;
      row[3] = m.type;
      row[4] = m.description;
      GRAG_RETURN_IF_ERROR(row_fn(row));
    }
    for (const RelationshipMention& m : rm) {
      row[1] = m.source;
      row[2] = m.target;
      row[3] = m.source_key;
      row[4] = m.target_key;
      row[5] = m.description;
      row[6] = m.strength;
      GRAG_RETURN_IF_ERROR(row_fn(row));
    }
  }
}

std::string CellText(const CellValue& cell) {
  const auto* s = std::get_if<std::string>(&cell);
  return s != nullptr ? *s : std::string();
}

// Rows of a mention table in the common form appended to their extractions' stored mentions.
Status InsertMentionRows(sqlite::Connection& conn, const IndexTable& table,
                         const std::vector<TableRow>& rows) {
  const bool entities = table.name == "entity_mentions";
  const size_t width = entities ? 5 : 7;
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt read,
                        conn.Prepare("SELECT mentions FROM extractions WHERE id = ?"));
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt write,
      conn.Prepare("UPDATE extractions SET mentions = ?, entity_count = ?, relationship_count = ? "
                   "WHERE id = ?"));
  for (size_t i = 0; i < rows.size();) {
    const auto* id = rows[i].size() == width ? std::get_if<int64_t>(&rows[i][0]) : nullptr;
    if (id == nullptr) {
      return Status::InvalidArgument("a row of table " + std::string(table.name) +
                                     " without its extraction id");
    }
    const int64_t extraction_id = *id;
    GRAG_ASSIGN_OR_RETURN(bool found, read.BindAll(extraction_id).Step());
    if (!found) {
      return Status::InvalidArgument("table " + std::string(table.name) + " names extraction " +
                                     std::to_string(extraction_id) + ", which is not there");
    }
    std::vector<EntityMention> em;
    std::vector<RelationshipMention> rm;
    GRAG_RETURN_IF_ERROR(store::ReadMentions(read, 0, &em, &rm));
    for (; i < rows.size() && rows[i].size() == width &&
           std::get_if<int64_t>(&rows[i][0]) != nullptr &&
           std::get<int64_t>(rows[i][0]) == extraction_id;
         ++i) {
      const TableRow& row = rows[i];
      if (entities) {
        em.push_back({CellText(row[1]), CellText(row[2]), CellText(row[3]), CellText(row[4])});
      } else {
        const auto* strength = std::get_if<double>(&row[6]);
        rm.push_back({CellText(row[1]), CellText(row[2]), CellText(row[3]), CellText(row[4]),
                      CellText(row[5]), strength != nullptr ? *strength : 1.0});
      }
    }
    write.BindAll(std::nullopt, static_cast<int64_t>(em.size()), static_cast<int64_t>(rm.size()),
                  extraction_id);
    store::BindMentions(write, 1, em, rm);
    Status st = write.Run();
    if (!st.ok()) return st.WithContext("copying into table " + std::string(table.name));
  }
  return Status::Ok();
}

class SqliteTableSnapshot final : public TableSnapshot {
 public:
  explicit SqliteTableSnapshot(ReadHandle read) : read_(std::move(read)) {}

  Status Scan(const IndexTable& table,
              const std::function<Status(const TableRow& row)>& row_fn) override {
    // A vector is copied as its values, whatever its stored encoding (read after the listed
    // columns), and a reply as its text, compressed or not: the rows are the backends' common
    // form.
    if (MentionTable(table.name)) return ScanMentionRows(read_.conn(), table, row_fn);
    const bool vectors = table.name == "embeddings";
    const std::string sql = "SELECT " + store::ColumnList(table) + (vectors ? ", encoding" : "") +
                            " FROM " + Source(table.name) + store::ExcludeClause(table) +
                            " ORDER BY " +
                            (table.order_by.empty() ? "rowid" : std::string(table.order_by));
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt, read_.conn().Prepare(sql));
    TableRow row(table.columns.size());
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool has_row, stmt.Step());
      if (!has_row) break;
      for (size_t i = 0; i < table.columns.size(); ++i) {
        const int col = static_cast<int>(i);
        if (stmt.IsNull(col)) {
          row[i] = std::monostate();
          continue;
        }
        switch (table.columns[i].type) {
          case ColumnType::kInt:
          case ColumnType::kBool:
            row[i] = stmt.Int(col);
            break;
          case ColumnType::kReal:
            row[i] = stmt.Double(col);
            break;
          case ColumnType::kText:
          case ColumnType::kJson: {
            // The text, whether or not kept compressed (CompressedColumn); a document's text
            // from its chunks where it is kept there (document_text.h).
            if (HashColumn(table.name, table.columns[i].name)) {
              row[i] = sqlite::HashText(stmt, col);
              break;
            }
            if (table.name == "documents" && table.columns[i].name == "text") {
              GRAG_ASSIGN_OR_RETURN(
                  row[i], sqlite::StoredDocumentText(read_.conn(), stmt.Text(0), stmt, col));
              break;
            }
            GRAG_ASSIGN_OR_RETURN(row[i], sqlite::CompressibleText(stmt, col));
            break;
          }
          case ColumnType::kVector: {
            const std::string_view bytes = stmt.Blob(col);
            const VectorEncoding encoding =
                vectors ? ParseVectorEncoding(stmt.Text(static_cast<int>(table.columns.size())))
                              .value_or(VectorEncoding::kF32)
                        : VectorEncoding::kF32;
            const int64_t dim = store::DecodedDimension(bytes, encoding);
            std::vector<float> v(static_cast<size_t>(std::max<int64_t>(0, dim)));
            GRAG_RETURN_IF_ERROR(store::DecodeVector(bytes, encoding, v));
            row[i] = std::move(v);
            break;
          }
        }
      }
      GRAG_RETURN_IF_ERROR(row_fn(row));
    }
    return Status::Ok();
  }

  Result<int64_t> Count(const IndexTable& table) override {
    if (MentionTable(table.name)) {
      return read_.conn().QueryInt(
          std::string("SELECT coalesce(sum(") +
          (table.name == "entity_mentions" ? "entity_count" : "relationship_count") +
          "), 0) FROM extractions");
    }
    return read_.conn().QueryInt("SELECT count(*) FROM " + std::string(table.name) +
                                 store::ExcludeClause(table));
  }

 private:
  ReadHandle read_;
};

}  // namespace

Result<std::unique_ptr<TableSnapshot>> SqliteStore::SnapshotTables() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  return std::unique_ptr<TableSnapshot>(std::make_unique<SqliteTableSnapshot>(std::move(read)));
}

Status SqliteStore::InsertRows(const IndexTable& table, const std::vector<TableRow>& rows) {
  if (rows.empty()) return Status::Ok();
  std::string sql =
      "INSERT INTO " + std::string(table.name) + " (" + store::ColumnList(table) + ") VALUES (";
  for (size_t i = 0; i < table.columns.size(); ++i) sql += i == 0 ? "?" : ", ?";
  sql += ")";
  if (LinkTable(table.name)) {  // (owner, chunk id) in; (owner, chunk seq) stored
    sql = fmt::format(
        "INSERT INTO {} ({}, chunk_seq) VALUES (?, (SELECT seq FROM chunks WHERE id = ?))",
        table.name, table.columns[0].name);
  }
  if (!table.preset_keys.empty()) {
    sql += " ON CONFLICT (" + std::string(table.columns[0].name) + ") DO UPDATE SET ";
    for (size_t i = 1; i < table.columns.size(); ++i) {
      const std::string name(table.columns[i].name);
      sql += (i == 1 ? "" : ", ") + name + " = excluded." + name;
    }
  }
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(/*write=*/true));
  if (table.name == "entities" || table.name == "relationships" || table.name == "entity_chunks") {
    GRAG_RETURN_IF_ERROR(impl_->DropGraphImage());
  }
  if (MentionTable(table.name)) {
    GRAG_RETURN_IF_ERROR(InsertMentionRows(impl_->conn, table, rows));
    return tx.Commit();
  }
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt insert, impl_->conn.Prepare(sql));
  for (const TableRow& row : rows) {
    if (row.size() != table.columns.size()) {
      return Status::InvalidArgument("a row of " + std::to_string(row.size()) +
                                     " values for table " + std::string(table.name));
    }
    for (size_t i = 0; i < row.size(); ++i) {
      const int param = static_cast<int>(i) + 1;
      if (const auto* v = std::get_if<int64_t>(&row[i])) {
        insert.Bind(param, *v);
      } else if (const auto* d = std::get_if<double>(&row[i])) {
        insert.Bind(param, *d);
      } else if (const auto* s = std::get_if<std::string>(&row[i])) {
        if (CompressedColumn(table.name, table.columns[i].name)) {
          sqlite::BindCompressible(insert, param, *s);
        } else if (HashColumn(table.name, table.columns[i].name)) {
          sqlite::BindHash(insert, param, *s);
        } else {
          insert.Bind(param, *s);
        }
      } else if (const auto* f = std::get_if<std::vector<float>>(&row[i])) {
        insert.BindBlob(param, f->data(), f->size() * sizeof(float));
      } else {
        insert.Bind(param, std::nullopt);
      }
    }
    Status st = insert.Run();
    if (!st.ok()) return st.WithContext("copying into table " + std::string(table.name));
  }
  return tx.Commit();
}

Status SqliteStore::FinishInsertRows() { return Status::Ok(); }

}  // namespace grag
