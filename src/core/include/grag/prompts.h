// The prompts: seed 000's five prompts as built-in defaults, overridable by editable files
// (<root>/prompts/<name>.md, written by `grag init`). Placeholders look like {{chunk}}.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "grag/status.h"

namespace grag {

// Seed 000's five prompts, then grag's own: the answer of basic and hybrid search, the
// optional LLM router of `--method auto`, entity resolution's judge, DRIFT search's four
// (hypothetical answer, primer, follow-up answer, reduce) and budgeted search's three (refine,
// relevance test, claims; its reduce is seed 000's global_reduce).
enum class PromptId {
  kExtractGraph,
  kCommunityReport,
  kGlobalMap,
  kGlobalReduce,
  kLocalSearch,
  kBasicSearch,
  kRouteQuestion,
  kResolveEntities,
  kDriftHyde,
  kDriftPrimer,
  kDriftLocal,
  kDriftReduce,
  kLazyRefine,
  kLazyRelevance,
  kLazyClaims,
};

struct PromptInfo {
  PromptId id;
  std::string_view file_name;                  // "extract_graph.md"
  std::string_view purpose;                    // one line for `grag init` and docs
  std::string_view default_text;               // seed 000's prompt, verbatim
  std::vector<std::string_view> placeholders;  // every one must appear in an edited file
};

// Every prompt: seed 000's five in pipeline order, then grag's.
const std::vector<PromptInfo>& AllPrompts();
const PromptInfo& GetPromptInfo(PromptId id);

// The prompt text: <prompts_dir>/<file_name> when that file exists, else the built-in default.
// An edited file that lost a placeholder is an InvalidArgument naming the file and placeholder.
Result<std::string> LoadPrompt(const std::string& prompts_dir, PromptId id);

// Replaces each {{name}} with values.at(name); unknown placeholders are left as they are.
std::string FillPrompt(std::string_view templ, const std::map<std::string, std::string>& values);

}  // namespace grag
