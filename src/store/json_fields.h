// JSON-valued columns (entity type counts, run counters, report findings) <-> plain structs.
// The JSON stays inside the store; callers see maps and vectors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "grag/store_types.h"

namespace grag::store {

// {"PERSON": 3, "GEO": 1}
std::string CountsToJson(const std::map<std::string, int64_t>& counts);
// Integer members of a JSON object; anything else (bad JSON, non-integers) is skipped, since
// the column's CHECK (json_valid) already guards what the store wrote.
std::map<std::string, int64_t> CountsFromJson(std::string_view json);

// [{"summary": "...", "explanation": "...", "entities": ["..."]}]
std::string FindingsToJson(const std::vector<Finding>& findings);
std::vector<Finding> FindingsFromJson(std::string_view json);

// {"members": [3, 7], "internal_weight": 12.5, "params": "..."}; "" when the basis is empty
// (an extractive report, or one written before bases were recorded).
std::string ReportBasisToJson(const ReportBasis& basis);
ReportBasis ReportBasisFromJson(std::string_view json);

}  // namespace grag::store
