// Text columns the SQLite store keeps compressed where that saves room (the reply cache's
// values, an extraction's mentions, a report's findings, a document's text): written as a BLOB
// in reply_codec.h's layout when that is smaller, else as TEXT, and told apart by type on reading.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "grag/status.h"
#include "sqlite.h"

namespace grag::sqlite {

// A column of a table, as the lists below name it.
struct StoredColumn {
  std::string_view table;
  std::string_view column;
};

// The columns written by BindCompressible: the compaction compresses what older builds left
// plain in them, and copies between backends read and write them as text.
inline constexpr StoredColumn kCompressedColumns[] = {{"extractions", "mentions"},
                                                      {"reports", "findings"},
                                                      {"reports", "basis"},
                                                      {"documents", "text"},
                                                      {"llm_cache", "value"}};

// The columns written by BindHash: copies read and write them as hex.
inline constexpr StoredColumn kDigestColumns[] = {{"entities", "description_hash"},
                                                  {"relationships", "description_hash"},
                                                  {"reports", "input_hash"},
                                                  {"embeddings", "input_hash"},
                                                  {"documents", "content_hash"},
                                                  {"extractions", "params_hash"},
                                                  {"llm_cache", "key"}};

// Whether `columns` lists table.column.
template <size_t N>
bool Lists(const StoredColumn (&columns)[N], std::string_view table, std::string_view column) {
  for (const StoredColumn& c : columns) {
    if (c.table == table && c.column == column) return true;
  }
  return false;
}

// Binds `text` to parameter `index`: compressed (a BLOB) where that saves room, else as text.
void BindCompressible(Stmt& stmt, int index, std::string_view text);

// Column `col` of the current row, written by BindCompressible (or plain by an older build), as
// its text; kCorruption for a BLOB that is not a compressed value.
Result<std::string> CompressibleText(const Stmt& stmt, int col);

// Binds a digest written as lowercase hex (an even number of digits, 16 to 64: the input and
// description hashes) as its bytes, a BLOB of half the room; any other text as text.
void BindHash(Stmt& stmt, int index, std::string_view hex);

// Column `col` as the hex a BindHash BLOB was bound from, or its text (older builds wrote hex).
std::string HashText(const Stmt& stmt, int col);

}  // namespace grag::sqlite
