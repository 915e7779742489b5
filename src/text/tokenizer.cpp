#include "grag/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "bpe.h"
#include "pretokenize.h"
#include "unicode_delta.h"
#include "utf8.h"
#include "vocab_image.h"

// The vocabulary images (vocab_image.h) of the tiktoken npm package's encoders/<name>.json
// files, made at build time and embedded by vocab_blobs.S (8-byte aligned).
extern "C" const char grag_cl100k_image_begin[];
extern "C" const char grag_cl100k_image_end[];
extern "C" const char grag_o200k_image_begin[];
extern "C" const char grag_o200k_image_end[];

namespace grag {
namespace {

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};
struct MatchContextDeleter {
  void operator()(pcre2_match_context* m) const { pcre2_match_context_free(m); }
};
struct JitStackDeleter {
  void operator()(pcre2_jit_stack* s) const { pcre2_jit_stack_free(s); }
};
using CodePtr = std::unique_ptr<pcre2_code, CodeDeleter>;
using MatchDataPtr = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;
using MatchContextPtr = std::unique_ptr<pcre2_match_context, MatchContextDeleter>;
using JitStackPtr = std::unique_ptr<pcre2_jit_stack, JitStackDeleter>;

// Unicode White_Space, which is what `\s` means in the Rust regex crate that tiktoken's
// fancy-regex builds on. PCRE2 10.42's `\s` under PCRE2_UCP also matches U+180E (MONGOLIAN
// VOWEL SEPARATOR, a space before Unicode 6.3), so patterns are rewritten to spell the set out.
constexpr std::string_view kWhiteSpace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

std::string_view CategoryAdditions(std::string_view property) {
  for (const auto& a : kUnicodeCategoryAdditions) {
    if (a.property == property) return a.ranges;
  }
  return {};
}

// Rewrites tiktoken's pat_str (fancy-regex syntax) into an equivalent PCRE2 pattern: `\s` and
// `\S` become explicit White_Space classes and, with `with_additions`, each \p{..} gains the
// characters that Unicode assigned after PCRE2's tables were made (unicode_delta.h). Everything
// else in these patterns ((?i:..) groups, {1,3}, (?!..)) means the same in both engines.
Result<std::string> AdaptPattern(std::string_view pat, bool with_additions) {
  std::string out;
  out.reserve(pat.size() * 2);
  bool in_class = false;
  for (size_t i = 0; i < pat.size(); ++i) {
    const char c = pat[i];
    if (c == '\\') {
      if (i + 1 >= pat.size()) return Status::Corruption("pattern ends with a backslash");
      const char e = pat[++i];
      if (e == 's') {
        if (in_class) {
          out += kWhiteSpace;
        } else {
          out += '[';
          out += kWhiteSpace;
          out += ']';
        }
      } else if (e == 'S') {
        if (in_class) return Status::Unimplemented("\\S inside a character class");
        out += "[^";
        out += kWhiteSpace;
        out += ']';
      } else if (e == 'P' && with_additions) {
        // A negated property would need the additions taken out, not added; tiktoken's
        // patterns have none.
        return Status::Unimplemented("\\P{..} in a tokenizer pattern");
      } else if (e == 'p' && i + 1 < pat.size() && pat[i + 1] == '{') {
        const size_t close = pat.find('}', i);
        if (close == std::string_view::npos) return Status::Corruption("unterminated \\p{");
        const std::string_view prop = pat.substr(i - 1, close - i + 2);  // "\p{..}"
        const std::string_view extra =
            with_additions ? CategoryAdditions(pat.substr(i + 2, close - i - 2)) : "";
        i = close;
        if (extra.empty() || in_class) {
          out += prop;
          out += extra;
        } else {
          out += '[';
          out += prop;
          out += extra;
          out += ']';
        }
      } else {
        out += '\\';
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal, not the end of the class.
      if (i + 1 < pat.size() && pat[i + 1] == '^') out += pat[++i];
      if (i + 1 < pat.size() && pat[i + 1] == ']') out += pat[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

std::string PcreError(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return std::string(reinterpret_cast<const char*>(buf));
}

struct Pattern {
  CodePtr code;
  bool jit = false;          // false: PCRE2 has no JIT here; the interpreter gives the same matches
  bool jit_partial = false;  // the JIT also has the PCRE2_PARTIAL_HARD mode (CountPrefix)
};

void JitCompile(Pattern& p) {
  p.jit = pcre2_jit_compile(p.code.get(), PCRE2_JIT_COMPLETE) == 0;
  p.jit_partial = p.jit && pcre2_jit_compile(p.code.get(), PCRE2_JIT_PARTIAL_HARD) == 0;
}

// Compiled and checked; JIT-compiled too unless `jit` is false (then see JitCompile).
Result<Pattern> CompilePattern(const std::string& pattern, std::string_view what, bool jit = true) {
  Pattern p;
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  p.code.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr));
  if (!p.code) {
    return Status::Corruption(std::string(what) + " pattern does not compile at offset " +
                              std::to_string(err_offset) + ": " + PcreError(err));
  }
  if (jit) JitCompile(p);
  return p;
}

// The code points of PCRE2 class items "\x{..}" and "\x{..}-\x{..}" as [lo, hi] ranges.
std::vector<std::pair<uint32_t, uint32_t>> ParseClassRanges(std::string_view items) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  auto read = [&items]() -> uint32_t {
    uint32_t v = 0;
    const size_t close = items.find('}');
    for (char c : items.substr(3, close - 3)) {
      v = v * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    items.remove_prefix(close + 1);
    return v;
  };
  while (items.size() > 3) {
    const uint32_t lo = read();
    uint32_t hi = lo;
    if (!items.empty() && items[0] == '-') {
      items.remove_prefix(1);
      hi = read();
    }
    out.emplace_back(lo, hi);
  }
  return out;
}

}  // namespace

class Tokenizer::Impl {
 public:
  // From a vocabulary image (vocab_image.h), which must outlive the tokenizer.
  static Result<std::unique_ptr<Impl>> Load(std::string_view name, std::string_view image);

  // Calls piece(begin, length) for each piece of `text` to byte-pair encode, in order: the
  // pre-tokeniser's matches in valid UTF-8, and each byte of an invalid sequence on its own.
  template <typename PieceFn>
  void ForEachPiece(std::string_view text, PieceFn&& piece) const;

  // The same for valid UTF-8 `text`: the pre-tokeniser's matches.
  template <typename PieceFn>
  void Split(std::string_view text, PieceFn&& piece) const;

  class Matcher;
  // Calls piece() for the pre-tokeniser's matches in m.text() from `off` (where one starts)
  // until one ends at or after `limit`; returns where the last one ends.
  template <typename PieceFn>
  size_t SplitRange(Matcher& m, size_t off, size_t limit, PieceFn&& piece) const;

  // Whether `text` (valid UTF-8) holds a character from unicode_delta.h, which only the slower
  // full pattern classifies right.
  bool NeedsAdditions(std::string_view text) const;

  std::string name;
  BpeVocab vocab;
  // The hand-written equivalent of the pattern for ASCII pieces (pretokenize.h), if any.
  text_internal::PretokenPattern ascii = text_internal::PretokenPattern::kNone;
  std::unordered_map<uint32_t, std::string> special;  // id -> text
  // Two compilations of the encoding's pattern: `full` with the Unicode additions, `fast`
  // without. They match identically on text without those characters, and listing the extra
  // ranges in every class makes PCRE2's JIT code about 2.5 times slower, so `full` is only used
  // when a text needs it. `full` is JIT-compiled on first use (Full()): few texts need it, and
  // the JIT compilation is most of the cost of setting a tokenizer up.
  Pattern fast;
  const Pattern& Full() const {
    std::call_once(full_jit_once, [this] { JitCompile(full); });
    return full;
  }
  const Pattern& PatternFor(bool full_pattern) const { return full_pattern ? Full() : fast; }
  mutable Pattern full;
  mutable std::once_flag full_jit_once;
  std::vector<uint64_t> bmp_additions;                          // bitmap over U+0000..U+FFFF
  std::vector<std::pair<uint32_t, uint32_t>> astral_additions;  // sorted ranges above U+FFFF
};

Result<std::unique_ptr<Tokenizer::Impl>> Tokenizer::Impl::Load(std::string_view name,
                                                               std::string_view image) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::string(name);
  if (name == "cl100k_base") impl->ascii = text_internal::PretokenPattern::kCl100k;
  if (name == "o200k_base") impl->ascii = text_internal::PretokenPattern::kO200k;
  auto parsed = ReadVocabImage(image);
  if (!parsed.ok()) return parsed.status().WithContext(impl->name + " vocabulary");
  for (auto& [id, text] : parsed->special_tokens) impl->special.emplace(id, std::string(text));
  if (Status st = impl->vocab.View(parsed->bpe); !st.ok()) {
    return st.WithContext(impl->name + " vocabulary");
  }

  GRAG_ASSIGN_OR_RETURN(const std::string fast, AdaptPattern(parsed->pat_str, false));
  GRAG_ASSIGN_OR_RETURN(const std::string full, AdaptPattern(parsed->pat_str, true));
  GRAG_ASSIGN_OR_RETURN(impl->fast, CompilePattern(fast, impl->name));
  GRAG_ASSIGN_OR_RETURN(impl->full, CompilePattern(full, impl->name, /*jit=*/false));

  impl->bmp_additions.assign(65536 / 64, 0);
  for (const auto& addition : kUnicodeCategoryAdditions) {
    for (const auto& [lo, hi] : ParseClassRanges(addition.ranges)) {
      if (lo < 0x800 || hi < lo) {  // NeedsAdditions skips 1- and 2-byte characters
        return Status::Internal("unicode_delta.h: unexpected range below U+0800");
      }
      for (uint32_t cp = lo; cp <= std::min<uint32_t>(hi, 0xFFFF); ++cp) {
        impl->bmp_additions[cp / 64] |= uint64_t{1} << (cp % 64);
      }
      if (hi > 0xFFFF) impl->astral_additions.emplace_back(std::max<uint32_t>(lo, 0x10000), hi);
    }
  }
  std::sort(impl->astral_additions.begin(), impl->astral_additions.end());
  return impl;
}

bool Tokenizer::Impl::NeedsAdditions(std::string_view text) const {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    if (i + 8 <= n) {  // skip ASCII eight bytes at a time
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    const uint8_t b = p[i];
    if (b < 0xE0) {  // ASCII, a continuation byte or a 2-byte sequence: below U+0800, none there
      ++i;
      continue;
    }
    if (b < 0xF0) {
      const uint32_t cp = ((b & 0x0Fu) << 12) | ((p[i + 1] & 0x3Fu) << 6) | (p[i + 2] & 0x3Fu);
      if (bmp_additions[cp / 64] >> (cp % 64) & 1) return true;
      i += 3;
    } else {
      const uint32_t cp = ((b & 0x07u) << 18) | ((p[i + 1] & 0x3Fu) << 12) |
                          ((p[i + 2] & 0x3Fu) << 6) | (p[i + 3] & 0x3Fu);
      auto it = std::upper_bound(astral_additions.begin(), astral_additions.end(),
                                 std::make_pair(cp, UINT32_MAX));
      if (it != astral_additions.begin() && std::prev(it)->second >= cp) return true;
      i += 4;
    }
  }
  return false;
}

// Matches one pattern against one subject, one piece at a time.
class Tokenizer::Impl::Matcher {
 public:
  Matcher(const Pattern& pattern, std::string_view text)
      : pattern_(pattern), text_(text), md_(pcre2_match_data_create(1, nullptr)) {
    // Per matcher, not shared: PCRE2 match data is scratch space written by every match.
    if (!md_) throw std::bad_alloc();
  }

  std::string_view text() const { return text_; }

  // The match at or after `off` (< text().size()): PCRE2's return code, and with rc > 0 the
  // match in *start, *end. With `partial_hard`, PCRE2_ERROR_PARTIAL says the match reached the
  // end of the text, so more text after it could have changed it.
  int Match(size_t off, bool partial_hard, size_t* start, size_t* end) {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text_.data());
    const uint32_t mode = partial_hard ? PCRE2_PARTIAL_HARD : 0;
    const bool jit = partial_hard ? pattern_.jit_partial : pattern_.jit;
    for (;;) {
      pcre2_match_context* ctx = big_ctx_.get();
      const int rc = jit ? pcre2_jit_match(pattern_.code.get(), subject, text_.size(), off, mode,
                                           md_.get(), ctx)
                         : pcre2_match(pattern_.code.get(), subject, text_.size(), off,
                                       PCRE2_NO_UTF_CHECK | mode, md_.get(), ctx);
      if ((rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_MATCHLIMIT ||
           rc == PCRE2_ERROR_HEAPLIMIT) &&
          !big_ctx_) {
        // Only pathological inputs get here; retry with a large JIT stack and no match limit.
        big_ctx_.reset(pcre2_match_context_create(nullptr));
        big_stack_.reset(pcre2_jit_stack_create(1 << 16, 1 << 28, nullptr));
        if (!big_ctx_ || !big_stack_) throw std::bad_alloc();
        pcre2_jit_stack_assign(big_ctx_.get(), nullptr, big_stack_.get());
        pcre2_set_match_limit(big_ctx_.get(), UINT32_MAX);
        pcre2_set_heap_limit(big_ctx_.get(), UINT32_MAX);
        continue;
      }
      if (rc > 0) {
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_.get());
        *start = ov[0];
        *end = ov[1];
      }
      return rc;
    }
  }

