#include "grag/mcp.h"

#include <array>
#include <cstdint>
#include <exception>
#include <istream>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>
#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "grag/engine.h"
#include "grag/engine_json.h"
#include "grag/project.h"
#include "grag/input_files.h"
#include "grag/log.h"

namespace grag {
namespace {

using nlohmann::json;

// The query tool's methods (grag/engine.h's kQueryMethods).
json MethodNames() {
  json out = json::array();
  for (QueryMethod m : kQueryMethods) out.push_back(std::string(QueryMethodName(m)));
  return out;
}

// The search tool's (kRetrievalMethods).
json RetrievalMethodList() {
  json out = json::array();
  for (RetrievalMethod m : kRetrievalMethods) out.push_back(std::string(RetrievalMethodName(m)));
  return out;
}

// The protocol revisions this server speaks, newest first. A client asking for one of them gets
// it; any other gets the newest, and the client decides whether it can go on.
constexpr std::array<std::string_view, 3> kProtocolVersions = {"2025-06-18", "2025-03-26",
                                                               "2024-11-05"};
// The first revision with structuredContent in tool results.
constexpr std::string_view kStructuredContentSince = "2025-06-18";

// JSON-RPC 2.0 error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;

// What a get_entity shows: enough to describe the entity, little enough for a model's context.
constexpr int64_t kEntityNeighbours = 30;
constexpr int64_t kEntityChunks = 5;
constexpr size_t kCloseNames = 10;

void McpLog(LogLevel level, std::string_view message) { Log(level, "mcp", message); }

// One line, whatever the documents held: invalid UTF-8 is replaced rather than thrown on.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json ErrorReply(const json& id, int code, std::string message) {
  return {
      {"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", std::move(message)}}}};
}

