// grag check: is the index sound? Integrity, foreign keys, full-text index, grag's invariants.
#include "cli/cli.h"
#include "grag/store.h"

namespace grag::cli {

Command AddCheckCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "check",
      "Check the index for damage: SQLite's full integrity check, foreign keys, the full-text "
      "index against the chunks, and grag's own invariants (vectors of deleted owners, entities "
      "no chunk mentions, the community hierarchy). Reads only. Exits 1 when something is wrong.");
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
            const std::string db = config->Resolve(config->store.path);
            StoreOptions so;
            so.create_if_missing = false;
            so.allow_read_only = true;  // read-only media: every check but the FTS one
            so.verify = false;  // the full check below is the point
            auto store = Store::Open(db, so);
            IntegrityReport report;
            if (!store.ok()) {
              if (store.status().code() != ErrorCode::kCorruption) return Fail(store.status());
              report.checks_run.push_back("open");
              report.problems.push_back({"open", store.status().message()});
            } else {
              auto r = (*store)->Check(o->max);
              if (!r.ok()) return Fail(r.status());
              report = std::move(r).value();
            }
            if (o->json) {
              nlohmann::json problems = nlohmann::json::array();
              for (const auto& p : report.problems) {
                problems.push_back({{"check", p.check}, {"detail", p.detail}});
              }
              PrintJson({{"index", db},
                         {"ok", report.ok()},
                         {"checks", report.checks_run},
                         {"notes", report.notes},
                         {"problems", problems}});
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
