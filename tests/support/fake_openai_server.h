// A real HTTP server on 127.0.0.1 that speaks the OpenAI protocol, for tests of the LLM client
// and end-to-end tests of the modules above it. Each request is answered by a handler function
// (status, headers such as Retry-After, body or server-sent events, delay), and the server counts
// requests and the most in flight at once.
//
//   grag::testing::FakeOpenAIServer server;  // answers chats with "ok" and hashed embeddings
//   server.SetHandler(grag::testing::Answering(
//       [](const grag::testing::FakeRequest& r) { return "echo: " + r.LastUserMessage(); }));
//   options.base_url = server.base_url();     // "http://127.0.0.1:PORT/v1"
//
// Also here: FakeClock, a grag::Clock whose sleeps take no real time, so retry and rate-limit
// tests run in virtual time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grag/llm.h"

namespace grag::testing {

// One request as the server saw it.
struct FakeRequest {
  int index = 0;                               // arrival order, from 0
  std::string path;                            // without the query, e.g. "/v1/chat/completions"
  std::map<std::string, std::string> query;    // e.g. {"api-version": "2024-10-21"}
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  nlohmann::json json;  // the body parsed; null when it is not JSON

  std::string Header(std::string_view name) const;  // "" when absent; any case
  bool IsChat() const;                              // path ends with /chat/completions
  bool IsEmbeddings() const;                        // path ends with /embeddings
  bool Stream() const;                              // "stream": true
  std::string Model() const;
  // Content of the last message with that role ("" if none).
  std::string LastMessage(std::string_view role) const;
  std::string LastUserMessage() const { return LastMessage("user"); }
  std::vector<std::string> EmbeddingInputs() const;  // "input" as a list
};

// How to answer one request.
struct FakeReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // e.g. {"Retry-After", "1"}
  // Held before answering, counted as in flight. Cut short when the server stops.
  std::chrono::milliseconds delay{0};
  // Non-empty: answer as text/event-stream, each event sent as "data: <event>\n\n" in its own
  // chunk, `event_gap` apart. `body` is then ignored.
  std::vector<std::string> events;
  std::chrono::milliseconds event_gap{0};
};

using FakeHandler = std::function<FakeReply(const FakeRequest&)>;

struct FakeUsage {
  int prompt_tokens = 11;
  int completion_tokens = 7;
};

// ---- replies in the shapes OpenAI sends ----

// A chat completion with `content`; usage omitted when nullopt.
FakeReply ChatCompletion(std::string_view content, std::optional<FakeUsage> usage = FakeUsage{},
                         std::string_view model = "fake-model");
// A streamed chat completion: one chunk per delta, then (when given) a usage chunk, then [DONE].
FakeReply ChatStream(const std::vector<std::string>& deltas,
                     std::optional<FakeUsage> usage = FakeUsage{},
                     std::string_view model = "fake-model");
// An embeddings reply holding `vectors` in order; usage omitted when prompt_tokens is nullopt.
FakeReply Embeddings(const std::vector<std::vector<float>>& vectors,
                     std::optional<int> prompt_tokens = 5, std::string_view model = "fake-embed");
// {"error": {"message", "type", "code"}} with that status.
FakeReply OpenAIError(int status, std::string_view message,
                      std::string_view type = "invalid_request_error", std::string_view code = "");
// A fixed body with a status and a content type, e.g. an HTML error page or broken JSON.
FakeReply RawReply(int status, std::string body, std::string content_type = "application/json");

// The deterministic vector the default handler returns for `text`.
std::vector<float> FakeEmbedding(std::string_view text, size_t dimension);

// A handler for both endpoints: chats get `answer(request)` (streamed when the request asks),
// embeddings get FakeEmbedding of each input, anything else a 404 in OpenAI's error shape.
FakeHandler Answering(std::function<std::string(const FakeRequest&)> answer,
                      size_t embedding_dimension = 8);

struct FakeServerOptions {
  // Worker threads. More than any test's concurrency, so the server never hides a client that
  // sends too many requests at once (extra connections would queue and not be counted).
  int threads = 48;
  // How long an idle keep-alive connection holds a worker; short, so stopping is quick.
  int keep_alive_seconds = 2;
  // Requests one connection serves before the server closes it. cpp-httplib's default, 5, makes
  // a client reconnect every fifth call, which tests of reconnection want; OpenAI, vLLM
  // (uvicorn), Ollama and llama.cpp's server keep a connection for as long as it is used, which
  // a benchmark of the client's cost should model.
  int keep_alive_max_count = 5;
};

// Listens on 127.0.0.1 at an ephemeral port from construction until destruction. Thread-safe.
// Throws std::runtime_error when it cannot listen (a test failure, not a crash).
class FakeOpenAIServer {
 public:
  // Default handler: Answering(...) with "ok".
  explicit FakeOpenAIServer(FakeHandler handler = {}, FakeServerOptions options = {});
  ~FakeOpenAIServer();
  FakeOpenAIServer(const FakeOpenAIServer&) = delete;
  FakeOpenAIServer& operator=(const FakeOpenAIServer&) = delete;

  int port() const { return port_; }
  std::string endpoint() const;  // "http://127.0.0.1:PORT" (Azure's base_url)
  std::string base_url() const;  // endpoint() + "/v1" (OpenAI's base_url)

  void SetHandler(FakeHandler handler);

  int request_count() const;
  int in_flight() const;
  int max_in_flight() const;                  // the most requests handled at once so far
  std::vector<FakeRequest> requests() const;  // in arrival order
  FakeRequest request(size_t i) const;        // requests()[i]; fails the test if absent

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = -1;
};

// A grag::Clock in virtual time: SleepUntil moves time forward at once (never backwards) and
// records how long each sleep would have been. Thread-safe.
class FakeClock final : public Clock {
 public:
  FakeClock();
  TimePoint Now() override;
  void SleepUntil(TimePoint deadline) override;
  std::chrono::system_clock::time_point WallNow() override;

  void Advance(std::chrono::milliseconds d);
  std::vector<std::chrono::milliseconds> sleeps() const;  // each non-zero wait, in order
  std::chrono::milliseconds total_slept() const;
  std::chrono::milliseconds elapsed() const;  // virtual time since construction

 private:
  mutable std::mutex mu_;
  TimePoint start_;                                   // guarded by mu_
  TimePoint now_;                                     // guarded by mu_
  std::chrono::system_clock::time_point wall_start_;  // fixed: 2024-01-01T00:00:00Z
  std::vector<std::chrono::milliseconds> sleeps_;     // guarded by mu_
};

}  // namespace grag::testing
