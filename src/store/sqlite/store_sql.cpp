// Store: read-only SQL over documented views of the index (grag sql).
#include <sqlite3.h>

#include <cctype>
#include <chrono>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "grag/store.h"
#include "reply_codec.h"
#include "store_impl.h"

namespace grag {

namespace {

// The views grag sql offers, as TEMP views of its own connection (they shadow the tables of the
// same names for that connection only; the file and its schema do not change). docs/schema.md
// documents their columns: keep the two in step.
constexpr std::string_view kSqlViews = R"sql(
CREATE TEMP VIEW documents AS
SELECT d.id, d.title, d.source_path,
       -- Kept as its bytes where it is hex (sqlite::BindHash).
       CASE typeof(d.content_hash) WHEN 'blob' THEN lower(hex(d.content_hash))
            ELSE d.content_hash END AS content_hash,
       -- A text kept in its chunks (stored ''): their parts past the previous chunks' end.
       CASE WHEN typeof(d.text) = 'text' AND d.text = '' THEN
         (SELECT coalesce(sum(length(CAST(substr(CAST(x.text AS BLOB),
                                                 1 + max(0, coalesce(x.before, 0) - x.start_byte))
                                          AS TEXT))), 0)
          FROM (SELECT c.text, c.start_byte,
                       max(c.end_byte) OVER (ORDER BY c.start_byte ROWS BETWEEN UNBOUNDED
                                             PRECEDING AND 1 PRECEDING) AS before
                FROM main.chunks c WHERE c.document_id = d.id) x)
       ELSE length(grag_text(d.text)) END AS characters,
       (SELECT count(*) FROM main.chunks c WHERE c.document_id = d.id) AS chunk_count,
       d.created_at, d.updated_at
FROM main.documents d;

CREATE TEMP VIEW chunks AS
SELECT c.id, c.document_id, d.title AS document_title, c.chunk_index, c.n_tokens,
       c.start_token, c.start_byte, c.end_byte, c.text,
       (SELECT count(*) FROM main.entity_chunks l WHERE l.chunk_seq = c.seq) AS entity_count
FROM main.chunks c JOIN main.documents d ON d.id = c.document_id;

-- The link tables name a chunk by its seq (schema 9); these views give its id, as before.
CREATE TEMP VIEW entity_chunks AS
SELECT l.entity_id, c.id AS chunk_id
FROM main.entity_chunks l JOIN main.chunks c ON c.seq = l.chunk_seq;

CREATE TEMP VIEW relationship_chunks AS
SELECT l.relationship_id, c.id AS chunk_id
FROM main.relationship_chunks l JOIN main.chunks c ON c.seq = l.chunk_seq;

CREATE TEMP VIEW entities AS
SELECT e.id, e.name, e.name_key, e.type, e.description, e.degree, e.frequency,
       e.type_counts
FROM main.entities e;

CREATE TEMP VIEW relationships AS
SELECT r.id, r.source_id, s.name AS source, s.type AS source_type,
       r.target_id, t.name AS target, t.type AS target_type,
       r.description, r.weight, r.frequency, s.degree + t.degree AS combined_degree
FROM main.relationships r
JOIN main.entities s ON s.id = r.source_id
JOIN main.entities t ON t.id = r.target_id;

CREATE TEMP VIEW entity_communities AS
SELECT m.entity_id, e.name AS entity, e.type AS entity_type,
       m.community_id, c.level, c.parent_id
FROM main.community_members m
JOIN main.entities e ON e.id = m.entity_id
JOIN main.communities c ON c.id = m.community_id;

CREATE TEMP VIEW communities AS
SELECT c.id, c.level, c.parent_id, c.size, c.weight,
       (SELECT count(*) FROM main.communities k WHERE k.parent_id = c.id) AS child_count,
       r.title, r.rating, r.status AS report_status
FROM main.communities c LEFT JOIN main.reports r ON r.community_id = c.id;

-- What the extractor named in each chunk, as rows (kept one value per extraction: schema 11).
CREATE TEMP VIEW entity_mentions AS
SELECT x.id AS extraction_id, x.chunk_id, x.extractor, x.model AS extractor_model,
       m.key AS position, m.value ->> 0 AS name, m.value ->> 1 AS name_key,
       m.value ->> 2 AS type, m.value ->> 3 AS description
FROM main.extractions x, json_each(grag_text(x.mentions), '$.e') m;

CREATE TEMP VIEW relationship_mentions AS
SELECT x.id AS extraction_id, x.chunk_id, x.extractor, x.model AS extractor_model,
       m.key AS position, m.value ->> 0 AS source, m.value ->> 1 AS target,
       m.value ->> 2 AS source_key, m.value ->> 3 AS target_key, m.value ->> 4 AS description,
       m.value ->> 5 AS strength
FROM main.extractions x, json_each(grag_text(x.mentions), '$.r') m;

CREATE TEMP VIEW reports AS
SELECT r.community_id, c.level, c.size, r.status, r.reason, r.title, r.summary, r.rating,
       r.rating_explanation, grag_text(r.findings) AS findings,
       json_array_length(grag_text(r.findings)) AS finding_count,
       CASE WHEN r.full_content <> '' OR r.status <> 'ok' THEN r.full_content
            ELSE '# ' || r.title || char(10, 10) || r.summary || coalesce(
              (SELECT group_concat(char(10, 10) || '## ' || json_extract(f.value, '$.summary') ||
                                   CASE WHEN json_extract(f.value, '$.explanation') <> ''
                                        THEN char(10, 10) || json_extract(f.value, '$.explanation')
                                        ELSE '' END, '')
               FROM json_each(grag_text(r.findings)) f), '') END AS full_content,
       r.generator, r.model, r.stale, r.stale_note, r.updated_at
FROM main.reports r JOIN main.communities c ON c.id = r.community_id;
)sql";

// Introspection pragmas that read the schema and nothing else.
bool IntrospectionPragma(std::string_view name) {
  for (std::string_view ok :
       {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
        "foreign_key_list", "database_list", "function_list", "collation_list",
        // Read-only; FTS5 runs it on every MATCH (without it a full-text search was refused).
        "data_version"}) {
    if (name == ok) return true;
  }
  return false;
}

std::string_view ActionName(int action) {
  switch (action) {
    case SQLITE_INSERT:
      return "INSERT";
    case SQLITE_UPDATE:
      return "UPDATE";
    case SQLITE_DELETE:
      return "DELETE";
    case SQLITE_ATTACH:
      return "ATTACH";
    case SQLITE_DETACH:
      return "DETACH";
    case SQLITE_PRAGMA:
      return "this PRAGMA";
    case SQLITE_TRANSACTION:
      return "transaction control";
    case SQLITE_SAVEPOINT:
      return "SAVEPOINT";
    case SQLITE_ANALYZE:
      return "ANALYZE";
    case SQLITE_REINDEX:
      return "REINDEX";
    case SQLITE_ALTER_TABLE:
      return "ALTER TABLE";
    case SQLITE_CREATE_INDEX:
    case SQLITE_CREATE_TABLE:
    case SQLITE_CREATE_TEMP_INDEX:
    case SQLITE_CREATE_TEMP_TABLE:
    case SQLITE_CREATE_TEMP_TRIGGER:
    case SQLITE_CREATE_TEMP_VIEW:
    case SQLITE_CREATE_TRIGGER:
    case SQLITE_CREATE_VIEW:
    case SQLITE_CREATE_VTABLE:
      return "CREATE";
    case SQLITE_DROP_INDEX:
    case SQLITE_DROP_TABLE:
    case SQLITE_DROP_TEMP_INDEX:
    case SQLITE_DROP_TEMP_TABLE:
    case SQLITE_DROP_TEMP_TRIGGER:
    case SQLITE_DROP_TEMP_VIEW:
    case SQLITE_DROP_TRIGGER:
    case SQLITE_DROP_VIEW:
    case SQLITE_DROP_VTABLE:
      return "DROP";
    default:
      return "a statement that changes the database or the connection";
  }
}

struct AuthorizerState {
  std::string refused;        // what the authorizer denied first
  bool schema_write = false;  // `refused` is a write to the schema table (CREATE, DROP)
};

// Allows what a SELECT needs and nothing else.
int Authorize(void* user, int action, const char* arg1, const char* /*arg2*/, const char* /*db*/,
              const char* /*trigger*/) {
  auto* state = static_cast<AuthorizerState*>(user);
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_FUNCTION:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_PRAGMA:
      if (arg1 != nullptr && IntrospectionPragma(arg1)) return SQLITE_OK;
      break;
    case SQLITE_UPDATE:
      // A table-valued function (json_each, pragma_table_info) asks for this while SQLite sets
      // its virtual table up; it writes nothing. A real UPDATE of the schema table is refused
      // by sqlite3_stmt_readonly and query_only (and SQLite itself).
      if (arg1 != nullptr && std::string_view(arg1) == "sqlite_master") return SQLITE_OK;
      break;
    default:
      break;
  }
  // CREATE and DROP first write the schema table; name the statement, not that write.
  const bool schema_write =
      (action == SQLITE_INSERT || action == SQLITE_DELETE || action == SQLITE_UPDATE) &&
      arg1 != nullptr && std::string_view(arg1).starts_with("sqlite_");
  if (state->refused.empty()) {
    state->schema_write = schema_write;
    state->refused = std::string(ActionName(action));
    if (action == SQLITE_PRAGMA && arg1 != nullptr) state->refused = "PRAGMA " + std::string(arg1);
  }
  return SQLITE_DENY;
}

