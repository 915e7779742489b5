// grag serve: routes, their one declaration, and the mapping from engine results to HTTP.
#include "grag/server.h"

#include <httplib.h>
#include <nettle/memops.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <condition_variable>
#include <thread>
#include <utility>

#include "grag/engine.h"
#include "grag/engine_json.h"
#include "grag/hash.h"
#include "grag/log.h"
#include "server_internal.h"

namespace grag {

int HttpStatusFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return 200;
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kParse:
      return 400;
    case ErrorCode::kPermissionDenied:
      return 403;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAlreadyExists:
      return 409;
    case ErrorCode::kCancelled:
      return 409;
    case ErrorCode::kRateLimited:
      return 429;
    case ErrorCode::kResourceExhausted:
      return 402;  // the configured spending budget (not a rate limit: retrying will not help)
    case ErrorCode::kUnimplemented:
      return 501;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kTimeout:
      return 504;
    case ErrorCode::kIoError:
    case ErrorCode::kCorruption:
    case ErrorCode::kInternal:
      return 500;
  }
  return 500;
}

std::string_view ErrorTypeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "ok";
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kParse:
      return "parse_error";
    case ErrorCode::kPermissionDenied:
      return "permission_denied";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kAlreadyExists:
      return "conflict";
    case ErrorCode::kCancelled:
      return "cancelled";
    case ErrorCode::kRateLimited:
      return "rate_limited";
    case ErrorCode::kResourceExhausted:
      return "budget_exhausted";
    case ErrorCode::kUnimplemented:
      return "unimplemented";
    case ErrorCode::kUnavailable:
      return "unavailable";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kIoError:
      return "io_error";
    case ErrorCode::kCorruption:
      return "corruption";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "internal";
}

namespace server_internal {

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// ---------------------------------------------------------------- responses

void SendJson(Response& res, int status, std::string body) {
  res.status = status;
  res.set_content(std::move(body), kJson);
}

json ErrorObject(const Status& s) {
  return {{"error",
           {{
                "type",
                ErrorTypeName(s.code()),
            },
            {"message", s.message()}}}};
}

void SendError(Response& res, const Status& s) {
  SendJson(res, HttpStatusFor(s.code()), Dump(ErrorObject(s)));
}

// ---------------------------------------------------------------- request bodies

Result<json> ParseBody(const Request& req, bool allow_empty) {
  if (req.body.empty()) {
    if (allow_empty) return json::object();
    return Status::InvalidArgument("this route needs a JSON body");
  }
  json j = json::parse(req.body, nullptr, false);
  if (j.is_discarded()) return Status::InvalidArgument("request body is not valid JSON");
  if (!j.is_object()) return Status::InvalidArgument("request body must be a JSON object");
  return j;
}

Result<std::optional<std::string>> OptString(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string())
    return Status::InvalidArgument(std::string("\"") + key + "\" must be a string");
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::string> NeedString(const json& j, const char* key) {
  GRAG_ASSIGN_OR_RETURN(std::optional<std::string> v, OptString(j, key));
  if (!v || v->empty()) return Status::InvalidArgument(std::string("\"") + key + "\" is required");
  return *v;
}

Result<std::optional<int64_t>> OptInt(const json& j, const char* key, int64_t lo, int64_t hi) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer())
    return Status::InvalidArgument(std::string("\"") + key + "\" must be an integer");
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    return Status::InvalidArgument(std::string("\"") + key + "\" must be between " +
                                   std::to_string(lo) + " and " + std::to_string(hi));
  }
  return std::optional<int64_t>(v);
}

Result<bool> OptBool(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    return Status::InvalidArgument(std::string("\"") + key + "\" must be true or false");
  return it->get<bool>();
}

Result<std::optional<int64_t>> QueryInt(const Request& req, const char* key, int64_t lo,
                                        int64_t hi) {
  if (!req.has_param(key)) return std::optional<int64_t>();
  const std::string text = req.get_param_value(key);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi) {
    return Status::InvalidArgument(std::string("query parameter ") + key +
                                   " must be an integer from " + std::to_string(lo) + " to " +
                                   std::to_string(hi));
  }
  return std::optional<int64_t>(v);
}

// ---------------------------------------------------------------- Server-Sent Events

std::string SseEvent(std::string_view event, std::string_view data) {
  std::string out;
  if (!event.empty()) out += "event: " + std::string(event) + "\n";
  out += "data: ";
  out += data;
  out += "\n\n";
  return out;
}

