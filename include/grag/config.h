// Configuration: every setting declared once (key, environment variable, help, default).
//
// Precedence: defaults < config file (<root>/grag.toml) < environment < command-line flags.
// Relative paths are resolved against the project root.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "grag/retrieval_tuning.h"
#include "grag/status.h"

namespace grag {

struct InputConfig {
  std::string dir = "input";             // folder `grag index` reads when given no paths
  std::string invalid_utf8 = "skip";     // skip | repair: what to do with a file that is not UTF-8
  std::string json_text_field = "text";  // JSON/JSONL field holding a document's text
  std::string json_id_field = "id";
  std::string json_title_field = "title";
  std::string csv_text_column = "text";  // CSV column holding a document's text
  std::string csv_id_column = "id";
  std::string csv_title_column = "title";
};

struct ChunkConfig {
  int64_t size = 1200;                  // tokens per chunk (Microsoft GraphRAG's default)
  int64_t overlap = 100;                // tokens shared by consecutive chunks (ditto)
  std::string encoding = "o200k_base";  // cl100k_base | o200k_base
  bool prepend_title = false;           // start every chunk with "title: <title>.\n" (as Microsoft)
};

struct StoreConfig {
  std::string path = "output/index.db";  // the single SQLite file holding the whole index
  // A PostgreSQL database holding the index instead (postgresql://...): for several grag
  // processes sharing one index. Empty: the SQLite file at `path`.
  std::string url;
  // A streaming replica of `url` that read-only engines (questions) open instead: reads scale
  // over replicas while writes go to the primary. Eventually consistent: a replica shows a
  // finished index run once it has replayed it.
  std::string read_url;
  // After an index run, rewrite the SQLite file densely (VACUUM): always, never, or auto (after
  // a run that built the index from nothing, or that left a fifth of the file as free pages).
  std::string compact = "auto";
};

// One server of a model role (llm.endpoints, embeddings.endpoints): with several, each call goes to
// the least-loaded healthy one within its own limits; one that keeps failing is benched a while.
struct EndpointConfig {
  std::string name;         // in summaries and `grag stats`; empty: host:port of base_url
  std::string base_url;     // required
  std::string api_key;      // empty: api_key_env's value, else none (the role's key is not sent)
  std::string api_key_env;  // environment variable holding the key
  std::string model;        // the name this server knows the model by; empty: the role's model
  double weight = 1;        // > 0: among equally loaded endpoints, the heavier goes first
  int64_t concurrency = 0;  // requests in flight at once here; 0: llm.concurrency
  int64_t rpm = 0;          // requests per minute here; 0: unlimited
  int64_t tpm = 0;          // tokens per minute here; 0: unlimited
};

// A model role's own model (llm.extract, llm.summarize, llm.resolve, llm.query): empty fields
// take [llm]'s. A role with its own base_url or endpoints sends its own key only.
struct LlmRoleConfig {
  std::string model;
  std::string base_url;
  std::string api_key;
  std::string api_key_env;  // environment variable holding the role's key
  // Several servers of the role's model, as llm.endpoints; they take the place of base_url.
  std::vector<EndpointConfig> endpoints;
  // The role's own limits, apart from [llm]'s: concurrency 0 means llm.concurrency; a rate below
  // 0 means [llm]'s (0: unlimited).
  int64_t concurrency = 0;
  int64_t requests_per_minute = -1;
  int64_t tokens_per_minute = -1;
  // Per million tokens; below 0: llm.price_*_per_million (0 is a price: a free local model).
  double price_input_per_million = -1;
  double price_output_per_million = -1;
  // Nothing but prices set: the role's calls go to [llm]'s client.
  bool empty() const {
    return model.empty() && base_url.empty() && api_key.empty() && api_key_env.empty() &&
           endpoints.empty() && concurrency == 0 && requests_per_minute < 0 &&
           tokens_per_minute < 0;
  }
};

struct LlmConfig {
  std::string base_url;  // empty: no LLM (the offline no-LLM mode)
  std::string model;
  std::string api_key;               // falls back to OPENAI_API_KEY
  std::string api_style = "openai";  // openai | azure
  std::string azure_api_version;     // empty: the client's (OpenAIOptions::azure_api_version)
  std::string extra_body;            // JSON object merged into every request body, e.g. {"seed": 1}
  int64_t concurrency = 16;          // requests in flight at once
  int64_t requests_per_minute = 0;   // 0: unlimited
  int64_t tokens_per_minute = 0;     // 0: unlimited
  double timeout_seconds = 120;      // per call, including the whole reply
  int64_t max_retries = 6;           // on 429, 5xx and network errors
  bool json_mode = true;             // ask for response_format json_object where JSON is wanted
  std::string reasoning_effort;      // reasoning models: low | medium | high; empty: not sent
  std::string think;                 // on | off: thinking turned on or off; empty: model default
  std::string max_tokens_field = "max_tokens";  // or max_completion_tokens
  std::string keep_alive = "30m";               // Ollama: how long the model stays loaded
  int64_t context_window = 0;  // Ollama: the model's window when the server won't say
  double temperature = 0;      // deterministic extraction and reports
  // Spending: prices (per million tokens, in any currency; 0: unknown) turn token counts into a
  // cost in dry-run estimates and budgets. A run stops cleanly, resumable, once it has made
  // max_calls model calls or spent max_cost (0: no limit).
  double price_input_per_million = 0;
  double price_output_per_million = 0;
  int64_t max_calls = 0;
  double max_cost = 0;
  // Several endpoints serving the chat model; empty: base_url, api_key, concurrency and the rate
  // limits above. llm.model stays the logical model name (cache keys, extraction results).
  std::vector<EndpointConfig> endpoints;
  int64_t bench_after_failures = 3;  // an endpoint failing this many requests in a row is benched
  double bench_seconds = 5;          // for this long at first, doubling each time, up to
  double bench_max_seconds = 300;
  LlmRoleConfig extract;    // extraction and gleaning
  LlmRoleConfig summarize;  // description summaries and community reports
  LlmRoleConfig resolve;    // the entity-resolution judge
  LlmRoleConfig query;      // the router, map and reduce, answers

