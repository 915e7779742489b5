// A server reading from a PostgreSQL streaming replica (store.read_url) while its index jobs
// write to the primary (store.url), black-box: the test starts a throwaway primary and a hot
// standby of it (scripts/pg_test_cluster.sh start / replica), indexes A Christmas Carol (no LLM)
// into the primary and serves it. With the replica's replay paused, a document indexed through
// the server is in the primary and not in the answers (the reads are the replica's); once replay
// resumes, the server answers with it by itself. Skipped, saying why, without the PostgreSQL
// server programs.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
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
std::string Script() {
  return ShellQuote(std::string(GRAG_SOURCE_DIR) + "/scripts/pg_test_cluster.sh");
}

// Stops the clusters started in `dirs` when the test ends, however it ends.
struct Clusters {
  std::vector<std::string> dirs;
  ~Clusters() {
    for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
      RunCommand(Script() + " stop " + ShellQuote(*it));
    }
  }
};

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs `sql` on the server at `url` with psql (the newest installed server's).
testing::CommandResult Psql(const std::string& url, const std::string& sql) {
  return RunCommand(
      "psql=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)/psql; "
      "[ -x \"$psql\" ] || psql=psql; \"$psql\" " +
      ShellQuote(url) + " -Atqc " + ShellQuote(sql));
}

constexpr const char* kNote =
    "Zephyrine Quall keeps the lighthouse of Merrow and mends its great lamp every winter.\n";

TEST(E2ePostgresReplicaTest, AServerReadsTheReplicaAndCatchesUpWithThePrimary) {
  TempDir dir;
  // As root the clusters run as the postgres user, who must reach their folders.
  std::filesystem::permissions(dir.path(), std::filesystem::perms::owner_all |
                                               std::filesystem::perms::group_exec |
                                               std::filesystem::perms::others_exec);
  Clusters clusters;
  const std::string primary_dir = dir / "p";
  const std::string replica_dir = dir / "r";
  clusters.dirs.push_back(primary_dir);
  auto primary = RunCommand(Script() + " start " + ShellQuote(primary_dir));
  if (primary.exit_code != 0) GTEST_SKIP() << "no PostgreSQL cluster: " << primary.err;
  clusters.dirs.push_back(replica_dir);
  auto replica =
      RunCommand(Script() + " replica " + ShellQuote(replica_dir) + " " + ShellQuote(primary_dir));
  ASSERT_EQ(replica.exit_code, 0) << replica.err;
  const std::string primary_url = Trim(primary.out);
  const std::string replica_url = Trim(replica.out);

  const std::string root = dir / "carol";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  std::filesystem::copy_file(
      std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
      root + "/input/christmas_carol.txt");
  const std::string on_primary =
      "--root " + ShellQuote(root) + " --no-llm --set " + ShellQuote("store.url=" + primary_url);
  const std::string on_both = on_primary + " --set " + ShellQuote("store.read_url=" + replica_url);
  auto index = RunCommand(Grag(on_primary + " index --no-progress"));
  ASSERT_EQ(index.exit_code, 0) << index.err;
  // The replica shows the index once it has replayed it.
  bool replayed = false;
  for (int i = 0; i < 300 && !replayed; ++i) {
    replayed = RunCommand(Grag(on_both + " stats --json")).exit_code == 0;
    if (!replayed) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(replayed) << "the replica never showed the index";

  ServerProcess serve;
  ASSERT_TRUE(serve.Start(Grag(on_both + " serve --port 0"))) << serve.log();
  httplib::Client client("127.0.0.1", serve.port());
  client.set_read_timeout(120, 0);
  auto post = [&](const std::string& path, const json& body) {
    return client.Post(path, body.dump(), "application/json");
  };
  const json search = {{"question", "Zephyrine Quall lighthouse Merrow"}, {"method", "bm25"}};
  auto found = [&] {
    auto r = post("/v1/search", search);
    return r && r->status == 200 && r->body.find("lighthouse.txt") != std::string::npos;
  };
  auto marley = post("/v1/query", {{"question", "Who is Marley?"}, {"method", "basic"}});
  ASSERT_TRUE(marley);
  ASSERT_EQ(marley->status, 200) << marley->body;
  EXPECT_FALSE(found());

  // Replay paused: what the server writes reaches the primary, not what it reads.
  auto paused = Psql(replica_url, "SELECT pg_wal_replay_pause()");
  ASSERT_EQ(paused.exit_code, 0) << paused.err;
  ASSERT_EQ(post("/v1/documents", {{"id", "lighthouse.txt"}, {"text", kNote}})->status, 201);
  auto job = post("/v1/index", json::object());
  ASSERT_EQ(job->status, 202) << job->body;
  const std::string job_path =
      "/v1/jobs/" + std::to_string(json::parse(job->body)["id"].get<int>());
  std::string state = "running";
  for (int i = 0; i < 600 && state == "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    state = json::parse(client.Get(job_path)->body)["state"];
  }
  ASSERT_EQ(state, "succeeded");
  auto on_the_primary = RunCommand(Grag(on_primary + " search --method bm25 --json " +
                                        ShellQuote("Zephyrine Quall lighthouse Merrow")));
  ASSERT_EQ(on_the_primary.exit_code, 0) << on_the_primary.err;
  EXPECT_NE(on_the_primary.out.find("lighthouse.txt"), std::string::npos);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past the server's recheck
  EXPECT_FALSE(found()) << "answered from the primary, not the paused replica";

  // Replay resumed: the server sees the new run on the replica and answers with it.
  auto resumed = Psql(replica_url, "SELECT pg_wal_replay_resume()");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  bool caught_up = false;
  const auto start = std::chrono::steady_clock::now();
  while (!caught_up && std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
    caught_up = found();
    if (!caught_up) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(caught_up) << "the server never answered from the caught-up replica";
  const double lag =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ answered with the new document " << lag << " s after replay resumed ]\n";
}

}  // namespace
}  // namespace grag
