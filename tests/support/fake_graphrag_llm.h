// A deterministic stand-in for an LLM that knows grag's prompts: it answers extraction prompts
// with the capitalised names of the chunk (as JSON entities and relationships), gleaning with
// nothing new, summaries, community reports, global-search map/reduce and local answers with
// plausible replies in the expected formats. Pipeline and end-to-end tests use it through
// ScriptedChatModel (FakeGraphRagResponder) or the loopback server (FakeGraphRagHandler).
#pragma once

#include <string>
#include <string_view>

#include "grag/llm.h"
#include "support/fake_openai_server.h"

namespace grag::testing {

// The reply to a conversation whose last user message is `prompt`.
std::string FakeGraphRagReply(std::string_view prompt);

// For ScriptedChatModel.
ScriptedChatModel::Responder FakeGraphRagResponder();

// For FakeOpenAIServer: chat completions from FakeGraphRagReply; embeddings hashed.
FakeHandler FakeGraphRagHandler();

// Which kind of prompt `prompt` is: "extract", "glean", "retry", "summarize", "report", "map",
// "reduce", "local", "basic", "route", "drift_hyde", "drift_primer", "drift_local",
// "drift_reduce", "lazy_refine", "lazy_relevance", "lazy_claims" or "unknown".
std::string PromptKind(std::string_view prompt);

}  // namespace grag::testing