  // The role named `role` ("extract", "summarize", "resolve", "query"); null for any other name
  // ("default": [llm] itself).
  const LlmRoleConfig* Role(std::string_view role) const;
  // What a role's tokens cost per million: its own price where it sets one, else [llm]'s.
  double InputPrice(std::string_view role) const;
  double OutputPrice(std::string_view role) const;
  // Some price is set, [llm]'s or a role's: token counts can be shown as costs.
  bool Priced() const;
};

struct EmbeddingConfig {
  std::string base_url;                   // empty: the LLM's base_url
  std::string model;                      // empty: the built-in lexical embedder (no network)
  std::string api_key;                    // empty: the LLM's key
  int64_t batch_size = 16;                // inputs per request (Microsoft GraphRAG's default)
  std::vector<EndpointConfig> endpoints;  // as llm.endpoints, for the embedding model
  // How the index keeps vectors: "f32", "f16" or "int8" (VectorEncoding, grag/store_types.h).
  // int8: a quarter of f32's room, and retrieval recall no lower than f32's on every benchmark
  // set (bench/RESULTS.md, issue 37).
  std::string encoding = "int8";
  // Embed entities that are literal values (dates, numbers, amounts, quantities: IsLiteralValue).
  // Off: a question finds them by name, their meaning is in their neighbours, and on densely
  // extracted text they were half the entity vectors.
  bool literal_values = false;
};

// The built-in extractor of the no-LLM mode (see nlp_extract.h for what each knob does).
struct NlpConfig {
  int64_t sentence_window = 1;             // co-occurrence window in sentences; -1: whole chunk
  std::vector<std::string> exclude_words;  // more stop words
  int64_t min_node_freq = 2;               // phrases in fewer chunks are pruned
  double min_edge_weight_pct = 40;         // edges below this weight percentile are pruned
  bool pmi_weights = true;                 // PMI-normalised edge weights
};

struct ExtractionConfig {
  std::vector<std::string> entity_types = {"organization", "person", "geo", "event"};
  int64_t gleanings = 1;  // extra rounds asking the model what it missed
  // Gleaning rounds run only for chunks whose first reply found fewer entities and
  // relationships per token than this share of the run's median (under-extracted chunks);
  // 0: glean every chunk.
  double glean_below_yield = 0.75;
  // Stop a run whose first chunks yield no entity while their text holds names, with a diagnosis,
  // instead of spending the budget on an empty graph.
  bool stop_if_empty = true;
  // PostgreSQL: share extraction with `grag index --worker` processes (Store::PublishWork).
  bool distribute = false;
  double worker_lease = 30;  // seconds a worker's claim holds without a heartbeat
  NlpConfig nlp;
};

// Entity resolution (grag/resolve.h): names of one real thing become one entity.
struct ResolutionConfig {
  bool enabled = true;
  double name_weight = 0.5;  // similarity = name_weight x name + embedding_weight x cosine
  double embedding_weight = 0.5;
  double merge_threshold = 0.85;        // with a chat model: merge at or above
  double adjudicate_threshold = 0.6;    // with a chat model: [this, merge_threshold) asks the LLM
  double no_llm_merge_threshold = 0.9;  // without a chat model: merge at or above
  int64_t adjudication_batch = 25;      // candidate pairs per LLM call
  int64_t max_block = 100;              // a name token shared by more entities is not compared on
  // The judge's calls at most this share of the run's extraction calls (at least one call);
  // the pairs beyond are decided by the rules without a judge. 0: no limit.
  double max_judge_share = 0.05;
};

// Merged descriptions (grag/merge.h SummarizeOptions).
struct SummaryConfig {
  int64_t max_joined_tokens = 500;   // joined descriptions above this are summarised by the LLM
  int64_t max_descriptions = 0;      // more descriptions than this are summarised too; 0: no limit
  int64_t max_summary_tokens = 300;  // a summary's length limit
  // An existing summary takes new descriptions verbatim (no call) while they total at most this
  // share of the tokens it summarised (and at most max_joined_tokens); 0: always summarise again.
  double refresh_share = 0.5;
};

struct CommunityConfig {
  int64_t max_cluster_size = 10;  // communities larger than this are split again
  // With an LLM, communities of fewer members get an extractive report (no call); 0: all LLM.
  int64_t llm_report_min_size = 4;
  double resolution = 1.0;    // Leiden modularity resolution
  int64_t seed = 0xDEADBEEF;  // fixed seed: same graph, same communities
  bool incremental = true;    // warm-start Leiden from the previous partition
  // With the warm start, only the changed entities and their neighbours may change community.
  bool local_updates = true;
  double drift_threshold = 0.01;  // modularity a warm start may lose to a fresh run
  // An LLM report stands (marked stale) while its community changed less than this since it
  // was written (grag/report.h ReportOptions::refresh_threshold); 0: rewrite on any change.
  double report_refresh_threshold = 0.2;
};

// When community reports are written (grag/indexer.h WriteDeferredReports).
struct ReportsConfig {
  // eager: `grag index` writes every LLM report. lazy: the index writes extractive reports only
  // (no call) and a global question writes the LLM reports of the communities it reads, at most
  // lazy_per_question of them, stored for the questions after it.
  std::string mode = "eager";
  int64_t lazy_per_question = 20;
};

struct GlobalSearchConfig {
  int64_t level = 2;  // community level searched (0 = coarsest; Microsoft's default 2)
  int64_t map_batch_tokens = 12000;      // tokens of one map prompt
  int64_t max_map_calls = 50;            // bounds a query's cost at fine levels
  int64_t reduce_budget_tokens = 12000;  // tokens of ranked points in the reduce prompt
  double map_timeout_seconds = 120;      // a map call slower than this drops out
};

struct LocalSearchConfig {
  int64_t top_k = 10;                     // matched entities at most
  double similarity_floor = 0.5;          // cosine similarity an entity must clear
  double lexical_similarity_floor = 0.2;  // the same, with the built-in lexical embedder
  int64_t context_budget_tokens = 12000;
  double chunk_share = 0.5;  // of the budget, for source chunks
  double relationship_share = 0.25;
  double report_share = 0.25;
};

// DRIFT search (--method drift): a primer over the best-matching reports, rounds of follow-up
// questions answered by local search, one reduce. At most hyde + primer_folds + depth x breadth
// + 1 chat calls (10 by default; Microsoft's defaults make 67). Defaults explained in
// grag/drift_search.h and docs/configuration.md.
struct DriftConfig {
  bool hyde = true;                       // match a hypothetical answer to the reports (1 call)
  int64_t primer_top_k = 10;              // reports the primer reads
  int64_t primer_folds = 2;               // primer calls at most
  int64_t primer_fold_tokens = 12000;     // tokens of one primer prompt
  int64_t followups_per_answer = 3;       // follow-ups asked of each call
  int64_t depth = 2;                      // rounds of follow-ups
  int64_t breadth = 3;                    // follow-ups answered per round
  double depth_decay = 0.8;               // a follow-up's priority: score x decay^depth
  int64_t min_parent_score = 10;          // follow-ups of answers scored below are not asked
  int64_t local_budget_tokens = 8000;     // each follow-up's local context
  double local_chunk_share = 0.8;         // of it, for source chunks
  double local_relationship_share = 0.1;  // for relationships
  double local_report_share = 0.1;        // for community reports
  int64_t reduce_budget_tokens = 12000;   // tokens of notes in the reduce prompt
  int64_t reply_max_tokens = 1500;        // primer and follow-up replies
  int64_t reduce_reply_max_tokens = 2000;
  int64_t max_calls = 0;  // hard cap on chat calls; 0: the formula's bound
};

// Budgeted search (--method lazy); lazy_search.h's LazySearchOptions explains each default.
struct LazyConfig {
  int64_t budget = 20;               // relevance calls per question (--budget)
  int64_t tests_per_call = 5;        // passages per relevance call
  int64_t test_window_tokens = 400;  // tokens of one tested passage (a chunk's best window)
  int64_t relevance_threshold = 2;   // rating 0-3 a passage needs to be relevant
  int64_t max_misses = 4;            // barren communities in a row before stopping
  int64_t community_rank_k = 3;      // a community ranks by its best this many passages
  double prior_weight = 0.1;         // weight of the community-size prior
  int64_t candidate_chunks = 200;    // chunks each retrieval list ranks
  bool refine = true;                // one call for sub-questions and search terms
  int64_t subqueries = 3;
  int64_t concurrency = 8;               // relevance calls per wave
  int64_t claim_batch_tokens = 8000;     // relevant text per claims call
  int64_t max_claim_calls = 8;           // claims calls at most
  int64_t reduce_budget_tokens = 12000;  // tokens of the reduce prompt
};

// Character-level citations (grag/citations.h SpanOptions explains the defaults): each answer's
// citation gains the passage(s) of the original document it rests on.
struct CitationsConfig {
  int64_t max_spans = 3;      // passages per citation
  double min_overlap = 0.35;  // share of the claim's words a sentence needs; else the whole chunk
};

struct QueryConfig {
  int64_t max_question_tokens = 2000;  // longer questions are refused (they ride in every prompt)
  std::string method =
      "auto";  // grag query's default: auto | global | local | basic | hybrid | drift | lazy
  std::string router = "rules";  // how auto decides: rules | llm (one small cached call)
};

// Retrieval: grag search, basic and hybrid search, and local search's chunk lane. The weights
// are RetrievalTuning's (grag/retrieval_tuning.h), where each default is explained.
struct SearchConfig : RetrievalTuning {
  std::string method = "hybrid";          // grag search's default: vector | bm25 | graph | hybrid
  int64_t top_k = 10;                     // chunks grag search returns
  int64_t candidates = 100;               // chunks each signal contributes to the fusion
  int64_t context_budget_tokens = 12000;  // basic and hybrid search: tokens of passages
};

// An optional reranker: any endpoint speaking Cohere's /v1/rerank (Cohere, Jina, vLLM,
// llama.cpp's server, TEI) reorders the fused top_n when model is set.
struct RerankConfig {
  std::string base_url;  // empty: llm.base_url
  std::string model;     // empty: no reranking
  std::string api_key;   // empty: the LLM's key
  int64_t top_n = 20;
};

// grag serve (the HTTP API) and grag mcp.
struct ServerConfig {
  std::string host = "127.0.0.1";  // loopback: only this machine can connect
  int64_t port = 8080;
  // When set, every route but /health needs `Authorization: Bearer KEY`. Better kept in the
  // environment (GRAG_API_KEYS, comma-separated) than in grag.toml.
  std::vector<std::string> api_keys;
  int64_t max_body_mb = 32;      // larger request bodies get 413
  double request_timeout = 300;  // seconds a reply may take to be written (each write)
  // Seconds a request's headers may take from its first byte, and its body from when the
  // server starts reading it (slower: 408): a client trickling its request holds a thread for
  // at most this long, and only for its body (headers are gathered without one).
  double read_timeout = 10;
  double keep_alive_timeout = 5;  // seconds an idle keep-alive connection stays open (no thread)
  int64_t keep_alive_max = 100;   // requests on one connection before the server closes it
  // Open connections from one client address (more: 503 and closed); 0: no cap.
  int64_t max_connections_per_client = 256;
  std::vector<std::string> cors_origins;  // origins allowed by CORS; empty: off; "*": any
  // Models a request to the server or the MCP server may ask to be answered by (/v1/query's
  // "model", a chat model "grag-local/NAME", the MCP query tool's "model"), on the query role's
  // server; empty: requests cannot choose (each model is a cost the operator agrees to).
  // CheckOfferedModel.
  std::vector<std::string> query_models;
  // Host header names accepted besides IP addresses and localhost (DNS rebinding: a page on
  // evil.example resolving to this machine sends Host: evil.example); "*": any.
  std::vector<std::string> allowed_hosts;
  int64_t threads = 64;  // requests served at once (idle and slow connections hold none)
  int64_t workers = 0;   // engine calls (queries, searches) at once; 0: one per CPU core
  // Workspaces: several indexes behind one server, each a project folder under this one
  // (relative to the project root). See grag/project.h.
  std::string workspaces_dir = "workspaces";
  std::vector<std::string> workspace_keys;  // "WORKSPACE:KEY": a key opening that one only
  int64_t workspace_workers = 0;            // questions at once per workspace; 0: no own limit
  int64_t max_loaded_workspaces = 8;        // readers kept open; the idle LRU one unloads past it
};

struct Config {
  std::string root = ".";               // the project folder (--root)
  std::string prompts_dir = "prompts";  // editable prompt files written by `grag init`
  std::string log_level = "info";
  InputConfig input;
  ChunkConfig chunks;
  StoreConfig store;
  LlmConfig llm;
  EmbeddingConfig embeddings;
  ExtractionConfig extraction;
  SummaryConfig summaries;
  ResolutionConfig resolution;
  CommunityConfig communities;
  ReportsConfig reports;
  GlobalSearchConfig global_search;
  LocalSearchConfig local_search;
  DriftConfig drift;
  LazyConfig lazy;
  CitationsConfig citations;
  QueryConfig query;
  SearchConfig search;
  RerankConfig rerank;
  ServerConfig server;

