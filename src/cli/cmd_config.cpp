// grag config: the settings in force, where each can be set, and what it does.
#include <unistd.h>

#include "cli.h"
#include "grag/engine_json.h"

namespace grag::cli {

Command AddConfigCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "config", "Show every setting's value in force (defaults < grag.toml < environment < --set)");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print as JSON");
  auto reference = std::make_shared<bool>(false);
  cmd->add_flag("--reference", *reference,
                "Print every setting with its built-in default, environment variable and help "
                "as Markdown (the generated part of docs/configuration.md), and stop");
  return {cmd, [json, reference, &g]() {
            if (*reference) {
              std::cout << RenderSettingsReference();
              return kExitOk;
            }
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            auto settings = ListSettings(*config);
            for (auto& s : settings) {
              // Keys are not for the terminal (api_key, server.api_keys, workspace_keys).
              const bool secret = s.key.ends_with("api_key") || s.key.ends_with("_keys");
              if (secret && s.value_text != "\"\"" && s.value_text != "[]") {
                s.value_text = s.value_text.starts_with("[") ? "[\"***\"]" : "\"***\"";
              }
            }
            if (*json) {
              std::cout << SettingsJson(settings, isatty(STDOUT_FILENO) != 0) << "\n";
              return kExitOk;
            }
            for (const auto& s : settings) {
              std::cout << s.key << " = " << s.value_text;
              if (!s.env.empty()) std::cout << "    # env " << s.env;
              std::cout << "\n";
            }
            return kExitOk;
          }};
}

}  // namespace grag::cli
