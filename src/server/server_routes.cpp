// grag serve's route table, declared once: the routes it registers, the checks every request
// passes first (API keys, Host, cross-site writes, body types) and the OpenAPI document.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <nettle/memops.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "grag/engine_json.h"
#include "grag/hash.h"
#include "grag/log.h"
#include "grag/project.h"
#include "server_internal.h"

namespace grag {

bool server_internal::ConstantTimeEquals(std::string_view a, std::string_view b) {
  const std::string da = Sha256Hex(a), db = Sha256Hex(b);
  return memeql_sec(da.data(), db.data(), da.size()) != 0;
}

namespace {

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
    const bool document = p.name == "id" && path.substr(0, p.begin).ends_with("/documents/");
    // A workspace route's prefix is matched but not captured: its handler's matches[1] is the
    // same whether it was asked as /v1/X or /v1/workspaces/NAME/X.
    const bool prefix = p.name == "workspace" && p.end < path.size();
    out += document ? "(.+)" : prefix ? "(?:[^/]+)" : "([^/]+)";
    last = p.end;
  }
  out += path.substr(last);
  return out;
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

// The route /v1/X of a workspace as served under its name: /v1/workspaces/{workspace}/X.
std::string WorkspacePath(std::string_view path) {
  return "/v1/workspaces/{workspace}" + std::string(path.substr(3));
}

// Every path the routes are served at, each with its route: a workspace's twice.
std::vector<std::pair<const Route*, std::string>> ServedPaths(const std::vector<Route>& routes) {
  std::vector<std::pair<const Route*, std::string>> out;
  for (const Route& r : routes) out.emplace_back(&r, r.path);
  for (const Route& r : routes) {
    if (r.scope == Scope::kWorkspace) out.emplace_back(&r, WorkspacePath(r.path));
  }
  return out;
}

// The workspace a request names: its path's /v1/workspaces/NAME/..., else the
// X-Grag-Workspace header, else "default".
Result<std::string> WorkspaceOf(const Request& req, bool prefixed) {
  const std::string header = req.get_header_value("X-Grag-Workspace");
  if (!prefixed) return header.empty() ? std::string(kDefaultWorkspace) : header;
  constexpr std::string_view kPrefix = "/v1/workspaces/";
  const std::string_view rest = std::string_view(req.path).substr(kPrefix.size());
  std::string name(rest.substr(0, rest.find('/')));
  if (!header.empty() && header != name) {
    return Status::InvalidArgument("the path names workspace \"" + name +
                                   "\" and X-Grag-Workspace \"" + header + "\"");
  }
  return name;
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
  const bool documents =
      req.path == "/v1/documents" ||
      (req.path.starts_with("/v1/workspaces/") && req.path.ends_with("/documents") &&
       std::count(req.path.begin(), req.path.end(), '/') == 4);
  return type == "multipart/form-data" && req.method == "POST" && documents;
}

}  // namespace

// ---------------------------------------------------------------- routes

