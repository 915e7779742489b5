#include "bpe.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <queue>
#include <utility>

namespace grag {
namespace {

// Pieces up to this many bytes are merged with tiktoken's own algorithm (a linear scan for the
// lowest-ranked pair after every merge, O(n^2) but with tiny constants on stack arrays); longer
// ones (runs of spaces, base64, minified code) use a heap so that they stay O(n log n).
constexpr size_t kSmallPiece = 96;

// Ranks above this are not plausible for a tiktoken vocabulary; refusing them keeps a corrupt
// file from allocating gigabytes.
constexpr uint64_t kMaxRank = 1u << 24;

inline uint64_t Load64(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

inline uint64_t Load32(const uint8_t* p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}

inline uint64_t Mix(uint64_t h) {
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ULL;
  h ^= h >> 32;
  return h;
}

// The first min(n, 8) bytes of p, zero-padded, without reading past p + n.
inline uint64_t LoadPrefix(const uint8_t* p, size_t n) {
  if (n >= 8) return Load64(p);
  if (n >= 4) return Load32(p) | (Load32(p + n - 4) << ((n - 4) * 8));  // overlapping loads
  if (n == 0) return 0;
  return uint64_t{p[0]} | (uint64_t{p[n / 2]} << (n / 2 * 8)) |
         (uint64_t{p[n - 1]} << ((n - 1) * 8));
}

// A fast, non-cryptographic hash of a byte string whose prefix is `prefix`.
inline uint64_t HashBytes(const uint8_t* p, size_t n, uint64_t prefix) {
  uint64_t h = Mix((prefix ^ (n * 0x9E3779B97F4A7C15ULL)) * 0xA0761D6478BD642FULL);
  for (size_t i = 8; i < n; i += 8) {
    const uint64_t w = i + 8 <= n ? Load64(p + i) : Load64(p + n - 8);  // last word overlaps
    h = Mix((h ^ w) * 0xE7037ED1A0B428DBULL);
  }
  return h;
}

inline uint32_t LenTag(size_t n, uint64_t h) {
  return static_cast<uint32_t>(n) | (static_cast<uint32_t>(h >> 40) << 8);
}

// Base64 digit values (standard and URL-safe alphabets); -1 for anything else.
constexpr auto kBase64 = [] {
  std::array<int8_t, 256> t{};
  t.fill(-1);
  for (int i = 0; i < 26; ++i) {
    t[static_cast<size_t>('A' + i)] = static_cast<int8_t>(i);
    t[static_cast<size_t>('a' + i)] = static_cast<int8_t>(26 + i);
  }
  for (int i = 0; i < 10; ++i) t[static_cast<size_t>('0' + i)] = static_cast<int8_t>(52 + i);
  t['+'] = t['-'] = 62;
  t['/'] = t['_'] = 63;
  return t;
}();

// Appends the bytes of standard base64 `in` (optional '=' padding) to *out.
bool AppendBase64(std::string_view in, std::string* out) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return false;  // a lone trailing sextet cannot encode a byte
  const size_t start = out->size();
  out->resize(start + in.size() * 3 / 4);
  char* dst = out->data() + start;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = kBase64[static_cast<uint8_t>(c)];
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      *dst++ = static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return true;
}

bool ParseRank(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 9) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// The next space-separated field of *line (consecutive spaces give empty fields). Fields are
// a few characters long, so a plain loop beats memchr's set-up.
std::string_view NextField(std::string_view* line) {
  size_t i = 0;
  while (i < line->size() && (*line)[i] != ' ') ++i;
  const std::string_view field = line->substr(0, i);
  line->remove_prefix(i < line->size() ? i + 1 : i);
  return field;
}

}  // namespace

Status BpeVocab::Build(std::string_view bpe_ranks) {
  // Token bytes go straight into a scratch arena in file order; `entries` remembers where.
  struct Entry {
    uint32_t rank;
    uint32_t offset;
    uint32_t len;
  };
  std::vector<Entry> entries;
  std::string bytes;
  bytes.reserve(bpe_ranks.size() * 3 / 4);
  auto add = [&](uint64_t rank, std::string_view b64, const std::string& where) -> Status {
    if (rank >= kMaxRank) return Status::Corruption(where + ": rank out of range");
    const size_t before = bytes.size();
    if (!AppendBase64(b64, &bytes) || bytes.size() == before || bytes.size() - before > 255) {
      return Status::Corruption(where + ": bad token '" + std::string(b64) + "'");
    }
    entries.push_back({static_cast<uint32_t>(rank), static_cast<uint32_t>(before),
                       static_cast<uint32_t>(bytes.size() - before)});
    return Status::Ok();
  };
  size_t line_no = 0;
  while (!bpe_ranks.empty()) {
    const size_t nl = bpe_ranks.find('\n');
    std::string_view line = bpe_ranks.substr(0, nl);
    bpe_ranks.remove_prefix(nl == std::string_view::npos ? bpe_ranks.size() : nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const std::string where = "bpe_ranks line " + std::to_string(line_no);
    if (line.starts_with("! ")) {  // "! <first rank> <token> <token> ..."
      line.remove_prefix(2);
      uint64_t first = 0;
      if (!ParseRank(NextField(&line), &first)) {
        return Status::Corruption(where + ": expected '! <first rank> <tokens...>'");
      }
      for (uint64_t rank = first; !line.empty(); ++rank) {
        GRAG_RETURN_IF_ERROR(add(rank, NextField(&line), where));
      }
    } else {  // "<token> <rank>"
      const std::string_view b64 = NextField(&line);
      uint64_t rank = 0;
      if (!ParseRank(line, &rank)) return Status::Corruption(where + ": expected '<token> <rank>'");
      GRAG_RETURN_IF_ERROR(add(rank, b64, where));
    }
  }
  if (entries.empty()) return Status::Corruption("bpe_ranks holds no tokens");
  if (!std::is_sorted(entries.begin(), entries.end(),
                      [](const Entry& a, const Entry& b) { return a.rank < b.rank; })) {
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.rank < b.rank; });
  }

