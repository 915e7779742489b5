// grag sql: one read-only SELECT over documented views of the index (docs/schema.md).
#include <unistd.h>

#include <chrono>
#include <cmath>

#include "cli.h"
#include "grag/engine.h"
#include "grag/engine_json.h"
#include "grag/export.h"

namespace grag::cli {

Command AddSqlCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "sql",
      "Run one read-only SELECT on views of the index: entities, relationships, "
      "entity_communities, communities, reports, chunks, documents (docs/schema.md). Writes "
      "are refused");
  struct Opts {
    std::string sql;
    bool csv = false;
    bool json = false;
    int64_t max_rows = 1000;
    double timeout = 30;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("SQL", o->sql,
                  "The statement, e.g. \"SELECT name, degree FROM entities "
                  "ORDER BY degree DESC LIMIT 10\"")
      ->required();
  cmd->add_flag("--csv", o->csv, "Print CSV (a header line, then the rows)");
  cmd->add_flag("--json", o->json, "Print a JSON array of objects, one per row");
  cmd->add_option("--max-rows", o->max_rows, "Read at most this many rows (0: no limit)")
      ->default_val(1000)
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--timeout", o->timeout,
                  "Stop the statement after this many seconds (0: no limit), so a runaway "
                  "query (a recursive CTE without an end) cannot run forever")
      ->default_val(30)
      ->check(CLI::NonNegativeNumber);
  return {cmd, [o, &g]() {
            if (o->csv && o->json) {
              return Fail(Status::InvalidArgument("--csv and --json: choose one"));
            }
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            auto engine = Engine::Open(*config);
            if (!engine.ok()) return Fail(engine.status());
            const auto limit = std::chrono::milliseconds(std::llround(o->timeout * 1000));
            auto rows = (*engine)->Sql(o->sql, o->max_rows == 0 ? -1 : o->max_rows, limit);
            if (!rows.ok()) return Fail(rows.status());
            if (o->json) {
              std::cout << SqlRowsJson(*rows, isatty(STDOUT_FILENO) != 0) << "\n";
            } else if (o->csv) {
              std::cout << FormatSqlCsv(*rows);
            } else {
              std::cout << FormatSqlTable(*rows);
            }
            if (rows->truncated && (o->json || o->csv)) {
              std::cerr << "note: only the first " << rows->rows.size()
                        << " rows were printed; raise --max-rows for more\n";
            }
            return kExitOk;
          }};
}

}  // namespace grag::cli
