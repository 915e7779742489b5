// Compressed text columns: see compressed_text.h.
#include "compressed_text.h"

#include <algorithm>
#include <optional>

#include "reply_codec.h"

namespace grag::sqlite {

void BindCompressible(Stmt& stmt, int index, std::string_view text) {
  if (std::optional<std::string> packed = store::CompressReply(text)) {
    stmt.BindBlob(index, packed->data(), packed->size());
  } else {
    stmt.Bind(index, text);
  }
}

Result<std::string> CompressibleText(const Stmt& stmt, int col) {
  if (!stmt.IsBlob(col)) return stmt.Text(col);
  return store::DecompressReply(stmt.Blob(col));
}

void BindHash(Stmt& stmt, int index, std::string_view hex) {
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const bool packable = hex.size() >= 16 && hex.size() <= 64 && hex.size() % 2 == 0 &&
                        std::all_of(hex.begin(), hex.end(), [&](char c) { return digit(c) >= 0; });
  if (!packable) {
    stmt.Bind(index, hex);
    return;
  }
  std::string bytes(hex.size() / 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<char>(digit(hex[2 * i]) << 4 | digit(hex[2 * i + 1]));
  }
  stmt.BindBlob(index, bytes.data(), bytes.size());
}

std::string HashText(const Stmt& stmt, int col) {
  if (!stmt.IsBlob(col)) return stmt.Text(col);
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string_view bytes = stmt.Blob(col);
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (const char b : bytes) {
    const auto v = static_cast<unsigned char>(b);
    hex += kHex[v >> 4];
    hex += kHex[v & 15];
  }
  return hex;
}

}  // namespace grag::sqlite
