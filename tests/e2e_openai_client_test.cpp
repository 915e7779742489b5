// End to end with a client we did not write: the official OpenAI npm package (pinned in
// scripts/setup.sh, run by tests/tools/openai_client.js under node) talks to the real
// `grag serve` over a --no-llm index of A Christmas Carol: lists the models, asks grag-local a
// question without and with streaming, and is refused with a wrong API key. Skips (saying what
// to install) when node or the package is missing.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;
using Clock = std::chrono::steady_clock;

const std::string kKey = "test-key";

std::string NodeModules() { return std::string(GRAG_SOURCE_DIR) + "/.deps/npm/node_modules"; }

// `grag serve` as a child: argv exec'd directly (so SIGTERM reaches grag itself), stdout on a pipe
// for the "listening on" line, stderr into a file for the failure messages.
class Serve {
 public:
  ~Serve() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }

  // Empty on success, else why it did not start.
  std::string Start(const std::vector<std::string>& args, const std::string& stderr_path) {
    stderr_path_ = stderr_path;
    int fds[2];
    if (::pipe(fds) != 0) return "pipe failed";
    pid_ = ::fork();
    if (pid_ < 0) return "fork failed";
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err >= 0) ::dup2(err, 2);
      ::close(fds[0]);
      ::close(fds[1]);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
    ::close(fds[1]);
    out_ = fds[0];
    std::string seen;
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      char buf[512];
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) break;  // exited
      seen.append(buf, static_cast<size_t>(n));
      const auto at = seen.find("listening on http://");
      if (at == std::string::npos) continue;
      const auto colon = seen.find(':', at + 20);
      if (colon == std::string::npos || seen.find('\n', colon) == std::string::npos) continue;
      port_ = std::atoi(seen.c_str() + colon + 1);
      return "";
    }
    return "grag serve never said where it listens; stdout: " + seen + "\nstderr: " + Log();
  }

  // SIGTERM and the exit code (128 + signal when killed by one; -1 when still running after
  // `timeout`, then killed).
  int Stop(std::chrono::seconds timeout) {
    ::kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + timeout;
    int status = 0;
    while (Clock::now() < deadline) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;  // the destructor kills it
  }

  int port() const { return port_; }
  std::string Log() const {
    std::ifstream in(stderr_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int port_ = 0;
  std::string stderr_path_;
};

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
  auto init = RunCommand(grag + " init " + ShellQuote(root));
  ASSERT_EQ(init.exit_code, 0) << init.err;
  std::filesystem::copy_file(
      std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
      root + "/input/christmas_carol.txt");
  auto index = RunCommand(grag + " --root " + ShellQuote(root) + " --no-llm index --no-progress");
  ASSERT_EQ(index.exit_code, 0) << index.err;

  Serve serve;
  const std::string started = serve.Start({GRAG_BINARY, "--root", root, "--no-llm", "--set",
                                           "server.api_keys=" + kKey, "serve", "--port", "0"},
                                          dir / "serve.stderr");
  ASSERT_EQ(started, "");
  ASSERT_GT(serve.port(), 0);

  const std::string base_url = "http://127.0.0.1:" + std::to_string(serve.port()) + "/v1";
  auto run = RunCommand("NODE_PATH=" + ShellQuote(NodeModules()) + " node " +
                        ShellQuote(std::string(GRAG_SOURCE_DIR) + "/tests/tools/openai_client.js") +
                        " " + ShellQuote(base_url) + " " + ShellQuote(kKey) + " wrong-key " +
                        ShellQuote("Who is Marley?"));
  ASSERT_EQ(run.exit_code, 0) << "stdout: " << run.out << "\nstderr: " << run.err
                              << "\nserver: " << serve.Log();
  nlohmann::json out;
  ASSERT_NO_THROW(out = nlohmann::json::parse(run.out)) << run.out;
  std::cout << "[ openai npm " << out.value("openai", std::string("?")) << " ]\n";

  // models.list(): the five models, one per query method.
  std::set<std::string> models;
  for (const auto& m : out["models"]) models.insert(m.get<std::string>());
  EXPECT_EQ(models, (std::set<std::string>{"grag-auto", "grag-global", "grag-local", "grag-hybrid",
                                           "grag-basic"}));

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
  EXPECT_EQ(serve.Stop(std::chrono::seconds(60)), 0) << serve.Log();
}

}  // namespace
}  // namespace grag
