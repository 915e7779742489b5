// grag serve's resources: documents, index jobs and their events, and the graph (entities,
// relationships, communities, chunks).
#include <string>

#include "grag/engine_json.h"
#include "grag/input_files.h"
#include "grag/log.h"
#include "server_internal.h"

namespace grag {

void Server::Impl::ListDocuments(Workspace& ws, const Request&, Response& res) {
  auto engine = ws.Reader();
  if (!engine.ok()) {
    // Nothing indexed yet is an empty list, not an error.
    if (engine.status().code() == ErrorCode::kUnavailable) return SendJson(res, 200, "[]");
    return SendError(res, engine.status());
  }
  auto docs = (*engine)->Documents();
  if (!docs.ok()) return SendError(res, docs.status());
  SendJson(res, 200, DocumentsJson(*docs, false));
}

void Server::Impl::GetDocument(Workspace& ws, const Request& req, Response& res) {
  GetDocumentById(ws, req.matches[1], res);
}

void Server::Impl::GetDocumentText(Workspace& ws, const Request& req, Response& res) {
  const std::string id = req.matches[1];
  auto engine = ws.Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto text = (*engine)->GetDocumentText(id);
  if (!text.ok()) return SendError(res, text.status());
  if (!*text) {
    // A document whose own id ends in "/text" is asked for by this route's path too.
    auto whole = (*engine)->GetDocument(id + "/text");
    if (whole.ok() && *whole) return GetDocumentById(ws, id + "/text", res);
    return SendError(res, Status::NotFound("no indexed document \"" + id + "\""));
  }
  SendJson(res, 200, DocumentTextJson(**text, false));
}

void Server::Impl::GetDocumentById(Workspace& ws, const std::string& id, Response& res) {
  auto engine = ws.Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto doc = (*engine)->GetDocument(id);
  if (!doc.ok()) return SendError(res, doc.status());
  if (!*doc) {
    std::error_code ec;
    const bool saved = ValidateDocumentId(id).ok() &&
                       std::filesystem::is_regular_file(
                           std::filesystem::path(ws.config.Resolve(ws.config.input.dir)) /
                               std::filesystem::u8path(id),
                           ec);
    return SendError(
        res, Status::NotFound(
                 "no indexed document \"" + id + "\"" +
                 (saved ? " (it is saved in the input folder: start an index job, POST /v1/index)"
                        : "")));
  }
  SendJson(res, 200, DocumentDetailJson(**doc, false));
}

void Server::Impl::PostDocument(Workspace& ws, const Request& req, Response& res) {
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
  if (Status s = CheckDocumentText(text); !s.ok()) return SendError(res, s);
  if (id.empty()) id = DefaultDocumentId(title, text);
  std::lock_guard<std::mutex> starting(ws.start_mu);  // not into a workspace being deleted
  if (ws.deleted) return SendError(res, Status::NotFound("no workspace \"" + ws.name + "\""));
  auto saved = SaveInputDocument(ws.config, id, text);
  if (!saved.ok()) return SendError(res, saved.status());
  Log(LogLevel::kInfo, "serve",
      "saved document " + saved->id + " (" + std::to_string(text.size()) + " bytes)");
  const std::string rel = std::filesystem::path(saved->path)
                              .lexically_relative(ws.config.Resolve("."))
                              .generic_string();
  SendJson(res, saved->replaced ? 200 : 201,
           Dump({{"id", saved->id},
                 {"path", rel},
                 {"replaced", saved->replaced},
                 {"indexed", false},
                 {"next", "POST /v1/index to index it"}}));
}

void Server::Impl::DeleteDocument(Workspace& ws, const Request& req, Response& res) {
  const std::string id = req.matches[1];
  auto deleted = DeleteInputDocument(ws.config, id);
  if (!deleted.ok()) return SendError(res, deleted.status());
  if (*deleted) {
    Log(LogLevel::kInfo, "serve", "deleted document " + id + " from the input folder");
    return SendJson(
        res, 200,
        Dump(
            {{"id", id}, {"deleted", true}, {"next", "POST /v1/index to drop it from the index"}}));
  }
  // Not a file of the input folder: indexed from elsewhere, or one record of a JSON/CSV file.
  auto engine = ws.Reader();
  if (engine.ok()) {
    auto doc = (*engine)->GetDocument(id);
    if (doc.ok() && *doc) {
      std::error_code ec;
      const std::string file = ws.config.Resolve((*doc)->info.source_path);
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

void Server::Impl::StartIndex(Workspace& ws, const Request& req, Response& res) {
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
  std::lock_guard<std::mutex> starting(ws.start_mu);
  if (ws.deleted) return SendError(res, Status::NotFound("no workspace \"" + ws.name + "\""));
  if (ws.jobs->Running()) {
    return SendError(res, Status::AlreadyExists("an index job is running; one job at a time"));
  }
  EngineOptions options;
  options.writable = true;
  options.lock_holder = "grag serve";
  auto engine = Engine::Open(ws.config, options);
  if (!engine.ok()) return SendError(res, engine.status());
  auto id = ws.jobs->Start(std::move(*engine), std::move(request));
  if (!id.ok()) return SendError(res, id.status());
  res.set_header("Location", ws.api + "/jobs/" + std::to_string(*id));
  auto job = ws.jobs->Get(*id);
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

void Server::Impl::GetJob(Workspace& ws, const Request& req, Response& res) {
  auto id = PathId(req, "job");
  if (!id.ok()) return SendError(res, id.status());
  auto job = ws.jobs->Get(*id);
  if (!job) return SendError(res, Status::NotFound("no job " + std::to_string(*id)));
  SendJson(res, 200, server::JobJson(*job));
}

void Server::Impl::JobEvents(Workspace& ws, const Request& req, Response& res) {
  auto id = PathId(req, "job");
  if (!id.ok()) return SendError(res, id.status());
  if (!ws.jobs->Get(*id)) return SendError(res, Status::NotFound("no job " + std::to_string(*id)));
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [ws = ws.shared_from_this(), job_id = *id](
                                                            size_t, httplib::DataSink& sink) {
    int64_t seen = -1;
    while (true) {
      auto job = ws->jobs->WaitChange(job_id, seen, std::chrono::seconds(15));
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

void Server::Impl::CancelJob(Workspace& ws, const Request& req, Response& res) {
  auto id = PathId(req, "job");
  if (!id.ok()) return SendError(res, id.status());
  if (!ws.jobs->Cancel(*id))
    return SendError(res, Status::NotFound("no job " + std::to_string(*id)));
  auto job = ws.jobs->Get(*id);
  SendJson(res, 202, job ? server::JobJson(*job) : "{}");
}

void Server::Impl::ListJobs(Workspace& ws, const Request&, Response& res) {
  std::string out = "[";
  for (const auto& job : ws.jobs->List()) {
    if (out.size() > 1) out += ",";
    out += server::JobJson(job);
  }
  out += "]";
  SendJson(res, 200, out);
}

void Server::Impl::Graph(Workspace& ws, const Request& req, Response& res) {
  auto limit = QueryInt(req, "limit", 0, 100000);
  if (!limit.ok()) return SendError(res, limit.status());
  auto level = QueryInt(req, "level", 0, 1000);
  if (!level.ok()) return SendError(res, level.status());
  auto around = QueryInt(req, "around", 0, INT64_MAX);
  if (!around.ok()) return SendError(res, around.status());
  auto engine = ws.Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  GraphViewRequest request;
  request.limit = limit->value_or(200);
  request.level = *level;
  request.around = *around;
  auto view = (*engine)->Graph(request);
  if (!view.ok()) return SendError(res, view.status());
  SendJson(res, 200, GraphViewJson(*view, false));
}

void Server::Impl::ListEntities(Workspace& ws, const Request& req, Response& res) {
  auto limit = QueryInt(req, "limit", 1, 100000);
  if (!limit.ok()) return SendError(res, limit.status());
  auto engine = ws.Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto entities = (*engine)->Entities(req.get_param_value("search"));
  if (!entities.ok()) return SendError(res, entities.status());
  SendJson(res, 200, EntitiesJson(*entities, static_cast<size_t>(limit->value_or(50)), false));
}

void Server::Impl::GetEntity(Workspace& ws, const Request& req, Response& res) {
  auto neighbours = QueryInt(req, "neighbours", 0, 100000);
  if (!neighbours.ok()) return SendError(res, neighbours.status());
  auto chunks = QueryInt(req, "chunks", 0, 100000);
  if (!chunks.ok()) return SendError(res, chunks.status());
  auto engine = ws.Reader();
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

void Server::Impl::ListRelationships(Workspace& ws, const Request& req, Response& res) {
  auto entity = QueryInt(req, "entity", 0, INT64_MAX);
  if (!entity.ok()) return SendError(res, entity.status());
  auto limit = QueryInt(req, "limit", 1, 1000000);
  if (!limit.ok()) return SendError(res, limit.status());
  auto engine = ws.Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto rels = (*engine)->Relationships(*entity, limit->value_or(100));
  if (!rels.ok()) return SendError(res, rels.status());
  SendJson(res, 200, RelationshipsJson(*rels, false));
}

void Server::Impl::ListCommunities(Workspace& ws, const Request& req, Response& res) {
  auto level = QueryInt(req, "level", 0, 1000);
  if (!level.ok()) return SendError(res, level.status());
  auto engine = ws.Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto communities = (*engine)->Communities(*level);
  if (!communities.ok()) return SendError(res, communities.status());
  SendJson(res, 200, CommunitiesJson(*communities, false));
}

void Server::Impl::GetCommunity(Workspace& ws, const Request& req, Response& res) {
  auto id = PathId(req, "community");
  if (!id.ok()) return SendError(res, id.status());
  auto engine = ws.Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto detail = (*engine)->GetCommunity(*id);
  if (!detail.ok()) return SendError(res, detail.status());
  if (!*detail) return SendError(res, Status::NotFound("no community " + std::to_string(*id)));
  SendJson(res, 200, CommunityDetailJson(**detail, false));
}

void Server::Impl::GetChunk(Workspace& ws, const Request& req, Response& res) {
  const std::string id = req.matches[1];
  auto engine = ws.Reader();
  if (!engine.ok()) return SendError(res, engine.status());
  auto chunk = (*engine)->GetChunk(id);
  if (!chunk.ok()) return SendError(res, chunk.status());
  if (!*chunk) return SendError(res, Status::NotFound("no chunk \"" + id + "\""));
  SendJson(res, 200, ChunkJson(**chunk, false));
}

}  // namespace grag
