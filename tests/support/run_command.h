// Runs a command line through /bin/sh and captures its stdout, stderr and exit code.
#pragma once

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

}  // namespace grag::testing