// The statement's first keyword, upper-cased ("DROP"), after spaces and comments.
std::string FirstWord(std::string_view sql) {
  size_t i = 0;
  while (i < sql.size()) {
    if (sql[i] == ' ' || sql[i] == '\t' || sql[i] == '\n' || sql[i] == '\r') {
      ++i;
    } else if (sql.substr(i, 2) == "--") {
      i = sql.find('\n', i);
      if (i == std::string_view::npos) return "the statement";
    } else if (sql.substr(i, 2) == "/*") {
      i = sql.find("*/", i + 2);
      if (i == std::string_view::npos) return "the statement";
      i += 2;
    } else {
      break;
    }
  }
  std::string word;
  while (i < sql.size() && std::isalpha(static_cast<unsigned char>(sql[i]))) {
    word += static_cast<char>(std::toupper(static_cast<unsigned char>(sql[i++])));
  }
  return word.empty() ? "the statement" : word;
}

Status Refused(std::string_view why) {
  return Status::InvalidArgument("refused: " + std::string(why) +
                                 " (grag sql runs one read-only SELECT; see docs/schema.md)");
}

SqlValue ColumnValue(sqlite3_stmt* stmt, int col) {
  SqlValue v;
  switch (sqlite3_column_type(stmt, col)) {
    case SQLITE_INTEGER:
      v.kind = SqlValue::Kind::kInteger;
      v.integer = sqlite3_column_int64(stmt, col);
      break;
    case SQLITE_FLOAT:
      v.kind = SqlValue::Kind::kReal;
      v.real = sqlite3_column_double(stmt, col);
      break;
    case SQLITE_TEXT: {
      v.kind = SqlValue::Kind::kText;
      const auto* p = sqlite3_column_text(stmt, col);
      v.text.assign(reinterpret_cast<const char*>(p),
                    static_cast<size_t>(sqlite3_column_bytes(stmt, col)));
      break;
    }
    case SQLITE_BLOB:
      v.kind = SqlValue::Kind::kText;
      v.text = "<blob: " + std::to_string(sqlite3_column_bytes(stmt, col)) + " bytes>";
      break;
    default:
      break;
  }
  return v;
}

