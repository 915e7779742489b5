// Character offsets as citations give them (code points, grag/citations.h), applied to UTF-8 text.
#pragma once

#include <cstdint>
#include <string>

namespace grag::testing {

// The bytes of `text` from code point `start` to code point `end` (what Python's text[start:end]
// gives), or "<out of range>".
std::string CodePointSlice(const std::string& text, int64_t start, int64_t end);

}  // namespace grag::testing
