// The engine: composition of store, models, prompts and retrieval, and the one entry point for
// every kind of question (see grag/engine.h).
#include "grag/engine.h"

#include "engine_citations.h"
#include "engine_reports.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>

#include "grag/extractive_search.h"
#include "grag/words.h"
#include "grag/export_index.h"
#include "grag/indexer.h"
#include "grag/lazy_library.h"
#include "grag/lexical_embedder.h"
#include "grag/loader.h"
#include "grag/log.h"
#include "grag/models.h"
#include "grag/prompts.h"
#include "grag/question.h"
#include "engine_internal.h"

namespace grag {

std::string_view QueryMethodName(QueryMethod method) {
  switch (method) {
    case QueryMethod::kAuto:
      return "auto";
    case QueryMethod::kGlobal:
      return "global";
    case QueryMethod::kLocal:
      return "local";
    case QueryMethod::kBasic:
      return "basic";
    case QueryMethod::kHybrid:
      return "hybrid";
    case QueryMethod::kDrift:
      return "drift";
    case QueryMethod::kLazy:
      return "lazy";
  }
  return "auto";
}

std::string QueryMethodNames(std::string_view separator, std::string_view prefix) {
  std::string out;
  for (QueryMethod m : kQueryMethods) {
    if (!out.empty()) out += separator;
    out += prefix;
    out += QueryMethodName(m);
  }
  return out;
}

Status CheckParam(std::string_view name, const ParamRange& range, int64_t value) {
  if (range.Contains(value)) return Status::Ok();
  return Status::InvalidArgument(std::string(name) + " must be between " +
                                 std::to_string(range.min) + " and " + std::to_string(range.max) +
                                 ", not " + std::to_string(value));
}

Result<QueryMethod> ParseQueryMethod(std::string_view name) {
  for (QueryMethod m : kQueryMethods) {
    if (name == QueryMethodName(m)) return m;
  }
  if (name == "budgeted") return QueryMethod::kLazy;
  return Status::InvalidArgument("unknown query method \"" + std::string(name) + "\" (" +
                                 QueryMethodNames(", ") + ")");
}

struct Engine::Impl {
  Config config;
  std::unique_ptr<Store> store;
  mutable std::once_flag tokenizer_once;
  mutable const Tokenizer* tokenizer = nullptr;
  std::unique_ptr<ChatModel> chat;
  std::unique_ptr<EmbeddingModel> embedder;
  std::unique_ptr<RerankModel> reranker;
  // Prompts, read once (edited files in prompts_dir win over the defaults).
  std::string map_prompt, reduce_prompt, local_prompt, basic_prompt, route_prompt;
  std::string drift_hyde_prompt, drift_primer_prompt, drift_local_prompt, drift_reduce_prompt;
  std::string lazy_refine_prompt, lazy_relevance_prompt, lazy_claims_prompt;
  // Why the query prompts could not be read: an engine opened for writing still indexes (its
  // prompt is read by the pipeline) and reports this on the first question.
  Status prompts_status;

  // A writable engine's own log file (grag.log beside the index): what runs on its behalf logs
  // there, and no other index's lines do.
  std::shared_ptr<LogFile> log_file;

  bool keep_graph = false;
  // A one-off engine holds back the model client's background load of libcurl until its
  // question has started its own threads (LazyLibrary::PreloadHold): ReleasePreloads.
  std::mutex preload_mu;
  std::optional<LazyLibrary::PreloadHold> preload_hold;
  void ReleasePreloads() {
    std::lock_guard lock(preload_mu);
    preload_hold.reset();
  }
  std::mutex retriever_mu;
  // Chat models made for questions that asked for another query model (QueryRequest::model).
  std::mutex query_models_mu;
  std::map<std::string, std::unique_ptr<ChatModel>> query_models;
  std::unique_ptr<Retriever> retriever;  // guarded by retriever_mu until built
  QuestionReports deferred_reports;      // reports.mode = lazy

