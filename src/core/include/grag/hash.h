// Content hashing for stable, content-derived ids (chunk ids, cache keys, input hashes).
#pragma once

#include <string>
#include <string_view>

namespace grag {

// Lower-case hex SHA-256 of `data` (64 characters).
std::string Sha256Hex(std::string_view data);

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

 private:
  void* ctx_;  // EVP_MD_CTX*
};

}  // namespace grag
