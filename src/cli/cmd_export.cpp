// grag export: the index as GraphML, Microsoft GraphRAG-style CSV / JSON tables, or Neo4j
// import files.
#include <unistd.h>

#include "cli.h"
#include "grag/engine.h"
#include "grag/engine_json.h"
#include "grag/export.h"

namespace grag::cli {

Command AddExportCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "export",
      "Write the index for other tools: graphml (Gephi, networkx), csv / json (Microsoft "
      "GraphRAG's output tables and column names), neo4j (neo4j-admin import CSV + LOAD CSV "
      "script)");
  struct Opts {
    std::string format;
    std::string out;
    bool force = false;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-f,--format", o->format, "graphml | csv | json | neo4j")->required();
  cmd->add_option("-o,--out", o->out, "Folder to write into (created when missing)")->required();
  cmd->add_flag("--force", o->force, "Overwrite files of the same names in --out");
  cmd->add_flag("--json", o->json, "Print what was written as JSON");
  return {cmd, [o, &g]() {
            auto format = ParseExportFormat(o->format);
            if (!format.ok()) return Fail(format.status());
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            auto engine = Engine::Open(*config);
            if (!engine.ok()) return Fail(engine.status());
            ExportOptions options;
            options.format = *format;
            options.out_dir = o->out;
            options.force = o->force;
            auto summary = (*engine)->Export(options);
            if (!summary.ok()) {
              const int code = Fail(summary.status());
              // Refusing to overwrite is a usage matter: --force or another folder.
              return summary.status().code() == ErrorCode::kAlreadyExists ? kExitUsage : code;
            }
            if (o->json) {
              std::cout << ExportSummaryJson(*summary, isatty(STDOUT_FILENO) != 0) << "\n";
              return kExitOk;
            }
            std::cout << "exported " << ExportFormatName(summary->format) << " to "
                      << summary->out_dir << ":\n";
            for (const auto& f : summary->files) {
              std::cout << "  " << f.path;
              bool first = true;
              for (const auto& [what, n] : f.counts) {
                std::cout << (first ? "\t" : ", ") << n << " " << what;
                first = false;
              }
              std::cout << "\n";
            }
            return kExitOk;
          }};
}

}  // namespace grag::cli
