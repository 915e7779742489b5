// Comparing two JSON answers to the same question (from two stores, servers or runs).
#pragma once

#include <nlohmann/json.hpp>

namespace grag::testing {

// Removes what differs between two runs of the same query: timings (keys ending in "_ms",
// "_ms_mean" or "_seconds"), at every depth.
void DropTimings(nlohmann::json& j);

}  // namespace grag::testing
