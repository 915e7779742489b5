// Global search: plan, one concurrent map round with per-call timeouts, ranking, one reduce call.
#include "grag/global_search.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grag/log.h"
#include "grag/thread_pool.h"
#include "global_plan.h"
#include "global_points.h"

namespace grag {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::chrono::milliseconds Since(SteadyClock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start);
}

// Runs one chat request per batch on a bounded set of threads and enforces map_timeout per call.
//
// ChatModel has no way to abandon a call, so a call past its deadline is only given up on: its
// slot settles as timed out, a replacement worker takes over the remaining requests, and the
// late reply is dropped (its worker then ends). The workers are threads of the shared pool; the
// destructor waits until every one has returned, so nothing outlives the borrowed model or
// requests. Run() and the destructor belong to the creating
// thread.
class MapRunner {
 public:
  struct Settled {
    bool timed_out = false;  // past map_timeout: `result` is empty
    std::optional<Result<ChatResponse>> result;
    std::chrono::milliseconds latency{0};
  };

  MapRunner(ChatModel& model, const std::vector<ChatRequest>& requests, size_t concurrency,
            std::chrono::milliseconds timeout)
      : model_(model),
        requests_(requests),
        slots_(requests.size()),
        timeout_(timeout),
        concurrency_(std::max<size_t>(1, std::min(concurrency, requests.size()))) {}

  ~MapRunner() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return live_ == 0; });
  }
  MapRunner(const MapRunner&) = delete;
  MapRunner& operator=(const MapRunner&) = delete;

  // Blocks until every call has returned or timed out; `on_settled(count)` runs on this thread
  // each time more calls have settled. Returns one entry per request, in request order.
  std::vector<Settled> Run(const std::function<void(size_t)>& on_settled) {
    {
      std::lock_guard lock(mu_);
      for (size_t i = 0; i < concurrency_; ++i) Spawn();
    }
    if (spawned_ == 0) Work();  // no thread could be started: do it all here, untimed

    std::unique_lock lock(mu_);
    size_t reported = 0;
    for (;;) {
      size_t settled = 0;
      std::optional<SteadyClock::time_point> next_deadline;
      const auto now = SteadyClock::now();
      for (Slot& s : slots_) {
        if (s.state == State::kRunning && now >= s.start + timeout_) {
          s.state = State::kTimedOut;
          s.latency = Since(s.start);
          // Its worker is stuck in the call: keep the promised concurrency for what is left.
          if (next_ < slots_.size()) Spawn();
        }
        switch (s.state) {
          case State::kPending:
            break;
          case State::kRunning: {
            const auto deadline = s.start + timeout_;
            if (!next_deadline || deadline < *next_deadline) next_deadline = deadline;
            break;
          }
          case State::kDone:
          case State::kTimedOut:
            ++settled;
            break;
        }
      }
      if (settled > reported) {
        reported = settled;
        if (on_settled) {
          lock.unlock();
          on_settled(settled);
          lock.lock();
          continue;  // time passed in the callback: look again
        }
      }
      if (settled == slots_.size()) break;
      if (next_deadline) {
        cv_.wait_until(lock, *next_deadline);
      } else {
        cv_.wait(lock);
      }
    }
    std::vector<Settled> out(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) {
      out[i].timed_out = slots_[i].state == State::kTimedOut;
      out[i].latency = slots_[i].latency;
      if (!out[i].timed_out) out[i].result = std::move(slots_[i].result);
    }
    return out;
  }

 private:
  enum class State { kPending, kRunning, kDone, kTimedOut };
  struct Slot {
    State state = State::kPending;
    SteadyClock::time_point start;
    std::chrono::milliseconds latency{0};
    std::optional<Result<ChatResponse>> result;
  };

  // Called with mu_ held. The worker is a thread borrowed from the
  // shared pool; the destructor waits until every worker has returned it.
  void Spawn() {
    ++live_;
    const bool started = ThreadPool::Shared().TrySubmit([this, log_file = CurrentLogFile()] {
      {
        ScopedLogFile log_scope(log_file);  // the map calls log where the search does
        Work();
      }
      std::lock_guard lock(mu_);
      if (--live_ == 0) cv_.notify_all();
    });
    if (!started) {  // the pool is full: the others carry on
      --live_;
      Log(LogLevel::kWarn, "global", "cannot start a map worker: the thread pool is full");
    } else {
      ++spawned_;
    }
  }

  void Work() {
    for (;;) {
      size_t i = 0;
      {
        std::lock_guard lock(mu_);
        if (next_ >= slots_.size()) return;
        i = next_++;
        slots_[i].state = State::kRunning;
        slots_[i].start = SteadyClock::now();
      }
      cv_.notify_all();  // a new deadline to wait for
      Result<ChatResponse> r = model_.Chat(requests_[i]);
      {
        std::lock_guard lock(mu_);
        Slot& s = slots_[i];
        // Given up on meanwhile: a replacement took this worker's place, so stop here to keep
        // the number of calls in flight at `concurrency`.
        if (s.state != State::kRunning) return;
        s.state = State::kDone;
        s.latency = Since(s.start);
        s.result = std::move(r);
      }
      cv_.notify_all();
    }
  }

  ChatModel& model_;
  const std::vector<ChatRequest>& requests_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Slot> slots_;  // guarded by mu_
  size_t next_ = 0;          // guarded by mu_: the next request to start
  const std::chrono::milliseconds timeout_;
  const size_t concurrency_;
  size_t live_ = 0;     // guarded by mu_ once workers run: workers not yet returned to the pool
  size_t spawned_ = 0;  // touched by the creating thread only (Spawn runs there)
};

