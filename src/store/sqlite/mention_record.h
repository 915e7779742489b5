// One extraction's mentions as the SQLite store keeps them: a single value in the extraction's
// row (schema 11) instead of a row per mention in two tables, where the names, keys and
// descriptions of a densely extracted index were a sixth of the file and its per-row overhead
// and indexes another twentieth.
//
// The value is JSON, {"e": [[name, name_key, type, description], ...], "r": [[source, target,
// source_key, target_key, description, strength], ...]}, in the order extracted, kept as a BLOB
// compressed like a cached reply (reply_codec.h) when that saves room, else as TEXT: schema 11's
// migration writes the plain form (SQL has no zlib) and an extraction stored later the compressed
// one. grag sql reads it with the JSON functions after decompressing nothing: docs/schema.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grag/status.h"
#include "grag/store_types.h"

namespace grag::store {

struct StoredMentions {
  std::string bytes;
  bool compressed = false;  // BLOB (zlib) rather than TEXT (plain JSON)
};

StoredMentions EncodeMentions(const std::vector<EntityMention>& entities,
                              const std::vector<RelationshipMention>& relationships);

// Appends the mentions of a stored value to whichever of `entities` and `relationships` is not
// null. kCorruption for a value that is not what EncodeMentions writes.
Status DecodeMentions(std::string_view bytes, bool compressed, std::vector<EntityMention>* entities,
                      std::vector<RelationshipMention>* relationships);

}  // namespace grag::store
