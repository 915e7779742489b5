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
#include "grag/input_files.h"
#include "grag/lexical_embedder.h"
#include "grag/loader.h"
#include "grag/log.h"
#include "grag/words.h"
#include "connections.h"
#include "jobs.h"
#include "metrics.h"
#include "web_assets.h"

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

namespace {

using httplib::Request;
using httplib::Response;
using nlohmann::json;

constexpr const char* kVersion = GRAG_VERSION;
constexpr const char* kJson = "application/json";

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

// Body of an error httplib itself raised (no route, body too large, bad request line).
Status StatusForHttp(int status, const Request& req, size_t max_body) {
  switch (status) {
    case 404:
      return Status::NotFound("no route " + req.method + " " + req.path +
                              " (see GET /openapi.json)");
    case 413:
      return {ErrorCode::kInvalidArgument, "request body larger than server.max_body_mb (" +
                                               std::to_string(max_body >> 20) + " MiB)"};
    case 400:
      return Status::InvalidArgument("malformed HTTP request");
    case 408:
      return {ErrorCode::kTimeout, "the request did not arrive within server.read_timeout"};
    default:
      return {ErrorCode::kInternal, "HTTP " + std::to_string(status)};
  }
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

// The {name} parameters of a path template, with their positions.
struct PathParam {
  size_t begin, end;  // of "{name}"
  std::string name;
};
std::vector<PathParam> PathParams(const std::string& path) {
  std::vector<PathParam> out;
  for (size_t open = path.find('{'); open != std::string::npos; open = path.find('{', open + 1)) {
    const size_t close = path.find('}', open);
    if (close == std::string::npos) break;
    out.push_back({open, close + 1, path.substr(open + 1, close - open - 1)});
  }
  return out;
}

// The regex httplib matches: {name} is one path segment, except the {id} of a document
// (document ids hold '/': /v1/documents/books/carol.txt/text is books/carol.txt's text). Route
// templates hold no other regex characters.
std::string PathRegex(const std::string& path) {
  std::string out;
  size_t last = 0;
  for (const PathParam& p : PathParams(path)) {
    out += path.substr(last, p.begin - last);
    const bool document = path.rfind("/v1/documents/", 0) == 0 && p.name == "id";
    out += document ? "(.+)" : "([^/]+)";
    last = p.end;
  }
  out += path.substr(last);
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Compare digests so neither the length nor the content leaks through timing.
  const std::string da = Sha256Hex(a), db = Sha256Hex(b);
  return memeql_sec(da.data(), db.data(), da.size()) != 0;
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t filled = 0;
  while (filled < bytes) {
    const ssize_t n = ::getrandom(raw.data() + filled, bytes - filled, 0);
    if (n > 0) {
      filled += static_cast<size_t>(n);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  if (filled < bytes) raw = std::to_string(std::time(nullptr)) + std::to_string(::getpid());
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out.substr(0, bytes * 2);
}

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

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The name in a Host header, lower-cased, without its port or IPv6 brackets:
// "[::1]:8080" -> "::1", "LocalHost:80" -> "localhost".
std::string HostName(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    return Lower(host.substr(1, close == std::string_view::npos ? host.npos : close - 1));
  }
  return Lower(host.substr(0, host.find(':')));
}

bool IsIpAddress(const std::string& name) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, name.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// Whether a request's Host header names this server. A page that turned its own name into this
// machine's address (DNS rebinding) sends its own name, never an IP address, so any address is
// accepted, and names only when they are localhost, the host the server was bound to, or listed
// in server.allowed_hosts. The port is not compared: it cannot tell a rebinding page from an
// ssh tunnel or a proxy.
bool HostAllowed(const std::string& header, const ServerConfig& sc) {
  const std::string name = HostName(header);
  if (name.empty()) return false;
  if (IsIpAddress(name) || name == "localhost" || name == HostName(sc.host)) return true;
  for (const auto& h : sc.allowed_hosts) {
    if (h == "*" || HostName(h) == name) return true;
  }
  return false;
}

// Why a state-changing request (POST, PUT, PATCH, DELETE) must be refused as sent from another
// web site, or "" when it may go on. Browsers name the page's origin in Origin (and modern ones
// say cross-site in Sec-Fetch-Site); programs such as curl send neither.
std::string CrossSiteReason(const Request& req, const ServerConfig& sc) {
  if (req.has_header("Origin")) {
    const std::string origin = req.get_header_value("Origin");
    const std::string host = Lower(req.get_header_value("Host"));
    if (Lower(origin) == "http://" + host || Lower(origin) == "https://" + host) return "";
    for (const auto& o : sc.cors_origins) {
      if (o == "*" || o == origin) return "";
    }
    return "a web page from " + origin +
           " may not change or query this server (list its origin in server.cors_origins to "
           "allow it)";
  }
  const std::string site = req.get_header_value("Sec-Fetch-Site");
  if (site == "cross-site" || site == "same-site") {
    return "a web page from another site may not change or query this server";
  }
  return "";
}

// Whether a request with a body says it is JSON (or, where uploads are taken, multipart). A
// browser sends text/plain, urlencoded and multipart forms to any site without asking it first
// (a CORS "simple request"); JSON needs the server's consent.
bool BodyTypeAllowed(const Request& req) {
  const bool has_body =
      req.has_header("Transfer-Encoding") ||
      (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
  if (!has_body) return true;
  std::string type = Lower(req.get_header_value("Content-Type"));
  type = type.substr(0, type.find(';'));
  while (!type.empty() && type.back() == ' ') type.pop_back();
  if (type == "application/json") return true;
  return type == "multipart/form-data" && req.method == "POST" && req.path == "/v1/documents";
}

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The chat model names of the OpenAI-compatible endpoint and the method each picks.
const std::vector<std::pair<std::string, QueryMethod>>& ChatModels() {
  static const std::vector<std::pair<std::string, QueryMethod>> models = [] {
    std::vector<std::pair<std::string, QueryMethod>> out;
    for (QueryMethod m : kQueryMethods) {
      out.emplace_back("grag-" + std::string(QueryMethodName(m)), m);
    }
    return out;
  }();
  return models;
}

// "Sources:" lines for a chat answer, from the citations of a query's JSON.
std::string SourcesText(const json& result) {
  auto it = result.find("citations");
  if (it == result.end() || !it->is_array() || it->empty()) return "";
  std::string out = "\n\nSources:";
  for (const auto& c : *it) {
    out += "\n- ";
    if (c.contains("community")) {
      out += "[" + std::to_string(c.value("community", int64_t{0})) + "] " + c.value("title", "") +
             " (community report, level " + std::to_string(c.value("level", int64_t{0})) + ")";
    } else if (c.contains("chunk_id")) {
      out += "[" + c.value("id", "") + "] chunk " +
             std::to_string(c.value("chunk_index", int64_t{0})) + " of " +
             c.value("document_id", "");
    } else {
      out += "[" + c.value("id", "") + "] " + c.value("source", "");
    }
    // The passage, in characters of its document: carol.txt:10234-10391 "Marley was dead: …"
    auto spans = c.find("spans");
    if (spans != c.end() && spans->is_array() && !spans->empty()) {
      const json& s = spans->front();
      out += ": " + s.value("document_id", "") + ":" +
             std::to_string(s.value("start", int64_t{0})) + "-" +
             std::to_string(s.value("end", int64_t{0})) + " \"" +
             ShortenAtWord(s.value("text", ""), 60) + "\"";
    }
  }
  return out;
}

// Prompt and completion tokens of a query's JSON (0 when no model wrote the answer).
std::pair<int64_t, int64_t> UsageOf(const json& result) {
  const json& s = result.contains("stats") ? result["stats"] : json::object();
  if (s.contains("tokens_in"))
    return {s.value("tokens_in", int64_t{0}), s.value("tokens_out", int64_t{0})};
  return {s.value("prompt_tokens", int64_t{0}), s.value("completion_tokens", int64_t{0})};
}

}  // namespace

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

// ---------------------------------------------------------------- the server

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

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Server::~Server() {
  if (impl_) impl_->jobs->CancelAndJoin();
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
  Impl* raw = impl.get();
  impl->jobs = std::make_unique<server::JobManager>([raw](server::JobState state) {
    raw->metrics.ObserveJob(server::JobStateName(state));
    raw->ReloadReader();
  });
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
  s.jobs->CancelAndJoin();
  s.http.stop();
}

std::string Server::OpenApiJson() const { return impl_->OpenApi(); }

// ---------------------------------------------------------------- routes

void Server::Impl::DeclareRoutes() {
  auto bind = [this](void (Impl::*m)(const Request&, Response&)) {
    return [this, m](const Request& req, Response& res) { (this->*m)(req, res); };
  };
  const char* query_body = R"json({"type":"object","required":["question"],"properties":{
    "question":{"type":"string"},
    "method":{"type":"string","enum":["auto","global","local","basic","hybrid","drift","lazy"],"description":"drift needs a chat model: a primer over the reports, follow-ups answered locally, one reduce; lazy: budgeted search for indexes built without a model"},
    "level":{"type":"integer","minimum":0,"description":"global: community level"},
    "budget":{"type":"integer","minimum":1,"maximum":1000,"description":"lazy: relevance-test calls at most (default lazy.budget)"},
    "k":{"type":"integer","minimum":1,"maximum":1000,"description":"local: matched entities; basic, hybrid: passages"},
    "model":{"type":"string","description":"the model that answers, one of server.query_models (default: llm.query.model, else llm.model)"},
    "stream":{"type":"boolean","description":"send the answer as Server-Sent Events (delta, then result)"}}})json";
  const char* search_body = R"json({"type":"object","required":["question"],"properties":{
    "question":{"type":"string"},
    "method":{"type":"string","enum":["hybrid","vector","bm25","graph"]},
    "k":{"type":"integer","minimum":1,"maximum":1000}}})json";
  const char* document_body = R"json({"type":"object","required":["text"],"properties":{
    "id":{"type":"string","description":"path inside the input folder, e.g. notes/meeting.md (default: from the title, else doc-<hash>.txt)"},
    "title":{"type":"string"},
    "text":{"type":"string"}}})json";
  const char* index_body = R"json({"type":"object","properties":{
    "remove":{"type":"array","items":{"type":"string"},"description":"ids of documents to remove from the index (otherwise the index follows the input folder)"}}})json";
  static const std::string chat_body_text =
      R"json({"type":"object","required":["messages"],"properties":{
    "model":{"type":"string","description":"the method: )json" +
      QueryMethodNames(", ", "grag-") +
      R"json(; each may be followed by /MODEL, one of server.query_models, the model that writes the answer (GET /v1/models lists them all)"},
    "messages":{"type":"array","items":{"type":"object"}},
    "stream":{"type":"boolean"}}})json";
  const char* chat_body = chat_body_text.c_str();
  routes = {
      {"GET",
       "/health",
       "Liveness: whether an index is loaded and a job is running; 503 when the index's "
       "PostgreSQL server does not answer",
       false,
       {},
       nullptr,
       "{status, version, index_loaded, index_version, job_running}",
       bind(&Impl::Health)},
      {"GET",
       "/docs",
       "This API's reference (Swagger UI over /openapi.json), to read and try the routes",
       false,
       {},
       nullptr,
       "text/html",
       bind(&Impl::ApiDocs)},
      {"GET",
       "/metrics",
       "Prometheus metrics: requests by route and status with latency histograms, questions by "
       "method, index jobs, model calls and tokens (query and index), process CPU, memory and "
       "file descriptors; needs a key when keys are set",
       true,
       {},
       nullptr,
       "text/plain (Prometheus text format 0.0.4)",
       bind(&Impl::MetricsText)},
      {"GET",
       "/",
       "The web UI (ask, graph, communities, documents); it asks for the API key when one is set",
       false,
       {},
       nullptr,
       "text/html",
       bind(&Impl::WebUi)},
      {"GET",
       "/ui/{name}",
       "The web UI's files (scripts, styles, the graph library), embedded in grag",
       false,
       {},
       nullptr,
       "the file",
       bind(&Impl::WebFile)},
      {"GET",
       "/openapi.json",
       "This API as OpenAPI 3 (no key needed: /docs reads it before you authorize, and it holds "
       "nothing but what docs/server.md says)",
       false,
       {},
       nullptr,
       "OpenAPI document",
       [this](const Request&, Response& res) { SendJson(res, 200, OpenApi()); }},
      {"POST",
       "/v1/query",
       "Answer a question (the same JSON as grag query --json)",
       true,
       {},
       query_body,
       "query result, or text/event-stream with stream:true",
       bind(&Impl::Query)},
      {"POST",
       "/v1/search",
       "Rank passages for a question (as grag search --json)",
       true,
       {},
       search_body,
       "ranked chunks",
       bind(&Impl::Search)},
      {"GET",
       "/v1/stats",
       "What the index holds and what it cost (grag stats --json)",
       true,
       {{"top", "integer", "top entities listed (default 10)"}},
       nullptr,
       "stats",
       bind(&Impl::Stats)},
      {"GET",
       "/v1/doctor",
       "Try the configured models once (an extraction, an answer, an embedding) and say what to "
       "change (grag doctor --json); sends real requests, never from the reply cache",
       true,
       {},
       nullptr,
       "doctor report",
       bind(&Impl::Doctor)},
      {"GET",
       "/v1/documents",
       "Indexed documents",
       true,
       {},
       nullptr,
       "documents",
       bind(&Impl::ListDocuments)},
      {"POST",
       "/v1/documents",
       "Save a document into the input folder (JSON {id?, title?, text} or a multipart upload "
       "with a file field); POST /v1/index indexes it",
       true,
       {},
       document_body,
       "{id, path, replaced, indexed:false}",
       bind(&Impl::PostDocument)},
      // Before /v1/documents/{id}, whose pattern also matches this one's paths.
      {"GET",
       "/v1/documents/{id}/text",
       "An indexed document's text, the one citation spans' offsets (code points) index: read "
       "again from its file, or the indexed text with file:\"changed\"|\"missing\" and a note "
       "when the file no longer holds it",
       true,
       {},
       nullptr,
       "{id, title, source_path, content_hash, file, note, characters, bytes, text}",
       bind(&Impl::GetDocumentText)},
      {"GET",
       "/v1/documents/{id}",
       "One indexed document: text and chunks",
       true,
       {},
       nullptr,
       "document",
       bind(&Impl::GetDocument)},
      {"DELETE",
       "/v1/documents/{id}",
       "Delete a document's file from the input folder; the next index job drops it",
       true,
       {},
       nullptr,
       "{id, deleted}",
       bind(&Impl::DeleteDocument)},
      {"POST",
       "/v1/index",
       "Start an index job bringing the index in line with the input folder (409 while one runs)",
       true,
       {},
       index_body,
       "job (202)",
       bind(&Impl::StartIndex)},
      {"GET",
       "/v1/jobs/{id}",
       "An index job: state, stage, done/total, LLM calls, tokens, ETA",
       true,
       {},
       nullptr,
       "job",
       bind(&Impl::GetJob)},
      {"GET",
       "/v1/jobs/{id}/events",
       "An index job's progress as Server-Sent Events (progress, then done)",
       true,
       {},
       nullptr,
       "text/event-stream",
       bind(&Impl::JobEvents)},
      {"GET",
       "/v1/jobs",
       "The recent index jobs, newest first (the running one, if any, is first)",
       true,
       {},
       nullptr,
       "jobs",
       bind(&Impl::ListJobs)},
      {"DELETE",
       "/v1/jobs/{id}",
       "Cancel an index job (it stops cleanly and resumes next time)",
       true,
       {},
       nullptr,
       "job",
       bind(&Impl::CancelJob)},
      {"GET",
       "/v1/entities",
       "Entities, highest degree first",
       true,
       {{"search", "string", "part of a name or alias"},
        {"limit", "integer", "at most this many (default 50)"}},
       nullptr,
       "entities",
       bind(&Impl::ListEntities)},
      {"GET",
       "/v1/entities/{id}",
       "One entity (by id, or by name when not a number): description, neighbours, communities, "
       "source chunks",
       true,
       {{"neighbours", "integer", "at most (default 50)"},
        {"chunks", "integer", "at most (default 20)"}},
       nullptr,
       "entity",
       bind(&Impl::GetEntity)},
      {"GET",
       "/v1/graph",
       "The graph to draw: the entities of highest degree (or one entity and its heaviest "
       "neighbours) with their community at a level, and the relationships among them",
       true,
       {{"limit", "integer", "entities at most (with around: neighbours; default 200)"},
        {"level", "integer", "community level the nodes carry (default 0)"},
        {"around", "integer", "an entity id: it and its neighbours instead of the top entities"}},
       nullptr,
       "{nodes, edges, entities_total, relationships_total, level, levels}",
       bind(&Impl::Graph)},
      {"GET",
       "/v1/relationships",
       "Relationships, heaviest first",
       true,
       {{"entity", "integer", "only those touching this entity id"},
        {"limit", "integer", "at most this many (default 100)"}},
       nullptr,
       "relationships",
       bind(&Impl::ListRelationships)},
      {"GET",
       "/v1/communities",
       "Communities by level, with their report's title and summary",
       true,
       {{"level", "integer", "only this level"}},
       nullptr,
       "communities",
       bind(&Impl::ListCommunities)},
      {"GET",
       "/v1/communities/{id}",
       "One community: full report, members, child communities",
       true,
       {},
       nullptr,
       "community",
       bind(&Impl::GetCommunity)},
      {"GET",
       "/v1/chunks/{id}",
       "One chunk's text",
       true,
       {},
       nullptr,
       "chunk",
       bind(&Impl::GetChunk)},
      {"GET",
       "/v1/models",
       "OpenAI-compatible: the chat models (one per query method)",
       true,
       {},
       nullptr,
       "model list",
       bind(&Impl::Models)},
      {"POST",
       "/v1/chat/completions",
       "OpenAI-compatible chat: the last user message is the question, the model picks the method",
       true,
       {},
       chat_body,
       "chat.completion, or chat.completion.chunk events",
       bind(&Impl::ChatCompletions)},
  };
}

