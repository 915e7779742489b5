// A hand-written pre-tokeniser for ASCII text, exactly equivalent to tiktoken's cl100k_base and
// o200k_base patterns wherever it answers. PCRE2's JIT code for those patterns costs about 450
// instructions per piece (Unicode property classes, lookahead, backtracking over eight
// alternatives), which made pre-tokenisation three quarters of counting tokens; most pieces of
// most text are ASCII, decided here in a few dozen instructions.
#pragma once

#include <cstddef>
#include <string_view>

namespace grag::text_internal {

enum class PretokenPattern {
  kNone,    // no fast path: every piece goes to PCRE2
  kCl100k,  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
            //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kO200k,   // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
            // (?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+
            // [\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}|
            //  ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
};

// The end of the pattern's match at `off` (< text.size()) in `text`, the whole subject, when
// every character that decides it is ASCII; 0 when a non-ASCII byte takes part (a letter, digit
// or space class, or a case-insensitive contraction, might then differ), for PCRE2 to decide.
// The matches of these patterns start where they are sought (they match every character).
size_t AsciiPieceEnd(PretokenPattern pattern, std::string_view text, size_t off);

}  // namespace grag::text_internal