  bool lexical() const { return embedder != nullptr && IsLexicalEmbeddingModel(embedder->model()); }
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Open(Config config, const EngineOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  impl->keep_graph = options.keep_graph;
  const Config& c = impl->config;
  // Questions read a replica when one is configured (store.read_url); writes, the primary.
  const bool replica = !options.writable && !c.store.read_url.empty();
  const std::string db = replica ? c.ReadIndexLocation() : c.IndexLocation();
  StoreOptions so;
  so.read_only = replica;  // a hot standby takes no write: its answers are not cached
  if (options.writable) {
    so.writer_lock = options.take_writer_lock;
    so.wait_for_writer = options.wait_for_writer;
    so.on_wait = options.on_wait;
    so.lock_holder = options.lock_holder;
  } else {
    so.create_if_missing = false;
    so.allow_read_only = true;  // read-only media: answers are not cached, that is all
    so.map_reads = true;        // it answers questions: see StoreOptions::map_reads
  }
  auto store = Store::Open(db, so);
  if (!store.ok()) {
    if (store.status().code() == ErrorCode::kNotFound &&
        store.status().message().find("empty file") == std::string::npos) {
      return Status::NotFound("no index at " + c.IndexLabel() + ": run `grag index` first");
    }
    return store.status();
  }
  impl->store = std::move(store).value();
  if (options.writable && options.log_file) {
    // Beside the SQLite file; with PostgreSQL, where that file would be (the project's output).
    const std::string path =
        (std::filesystem::path(c.Resolve(c.store.path)).parent_path() / "grag.log").string();
    auto file = LogFile::Open(path);
    if (file.ok()) {
      impl->log_file = std::move(file).value();
    } else {
      Log(LogLevel::kWarn, "engine", file.status().message() + " (logging to stderr only)");
    }
  }
  // The tokenizer is set up on first use (its patterns compiled, about a millisecond): a search
  // needs none.
  GRAG_RETURN_IF_ERROR(Tokenizer::CheckEncoding(c.chunks.encoding));
  KeyValueCache* cache = &impl->store->ReplyCache();
  // One question (a command): the retriever's loader thread starts before libcurl loads.
  if (!options.writable && !options.keep_graph) impl->preload_hold.emplace();
  GRAG_ASSIGN_OR_RETURN(impl->chat, MakeChatModel(c, cache));
  GRAG_ASSIGN_OR_RETURN(impl->embedder, MakeEmbeddingModel(c, cache));
  GRAG_ASSIGN_OR_RETURN(impl->reranker, MakeRerankModel(c, cache));
  const std::string prompts = c.Resolve(c.prompts_dir);
  impl->prompts_status = [&]() -> Status {
    GRAG_ASSIGN_OR_RETURN(impl->map_prompt, LoadPrompt(prompts, PromptId::kGlobalMap));
    GRAG_ASSIGN_OR_RETURN(impl->reduce_prompt, LoadPrompt(prompts, PromptId::kGlobalReduce));
    GRAG_ASSIGN_OR_RETURN(impl->local_prompt, LoadPrompt(prompts, PromptId::kLocalSearch));
    GRAG_ASSIGN_OR_RETURN(impl->basic_prompt, LoadPrompt(prompts, PromptId::kBasicSearch));
    GRAG_ASSIGN_OR_RETURN(impl->route_prompt, LoadPrompt(prompts, PromptId::kRouteQuestion));
    GRAG_ASSIGN_OR_RETURN(impl->drift_hyde_prompt, LoadPrompt(prompts, PromptId::kDriftHyde));
    GRAG_ASSIGN_OR_RETURN(impl->drift_primer_prompt, LoadPrompt(prompts, PromptId::kDriftPrimer));
    GRAG_ASSIGN_OR_RETURN(impl->drift_local_prompt, LoadPrompt(prompts, PromptId::kDriftLocal));
    GRAG_ASSIGN_OR_RETURN(impl->drift_reduce_prompt, LoadPrompt(prompts, PromptId::kDriftReduce));
    GRAG_ASSIGN_OR_RETURN(impl->lazy_refine_prompt, LoadPrompt(prompts, PromptId::kLazyRefine));
    GRAG_ASSIGN_OR_RETURN(impl->lazy_relevance_prompt,
                          LoadPrompt(prompts, PromptId::kLazyRelevance));
    GRAG_ASSIGN_OR_RETURN(impl->lazy_claims_prompt, LoadPrompt(prompts, PromptId::kLazyClaims));
    return Status::Ok();
  }();
  if (!impl->prompts_status.ok() && !options.writable) return impl->prompts_status;
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const Config& Engine::config() const { return impl_->config; }
Store& Engine::store() { return *impl_->store; }
const Tokenizer& Engine::tokenizer() const {
  std::call_once(impl_->tokenizer_once, [this] {
    impl_->tokenizer = Tokenizer::Get(impl_->config.chunks.encoding).value_or(nullptr);
  });
  return *impl_->tokenizer;  // the encoding was checked at Open
}
ChatModel* Engine::chat() { return impl_->chat.get(); }

Result<ChatModel*> Engine::QueryModel(const std::string& name) {
  ChatModel* configured = chat();
  if (name.empty() || configured == nullptr || name == configured->model_for(ChatRole::kQuery)) {
    if (!name.empty() && configured == nullptr) {
      return Status::InvalidArgument("model \"" + name +
                                     "\" asked for, but no chat model is configured (llm.model)");
    }
    return configured;
  }
  std::lock_guard lock(impl_->query_models_mu);
  std::unique_ptr<ChatModel>& made = impl_->query_models[name];
  if (!made) {
    // The query role's server and key, this model: the other roles keep theirs.
    Config c = impl_->config;
    c.llm.query.model = name;
    GRAG_ASSIGN_OR_RETURN(made, MakeChatModel(c, &impl_->store->ReplyCache()));
  }
  return made.get();
}
EmbeddingModel* Engine::embedder() { return impl_->embedder.get(); }

Result<const Retriever*> Engine::retriever() {
  Result<const Retriever*> out = [this]() -> Result<const Retriever*> {
    std::lock_guard lock(impl_->retriever_mu);
    if (!impl_->retriever) {
      RetrieverOptions ro;
      ro.reranker = impl_->reranker.get();
      ro.load_graph = impl_->keep_graph;
      GRAG_ASSIGN_OR_RETURN(impl_->retriever,
                            Retriever::Open(*impl_->store, impl_->embedder.get(), ro));
    }
    return static_cast<const Retriever*>(impl_->retriever.get());
  }();
  impl_->ReleasePreloads();  // its loader thread has started: libcurl may load now
  return out;
}

Status Engine::Warm() { return retriever().status(); }

LlmUsage Engine::ModelUsage() const {
  LlmUsage u;
  if (impl_->chat) u += impl_->chat->Usage();
  {
    std::lock_guard lock(impl_->query_models_mu);
    for (const auto& [name, model] : impl_->query_models) {
      if (model) u += model->Usage();
    }
  }
  // The built-in embedder spends nothing worth counting; a configured one does.
  if (impl_->embedder && !impl_->lexical()) u += impl_->embedder->Usage();
  return u;
}

// ---------------------------------------------------------------- options from the settings

RetrievalOptions Engine::SearchOptions() const {
  const SearchConfig& s = impl_->config.search;
  RetrievalOptions o;
  o.method = ParseRetrievalMethod(s.method).value_or(RetrievalMethod::kHybrid);
  o.top_k = static_cast<int>(s.top_k);
  o.candidates = static_cast<int>(s.candidates);
  static_cast<RetrievalTuning&>(o) = s;  // the weights, as the settings hold them
  o.similarity_floor = impl_->config.local_search.similarity_floor;
  o.lexical_similarity_floor = impl_->config.local_search.lexical_similarity_floor;
  o.rerank_top_n = static_cast<int>(impl_->config.rerank.top_n);
  return o;
}

GlobalSearchOptions Engine::GlobalOptions() const {
  const Config& c = impl_->config;
  GlobalSearchOptions o;
  o.level = c.global_search.level;
  o.max_question_tokens = c.query.max_question_tokens;
  o.map_batch_tokens = c.global_search.map_batch_tokens;
  o.max_map_calls = static_cast<int>(c.global_search.max_map_calls);
  o.reduce_budget_tokens = c.global_search.reduce_budget_tokens;
  o.map_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(c.global_search.map_timeout_seconds * 1000));
  o.concurrency = static_cast<int>(LlmConcurrency(c, "query"));
  o.map_json_mode = c.llm.json_mode;
  o.map_prompt = impl_->map_prompt;
  o.reduce_prompt = impl_->reduce_prompt;
  return o;
}

LocalSearchOptions Engine::LocalOptions() const {
  const Config& c = impl_->config;
  LocalSearchOptions o;
  o.top_k_entities = static_cast<int>(c.local_search.top_k);
  o.similarity_floor =
      impl_->lexical() ? c.local_search.lexical_similarity_floor : c.local_search.similarity_floor;
  o.context_budget_tokens = c.local_search.context_budget_tokens;
  o.chunk_share = c.local_search.chunk_share;
  o.relationship_share = c.local_search.relationship_share;
  o.report_share = c.local_search.report_share;
  o.max_question_tokens = c.query.max_question_tokens;
  o.prompt = impl_->local_prompt;
  o.retrieval = SearchOptions();
  o.retrieval.top_k = 100;
  return o;
}

PassageSearchOptions Engine::PassageOptions(RetrievalMethod method) const {
  const Config& c = impl_->config;
  PassageSearchOptions o;
  o.retrieval = SearchOptions();
  o.retrieval.method = method;
  o.retrieval.top_k = 50;  // the budget below decides how many are placed
  o.context_budget_tokens = c.search.context_budget_tokens;
  o.max_question_tokens = c.query.max_question_tokens;
  o.prompt = impl_->basic_prompt;
  return o;
}

DriftSearchOptions Engine::DriftOptions() const {
  const DriftConfig& d = impl_->config.drift;
  DriftSearchOptions o;
  o.hyde = d.hyde;
  o.primer_top_k = d.primer_top_k;
  o.primer_folds = d.primer_folds;
  o.primer_fold_tokens = d.primer_fold_tokens;
  o.followups_per_answer = d.followups_per_answer;
  o.depth = d.depth;
  o.breadth = d.breadth;
  o.depth_decay = d.depth_decay;
  o.min_parent_score = d.min_parent_score;
  o.max_calls = d.max_calls;
  o.reduce_budget_tokens = d.reduce_budget_tokens;
  o.reply_max_tokens = static_cast<int>(d.reply_max_tokens);
  o.reduce_reply_max_tokens = static_cast<int>(d.reduce_reply_max_tokens);
  o.concurrency = static_cast<int>(LlmConcurrency(impl_->config, "query"));
  o.local = LocalOptions();
  o.local.context_budget_tokens = d.local_budget_tokens;
  o.local.chunk_share = d.local_chunk_share;
  o.local.relationship_share = d.local_relationship_share;
  o.local.report_share = d.local_report_share;
  o.hyde_prompt = impl_->drift_hyde_prompt;
  o.primer_prompt = impl_->drift_primer_prompt;
  o.local_prompt = impl_->drift_local_prompt;
  o.reduce_prompt = impl_->drift_reduce_prompt;
  return o;
}

namespace {

constexpr std::string_view kDriftNeedsModel =
    "--method drift needs a chat model (set llm.model); without one use --method local or "
    "--method global";

}  // namespace

LazySearchOptions Engine::LazyOptions() const {
  const Config& c = impl_->config;
  const LazyConfig& l = c.lazy;
  LazySearchOptions o;
  o.budget = static_cast<int>(l.budget);
  o.tests_per_call = static_cast<int>(l.tests_per_call);
  o.test_window_tokens = l.test_window_tokens;
  o.relevance_threshold = static_cast<int>(l.relevance_threshold);
  o.max_misses = static_cast<int>(l.max_misses);
  o.community_rank_k = static_cast<int>(l.community_rank_k);
  o.prior_weight = l.prior_weight;
  o.candidate_chunks = static_cast<int>(l.candidate_chunks);
  o.refine = l.refine;
  o.subqueries = static_cast<int>(l.subqueries);
  o.concurrency = static_cast<int>(l.concurrency);
  o.claim_batch_tokens = l.claim_batch_tokens;
  o.max_claim_calls = static_cast<int>(l.max_claim_calls);
  o.reduce_budget_tokens = l.reduce_budget_tokens;
  o.json_mode = c.llm.json_mode;
  o.max_question_tokens = c.query.max_question_tokens;
  o.retrieval = SearchOptions();
  o.refine_prompt = impl_->lazy_refine_prompt;
  o.relevance_prompt = impl_->lazy_relevance_prompt;
  o.claims_prompt = impl_->lazy_claims_prompt;
  o.reduce_prompt = impl_->reduce_prompt;
  return o;
}

// ---------------------------------------------------------------- routing

Result<QueryRoute> Engine::Route(std::string_view question, QueryMethod method) {
  ScopedLogFile log_scope(impl_->log_file);
  GRAG_RETURN_IF_ERROR(impl_->prompts_status);
  GRAG_RETURN_IF_ERROR(CheckQuestion(question, tokenizer(), config().query.max_question_tokens));
  return RouteChecked(question, method, nullptr);
}

Result<QueryRoute> Engine::RouteChecked(std::string_view question, QueryMethod method,
                                        std::optional<GlobalSearchPlan>* global_plan) {
  if (method == QueryMethod::kDrift && chat() == nullptr) {
    return Status::InvalidArgument(std::string(kDriftNeedsModel));
  }
  QueryRoute route;
  if (method != QueryMethod::kAuto) {
    route.method = method;
    // The question's kind by the rules alone (no name lookup: the method is decided).
    route.decision.kind = RouteByRules(question, 0).kind;
    route.decision.reason = "--method " + std::string(QueryMethodName(method)) + " asked for";
  } else {
    GRAG_ASSIGN_OR_RETURN(const Retriever* r, retriever());
    GRAG_ASSIGN_OR_RETURN(std::vector<SeedEntity> named,
                          r->NamedEntities(question, SearchOptions()));
    if (config().query.router == "llm" && chat() != nullptr) {
      GRAG_ASSIGN_OR_RETURN(route.decision,
                            RouteWithModel(*chat(), impl_->route_prompt, question, named.size()));
    } else {
      route.decision = RouteByRules(question, named.size());
    }
    switch (route.decision.kind) {
      case QuestionKind::kGlobal:
        route.method = QueryMethod::kGlobal;
        break;
      case QuestionKind::kMultiHop:
        route.method = QueryMethod::kLocal;
        break;
      case QuestionKind::kLookup:
        route.method = QueryMethod::kHybrid;
        break;
    }
    // A global question on an index whose reports no model wrote: map-reducing extractive
    // digests gives a weak answer, budgeted search reads the text itself. Without a model the
    // extractive global search stays.
    if (route.method == QueryMethod::kGlobal && chat() != nullptr) {
      GRAG_ASSIGN_OR_RETURN(StoreStats stats, store().Stats());
      // reports.mode = lazy: the question writes the reports it reads.
      if (stats.reports_llm == 0 && config().reports.mode != "lazy") {
        route.method = QueryMethod::kLazy;
        route.decision.reason +=
            "; global question on an index without model-written reports: budgeted search";
      }
    }
  }
  // What the choice costs: one call for local and hybrid, the map batches and a reduce for
  // global, lazy's bound; nothing without a model.
  const auto question_tokens = static_cast<int64_t>(tokenizer().Count(question));
  if (chat() != nullptr) {
    switch (route.method) {
      case QueryMethod::kGlobal: {
        auto plan = PlanGlobalSearch(store(), tokenizer(), question, GlobalOptions());
        if (plan.ok()) {
          route.estimated_calls = static_cast<int64_t>(plan->batches.size()) + 1;
          for (const auto& b : plan->batches) route.estimated_tokens += b.prompt_tokens;
          route.estimated_tokens += config().global_search.reduce_budget_tokens / 2;
          // The question goes on to global search: it answers from this plan.
          if (global_plan != nullptr) *global_plan = std::move(plan).value();
        }
        route.max_calls = static_cast<int64_t>(config().global_search.max_map_calls) + 1;
        route.cost_note =
            fmt::format("at most {} calls (map <= {} + reduce 1); {} expected", route.max_calls,
                        config().global_search.max_map_calls, route.estimated_calls);
        if (config().reports.mode == "lazy") {
          route.max_calls += config().reports.lazy_per_question;
          route.cost_note += fmt::format(
              "; reports.mode = lazy: up to {} more to write reports it reads that have none yet",
              config().reports.lazy_per_question);
        }
        break;
      }
      case QueryMethod::kDrift: {
        GRAG_ASSIGN_OR_RETURN(DriftPlan plan, PlanDriftSearch(store(), embedder(), tokenizer(),
                                                              question, DriftOptions()));
        route.estimated_calls = plan.max_calls;
        route.max_calls = plan.max_calls;
        route.estimated_tokens = plan.estimated_tokens;
        route.cost_note = plan.cost_note;
        break;
      }
      case QueryMethod::kLazy: {
        const LazySearchOptions o = LazyOptions();
        GRAG_ASSIGN_OR_RETURN(LazyPlan plan, PlanLazySearch(store(), o));
        route.estimated_calls = plan.expected_calls;
        route.max_calls = plan.max_calls;
        route.cost_note = plan.cost_note;
        // Relevance prompts: a few passages each; claims: their batches; the reduce: half.
        const int64_t relevance = route.estimated_calls - (o.refine ? 1 : 0) - 2;
        route.estimated_tokens =
            (o.refine ? 200 + question_tokens : 0) +
            std::max<int64_t>(relevance, 0) *
                (o.tests_per_call * o.test_window_tokens + 200 + question_tokens) +
            o.claim_batch_tokens + o.reduce_budget_tokens / 2;
        break;
      }
      case QueryMethod::kLocal:
        route.estimated_calls = route.max_calls = 1;
        route.estimated_tokens = config().local_search.context_budget_tokens + question_tokens;
        route.cost_note = "1 call";
        break;
      default:
        route.estimated_calls = route.max_calls = 1;
        route.estimated_tokens = config().search.context_budget_tokens + question_tokens;
        route.cost_note = "1 call";
        break;
    }
  } else {
    route.cost_note = "no model call (extractive answer)";
  }
  Log(LogLevel::kDebug, "router",
      fmt::format("{} -> {} ({}{}); about {} LLM calls, {} tokens",
                  QuestionKindName(route.decision.kind), QueryMethodName(route.method),
                  route.decision.reason, route.decision.by_llm ? ", by the model" : "",
                  route.estimated_calls, route.estimated_tokens));
  return route;
}

// ---------------------------------------------------------------- questions

Result<QueryResult> Engine::Query(const QueryRequest& request) {
  ScopedLogFile log_scope(impl_->log_file);
  GRAG_RETURN_IF_ERROR(impl_->prompts_status);
  GRAG_RETURN_IF_ERROR(
      CheckQuestion(request.question, tokenizer(), config().query.max_question_tokens));
  if (request.top_k) GRAG_RETURN_IF_ERROR(CheckParam("--k", kTopKRange, *request.top_k));
  if (request.level) GRAG_RETURN_IF_ERROR(CheckParam("--level", kLevelRange, *request.level));
  if (request.budget) GRAG_RETURN_IF_ERROR(CheckParam("--budget", kBudgetRange, *request.budget));
  QueryResult result;
  // reports.mode = lazy: a plan made before other questions wrote reports is made again.
  const int64_t reports_seen = impl_->deferred_reports.Written();
  result.method = request.method;
  std::optional<GlobalSearchPlan> global_plan;  // the router's, when it routed to global
  // A community level only means something to global search: asking for one picks it.
  if (request.method == QueryMethod::kAuto && request.level) result.method = QueryMethod::kGlobal;
  if (result.method == QueryMethod::kAuto) {
    // Checked above: routed, and (global) planned, once.
    GRAG_ASSIGN_OR_RETURN(QueryRoute route,
                          RouteChecked(request.question, QueryMethod::kAuto, &global_plan));
    result.method = route.method;
    result.route = std::move(route);
  }
  // Global search starts no thread of its own: the model's library may load at once.
  if (result.method == QueryMethod::kGlobal) impl_->ReleasePreloads();
  GRAG_ASSIGN_OR_RETURN(ChatModel * model, QueryModel(request.model));
  result.llm = model != nullptr;
  std::optional<CancellableChat> cancellable;
  if (model != nullptr && request.cancel != nullptr)
    model = &cancellable.emplace(*model, *request.cancel);
  auto cancelled = [&]() -> Status {
    return request.cancel != nullptr && request.cancel->load()
               ? Status::Cancelled("the question was cancelled")
               : Status::Ok();
  };
  GRAG_RETURN_IF_ERROR(cancelled());
  switch (result.method) {
    case QueryMethod::kGlobal: {
      GlobalSearchOptions o = GlobalOptions();
      if (request.level) {
        GRAG_ASSIGN_OR_RETURN(StoreStats stats, store().Stats());
        if (!stats.communities_per_level.empty()) {
          const int64_t deepest = stats.communities_per_level.rbegin()->first;
          if (*request.level < 0 || *request.level > deepest) {
            return Status::InvalidArgument(
                "--level " + std::to_string(*request.level) +
                " is out of range: this index has community levels 0 to " +
                std::to_string(deepest));
          }
        }
        o.level = *request.level;
      }
      o.on_answer_delta = request.on_answer_delta;
      GlobalSearchStats written;
      if (model != nullptr && impl_->chat != nullptr && config().reports.mode == "lazy") {
        GRAG_RETURN_IF_ERROR(WriteQuestionReports(
            config(), store(), *impl_->chat, impl_->embedder.get(), tokenizer(), request.question,
            o, request.cancel, impl_->deferred_reports, reports_seen, global_plan, written));
      }
      auto r = model != nullptr ? GlobalSearch(store(), *model, *model, tokenizer(),
                                               request.question, o, std::move(global_plan))
                                : ExtractiveGlobalSearch(store(), tokenizer(), request.question, o);
      GRAG_RETURN_IF_ERROR(cancelled());
      if (!r.ok()) return r.status();
      r->stats.reports_written = written.reports_written;
      r->stats.report_calls = written.report_calls;
      r->stats.report_tokens_in = written.report_tokens_in;
      r->stats.report_tokens_out = written.report_tokens_out;
      r->stats.reports_pending = written.reports_pending;
      result.answer = r->answer;
      result.global = std::move(r).value();
      break;
    }
    case QueryMethod::kLocal: {
      LocalSearchOptions o = LocalOptions();
      if (request.top_k) o.top_k_entities = static_cast<int>(*request.top_k);
      o.on_answer_delta = request.on_answer_delta;
      GRAG_ASSIGN_OR_RETURN(const Retriever* r, retriever());
      auto local = model != nullptr ? LocalSearch(store(), *model, embedder(), tokenizer(),
                                                  request.question, o, nullptr, r)
                                    : ExtractiveLocalSearch(store(), embedder(), tokenizer(),
                                                            request.question, o, {}, nullptr, r);
      GRAG_RETURN_IF_ERROR(cancelled());
      if (!local.ok()) return local.status();
      result.answer = local->answer;
      result.local = std::move(local).value();
      break;
    }
    case QueryMethod::kBasic:
    case QueryMethod::kHybrid: {
      PassageSearchOptions o =
          PassageOptions(result.method == QueryMethod::kBasic ? RetrievalMethod::kVector
                                                              : RetrievalMethod::kHybrid);
      if (request.top_k) o.retrieval.top_k = static_cast<int>(*request.top_k);
      o.on_answer_delta = request.on_answer_delta;
      GRAG_ASSIGN_OR_RETURN(const Retriever* r, retriever());
      auto p = PassageSearch(store(), *r, model, tokenizer(), request.question, o);
      GRAG_RETURN_IF_ERROR(cancelled());
      if (!p.ok()) return p.status();
      result.answer = p->answer;
      result.passages = std::move(p).value();
      break;
    }
    case QueryMethod::kDrift: {
      if (model == nullptr) return Status::InvalidArgument(std::string(kDriftNeedsModel));
      DriftSearchOptions o = DriftOptions();
      o.on_answer_delta = request.on_answer_delta;
      GRAG_ASSIGN_OR_RETURN(const Retriever* r, retriever());
      auto d = DriftSearch(store(), *model, embedder(), tokenizer(), request.question, o, r);
      GRAG_RETURN_IF_ERROR(cancelled());
      if (!d.ok()) return d.status();
      result.answer = d->answer;
      result.drift = std::move(d).value();
      break;
    }
    case QueryMethod::kLazy: {
      if (model == nullptr) {
        return Status::InvalidArgument(
            "--method lazy tests passages with a model; none is configured (set llm.model). "
            "Without one, --method global gives an extractive digest");
      }
      LazySearchOptions o = LazyOptions();
      if (request.budget) o.budget = static_cast<int>(*request.budget);
      o.on_answer_delta = request.on_answer_delta;
      GRAG_ASSIGN_OR_RETURN(const Retriever* r, retriever());
      auto lazy = LazySearch(store(), *r, *model, tokenizer(), request.question, o);
      GRAG_RETURN_IF_ERROR(cancelled());
      if (!lazy.ok()) return lazy.status();
      result.answer = lazy->answer;
      result.lazy = std::move(lazy).value();
      break;
    }
    case QueryMethod::kAuto:
      return Status::Internal("the router chose no method");
  }
  // Down to the character: no model call, a few reads. A failure costs the passages only.
  SpanOptions spans;
  spans.max_spans = static_cast<int>(config().citations.max_spans);
  spans.min_overlap = config().citations.min_overlap;
  auto cited = LocateCitations(store(), spans, result);
  if (cited.ok()) {
    result.source_citations = std::move(cited).value();
  } else {
    Log(LogLevel::kWarn, "query", "citations: " + cited.status().ToString());
  }
  return result;
}

Result<RetrievalResult> Engine::Search(const SearchRequest& request) {
  ScopedLogFile log_scope(impl_->log_file);
  const int64_t max_tokens = config().query.max_question_tokens;
  GRAG_RETURN_IF_ERROR(QuestionNeedsCounting(request.question, max_tokens)
                           ? CheckQuestion(request.question, tokenizer(), max_tokens)
                           : CheckQuestionHasWords(request.question));
  RetrievalOptions o = SearchOptions();
  if (request.method) o.method = *request.method;
  if (request.top_k) {
    GRAG_RETURN_IF_ERROR(CheckParam("--k", kTopKRange, *request.top_k));
    o.top_k = static_cast<int>(*request.top_k);
  }
  GRAG_ASSIGN_OR_RETURN(const Retriever* r, retriever());
  return r->Retrieve(request.question, o);
}

// ---------------------------------------------------------------- the index

Result<IndexSummary> Engine::Index(const IndexRequest& request, const IndexCallbacks& callbacks) {
  ScopedLogFile log_scope(impl_->log_file);
  IndexContext ctx;
  ctx.store = impl_->store.get();
  ctx.chat = impl_->chat.get();
  ctx.embedder = impl_->embedder.get();
  ctx.on_progress = callbacks.on_progress;
  ctx.on_plan = callbacks.on_plan;
  ctx.cancel = callbacks.cancel;
  Result<IndexSummary> summary = RunIndex(impl_->config, request, ctx);
  // The graph may have changed: a kept retriever would answer from the old one.
  std::lock_guard lock(impl_->retriever_mu);
  impl_->retriever.reset();
  return summary;
}

Result<WorkerSummary> Engine::Work(const WorkerOptions& options) {
  ScopedLogFile log_scope(impl_->log_file);
  IndexContext ctx;
  ctx.store = impl_->store.get();
  ctx.chat = impl_->chat.get();
  ctx.cancel = options.cancel;
  return RunExtractionWorker(impl_->config, ctx, options);
}

Result<IndexPlan> Engine::Plan(const IndexRequest& request) {
  ScopedLogFile log_scope(impl_->log_file);
  IndexContext ctx;
  ctx.store = impl_->store.get();
  ctx.chat = impl_->chat.get();
  ctx.embedder = impl_->embedder.get();
  return PlanIndex(impl_->config, request, ctx);
}

Result<IndexStats> Engine::Stats(int64_t top_entities) {
  ScopedLogFile log_scope(impl_->log_file);
  Store& store = *impl_->store;
  IndexStats out;
  GRAG_ASSIGN_OR_RETURN(out.store, store.Stats());
  GRAG_ASSIGN_OR_RETURN(out.spent, store.TotalRunCounters());
  out.endpoints = EndpointsFromRunCounters(out.spent);
  out.by_role = SpendByRole(out.spent, impl_->config.llm);
  GRAG_ASSIGN_OR_RETURN(out.top_entities, store.ListEntities(top_entities));
  for (EmbeddingOwner owner :
       {EmbeddingOwner::kEntity, EmbeddingOwner::kChunk, EmbeddingOwner::kReport}) {
    GRAG_ASSIGN_OR_RETURN(std::optional<EmbeddingSpace> space, store.GetEmbeddingSpace(owner));
    if (space) out.embeddings.emplace_back(std::string(EmbeddingOwnerName(owner)), *space);
  }
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityAlias> aliases, store.ListAliases());
  GRAG_ASSIGN_OR_RETURN(out.work, store.GetWorkState());
  out.resolved_names = static_cast<int64_t>(aliases.size());
  for (const auto& a : aliases) {
    if (a.name_key == a.canonical_key) continue;
    ++out.merged_by_method[a.method.empty() ? "other" : a.method];
    ++out.merged_names;
  }
  return out;
}

Result<std::string> Engine::IndexVersion() {
  // The runs table records every index run (add and remove included); the one running now, if
  // any, is left out: its writes are not finished.
  GRAG_ASSIGN_OR_RETURN(std::vector<RunRecord> runs, impl_->store->ListRuns(4));
  for (const auto& run : runs) {
    if (run.status == RunStatus::kRunning && run.finished_at.empty()) continue;
    return std::to_string(run.id) + "@" + run.finished_at;
  }
  return std::string();
}

Result<std::vector<DocumentInfo>> Engine::Documents() { return impl_->store->ListDocuments(); }

Result<ExportSummary> Engine::Export(const ExportOptions& options) {
  ScopedLogFile log_scope(impl_->log_file);
  return ExportIndex(*impl_->store, options);
}

Result<SqlRows> Engine::Sql(std::string_view sql, int64_t max_rows,
                            std::chrono::milliseconds time_limit) {
  return impl_->store->RunReadOnlySql(sql, max_rows, time_limit);
}

// ---------------------------------------------------------------- entity resolution

namespace {

bool NameHolds(const std::string& needle, std::string_view name) {
  return needle.empty() || NormalizeEntityName(name).find(needle) != std::string::npos;
}

}  // namespace

Result<std::vector<EntityListing>> Engine::Entities(std::string_view search) {
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityRecord> entities, impl_->store->ListEntities());
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityAlias> aliases, impl_->store->ListAliases());
  std::map<std::string, std::vector<const EntityAlias*>> names;  // by entity key
  for (const auto& a : aliases) names[a.canonical_key].push_back(&a);
  const std::string needle = NormalizeEntityName(search);
  std::vector<EntityListing> out;
  for (auto& e : entities) {
    EntityListing l;
    bool hit = NameHolds(needle, e.name);
    if (auto it = names.find(e.name_key); it != names.end()) {
      for (const EntityAlias* a : it->second) {
        if (a->name_key == e.name_key) continue;
        l.aliases.push_back(a->name);
        hit = hit || NameHolds(needle, a->name);
      }
    }
    if (!hit) continue;
    l.entity = std::move(e);
    out.push_back(std::move(l));
  }
  return out;
}