MapCallOutcome OutcomeOf(ErrorCode code) {
  switch (code) {
    case ErrorCode::kTimeout:
      return MapCallOutcome::kTimedOut;
    case ErrorCode::kParse:
      return MapCallOutcome::kUnparseable;
    default:
      return MapCallOutcome::kFailed;
  }
}

// "3 failed, 1 timed out: <first error>"
std::string DropSummary(const std::vector<GlobalMapCall>& calls) {
  std::map<MapCallOutcome, int> counts;
  std::string first;
  for (const GlobalMapCall& c : calls) {
    if (c.outcome == MapCallOutcome::kOk) continue;
    ++counts[c.outcome];
    if (first.empty()) first = c.error;
  }
  std::string out;
  for (const auto& [outcome, n] : counts) {
    if (!out.empty()) out += ", ";
    out += std::to_string(n) + " " + std::string(MapCallOutcomeName(outcome));
  }
  return out + "; first: " + first;
}

// One map request per batch.
std::vector<ChatRequest> MapRequests(const GlobalSearchPlan& plan,
                                     const GlobalSearchOptions& options) {
  std::vector<ChatRequest> requests(plan.batches.size());
  for (size_t i = 0; i < plan.batches.size(); ++i) {
    ChatRequest& req = requests[i];
    req.role = ChatRole::kQuery;
    req.messages = {{"user", plan.batches[i].prompt}};
    req.json_mode = options.map_json_mode;
    req.max_tokens = options.map_reply_max_tokens;
    // A reply without a single point is not cached, so asking again can get a usable one.
    req.validator = [](const std::string& content) {
      return query::ParseMapReply(content).status();
    };
  }
  return requests;
}

// Reads the settled map calls into result.map_calls and `points`; true when any call was usable.
bool ReadMapCalls(std::vector<MapRunner::Settled>& settled, const GlobalSearchPlan& plan,
                  const GlobalSearchOptions& options, GlobalSearchResult& result,
                  std::vector<GlobalPoint>& points) {
  GlobalSearchStats& stats = result.stats;
  bool any_ok = false;
  for (size_t i = 0; i < settled.size(); ++i) {
    GlobalMapCall& call = result.map_calls.emplace_back();
    call.batch = i;
    call.community_ids = plan.batches[i].community_ids;
    call.latency = settled[i].latency;
    if (settled[i].timed_out) {
      call.outcome = MapCallOutcome::kTimedOut;
      call.error =
          "no reply within map_timeout (" + std::to_string(options.map_timeout.count()) + " ms)";
    } else if (!settled[i].result->ok()) {
      const Status st = settled[i].result->status();
      call.outcome = OutcomeOf(st.code());
      call.error = st.ToString();
    } else {
      const ChatResponse& resp = settled[i].result->value();
      call.prompt_tokens = resp.prompt_tokens;
      call.completion_tokens = resp.completion_tokens;
      call.cache_hit = resp.cache_hit;
      Result<std::vector<query::MapPoint>> parsed = query::ParseMapReply(resp.content);
      if (!parsed.ok()) {  // a model whose validator was not consulted (a custom ChatModel)
        call.outcome = MapCallOutcome::kUnparseable;
        call.error = parsed.status().ToString();
      } else {
        any_ok = true;
        call.points = static_cast<int64_t>(parsed->size());
        const std::set<int64_t> batch_ids(call.community_ids.begin(), call.community_ids.end());
        for (query::MapPoint& mp : *parsed) {
          GlobalPoint& p = points.emplace_back();
          p.description = std::move(mp.description);
          p.score = mp.score;
          p.batch = i;
          std::set<int64_t> named;
          for (int64_t id : mp.named_ids) {
            if (batch_ids.count(id) != 0) named.insert(id);
          }
          p.named_by_model = !named.empty();
          const std::set<int64_t>& ids = p.named_by_model ? named : batch_ids;
          p.community_ids.assign(ids.begin(), ids.end());
        }
      }
    }
    if (call.outcome == MapCallOutcome::kOk) {
      stats.tokens_in += call.prompt_tokens;
      stats.tokens_out += call.completion_tokens;
      stats.cache_hits += call.cache_hit ? 1 : 0;
    } else {
      ++stats.map_calls_failed;
      if (call.outcome == MapCallOutcome::kTimedOut) ++stats.map_calls_timed_out;
      if (call.outcome == MapCallOutcome::kUnparseable) ++stats.map_calls_unparseable;
      Log(LogLevel::kWarn, "global",
          "map call " + std::to_string(i + 1) + "/" + std::to_string(settled.size()) +
              " dropped (" + std::string(MapCallOutcomeName(call.outcome)) + "): " + call.error);
    }
  }
  return any_ok;
}

