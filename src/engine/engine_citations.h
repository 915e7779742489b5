// Character-level citations of a query result (private to the engine): each method's cited ids
// mapped to the passages of the original documents they rest on (grag/citations.h).
#pragma once

#include <vector>

#include "grag/citations.h"
#include "grag/engine.h"
#include "engine_internal.h"

namespace grag {

// One SourceCitation per id the answer cites (every citation of global search and budgeted
// search), in the method's citation order. No model call.
Result<std::vector<SourceCitation>> LocateCitations(Store& store, const SpanOptions& options,
                                                    const QueryResult& result);

}  // namespace grag