bool SinkWrite(httplib::DataSink& sink, const std::string& s) {
  return sink.is_writable() && sink.write(s.data(), s.size());
}

}  // namespace server_internal

namespace {

// cpp-httplib as Debian builds it listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG is
// compiled into the shared library): a burst of new clients overflows it and the kernel drops
// their connections. listen() again on the bound socket raises the backlog; the library does
// not hand out the socket, so it is found among this process's descriptors by its port.
void RaiseListenBacklog(int port, int backlog) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    int accepting = 0;
    socklen_t len = sizeof accepting;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || accepting == 0)
      continue;
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0) continue;
    int bound = -1;
    if (addr.ss_family == AF_INET) bound = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6)
      bound = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    if (bound == port && ::listen(fd, backlog) != 0) {
      Log(LogLevel::kWarn, "serve",
          "could not raise the listen backlog: " + std::string(std::strerror(errno)));
    }
  }
}

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() {
  if (impl_) {
    for (auto& ws : impl_->OpenWorkspaces()) ws->jobs->CancelAndJoin();
  }
}

Result<std::unique_ptr<Server>> Server::Create(Config config) {
  GRAG_RETURN_IF_ERROR(ValidateConfig(config));
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  const ServerConfig& sc = impl->config.server;
  int64_t workers =
      sc.workers > 0 ? sc.workers : std::max<int64_t>(1, std::thread::hardware_concurrency());
  impl->workers = std::make_unique<FairSlots>(workers);
  impl->worker_count = workers;
  impl->max_body = static_cast<size_t>(sc.max_body_mb) << 20;
  impl->main = impl->MakeWorkspace(std::string(kDefaultWorkspace), impl->config);
  for (const auto& asset : server::WebAssets()) {
    impl->web_etags[asset.name] = "\"" + Sha256Hex(asset.bytes).substr(0, 32) + "\"";
  }
  impl->DeclareRoutes();
  impl->Register();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Status Server::Run(const std::function<void(const std::string& host, int port)>& on_listening) {
  Impl& s = *impl_;
  const ServerConfig& sc = s.config.server;
  int port = static_cast<int>(sc.port);
  if (port == 0) {
    port = s.http.bind_to_any_port(sc.host);
    if (port < 0) return Status::Unavailable("cannot listen on " + sc.host + " (any port)");
  } else if (!s.http.bind_to_port(sc.host, port)) {
    return Status::Unavailable("cannot listen on " + sc.host + ":" + std::to_string(port) +
                               " (in use, or not an address of this machine)");
  }
  RaiseListenBacklog(port, std::max<int>(1024, static_cast<int>(sc.threads) * 4));
  server::ConnectionLimits limits;
  limits.threads = static_cast<size_t>(sc.threads);
  auto ms = [](double seconds) {
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  };
  limits.read_timeout = ms(sc.read_timeout);
  limits.write_timeout = ms(sc.request_timeout);
  limits.keep_alive_timeout = ms(sc.keep_alive_timeout);
  limits.keep_alive_max = static_cast<size_t>(sc.keep_alive_max);
  limits.max_per_client = static_cast<size_t>(sc.max_connections_per_client);
  limits.max_body = s.max_body;
  s.http.SetLimits(limits);
  struct StopConnections {
    server::HttpServer& http;
    ~StopConnections() { http.StopConnections(); }  // requests in flight finish first
  } stop_connections{s.http};
  if (!IsLoopback(sc.host) && sc.api_keys.empty()) {
    Log(LogLevel::kWarn, "serve",
        "listening on " + sc.host +
            " without API keys: anyone who can reach this port can read "
            "and change the index (set server.api_keys or GRAG_API_KEYS)");
  }
  if (on_listening) on_listening(sc.host, port);
  if (s.stopping) return Status::Ok();
  if (!s.http.listen_after_bind() && !s.stopping) {
    return Status::Unavailable("the HTTP server stopped unexpectedly");
  }
  return Status::Ok();
}

void Server::Shutdown() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  Log(LogLevel::kInfo, "serve",
      "shutting down: stopping the index job, if any, and finishing requests in flight");
  for (auto& ws : s.OpenWorkspaces()) ws->jobs->CancelAndJoin();
  s.http.stop();
}

std::string Server::OpenApiJson() const { return impl_->OpenApi(); }

// ---------------------------------------------------------------- handlers

