// The hand-written ASCII pre-tokeniser (src/text/pretokenize.h) against PCRE2 running the
// tiktoken patterns themselves: wherever it answers, it must give PCRE2's match, on random text
// over an alphabet chosen to hit every alternative and every boundary (contractions in both
// cases, newlines inside and after space runs, a slash after punctuation, digits in runs, and
// non-ASCII letters, marks, digits and spaces next to ASCII).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "text/pretokenize.h"

namespace grag {
namespace {

using text_internal::AsciiPieceEnd;
using text_internal::PretokenPattern;

constexpr const char* kCl100k =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Pcre {
  explicit Pcre(const char* pattern) {
    int err = 0;
    PCRE2_SIZE at = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP, &err, &at, nullptr);
    md = pcre2_match_data_create(1, nullptr);
  }
  ~Pcre() {
    pcre2_match_data_free(md);
    pcre2_code_free(code);
  }
  Pcre(const Pcre&) = delete;
  Pcre& operator=(const Pcre&) = delete;

  // The match at `off`: [start, end), or start == npos.
  std::pair<size_t, size_t> Match(const std::string& text, size_t off) const {
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), off, 0,
                               md, nullptr);
    if (rc <= 0) return {std::string::npos, 0};
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    return {ov[0], ov[1]};
  }

  pcre2_code* code = nullptr;
  pcre2_match_data* md = nullptr;
};

// Checks every piece of `text`; returns how many the fast path decided.
size_t CheckText(const Pcre& re, PretokenPattern pattern, const std::string& text) {
  size_t decided = 0;
  size_t off = 0;
  while (off < text.size()) {
    const auto [start, end] = re.Match(text, off);
    EXPECT_EQ(start, off) << "PCRE2 skipped text in " << ::testing::PrintToString(text);
    if (start != off || end <= start) return decided;
    const size_t fast = AsciiPieceEnd(pattern, text, off);
    if (fast != 0) {
      ++decided;
      EXPECT_EQ(fast, end) << "at " << off << " in " << ::testing::PrintToString(text);
      if (fast != end) return decided;
    }
    off = end;
  }
  return decided;
}

std::string RandomText(std::mt19937& rng, size_t length) {
  static const std::vector<std::string> kAlphabet = {
      "a",  "b",      "s",      "t",      "e", "l", "r",  "v",      "m",    "d",  "A",
      "S",  "T",      "L",      "E",      "R", "V", "M",  "D",      "Z",    "0",  "7",
      "9",  "'",      "'",      "'",      " ", " ", " ",  "\n",     "\r",   "\t", "\v",
      "\f", "/",      ".",      ",",      "!", "-", "_",  "(",      "\x1c", "é",  "É",
      "ſ",  "\u0301", "\u00a0", "\u2028", "²", "٣", "中", "\u02b0", "😀"};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string out;
  for (size_t i = 0; i < length; ++i) out += kAlphabet[pick(rng)];
  return out;
}

TEST(PretokenizeTest, AgreesWithPcreOnRandomText) {
  const Pcre cl100k(kCl100k);
  const Pcre o200k(kO200k);
  ASSERT_NE(cl100k.code, nullptr);
  ASSERT_NE(o200k.code, nullptr);
  std::mt19937 rng(17);
  size_t decided = 0;
  for (int i = 0; i < 20000 && !HasFailure(); ++i) {
    const std::string text = RandomText(rng, 1 + i % 40);
    decided += CheckText(cl100k, PretokenPattern::kCl100k, text);
    decided += CheckText(o200k, PretokenPattern::kO200k, text);
  }
  EXPECT_GT(decided, 100000u);  // the fast path did answer, not only defer
}

TEST(PretokenizeTest, AgreesWithPcreOnProse) {
  const Pcre cl100k(kCl100k);
  const Pcre o200k(kO200k);
  const std::string prose =
      "He said: \"I'LL go, we're fine; they've 12345 cats.\"\n\n  Indented  text\t\ttabs\r\n"
      "CamelCase HTTPServer iPhone don't DON'T it's O'Neil https://example.com/a/b?x=1 \n"
      "   \n\n\f end... ---\n/path//to\n/x 3.14159 1,000,000 $5.00 (see [1]) ' 's 'S 're\n";
  EXPECT_GT(CheckText(cl100k, PretokenPattern::kCl100k, prose), 50u);
  EXPECT_GT(CheckText(o200k, PretokenPattern::kO200k, prose), 50u);
}

TEST(PretokenizeTest, DefersWhereNonAsciiDecides) {
  // A letter run that goes on into "é", spaces before U+00A0, a contraction with U+017F.
  EXPECT_EQ(AsciiPieceEnd(PretokenPattern::kO200k, "caf\u00e9", 0), 0u);
  EXPECT_EQ(AsciiPieceEnd(PretokenPattern::kCl100k, "  \u00a0x", 0), 0u);
  EXPECT_EQ(AsciiPieceEnd(PretokenPattern::kCl100k, "'\u017f", 0), 0u);
  EXPECT_EQ(AsciiPieceEnd(PretokenPattern::kNone, "abc", 0), 0u);
  EXPECT_EQ(AsciiPieceEnd(PretokenPattern::kO200k, "abc def", 0), 3u);
}

}  // namespace
}  // namespace grag
