// The query router of `grag query --method auto` (seed 004's routing): a question about the
// collection as a whole goes to global search, one that joins facts about several named things
// (or reaches one through another) to local search, and a lookup of one fact to hybrid search,
// the cheapest. Rules by default; optionally one small cached LLM call.
#pragma once

#include <string>
#include <string_view>

#include "grag/search_results.h"
#include "grag/llm.h"
#include "grag/status.h"

namespace grag {

// Rules over the question's words. `named_entities` is how many entities of the index the
// question names (Retriever::NamedEntities): two or more make a multi-hop question.
RouteDecision RouteByRules(std::string_view question, size_t named_entities);

// One call with the route prompt ({{question}}); the reply is JSON {"kind", "reason"}. A reply
// that cannot be read falls back to the rules (with a reason saying so); errors are the model's.
Result<RouteDecision> RouteWithModel(ChatModel& chat, const std::string& prompt,
                                     std::string_view question, size_t named_entities);

}  // namespace grag