Result<AliasListing> Engine::Aliases(std::string_view search) {
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityAlias> aliases, impl_->store->ListAliases());
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityOverride> overrides, impl_->store->ListEntityOverrides());
  std::map<std::string, std::string> name_of;
  for (const auto& a : aliases) name_of[a.name_key] = a.name;
  auto display = [&](const std::string& key) {
    auto it = name_of.find(key);
    return it == name_of.end() ? key : it->second;
  };
  const std::string needle = NormalizeEntityName(search);
  AliasListing out;
  out.empty_index = aliases.empty();
  for (const auto& a : aliases) {
    if (a.name_key == a.canonical_key) continue;
    const std::string entity = display(a.canonical_key);
    if (!NameHolds(needle, a.name) && !NameHolds(needle, entity)) continue;
    out.aliases.push_back({a.name, entity, a.method, a.score, a.reason});
  }
  for (const auto& o : overrides) {
    const std::string a = display(o.key_a);
    const std::string b = display(o.key_b);
    if (!NameHolds(needle, a) && !NameHolds(needle, b)) continue;
    out.overrides.push_back({a, b, o.merge, o.created_at});
  }
  return out;
}

Result<CachePruneResult> Engine::PruneCache(const CachePruneOptions& options) {
  ScopedLogFile log_scope(impl_->log_file);
  GRAG_ASSIGN_OR_RETURN(CachePruneResult r, impl_->store->PruneReplyCache(options));
  if (!options.dry_run) {
    Log(LogLevel::kInfo, "cache",
        "pruned " + std::to_string(r.entries) + " reply cache entries written before " +
            (r.before.empty() ? std::string("(no cut-off)") : r.before) + "; file " +
            std::to_string(r.file_bytes_before) + " -> " + std::to_string(r.file_bytes_after) +
            " bytes");
  }
  return r;
}

