// The engine's private helpers for questions: a cancellable chat model, and (reports.mode =
// lazy) the reports a global question writes before its map calls.
#pragma once

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "grag/config.h"
#include "grag/global_search.h"
#include "grag/llm.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag {

// The chat model for one question that can be cancelled: every call carries the question's flag
// (so a call in flight stops too, mid-stream included) and none starts once it is set.
class CancellableChat final : public ChatModel {
 public:
  CancellableChat(ChatModel& inner, const std::atomic<bool>& cancel)
      : inner_(inner), cancel_(cancel) {}
  Result<ChatResponse> Chat(const ChatRequest& request) override {
    if (cancel_.load()) return Status::Cancelled("the question was cancelled");
    ChatRequest r = request;
    r.cancel = &cancel_;
    return inner_.Chat(r);
  }
  const std::string& model() const override { return inner_.model(); }
  const std::string& model_for(ChatRole role) const override { return inner_.model_for(role); }
  LlmUsage Usage() const override { return inner_.Usage(); }

 private:
  ChatModel& inner_;
  const std::atomic<bool>& cancel_;
};

// What an engine's questions share for reports.mode = lazy: one question at a time writes
// reports (two would write the same ones), and a count of what they wrote, so a question whose
// plan was made before another's reports were stored plans again.
struct QuestionReports {
  std::mutex mu;
  int64_t written = 0;  // guarded by mu: reports (and gaps) written by this engine's questions
  int64_t Written() {
    std::lock_guard lock(mu);
    return written;
  }
};

// reports.mode = lazy: the LLM reports of the communities a global question reads, written
// before its map calls (WriteDeferredReports: the heaviest first, at most
// reports.lazy_per_question). `plan` is the question's (made here when the router made none);
// it is dropped when reports were written, by this question or by another since `seen` (what
// shared.Written() said when the question began), so global search plans again with them. A
// failure to write (a read-only index, a model error) leaves the extractive stand-ins to answer,
// logged.
Status WriteQuestionReports(const Config& config, Store& store, ChatModel& chat,
                            EmbeddingModel* embedder, const Tokenizer& tokenizer,
                            std::string_view question, const GlobalSearchOptions& options,
                            const std::atomic<bool>* cancel, QuestionReports& shared, int64_t seen,
                            std::optional<GlobalSearchPlan>& plan, GlobalSearchStats& stats);

}  // namespace grag
