// Token chunking: splits a document into overlapping windows of tokens, as Microsoft GraphRAG's
// default "tokens" chunking strategy does, so that the same settings give the same text units.
//
// A document's text is encoded once; window k covers tokens [k * (size - overlap),
// k * (size - overlap) + size) of it (the last one is cut at the end of the document), and its
// text is those tokens decoded. A window edge may fall inside a multi-byte character; the
// broken bytes are decoded as U+FFFD, as tiktoken's decode does, so chunk text is always valid
// UTF-8. Chunks never span documents.
//
// Thread-safety: the functions are pure (apart from building the shared tokenizer on first use)
// and may run concurrently.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "grag/documents.h"
#include "grag/status.h"

namespace grag {

struct ChunkOptions {
  // Tokens per window (Microsoft GraphRAG's default): whole passages for the extraction prompt,
  // yet small enough that the LLM does not miss entities (the GraphRAG paper found that longer
  // chunks yield fewer entity references).
  size_t size = 1200;
  // Tokens shared by consecutive windows, so a sentence cut at one edge is whole in the other.
  // Must be smaller than `size`. Microsoft's default.
  size_t overlap = 100;
  // "o200k_base" (GPT-4o family, Microsoft's default) or "cl100k_base" (GPT-4, GPT-3.5).
  std::string encoding = "o200k_base";
  // Start every chunk with "title: <document title>.\n", as Microsoft GraphRAG does with
  // `prepend_metadata: [title]`, so the LLM knows which document a passage comes from. The
  // prefix is not part of the `size` tokens of the window: it adds to n_tokens.
  bool prepend_title = false;
};

// InvalidArgument, with a message naming the bad field, if `options` cannot be used (size 0,
// overlap >= size, unknown encoding).
Status ValidateChunkOptions(const ChunkOptions& options);

// The chunks of one document, in order. An empty document gives no chunks.
Result<std::vector<Chunk>> ChunkDocument(const Document& doc, const ChunkOptions& options);

// The chunks of several documents, document by document, in the order given.
Result<std::vector<Chunk>> ChunkDocuments(std::span<const Document> docs,
                                          const ChunkOptions& options);

}  // namespace grag
