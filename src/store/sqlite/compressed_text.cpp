// Compressed text columns: see compressed_text.h.
#include "compressed_text.h"

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

}  // namespace grag::sqlite
