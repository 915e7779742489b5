// grag serve's own internals, shared by its source files (server.cpp: the server and its
// questions; server_routes.cpp: the route table and the checks every request passes;
// server_resources.cpp: documents, jobs and the graph; server_openai.cpp: the OpenAI-compatible
// endpoint). Not installed, and included by nothing outside src/server.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "grag/engine.h"
#include "grag/lexical_embedder.h"
#include "grag/server.h"
#include "connections.h"
#include "jobs.h"
#include "metrics.h"
#include "web_assets.h"

namespace grag {

// The module's helpers: what an unnamed namespace held when the server was one file.
namespace server_internal {

using httplib::Request;
using httplib::Response;
using nlohmann::json;

inline constexpr const char* kVersion = GRAG_VERSION;
inline constexpr const char* kJson = "application/json";

std::string Dump(const json& j);

// ---------------------------------------------------------------- responses

void SendJson(Response& res, int status, std::string body);

json ErrorObject(const Status& s);

void SendError(Response& res, const Status& s);

// ---------------------------------------------------------------- request bodies

Result<json> ParseBody(const Request& req, bool allow_empty);

Result<std::optional<std::string>> OptString(const json& j, const char* key);

Result<std::string> NeedString(const json& j, const char* key);

Result<std::optional<int64_t>> OptInt(const json& j, const char* key, int64_t lo, int64_t hi);

Result<bool> OptBool(const json& j, const char* key, bool fallback);

Result<std::optional<int64_t>> QueryInt(const Request& req, const char* key, int64_t lo,
                                        int64_t hi);

// ---------------------------------------------------------------- Server-Sent Events

std::string SseEvent(std::string_view event, std::string_view data);

bool SinkWrite(httplib::DataSink& sink, const std::string& s);

// Sets `gone` when the client of a streamed reply hangs up, checking a few times a second
// until destroyed. A question learnt of it only when writing its next piece of the answer, so
// a global search whose client left during the map step still started its reduce call.
class DisconnectWatch {
 public:
  DisconnectWatch(httplib::DataSink& sink, std::atomic<bool>& gone)
      : thread_([this, &sink, &gone] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!done_) {
            if (cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return done_; })) break;
            if (!sink.is_writable()) {
              gone = true;
              break;
            }
          }
        }) {}
  ~DisconnectWatch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  DisconnectWatch(const DisconnectWatch&) = delete;
  DisconnectWatch& operator=(const DisconnectWatch&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;
};

// ---------------------------------------------------------------- the route table

struct Param {
  const char* name;
  const char* type;  // "string" | "integer" | "boolean"
  const char* description;
};

struct Route {
  const char* method;  // GET | POST | DELETE
  const char* path;    // OpenAPI template, e.g. /v1/documents/{id}
  const char* summary;
  bool auth = true;
  std::vector<Param> query;
  const char* body = nullptr;  // JSON Schema of the JSON body, as text; nullptr: none
  const char* response = "JSON";
  std::function<void(const Request&, Response&)> handler;
};

// Engine slots handed out first come, first served: a plain semaphore lets a late request
// overtake ones that have waited for seconds, which stretches the tail under load.
class FairSlots {
 public:
  explicit FairSlots(int64_t slots) : free_(slots) {}
  void Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t ticket = next_ticket_++;
    cv_.wait(lock, [&] { return free_ > 0 && ticket == serving_; });
    ++serving_;
    --free_;
    cv_.notify_all();  // the next in line may take another free slot
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++free_;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t free_;
  int64_t next_ticket_ = 0;
  int64_t serving_ = 0;
};

}  // namespace server_internal

using namespace server_internal;  // NOLINT: the module's own, as an unnamed namespace's would be

struct Server::Impl {
  Config config;
  server::HttpServer http;
  std::vector<Route> routes;
  std::unique_ptr<FairSlots> workers;
  int64_t worker_count = 0;  // its slots
  size_t max_body = 0;
  std::atomic<bool> stopping{false};

  // Held from "is a job running?" until a new job runs: two POST /v1/index at once otherwise
  // both saw none, and the second failed on the writer lock the first had just taken (503
  // naming this server's own pid) instead of getting 409.
  std::mutex start_mu;
  std::mutex reader_mu;
  std::shared_ptr<Engine> reader;  // opened on first use; replaced when the index changed
  // The index version (Engine::IndexVersion) `reader` was opened at, and when it was last
  // compared with the stored one; guarded by reader_mu.
  std::string reader_version;
  std::chrono::steady_clock::time_point reader_checked;
  std::atomic<bool> reloading{false};  // a request is replacing a stale reader

  std::unique_ptr<server::JobManager> jobs;
  server::Metrics metrics;
  std::map<std::string_view, std::string> web_etags;  // by asset name: a hash of its bytes

  // How often a request checks whether another process (a `grag index`, another server on the
  // same PostgreSQL database) finished writing the index: at most this stale after it did.
  static constexpr std::chrono::milliseconds kRecheck{500};

