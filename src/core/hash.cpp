#include "grag/hash.h"

#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <new>

namespace grag {
namespace {

std::string ToHex(const unsigned char* bytes, unsigned int n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(static_cast<size_t>(n) * 2, '0');
  for (unsigned int i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xF];
  }
  return out;
}

EVP_MD_CTX* Ctx(void* p) { return static_cast<EVP_MD_CTX*>(p); }

}  // namespace

std::string Sha256Hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md.data(), &len, EVP_sha256(), nullptr);
  return ToHex(md.data(), len);
}

Hasher::Hasher() : ctx_(EVP_MD_CTX_new()) {
  if (ctx_ == nullptr) throw std::bad_alloc();
  EVP_DigestInit_ex(Ctx(ctx_), EVP_sha256(), nullptr);
}

Hasher::~Hasher() { EVP_MD_CTX_free(Ctx(ctx_)); }

Hasher& Hasher::Add(std::string_view part) {
  std::array<unsigned char, 8> len{};
  uint64_t n = part.size();
  for (int i = 0; i < 8; ++i)
    len[static_cast<size_t>(i)] = static_cast<unsigned char>(n >> (8 * i));
  EVP_DigestUpdate(Ctx(ctx_), len.data(), len.size());
  EVP_DigestUpdate(Ctx(ctx_), part.data(), part.size());
  return *this;
}

std::string Hasher::HexDigest() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(Ctx(ctx_), md.data(), &len);
  return ToHex(md.data(), len);
}

}  // namespace grag
