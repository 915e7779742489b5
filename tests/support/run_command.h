// Runs a command line through /bin/sh and captures its stdout, stderr and exit code.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>

namespace grag::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// `command` is passed to /bin/sh -c; stdin is /dev/null unless `command` redirects it.
CommandResult RunCommand(const std::string& command);

// Quotes `s` for /bin/sh.
std::string ShellQuote(const std::string& s);

// Starts `command` in a child process without waiting (exec'd by /bin/sh, so the pid is the
// command's own: a signal sent to it reaches the program). Collect it with WaitForExit.
pid_t SpawnCommand(const std::string& command);

// The exit code of a child SpawnCommand started (128 + the signal when one killed it); -1 when
// it did not exit within `timeout`, after which it is killed.
int WaitForExit(pid_t pid, std::chrono::milliseconds timeout);

}  // namespace grag::testing
