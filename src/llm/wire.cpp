#include "wire.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstring>
#include <ctime>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "grag/json_view.h"

namespace grag::llm_internal {
namespace {

using nlohmann::json;

// Invalid UTF-8 in a document must not make dump() throw: replace it (U+FFFD) instead.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// Runs of whitespace become one space, so an HTML error page reads as one line.
std::string CollapseWhitespace(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool space = false;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

const json* Member(const json& object, const char* name) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string StringMember(const json& object, const char* name) {
  const json* m = Member(object, name);
  return m != nullptr && m->is_string() ? m->get<std::string>() : std::string();
}

std::optional<int64_t> CountMember(const json& object, const char* name) {
  const json* m = Member(object, name);
  if (m == nullptr || !m->is_number()) return std::nullopt;
  if (m->is_number_float()) {
    double d = m->get<double>();
    if (!std::isfinite(d) || d < 0) return std::nullopt;
    return static_cast<int64_t>(std::llround(d));
  }
  if (m->is_number_unsigned()) return static_cast<int64_t>(m->get<uint64_t>());
  return m->get<int64_t>();
}

// Fills the token counts from a "usage" object, when there is one.
void ReadUsage(const json& reply, std::optional<int64_t>* prompt,
               std::optional<int64_t>* completion) {
  const json* usage = Member(reply, "usage");
  if (usage == nullptr || !usage->is_object()) return;
  auto p = CountMember(*usage, "prompt_tokens");
  auto c = CountMember(*usage, "completion_tokens");
  if (!c) {
    // Embedding replies carry no completion_tokens; some servers only send total_tokens.
    auto total = CountMember(*usage, "total_tokens");
    if (total && p) c = std::max<int64_t>(0, *total - *p);
  }
  if (p) *prompt = p;
  if (c) *completion = c;
}

// Text of a message "content": a string, or (some servers) an array of {"type":"text","text"}.
std::optional<std::string> ContentText(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_array()) {
    std::string text;
    for (const json& part : content) {
      if (part.is_string()) {
        text += part.get<std::string>();
      } else {
        text += StringMember(part, "text");
      }
    }
    return text;
  }
  return std::nullopt;
}

// The same readers over a JsonView (what ParseChatReply reads in place).
std::optional<JsonView> Member(const JsonView& object, std::string_view name) {
  if (!object.is_object()) return std::nullopt;
  return object.Member(name);
}

std::string StringMember(const JsonView& object, std::string_view name) {
  std::optional<JsonView> m = Member(object, name);
  return m && m->is_string() ? m->String() : std::string();
}

std::optional<int64_t> CountMember(const JsonView& object, std::string_view name) {
  std::optional<JsonView> m = Member(object, name);
  if (!m || !m->is_number()) return std::nullopt;
  const JsonView::Number n = m->GetNumber();
  switch (n.type) {
    case JsonView::Number::Type::kFloat:
      if (!std::isfinite(n.d) || n.d < 0) return std::nullopt;
      return static_cast<int64_t>(std::llround(n.d));
    case JsonView::Number::Type::kUnsigned:
      return static_cast<int64_t>(n.u);
    case JsonView::Number::Type::kInteger:
      break;
  }
  return n.i;
}

void ReadUsage(const JsonView& reply, std::optional<int64_t>* prompt,
               std::optional<int64_t>* completion) {
  std::optional<JsonView> usage = Member(reply, "usage");
  if (!usage || !usage->is_object()) return;
  auto p = CountMember(*usage, "prompt_tokens");
  auto c = CountMember(*usage, "completion_tokens");
  if (!c) {
    auto total = CountMember(*usage, "total_tokens");
    if (total && p) c = std::max<int64_t>(0, *total - *p);
  }
  if (p) *prompt = p;
  if (c) *completion = c;
}

// ContentText over a view; *literal becomes the string's literal when it is a string written as
// AppendJsonString writes it (else it is left empty).
std::optional<std::string> ContentText(const JsonView& content, std::string_view* literal) {
  if (content.is_string()) {
    bool canonical = true;
    std::string text = content.String(&canonical);
    if (canonical) *literal = content.raw();
    return text;
  }
  if (content.is_array()) {
    std::string text;
    JsonView::Cursor parts(content);
    JsonView part;
    while (parts.NextElement(&part)) {
      if (part.is_string()) {
        text += part.String();
      } else {
        text += StringMember(part, "text");
      }
    }
    return text;
  }
  return std::nullopt;
}

std::string WithCode(std::string message, const json& error) {
  const json* code = Member(error, "code");
  std::string c;
  if (code != nullptr && code->is_string()) c = code->get<std::string>();
  if (code != nullptr && code->is_number_integer()) c = std::to_string(code->get<int64_t>());
  if (c.empty()) c = StringMember(error, "type");
  if (!c.empty() && message.find(c) == std::string::npos) message += " (" + c + ")";
  return message;
}

constexpr char kBase64Alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

json MessagesArray(const ChatRequest& request) {
  json messages = json::array();
  for (const ChatMessage& m : request.messages) {
    messages.push_back(json{{"role", m.role}, {"content", m.content}});
  }
  return messages;
}

// The request's JSON Schema when it has one and it is to be sent; else null.
json SchemaOf(const ChatRequest& request, bool send) {
  if (!send || request.json_schema.empty()) return json();
  json schema = json::parse(request.json_schema, nullptr, false);
  return schema.is_object() ? schema : json();
}

}  // namespace

// ---- requests ----

std::string BuildChatBody(const ChatRequest& request, const ChatBodyOptions& options) {
  if (options.extra == nullptr) return BuildChatBodyDirect(request, options);
  json body = json::object();
  body["model"] = options.model;
  body["messages"] = MessagesArray(request);
  if (request.temperature && options.send_temperature) body["temperature"] = *request.temperature;
  if (request.max_tokens) body[options.max_tokens_field] = *request.max_tokens;
  if (request.json_mode && options.send_json_mode) {
    json schema = SchemaOf(request, options.send_json_schema);
    if (schema.is_object()) {
      body["response_format"] = json{
          {"type", "json_schema"},
          {"json_schema", {{"name", "reply"}, {"schema", std::move(schema)}, {"strict", false}}}};
    } else {
      body["response_format"] = json{{"type", "json_object"}};
    }
  }
  if (!options.reasoning_effort.empty()) body["reasoning_effort"] = options.reasoning_effort;
  if (options.enable_thinking) {
    body["chat_template_kwargs"] = json{{"enable_thinking", *options.enable_thinking}};
  }
  if (options.stream) {
    body["stream"] = true;
    if (options.stream_usage) body["stream_options"] = json{{"include_usage", true}};
  }
  if (options.extra != nullptr) body.merge_patch(*options.extra);
  return Dump(body);
}

std::string BuildEmbeddingBody(const std::vector<std::string_view>& inputs,
                               const std::string& model, std::optional<int> dimensions,
                               const nlohmann::json* extra) {
  json body = json::object();
  body["model"] = model;
  json input = json::array();
  for (std::string_view s : inputs) input.push_back(std::string(s));
  body["input"] = std::move(input);
  if (dimensions) body["dimensions"] = *dimensions;
  if (extra != nullptr) body.merge_patch(*extra);
  return Dump(body);
}

Result<nlohmann::json> ParseExtraBody(std::string_view text) {
  if (Trim(text).empty()) return json::object();
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Status::InvalidArgument("extra body parameters are not valid JSON: " +
                                   Shorten(text, 200));
  }
  if (!j.is_object()) {
    return Status::InvalidArgument("extra body parameters must be a JSON object, got: " +
                                   Shorten(text, 200));
  }
  return j;
}