Result<std::string> CacheCutoff(std::string_view older_than,
                                std::chrono::system_clock::time_point now) {
  const auto bad = [&] {
    return Status::InvalidArgument(
        "--older-than takes a count and a unit (m, h, d or w), e.g. "
        "30d; not \"" +
        std::string(older_than) + "\"");
  };
  if (older_than.size() < 2) return bad();
  int64_t count = 0;
  for (char c : older_than.substr(0, older_than.size() - 1)) {
    if (c < '0' || c > '9' || count > 1'000'000) return bad();
    count = count * 10 + (c - '0');
  }
  int64_t minutes = 0;
  switch (older_than.back()) {
    case 'm':
      minutes = count;
      break;
    case 'h':
      minutes = count * 60;
      break;
    case 'd':
      minutes = count * 60 * 24;
      break;
    case 'w':
      minutes = count * 60 * 24 * 7;
      break;
    default:
      return bad();
  }
  const auto cut =
      std::chrono::floor<std::chrono::milliseconds>(now - std::chrono::minutes(minutes));
  const std::time_t t = std::chrono::system_clock::to_time_t(cut);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
  const auto ms = (cut.time_since_epoch() % std::chrono::seconds(1)).count();
  char millis[8];
  std::snprintf(millis, sizeof millis, ".%03dZ", static_cast<int>(ms < 0 ? ms + 1000 : ms));
  return std::string(text) + millis;
}

