// Small indexes written straight into a Store, for tests of the stages that read one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grag/store.h"

namespace grag::testing {

// A new index at `path` holding one document, `document_id`, whose chunks are `texts` in order;
// chunk i gets the id chunk_id(i).
Result<std::unique_ptr<Store>> OpenStoreWithChunks(
    const std::string& path, const std::string& document_id, const std::vector<std::string>& texts,
    const std::function<std::string(size_t)>& chunk_id);

}  // namespace grag::testing