  // The arena in rank order; ranks missing from the file get empty byte strings.
  const uint32_t n_ranks = entries.back().rank + 1;
  own_arena_.clear();
  own_arena_.reserve(bytes.size());
  own_offsets_.assign(static_cast<size_t>(n_ranks) + 1, 0);
  for (size_t i = 0, r = 0; r < n_ranks; ++r) {
    own_offsets_[r] = static_cast<uint32_t>(own_arena_.size());
    if (i < entries.size() && entries[i].rank == r) {
      own_arena_.append(bytes, entries[i].offset, entries[i].len);
      if (++i < entries.size() && entries[i].rank == r) {
        return Status::Corruption("bpe_ranks gives rank " + std::to_string(r) + " twice");
      }
    }
  }
  own_offsets_[n_ranks] = static_cast<uint32_t>(own_arena_.size());

  size_t cap = 16;
  while (cap < entries.size() * 2) cap <<= 1;
  own_slots_.assign(cap, Slot{0, kNoRank, 0});
  own_pair_rank_.assign(65536, kNoRank);
  // The views Find reads; the vectors keep their size from here on.
  arena_ = own_arena_;
  offsets_ = own_offsets_;
  slots_ = own_slots_;
  pair_rank_ = own_pair_rank_;
  mask_ = cap - 1;
  max_token_len_ = 0;
  std::fill(std::begin(byte_rank_), std::end(byte_rank_), kNoRank);
  for (const Entry& e : entries) {
    const auto* p = reinterpret_cast<const uint8_t*>(own_arena_.data() + own_offsets_[e.rank]);
    if (Find(p, e.len) != kNoRank) {
      return Status::Corruption("bpe_ranks lists the same bytes twice (rank " +
                                std::to_string(e.rank) + ")");
    }
    const uint64_t prefix = LoadPrefix(p, e.len);
    const uint64_t h = HashBytes(p, e.len, prefix);
    size_t i = h & mask_;
    while (own_slots_[i].rank != kNoRank) i = (i + 1) & mask_;
    own_slots_[i] = Slot{prefix, e.rank, LenTag(e.len, h)};
    max_token_len_ = std::max<size_t>(max_token_len_, e.len);
    if (e.len == 1) byte_rank_[p[0]] = e.rank;
    if (e.len == 2) own_pair_rank_[(size_t{p[0]} << 8) | p[1]] = e.rank;
  }
  for (int b = 0; b < 256; ++b) {
    if (byte_rank_[b] == kNoRank) {
      return Status::Corruption("bpe_ranks lacks the single byte " + std::to_string(b));
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- the image
//
// Native byte order and layout (the image is made and read by the same build):
//   header     magic "GRAGBPE1", then six uint64: offsets count, arena bytes, slot count,
//              max token length, and two reserved zeros
//   byte_rank  256 x uint32
//   slots      slot count x Slot (16 bytes)
//   pair_rank  65536 x uint32
//   offsets    offsets count x uint32, zero-padded to 8 bytes
//   arena      the token bytes

namespace {

constexpr std::string_view kImageMagic = "GRAGBPE1";
constexpr size_t kImageHeader = 8 + 6 * 8;

template <typename T>
void AppendRaw(std::string* out, const T* data, size_t n) {
  out->append(reinterpret_cast<const char*>(data), n * sizeof(T));
}

}  // namespace

std::string BpeVocab::Image() const {
  std::string out(kImageMagic);
  const uint64_t header[6] = {offsets_.size(), arena_.size(), slots_.size(), max_token_len_, 0, 0};
  AppendRaw(&out, header, 6);
  AppendRaw(&out, byte_rank_, 256);
  AppendRaw(&out, slots_.data(), slots_.size());
  AppendRaw(&out, pair_rank_.data(), pair_rank_.size());
  AppendRaw(&out, offsets_.data(), offsets_.size());
  out.resize((out.size() + 7) / 8 * 8, '\0');
  out.append(arena_);
  return out;
}

Status BpeVocab::View(std::string_view image) {
  static_assert(sizeof(Slot) == 16 && alignof(Slot) == 8);
  if (image.size() < kImageHeader || !image.starts_with(kImageMagic)) {
    return Status::Corruption("not a vocabulary image");
  }
  if (reinterpret_cast<uintptr_t>(image.data()) % 8 != 0) {
    return Status::Internal("vocabulary image is not 8-byte aligned");
  }
  uint64_t header[6];
  std::memcpy(header, image.data() + kImageMagic.size(), sizeof(header));
  const uint64_t n_offsets = header[0], arena_size = header[1], n_slots = header[2];
  const size_t offsets_bytes = (n_offsets * 4 + 7) / 8 * 8;
  const uint64_t need =
      kImageHeader + 256 * 4 + n_slots * sizeof(Slot) + 65536 * 4 + offsets_bytes + arena_size;
  if (n_offsets < 2 || n_offsets > kMaxRank + 1 || n_slots == 0 || (n_slots & (n_slots - 1)) ||
      n_slots > 4 * kMaxRank || arena_size > (uint64_t{1} << 32) || image.size() != need) {
    return Status::Corruption("vocabulary image has the wrong size");
  }
  const char* p = image.data() + kImageHeader;
  std::memcpy(byte_rank_, p, sizeof(byte_rank_));
  p += sizeof(byte_rank_);
  slots_ = {reinterpret_cast<const Slot*>(p), n_slots};
  p += n_slots * sizeof(Slot);
  pair_rank_ = {reinterpret_cast<const uint32_t*>(p), 65536};
  p += 65536 * 4;
  offsets_ = {reinterpret_cast<const uint32_t*>(p), n_offsets};
  p += offsets_bytes;
  arena_ = std::string_view(p, arena_size);
  if (offsets_.back() != arena_size) return Status::Corruption("vocabulary image is inconsistent");
  mask_ = n_slots - 1;
  max_token_len_ = header[3];
  own_arena_.clear();
  own_offsets_.clear();
  own_slots_.clear();
  own_pair_rank_.clear();
  return Status::Ok();
}

uint32_t BpeVocab::Find(const uint8_t* p, size_t n) const {
  if (n > max_token_len_ || n == 0) return kNoRank;
  if (n == 1) return byte_rank_[p[0]];
  if (n == 2) return pair_rank_[(size_t{p[0]} << 8) | p[1]];
  const uint64_t prefix = LoadPrefix(p, n);
  const uint64_t h = HashBytes(p, n, prefix);
  const uint32_t len_tag = LenTag(n, h);
  for (size_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.rank == kNoRank) return kNoRank;
    if (s.len_tag == len_tag && s.prefix == prefix &&
        (n <= 8 || std::memcmp(arena_.data() + offsets_[s.rank] + 8, p + 8, n - 8) == 0)) {
      return s.rank;
    }
  }
}

template <typename Sink>
void BpeVocab::Merge(const uint8_t* p, size_t n, Sink&& sink) const {
  if (n == 1) {
    sink(byte_rank_[p[0]]);
    return;
  }
  // Most pieces (whole words with their leading space) are tokens themselves.
  if (const uint32_t whole = Find(p, n); whole != kNoRank) {
    sink(whole);
    return;
  }
  if (n <= kSmallPiece) {
    MergeSmall(p, n, sink);
  } else {
    MergeLarge(p, n, sink);
  }
}

template <typename Sink>
void BpeVocab::MergeSmall(const uint8_t* p, size_t n, Sink&& sink) const {
  // Part i covers bytes [pos[i], pos[i + 1]) and is token tok[i]; rank[i] is the rank of
  // parts i and i + 1 joined (kNoRank if that is not a token).
  uint32_t pos[kSmallPiece + 1];
  uint32_t rank[kSmallPiece];
  uint32_t tok[kSmallPiece];
  size_t m = n;
  for (size_t i = 0; i < n; ++i) {
    pos[i] = static_cast<uint32_t>(i);
    tok[i] = byte_rank_[p[i]];
  }
  pos[n] = static_cast<uint32_t>(n);
  for (size_t i = 0; i + 1 < n; ++i) rank[i] = pair_rank_[(size_t{p[i]} << 8) | p[i + 1]];
  rank[n - 1] = kNoRank;

  auto joined_rank = [&](size_t i) -> uint32_t {  // parts i and i + 1, if i + 1 exists
    if (i + 1 >= m) return kNoRank;
    return Find(p + pos[i], pos[i + 2] - pos[i]);
  };
  while (m > 1) {
    uint32_t best = kNoRank;
    size_t bi = 0;
    for (size_t i = 0; i + 1 < m; ++i) {
      if (rank[i] < best) {  // strict: the leftmost of equal ranks wins, as in tiktoken
        best = rank[i];
        bi = i;
      }
    }
    if (best == kNoRank) break;
    tok[bi] = best;
    // Drop part bi + 1.
    std::memmove(pos + bi + 1, pos + bi + 2, (m - bi - 1) * sizeof(uint32_t));
    std::memmove(tok + bi + 1, tok + bi + 2, (m - bi - 2) * sizeof(uint32_t));
    std::memmove(rank + bi + 1, rank + bi + 2, (m - bi - 2) * sizeof(uint32_t));
    --m;
    rank[bi] = joined_rank(bi);
    if (bi > 0) rank[bi - 1] = joined_rank(bi - 1);
  }
  for (size_t i = 0; i < m; ++i) sink(tok[i]);
}

template <typename Sink>
void BpeVocab::MergeLarge(const uint8_t* p, size_t n, Sink&& sink) const {
  // The same merge order as MergeSmall, on a doubly linked list of parts with a min-heap of
  // (rank, part) keys. Stale heap entries are skipped when popped. Because parts never move,
  // the part index orders parts left to right, so ties go to the leftmost pair as in tiktoken.
  constexpr uint32_t kNil = UINT32_MAX;
  std::vector<uint32_t> pos(n + 1), next(n + 1), prev(n + 1), rank(n + 1), tok(n);
  for (size_t i = 0; i <= n; ++i) {
    pos[i] = static_cast<uint32_t>(i);
    next[i] = static_cast<uint32_t>(i + 1);
    prev[i] = i == 0 ? kNil : static_cast<uint32_t>(i - 1);
  }
  // Node n is a sentinel marking the end of the piece.
  std::vector<uint64_t> heap_storage;
  heap_storage.reserve(n);
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> heap(
      std::greater<>(), std::move(heap_storage));
  for (size_t i = 0; i < n; ++i) {
    tok[i] = byte_rank_[p[i]];
    rank[i] = i + 1 < n ? pair_rank_[(size_t{p[i]} << 8) | p[i + 1]] : kNoRank;
    if (rank[i] != kNoRank) heap.push((uint64_t{rank[i]} << 32) | i);
  }
  rank[n] = kNoRank;
  auto joined_rank = [&](uint32_t i) -> uint32_t {  // part i with the part after it
    const uint32_t j = next[i];
    if (j >= n) return kNoRank;
    return Find(p + pos[i], pos[next[j]] - pos[i]);
  };
  std::vector<bool> dead(n + 1, false);
  while (!heap.empty()) {
    const uint64_t top = heap.top();
    heap.pop();
    const auto i = static_cast<uint32_t>(top & 0xFFFFFFFFu);
    const auto r = static_cast<uint32_t>(top >> 32);
    if (dead[i] || rank[i] != r) continue;  // stale entry
    tok[i] = r;
    const uint32_t j = next[i];  // absorbed into i
    dead[j] = true;
    next[i] = next[j];
    prev[next[j]] = i;
    rank[i] = joined_rank(i);
    if (rank[i] != kNoRank) heap.push((uint64_t{rank[i]} << 32) | i);
    if (prev[i] != kNil) {
      const uint32_t h = prev[i];
      rank[h] = joined_rank(h);
      if (rank[h] != kNoRank) heap.push((uint64_t{rank[h]} << 32) | h);
    }
  }
  for (uint32_t i = 0; i < n; i = next[i]) sink(tok[i]);
}

void BpeVocab::EncodePiece(const uint8_t* p, size_t n, std::vector<uint32_t>* out) const {
  Merge(p, n, [out](uint32_t t) { out->push_back(t); });
}

size_t BpeVocab::CountPiece(const uint8_t* p, size_t n) const {
  size_t count = 0;
  Merge(p, n, [&count](uint32_t) { ++count; });
  return count;
}

}  // namespace grag
