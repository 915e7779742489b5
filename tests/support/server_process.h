// `grag serve` (or any command printing "listening on http://HOST:PORT") run as a child process
// for black-box tests: started through the shell (so environment variables can be set), its port
// read from its first lines of stdout, stopped with a signal and its exit code returned.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

namespace grag::testing {

class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess();  // SIGKILL if still running
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Runs `command` (a shell command line; it is exec'd so signals reach the program) and waits
  // up to `timeout` for "listening on http://HOST:PORT" on its stdout. False when it exited or
  // never said so; `log()` then tells why.
  bool Start(const std::string& command, std::chrono::seconds timeout = std::chrono::seconds(60));
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends `signal` and waits up to `timeout` for the exit; the exit code (128 + signal when
  // killed by one, -1 when it did not exit in time and had to be killed).
  int Stop(int signal, std::chrono::seconds timeout = std::chrono::seconds(30));
  // What the process wrote on stderr so far (and on stdout before the port line).
  std::string log() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int out_fd_ = -1;  // the read end of its stdout
  std::string stdout_seen_;
  std::string stderr_path_;
};

// A project at `root` (made with `grag init`) holding a copy of the file `document`, indexed in
// the no-LLM mode: what the server's black-box tests serve. `grag` is the shell-quoted binary.
// Empty on success, else what failed (the command's stderr).
std::string MakeNoLlmProject(const std::string& grag, const std::string& root,
                             const std::string& document);

}  // namespace grag::testing
