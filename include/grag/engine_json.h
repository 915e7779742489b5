// The one place results become JSON: `--json` output of the CLI and the HTTP API's bodies.
// The shapes are documented in the README; keep them stable (front ends parse them).
#pragma once

#include <string>
#include <string_view>

#include "grag/engine.h"
#include "grag/retrieval.h"

namespace grag {

// pretty: indented for people (a terminal); else one line.
std::string QueryResultJson(const QueryResult& result, std::string_view question, bool pretty);
std::string RetrievalResultJson(const RetrievalResult& result, std::string_view question,
                                RetrievalMethod method, bool pretty);
std::string QueryRouteJson(const QueryRoute& route, std::string_view question, bool pretty);

}  // namespace grag
