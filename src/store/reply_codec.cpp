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

std::optional<std::string> CompressReply(std::string_view reply) {
  if (reply.size() < 64 || reply.size() > kMaxReply) return std::nullopt;
  uLongf bound = compressBound(static_cast<uLong>(reply.size()));
  std::string out(kHeader + bound, '\0');
  std::memcpy(out.data(), kMagic.data(), 2);
  const auto size = static_cast<uint32_t>(reply.size());
  std::memcpy(out.data() + 2, &size, 4);
  const int rc = compress2(reinterpret_cast<Bytef*>(out.data() + kHeader), &bound,
                           reinterpret_cast<const Bytef*>(reply.data()),
                           static_cast<uLong>(reply.size()), kLevel);
  if (rc != Z_OK || kHeader + bound >= reply.size()) return std::nullopt;
  out.resize(kHeader + bound);
  return out;
}

Result<std::string> DecompressReply(std::string_view stored) {
  if (stored.size() < kHeader || stored.substr(0, 2) != kMagic) {
    return Status::Corruption("a reply cache value is neither text nor a compressed reply");
  }
  uint32_t size = 0;
  std::memcpy(&size, stored.data() + 2, 4);
  if (size > kMaxReply) return Status::Corruption("a compressed reply claims an impossible size");
  std::string out(size, '\0');
  uLongf got = size;
  const int rc = uncompress(reinterpret_cast<Bytef*>(out.data()), &got,
                            reinterpret_cast<const Bytef*>(stored.data() + kHeader),
                            static_cast<uLong>(stored.size() - kHeader));
  if (rc != Z_OK || got != size) {
    return Status::Corruption("a compressed reply does not decompress (zlib error " +
                              std::to_string(rc) + ")");
  }
  return out;
}

}  // namespace grag::store
