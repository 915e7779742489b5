#include "grag/json_view.h"

#include "grag/utf8_sequence.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <system_error>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace grag {
namespace {

constexpr size_t kNpos = std::string_view::npos;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

size_t SkipSpace(std::string_view text, size_t pos) {
  while (pos < text.size() && IsSpace(text[pos])) ++pos;
  return pos;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The four hex digits at text[pos], or -1.
int32_t Hex4(std::string_view text, size_t pos) {
  if (pos + 4 > text.size()) return -1;
  int32_t v = 0;
  for (size_t k = 0; k < 4; ++k) {
    const int d = HexDigit(text[pos + k]);
    if (d < 0) return -1;
    v = v << 4 | d;
  }
  return v;
}

// Whether any of the 8 bytes at p is a quote, a backslash, a control byte or not ASCII.
bool AnySpecial8(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  const uint64_t quote = w ^ (kOnes * '"');
  const uint64_t backslash = w ^ (kOnes * '\\');
  // High bit set where the byte is zero after the xor, below 0x20, or at least 0x80.
  const uint64_t special =
      ((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash) | (w - kOnes * 0x20) | w;
  return (special & kHigh) != 0;
}

// The string literal opening at text[pos] (a quote), validated as nlohmann's lexer does; the
// index just past its closing quote, or npos.
size_t ScanString(std::string_view text, size_t pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = pos + 1;
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i last_control = _mm_set1_epi8(0x1F);
#endif
  for (;;) {
#if defined(__SSE2__)
    // To the next byte that is not plain ASCII, sixteen at a time.
    while (i + 16 <= n) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
      const __m128i special =
          _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                       _mm_cmpeq_epi8(_mm_max_epu8(x, last_control), last_control));
      // movemask(x): the bytes from 0x80 up.
      const auto mask = static_cast<unsigned>(_mm_movemask_epi8(special) | _mm_movemask_epi8(x));
      if (mask != 0) {
        i += static_cast<size_t>(std::countr_zero(mask));
        break;
      }
      i += 16;
    }
#endif
    while (i + 8 <= n && !AnySpecial8(text.data() + i)) i += 8;
    if (i >= n) return kNpos;
    const unsigned char c = p[i];
    if (c == '"') return i + 1;
    if (c < 0x20) return kNpos;
    if (c == '\\') {
      if (i + 1 >= n) return kNpos;
      switch (p[i + 1]) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
          i += 2;
          continue;
        case 'u': {
          const int32_t cp = Hex4(text, i + 2);
          if (cp < 0) return kNpos;
          i += 6;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (i + 1 >= n || p[i] != '\\' || p[i + 1] != 'u') return kNpos;
            const int32_t low = Hex4(text, i + 2);
            if (low < 0xDC00 || low > 0xDFFF) return kNpos;
            i += 6;
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return kNpos;
          }
          continue;
        }
        default:
          return kNpos;
      }
    }
    if (c < 0x80) {
      ++i;
      continue;
    }
    // UTF-8 (Unicode table 3-7, as nlohmann's lexer takes it).
    const size_t len = Utf8SequenceLength(p, i, n);
    if (len == 0) return kNpos;
    i += len;
  }
}

// The index of the first '"' or '\\' (only '\\' when kQuoteToo is false) in text from
// `from`, or text.size(). Inline: strings are short and their escapes close together, where a libc
// call per hit costs more than the search.
template <bool kQuoteToo>
size_t FindQuoteOrBackslash(std::string_view text, size_t from) {
  const size_t n = text.size();
  size_t i = from;
#if defined(__SSE2__)
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i quote = _mm_set1_epi8('"');
  for (; i + 16 <= n; i += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + i));
    __m128i hit = _mm_cmpeq_epi8(x, backslash);
    if (kQuoteToo) hit = _mm_or_si128(hit, _mm_cmpeq_epi8(x, quote));
    if (const auto mask = static_cast<unsigned>(_mm_movemask_epi8(hit)); mask != 0) {
      return i + static_cast<size_t>(std::countr_zero(mask));
    }
  }
#endif
  while (i < n && text[i] != '\\' && (!kQuoteToo || text[i] != '"')) ++i;
  return i;
}

// The end of the (valid) string literal opening at text[pos]: just past its closing quote.
// *escaped tells whether it holds a backslash.
size_t SkipString(std::string_view text, size_t pos, bool* escaped = nullptr) {
  size_t i = pos + 1;
  for (;;) {
    i = FindQuoteOrBackslash<true>(text, i);
    if (text[i] == '"') return i + 1;
    if (escaped != nullptr) *escaped = true;
    i += 2;
  }
}

