// Extraction shared between processes (extraction.distribute, `grag index --worker`): the loop
// every participant runs over the index's work table, and the worker's entry point.
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "grag/log.h"
#include "grag/parallel.h"
#include "stages.h"

namespace grag {
namespace {

// Renews the worker's leases a few times a lease until destroyed.
class Heartbeat {
 public:
  Heartbeat(Store& store, std::string name, std::chrono::milliseconds lease)
      : thread_([this, &store, name = std::move(name), lease] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!cv_.wait_for(lock, lease / 3, [&] { return stop_; })) {
            lock.unlock();
            if (Status st = store.RenewWork(name, lease); !st.ok()) {
              Log(LogLevel::kWarn, "worker", "renewing the leases: " + st.ToString());
            }
            lock.lock();
          }
        }) {}
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

bool Cancelled(const std::atomic<bool>* cancel) { return cancel != nullptr && cancel->load(); }

// Sleeps `d`, waking early when cancelled.
void SleepUnlessCancelled(std::chrono::milliseconds d, const std::atomic<bool>* cancel) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (!Cancelled(cancel) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string DefaultWorkerName() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host[0] != '\0' ? host : "worker") + ":" + std::to_string(::getpid());
}

}  // namespace

Result<int64_t> RunWorkLoop(Store& store, ChatModel& chat, const ExtractionSetup& setup,
                            const WorkLoopOptions& o) {
  std::atomic<int64_t> done{0};
  Heartbeat heartbeat(store, o.name, o.lease);
  bool seen = false;                                 // some work was published since the loop began
  std::chrono::steady_clock::time_point reported{};  // the last progress report
  while (!Cancelled(o.cancel)) {
    GRAG_ASSIGN_OR_RETURN(std::vector<std::string> ids,
                          store.ClaimWork(o.name, setup.params, o.concurrency, o.lease));
    if (ids.empty()) {
      GRAG_ASSIGN_OR_RETURN(std::optional<WorkState> state, store.GetWorkState());
      if (state) seen = true;
      // Done, or withdrawn (the run ended or failed); otherwise the rest is leased to others,
      // whose leases may still expire.
      if (o.until_done && seen && (!state || state->done >= state->total)) break;
      if (o.on_progress) o.on_progress(state.value_or(WorkState{}), done.load(), true);
      SleepUnlessCancelled(o.poll, o.cancel);
      continue;
    }
    seen = true;
    const Status batch = ParallelForStatus(
        ids.size(), std::min(ids.size(), o.concurrency),
        [&](size_t k) -> Status {
          GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk, store.GetChunk(ids[k]));
          WorkSpend spend;
          if (chunk) {  // else deleted meanwhile: nothing to extract
            auto r = ExtractChunk(chat, setup.first_opts, chunk->text);
            if (!r.ok()) return r.status().WithContext("extracting chunk " + ids[k]);
            spend.calls = r->calls;
          }
          GRAG_RETURN_IF_ERROR(store.FinishWork(o.name, ids[k], spend));
          ++done;
          return Status::Ok();
        },
        o.cancel);
    GRAG_RETURN_IF_ERROR(batch);
    // The whole table's state is a scan: reported at most once a second, not per batch.
    const auto now = std::chrono::steady_clock::now();
    if (o.on_progress && now - reported >= std::chrono::seconds(1)) {
      reported = now;
      auto state = store.GetWorkState();
      if (state.ok() && *state) o.on_progress(**state, done.load(), false);
    }
  }
  if (Cancelled(o.cancel)) return Status::Cancelled("interrupted");
  return done.load();
}

Result<WorkerSummary> RunExtractionWorker(const Config& config, IndexContext& context,
                                          const WorkerOptions& options) {
  if (context.chat == nullptr) {
    return Status::InvalidArgument(
        "a worker extracts with a model: set llm.base_url and llm.model (or llm.endpoints)");
  }
  GRAG_ASSIGN_OR_RETURN(ExtractionSetup setup, ExtractionSetupFor(config, *context.chat));
  WorkerSummary summary;
  summary.name = options.name.empty() ? DefaultWorkerName() : options.name;
  WorkLoopOptions o;
  o.name = summary.name;
  o.concurrency = static_cast<size_t>(std::max<int64_t>(1, LlmConcurrency(config, "extract")));
  o.lease = std::chrono::milliseconds(static_cast<int64_t>(config.extraction.worker_lease * 1000));
  o.poll = options.poll;
  o.until_done = options.once;
  o.cancel = options.cancel;
  o.on_progress = options.on_progress;
  const auto start = std::chrono::steady_clock::now();
  const LlmUsage before = context.chat->Usage();
  Result<int64_t> chunks = RunWorkLoop(*context.store, *context.chat, setup, o);
  summary.usage = context.chat->Usage() - before;
  summary.elapsed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!chunks.ok()) return chunks.status();
  summary.chunks = *chunks;
  return summary;
}

}  // namespace grag
