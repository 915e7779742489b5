#include "support/fake_openai_server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <thread>

namespace grag::testing {
namespace {

using nlohmann::json;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

json UsageJson(const FakeUsage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json Chunk(std::string_view model, json delta, json finish_reason) {
  return {{"id", "chatcmpl-fake"},
          {"object", "chat.completion.chunk"},
          {"created", 1700000000},
          {"model", std::string(model)},
          {"choices", json::array({{{"index", 0},
                                    {"delta", std::move(delta)},
                                    {"finish_reason", std::move(finish_reason)}}})}};
}

// Splits text into word-sized deltas that concatenate back to it.
std::vector<std::string> Pieces(const std::string& text) {
  std::vector<std::string> out;
  std::string piece;
  for (char c : text) {
    piece += c;
    if (c == ' ') {
      out.push_back(std::move(piece));
      piece.clear();
    }
  }
  if (!piece.empty()) out.push_back(std::move(piece));
  return out;
}

}  // namespace

// ---- FakeRequest ----

std::string FakeRequest::Header(std::string_view name) const {
  auto it = headers.find(Lower(name));
  return it == headers.end() ? std::string() : it->second;
}

bool FakeRequest::IsChat() const { return path.ends_with("/chat/completions"); }
bool FakeRequest::IsEmbeddings() const { return path.ends_with("/embeddings"); }

bool FakeRequest::Stream() const {
  return json.is_object() && json.contains("stream") && json["stream"].is_boolean() &&
         json["stream"].get<bool>();
}

std::string FakeRequest::Model() const {
  return json.is_object() && json.contains("model") && json["model"].is_string()
             ? json["model"].get<std::string>()
             : std::string();
}

std::string FakeRequest::LastMessage(std::string_view role) const {
  if (!json.is_object() || !json.contains("messages") || !json["messages"].is_array()) return "";
  const auto& messages = json["messages"];
  for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
    if (it->is_object() && it->value("role", "") == role && (*it)["content"].is_string()) {
      return (*it)["content"].get<std::string>();
    }
  }
  return "";
}

std::vector<std::string> FakeRequest::EmbeddingInputs() const {
  std::vector<std::string> out;
  if (!json.is_object() || !json.contains("input")) return out;
  const auto& input = json["input"];
  if (input.is_string()) out.push_back(input.get<std::string>());
  if (input.is_array()) {
    for (const auto& x : input) out.push_back(x.is_string() ? x.get<std::string>() : x.dump());
  }
  return out;
}

// ---- replies ----

FakeReply ChatCompletion(std::string_view content, std::optional<FakeUsage> usage,
                         std::string_view model) {
  json body = {
      {"id", "chatcmpl-fake"},
      {"object", "chat.completion"},
      {"created", 1700000000},
      {"model", std::string(model)},
      {"choices",
       json::array({{{"index", 0},
                     {"message", {{"role", "assistant"}, {"content", std::string(content)}}},
                     {"finish_reason", "stop"}}})}};
  if (usage) body["usage"] = UsageJson(*usage);
  FakeReply reply;
  reply.body = body.dump();
  return reply;
}

FakeReply ChatStream(const std::vector<std::string>& deltas, std::optional<FakeUsage> usage,
                     std::string_view model) {
  FakeReply reply;
  reply.content_type = "text/event-stream";
  reply.events.push_back(Chunk(model, {{"role", "assistant"}, {"content", ""}}, nullptr).dump());
  for (const std::string& d : deltas) {
    reply.events.push_back(Chunk(model, {{"content", d}}, nullptr).dump());
  }
  reply.events.push_back(Chunk(model, json::object(), "stop").dump());
  if (usage) {
    json last = Chunk(model, json::object(), nullptr);
    last["choices"] = json::array();
    last["usage"] = UsageJson(*usage);
    reply.events.push_back(last.dump());
  }
  reply.events.push_back("[DONE]");
  return reply;
}

FakeReply Embeddings(const std::vector<std::vector<float>>& vectors,
                     std::optional<int> prompt_tokens, std::string_view model) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", vectors[i]}});
  }
  json body = {{"object", "list"}, {"data", std::move(data)}, {"model", std::string(model)}};
  if (prompt_tokens) {
    body["usage"] = {{"prompt_tokens", *prompt_tokens}, {"total_tokens", *prompt_tokens}};
  }
  FakeReply reply;
  reply.body = body.dump();
  return reply;
}

FakeReply OpenAIError(int status, std::string_view message, std::string_view type,
                      std::string_view code) {
  json error = {{"message", std::string(message)}, {"type", std::string(type)}, {"param", nullptr}};
  error["code"] = code.empty() ? json(nullptr) : json(std::string(code));
  FakeReply reply;
  reply.status = status;
  reply.body = json{{"error", std::move(error)}}.dump();
  return reply;
}