// ---- replies ----

Result<ChatReply> ParseChatReply(std::string_view body) {
  // Read in place (grag/json_view.h): a reply is mostly its content, which nlohmann would copy
  // byte by byte into a tree, and the content's literal is kept for the cache (ChatReply).
  JsonIndex index;
  const std::optional<JsonView> j = ParseJsonView(body, &index);
  if (!j) return Status::Parse("reply is not JSON: " + Shorten(body, 200));
  if (!j->is_object()) return Status::Parse("reply is not a JSON object: " + Shorten(body, 200));
  const std::optional<JsonView> choices = j->Member("choices");
  std::optional<JsonView> choice;
  if (choices && choices->is_array()) choice = choices->Front();
  if (!choice) {
    if (j->Member("error")) {
      return Status::Unavailable("server replied with an error: " + ErrorMessageFromBody(body));
    }
    return Status::Parse("reply has no choices: " + Shorten(body, 200));
  }
  ChatReply reply;
  reply.finish_reason = StringMember(*choice, "finish_reason");
  reply.model = StringMember(*j, "model");
  ReadUsage(*j, &reply.prompt_tokens, &reply.completion_tokens);
  if (std::optional<JsonView> usage = Member(*j, "usage")) {
    if (std::optional<JsonView> details = Member(*usage, "completion_tokens_details")) {
      reply.reasoning_tokens = CountMember(*details, "reasoning_tokens");
    }
  }

  std::optional<std::string> content;
  std::optional<JsonView> message = Member(*choice, "message");
  if (message) {
    if (std::optional<JsonView> c = Member(*message, "content")) {
      content = ContentText(*c, &reply.content_json);
    }
    for (std::string_view field : {"reasoning_content", "reasoning", "thinking"}) {
      if (std::string r = StringMember(*message, field); !r.empty()) {
        reply.reasoning = std::move(r);
        break;
      }
    }
  } else if (std::optional<JsonView> text = Member(*choice, "text")) {
    content =
        ContentText(*text, &reply.content_json);  // a completions-style choice, from older servers
  }
  if (!content) {
    std::string why;
    if (message) {
      if (std::string refusal = StringMember(*message, "refusal"); !refusal.empty()) {
        return Status::Parse("model refused: " + Shorten(refusal, 300));
      }
      if (Member(*message, "tool_calls")) why = ", tool calls instead";
    }
    if (!reply.finish_reason.empty()) why += ", finish_reason=" + reply.finish_reason;
    return Status::Parse("reply's content is missing or null" + why);
  }
  reply.content = std::move(*content);
  return reply;
}

