// Building the configured chat and embedding models.
#pragma once

#include <memory>

#include "grag/cache.h"
#include "grag/config.h"
#include "grag/llm.h"

namespace grag {

// The chat model the configuration names, or nullptr when none is configured (llm.base_url or
// llm.model empty, and no llm.endpoints). With llm.endpoints, one client spreads the calls over
// them. Replies are cached in `cache` (borrowed; may be nullptr). Token counts
// without a usage field use the configured tokenizer.
Result<std::unique_ptr<ChatModel>> MakeChatModel(const Config& config, KeyValueCache* cache);

// The embedding model embeddings.model names (its base URL and key default to the LLM's; or
// embeddings.endpoints serve it), or the built-in lexical embedder (LexicalEmbedder: no network, no
// weights) when it is empty.
Result<std::unique_ptr<EmbeddingModel>> MakeEmbeddingModel(const Config& config,
                                                           KeyValueCache* cache);

// The reranker rerank.model names (its base URL and key default to the LLM's), or nullptr when
// none is configured.
Result<std::unique_ptr<RerankModel>> MakeRerankModel(const Config& config, KeyValueCache* cache);

}  // namespace grag
