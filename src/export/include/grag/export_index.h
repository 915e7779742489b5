// Writing an index's export (grag/export.h's formats) from its store. Internal: the engine
// (Engine::Export) and the tests call it.
#pragma once

#include "grag/export.h"
#include "grag/store.h"

namespace grag {

// Writes the index `store` holds in `options.format` into `options.out_dir`. Each file is
// written to a temporary name and renamed into place. Errors: kInvalidArgument (no out_dir, or
// out_dir is a file), kAlreadyExists (a file would be overwritten without force: none is
// written), kIoError, the store's.
Result<ExportSummary> ExportIndex(Store& store, const ExportOptions& options);

}  // namespace grag
