// The reply cache's compressed values: see reply_codec.h.
#include "reply_codec.h"

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <limits>

namespace grag::store {
namespace {

constexpr std::string_view kMagic = "Z1";
constexpr size_t kHeader = 2 + 4;
// Level 6, zlib's default: most of level 9's ratio on JSON replies at a fraction of its time.
constexpr int kLevel = 6;
// A reply larger than this is kept plain (zlib's sizes are 32-bit on some platforms; replies are
// kilobytes).
constexpr size_t kMaxReply = size_t{1} << 30;

}  // namespace

std::optional<std::string> CompressReply(std::string_view reply, int level) {
  if (reply.size() < 64 || reply.size() > kMaxReply) return std::nullopt;
  uLongf bound = compressBound(static_cast<uLong>(reply.size()));
  std::string out(kHeader + bound, '\0');
  std::memcpy(out.data(), kMagic.data(), 2);
  const auto size = static_cast<uint32_t>(reply.size());
  std::memcpy(out.data() + 2, &size, 4);
  const int rc = compress2(reinterpret_cast<Bytef*>(out.data() + kHeader), &bound,
                           reinterpret_cast<const Bytef*>(reply.data()),
                           static_cast<uLong>(reply.size()), level);
  if (rc != Z_OK || kHeader + bound >= reply.size()) return std::nullopt;
  out.resize(kHeader + bound);
  return out;
}

std::optional<size_t> DecompressedSize(std::string_view stored) {
  if (stored.size() < kHeader || stored.substr(0, 2) != kMagic) return std::nullopt;
  uint32_t size = 0;
  std::memcpy(&size, stored.data() + 2, 4);
  if (size > kMaxReply) return std::nullopt;
  return size;
}

Status DecompressInto(std::string_view stored, char* out) {
  const std::optional<size_t> size = DecompressedSize(stored);
  if (!size) return Status::Corruption("a stored value is neither plain nor compressed");
  uLongf got = static_cast<uLongf>(*size);
  const int rc = uncompress(reinterpret_cast<Bytef*>(out), &got,
                            reinterpret_cast<const Bytef*>(stored.data() + kHeader),
                            static_cast<uLong>(stored.size() - kHeader));
  if (rc != Z_OK || got != *size) {
    return Status::Corruption("a compressed value does not decompress (zlib error " +
                              std::to_string(rc) + ")");
  }
  return Status::Ok();
}

Result<std::string> DecompressReply(std::string_view stored) {
  const std::optional<size_t> size = DecompressedSize(stored);
  if (!size)
    return Status::Corruption("a reply cache value is neither text nor a compressed reply");
  std::string out(*size, '\0');
  GRAG_RETURN_IF_ERROR(DecompressInto(stored, out.data()));
  return out;
}

}  // namespace grag::store
