// grag serve's OpenAI-compatible endpoint: /v1/models and /v1/chat/completions, each query
// method a chat model (grag-local, or grag-local/MODEL to choose the model that answers).
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <string>

#include "grag/engine_json.h"
#include "grag/project.h"
#include "server_internal.h"

namespace grag {
namespace {

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

}  // namespace

// ---------------------------------------------------------------- OpenAI compatibility

void Server::Impl::Models(Workspace& ws, const Request& req, Response& res) {
  json data = json::array();
  auto add = [&](const std::string& id) {
    data.push_back(
        {{"id", id}, {"object", "model"}, {"created", 1767225600}, {"owned_by", "grag"}});
  };
  for (const auto& [name, method] : ChatModels()) add(name);
  // Each method again with each model a request may choose to answer (server.query_models).
  for (const std::string& answering : ws.config.server.query_models) {
    for (const auto& [name, method] : ChatModels()) add(name + "/" + answering);
  }
  // Each method on each other workspace the key opens: grag-local@NAME.
  for (const std::string& other : WorkspacesOpenedBy(req).value_or(std::vector<std::string>{})) {
    if (other == ws.name) continue;
    for (const auto& [name, method] : ChatModels()) add(name + "@" + other);
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

void Server::Impl::ChatCompletions(Workspace& route_ws, const Request& req, Response& res) {
  auto body = ParseBody(req, false);
  if (!body.ok()) return SendError(res, body.status());
  auto model = OptString(*body, "model");
  if (!model.ok()) return SendError(res, model.status());
  const std::string model_name = model->value_or("grag-auto");
  // "grag-local", or "grag-local/gpt-4o-mini": the method, then the model that answers; either
  // may end in @WORKSPACE, the workspace that answers.
  std::string chosen = model_name;
  std::shared_ptr<Workspace> ws = route_ws.shared_from_this();
  if (const size_t at = chosen.rfind('@');
      at != std::string::npos && ValidateWorkspaceName(chosen.substr(at + 1), true).ok()) {
    auto named = WorkspaceFor(req, chosen.substr(at + 1));
    if (!named.ok()) return SendError(res, named.status());
    ws = *named;
    chosen.resize(at);
  }
  const size_t slash = chosen.find('/');
  const std::string method_name = chosen.substr(0, slash);
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
    answering = chosen.substr(slash + 1);
    if (Status offered = CheckOfferedModel(ws->config, answering); !offered.ok()) {
      return SendError(res, offered);
    }
  }
  auto question = LastUserText(*body);
  if (!question.ok()) return SendError(res, question.status());
  auto stream = OptBool(*body, "stream", false);
  if (!stream.ok()) return SendError(res, stream.status());
  auto engine = ws->Reader();
  if (!engine.ok()) return SendError(res, engine.status());

  auto request = std::make_shared<QueryRequest>();
  request->question = *question;
  request->method = *method;
  request->model = answering;
  const std::string id = "chatcmpl-" + RandomHex(12);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));

  if (!*stream) {
    auto result = Ask(*ws, **engine, *request);
    if (!result.ok()) return SendError(res, result.status());
    const ChatAnswerParts parts = ChatAnswer(*result, request->question);
    const int64_t prompt_tokens = parts.prompt_tokens;
    const int64_t completion_tokens = parts.completion_tokens;
    json out = {
        {"id", id},
        {"object", "chat.completion"},
        {"created", created},
        {"model", model_name},
        {"choices",
         json::array({{{"index", 0},
                       {"message",
                        {{"role", "assistant"}, {"content", result->answer + parts.sources_text}}},
                       {"logprobs", nullptr},
                       {"finish_reason", "stop"}}})},
        {"usage",
         {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}}},
        {"citations", json::parse(parts.citations_json)},
        {"grag", {{"method", QueryMethodName(result->method)}}}};
    return SendJson(res, 200, Dump(out));
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [this, ws, request, engine = *engine, id, created, model_name](
                               size_t, httplib::DataSink& sink) {
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
          return Ask(*ws, *engine, *request);
        }();
        if (!open || gone) return false;
        if (!result.ok()) {
          SinkWrite(sink, SseEvent("", Dump(ErrorObject(result.status()))));
        } else {
          const ChatAnswerParts parts = ChatAnswer(*result, request->question);
          // An answer written without a model (extractive) arrives whole, with its sources.
          std::string rest = streamed ? parts.sources_text : result->answer + parts.sources_text;
          SinkWrite(sink, chunk({{"content", rest}}, nullptr, json::object()));
          SinkWrite(sink, chunk(json::object(), "stop",
                                {{"citations", json::parse(parts.citations_json)},
                                 {"grag", {{"method", QueryMethodName(result->method)}}}}));
        }
        SinkWrite(sink, "data: [DONE]\n\n");
        sink.done();
        return true;
      });
}

}  // namespace grag
