#include "grag/lexical_embedder.h"

#include "lexical_fold.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace grag {
namespace {

constexpr size_t kMinDimension = 8;
constexpr size_t kMaxDimension = 65536;
constexpr double kWordWeight = 1.0;
constexpr double kFunctionWordWeight = 0.1;  // present, so a text of function words is not zero
constexpr double kNgramWeight = 0.35;        // a word's 3-grams together weigh about its word

// English function words: they say little about what a text is about.
// A word of at most 8 bytes as a number (its bytes, little-endian, zero-padded): the function
// words are looked up as numbers, without hashing a string.
constexpr uint64_t PackWord(std::string_view w) {
  uint64_t v = 0;
  for (size_t i = 0; i < w.size(); ++i) v |= uint64_t{static_cast<unsigned char>(w[i])} << (8 * i);
  return v;
}

constexpr std::string_view kFunctionWords[] = {
    "a",     "about", "after", "again", "all",    "also",   "am",    "an",   "and",   "any",
    "are",   "as",    "at",    "be",    "been",   "before", "being", "but",  "by",    "can",
    "could", "did",   "do",    "does",  "for",    "from",   "had",   "has",  "have",  "he",
    "her",   "here",  "him",   "his",   "how",    "i",      "if",    "in",   "into",  "is",
    "it",    "its",   "just",  "me",    "more",   "most",   "my",    "no",   "nor",   "not",
    "now",   "of",    "on",    "one",   "only",   "or",     "other", "our",  "out",   "over",
    "own",   "said",  "same",  "she",   "should", "so",     "some",  "such", "than",  "that",
    "the",   "their", "them",  "then",  "there",  "these",  "they",  "this", "those", "through",
    "to",    "too",   "up",    "upon",  "us",     "very",   "was",   "we",   "were",  "what",
    "when",  "where", "which", "while", "who",    "whom",   "why",   "will", "with",  "would",
    "you",   "your"};

// The packed function words in a 256-slot open-addressing set (0 marks an empty slot; no packed
// word is 0): one multiply and usually one compare per lookup.
constexpr size_t FunctionWordSlot(uint64_t packed) {
  return static_cast<size_t>((packed * 0x9e3779b97f4a7c15ULL) >> 56);
}

constexpr auto kFunctionWordSet = [] {
  std::array<uint64_t, 256> set{};
  for (std::string_view w : kFunctionWords) {
    size_t i = FunctionWordSlot(PackWord(w));
    while (set[i] != 0) i = (i + 1) % set.size();
    set[i] = PackWord(w);
  }
  return set;
}();

// Whether the word packed as `packed` (1 to 7 bytes) is a function word. Every function word is 1
// to 7 bytes long, so packing cannot confuse one with a longer word (and no word holds a NUL byte:
// only letters and digits make words).
bool IsPackedFunctionWord(uint64_t packed) {
  for (size_t i = FunctionWordSlot(packed);; i = (i + 1) % kFunctionWordSet.size()) {
    if (kFunctionWordSet[i] == packed) return true;
    if (kFunctionWordSet[i] == 0) return false;
  }
}

// Feature hashing: 64-bit FNV-1a over a kind byte ('w' word, 'g' 3-gram) and the feature's bytes,
// then MurmurHash3's finaliser (FNV's low bits are weak, and the bucket is taken modulo). The
// embedder computes it a byte at a time with Mix/Finish, starting from the seeds below; Hash is
// the definition they must agree with (checked at compile time below).
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ULL;

constexpr uint64_t Mix(uint64_t h, unsigned char c) { return (h ^ c) * 0x100000001b3ULL; }

constexpr uint64_t Finish(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

constexpr uint64_t Hash(char kind, std::string_view bytes) {
  uint64_t h = Mix(kFnvBasis, static_cast<unsigned char>(kind));
  for (char c : bytes) h = Mix(h, static_cast<unsigned char>(c));
  return Finish(h);
}

constexpr uint64_t kWordSeed = Mix(kFnvBasis, 'w');
constexpr uint64_t kNgramSeed = Mix(kFnvBasis, 'g');
static_assert(Finish(Mix(Mix(kWordSeed, 'o'), 'x')) == Hash('w', "ox"));
static_assert(Finish(Mix(Mix(Mix(kNgramSeed, '<'), 'o'), 'x')) == Hash('g', "<ox"));

// Invalid UTF-8 bytes become spaces.
std::string Sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    utf8proc_int32_t cp = 0;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                                    static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    if (n <= 0) {
      out += ' ';
      ++i;
    } else {
      out.append(text.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
    }
  }
  return out;
}

// utf8proc's NFKC + case folding + accents stripped of `text`, appended to *out; false (and
// nothing appended) when it fails.
bool AppendFolded(std::string_view text, std::string* out) {
  utf8proc_uint8_t* folded = nullptr;
  const auto len = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
      static_cast<utf8proc_ssize_t>(text.size()), &folded,
      static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT |
                                     UTF8PROC_CASEFOLD | UTF8PROC_STRIPMARK));
  if (len < 0) return false;
  out->append(reinterpret_cast<char*>(folded), static_cast<size_t>(len));
  std::free(folded);
  return true;
}