// The error when no map call was usable.
Status AllMapCallsDropped(const std::vector<GlobalMapCall>& map_calls) {
  // One shared cause keeps its kind (all timed out: kTimeout); a mix is kUnavailable.
  const MapCallOutcome first = map_calls.front().outcome;
  const bool same = std::all_of(map_calls.begin(), map_calls.end(),
                                [&](const GlobalMapCall& c) { return c.outcome == first; });
  ErrorCode code = ErrorCode::kUnavailable;
  if (same && first == MapCallOutcome::kTimedOut) code = ErrorCode::kTimeout;
  if (same && first == MapCallOutcome::kUnparseable) code = ErrorCode::kParse;
  return Status(code, "global search: all " + std::to_string(map_calls.size()) +
                          " map calls dropped out (" + DropSummary(map_calls) + ")");
}

// ---- rank: drop zeros, highest score first (ties keep batch order, so runs repeat)
std::vector<GlobalPoint*> RankPoints(std::vector<GlobalPoint>& points) {
  std::stable_sort(points.begin(), points.end(),
                   [](const GlobalPoint& a, const GlobalPoint& b) { return a.score > b.score; });
  std::vector<GlobalPoint*> ranked;
  for (GlobalPoint& p : points) {
    if (p.score == 0) {
      p.fate = PointFate::kZeroScore;
    } else {
      ranked.push_back(&p);
    }
  }
  return ranked;
}

// ---- reduce: as many whole points as fit, one call
Status Reduce(ChatModel& reduce_model, const Tokenizer& tokenizer, std::string_view question,
              const GlobalSearchOptions& options, const std::vector<GlobalPoint*>& ranked,
              const std::unordered_map<int64_t, const GlobalReportInfo*>& info_of,
              GlobalSearchResult& result) {
  GlobalSearchStats& stats = result.stats;
  query::ReducePrompt reduce =
      query::BuildReducePrompt(options.reduce_prompt, question, {ranked.begin(), ranked.end()},
                               options.reduce_budget_tokens, tokenizer);
  if (reduce.kept == 0) {
    return Status::InvalidArgument(
        "reduce_budget_tokens " + std::to_string(options.reduce_budget_tokens) +
        " cannot hold the highest-scored point with the prompt and question");
  }
  for (size_t i = 0; i < ranked.size(); ++i) {
    ranked[i]->fate = i < reduce.kept ? PointFate::kKept : PointFate::kOverBudget;
  }
  stats.points_kept = static_cast<int64_t>(reduce.kept);
  stats.points_over_budget = static_cast<int64_t>(ranked.size() - reduce.kept);
  stats.reduce_prompt_tokens = reduce.tokens;

  std::set<int64_t> cited;
  for (size_t i = 0; i < reduce.kept; ++i) {
    for (int64_t id : ranked[i]->community_ids) {
      if (!cited.insert(id).second) continue;
      GlobalCitation& c = result.citations.emplace_back();
      c.community_id = id;
      if (auto it = info_of.find(id); it != info_of.end()) {
        c.level = it->second->level;
        c.title = it->second->title;
      }
    }
  }

  ChatRequest req;
  req.role = ChatRole::kQuery;
  req.messages = {{"user", std::move(reduce.prompt)}};
  req.max_tokens = options.reduce_reply_max_tokens;
  if (options.on_answer_delta) req.on_delta = options.on_answer_delta;
  const auto reduce_start = SteadyClock::now();
  Result<ChatResponse> answer = reduce_model.Chat(req);
  stats.reduce_time = Since(reduce_start);
  stats.reduce_calls = 1;
  if (!answer.ok()) return answer.status().WithContext("global search reduce");
  stats.tokens_in += answer->prompt_tokens;
  stats.tokens_out += answer->completion_tokens;
  stats.cache_hits += answer->cache_hit ? 1 : 0;
  result.answer = std::move(answer->content);
  return Status::Ok();
}

}  // namespace

