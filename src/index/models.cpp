#include "grag/models.h"

#include "grag/lexical_embedder.h"
#include "grag/tokenizer.h"

namespace grag {
namespace {

Result<OpenAIOptions> BaseOptions(const Config& c, KeyValueCache* cache) {
  OpenAIOptions o;
  GRAG_ASSIGN_OR_RETURN(o.api_style, ParseApiStyle(c.llm.api_style));
  o.azure_api_version = c.llm.azure_api_version;
  o.extra_body_json = c.llm.extra_body;
  o.max_concurrency = static_cast<int>(c.llm.concurrency);
  o.requests_per_minute = static_cast<int>(c.llm.requests_per_minute);
  o.tokens_per_minute = static_cast<int>(c.llm.tokens_per_minute);
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(c.llm.timeout_seconds * 1000));
  o.max_retries = static_cast<int>(c.llm.max_retries);
  o.cache = cache;
  GRAG_ASSIGN_OR_RETURN(const Tokenizer* tok, Tokenizer::Get(c.chunks.encoding));
  o.token_counter = [tok](std::string_view text) { return tok->Count(text); };
  return o;
}

}  // namespace

Result<std::unique_ptr<ChatModel>> MakeChatModel(const Config& config, KeyValueCache* cache) {
  if (config.llm.base_url.empty() || config.llm.model.empty()) {
    return std::unique_ptr<ChatModel>();
  }
  GRAG_ASSIGN_OR_RETURN(OpenAIOptions o, BaseOptions(config, cache));
  o.base_url = config.llm.base_url;
  o.api_key = config.llm.api_key;
  o.model = config.llm.model;
  GRAG_ASSIGN_OR_RETURN(std::unique_ptr<OpenAIClient> client, OpenAIClient::Create(std::move(o)));
  return std::unique_ptr<ChatModel>(std::move(client));
}

Result<std::unique_ptr<EmbeddingModel>> MakeEmbeddingModel(const Config& config,
                                                           KeyValueCache* cache) {
  if (config.embeddings.model.empty()) {
    return std::unique_ptr<EmbeddingModel>(std::make_unique<LexicalEmbedder>());
  }
  GRAG_ASSIGN_OR_RETURN(OpenAIOptions o, BaseOptions(config, cache));
  o.base_url =
      config.embeddings.base_url.empty() ? config.llm.base_url : config.embeddings.base_url;
  if (o.base_url.empty()) {
    return Status::InvalidArgument(
        "embeddings.model is set but no endpoint is: set embeddings.base_url or llm.base_url");
  }
  o.api_key = config.embeddings.api_key.empty() ? config.llm.api_key : config.embeddings.api_key;
  o.model = config.embeddings.model;
  o.embedding_batch_size = static_cast<int>(config.embeddings.batch_size);
  GRAG_ASSIGN_OR_RETURN(std::unique_ptr<OpenAIClient> client, OpenAIClient::Create(std::move(o)));
  return std::unique_ptr<EmbeddingModel>(std::move(client));
}

Result<std::unique_ptr<RerankModel>> MakeRerankModel(const Config& config, KeyValueCache* cache) {
  if (config.rerank.model.empty()) return std::unique_ptr<RerankModel>();
  GRAG_ASSIGN_OR_RETURN(OpenAIOptions o, BaseOptions(config, cache));
  o.base_url = config.rerank.base_url.empty() ? config.llm.base_url : config.rerank.base_url;
  if (o.base_url.empty()) {
    return Status::InvalidArgument(
        "rerank.model is set but no endpoint is: set rerank.base_url or llm.base_url");
  }
  o.api_key = config.rerank.api_key.empty() ? config.llm.api_key : config.rerank.api_key;
  o.model = config.rerank.model;
  GRAG_ASSIGN_OR_RETURN(std::unique_ptr<OpenAIClient> client, OpenAIClient::Create(std::move(o)));
  return std::unique_ptr<RerankModel>(std::move(client));
}

}  // namespace grag
