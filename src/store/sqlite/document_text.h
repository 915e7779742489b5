// A document's text kept once: when its chunks are exact slices of it that leave no gap (every
// chunker grag ships writes them so), the documents row holds '' and the text is read back from
// the chunks (start_byte order, overlaps taken once). On 1,000 short passages (one chunk each)
// the second copy was a twentieth of the file. Otherwise the row holds the text, compressed
// where that is smaller (compressed_text.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grag/records.h"
#include "grag/status.h"
#include "sqlite.h"

namespace grag::sqlite {

// Whether `chunks` are slices of `text` ([start_byte, end_byte), their text byte for byte) that
// cover all of it. An empty text is covered by no chunk.
bool ChunksCoverText(std::string_view text, const std::vector<ChunkRecord>& chunks);

// The text of document `id` as stored in column `col` of `stmt`'s row: decompressed, or, when
// the row holds '', read back from its chunks through `conn`. kCorruption when neither gives it
// (a damaged value, chunks that leave a gap).
Result<std::string> StoredDocumentText(Connection& conn, std::string_view id, const Stmt& stmt,
                                       int col);

}  // namespace grag::sqlite