json ResultReply(const json& id, json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

json TextItem(std::string text) { return {{"type", "text"}, {"text", std::move(text)}}; }

// A tool that failed says so in its result: the model reads the message and can fix its call.
json ToolError(std::string message) {
  return {{"content", json::array({TextItem(std::move(message))})}, {"isError", true}};
}

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

// ---- tool arguments

// Checks `args` against a tool's input schema, so the schema a client is shown is the one rule
// it is held to. Only the subset the tools use: an object of string, integer and boolean
// properties with enum, minLength, minimum and maximum, required ones, and no others. A null
// value counts as absent (some clients send every optional argument).
Status CheckArguments(const json& schema, const json& args) {
  if (!args.is_object()) return Status::InvalidArgument("the arguments must be a JSON object");
  const json& props = schema.at("properties");
  for (auto it = args.begin(); it != args.end(); ++it) {
    const std::string& name = it.key();
    auto p = props.find(name);
    if (p == props.end()) {
      std::vector<std::string> known;
      for (auto k = props.begin(); k != props.end(); ++k) known.push_back(k.key());
      return Status::InvalidArgument("unknown argument \"" + name + "\" (this tool takes " +
                                     Join(known, ", ") + ")");
    }
    const json& v = it.value();
    if (v.is_null()) continue;
    const std::string type = p->at("type").get<std::string>();
    const std::string quoted = "\"" + name + "\"";
    if (type == "string") {
      if (!v.is_string()) return Status::InvalidArgument(quoted + " must be a string");
      const auto& s = v.get_ref<const std::string&>();
      if (auto min = p->find("minLength"); min != p->end() && s.size() < min->get<size_t>()) {
        return Status::InvalidArgument(quoted + " must not be empty");
      }
      if (auto e = p->find("enum"); e != p->end()) {
        bool member = false;
        std::vector<std::string> allowed;
        for (const auto& a : *e) {
          allowed.push_back(a.get<std::string>());
          member = member || allowed.back() == s;
        }
        if (!member) {
          return Status::InvalidArgument(quoted + " must be one of " + Join(allowed, ", ") +
                                         " (got \"" + s + "\")");
        }
      }
    } else if (type == "integer") {
      if (!v.is_number_integer()) return Status::InvalidArgument(quoted + " must be an integer");
      if (v.is_number_unsigned() &&
          v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Status::InvalidArgument(quoted + " is out of range");
      }
      const int64_t n = v.get<int64_t>();
      auto min = p->find("minimum");
      auto max = p->find("maximum");
      if ((min != p->end() && n < min->get<int64_t>()) ||
          (max != p->end() && n > max->get<int64_t>())) {
        std::string range = min != p->end() ? std::to_string(min->get<int64_t>()) : "";
        range += max != p->end() ? " to " + std::to_string(max->get<int64_t>()) : " or more";
        return Status::InvalidArgument(quoted + " must be " + range + " (got " + std::to_string(n) +
                                       ")");
      }
    } else if (type == "boolean") {
      if (!v.is_boolean()) return Status::InvalidArgument(quoted + " must be true or false");
    }
  }
  // After the unknown ones: a misspelt name is better reported as such than as a missing one.
  if (auto req = schema.find("required"); req != schema.end()) {
    for (const auto& r : *req) {
      const std::string name = r.get<std::string>();
      auto it = args.find(name);
      if (it == args.end() || it->is_null()) {
        return Status::InvalidArgument("missing required argument \"" + name + "\"");
      }
    }
  }
  return Status::Ok();
}

// Readers of arguments CheckArguments accepted.
std::optional<std::string> OptString(const json& args, const char* name) {
  auto it = args.find(name);
  if (it == args.end() || it->is_null()) return std::nullopt;
  return it->get<std::string>();
}

std::optional<int64_t> OptInt(const json& args, const char* name) {
  auto it = args.find(name);
  if (it == args.end() || it->is_null()) return std::nullopt;
  return it->get<int64_t>();
}

std::optional<bool> OptBool(const json& args, const char* name) {
  auto it = args.find(name);
  if (it == args.end() || it->is_null()) return std::nullopt;
  return it->get<bool>();
}

json StringProp(std::string description) {
  return {{"type", "string"}, {"description", std::move(description)}};
}
json IntProp(std::string description, int64_t min, std::optional<int64_t> max = std::nullopt) {
  json j = {{"type", "integer"}, {"description", std::move(description)}, {"minimum", min}};
  if (max) j["maximum"] = *max;
  return j;
}
// A request parameter whose range the engine declares (kTopKRange, ...).
json IntProp(std::string description, const ParamRange& range) {
  return IntProp(std::move(description), range.min, range.max);
}
json Schema(json properties, std::vector<std::string> required) {
  json j = {
      {"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
  if (!required.empty()) j["required"] = std::move(required);
  return j;
}

}  // namespace

// ---- the session

struct McpServer::Impl {
  using Handler = json (Impl::*)(const json& args);
  struct Tool {
    std::string name;
    std::string title;
    std::string description;
    json schema;
    bool read_only = true;
    Handler handler;
  };

  Impl(Config c, McpOptions o)
      : base(c), config(std::move(c)), options(std::move(o)), tools(MakeTools()) {
    OfferModels();
    OfferWorkspaces();
  }

  const Config base;  // the project's settings: its workspaces' are read over them
  Config config;      // the settings of the workspace the tool call in progress works on
  McpOptions options;
  std::vector<Tool> tools;
  std::string protocol_version{kProtocolVersions.front()};
  // Opened on first use (an index may not exist yet) and kept: with the graph in memory every
  // later question is fast. Closed after add_document writes, so the next one sees the change,
  // and reopened when another process (`grag index` in a shell) finished an update since.
  struct Opened {
    Config config;  // read once, on the session's first call on the workspace
    std::unique_ptr<Engine> reader;
    std::string reader_version;  // Engine::IndexVersion when it was opened
  };
  std::map<std::string, Opened> opened;  // by workspace ("default": the project)
  Opened* active = nullptr;              // the tool call's workspace

  static std::vector<Tool> MakeTools();
  // The query tool's "model": the models server.query_models offers, when it offers any.
  void OfferModels();
  // Every tool's "workspace": one of the project's workspaces (grag/project.h) to work on.
  void OfferWorkspaces();
  // Sets config and active to workspace `name`'s.
  Status UseWorkspace(const std::string& name);

  std::optional<json> HandleMessage(const json& message);
  json Dispatch(const std::string& method, const json& id, const json& params);
  json Initialize(const json& params);
  json ListTools() const;
  json CallTool(const json& id, const json& params);

  Result<Engine*> Reader();
  // A tool result whose content is `lead` (when given) and `json_text`, and whose
  // structuredContent is that JSON (an object; anything else is put under `key`).
  json JsonResult(std::optional<std::string> lead, const std::string& json_text,
                  const char* key) const;

  json Query(const json& args);
  json Search(const json& args);
  json GetEntity(const json& args);
  json GetCommunityReport(const json& args);
  json ListCommunities(const json& args);
  json AddDocument(const json& args);
};

std::vector<McpServer::Impl::Tool> McpServer::Impl::MakeTools() {
  std::vector<Tool> t;
  t.push_back(
      {"query", "Answer a question",
       "Answer a question from the project's knowledge graph (GraphRAG) and cite the sources. "
       "method auto (default) picks one: global for questions about the whole collection "
       "(main themes, trends), local for questions about named people, places or things and "
       "how they relate, hybrid for lookups of facts in passages. The first content item is "
       "the answer; the second is JSON with the citations, the context or points used, the "
       "route taken and statistics.",
       Schema({{"question",
                {{"type", "string"},
                 {"minLength", 1},
                 {"description", "The question, in natural language"}}},
               {"method",
                {{"type", "string"},
                 {"enum", MethodNames()},
                 {"description",
                  "auto (default): chosen by the question. global: map-reduce over community "
                  "reports. local: entities named, their neighbourhood and passages. basic: "
                  "passages nearest by embedding. hybrid: passages ranked by vector, keyword "
                  "and graph signals fused. drift (needs a model): a primer over the best "
                  "reports asks follow-up questions, answered locally, then one answer; about "
                  "10 model calls. lazy: budgeted search, passages tested for relevance within "
                  "a budget of model calls (indexes built without a model)"}}},
               {"level", IntProp("global: community level, 0 (coarsest) to the index's "
                                 "deepest; with method auto it means global",
                                 kLevelRange)},
               {"top_k", IntProp("local: entities matched at most; basic and hybrid: passages "
                                 "retrieved",
                                 kTopKRange)},
               {"budget",
                IntProp("lazy: relevance-test calls at most (default lazy.budget)", kBudgetRange)}},
              {"question"}),
       true, &Impl::Query});
  t.push_back(
      {"search", "Find passages",
       "Rank the passages (chunks of the indexed documents) a question needs, best first, "
       "without writing an answer: each with its document, text and score. Use it to read the "
       "sources themselves.",
       Schema({{"question",
                {{"type", "string"},
                 {"minLength", 1},
                 {"description", "What to look for, in natural language"}}},
               {"method",
                {{"type", "string"},
                 {"enum", RetrievalMethodList()},
                 {"description", "Ranking signal; hybrid (default) fuses the other three"}}},
               {"top_k", IntProp("Passages to return (default 10)", kTopKRange)}},
              {"question"}),
       true, &Impl::Search});
  t.push_back(
      {"get_entity", "Look up an entity",
       "Describe one entity of the knowledge graph (a person, place, organisation, thing): its "
       "description, other names resolved into it, strongest relationships, communities and "
       "source passages. Give its name (any of its names; case and punctuation do not matter) "
       "or its id. When no entity has that name, the error lists close names.",
       Schema({{"name", StringProp("The entity's name, e.g. \"Jacob Marley\"")},
               {"id", IntProp("The entity's id (as other results show it)", 0)}},
              {}),
       true, &Impl::GetEntity});
  t.push_back({"get_community_report", "Read a community report",
               "Read the report on one community (a cluster of closely related entities): "
               "title, summary, rating, findings, the full text, members and sub-communities. "
               "query results and list_communities give community ids.",
               Schema({{"id", IntProp("The community's id", 0)}}, {"id"}), true,
               &Impl::GetCommunityReport});
  t.push_back({"list_communities", "List communities",
               "List the communities of the graph with their report's title and summary, by "
               "level (0: the coarsest, broadest topics) then id.",
               Schema({{"level", IntProp("Only communities of this level", kLevelRange)}}, {}),
               true, &Impl::ListCommunities});
  t.push_back(
      {"add_document", "Add a document",
       "Save a text document into the project's input folder and (unless index is false) "
       "index it at once, so later queries and searches find it. A document with the same id "
       "is replaced. Indexing extracts entities and updates the graph, communities and "
       "reports; with an LLM configured it costs model calls.",
       Schema(
           {{"text",
             {{"type", "string"}, {"minLength", 1}, {"description", "The document's full text"}}},
            {"id", StringProp("Document id: a relative path inside the input folder, e.g. "
                              "\"notes/meeting-3.md\" (\".txt\" is added when it has no "
                              "readable extension). Default: from the title, else from the "
                              "text's hash")},
            {"title", StringProp("Title, used for the file name when no id is given")},
            {"index",
             {{"type", "boolean"},
              {"description",
               "Index it now (default true); false only saves it "
               "for the next `grag index`"}}}},
           {"text"}),
       false, &Impl::AddDocument});
  return t;
}

std::optional<json> McpServer::Impl::HandleMessage(const json& message) {
  if (!message.is_object()) {
    return ErrorReply(nullptr, kInvalidRequest, "a JSON-RPC message must be an object");
  }
  const bool has_id = message.contains("id");
  json id = nullptr;
  if (has_id) {
    id = message.at("id");
    if (!id.is_string() && !id.is_number_integer()) {
      return ErrorReply(nullptr, kInvalidRequest, "\"id\" must be a string or an integer");
    }
  }
  auto method = message.find("method");
  if (method == message.end()) {
    // A response to a request of ours: this server sends none, so there is nothing to match.
    if (message.contains("result") || message.contains("error")) return std::nullopt;
    return ErrorReply(id, kInvalidRequest, "the message has no \"method\"");
  }
  if (message.value("jsonrpc", json()) != "2.0") {
    return ErrorReply(id, kInvalidRequest, "\"jsonrpc\" must be \"2.0\"");
  }
  if (!method->is_string()) return ErrorReply(id, kInvalidRequest, "\"method\" must be a string");
  const std::string name = method->get<std::string>();
  json params = message.value("params", json::object());
  if (!params.is_object() && !params.is_array()) {
    return ErrorReply(id, kInvalidRequest, "\"params\" must be an object or an array");
  }
  if (!has_id) {
    // Notifications never get a reply, not even an error. notifications/initialized and
    // notifications/cancelled need nothing from a server that handles one message at a time.
    McpLog(LogLevel::kDebug, "notification " + name);
    return std::nullopt;
  }
  try {
    return Dispatch(name, id, params);
  } catch (const std::exception& e) {
    // A bug; the session goes on.
    McpLog(LogLevel::kError, name + ": " + e.what());
    return ErrorReply(id, kInternalError, std::string("internal error: ") + e.what());
  }
}

json McpServer::Impl::Dispatch(const std::string& method, const json& id, const json& params) {
  if (method == "initialize") return ResultReply(id, Initialize(params));
  if (method == "ping") return ResultReply(id, json::object());
  if (method == "tools/list") return ResultReply(id, ListTools());
  if (method == "tools/call") return CallTool(id, params);
  return ErrorReply(id, kMethodNotFound, "method not found: " + method);
}

json McpServer::Impl::Initialize(const json& params) {
  protocol_version = kProtocolVersions.front();
  if (params.is_object()) {
    if (auto v = params.find("protocolVersion"); v != params.end() && v->is_string()) {
      for (std::string_view known : kProtocolVersions) {
        if (v->get<std::string>() == known) protocol_version = known;
      }
    }
  }
  McpLog(LogLevel::kInfo, "session started (protocol " + protocol_version + ")");
  return {{"protocolVersion", protocol_version},
          {"capabilities", {{"tools", json::object()}}},
          {"serverInfo", {{"name", options.server_name}, {"version", options.server_version}}},
          {"instructions",
           "grag answers questions from a knowledge graph built from the project's documents. "
           "Use query for answers with citations, search for the source passages, get_entity "
           "and get_community_report to explore the graph, add_document to add knowledge."}};
}

json McpServer::Impl::ListTools() const {
  json list = json::array();
  for (const auto& t : tools) {
    list.push_back({{"name", t.name},
                    {"title", t.title},
                    {"description", t.description},
                    {"inputSchema", t.schema},
                    {"annotations",
                     {{"title", t.title},
                      {"readOnlyHint", t.read_only},
                      {"destructiveHint", false},
                      {"openWorldHint", false}}}});
  }
  return {{"tools", std::move(list)}};
}

json McpServer::Impl::CallTool(const json& id, const json& params) {
  if (!params.is_object() || !params.contains("name") || !params.at("name").is_string()) {
    return ErrorReply(id, kInvalidParams, "tools/call needs params.name, the tool's name");
  }
  const std::string name = params.at("name").get<std::string>();
  const Tool* tool = nullptr;
  std::vector<std::string> names;
  for (const auto& t : tools) {
    names.push_back(t.name);
    if (t.name == name) tool = &t;
  }
  if (!tool) {
    return ErrorReply(id, kInvalidParams,
                      "unknown tool \"" + name + "\" (tools: " + Join(names, ", ") + ")");
  }
  const json args = params.value("arguments", json::object());
  if (Status s = CheckArguments(tool->schema, args); !s.ok()) {
    return ResultReply(id, ToolError(name + ": " + s.message()));
  }
  std::string workspace(kDefaultWorkspace);
  if (args.contains("workspace") && args.at("workspace").is_string()) {
    workspace = args.at("workspace").get<std::string>();
  }
  if (Status s = UseWorkspace(workspace); !s.ok()) {
    return ResultReply(id, ToolError(name + ": " + s.message()));
  }
  McpLog(LogLevel::kDebug, "tools/call " + name);
  return ResultReply(id, (this->*(tool->handler))(args));
}

Result<Engine*> McpServer::Impl::Reader() {
  std::unique_ptr<Engine>& reader = active->reader;
  if (reader) {
    // One small read per tool call, against answers from an index that is no longer there.
    auto latest = reader->IndexVersion();
    if (latest.ok() && *latest != active->reader_version) {
      McpLog(LogLevel::kInfo, "the index was updated: reopening it");
      reader.reset();
    }
  }
  if (!reader) {
    EngineOptions eo;
    eo.keep_graph = true;
    auto engine = Engine::Open(config, eo);
    if (!engine.ok()) {
      if (engine.status().code() == ErrorCode::kNotFound) {
        return Status::NotFound(engine.status().message() +
                                " (or add a document with the add_document tool)");
      }
      return engine.status();
    }
    reader = std::move(engine).value();
    auto latest = reader->IndexVersion();
    active->reader_version = latest.ok() ? *latest : std::string();
  }
  return reader.get();
}

json McpServer::Impl::JsonResult(std::optional<std::string> lead, const std::string& json_text,
                                 const char* key) const {
  json content = json::array();
  if (lead) content.push_back(TextItem(std::move(*lead)));
  content.push_back(TextItem(json_text));
  json result = {{"content", std::move(content)}, {"isError", false}};
  if (protocol_version >= kStructuredContentSince) {
    json structured = json::parse(json_text);
    result["structuredContent"] =
        structured.is_object() ? std::move(structured) : json{{key, std::move(structured)}};
  }
  return result;
}

void McpServer::Impl::OfferWorkspaces() {
  auto names = ListWorkspaces(base);
  std::string which = names.ok() && !names->empty()
                          ? " (now: default, " + Join(*names, ", ") + ")"
                          : " (this project has none now: grag workspace create NAME)";
  for (Tool& tool : tools) {
    tool.schema["properties"]["workspace"] = {
        {"type", "string"},
        {"description", "The workspace to work on, one of the project's" + which +
                            "; default: the project itself"}};
  }
}

Status McpServer::Impl::UseWorkspace(const std::string& name) {
  auto it = opened.find(name);
  if (it == opened.end()) {
    GRAG_ASSIGN_OR_RETURN(Config loaded, LoadWorkspaceConfig(base, name));
    it = opened.emplace(name, Opened{std::move(loaded), nullptr, std::string()}).first;
  }
  active = &it->second;
  config = active->config;
  return Status::Ok();
}

void McpServer::Impl::OfferModels() {
  if (config.server.query_models.empty()) return;
  for (Tool& tool : tools) {
    if (tool.name != "query") continue;
    tool.schema["properties"]["model"] = {
        {"type", "string"},
        {"enum", config.server.query_models},
        {"description",
         "The model that writes the answer (default: the configured one); each costs what its "
         "provider charges"}};
  }
}

json McpServer::Impl::Query(const json& args) {
  QueryRequest request;
  if (std::optional<std::string> model = OptString(args, "model"); model && !model->empty()) {
    if (Status offered = CheckOfferedModel(config, *model); !offered.ok()) {
      return ToolError("query: " + offered.message());
    }
    request.model = *model;
  }
  auto engine = Reader();
  if (!engine.ok()) return ToolError(engine.status().message());
  request.question = args.at("question").get<std::string>();
  auto method = ParseQueryMethod(OptString(args, "method").value_or(config.query.method));
  if (!method.ok()) return ToolError(method.status().message());
  request.method = *method;
  request.level = OptInt(args, "level");
  request.top_k = OptInt(args, "top_k");
  request.budget = OptInt(args, "budget");
  auto r = (*engine)->Query(request);
  if (!r.ok()) return ToolError("query: " + r.status().message());
  std::string answer = r->answer.empty() ? "(no answer: nothing in the index matched)" : r->answer;
  return JsonResult(std::move(answer), QueryResultJson(*r, request.question, false), "result");
}

json McpServer::Impl::Search(const json& args) {
  auto engine = Reader();
  if (!engine.ok()) return ToolError(engine.status().message());
  SearchRequest request;
  request.question = args.at("question").get<std::string>();
  if (auto name = OptString(args, "method")) {  // else search.method
    auto method = ParseRetrievalMethod(*name);
    if (!method.ok()) return ToolError(method.status().message());
    request.method = *method;
  }
  request.top_k = OptInt(args, "top_k");
  auto r = (*engine)->Search(request);
  if (!r.ok()) return ToolError("search: " + r.status().message());
  return JsonResult(std::nullopt, RetrievalResultJson(*r, request.question, false), "result");
}

json McpServer::Impl::GetEntity(const json& args) {
  const std::optional<std::string> name = OptString(args, "name");
  std::optional<int64_t> id = OptInt(args, "id");
  if (name.has_value() == id.has_value()) {
    return ToolError("get_entity: give the entity's name or its id (one of them)");
  }
  auto engine = Reader();
  if (!engine.ok()) return ToolError(engine.status().message());
  if (name) {
    auto found = (*engine)->FindEntity(*name);
    if (!found.ok()) return ToolError("get_entity: " + found.status().message());
    if (!*found) {
      // Names that hold the asked one first, then names holding one of its words: what the
      // model likely meant.
      std::vector<std::string> close;
      std::set<std::string> seen;
      std::vector<std::string> needles = {*name};
      std::istringstream words(*name);
      for (std::string w; words >> w;) {
        if (w.size() >= 3 && w != *name) needles.push_back(w);
      }
      for (const auto& needle : needles) {
        auto listing = (*engine)->Entities(needle);
        if (!listing.ok()) break;
        for (const auto& l : *listing) {
          if (close.size() >= kCloseNames) break;
          if (seen.insert(l.entity.name).second) close.push_back(l.entity.name);
        }
        if (close.size() >= kCloseNames) break;
      }
      std::string message = "get_entity: no entity named \"" + *name + "\" in the index";
      message += close.empty() ? "; no entity name holds it or one of its words (try the "
                                 "search tool)"
                               : ". Close names: " + Join(close, "; ");
      return ToolError(message);
    }
    id = **found;
  }
  auto detail = (*engine)->GetEntity(*id, kEntityNeighbours, kEntityChunks);
  if (!detail.ok()) return ToolError("get_entity: " + detail.status().message());
  if (!*detail) return ToolError("get_entity: no entity with id " + std::to_string(*id));
  return JsonResult(std::nullopt, EntityDetailJson(**detail, false), "entity");
}

json McpServer::Impl::GetCommunityReport(const json& args) {
  auto engine = Reader();
  if (!engine.ok()) return ToolError(engine.status().message());
  const int64_t id = args.at("id").get<int64_t>();
  auto detail = (*engine)->GetCommunity(id);
  if (!detail.ok()) return ToolError("get_community_report: " + detail.status().message());
  if (!*detail) {
    return ToolError("get_community_report: no community with id " + std::to_string(id) +
                     " (list_communities lists them)");
  }
  return JsonResult(std::nullopt, CommunityDetailJson(**detail, false), "community");
}

json McpServer::Impl::ListCommunities(const json& args) {
  auto engine = Reader();
  if (!engine.ok()) return ToolError(engine.status().message());
  auto list = (*engine)->Communities(OptInt(args, "level"));
  if (!list.ok()) return ToolError("list_communities: " + list.status().message());
  return JsonResult(std::nullopt, CommunitiesJson(*list, false), "communities");
}

json McpServer::Impl::AddDocument(const json& args) {
  const std::string text = args.at("text").get<std::string>();
  const std::string doc_id =
      OptString(args, "id")
          .value_or(DefaultDocumentId(OptString(args, "title").value_or(""), text));
  if (Status s = ValidateDocumentId(doc_id); !s.ok()) {
    return ToolError("add_document: " + s.message());
  }
  const bool index = OptBool(args, "index").value_or(true);
  // The writer lock first: when another process is writing the index nothing is saved, and the
  // model can simply try again later.
  std::unique_ptr<Engine> writer;
  if (index) {
    EngineOptions eo;
    eo.writable = true;
    eo.lock_holder = options.lock_holder;
    auto engine = Engine::Open(config, eo);
    if (!engine.ok()) {
      return ToolError("add_document: cannot write the index: " + engine.status().message() +
                       " (nothing was saved; try again later)");
    }
    writer = std::move(engine).value();
  }
  auto saved = SaveInputDocument(config, doc_id, text);
  if (!saved.ok()) return ToolError("add_document: " + saved.status().message());
  json document = {
      {"id", saved->id}, {"path", saved->path}, {"replaced", saved->replaced}, {"indexed", index}};
  if (!index) {
    return JsonResult("Saved as \"" + saved->id +
                          "\"; not indexed yet (the next `grag index`, "
                          "or add_document with index true, indexes it).",
                      Dump(document), "document");
  }
  IndexRequest request;
  request.paths = {saved->path};
  request.sync_folders = false;
  McpLog(LogLevel::kInfo, "indexing " + saved->id);
  auto summary = writer->Index(request);
  writer.reset();          // releases the writer lock
  active->reader.reset();  // the next read sees the new document
  if (!summary.ok()) {
    return ToolError("add_document: saved as \"" + saved->id +
                     "\" but indexing failed: " + summary.status().message() +
                     " (the work done is kept; the next update resumes it)");
  }
  document["summary"] = json::parse(IndexSummaryJson(*summary, nullptr, false));
  std::ostringstream lead;
  lead << (saved->replaced ? "Replaced" : "Added") << " \"" << saved->id
       << "\" and indexed it: " << summary->chunks_added << " new chunks; the graph now has "
       << summary->entities << " entities and " << summary->relationships << " relationships.";
  return JsonResult(lead.str(), Dump(document), "document");
}

// ---- McpServer

McpServer::McpServer(Config config, McpOptions options)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(options))) {}

