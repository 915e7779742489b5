// grag workspace create|list|delete: the workspaces of a project, several indexes that one
// `grag serve` answers from (/v1/workspaces/NAME/...). Any command works on one with -w NAME.
#include <unistd.h>

#include <map>

#include "cli.h"
#include "grag/engine_json.h"
#include "grag/project.h"

namespace grag::cli {

Command AddWorkspaceCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "workspace",
      "Workspaces: indexes of their own (documents, settings, prompts) under this project, "
      "served together by grag serve; any command works on one with --workspace NAME");
  cmd->require_subcommand(1);
  struct Opts {
    std::string name;
    std::vector<std::string> settings;
    bool json = false;
    bool yes = false;
  };
  auto o = std::make_shared<Opts>();
  auto* create = cmd->add_subcommand(
      "create",
      "Create workspace NAME: a folder under server.workspaces_dir with input/ and a "
      "grag.toml holding its own settings");
  create->add_option("NAME", o->name, "Lower-case letters, digits, - and _")->required();
  create->add_option("--setting", o->settings,
                     "A setting of its own, KEY=VALUE (repeatable); the rest are the project's");
  auto* list = cmd->add_subcommand("list", "The workspaces, with where their index is");
  list->add_flag("--json", o->json, "Print as JSON");
  auto* remove = cmd->add_subcommand(
      "delete", "Delete workspace NAME: its folder, documents, settings and index");
  remove->add_option("NAME", o->name, "The workspace")->required();
  remove->add_flag("--yes", o->yes, "Really delete it (nothing is kept)");
  return {cmd, [o, &g, create, list, remove]() {
            GlobalOptions project = g;
            project.workspace.clear();  // the workspaces of the project itself
            auto config = LoadProjectConfig(project);
            if (!config.ok()) return Fail(config.status());
            if (create->parsed()) {
              std::map<std::string, std::string> settings;
              for (const auto& kv : o->settings) {
                auto setting = SplitSetting(kv, "--setting");
                if (!setting.ok()) return Fail(setting.status());
                settings.insert(std::move(*setting));
              }
              auto dir = CreateWorkspace(*config, o->name, settings);
              if (!dir.ok()) return Fail(dir.status());
              std::cout << "created workspace " << o->name << " in " << *dir << "\n"
                        << "Next: put documents in " << *dir << "/input and run `grag -w "
                        << o->name << " index`; grag serve answers it at /v1/workspaces/" << o->name
                        << "/...\n";
              return kExitOk;
            }
            if (list->parsed()) {
              auto all = DescribeWorkspaces(*config);
              if (!all.ok()) return Fail(all.status());
              if (o->json) {
                std::cout << WorkspacesJson(*all, isatty(STDOUT_FILENO) != 0) << "\n";
                return kExitOk;
              }
              if (all->empty()) {
                std::cout << "no workspaces (grag workspace create NAME)\n";
                return kExitOk;
              }
              for (const WorkspaceInfo& w : *all) {
                std::cout << w.name << "  " << w.dir << "  ";
                if (!w.status.ok()) {
                  std::cout << "error: " << w.status.message() << "\n";
                } else {
                  std::cout << (w.indexed ? "indexed" : "not indexed yet") << "\n";
                }
              }
              return kExitOk;
            }
            if (remove->parsed()) {
              if (!o->yes) {
                return Fail(Status::InvalidArgument(
                    "this deletes workspace " + o->name + "'s folder (" +
                    WorkspaceDir(*config, o->name) +
                    "): its documents, settings and index; add --yes to do it"));
              }
              if (Status st = DeleteWorkspace(*config, o->name); !st.ok()) return Fail(st);
              std::cout << "deleted workspace " << o->name << "\n";
              return kExitOk;
            }
            return kExitUsage;
          }};
}

}  // namespace grag::cli
