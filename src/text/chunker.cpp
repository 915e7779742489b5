#include "grag/chunker.h"

#include <span>
#include <string>
#include <unordered_map>
#include <utility>

#include "grag/hash.h"
#include "grag/tokenizer.h"
#include "utf8.h"

namespace grag {

Status ValidateChunkOptions(const ChunkOptions& options) {
  if (options.size == 0) return Status::InvalidArgument("chunk size must be at least 1 token");
  if (options.overlap >= options.size) {
    return Status::InvalidArgument("chunk overlap (" + std::to_string(options.overlap) +
                                   " tokens) must be smaller than the chunk size (" +
                                   std::to_string(options.size) + " tokens)");
  }
  if (auto tok = Tokenizer::Get(options.encoding); !tok.ok()) {
    return tok.status().WithContext("chunk encoding");
  }
  return Status::Ok();
}

Result<std::vector<Chunk>> ChunkDocument(const Document& doc, const ChunkOptions& options) {
  GRAG_RETURN_IF_ERROR(ValidateChunkOptions(options));
  GRAG_ASSIGN_OR_RETURN(const Tokenizer* tok, Tokenizer::Get(options.encoding));

  // Microsoft GraphRAG's metadata line: "<key>: <value>" ended by ".\n".
  const std::string prefix = options.prepend_title ? "title: " + doc.title + ".\n" : "";
  const std::vector<uint32_t> tokens = tok->Encode(doc.text);
  const std::span<const uint32_t> all(tokens);
  const size_t stride = options.size - options.overlap;

  // offset[i]: the byte where token i starts (tokens decode to the document's bytes exactly).
  std::vector<size_t> offset(tokens.size() + 1, 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    offset[i + 1] = offset[i] + tok->DecodeBytes(all.subspan(i, 1)).size();
  }
  auto continuation = [&doc](size_t at) {
    return at < doc.text.size() && (static_cast<unsigned char>(doc.text[at]) & 0xC0) == 0x80;
  };

  std::vector<Chunk> chunks;
  chunks.reserve(tokens.size() / stride + 1);
  std::unordered_map<std::string, int> seen;  // chunk text -> earlier occurrences
  for (size_t start = 0; start < tokens.size(); start += stride) {
    const size_t end = std::min(start + options.size, tokens.size());
    Chunk c;
    c.document_id = doc.id;
    c.index = static_cast<int>(chunks.size());
    c.text = prefix + DecodeUtf8Lossy(tok->DecodeBytes(all.subspan(start, end - start)));
    c.n_tokens = tok->Count(c.text);
    c.start_token = start;
    c.end_token = end;
    // Edges inside a character move inward: past its tail at the start, to its lead at the end.
    c.start_byte = offset[start];
    c.end_byte = offset[end];
    while (c.start_byte < c.end_byte && continuation(c.start_byte)) ++c.start_byte;
    while (c.end_byte > c.start_byte && continuation(c.end_byte)) --c.end_byte;
    Hasher h;
    h.Add(doc.id).Add(c.text);
    if (const int repeat = seen[c.text]++; repeat > 0) h.Add(std::to_string(repeat));
    c.id = h.HexDigest();
    chunks.push_back(std::move(c));
    if (end == tokens.size()) break;
  }
  return chunks;
}

Result<std::vector<Chunk>> ChunkDocuments(std::span<const Document> docs,
                                          const ChunkOptions& options) {
  std::vector<Chunk> out;
  for (const Document& doc : docs) {
    GRAG_ASSIGN_OR_RETURN(std::vector<Chunk> chunks, ChunkDocument(doc, options));
    out.insert(out.end(), std::make_move_iterator(chunks.begin()),
               std::make_move_iterator(chunks.end()));
  }
  return out;
}

}  // namespace grag
