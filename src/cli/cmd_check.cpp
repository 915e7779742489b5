// grag check: is the index sound? Integrity, foreign keys, full-text index, grag's invariants.
#include <unistd.h>

#include "cli.h"
#include "grag/engine.h"
#include "grag/engine_json.h"

namespace grag::cli {

Command AddCheckCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "check",
      "Check the index for damage: SQLite's full integrity check, foreign keys, the full-text "
      "index against the chunks, and grag's own invariants (vectors of deleted owners, entities "
      "no chunk mentions, the community hierarchy, each query image against the tables it is "
      "made from). Reads only. Exits 1 when something is wrong.");
  struct Opts {
    bool json = false;
    int max = 20;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_flag("--json", o->json, "Print the checks and problems as JSON");
  cmd->add_option("--max", o->max, "Problems listed per check at most")
      ->default_val(20)
      ->check(CLI::Range(1, 100000));
  return {cmd, [o, &g]() {
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            const std::string db = config->IndexLabel();
            auto checked = CheckIndex(*config, o->max);
            if (!checked.ok()) return Fail(checked.status());
            const IntegrityReport& report = *checked;
            if (o->json) {
              std::cout << IntegrityJson(report, db, isatty(STDOUT_FILENO) != 0) << "\n";
            } else {
              for (const auto& c : report.checks_run) {
                int64_t n = 0;
                for (const auto& p : report.problems) n += p.check == c ? 1 : 0;
                std::cout << c << ": " << (n == 0 ? "ok" : std::to_string(n) + " problems") << "\n";
                for (const auto& p : report.problems) {
                  if (p.check == c) std::cout << "  " << p.detail << "\n";
                }
              }
              for (const auto& n : report.notes) std::cout << n << "\n";
              if (report.ok()) {
                std::cout << db << " is sound\n";
              } else {
                std::cerr << "error: the index " << db
                          << " is damaged: restore it from a backup, or delete it and run `grag "
                             "index` to rebuild it\n";
              }
            }
            return report.ok() ? kExitOk : kExitFailure;
          }};
}

}  // namespace grag::cli