// The end of the (valid) value starting at text[pos].
size_t SkipValue(std::string_view text, size_t pos, const JsonIndex* index) {
  const char c = text[pos];
  if (index != nullptr && (c == '"' || c == '{' || c == '[')) {
    if (const char* end = index->EndOf(text.data() + pos)) {
      return static_cast<size_t>(end - text.data());
    }
  }
  if (c == '"') return SkipString(text, pos);
  if (c == '{' || c == '[') {
    size_t depth = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      const char d = text[i];
      if (d == '"') {
        i = SkipString(text, i) - 1;
      } else if (d == '{' || d == '[') {
        ++depth;
      } else if ((d == '}' || d == ']') && --depth == 0) {
        return i + 1;
      }
    }
    return text.size();
  }
  size_t i = pos;
  while (i < text.size() && text[i] != ',' && text[i] != '}' && text[i] != ']' &&
         !IsSpace(text[i])) {
    ++i;
  }
  return i;
}

// A valid number token as a double, as strtod reads it; false when it overflows (nlohmann then
// refuses the text: "number overflow").
bool TokenToDouble(std::string_view token, double* out) {
  double d = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), d);
  if (ec == std::errc()) {
    *out = d;
    return std::isfinite(d);
  }
  // Out of range: overflow or underflow. The decimal exponent of the first significant digit
  // tells which.
  const bool negative = token.front() == '-';
  int64_t int_digits = 0;
  int64_t first = -1;  // index of the first non-zero digit among all the mantissa's digits
  int64_t index = 0;
  size_t i = negative ? 1 : 0;
  bool fraction = false;
  for (; i < token.size() && token[i] != 'e' && token[i] != 'E'; ++i) {
    if (token[i] == '.') {
      fraction = true;
      continue;
    }
    if (!fraction) ++int_digits;
    if (first < 0 && token[i] != '0') first = index;
    ++index;
  }
  int64_t exponent = 0;
  if (i < token.size()) {
    ++i;
    bool minus = false;
    if (token[i] == '+' || token[i] == '-') minus = token[i++] == '-';
    for (; i < token.size(); ++i) {
      exponent = std::min<int64_t>(exponent * 10 + (token[i] - '0'), 1'000'000'000);
    }
    if (minus) exponent = -exponent;
  }
  if (first >= 0 && int_digits - 1 - first + exponent > 0) return false;  // overflow
  *out = negative ? -0.0 : 0.0;                                           // underflow
  return true;
}

// The number token at text[pos] (a '-' or a digit), validated; the index just past it, or npos.
size_t ScanNumber(std::string_view text, size_t pos) {
  const size_t n = text.size();
  size_t i = pos;
  if (text[i] == '-') ++i;
  if (i >= n) return kNpos;
  const size_t digits = i;
  if (text[i] == '0') {
    ++i;
  } else if (text[i] >= '1' && text[i] <= '9') {
    while (i < n && IsDigit(text[i])) ++i;
  } else {
    return kNpos;
  }
  bool is_float = false;
  if (i < n && text[i] == '.') {
    ++i;
    if (i >= n || !IsDigit(text[i])) return kNpos;
    while (i < n && IsDigit(text[i])) ++i;
    is_float = true;
  }
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
    if (i >= n || !IsDigit(text[i])) return kNpos;
    while (i < n && IsDigit(text[i])) ++i;
    is_float = true;
  }
  if (!is_float && i - digits >= 19) {
    // Whether the integer fits 64 bits; one that does not is read as a double.
    const char* b = text.data() + pos;
    const char* e = text.data() + i;
    std::from_chars_result r;
    if (text[pos] == '-') {
      int64_t v;
      r = std::from_chars(b, e, v);
    } else {
      uint64_t v;
      r = std::from_chars(b, e, v);
    }
    is_float = r.ec != std::errc();
  }
  if (is_float) {
    double unused;
    if (!TokenToDouble(text.substr(pos, i - pos), &unused)) return kNpos;
  }
  return i;
}

