#include "utf8.h"

#include <cstdint>
#include <cstring>

namespace grag {
namespace {

// Scans the character starting at p[0] (n >= 1 bytes available). Returns the number of bytes it
// takes and sets *ok. When the sequence is invalid, the count is the maximal subpart: the bytes
// that still formed a valid prefix of some character (Unicode Table 3-7), at least 1.
inline size_t ScanChar(const uint8_t* p, size_t n, bool* ok) {
  const uint8_t b0 = p[0];
  if (b0 < 0x80) {
    *ok = true;
    return 1;
  }
  size_t need = 0;
  uint8_t lo = 0x80;
  uint8_t hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 == 0xE0) {
    need = 2;
    lo = 0xA0;  // no overlong forms
  } else if (b0 == 0xED) {
    need = 2;
    hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xE1 && b0 <= 0xEF) {
    need = 2;
  } else if (b0 == 0xF0) {
    need = 3;
    lo = 0x90;  // no overlong forms
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 3;
  } else if (b0 == 0xF4) {
    need = 3;
    hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *ok = false;
    return 1;
  }
  for (size_t i = 1; i <= need; ++i) {
    if (i >= n) {
      *ok = false;
      return i;
    }
    const uint8_t b = p[i];
    const bool in_range = i == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!in_range) {
      *ok = false;
      return i;
    }
  }
  *ok = true;
  return need + 1;
}

}  // namespace

size_t ValidUtf8Length(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Most text is ASCII: skip it eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    bool ok = false;
    const size_t len = ScanChar(p + i, n - i, &ok);
    if (!ok) return i;
    i += len;
  }
  return n;
}

size_t InvalidUtf8Length(std::string_view s) {
  if (s.empty()) return 0;
  bool ok = false;
  const size_t len = ScanChar(reinterpret_cast<const uint8_t*>(s.data()), s.size(), &ok);
  return len;
}

std::string DecodeUtf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 8);
  while (!bytes.empty()) {
    const size_t valid = ValidUtf8Length(bytes);
    out.append(bytes.data(), valid);
    bytes.remove_prefix(valid);
    if (bytes.empty()) break;
    out += "\xEF\xBF\xBD";  // U+FFFD
    bytes.remove_prefix(InvalidUtf8Length(bytes));
  }
  return out;
}

}  // namespace grag
