#include "support/server_process.h"

#include "support/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace grag::testing {

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (!stderr_path_.empty()) {
    std::error_code ec;
    std::filesystem::remove(stderr_path_, ec);
  }
}

bool ServerProcess::Start(const std::string& command, std::chrono::seconds timeout) {
  char tmpl[] = "/tmp/grag-server-stderr-XXXXXX";
  const int err_fd = ::mkstemp(tmpl);
  if (err_fd < 0) return false;
  stderr_path_ = tmpl;
  int out[2];
  if (::pipe(out) != 0) return false;
  pid_ = ::fork();
  if (pid_ < 0) return false;
  if (pid_ == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    ::close(err_fd);
    const std::string line = "exec env " + command;  // env: leading VAR=value words work too
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err_fd);
  out_fd_ = out[0];
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string marker = "listening on http://";
  bool found = false;
  while (!found && std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buf[512];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;  // exited
    stdout_seen_.append(buf, static_cast<size_t>(n));
    const auto at = stdout_seen_.find(marker);
    if (at == std::string::npos) continue;
    const auto eol = stdout_seen_.find('\n', at);
    if (eol == std::string::npos) continue;
    const std::string addr = stdout_seen_.substr(at + marker.size(), eol - at - marker.size());
    const auto colon = addr.rfind(':');
    if (colon != std::string::npos) port_ = std::atoi(addr.c_str() + colon + 1);
    found = port_ > 0;
  }
  // Later output is not read; the pipe's end stays open so the server never gets SIGPIPE.
  // (It writes one line at start-up only.)
  return found;
}

int ServerProcess::Stop(int signal, std::chrono::seconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, signal);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return -1;
}

std::string ServerProcess::log() const {
  std::ifstream f(stderr_path_);
  std::stringstream ss;
  ss << f.rdbuf();
  return "stdout: " + stdout_seen_ + "\nstderr: " + ss.str();
}

std::string MakeNoLlmProject(const std::string& grag, const std::string& root,
                             const std::string& document) {
  auto init = RunCommand(grag + " init " + ShellQuote(root));
  if (init.exit_code != 0) return "grag init: " + init.err;
  std::error_code ec;
  std::filesystem::copy_file(
      document, root + "/input/" + std::filesystem::path(document).filename().string(), ec);
  if (ec) return "copying " + document + ": " + ec.message();
  auto index = RunCommand(grag + " --root " + ShellQuote(root) + " --no-llm index --no-progress");
  if (index.exit_code != 0) return "grag index: " + index.err;
  return "";
}

}  // namespace grag::testing