JsonView::Kind KindOf(char c) {
  switch (c) {
    case '{':
      return JsonView::Kind::kObject;
    case '[':
      return JsonView::Kind::kArray;
    case '"':
      return JsonView::Kind::kString;
    case 't':
    case 'f':
      return JsonView::Kind::kBool;
    case 'n':
      return JsonView::Kind::kNull;
    default:
      return JsonView::Kind::kNumber;
  }
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes the inside of a valid string literal; *canonical becomes false when it is not what
// nlohmann's dump writes for the value.
std::string Decode(std::string_view inside, bool* canonical) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(inside.size());
  size_t i = 0;
  for (;;) {
    const size_t b = FindQuoteOrBackslash<false>(inside, i);
    if (b == inside.size()) break;
    out.append(inside, i, b - i);
    const char e = inside[b + 1];
    i = b + 2;
    switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        *canonical = false;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      default: {  // 'u'
        auto cp = static_cast<uint32_t>(Hex4(inside, i));
        const bool plain_control = cp < 0x20 && cp != '\b' && cp != '\f' && cp != '\n' &&
                                   cp != '\r' && cp != '\t' && inside[i] == '0' &&
                                   inside[i + 1] == '0' && inside[i + 2] == kHex[cp >> 4] &&
                                   inside[i + 3] == kHex[cp & 0xF];
        if (!plain_control) *canonical = false;
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          const auto low = static_cast<uint32_t>(Hex4(inside, i + 2));
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          i += 6;
        }
        AppendUtf8(out, cp);
      }
    }
  }
  out.append(inside, i);
  return out;
}

}  // namespace

const char* JsonIndex::EndOf(const char* begin) const {
  auto it = std::lower_bound(ends_.begin(), ends_.end(), begin,
                             [](const auto& e, const char* b) { return e.first < b; });
  return it != ends_.end() && it->first == begin ? it->second : nullptr;
}

double JsonView::Number::AsDouble() const {
  switch (type) {
    case Type::kUnsigned:
      return static_cast<double>(u);
    case Type::kInteger:
      return static_cast<double>(i);
    case Type::kFloat:
      break;
  }
  return d;
}

JsonView::Number JsonView::GetNumber() const {
  Number n;
  const char* b = raw_.data();
  const char* e = raw_.data() + raw_.size();
  if (raw_.find_first_of(".eE") == std::string_view::npos) {
    if (raw_.front() == '-') {
      if (std::from_chars(b, e, n.i).ec == std::errc()) {
        n.type = Number::Type::kInteger;
        return n;
      }
    } else if (std::from_chars(b, e, n.u).ec == std::errc()) {
      n.type = Number::Type::kUnsigned;
      return n;
    }
  }
  n.type = Number::Type::kFloat;
  TokenToDouble(raw_, &n.d);
  return n;
}

std::string JsonView::String(bool* canonical) const {
  bool ignored = true;
  return Decode(raw_.substr(1, raw_.size() - 2), canonical != nullptr ? canonical : &ignored);
}

JsonView JsonView::At(std::string_view text, size_t pos, const JsonIndex* index, size_t* end) {
  *end = SkipValue(text, pos, index);
  JsonView v;
  v.index_ = index;
  v.kind_ = KindOf(text[pos]);
  v.raw_ = text.substr(pos, *end - pos);
  return v;
}

std::optional<JsonView> JsonView::Find(std::string_view name) const {
  std::optional<JsonView> found;
  if (!is_object()) return found;
  Cursor cursor(*this);
  std::string_view key;
  JsonView value;
  while (cursor.NextMember(&key, &value)) {
    if (key == name) found = value;
  }
  return found;
}

std::optional<JsonView> JsonView::Member(std::string_view name) const {
  std::optional<JsonView> found = Find(name);
  if (found && found->is_null()) found.reset();
  return found;
}

size_t JsonView::size() const {
  size_t count = 0;
  Cursor cursor(*this);
  JsonView value;
  while (cursor.NextElement(&value)) ++count;
  return count;
}

std::optional<JsonView> JsonView::Front() const {
  Cursor cursor(*this);
  JsonView value;
  if (!cursor.NextElement(&value)) return std::nullopt;
  return value;
}

JsonView::Cursor::Cursor(const JsonView& container) {
  if (container.is_object() || container.is_array()) {
    text_ = container.raw_;
    index_ = container.index_;
    pos_ = 1;
  }
}

bool JsonView::Cursor::NextMember(std::string_view* key, JsonView* value) {
  pos_ = SkipSpace(text_, pos_);
  if (pos_ < text_.size() && text_[pos_] == ',') pos_ = SkipSpace(text_, pos_ + 1);
  if (pos_ >= text_.size() || text_[pos_] != '"') return false;
  bool escaped = false;
  const size_t key_end = SkipString(text_, pos_, &escaped);
  std::string_view inside = text_.substr(pos_ + 1, key_end - pos_ - 2);
  if (escaped) {
    bool ignored = true;
    key_ = Decode(inside, &ignored);
    inside = key_;
  }
  *key = inside;
  pos_ = SkipSpace(text_, key_end);
  pos_ = SkipSpace(text_, pos_ + 1);  // past the colon
  size_t end;
  *value = At(text_, pos_, index_, &end);
  pos_ = end;
  return true;
}

