#include "support/answers.h"

#include <string>

namespace grag::testing {

void DropTimings(nlohmann::json& j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end();) {
      const std::string& key = it.key();
      if (key.ends_with("_ms") || key.ends_with("_ms_mean") || key.ends_with("_seconds")) {
        it = j.erase(it);
      } else {
        DropTimings(*it);
        ++it;
      }
    }
  } else if (j.is_array()) {
    for (auto& item : j) DropTimings(item);
  }
}

}  // namespace grag::testing