Result<bool> Engine::MergeEntities(std::string_view a, std::string_view b) {
  ScopedLogFile log_scope(impl_->log_file);
  return RecordEntityMerge(*impl_->store, a, b);
}

Result<int64_t> Engine::SplitEntity(std::string_view entity, std::string_view alias) {
  ScopedLogFile log_scope(impl_->log_file);
  return RecordEntitySplit(*impl_->store, entity, alias);
}

// ---------------------------------------------------------------- reading the graph

namespace {

EntityRef RefOf(const EntityRecord& e) { return {e.id, e.name, e.type}; }

}  // namespace

Result<std::optional<EntityDetail>> Engine::GetEntity(int64_t id, int64_t max_neighbours,
                                                      int64_t max_chunks) {
  Store& store = *impl_->store;
  GRAG_ASSIGN_OR_RETURN(std::optional<EntityRecord> entity, store.GetEntity(id));
  if (!entity) return std::optional<EntityDetail>();
  EntityDetail out;
  out.entity = std::move(*entity);
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityAlias> aliases, store.ListAliases());
  for (const auto& a : aliases) {
    if (a.canonical_key == out.entity.name_key && a.name_key != a.canonical_key) {
      out.aliases.push_back(a.name);
    }
  }
  GRAG_ASSIGN_OR_RETURN(std::vector<RelationshipRecord> rels, store.ListRelationshipsOf(id));
  std::stable_sort(rels.begin(), rels.end(),
                   [](const auto& a, const auto& b) { return a.weight > b.weight; });
  out.neighbours_total = static_cast<int64_t>(rels.size());
  for (auto& r : rels) {
    if (max_neighbours >= 0 && static_cast<int64_t>(out.neighbours.size()) >= max_neighbours) break;
    const int64_t other = r.source_id == id ? r.target_id : r.source_id;
    GRAG_ASSIGN_OR_RETURN(std::optional<EntityRecord> o, store.GetEntity(other));
    if (!o) continue;
    out.neighbours.push_back({RefOf(*o), std::move(r)});
  }
  GRAG_ASSIGN_OR_RETURN(std::vector<int64_t> community_ids, store.CommunitiesOfEntity(id));
  if (!community_ids.empty()) {
    GRAG_ASSIGN_OR_RETURN(std::vector<CommunityRecord> all, store.ListCommunities());
    for (auto& c : all) {
      if (std::find(community_ids.begin(), community_ids.end(), c.id) == community_ids.end())
        continue;
      c.entity_ids.clear();
      out.communities.push_back(std::move(c));
    }
    std::stable_sort(out.communities.begin(), out.communities.end(),
                     [](const auto& a, const auto& b) { return a.level < b.level; });
  }
  GRAG_ASSIGN_OR_RETURN(std::vector<std::string> chunk_ids, store.GetEntityChunks(id));
  out.chunks_total = static_cast<int64_t>(chunk_ids.size());
  for (const auto& cid : chunk_ids) {
    if (max_chunks >= 0 && static_cast<int64_t>(out.chunks.size()) >= max_chunks) break;
    GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk, store.GetChunk(cid));
    if (chunk) out.chunks.push_back(std::move(*chunk));
  }
  return std::optional<EntityDetail>(std::move(out));
}