bool JsonView::Cursor::NextElement(JsonView* value) {
  pos_ = SkipSpace(text_, pos_);
  if (pos_ < text_.size() && text_[pos_] == ',') pos_ = SkipSpace(text_, pos_ + 1);
  if (pos_ >= text_.size() || text_[pos_] == ']' || text_[pos_] == '}') return false;
  size_t end;
  *value = At(text_, pos_, index_, &end);
  pos_ = end;
  return true;
}

std::optional<JsonView> ParseJsonView(std::string_view text, JsonIndex* index) {
  // Strings shorter than this are scanned again rather than looked up.
  constexpr size_t kIndexedString = 48;
  const size_t n = text.size();
  size_t pos = 0;
  if (n > 0 && static_cast<unsigned char>(text[0]) == 0xEF) {  // a byte order mark, or an error
    if (n < 3 || static_cast<unsigned char>(text[1]) != 0xBB ||
        static_cast<unsigned char>(text[2]) != 0xBF) {
      return std::nullopt;
    }
    pos = 3;
  }
  if (index != nullptr) index->ends_.clear();
  pos = SkipSpace(text, pos);
  const size_t begin = pos;
  // The containers open around pos, innermost last: where each starts, and its entry in the
  // index when there is one.
  struct Open {
    size_t start;
    size_t entry;
  };
  std::vector<Open> open;
  auto note_string = [&](size_t start, size_t end) {
    if (index != nullptr && end - start >= kIndexedString) {
      index->ends_.emplace_back(text.data() + start, text.data() + end);
    }
  };
  // An object's key at pos and the colon after it; moves pos to the value.
  auto key = [&]() {
    if (pos >= n || text[pos] != '"') return false;
    const size_t start = pos;
    size_t i = ScanString(text, pos);
    if (i == kNpos) return false;
    note_string(start, i);
    i = SkipSpace(text, i);
    if (i >= n || text[i] != ':') return false;
    pos = SkipSpace(text, i + 1);
    return true;
  };
  for (;;) {
    // A value starts at pos.
    if (pos >= n) return std::nullopt;
    const char c = text[pos];
    switch (c) {
      case '{':
      case '[': {
        const size_t start = pos;
        pos = SkipSpace(text, pos + 1);
        if (pos < n && text[pos] == (c == '{' ? '}' : ']')) {
          ++pos;  // empty
          break;
        }
        size_t entry = 0;
        if (index != nullptr) {
          entry = index->ends_.size();
          index->ends_.emplace_back(text.data() + start, nullptr);
        }
        open.push_back({start, entry});
        if (c == '{' && !key()) return std::nullopt;
        continue;
      }
      case '"': {
        const size_t start = pos;
        pos = ScanString(text, pos);
        if (pos == kNpos) return std::nullopt;
        note_string(start, pos);
        break;
      }
      case 't':
        if (text.substr(pos, 4) != "true") return std::nullopt;
        pos += 4;
        break;
      case 'f':
        if (text.substr(pos, 5) != "false") return std::nullopt;
        pos += 5;
        break;
      case 'n':
        if (text.substr(pos, 4) != "null") return std::nullopt;
        pos += 4;
        break;
      default:
        if (c != '-' && !IsDigit(c)) return std::nullopt;
        pos = ScanNumber(text, pos);
        if (pos == kNpos) return std::nullopt;
    }
    // After a value: close what it ends, then on to the next value.
    for (;;) {
      if (open.empty()) {
        const size_t end = pos;
        // nlohmann's lexer takes a NUL byte where a token would start for the end of the input.
        pos = SkipSpace(text, pos);
        if (pos != n && text[pos] != '\0') return std::nullopt;
        JsonView v;
        v.kind_ = KindOf(text[begin]);
        v.raw_ = text.substr(begin, end - begin);
        v.index_ = index;
        return v;
      }
      pos = SkipSpace(text, pos);
      if (pos >= n) return std::nullopt;
      const bool object = text[open.back().start] == '{';
      if (text[pos] == ',') {
        pos = SkipSpace(text, pos + 1);
        if (object && !key()) return std::nullopt;
        break;
      }
      if (text[pos] != (object ? '}' : ']')) return std::nullopt;
      ++pos;
      if (index != nullptr) index->ends_[open.back().entry].second = text.data() + pos;
      open.pop_back();
    }
  }
}

}  // namespace grag