Status ChatStreamAssembler::OnEvent(std::string_view data) {
  ++events_;
  data = Trim(data);
  if (data == "[DONE]") {
    done_ = true;
    return Status::Ok();
  }
  json j = json::parse(data, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Parse("stream chunk is not a JSON object: " + Shorten(data, 200));
  }
  if (Member(j, "error") != nullptr) {
    return Status::Unavailable("server reported an error mid-stream: " +
                               ErrorMessageFromBody(data));
  }
  ++chunks_;
  if (std::string model = StringMember(j, "model"); !model.empty()) reply_.model = model;
  ReadUsage(j, &reply_.prompt_tokens, &reply_.completion_tokens);
  const json* choices = Member(j, "choices");
  if (choices == nullptr || !choices->is_array() || choices->empty()) return Status::Ok();
  const json& choice = (*choices)[0];
  if (std::string reason = StringMember(choice, "finish_reason"); !reason.empty()) {
    reply_.finish_reason = reason;
  }
  std::optional<std::string> delta;
  if (const json* d = Member(choice, "delta")) {
    if (const json* c = Member(*d, "content")) delta = ContentText(*c);
    for (const char* field : {"reasoning_content", "reasoning", "thinking"}) {
      if (std::string r = StringMember(*d, field); !r.empty()) {
        reply_.reasoning += r;
        break;
      }
    }
  } else if (const json* t = Member(choice, "text")) {
    delta = ContentText(*t);
  }
  if (delta && !delta->empty()) {
    reply_.content += *delta;
    delivered_ = true;
    if (on_delta_) on_delta_(*delta);
  }
  return Status::Ok();
}

