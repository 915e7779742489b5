// A persistent key-value cache. The LLM client stores replies through it; the index's store
// implements it with a table in the index file, so every reply survives a crash.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "grag/status.h"

namespace grag {

class KeyValueCache {
 public:
  virtual ~KeyValueCache() = default;
  // The value stored under `key`, or nullopt. Thread-safe.
  virtual std::optional<std::string> Get(std::string_view key) = 0;
  // Stores `value` under `key` (replacing any older value). `model` and `kind` ("chat",
  // "embedding") are kept beside it for inspection. Thread-safe.
  virtual Status Put(std::string_view key, std::string_view value, std::string_view model,
                     std::string_view kind) = 0;
};

}  // namespace grag
