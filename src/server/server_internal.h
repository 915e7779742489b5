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

// Compares digests, so neither the length nor the content of a key leaks through timing.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

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

struct Workspace;

// Who may call a route, and on what.
enum class Scope {
  kPublic,     // anyone, no key
  kServer,     // any valid key: the server as a whole
  kAdmin,      // a key of server.api_keys (not a workspace's own): managing workspaces
  kWorkspace,  // one workspace's: /v1/X acts on "default" (or X-Grag-Workspace), and the same
               // route is served as /v1/workspaces/{workspace}/X
};

struct Route {
  const char* method;  // GET | POST | DELETE
  const char* path;    // OpenAPI template, e.g. /v1/documents/{id}
  const char* summary;
  Scope scope = Scope::kWorkspace;
  std::vector<Param> query;
  const char* body = nullptr;  // JSON Schema of the JSON body, as text; nullptr: none
  const char* response = "JSON";
  // The workspace the request names (the default one for server routes).
  std::function<void(Workspace&, const Request&, Response&)> handler;
};

// The key a request carries: a key of server.api_keys opens everything (or no keys are set);
// a workspace key (server.workspace_keys) opens its workspace only.
struct Caller {
  bool admin = false;
  std::string workspace;  // a workspace key's workspace
  bool Opens(std::string_view name) const { return admin || name == workspace; }
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

namespace server_internal {

// One index the server answers from: its own project ("default") or a workspace
// (grag/project.h), with its own settings, read engine, index jobs and question slots.
struct Workspace : std::enable_shared_from_this<Workspace> {
  std::string name;
  std::string api;  // its routes' prefix: "/v1", or "/v1/workspaces/NAME"
  Config config;
  server::Metrics* metrics = nullptr;  // the server's
  std::unique_ptr<FairSlots> slots;    // server.workspace_workers; null: no limit of its own
  // Called (without locks held) after a read engine was opened: the server may unload others.
  std::function<void()> on_load;
  std::atomic<int64_t> last_used{0};  // steady_clock ticks of its last question
  std::atomic<bool> deleted{false};   // set under start_mu: no job or document may start

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

  // How often a request checks whether another process (a `grag index`, another server on the
  // same PostgreSQL database) finished writing the index: at most this stale after it did.
  static constexpr std::chrono::milliseconds kRecheck{500};

  Workspace(std::string name, Config config, server::Metrics* metrics);

  // The read engine, opened now if needed. No index yet is kUnavailable, saying what to do.
  // The reader keeps the graph and vectors in memory, so the first request at least kRecheck
  // after the last check compares the index version with the reader's; when another process
  // finished a write since, that request opens and warms a new reader (the others keep
  // answering from the old one meanwhile) and swaps it in.
  Result<std::shared_ptr<Engine>> Reader();
  // A read engine and the index version it was opened at.
  Result<std::pair<std::shared_ptr<Engine>, std::string>> OpenEngine();
  // What the read engine's models spent, with reader_mu held.
  LlmUsage ReaderUsage() const;
  // The read engine is about to go: its spend so far stays in the metrics. With reader_mu held.
  void RetireReader();
  Result<std::shared_ptr<Engine>> OpenReader();  // with reader_mu held
  void ReloadReader();
  bool Loaded();
  // Closes the read engine unless a job runs (memory back; the next question opens it again).
  bool Unload();

  // Whether the store answers a read (Engine::IndexVersion), asked at most every kProbeEvery.
  Status ProbeStore();
  static constexpr std::chrono::milliseconds kProbeEvery{1000};
  std::mutex probe_mu;
  std::chrono::steady_clock::time_point probe_at;  // guarded by probe_mu; epoch: never
  Status probe_status;                             // guarded by probe_mu
};

}  // namespace server_internal

struct Server::Impl {
  Config config;
  server::HttpServer http;
  std::vector<Route> routes;
  std::unique_ptr<FairSlots> workers;
  int64_t worker_count = 0;  // its slots
  size_t max_body = 0;
  std::atomic<bool> stopping{false};

  server::Metrics metrics;
  std::map<std::string_view, std::string> web_etags;  // by asset name: a hash of its bytes

  std::shared_ptr<Workspace> main;  // the server's own project: "default"
  std::mutex workspaces_mu;
  // The workspaces asked for since start (their settings loaded; their read engines open only
  // while in use, at most server.max_loaded_workspaces at once), by name; guarded.
  std::map<std::string, std::shared_ptr<Workspace>, std::less<>> workspaces;