Result<ChatReply> ChatStreamAssembler::Finish() const {
  if (chunks_ == 0) return Status::Parse("the stream ended without any completion chunk");
  return reply_;
}

Result<EmbeddingReply> ParseEmbeddingReply(std::string_view body, size_t expected) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Parse("embedding reply is not a JSON object: " + Shorten(body, 200));
  }
  const json* data = Member(j, "data");
  if (data == nullptr || !data->is_array()) {
    if (Member(j, "error") != nullptr) {
      return Status::Unavailable("server replied with an error: " + ErrorMessageFromBody(body));
    }
    return Status::Parse("embedding reply has no data array: " + Shorten(body, 200));
  }
  if (data->size() != expected) {
    return Status::Parse(
        fmt::format("embedding reply has {} vectors for {} inputs", data->size(), expected));
  }
  EmbeddingReply reply;
  reply.vectors.resize(expected);
  std::vector<bool> seen(expected, false);
  size_t dimension = 0;
  for (size_t i = 0; i < data->size(); ++i) {
    const json& item = (*data)[i];
    size_t index = i;
    if (auto given = CountMember(item, "index")) index = static_cast<size_t>(*given);
    if (index >= expected || seen[index]) {
      return Status::Parse(fmt::format("embedding reply has a bad or repeated index {}", index));
    }
    seen[index] = true;
    const json* embedding = Member(item, "embedding");
    std::vector<float>& v = reply.vectors[index];
    if (embedding != nullptr && embedding->is_array()) {
      v.reserve(embedding->size());
      for (const json& x : *embedding) {
        if (!x.is_number()) return Status::Parse("embedding holds a non-number");
        v.push_back(x.get<float>());
      }
    } else if (embedding != nullptr && embedding->is_string()) {
      auto decoded = DecodeFloats(embedding->get<std::string>());  // encoding_format=base64
      if (!decoded) return Status::Parse("embedding is a string but not base64 float32");
      v = std::move(*decoded);
    } else {
      return Status::Parse(fmt::format("embedding reply item {} has no embedding", i));
    }
    if (v.empty()) return Status::Parse("embedding reply holds an empty vector");
    if (dimension == 0) dimension = v.size();
    if (v.size() != dimension) {
      return Status::Parse(
          fmt::format("embedding reply mixes dimensions {} and {}", dimension, v.size()));
    }
  }
  reply.model = StringMember(j, "model");
  std::optional<int64_t> unused;
  ReadUsage(j, &reply.prompt_tokens, &unused);
  return reply;
}

// ---- server-sent events ----

Status SseParser::Feed(std::string_view bytes, const Handler& handler) {
  partial_.append(bytes);
  size_t start = 0;
  Status status;
  for (size_t end; (end = partial_.find('\n', start)) != std::string::npos; start = end + 1) {
    std::string_view line(partial_.data() + start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    status = Line(line, handler);
    if (!status.ok()) {
      start = end + 1;
      break;
    }
  }
  partial_.erase(0, start);
  return status;
}

Status SseParser::Finish(const Handler& handler) {
  if (!partial_.empty()) {
    std::string last = std::move(partial_);
    partial_.clear();
    std::string_view line(last);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    GRAG_RETURN_IF_ERROR(Line(line, handler));
  }
  return Dispatch(handler);
}

Status SseParser::Line(std::string_view line, const Handler& handler) {
  if (line.empty()) return Dispatch(handler);
  if (line.front() == ':') return Status::Ok();  // a comment (keep-alive)
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "event") {
    if (value == "error") field_ = "error";
    return Status::Ok();
  }
  if (field != "data" && field != "error") return Status::Ok();  // id, retry: not ours
  if (field == "error") field_ = "error";                        // llama.cpp's "error: {...}" lines
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
  return Status::Ok();
}

Status SseParser::Dispatch(const Handler& handler) {
  Status status;
  if (has_data_) status = handler(field_, data_);
  data_.clear();
  has_data_ = false;
  field_ = "data";
  return status;
}

