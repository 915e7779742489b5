// The settings table: every setting's name, environment variable, help, value and allowed
// values, declared once (settings_table.h). config.cpp generates the rest from it.
#include "settings_table.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>
#include <set>

namespace grag::config_internal {
namespace {

// Text that lives as long as the program: the keys, variables and help of settings made in a
// loop (the model roles').
const char* Interned(std::string text) {
  static std::mutex mu;
  static std::set<std::string, std::less<>> texts;
  std::lock_guard lock(mu);
  return texts.insert(std::move(text)).first->c_str();
}

// Each model role's settings: llm.<role>.model, base_url, api_key, api_key_env, endpoints, its
// limits and its prices.
std::vector<Setting> RoleSettings(Config& c) {
  const std::pair<const char*, LlmRoleConfig*> roles[] = {{"extract", &c.llm.extract},
                                                          {"summarize", &c.llm.summarize},
                                                          {"resolve", &c.llm.resolve},
                                                          {"query", &c.llm.query}};
  const std::map<std::string, std::string> what = {
      {"extract", "extraction and gleaning"},
      {"summarize", "description summaries and community reports"},
      {"resolve", "the entity-resolution judge"},
      {"query", "the router, global search's map and reduce, and answers"}};
  std::vector<Setting> out;
  for (const auto& [name, role] : roles) {
    const std::string n = name;
    std::string upper;
    for (char ch : n) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    out.push_back({Interned("llm." + n + ".model"), Interned("GRAG_LLM_" + upper + "_MODEL"),
                   Interned("Model for " + what.at(n) + "; empty = llm.model"), &role->model});
    out.push_back(
        {Interned("llm." + n + ".base_url"), Interned("GRAG_LLM_" + upper + "_BASE_URL"),
         Interned("Endpoint for " + what.at(n) + "; empty = llm.base_url (and llm.endpoints)"),
         &role->base_url});
    out.push_back({Interned("llm." + n + ".api_key"), Interned("GRAG_LLM_" + upper + "_API_KEY"),
                   Interned("API key for llm." + n +
                            ".base_url; empty = llm.api_key when the role keeps llm.base_url, "
                            "else none"),
                   &role->api_key});
    out.push_back({Interned("llm." + n + ".api_key_env"), "",
                   Interned("Environment variable holding llm." + n +
                            "'s API key (instead of llm." + n + ".api_key)"),
                   &role->api_key_env});
    out.push_back({Interned("llm." + n + ".endpoints"), "",
                   Interned("Several servers of the model for " + what.at(n) +
                            ", as llm.endpoints; they take the place of llm." + n +
                            ".base_url and [llm]'s servers"),
                   &role->endpoints});
    out.push_back({Interned("llm." + n + ".concurrency"), "",
                   Interned("Requests for " + what.at(n) +
                            " in flight at once, apart from other roles'; 0 = llm.concurrency"),
                   &role->concurrency, AtLeast(0)});
    for (const char* limit : {"requests", "tokens"}) {
      const std::string key = std::string(limit) + "_per_minute";
      out.push_back(
          {Interned("llm." + n + "." + key), "",
           Interned(std::string("Rate limit on ") + what.at(n) + " (" + limit +
                    " a minute, apart from other roles'); 0 = unlimited, -1 = llm." + key),
           limit == std::string("requests") ? &role->requests_per_minute : &role->tokens_per_minute,
           AtLeast(-1)});
    }
    for (const char* way : {"input", "output"}) {
      const std::string key = std::string("price_") + way + "_per_million";
      out.push_back({Interned("llm." + n + "." + key), "",  // as llm.price_*: no variable
                     Interned(std::string("Price per million ") + way + " tokens of " + what.at(n) +
                              "; -1 = llm." + key),
                     way == std::string("input") ? &role->price_input_per_million
                                                 : &role->price_output_per_million,
                     AtLeast(-1)});
    }
  }
  return out;
}

}  // namespace

std::vector<Setting> Settings(Config& c) {
  std::vector<Setting> all = {
      {"prompts_dir", "", "Folder of editable prompt files (written by `grag init`)",
       &c.prompts_dir},
      {"log_level", "GRAG_LOG_LEVEL", "trace | debug | info | warn | error | off", &c.log_level,
       OneOf({"trace", "debug", "info", "warn", "error", "off"})},
      {"input.dir", "GRAG_INPUT_DIR", "Folder that `grag index` reads when given no paths",
       &c.input.dir},
      {"input.invalid_utf8", "",
       "skip | repair: a file that is not valid UTF-8 is left out, or loaded with bad bytes "
       "replaced by U+FFFD",
       &c.input.invalid_utf8, OneOf({"skip", "repair"})},
      {"input.json_text_field", "", "JSON/JSONL field holding a document's text",
       &c.input.json_text_field},
      {"input.json_id_field", "", "JSON/JSONL field holding a document's id",
       &c.input.json_id_field},
      {"input.json_title_field", "", "JSON/JSONL field holding a document's title",
       &c.input.json_title_field},
      {"input.csv_text_column", "", "CSV column holding a document's text",
       &c.input.csv_text_column},
      {"input.csv_id_column", "", "CSV column holding a document's id", &c.input.csv_id_column},
      {"input.csv_title_column", "", "CSV column holding a document's title",
       &c.input.csv_title_column},
      {"chunks.size", "", "Tokens per chunk (Microsoft GraphRAG's default: 1200)", &c.chunks.size,
       AtLeast(1)},
      {"chunks.overlap", "", "Tokens shared by consecutive chunks (default 100)",
       &c.chunks.overlap},
      {"chunks.encoding", "GRAG_ENCODING",
       "Tokenizer: o200k_base (GPT-4o and later) or cl100k_base (GPT-4, GPT-3.5)",
       &c.chunks.encoding, OneOf({"o200k_base", "cl100k_base"})},
      {"chunks.prepend_title", "",
       "Start every chunk with \"title: <document title>.\\n\" as Microsoft GraphRAG can",
       &c.chunks.prepend_title},
      {"store.path", "GRAG_INDEX_PATH", "The SQLite file that holds the whole index",
       &c.store.path},
      {"store.url", "GRAG_STORE_URL",
       "PostgreSQL database holding the index instead of store.path, e.g. "
       "postgresql://grag@db.example/grag (several grag processes can share it); empty = SQLite",
       &c.store.url},
      {"store.read_url", "GRAG_STORE_READ_URL",
       "A PostgreSQL streaming replica of store.url that questions read from (grag serve, query, "
       "search); writes still go to store.url. Answers lag the primary by the replication delay; "
       "empty = read store.url",
       &c.store.read_url},
      {"store.compact", "",
       "After grag index, rewrite the SQLite file densely (VACUUM; it needs as much free disk as "
       "the index): auto = after a run that built the index from nothing (B-tree pages filled in "
       "no particular order are left partly empty, a twentieth of a fresh index) or that left a "
       "fifth of the file as free pages; always; never",
       &c.store.compact, OneOf({"auto", "always", "never"})},
      {"llm.base_url", "GRAG_LLM_BASE_URL",
       "OpenAI-compatible endpoint, e.g. https://api.openai.com/v1 or http://localhost:11434/v1 "
       "(Ollama); empty = no LLM",
       &c.llm.base_url},
      {"llm.model", "GRAG_LLM_MODEL",
       "Chat model name, e.g. gpt-4o-mini or llama3.1 (for Azure: the deployment name)",
       &c.llm.model},
      {"llm.api_key", "GRAG_LLM_API_KEY",
       "API key (falls back to OPENAI_API_KEY); better kept in the environment than in this file",
       &c.llm.api_key},
      {"llm.api_style", "GRAG_LLM_API_STYLE",
       "openai | azure (Azure OpenAI URL layout and api-key header) | ollama (Ollama's own API: "
       "each request sets the context window it needs, so prompts are never cut, and keeps the "
       "model loaded)",
       &c.llm.api_style, OneOf({"openai", "azure", "ollama"})},
      {"llm.azure_api_version", "",
       "api-version query parameter for Azure OpenAI; empty: the latest GA version grag knows",
       &c.llm.azure_api_version},
      {"llm.extra_body", "", "JSON object merged into every request body, e.g. {\"seed\": 1}",
       &c.llm.extra_body},
      {"llm.concurrency", "GRAG_LLM_CONCURRENCY", "Requests in flight at once", &c.llm.concurrency,
       AtLeast(1)},
      {"llm.requests_per_minute", "", "Request rate limit; 0 = unlimited",
       &c.llm.requests_per_minute},
      {"llm.tokens_per_minute", "", "Token rate limit; 0 = unlimited", &c.llm.tokens_per_minute},
      {"llm.timeout_seconds", "", "Per-call timeout, including the whole reply",
       &c.llm.timeout_seconds, Above(0)},
      {"llm.max_retries", "",
       "Retries on 429, 5xx and network errors (exponential backoff, Retry-After honoured)",
       &c.llm.max_retries, AtLeast(0)},
      {"llm.json_mode", "",
       "Ask for JSON replies (response_format) where JSON is expected; a server that refuses it "
       "is asked in the prompt only (remembered in the index)",
       &c.llm.json_mode},
      {"llm.reasoning_effort", "GRAG_LLM_REASONING_EFFORT",
       "Reasoning models: low | medium | high (sent as reasoning_effort); empty = not sent",
       &c.llm.reasoning_effort},
      {"llm.think", "GRAG_LLM_THINK",
       "Reasoning models: on | off turns thinking on or off where the server allows (Ollama's "
       "think, chat_template_kwargs.enable_thinking for vLLM, llama.cpp and LM Studio); empty = "
       "the model's default. Thinking is always kept out of the answers grag parses",
       &c.llm.think, OneOf({"", "on", "off"})},
      {"llm.max_tokens_field", "",
       "max_tokens | max_completion_tokens: how a reply's length limit is sent (a server that "
       "refuses one gets the other)",
       &c.llm.max_tokens_field, OneOf({"max_tokens", "max_completion_tokens"})},
      {"llm.keep_alive", "",
       "Ollama: how long the model stays loaded between requests (e.g. 30m; -1 = always)",
       &c.llm.keep_alive},
      {"llm.context_window", "",
       "Ollama: the model's context window in tokens when its server does not report it; 0 = "
       "ask the server",
       &c.llm.context_window, AtLeast(0)},
      {"llm.temperature", "", "Sampling temperature; 0 keeps extraction and reports reproducible",
       &c.llm.temperature},
      {"llm.price_input_per_million", "",
       "Price of a million prompt tokens (any currency; 0: unknown): dry runs show a cost and "
       "llm.max_cost can apply",
       &c.llm.price_input_per_million, AtLeast(0)},
      {"llm.price_output_per_million", "", "Price of a million completion tokens (0: unknown)",
       &c.llm.price_output_per_million, AtLeast(0)},
      {"llm.max_calls", "",
       "A run stops cleanly (resumable) once it has made this many model calls; 0: no limit",
       &c.llm.max_calls, AtLeast(0)},
      {"llm.max_cost", "",
       "A run stops cleanly (resumable) once its tokens cost this much at the configured prices; "
       "0: no limit",
       &c.llm.max_cost, AtLeast(0)},
      // ---- several endpoints per model role (one block: llm.* then embeddings.endpoints) ----
      {"llm.endpoints", "",
       "Several servers of the chat model, a list of tables {base_url, api_key or api_key_env, "
       "model, weight, concurrency, rpm, tpm, name}: each call goes to the least-loaded healthy "
       "one; empty = llm.base_url alone. llm.model stays the model's name for the reply cache",
       &c.llm.endpoints},
      {"llm.bench_after_failures", "",
       "With several endpoints: one failing this many requests in a row is benched (others take "
       "its calls)",
       &c.llm.bench_after_failures, AtLeast(1)},
      {"llm.bench_seconds", "",
       "How long a failing endpoint is benched at first (doubling each time it fails again)",
       &c.llm.bench_seconds, AtLeast(0)},
      {"llm.bench_max_seconds", "", "The longest bench", &c.llm.bench_max_seconds},
      {"embeddings.endpoints", "",
       "Several servers of the embedding model, as llm.endpoints; empty = embeddings.base_url",
       &c.embeddings.endpoints},
      {"embeddings.base_url", "GRAG_EMBEDDING_BASE_URL", "Embedding endpoint; empty = llm.base_url",
       &c.embeddings.base_url},
      {"embeddings.model", "GRAG_EMBEDDING_MODEL",
       "Embedding model, e.g. text-embedding-3-small or nomic-embed-text; empty = the built-in "
       "lexical embedder (hashed words and character 3-grams, no network)",
       &c.embeddings.model},
      {"embeddings.api_key", "GRAG_EMBEDDING_API_KEY", "Embedding API key; empty = the LLM's key",
       &c.embeddings.api_key},
      {"embeddings.batch_size", "", "Inputs per embedding request", &c.embeddings.batch_size,
       AtLeast(1)},
      {"embeddings.encoding", "",
       "How the index keeps vectors: f32, f16 (half the room) or int8 (a quarter); a change "
       "re-encodes the stored ones at the next index run, without a model call",
       &c.embeddings.encoding, OneOf({"f32", "f16", "int8"})},
      {"embeddings.literal_values", "",
       "Embed entities that are literal values (dates, numbers, amounts, quantities) too; off, "
       "questions find them by name and the index skips their vectors (half the entity vectors "
       "of a densely extracted corpus)",
       &c.embeddings.literal_values},
      {"extraction.entity_types", "", "Closed set of entity types the extractor may use",
       &c.extraction.entity_types},
      {"extraction.gleanings", "", "Extra rounds asking the model for entities it missed",
       &c.extraction.gleanings, AtLeast(0)},
      {"extraction.glean_below_yield", "",
       "Gleaning rounds run only for chunks whose first reply found fewer entities and "
       "relationships per token than this share of the run's median (0-1; 0: glean every chunk)",
       &c.extraction.glean_below_yield, Between(0, 1)},
      {"extraction.stop_if_empty", "",
       "Stop a run, with a diagnosis, when the model extracts no entity from its first chunks "
       "though their text holds names (a reasoning model, a prompt cut by the context window, a "
       "wrong model), instead of spending the budget on an empty graph",
       &c.extraction.stop_if_empty},
      {"extraction.distribute", "GRAG_EXTRACTION_DISTRIBUTE",
       "PostgreSQL: share the chunks to extract with `grag index --worker` processes (any "
       "machine, each with its own llm.endpoints) through the index's work table; this run "
       "extracts too and the result is the same as alone",
       &c.extraction.distribute},
      {"extraction.worker_lease", "",
       "Seconds a worker holds the chunks it claimed without a heartbeat (it renews them a few "
       "times a lease): a dead worker's chunks go to another after this",
       &c.extraction.worker_lease, AtLeast(0.5)},
      {"extraction.nlp.sentence_window", "",
       "No-LLM mode: phrases this many sentences apart or closer are related (0: same sentence; "
       "-1: anywhere in the chunk)",
       &c.extraction.nlp.sentence_window},
      {"extraction.nlp.exclude_words", "",
       "No-LLM mode: more words that never form or start a phrase",
       &c.extraction.nlp.exclude_words},
      {"extraction.nlp.min_node_freq", "",
       "No-LLM mode: phrases found in fewer chunks are left out of the graph",
       &c.extraction.nlp.min_node_freq},
      {"extraction.nlp.min_edge_weight_pct", "",
       "No-LLM mode: relationships below this percentile of weights are dropped (0-100)",
       &c.extraction.nlp.min_edge_weight_pct, Between(0, 100)},
      {"extraction.nlp.pmi_weights", "",
       "No-LLM mode: weight relationships by pointwise mutual information rather than raw "
       "co-occurrence counts",
       &c.extraction.nlp.pmi_weights},
      {"resolution.enabled", "",
       "Join names of one real thing into one entity (\"Marley\" and \"Jacob Marley\")",
       &c.resolution.enabled},
      {"resolution.name_weight", "", "Weight of name similarity in a candidate pair's score",
       &c.resolution.name_weight, AtLeast(0)},
      {"resolution.embedding_weight", "",
       "Weight of the cosine of the two descriptions' embeddings in a pair's score",
       &c.resolution.embedding_weight, AtLeast(0)},
      {"resolution.merge_threshold", "",
       "With a chat model: pairs scoring at least this merge without asking",
       &c.resolution.merge_threshold, Between(0, 1)},
      {"resolution.adjudicate_threshold", "",
       "With a chat model: pairs scoring from this up to merge_threshold are judged by the LLM",
       &c.resolution.adjudicate_threshold, Between(0, 1)},
      {"resolution.no_llm_merge_threshold", "",
       "Without a chat model: pairs scoring at least this merge (tuned for the lexical embedder)",
       &c.resolution.no_llm_merge_threshold, Between(0, 1)},
      {"resolution.adjudication_batch", "", "Candidate pairs judged per LLM call",
       &c.resolution.adjudication_batch, AtLeast(1)},
      {"resolution.max_block", "",
       "A name token shared by more entities than this is too common to pair them on",
       &c.resolution.max_block, AtLeast(2)},
      {"resolution.max_judge_share", "",
       "The judge's calls at most this share of the run's extraction calls (0-1; at least one "
       "call); the most similar pairs go first, the rest are decided by the rules without a "
       "judge (logged). 0: no limit",
       &c.resolution.max_judge_share, Between(0, 1)},
      {"summaries.max_joined_tokens", "",
       "An entity's or relationship's descriptions joined beyond this many tokens are summarised "
       "by the LLM (below: kept verbatim, no call)",
       &c.summaries.max_joined_tokens, AtLeast(1)},
      {"summaries.max_descriptions", "",
       "More distinct descriptions than this are summarised too, however short (0: only the token "
       "limit counts)",
       &c.summaries.max_descriptions, AtLeast(0)},
      {"summaries.max_summary_tokens", "", "Length limit of one summary (the call's max_tokens)",
       &c.summaries.max_summary_tokens, AtLeast(1)},
      {"summaries.refresh_share", "",
       "An update appends new descriptions to an existing summary without a call while they total "
       "at most this share of the tokens it summarised (and at most max_joined_tokens); 0: always "
       "summarise again",
       &c.summaries.refresh_share, AtLeast(0)},
      {"communities.report_refresh_threshold", "",
       "An update keeps an LLM report (marked stale) while its community changed less than this "
       "since it was written: share of members added or removed, of internal relationship weight, "
       "or of member degree that is new; 0: rewrite on any change (grag index --refresh-reports "
       "rewrites the stale ones)",
       &c.communities.report_refresh_threshold, AtLeast(0)},
      {"communities.llm_report_min_size", "",
       "With an LLM: communities with fewer members get an extractive report (no call) instead of "
       "an LLM report; 0: every community gets an LLM report",
       &c.communities.llm_report_min_size, AtLeast(0)},
      {"communities.max_cluster_size", "",
       "Communities larger than this are split into a finer level", &c.communities.max_cluster_size,
       AtLeast(1)},
      {"communities.resolution", "", "Leiden modularity resolution (higher: smaller communities)",
       &c.communities.resolution, Above(0)},
      {"communities.seed", "", "Leiden random seed: the same graph gives the same communities",
       &c.communities.seed},
      {"communities.incremental", "",
       "Start Leiden from the previous partition, so untouched regions keep their communities and "
       "reports",
       &c.communities.incremental},
      {"communities.local_updates", "",
       "With the warm start, only entities whose mentions or relationships changed, and their "
       "neighbours, may change community; the rest keep theirs (false: any node may move)",
       &c.communities.local_updates},
      {"communities.drift_threshold", "",
       "When the warm-started partition's modularity is this far below a fresh run's, the fresh "
       "run is used instead",
       &c.communities.drift_threshold, AtLeast(0)},
      {"reports.mode", "",
       "eager: grag index writes the LLM reports. lazy: it writes extractive ones (no call) and "
       "each global question writes the LLM reports of the communities it reads (at most "
       "reports.lazy_per_question), stored for later questions: an index that costs extraction "
       "only",
       &c.reports.mode, OneOf({"eager", "lazy"})},
      {"reports.lazy_per_question", "",
       "With reports.mode = lazy: LLM reports one global question may write, the heaviest "
       "communities first (the rest answer from their extractive report until a later question)",
       &c.reports.lazy_per_question, AtLeast(1)},
      {"global_search.level", "",
       "Community level global search reads (0 = coarsest, fewest reports)", &c.global_search.level,
       AtLeast(0)},
      {"global_search.map_batch_tokens", "", "Tokens of community reports per map call",
       &c.global_search.map_batch_tokens, AtLeast(500)},
      {"global_search.max_map_calls", "",
       "Map calls per query at most; beyond, the lowest-weight reports are left out",
       &c.global_search.max_map_calls, AtLeast(1)},
      {"global_search.reduce_budget_tokens", "", "Tokens of ranked points the reduce call gets",
       &c.global_search.reduce_budget_tokens, AtLeast(100)},
      {"global_search.map_timeout_seconds", "",
       "A map call slower than this drops out of the answer", &c.global_search.map_timeout_seconds,
       Above(0)},
      {"local_search.top_k", "", "Entities matched to the question at most", &c.local_search.top_k,
       AtLeast(1)},
      {"local_search.similarity_floor", "",
       "Cosine similarity an entity's description must reach to match",
       &c.local_search.similarity_floor},
      {"local_search.lexical_similarity_floor", "",
       "The same with the built-in lexical embedder, whose similarities run lower",
       &c.local_search.lexical_similarity_floor},
      {"local_search.context_budget_tokens", "", "Tokens of context for the answer",
       &c.local_search.context_budget_tokens, AtLeast(100)},
      {"local_search.chunk_share", "", "Share of the context for source chunks",
       &c.local_search.chunk_share, AtLeast(0)},
      {"local_search.relationship_share", "", "Share of the context for relationships",
       &c.local_search.relationship_share, AtLeast(0)},
      {"local_search.report_share", "", "Share of the context for community reports",
       &c.local_search.report_share, AtLeast(0)},
      {"drift.hyde", "",
       "DRIFT: write a hypothetical answer shaped like a report and match it to the reports (1 "
       "call); false matches the bare question",
       &c.drift.hyde},
      {"drift.primer_top_k", "", "DRIFT: reports the primer reads (best-matching first)",
       &c.drift.primer_top_k, AtLeast(1)},
      {"drift.primer_folds", "",
       "DRIFT: primer calls at most; the reports are packed into this many prompts",
       &c.drift.primer_folds, AtLeast(1)},
      {"drift.primer_fold_tokens", "", "DRIFT: tokens of one whole primer prompt",
       &c.drift.primer_fold_tokens, AtLeast(500)},
      {"drift.followups_per_answer", "",
       "DRIFT: follow-up questions asked of each primer and follow-up call",
       &c.drift.followups_per_answer, AtLeast(0)},
      {"drift.depth", "", "DRIFT: rounds of follow-up questions", &c.drift.depth, AtLeast(0)},
      {"drift.breadth", "", "DRIFT: follow-ups answered per round (the highest-scored first)",
       &c.drift.breadth, AtLeast(0)},
      {"drift.depth_decay",
       "",
       "DRIFT: a follow-up's priority is its parent's score times this to the parent's depth",
       &c.drift.depth_decay,
       {0.0, 1.0, true, false, {}}},
      {"drift.min_parent_score", "",
       "DRIFT: follow-ups of an answer the model scored below this (0-100) are not asked",
       &c.drift.min_parent_score, Between(0, 100)},
      {"drift.local_budget_tokens", "", "DRIFT: tokens of each follow-up's local context",
       &c.drift.local_budget_tokens, AtLeast(100)},
      {"drift.local_chunk_share", "", "DRIFT: share of a follow-up's context for source chunks",
       &c.drift.local_chunk_share, AtLeast(0)},
      {"drift.local_relationship_share", "",
       "DRIFT: share of a follow-up's context for relationships", &c.drift.local_relationship_share,
       AtLeast(0)},
      {"drift.local_report_share", "",
       "DRIFT: share of a follow-up's context for community reports", &c.drift.local_report_share,
       AtLeast(0)},
      {"drift.reduce_budget_tokens", "", "DRIFT: tokens of the whole reduce prompt",
       &c.drift.reduce_budget_tokens, AtLeast(100)},
      {"drift.reply_max_tokens", "", "DRIFT: reply cap of the primer and follow-up calls",
       &c.drift.reply_max_tokens, AtLeast(1)},
      {"drift.reduce_reply_max_tokens", "", "DRIFT: reply cap of the answer",
       &c.drift.reduce_reply_max_tokens, AtLeast(1)},
      {"drift.max_calls", "",
       "DRIFT: hard cap on chat calls per question; 0: hyde + primer_folds + depth x breadth + 1",
       &c.drift.max_calls},
      {"lazy.budget", "",
       "Budgeted search (--method lazy): relevance-test calls per question at most (--budget)",
       &c.lazy.budget, Between(1, 1000)},
      {"lazy.tests_per_call", "", "Budgeted search: passages rated per relevance call",
       &c.lazy.tests_per_call, Between(1, 50)},
      {"lazy.test_window_tokens", "",
       "Budgeted search: tokens of a tested passage (the chunk's best window of sentences)",
       &c.lazy.test_window_tokens, AtLeast(20)},
      {"lazy.relevance_threshold", "",
       "Budgeted search: rating (0-3) a passage needs to count as relevant",
       &c.lazy.relevance_threshold, Between(1, 3)},
      {"lazy.max_misses", "",
       "Budgeted search: stop after this many communities in a row without a relevant passage",
       &c.lazy.max_misses, AtLeast(1)},
      {"lazy.community_rank_k", "",
       "Budgeted search: a community ranks by the mean of its best this many passages",
       &c.lazy.community_rank_k, AtLeast(1)},
      {"lazy.prior_weight", "",
       "Budgeted search: weight of community size in the ranking (decides for generic questions)",
       &c.lazy.prior_weight, AtLeast(0)},
      {"lazy.candidate_chunks", "",
       "Budgeted search: chunks each retrieval list (question, sub-questions) ranks",
       &c.lazy.candidate_chunks, AtLeast(1)},
      {"lazy.refine", "",
       "Budgeted search: one call first for sub-questions and search terms the text would use",
       &c.lazy.refine},
      {"lazy.subqueries", "", "Budgeted search: sub-questions the refine call may add",
       &c.lazy.subqueries, Between(0, 10)},
      {"lazy.concurrency", "",
       "Budgeted search: relevance calls per wave (more: faster, less best-first)",
       &c.lazy.concurrency, AtLeast(1)},
      {"lazy.claim_batch_tokens", "", "Budgeted search: tokens of relevant text per claims call",
       &c.lazy.claim_batch_tokens, AtLeast(500)},
      {"lazy.max_claim_calls", "",
       "Budgeted search: claims calls at most (the lowest-rated relevant chunks left out beyond)",
       &c.lazy.max_claim_calls, AtLeast(1)},
      {"lazy.reduce_budget_tokens", "", "Budgeted search: tokens of the reduce prompt",
       &c.lazy.reduce_budget_tokens, AtLeast(100)},
      {"citations.max_spans", "",
       "Passages of the original documents shown per citation (best first); 0 = no passages",
       &c.citations.max_spans, Between(0, 20)},
      {"citations.min_overlap", "",
       "Share (0-1, rarer words weigh more) of the claim's words a sentence of the cited text "
       "must hold to be the passage; below it the whole chunk is",
       &c.citations.min_overlap, Between(0, 1)},
      {"query.max_question_tokens", "",
       "Questions longer than this many tokens are refused (every map prompt and the answer prompt "
       "carry the whole question); 0 = no limit",
       &c.query.max_question_tokens, AtLeast(0)},
      {"query.method", "GRAG_QUERY_METHOD",
       "grag query's default method: auto (the router picks global, local, hybrid or lazy), "
       "global, local, basic (vector only), hybrid, drift or lazy (budgeted search)",
       &c.query.method,
       OneOf({"auto", "global", "local", "basic", "hybrid", "drift", "lazy", "budgeted"})},
      {"query.router", "",
       "How --method auto decides: rules (free, instant) or llm (one small cached call per new "
       "question)",
       &c.query.router, OneOf({"rules", "llm"})},
      {"search.method", "",
       "grag search's default signal: vector, bm25, graph or hybrid (their weighted reciprocal "
       "rank fusion)",
       &c.search.method, OneOf({"vector", "bm25", "graph", "hybrid"})},
      {"search.top_k", "", "Chunks grag search returns", &c.search.top_k, AtLeast(1)},
      {"search.candidates", "", "Chunks each signal contributes to the fusion",
       &c.search.candidates, AtLeast(1)},
      {"search.rrf_k", "",
       "Reciprocal rank fusion constant: score = sum of weight / (rrf_k + rank)", &c.search.rrf_k,
       AtLeast(0)},
      {"search.vector_weight", "",
       "Fusion weight of the vector signal (with a neural embedding model)",
       &c.search.vector_weight, AtLeast(0)},
      {"search.bm25_weight", "", "Fusion weight of the BM25 signal", &c.search.bm25_weight,
       AtLeast(0)},
      {"search.graph_weight", "",
       "Fusion weight of the graph signal (personalised PageRank over the entity graph)",
       &c.search.graph_weight, AtLeast(0)},
      {"search.unanchored_graph_weight", "",
       "The graph signal's weight when no entity of the question is found by name or in the best "
       "passages (the walk then only guesses)",
       &c.search.unanchored_graph_weight, AtLeast(0)},
      {"search.anchored_specificity", "",
       "Hybrid: the graph gets search.graph_weight when the question names something at least "
       "this specific (0-1; a name in few chunks is specific), search.unanchored_graph_weight at "
       "search.min_name_specificity or less, and in proportion between: a walk from a name that "
       "is everywhere in the corpus wanders",
       &c.search.anchored_specificity, Between(0, 1)},
      {"search.lexical_vector_weight", "",
       "Fusion weight of the vector signal with the built-in lexical embedder (another keyword "
       "signal)",
       &c.search.lexical_vector_weight, AtLeast(0)},
      {"search.passage_weight", "",
       "Hybrid: fusion weight of the sentence-window list, the signals' best chunks ranked again "
       "by their best few sentences (the specific question words a window holds); on long "
       "documents it tells the chunk that holds the fact from one that spreads the words; 0: off",
       &c.search.passage_weight, AtLeast(0)},
      {"search.passage_window_sentences", "",
       "Hybrid: sentences per window of the sentence-window list (search.passage_weight)",
       &c.search.passage_window_sentences, Between(1, 20)},
      {"search.diversity", "",
       "Hybrid: how much a chunk holding question words the chunks above it lack moves up "
       "(0: off)",
       &c.search.diversity, AtLeast(0)},
      {"search.damping",
       "",
       "Graph signal: probability that the walk takes one more step",
       &c.search.damping,
       {0.0, 1.0, true, true, {}}},
      {"search.fact_seed_share", "",
       "Graph signal: seed share of the entities named in the best passages' sentences that match "
       "the question",
       &c.search.fact_seed_share, AtLeast(0)},
      {"search.passage_seed_share", "",
       "Graph signal: seed share of the best vector and BM25 passages",
       &c.search.passage_seed_share, AtLeast(0)},
      {"search.titled_chunk_share", "",
       "Graph signal: of an entity's mass for chunks, the share for the chunks of documents it is "
       "the title of",
       &c.search.titled_chunk_share, Between(0, 1)},
      {"search.chain_links", "",
       "Hybrid: chunks moved up to follow the first when their document is titled by an entity "
       "the first chunk names (the evidence chain of a multi-hop question); 0: off",
       &c.search.chain_links, AtLeast(0)},
      {"search.chain_depth", "",
       "Hybrid: how far down the fused ranking the evidence chain looks (search.chain_links)",
       &c.search.chain_depth, AtLeast(2)},
      {"search.min_name_specificity", "",
       "Graph signal: names in too many chunks (specificity below this, 0-1) do not seed the walk",
       &c.search.min_name_specificity, Between(0, 1)},
      {"search.context_budget_tokens", "",
       "Basic and hybrid search: tokens of passages in the answer prompt",
       &c.search.context_budget_tokens, AtLeast(100)},
      {"server.host", "GRAG_SERVER_HOST",
       "grag serve: address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface)",
       &c.server.host},
      {"server.port", "GRAG_SERVER_PORT",
       "grag serve: TCP port (0: any free port, printed at start)", &c.server.port,
       Between(0, 65535)},
      {"server.api_keys", "GRAG_API_KEYS",
       "grag serve: keys clients send as `Authorization: Bearer KEY` (empty: no auth); better kept "
       "in the environment",
       &c.server.api_keys},
      {"server.max_body_mb", "", "grag serve: largest request body in MiB (larger: 413)",
       &c.server.max_body_mb, AtLeast(1)},
      {"server.request_timeout", "", "grag serve: seconds each write of a reply may take",
       &c.server.request_timeout, Above(0)},
      {"server.read_timeout", "",
       "grag serve: seconds a request's headers, then its body, may take to arrive (slower: 408)",
       &c.server.read_timeout, Above(0)},
      {"server.keep_alive_timeout", "",
       "grag serve: seconds an idle keep-alive connection stays open", &c.server.keep_alive_timeout,
       Above(0)},
      {"server.keep_alive_max", "", "grag serve: requests on one connection before it is closed",
       &c.server.keep_alive_max, AtLeast(1)},
      {"server.max_connections_per_client", "",
       "grag serve: open connections from one client address (more: 503); 0: no cap",
       &c.server.max_connections_per_client, AtLeast(0)},
      {"server.query_models", "",
       "grag serve and grag mcp: models a request may choose to answer it (/v1/query's "
       "\"model\", a chat model grag-METHOD/MODEL, the MCP query tool's \"model\"), on the "
       "query role's server; empty: requests cannot choose",
       &c.server.query_models},
      {"server.cors_origins", "",
       "grag serve: origins browsers may call the API from (empty: no CORS; \"*\": any)",
       &c.server.cors_origins},
      {"server.allowed_hosts", "",
       "grag serve: Host header names accepted besides IP addresses and localhost, e.g. the "
       "server's DNS name behind a proxy (\"*\": any; others get 421)",
       &c.server.allowed_hosts},
      {"server.threads", "",
       "grag serve: requests served at once (idle connections hold no thread)", &c.server.threads,
       AtLeast(2)},
      {"server.workers", "", "grag serve: queries and searches run at once (0: one per CPU core)",
       &c.server.workers, AtLeast(0)},
      {"server.workspaces_dir", "GRAG_WORKSPACES_DIR",
       "grag serve: the folder holding the workspaces, one project folder each (grag workspace "
       "create NAME; /v1/workspaces/NAME/...)",
       &c.server.workspaces_dir},
      {"server.workspace_keys", "GRAG_WORKSPACE_KEYS",
       "grag serve: API keys that open one workspace only, as WORKSPACE:KEY (comma-separated in "
       "the environment); server.api_keys open every workspace and manage them",
       &c.server.workspace_keys},
      {"server.workspace_workers", "",
       "grag serve: questions one workspace answers at once, within server.workers (0: no limit "
       "of its own)",
       &c.server.workspace_workers, AtLeast(0)},
      {"server.max_loaded_workspaces", "",
       "grag serve: workspaces kept loaded (graph and vectors in memory); the least recently "
       "used idle one is unloaded past this, and loaded again when asked",
       &c.server.max_loaded_workspaces, AtLeast(1)},
      {"rerank.base_url", "GRAG_RERANK_BASE_URL",
       "Reranker endpoint (Cohere-style /v1/rerank); empty = llm.base_url", &c.rerank.base_url},
      {"rerank.model", "GRAG_RERANK_MODEL",
       "Reranker model, e.g. BAAI/bge-reranker-v2-m3; empty = no reranking", &c.rerank.model},
      {"rerank.api_key", "GRAG_RERANK_API_KEY", "Reranker API key; empty = the LLM's key",
       &c.rerank.api_key},
      {"rerank.top_n", "", "Fused chunks the reranker reorders", &c.rerank.top_n, AtLeast(1)},
  };
  // The roles' models follow the [llm] settings they default to.
  auto after = std::find_if(all.begin(), all.end(), [](const Setting& s) {
    return std::string_view(s.key) == "llm.max_cost";
  });
  std::vector<Setting> roles = RoleSettings(c);
  all.insert(after == all.end() ? all.end() : after + 1, roles.begin(), roles.end());
  return all;
}

}  // namespace grag::config_internal
