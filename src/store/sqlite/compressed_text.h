// Text columns the SQLite store keeps compressed where that saves room (the reply cache's
// values, an extraction's mentions, a report's findings, a document's text): written as a BLOB
// in reply_codec.h's layout when that is smaller, else as TEXT, and told apart by type on reading.
#pragma once

#include <string>
#include <string_view>

#include "grag/status.h"
#include "sqlite.h"

namespace grag::sqlite {

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
