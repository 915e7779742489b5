// SQL pieces for whole-table reads and writes (grag/store_tables.h), the same for both backends
// (internal to the store module).
#pragma once

#include <string>
#include <string_view>

#include "grag/store_tables.h"

namespace grag::store {

// "a, b, c": the table's columns in order; `json_suffix` follows each JSON column (PostgreSQL
// selects jsonb as "::text").
std::string ColumnList(const IndexTable& table, std::string_view json_suffix = "");

// " WHERE NOT (...)" leaving out the rows a copy skips (IndexTable::exclude), or "".
std::string ExcludeClause(const IndexTable& table);

}  // namespace grag::store
