#include "community_checks.h"

#include <cstdint>
#include <string>
#include <unordered_map>

namespace grag::store {

Status CheckCommunityHierarchy(const std::vector<CommunityRecord>& communities) {
  std::unordered_map<int64_t, int64_t> level_of;
  for (const CommunityRecord& c : communities) {
    if (c.level < 0) return Status::InvalidArgument("community level must be >= 0");
    if (!level_of.emplace(c.id, c.level).second) {
      return Status::InvalidArgument("community id " + std::to_string(c.id) + " appears twice");
    }
  }
  for (const CommunityRecord& c : communities) {
    const std::string name = "community " + std::to_string(c.id);
    if (c.level == 0 && c.parent_id.has_value()) {
      return Status::InvalidArgument(name + " is at level 0 but has a parent");
    }
    if (c.level > 0) {
      if (!c.parent_id.has_value()) {
        return Status::InvalidArgument(name + " is at level " + std::to_string(c.level) +
                                       " but has no parent");
      }
      auto parent = level_of.find(*c.parent_id);
      if (parent == level_of.end() || parent->second != c.level - 1) {
        return Status::InvalidArgument(name + ": parent " + std::to_string(*c.parent_id) +
                                       " is not a community of level " +
                                       std::to_string(c.level - 1));
      }
    }
  }
  return Status::Ok();
}

}  // namespace grag::store