// The end of the run of ASCII bytes from `i`: eight bytes at a time, as a chunk of English is
// one long run.
size_t AsciiRunEnd(std::string_view s, size_t i) {
  if constexpr (std::endian::native == std::endian::little) {
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t bytes = 0;
      std::memcpy(&bytes, s.data() + i, 8);
      const uint64_t high = bytes & 0x8080808080808080ULL;
      if (high != 0) return i + static_cast<size_t>(std::countr_zero(high)) / 8;
    }
  }
  while (i < s.size() && static_cast<unsigned char>(s[i]) < 0x80) ++i;
  return i;
}

// ASCII `ascii` in lower case, appended to *out; branch-free, so the compiler vectorises it.
void AppendAsciiLower(std::string_view ascii, std::string* out) {
  const size_t at = out->size();
  out->append(ascii);
  char* p = out->data() + at;
  for (size_t i = 0; i < ascii.size(); ++i) {
    const auto c = static_cast<unsigned char>(p[i]);
    p[i] = static_cast<char>(c + (static_cast<unsigned char>(c - 'A') < 26 ? 32 : 0));
  }
}

}  // namespace

namespace vector_internal {

std::string FoldWhole(std::string_view text) {
  std::string out;
  return AppendFolded(text, &out) ? out : std::string();
}

std::string Fold(std::string_view text) {
  // utf8proc costs ~100 instructions a byte, and one non-ASCII character sent a whole chunk
  // through it. ASCII folds to lower case byte for byte, as utf8proc would; a run of non-ASCII
  // characters goes to utf8proc with the ASCII character before it (a base its combining marks
  // may compose with). The cuts, before each other ASCII character, change nothing: no
  // composition has an ASCII second character, and an ASCII character (a starter) ends every
  // reordering and composition. (A NUL byte goes the whole text's way.)
  if (text.find('\0') != std::string_view::npos) return FoldWhole(text);
  const auto byte = [&text](size_t i) { return static_cast<unsigned char>(text[i]); };
  std::string out;
  out.reserve(text.size());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const size_t j = AsciiRunEnd(text, i);
    if (j == n) {
      AppendAsciiLower(text.substr(i), &out);
      break;
    }
    const size_t start = j > i ? j - 1 : j;  // with the ASCII character before the run
    AppendAsciiLower(text.substr(i, start - i), &out);
    size_t end = j;
    while (end < n && byte(end) >= 0x80) ++end;
    if (!AppendFolded(text.substr(start, end - start), &out)) return {};  // not UTF-8
    i = end;
  }
  return out;
}

}  // namespace vector_internal

