// Checks both backends make before storing a community hierarchy (Store::ReplaceCommunities).
#pragma once

#include <vector>

#include "grag/status.h"
#include "grag/store_types.h"

namespace grag::store {

// Unique ids, levels >= 0, level-0 communities without a parent and every other one under a
// community of the level above. kInvalidArgument naming the first community that breaks one.
Status CheckCommunityHierarchy(const std::vector<CommunityRecord>& communities);

}  // namespace grag::store
