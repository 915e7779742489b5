// The index pipeline: RunIndex runs the stages (stages.h, one file each) in order and keeps the
// run's record; the stages do the work.
#include "grag/indexer.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "grag/log.h"
#include "grag/nlp_extract.h"
#include "grag/prompts.h"

#include "run.h"
#include "stages.h"

namespace grag {
namespace {

// The run's chat model, as every call of the run reaches it.
// - Within the run's budget (llm.max_calls, llm.max_cost): once the calls that reached the model
//   (cache hits are free) or their cost at the configured prices (each role's own where it sets
//   them: llm.<role>.price_*) reach the limit, every further
//   call fails with kResourceExhausted, which stops the run like any model error: what was done is
//   stored and the next run resumes. Calls already in flight finish, so a run may end up to
//   llm.concurrency calls over the limit.
// - Each reply's spend is recorded as it arrives (`on_reply`: Run::RecordSpend), not only with the
//   unit of work it belongs to, so a killed run's record holds what it spent.
class RunChat : public ChatModel {
 public:
  RunChat(ChatModel& inner, const LlmConfig& c, std::function<void()> on_reply)
      : inner_(inner), config_(c), base_(inner.Usage()), on_reply_(std::move(on_reply)) {}

  Result<ChatResponse> Chat(const ChatRequest& request) override {
    const LlmUsage u = inner_.Usage() - base_;
    const int64_t calls = u.calls - u.cache_hits;
    if (config_.max_calls > 0 && calls >= config_.max_calls) {
      return Status(ErrorCode::kResourceExhausted,
                    fmt::format("the run's LLM budget is spent: {} calls made (llm.max_calls = "
                                "{}); raise it, or run again to go on from here",
                                calls, config_.max_calls));
    }
    const double cost = Cost(u);
    if (config_.max_cost > 0 && cost >= config_.max_cost) {
      return Status(ErrorCode::kResourceExhausted,
                    fmt::format("the run's LLM budget is spent: {:.4f} spent (llm.max_cost = "
                                "{}); raise it, or run again to go on from here",
                                cost, config_.max_cost));
    }
    Result<ChatResponse> reply = inner_.Chat(request);
    if (reply.ok() && !reply->cache_hit) {
      std::lock_guard lock(mu_);
      RoleSpend& spent = by_role_[std::string(ChatRoleName(request.role))];
      spent.prompt_tokens += reply->prompt_tokens;
      spent.completion_tokens += reply->completion_tokens;
    }
    on_reply_();
    return reply;
  }
  const std::string& model() const override { return inner_.model(); }
  const std::string& model_for(ChatRole role) const override { return inner_.model_for(role); }
  LlmUsage Usage() const override { return inner_.Usage(); }

  // Tokens of the replies each role's calls got ("extract", ...; "default"), cache hits aside.
  struct RoleSpend {
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
  };
  std::map<std::string, RoleSpend> SpendByRole() const {
    std::lock_guard lock(mu_);
    return by_role_;
  }

 private:
  // What `u` (the run's usage) cost: each role's replies at its prices (LlmConfig::InputPrice),
  // and tokens no reply accounts for (a reply the validator refused) at [llm]'s.
  double Cost(const LlmUsage& u) const {
    std::lock_guard lock(mu_);
    double cost = 0;
    int64_t in = u.prompt_tokens;
    int64_t out = u.completion_tokens;
    for (const auto& [role, spent] : by_role_) {
      cost += static_cast<double>(spent.prompt_tokens) * config_.InputPrice(role) +
              static_cast<double>(spent.completion_tokens) * config_.OutputPrice(role);
      in -= spent.prompt_tokens;
      out -= spent.completion_tokens;
    }
    cost += static_cast<double>(std::max<int64_t>(in, 0)) * config_.price_input_per_million +
            static_cast<double>(std::max<int64_t>(out, 0)) * config_.price_output_per_million;
    return cost / 1e6;
  }

