// Index jobs of grag serve: one update at a time in a background thread, its progress kept for
// polling (GET /v1/jobs/{id}) and streaming (Server-Sent Events), cancellable.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "grag/engine.h"

namespace grag::server {

enum class JobState { kRunning, kSucceeded, kFailed, kCancelled };
std::string_view JobStateName(JobState state);

struct JobSnapshot {
  int64_t id = 0;
  JobState state = JobState::kRunning;
  IndexProgress progress;
  std::optional<IndexPlan> plan;
  std::string summary_json;  // IndexSummaryJson, when it succeeded
  Status error;              // when it failed or was cancelled
  std::string started_at, finished_at;
  double elapsed_seconds = 0;
  int64_t version = 0;  // grows with every change
  bool cancel_requested = false;
};

// The job as JSON (GET /v1/jobs/{id} and every event of its stream).
std::string JobJson(const JobSnapshot& job);

class JobManager {
 public:
  // on_finished runs in the job's thread after the engine is closed (the server reloads its
  // read engine there).
  explicit JobManager(std::function<void(JobState)> on_finished);
  ~JobManager();  // cancels and joins a running job

  // Starts `request` on `engine` (opened writable by the caller, holding the writer lock).
  // Errors: kAlreadyExists while another job runs (its id is in the message).
  Result<int64_t> Start(std::unique_ptr<Engine> engine, IndexRequest request);
  std::optional<JobSnapshot> Get(int64_t id) const;
  // The jobs kept (the most recent ones), newest first.
  std::vector<JobSnapshot> List() const;
  // Waits until job `id` changed after `version` or `timeout` passed; the job then, if known.
  std::optional<JobSnapshot> WaitChange(int64_t id, int64_t version,
                                        std::chrono::milliseconds timeout) const;
  // Asks job `id` to stop; false when there is no such job.
  bool Cancel(int64_t id);
  bool Running() const;
  // What every job's models have spent so far (ended jobs and the running one's progress):
  // it only grows.
  LlmUsage Spent() const;
  void CancelAndJoin();

 private:
  struct Job;
  void Run(std::shared_ptr<Job> job, std::unique_ptr<Engine> engine, IndexRequest request);

  std::function<void(JobState)> on_finished_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  LlmUsage spent_;                                // guarded by mu_: by the jobs that ended
  std::map<int64_t, std::shared_ptr<Job>> jobs_;  // the most recent ones
  int64_t next_id_ = 1;
  std::shared_ptr<Job> running_;
  std::thread thread_;
};

}  // namespace grag::server
