#include "jobs.h"

#include <nlohmann/json.hpp>

#include <ctime>

#include "grag/engine_json.h"
#include "grag/log.h"
#include "grag/server.h"

namespace grag::server {
namespace {

using nlohmann::json;

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

constexpr size_t kJobsKept = 50;

}  // namespace

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "failed";
}

std::string JobJson(const JobSnapshot& job) {
  const IndexProgress& p = job.progress;
  json j = {{"id", job.id},
            {"state", JobStateName(job.state)},
            {"stage", p.stage},
            {"done", p.done},
            {"total", p.total},
            {"llm_calls", p.usage.calls},
            {"tokens_in", p.usage.prompt_tokens},
            {"tokens_out", p.usage.completion_tokens},
            {"elapsed_seconds", job.elapsed_seconds},
            {"cancel_requested", job.cancel_requested},
            {"started_at", job.started_at}};
  // The stage's remaining share at its pace so far; unknown until it has done something.
  json eta = nullptr;
  if (job.state == JobState::kRunning && p.total > 0 && p.done > 0 && p.done <= p.total &&
      p.elapsed_seconds > 0) {
    eta = p.elapsed_seconds / static_cast<double>(p.done) * static_cast<double>(p.total - p.done);
  }
  j["stage_eta_seconds"] = eta;
  j["finished_at"] = job.finished_at.empty() ? json(nullptr) : json(job.finished_at);
  if (job.plan) j["plan"] = json::parse(IndexPlanJson(*job.plan, false));
  if (!job.summary_json.empty()) j["summary"] = json::parse(job.summary_json);
  if (!job.error.ok()) {
    j["error"] = {{"type", ErrorTypeName(job.error.code())}, {"message", job.error.message()}};
  }
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

struct JobManager::Job {
  JobSnapshot snap;
  std::atomic<bool> cancel{false};
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool spent_counted = false;  // guarded by mu_: its spend is in spent_
};

JobManager::JobManager(std::function<void(JobState)> on_finished)
    : on_finished_(std::move(on_finished)) {}

JobManager::~JobManager() { CancelAndJoin(); }

Result<int64_t> JobManager::Start(std::unique_ptr<Engine> engine, IndexRequest request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_) {
    return Status::AlreadyExists("index job " + std::to_string(running_->snap.id) +
                                 " is running; one job at a time (GET /v1/jobs/" +
                                 std::to_string(running_->snap.id) + ")");
  }
  if (thread_.joinable()) thread_.join();  // the previous job, finished
  auto job = std::make_shared<Job>();
  job->snap.id = next_id_++;
  job->snap.started_at = UtcNow();
  job->snap.progress.stage = "load";
  jobs_[job->snap.id] = job;
  while (jobs_.size() > kJobsKept) jobs_.erase(jobs_.begin());
  running_ = job;
  thread_ = std::thread(&JobManager::Run, this, job, std::move(engine), std::move(request));
  return job->snap.id;
}

void JobManager::Run(std::shared_ptr<Job> job, std::unique_ptr<Engine> engine,
                     IndexRequest request) {
  auto changed = [&](const std::function<void(JobSnapshot&)>& f) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      f(job->snap);
      job->snap.elapsed_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - job->started).count();
      ++job->snap.version;
    }
    cv_.notify_all();
  };
  IndexCallbacks callbacks;
  callbacks.cancel = &job->cancel;
  callbacks.on_progress = [&](const IndexProgress& p) {
    changed([&](JobSnapshot& s) { s.progress = p; });
  };
  callbacks.on_plan = [&](const IndexPlan& plan) {
    changed([&](JobSnapshot& s) { s.plan = plan; });
  };
  Log(LogLevel::kInfo, "serve", "index job " + std::to_string(job->snap.id) + " started");
  auto summary = engine->Index(request, callbacks);
  engine.reset();  // releases the writer lock before anyone hears the job is over
  {
    // Its spend moves from the running job's progress to the ended jobs' total in one step.
    std::lock_guard<std::mutex> lock(mu_);
    spent_ += summary.ok() ? summary->usage : job->snap.progress.usage;
    job->spent_counted = true;
  }
  JobState state = JobState::kSucceeded;
  if (!summary.ok()) {
    state =
        summary.status().code() == ErrorCode::kCancelled ? JobState::kCancelled : JobState::kFailed;
  }
  Log(state == JobState::kFailed ? LogLevel::kWarn : LogLevel::kInfo, "serve",
      "index job " + std::to_string(job->snap.id) + " " + std::string(JobStateName(state)) +
          (summary.ok() ? "" : ": " + summary.status().message()));
  if (on_finished_) on_finished_(state);
  changed([&](JobSnapshot& s) {
    s.state = state;
    s.finished_at = UtcNow();
    if (summary.ok()) {
      s.summary_json = IndexSummaryJson(*summary, nullptr, false);
    } else {
      s.error = summary.status();
    }
  });
  std::lock_guard<std::mutex> lock(mu_);
  if (running_ == job) running_.reset();
}

std::optional<JobSnapshot> JobManager::Get(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second->snap;
}

std::vector<JobSnapshot> JobManager::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobSnapshot> out;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) out.push_back(it->second->snap);
  return out;
}

std::optional<JobSnapshot> JobManager::WaitChange(int64_t id, int64_t version,
                                                  std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  std::shared_ptr<Job> job = it->second;
  cv_.wait_for(lock, timeout, [&] { return job->snap.version != version; });
  return job->snap;
}

bool JobManager::Cancel(int64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return false;
    if (it->second->snap.state != JobState::kRunning) return true;
    it->second->cancel = true;
    it->second->snap.cancel_requested = true;
    ++it->second->snap.version;
  }
  cv_.notify_all();
  return true;
}

LlmUsage JobManager::Spent() const {
  std::lock_guard<std::mutex> lock(mu_);
  LlmUsage out = spent_;
  if (running_ != nullptr && !running_->spent_counted) out += running_->snap.progress.usage;
  return out;
}

bool JobManager::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ != nullptr;
}

void JobManager::CancelAndJoin() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_) {
      running_->cancel = true;
      running_->snap.cancel_requested = true;
    }
    t = std::move(thread_);
  }
  if (t.joinable()) t.join();
}

}  // namespace grag::server
