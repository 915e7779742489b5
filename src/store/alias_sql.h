// The aliases an index keeps and the ones it derives, the same for both backends (internal to
// the store module).
//
// Every entity is its own alias (a name resolution placed as itself): on 1,000 densely extracted
// passages those rows were 97% of entity_aliases and 4% of the file. Such a row is not stored
// when the entities table says the same (its name, score 1, no method or reason); ListAliases
// gives it back from the entity. A stored row of the same key wins.
#pragma once

#include <string_view>

namespace grag::store {

// The aliases, stored and derived, by name_key.
inline constexpr std::string_view kListAliasesSql =
    "SELECT name_key, name, canonical_key, score, method, reason FROM entity_aliases "
    "UNION ALL SELECT e.name_key, e.name, e.name_key, 1, '', '' FROM entities e "
    "WHERE NOT EXISTS (SELECT 1 FROM entity_aliases a WHERE a.name_key = e.name_key) "
    "ORDER BY 1";

// Whether an alias (name_key, name, canonical_key, score, method, reason as `a.` columns) is the
// one its entity gives, so need not be stored.
inline constexpr std::string_view kDerivedAliasCondition =
    "a.name_key = a.canonical_key AND a.score = 1 AND a.method = '' AND a.reason = '' AND "
    "EXISTS (SELECT 1 FROM entities e WHERE e.name_key = a.name_key AND e.name = a.name)";

}  // namespace grag::store
