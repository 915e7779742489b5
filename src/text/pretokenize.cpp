#include "pretokenize.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace grag::text_internal {
namespace {

// ASCII character classes as PCRE2 (UTF, UCP) sees them. \s is \p{Z}, \h or \v: in ASCII the
// tab, line feed, vertical tab, form feed, carriage return and space (not the 0x1C-0x1F
// separators, which are punctuation here).
enum Cls : uint8_t {
  kUpper,     // \p{Lu}
  kLower,     // \p{Ll}
  kDigit,     // \p{N}
  kNewline,   // \r or \n: \s, and excluded from the optional leading character
  kSpace,     // other \s
  kOther,     // anything else ASCII: [^\s\p{L}\p{N}]
  kNonAscii,  // a byte >= 0x80: undecided
  kEnd,       // past the subject
};

constexpr std::array<uint8_t, 256> BuildTable() {
  std::array<uint8_t, 256> t{};
  for (int c = 0; c < 256; ++c) {
    uint8_t k = kOther;
    if (c >= 0x80) {
      k = kNonAscii;
    } else if (c >= 'A' && c <= 'Z') {
      k = kUpper;
    } else if (c >= 'a' && c <= 'z') {
      k = kLower;
    } else if (c >= '0' && c <= '9') {
      k = kDigit;
    } else if (c == '\r' || c == '\n') {
      k = kNewline;
    } else if (c == ' ' || (c >= 0x09 && c <= 0x0C)) {
      k = kSpace;
    }
    t[static_cast<size_t>(c)] = k;
  }
  return t;
}

constexpr std::array<uint8_t, 256> kTable = BuildTable();

class Scan {
 public:
  explicit Scan(std::string_view text) : p_(text.data()), n_(text.size()) {}

  uint8_t At(size_t i) const {
    return i < n_ ? kTable[static_cast<unsigned char>(p_[i])] : static_cast<uint8_t>(kEnd);
  }
  char Char(size_t i) const { return i < n_ ? p_[i] : '\0'; }
  size_t size() const { return n_; }

  // The end of the run of class `k` from i.
  size_t Run(size_t i, uint8_t k) const {
    while (i < n_ && kTable[static_cast<unsigned char>(p_[i])] == k) ++i;
    return i;
  }
  size_t LetterRun(size_t i) const {
    while (i < n_ && kTable[static_cast<unsigned char>(p_[i])] <= kLower) ++i;
    return i;
  }

