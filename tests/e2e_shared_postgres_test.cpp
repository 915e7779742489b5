// Several `grag serve` processes on one PostgreSQL index (issue 18), black-box: the first three
// staves of A Christmas Carol are indexed (no LLM) into a throwaway database, three servers
// (each its own process and port) serve it, and while a `grag index` process adds the last two
// staves, client threads hammer every server with stats, search and local queries. Every
// response must succeed and be whole (stats never go back, nor outside the states before and
// after the run; every passage a search returns can be read); once the writer has finished, every
// server must pick up its work by itself (it keeps the graph and vectors in memory: it compares
// the index version, Engine::IndexVersion, at most every 500 ms) and then answer exactly as a
// fresh process does, and as each other. Skipped, saying why, without a PostgreSQL server.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/answers.h"
#include "support/postgres.h"
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
using Clock = std::chrono::steady_clock;

constexpr int kServers = 3;
constexpr const char* kQuestion = "Who is the Ghost of Christmas Yet To Come?";

using testing::DropTimings;

// Lines [first, last) of the book (1-based, as `sed -n` counts).
std::string BookLines(int first, int last) {
  std::ifstream in(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
  std::string line, out;
  for (int n = 1; std::getline(in, line); ++n) {
    if (n >= first && n < last) out += line + "\n";
  }
  return out;
}

void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

class E2eSharedPostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = db_.CreateForTest();
    if (!why.empty()) GTEST_SKIP() << why;
    root_ = dir_ / "carol";
    auto init = RunCommand(Grag("init " + ShellQuote(root_)));
    ASSERT_EQ(init.exit_code, 0) << init.err;
    // Staves one to three (STAVE FOUR starts at line 2638).
    WriteFile(std::filesystem::path(root_) / "input/carol_1.txt", BookLines(1, 2638));
    auto index = RunCommand(On("index --no-progress"));
    ASSERT_EQ(index.exit_code, 0) << index.err;
  }

  std::string Grag(const std::string& args) const { return ShellQuote(GRAG_BINARY) + " " + args; }
  std::string Env() const {
    return "GRAG_LLM_BASE_URL= GRAG_LLM_MODEL= GRAG_EMBEDDING_MODEL= GRAG_STORE_URL=" +
           ShellQuote(db_.url()) + " ";
  }
  // `args` run offline on the project, its index in db_.
  std::string On(const std::string& args) const {
    return Env() + Grag("--root " + ShellQuote(root_) + " --no-llm " + args);
  }

  TempDir dir_;
  std::string root_;
  testing::TestDatabase db_;
};

struct Client {
  explicit Client(int port) : http("127.0.0.1", port) { http.set_read_timeout(60, 0); }
  httplib::Client http;
  std::mutex mu;  // an httplib::Client is not shared between threads
};

// One request's outcome: its status (0 when none came) and parsed body.
struct Reply {
  int status = 0;
  json body;
  std::string raw;
};

Reply Get(Client& c, const std::string& path) {
  std::lock_guard lock(c.mu);
  auto r = c.http.Get(path.c_str());
  if (!r) return {};
  return {r->status, json::parse(r->body, nullptr, false), r->body};
}

Reply Post(Client& c, const std::string& path, const json& body) {
  std::lock_guard lock(c.mu);
  auto r = c.http.Post(path.c_str(), body.dump(), "application/json");
  if (!r) return {};
  return {r->status, json::parse(r->body, nullptr, false), r->body};
}

json SearchBody() { return {{"question", kQuestion}, {"k", 5}}; }
json QueryBody() { return {{"question", kQuestion}, {"method", "local"}}; }

