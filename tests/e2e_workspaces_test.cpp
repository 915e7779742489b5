// Black-box tests of workspaces: one `grag serve` answering from several indexes. Every route a
// workspace has (read from /openapi.json, so a new route cannot escape) refuses another
// workspace's key exactly as it refuses a workspace that does not exist; creation and deletion
// through the API; an index job in one workspace while another answers; idle workspaces
// unloaded; `grag workspace` and `grag -w NAME` on the command line.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "support/run_command.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using nlohmann::json;
using testing::RunCommand;
using testing::ServerProcess;
using testing::ShellQuote;
using testing::TempDir;

std::string Grag(const std::string& args) { return ShellQuote(GRAG_BINARY) + " " + args; }

// Two small worlds of our own, each named only in its own workspace.
constexpr const char* kAlphaText =
    "Zephyrine Quall keeps the lighthouse on the island of Merrow. Every winter Zephyrine Quall "
    "repairs the great lamp with copper from the Merrow mines. The keeper of Merrow writes her "
    "log in green ink, and the fishermen of Merrow trust Zephyrine Quall with their lives.\n";
constexpr const char* kBetaText =
    "Orvald Pennick builds clocks in the town of Dunmere. The cathedral clock of Dunmere was "
    "built by Orvald Pennick in one summer, and every clock in Dunmere chimes a minute after "
    "his own. Orvald Pennick trained his daughter Isolde Pennick in the craft.\n";

const std::string kAdminKey = "admin-key-0123";
const std::string kAlphaKey = "alpha-key-4567";
const std::string kBetaKey = "beta-key-89ab";

json Parse(const httplib::Result& r) {
  if (!r) return json();
  return json::parse(r->body, nullptr, false);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

class E2eWorkspacesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    root_ = *dir_ / "project";
    auto init = RunCommand(Grag("init " + ShellQuote(root_)));
    ASSERT_EQ(init.exit_code, 0) << init.err;
    WriteFile(root_ + "/input/default.txt",
              "The default workspace holds the notes of Marguerite Olloway, a beekeeper.\n");
    for (const auto& [name, text] : {std::pair{"alpha", kAlphaText}, {"beta", kBetaText}}) {
      auto created = RunCommand(Grag("--root " + ShellQuote(root_) + " workspace create " + name));
      ASSERT_EQ(created.exit_code, 0) << created.err;
      WriteFile(root_ + "/workspaces/" + name + "/input/" + name + ".txt", text);
      auto index = RunCommand(
          Grag("--root " + ShellQuote(root_) + " -w " + name + " --no-llm index --no-progress"));
      ASSERT_EQ(index.exit_code, 0) << index.err;
    }
    auto index = RunCommand(Grag("--root " + ShellQuote(root_) + " --no-llm index --no-progress"));
    ASSERT_EQ(index.exit_code, 0) << index.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  void Serve(const std::string& flags = "") {
    const std::string env = "GRAG_API_KEYS=" + kAdminKey +
                            " GRAG_WORKSPACE_KEYS=alpha:" + kAlphaKey + ",beta:" + kBetaKey;
    ASSERT_TRUE(server_.Start(
        env + " " + Grag("--root " + ShellQuote(root_) + " --no-llm " + flags + " serve --port 0")))
        << server_.log();
  }

  httplib::Result Send(const std::string& method, const std::string& path, const std::string& key,
                       const json& body = nullptr, const httplib::Headers& extra = {}) {
    httplib::Client c("127.0.0.1", server_.port());
    c.set_read_timeout(60, 0);
    httplib::Headers headers = extra;
    if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
    const std::string text = body.is_null() ? "" : body.dump();
    if (method == "GET") return c.Get(path, headers);
    if (method == "DELETE") return c.Delete(path, headers);
    return c.Post(path, headers, text, "application/json");
  }

  static TempDir* dir_;
  static std::string root_;
  ServerProcess server_;
};

TempDir* E2eWorkspacesTest::dir_ = nullptr;
std::string E2eWorkspacesTest::root_;

