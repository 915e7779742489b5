#include "grag/json_write.h"

#include "grag/utf8_sequence.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace grag {

using nlohmann::json;

namespace {

// The length of the valid UTF-8 prefix of `s` (Unicode 15, table 3-7: no overlong forms, no
// surrogates, nothing above U+10FFFF), as nlohmann's decoder accepts it.
size_t ValidUtf8Prefix(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
#if defined(__SSE2__)
    if (i + 16 <= n &&  // sixteen ASCII bytes at a time
        _mm_movemask_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i))) == 0) {
      i += 16;
      continue;
    }
#endif
    if (i + 8 <= n) {  // eight ASCII bytes at a time
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if ((w & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    const size_t len = Utf8SequenceLength(p, i, n);
    if (len == 0) return i;
    i += len;
  }
  return n;
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view text) {
  if (ValidUtf8Prefix(text) != text.size()) {
    // Rare: let nlohmann replace the invalid sequences its own way.
    out += json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  size_t plain = 0;  // start of the run of bytes copied as they are
  // Copies the run before text[k], then text[k] escaped.
  auto escape = [&](size_t k) {
    out.append(text.data() + plain, k - plain);
    plain = k + 1;
    const auto c = static_cast<unsigned char>(text[k]);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default: {
        const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
        out.append(esc, sizeof esc);
      }
    }
  };
  const size_t n = text.size();
  size_t i = 0;
#if defined(__SSE2__)
  // Sixteen bytes at a time: a mask of the bytes to escape (a control byte, '"' or '\\'), each
  // escaped in turn. Prompts have a newline every line or so: rescanning after each would cost.
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i last_control = _mm_set1_epi8(0x1F);
  for (; i + 16 <= n; i += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
    const __m128i special =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                     _mm_cmpeq_epi8(_mm_max_epu8(x, last_control), last_control));
    for (auto mask = static_cast<unsigned>(_mm_movemask_epi8(special)); mask != 0;
         mask &= mask - 1) {
      escape(i + static_cast<size_t>(std::countr_zero(mask)));
    }
  }
#endif
  for (; i < n; ++i) {
    // Skip eight bytes at a time while none is a control character, '"' or '\\' (the classic
    // "has a zero byte" test on w - 0x20.., w ^ '"'.. and w ^ '\\'..).
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, text.data() + i, 8);
      constexpr uint64_t kOnes = 0x0101010101010101ULL;
      constexpr uint64_t kHigh = 0x8080808080808080ULL;
      const uint64_t quote8 = w ^ (kOnes * '"');
      const uint64_t backslash8 = w ^ (kOnes * '\\');
      // A byte below 0x20 (bytes >= 0x80 are fine: mask them out of the test).
      const uint64_t control = (w - kOnes * 0x20) & ~w;
      const uint64_t special =
          ((quote8 - kOnes) & ~quote8) | ((backslash8 - kOnes) & ~backslash8) | control;
      if ((special & kHigh) != 0) break;
      i += 8;
    }
    if (i >= n) break;
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    escape(i);
  }
  out.append(text.data() + plain, text.size() - plain);
  out += '"';
}

}  // namespace grag
