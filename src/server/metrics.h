// The server's metrics in Prometheus's text format (GET /metrics): requests by route, method and
// status with their latency, requests in flight, questions by method, index jobs by outcome, the
// models' calls, tokens and failures (questions and index jobs), and the process's CPU, memory
// and file descriptors. Counters only grow for the life of the process, as Prometheus expects.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "grag/llm_types.h"

namespace grag::server {

// A value read when the metrics are scraped (a gauge the server knows then).
struct GaugeValue {
  std::string name;  // grag_..., without labels
  std::string help;
  double value = 0;
};

class Metrics {
 public:
  // Upper bounds (seconds) of the request-latency histogram's buckets; +Inf is implied.
  static constexpr std::array<double, 14> kBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                      1,     2.5,  5,     10,   30,  60,   300};

  // One request a route answered: the route's template (/v1/documents/{id}, not the path: the
  // label set stays bounded), its method, the status sent and the seconds its handler took (a
  // streamed reply: until its handler returned).
  void ObserveRequest(std::string_view route, std::string_view method, int status, double seconds);
  // Requests being handled now.
  void AddInFlight(int delta) { in_flight_ += delta; }
  // A question answered (or failed): by the method that answered ("global", "local", ...;
  // "error" when it failed before one did).
  void ObserveQuestion(std::string_view method);
  // An index job that ended, by its state ("succeeded", "failed", "cancelled").
  void ObserveJob(std::string_view state);
  // What the questions' models have spent so far in engines no longer used (the server replaces
  // its read engine when the index changes): added to the live engine's figures at each scrape.
  void RetireQueryUsage(const LlmUsage& usage);

  // The exposition: every counter above, the models' spend (`query_usage`: the live read
  // engine's, `job_usage`: every index job's, JobManager::Spent), `gauges`, and the process's
  // own figures.
  std::string Render(const LlmUsage& query_usage, const LlmUsage& job_usage,
                     const std::vector<GaugeValue>& gauges) const;

 private:
  struct Series {
    int64_t count = 0;
    double sum = 0;
    std::array<int64_t, kBuckets.size()> buckets{};  // not cumulative; Render sums them
  };
  mutable std::mutex mu_;
  // (route, method, status) -> its requests and latency
  std::map<std::tuple<std::string, std::string, int>, Series> requests_;
  std::map<std::string, int64_t> questions_;  // by method
  std::map<std::string, int64_t> jobs_;       // by state
  LlmUsage retired_query_usage_;              // guarded by mu_
  std::atomic<int64_t> in_flight_{0};
};

}  // namespace grag::server