void Server::Impl::Register() {
  const ServerConfig& sc = config.server;
  // Connections are kept by server::HttpServer (connections.h), which takes its limits in Run;
  // these settings are what cpp-httplib itself enforces or states in its replies.
  http.set_payload_max_length(max_body);
  http.set_keep_alive_timeout(static_cast<time_t>(std::ceil(sc.keep_alive_timeout)));
  http.set_keep_alive_max_count(static_cast<size_t>(sc.keep_alive_max));
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second server on the
  // same port binds without error and the kernel splits the connections between the two.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // Replies go out at once: with Nagle's algorithm a keep-alive client waited ~40 ms per reply
  // for the delayed acknowledgement of the previous one.
  http.set_tcp_nodelay(true);

  auto cors_origin = [this](const Request& req) -> std::string {
    const auto& origins = config.server.cors_origins;
    if (origins.empty() || !req.has_header("Origin")) return "";
    const std::string origin = req.get_header_value("Origin");
    for (const auto& o : origins) {
      if (o == "*" || o == origin) return o == "*" ? "*" : origin;
    }
    return "";
  };
  auto refuse = [](Response& res, int status, const char* type, const std::string& message) {
    SendJson(res, status, Dump({{"error", {{"type", type}, {"message", message}}}}));
    // Refused before its body was read: the connection cannot carry another request.
    if (server::RequestState* state = server::CurrentRequest()) state->close = true;
    res.set_header("Connection", "close");
    return httplib::Server::HandlerResponse::Handled;
  };
  http.set_pre_routing_handler([this, cors_origin, refuse](const Request& req, Response& res) {
    const ServerConfig& settings = config.server;
    if (!HostAllowed(req.get_header_value("Host"), settings)) {
      return refuse(res, 421, "misdirected_request",
                    "this server does not answer to the host name \"" +
                        req.get_header_value("Host") +
                        "\": use its address or localhost, or list the name in "
                        "server.allowed_hosts");
    }
    if (const std::string origin = cors_origin(req); !origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", origin);
      res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
        res.set_header("Access-Control-Max-Age", "600");
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
        req.method == "DELETE") {
      if (const std::string why = CrossSiteReason(req, settings); !why.empty()) {
        return refuse(res, 403, "forbidden", why);
      }
      if (!BodyTypeAllowed(req)) {
        return refuse(res, 415, "unsupported_media_type",
                      "send the body as JSON with Content-Type: application/json (curl: --json "
                      "'{...}'), or a file as multipart/form-data to POST /v1/documents");
      }
    }
    const auto& keys = settings.api_keys;
    if (!keys.empty() && !IsPublic(req.path)) {
      const std::string auth = req.get_header_value("Authorization");
      bool ok = false;
      // The scheme name is case-insensitive (RFC 9110 §11.1): "bearer KEY" is the same.
      if (auth.size() > 7 && Lower(std::string_view(auth).substr(0, 7)) == "bearer ") {
        const std::string_view given = std::string_view(auth).substr(7);
        for (const auto& k : keys) ok = ConstantTimeEquals(given, k) || ok;  // no early exit
      }
      if (!ok) {
        res.set_header("WWW-Authenticate", "Bearer");
        SendJson(
            res, 401,
            Dump({{"error",
                   {{"type", "unauthorized"},
                    {"message", "missing or wrong API key: send Authorization: Bearer KEY"}}}}));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_error_handler([this](const Request& req, Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return;
    // cpp-httplib reports any failed body read as 400; the connection layer knows why.
    if (const server::RequestState* state = server::CurrentRequest(); state && res.status == 400) {
      if (state->body_over_limit) res.status = 413;
      if (state->timed_out) res.status = 408;
    }
    SendJson(res, res.status, Dump(ErrorObject(StatusForHttp(res.status, req, max_body))));
  });
  http.set_exception_handler([](const Request&, Response& res, std::exception_ptr ep) {
    std::string what = "unknown";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    Log(LogLevel::kError, "serve", "internal error: " + what);
    SendError(res, Status::Internal("internal error: " + what));
  });
  http.set_logger([](const Request& req, const Response& res) {
    Log(LogLevel::kDebug, "serve",
        req.method + " " + req.path + " -> " + std::to_string(res.status));
  });

  for (const Route& r : routes) {
    const std::string pattern = PathRegex(r.path);
    const std::string method = r.method;
    // Each request a route answers is counted and timed (GET /metrics), by the route's template.
    auto handler = [this, route = std::string(r.path), method, inner = r.handler](
                       const Request& req, Response& res) {
      metrics.AddInFlight(1);
      const auto start = std::chrono::steady_clock::now();
      struct Observe {
        Impl* impl;
        const std::string& route;
        const std::string& method;
        Response& res;
        std::chrono::steady_clock::time_point start;
        ~Observe() {
          impl->metrics.AddInFlight(-1);
          impl->metrics.ObserveRequest(
              route, method, res.status,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
      } observe{this, route, method, res, start};
      inner(req, res);
    };
    if (method == "GET")
      http.Get(pattern, handler);
    else if (method == "POST")
      http.Post(pattern, handler);
    else if (method == "DELETE")
      http.Delete(pattern, handler);
  }
}

bool Server::Impl::IsPublic(const std::string& path) const {
  for (const Route& r : routes) {
    if (r.auth) continue;
    const std::string_view t = r.path;
    const size_t brace = t.find('{');
    if (brace == std::string_view::npos) {
      if (path == t) return true;
    } else if (path.size() > brace &&
               std::string_view(path).substr(0, brace) == t.substr(0, brace) &&
               path.find('/', brace) == std::string::npos) {
      return true;  // one segment in place of the parameter
    }
  }
  return false;
}

std::string Server::Impl::OpenApi() const {
  json paths = json::object();
  for (const Route& r : routes) {
    json op = {{"summary", r.summary}};
    json params = json::array();
    const std::string path = r.path;
    for (const PathParam& p : PathParams(path)) {
      params.push_back(
          {{"name", p.name}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}});
    }
    for (const Param& p : r.query) {
      params.push_back({{"name", p.name},
                        {"in", "query"},
                        {"required", false},
                        {"description", p.description},
                        {"schema", {{"type", p.type}}}});
    }
    if (!params.empty()) op["parameters"] = params;
    if (r.body) {
      op["requestBody"] = {{"required", true},
                           {"content", {{kJson, {{"schema", json::parse(r.body)}}}}}};
    }
    op["responses"] = {
        {"200", {{"description", r.response}}},
        {"default",
         {{"description", "error"},
          {"content", {{kJson, {{"schema", {{"$ref", "#/components/schemas/Error"}}}}}}}}}};
    op["security"] = r.auth ? json::array({{{"bearer", json::array()}}}) : json::array();
    std::string m = r.method;
    for (auto& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    paths[r.path][m] = std::move(op);
  }
  json doc = {{"openapi", "3.0.3"},
              {"info",
               {{"title", "grag"},
                {"version", kVersion},
                {"description",
                 "GraphRAG engine: index documents into an entity graph with community reports, "
                 "then answer questions from it."}}},
              {"paths", paths}};
  json error_schema = {{"type", "object"}};
  error_schema["properties"]["error"] = {{"type", "object"}};
  error_schema["properties"]["error"]["properties"]["type"] = {{"type", "string"}};
  error_schema["properties"]["error"]["properties"]["message"] = {{"type", "string"}};
  doc["components"]["schemas"]["Error"] = error_schema;
  doc["components"]["securitySchemes"]["bearer"] = {{"type", "http"}, {"scheme", "bearer"}};
  return Dump(doc);
}

// ---------------------------------------------------------------- handlers

Status Server::Impl::ProbeStore() {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(probe_mu);
    if (probe_at.time_since_epoch().count() != 0 && now - probe_at < kProbeEvery) {
      return probe_status;
    }
  }
  Status st;
  std::shared_ptr<Engine> current;
  {
    std::lock_guard<std::mutex> lock(reader_mu);
    current = reader;
  }
  // The engine questions use (not reloaded here: that is a question's work), or a new one.
  auto engine = current ? Result<std::shared_ptr<Engine>>(current) : Reader();
  if (engine.ok()) {
    auto version = (*engine)->IndexVersion();  // a read of the runs table: the store answers
    if (!version.ok()) st = version.status();
  } else if (!(engine.status().code() == ErrorCode::kUnavailable &&
               engine.status().message().starts_with("no index yet"))) {
    st = engine.status();  // no index yet is fine: the store answered that
  }
  std::lock_guard<std::mutex> lock(probe_mu);
  probe_at = now;
  probe_status = st;
  return st;
}

void Server::Impl::MetricsText(const Request&, Response& res) {
  LlmUsage query;
  bool loaded = false;
  {
    std::lock_guard<std::mutex> lock(reader_mu);
    query = ReaderUsage();
    loaded = reader != nullptr;
  }
  const std::vector<server::GaugeValue> gauges = {
      {"grag_index_job_running", "1 while an index job runs", jobs->Running() ? 1.0 : 0.0},
      {"grag_index_loaded", "1 once the read engine (graph and vectors) is open",
       loaded ? 1.0 : 0.0},
      {"grag_query_workers", "Questions answered at once at most (server.workers)",
       static_cast<double>(worker_count)},
  };
  res.status = 200;
  res.set_content(metrics.Render(query, jobs->Spent(), gauges),
                  "text/plain; version=0.0.4; charset=utf-8");
}

void Server::Impl::Health(const Request&, Response& res) {
  // A PostgreSQL index lives on another server, which can go away while this one runs: then
  // nothing can be answered, and /health says so (503) rather than "ok".
  if (!config.store.url.empty()) {
    if (Status store = ProbeStore(); !store.ok()) {
      SendJson(res, 503,
               Dump({{"status", "unavailable"},
                     {"version", kVersion},
                     {"store", "unreachable"},
                     {"error", store.message()},
                     {"job_running", jobs->Running()}}));
      return;
    }
  }
  bool loaded = false;
  json version;  // what the read engine answers from (Engine::IndexVersion); null: not open
  {
    std::lock_guard<std::mutex> lock(reader_mu);
    loaded = reader != nullptr;
    if (reader) version = reader_version;
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
                 {"job_running", jobs->Running()}}));
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

void Server::Impl::WebUi(const Request& req, Response& res) {
  for (const auto& asset : server::WebAssets()) {
    if (asset.name == "index.html") return SendWebAsset(asset, req, res);
  }
  SendError(res, Status::NotFound("this grag was built without its web UI"));
}

void Server::Impl::ApiDocs(const Request& req, Response& res) {
  for (const auto& asset : server::WebAssets()) {
    if (asset.name == "api-docs.html") return SendWebAsset(asset, req, res);
  }
  SendError(res, Status::NotFound("this grag was built without its web UI"));
}

void Server::Impl::WebFile(const Request& req, Response& res) {
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
  GRAG_ASSIGN_OR_RETURN(q.level, OptInt(body, "level", 0, 1000));
  GRAG_ASSIGN_OR_RETURN(q.top_k, OptInt(body, "k", 1, 1000));
  GRAG_ASSIGN_OR_RETURN(q.budget, OptInt(body, "budget", 1, 1000));
  GRAG_ASSIGN_OR_RETURN(std::optional<std::string> model, OptString(body, "model"));
  if (model && !model->empty()) {
    GRAG_RETURN_IF_ERROR(CheckOfferedModel(config, *model));
    q.model = *model;
  }
  return q;
}

}  // namespace

void Server::Impl::Query(const Request& req, Response& res) {
  auto body = ParseBody(req, false);
  if (!body.ok()) return SendError(res, body.status());
  auto q = ParseQuery(*body, config);
  if (!q.ok()) return SendError(res, q.status());
  auto stream = OptBool(*body, "stream", false);
  if (!stream.ok()) return SendError(res, stream.status());
  if (!body->contains("method")) {  // as grag query: the configured default
    auto m = ParseQueryMethod(config.query.method);
    if (m.ok()) q->method = *m;
  }
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  if (!*stream) {
    auto result = Ask(**engine, *q);
    if (!result.ok()) return SendError(res, result.status());
    return SendJson(res, 200, QueryResultJson(*result, q->question, false));
  }
  auto request = std::make_shared<QueryRequest>(std::move(*q));
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [this, request, engine = *engine](size_t, httplib::DataSink& sink) {
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
          return Ask(*engine, *request);
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

void Server::Impl::Search(const Request& req, Response& res) {
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
  auto k = OptInt(*body, "k", 1, 1000);
  if (!k.ok()) return SendError(res, k.status());
  s.top_k = *k;
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto result = WithWorker([&] { return (*engine)->Search(s); });
  if (!result.ok()) return SendError(res, result.status());
  const RetrievalMethod used = s.method ? *s.method : (*engine)->SearchOptions().method;
  SendJson(res, 200, RetrievalResultJson(*result, s.question, used, false));
}

void Server::Impl::Stats(const Request& req, Response& res) {
  auto top = QueryInt(req, "top", 0, 10000);
  if (!top.ok()) return SendError(res, top.status());
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto stats = (*engine)->Stats(top->value_or(10));
  if (!stats.ok()) return SendError(res, stats.status());
  SendJson(res, 200, IndexStatsJson(*stats, false));
}

void Server::Impl::Doctor(const Request&, Response& res) {
  auto report = RunDoctor(config, {});
  if (!report.ok()) return SendError(res, report.status());
  SendJson(res, 200, DoctorJson(*report, false));
}

void Server::Impl::ListDocuments(const Request&, Response& res) {
  auto engine = Reader();
  if (!engine.ok()) {
    // Nothing indexed yet is an empty list, not an error.
    if (engine.status().code() == ErrorCode::kUnavailable) return SendJson(res, 200, "[]");
    return SendError(res, engine.status());
  }
  auto docs = (*engine)->Documents();
  if (!docs.ok()) return SendError(res, docs.status());
  SendJson(res, 200, DocumentsJson(*docs, false));
}

void Server::Impl::GetDocument(const Request& req, Response& res) {
  GetDocumentById(req.matches[1], res);
}

void Server::Impl::GetDocumentText(const Request& req, Response& res) {
  const std::string id = req.matches[1];
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto text = (*engine)->GetDocumentText(id);
  if (!text.ok()) return SendError(res, text.status());
  if (!*text) {
    // A document whose own id ends in "/text" is asked for by this route's path too.
    auto whole = (*engine)->GetDocument(id + "/text");
    if (whole.ok() && *whole) return GetDocumentById(id + "/text", res);
    return SendError(res, Status::NotFound("no indexed document \"" + id + "\""));
  }
  SendJson(res, 200, DocumentTextJson(**text, false));
}

void Server::Impl::GetDocumentById(const std::string& id, Response& res) {
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto doc = (*engine)->GetDocument(id);
  if (!doc.ok()) return SendError(res, doc.status());
  if (!*doc) {
    std::error_code ec;
    const bool saved =
        ValidateDocumentId(id).ok() &&
        std::filesystem::is_regular_file(
            std::filesystem::path(config.Resolve(config.input.dir)) / std::filesystem::u8path(id),
            ec);
    return SendError(
        res, Status::NotFound(
                 "no indexed document \"" + id + "\"" +
                 (saved ? " (it is saved in the input folder: start an index job, POST /v1/index)"
                        : "")));
  }
  SendJson(res, 200, DocumentDetailJson(**doc, false));
}

void Server::Impl::PostDocument(const Request& req, Response& res) {
  std::string id, title, text;
  if (req.is_multipart_form_data()) {
    if (!req.has_file("file")) {
      return SendError(res, Status::InvalidArgument("multipart upload needs a \"file\" field"));
    }
    const auto file = req.get_file_value("file");
    text = file.content;
    id = req.has_file("id") ? req.get_file_value("id").content : file.filename;
    if (req.has_file("title")) title = req.get_file_value("title").content;
    // A browser sends a bare file name; keep only the last segment of anything path-like.
    if (!req.has_file("id")) {
      if (auto slash = id.find_last_of("/\\"); slash != std::string::npos)
        id = id.substr(slash + 1);
    }
  } else {
    auto body = ParseBody(req, false);
    if (!body.ok()) return SendError(res, body.status());
    auto t = NeedString(*body, "text");
    if (!t.ok()) return SendError(res, t.status());
    text = std::move(*t);
    auto i = OptString(*body, "id");
    if (!i.ok()) return SendError(res, i.status());
    auto ti = OptString(*body, "title");
    if (!ti.ok()) return SendError(res, ti.status());
    id = i->value_or("");
    title = ti->value_or("");
  }
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
    return SendError(res, Status::InvalidArgument("the document is empty"));
  }
  if (const size_t bad = FindInvalidUtf8(text); bad != std::string::npos) {
    return SendError(
        res, Status::InvalidArgument("the document is not UTF-8 text (invalid byte at offset " +
                                     std::to_string(bad) +
                                     "); grag reads .txt, .md, .json, .jsonl and .csv"));
  }
  if (id.empty()) id = DefaultDocumentId(title, text);
  auto saved = SaveInputDocument(config, id, text);
  if (!saved.ok()) return SendError(res, saved.status());
  Log(LogLevel::kInfo, "serve",
      "saved document " + saved->id + " (" + std::to_string(text.size()) + " bytes)");
  const std::string rel =
      std::filesystem::path(saved->path).lexically_relative(config.Resolve(".")).generic_string();
  SendJson(res, saved->replaced ? 200 : 201,
           Dump({{"id", saved->id},
                 {"path", rel},
                 {"replaced", saved->replaced},
                 {"indexed", false},
                 {"next", "POST /v1/index to index it"}}));
}

void Server::Impl::DeleteDocument(const Request& req, Response& res) {
  const std::string id = req.matches[1];
  auto deleted = DeleteInputDocument(config, id);
  if (!deleted.ok()) return SendError(res, deleted.status());
  if (*deleted) {
    Log(LogLevel::kInfo, "serve", "deleted document " + id + " from the input folder");
    return SendJson(
        res, 200,
        Dump(
            {{"id", id}, {"deleted", true}, {"next", "POST /v1/index to drop it from the index"}}));
  }
  // Not a file of the input folder: indexed from elsewhere, or one record of a JSON/CSV file.
  auto engine = Reader();
  if (engine.ok()) {
    auto doc = (*engine)->GetDocument(id);
    if (doc.ok() && *doc) {
      std::error_code ec;
      const std::string file = ResolveSourcePath((*doc)->info.source_path, config.Resolve("."));
      if (!std::filesystem::exists(file, ec)) {
        return SendError(
            res, Status::NotFound("document \"" + id +
                                  "\" has no file any more; the next index job (POST /v1/index) "
                                  "drops it from the index"));
      }
      return SendError(
          res,
          Status::AlreadyExists(
              "document \"" + id +
              "\" is indexed but is not a file of the input folder (indexed "
              "from elsewhere, or one record of a JSON or CSV file): remove it from the index with "
              "POST /v1/index {\"remove\": [\"" +
              id + "\"]}"));
    }
  }
  SendError(res, Status::NotFound("no document \"" + id + "\""));
}

void Server::Impl::StartIndex(const Request& req, Response& res) {
  if (stopping) return SendError(res, Status::Unavailable("the server is shutting down"));
  auto body = ParseBody(req, true);
  if (!body.ok()) return SendError(res, body.status());
  IndexRequest request;
  if (auto it = body->find("remove"); it != body->end() && !it->is_null()) {
    if (!it->is_array())
      return SendError(res, Status::InvalidArgument("\"remove\" must be an array of document ids"));
    for (const auto& v : *it) {
      if (!v.is_string())
        return SendError(res,
                         Status::InvalidArgument("\"remove\" must be an array of document ids"));
      request.remove.push_back(v.get<std::string>());
    }
  }
  std::lock_guard<std::mutex> starting(start_mu);
  if (jobs->Running()) {
    return SendError(res, Status::AlreadyExists("an index job is running; one job at a time"));
  }
  EngineOptions options;
  options.writable = true;
  options.lock_holder = "grag serve";
  auto engine = Engine::Open(config, options);
  if (!engine.ok()) return SendError(res, engine.status());
  auto id = jobs->Start(std::move(*engine), std::move(request));
  if (!id.ok()) return SendError(res, id.status());
  res.set_header("Location", "/v1/jobs/" + std::to_string(*id));
  auto job = jobs->Get(*id);
  SendJson(res, 202, job ? server::JobJson(*job) : "{}");
}

namespace {

Result<int64_t> PathId(const Request& req, const char* what) {
  const std::string text = req.matches[1];
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0) {
    return Status::InvalidArgument(std::string(what) + " id must be a number, not \"" + text +
                                   "\"");
  }
  return static_cast<int64_t>(v);
}

}  // namespace

void Server::Impl::GetJob(const Request& req, Response& res) {
  auto id = PathId(req, "job");
  if (!id.ok()) return SendError(res, id.status());
  auto job = jobs->Get(*id);
  if (!job) return SendError(res, Status::NotFound("no job " + std::to_string(*id)));
  SendJson(res, 200, server::JobJson(*job));
}

void Server::Impl::JobEvents(const Request& req, Response& res) {
  auto id = PathId(req, "job");
  if (!id.ok()) return SendError(res, id.status());
  if (!jobs->Get(*id)) return SendError(res, Status::NotFound("no job " + std::to_string(*id)));
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [this, job_id = *id](size_t, httplib::DataSink& sink) {
        int64_t seen = -1;
        while (true) {
          auto job = jobs->WaitChange(job_id, seen, std::chrono::seconds(15));
          if (!job) return false;
          if (job->version == seen) {
            if (!SinkWrite(sink, ": keep-alive\n\n")) return false;  // a comment line
            continue;
          }
          seen = job->version;
          const bool over = job->state != server::JobState::kRunning;
          if (!SinkWrite(sink, SseEvent(over ? "done" : "progress", server::JobJson(*job))))
            return false;
          if (over) break;
          // Coalesce: progress arrives per chunk; a few events a second are plenty.
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        sink.done();
        return true;
      });
}

void Server::Impl::CancelJob(const Request& req, Response& res) {
  auto id = PathId(req, "job");
  if (!id.ok()) return SendError(res, id.status());
  if (!jobs->Cancel(*id)) return SendError(res, Status::NotFound("no job " + std::to_string(*id)));
  auto job = jobs->Get(*id);
  SendJson(res, 202, job ? server::JobJson(*job) : "{}");
}

void Server::Impl::ListJobs(const Request&, Response& res) {
  std::string out = "[";
  for (const auto& job : jobs->List()) {
    if (out.size() > 1) out += ",";
    out += server::JobJson(job);
  }
  out += "]";
  SendJson(res, 200, out);
}

void Server::Impl::Graph(const Request& req, Response& res) {
  auto limit = QueryInt(req, "limit", 0, 100000);
  if (!limit.ok()) return SendError(res, limit.status());
  auto level = QueryInt(req, "level", 0, 1000);
  if (!level.ok()) return SendError(res, level.status());
  auto around = QueryInt(req, "around", 0, INT64_MAX);
  if (!around.ok()) return SendError(res, around.status());
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  GraphViewRequest request;
  request.limit = limit->value_or(200);
  request.level = *level;
  request.around = *around;
  auto view = (*engine)->Graph(request);
  if (!view.ok()) return SendError(res, view.status());
  SendJson(res, 200, GraphViewJson(*view, false));
}

void Server::Impl::ListEntities(const Request& req, Response& res) {
  auto limit = QueryInt(req, "limit", 1, 100000);
  if (!limit.ok()) return SendError(res, limit.status());
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto entities = (*engine)->Entities(req.get_param_value("search"));
  if (!entities.ok()) return SendError(res, entities.status());
  SendJson(res, 200, EntitiesJson(*entities, static_cast<size_t>(limit->value_or(50)), false));
}

void Server::Impl::GetEntity(const Request& req, Response& res) {
  auto neighbours = QueryInt(req, "neighbours", 0, 100000);
  if (!neighbours.ok()) return SendError(res, neighbours.status());
  auto chunks = QueryInt(req, "chunks", 0, 100000);
  if (!chunks.ok()) return SendError(res, chunks.status());
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  const std::string key = req.matches[1];
  std::optional<int64_t> id;
  if (auto n = PathId(req, "entity"); n.ok()) id = *n;
  if (!id) {
    auto found = (*engine)->FindEntity(key);
    if (!found.ok()) return SendError(res, found.status());
    id = *found;
  }
  if (!id) return SendError(res, Status::NotFound("no entity \"" + key + "\""));
  auto detail = (*engine)->GetEntity(*id, neighbours->value_or(50), chunks->value_or(20));
  if (!detail.ok()) return SendError(res, detail.status());
  if (!*detail) return SendError(res, Status::NotFound("no entity " + key));
  SendJson(res, 200, EntityDetailJson(**detail, false));
}

void Server::Impl::ListRelationships(const Request& req, Response& res) {
  auto entity = QueryInt(req, "entity", 0, INT64_MAX);
  if (!entity.ok()) return SendError(res, entity.status());
  auto limit = QueryInt(req, "limit", 1, 1000000);
  if (!limit.ok()) return SendError(res, limit.status());
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto rels = (*engine)->Relationships(*entity, limit->value_or(100));
  if (!rels.ok()) return SendError(res, rels.status());
  SendJson(res, 200, RelationshipsJson(*rels, false));
}

void Server::Impl::ListCommunities(const Request& req, Response& res) {
  auto level = QueryInt(req, "level", 0, 1000);
  if (!level.ok()) return SendError(res, level.status());
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto communities = (*engine)->Communities(*level);
  if (!communities.ok()) return SendError(res, communities.status());
  SendJson(res, 200, CommunitiesJson(*communities, false));
}

void Server::Impl::GetCommunity(const Request& req, Response& res) {
  auto id = PathId(req, "community");
  if (!id.ok()) return SendError(res, id.status());
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto detail = (*engine)->GetCommunity(*id);
  if (!detail.ok()) return SendError(res, detail.status());
  if (!*detail) return SendError(res, Status::NotFound("no community " + std::to_string(*id)));
  SendJson(res, 200, CommunityDetailJson(**detail, false));
}

void Server::Impl::GetChunk(const Request& req, Response& res) {
  const std::string id = req.matches[1];
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto chunk = (*engine)->GetChunk(id);
  if (!chunk.ok()) return SendError(res, chunk.status());
  if (!*chunk) return SendError(res, Status::NotFound("no chunk \"" + id + "\""));
  SendJson(res, 200, ChunkJson(**chunk, false));
}

// ---------------------------------------------------------------- OpenAI compatibility

void Server::Impl::Models(const Request&, Response& res) {
  json data = json::array();
  auto add = [&](const std::string& id) {
    data.push_back(
        {{"id", id}, {"object", "model"}, {"created", 1767225600}, {"owned_by", "grag"}});
  };
  for (const auto& [name, method] : ChatModels()) add(name);
  // Each method again with each model a request may choose to answer (server.query_models).
  for (const std::string& answering : config.server.query_models) {
    for (const auto& [name, method] : ChatModels()) add(name + "/" + answering);
  }
  SendJson(res, 200, Dump({{"object", "list"}, {"data", data}}));
}

namespace {

// The question of a chat request: the last user message's text.
Result<std::string> LastUserText(const json& body) {
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty()) {
    return Status::InvalidArgument("\"messages\" must be a non-empty array");
  }
  for (auto m = it->rbegin(); m != it->rend(); ++m) {
    if (!m->is_object() || m->value("role", "") != "user") continue;
    const json& content = (*m)["content"];
    if (content.is_string()) return content.get<std::string>();
    if (content.is_array()) {
      std::string text;
      for (const auto& part : content) {
        if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
            part["text"].is_string()) {
          if (!text.empty()) text += "\n";
          text += part["text"].get<std::string>();
        }
      }
      if (!text.empty()) return text;
    }
    return Status::InvalidArgument("the last user message has no text content");
  }
  return Status::InvalidArgument("\"messages\" holds no user message");
}

}  // namespace

void Server::Impl::ChatCompletions(const Request& req, Response& res) {
  auto body = ParseBody(req, false);
  if (!body.ok()) return SendError(res, body.status());
  auto model = OptString(*body, "model");
  if (!model.ok()) return SendError(res, model.status());
  const std::string model_name = model->value_or("grag-auto");
  // "grag-local", or "grag-local/gpt-4o-mini": the method, then the model that answers.
  const size_t slash = model_name.find('/');
  const std::string method_name = model_name.substr(0, slash);
  std::optional<QueryMethod> method;
  for (const auto& [name, m] : ChatModels()) {
    if (name == method_name) method = m;
  }
  if (!method) {
    return SendError(res, Status::NotFound("the model \"" + model_name + "\" does not exist (" +
                                           QueryMethodNames(", ", "grag-") +
                                           ", each optionally /MODEL; GET /v1/models)"));
  }
  std::string answering;
  if (slash != std::string::npos) {
    answering = model_name.substr(slash + 1);
    if (Status offered = CheckOfferedModel(config, answering); !offered.ok()) {
      return SendError(res, offered);
    }
  }
  auto question = LastUserText(*body);
  if (!question.ok()) return SendError(res, question.status());
  auto stream = OptBool(*body, "stream", false);
  if (!stream.ok()) return SendError(res, stream.status());
  auto engine = Reader();
  if (!engine.ok()) return SendError(res, engine.status());

  auto request = std::make_shared<QueryRequest>();
  request->question = *question;
  request->method = *method;
  request->model = answering;
  const std::string id = "chatcmpl-" + RandomHex(12);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));

  if (!*stream) {
    auto result = Ask(**engine, *request);
    if (!result.ok()) return SendError(res, result.status());
    const json full = json::parse(QueryResultJson(*result, request->question, false));
    const auto [prompt_tokens, completion_tokens] = UsageOf(full);
    json out = {
        {"id", id},
        {"object", "chat.completion"},
        {"created", created},
        {"model", model_name},
        {"choices",
         json::array({{{"index", 0},
                       {"message",
                        {{"role", "assistant"}, {"content", result->answer + SourcesText(full)}}},
                       {"logprobs", nullptr},
                       {"finish_reason", "stop"}}})},
        {"usage",
         {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}}},
        {"citations", full.value("citations", json::array())},
        {"grag", {{"method", QueryMethodName(result->method)}}}};
    return SendJson(res, 200, Dump(out));
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, request, engine = *engine, id, created, model_name](size_t, httplib::DataSink& sink) {
        auto chunk = [&](const json& delta, const json& finish, json extra) {
          json c = {{"id", id},
                    {"object", "chat.completion.chunk"},
                    {"created", created},
                    {"model", model_name},
                    {"choices", json::array({{{"index", 0},
                                              {"delta", delta},
                                              {"logprobs", nullptr},
                                              {"finish_reason", finish}}})}};
          for (auto& [k, v] : extra.items()) c[k] = v;
          return SseEvent("", Dump(c));
        };
        bool open = SinkWrite(
            sink, chunk({{"role", "assistant"}, {"content", ""}}, nullptr, json::object()));
        bool streamed = false;
        std::atomic<bool> gone{!open};  // the asker disconnected: stop the question
        request->cancel = &gone;
        request->on_answer_delta = [&](std::string_view d) {
          streamed = true;
          if (open) open = SinkWrite(sink, chunk({{"content", d}}, nullptr, json::object()));
          if (!open) gone = true;
        };
        auto result = [&] {
          DisconnectWatch watch(sink, gone);
          return Ask(*engine, *request);
        }();
        if (!open || gone) return false;
        if (!result.ok()) {
          SinkWrite(sink, SseEvent("", Dump(ErrorObject(result.status()))));
        } else {
          const json full = json::parse(QueryResultJson(*result, request->question, false));
          // An answer written without a model (extractive) arrives whole, with its sources.
          std::string rest = streamed ? SourcesText(full) : result->answer + SourcesText(full);
          SinkWrite(sink, chunk({{"content", rest}}, nullptr, json::object()));
          SinkWrite(sink, chunk(json::object(), "stop",
                                {{"citations", full.value("citations", json::array())},
                                 {"grag", {{"method", QueryMethodName(result->method)}}}}));
        }
        SinkWrite(sink, "data: [DONE]\n\n");
        sink.done();
        return true;
      });
}

}  // namespace grag
