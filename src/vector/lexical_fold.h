// The lexical embedder's text folding (NFKC, case folding, accents stripped), internal to
// src/vector; declared here for its test.
#pragma once

#include <string>
#include <string_view>

namespace grag::vector_internal {

// utf8proc's folding of the whole text at once; empty when it is not UTF-8.
std::string FoldWhole(std::string_view text);

// The same, with ASCII folded by hand and only the non-ASCII runs (each with the ASCII character
// before it) through utf8proc: equal to FoldWhole for every input.
std::string Fold(std::string_view text);

}  // namespace grag::vector_internal
