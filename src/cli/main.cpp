// grag: the command-line shell over the grag library.
#include <unistd.h>

#include "cli.h"
#include "grag/project.h"
#include "grag/log.h"

namespace grag::cli {

Result<std::pair<std::string, std::string>> SplitSetting(const std::string& kv,
                                                         const std::string& flag) {
  const auto eq = kv.find('=');
  if (eq == std::string::npos) {
    return Status::InvalidArgument(flag + " expects key=value, got \"" + kv + "\"");
  }
  return std::make_pair(kv.substr(0, eq), kv.substr(eq + 1));
}

Result<Config> LoadProjectConfig(const GlobalOptions& g) {
  GRAG_ASSIGN_OR_RETURN(Config config, LoadConfig(g.root, g.config_file));
  auto apply_sets = [&g](Config& c) -> Status {
    for (const auto& kv : g.sets) {
      GRAG_ASSIGN_OR_RETURN(auto setting, SplitSetting(kv, "--set"));
      GRAG_RETURN_IF_ERROR(ApplySetting(c, setting.first, setting.second));
    }
    return Status::Ok();
  };
  GRAG_RETURN_IF_ERROR(apply_sets(config));
  if (!g.workspace.empty()) {
    GRAG_ASSIGN_OR_RETURN(config, LoadWorkspaceConfig(config, g.workspace));
    GRAG_RETURN_IF_ERROR(apply_sets(config));
  }
  // No endpoint at all: the built-in extractor, embedder, reports and answers.
  if (g.no_llm) DisableModels(config);
  GRAG_RETURN_IF_ERROR(ValidateConfig(config).WithContext("--set"));
  std::string level = g.log_level.empty() ? config.log_level : g.log_level;
  if (g.verbose) level = "debug";
  if (g.quiet) level = "warn";
  GRAG_ASSIGN_OR_RETURN(LogLevel parsed, ParseLogLevel(level));
  SetLogLevel(parsed);
  return config;
}

int Fail(const Status& status) {
  std::cerr << "error: " << status.message() << "\n";
  switch (status.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
      return kExitUsage;
    default:
      return kExitFailure;
  }
}

}  // namespace grag::cli

int main(int argc, char** argv) {
  using namespace grag::cli;
  CLI::App app{
      "grag: a GraphRAG engine. Index documents into an entity graph with community reports,\n"
      "then answer global and local questions from it. Run `grag COMMAND --help` for details."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "grag " GRAG_VERSION);
  GlobalOptions g;
  g.argv = argv;
  app.add_option("--root", g.root, "Project folder (holds grag.toml, input/, output/)")
      ->default_str(".")
      ->envname("GRAG_ROOT");
  app.add_option("--config", g.config_file, "Config file (default: <root>/grag.toml if present)");
  app.add_option("--set", g.sets, "Override a setting: --set llm.model=gpt-4o-mini (repeatable)");
  app.add_option("--log-level", g.log_level, "trace | debug | info | warn | error | off");
  app.add_flag("-v,--verbose", g.verbose, "Debug logging on stderr");
  app.add_flag("-q,--quiet", g.quiet, "Only warnings and errors on stderr");
  app.add_option("-w,--workspace", g.workspace,
                 "Work on workspace NAME of the project (grag workspace list) instead of the "
                 "project itself");
  app.add_flag("--no-llm", g.no_llm,
               "Use no model endpoint even if one is configured: built-in NLP extraction, "
               "lexical embeddings, extractive reports and answers (the default when no LLM is "
               "configured)");
  app.footer(
      "Exit codes: 0 success; 1 the work failed (I/O, index or model error); 2 bad usage,\n"
      "configuration or input path. Logs go to stderr, results to stdout.");

  std::vector<Command> commands = {
      AddInitCommand(app, g),     AddConfigCommand(app, g),    AddChunkCommand(app, g),
      AddIndexCommand(app, g),    AddAddCommand(app, g),       AddRemoveCommand(app, g),
      AddStatsCommand(app, g),    AddCacheCommand(app, g),     AddQueryCommand(app, g),
      AddSearchCommand(app, g),   AddCheckCommand(app, g),     AddDoctorCommand(app, g),
      AddEntitiesCommand(app, g), AddExportCommand(app, g),    AddSqlCommand(app, g),
      AddMigrateCommand(app, g),  AddServeCommand(app, g),     AddMcpCommand(app, g),
      AddEvalCommand(app, g),     AddWorkspaceCommand(app, g),
  };
  // Last: they describe every command above.
  commands.push_back(AddCompletionCommand(app, g));
  commands.push_back(AddManPageCommand(app, g));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  for (const auto& c : commands) {
    if (c.app->parsed()) {
      try {
        return c.run();
      } catch (const std::exception& e) {
        std::cerr << "error: internal: " << e.what() << "\n";
        return kExitFailure;
      }
    }
  }
  return kExitUsage;
}