// ---- errors, retries ----

std::string ErrorMessageFromBody(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    if (const json* error = Member(j, "error")) {
      if (error->is_string()) return error->get<std::string>();  // Ollama, llama.cpp (older)
      if (error->is_object()) {
        std::string m = StringMember(*error, "message");
        if (!m.empty()) return WithCode(std::move(m), *error);
      }
    }
    if (std::string m = StringMember(j, "message"); !m.empty()) return WithCode(m, j);  // vLLM
    if (const json* detail = Member(j, "detail")) {  // FastAPI-based servers
      return detail->is_string() ? detail->get<std::string>() : Shorten(Dump(*detail), 300);
    }
  }
  if (LooksLikeHtml(body)) {
    // A proxy's or a web server's error page: its title says all there is to say.
    const std::string lower = Lower(body);
    const size_t open = lower.find("<title>");
    const size_t close = lower.find("</title>");
    if (open != std::string::npos && close != std::string::npos && close > open) {
      return "an HTML page titled \"" +
             Shorten(CollapseWhitespace(Trim(body.substr(open + 7, close - open - 7))), 120) + "\"";
    }
    // No title: its text without the tags.
    std::string text;
    bool in_tag = false;
    for (char c : body) {
      if (c == '<') {
        in_tag = true;
        text += ' ';
      } else if (c == '>') {
        in_tag = false;
      } else if (!in_tag) {
        text += c;
      }
    }
    const std::string words = Shorten(CollapseWhitespace(Trim(text)), 120);
    return words.empty() ? "an HTML page" : "an HTML page: " + words;
  }
  return Shorten(CollapseWhitespace(Trim(body)), 300);
}

bool LooksLikeHtml(std::string_view body) {
  const std::string_view t = Trim(body);
  return t.starts_with('<');
}

bool IsQuotaExhausted(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return false;
  const json* error = Member(j, "error");
  if (error == nullptr) return false;
  return StringMember(*error, "code") == "insufficient_quota" ||
         StringMember(*error, "type") == "insufficient_quota";
}

Status HttpErrorStatus(int status, std::string_view body, std::string_view url) {
  std::string message = fmt::format("HTTP {} from {}", status, url);
  std::string server = ErrorMessageFromBody(body);
  if (!server.empty()) message += ": " + server;
  // Every refusal by the endpoint is a failure of the model service (exit code 1), whatever its
  // cause; the message says what to check. Whether to retry is decided by the status itself
  // (IsRetryableStatus), not by these kinds.
  if (status == 401 || status == 403) {
    message += " (check the API key)";
    return Status::PermissionDenied(std::move(message));
  }
  if (status == 404) {
    message += " (check the base URL, which usually ends in /v1, and the model or deployment name)";
    return Status::Unavailable(std::move(message));
  }
  if (status == 408) return Status::Timeout(std::move(message));
  if (status == 429) return Status::RateLimited(std::move(message));
  return Status::Unavailable(std::move(message));
}

Status CheckReplyIsApi(const HttpResponse& response, std::string_view url, bool streaming) {
  const std::string type = Lower(response.Header("content-type").value_or(""));
  const std::string_view body = Trim(response.body);
  const bool json_type = type.find("json") != std::string::npos;
  const bool stream_type = type.find("event-stream") != std::string::npos;
  const bool looks_json = body.starts_with('{') || body.starts_with('[');
  const bool looks_stream =
      body.starts_with("data:") || body.starts_with("event:") || body.starts_with(':');
  bool ok;
  if (type.find("html") != std::string::npos || LooksLikeHtml(body)) {
    ok = false;
  } else if (json_type || stream_type || type.empty()) {
    ok = true;  // says it is the API's: a bad body is the parser's to report (kParse)
  } else {
    // text/plain and friends: some servers label JSON badly; judge by the body.
    ok = looks_json || (streaming && looks_stream);
  }
  if (ok) return Status::Ok();
  return Status::Unavailable(fmt::format(
      "{} answered with {} instead of JSON: it is not an OpenAI-compatible API (check the base "
      "URL, which usually ends in /v1): {}",
      url, type.empty() ? std::string("a body of unknown type") : type, Shorten(body, 120)));
}