FakeReply RawReply(int status, std::string body, std::string content_type) {
  FakeReply reply;
  reply.status = status;
  reply.body = std::move(body);
  reply.content_type = std::move(content_type);
  return reply;
}

std::vector<float> FakeEmbedding(std::string_view text, size_t dimension) {
  return ScriptedEmbeddingModel::HashEmbedding(text, dimension);
}

FakeHandler Answering(std::function<std::string(const FakeRequest&)> answer,
                      size_t embedding_dimension) {
  return [answer = std::move(answer), embedding_dimension](const FakeRequest& r) -> FakeReply {
    if (r.IsChat()) {
      std::string text = answer(r);
      FakeUsage usage{static_cast<int>(EstimateTokens(r.body)),
                      static_cast<int>(EstimateTokens(text))};
      return r.Stream() ? ChatStream(Pieces(text), usage) : ChatCompletion(text, usage);
    }
    if (r.IsEmbeddings()) {
      std::vector<std::vector<float>> vectors;
      int tokens = 0;
      for (const std::string& input : r.EmbeddingInputs()) {
        vectors.push_back(FakeEmbedding(input, embedding_dimension));
        tokens += static_cast<int>(EstimateTokens(input));
      }
      return Embeddings(vectors, tokens);
    }
    return OpenAIError(404, "the fake server has no route " + r.path, "invalid_request_error",
                       "not_found");
  };
}

// ---- FakeOpenAIServer ----

// httplib listens with a backlog of 5: a sixth simultaneous connect has its SYN dropped and the
// client's kernel retries a second later, which would make concurrency tests slow and their
// in-flight counts meaningless. Listening again on the bound socket raises the backlog.
class WideBacklogServer : public httplib::Server {
 public:
  bool WidenBacklog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }
};

struct FakeOpenAIServer::Impl {
  WideBacklogServer server;
  std::thread listener;
  std::atomic<bool> listen_returned{false};

  mutable std::mutex mu;
  FakeHandler handler;                // guarded by mu
  std::vector<FakeRequest> requests;  // guarded by mu
  int in_flight = 0;                  // guarded by mu
  int max_in_flight = 0;              // guarded by mu

  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;  // guarded by stop_mu

  // Sleeps for `d` unless the server stops first; false when it stopped.
  bool Wait(std::chrono::milliseconds d) {
    std::unique_lock lock(stop_mu);
    return !stop_cv.wait_for(lock, d, [&] { return stopping; });
  }

  void EndRequest() {
    std::lock_guard lock(mu);
    --in_flight;
  }

  void Handle(const httplib::Request& req, httplib::Response& res) {
    FakeRequest r;
    r.path = req.path;
    for (const auto& [k, v] : req.params) r.query[k] = v;
    for (const auto& [k, v] : req.headers) r.headers[Lower(k)] = v;
    r.body = req.body;
    r.json = json::parse(req.body, nullptr, false);
    if (r.json.is_discarded()) r.json = nullptr;
    FakeHandler h;
    {
      std::lock_guard lock(mu);
      r.index = static_cast<int>(requests.size());
      requests.push_back(r);
      h = handler;
      ++in_flight;
      max_in_flight = std::max(max_in_flight, in_flight);
    }
    FakeReply reply;
    try {
      reply = h(r);
    } catch (const std::exception& e) {
      reply = OpenAIError(500, std::string("the fake server's handler threw: ") + e.what(),
                          "server_error");
    }
    if (reply.delay.count() > 0) Wait(reply.delay);
    res.status = reply.status;
    for (const auto& [name, value] : reply.headers) res.set_header(name, value);
    if (reply.events.empty()) {
      res.set_content(reply.body, reply.content_type);
      EndRequest();
      return;
    }
    auto events = std::make_shared<std::vector<std::string>>(std::move(reply.events));
    const std::chrono::milliseconds gap = reply.event_gap;
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, events, gap](size_t /*offset*/, httplib::DataSink& sink) {
          for (size_t i = 0; i < events->size(); ++i) {
            if (i > 0 && gap.count() > 0 && !Wait(gap)) break;
            std::string frame = "data: " + (*events)[i] + "\n\n";
            if (!sink.write(frame.data(), frame.size())) break;
          }
          sink.done();
          return true;
        },
        [this](bool /*success*/) { EndRequest(); });  // in flight until the stream is written
  }
};

