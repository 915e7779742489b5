// The SQL of the SQLite store's mention scan (store_graph.cpp), apart so that a test can check
// how SQLite plans it (tests/store_plan_test.cpp).
//
// The scan walks the chunks in order (their (document_id, chunk_index) index) and each chunk's
// extraction, whose row holds its mentions (mention_record.h): the rows come in the order asked
// for without a sort. CROSS JOIN keeps SQLite to that order; left to itself, without statistics
// (a first index), it reads the extractions first and sorts every row in memory, which is what a
// scan is there to avoid.
#pragma once

#include <string_view>

namespace grag::sqlite {

inline constexpr std::string_view kScanMentionsSql =
    "SELECT e.chunk_id, e.mentions FROM chunks c CROSS JOIN extractions e ON e.chunk_id = c.id "
    "WHERE e.extractor = ? AND e.model = ? AND e.status = 'ok' "
    "ORDER BY c.document_id, c.chunk_index";

}  // namespace grag::sqlite