bool IsRetryableStatus(int status) {
  // 501 and 505: the server does not do this at all; no later attempt will differ.
  return status == 408 || status == 429 || (status >= 500 && status != 501 && status != 505);
}

std::optional<std::chrono::milliseconds> ParseRetryAfter(
    const HttpResponse& response, std::chrono::system_clock::time_point wall_now) {
  auto number = [](std::string_view s) -> std::optional<double> {
    s = Trim(s);
    double value = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(value) || value < 0) {
      return std::nullopt;
    }
    return value;
  };
  if (auto ms = response.Header("retry-after-ms")) {
    if (auto v = number(*ms)) return std::chrono::milliseconds(std::llround(*v));
  }
  auto header = response.Header("retry-after");
  if (!header) return std::nullopt;
  if (auto seconds = number(*header)) {
    return std::chrono::milliseconds(std::llround(*seconds * 1000.0));
  }
  // An HTTP date (IMF-fixdate), e.g. "Wed, 21 Oct 2015 07:28:00 GMT".
  std::tm tm{};
  const char* end = strptime(std::string(Trim(*header)).c_str(), "%a, %d %b %Y %H:%M:%S", &tm);
  if (end == nullptr) return std::nullopt;
  std::time_t t = timegm(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  auto wait = std::chrono::system_clock::from_time_t(t) - wall_now;
  if (wait < std::chrono::milliseconds(0)) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(wait);
}

std::chrono::milliseconds BackoffDelay(int attempt, std::chrono::milliseconds base,
                                       std::chrono::milliseconds cap, double u) {
  double d = static_cast<double>(base.count()) * std::pow(2.0, std::clamp(attempt, 0, 62));
  d = std::min(d, static_cast<double>(cap.count()));
  u = std::clamp(u, 0.0, 1.0);
  return std::chrono::milliseconds(std::llround(d / 2 + u * d / 2));
}

// ---- small helpers ----

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<unsigned char>(bytes[k])); };
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t n = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out += kBase64Alphabet[n >> 18 & 63];
    out += kBase64Alphabet[n >> 12 & 63];
    out += kBase64Alphabet[n >> 6 & 63];
    out += kBase64Alphabet[n & 63];
  }
  if (size_t rest = bytes.size() - i; rest > 0) {
    uint32_t n = byte(i) << 16 | (rest == 2 ? byte(i + 1) << 8 : 0);
    out += kBase64Alphabet[n >> 18 & 63];
    out += kBase64Alphabet[n >> 12 & 63];
    out += rest == 2 ? kBase64Alphabet[n >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  std::array<int, 256> value{};
  value.fill(-1);
  for (int k = 0; k < 64; ++k) value[static_cast<unsigned char>(kBase64Alphabet[k])] = k;
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = value[static_cast<unsigned char>(c)];
    if (v < 0) return std::nullopt;
    acc = acc << 6 | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>(acc >> bits & 0xFF);
    }
  }
  if (bits >= 6) return std::nullopt;  // a lone trailing character cannot be
  return out;
}

std::string EncodeFloats(const std::vector<float>& values) {
  std::string bytes;
  bytes.reserve(values.size() * 4);
  for (float f : values) {
    auto bits = std::bit_cast<uint32_t>(f);
    for (int k = 0; k < 4; ++k) bytes += static_cast<char>(bits >> (8 * k) & 0xFF);
  }
  return Base64Encode(bytes);
}

std::optional<std::vector<float>> DecodeFloats(std::string_view text) {
  auto bytes = Base64Decode(text);
  if (!bytes || bytes->size() % 4 != 0) return std::nullopt;
  std::vector<float> values(bytes->size() / 4);
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits = 0;
    for (int k = 0; k < 4; ++k) {
      bits |= static_cast<uint32_t>(static_cast<unsigned char>((*bytes)[i * 4 + k])) << (8 * k);
    }
    values[i] = std::bit_cast<float>(bits);
  }
  return values;
}