// What a request gets for a workspace it may not see: the 404 of one that does not exist.
void ExpectNoWorkspace(const httplib::Result& r, const std::string& name, const std::string& what) {
  ASSERT_TRUE(r) << what;
  EXPECT_EQ(r->status, 404) << what << ": " << r->body;
  const json body = json::parse(r->body, nullptr, false);
  EXPECT_EQ(body["error"]["message"], "no workspace \"" + name + "\"") << what << ": " << r->body;
  EXPECT_EQ(r->body.find("Pennick"), std::string::npos) << what;
  EXPECT_EQ(r->body.find("Dunmere"), std::string::npos) << what;
}

TEST_F(E2eWorkspacesTest, EveryWorkspaceRouteRefusesAnotherWorkspacesKey) {
  Serve();
  const json api = Parse(Send("GET", "/openapi.json", ""));
  ASSERT_TRUE(api.is_object());
  int prefixed = 0, plain = 0;
  for (const auto& [path, methods] : api["paths"].items()) {
    const bool in_workspace = path.starts_with("/v1/workspaces/{workspace}/");
    for (const auto& [method_lower, op] : methods.items()) {
      std::string method = method_lower;
      for (auto& ch : method) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      // Concrete values for the other parameters: the refusal comes before they are looked at.
      auto concrete = [&](std::string p, const std::string& workspace) {
        const std::map<std::string, std::string> values = {
            {"{workspace}", workspace}, {"{id}", "1"}, {"{name}", "app.js"}};
        for (const auto& [param, value] : values) {
          for (size_t at = p.find(param); at != std::string::npos; at = p.find(param)) {
            p.replace(at, param.size(), value);
          }
        }
        return p;
      };
      const json body = {{"question", "Who builds the clocks of Dunmere?"},
                         {"text", "x"},
                         {"messages", json::array({{{"role", "user"}, {"content", "Dunmere?"}}})}};
      if (in_workspace) {
        ++prefixed;
        const std::string what = method + " " + path;
        // alpha's key on beta, and on a workspace that does not exist: the same answer.
        ExpectNoWorkspace(Send(method, concrete(path, "beta"), kAlphaKey, body), "beta", what);
        ExpectNoWorkspace(Send(method, concrete(path, "nowhere"), kAdminKey, body), "nowhere",
                          what);
        if (method == "GET") {  // beta's own key gets past the workspace check
          auto own = Send(method, concrete(path, "beta"), kBetaKey);
          ASSERT_TRUE(own) << what;
          EXPECT_NE(own->body,
                    R"({"error":{"message":"no workspace \"beta\"","type":"not_found"}})")
              << what;
        }
      } else if (path.starts_with("/v1/") && !path.starts_with("/v1/workspaces")) {
        ++plain;
        const std::string what = method + " " + path;
        // The plain routes are the default workspace's: not alpha's key's, nor, by header, beta.
        ExpectNoWorkspace(Send(method, concrete(path, "beta"), kAlphaKey, body), "default", what);
        ExpectNoWorkspace(
            Send(method, concrete(path, "beta"), kAlphaKey, body, {{"X-Grag-Workspace", "beta"}}),
            "beta", what + " (X-Grag-Workspace)");
      }
    }
  }
  EXPECT_GE(prefixed, 20);  // every /v1 route of a workspace (23 now)
  EXPECT_EQ(prefixed, plain);
}

