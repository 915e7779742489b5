// Internal to budgeted search: reading the refine, relevance and claims replies. Tolerant like
// ParseMapReply: code fences, prose around the JSON, numbers as strings, a reply cut off at its
// token cap (every complete entry before the cut). kParse only when nothing is readable.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "grag/status.h"

namespace grag::query {

struct RefineReply {
  std::vector<std::string> subqueries;
  std::vector<std::string> terms;
};
Result<RefineReply> ParseRefineReply(std::string_view reply);

// Passage label ("T3") -> rating 0-3. Ids are accepted as "T3", "t3", "3" or 3 (read as T3);
// {"ratings": [...]}, a bare list, or an object {"T3": 2}. An empty list is a valid reply.
Result<std::map<std::string, int>> ParseRelevanceReply(std::string_view reply);

struct ClaimReply {
  std::string claim;
  int score = 0;                     // 0-100
  std::vector<std::string> sources;  // passage labels, "T<n>", as written (upper-cased)
  std::string quote;
};
// {"claims": [...]}, a bare list, or seed 000's {"points": [...]} shape; sources from
// "sources"/"ids"/"passages" and from "T<n>" in the claim's text.
Result<std::vector<ClaimReply>> ParseClaimsReply(std::string_view reply);

}  // namespace grag::query
