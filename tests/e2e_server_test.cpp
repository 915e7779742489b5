// Black-box tests of `grag serve`: the real binary on an ephemeral loopback port, driven over
// HTTP. Every route, auth on and off, bad input, index jobs (progress stream, cancel, conflict),
// the OpenAI-compatible endpoint and a clean stop on SIGTERM.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "support/fake_graphrag_llm.h"
#include "support/code_points.h"
#include "support/run_command.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using nlohmann::json;
using testing::CodePointSlice;
using testing::RunCommand;
using testing::ServerProcess;
using testing::ShellQuote;
using testing::TempDir;

std::string Grag(const std::string& args) { return ShellQuote(GRAG_BINARY) + " " + args; }

// A raw connection to the server, for clients cpp-httplib will not imitate (slow, idle,
// half-sent requests). Reads give up after `wait` (generous: the test fails, it does not hang).
class RawClient {
 public:
  explicit RawClient(int port, std::chrono::seconds wait = std::chrono::seconds(30)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    timeval tv{static_cast<time_t>(wait.count()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;
  bool connected() const { return connected_; }
  bool Send(const std::string& s) {
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // Everything until the server closes, or the wait runs out.
  std::string ReadAll() {
    std::string out;
    char buf[4096];
    while (true) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // One reply's status line and headers (enough to see the status).
  std::string ReadHead() {
    std::string out;
    char c;
    while (out.find("\r\n\r\n") == std::string::npos && ::recv(fd_, &c, 1, 0) == 1) out += c;
    return out;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// The peak resident memory of a process (VmHWM), in KiB.
int64_t PeakRssKib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

json Parse(const httplib::Result& r) {
  if (!r) return json();
  return json::parse(r->body, nullptr, false);
}

// A project holding A Christmas Carol, indexed without an LLM once for the whole suite.
class E2eServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    root_ = *dir_ / "carol";
    auto init = RunCommand(Grag("init " + ShellQuote(root_)));
    ASSERT_EQ(init.exit_code, 0) << init.err;
    std::filesystem::copy_file(
        std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
        root_ + "/input/christmas_carol.txt");
    auto index = RunCommand(Grag("--root " + ShellQuote(root_) + " --no-llm index --no-progress"));
    ASSERT_EQ(index.exit_code, 0) << index.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  // Starts `grag serve` on `root` with `env` and `flags` (global options such as --set).
  void Serve(const std::string& root, const std::string& env = "", const std::string& flags = "") {
    ASSERT_TRUE(server_.Start(
        env + " " + Grag("--root " + ShellQuote(root) + " --no-llm " + flags + " serve --port 0")))
        << server_.log();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_.port());
    client_->set_read_timeout(60, 0);
  }

  httplib::Result Post(const std::string& path, const json& body) {
    return client_->Post(path.c_str(), body.dump(), "application/json");
  }

  static TempDir* dir_;
  static std::string root_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> client_;
};

TempDir* E2eServerTest::dir_ = nullptr;
std::string E2eServerTest::root_;

TEST_F(E2eServerTest, AnswersLikeTheCliAndDescribesItself) {
  ASSERT_NO_FATAL_FAILURE(Serve(root_));
  auto health = client_->Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_TRUE(Parse(health)["index_loaded"].get<bool>());
  EXPECT_FALSE(Parse(health)["job_running"].get<bool>());

  // The same JSON as grag query --json (the timings aside).
  const std::string question = "Who is Marley?";
  for (const char* method : {"local", "global", "hybrid", "basic"}) {
    auto r = Post("/v1/query", {{"question", question}, {"method", method}});
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    json server = Parse(r);
    auto cli = RunCommand(Grag("--root " + ShellQuote(root_) + " --no-llm query --json --method " +
                               method + " " + ShellQuote(question)));
    ASSERT_EQ(cli.exit_code, 0) << cli.err;
    json local = json::parse(cli.out);
    EXPECT_EQ(server["method"], method);
    EXPECT_EQ(server["answer"], local["answer"]) << method;
    EXPECT_EQ(server["citations"], local["citations"]) << method;
    EXPECT_FALSE(server["answer"].get<std::string>().empty()) << method;
  }
  // auto says what it chose.
  auto routed = Parse(Post("/v1/query", {{"question", "What are the main themes of the story?"}}));
  EXPECT_TRUE(routed.contains("route")) << routed.dump();

  // Streaming: deltas, then the full result.
  auto stream = Post("/v1/query", {{"question", question}, {"method", "local"}, {"stream", true}});
  ASSERT_TRUE(stream);
  EXPECT_EQ(stream->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_NE(stream->body.find("event: delta\ndata: "), std::string::npos) << stream->body;
  EXPECT_NE(stream->body.find("event: result\ndata: "), std::string::npos);

  auto search = Parse(Post("/v1/search", {{"question", "Marley's ghost"}, {"k", 3}}));
  ASSERT_EQ(search["chunks"].size(), 3u) << search.dump();

  // The graph, as front ends read it.
  auto entities = Parse(client_->Get("/v1/entities?search=marley&limit=5"));
  ASSERT_TRUE(entities.is_array());
  ASSERT_FALSE(entities.empty());
  const int64_t marley = entities[0]["id"].get<int64_t>();
  auto entity = Parse(
      client_->Get(("/v1/entities/" + std::to_string(marley) + "?neighbours=3&chunks=2").c_str()));
  EXPECT_EQ(entity["id"], marley);
  EXPECT_LE(entity["neighbours"].size(), 3u);
  EXPECT_LE(entity["chunks"].size(), 2u);
  EXPECT_FALSE(entity["communities"].empty());
  auto by_name = Parse(client_->Get("/v1/entities/Jacob%20Marley"));
  EXPECT_EQ(by_name["name"], "Jacob Marley") << by_name.dump();
  EXPECT_EQ(client_->Get("/v1/entities/Nobody%20At%20All")->status, 404);
  auto rels =
      Parse(client_->Get(("/v1/relationships?limit=2&entity=" + std::to_string(marley)).c_str()));
  ASSERT_EQ(rels.size(), 2u);
  auto communities = Parse(client_->Get("/v1/communities?level=0"));
  ASSERT_FALSE(communities.empty());
  EXPECT_EQ(communities[0]["level"], 0);
  const int64_t community = communities[0]["id"].get<int64_t>();
  auto detail = Parse(client_->Get(("/v1/communities/" + std::to_string(community)).c_str()));
  EXPECT_FALSE(detail["members"].empty());
  EXPECT_FALSE(detail["report"]["full_content"].get<std::string>().empty());
  EXPECT_EQ(client_->Get("/v1/communities/999999")->status, 404);
  const std::string chunk_id = entity["chunks"][0]["id"];
  auto chunk = Parse(client_->Get(("/v1/chunks/" + chunk_id).c_str()));
  EXPECT_FALSE(chunk["text"].get<std::string>().empty());
  auto stats = Parse(client_->Get("/v1/stats"));
  EXPECT_EQ(stats["documents"], 1);
  auto docs = Parse(client_->Get("/v1/documents"));
  ASSERT_EQ(docs.size(), 1u);
  auto doc = Parse(client_->Get("/v1/documents/christmas_carol.txt"));
  EXPECT_EQ(doc["chunks"].size(), 42u);

  // OpenAPI lists every route the server answers.
  auto api = Parse(client_->Get("/openapi.json"));
  EXPECT_EQ(api["openapi"], "3.0.3");
  for (const char* path : {"/health",
                           "/v1/query",
                           "/v1/search",
                           "/v1/documents",
                           "/v1/documents/{id}",
                           "/v1/index",
                           "/v1/jobs/{id}",
                           "/v1/jobs/{id}/events",
                           "/v1/entities",
                           "/v1/entities/{id}",
                           "/v1/relationships",
                           "/v1/communities",
                           "/v1/communities/{id}",
                           "/v1/chunks/{id}",
                           "/v1/stats",
                           "/v1/models",
                           "/v1/chat/completions",
                           "/openapi.json",
                           "/metrics",
                           "/docs"}) {
    EXPECT_TRUE(api["paths"].contains(path)) << path;
  }
  for (const char* path : {"/v1/graph", "/v1/jobs", "/", "/ui/{name}"}) {
    EXPECT_TRUE(api["paths"].contains(path)) << path;
  }
  EXPECT_TRUE(api["paths"]["/v1/documents/{id}"].contains("delete"));
  // Every operation's responses are Response Objects (a description each), as OpenAPI 3.0 has
  // them: an error response was once written as an array.
  for (const auto& [path, ops] : api["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      for (const auto& [code, response] : op["responses"].items()) {
        ASSERT_TRUE(response.is_object()) << method << " " << path << " " << code;
        EXPECT_TRUE(response.contains("description")) << method << " " << path << " " << code;
      }
    }
  }

  EXPECT_EQ(server_.Stop(SIGTERM), 0) << server_.log();
}

TEST_F(E2eServerTest, RefusesBadRequestsWithJsonErrors) {
  ASSERT_NO_FATAL_FAILURE(Serve(root_, "", "--set server.max_body_mb=1"));
  auto expect_error = [](const httplib::Result& r, int status, const std::string& type) {
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    json j = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r->body;
    EXPECT_EQ(j["error"]["type"], type) << r->body;
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
  };
  expect_error(client_->Post("/v1/query", "{not json", "application/json"), 400,
               "invalid_argument");
  expect_error(Post("/v1/query", json::object()), 400, "invalid_argument");
  expect_error(Post("/v1/query", {{"question", "x"}, {"method", "psychic"}}), 400,
               "invalid_argument");
  expect_error(Post("/v1/query", {{"question", "x"}, {"k", 0}}), 400, "invalid_argument");
  expect_error(Post("/v1/query", {{"question", "x"}, {"method", "global"}, {"level", 99}}), 400,
               "invalid_argument");
  expect_error(client_->Get("/v1/no/such/route"), 404, "not_found");
  expect_error(client_->Get("/v1/jobs/12345"), 404, "not_found");
  expect_error(client_->Get("/v1/jobs/abc"), 400, "invalid_argument");
  expect_error(client_->Get("/v1/documents/nope.txt"), 404, "not_found");
  expect_error(client_->Get("/v1/chunks/nope"), 404, "not_found");
  expect_error(client_->Get("/v1/entities?limit=-3"), 400, "invalid_argument");
  // Bodies over server.max_body_mb.
  expect_error(client_->Post("/v1/documents", std::string(2 << 20, 'a'), "application/json"), 413,
               "invalid_argument");
  // Document ids that would leave the input folder, spelled plainly or percent-encoded.
  for (const char* id :
       {"../escape.txt", "a/../../escape.txt", "/etc/passwd", ".hidden.txt", "a\\b.txt"}) {
    expect_error(Post("/v1/documents", {{"id", id}, {"text", "x"}}), 400, "invalid_argument");
  }
  expect_error(client_->Delete("/v1/documents/..%2F..%2Fgrag.toml"), 400, "invalid_argument");
  expect_error(client_->Delete("/v1/documents/%2E%2E/grag.toml"), 400, "invalid_argument");
  EXPECT_TRUE(std::filesystem::exists(root_ + "/grag.toml"));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/escape.txt"));
  // Not text: a binary upload.
  httplib::MultipartFormDataItems binary = {
      {"file", std::string("\xff\xfe\x00\x01", 4), "bin.txt", "application/octet-stream"}};
  expect_error(client_->Post("/v1/documents", binary), 400, "invalid_argument");
  expect_error(Post("/v1/documents", {{"text", "   "}}), 400, "invalid_argument");
  expect_error(Post("/v1/chat/completions",
                    {{"model", "gpt-4"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}}),
               404, "not_found");
  expect_error(Post("/v1/chat/completions", {{"model", "grag-local"}, {"messages", json::array()}}),
               400, "invalid_argument");
  expect_error(Post("/v1/index", {{"remove", "not-a-list"}}), 400, "invalid_argument");
  EXPECT_EQ(server_.Stop(SIGINT), 0) << server_.log();
}

TEST_F(E2eServerTest, ApiKeysGuardEveryRouteButHealth) {
  ASSERT_NO_FATAL_FAILURE(Serve(root_, "GRAG_API_KEYS='key-one, key-two'"));
  EXPECT_EQ(client_->Get("/health")->status, 200);
  auto none = client_->Get("/v1/stats");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(Parse(none)["error"]["type"], "unauthorized");
  EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
  client_->set_bearer_token_auth("key-on");
  EXPECT_EQ(client_->Get("/v1/stats")->status, 401);
  // The API's description and its reference page are public, as the docs are; "try it out"
  // sends the key.
  EXPECT_EQ(client_->Get("/openapi.json")->status, 200);
  auto docs = client_->Get("/docs");
  EXPECT_EQ(docs->status, 200);
  EXPECT_NE(docs->body.find("/ui/swagger-ui-bundle.js"), std::string::npos);
  auto bundle = client_->Get("/ui/swagger-ui-bundle.js");
  EXPECT_EQ(bundle->status, 200);
  EXPECT_GT(bundle->body.size(), 100000u);
  EXPECT_EQ(client_->Get("/metrics")->status, 401);
  client_->set_bearer_token_auth("key-two");
  EXPECT_EQ(client_->Get("/v1/stats")->status, 200);
  // Issue 42: the scheme is case-insensitive; a valid key sent as "bearer" was refused.
  httplib::Client lower("127.0.0.1", server_.port());
  EXPECT_EQ(lower.Get("/v1/stats", {{"Authorization", "bearer key-one"}})->status, 200);
  EXPECT_EQ(lower.Get("/v1/stats", {{"Authorization", "BEARER key-one"}})->status, 200);
  EXPECT_EQ(lower.Get("/v1/stats", {{"Authorization", "Basic key-one"}})->status, 401);
  EXPECT_EQ(Post("/v1/query", {{"question", "Who is Scrooge?"}})->status, 200);
  EXPECT_EQ(server_.Stop(SIGTERM), 0);
}

TEST_F(E2eServerTest, ServesTheWebUiWithoutAKeyAndItsApiWithOne) {
  ASSERT_NO_FATAL_FAILURE(Serve(root_, "GRAG_API_KEYS=ui-key"));
  // The page and its files need no key; everything they call does.
  auto page = client_->Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("<script type=\"module\" src=\"/ui/app.js\">"), std::string::npos);
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"),
            std::string::npos);
  auto app = client_->Get("/ui/app.js");
  ASSERT_TRUE(app);
  EXPECT_EQ(app->status, 200);
  EXPECT_EQ(app->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  auto lib = client_->Get("/ui/cytoscape.min.js");
  ASSERT_TRUE(lib);
  EXPECT_EQ(lib->status, 200);
  EXPECT_GT(lib->body.size(), 100000u);
  EXPECT_EQ(client_->Get("/ui/style.css")->get_header_value("Content-Type"),
            "text/css; charset=utf-8");
  // Revalidation: the same bytes are not sent again.
  const std::string etag = app->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto again = client_->Get("/ui/app.js", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  // Unknown files and paths that only look like the UI's are not served, and need the key.
  auto missing = client_->Get("/ui/nope.js");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(Parse(missing)["error"]["type"], "not_found");
  EXPECT_EQ(client_->Get("/ui/../v1/stats")->status, 401);
  EXPECT_EQ(client_->Get("/ui/a/b.js")->status, 401);
  EXPECT_EQ(client_->Get("/v1/graph")->status, 401);
  EXPECT_EQ(client_->Get("/v1/jobs")->status, 401);

  client_->set_bearer_token_auth("ui-key");
  // The graph to draw: the top entities by degree, their community, the edges among them.
  auto view = Parse(client_->Get("/v1/graph?limit=25&level=0"));
  ASSERT_TRUE(view.is_object()) << view;
  ASSERT_EQ(view["nodes"].size(), 25u);
  EXPECT_GT(view["entities_total"].get<int64_t>(), 25);
  EXPECT_EQ(view["level"], 0);
  EXPECT_FALSE(view["levels"].empty());
  std::set<int64_t> ids;
  int64_t last_degree = INT64_MAX;
  for (const auto& n : view["nodes"]) {
    ids.insert(n["id"].get<int64_t>());
    EXPECT_LE(n["degree"].get<int64_t>(), last_degree) << "nodes are by degree";
    last_degree = n["degree"].get<int64_t>();
    EXPECT_TRUE(n["community"].is_number_integer()) << n;
  }
  ASSERT_FALSE(view["edges"].empty());
  for (const auto& e : view["edges"]) {
    EXPECT_TRUE(ids.count(e["source"].get<int64_t>()) && ids.count(e["target"].get<int64_t>()))
        << "an edge leaves the view: " << e;
  }
  // Around one entity: it first, then its neighbours, each joined to it.
  const int64_t top = view["nodes"][0]["id"].get<int64_t>();
  auto around =
      Parse(client_->Get(("/v1/graph?around=" + std::to_string(top) + "&limit=5").c_str()));
  ASSERT_EQ(around["nodes"].size(), 6u) << around;
  EXPECT_EQ(around["nodes"][0]["id"], top);
  auto finest = view["levels"].back().get<int64_t>();
  EXPECT_EQ(client_->Get(("/v1/graph?level=" + std::to_string(finest + 1)).c_str())->status, 400);
  EXPECT_EQ(client_->Get("/v1/graph?around=99999999")->status, 404);
  EXPECT_EQ(client_->Get("/v1/graph?limit=x")->status, 400);
  // Jobs: none yet.
  EXPECT_EQ(Parse(client_->Get("/v1/jobs")), json::array());
  // A local answer's citations say what they stand for, so the UI can open it.
  auto local =
      Parse(Post("/v1/query", {{"question", "Who is Jacob Marley?"}, {"method", "local"}}));
  ASSERT_FALSE(local["citations"].empty()) << local;
  for (const auto& c : local["citations"]) {
    const std::string type = c["type"];
    const json& ref = c["ref"];
    if (type == "entity") {
      auto e =
          client_->Get(("/v1/entities/" + std::to_string(ref["entity"].get<int64_t>())).c_str());
      EXPECT_EQ(e->status, 200) << c;
    } else if (type == "relationship") {
      EXPECT_TRUE(ref["relationship"].is_number_integer()) << c;
    } else if (type == "report") {
      EXPECT_TRUE(ref["community"].is_number_integer()) << c;
    } else {
      EXPECT_EQ(type, "chunk") << c;
      EXPECT_TRUE(ref["chunk_id"].is_string()) << c;
    }
  }
  EXPECT_EQ(local["citations"][0]["type"], "entity") << local["citations"];
  EXPECT_EQ(server_.Stop(SIGTERM), 0);
}

TEST_F(E2eServerTest, ASecondServerOnTheSamePortIsRefused) {
  ASSERT_NO_FATAL_FAILURE(Serve(root_));
  auto second =
      RunCommand("timeout 20 " + Grag("--root " + ShellQuote(root_) + " --no-llm serve --port " +
                                      std::to_string(server_.port())));
  EXPECT_EQ(second.exit_code, 1) << second.out << second.err;
  EXPECT_NE(second.err.find("cannot listen on 127.0.0.1:" + std::to_string(server_.port())),
            std::string::npos)
      << second.err;
  EXPECT_EQ(client_->Get("/health")->status, 200);  // the first one is untouched
  EXPECT_EQ(server_.Stop(SIGTERM), 0);
}

TEST_F(E2eServerTest, CorsIsOffUnlessConfigured) {
  ASSERT_NO_FATAL_FAILURE(Serve(root_, "", "--set server.cors_origins=http://ui.example"));
  httplib::Headers h = {{"Origin", "http://ui.example"}};
  auto ok = client_->Get("/v1/stats", h);
  EXPECT_EQ(ok->get_header_value("Access-Control-Allow-Origin"), "http://ui.example");
  auto pre = client_->Options("/v1/query", h);
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Headers").find("Authorization"),
            std::string::npos);
  auto other = client_->Get("/v1/stats", {{"Origin", "http://evil.example"}});
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(server_.Stop(SIGTERM), 0);
}

// Issue 42, R1: without API keys, a page on another origin drove the server through the user's
// browser (planted a document, started a job), and DNS rebinding reached it under another name.
// The issue's curl lines, as a browser would send them.
TEST_F(E2eServerTest, WebPagesOnOtherOriginsCannotDriveAKeylessServer) {
  ASSERT_NO_FATAL_FAILURE(Serve(root_));
  const std::string base = "http://127.0.0.1:" + std::to_string(server_.port());
  auto curl = [&](const std::string& args) {
    auto r = RunCommand("curl -s -o /dev/null -w '%{http_code}' " + args);
    return r.out;
  };
  const std::string planted = root_ + "/input/x.txt";
  EXPECT_EQ(curl("-H 'Origin: http://evil.example' -H 'Content-Type: text/plain' -d "
                 "'{\"id\":\"x.txt\",\"text\":\"planted\"}' " +
                 base + "/v1/documents"),
            "403");
  EXPECT_EQ(curl("-H 'Origin: http://evil.example' -d '{}' " + base + "/v1/index"), "403");
  EXPECT_EQ(curl("-H 'Origin: http://evil.example' -H 'Content-Type: application/json' -d "
                 "'{\"id\":\"x.txt\",\"text\":\"planted\"}' " +
                 base + "/v1/documents"),
            "403");
  EXPECT_EQ(curl("-H 'Sec-Fetch-Site: cross-site' -H 'Content-Type: application/json' -d '{}' " +
                 base + "/v1/index"),
            "403");
  EXPECT_EQ(curl("-X DELETE -H 'Origin: null' " + base + "/v1/documents/christmas_carol.txt"),
            "403");
  // A "simple" body a page could send without asking: refused whoever sends it.
  EXPECT_EQ(curl("-H 'Content-Type: text/plain' -d '{\"id\":\"x.txt\",\"text\":\"planted\"}' " +
                 base + "/v1/documents"),
            "415");
  EXPECT_EQ(curl("-d '{\"question\":\"Who is Marley?\"}' " + base + "/v1/query"), "415");
  EXPECT_FALSE(std::filesystem::exists(planted));
  EXPECT_TRUE(std::filesystem::exists(root_ + "/input/christmas_carol.txt"));
  auto jobs = Parse(client_->Get("/v1/jobs"));
  EXPECT_TRUE(jobs.is_array() && jobs.empty()) << jobs.dump();
  // DNS rebinding: another name for this machine.
  EXPECT_EQ(curl("-H 'Host: evil.example' " + base + "/v1/stats"), "421");
  EXPECT_EQ(
      curl("-H 'Host: evil.example:" + std::to_string(server_.port()) + "' " + base + "/health"),
      "421");
  auto misdirected = client_->Get("/v1/stats", {{"Host", "evil.example"}});
  ASSERT_TRUE(misdirected);
  EXPECT_NE(Parse(misdirected)["error"]["message"].get<std::string>().find("server.allowed_hosts"),
            std::string::npos);
  // The server's own page (same origin), programs (no Origin), and its other names still work.
  EXPECT_EQ(curl("-H 'Origin: " + base +
                 "' -H 'Sec-Fetch-Site: same-origin' --json "
                 "'{\"question\":\"Marley\"}' " +
                 base + "/v1/search"),
            "200");
  EXPECT_EQ(curl("--json '{\"question\":\"Marley\"}' " + base + "/v1/search"), "200");
  EXPECT_EQ(
      curl("-H 'Host: localhost:" + std::to_string(server_.port()) + "' " + base + "/v1/stats"),
      "200");
  EXPECT_EQ(curl("-H 'Host: [::1]:9000' " + base + "/health"), "200");
  EXPECT_EQ(server_.Stop(SIGTERM), 0);
}

TEST_F(E2eServerTest, AllowedHostsAndCorsOriginsOpenTheChecksWhereConfigured) {
  ASSERT_NO_FATAL_FAILURE(Serve(root_, "",
                                "--set server.allowed_hosts=grag.example --set "
                                "server.cors_origins=http://ui.example"));
  EXPECT_EQ(client_->Get("/v1/stats", {{"Host", "GRAG.example:8443"}})->status, 200);
  EXPECT_EQ(client_->Get("/v1/stats", {{"Host", "other.example"}})->status, 421);
  auto from_ui = client_->Post("/v1/search", {{"Origin", "http://ui.example"}},
                               R"({"question":"Marley"})", "application/json");
  ASSERT_TRUE(from_ui);
  EXPECT_EQ(from_ui->status, 200) << from_ui->body;
  EXPECT_EQ(from_ui->get_header_value("Access-Control-Allow-Origin"), "http://ui.example");
  auto from_page = client_->Post("/v1/search", {{"Origin", "http://evil.example"}},
                                 R"({"question":"Marley"})", "application/json");
  ASSERT_TRUE(from_page);
  EXPECT_EQ(from_page->status, 403);
  EXPECT_EQ(Parse(from_page)["error"]["type"], "forbidden");
  EXPECT_EQ(server_.Stop(SIGTERM), 0);
}

// Issue 42, R5: `curl -X POST .../v1/index` sends no body and no Content-Length; the server
// read a body until the client gave up, and only then started the job.
TEST_F(E2eServerTest, APostWithoutABodyIsAnsweredAtOnce) {
  TempDir fresh;
  const std::string root = fresh / "p";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(Serve(root));
  const std::string base = "http://127.0.0.1:" + std::to_string(server_.port());
  // --max-time: the test fails (rather than hangs) if the server waits for a body.
  auto r = RunCommand("curl -s --max-time 60 -w '\\n%{http_code}' -X POST " + base + "/v1/index");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(r.out.rfind('\n') + 1), "202") << r.out;
  const json job = json::parse(r.out.substr(0, r.out.rfind('\n')), nullptr, false);
  ASSERT_TRUE(job.is_object()) << r.out;
  for (int i = 0; i < 1200; ++i) {
    if (Parse(client_->Get(("/v1/jobs/" + job["id"].dump()).c_str()))["state"] != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The same without curl: a keep-alive connection that sends nothing after its headers.
  RawClient raw(server_.port());
  ASSERT_TRUE(raw.Send("POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  EXPECT_EQ(raw.ReadHead().rfind("HTTP/1.1 400", 0), 0u);  // an empty body: "needs a JSON body"
  EXPECT_EQ(server_.Stop(SIGTERM), 0) << server_.log();
}

// Issue 42, R2: server.max_body_mb held only for bodies with a Content-Length; a chunked body of
// any size was read into memory whole.
TEST_F(E2eServerTest, ChunkedBodiesAreBoundedToo) {
  ASSERT_NO_FATAL_FAILURE(Serve(root_, "", "--set server.max_body_mb=1"));
  const std::string base = "http://127.0.0.1:" + std::to_string(server_.port());
  TempDir tmp;
  const std::string big = tmp / "40MB.json";
  {
    std::ofstream out(big, std::ios::binary);
    out << R"({"id":"big.txt","text":")" << std::string(40 << 20, 'a') << R"("})";
  }
  ASSERT_EQ(client_->Get("/health")->status, 200);
  const int64_t before = PeakRssKib(server_.pid());
  auto r = RunCommand(
      "curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' "
      "-H 'Transfer-Encoding: chunked' --data-binary @" +
      ShellQuote(big) + " " + base + "/v1/documents");
  EXPECT_EQ(r.out, "413") << r.err;
  const int64_t after = PeakRssKib(server_.pid());
  ASSERT_GT(before, 0);
  EXPECT_LT(after - before, 16 << 10)
      << "peak RSS grew from " << before << " to " << after << " KiB: the body was read whole";
  EXPECT_FALSE(std::filesystem::exists(root_ + "/input/big.txt"));
  // A chunked body within the limit is read as before.
  httplib::Client chunked("127.0.0.1", server_.port());
  auto ok = chunked.Post(
      "/v1/search",
      [](size_t offset, httplib::DataSink& sink) {
        if (offset == 0) {
          const std::string body = R"({"question": "Marley", "k": 2})";
          sink.write(body.data(), body.size());
        } else {
          sink.done();
        }
        return true;
      },
      "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(server_.Stop(SIGTERM), 0) << server_.log();
}

// Issue 42, R3 and R4: each connection held one of server.threads from accept to close, so
// idle keep-alive clients and clients trickling their headers left none for anyone else (an
// incomplete request held its thread for 300 s). Here 8 threads face 30 slow clients and 30
// idle ones, and /health must still answer.
TEST_F(E2eServerTest, SlowAndIdleClientsDoNotStarveTheServer) {
  ASSERT_NO_FATAL_FAILURE(Serve(root_, "", "--set server.threads=8 --set server.read_timeout=2"));
  std::vector<std::unique_ptr<RawClient>> slow, idle;
  for (int i = 0; i < 30; ++i) {
    slow.push_back(std::make_unique<RawClient>(server_.port()));
    ASSERT_TRUE(slow.back()->Send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "));
  }
  for (int i = 0; i < 30; ++i) {
    idle.push_back(std::make_unique<RawClient>(server_.port()));
    ASSERT_TRUE(idle.back()->Send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    ASSERT_EQ(idle.back()->ReadHead().rfind("HTTP/1.1 200", 0), 0u);  // kept alive, now idle
  }
  // A bound well above an answer's time, far below the old 300 s.
  httplib::Client probe("127.0.0.1", server_.port());
  probe.set_read_timeout(10, 0);
  probe.set_connection_timeout(10, 0);
  for (int i = 0; i < 3; ++i) {
    auto health = probe.Get("/health");
    ASSERT_TRUE(health) << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
    auto search = probe.Post("/v1/search", R"({"question": "Marley", "k": 2})", "application/json");
    ASSERT_TRUE(search);
    EXPECT_EQ(search->status, 200);
  }
  // The slow ones are answered 408 once server.read_timeout is up, and closed.
  const std::string reply = slow.front()->ReadAll();
  EXPECT_EQ(reply.rfind("HTTP/1.1 408", 0), 0u) << reply;
  EXPECT_NE(reply.find("server.read_timeout"), std::string::npos) << reply;
  // A body that stops half-way is timed out the same way.
  RawClient stalled(server_.port());
  ASSERT_TRUE(stalled.Send(
      "POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 100\r\n\r\n{\"question\": "));
  const std::string timed_out = stalled.ReadAll();
  EXPECT_EQ(timed_out.rfind("HTTP/1.1 408", 0), 0u) << timed_out;
  EXPECT_EQ(server_.Stop(SIGTERM), 0) << server_.log();
}

TEST_F(E2eServerTest, ConnectionsFromOneAddressAreCapped) {
  ASSERT_NO_FATAL_FAILURE(Serve(root_, "", "--set server.max_connections_per_client=4"));
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawClient>(server_.port()));
    ASSERT_TRUE(held.back()->Send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    ASSERT_EQ(held.back()->ReadHead().rfind("HTTP/1.1 200", 0), 0u);
  }
  RawClient fifth(server_.port());
  const std::string refused = fifth.ReadAll();
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused;
  EXPECT_NE(refused.find("server.max_connections_per_client"), std::string::npos) << refused;
  held.pop_back();  // one leaves: there is room again
  int status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    httplib::Client again("127.0.0.1", server_.port());
    auto r = again.Get("/health");
    status = r ? r->status : 0;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, 200);
  EXPECT_EQ(server_.Stop(SIGTERM), 0) << server_.log();
}

// Issue 42: POST /v1/index sent several at once sometimes got 503 naming the server's own pid
// (the second request lost the race for the writer lock) instead of 409.
TEST_F(E2eServerTest, ConcurrentIndexRequestsGetOneJobAndConflicts) {
  TempDir fresh;
  const std::string root = fresh / "p";
  ASSERT_EQ(testing::MakeNoLlmProject(
                ShellQuote(GRAG_BINARY), root,
                std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt"),
            "");
  ASSERT_NO_FATAL_FAILURE(Serve(root));
  std::map<int, int> statuses;
  for (int round = 0; round < 5; ++round) {
    std::vector<std::thread> threads;
    std::mutex mu;
    for (int i = 0; i < 6; ++i) {
      threads.emplace_back([&] {
        httplib::Client c("127.0.0.1", server_.port());
        c.set_read_timeout(60, 0);
        auto r = c.Post("/v1/index", "{}", "application/json");
        std::lock_guard<std::mutex> lock(mu);
        ++statuses[r ? r->status : 0];
        if (r && r->status != 202 && r->status != 409) ADD_FAILURE() << r->status << " " << r->body;
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < 1200; ++i) {  // let the job finish before the next round
      auto h = Parse(client_->Get("/health"));
      if (h.is_object() && !h["job_running"].get<bool>()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  EXPECT_EQ(statuses[503], 0);
  EXPECT_GE(statuses[202], 5);
  EXPECT_EQ(server_.Stop(SIGTERM), 0) << server_.log();
}

TEST_F(E2eServerTest, OpenAiCompatibleChat) {
  ASSERT_NO_FATAL_FAILURE(Serve(root_));
  auto models = Parse(client_->Get("/v1/models"));
  std::set<std::string> ids;
  for (const auto& m : models["data"]) ids.insert(m["id"].get<std::string>());
  EXPECT_EQ(ids, (std::set<std::string>{"grag-auto", "grag-global", "grag-local", "grag-hybrid",
                                        "grag-basic", "grag-drift", "grag-lazy"}));

  const json messages = {
      {{"role", "system"}, {"content", "Be brief."}},
      {{"role", "user"}, {"content", "Who is Tiny Tim?"}},
      {{"role", "assistant"}, {"content", "..."}},
      {{"role", "user"},
       {"content", json::array({{{"type", "text"}, {"text", "Who is Marley?"}}})}}};
  auto chat =
      Parse(Post("/v1/chat/completions", {{"model", "grag-local"}, {"messages", messages}}));
  ASSERT_EQ(chat["object"], "chat.completion") << chat.dump();
  EXPECT_EQ(chat["model"], "grag-local");
  const std::string content = chat["choices"][0]["message"]["content"];
  EXPECT_NE(content.find("Marley"), std::string::npos) << content;
  EXPECT_NE(content.find("Sources:"), std::string::npos);
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "stop");
  EXPECT_FALSE(chat["citations"].empty());
  EXPECT_EQ(chat["grag"]["method"], "local");
  // DRIFT and the budgeted search need a chat model; this server has none: a clear 400.
  for (const char* model : {"grag-drift", "grag-lazy"}) {
    auto refused = Post("/v1/chat/completions", {{"model", model}, {"messages", messages}});
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400) << model;
    EXPECT_NE(refused->body.find("model"), std::string::npos) << refused->body;
  }

  auto stream = Post("/v1/chat/completions",
                     {{"model", "grag-local"}, {"messages", messages}, {"stream", true}});
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->status, 200);
  const std::string& body = stream->body;
  ASSERT_GE(body.size(), 14u);
  EXPECT_EQ(body.substr(body.size() - 14), "data: [DONE]\n\n");
  std::string joined;
  std::string finish;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") break;
    json c = json::parse(data);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
    const json& choice = c["choices"][0];
    if (choice["delta"].contains("content"))
      joined += choice["delta"]["content"].get<std::string>();
    if (!choice["finish_reason"].is_null()) finish = choice["finish_reason"];
  }
  EXPECT_EQ(finish, "stop");
  EXPECT_EQ(joined, content);
  EXPECT_EQ(server_.Stop(SIGTERM), 0);
}

// Documents in, an index job with its progress stream, the new text found, then removed.
TEST_F(E2eServerTest, DocumentsAndIndexJobs) {
  TempDir fresh;
  const std::string root = fresh / "p";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  ASSERT_NO_FATAL_FAILURE(Serve(root));
  // No index yet: reads say what to do, the document list is empty.
  auto early = Post("/v1/query", {{"question", "anything"}});
  EXPECT_EQ(early->status, 503) << early->body;
  EXPECT_NE(early->body.find("POST /v1/index"), std::string::npos);
  EXPECT_EQ(Parse(client_->Get("/v1/documents")), json::array());

  const std::string text =
      "Zorblax the quantum llama lives in Lisbon. Zorblax the quantum llama sings to Mira Okafor. "
      "Mira Okafor studies Zorblax the quantum llama at the Lisbon Observatory.";
  auto saved = Post("/v1/documents", {{"id", "notes/größe 1.md"}, {"text", text}});
  ASSERT_EQ(saved->status, 201) << saved->body;
  EXPECT_EQ(Parse(saved)["id"], "notes/größe 1.md");
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::u8path(root + "/input/notes/größe 1.md")));
  // A multipart upload; a name without a known extension becomes .txt; titles give ids.
  httplib::MultipartFormDataItems items = {
      {"file", "Mira Okafor met Zorblax the quantum llama in Porto.", "porto", "text/plain"}};
  auto upload = client_->Post("/v1/documents", items);
  ASSERT_EQ(upload->status, 201) << upload->body;
  EXPECT_EQ(Parse(upload)["id"], "porto.txt");
  auto titled = Parse(
      Post("/v1/documents", {{"title", "A Day in Faro"}, {"text", "Mira Okafor rested in Faro."}}));
  EXPECT_EQ(titled["id"], "A Day in Faro.txt");

  auto job = Post("/v1/index", json::object());
  ASSERT_EQ(job->status, 202) << job->body;
  const int64_t id = Parse(job)["id"];
  EXPECT_EQ(job->get_header_value("Location"), "/v1/jobs/" + std::to_string(id));
  // The progress stream runs to a final "done" event.
  std::string events;
  client_->Get(("/v1/jobs/" + std::to_string(id) + "/events").c_str(),
               [&](const char* data, size_t n) {
                 events.append(data, n);
                 return true;
               });
  const auto done_at = events.find("event: done\ndata: ");
  ASSERT_NE(done_at, std::string::npos) << events;
  json done =
      json::parse(events.substr(done_at + 18, events.find('\n', done_at + 18) - done_at - 18));
  EXPECT_EQ(done["state"], "succeeded") << done.dump();
  EXPECT_EQ(done["summary"]["documents"]["added"], 3);
  EXPECT_EQ(done["plan"]["documents"]["added"].size(), 3u);
  auto polled = Parse(client_->Get(("/v1/jobs/" + std::to_string(id)).c_str()));
  EXPECT_EQ(polled["state"], "succeeded");
  auto listed = Parse(client_->Get("/v1/jobs"));
  ASSERT_EQ(listed.size(), 1u) << listed;
  EXPECT_EQ(listed[0]["id"], id);
  EXPECT_EQ(listed[0]["state"], "succeeded");

  // The new text is searchable at once, through a fresh read engine.
  auto search =
      Parse(Post("/v1/search", {{"question", "Zorblax quantum llama"}, {"method", "bm25"}}));
  ASSERT_FALSE(search["chunks"].empty()) << search.dump();
  EXPECT_EQ(search["chunks"][0]["document_id"], "notes/größe 1.md");
  auto doc = Parse(client_->Get("/v1/documents/notes/gr%C3%B6%C3%9Fe%201.md"));
  EXPECT_EQ(doc["text"], text);
  EXPECT_EQ(Parse(client_->Get("/v1/documents")).size(), 3u);

  // Deleted from the input folder, gone from the index after the next job.
  auto del = client_->Delete("/v1/documents/porto.txt");
  ASSERT_EQ(del->status, 200) << del->body;
  EXPECT_EQ(client_->Delete("/v1/documents/porto.txt")->status, 404);
  auto job2 = Parse(Post("/v1/index", json::object()));
  for (int i = 0; i < 600; ++i) {
    auto j = Parse(client_->Get(("/v1/jobs/" + job2["id"].dump()).c_str()));
    if (j["state"] != "running") {
      EXPECT_EQ(j["state"], "succeeded") << j.dump();
      EXPECT_EQ(j["summary"]["documents"]["removed"], 1);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(Parse(client_->Get("/v1/documents")).size(), 2u);
  EXPECT_EQ(client_->Get("/v1/documents/porto.txt")->status, 404);
  EXPECT_EQ(server_.Stop(SIGTERM), 0) << server_.log();
}

// Issue 38: GET /v1/documents/{id}/text gives the text citation offsets index (code points into
// the file after its byte-order mark; a record's text field), behind the API key; it says when
// the file no longer holds the indexed text.
TEST_F(E2eServerTest, DocumentTextIsWhatCitationOffsetsIndex) {
  TempDir fresh;
  const std::string root = fresh / "p";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  // Characters outside the Basic Multilingual Plane before the cited sentence: a client that
  // counted UTF-16 units or bytes would land elsewhere.
  const std::string body =
      "# 🎄 Die Geister 👻\n\nDer Geist der zukünftigen Weihnacht zeigte Scrooge sein eigenes "
      "Grab. Scrooge weinte.\n";
  std::filesystem::create_directories(root + "/input/sub");
  std::ofstream(root + "/input/sub/geister.md", std::ios::binary) << "\xEF\xBB\xBF" << body;
  // A record whose id ends in "/text": GET /v1/documents/memo/text is still that document.
  std::ofstream(root + "/input/records.jsonl", std::ios::binary)
      << R"({"id": "memo/text", "text": "Mira Okafor wrote a memo about Zorblax the llama."})"
      << "\n";
  auto index = RunCommand(Grag("--root " + ShellQuote(root) + " --no-llm index --no-progress"));
  ASSERT_EQ(index.exit_code, 0) << index.err;
  ASSERT_NO_FATAL_FAILURE(Serve(root, "GRAG_API_KEYS=text-key"));

  EXPECT_EQ(client_->Get("/v1/documents/sub/geister.md/text")->status, 401);
  client_->set_bearer_token_auth("text-key");
  auto got = client_->Get("/v1/documents/sub/geister.md/text");
  ASSERT_EQ(got->status, 200) << got->body;
  json doc = Parse(got);
  EXPECT_EQ(doc["id"], "sub/geister.md");
  EXPECT_EQ(doc["source_path"], "input/sub/geister.md");
  EXPECT_EQ(doc["file"], "unchanged");
  EXPECT_TRUE(doc["note"].is_null());
  EXPECT_EQ(doc["text"], body);  // the file's text, after its byte-order mark
  EXPECT_EQ(doc["bytes"], body.size());
  EXPECT_EQ(doc["characters"], 105);
  // The id written with its '/' escaped is the same document.
  EXPECT_EQ(Parse(client_->Get("/v1/documents/sub%2Fgeister.md/text"))["text"], body);

  // A citation's offsets, applied to that text, give the span's text.
  auto answer =
      Parse(Post("/v1/query", {{"question", "Was zeigte der Geist der zukünftigen Weihnacht?"},
                               {"method", "basic"}}));
  json span;
  for (const auto& c : answer["citations"]) {
    for (const auto& s : c["spans"]) {
      if (s["document_id"] == "sub/geister.md" &&
          s["text"].get<std::string>().find("Grab.") != std::string::npos)
        span = s;
    }
  }
  ASSERT_FALSE(span.is_null()) << answer.dump();
  EXPECT_EQ(span["text"], "Der Geist der zukünftigen Weihnacht zeigte Scrooge sein eigenes Grab.");
  EXPECT_EQ(span["start"], 19);  // code points: the two emoji count one each
  EXPECT_EQ(CodePointSlice(body, span["start"], span["end"]), span["text"]);
  EXPECT_EQ(body.substr(span["byte_start"].get<size_t>(),
                        span["byte_end"].get<size_t>() - span["byte_start"].get<size_t>()),
            span["text"]);
  EXPECT_EQ(span["content_hash"], doc["content_hash"]);

  // A record's text is its text field; an id ending in "/text" is not taken for this route.
  auto memo = Parse(client_->Get("/v1/documents/memo/text/text"));
  EXPECT_EQ(memo["text"], "Mira Okafor wrote a memo about Zorblax the llama.") << memo.dump();
  EXPECT_EQ(memo["file"], "unchanged");
  auto memo_doc = Parse(client_->Get("/v1/documents/memo/text"));
  EXPECT_EQ(memo_doc["id"], "memo/text") << memo_doc.dump();
  EXPECT_TRUE(memo_doc.contains("chunks")) << memo_doc.dump();

  auto unknown = client_->Get("/v1/documents/nope.md/text");
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(Parse(unknown)["error"]["type"], "not_found") << unknown->body;
  EXPECT_NE(unknown->body.find("nope.md"), std::string::npos) << unknown->body;

  // The file changed, then gone: the indexed text, the offsets' text, saying so.
  std::ofstream(root + "/input/sub/geister.md", std::ios::binary) << "Neu geschrieben.\n";
  auto changed = Parse(client_->Get("/v1/documents/sub/geister.md/text"));
  EXPECT_EQ(changed["file"], "changed");
  EXPECT_EQ(changed["text"], body);
  EXPECT_NE(changed["note"].get<std::string>().find("changed since it was indexed"),
            std::string::npos)
      << changed.dump();
  std::filesystem::remove(root + "/input/sub/geister.md");
  auto missing = Parse(client_->Get("/v1/documents/sub/geister.md/text"));
  EXPECT_EQ(missing["file"], "missing");
  EXPECT_EQ(missing["text"], body);

  // Described in the API's description.
  auto api = Parse(client_->Get("/openapi.json"));
  EXPECT_TRUE(api["paths"].contains("/v1/documents/{id}/text")) << api["paths"].dump();
  EXPECT_EQ(server_.Stop(SIGTERM), 0) << server_.log();
}

// Prometheus's text format read back: "name{labels}" -> value, for the lines that are samples.
std::map<std::string, double> ParseMetrics(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

// GET /metrics (issue 44): requests by route template and status with a latency histogram whose
// buckets add up, questions by method, index jobs by outcome, the models' calls and tokens for
// indexing and for questions, and the process's figures; behind the key when keys are set.
TEST_F(E2eServerTest, MetricsCountRequestsQuestionsJobsAndModelSpend) {
  TempDir fresh;
  const std::string root = fresh / "p";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  fresh.Write("p/input/a.txt",
              "Ada Lovelace wrote notes on the Analytical Engine of Charles Babbage in London.");
  testing::FakeOpenAIServer llm(testing::FakeGraphRagHandler());
  const std::string env = "GRAG_LLM_BASE_URL=" + llm.base_url() +
                          " GRAG_LLM_MODEL=fake-model GRAG_LLM_API_KEY=sk-test "
                          "GRAG_EMBEDDING_MODEL=fake-embed GRAG_API_KEYS=k1";
  ASSERT_TRUE(server_.Start(env + " " + Grag("--root " + ShellQuote(root) + " serve --port 0")))
      << server_.log();
  client_ = std::make_unique<httplib::Client>("127.0.0.1", server_.port());
  client_->set_read_timeout(60, 0);
  EXPECT_EQ(client_->Get("/metrics")->status, 401);  // a key is needed when keys are set
  client_->set_bearer_token_auth("k1");

  auto job = Post("/v1/index", json::object());
  ASSERT_EQ(job->status, 202) << job->body;
  const std::string job_path = "/v1/jobs/" + Parse(job)["id"].dump();
  for (int i = 0; i < 600 && Parse(client_->Get(job_path.c_str()))["state"] == "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(Parse(client_->Get(job_path.c_str()))["state"], "succeeded");
  const int index_requests = llm.request_count();
  ASSERT_GT(index_requests, 0);
  auto answered =
      Post("/v1/query", {{"question", "Who wrote notes on the engine?"}, {"method", "local"}});
  ASSERT_EQ(answered->status, 200) << answered->body;
  EXPECT_EQ(Post("/v1/query", {{"question", ""}})->status, 400);
  EXPECT_EQ(client_->Get("/v1/entities/Nobody%20At%20All")->status, 404);

  auto scraped = client_->Get("/metrics");
  ASSERT_EQ(scraped->status, 200) << scraped->body;
  EXPECT_NE(scraped->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  const auto m = ParseMetrics(scraped->body);
  auto at = [&](const std::string& key) {
    auto it = m.find(key);
    EXPECT_NE(it, m.end()) << key << " missing in\n" << scraped->body;
    return it == m.end() ? -1.0 : it->second;
  };
  EXPECT_EQ(at(R"(grag_http_requests_total{route="/v1/query",method="POST",status="200"})"), 1);
  EXPECT_EQ(at(R"(grag_http_requests_total{route="/v1/query",method="POST",status="400"})"), 1);
  EXPECT_EQ(at(R"(grag_http_requests_total{route="/v1/entities/{id}",method="GET",status="404"})"),
            1);
  EXPECT_EQ(at(R"(grag_http_requests_total{route="/v1/index",method="POST",status="202"})"), 1);
  // The histogram: +Inf holds every request of the route, and the buckets never go down.
  const std::string q = R"(route="/v1/query",method="POST")";
  EXPECT_EQ(at("grag_http_request_duration_seconds_bucket{" + q + R"(,le="+Inf"})"), 2);
  EXPECT_EQ(at("grag_http_request_duration_seconds_count{" + q + "}"), 2);
  EXPECT_LE(at("grag_http_request_duration_seconds_bucket{" + q + R"(,le="0.005"})"),
            at("grag_http_request_duration_seconds_bucket{" + q + R"(,le="60"})"));
  EXPECT_EQ(at("grag_http_requests_in_flight"), 1);  // this scrape
  EXPECT_EQ(at(R"(grag_questions_total{method="local"})"), 1);
  EXPECT_EQ(at(R"(grag_index_jobs_total{state="succeeded"})"), 1);
  // The models' spend: the index job's HTTP requests are every request the endpoint had before
  // the question; the question's come after.
  EXPECT_EQ(at(R"(grag_llm_http_requests_total{purpose="index"})"), index_requests);
  EXPECT_EQ(at(R"(grag_llm_http_requests_total{purpose="query"})"),
            llm.request_count() - index_requests);
  EXPECT_GT(at(R"(grag_llm_prompt_tokens_total{purpose="index"})"), 0);
  EXPECT_GT(at(R"(grag_llm_calls_total{purpose="query"})"), 0);
  EXPECT_EQ(at("grag_index_job_running"), 0);
  EXPECT_GT(at("process_resident_memory_bytes"), 0);
  EXPECT_GT(at("process_open_fds"), 0);
  EXPECT_EQ(server_.Stop(SIGTERM), 0) << server_.log();
}

// A job whose model calls hang: it reports progress, refuses a second job, stops cleanly when
// cancelled, and the next job resumes from what was stored.
TEST_F(E2eServerTest, CancelledJobStopsCleanlyAndResumes) {
  TempDir fresh;
  const std::string root = fresh / "p";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  for (int i = 0; i < 6; ++i) {
    fresh.Write("p/input/doc" + std::to_string(i) + ".txt",
                "Document " + std::to_string(i) +
                    ": Ada Lovelace wrote notes on the Analytical "
                    "Engine of Charles Babbage in London.");
  }
  std::atomic<bool> hang{true};
  std::atomic<int> extraction_calls{0};
  auto normal = testing::FakeGraphRagHandler();
  testing::FakeOpenAIServer llm([&](const testing::FakeRequest& r) {
    if (r.IsChat() && hang) {
      ++extraction_calls;
      testing::FakeReply slow = normal(r);
      slow.delay = std::chrono::milliseconds(1500);
      return slow;
    }
    return normal(r);
  });
  const std::string env =
      "GRAG_LLM_BASE_URL=" + llm.base_url() +
      " GRAG_LLM_MODEL=fake-model GRAG_LLM_API_KEY=sk-test GRAG_LLM_CONCURRENCY=2";
  ASSERT_TRUE(server_.Start(env + " " + Grag("--root " + ShellQuote(root) + " serve --port 0")))
      << server_.log();
  client_ = std::make_unique<httplib::Client>("127.0.0.1", server_.port());
  client_->set_read_timeout(60, 0);

  auto job = Post("/v1/index", json::object());
  ASSERT_EQ(job->status, 202) << job->body;
  const std::string path = "/v1/jobs/" + Parse(job)["id"].dump();
  auto second = Post("/v1/index", json::object());
  EXPECT_EQ(second->status, 409) << second->body;
  EXPECT_TRUE(Parse(client_->Get("/health"))["job_running"].get<bool>());
  for (int i = 0; i < 200 && extraction_calls == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_GT(extraction_calls.load(), 0);
  auto cancel = client_->Delete(path.c_str());
  ASSERT_EQ(cancel->status, 202) << cancel->body;
  EXPECT_TRUE(Parse(cancel)["cancel_requested"].get<bool>());
  json state;
  for (int i = 0; i < 400; ++i) {
    state = Parse(client_->Get(path.c_str()));
    if (state["state"] != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(state["state"], "cancelled") << state.dump();
  EXPECT_EQ(state["error"]["type"], "cancelled");

  hang = false;
  auto again = Post("/v1/index", json::object());
  ASSERT_EQ(again->status, 202) << again->body;
  const std::string path2 = "/v1/jobs/" + Parse(again)["id"].dump();
  for (int i = 0; i < 1200; ++i) {
    state = Parse(client_->Get(path2.c_str()));
    if (state["state"] != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(state["state"], "succeeded") << state.dump();
  EXPECT_EQ(state["summary"]["documents"]["added"].get<int>() +
                state["summary"]["documents"]["unchanged"].get<int>(),
            6);
  EXPECT_GT(state["llm_calls"].get<int>(), 0);
  EXPECT_EQ(Parse(client_->Get("/v1/stats"))["documents"], 6);
  EXPECT_EQ(server_.Stop(SIGTERM), 0) << server_.log();
}

// Issue 42: a streaming client that left during a global search's map step was noticed only
// when the answer's first piece was written, so the reduce call was made all the same.
TEST_F(E2eServerTest, AStreamingClientThatLeavesStopsTheQuestionBeforeItsNextCall) {
  TempDir fresh;
  const std::string root = fresh / "p";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  for (int i = 0; i < 6; ++i) {
    fresh.Write("p/input/doc" + std::to_string(i) + ".txt",
                "Document " + std::to_string(i) +
                    ": Ada Lovelace wrote notes on the Analytical Engine of Charles Babbage in "
                    "London. Mary Somerville introduced Ada Lovelace to Charles Babbage.");
  }
  std::atomic<bool> slow_map{false};
  std::atomic<int> maps{0}, reduces{0};
  auto normal = testing::FakeGraphRagHandler();
  testing::FakeOpenAIServer llm([&](const testing::FakeRequest& r) {
    const std::string kind = r.IsChat() ? testing::PromptKind(r.LastUserMessage()) : "";
    if (kind == "reduce") ++reduces;
    if (kind == "map") {
      ++maps;
      if (slow_map) {
        testing::FakeReply slow = normal(r);
        slow.delay = std::chrono::milliseconds(1500);
        return slow;
      }
    }
    return normal(r);
  });
  const std::string env =
      "GRAG_LLM_BASE_URL=" + llm.base_url() + " GRAG_LLM_MODEL=fake-model GRAG_LLM_API_KEY=sk-test";
  ASSERT_TRUE(server_.Start(
      env + " " + Grag("--root " + ShellQuote(root) + " --set server.workers=1 serve --port 0")))
      << server_.log();
  client_ = std::make_unique<httplib::Client>("127.0.0.1", server_.port());
  client_->set_read_timeout(120, 0);
  auto job = Post("/v1/index", json::object());
  ASSERT_EQ(job->status, 202) << job->body;
  json state;
  for (int i = 0; i < 2400; ++i) {
    state = Parse(client_->Get(("/v1/jobs/" + Parse(job)["id"].dump()).c_str()));
    if (state["state"] != "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(state["state"], "succeeded") << state.dump();
  // A global question answered whole once: it makes map calls and then one reduce call.
  auto whole = Post("/v1/query", {{"question", "What are the main themes?"}, {"method", "global"}});
  ASSERT_EQ(whole->status, 200) << whole->body;
  ASSERT_GT(reduces.load(), 0) << "no reduce call: the test cannot tell anything";
  const int maps_before = maps, reduces_before = reduces;

  // Another (not cached) question, streamed; the client hangs up during the map step.
  slow_map = true;
  {
    RawClient asker(server_.port());
    const std::string body =
        R"({"question": "Which ideas run through these notes?", "method": "global", "stream": true})";
    ASSERT_TRUE(
        asker.Send("POST /v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                   "application/json\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n" + body));
    for (int i = 0; i < 2400 && maps == maps_before; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_GT(maps.load(), maps_before);
  }  // closed
  // server.workers=1: this search runs only once the abandoned question has let go of the slot.
  auto after = Post("/v1/search", {{"question", "Ada Lovelace"}, {"k", 1}});
  ASSERT_EQ(after->status, 200) << after->body;
  EXPECT_EQ(reduces.load(), reduces_before) << "the question went on to its reduce call";
  EXPECT_EQ(server_.Stop(SIGTERM), 0) << server_.log();
}

TEST_F(E2eServerTest, SigtermStopsARunningJobAndExitsZero) {
  TempDir fresh;
  const std::string root = fresh / "p";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  fresh.Write("p/input/a.txt", "Grace Hopper built compilers for the Navy in Arlington.");
  auto normal = testing::FakeGraphRagHandler();
  std::atomic<int> calls{0};
  testing::FakeOpenAIServer llm([&](const testing::FakeRequest& r) {
    testing::FakeReply reply = normal(r);
    if (r.IsChat()) {
      ++calls;
      reply.delay = std::chrono::milliseconds(1500);
    }
    return reply;
  });
  const std::string env =
      "GRAG_LLM_BASE_URL=" + llm.base_url() + " GRAG_LLM_MODEL=fake-model GRAG_LLM_API_KEY=sk-test";
  ASSERT_TRUE(server_.Start(env + " " + Grag("--root " + ShellQuote(root) + " serve --port 0")))
      << server_.log();
  client_ = std::make_unique<httplib::Client>("127.0.0.1", server_.port());
  ASSERT_EQ(Post("/v1/index", json::object())->status, 202);
  for (int i = 0; i < 200 && calls == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(server_.Stop(SIGTERM), 0) << server_.log();
  // The writer lock went with it, and what was stored resumes: the CLI can finish the index.
  auto finish =
      RunCommand(env + " " + Grag("--root " + ShellQuote(root) + " index --no-progress --json"));
  EXPECT_EQ(finish.exit_code, 0) << finish.err;
}

}  // namespace
}  // namespace grag
