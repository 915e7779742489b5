// Internal to DRIFT search: reading the primer's and the follow-ups' JSON replies.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grag/status.h"

namespace grag::query {

// One primer or follow-up reply: an answer, its 0-100 score and the follow-up questions.
struct DriftReply {
  std::string answer;
  int score = 0;
  std::vector<std::string> follow_ups;
  bool complete = true;  // false: the JSON was cut off (the reply hit its token cap)
};

// Read tolerantly, like the global map replies: the JSON may sit in code fences or prose, the
// score may be a numeric string (clamped to 0-100), the follow-ups may be "follow_up_queries",
// "followups" or "follow_ups" (strings, or objects with a "query"/"question"), and a JSON cut off
// at the token cap keeps its answer and every complete follow-up before the cut. A missing
// score reads as 0. kParse when no answer can be read.
Result<DriftReply> ParsePrimerReply(std::string_view reply);      // "intermediate_answer"
Result<DriftReply> ParseDriftLocalReply(std::string_view reply);  // "response"

}  // namespace grag::query
