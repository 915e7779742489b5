// End to end with a client we did not write: the official OpenAI npm package (pinned in
// scripts/setup.sh, run by tests/tools/openai_client.js under node) talks to the real
// `grag serve` over a --no-llm index of A Christmas Carol: lists the models, asks grag-local a
// question without and with streaming, and is refused with a wrong API key. Skips (saying what
// to install) when node or the package is missing.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <gtest/gtest.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "support/run_command.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::RunCommand;
using testing::ServerProcess;
using testing::ShellQuote;
using testing::TempDir;

const std::string kKey = "test-key";

std::string NodeModules() { return std::string(GRAG_SOURCE_DIR) + "/.deps/npm/node_modules"; }

TEST(E2eOpenAiClientTest, OfficialClientListsModelsAnswersStreamsAndIsRefusedAWrongKey) {
  // The client: node and the pinned npm package. Missing is a skip that says what to install.
  if (RunCommand("command -v node").exit_code != 0) {
    GTEST_SKIP() << "node is not installed: install Node.js 20 (apt-get install nodejs npm) and "
                    "run scripts/setup.sh to fetch the openai npm package";
  }
  if (!std::filesystem::exists(NodeModules() + "/openai/package.json")) {
    GTEST_SKIP() << "the npm package openai is missing from " << NodeModules()
                 << ": run scripts/setup.sh (it installs the pinned version there)";
  }

  // A small project: the book, indexed without a model.
  TempDir dir;
  const std::string root = dir / "carol";
  const std::string grag = ShellQuote(GRAG_BINARY);
  ASSERT_EQ(
      testing::MakeNoLlmProject(
          grag, root, std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt"),
      "");

  ServerProcess serve;
  ASSERT_TRUE(serve.Start(grag + " --root " + ShellQuote(root) +
                          " --no-llm --set server.api_keys=" + kKey + " serve --port 0"))
      << serve.log();

  const std::string base_url = "http://127.0.0.1:" + std::to_string(serve.port()) + "/v1";
  auto run = RunCommand("NODE_PATH=" + ShellQuote(NodeModules()) + " node " +
                        ShellQuote(std::string(GRAG_SOURCE_DIR) + "/tests/tools/openai_client.js") +
                        " " + ShellQuote(base_url) + " " + ShellQuote(kKey) + " wrong-key " +
                        ShellQuote("Who is Marley?"));
  ASSERT_EQ(run.exit_code, 0) << "stdout: " << run.out << "\nstderr: " << run.err
                              << "\nserver: " << serve.log();
  nlohmann::json out;
  ASSERT_NO_THROW(out = nlohmann::json::parse(run.out)) << run.out;
  std::cout << "[ openai npm " << out.value("openai", std::string("?")) << " ]\n";

  // models.list(): the seven models, one per query method.
  std::set<std::string> models;
  for (const auto& m : out["models"]) models.insert(m.get<std::string>());
  EXPECT_EQ(models, (std::set<std::string>{"grag-auto", "grag-global", "grag-local", "grag-hybrid",
                                           "grag-basic", "grag-drift", "grag-lazy"}));

  // Non-streaming: an extractive answer about Marley.
  const std::string answer = out.value("answer", std::string());
  EXPECT_EQ(out.value("model", std::string()), "grag-local");
  EXPECT_EQ(out.value("finish_reason", std::string()), "stop");
  EXPECT_GT(answer.size(), 40u) << answer;
  EXPECT_NE(answer.find("Marley"), std::string::npos) << answer;
  EXPECT_TRUE(
      answer.find("Scrooge") != std::string::npos || answer.find("partner") != std::string::npos ||
      answer.find("ghost") != std::string::npos || answer.find("Ghost") != std::string::npos)
      << answer;

  // Streaming: the same answer, in chunks, ended by finish_reason stop and `data: [DONE]`.
  const std::string streamed = out.value("streamed", std::string());
  EXPECT_TRUE(out["stream_error"].is_null()) << out["stream_error"];
  EXPECT_TRUE(out.value("stream_ended", false));
  EXPECT_TRUE(out.value("raw_done", false)) << "the stream's body did not end with data: [DONE]";
  EXPECT_EQ(out.value("stream_finish_reason", std::string()), "stop");
  EXPECT_GE(out.value("chunks", 0), 2);
  EXPECT_TRUE(streamed == answer || streamed.find(answer) != std::string::npos)
      << "streamed: " << streamed << "\nanswer: " << answer;

  // A wrong key: the client throws its AuthenticationError, status 401.
  const auto& wrong = out["wrong_key"];
  EXPECT_TRUE(wrong.value("threw", false)) << wrong;
  EXPECT_EQ(wrong.value("status", 0), 401) << wrong;
  EXPECT_TRUE(wrong.value("is_authentication_error", false)) << wrong;
  EXPECT_EQ(wrong.value("error", std::string()), "AuthenticationError") << wrong;

  // SIGTERM stops it cleanly.
  EXPECT_EQ(serve.Stop(SIGTERM, std::chrono::seconds(60)), 0) << serve.log();
}

}  // namespace
}  // namespace grag
