// grag cache prune: remove reply cache entries the index no longer needs, and give the room back.
#include <unistd.h>

#include <chrono>

#include "cli.h"
#include "progress.h"
#include "grag/engine.h"
#include "grag/engine_json.h"

namespace grag::cli {

Command AddCacheCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "cache", "The LLM reply cache kept in the index (compressed; `grag stats` shows its size)");
  cmd->require_subcommand(1);
  auto* prune = cmd->add_subcommand(
      "prune",
      "Remove the reply cache entries written before the last complete index run began (what "
      "they answered is in the index, or is no longer asked), or older than --older-than; then "
      "give the room back (VACUUM: the index file shrinks)");
  struct Opts {
    std::string older_than;
    bool dry_run = false;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  prune->add_option("--older-than", o->older_than,
                    "Remove the entries older than this instead: a count and a unit, m h d w "
                    "(30d)");
  prune->add_flag("--dry-run", o->dry_run, "Count what would be removed; change nothing");
  prune->add_flag("--json", o->json, "Print as JSON");
  return {cmd, [o, &g]() {
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            CachePruneOptions options;
            options.dry_run = o->dry_run;
            if (!o->older_than.empty()) {
              auto cut = CacheCutoff(o->older_than, std::chrono::system_clock::now());
              if (!cut.ok()) return Fail(cut.status());
              options.before = *cut;
            }
            {
              // A missing index is an error here, not one to create.
              auto reader = Engine::Open(*config);
              if (!reader.ok()) return Fail(reader.status());
            }
            EngineOptions engine_options;
            engine_options.writable = true;
            engine_options.lock_holder = "grag cache prune";
            auto engine = Engine::Open(*config, engine_options);
            if (!engine.ok()) return Fail(engine.status());
            auto r = (*engine)->PruneCache(options);
            if (!r.ok()) return Fail(r.status());
            if (o->json) {
              std::cout << CachePruneJson(*r, isatty(STDOUT_FILENO) != 0) << "\n";
              return kExitOk;
            }
            if (r->before.empty()) {
              std::cout << "no complete index run yet: nothing to prune (--older-than "
                           "removes entries by age)\n";
              return kExitOk;
            }
            std::cout << (o->dry_run ? "would remove " : "removed ") << r->entries
                      << " reply cache entries written before " << r->before << " ("
                      << FormatCount(r->value_bytes) << " bytes of values); " << r->entries_left
                      << " kept\n";
            if (!o->dry_run) {
              std::cout << "index file " << FormatCount(r->file_bytes_before) << " -> "
                        << FormatCount(r->file_bytes_after) << " bytes ("
                        << FormatCount(r->file_bytes_before - r->file_bytes_after) << " freed)\n";
            }
            return kExitOk;
          }};
}

}  // namespace grag::cli
