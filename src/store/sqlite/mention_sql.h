// The SQL of the SQLite store's mention scans (store_graph.cpp), apart so that a test can check
// how SQLite plans it (tests/store_plan_test.cpp).
//
// The scans walk the chunks in order (their (document_id, chunk_index) index), each chunk's
// extraction and its mentions (by extraction, in id order): the rows come in the order asked for
// without a sort. CROSS JOIN keeps SQLite to that order; left to itself, without statistics (a
// first index), it reads the extractions first and sorts every mention row in memory (93 MiB
// for 197k relationship mentions), which is what a scan is there to avoid.
#pragma once

#include <string_view>

namespace grag::sqlite {

inline constexpr std::string_view kScanEntityMentionsSql =
    "SELECT e.chunk_id, m.name, m.name_key, m.type, m.description FROM chunks c CROSS JOIN "
    "extractions e ON e.chunk_id = c.id CROSS JOIN entity_mentions m ON m.extraction_id = e.id "
    "WHERE e.extractor = ? AND e.model = ? AND e.status = 'ok' "
    "ORDER BY c.document_id, c.chunk_index, m.id";

inline constexpr std::string_view kScanRelationshipMentionsSql =
    "SELECT e.chunk_id, m.source, m.target, m.source_key, m.target_key, m.description, "
    "m.strength FROM chunks c CROSS JOIN extractions e ON e.chunk_id = c.id CROSS JOIN "
    "relationship_mentions m ON m.extraction_id = e.id WHERE e.extractor = ? AND e.model = ? "
    "AND e.status = 'ok' ORDER BY c.document_id, c.chunk_index, m.id";

}  // namespace grag::sqlite