std::string Shorten(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

// ---- parameters a server refuses ----

std::string RefusedParameter(int status, std::string_view body) {
  if (status != 400 && status != 422) return "";
  std::string text = ErrorMessageFromBody(body);
  if (text.empty()) text = std::string(body.substr(0, 2000));
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Most specific first: "max_completion_tokens" does not contain "max_tokens", but a refusal of
  // one often names the other as the way out, so the one named first is the one refused.
  static constexpr std::string_view kFields[] = {
      "response_format", "json_object",      "json_schema", "max_completion_tokens",
      "max_tokens",      "reasoning_effort", "temperature", "chat_template_kwargs",
      "stream_options",  "enable_thinking",  "think",       "format"};
  // Ollama, asked to think or not by a model that cannot: "... does not support thinking".
  if (text.find("support thinking") != std::string::npos) return "think";
  size_t best = std::string::npos;
  std::string_view found;
  for (std::string_view f : kFields) {
    const size_t at = text.find(f);
    if (at == std::string::npos) continue;
    if (f == "think" && text.find("thinking") == at) continue;  // not the field itself
    if (f == "format" && at >= 9 && text.compare(at - 9, 9, "response_") == 0) continue;
    if (best == std::string::npos || at < best) {
      best = at;
      found = f;
    }
  }
  if (found == "json_object" || found == "json_schema") return "response_format";
  if (found == "enable_thinking") return "chat_template_kwargs";
  return std::string(found);
}

// ---- Ollama's own API ----

std::string BuildOllamaChatBody(const ChatRequest& request, const OllamaChatOptions& options,
                                const nlohmann::json* extra) {
  json body = json::object();
  body["model"] = options.model;
  body["messages"] = MessagesArray(request);
  body["stream"] = false;
  if (request.json_mode && options.send_json_mode) {
    json schema = SchemaOf(request, options.send_json_schema);
    body["format"] = schema.is_object() ? std::move(schema) : json("json");
  }
  json opts = json::object();
  if (request.temperature) opts["temperature"] = *request.temperature;
  if (request.max_tokens) opts["num_predict"] = *request.max_tokens;
  if (options.num_ctx > 0) opts["num_ctx"] = options.num_ctx;
  if (!opts.empty()) body["options"] = std::move(opts);
  if (!options.keep_alive.empty()) body["keep_alive"] = options.keep_alive;
  if (options.think) body["think"] = *options.think;
  if (extra != nullptr) body.merge_patch(*extra);
  return Dump(body);
}

Result<ChatReply> ParseOllamaChatReply(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Parse("reply is not a JSON object: " + Shorten(body, 200));
  }
  if (j.contains("error")) {
    return Status::Unavailable("server replied with an error: " + ErrorMessageFromBody(body));
  }
  const json message = j.value("message", json());
  if (!message.is_object()) {
    return Status::Parse("Ollama reply has no message: " + Shorten(body, 200));
  }
  ChatReply reply;
  reply.model = j.value("model", std::string());
  reply.finish_reason = j.value("done_reason", std::string());
  if (std::optional<std::string> text = ContentText(message.value("content", json()))) {
    reply.content = std::move(*text);
  }
  reply.reasoning = message.value("thinking", std::string());
  if (const json p = j.value("prompt_eval_count", json()); p.is_number_integer()) {
    reply.prompt_tokens = p.get<int64_t>();
  }
  if (const json e = j.value("eval_count", json()); e.is_number_integer()) {
    reply.completion_tokens = e.get<int64_t>();
  }
  return reply;
}

