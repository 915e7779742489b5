#include "support/store_fixture.h"

namespace grag::testing {

Result<std::unique_ptr<Store>> OpenStoreWithChunks(
    const std::string& path, const std::string& document_id, const std::vector<std::string>& texts,
    const std::function<std::string(size_t)>& chunk_id) {
  GRAG_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(path));
  Document d;
  d.id = document_id;
  d.title = document_id;
  d.source_path = document_id;
  d.text = "(the chunks hold the text)";
  d.content_hash = "h";
  GRAG_RETURN_IF_ERROR(store->UpsertDocument(d).status());
  std::vector<ChunkRecord> chunks;
  for (size_t i = 0; i < texts.size(); ++i) {
    ChunkRecord c;
    c.id = chunk_id(i);
    c.document_id = document_id;
    c.index = static_cast<int64_t>(i);
    c.text = texts[i];
    chunks.push_back(std::move(c));
  }
  GRAG_RETURN_IF_ERROR(store->ReplaceDocumentChunks(document_id, chunks).status());
  return store;
}

}  // namespace grag::testing
