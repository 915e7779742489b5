// The shared body of the commands that write the index: index, add, remove, entities merge/split.
#pragma once

#include <functional>
#include <string>

#include "cli.h"
#include "grag/engine.h"
#include "grag/index_types.h"

namespace grag::cli {

struct IndexFlags {
  bool json = false;
  bool no_progress = false;
  bool dry_run = false;
  bool wait = false;
  bool refresh_reports = false;
};

void AddIndexFlags(CLI::App* cmd, IndexFlags& f);

// Runs before the update, holding the writer lock: returns what to tell the user (stderr), an
// empty text to stop there with success, or an error.
using BeforeUpdate = std::function<Result<std::string>(Engine& engine)>;

// Runs (or plans) one update of the index, with the project's models, progress, Ctrl-C handling
// and summary; returns the exit code.
int RunUpdate(const GlobalOptions& g, const std::string& command, const IndexRequest& request,
              const IndexFlags& f, const BeforeUpdate& before = {});

}  // namespace grag::cli