namespace {

using vector_internal::Fold;

// ASCII letters and digits: the ASCII bytes of words, looked up without decoding.
constexpr auto kAsciiWordByte = [] {
  std::array<bool, 256> is{};
  for (int c = 0; c < 128; ++c) {
    is[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  }
  return is;
}();

// Letters, marks and numbers.
bool IsWordCodePoint(utf8proc_int32_t cp) {
  if (cp < 0x80) return kAsciiWordByte[static_cast<size_t>(cp)];
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

// The length of the UTF-8 sequence that starts with `lead` (a valid lead byte).
size_t Utf8Length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

enum FeatureKind : uint32_t { kWordFeature, kFunctionWordFeature, kNgramFeature };
constexpr double kKindWeight[] = {kWordWeight, kFunctionWordWeight, kNgramWeight};

// A text's distinct features and how often each occurs, in the order first seen, found through
// an open-addressing index (linear probing over a power of two slots, at most half full; a slot
// holds 1 + the feature's place, 0 when empty). Only the index is cleared per text, 4 bytes a
// slot. A 1200-token chunk has some 1,300 distinct features.
//
// Storage starts in a LocalStorage on the caller's stack (enough for a question, a name or an
// entity's description) and moves to the heap when it outgrows it. Nothing outlives the call:
// no per-thread state, in particular no thread_local with a destructor, which glibc registers
// under the dynamic loader's lock on a thread's first use, so a first embedding would wait out
// any concurrent dlopen.
class FeatureTable {
 public:
  struct Feature {
    uint64_t hash;
    uint32_t count;
    uint32_t kind;  // a FeatureKind
  };

  struct LocalStorage {
    static constexpr size_t kSlots = 1024;
    uint32_t index[kSlots];
    Feature features[kSlots / 2];
  };

  // `local` must outlive the table; `expected` distinct features size the first index.
  FeatureTable(LocalStorage& local, size_t expected) {
    const size_t slots = std::bit_ceil(std::max<size_t>(64, expected * 2));
    if (slots <= LocalStorage::kSlots) {
      index_ = local.index;
      features_ = local.features;
    } else {
      heap_index_ = std::make_unique_for_overwrite<uint32_t[]>(slots);
      heap_features_ = std::make_unique_for_overwrite<Feature[]>(slots / 2);
      index_ = heap_index_.get();
      features_ = heap_features_.get();
    }
    std::fill_n(index_, slots, 0);
    mask_ = slots - 1;
  }

  void Add(uint64_t h, FeatureKind kind) {
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint32_t at = index_[i];
      if (at == 0) {
        features_[size_] = Feature{h, 1, kind};
        index_[i] = static_cast<uint32_t>(++size_);
        if (size_ * 2 > mask_) Grow();  // the features' room is half the slots
        return;
      }
      Feature& f = features_[at - 1];
      if (f.hash == h) {
        ++f.count;
        f.kind = kind;  // the last occurrence's weight wins, as it always has
        return;
      }
    }
  }

  const Feature* begin() const { return features_; }
  const Feature* end() const { return features_ + size_; }

 private:
  // Doubles the slots: in place while the local storage has room, then on the heap.
  void Grow() {
    const size_t slots = (mask_ + 1) * 2;
    if (heap_index_ == nullptr && slots <= LocalStorage::kSlots) {
      // The features stay where they are (the local storage has room for kSlots / 2).
    } else {
      heap_index_ = std::make_unique_for_overwrite<uint32_t[]>(slots);
      auto features = std::make_unique_for_overwrite<Feature[]>(slots / 2);
      std::copy_n(features_, size_, features.get());
      heap_features_ = std::move(features);
      index_ = heap_index_.get();
      features_ = heap_features_.get();
    }
    mask_ = slots - 1;
    std::fill_n(index_, slots, 0);
    for (size_t k = 0; k < size_; ++k) {
      size_t i = features_[k].hash & mask_;
      while (index_[i] != 0) i = (i + 1) & mask_;
      index_[i] = static_cast<uint32_t>(k + 1);
    }
  }

  uint32_t* index_ = nullptr;
  Feature* features_ = nullptr;
  size_t mask_ = 0;
  size_t size_ = 0;
  std::unique_ptr<uint32_t[]> heap_index_;
  std::unique_ptr<Feature[]> heap_features_;
};

// Adds the features of one word: `w` (`n` bytes of folded text, a run of word code points, all
// ASCII when `ascii`) with `word_hash`, its Hash('w', ...). `packed`: the word packed by PackWord
// when it is ASCII and at most 7 bytes long.
void AddWord(const unsigned char* w, size_t n, bool ascii, uint64_t word_hash, uint64_t packed,
             FeatureTable& table) {
  if (n == 1 && !(w[0] >= '0' && w[0] <= '9')) return;  // "s" of "Marley's"; n == 1 is ASCII
  if (ascii && n <= 7 && IsPackedFunctionWord(packed)) {
    table.Add(word_hash, kFunctionWordFeature);
    return;
  }
  table.Add(word_hash, kWordFeature);
  // The word's 3-grams: of code points, over "<word>" with '<' joined to the first code point
  // (see the header: "ghost" gives "<gho", "hos", "ost", "st>").
  if (ascii) {
    if (n == 2) {
      table.Add(Finish(Mix(Mix(Mix(Mix(kNgramSeed, '<'), w[0]), w[1]), '>')), kNgramFeature);
    } else if (n > 2) {
      table.Add(Finish(Mix(Mix(Mix(Mix(kNgramSeed, '<'), w[0]), w[1]), w[2])), kNgramFeature);
      for (size_t i = 1; i + 2 < n; ++i) {
        table.Add(Finish(Mix(Mix(Mix(kNgramSeed, w[i]), w[i + 1]), w[i + 2])), kNgramFeature);
      }
      table.Add(Finish(Mix(Mix(Mix(kNgramSeed, w[n - 2]), w[n - 1]), '>')), kNgramFeature);
    }
    return;
  }
  // 3-gram i: code points i to i+2 (i+1 for the last), after '<' for the first and before '>'
  // for the last. t0, t1, t2: where code points i, i+1, i+2 start (n: past the end).
  size_t t0 = 0;
  size_t t1 = Utf8Length(w[0]);
  if (t1 == n) return;  // one code point: no 3-gram
  size_t t2 = t1 + Utf8Length(w[t1]);
  for (size_t i = 0;; ++i) {
    const size_t t3 = t2 < n ? t2 + Utf8Length(w[t2]) : n;
    uint64_t h = i == 0 ? Mix(kNgramSeed, '<') : kNgramSeed;
    for (size_t k = t0; k < t3; ++k) h = Mix(h, w[k]);
    if (t2 == n) {
      table.Add(Finish(Mix(h, '>')), kNgramFeature);
      return;
    }
    table.Add(Finish(h), kNgramFeature);
    t0 = t1;
    t1 = t2;
    t2 = t3;
  }
}

// The end of the run of ASCII word bytes from p[i] (which stops at a NUL), mixed into *h.
// Not inlined into the word loop: alone, its state stays in registers.
[[gnu::noinline]] size_t ScanAsciiWord(const unsigned char* p, size_t i, uint64_t* h) {
  uint64_t x = *h;
  for (unsigned char c = p[i]; kAsciiWordByte[c]; c = p[++i]) x = Mix(x, c);
  *h = x;
  return i;
}

// Splits folded text into words (maximal runs of word code points) and adds their features.
// `folded` ends in its std::string's NUL, a non-word byte that ends any word: runs of ASCII are
// scanned without bounds checks.
void AddWords(const std::string& folded, FeatureTable& table) {
  const auto* p = reinterpret_cast<const unsigned char*>(folded.c_str());
  const size_t n = folded.size();
  // The length of the non-ASCII code point at p[i], negative when it is no word code point.
  // (Invalid UTF-8, a byte long, counts as a space: it cannot happen after Fold, which validates;
  // be safe anyway.)
  const auto non_ascii = [p, n](size_t i) -> ptrdiff_t {
    utf8proc_int32_t cp = 0;
    const auto len = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(n - i), &cp);
    if (len <= 0) return -1;
    return IsWordCodePoint(cp) ? static_cast<ptrdiff_t>(len) : -static_cast<ptrdiff_t>(len);
  };
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      if (!kAsciiWordByte[p[i]]) {
        ++i;
        continue;
      }
    } else if (const ptrdiff_t len = non_ascii(i); len < 0) {
      i += static_cast<size_t>(-len);
      continue;
    }
    // A word: its hash and ASCII-ness as it is scanned.
    const size_t begin = i;
    uint64_t h = kWordSeed;
    bool ascii = true;
    while (true) {
      i = ScanAsciiWord(p, i, &h);
      if (p[i] < 0x80) break;  // a non-word ASCII byte, or the NUL at the end
      const ptrdiff_t len = non_ascii(i);
      if (len < 0) break;
      ascii = false;
      for (const size_t end = i + static_cast<size_t>(len); i < end; ++i) h = Mix(h, p[i]);
    }
    const size_t size = i - begin;
    uint64_t packed = 0;
    if (ascii && size <= 7) {
      if (std::endian::native == std::endian::little && begin + 8 <= n) {
        std::memcpy(&packed, p + begin, 8);  // one load, then the bytes past the word masked off
        packed &= (uint64_t{1} << (8 * size)) - 1;
      } else {
        for (size_t k = 0; k < size; ++k) packed |= uint64_t{p[begin + k]} << (8 * k);
      }
    }
    AddWord(p + begin, size, ascii, Finish(h), packed, table);
  }
}