TEST_F(E2eWorkspacesTest, EachKeyAnswersFromItsOwnWorkspace) {
  Serve();
  auto ask = [&](const std::string& path, const std::string& key) {
    return Parse(Send(
        "POST", path, key,
        {{"question", "Who keeps the lighthouse or builds the clocks?"}, {"method", "basic"}}));
  };
  const json alpha = ask("/v1/workspaces/alpha/query", kAlphaKey);
  ASSERT_TRUE(alpha.contains("answer")) << alpha.dump();
  EXPECT_NE(alpha.dump().find("Zephyrine"), std::string::npos) << alpha.dump();
  EXPECT_EQ(alpha.dump().find("Pennick"), std::string::npos) << alpha.dump();
  const json beta = ask("/v1/workspaces/beta/query", kBetaKey);
  EXPECT_NE(beta.dump().find("Pennick"), std::string::npos) << beta.dump();
  EXPECT_EQ(beta.dump().find("Zephyrine"), std::string::npos) << beta.dump();
  // The admin key opens every workspace; the plain routes are the default one.
  EXPECT_NE(ask("/v1/workspaces/beta/query", kAdminKey).dump().find("Pennick"), std::string::npos);
  EXPECT_NE(ask("/v1/query", kAdminKey).dump().find("Olloway"), std::string::npos);
  EXPECT_NE(Parse(Send("POST", "/v1/query", kAdminKey,
                       {{"question", "Who builds the clocks?"}, {"method", "basic"}},
                       {{"X-Grag-Workspace", "beta"}}))
                .dump()
                .find("Pennick"),
            std::string::npos);

  // The list holds what the key opens.
  auto names = [&](const std::string& key) {
    std::vector<std::string> out;
    for (const auto& w : Parse(Send("GET", "/v1/workspaces", key))) out.push_back(w["name"]);
    return out;
  };
  EXPECT_EQ(names(kAlphaKey), std::vector<std::string>({"alpha"}));
  EXPECT_EQ(names(kAdminKey), std::vector<std::string>({"default", "alpha", "beta"}));
  EXPECT_EQ(Send("GET", "/v1/workspaces", "wrong-key")->status, 401);

  // The OpenAI-compatible endpoint: a workspace by model name, or by base URL.
  const json chat = {
      {"model", "grag-basic@beta"},
      {"messages",
       json::array({{{"role", "user"}, {"content", "Who built the cathedral clock?"}}})}};
  ExpectNoWorkspace(Send("POST", "/v1/workspaces/alpha/chat/completions", kAlphaKey, chat), "beta",
                    "grag-basic@beta with alpha's key");
  const json answered = Parse(Send("POST", "/v1/workspaces/beta/chat/completions", kBetaKey, chat));
  EXPECT_NE(answered.dump().find("Pennick"), std::string::npos) << answered.dump();
  json models = Parse(Send("GET", "/v1/workspaces/alpha/models", kAdminKey));
  std::set<std::string> ids;
  for (const auto& m : models["data"]) ids.insert(m["id"]);
  EXPECT_TRUE(ids.contains("grag-local"));
  EXPECT_TRUE(ids.contains("grag-local@beta"));
  EXPECT_TRUE(ids.contains("grag-local@default"));
  models = Parse(Send("GET", "/v1/workspaces/alpha/models", kAlphaKey));
  for (const auto& m : models["data"]) {
    EXPECT_EQ(m["id"].get<std::string>().find('@'), std::string::npos) << m.dump();
  }
}