void Server::Impl::MetricsText(Workspace&, const Request&, Response& res) {
  LlmUsage query, spent;
  int64_t loaded = 0, running = 0;
  for (auto& ws : OpenWorkspaces()) {
    {
      std::lock_guard<std::mutex> lock(ws->reader_mu);
      query += ws->ReaderUsage();
      loaded += ws->reader != nullptr ? 1 : 0;
    }
    spent += ws->jobs->Spent();
    running += ws->jobs->Running() ? 1 : 0;
  }
  const std::vector<server::GaugeValue> gauges = {
      {"grag_index_job_running", "Index jobs running (one per workspace at most)",
       static_cast<double>(running)},
      {"grag_index_loaded",
       "Read engines open (graph and vectors in memory), one per loaded workspace",
       static_cast<double>(loaded)},
      {"grag_query_workers", "Questions answered at once at most (server.workers)",
       static_cast<double>(worker_count)},
  };
  res.status = 200;
  res.set_content(metrics.Render(query, spent, gauges), "text/plain; version=0.0.4; charset=utf-8");
}

void Server::Impl::Health(Workspace& ws, const Request&, Response& res) {
  // A PostgreSQL index lives on another server, which can go away while this one runs: then
  // nothing can be answered, and /health says so (503) rather than "ok".
  if (!config.store.url.empty()) {
    if (Status store = ws.ProbeStore(); !store.ok()) {
      SendJson(res, 503,
               Dump({{"status", "unavailable"},
                     {"version", kVersion},
                     {"store", "unreachable"},
                     {"error", store.message()},
                     {"job_running", ws.jobs->Running()}}));
      return;
    }
  }
  bool loaded = false;
  json version;  // what the read engine answers from (Engine::IndexVersion); null: not open
  {
    std::lock_guard<std::mutex> lock(ws.reader_mu);
    loaded = ws.reader != nullptr;
    if (ws.reader) version = ws.reader_version;
  }
  if (!loaded) {
    std::error_code ec;
    loaded =
        !config.store.url.empty() || std::filesystem::exists(config.Resolve(config.store.path), ec);
  }
  SendJson(res, 200,
           Dump({{"status", "ok"},
                 {"version", kVersion},
                 {"index_loaded", loaded},
                 {"index_version", version},
                 {"job_running", ws.jobs->Running()}}));
}

void Server::Impl::SendWebAsset(const server::WebAsset& asset, const Request& req, Response& res) {
  // The bytes are fixed for the life of the binary: their hash is the validator.
  const auto found = web_etags.find(asset.name);
  const std::string etag = found == web_etags.end() ? std::string() : found->second;
  res.set_header("ETag", etag);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
  if (asset.name == "index.html") {
    // Everything the page loads comes from this server: no CDN, no inline script.
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' data: blob:; style-src 'self' "
                   "'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'");
  }
  if (req.get_header_value("If-None-Match") == etag) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.set_content(std::string(asset.bytes), std::string(asset.mime));
}

void Server::Impl::WebUi(Workspace&, const Request& req, Response& res) {
  for (const auto& asset : server::WebAssets()) {
    if (asset.name == "index.html") return SendWebAsset(asset, req, res);
  }
  SendError(res, Status::NotFound("this grag was built without its web UI"));
}

void Server::Impl::ApiDocs(Workspace&, const Request& req, Response& res) {
  for (const auto& asset : server::WebAssets()) {
    if (asset.name == "api-docs.html") return SendWebAsset(asset, req, res);
  }
  SendError(res, Status::NotFound("this grag was built without its web UI"));
}

void Server::Impl::WebFile(Workspace&, const Request& req, Response& res) {
  const std::string name = req.matches[1];
  for (const auto& asset : server::WebAssets()) {
    if (asset.name == name) return SendWebAsset(asset, req, res);
  }
  SendError(res, Status::NotFound("no web UI file \"" + name + "\""));
}