// 1 + ln n: sublinear term frequency. Small counts from a table (most features occur a few
// times); the table is trivially destructible, so no destructor is registered at exit.
double TermFrequency(uint32_t count) {
  static const auto kTable = [] {
    std::array<double, 64> t{};
    for (size_t c = 1; c < t.size(); ++c) t[c] = 1.0 + std::log(static_cast<double>(c));
    return t;
  }();
  return count < kTable.size() ? kTable[count] : 1.0 + std::log(static_cast<double>(count));
}

// `x` (not negative, below 2^62) rounded to an integer, inline (std::round is a call).
double RoundToInteger(double x) { return static_cast<double>(static_cast<int64_t>(x + 0.5)); }

// The L2-normalised vector of the features in `table`. Each feature's signed weight, rounded to
// a multiple of 2^-shift, is summed into its bucket; the sums are exact (integers times 2^-shift
// below 2^53), so they do not depend on the order of the features: the vector depends on the
// features alone, not on the table's layout or the order they were found in. (The map this
// replaced summed doubles in its iteration order, so the last bits were an accident of the map.)
// Rounding to 2^-32 moves a weight by at most 1.2e-10, far below a float's resolution.
std::vector<float> ToVector(const FeatureTable& table, size_t dimension, int shift) {
  const auto scale = static_cast<double>(uint64_t{1} << shift);
  std::array<double, std::size(kKindWeight)> once{};  // a feature seen once, by kind
  for (size_t k = 0; k < once.size(); ++k) once[k] = RoundToInteger(kKindWeight[k] * scale);
  std::vector<double> acc(dimension, 0.0);
  for (const FeatureTable::Feature& f : table) {
    const double v = f.count == 1
                         ? once[f.kind]
                         : RoundToInteger(kKindWeight[f.kind] * TermFrequency(f.count) * scale);
    acc[f.hash % dimension] += (f.hash >> 63) != 0 ? -v : v;
  }
  double norm = 0;
  for (double x : acc) norm += x * x;
  std::vector<float> out(dimension, 0.0f);
  if (!(norm > 0) || !std::isfinite(norm)) return out;
  const double inv = 1.0 / std::sqrt(norm);  // 2^-shift cancels
  for (size_t i = 0; i < dimension; ++i) out[i] = static_cast<float>(acc[i] * inv);
  return out;
}

}  // namespace

