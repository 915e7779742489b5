// The index's tables as plain rows, the same on every backend: what copying an index from one
// store to another (grag migrate, grag/store_copy.h) reads and writes.
//
// IndexTables() lists every table that holds index data, parents before children, with the
// columns both backends have, each with a logical type. A backend maps the types to its own
// (SQLite integer/real/text/blob; PostgreSQL bigint/double precision/text/boolean/jsonb/real[])
// and leaves out what it derives itself: SQLite's FTS5 table, PostgreSQL's tsvector columns and
// identity counters. Rows come out of a TableSnapshot in a fixed order (IndexTable::order_by), so
// the same index read from either backend gives the same rows in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "grag/status.h"

namespace grag {

enum class ColumnType {
  kInt,     // 64-bit integer
  kReal,    // double
  kText,    // UTF-8 text
  kBool,    // 0 or 1 (SQLite integer, PostgreSQL boolean)
  kJson,    // JSON text (PostgreSQL jsonb, which normalises spacing and key order)
  kVector,  // float32 vector (SQLite little-endian blob, PostgreSQL real[])
};

struct IndexColumn {
  std::string_view name;
  ColumnType type;
};

struct IndexTable {
  std::string_view name;
  std::vector<IndexColumn> columns;
  // The row order, as an SQL ORDER BY list both backends read alike (integer keys, and text
  // keys compared bytewise: PostgreSQL declares them COLLATE "C"). Empty: the order rows were
  // inserted in (SQLite's rowid, PostgreSQL's ord), which run_stages is listed by.
  std::string_view order_by;
  // Rows left out, as an SQL condition (empty: none): meta's keys about the backend's own
  // schema, which each backend keeps for itself.
  std::string_view exclude;
  // Rows an empty store already holds, by the value of the first column (the key): meta's
  // creation stamp, which opening a new store writes. A copy into a store replaces them (an
  // insert of a row with such a key overwrites it); any other row makes a store non-empty.
  std::vector<std::string_view> preset_keys;
};

// Every table of the index, parents before children.
const std::vector<IndexTable>& IndexTables();

// One value of a row, typed by its column: null, kInt and kBool as int64_t, kReal as double,
// kText and kJson as text, kVector as floats.
using CellValue = std::variant<std::monostate, int64_t, double, std::string, std::vector<float>>;
using TableRow = std::vector<CellValue>;

// A read of the whole index at one moment (a read transaction): rows read through it agree
// with each other however long the reading takes and whatever is written meanwhile. Must not
// outlive its Store; used by one thread.
class TableSnapshot {
 public:
  virtual ~TableSnapshot() = default;
  // Calls `row` for each row of `table` (one of IndexTables()), in its order, with one value
  // per column. Stops at the first error `row` returns and returns it.
  virtual Status Scan(const IndexTable& table,
                      const std::function<Status(const TableRow& row)>& row) = 0;
  // Rows of `table` (those Scan reads), without reading them.
  virtual Result<int64_t> Count(const IndexTable& table) = 0;
};

}  // namespace grag
