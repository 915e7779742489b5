// grag init [DIR]: a new project folder with a commented config and the editable prompts.
#include <unistd.h>

#include "cli.h"
#include "grag/engine_json.h"
#include "grag/project.h"

namespace grag::cli {

Command AddInitCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "init",
      "Create a project: grag.toml (every setting, commented), prompts/ (the fifteen prompts, "
      "editable) and input/");
  struct Opts {
    std::string dir;
    bool force = false;
    bool json = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("DIR", o->dir, "Project folder (default: --root, i.e. the current folder)");
  cmd->add_flag("--force", o->force, "Overwrite existing files");
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  return {cmd, [o, &g]() {
            const std::string dir = o->dir.empty() ? g.root : o->dir;
            auto r = InitProject(dir, o->force);
            if (!r.ok()) return Fail(r.status());
            if (o->json) {
              std::cout << InitJson(*r, dir, isatty(STDOUT_FILENO) != 0) << "\n";
              return kExitOk;
            }
            for (const auto& f : r->written) std::cout << "wrote " << f << "\n";
            for (const auto& f : r->kept)
              std::cout << "kept  " << f << " (exists; --force overwrites)\n";
            std::cout << "\nNext: put documents in " << dir
                      << "/input, set llm.base_url and llm.model in grag.toml (or leave them "
                         "empty for the offline mode), then run `grag index`.\n";
            return kExitOk;
          }};
}

}  // namespace grag::cli
