// Pieces of entity resolution exposed for their tests. Internal to src/graph.
#pragma once

#include <cstddef>
#include <string_view>

namespace grag::resolve_internal {

// Optimal string alignment distance (edits: insert, delete, substitute, swap two neighbours),
// capped: cap + 1 when larger.
size_t EditDistance(std::string_view a, std::string_view b, size_t cap);

}  // namespace grag::resolve_internal