 private:
  const Pattern& pattern_;
  std::string_view text_;
  MatchDataPtr md_;
  MatchContextPtr big_ctx_;
  JitStackPtr big_stack_;
};

// The patterns match every character, so the pieces tile the text.
template <typename PieceFn>
size_t Tokenizer::Impl::SplitRange(Matcher& m, size_t off, size_t limit, PieceFn&& piece) const {
  const std::string_view text = m.text();
  const size_t n = text.size();
  while (off < limit) {
    if (const size_t ascii_end = text_internal::AsciiPieceEnd(ascii, text, off); ascii_end > off) {
      piece(text.data() + off, ascii_end - off);
      off = ascii_end;
      continue;
    }
    size_t start = n;
    size_t end = n;
    m.Match(off, /*partial_hard=*/false, &start, &end);
    // Cannot happen with tiktoken's patterns (they match every character); should a match
    // fail or skip text anyway, the skipped text becomes a piece of its own rather than being
    // lost, and an empty match still advances by one character.
    if (start > off) piece(text.data() + off, start - off);
    if (end <= start) {
      if (start >= n) return n;
      end = start + 1;
      while (end < n && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    }
    piece(text.data() + start, end - start);
    off = end;
  }
  return off;
}

template <typename PieceFn>
void Tokenizer::Impl::Split(std::string_view text, PieceFn&& piece) const {
  Matcher m(PatternFor(NeedsAdditions(text)), text);
  SplitRange(m, 0, text.size(), piece);
}

template <typename PieceFn>
void Tokenizer::Impl::ForEachPiece(std::string_view text, PieceFn&& piece) const {
  while (!text.empty()) {
    const size_t valid = ValidUtf8Length(text);
    if (valid > 0) Split(text.substr(0, valid), piece);
    text.remove_prefix(valid);
    if (text.empty()) break;
    const size_t bad = InvalidUtf8Length(text);
    for (size_t i = 0; i < bad; ++i) piece(text.data() + i, 1);
    text.remove_prefix(bad);
  }
}

Tokenizer::Tokenizer(Key, std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Status Tokenizer::CheckEncoding(std::string_view encoding) {
  if (encoding == "cl100k_base" || encoding == "o200k_base") return Status::Ok();
  return Status::InvalidArgument("unknown encoding \"" + std::string(encoding) +
                                 "\" (cl100k_base or o200k_base)");
}

Result<const Tokenizer*> Tokenizer::Get(std::string_view encoding) {
  struct Loaded {
    std::unique_ptr<Tokenizer> tokenizer;
    Status status;
  };
  auto load = [](std::string_view name, const char* begin, const char* end) {
    Loaded out;
    auto impl = Impl::Load(name, std::string_view(begin, static_cast<size_t>(end - begin)));
    if (!impl.ok()) {
      out.status = impl.status();
    } else {
      out.tokenizer = std::make_unique<Tokenizer>(Key(), std::move(impl).value());
    }
    return out;
  };
  const Loaded* loaded = nullptr;
  if (encoding == "cl100k_base") {
    // Function-local statics: built once, on first use, thread-safe (C++11 magic statics).
    static const Loaded cl100k = load(encoding, grag_cl100k_image_begin, grag_cl100k_image_end);
    loaded = &cl100k;
  } else if (encoding == "o200k_base") {
    static const Loaded o200k = load(encoding, grag_o200k_image_begin, grag_o200k_image_end);
    loaded = &o200k;
  } else {
    return Status::InvalidArgument("unknown tokenizer encoding '" + std::string(encoding) +
                                   "' (expected cl100k_base or o200k_base)");
  }
  if (!loaded->status.ok()) return loaded->status;
  return static_cast<const Tokenizer*>(loaded->tokenizer.get());
}

std::string_view Tokenizer::name() const { return impl_->name; }

void Tokenizer::EncodeTo(std::string_view text, std::vector<uint32_t>* out) const {
  impl_->ForEachPiece(text, [this, out](const char* p, size_t len) {
    impl_->vocab.EncodePiece(reinterpret_cast<const uint8_t*>(p), len, out);
  });
}

std::vector<uint32_t> Tokenizer::Encode(std::string_view text) const {
  std::vector<uint32_t> out;
  out.reserve(text.size() / 4 + 8);
  EncodeTo(text, &out);
  return out;
}

size_t Tokenizer::Count(std::string_view text) const {
  size_t count = 0;
  impl_->ForEachPiece(text, [this, &count](const char* p, size_t len) {
    count += impl_->vocab.CountPiece(reinterpret_cast<const uint8_t*>(p), len);
  });
  return count;
}

// Hard partial matching (PCRE2_PARTIAL_HARD) reports a match that reached the end of the text as
// partial, at once, before trying anything else. A match that comes back complete thus never
// looked past the end of the text, and a longer text that starts with it gets the same match
// there, and so the same pieces up to the first partial one: those are the settled prefix.
Tokenizer::PrefixCount Tokenizer::CountPrefix(std::string_view text) const {
  PrefixCount out;
  if (ValidUtf8Length(text) != text.size()) {  // no settled prefix: counted the usual way
    out.tokens = Count(text);
    return out;
  }
  out.full_pattern = impl_->NeedsAdditions(text);
  Impl::Matcher m(impl_->PatternFor(out.full_pattern), text);
  size_t count = 0;
  const auto add = [this, &count](const char* p, size_t len) {
    count += impl_->vocab.CountPiece(reinterpret_cast<const uint8_t*>(p), len);
  };
  size_t off = 0;
  while (off < text.size()) {
    size_t start = 0;
    size_t end = 0;
    // Anything but a complete match that starts here ends the settled prefix.
    if (m.Match(off, /*partial_hard=*/true, &start, &end) <= 0 || start != off || end <= start) {
      break;
    }
    add(text.data() + start, end - start);
    off = end;
  }
  out.settled = off;
  out.settled_tokens = count;
  impl_->SplitRange(m, off, text.size(), add);
  out.tokens = count;
  return out;
}

size_t Tokenizer::CountWithParts(std::string_view text, std::span<const KnownPart> parts) const {
  if (ValidUtf8Length(text) != text.size()) return Count(text);
  const bool full_pattern = impl_->NeedsAdditions(text);
  Impl::Matcher m(impl_->PatternFor(full_pattern), text);
  size_t count = 0;
  const auto add = [this, &count](const char* p, size_t len) {
    count += impl_->vocab.CountPiece(reinterpret_cast<const uint8_t*>(p), len);
  };
  size_t off = 0;
  for (const KnownPart& part : parts) {
    if (part.offset < off || part.offset >= text.size()) continue;
    off = impl_->SplitRange(m, off, part.offset, add);
    // Reused only where the text's pieces start a fresh piece at the part, with the part's text
    // there and the same compilation of the pattern as the part's own count.
    if (off != part.offset || part.count.full_pattern != full_pattern ||
        part.count.settled > part.text.size() || text.substr(off, part.text.size()) != part.text) {
      continue;
    }
    count += part.count.settled_tokens;
    off += part.count.settled;
  }
  impl_->SplitRange(m, off, text.size(), add);
  return count;
}

std::string Tokenizer::DecodeBytes(std::span<const uint32_t> tokens) const {
  std::string out;
  out.reserve(tokens.size() * 4);
  for (const uint32_t t : tokens) {
    const std::string_view bytes = impl_->vocab.Bytes(t);
    if (!bytes.empty()) {
      out += bytes;
    } else if (auto it = impl_->special.find(t); it != impl_->special.end()) {
      out += it->second;
    }
  }
  return out;
}

}  // namespace grag
