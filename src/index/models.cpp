#include "grag/models.h"

#include "grag/lexical_embedder.h"
#include "grag/tokenizer.h"

namespace grag {
namespace {

// The value of the environment variable `name` holds, which must be set; `key` is the setting
// that named it (llm.query.api_key_env, llm.endpoints[0].api_key_env).
Result<std::string> KeyFromEnv(const std::string& key, const std::string& name) {
  std::optional<std::string> value = ProcessEnv(name);
  if (!value || value->empty()) {
    return Status::InvalidArgument(key + " names " + name +
                                   ", which is not set in the environment");
  }
  return *value;
}

// A role's endpoint list as client options: keys from api_key or the variable api_key_env names
// (never the role's own key: the list may mix hosts), concurrency 0 meaning `concurrency`.
Result<std::vector<EndpointOptions>> EndpointsFor(const std::string& key,
                                                  const std::vector<EndpointConfig>& list,
                                                  int64_t concurrency) {
  std::vector<EndpointOptions> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const EndpointConfig& e = list[i];
    EndpointOptions o;
    o.name = e.name;
    o.base_url = e.base_url;
    o.api_key = e.api_key;
    if (!e.api_key_env.empty()) {
      GRAG_ASSIGN_OR_RETURN(
          o.api_key, KeyFromEnv(key + "[" + std::to_string(i) + "].api_key_env", e.api_key_env));
    }
    o.model = e.model;
    o.weight = e.weight;
    o.max_concurrency = static_cast<int>(e.concurrency > 0 ? e.concurrency : concurrency);
    o.requests_per_minute = static_cast<int>(e.rpm);
    o.tokens_per_minute = static_cast<int>(e.tpm);
    out.push_back(std::move(o));
  }
  return out;
}

Result<OpenAIOptions> BaseOptions(const Config& c, KeyValueCache* cache) {
  OpenAIOptions o;
  GRAG_ASSIGN_OR_RETURN(o.api_style, ParseApiStyle(c.llm.api_style));
  if (!c.llm.azure_api_version.empty()) o.azure_api_version = c.llm.azure_api_version;
  o.extra_body_json = c.llm.extra_body;
  o.reasoning_effort = c.llm.reasoning_effort;
  if (!c.llm.think.empty()) o.think = c.llm.think == "on";
  o.max_tokens_field = c.llm.max_tokens_field;
  o.keep_alive = c.llm.keep_alive;
  o.context_window = c.llm.context_window;
  o.max_concurrency = static_cast<int>(c.llm.concurrency);
  o.requests_per_minute = static_cast<int>(c.llm.requests_per_minute);
  o.tokens_per_minute = static_cast<int>(c.llm.tokens_per_minute);
  o.timeout = std::chrono::milliseconds(static_cast<int64_t>(c.llm.timeout_seconds * 1000));
  o.max_retries = static_cast<int>(c.llm.max_retries);
  o.bench_after_failures = static_cast<int>(c.llm.bench_after_failures);
  o.bench_base = std::chrono::milliseconds(static_cast<int64_t>(c.llm.bench_seconds * 1000));
  o.bench_cap = std::chrono::milliseconds(static_cast<int64_t>(c.llm.bench_max_seconds * 1000));
  o.cache = cache;
  GRAG_ASSIGN_OR_RETURN(const Tokenizer* tok, Tokenizer::Get(c.chunks.encoding));
  o.token_counter = [tok](std::string_view text) { return tok->Count(text); };
  return o;
}

}  // namespace

