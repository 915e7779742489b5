// Indexing workers, black-box: A Christmas Carol indexed into a PostgreSQL database by one
// `grag index` with extraction.distribute and two `grag index --worker` processes, each with a
// loopback model server of its own (FakeGraphRagHandler, a little latency so that the work is
// spread). Every chunk's extraction call is made once over the three servers, as many calls in
// all as one process makes alone, and the index is the one a single process builds (its stats
// and its entity and relationship tables compared). A worker killed with SIGKILL mid-run leaves
// its chunks to the others once its lease expires: the same index, with at most its calls in
// flight made twice. Skipped, saying why, without PostgreSQL.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "support/fake_graphrag_llm.h"
#include "support/fake_openai_server.h"
#include "support/postgres.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using nlohmann::json;
using testing::FakeGraphRagHandler;
using testing::FakeOpenAIServer;
using testing::FakeReply;
using testing::FakeRequest;
using testing::PromptKind;
using testing::RunCommand;
using testing::ShellQuote;
using testing::SpawnCommand;
using testing::TempDir;
using testing::TestDatabase;
using testing::WaitForExit;

std::string Grag(const std::string& args) { return ShellQuote(GRAG_BINARY) + " " + args; }

// Chat requests by kind of prompt ("extract", "glean", "summarize", "report", ...).
std::map<std::string, int> Kinds(const FakeOpenAIServer& server) {
  std::map<std::string, int> out;
  for (const FakeRequest& r : server.requests()) {
    if (r.IsChat()) ++out[PromptKind(r.LastUserMessage())];
  }
  return out;
}

// The model server of one process, answering after `delay`.
std::unique_ptr<FakeOpenAIServer> ModelServer(std::chrono::milliseconds delay) {
  auto handler = FakeGraphRagHandler();
  return std::make_unique<FakeOpenAIServer>([handler, delay](const FakeRequest& r) {
    FakeReply reply = handler(r);
    reply.delay = delay;
    return reply;
  });
}

class E2eIndexWorkersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "carol";
    ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root_))).exit_code, 0);
    std::filesystem::copy_file(
        std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
        root_ + "/input/christmas_carol.txt");
  }

  // Global options for a process on database `db` with the model at `server`.
  std::string On(const TestDatabase& db, const FakeOpenAIServer& server,
                 const std::string& more = "") const {
    return "--root " + ShellQuote(root_) + " --set " + ShellQuote("store.url=" + db.url()) +
           " --set " + ShellQuote("llm.base_url=" + server.base_url()) +
           " --set llm.model=fake-model --set llm.concurrency=4 --set extraction.worker_lease=2 " +
           more;
  }

  // What an index holds, to compare two: stats' counts and the graph's tables.
  json Contents(const TestDatabase& db, const FakeOpenAIServer& server) const {
    json out;
    auto stats = RunCommand(Grag(On(db, server) + " stats --json"));
    EXPECT_EQ(stats.exit_code, 0) << stats.err;
    const json s = json::parse(stats.out, nullptr, false);
    for (const char* key :
         {"documents", "chunks", "entities", "relationships", "communities", "reports"}) {
      out[key] = s.value(key, json());
    }
    // The graph's tables as exported (Microsoft GraphRAG's output tables, as JSON).
    const std::string folder = dir_ / ("export-" + std::to_string(++exports_));
    auto exported = RunCommand(Grag(On(db, server) + " export -f json -o " + ShellQuote(folder)));
    EXPECT_EQ(exported.exit_code, 0) << exported.err;
    for (const char* table : {"entities", "relationships", "communities", "community_reports"}) {
      out[table] = json::parse(testing::ReadFile(folder + "/" + table + ".json"), nullptr, false);
    }
    return out;
  }

  TempDir dir_;
  std::string root_;
  mutable int exports_ = 0;
};

