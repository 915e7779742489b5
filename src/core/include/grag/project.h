// A grag project folder: grag.toml, prompts/, input/ and output/ (the index).
#pragma once

#include <string>
#include <vector>

#include "grag/status.h"

namespace grag {

struct InitResult {
  std::vector<std::string> written;  // files created
  std::vector<std::string> kept;     // files that already existed and were left alone
};

// Creates `dir` (if needed) with a commented grag.toml, prompts/ holding seed 000's five
// prompts, and an empty input/ folder. Existing files are never overwritten unless `force`.
Result<InitResult> InitProject(const std::string& dir, bool force = false);

}  // namespace grag
