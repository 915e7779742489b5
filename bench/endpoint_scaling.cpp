// Throughput with 1, 2 and 3 equal model endpoints behind one OpenAIClient (llm.endpoints).
//
// Each endpoint is a loopback OpenAI-compatible mock that answers a chat after a fixed latency
// and serves at most `concurrency` requests at once (more wait in its queue, as on a GPU server);
// the client gives each endpoint that concurrency, and as many callers as the endpoints take in
// all send distinct prompts (no cache), as the indexing pipeline's LLM workers do. Prints the
// median calls per second over several runs and the ratio to one endpoint: the goal is >= 2.7x
// with three. Exits non-zero when a call fails. Measured on this 2-core machine, medians of 5 runs
// of 480 calls: 76, 150 and 220 calls/s, 1.97x and 2.89x (with two other builds running: 2.07x
// and 3.04x; with 240 calls: 1.94x and 2.83x, the ramp-up and last waves weighing more).
//
//   endpoint_scaling [--calls N] [--latency-ms MS] [--concurrency C] [--runs R]
#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "grag/llm.h"
#include "grag/parallel.h"

namespace {

using Clock = std::chrono::steady_clock;

// httplib listens with a backlog of 5; a wider one keeps simultaneous connects from being
// dropped and retried a second later.
class WideBacklogServer : public httplib::Server {
 public:
  bool WidenBacklog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }
};

// A model server: `concurrency` requests at once, each held `latency`.
class MockEndpoint {
 public:
  MockEndpoint(std::chrono::milliseconds latency, int concurrency)
      : latency_(latency), free_(concurrency) {
    server_.new_task_queue = [] { return new httplib::ThreadPool(64); };
    server_.set_tcp_nodelay(true);
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return free_ > 0; });
        --free_;
      }
      std::this_thread::sleep_for(latency_);
      {
        std::lock_guard lock(mu_);
        ++free_;
      }
      cv_.notify_one();
      const auto body = nlohmann::json::parse(req.body, nullptr, false);
      std::string prompt = "?";
      if (body.is_object() && body.contains("messages") && body["messages"].is_array() &&
          !body["messages"].empty()) {
        prompt = body["messages"].back().value("content", "?");
      }
      nlohmann::json reply = {
          {"id", "chatcmpl-bench"},
          {"object", "chat.completion"},
          {"model", "bench-model"},
          {"choices",
           {{{"index", 0},
             {"message", {{"role", "assistant"}, {"content", "answer to " + prompt}}},
             {"finish_reason", "stop"}}}},
          {"usage", {{"prompt_tokens", 100}, {"completion_tokens", 20}}}};
      res.set_content(reply.dump(), "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0 || !server_.WidenBacklog()) {
      std::fprintf(stderr, "cannot listen on 127.0.0.1\n");
      std::exit(2);
    }
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~MockEndpoint() {
    server_.stop();
    thread_.join();
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

 private:
  const std::chrono::milliseconds latency_;
  WideBacklogServer server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  int free_;  // guarded by mu_
};

struct RunResult {
  double calls_per_second = 0;
  int failures = 0;
};

RunResult Run(const std::vector<std::unique_ptr<MockEndpoint>>& mocks, size_t n, int calls,
              int concurrency, int run) {
  grag::OpenAIOptions o;
  o.model = "bench-model";
  o.max_retries = 0;
  for (size_t i = 0; i < n; ++i) {
    grag::EndpointOptions e;
    e.name = "mock" + std::to_string(i);
    e.base_url = mocks[i]->base_url();
    e.max_concurrency = concurrency;
    o.endpoints.push_back(e);
  }
  auto client = grag::OpenAIClient::Create(o);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    std::exit(2);
  }
  std::atomic<int> failures{0};
  const auto start = Clock::now();
  grag::ParallelFor(
      static_cast<size_t>(calls), n * static_cast<size_t>(concurrency), [&](size_t i) {
        grag::ChatRequest r;
        r.messages.push_back(
            {"user", "run " + std::to_string(run) + " question " + std::to_string(i)});
        auto reply = (*client)->Chat(r);
        if (!reply.ok()) ++failures;
      });
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return {calls / seconds, failures.load()};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 480;  // enough that the first and last waves weigh little
  int latency_ms = 50;
  int concurrency = 4;
  int runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--calls") calls = value;
    if (flag == "--latency-ms") latency_ms = value;
    if (flag == "--concurrency") concurrency = value;
    if (flag == "--runs") runs = value;
  }
  if (calls < 1 || latency_ms < 0 || concurrency < 1 || runs < 1) {
    std::fprintf(stderr,
                 "usage: endpoint_scaling [--calls N] [--latency-ms MS] [--concurrency C] "
                 "[--runs R]\n");
    return 2;
  }
  setenv("no_proxy", "127.0.0.1,localhost", 1);
  std::vector<std::unique_ptr<MockEndpoint>> mocks;
  for (int i = 0; i < 3; ++i) {
    mocks.push_back(
        std::make_unique<MockEndpoint>(std::chrono::milliseconds(latency_ms), concurrency));
  }
  std::printf(
      "%d chat calls per run, %d runs; each endpoint: %d ms per call, %d at once "
      "(ideal: %.1f calls/s per endpoint)\n",
      calls, runs, latency_ms, concurrency,
      latency_ms > 0 ? 1000.0 * concurrency / latency_ms : 0.0);
  int failures = 0;
  double one = 0;
  double three_ratio = 0;
  for (size_t n = 1; n <= 3; ++n) {
    std::vector<double> rates;
    for (int r = 0; r < runs; ++r) {
      const RunResult result = Run(mocks, n, calls, concurrency, r + 100 * static_cast<int>(n));
      failures += result.failures;
      rates.push_back(result.calls_per_second);
    }
    const double median = Median(rates);
    if (n == 1) one = median;
    const double ratio = one > 0 ? median / one : 0;
    if (n == 3) three_ratio = ratio;
    std::printf("endpoints %zu: median %.1f calls/s (min %.1f, max %.1f), %.2fx one endpoint\n", n,
                median, *std::min_element(rates.begin(), rates.end()),
                *std::max_element(rates.begin(), rates.end()), ratio);
  }
  std::printf("goal >= 2.7x with 3 endpoints: %s (%.2fx)\n", three_ratio >= 2.7 ? "met" : "NOT met",
              three_ratio);
  if (failures > 0) {
    std::printf("%d calls FAILED\n", failures);
    return 1;
  }
  return 0;
}
