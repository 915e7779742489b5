// Unicode general-category additions that the tokenizer's patterns need on top of PCRE2's own
// tables (internal to the text module). Derived data: re-derive as described below.
//
// tiktoken's patterns use \p{L}, \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm}, \p{Lo}, \p{M} and \p{N}. The
// tiktoken build we match (npm tiktoken 1.0.22: Rust fancy-regex over the regex crate) knows
// Unicode 16.0, while Debian 12's PCRE2 10.42 knows Unicode 14.0, so characters assigned since
// (Egyptian hieroglyphs extension A, CJK extension H and I, Kawi, Garay, Todhri, ...) would be
// unassigned (Cn) to PCRE2 and split differently. For each property this lists the code points
// that have it in Unicode 16.0 but not in PCRE2 10.42's tables; the tokenizer adds them to
// every \p{..} of its patterns when a text contains one of them.
//
// How it was made: every code point's membership in each property according to PCRE2 10.42 was
// compared with node 20's Unicode 17.0 tables; of the differences, those that node tiktoken
// treats as unassigned (Unicode 17.0 additions such as CJK extension J, Sidetic, Tai Yo) were
// dropped, as was U+0295 (Ll in PCRE2, Lo in Unicode 17.0; no text we could build tells which
// tiktoken uses). A sweep of all 1,112,064 code points in letter, digit, space and punctuation
// contexts then gave the same ids as node tiktoken for both encodings, and the parity test's
// corpus (tests/support/tokenizer_corpus.h) keeps every listed code point under test. With a
// PCRE2 that already knows these characters the additions are harmless duplicates.
#pragma once

#include <string_view>

namespace grag {

struct UnicodeCategoryAddition {
  std::string_view property;  // as written in \p{..}
  std::string_view ranges;    // PCRE2 class items: \x{..} and \x{..}-\x{..}
};

inline constexpr UnicodeCategoryAddition kUnicodeCategoryAdditions[] = {
    {"L",
     "\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-\\x{105F3}"
     "\\x{10D4A}-\\x{10D65}\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{10EC4}\\x{1123F}-\\x{11240}"
     "\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}\\x{113D1}"
     "\\x{113D3}\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}"
     "\\x{1342F}\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}"
     "\\x{16D40}-\\x{16D6C}\\x{18CFF}\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}"
     "\\x{1E030}-\\x{1E06D}\\x{1E4D0}-\\x{1E4EB}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}"
     "\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}"},
    {"Lu", "\\x{1C89}\\x{A7CB}-\\x{A7CC}\\x{A7DA}\\x{A7DC}\\x{10D50}-\\x{10D65}"},
    {"Ll", "\\x{1C8A}\\x{A7CD}\\x{A7DB}\\x{10D70}-\\x{10D85}\\x{1DF25}-\\x{1DF2A}"},
    {"Lm",
     "\\x{10D4E}\\x{10D6F}\\x{16D40}-\\x{16D42}\\x{16D6B}-\\x{16D6C}\\x{1E030}-\\x{1E06D}"
     "\\x{1E4EB}"},
    {"Lo",
     "\\x{105C0}-\\x{105F3}\\x{10D4A}-\\x{10D4D}\\x{10D4F}\\x{10EC2}-\\x{10EC4}"
     "\\x{1123F}-\\x{11240}\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}"
     "\\x{113B7}\\x{113D1}\\x{113D3}\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{11F04}-\\x{11F10}"
     "\\x{11F12}-\\x{11F33}\\x{1342F}\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}"
     "\\x{16100}-\\x{1611D}\\x{16D43}-\\x{16D6A}\\x{18CFF}\\x{1B132}\\x{1B155}"
     "\\x{1E4D0}-\\x{1E4EA}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}\\x{2EBF0}-\\x{2EE5D}"
     "\\x{31350}-\\x{323AF}"},
    {"M",
     "\\x{897}\\x{CF3}\\x{ECE}\\x{10D69}-\\x{10D6D}\\x{10EFC}-\\x{10EFF}\\x{11241}"
     "\\x{113B8}-\\x{113C0}\\x{113C2}\\x{113C5}\\x{113C7}-\\x{113CA}\\x{113CC}-\\x{113D0}"
     "\\x{113D2}\\x{113E1}-\\x{113E2}\\x{11F00}-\\x{11F01}\\x{11F03}\\x{11F34}-\\x{11F3A}"
     "\\x{11F3E}-\\x{11F42}\\x{11F5A}\\x{13440}\\x{13447}-\\x{13455}\\x{1611E}-\\x{1612F}"
     "\\x{1E08F}\\x{1E4EC}-\\x{1E4EF}\\x{1E5EE}-\\x{1E5EF}"},
    {"N",
     "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}"
     "\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1D2C0}-\\x{1D2D3}"
     "\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}"},
};

}  // namespace grag
