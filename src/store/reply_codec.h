// The reply cache's compressed values, internal to the store module. A reply is kept as zlib
// (Debian's zlib1g) when that saves room; the SQLite store tells a compressed value from a plain
// one by its type (BLOB, not TEXT), so the plain values older builds wrote read as before.
//
// Layout: "Z1", the reply's size as 4 bytes little-endian, then the zlib stream.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "grag/status.h"

namespace grag::store {

// The compressed form of `reply`, or nullopt when it would not be smaller (short replies).
// `level`: zlib's, 1 (fastest) to 9.
std::optional<std::string> CompressReply(std::string_view reply, int level = 6);

// The reply back; kCorruption for bytes that are not a compressed reply.
Result<std::string> DecompressReply(std::string_view stored);

// The size of what `stored` decompresses to; nullopt when it does not open as a compressed value.
std::optional<size_t> DecompressedSize(std::string_view stored);
// Decompresses `stored` into `out`, which has room for DecompressedSize(stored) bytes.
Status DecompressInto(std::string_view stored, char* out);

}  // namespace grag::store