Result<std::optional<int64_t>> Engine::FindEntity(std::string_view name) {
  const std::string key = NormalizeEntityName(name);
  if (key.empty()) return std::optional<int64_t>();
  GRAG_ASSIGN_OR_RETURN(std::optional<EntityRecord> e, impl_->store->GetEntityByKey(key));
  if (!e) return std::optional<int64_t>();
  return std::optional<int64_t>(e->id);
}

Result<std::vector<RelationshipInfo>> Engine::Relationships(std::optional<int64_t> entity_id,
                                                            int64_t limit) {
  Store& store = *impl_->store;
  std::vector<RelationshipRecord> rels;
  if (entity_id) {
    GRAG_ASSIGN_OR_RETURN(rels, store.ListRelationshipsOf(*entity_id));
  } else {
    GRAG_ASSIGN_OR_RETURN(rels, store.ListRelationships());
  }
  std::stable_sort(rels.begin(), rels.end(),
                   [](const auto& a, const auto& b) { return a.weight > b.weight; });
  if (limit >= 0 && static_cast<int64_t>(rels.size()) > limit)
    rels.resize(static_cast<size_t>(limit));
  std::map<int64_t, EntityRef> refs;
  auto ref = [&](int64_t id) -> Result<EntityRef> {
    if (auto it = refs.find(id); it != refs.end()) return it->second;
    GRAG_ASSIGN_OR_RETURN(std::optional<EntityRecord> e, store.GetEntity(id));
    EntityRef r = e ? RefOf(*e) : EntityRef{id, "", ""};
    refs.emplace(id, r);
    return r;
  };
  std::vector<RelationshipInfo> out;
  out.reserve(rels.size());
  for (auto& r : rels) {
    RelationshipInfo info;
    GRAG_ASSIGN_OR_RETURN(info.source, ref(r.source_id));
    GRAG_ASSIGN_OR_RETURN(info.target, ref(r.target_id));
    info.relationship = std::move(r);
    out.push_back(std::move(info));
  }
  return out;
}