  ChatModel& inner_;
  const LlmConfig& config_;
  const LlmUsage base_;
  const std::function<void()> on_reply_;
  mutable std::mutex mu_;
  std::map<std::string, RoleSpend> by_role_;
};

}  // namespace

Result<std::set<std::string>> PendingChanges(Store& store) {
  std::set<std::string> out;
  GRAG_ASSIGN_OR_RETURN(std::optional<std::string> text, store.GetMeta(kPendingChangesKey));
  if (!text || text->empty()) return out;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return out;
  for (const auto& k : j) {
    if (k.is_string()) out.insert(k.get<std::string>());
  }
  return out;
}

namespace {
constexpr std::string_view kEndpointPrefix = "endpoint:";
}  // namespace

std::map<std::string, int64_t> EndpointRunCounters(const std::vector<EndpointUsage>& endpoints) {
  std::map<std::string, int64_t> out;
  for (const EndpointUsage& e : endpoints) {
    const std::string k = std::string(kEndpointPrefix) + e.role + ":" + e.name + ":";
    out[k + "requests"] = e.requests;
    out[k + "errors"] = e.errors;
    out[k + "benched"] = e.benched;
    out[k + "tokens_in"] = e.prompt_tokens;
    out[k + "tokens_out"] = e.completion_tokens;
    out[k + "latency_ms_sum"] = e.latency_ms_sum;
    out[k + "answered"] = e.answered();
  }
  return out;
}

std::vector<EndpointUsage> EndpointsFromRunCounters(
    const std::map<std::string, int64_t>& counters) {
  std::vector<EndpointUsage> out;
  for (const auto& [key, value] : counters) {
    if (!key.starts_with(kEndpointPrefix)) continue;
    // endpoint:<role>:<name>:<figure>; the name may hold colons (host:port), role and figure not.
    const std::string_view rest = std::string_view(key).substr(kEndpointPrefix.size());
    const size_t role_end = rest.find(':');
    const size_t figure_start = rest.rfind(':');
    if (role_end == std::string_view::npos || figure_start <= role_end) continue;
    const std::string role(rest.substr(0, role_end));
    const std::string name(rest.substr(role_end + 1, figure_start - role_end - 1));
    const std::string_view figure = rest.substr(figure_start + 1);
    auto it = std::find_if(out.begin(), out.end(), [&](const EndpointUsage& e) {
      return e.role == role && e.name == name;
    });
    if (it == out.end()) {
      out.emplace_back();
      it = std::prev(out.end());
      it->role = role;
      it->name = name;
    }
    if (figure == "requests") it->requests = value;
    if (figure == "errors") it->errors = value;
    if (figure == "benched") it->benched = value;
    if (figure == "tokens_in") it->prompt_tokens = value;
    if (figure == "tokens_out") it->completion_tokens = value;
    if (figure == "latency_ms_sum") it->latency_ms_sum = value;
    if (figure == "answered") it->latency_histogram = {value};  // a count without the spread
  }
  return out;
}

std::vector<RoleCost> SpendByRole(const std::map<std::string, int64_t>& counters,
                                  const LlmConfig& llm) {
  auto get = [&counters](const std::string& key) {
    auto it = counters.find(key);
    return it == counters.end() ? int64_t{0} : it->second;
  };
  std::vector<RoleCost> out;
  for (const char* role : {"extract", "summarize", "resolve"}) {
    RoleCost r;
    r.role = role;
    r.calls = role == std::string_view("extract")     ? get("calls_extract") + get("calls_glean")
              : role == std::string_view("summarize") ? get("calls_summarize") + get("calls_report")
                                                      : get("calls_resolve");
    r.prompt_tokens = get(std::string("tokens_in_") + role);
    r.completion_tokens = get(std::string("tokens_out_") + role);
    if (llm.Priced()) {
      r.cost = (static_cast<double>(r.prompt_tokens) * llm.InputPrice(role) +
                static_cast<double>(r.completion_tokens) * llm.OutputPrice(role)) /
               1e6;
    }
    out.push_back(std::move(r));
  }
  return out;
}

ExtractorId ExtractorFor(const IndexContext& context) {
  if (context.chat == nullptr) return {ExtractorKind::kNlp, std::string(kNlpExtractorModel)};
  return {ExtractorKind::kLlm, context.chat->model_for(ChatRole::kExtract)};
}

Status CheckIndexPrompts(const Config& config) {
  std::vector<std::string> broken;
  for (const PromptId id :
       {PromptId::kExtractGraph, PromptId::kResolveEntities, PromptId::kCommunityReport}) {
    Result<std::string> text = LoadPrompt(config.Resolve(config.prompts_dir), id);
    if (!text.ok()) broken.push_back(text.status().message());
  }
  if (broken.empty()) return Status::Ok();
  return Status::InvalidArgument(
      fmt::format("{}; nothing was sent to the model", fmt::join(broken, "; ")));
}

// After a run that completed: its extraction and embedding replies go from the reply cache.
// The extractions and vectors the run stored say what they said, and no resume needs them (an
// extraction's replies were committed with it). Kept, the extraction replies were a tenth of
// the file, and each vector of an embedding model was there again as base64 float32, four times
// the int8 row. A question's vector is asked again after the run (one small call). A failure is
// logged, not the run's.
static void DropStoredReplies(Store& store) {
  for (const std::string& kind :
       {ChatCacheKind(ChatRole::kExtract), std::string(kEmbeddingCacheKind)}) {
    CachePruneOptions drop;
    drop.kind = kind;
    drop.compact = false;  // CompactAfterRun decides
    Result<CachePruneResult> dropped = store.PruneReplyCache(drop);
    if (!dropped.ok()) {
      Log(LogLevel::kWarn, "index",
          "the " + kind + " replies stay in the reply cache: " + dropped.status().ToString());
    } else if (dropped->entries > 0) {
      Log(LogLevel::kDebug, "index",
          fmt::format("{} {} replies dropped from the reply cache (the index holds what they "
                      "said)",
                      dropped->entries, kind));
    }
  }
}

// store.compact after a finished run. The run's work is committed: a compaction that fails
// (a reader holding the file, no room for the copy) is logged, not the run's failure.
static void CompactAfterRun(std::string_view when, Store& store, bool built_from_nothing) {
  if (when == "never") return;
  if (when == "auto" && !built_from_nothing) {
    Result<std::optional<Store::FileSpace>> space = store.GetFileSpace();
    if (!space.ok() || !space->has_value()) return;
    if (!(*space)->compact_requested && (*space)->free_bytes * 5 < (*space)->file_bytes) return;
  }
  const auto start = std::chrono::steady_clock::now();
  Result<std::optional<std::pair<int64_t, int64_t>>> sizes = store.Compact();
  if (!sizes.ok()) {
    Log(LogLevel::kWarn, "index",
        "the index file was not compacted (the run's work is kept): " + sizes.status().ToString());
    return;
  }
  if (!sizes->has_value()) return;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  Log(LogLevel::kInfo, "index",
      fmt::format("index file compacted: {:.1f} -> {:.1f} MB ({:.0f} ms)",
                  static_cast<double>((*sizes)->first) / 1e6,
                  static_cast<double>((*sizes)->second) / 1e6, ms));
}

// RunIndex with the context as given (the budget gate, if any, already in place).
static Result<IndexSummary> RunIndexWith(const Config& config, const IndexRequest& request,
                                         IndexContext& context) {
  if (context.chat != nullptr) GRAG_RETURN_IF_ERROR(CheckIndexPrompts(config));
  Run run(config, context);
  // Every call of the run goes through its gate (RunChat): the budget, and the spend recorded
  // with each reply.
  std::optional<RunChat> gate;
  if (context.chat != nullptr) {
    gate.emplace(*context.chat, config.llm, [&run] { run.RecordSpend(); });
    context.chat = &*gate;
  }
  IndexSummary s;
  Store& store = *context.store;
  GRAG_ASSIGN_OR_RETURN(std::optional<ClusteringRecord> clustered, store.LatestClustering());
  GRAG_ASSIGN_OR_RETURN(s.run_id, store.BeginRun("index"));
  run.SetRunId(s.run_id);
  const ExtractorId extractor = ExtractorFor(context);
  s.no_llm = context.chat == nullptr;
  if (context.embedder != nullptr) s.embedding_model = context.embedder->model();

  struct Stage {
    const char* name;
    std::function<Status()> fn;
  };
  const std::vector<Stage> stages = {
      {"load", [&] { return LoadAndChunk(run, request, extractor, s, s.plan); }},
      {"extract", [&] { return Extract(run, extractor, s); }},
      {"merge", [&] { return Merge(run, extractor, s); }},
      {"communities", [&] { return DetectCommunities(run, s); }},
      {"reports", [&] { return Reports(run, s, request.refresh_reports); }},
      {"embed", [&] { return Embed(run, s); }},
  };
  Status failure;
  for (const auto& stage : stages) {
    if (request.graph_only &&
        (std::string_view(stage.name) == "load" || std::string_view(stage.name) == "extract")) {
      continue;
    }
    (void)store.UpdateRun(s.run_id, stage.name, {});
    const int64_t calls_before = run.ChatCalls();
    Status st = stage.fn();
    // The stage's deferred writes (its models' replies) are committed before the next stage.
    if (Status flushed = store.FlushDeferred(); st.ok()) st = flushed;
    run.FlushUsage();
    const int64_t stage_calls = run.ChatCalls() - calls_before;
    const std::string_view name = stage.name;
    if (name == "extract") {
      s.calls.extract = std::min(stage_calls, s.chunks_extracted + s.chunks_skipped);
      s.calls.glean = stage_calls - s.calls.extract;
    } else if (name == "merge") {
      s.calls.resolve = s.resolution_llm_calls;
      s.calls.summarize = stage_calls - s.calls.resolve;
    } else if (name == "reports") {
      s.calls.report = stage_calls;
    }
    if (!st.ok()) {
      failure = st;
      break;
    }
  }
  s.usage = run.Usage();
  s.elapsed_seconds = run.Elapsed();
  std::map<std::string, int64_t> counters = Run::UsageCounters(s.usage);
  counters["chunks_extracted"] = s.chunks_extracted;
  counters["chunks_skipped"] = s.chunks_skipped;
  counters["chunks_empty"] = s.chunks_empty;
  counters["reports_generated"] = s.reports_generated;
  counters["calls_extract"] = s.calls.extract;
  counters["calls_glean"] = s.calls.glean;
  counters["calls_resolve"] = s.calls.resolve;
  counters["calls_summarize"] = s.calls.summarize;
  counters["calls_report"] = s.calls.report;
  counters["update_run"] = clustered.has_value() ? 1 : 0;  // for estimates (EstimateCalls)
  if (gate) {
    // Tokens by model role, for costs at each role's prices (grag stats, estimates).
    for (const auto& [role, spent] : gate->SpendByRole()) {
      counters["tokens_in_" + role] = spent.prompt_tokens;
      counters["tokens_out_" + role] = spent.completion_tokens;
    }
  }
  (void)store.UpdateRun(s.run_id, "", counters);
  if (!failure.ok()) {
    (void)store.FinishRun(
        s.run_id,
        failure.code() == ErrorCode::kCancelled ? RunStatus::kInterrupted : RunStatus::kFailed,
        failure.message());
    return failure;
  }
  // What a one-off question reads, packed (store.h, query images); without them questions
  // read the tables, slower, so a failure here costs speed, not the run.
  Result<std::vector<std::string>> images = store.RefreshQueryImages();
  if (!images.ok()) {
    Log(LogLevel::kWarn, "index", "query images not built: " + images.status().ToString());
  } else if (!images->empty()) {
    Log(LogLevel::kInfo, "index", fmt::format("query images built: {}", fmt::join(*images, ", ")));
  }
  GRAG_RETURN_IF_ERROR(store.FinishRun(s.run_id, RunStatus::kOk));
  DropStoredReplies(store);
  CompactAfterRun(config.store.compact, store, /*built_from_nothing=*/!clustered.has_value());
  return s;
}

Result<IndexSummary> RunIndex(const Config& config, const IndexRequest& request,
                              IndexContext& context) {
  if (context.store == nullptr) return Status::InvalidArgument("RunIndex needs a store");
  IndexContext run_context = context;  // its chat goes through the run's gate
  return RunIndexWith(config, request, run_context);
}

}  // namespace grag