TEST_F(E2eIndexWorkersTest, ThreeProcessesIndexAsOneDoes) {
  TestDatabase alone_db, shared_db;
  if (std::string why = alone_db.CreateForTest(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(shared_db.CreateForTest(), "");

  // One process alone: the reference.
  auto alone = ModelServer(std::chrono::milliseconds(0));
  auto single = RunCommand(Grag(On(alone_db, *alone) + " index --no-progress"));
  ASSERT_EQ(single.exit_code, 0) << single.err;
  const std::map<std::string, int> alone_calls = Kinds(*alone);
  ASSERT_GT(alone_calls.at("extract"), 10);

  // The run and two workers, each with its own model server.
  auto run_model = ModelServer(std::chrono::milliseconds(30));
  auto model_a = ModelServer(std::chrono::milliseconds(30));
  auto model_b = ModelServer(std::chrono::milliseconds(30));
  const std::string logs = dir_ / "worker";
  const pid_t a =
      SpawnCommand(Grag(On(shared_db, *model_a) + " index --worker --once --worker-name a") +
                   " > " + ShellQuote(logs + "-a.log") + " 2>&1");
  const pid_t b =
      SpawnCommand(Grag(On(shared_db, *model_b) + " index --worker --once --worker-name b") +
                   " > " + ShellQuote(logs + "-b.log") + " 2>&1");
  auto run = RunCommand(
      Grag(On(shared_db, *run_model, "--set extraction.distribute=true") + " index --no-progress"));
  const int a_exit = WaitForExit(a, std::chrono::seconds(120));
  const int b_exit = WaitForExit(b, std::chrono::seconds(120));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(a_exit, 0) << testing::ReadFile(logs + "-a.log");
  EXPECT_EQ(b_exit, 0) << testing::ReadFile(logs + "-b.log");

  // Every chunk extracted once over the three servers; both workers took part.
  std::map<std::string, int> shared_calls;
  for (const auto* server : {run_model.get(), model_a.get(), model_b.get()}) {
    for (const auto& [kind, n] : Kinds(*server)) shared_calls[kind] += n;
  }
  EXPECT_EQ(shared_calls, alone_calls);
  EXPECT_GT(Kinds(*model_a)["extract"], 0);
  EXPECT_GT(Kinds(*model_b)["extract"], 0);
  EXPECT_EQ(Kinds(*model_a).size(), 1u) << "a worker only extracts";
  std::cout << "[ extraction calls: run " << Kinds(*run_model)["extract"] << ", worker a "
            << Kinds(*model_a)["extract"] << ", worker b " << Kinds(*model_b)["extract"]
            << " (alone: " << alone_calls.at("extract") << ") ]\n";

  // The same index.
  EXPECT_EQ(Contents(shared_db, *run_model), Contents(alone_db, *alone));
  // The work table is withdrawn once the run has extracted.
  auto stats = RunCommand(Grag(On(shared_db, *run_model) + " stats --json"));
  EXPECT_TRUE(json::parse(stats.out, nullptr, false)["work"].is_null()) << stats.out;
}

TEST_F(E2eIndexWorkersTest, AKilledWorkersChunksGoToTheOthers) {
  TestDatabase alone_db, shared_db;
  if (std::string why = alone_db.CreateForTest(); !why.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(shared_db.CreateForTest(), "");
  auto alone = ModelServer(std::chrono::milliseconds(0));
  ASSERT_EQ(RunCommand(Grag(On(alone_db, *alone) + " index --no-progress")).exit_code, 0);
  const int alone_extract = Kinds(*alone).at("extract");

  auto run_model = ModelServer(std::chrono::milliseconds(300));
  auto other_model = ModelServer(std::chrono::milliseconds(300));
  // The doomed worker's server answers its first two calls, then holds every other call (the
  // worker is killed with those in flight).
  auto handler = FakeGraphRagHandler();
  auto answered = std::make_shared<std::atomic<int>>(0);
  auto doomed_model = std::make_unique<FakeOpenAIServer>([handler, answered](const FakeRequest& r) {
    FakeReply reply = handler(r);
    reply.delay = answered->fetch_add(1) < 2 ? std::chrono::milliseconds(100)
                                             : std::chrono::milliseconds(60000);
    return reply;
  });
  const std::string logs = dir_ / "worker";
  const pid_t doomed = SpawnCommand(Grag(On(shared_db, *doomed_model, "--set llm.concurrency=2") +
                                         " index --worker --once --worker-name doomed") +
                                    " > " + ShellQuote(logs + "-doomed.log") + " 2>&1");
  const pid_t other = SpawnCommand(
      Grag(On(shared_db, *other_model) + " index --worker --once --worker-name other") + " > " +
      ShellQuote(logs + "-other.log") + " 2>&1");
  const pid_t run = SpawnCommand(
      Grag(On(shared_db, *run_model, "--set extraction.distribute=true") + " index --no-progress") +
      " > " + ShellQuote(logs + "-run.log") + " 2>&1");
  // Killed once it has finished two chunks and holds two more, their calls in flight.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((doomed_model->request_count() < 4 || doomed_model->in_flight() < 2) &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int in_flight = doomed_model->in_flight();
  ASSERT_EQ(in_flight, 2) << "the doomed worker never held two chunks: "
                          << testing::ReadFile(logs + "-doomed.log");
  ASSERT_EQ(::kill(doomed, SIGKILL), 0);
  EXPECT_EQ(WaitForExit(doomed, std::chrono::seconds(10)), 128 + SIGKILL);
  const int made_by_doomed = doomed_model->request_count();
  EXPECT_EQ(WaitForExit(run, std::chrono::seconds(180)), 0) << testing::ReadFile(logs + "-run.log");
  EXPECT_EQ(WaitForExit(other, std::chrono::seconds(60)), 0)
      << testing::ReadFile(logs + "-other.log");

  const int total = Kinds(*run_model)["extract"] + Kinds(*other_model)["extract"] +
                    Kinds(*doomed_model)["extract"];
  std::cout << "[ killed with " << in_flight << " calls in flight after " << made_by_doomed
            << " calls; extraction calls in all " << total << ", alone " << alone_extract << " ]\n";
  EXPECT_GE(total, alone_extract);
  EXPECT_LE(total - alone_extract, in_flight) << "more repeated than in flight";
  EXPECT_GE(made_by_doomed, 4);
  EXPECT_EQ(Contents(shared_db, *run_model), Contents(alone_db, *alone));
}

TEST_F(E2eIndexWorkersTest, AWorkerNeedsPostgresql) {
  auto worker = RunCommand(Grag("--root " + ShellQuote(root_) + " index --worker --once"));
  EXPECT_EQ(worker.exit_code, 2);
  EXPECT_NE(worker.err.find("PostgreSQL"), std::string::npos) << worker.err;
  auto once = RunCommand(Grag("--root " + ShellQuote(root_) + " --no-llm index --once"));
  EXPECT_EQ(once.exit_code, 2);
  EXPECT_NE(once.err.find("--worker"), std::string::npos) << once.err;
}

}  // namespace
}  // namespace grag