Result<std::vector<CommunityInfo>> Engine::Communities(std::optional<int64_t> level) {
  Store& store = *impl_->store;
  GRAG_ASSIGN_OR_RETURN(std::vector<CommunityRecord> communities, store.ListCommunities(level));
  GRAG_ASSIGN_OR_RETURN(std::vector<ReportRecord> reports, store.ListReports(level));
  std::map<int64_t, ReportRecord*> by_id;
  for (auto& r : reports) by_id[r.community_id] = &r;
  std::vector<CommunityInfo> out;
  out.reserve(communities.size());
  for (auto& c : communities) {
    CommunityInfo info;
    if (auto it = by_id.find(c.id); it != by_id.end()) info.report = std::move(*it->second);
    c.entity_ids.clear();
    info.community = std::move(c);
    out.push_back(std::move(info));
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.community.level != b.community.level ? a.community.level < b.community.level
                                                  : a.community.id < b.community.id;
  });
  return out;
}

Result<std::optional<CommunityDetail>> Engine::GetCommunity(int64_t id) {
  Store& store = *impl_->store;
  GRAG_ASSIGN_OR_RETURN(std::vector<CommunityRecord> all, store.ListCommunities());
  CommunityDetail out;
  bool found = false;
  for (auto& c : all) {
    if (c.parent_id && *c.parent_id == id) out.children.push_back(c.id);
    if (c.id == id) {
      out.info.community = std::move(c);
      found = true;
    }
  }
  if (!found) return std::optional<CommunityDetail>();
  GRAG_ASSIGN_OR_RETURN(out.info.report, store.GetReport(id));
  std::vector<EntityRecord> members;
  for (int64_t member : out.info.community.entity_ids) {
    GRAG_ASSIGN_OR_RETURN(std::optional<EntityRecord> e, store.GetEntity(member));
    if (e) members.push_back(std::move(*e));
  }
  // Highest degree first: the members a reader should see first.
  std::stable_sort(members.begin(), members.end(),
                   [](const auto& a, const auto& b) { return a.degree > b.degree; });
  for (const auto& e : members) out.members.push_back(RefOf(e));
  std::sort(out.children.begin(), out.children.end());
  return std::optional<CommunityDetail>(std::move(out));
}

Result<std::optional<ChunkRecord>> Engine::GetChunk(std::string_view id) {
  return impl_->store->GetChunk(id);
}

// A document's line of the documents list (title, path, chunk count, ...); empty when gone.
static Result<DocumentInfo> ListedDocument(Store& store, std::string_view id) {
  GRAG_ASSIGN_OR_RETURN(std::vector<DocumentInfo> docs, store.ListDocuments());
  for (DocumentInfo& d : docs) {
    if (d.id == id) return std::move(d);
  }
  return DocumentInfo{};
}

