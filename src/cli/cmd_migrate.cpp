// grag migrate: copy the index to another store (SQLite file or PostgreSQL database), verified.
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "grag/config.h"
#include "grag/location.h"
#include "grag/engine.h"
#include "progress.h"

namespace grag::cli {

namespace {

std::string Quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

Command AddMigrateCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "migrate",
      "Copy the project's index to another store: an SQLite file or a PostgreSQL database "
      "(postgresql://...), either way. Everything comes across with its ids: documents, chunks, "
      "extractions, the graph, communities, reports, embeddings, the LLM reply cache, runs and "
      "resolution decisions, so queries give the same answers and `grag index` on unchanged "
      "input makes no LLM call. The target must be empty (a new file, or a database without an "
      "index); it is written in one transaction that commits only when every table's row count "
      "and checksum, read back, equal the source's, so a failed copy leaves it as it was. The "
      "source is read in one snapshot and not changed.");
  struct Opts {
    std::string to;
    std::string from;
    bool json = false;
    bool no_progress = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--to", o->to,
                  "Where to copy the index: an SQLite file path (created; relative to the project "
                  "folder) or a PostgreSQL URL (the database must exist and hold no index)")
      ->required();
  cmd->add_option("--from", o->from,
                  "The index to copy (default: the project's, store.url or store.path)");
  cmd->add_flag("--json", o->json, "Print the per-table summary as JSON");
  cmd->add_flag("--no-progress", o->no_progress, "No progress lines on stderr");
  cmd->footer(
      "Afterwards the project still uses its old index. To switch it to the copy, set in "
      "grag.toml\n"
      "  [store]\n"
      "  url = \"postgresql://user@host/db\"   # a PostgreSQL target (or GRAG_STORE_URL)\n"
      "or, for an SQLite target, path = \"output/index.db\" and url = \"\" (or GRAG_INDEX_PATH).\n"
      "Examples:\n"
      "  grag migrate --to postgresql://grag@db.example/grag\n"
      "  grag migrate --from postgresql://grag@db.example/grag --to output/index-copy.db");
  return {cmd, [o, &g]() {
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            // Relative file paths are the project's, as store.path is.
            auto resolve = [&](const std::string& l) {
              return IsPostgresUrl(l) ? l : config->Resolve(l);
            };
            const std::string from = o->from.empty() ? config->IndexLocation() : resolve(o->from);
            const std::string to = resolve(o->to);
            const bool progress = !o->no_progress && !g.quiet;
            const bool tty = isatty(STDERR_FILENO) != 0;
            CopyOptions options;
            options.on_progress = [&](std::string_view table, int64_t done, int64_t total) {
              if (!progress || total < 10000) return Status::Ok();
              // Big tables only: a line per batch on a terminal (rewritten), else at the end.
              if (tty) {
                std::cerr << "\r\033[Kcopying " << table << " " << done << "/" << total
                          << (done >= total ? "\n" : "") << std::flush;
              } else if (done >= total) {
                std::cerr << "copied " << table << ": " << total << " rows\n";
              }
              return Status::Ok();
            };
            if (progress) std::cerr << "copying the index ...\n";
            auto report = MigrateIndex(from, to, options);
            if (!report.ok()) return Fail(report.status());
            if (o->json) {
              nlohmann::json j;
              j["source"] = report->source;
              j["target"] = report->target;
              j["rows"] = report->rows;
              j["seconds"] = report->seconds;
              j["tables"] = nlohmann::json::array();
              for (const TableCopy& t : report->tables) {
                j["tables"].push_back({{"table", t.table},
                                       {"source_rows", t.source_rows},
                                       {"target_rows", t.target_rows},
                                       {"source_checksum", t.source_checksum},
                                       {"target_checksum", t.target_checksum},
                                       {"match", t.matches()}});
              }
              std::cout << j.dump(isatty(STDOUT_FILENO) != 0 ? 2 : -1) << "\n";
              return kExitOk;
            }
            std::printf("%-22s %10s  %-16s %s\n", "table", "rows", "checksum", "match");
            for (const TableCopy& t : report->tables) {
              std::printf("%-22s %10lld  %-16s %s\n", t.table.c_str(),
                          static_cast<long long>(t.target_rows),
                          t.target_checksum.substr(0, 16).c_str(), t.matches() ? "ok" : "DIFFERS");
            }
            std::cout << "copied " << report->rows << " rows from " << report->source << " to "
                      << report->target << " in " << FormatDuration(report->seconds)
                      << "; every table's count and checksum match\n";
            std::cout << "to use the copy, set "
                      << (IsPostgresUrl(to)
                              ? "store.url = " + Quoted(report->target) +
                                    " (or GRAG_STORE_URL; add the password if it has one)"
                              : "store.path = " + Quoted(to) + " and store.url = \"\"")
                      << " in grag.toml\n";
            return kExitOk;
          }};
}

}  // namespace grag::cli