 private:
  const char* p_;
  size_t n_;
};

constexpr size_t kUndecided = 0;       // what AsciiPieceEnd returns (a match ends after off)
constexpr size_t kNoMatch = SIZE_MAX;  // an alternative that does not match here

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at i (text[i] == '\''): its end; kNoMatch when none matches;
// kUndecided when a non-ASCII character could match case-insensitively (U+017F folds to 's').
size_t Contraction(const Scan& s, size_t i) {
  if (s.At(i + 1) == kNonAscii) return kUndecided;
  const char a = Lower(s.Char(i + 1));
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (a == 'r' || a == 'v' || a == 'l') {
    if (s.At(i + 2) == kNonAscii) return kUndecided;
    const char b = Lower(s.Char(i + 2));
    if ((a == 'l' && b == 'l') || (a != 'l' && b == 'e')) return i + 3;
  }
  return kNoMatch;
}

// \p{N}{1,3} at i (a digit).
size_t Digits(const Scan& s, size_t i) {
  size_t j = i + 1;
  while (j < i + 3 && s.At(j) == kDigit) ++j;
  if (j < i + 3 && s.At(j) == kNonAscii) return kUndecided;
  return j;
}

//  ?[^\s\p{L}\p{N}]+ then [\r\n]* (cl100k) or [\r\n/]* (o200k), at i: its end, or kNoMatch
// when it does not match.
size_t Punctuation(const Scan& s, size_t i, bool slash) {
  size_t j = i;
  if (s.Char(j) == ' ') {
    const uint8_t next = s.At(j + 1);
    if (next == kNonAscii) return kUndecided;
    if (next != kOther) return kNoMatch;
    ++j;
  } else if (s.At(j) != kOther) {
    return kNoMatch;
  }
  j = s.Run(j, kOther);
  if (s.At(j) == kNonAscii) return kUndecided;
  while (j < s.size() && (s.Char(j) == '\r' || s.Char(j) == '\n' || (slash && s.Char(j) == '/'))) {
    ++j;
  }
  return j;
}

// \s*[\r\n]+|\s+(?!\S)|\s+ at i (a space).
size_t Spaces(const Scan& s, size_t i) {
  size_t end = i;
  size_t last_newline = SIZE_MAX;
  for (uint8_t k = s.At(end); k == kSpace || k == kNewline; k = s.At(++end)) {
    if (k == kNewline) last_newline = end;
  }
  if (s.At(end) == kNonAscii) return kUndecided;  // the run may go on (U+00A0, U+2028...)
  if (last_newline != SIZE_MAX) return last_newline + 1;
  if (end == s.size() || end - i == 1) return end;
  return end - 1;  // the last space goes with what follows
}

size_t Cl100k(const Scan& s, size_t i) {
  const uint8_t c = s.At(i);
  if (c == kNonAscii) return kUndecided;
  if (s.Char(i) == '\'') {
    const size_t e = Contraction(s, i);
    if (e != kNoMatch) return e;  // a match, or undecided
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c <= kLower) {
    const size_t e = s.LetterRun(i + 1);
    return s.At(e) == kNonAscii ? kUndecided : e;
  }
  if (c == kSpace || c == kOther) {
    const uint8_t next = s.At(i + 1);
    if (next == kNonAscii) return kUndecided;
    if (next <= kLower) {
      const size_t e = s.LetterRun(i + 2);
      return s.At(e) == kNonAscii ? kUndecided : e;
    }
  }
  if (c == kDigit) return Digits(s, i);
  const size_t e = Punctuation(s, i, /*slash=*/false);
  if (e != kNoMatch) return e;
  return Spaces(s, i);
}

// [\p{Lu}...]*[\p{Ll}...]+ or [\p{Lu}...]+[\p{Ll}...]*, then the optional contraction, at i:
// its end (text[i] is a letter).
size_t O200kWord(const Scan& s, size_t i) {
  const size_t upper_end = s.Run(i, kUpper);
  if (s.At(upper_end) == kNonAscii) return kUndecided;  // a mark or a lowercase letter may follow
  const size_t end = s.Run(upper_end, kLower);
  if (s.At(end) == kNonAscii) return kUndecided;
  if (s.Char(end) == '\'') {
    const size_t contraction = Contraction(s, end);
    if (contraction != kNoMatch) return contraction;
  }
  return end;
}

size_t O200k(const Scan& s, size_t i) {
  const uint8_t c = s.At(i);
  if (c == kNonAscii) return kUndecided;
  if (c <= kLower) return O200kWord(s, i);  // a letter never fails to start a word
  if (c == kSpace || c == kOther) {
    const uint8_t next = s.At(i + 1);
    if (next == kNonAscii) return kUndecided;
    if (next <= kLower) return O200kWord(s, i + 1);
  }
  if (c == kDigit) return Digits(s, i);
  const size_t e = Punctuation(s, i, /*slash=*/true);
  if (e != kNoMatch) return e;
  return Spaces(s, i);
}

}  // namespace

size_t AsciiPieceEnd(PretokenPattern pattern, std::string_view text, size_t off) {
  const Scan s(text);
  switch (pattern) {
    case PretokenPattern::kCl100k:
      return Cl100k(s, off);
    case PretokenPattern::kO200k:
      return O200k(s, off);
    case PretokenPattern::kNone:
      break;
  }
  return kUndecided;
}

}  // namespace grag::text_internal