  std::shared_ptr<Workspace> MakeWorkspace(std::string name, Config config);
  // Workspace `name` ("default": main). kNotFound when it does not exist.
  Result<std::shared_ptr<Workspace>> OpenWorkspace(std::string_view name);
  // The workspaces open now, main first.
  std::vector<std::shared_ptr<Workspace>> OpenWorkspaces();
  // Past server.max_loaded_workspaces read engines, closes the least recently used idle ones.
  void UnloadIdle();
  // The key a request carries (the pre-routing check already refused a wrong one).
  Caller CallerOf(const Request& req) const;
  // The workspaces the request's key opens, "default" first (if it opens it), then by name.
  Result<std::vector<std::string>> WorkspacesOpenedBy(const Request& req) const;
  // Workspace `name` if the request's key opens it; a key that does not gets the 404 a missing
  // workspace gets (it learns nothing of the others).
  Result<std::shared_ptr<Workspace>> WorkspaceFor(const Request& req, std::string_view name);

  // Runs `f` holding one of the workspace's slots (if it has its own limit), then one of the
  // server.workers engine slots.
  template <typename F>
  auto WithWorker(Workspace& ws, F&& f) {
    struct Release {
      FairSlots* s;
      ~Release() {
        if (s) s->Release();
      }
    };
    if (ws.slots) ws.slots->Acquire();
    Release own{ws.slots.get()};
    workers->Acquire();
    Release shared{workers.get()};
    ws.last_used = std::chrono::steady_clock::now().time_since_epoch().count();
    return f();
  }

  // A question on `engine`, in a worker slot, counted in the metrics by the method that answered.
  Result<QueryResult> Ask(Workspace& ws, Engine& engine, const QueryRequest& request) {
    auto result = WithWorker(ws, [&] { return engine.Query(request); });
    metrics.ObserveQuestion(result.ok() ? QueryMethodName(result->method) : "error");
    return result;
  }

  void DeclareRoutes();
  void Register();
  // Hands each route of the table to cpp-httplib (Register's last step).
  void ServeRoutes();
  std::string OpenApi() const;
  // Whether `path` is served without an API key (a route declared kPublic).
  bool IsPublic(const std::string& path) const;

  // ---- handlers
  void Health(Workspace& ws, const Request&, Response& res);
  void MetricsText(Workspace& ws, const Request&, Response& res);
  void WebUi(Workspace& ws, const Request& req, Response& res);
  void WebFile(Workspace& ws, const Request& req, Response& res);
  void ApiDocs(Workspace& ws, const Request& req, Response& res);
  void SendWebAsset(const server::WebAsset& asset, const Request& req, Response& res);
  void Query(Workspace& ws, const Request& req, Response& res);
  void Search(Workspace& ws, const Request& req, Response& res);
  void Stats(Workspace& ws, const Request& req, Response& res);
  void Doctor(Workspace& ws, const Request& req, Response& res);
  void ListDocuments(Workspace& ws, const Request& req, Response& res);
  void GetDocument(Workspace& ws, const Request& req, Response& res);
  void GetDocumentById(Workspace& ws, const std::string& id, Response& res);
  void GetDocumentText(Workspace& ws, const Request& req, Response& res);
  void PostDocument(Workspace& ws, const Request& req, Response& res);
  void DeleteDocument(Workspace& ws, const Request& req, Response& res);
  void StartIndex(Workspace& ws, const Request& req, Response& res);
  void GetJob(Workspace& ws, const Request& req, Response& res);
  void JobEvents(Workspace& ws, const Request& req, Response& res);
  void CancelJob(Workspace& ws, const Request& req, Response& res);
  void ListJobs(Workspace& ws, const Request& req, Response& res);
  void Graph(Workspace& ws, const Request& req, Response& res);
  void ListEntities(Workspace& ws, const Request& req, Response& res);
  void GetEntity(Workspace& ws, const Request& req, Response& res);
  void ListRelationships(Workspace& ws, const Request& req, Response& res);
  void ListCommunities(Workspace& ws, const Request& req, Response& res);
  void GetCommunity(Workspace& ws, const Request& req, Response& res);
  void GetChunk(Workspace& ws, const Request& req, Response& res);
  void Models(Workspace& ws, const Request& req, Response& res);
  void ChatCompletions(Workspace& ws, const Request& req, Response& res);
  void ListWorkspacesRoute(Workspace& ws, const Request& req, Response& res);
  void CreateWorkspaceRoute(Workspace& ws, const Request& req, Response& res);
  void DeleteWorkspaceRoute(Workspace& ws, const Request& req, Response& res);
};

}  // namespace grag
