// One extraction's mentions as the SQLite store keeps them: a single value in the extraction's
// row (schema 11) instead of a row per mention in two tables, where the names, keys and
// descriptions of a densely extracted index were a sixth of the file and its per-row overhead
// and indexes another twentieth.
//
// The value is JSON, {"e": [[name, name_key, type, description], ...], "r": [[source, target,
// source_key, target_key, description, strength], ...]}, in the order extracted, bound and read
// as a compressible text column (compressed_text.h): schema 11's migration writes the plain form
// (SQL has no zlib), an extraction stored later the compressed one. docs/schema.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grag/status.h"
#include "grag/store_types.h"
#include "sqlite.h"

namespace grag::store {

// Binds the mentions' value to parameter `index` of `stmt`.
void BindMentions(sqlite::Stmt& stmt, int index, const std::vector<EntityMention>& entities,
                  const std::vector<RelationshipMention>& relationships);

// Appends the mentions of the value in column `col` of `stmt`'s row to whichever of `entities`
// and `relationships` is not null. kCorruption for a value that is not what BindMentions writes.
Status ReadMentions(const sqlite::Stmt& stmt, int col, std::vector<EntityMention>* entities,
                    std::vector<RelationshipMention>* relationships);

}  // namespace grag::store
