// Shared plumbing of the grag command: global options, configuration, output and exit codes.
// Commands hold no domain logic: they parse flags, call the library and print.
#pragma once

#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "grag/config.h"
#include "grag/status.h"

namespace grag::cli {

// Exit codes (documented in the README and docs/commands.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the work failed: I/O, index, model errors
inline constexpr int kExitUsage = 2;    // bad flags, bad configuration, bad input path

struct GlobalOptions {
  std::string root = ".";
  std::string config_file;
  std::vector<std::string> sets;  // --set key=value
  std::string log_level;
  bool verbose = false;
  bool quiet = false;
  std::string workspace;  // --workspace: one of the project's workspaces instead of it
  bool no_llm = false;    // --no-llm: no model endpoint is used, whatever is configured
  char** argv = nullptr;  // the command line as given (`grag serve` hands it to grag-serve)
};

// Loads the configuration for the selected project: defaults < file < environment < --set;
// with --workspace, that workspace's grag.toml over it, then --set again.
Result<Config> LoadProjectConfig(const GlobalOptions& g);

// "key=value" (of --set, --setting) split at its first '='; kInvalidArgument naming `flag`.
Result<std::pair<std::string, std::string>> SplitSetting(const std::string& kv,
                                                         const std::string& flag);

// Prints "error: <message>" on stderr and returns the exit code for `status`.
int Fail(const Status& status);

// A request parameter's range (grag/engine.h's kTopKRange, ...) as text for a flag's help
// ("1 to 1000").
inline std::string RangeText(int64_t min, int64_t max) {
  return std::to_string(min) + " to " + std::to_string(max);
}

// Each command registers itself on the app and returns the function that runs it.
using Runner = std::function<int()>;
struct Command {
  CLI::App* app;
  Runner run;
};

Command AddInitCommand(CLI::App& app, GlobalOptions& g);
// Adds `completion` and the hidden `manpage`; AddManPageCommand after it returns the latter.
Command AddCompletionCommand(CLI::App& app, GlobalOptions& g);
Command AddManPageCommand(CLI::App& app, GlobalOptions& g);
Command AddConfigCommand(CLI::App& app, GlobalOptions& g);
Command AddChunkCommand(CLI::App& app, GlobalOptions& g);
Command AddIndexCommand(CLI::App& app, GlobalOptions& g);
Command AddAddCommand(CLI::App& app, GlobalOptions& g);
Command AddRemoveCommand(CLI::App& app, GlobalOptions& g);
Command AddStatsCommand(CLI::App& app, GlobalOptions& g);
Command AddCacheCommand(CLI::App& app, GlobalOptions& g);
Command AddQueryCommand(CLI::App& app, GlobalOptions& g);
Command AddCheckCommand(CLI::App& app, GlobalOptions& g);
Command AddDoctorCommand(CLI::App& app, GlobalOptions& g);
Command AddSearchCommand(CLI::App& app, GlobalOptions& g);
Command AddEvalCommand(CLI::App& app, GlobalOptions& g);
Command AddEntitiesCommand(CLI::App& app, GlobalOptions& g);
Command AddServeCommand(CLI::App& app, GlobalOptions& g);
Command AddMcpCommand(CLI::App& app, GlobalOptions& g);
Command AddExportCommand(CLI::App& app, GlobalOptions& g);
Command AddSqlCommand(CLI::App& app, GlobalOptions& g);
Command AddMigrateCommand(CLI::App& app, GlobalOptions& g);
Command AddWorkspaceCommand(CLI::App& app, GlobalOptions& g);

}  // namespace grag::cli