  // `path` resolved against root (absolute paths unchanged).
  std::string Resolve(const std::string& path) const;
  // Where the index lives, for Store::Open: store.url when set, else store.path resolved.
  std::string IndexLocation() const;
  // The same for messages and output: a URL's password removed.
  std::string IndexLabel() const;
  // Where a read-only engine opens the index: store.read_url when set, else IndexLocation().
  std::string ReadIndexLocation() const;
};

// `url` without a password (user:secret@ and password=...), for messages and logs.
std::string RedactUrlPassword(std::string_view url);

// A role's logical model name: `model` when set, else the model every endpoint names ("" when
// there is none, or they differ: ValidateConfig refuses that).
std::string LogicalModel(const std::string& model, const std::vector<EndpointConfig>& endpoints);

// A client's choice of the model that answers (QueryRequest::model) where clients are not the
// operator (grag serve, grag mcp): OK when `model` is one of server.query_models, else an
// InvalidArgument saying which are.
Status CheckOfferedModel(const Config& config, std::string_view model);

// No model endpoint at all, whatever the file or environment configured: the built-in extractor,
// embedder, reports and answers (`grag --no-llm`, the demo, `grag.Engine(no_llm=True)`).
void DisableModels(Config& config);

// Chat requests in flight at once: llm.concurrency, or with llm.endpoints the sum of theirs. The
// LLM-bound stages run this many workers.
int64_t LlmConcurrency(const Config& config);
// The same for one model role's requests ("extract", "summarize", "resolve", "query"): the role's
// own concurrency and endpoints where it sets them.
int64_t LlmConcurrency(const Config& config, std::string_view role);
// The same for embedding requests (embeddings.endpoints, else llm.concurrency).
int64_t EmbeddingConcurrency(const Config& config);

// One declared setting, for help texts, `grag init` and `grag config`.
struct SettingInfo {
  std::string key;  // "llm.model"
  std::string env;  // "GRAG_LLM_MODEL", or empty
  std::string help;
  std::string value_text;  // the current value, TOML-formatted
  std::string allowed;     // "at least 1", "between 0 and 1", "one of a, b"; empty: anything
};

// All settings with their current values in `config`, in declaration order.
std::vector<SettingInfo> ListSettings(const Config& config);

// Sets one setting from text ("llm.concurrency", "8"); InvalidArgument names the key and the
// expected type. Lists take comma-separated values. Call ValidateConfig after the last one.
Status ApplySetting(Config& config, const std::string& key, const std::string& value);

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Checks values against each other and their ranges (overlap < size, known encoding, ...).
Status ValidateConfig(const Config& config);

// The process environment.
std::optional<std::string> ProcessEnv(const std::string& name);

// Builds the configuration for project `root`: defaults, then `config_file` (default
// <root>/grag.toml when it exists; an explicitly given file must exist), then the environment.
// Errors name the file, line and key.
Result<Config> LoadConfig(const std::string& root, const std::string& config_file = "",
                          const EnvLookup& env = ProcessEnv);

// Applies the settings of a grag.toml onto `config` (over what it holds already): a
// workspace's file over its server's settings. Unknown keys and bad values are errors naming
// the file and line. Does not validate the result (ValidateConfig).
Status ApplyConfigFile(Config& config, const std::string& file);

// The config file `grag init` writes: every setting, commented with its help and default.
std::string RenderConfigFile(const Config& config);

// Every setting with its built-in default, environment variable and help, as Markdown tables
// by section: the generated part of docs/configuration.md (`grag config --reference`).
std::string RenderSettingsReference();

}  // namespace grag
