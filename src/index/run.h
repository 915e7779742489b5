// The state one index run shares across its stages (src/index/stage_*.cpp): the context, the
// clock, progress reporting and the run's record in the store.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "grag/indexer.h"
#include "grag/lexical_embedder.h"
#include "grag/store.h"

namespace grag {

// Shared state of one run: the context, the clock and the progress reporting.
class Run {
 public:
  Run(const Config& config, IndexContext& ctx)
      : config_(config),
        ctx_(ctx),
        start_(std::chrono::steady_clock::now()),
        chat_base_(ctx.chat ? ctx.chat->Usage() : LlmUsage{}),
        embed_base_(ctx.embedder ? ctx.embedder->Usage() : LlmUsage{}),
        // The built-in embedder spends nothing: its calls are not model calls.
        count_embedder_(ctx.embedder != nullptr &&
                        !IsLexicalEmbeddingModel(ctx.embedder->model())) {}

  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  const Config& config() const { return config_; }
  Store& store() { return *ctx_.store; }
  ChatModel* chat() { return ctx_.chat; }
  EmbeddingModel* embedder() { return ctx_.embedder; }
  bool cancelled() const { return ctx_.cancel != nullptr && ctx_.cancel->load(); }
  const std::atomic<bool>* cancel_flag() const { return ctx_.cancel; }
  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // This run's usage: the models' counters minus what they held when the run began.
  LlmUsage Usage() const {
    LlmUsage u;
    if (ctx_.chat) u += ctx_.chat->Usage() - chat_base_;
    if (count_embedder_) u += ctx_.embedder->Usage() - embed_base_;
    return u;
  }

  // Chat calls of this run so far (cache hits included).
  int64_t ChatCalls() const { return ctx_.chat ? (ctx_.chat->Usage() - chat_base_).calls : 0; }

  void Plan(const IndexPlan& plan) {
    if (ctx_.on_plan) ctx_.on_plan(plan);
  }

  // The run's record in the store, whose counters FlushUsage keeps current.
  void SetRunId(int64_t id) { run_id_ = id; }

  // Writes this run's LLM spend to its record when it changed. Called as each unit of work is
  // committed (inside the unit's own transaction where there is one, so the spend costs no commit
  // of its own), so a run that is killed still accounts for what it spent (all but the calls in
  // flight).
  void FlushUsage() {
    if (run_id_ == 0) return;
    {
      std::lock_guard<std::mutex> lock(flush_mu_);
      if (SameUsage(Usage(), flushed_)) return;
    }
    // The store's lock before ours: a unit of work calls this inside its transaction, which
    // holds the store's lock.
    auto tx = ctx_.store->Begin();
    if (!tx.ok()) return;
    std::lock_guard<std::mutex> lock(flush_mu_);
    const LlmUsage u = Usage();
    if (SameUsage(u, flushed_)) return;
    if (ctx_.store->UpdateRun(run_id_, "", UsageCounters(u)).ok() && tx->Commit().ok()) {
      flushed_ = u;
    }
  }

  static bool SameUsage(const LlmUsage& a, const LlmUsage& b) {
    return a.calls == b.calls && a.cache_hits == b.cache_hits &&
           a.prompt_tokens == b.prompt_tokens && a.completion_tokens == b.completion_tokens &&
           a.http_requests == b.http_requests && a.failures == b.failures;
  }

  static std::map<std::string, int64_t> UsageCounters(const LlmUsage& u) {
    std::map<std::string, int64_t> out = {{"llm_calls", u.calls},
                                          {"llm_cache_hits", u.cache_hits},
                                          {"llm_http_requests", u.http_requests},
                                          {"llm_failures", u.failures},
                                          {"tokens_in", u.prompt_tokens},
                                          {"tokens_out", u.completion_tokens}};
    out.merge(EndpointRunCounters(u.endpoints));
    return out;
  }

  // Records the spend of a model reply just received, committed before the caller goes on (a
  // group commit: replies that arrive together share it; in the caller's own transaction, with
  // it), so a killed run's record holds every reply it received: only calls in flight are lost.
  // A cache hit changes nothing and writes nothing.
  void RecordSpend() {
    if (run_id_ == 0) return;
    {
      std::lock_guard<std::mutex> lock(flush_mu_);
      if (SameUsage(Usage(), flushed_)) return;
    }
    LlmUsage written;
    const Status st = ctx_.store->WriteGrouped([&]() -> Status {
      written = Usage();  // as it is when the write runs, which may be after later replies
      return ctx_.store->UpdateRun(run_id_, "", UsageCounters(written));
    });
    if (!st.ok()) return;  // the unit's own commit records it
    std::lock_guard<std::mutex> lock(flush_mu_);
    if (written.calls >= flushed_.calls) flushed_ = written;
  }

  // `flush`: write the spend first (false: the unit just done wrote it in its transaction).
  void Progress(const std::string& stage, int64_t done, int64_t total, bool flush = true) {
    if (flush) FlushUsage();
    if (!ctx_.on_progress) return;
    IndexProgress p;
    p.stage = stage;
    p.done = done;
    p.total = total;
    p.usage = Usage();
    p.elapsed_seconds = Elapsed();
    std::lock_guard<std::mutex> lock(progress_mu_);  // one progress line at a time
    ctx_.on_progress(p);
  }

 private:
  const Config& config_;
  IndexContext& ctx_;
  std::chrono::steady_clock::time_point start_;
  LlmUsage chat_base_;
  LlmUsage embed_base_;
  bool count_embedder_;
  std::mutex progress_mu_;  // serialises on_progress calls
  int64_t run_id_ = 0;
  struct SpendState {
    std::mutex mu;        // guards writing
    LlmUsage writing;     // what the queued spend write last wrote
    bool queued = false;  // guarded by Run::flush_mu_: a spend write waits to be committed
  };
  std::mutex flush_mu_;  // guards flushed_ and spend_->queued
  LlmUsage flushed_;     // what the run's record holds
  std::shared_ptr<SpendState> spend_ = std::make_shared<SpendState>();
};

// The meta key holding the name keys of the entities changed by merges since the communities
// were last detected (a JSON array): written with the graph, cleared with the communities, so a
// run killed in between resumes to the same communities.
inline constexpr std::string_view kPendingChangesKey = "communities_pending_changes";
// The keys recorded under kPendingChangesKey (none when unset or unreadable).
Result<std::set<std::string>> PendingChanges(Store& store);

}  // namespace grag
