#include "grag/hash.h"

// SHA-256 from nettle: plain functions over a caller-owned context, no library initialisation
// and no per-digest lookup (OpenSSL 3's EVP fetched the algorithm from its provider on every
// init, and its first use loaded the configuration: ~3 M instructions in a one-off query).
#include <nettle/sha2.h>

#include <array>
#include <cstdint>

namespace grag {
namespace {

static_assert(sizeof(sha256_ctx) <= Hasher::kStateBytes, "Hasher::kStateBytes is too small");
static_assert(alignof(sha256_ctx) <= alignof(std::max_align_t));

std::string ToHex(const uint8_t* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xF];
  }
  return out;
}

sha256_ctx* Ctx(unsigned char* state) { return reinterpret_cast<sha256_ctx*>(state); }

}  // namespace

std::string Sha256Hex(std::string_view data) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, data.size(), reinterpret_cast<const uint8_t*>(data.data()));
  std::array<uint8_t, SHA256_DIGEST_SIZE> md{};
  sha256_digest(&ctx, md.size(), md.data());
  return ToHex(md.data(), md.size());
}

Hasher::Hasher() { sha256_init(Ctx(state_)); }

Hasher::~Hasher() = default;

Hasher& Hasher::Add(std::string_view part) {
  std::array<uint8_t, 8> len{};
  const uint64_t n = part.size();
  for (size_t i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  sha256_update(Ctx(state_), len.size(), len.data());
  sha256_update(Ctx(state_), part.size(), reinterpret_cast<const uint8_t*>(part.data()));
  return *this;
}

std::string Hasher::HexDigest() {
  std::array<uint8_t, SHA256_DIGEST_SIZE> md{};
  sha256_digest(Ctx(state_), md.size(), md.data());
  return ToHex(md.data(), md.size());
}

}  // namespace grag