// grag_text(value): a value the store keeps compressed (a BLOB: reply_codec.h) as its text, any
// other value as it is; NULL for a damaged one.
void GragText(sqlite3_context* ctx, int /*argc*/, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) != SQLITE_BLOB) {
    sqlite3_result_value(ctx, argv[0]);
    return;
  }
  const auto* bytes = static_cast<const char*>(sqlite3_value_blob(argv[0]));
  const std::string_view stored(bytes == nullptr ? "" : bytes,
                                static_cast<size_t>(sqlite3_value_bytes(argv[0])));
  Result<std::string> text = store::DecompressReply(stored);
  if (!text.ok()) {
    sqlite3_result_null(ctx);
    return;
  }
  sqlite3_result_text64(ctx, text->data(), text->size(), SQLITE_TRANSIENT, SQLITE_UTF8);
}

}  // namespace

Result<SqlRows> SqliteStore::RunReadOnlySql(std::string_view sql, int64_t max_rows,
                                            std::chrono::milliseconds time_limit) {
  // Its own connection: the views shadow tables the store's own statements read.
  GRAG_ASSIGN_OR_RETURN(sqlite::Connection conn, store::OpenForReading(impl_->path));
  sqlite3* db = conn.get();
  sqlite3_busy_timeout(db, 10000);
  if (int rc = sqlite3_create_function_v2(db, "grag_text", 1,
                                          SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                          nullptr, GragText, nullptr, nullptr, nullptr);
      rc != SQLITE_OK) {
    return sqlite::ErrorStatus(db, rc, "registering grag_text");
  }
  GRAG_RETURN_IF_ERROR(conn.Exec(kSqlViews).WithContext("creating the grag sql views"));
  GRAG_RETURN_IF_ERROR(conn.Exec("PRAGMA query_only = ON"));

  AuthorizerState auth;
  sqlite3_set_authorizer(db, Authorize, &auth);
  // The time limit: SQLite calls the handler every few thousand virtual-machine steps, and a
  // non-zero answer interrupts the statement (SQLITE_INTERRUPT).
  struct Deadline {
    std::chrono::steady_clock::time_point at;
    bool passed = false;
  } deadline{std::chrono::steady_clock::now() + time_limit};
  if (time_limit.count() > 0) {
    sqlite3_progress_handler(
        db, 10000,
        [](void* arg) -> int {
          auto* d = static_cast<Deadline*>(arg);
          d->passed = d->passed || std::chrono::steady_clock::now() >= d->at;
          return d->passed ? 1 : 0;
        },
        &deadline);
  }
  const char* tail = nullptr;
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &raw, &tail);
  sqlite::StmtHandle stmt(raw);
  if (rc != SQLITE_OK) {
    if (!auth.refused.empty()) {
      // A schema-table write is how CREATE and DROP begin: name the statement instead.
      return Refused((auth.schema_write ? FirstWord(sql) : auth.refused) + " is not allowed");
    }
    return Status::InvalidArgument(std::string("SQL error: ") + sqlite3_errmsg(db));
  }
  if (stmt == nullptr) return Status::InvalidArgument("no SQL statement given");
  // Anything after the first statement but spaces, comments and semicolons is a second one.
  const char* end = sql.data() + sql.size();
  if (tail != nullptr && tail < end) {
    sqlite3_stmt* next_raw = nullptr;
    const int next_rc =
        sqlite3_prepare_v2(db, tail, static_cast<int>(end - tail), &next_raw, nullptr);
    sqlite::StmtHandle next(next_raw);
    if (next_rc != SQLITE_OK || next != nullptr) return Refused("more than one statement");
  }
  if (sqlite3_stmt_readonly(stmt.get()) == 0) return Refused("the statement writes");

  SqlRows out;
  const int n = sqlite3_column_count(stmt.get());
  if (n == 0) return Refused("the statement returns no rows");
  for (int i = 0; i < n; ++i) {
    const char* name = sqlite3_column_name(stmt.get(), i);
    out.columns.emplace_back(name != nullptr ? name : "");
  }
  while (true) {
    rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      // Some checks run as the statement runs (a pragma as a table-valued function).
      if (!auth.refused.empty()) return Refused(auth.refused + " is not allowed");
      if (deadline.passed) {
        return Status(ErrorCode::kTimeout,
                      fmt::format("the query was stopped after {:g} s (its time limit); narrow it, "
                                  "or raise the limit (grag sql --timeout)",
                                  std::chrono::duration<double>(time_limit).count()));
      }
      Status st = sqlite::ErrorStatus(db, rc, "running the query");
      if (st.code() == ErrorCode::kInvalidArgument || st.code() == ErrorCode::kInternal) {
        return Status::InvalidArgument(std::string("SQL error: ") + sqlite3_errmsg(db));
      }
      return st;
    }
    if (max_rows >= 0 && static_cast<int64_t>(out.rows.size()) >= max_rows) {
      out.truncated = true;
      break;
    }
    std::vector<SqlValue>& row = out.rows.emplace_back();
    row.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) row.push_back(ColumnValue(stmt.get(), i));
  }
  return out;
}

}  // namespace grag