  // The read engine, opened now if needed. No index yet is kUnavailable, saying what to do.
  // The reader keeps the graph and vectors in memory, so the first request at least kRecheck
  // after the last check compares the index version with the reader's; when another process
  // finished a write since, that request opens and warms a new reader (the others keep
  // answering from the old one meanwhile) and swaps it in.
  Result<std::shared_ptr<Engine>> Reader() {
    std::shared_ptr<Engine> current;
    std::string version;
    {
      std::lock_guard<std::mutex> lock(reader_mu);
      if (!reader) return OpenReader();
      const auto now = std::chrono::steady_clock::now();
      if (now - reader_checked < kRecheck || reloading.exchange(true)) return reader;
      reader_checked = now;
      current = reader;
      version = reader_version;
    }
    struct Done {
      std::atomic<bool>* flag;
      ~Done() { flag->store(false); }
    } done{&reloading};
    auto stored = current->IndexVersion();
    if (!stored.ok() || *stored == version) return current;  // a failed check: try again later
    auto fresh = OpenEngine();
    if (!fresh.ok()) return current;
    (void)fresh->first->retriever();  // warm it here, not in the next requests
    std::lock_guard<std::mutex> lock(reader_mu);
    if (reader == current) {  // not replaced meanwhile (a job of this server finished)
      RetireReader();
      reader = std::move(fresh->first);
      reader_version = std::move(fresh->second);
    }
    return reader;
  }

  // A read engine and the index version it was opened at (read first: a write finishing while
  // it loads makes the next check reload it again rather than keep a mix).
  Result<std::pair<std::shared_ptr<Engine>, std::string>> OpenEngine() {
    EngineOptions options;
    options.keep_graph = true;  // many questions: the graph stays in memory
    auto engine = Engine::Open(config, options);
    if (!engine.ok()) {
      if (engine.status().code() == ErrorCode::kNotFound) {
        return Status::Unavailable(
            "no index yet: add documents (POST /v1/documents) and start an index job (POST "
            "/v1/index)");
      }
      return engine.status();
    }
    std::shared_ptr<Engine> shared(std::move(*engine));
    GRAG_ASSIGN_OR_RETURN(std::string version, shared->IndexVersion());
    return std::make_pair(std::move(shared), std::move(version));
  }

  // What the read engine's models spent, with reader_mu held.
  LlmUsage ReaderUsage() const {
    LlmUsage u;
    if (reader == nullptr) return u;
    if (ChatModel* chat = reader->chat()) u += chat->Usage();
    // The built-in embedder spends nothing worth counting; a configured one does.
    if (EmbeddingModel* e = reader->embedder();
        e != nullptr && !IsLexicalEmbeddingModel(e->model())) {
      u += e->Usage();
    }
    return u;
  }
  // The read engine is about to go: its spend so far stays in the metrics. With reader_mu held.
  void RetireReader() { metrics.RetireQueryUsage(ReaderUsage()); }

  // With reader_mu held.
  Result<std::shared_ptr<Engine>> OpenReader() {
    GRAG_ASSIGN_OR_RETURN(auto opened, OpenEngine());
    reader = std::move(opened.first);
    reader_version = std::move(opened.second);
    reader_checked = std::chrono::steady_clock::now();
    return reader;
  }

  void ReloadReader() {
    {
      std::lock_guard<std::mutex> lock(reader_mu);
      RetireReader();
      reader.reset();
    }
    // Warm the next engine here (in the job's thread) rather than in the next request.
    auto r = Reader();
    if (r.ok()) (void)(*r)->retriever();
  }

  // Runs `f` holding one of the server.workers engine slots.
  template <typename F>
  auto WithWorker(F&& f) {
    workers->Acquire();
    struct Release {
      FairSlots* s;
      ~Release() { s->Release(); }
    } release{workers.get()};
    return f();
  }

  // A question on `engine`, in a worker slot, counted in the metrics by the method that answered.
  Result<QueryResult> Ask(Engine& engine, const QueryRequest& request) {
    auto result = WithWorker([&] { return engine.Query(request); });
    metrics.ObserveQuestion(result.ok() ? QueryMethodName(result->method) : "error");
    return result;
  }

  void DeclareRoutes();
  void Register();
  std::string OpenApi() const;
  // Whether `path` is served without an API key (a route declared with auth = false).
  bool IsPublic(const std::string& path) const;

  // ---- handlers
  void Health(const Request&, Response& res);
  void MetricsText(const Request&, Response& res);
  // Whether the store answers a read (Engine::IndexVersion), asked at most every kProbeEvery.
  Status ProbeStore();
  static constexpr std::chrono::milliseconds kProbeEvery{1000};
  std::mutex probe_mu;
  std::chrono::steady_clock::time_point probe_at;  // guarded by probe_mu; epoch: never
  Status probe_status;                             // guarded by probe_mu
  void WebUi(const Request& req, Response& res);
  void WebFile(const Request& req, Response& res);
  void ApiDocs(const Request& req, Response& res);
  void SendWebAsset(const server::WebAsset& asset, const Request& req, Response& res);
  void Query(const Request& req, Response& res);
  void Search(const Request& req, Response& res);
  void Stats(const Request& req, Response& res);
  void Doctor(const Request& req, Response& res);
  void ListDocuments(const Request& req, Response& res);
  void GetDocument(const Request& req, Response& res);
  void GetDocumentById(const std::string& id, Response& res);
  void GetDocumentText(const Request& req, Response& res);
  void PostDocument(const Request& req, Response& res);
  void DeleteDocument(const Request& req, Response& res);
  void StartIndex(const Request& req, Response& res);
  void GetJob(const Request& req, Response& res);
  void JobEvents(const Request& req, Response& res);
  void CancelJob(const Request& req, Response& res);
  void ListJobs(const Request& req, Response& res);
  void Graph(const Request& req, Response& res);
  void ListEntities(const Request& req, Response& res);
  void GetEntity(const Request& req, Response& res);
  void ListRelationships(const Request& req, Response& res);
  void ListCommunities(const Request& req, Response& res);
  void GetCommunity(const Request& req, Response& res);
  void GetChunk(const Request& req, Response& res);
  void Models(const Request& req, Response& res);
  void ChatCompletions(const Request& req, Response& res);
};

}  // namespace grag