FakeOpenAIServer::FakeOpenAIServer(FakeHandler handler, FakeServerOptions options)
    : impl_(std::make_unique<Impl>()) {
  // A proxy configured for the machine must not intercept calls to the fake server.
  const char* no_proxy = std::getenv("no_proxy");
  std::string bypass = no_proxy != nullptr ? no_proxy : "";
  if (bypass.find("127.0.0.1") == std::string::npos) {
    bypass += bypass.empty() ? "127.0.0.1,localhost" : ",127.0.0.1,localhost";
    setenv("no_proxy", bypass.c_str(), 1);
  }
  impl_->handler = handler ? std::move(handler)
                           : Answering([](const FakeRequest&) { return std::string("ok"); });
  const auto threads = static_cast<size_t>(std::max(options.threads, 1));
  // httplib's API takes ownership of a raw pointer here.
  impl_->server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl_->server.set_keep_alive_timeout(options.keep_alive_seconds);
  impl_->server.set_keep_alive_max_count(
      static_cast<size_t>(std::max(options.keep_alive_max_count, 1)));
  impl_->server.set_tcp_nodelay(true);  // no 40 ms Nagle stalls between headers and body
  Impl* impl = impl_.get();
  impl_->server.Post(".*", [impl](const httplib::Request& req, httplib::Response& res) {
    impl->Handle(req, res);
  });
  port_ = impl_->server.bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("FakeOpenAIServer: cannot listen on 127.0.0.1");
  if (!impl_->server.WidenBacklog()) {
    throw std::runtime_error("FakeOpenAIServer: cannot widen the listen backlog");
  }
  // The socket already listens: connections made before the thread runs wait in the backlog.
  impl_->listener = std::thread([impl] {
    impl->server.listen_after_bind();
    impl->listen_returned = true;
  });
}

FakeOpenAIServer::~FakeOpenAIServer() {
  {
    std::lock_guard lock(impl_->stop_mu);
    impl_->stopping = true;
  }
  impl_->stop_cv.notify_all();
  // stop() does nothing until listen has started: wait for it (or for it to have failed).
  while (!impl_->server.is_running() && !impl_->listen_returned) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  impl_->server.stop();
  impl_->listener.join();
}

std::string FakeOpenAIServer::endpoint() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

std::string FakeOpenAIServer::base_url() const { return endpoint() + "/v1"; }

void FakeOpenAIServer::SetHandler(FakeHandler handler) {
  std::lock_guard lock(impl_->mu);
  impl_->handler = std::move(handler);
}

int FakeOpenAIServer::request_count() const {
  std::lock_guard lock(impl_->mu);
  return static_cast<int>(impl_->requests.size());
}

int FakeOpenAIServer::in_flight() const {
  std::lock_guard lock(impl_->mu);
  return impl_->in_flight;
}

int FakeOpenAIServer::max_in_flight() const {
  std::lock_guard lock(impl_->mu);
  return impl_->max_in_flight;
}

std::vector<FakeRequest> FakeOpenAIServer::requests() const {
  std::lock_guard lock(impl_->mu);
  return impl_->requests;
}

FakeRequest FakeOpenAIServer::request(size_t i) const {
  std::lock_guard lock(impl_->mu);
  if (i >= impl_->requests.size()) {
    ADD_FAILURE() << "the fake server saw " << impl_->requests.size() << " requests, not " << i + 1;
    return {};
  }
  return impl_->requests[i];
}

// ---- FakeClock ----

FakeClock::FakeClock()
    : start_(std::chrono::steady_clock::time_point(std::chrono::hours(1000))),
      now_(start_),
      wall_start_(std::chrono::system_clock::from_time_t(1704067200)) {}

Clock::TimePoint FakeClock::Now() {
  std::lock_guard lock(mu_);
  return now_;
}

void FakeClock::SleepUntil(TimePoint deadline) {
  std::lock_guard lock(mu_);
  if (deadline <= now_) return;
  sleeps_.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now_));
  now_ = deadline;
}

std::chrono::system_clock::time_point FakeClock::WallNow() {
  std::lock_guard lock(mu_);
  return wall_start_ +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(now_ - start_);
}

void FakeClock::Advance(std::chrono::milliseconds d) {
  std::lock_guard lock(mu_);
  now_ += d;
}

std::vector<std::chrono::milliseconds> FakeClock::sleeps() const {
  std::lock_guard lock(mu_);
  return sleeps_;
}

std::chrono::milliseconds FakeClock::total_slept() const {
  std::lock_guard lock(mu_);
  std::chrono::milliseconds total{0};
  for (auto s : sleeps_) total += s;
  return total;
}

std::chrono::milliseconds FakeClock::elapsed() const {
  std::lock_guard lock(mu_);
  return std::chrono::duration_cast<std::chrono::milliseconds>(now_ - start_);
}

}  // namespace grag::testing