TEST_F(E2eSharedPostgresTest, ServersAnswerConsistentlyWhileAnotherProcessIndexes) {
  // The fresh answers before the run (a new process each: no cache).
  auto before_stats = RunCommand(On("stats --json"));
  ASSERT_EQ(before_stats.exit_code, 0) << before_stats.err;
  const json s0 = json::parse(before_stats.out);

  std::vector<std::unique_ptr<ServerProcess>> servers;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kServers; ++i) {
    servers.push_back(std::make_unique<ServerProcess>());
    ASSERT_TRUE(servers.back()->Start(
        Env() + Grag("--root " + ShellQuote(root_) + " --no-llm serve --port 0")))
        << servers.back()->log();
    clients.push_back(std::make_unique<Client>(servers.back()->port()));
  }
  // Every server answers the first question (opening its reader) before the writer starts.
  std::vector<json> versions;
  for (auto& c : clients) {
    auto r = Post(*c, "/v1/search", SearchBody());
    ASSERT_EQ(r.status, 200) << r.raw;
    versions.push_back(Get(*c, "/health").body["index_version"]);
    ASSERT_TRUE(versions.back().is_string()) << versions.back().dump();
  }

  // The writer: another process adds staves four and five.
  WriteFile(std::filesystem::path(root_) / "input/carol_4.txt", BookLines(2638, 3311));
  WriteFile(std::filesystem::path(root_) / "input/carol_5.txt", BookLines(3311, 100000));
  std::atomic<bool> writing{true};
  testing::CommandResult writer;
  const auto write_start = Clock::now();
  std::thread writer_thread([&] {
    writer = RunCommand(On("index --no-progress"));
    writing = false;
  });

  // The readers: every server, stats, search and local query in turn, until the writer is done.
  std::mutex mu;
  std::vector<std::string> failures;
  std::atomic<int64_t> requests{0};
  auto fail = [&](const std::string& what) {
    std::lock_guard lock(mu);
    if (failures.size() < 20) failures.push_back(what);
  };
  std::vector<std::thread> readers;
  for (int t = 0; t < kServers * 2; ++t) {
    readers.emplace_back([&, t] {
      Client& c = *clients[t % kServers];
      const std::string name = "server " + std::to_string(t % kServers);
      int64_t last_documents = 0, last_chunks = 0;
      for (int round = 0; writing || round < 2; ++round) {
        auto stats = Get(c, "/v1/stats");
        ++requests;
        if (stats.status != 200) {
          fail(name + " stats: " + std::to_string(stats.status) + " " + stats.raw.substr(0, 300));
        } else {
          const int64_t documents = stats.body.value("documents", int64_t{-1});
          const int64_t chunks = stats.body.value("chunks", int64_t{-1});
          // Never back in time, never fewer than before the run began.
          if (documents < last_documents || chunks < last_chunks ||
              documents < s0["documents"].get<int64_t>() || chunks < s0["chunks"].get<int64_t>()) {
            fail(name + " stats went back: " + stats.raw.substr(0, 300));
          }
          last_documents = documents;
          last_chunks = chunks;
        }
        auto search = Post(c, "/v1/search", SearchBody());
        ++requests;
        if (search.status != 200) {
          fail(name + " search: " + std::to_string(search.status) + " " +
               search.raw.substr(0, 300));
        } else {
          // Every passage it returns can be read (not a chunk of a half-written state).
          for (const auto& p : search.body.value("chunks", json::array())) {
            const std::string id = p.value("chunk_id", "");
            auto chunk = Get(c, "/v1/chunks/" + id);
            ++requests;
            if (chunk.status != 200) {
              fail(name + " chunk " + id + ": " + std::to_string(chunk.status) + " " + chunk.raw);
            }
          }
        }
        auto query = Post(c, "/v1/query", QueryBody());
        ++requests;
        if (query.status != 200) {
          fail(name + " query: " + std::to_string(query.status) + " " + query.raw.substr(0, 300));
        }
      }
    });
  }
  writer_thread.join();
  const auto committed = Clock::now();
  for (auto& r : readers) r.join();
  ASSERT_EQ(writer.exit_code, 0) << writer.err;
  std::cout
      << "[ TIMING   ] the writer's `grag index` of two more staves: "
      << std::chrono::duration_cast<std::chrono::milliseconds>(committed - write_start).count()
      << " ms, beside " << requests << " requests to " << kServers << " servers\n";
  for (const auto& f : failures) ADD_FAILURE() << f;

  // How fresh: each server, asked questions, moves to the index the writer finished by itself
  // (/health names the version its answers come from; it checks at most every 500 ms).
  for (int i = 0; i < kServers; ++i) {
    Client& c = *clients[i];
    json version = versions[i];
    while (version == versions[i] && Clock::now() < committed + std::chrono::seconds(20)) {
      Post(c, "/v1/search", SearchBody());
      version = Get(c, "/health").body["index_version"];
    }
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - committed).count();
    std::cout << "[ TIMING   ] server " << i << " answers from the new index " << ms
              << " ms after the writer exited\n";
    EXPECT_NE(version, versions[i]) << "server " << i << " still answers from the index before";
  }

  // What a fresh process answers now.
  auto after_stats = RunCommand(On("stats --json"));
  ASSERT_EQ(after_stats.exit_code, 0) << after_stats.err;
  const json s1 = json::parse(after_stats.out);
  ASSERT_GT(s1["documents"].get<int64_t>(), s0["documents"].get<int64_t>());
  auto fresh_search = RunCommand(On("search --json --k 5 " + ShellQuote(kQuestion)));
  ASSERT_EQ(fresh_search.exit_code, 0) << fresh_search.err;
  auto fresh_query = RunCommand(On("query --json --method local " + ShellQuote(kQuestion)));
  ASSERT_EQ(fresh_query.exit_code, 0) << fresh_query.err;
  const json want_search = json::parse(fresh_search.out);
  const json want_query = json::parse(fresh_query.out);

  // Every server catches up by itself: it answers as the fresh process does (the same passages
  // found, the same local answer and citations), and then exactly as the other servers do.
  auto chunk_ids = [](const json& search) {
    std::vector<std::string> ids;
    for (const auto& c : search.value("chunks", json::array()))
      ids.push_back(c.value("chunk_id", ""));
    return ids;
  };
  std::vector<json> answers;
  for (int i = 0; i < kServers; ++i) {
    Client& c = *clients[i];
    bool fresh = false;
    json search, query;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!fresh && Clock::now() < deadline) {
      auto s = Post(c, "/v1/search", SearchBody());
      auto q = Post(c, "/v1/query", QueryBody());
      ASSERT_EQ(s.status, 200) << s.raw;
      ASSERT_EQ(q.status, 200) << q.raw;
      search = s.body;
      query = q.body;
      fresh = chunk_ids(search) == chunk_ids(want_search) &&
              query["answer"] == want_query["answer"] &&
              query["citations"] == want_query["citations"];
      if (!fresh) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::cout
        << "[ TIMING   ] server " << i << " answers as a fresh process (checked "
        << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - committed).count()
        << " ms after the writer exited, after three fresh `grag` runs)\n";
    EXPECT_TRUE(fresh) << "server " << i << " does not answer as a fresh process:\n"
                       << json(chunk_ids(search)).dump() << "\nwanted\n"
                       << json(chunk_ids(want_search)).dump() << "\n"
                       << query["answer"].dump().substr(0, 300) << "\nwanted\n"
                       << want_query["answer"].dump().substr(0, 300);
    DropTimings(search);
    DropTimings(query);
    answers.push_back({search, query});
    auto stats = Get(c, "/v1/stats");
    ASSERT_EQ(stats.status, 200);
    EXPECT_EQ(stats.body["documents"], s1["documents"]) << stats.raw;
    EXPECT_EQ(stats.body["chunks"], s1["chunks"]) << stats.raw;
    EXPECT_EQ(stats.body["entities"], s1["entities"]) << stats.raw;
  }
  for (int i = 1; i < kServers; ++i) {
    EXPECT_EQ(answers[i], answers[0]) << "server " << i << " and server 0 differ";
  }
  for (auto& s : servers) EXPECT_EQ(s->Stop(SIGTERM), 0) << s->log();
}

// Issue 42: /health said "ok" while the index's database was gone. It asks the store now (at
// most once a second) and says 503 when it does not answer.
TEST_F(E2eSharedPostgresTest, HealthIsUnavailableWhenTheDatabaseGoesAway) {
  ServerProcess server;
  ASSERT_TRUE(
      server.Start(Env() + Grag("--root " + ShellQuote(root_) + " --no-llm serve --port 0")))
      << server.log();
  Client client(server.port());
  auto up = Get(client, "/health");
  ASSERT_EQ(up.status, 200) << up.raw;
  EXPECT_EQ(up.body["status"], "ok");
  ASSERT_EQ(db_.Drop(), "");
  Reply down;
  for (int i = 0; i < 50; ++i) {  // the last answer is kept for a second
    down = Get(client, "/health");
    if (down.status != 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(down.status, 503) << down.raw;
  EXPECT_EQ(down.body["status"], "unavailable") << down.raw;
  EXPECT_EQ(down.body["store"], "unreachable") << down.raw;
  EXPECT_FALSE(down.body["error"].get<std::string>().empty()) << down.raw;
}

}  // namespace
}  // namespace grag
