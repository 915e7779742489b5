// grag serve's workspaces: the indexes one server answers from (its own project, "default",
// and the workspaces under server.workspaces_dir), each with its read engine, index jobs and
// limits; which a request's key opens; and the routes that list, create and delete them.
#include <algorithm>
#include <filesystem>
#include <string>

#include "grag/hash.h"
#include "grag/log.h"
#include "grag/project.h"
#include "server_internal.h"

namespace grag {

// ---------------------------------------------------------------- one workspace

namespace server_internal {

Workspace::Workspace(std::string name_in, Config config_in, server::Metrics* metrics_in)
    : name(std::move(name_in)),
      api(name == kDefaultWorkspace ? "/v1" : "/v1/workspaces/" + name),
      config(std::move(config_in)),
      metrics(metrics_in) {
  if (config.server.workspace_workers > 0) {
    slots = std::make_unique<FairSlots>(config.server.workspace_workers);
  }
  jobs = std::make_unique<server::JobManager>([this](server::JobState state) {
    metrics->ObserveJob(server::JobStateName(state));
    ReloadReader();
  });
}

Result<std::shared_ptr<Engine>> Workspace::Reader() {
  last_used = std::chrono::steady_clock::now().time_since_epoch().count();
  std::shared_ptr<Engine> current;
  std::string version;
  {
    std::unique_lock<std::mutex> lock(reader_mu);
    if (!reader) {
      auto opened = OpenReader();
      lock.unlock();
      if (opened.ok() && on_load) on_load();
      return opened;
    }
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
  (void)fresh->first->Warm();  // here, not in the next requests
  std::lock_guard<std::mutex> lock(reader_mu);
  if (reader == current) {  // not replaced meanwhile (a job of this server finished)
    RetireReader();
    reader = std::move(fresh->first);
    reader_version = std::move(fresh->second);
  }
  return reader;
}

// Read first: a write finishing while it loads makes the next check reload it again rather
// than keep a mix.
Result<std::pair<std::shared_ptr<Engine>, std::string>> Workspace::OpenEngine() {
  EngineOptions options;
  options.keep_graph = true;  // many questions: the graph stays in memory
  auto engine = Engine::Open(config, options);
  if (!engine.ok()) {
    if (engine.status().code() == ErrorCode::kNotFound) {
      return Status::Unavailable("no index yet: add documents (POST " + api +
                                 "/documents) and start an index job (POST " + api + "/index)");
    }
    return engine.status();
  }
  std::shared_ptr<Engine> shared(std::move(*engine));
  GRAG_ASSIGN_OR_RETURN(std::string version, shared->IndexVersion());
  return std::make_pair(std::move(shared), std::move(version));
}

LlmUsage Workspace::ReaderUsage() const {
  return reader == nullptr ? LlmUsage() : reader->ModelUsage();
}

void Workspace::RetireReader() { metrics->RetireQueryUsage(ReaderUsage()); }

Result<std::shared_ptr<Engine>> Workspace::OpenReader() {
  GRAG_ASSIGN_OR_RETURN(auto opened, OpenEngine());
  reader = std::move(opened.first);
  reader_version = std::move(opened.second);
  reader_checked = std::chrono::steady_clock::now();
  return reader;
}

void Workspace::ReloadReader() {
  {
    std::lock_guard<std::mutex> lock(reader_mu);
    RetireReader();
    reader.reset();
  }
  // Warm the next engine here (in the job's thread) rather than in the next request.
  auto r = Reader();
  if (r.ok()) (void)(*r)->Warm();
}

bool Workspace::Loaded() {
  std::lock_guard<std::mutex> lock(reader_mu);
  return reader != nullptr;
}

bool Workspace::Unload() {
  if (jobs->Running()) return false;
  std::lock_guard<std::mutex> lock(reader_mu);
  if (!reader) return false;
  RetireReader();
  reader.reset();  // questions in flight keep their engine until they finish
  Log(LogLevel::kInfo, "serve", "unloaded idle workspace " + name);
  return true;
}

Status Workspace::ProbeStore() {
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

}  // namespace server_internal

// ---------------------------------------------------------------- the server's workspaces

std::shared_ptr<Workspace> Server::Impl::MakeWorkspace(std::string name, Config ws_config) {
  auto ws = std::make_shared<Workspace>(std::move(name), std::move(ws_config), &metrics);
  ws->on_load = [this] { UnloadIdle(); };
  return ws;
}

Result<std::shared_ptr<Workspace>> Server::Impl::OpenWorkspace(std::string_view name) {
  if (name == kDefaultWorkspace) return main;
  GRAG_RETURN_IF_ERROR(ValidateWorkspaceName(name).WithContext("no workspace"));
  std::error_code ec;
  const bool exists = std::filesystem::is_directory(WorkspaceDir(config, name), ec);
  std::lock_guard<std::mutex> lock(workspaces_mu);
  auto it = workspaces.find(name);
  if (!exists) {
    // Deleted behind the server's back: forget it.
    if (it != workspaces.end()) workspaces.erase(it);
    return Status::NotFound("no workspace \"" + std::string(name) + "\"");
  }
  if (it != workspaces.end()) return it->second;
  GRAG_ASSIGN_OR_RETURN(Config ws_config, LoadWorkspaceConfig(config, name));
  auto ws = MakeWorkspace(std::string(name), std::move(ws_config));
  workspaces.emplace(std::string(name), ws);
  return ws;
}

std::vector<std::shared_ptr<Workspace>> Server::Impl::OpenWorkspaces() {
  std::vector<std::shared_ptr<Workspace>> out = {main};
  std::lock_guard<std::mutex> lock(workspaces_mu);
  for (const auto& [name, ws] : workspaces) out.push_back(ws);
  return out;
}

void Server::Impl::UnloadIdle() {
  std::vector<std::shared_ptr<Workspace>> loaded;
  for (auto& ws : OpenWorkspaces()) {
    if (ws->Loaded()) loaded.push_back(ws);
  }
  const auto limit = static_cast<size_t>(std::max<int64_t>(1, config.server.max_loaded_workspaces));
  if (loaded.size() <= limit) return;
  std::sort(loaded.begin(), loaded.end(),
            [](const auto& a, const auto& b) { return a->last_used < b->last_used; });
  size_t over = loaded.size() - limit;
  // The most recently used (the one just opened) is last: never unloaded here.
  for (size_t i = 0; i + 1 < loaded.size() && over > 0; ++i) {
    if (loaded[i]->Unload()) --over;
  }
}

Caller Server::Impl::CallerOf(const Request& req) const {
  const ServerConfig& sc = config.server;
  Caller caller;
  if (sc.api_keys.empty() && sc.workspace_keys.empty()) {
    caller.admin = true;  // no keys: whoever can connect may do anything
    return caller;
  }
  const std::string auth = req.get_header_value("Authorization");
  std::string_view given;
  if (auth.size() > 7) {
    std::string scheme = auth.substr(0, 7);
    for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (scheme == "bearer ") given = std::string_view(auth).substr(7);
  }
  if (given.empty()) return caller;
  for (const auto& k : sc.api_keys) caller.admin = ConstantTimeEquals(given, k) || caller.admin;
  for (const auto& entry : sc.workspace_keys) {
    const size_t colon = entry.find(':');
    if (ConstantTimeEquals(given, std::string_view(entry).substr(colon + 1))) {
      caller.workspace = entry.substr(0, colon);
    }
  }
  return caller;
}

Result<std::shared_ptr<Workspace>> Server::Impl::WorkspaceFor(const Request& req,
                                                              std::string_view name) {
  if (!CallerOf(req).Opens(name)) {
    return Status::NotFound("no workspace \"" + std::string(name) + "\"");
  }
  return OpenWorkspace(name);
}

// ---------------------------------------------------------------- routes

namespace {

json WorkspaceJson(Workspace& ws) {
  return {{"name", ws.name},
          {"api", ws.api},
          {"loaded", ws.Loaded()},
          {"job_running", ws.jobs->Running()}};
}

}  // namespace

Result<std::vector<std::string>> Server::Impl::WorkspacesOpenedBy(const Request& req) const {
  const Caller caller = CallerOf(req);
  GRAG_ASSIGN_OR_RETURN(std::vector<std::string> listed, ListWorkspaces(config));
  std::vector<std::string> names;
  if (caller.Opens(kDefaultWorkspace)) names.emplace_back(kDefaultWorkspace);
  for (std::string& name : listed) {
    if (caller.Opens(name)) names.push_back(std::move(name));
  }
  return names;
}

void Server::Impl::ListWorkspacesRoute(Workspace&, const Request& req, Response& res) {
  auto names = WorkspacesOpenedBy(req);
  if (!names.ok()) return SendError(res, names.status());
  json out = json::array();
  for (const std::string& name : *names) {
    auto ws = OpenWorkspace(name);
    if (ws.ok()) {
      out.push_back(WorkspaceJson(**ws));
    } else {
      // A workspace whose grag.toml is wrong is listed with what is wrong with it.
      out.push_back({{"name", name}, {"error", ErrorObject(ws.status())["error"]}});
    }
  }
  SendJson(res, 200, Dump(out));
}

void Server::Impl::CreateWorkspaceRoute(Workspace&, const Request& req, Response& res) {
  auto body = ParseBody(req, false);
  if (!body.ok()) return SendError(res, body.status());
  auto name = NeedString(*body, "name");
  if (!name.ok()) return SendError(res, name.status());
  std::map<std::string, std::string> settings;
  if (auto it = body->find("settings"); it != body->end() && !it->is_null()) {
    if (!it->is_object()) {
      return SendError(res, Status::InvalidArgument(
                                "\"settings\" must be an object of setting names and values"));
    }
    for (const auto& [key, value] : it->items()) {
      settings[key] = value.is_string() ? value.get<std::string>() : value.dump();
    }
  }
  std::lock_guard<std::mutex> lock(workspaces_mu);  // not while it is being deleted
  auto dir = CreateWorkspace(config, *name, settings);
  if (!dir.ok()) return SendError(res, dir.status());
  Log(LogLevel::kInfo, "serve", "created workspace " + *name + " in " + *dir);
  res.set_header("Location", "/v1/workspaces/" + *name);
  SendJson(res, 201,
           Dump({{"name", *name},
                 {"api", "/v1/workspaces/" + *name},
                 {"next", "POST /v1/workspaces/" + *name + "/documents, then POST /v1/workspaces/" +
                              *name + "/index"}}));
}

void Server::Impl::DeleteWorkspaceRoute(Workspace&, const Request& req, Response& res) {
  const std::string name = req.matches[1];
  if (name == kDefaultWorkspace) {
    return SendError(res, Status::InvalidArgument(
                              "\"default\" is the server's own project: it cannot be deleted"));
  }
  auto ws = OpenWorkspace(name);
  if (!ws.ok()) {
    // One whose grag.toml is wrong cannot be opened, but is deleted all the same.
    if (ws.status().code() == ErrorCode::kNotFound) return SendError(res, ws.status());
    std::lock_guard<std::mutex> lock(workspaces_mu);
    if (Status st = DeleteWorkspace(config, name); !st.ok()) return SendError(res, st);
    Log(LogLevel::kInfo, "serve", "deleted workspace " + name + " (its settings were wrong)");
    return SendJson(res, 200, Dump({{"name", name}, {"deleted", true}}));
  }
  std::lock_guard<std::mutex> starting((*ws)->start_mu);  // no job starts meanwhile
  if ((*ws)->jobs->Running()) {
    return SendError(res, Status::AlreadyExists("workspace \"" + name +
                                                "\" has an index job running: cancel it first "
                                                "(DELETE /v1/workspaces/" +
                                                name + "/jobs/ID)"));
  }
  (*ws)->deleted = true;
  std::lock_guard<std::mutex> lock(workspaces_mu);
  workspaces.erase(name);
  {
    std::lock_guard<std::mutex> reader_lock((*ws)->reader_mu);
    (*ws)->RetireReader();
    (*ws)->reader.reset();  // questions in flight finish on the engine they hold
  }
  if (Status st = DeleteWorkspace(config, name); !st.ok()) return SendError(res, st);
  Log(LogLevel::kInfo, "serve", "deleted workspace " + name);
  SendJson(res, 200, Dump({{"name", name}, {"deleted", true}}));
}

}  // namespace grag
