// OpenAIClient's options (grag/llm.h's OpenAIOptions): their checks and the endpoints they
// describe. Internal to the llm module.
#pragma once

#include <vector>

#include "grag/llm.h"

namespace grag::llm_internal {

// InvalidArgument naming the first option out of range ("LLM client options: ...").
Status CheckOpenAIOptions(const OpenAIOptions& o);

// The endpoints a client sends to: the list given, or one made of the single-endpoint fields.
// Names default to host:port, made unique with #2, #3...
std::vector<EndpointOptions> EffectiveEndpoints(const OpenAIOptions& o);

}  // namespace grag::llm_internal
