// Internal to global search: reading map replies and building the reduce prompt.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grag/global_search.h"
#include "grag/status.h"
#include "grag/tokenizer.h"

namespace grag::query {

// One point as the map model wrote it.
struct MapPoint {
  std::string description;
  int score = 0;                   // clamped to 0-100
  std::vector<int64_t> named_ids;  // report ids the model named (any, not yet checked)
};

// Reads the points of a map reply, tolerantly: {"points": [...]} or a bare list, inside code
// fences or prose, with scores as numbers or numeric strings, and, when the JSON is cut off (the
// reply hit its token cap), every complete point before the cut. Report ids come from a point's
// id fields ("reports", "ids", "sources", ...) and from its text ("[Data: Reports (3, 7)]",
// "report 12"). kParse when the reply holds no readable point at all.
Result<std::vector<MapPoint>> ParseMapReply(std::string_view reply);

// The integers a text names after "report(s)" or "community/communities", e.g. 3 and 7 in
// "[Data: Reports (3, 7, +more)]".
std::vector<int64_t> IdsNamedInText(std::string_view text);

// One point as the reduce prompt shows it (sources="T3, T7" instead when it has source_ids):
//   <point score="80" communities="3, 7">
//   description
//   </point>
std::string PointBlock(const GlobalPoint& point);

struct ReducePrompt {
  std::string prompt;
  int64_t tokens = 0;
  size_t kept = 0;  // the first `kept` of the ranked points are in the prompt
};

// Fills the reduce template with the longest prefix of `ranked` (sorted, highest score first)
// whose whole prompt fits `budget` tokens. Whole points only: the first that does not fit ends
// the list, so the prompt holds exactly the top points. kept == 0 when not even the first fits.
ReducePrompt BuildReducePrompt(std::string_view templ, std::string_view question,
                               const std::vector<const GlobalPoint*>& ranked, int64_t budget,
                               const Tokenizer& tokenizer);

}  // namespace grag::query