McpServer::~McpServer() = default;

std::optional<std::string> McpServer::HandleLine(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
    line.remove_suffix(1);
  }
  if (line.find_first_not_of(" \t") == std::string_view::npos) return std::nullopt;
  try {
    json message;
    try {
      message = json::parse(line);
    } catch (const json::parse_error& e) {
      return Dump(ErrorReply(nullptr, kParseError, std::string("parse error: ") + e.what()));
    }
    if (!message.is_array()) {
      auto reply = impl_->HandleMessage(message);
      if (!reply) return std::nullopt;
      return Dump(*reply);
    }
    // A JSON-RPC batch (MCP 2025-03-26 allows them): one reply array, notifications left out.
    if (message.empty()) {
      return Dump(ErrorReply(nullptr, kInvalidRequest, "an empty batch"));
    }
    json replies = json::array();
    for (const auto& m : message) {
      if (auto reply = impl_->HandleMessage(m)) replies.push_back(std::move(*reply));
    }
    if (replies.empty()) return std::nullopt;
    return Dump(replies);
  } catch (const std::exception& e) {
    McpLog(LogLevel::kError, std::string("internal error: ") + e.what());
    return Dump(ErrorReply(nullptr, kInternalError, std::string("internal error: ") + e.what()));
  }
}

Status ServeMcp(const Config& config, std::istream& in, std::ostream& out,
                const McpOptions& options) {
  McpServer server(config, options);
  std::string line;
  while (std::getline(in, line)) {
    auto reply = server.HandleLine(line);
    if (!reply) continue;
    out << *reply << '\n';
    out.flush();
    if (!out)
      return Status::IoError("cannot write to the MCP client: its end of the pipe is closed");
  }
  return Status::Ok();
}

}  // namespace grag