TEST_F(E2eWorkspacesTest, CreateIndexWhileAnotherAnswersThenDelete) {
  Serve();
  const json create = {{"name", "gamma"}, {"settings", {{"chunks.size", 300}}}};
  EXPECT_EQ(Send("POST", "/v1/workspaces", kAlphaKey, create)->status, 403);
  auto created = Send("POST", "/v1/workspaces", kAdminKey, create);
  ASSERT_EQ(created->status, 201) << created->body;
  EXPECT_EQ(Send("POST", "/v1/workspaces", kAdminKey, create)->status, 409);
  EXPECT_EQ(Send("POST", "/v1/workspaces", kAdminKey, {{"name", "Bad Name"}})->status, 400);
  EXPECT_EQ(Send("POST", "/v1/workspaces", kAdminKey,
                 {{"name", "delta"}, {"settings", {{"chunks.size", "many"}}}})
                ->status,
            400);
  EXPECT_FALSE(std::filesystem::exists(root_ + "/workspaces/delta"));
  EXPECT_NE(testing::ReadFile(root_ + "/workspaces/gamma/grag.toml").find("size = 300"),
            std::string::npos);

  // A document big enough that indexing it takes a while, then a job.
  const std::string book =
      testing::ReadFile(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
  ASSERT_EQ(Send("POST", "/v1/workspaces/gamma/documents", kAdminKey,
                 {{"id", "carol.txt"}, {"text", book}})
                ->status,
            201);
  auto job = Send("POST", "/v1/workspaces/gamma/index", kAdminKey, json::object());
  ASSERT_EQ(job->status, 202) << job->body;
  EXPECT_EQ(job->get_header_value("Location").rfind("/v1/workspaces/gamma/jobs/", 0), 0u);
  const int64_t id = Parse(job)["id"];
  // alpha answers while gamma indexes; gamma's job is not alpha's.
  const json alpha =
      Parse(Send("POST", "/v1/workspaces/alpha/query", kAlphaKey,
                 {{"question", "What does the keeper of Merrow repair?"}, {"method", "basic"}}));
  EXPECT_NE(alpha.dump().find("Zephyrine"), std::string::npos) << alpha.dump();
  const json during =
      Parse(Send("GET", "/v1/workspaces/gamma/jobs/" + std::to_string(id), kAdminKey));
  EXPECT_EQ(during["state"], "running") << "indexing the book ended before alpha answered";
  EXPECT_EQ(Parse(Send("GET", "/v1/workspaces/alpha/jobs", kAlphaKey)), json::array());
  // Not deleted while it indexes.
  EXPECT_EQ(Send("DELETE", "/v1/workspaces/gamma", kAdminKey)->status, 409);
  std::string state = "running";
  for (int i = 0; i < 600 && state == "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    state =
        Parse(Send("GET", "/v1/workspaces/gamma/jobs/" + std::to_string(id), kAdminKey))["state"];
  }
  ASSERT_EQ(state, "succeeded");
  const json stats = Parse(Send("GET", "/v1/workspaces/gamma/stats", kAdminKey));
  EXPECT_GT(stats["chunks"].get<int64_t>(), 0) << stats.dump();

  EXPECT_EQ(Send("DELETE", "/v1/workspaces/gamma", kAlphaKey)->status, 403);
  EXPECT_EQ(Send("DELETE", "/v1/workspaces/default", kAdminKey)->status, 400);
  auto deleted = Send("DELETE", "/v1/workspaces/gamma", kAdminKey);
  ASSERT_EQ(deleted->status, 200) << deleted->body;
  EXPECT_FALSE(std::filesystem::exists(root_ + "/workspaces/gamma"));
  ExpectNoWorkspace(Send("GET", "/v1/workspaces/gamma/stats", kAdminKey), "gamma", "deleted");
  EXPECT_EQ(Send("DELETE", "/v1/workspaces/gamma", kAdminKey)->status, 404);

  // A workspace whose grag.toml is wrong is listed with what is wrong, and can be deleted.
  ASSERT_EQ(Send("POST", "/v1/workspaces", kAdminKey, {{"name", "broken"}})->status, 201);
  WriteFile(root_ + "/workspaces/broken/grag.toml", "[chunks]\nsize = \"many\"\n");
  bool listed = false;
  for (const auto& w : Parse(Send("GET", "/v1/workspaces", kAdminKey))) {
    if (w["name"] != "broken") continue;
    listed = true;
    EXPECT_NE(w.dump().find("chunks.size"), std::string::npos) << w.dump();
  }
  EXPECT_TRUE(listed);
  EXPECT_EQ(Send("POST", "/v1/workspaces/broken/query", kAdminKey, {{"question", "x"}})->status,
            400);
  EXPECT_EQ(Send("DELETE", "/v1/workspaces/broken", kAdminKey)->status, 200);
  EXPECT_FALSE(std::filesystem::exists(root_ + "/workspaces/broken"));
}

TEST_F(E2eWorkspacesTest, IdleWorkspacesAreUnloadedPastTheLimit) {
  Serve("--set server.max_loaded_workspaces=2");
  auto loaded = [&] {
    std::map<std::string, bool> out;
    for (const auto& w : Parse(Send("GET", "/v1/workspaces", kAdminKey))) {
      out[w["name"]] = w["loaded"];
    }
    return out;
  };
  const json question = {{"question", "Who is it about?"}, {"method", "basic"}};
  for (const std::string ws : {"default", "alpha", "beta"}) {
    auto r = Send("POST", "/v1/workspaces/" + ws + "/query", kAdminKey, question);
    ASSERT_EQ(r->status, 200) << r->body;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // distinct last uses
  }
  auto now = loaded();
  EXPECT_FALSE(now["default"]);  // the least recently used
  EXPECT_TRUE(now["alpha"]);
  EXPECT_TRUE(now["beta"]);
  // Asked again, it loads again (and the least recently used one goes).
  auto again = Send("POST", "/v1/query", kAdminKey, question);
  ASSERT_EQ(again->status, 200) << again->body;
  EXPECT_NE(again->body.find("Olloway"), std::string::npos);
  now = loaded();
  EXPECT_TRUE(now["default"]);
  EXPECT_FALSE(now["alpha"]);
}

TEST_F(E2eWorkspacesTest, CommandLine) {
  const std::string root = "--root " + ShellQuote(root_) + " ";
  auto list = RunCommand(Grag(root + "workspace list --json"));
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const json listed = json::parse(list.out, nullptr, false);
  ASSERT_GE(listed.size(), 2u) << list.out;
  EXPECT_EQ(listed[0]["name"], "alpha");
  EXPECT_EQ(listed[0]["indexed"], true);

  // -w: any command on a workspace.
  auto search = RunCommand(Grag(root + "-w beta --no-llm search --json 'cathedral clock'"));
  ASSERT_EQ(search.exit_code, 0) << search.err;
  EXPECT_NE(search.out.find("Pennick"), std::string::npos);
  EXPECT_EQ(search.out.find("Zephyrine"), std::string::npos);
  auto missing = RunCommand(Grag(root + "-w nowhere stats"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no workspace \"nowhere\""), std::string::npos) << missing.err;

  // A workspace's own settings override the project's; --set overrides both.
  auto made = RunCommand(Grag(root + "workspace create epsilon --setting chunks.size=333"));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  auto chunk_size = [&](const std::string& flags) {
    auto r = RunCommand(Grag(root + flags + " config --json"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (const auto& s : json::parse(r.out, nullptr, false)) {
      if (s["key"] == "chunks.size") return s["value"].get<std::string>();
    }
    return std::string("?");
  };
  EXPECT_EQ(chunk_size("-w epsilon"), "333");
  EXPECT_EQ(chunk_size("-w epsilon --set chunks.size=444"), "444");
  EXPECT_EQ(chunk_size("-w alpha"), chunk_size(""));
  auto bad = RunCommand(Grag(root + "workspace create zeta --setting no.such=1"));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(root_ + "/workspaces/zeta"));
  auto refused = RunCommand(Grag(root + "workspace delete epsilon"));
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--yes"), std::string::npos);
  auto deleted = RunCommand(Grag(root + "workspace delete epsilon --yes"));
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_FALSE(std::filesystem::exists(root_ + "/workspaces/epsilon"));
}

TEST_F(E2eWorkspacesTest, McpToolsTakeAWorkspace) {
  auto call = [](int id, const json& arguments) {
    return json{{"jsonrpc", "2.0"},
                {"id", id},
                {"method", "tools/call"},
                {"params", {{"name", "search"}, {"arguments", arguments}}}}
        .dump();
  };
  const json init = {{"jsonrpc", "2.0"},
                     {"id", 1},
                     {"method", "initialize"},
                     {"params",
                      {{"protocolVersion", "2025-06-18"},
                       {"capabilities", json::object()},
                       {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
  const json list = {{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}};
  const std::string input = *dir_ / "mcp-input.jsonl";
  WriteFile(input, init.dump() + "\n" + list.dump() + "\n" +
                       call(3, {{"question", "cathedral clock"}, {"workspace", "beta"}}) + "\n" +
                       call(4, {{"question", "cathedral clock"}}) + "\n" +
                       call(5, {{"question", "cathedral clock"}, {"workspace", "nowhere"}}) + "\n");
  auto r = RunCommand(Grag("--root " + ShellQuote(root_) + " --no-llm mcp < " + ShellQuote(input)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int, json> replies;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    const json reply = json::parse(line, nullptr, false);
    if (reply.contains("id")) replies[reply["id"].get<int>()] = reply;
  }
  for (const auto& tool : replies[2]["result"]["tools"]) {
    EXPECT_TRUE(tool["inputSchema"]["properties"].contains("workspace")) << tool["name"];
  }
  const std::string beta = replies[3]["result"].dump();
  EXPECT_NE(beta.find("Pennick"), std::string::npos) << beta;
  const std::string project = replies[4]["result"].dump();
  EXPECT_EQ(project.find("Pennick"), std::string::npos) << project;
  EXPECT_EQ(replies[5]["result"]["isError"], true) << replies[5].dump();
  EXPECT_NE(replies[5].dump().find("no workspace"), std::string::npos) << replies[5].dump();
}

}  // namespace
}  // namespace grag
