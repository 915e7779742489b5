// One UTF-8 sequence checked as Unicode's table 3-7 (and nlohmann's lexer) takes it: the JSON
// reader and writer and the PostgreSQL store's query splitter share it.
#pragma once

#include <cstddef>

namespace grag {

// The length (2 to 4) of the well-formed multi-byte sequence at p[i] (a byte >= 0x80), or 0
// when it is not one or runs past n.
inline size_t Utf8SequenceLength(const unsigned char* p, size_t i, size_t n) {
  const unsigned char c = p[i];
  size_t len = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > n || p[i + 1] < lo || p[i + 1] > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (p[i + k] < 0x80 || p[i + k] > 0xBF) return 0;
  }
  return len;
}

}  // namespace grag