std::string_view MapCallOutcomeName(MapCallOutcome outcome) {
  switch (outcome) {
    case MapCallOutcome::kOk:
      return "ok";
    case MapCallOutcome::kFailed:
      return "failed";
    case MapCallOutcome::kTimedOut:
      return "timed_out";
    case MapCallOutcome::kUnparseable:
      return "unparseable";
  }
  return "unknown";
}

std::string_view PointFateName(PointFate fate) {
  switch (fate) {
    case PointFate::kKept:
      return "kept";
    case PointFate::kZeroScore:
      return "zero_score";
    case PointFate::kOverBudget:
      return "over_budget";
  }
  return "unknown";
}

Result<GlobalSearchResult> GlobalSearch(Store& store, ChatModel& map_model, ChatModel& reduce_model,
                                        const Tokenizer& tokenizer, std::string_view question,
                                        const GlobalSearchOptions& options,
                                        std::optional<GlobalSearchPlan> planned) {
  const auto start = SteadyClock::now();
  GlobalSearchResult result;
  GlobalSearchStats& stats = result.stats;

  stats.plan_from_route = planned.has_value();
  if (!planned) {
    GRAG_ASSIGN_OR_RETURN(planned, PlanGlobalSearch(store, tokenizer, question, options));
  }
  GlobalSearchPlan& plan = *planned;
  stats.plan_time = Since(start);
  stats.level = plan.level;
  stats.communities_selected = plan.communities_selected;
  stats.reports_used = static_cast<int64_t>(plan.reports.size());
  stats.reports_left_out = static_cast<int64_t>(plan.left_out.size());
  stats.reports_missing =
      static_cast<int64_t>(plan.missing_reports.size() + plan.gap_reports.size());
  stats.reports_truncated = std::count_if(plan.reports.begin(), plan.reports.end(),
                                          [](const GlobalReportInfo& r) { return r.truncated; });
  if (!plan.left_out.empty()) {
    Log(LogLevel::kInfo, "global",
        std::to_string(plan.left_out.size()) + " of " +
            std::to_string(plan.left_out.size() + plan.reports.size()) +
            " reports left out to stay within " + std::to_string(options.max_map_calls) +
            " map calls (the lowest-weight ones)");
  }
  std::unordered_map<int64_t, const GlobalReportInfo*> info_of;
  for (const GlobalReportInfo& r : plan.reports) info_of[r.community_id] = &r;

  // ---- map: one round, all batches at once
  std::vector<ChatRequest> requests = MapRequests(plan, options);
  const auto map_start = SteadyClock::now();
  // Lives until GlobalSearch returns: a worker still stuck in a timed-out call is joined only
  // then, so the reduce does not wait for it (see GlobalSearch's contract).
  std::optional<MapRunner> runner;
  runner.emplace(map_model, requests, static_cast<size_t>(options.concurrency),
                 options.map_timeout);
  std::vector<MapRunner::Settled> settled = runner->Run([&](size_t n) {
    if (options.on_map_progress) options.on_map_progress(n, requests.size());
  });
  stats.map_time = Since(map_start);
  stats.map_calls = static_cast<int64_t>(plan.batches.size());

  std::vector<GlobalPoint> points;
  const bool any_ok = ReadMapCalls(settled, plan, options, result, points);
  if (!any_ok) return AllMapCallsDropped(result.map_calls);

  std::vector<GlobalPoint*> ranked = RankPoints(points);
  result.left_out = std::move(plan.left_out);
  stats.points_total = static_cast<int64_t>(points.size());
  stats.points_zero_score = stats.points_total - static_cast<int64_t>(ranked.size());

  if (ranked.empty()) {  // seed 000's stop rule: nothing covers the question
    result.not_covered = true;
    result.answer = options.not_covered_answer;
    if (options.on_answer_delta) options.on_answer_delta(result.answer);
    result.points = std::move(points);
    stats.wall_time = Since(start);
    return result;
  }

  GRAG_RETURN_IF_ERROR(Reduce(reduce_model, tokenizer, question, options, ranked, info_of, result));
  result.points = std::move(points);
  stats.wall_time = Since(start);
  Log(LogLevel::kDebug, "global",
      "level " + std::to_string(stats.level) + ": " + std::to_string(stats.map_calls) +
          " map calls (" + std::to_string(stats.map_calls_failed) + " dropped), " +
          std::to_string(stats.points_kept) + "/" + std::to_string(stats.points_total) +
          " points kept, " + std::to_string(stats.wall_time.count()) + " ms");
  return result;
}

}  // namespace grag
