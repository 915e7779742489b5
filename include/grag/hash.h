// Content hashing for stable, content-derived ids (chunk ids, cache keys, input hashes).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace grag {

// Lower-case hex SHA-256 of `data` (64 characters).
std::string Sha256Hex(std::string_view data);

// How many hex digits (64 bits) of a SHA-256 the index keeps where a hash only has to tell a
// changed input from an unchanged one: description sets, embedded texts. On a dense index
// such hashes are on tens of thousands of rows.
inline constexpr size_t kInputHashDigits = 16;
// The first kInputHashDigits of Sha256Hex(data).
inline std::string InputHash(std::string_view data) {
  return Sha256Hex(data).substr(0, kInputHashDigits);
}

// Incremental SHA-256 over several parts. Each part is length-prefixed, so ("ab","c") and
// ("a","bc") hash differently.
class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  Hasher& Add(std::string_view part);
  // Lower-case hex digest; the Hasher must not be used afterwards.
  std::string HexDigest();

  static constexpr size_t kStateBytes = 128;  // nettle's sha256_ctx (checked in hash.cpp)

 private:
  alignas(std::max_align_t) unsigned char state_[kStateBytes];
};

}  // namespace grag