std::string BuildOllamaEmbedBody(const std::vector<std::string_view>& inputs,
                                 const std::string& model, int64_t num_ctx,
                                 const std::string& keep_alive, const nlohmann::json* extra) {
  json body = json::object();
  body["model"] = model;
  json input = json::array();
  for (std::string_view s : inputs) input.push_back(std::string(s));
  body["input"] = std::move(input);
  if (num_ctx > 0) body["options"] = json{{"num_ctx", num_ctx}};
  if (!keep_alive.empty()) body["keep_alive"] = keep_alive;
  if (extra != nullptr) body.merge_patch(*extra);
  return Dump(body);
}

Result<EmbeddingReply> ParseOllamaEmbedReply(std::string_view body, size_t expected) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Parse("embedding reply is not a JSON object: " + Shorten(body, 200));
  }
  const json list = j.value("embeddings", json());
  if (!list.is_array()) {
    return Status::Parse("Ollama embedding reply has no \"embeddings\" list: " +
                         Shorten(body, 200));
  }
  EmbeddingReply reply;
  reply.model = j.value("model", std::string());
  for (const json& v : list) {
    if (!v.is_array() || v.empty()) return Status::Parse("an embedding is not a list of numbers");
    std::vector<float> vec;
    vec.reserve(v.size());
    for (const json& x : v) {
      if (!x.is_number()) return Status::Parse("an embedding holds a value that is not a number");
      vec.push_back(x.get<float>());
    }
    if (!reply.vectors.empty() && vec.size() != reply.vectors.front().size()) {
      return Status::Parse("embeddings of different dimensions in one reply");
    }
    reply.vectors.push_back(std::move(vec));
  }
  if (reply.vectors.size() != expected) {
    return Status::Parse("expected " + std::to_string(expected) + " embeddings, got " +
                         std::to_string(reply.vectors.size()));
  }
  if (const json p = j.value("prompt_eval_count", json()); p.is_number_integer()) {
    reply.prompt_tokens = p.get<int64_t>();
  }
  return reply;
}

std::optional<int64_t> ParseOllamaContextLength(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  if (const json info = j.value("model_info", json()); info.is_object()) {
    for (const auto& [key, value] : info.items()) {
      if (key.ends_with(".context_length") && value.is_number_integer() &&
          value.get<int64_t>() > 0) {
        return value.get<int64_t>();
      }
    }
  }
  // "parameters" is Modelfile text: a line "num_ctx 8192" when the model sets one.
  const json params_field = j.value("parameters", json());
  const std::string params = params_field.is_string() ? params_field.get<std::string>() : "";
  for (size_t at = params.find("num_ctx"); at != std::string::npos;
       at = params.find("num_ctx", at + 1)) {
    size_t i = at + 7;
    while (i < params.size() && (params[i] == ' ' || params[i] == '\t')) ++i;
    int64_t n = 0;
    size_t digits = 0;
    while (i < params.size() && std::isdigit(static_cast<unsigned char>(params[i])) != 0 &&
           digits < 12) {
      n = n * 10 + (params[i++] - '0');
      ++digits;
    }
    if (n > 0) return n;
  }
  return std::nullopt;
}

Result<int64_t> OllamaContextFor(int64_t prompt_tokens, int64_t output_tokens, int64_t model_max,
                                 std::string_view model) {
  // Another tokenizer may count up to a fifth more tokens than ours; the chat template adds a
  // few per message.
  const int64_t prompt = prompt_tokens + prompt_tokens / 5 + 64;
  const int64_t wanted = prompt + std::max<int64_t>(output_tokens, 256);
  int64_t ctx = 2048;
  while (ctx < wanted && ctx < (int64_t{1} << 40)) ctx *= 2;
  if (model_max > 0 && ctx > model_max) {
    if (prompt > model_max) {
      return Status::InvalidArgument(
          "a prompt of about " + std::to_string(prompt) + " tokens does not fit the context " +
          "window of model " + std::string(model) + " (" + std::to_string(model_max) +
          " tokens): lower chunks.size, or use a model with a longer context");
    }
    ctx = model_max;
  }
  return ctx;
}

}  // namespace grag::llm_internal
