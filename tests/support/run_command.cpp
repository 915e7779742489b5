#include "support/run_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace grag::testing {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

CommandResult RunCommand(const std::string& command) {
  char out_tmpl[] = "/tmp/grag-cmd-out-XXXXXX";
  char err_tmpl[] = "/tmp/grag-cmd-err-XXXXXX";
  const int out_fd = mkstemp(out_tmpl);
  const int err_fd = mkstemp(err_tmpl);
  close(out_fd);
  close(err_fd);
  // A group, so redirections inside `command` (a question file on stdin) win over these.
  const std::string full = "{ " + command + "\n} </dev/null >" + out_tmpl + " 2>" + err_tmpl;
  const int raw = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  r.out = Slurp(out_tmpl);
  r.err = Slurp(err_tmpl);
  std::filesystem::remove(out_tmpl);
  std::filesystem::remove(err_tmpl);
  return r;
}

pid_t SpawnCommand(const std::string& command) {
  const std::string line = "exec " + command;  // built before fork: the child only execs
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

int WaitForExit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

}  // namespace grag::testing
