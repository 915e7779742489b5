// A document's text kept once: see document_text.h.
#include "document_text.h"

#include <algorithm>

#include "compressed_text.h"

namespace grag::sqlite {
namespace {

struct Slice {
  int64_t start = 0;
  int64_t end = 0;
  std::string_view text;
};

// The text the slices give, in start order with overlaps taken once; nullopt when they leave a
// gap or one disagrees with its own bounds.
std::optional<std::string> Join(std::vector<Slice> slices) {
  std::sort(slices.begin(), slices.end(),
            [](const Slice& a, const Slice& b) { return a.start < b.start; });
  std::string out;
  for (const Slice& s : slices) {
    const auto at = static_cast<int64_t>(out.size());
    if (s.start < 0 || s.start > at || s.end - s.start != static_cast<int64_t>(s.text.size())) {
      return std::nullopt;
    }
    if (s.end > at) out.append(s.text.substr(static_cast<size_t>(at - s.start)));
  }
  return out;
}

}  // namespace

bool ChunksCoverText(std::string_view text, const std::vector<ChunkRecord>& chunks) {
  std::vector<Slice> slices;
  slices.reserve(chunks.size());
  for (const ChunkRecord& c : chunks) {
    if (c.start_byte < 0 || c.end_byte < c.start_byte ||
        c.end_byte > static_cast<int64_t>(text.size())) {
      return false;
    }
    slices.push_back({c.start_byte, c.end_byte, c.text});
  }
  const std::optional<std::string> joined = Join(std::move(slices));
  return joined && *joined == text;
}

Result<std::string> StoredDocumentText(Connection& conn, std::string_view id, const Stmt& stmt,
                                       int col) {
  Result<std::string> stored = CompressibleText(stmt, col);
  if (!stored.ok()) {
    return Status::Corruption("the text of document " + std::string(id) +
                              " is damaged: " + stored.status().message());
  }
  if (!stored->empty()) return stored;
  GRAG_ASSIGN_OR_RETURN(
      Stmt chunks,
      conn.Prepare("SELECT start_byte, end_byte, text FROM chunks WHERE document_id = ?"));
  chunks.BindAll(id);
  std::vector<std::string> texts;
  std::vector<std::pair<int64_t, int64_t>> bounds;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, chunks.Step());
    if (!row) break;
    bounds.emplace_back(chunks.Int(0), chunks.Int(1));
    texts.push_back(chunks.Text(2));
  }
  std::vector<Slice> slices;
  slices.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    slices.push_back({bounds[i].first, bounds[i].second, texts[i]});
  }
  std::optional<std::string> joined = Join(std::move(slices));
  if (!joined) {
    return Status::Corruption("the text of document " + std::string(id) +
                              " is kept in its chunks, and they leave a gap");
  }
  return std::move(*joined);
}

}  // namespace grag::sqlite