Result<std::optional<DocumentDetail>> Engine::GetDocument(std::string_view id) {
  Store& store = *impl_->store;
  GRAG_ASSIGN_OR_RETURN(std::optional<grag::Document> doc, store.GetDocument(id));
  if (!doc) return std::optional<DocumentDetail>();
  DocumentDetail out;
  GRAG_ASSIGN_OR_RETURN(out.info, ListedDocument(store, id));
  out.text = std::move(doc->text);
  GRAG_ASSIGN_OR_RETURN(out.chunks, store.ListChunks(id));
  return std::optional<DocumentDetail>(std::move(out));
}

std::string_view SourceFileStateName(SourceFileState s) {
  switch (s) {
    case SourceFileState::kUnchanged:
      return "unchanged";
    case SourceFileState::kChanged:
      return "changed";
    case SourceFileState::kMissing:
      return "missing";
  }
  return "unchanged";
}

Result<std::optional<DocumentText>> Engine::GetDocumentText(std::string_view id) {
  Store& store = *impl_->store;
  GRAG_ASSIGN_OR_RETURN(std::optional<grag::Document> doc, store.GetDocument(id));
  if (!doc) return std::optional<DocumentText>();
  DocumentText out;
  GRAG_ASSIGN_OR_RETURN(out.info, ListedDocument(store, id));
  out.file_path = ResolveSourcePath(doc->source_path, impl_->config.root);
  out.text = std::move(doc->text);
  out.file = SourceFileState::kMissing;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(std::filesystem::u8path(out.file_path), ec)) {
    return std::optional<DocumentText>(std::move(out));
  }
  // Read as indexing reads it (ids relative to the input folder, the same record fields), so
  // the text compared is the one the offsets were taken from.
  Result<LoadResult> loaded = LoadDocuments({out.file_path}, LoadOptionsFor(impl_->config));
  if (!loaded.ok()) return std::optional<DocumentText>(std::move(out));  // unreadable: gone
  for (grag::Document& d : loaded->documents) {
    if (d.id != id) continue;
    if (d.content_hash == doc->content_hash) {
      out.file = SourceFileState::kUnchanged;
      out.text = std::move(d.text);
    } else {
      out.file = SourceFileState::kChanged;
    }
  }
  return std::optional<DocumentText>(std::move(out));
}

Result<GraphView> Engine::Graph(const GraphViewRequest& request) {
  Store& store = *impl_->store;
  GraphView out;
  GRAG_ASSIGN_OR_RETURN(std::vector<CommunityRecord> communities, store.ListCommunities());
  for (const auto& c : communities) {
    if (std::find(out.levels.begin(), out.levels.end(), c.level) == out.levels.end())
      out.levels.push_back(c.level);
  }
  std::sort(out.levels.begin(), out.levels.end());
  out.level = request.level.value_or(0);
  if (!out.levels.empty() &&
      std::find(out.levels.begin(), out.levels.end(), out.level) == out.levels.end()) {
    return Status::InvalidArgument(
        fmt::format("the index has no community level {} (levels {} to {})", out.level,
                    out.levels.front(), out.levels.back()));
  }
  std::map<int64_t, int64_t> community_of;  // entity -> its community at the level
  for (const auto& c : communities) {
    if (c.level != out.level) continue;
    for (int64_t e : c.entity_ids) community_of[e] = c.id;
  }
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityRecord> entities, store.ListEntities());  // by degree
  out.entities_total = static_cast<int64_t>(entities.size());
  std::map<int64_t, const EntityRecord*> by_id;
  for (const auto& e : entities) by_id[e.id] = &e;
  const size_t limit = static_cast<size_t>(std::max<int64_t>(0, request.limit));
  std::vector<int64_t> chosen;
  if (request.around) {
    auto it = by_id.find(*request.around);
    if (it == by_id.end()) return Status::NotFound(fmt::format("no entity {}", *request.around));
    chosen.push_back(*request.around);
    GRAG_ASSIGN_OR_RETURN(std::vector<RelationshipRecord> rels,
                          store.ListRelationshipsOf(*request.around));
    std::stable_sort(rels.begin(), rels.end(),
                     [](const auto& a, const auto& b) { return a.weight > b.weight; });
    for (const auto& r : rels) {
      if (chosen.size() > limit) break;
      const int64_t other = r.source_id == *request.around ? r.target_id : r.source_id;
      if (by_id.count(other)) chosen.push_back(other);
    }
  } else {
    for (size_t i = 0; i < entities.size() && i < limit; ++i) chosen.push_back(entities[i].id);
  }
  std::set<int64_t> in_view(chosen.begin(), chosen.end());
  for (int64_t id : chosen) {
    const EntityRecord& e = *by_id[id];
    GraphView::Node node{RefOf(e), e.degree, std::nullopt};
    if (auto c = community_of.find(id); c != community_of.end()) node.community = c->second;
    out.nodes.push_back(std::move(node));
  }
  int64_t degrees = 0;
  for (const auto& e : entities) degrees += e.degree;
  out.relationships_total = degrees / 2;  // each relationship touches two entities
  // A small view of a large graph reads the relationships of its nodes only (an indexed query
  // each); a large view reads them all at once.
  std::set<int64_t> seen;
  auto keep = [&](const RelationshipRecord& r) {
    if (in_view.count(r.source_id) && in_view.count(r.target_id) && seen.insert(r.id).second)
      out.edges.push_back({r.id, r.source_id, r.target_id, r.weight});
  };
  if (chosen.size() * 8 < entities.size()) {
    for (int64_t id : chosen) {
      GRAG_ASSIGN_OR_RETURN(std::vector<RelationshipRecord> rels, store.ListRelationshipsOf(id));
      for (const auto& r : rels) keep(r);
    }
  } else {
    GRAG_ASSIGN_OR_RETURN(std::vector<RelationshipRecord> rels, store.ListRelationships());
    for (const auto& r : rels) keep(r);
  }
  return out;
}

// ---------------------------------------------------------------- grag check

Result<IntegrityReport> CheckIndex(const Config& config, int max_per_check) {
  StoreOptions so;
  so.create_if_missing = false;
  so.allow_read_only = true;  // read-only media: every check but the FTS one
  so.verify = false;          // the full check below is the point
  auto store = Store::Open(config.IndexLocation(), so);
  if (!store.ok()) {
    if (store.status().code() != ErrorCode::kCorruption) return store.status();
    IntegrityReport report;
    report.checks_run.push_back("open");
    report.problems.push_back({"open", store.status().message()});
    return report;
  }
  return (*store)->Check(max_per_check);
}

}  // namespace grag