Result<std::unique_ptr<ChatModel>> MakeChatModel(const Config& config, KeyValueCache* cache) {
  const std::string model = LogicalModel(config.llm.model, config.llm.endpoints);
  if (config.llm.endpoints.empty() && (config.llm.base_url.empty() || model.empty())) {
    return std::unique_ptr<ChatModel>();
  }
  GRAG_ASSIGN_OR_RETURN(OpenAIOptions base, BaseOptions(config, cache));
  base.base_url = config.llm.base_url.empty() ? base.base_url : config.llm.base_url;
  base.api_key = config.llm.api_key;
  base.model = model;
  GRAG_ASSIGN_OR_RETURN(
      base.endpoints, EndpointsFor("llm.endpoints", config.llm.endpoints, config.llm.concurrency));
  base.usage_role = "llm";
  std::map<ChatRole, std::unique_ptr<ChatModel>> by_role;
  for (const auto& [role, rc] :
       {std::pair<ChatRole, const LlmRoleConfig*>{ChatRole::kExtract, &config.llm.extract},
        {ChatRole::kSummarize, &config.llm.summarize},
        {ChatRole::kResolve, &config.llm.resolve},
        {ChatRole::kQuery, &config.llm.query}}) {
    if (rc->empty()) continue;
    const std::string key = "llm." + std::string(ChatRoleName(role));
    OpenAIOptions o = base;
    std::string api_key = rc->api_key;
    if (!rc->api_key_env.empty()) {
      GRAG_ASSIGN_OR_RETURN(api_key, KeyFromEnv(key + ".api_key_env", rc->api_key_env));
    }
    const int64_t concurrency = rc->concurrency > 0 ? rc->concurrency : config.llm.concurrency;
    o.max_concurrency = static_cast<int>(concurrency);
    if (rc->requests_per_minute >= 0) {
      o.requests_per_minute = static_cast<int>(rc->requests_per_minute);
    }
    if (rc->tokens_per_minute >= 0) o.tokens_per_minute = static_cast<int>(rc->tokens_per_minute);
    const std::string endpoints_model = LogicalModel("", rc->endpoints);
    o.model = !rc->model.empty() ? rc->model : !endpoints_model.empty() ? endpoints_model : model;
    if (!rc->endpoints.empty()) {
      // Servers of its own: neither [llm]'s servers nor its key go there; each endpoint sends
      // its own key (api_key or api_key_env), as in llm.endpoints.
      GRAG_ASSIGN_OR_RETURN(o.endpoints,
                            EndpointsFor(key + ".endpoints", rc->endpoints, concurrency));
      o.base_url = o.endpoints.front().base_url;
      o.api_key = api_key;
    } else if (!rc->base_url.empty()) {
      // Another server: neither [llm]'s endpoints nor its key go there.
      o.base_url = rc->base_url;
      o.endpoints.clear();
      o.api_key = api_key;
    } else {
      if (!api_key.empty()) o.api_key = api_key;
      // [llm]'s servers, within the role's own limits.
      GRAG_ASSIGN_OR_RETURN(o.endpoints,
                            EndpointsFor("llm.endpoints", config.llm.endpoints, concurrency));
    }
    o.usage_role = key;
    GRAG_ASSIGN_OR_RETURN(std::unique_ptr<OpenAIClient> client, OpenAIClient::Create(std::move(o)));
    by_role.emplace(role, std::move(client));
  }
  GRAG_ASSIGN_OR_RETURN(std::unique_ptr<OpenAIClient> client,
                        OpenAIClient::Create(std::move(base)));
  if (by_role.empty()) return std::unique_ptr<ChatModel>(std::move(client));
  return std::unique_ptr<ChatModel>(
      std::make_unique<RoleChatModel>(std::move(client), std::move(by_role)));
}

Result<std::unique_ptr<EmbeddingModel>> MakeEmbeddingModel(const Config& config,
                                                           KeyValueCache* cache) {
  const std::string model = LogicalModel(config.embeddings.model, config.embeddings.endpoints);
  if (model.empty()) {
    return std::unique_ptr<EmbeddingModel>(std::make_unique<LexicalEmbedder>());
  }
  GRAG_ASSIGN_OR_RETURN(OpenAIOptions o, BaseOptions(config, cache));
  GRAG_ASSIGN_OR_RETURN(
      o.endpoints,
      EndpointsFor("embeddings.endpoints", config.embeddings.endpoints, config.llm.concurrency));
  o.usage_role = "embeddings";
  o.base_url =
      config.embeddings.base_url.empty() ? config.llm.base_url : config.embeddings.base_url;
  if (!o.endpoints.empty() && o.base_url.empty()) o.base_url = o.endpoints.front().base_url;
  if (o.base_url.empty()) {
    return Status::InvalidArgument(
        "embeddings.model is set but no endpoint is: set embeddings.base_url or llm.base_url");
  }
  o.api_key = config.embeddings.api_key.empty() ? config.llm.api_key : config.embeddings.api_key;
  // Ollama's own API only where Ollama serves: an embedding server of its own speaks OpenAI's.
  if (o.api_style == ApiStyle::kOllama && !config.embeddings.base_url.empty() &&
      config.embeddings.base_url != config.llm.base_url) {
    o.api_style = ApiStyle::kOpenAI;
  }
  o.model = model;
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
  if (o.api_style == ApiStyle::kOllama) o.api_style = ApiStyle::kOpenAI;  // Ollama has no reranker
  o.model = config.rerank.model;
  GRAG_ASSIGN_OR_RETURN(std::unique_ptr<OpenAIClient> client, OpenAIClient::Create(std::move(o)));
  return std::unique_ptr<RerankModel>(std::move(client));
}

}  // namespace grag
