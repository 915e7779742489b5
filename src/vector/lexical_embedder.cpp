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
#include <memory_resource>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace grag {
namespace {

constexpr size_t kMinDimension = 8;
constexpr size_t kMaxDimension = 65536;
constexpr double kWordWeight = 1.0;
constexpr double kFunctionWordWeight = 0.1;  // present, so a text of function words is not zero
constexpr double kNgramWeight = 0.35;        // a word's 3-grams together weigh about its word
constexpr size_t kNgram = 3;

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

bool IsFunctionWord(std::string_view w) {
  if (w.empty() || w.size() > 7) return false;
  return IsPackedFunctionWord(PackWord(w));
}

uint64_t Hash(char kind, std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 0x100000001b3ULL;
  };
  mix(static_cast<unsigned char>(kind));
  for (char c : bytes) mix(static_cast<unsigned char>(c));
  // MurmurHash3's finaliser: FNV's low bits are weak, and the bucket is taken modulo.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

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

bool IsWordCodePoint(utf8proc_int32_t cp) {
  if (cp < 0x80)
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9');
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

struct Feature {
  double weight = 0;  // per occurrence
  uint32_t count = 0;
};

class FeatureCounter {
 public:
  // The map's nodes and buckets come from `memory` (an arena dropped whole at the end): a node
  // per distinct feature is most of an embedding's allocations. The allocator does not change
  // the map's iteration order, which fixes the vector's rounding.
  explicit FeatureCounter(std::pmr::memory_resource* memory) : features_(memory) {}

  void AddWord(std::string_view word, const std::vector<size_t>& starts) {
    const bool single_ascii = word.size() == 1 && static_cast<unsigned char>(word[0]) < 0x80;
    if (single_ascii && !(word[0] >= '0' && word[0] <= '9')) return;  // "s" of "Marley's"
    if (IsFunctionWord(word)) {
      Add(Hash('w', word), kFunctionWordWeight);
      return;
    }
    Add(Hash('w', word), kWordWeight);
    // 3-grams of "<word>", by code points.
    padded_.resize(word.size() + 2);
    padded_.front() = '<';
    word.copy(padded_.data() + 1, word.size());
    padded_.back() = '>';
    offsets_.clear();
    offsets_.push_back(0);
    for (size_t s : starts) offsets_.push_back(s + 1);
    offsets_.push_back(word.size() + 1);
    offsets_.push_back(word.size() + 2);
    for (size_t i = 0; i + kNgram < offsets_.size(); ++i) {
      Add(Hash('g',
               std::string_view(padded_).substr(offsets_[i], offsets_[i + kNgram] - offsets_[i])),
          kNgramWeight);
    }
  }

  std::vector<float> Vector(size_t dimension) const {
    std::vector<double> acc(dimension, 0.0);
    for (const auto& [h, f] : features_) {
      const double v = f.weight * (1.0 + std::log(static_cast<double>(f.count)));
      acc[h % dimension] += (h >> 63) != 0 ? -v : v;
    }
    double norm = 0;
    for (double x : acc) norm += x * x;
    std::vector<float> out(dimension, 0.0f);
    if (!(norm > 0) || !std::isfinite(norm)) return out;
    const double scale = 1.0 / std::sqrt(norm);
    for (size_t i = 0; i < dimension; ++i) out[i] = static_cast<float>(acc[i] * scale);
    return out;
  }

 private:
  void Add(uint64_t h, double weight) {
    Feature& f = features_[h];
    f.weight = weight;
    ++f.count;
  }

  std::pmr::unordered_map<uint64_t, Feature> features_;
  std::string padded_;
  std::vector<size_t> offsets_;
};

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
  // A text's features fit this thread's scratch buffer; the arena takes more from the heap when
  // they do not.
  thread_local std::vector<std::byte> scratch(size_t{1} << 17);
  std::pmr::monotonic_buffer_resource arena(scratch.data(), scratch.size());
  FeatureCounter counter(&arena);
  // A word is a run of word code points, so a span of `folded`: a view, not a copy built a code
  // point at a time.
  const std::string_view all(folded);
  size_t word_begin = std::string_view::npos;
  std::vector<size_t> starts;  // byte offset in the word of each of its code points but the first
  auto flush = [&](size_t end) {
    if (word_begin != std::string_view::npos) {
      counter.AddWord(all.substr(word_begin, end - word_begin), starts);
    }
    word_begin = std::string_view::npos;
    starts.clear();
  };
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(folded.data());
  const auto len = static_cast<utf8proc_ssize_t>(folded.size());
  for (utf8proc_ssize_t i = 0; i < len;) {
    utf8proc_int32_t cp = p[i];
    // ASCII decodes to itself: utf8proc_iterate only for the rest.
    auto n = cp < 0x80 ? utf8proc_ssize_t{1} : utf8proc_iterate(p + i, len - i, &cp);
    if (n <= 0) {  // cannot happen after Fold, which validates; be safe anyway
      n = 1;
      cp = ' ';
    }
    const auto at = static_cast<size_t>(i);
    if (IsWordCodePoint(cp)) {
      if (word_begin == std::string_view::npos) {
        word_begin = at;
      } else {
        starts.push_back(at - word_begin);
      }
    } else {
      flush(at);
    }
    i += n;
  }
  flush(folded.size());
  return counter.Vector(dimension);
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