namespace {

// `config`: its server.query_models are the models a request may ask for.
Result<QueryRequest> ParseQuery(const json& body, const Config& config) {
  QueryRequest q;
  GRAG_ASSIGN_OR_RETURN(q.question, NeedString(body, "question"));
  GRAG_ASSIGN_OR_RETURN(std::optional<std::string> method, OptString(body, "method"));
  if (method) {
    GRAG_ASSIGN_OR_RETURN(q.method, ParseQueryMethod(*method));
  }
  GRAG_ASSIGN_OR_RETURN(q.level, OptInt(body, "level", kLevelRange.min, kLevelRange.max));
  GRAG_ASSIGN_OR_RETURN(q.top_k, OptInt(body, "k", kTopKRange.min, kTopKRange.max));
  GRAG_ASSIGN_OR_RETURN(q.budget, OptInt(body, "budget", kBudgetRange.min, kBudgetRange.max));
  GRAG_ASSIGN_OR_RETURN(std::optional<std::string> model, OptString(body, "model"));
  if (model && !model->empty()) {
    GRAG_RETURN_IF_ERROR(CheckOfferedModel(config, *model));
    q.model = *model;
  }
  return q;
}

}  // namespace

void Server::Impl::Query(Workspace& ws, const Request& req, Response& res) {
  auto body = ParseBody(req, false);
  if (!body.ok()) return SendError(res, body.status());
  auto q = ParseQuery(*body, ws.config);
  if (!q.ok()) return SendError(res, q.status());
  auto stream = OptBool(*body, "stream", false);
  if (!stream.ok()) return SendError(res, stream.status());
  if (!body->contains("method")) {  // as grag query: the configured default
    auto m = ParseQueryMethod(ws.config.query.method);
    if (m.ok()) q->method = *m;
  }
  auto engine = ws.Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  if (!*stream) {
    auto result = Ask(ws, **engine, *q);
    if (!result.ok()) return SendError(res, result.status());
    return SendJson(res, 200, QueryResultJson(*result, q->question, false));
  }
  auto request = std::make_shared<QueryRequest>(std::move(*q));
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [this, ws = ws.shared_from_this(), request, engine = *engine](
                               size_t, httplib::DataSink& sink) {
        bool open = true;
        bool streamed = false;
        std::atomic<bool> gone{false};  // the asker disconnected: stop the question
        request->cancel = &gone;
        request->on_answer_delta = [&](std::string_view d) {
          streamed = true;
          if (open) open = SinkWrite(sink, SseEvent("delta", Dump({{"text", d}})));
          if (!open) gone = true;
        };
        auto result = [&] {
          DisconnectWatch watch(sink, gone);
          return Ask(*ws, *engine, *request);
        }();
        if (!open || gone) return false;
        if (result.ok()) {
          // An answer written without a model (extractive) arrives whole: one delta.
          if (!streamed && !result->answer.empty()) {
            SinkWrite(sink, SseEvent("delta", Dump({{"text", result->answer}})));
          }
          SinkWrite(sink, SseEvent("result", QueryResultJson(*result, request->question, false)));
        } else {
          SinkWrite(sink, SseEvent("error", Dump(ErrorObject(result.status()))));
        }
        sink.done();
        return true;
      });
}

void Server::Impl::Search(Workspace& ws, const Request& req, Response& res) {
  auto body = ParseBody(req, false);
  if (!body.ok()) return SendError(res, body.status());
  SearchRequest s;
  auto question = NeedString(*body, "question");
  if (!question.ok()) return SendError(res, question.status());
  s.question = *question;
  auto method = OptString(*body, "method");
  if (!method.ok()) return SendError(res, method.status());
  if (*method) {
    auto m = ParseRetrievalMethod(**method);
    if (!m.ok()) return SendError(res, m.status());
    s.method = *m;
  }
  auto k = OptInt(*body, "k", kTopKRange.min, kTopKRange.max);
  if (!k.ok()) return SendError(res, k.status());
  s.top_k = *k;
  auto engine = ws.Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto result = WithWorker(ws, [&] { return (*engine)->Search(s); });
  if (!result.ok()) return SendError(res, result.status());
  SendJson(res, 200, RetrievalResultJson(*result, s.question, false));
}

void Server::Impl::Stats(Workspace& ws, const Request& req, Response& res) {
  auto top = QueryInt(req, "top", 0, 10000);
  if (!top.ok()) return SendError(res, top.status());
  auto engine = ws.Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto stats = (*engine)->Stats(top->value_or(10));
  if (!stats.ok()) return SendError(res, stats.status());
  SendJson(res, 200, IndexStatsJson(*stats, false));
}

void Server::Impl::Doctor(Workspace& ws, const Request&, Response& res) {
  auto report = RunDoctor(ws.config, {});
  if (!report.ok()) return SendError(res, report.status());
  SendJson(res, 200, DoctorJson(*report, false));
}

}  // namespace grag