std::string LexicalEmbedderModelName(size_t dimension) {
  return "grag-lexical-hash-v1-d" + std::to_string(dimension);
}

bool IsLexicalEmbeddingModel(std::string_view model) {
  return model.substr(0, 13) == "grag-lexical-";
}

std::vector<float> LexicalEmbed(std::string_view text, size_t dimension) {
  dimension = std::max<size_t>(dimension, 1);
  std::string folded = Fold(text);
  if (folded.empty() && !text.empty()) folded = Fold(Sanitize(text));
  // Distinct features: about one per 4 bytes of English (a 1200-token chunk of the book: 5,200
  // bytes, 3,000 features, 1,300 distinct).
  FeatureTable::LocalStorage local;
  FeatureTable table(local, folded.size() / 4);
  AddWords(folded, table);
  // Exact sums: a text of b bytes has at most 2b feature occurrences, and a feature's weight is
  // at most its count (1 + ln n <= n, weights <= 1), so no bucket's sum reaches 2b, below
  // 2^(bit_width(b) + 1); with 51 - bit_width(b) fraction bits (32 for any text under 512 KiB),
  // it stays below 2^52, rounding included.
  const int shift = std::clamp(51 - static_cast<int>(std::bit_width(folded.size())), 0, 32);
  return ToVector(table, dimension, shift);
}

LexicalEmbedder::LexicalEmbedder()
    : LexicalEmbedder(PrivateTag{}, LexicalEmbedderOptions{}.dimension) {}

LexicalEmbedder::LexicalEmbedder(PrivateTag, size_t dimension)
    : dimension_(dimension), model_(LexicalEmbedderModelName(dimension)) {}

Result<std::unique_ptr<LexicalEmbedder>> LexicalEmbedder::Create(LexicalEmbedderOptions options) {
  if (options.dimension < kMinDimension || options.dimension > kMaxDimension) {
    return Status::InvalidArgument(
        "lexical embedder dimension must be between " + std::to_string(kMinDimension) + " and " +
        std::to_string(kMaxDimension) + ", got " + std::to_string(options.dimension));
  }
  return std::make_unique<LexicalEmbedder>(PrivateTag{}, options.dimension);
}

Result<EmbeddingResponse> LexicalEmbedder::Embed(const std::vector<std::string>& inputs) {
  calls_.fetch_add(1, std::memory_order_relaxed);
  const auto start = std::chrono::steady_clock::now();
  EmbeddingResponse out;
  out.model = model_;
  out.dimension = inputs.empty() ? 0 : dimension_;
  try {
    out.vectors.reserve(inputs.size());
    for (const auto& text : inputs) out.vectors.push_back(LexicalEmbed(text, dimension_));
  } catch (const std::exception& e) {
    return Status::Internal(std::string("lexical embedding failed: ") + e.what());
  }
  out.latency = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  return out;
}

LlmUsage LexicalEmbedder::Usage() const {
  LlmUsage u;
  u.calls = calls_.load(std::memory_order_relaxed);
  return u;
}

}  // namespace grag
