#include "engine_reports.h"

#include <algorithm>
#include <vector>

#include "grag/indexer.h"
#include "grag/log.h"

namespace grag {

// See engine_reports.h.
Status WriteQuestionReports(const Config& config, Store& store, ChatModel& chat,
                            EmbeddingModel* embedder, const Tokenizer& tokenizer,
                            std::string_view question, const GlobalSearchOptions& options,
                            const std::atomic<bool>* cancel, QuestionReports& shared, int64_t seen,
                            std::optional<GlobalSearchPlan>& plan, GlobalSearchStats& stats) {
  std::lock_guard lock(shared.mu);
  if (shared.written != seen) plan.reset();  // made before another question's reports
  if (!plan) {
    auto made = PlanGlobalSearch(store, tokenizer, question, options);
    if (!made.ok()) return Status::Ok();  // global search says why
    plan = std::move(made).value();
  }
  const std::vector<int64_t> ids = CommunitiesByWeight(*plan);
  std::optional<CancellableChat> cancellable;
  ChatModel* writer = &chat;
  if (cancel != nullptr) writer = &cancellable.emplace(chat, *cancel);
  auto wrote = WriteDeferredReports(config, store, *writer, ids, cancel, embedder);
  if (!wrote.ok()) {
    // Some may have been stored before the failure: plans made before it are made again.
    ++shared.written;
    plan.reset();
    if (wrote.status().code() == ErrorCode::kCancelled) return wrote.status();
    Log(LogLevel::kWarn, "query",
        "reports.mode = lazy: could not write this question's reports (" +
            wrote.status().ToString() + "); answering from the reports stored");
    return Status::Ok();
  }
  stats.reports_written = wrote->written;
  stats.report_calls = wrote->calls;
  stats.report_tokens_in = wrote->prompt_tokens;
  stats.report_tokens_out = wrote->completion_tokens;
  stats.reports_pending = wrote->pending;
  if (wrote->written > 0 || wrote->gaps > 0) {
    shared.written += wrote->written + wrote->gaps;
    plan.reset();
  }
  return Status::Ok();
}

}  // namespace grag