void Server::Impl::DeclareRoutes() {
  auto bind = [this](void (Impl::*m)(Workspace&, const Request&, Response&)) {
    return
        [this, m](Workspace& ws, const Request& req, Response& res) { (this->*m)(ws, req, res); };
  };
  // The query and search bodies: their methods and ranges are the engine's (kQueryMethods,
  // kRetrievalMethods, kTopKRange, ...), as the CLI's and MCP's are.
  auto range = [](const ParamRange& r, const char* description) {
    return json{
        {"type", "integer"}, {"minimum", r.min}, {"maximum", r.max}, {"description", description}};
  };
  json query_methods = json::array();
  for (QueryMethod m : kQueryMethods) query_methods.push_back(std::string(QueryMethodName(m)));
  json search_methods = json::array();
  for (RetrievalMethod m : kRetrievalMethods) {
    search_methods.push_back(std::string(RetrievalMethodName(m)));
  }
  static const std::string query_body_text =
      json{{"type", "object"},
           {"required", json::array({"question"})},
           {"properties",
            {{"question", {{"type", "string"}}},
             {"method",
              {{"type", "string"},
               {"enum", query_methods},
               {"description",
                "drift needs a chat model: a primer over the reports, follow-ups answered "
                "locally, one reduce; lazy: budgeted search for indexes built without a model"}}},
             {"level", range(kLevelRange, "global: community level")},
             {"budget",
              range(kBudgetRange, "lazy: relevance-test calls at most (default lazy.budget)")},
             {"k", range(kTopKRange, "local: matched entities; basic, hybrid: passages")},
             {"model",
              {{"type", "string"},
               {"description",
                "the model that answers, one of server.query_models (default: llm.query.model, "
                "else llm.model)"}}},
             {"stream",
              {{"type", "boolean"},
               {"description", "send the answer as Server-Sent Events (delta, then result)"}}}}}}
          .dump();
  static const std::string search_body_text =
      json{{"type", "object"},
           {"required", json::array({"question"})},
           {"properties",
            {{"question", {{"type", "string"}}},
             {"method", {{"type", "string"}, {"enum", search_methods}}},
             {"k", range(kTopKRange, "passages returned (default search.top_k)")}}}}
          .dump();
  const char* query_body = query_body_text.c_str();
  const char* search_body = search_body_text.c_str();
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
      R"json(; each may be followed by /MODEL, one of server.query_models, the model that writes the answer, and then by @WORKSPACE, the workspace that answers (GET /v1/models lists them all)"},
    "messages":{"type":"array","items":{"type":"object"}},
    "stream":{"type":"boolean"}}})json";
  const char* chat_body = chat_body_text.c_str();
  const char* workspace_body = R"json({"type":"object","required":["name"],"properties":{
    "name":{"type":"string","description":"lower-case letters, digits, - and _ (at most 64)"},
    "settings":{"type":"object","description":"settings of its own, by name (as grag config --set), e.g. {\"llm.model\": \"gpt-4o-mini\"}; the rest are the server's"}}})json";
  routes = {
      {"GET",
       "/health",
       "Liveness: whether an index is loaded and a job is running; 503 when the index's "
       "PostgreSQL server does not answer",
       Scope::kPublic,
       {},
       nullptr,
       "{status, version, index_loaded, index_version, job_running}",
       bind(&Impl::Health)},
      {"GET",
       "/docs",
       "This API's reference (Swagger UI over /openapi.json), to read and try the routes",
       Scope::kPublic,
       {},
       nullptr,
       "text/html",
       bind(&Impl::ApiDocs)},
      {"GET",
       "/metrics",
       "Prometheus metrics: requests by route and status with latency histograms, questions by "
       "method, index jobs, model calls and tokens (query and index), process CPU, memory and "
       "file descriptors, over all workspaces; needs a key of server.api_keys when keys are set",
       Scope::kAdmin,
       {},
       nullptr,
       "text/plain (Prometheus text format 0.0.4)",
       bind(&Impl::MetricsText)},
      {"GET",
       "/",
       "The web UI (ask, graph, communities, documents); it asks for the API key when one is set",
       Scope::kPublic,
       {},
       nullptr,
       "text/html",
       bind(&Impl::WebUi)},
      {"GET",
       "/ui/{name}",
       "The web UI's files (scripts, styles, the graph library), embedded in grag",
       Scope::kPublic,
       {},
       nullptr,
       "the file",
       bind(&Impl::WebFile)},
      {"GET",
       "/openapi.json",
       "This API as OpenAPI 3 (no key needed: /docs reads it before you authorize, and it holds "
       "nothing but what docs/server.md says)",
       Scope::kPublic,
       {},
       nullptr,
       "OpenAPI document",
       [this](Workspace&, const Request&, Response& res) { SendJson(res, 200, OpenApi()); }},
      {"POST",
       "/v1/query",
       "Answer a question (the same JSON as grag query --json)",
       Scope::kWorkspace,
       {},
       query_body,
       "query result, or text/event-stream with stream:true",
       bind(&Impl::Query)},
      {"POST",
       "/v1/search",
       "Rank passages for a question (as grag search --json)",
       Scope::kWorkspace,
       {},
       search_body,
       "ranked chunks",
       bind(&Impl::Search)},
      {"GET",
       "/v1/stats",
       "What the index holds and what it cost (grag stats --json)",
       Scope::kWorkspace,
       {{"top", "integer", "top entities listed (default 10)"}},
       nullptr,
       "stats",
       bind(&Impl::Stats)},
      {"GET",
       "/v1/doctor",
       "Try the configured models once (an extraction, an answer, an embedding) and say what to "
       "change (grag doctor --json); sends real requests, never from the reply cache",
       Scope::kWorkspace,
       {},
       nullptr,
       "doctor report",
       bind(&Impl::Doctor)},
      {"GET",
       "/v1/documents",
       "Indexed documents",
       Scope::kWorkspace,
       {},
       nullptr,
       "documents",
       bind(&Impl::ListDocuments)},
      {"POST",
       "/v1/documents",
       "Save a document into the input folder (JSON {id?, title?, text} or a multipart upload "
       "with a file field); POST /v1/index indexes it",
       Scope::kWorkspace,
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
       Scope::kWorkspace,
       {},
       nullptr,
       "{id, title, source_path, content_hash, file, note, characters, bytes, text}",
       bind(&Impl::GetDocumentText)},
      {"GET",
       "/v1/documents/{id}",
       "One indexed document: text and chunks",
       Scope::kWorkspace,
       {},
       nullptr,
       "document",
       bind(&Impl::GetDocument)},
      {"DELETE",
       "/v1/documents/{id}",
       "Delete a document's file from the input folder; the next index job drops it",
       Scope::kWorkspace,
       {},
       nullptr,
       "{id, deleted}",
       bind(&Impl::DeleteDocument)},
      {"POST",
       "/v1/index",
       "Start an index job bringing the index in line with the input folder (409 while one runs)",
       Scope::kWorkspace,
       {},
       index_body,
       "job (202)",
       bind(&Impl::StartIndex)},
      {"GET",
       "/v1/jobs/{id}",
       "An index job: state, stage, done/total, LLM calls, tokens, ETA",
       Scope::kWorkspace,
       {},
       nullptr,
       "job",
       bind(&Impl::GetJob)},
      {"GET",
       "/v1/jobs/{id}/events",
       "An index job's progress as Server-Sent Events (progress, then done)",
       Scope::kWorkspace,
       {},
       nullptr,
       "text/event-stream",
       bind(&Impl::JobEvents)},
      {"GET",
       "/v1/jobs",
       "The recent index jobs, newest first (the running one, if any, is first)",
       Scope::kWorkspace,
       {},
       nullptr,
       "jobs",
       bind(&Impl::ListJobs)},
      {"DELETE",
       "/v1/jobs/{id}",
       "Cancel an index job (it stops cleanly and resumes next time)",
       Scope::kWorkspace,
       {},
       nullptr,
       "job",
       bind(&Impl::CancelJob)},
      {"GET",
       "/v1/entities",
       "Entities, highest degree first",
       Scope::kWorkspace,
       {{"search", "string", "part of a name or alias"},
        {"limit", "integer", "at most this many (default 50)"}},
       nullptr,
       "entities",
       bind(&Impl::ListEntities)},
      {"GET",
       "/v1/entities/{id}",
       "One entity (by id, or by name when not a number): description, neighbours, communities, "
       "source chunks",
       Scope::kWorkspace,
       {{"neighbours", "integer", "at most (default 50)"},
        {"chunks", "integer", "at most (default 20)"}},
       nullptr,
       "entity",
       bind(&Impl::GetEntity)},
      {"GET",
       "/v1/graph",
       "The graph to draw: the entities of highest degree (or one entity and its heaviest "
       "neighbours) with their community at a level, and the relationships among them",
       Scope::kWorkspace,
       {{"limit", "integer", "entities at most (with around: neighbours; default 200)"},
        {"level", "integer", "community level the nodes carry (default 0)"},
        {"around", "integer", "an entity id: it and its neighbours instead of the top entities"}},
       nullptr,
       "{nodes, edges, entities_total, relationships_total, level, levels}",
       bind(&Impl::Graph)},
      {"GET",
       "/v1/relationships",
       "Relationships, heaviest first",
       Scope::kWorkspace,
       {{"entity", "integer", "only those touching this entity id"},
        {"limit", "integer", "at most this many (default 100)"}},
       nullptr,
       "relationships",
       bind(&Impl::ListRelationships)},
      {"GET",
       "/v1/communities",
       "Communities by level, with their report's title and summary",
       Scope::kWorkspace,
       {{"level", "integer", "only this level"}},
       nullptr,
       "communities",
       bind(&Impl::ListCommunities)},
      {"GET",
       "/v1/communities/{id}",
       "One community: full report, members, child communities",
       Scope::kWorkspace,
       {},
       nullptr,
       "community",
       bind(&Impl::GetCommunity)},
      {"GET",
       "/v1/chunks/{id}",
       "One chunk's text",
       Scope::kWorkspace,
       {},
       nullptr,
       "chunk",
       bind(&Impl::GetChunk)},
      {"GET",
       "/v1/models",
       "OpenAI-compatible: the chat models, one per query method (grag-local, ...), each also "
       "with /MODEL for every model of server.query_models and @WORKSPACE for every other "
       "workspace the key opens",
       Scope::kWorkspace,
       {},
       nullptr,
       "model list",
       bind(&Impl::Models)},
      {"POST",
       "/v1/chat/completions",
       "OpenAI-compatible chat: the last user message is the question, the model picks the method "
       "(and, ending in @WORKSPACE, the workspace)",
       Scope::kWorkspace,
       {},
       chat_body,
       "chat.completion, or chat.completion.chunk events",
       bind(&Impl::ChatCompletions)},
      {"GET",
       "/v1/workspaces",
       "The workspaces this key opens (every one for a key of server.api_keys), \"default\" "
       "being the server's own project: name, api (their routes' prefix), loaded, job_running",
       Scope::kServer,
       {},
       nullptr,
       "[{name, api, loaded, job_running}]",
       bind(&Impl::ListWorkspacesRoute)},
      {"POST",
       "/v1/workspaces",
       "Create a workspace (a key of server.api_keys): its own documents and index, and the "
       "settings given overriding the server's",
       Scope::kAdmin,
       {},
       workspace_body,
       "{name, api} (201)",
       bind(&Impl::CreateWorkspaceRoute)},
      {"DELETE",
       "/v1/workspaces/{workspace}",
       "Delete a workspace with its documents and index (a key of server.api_keys; 409 while an "
       "index job runs in it)",
       Scope::kAdmin,
       {},
       nullptr,
       "{name, deleted}",
       bind(&Impl::DeleteWorkspaceRoute)},
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
    const bool keys = !settings.api_keys.empty() || !settings.workspace_keys.empty();
    if (keys && !IsPublic(req.path)) {
      const Caller caller = CallerOf(req);
      if (!caller.admin && caller.workspace.empty()) {
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

  ServeRoutes();
}

void Server::Impl::ServeRoutes() {
  for (const Route& r : routes) {
    // A workspace's route is served twice: /v1/X on the default workspace (or the one
    // X-Grag-Workspace names), and /v1/workspaces/{workspace}/X on the one named.
    for (const bool prefixed : {false, true}) {
      if (prefixed && r.scope != Scope::kWorkspace) continue;
      const std::string path = prefixed ? WorkspacePath(r.path) : std::string(r.path);
      const std::string method = r.method;
      auto handler = [this, route = path, method, scope = r.scope, prefixed, inner = r.handler](
                         const Request& req, Response& res) {
        // Each request a route answers is counted and timed (GET /metrics), by its template.
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
        if (scope == Scope::kAdmin && !CallerOf(req).admin) {
          return SendError(res, Status::PermissionDenied(
                                    "this key opens one workspace only: this route needs a key "
                                    "of server.api_keys"));
        }
        if (scope != Scope::kWorkspace) return inner(*main, req, res);
        auto name = WorkspaceOf(req, prefixed);
        if (!name.ok()) return SendError(res, name.status());
        auto ws = WorkspaceFor(req, *name);
        if (!ws.ok()) return SendError(res, ws.status());
        inner(**ws, req, res);
      };
      const std::string pattern = PathRegex(path);
      if (method == "GET")
        http.Get(pattern, handler);
      else if (method == "POST")
        http.Post(pattern, handler);
      else if (method == "DELETE")
        http.Delete(pattern, handler);
    }
  }
}

bool Server::Impl::IsPublic(const std::string& path) const {
  for (const Route& r : routes) {
    if (r.scope != Scope::kPublic) continue;
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
  for (const auto& [r, path] : ServedPaths(routes)) {
    json op = {{"summary", r->summary}};
    json params = json::array();
    for (const PathParam& p : PathParams(path)) {
      params.push_back(
          {{"name", p.name}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}});
    }
    for (const Param& p : r->query) {
      params.push_back({{"name", p.name},
                        {"in", "query"},
                        {"required", false},
                        {"description", p.description},
                        {"schema", {{"type", p.type}}}});
    }
    if (!params.empty()) op["parameters"] = params;
    if (r->body) {
      op["requestBody"] = {{"required", true},
                           {"content", {{kJson, {{"schema", json::parse(r->body)}}}}}};
    }
    op["responses"] = {
        {"200", {{"description", r->response}}},
        {"default",
         {{"description", "error"},
          {"content", {{kJson, {{"schema", {{"$ref", "#/components/schemas/Error"}}}}}}}}}};
    op["security"] =
        r->scope != Scope::kPublic ? json::array({{{"bearer", json::array()}}}) : json::array();
    std::string m = r->method;
    for (auto& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    paths[path][m] = std::move(op);
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

}  // namespace grag
