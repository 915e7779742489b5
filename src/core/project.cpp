#include "grag/project.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "grag/config.h"
#include "grag/prompts.h"

namespace grag {
namespace fs = std::filesystem;

Result<InitResult> InitProject(const std::string& dir, bool force) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir + ": " + ec.message());
  for (const char* sub : {"prompts", "input"}) {
    fs::create_directories(fs::path(dir) / sub, ec);
    if (ec)
      return Status::IoError("cannot create " + (fs::path(dir) / sub).string() + ": " +
                             ec.message());
  }
  InitResult result;
  auto write = [&](const fs::path& path, std::string_view content) -> Status {
    if (!force && fs::exists(path, ec)) {
      result.kept.push_back(path.string());
      return Status::Ok();
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) return Status::IoError("cannot write " + path.string());
    result.written.push_back(path.string());
    return Status::Ok();
  };
  GRAG_RETURN_IF_ERROR(write(fs::path(dir) / "grag.toml", RenderConfigFile(Config{})));
  for (const auto& p : AllPrompts()) {
    GRAG_RETURN_IF_ERROR(write(fs::path(dir) / "prompts" / p.file_name, p.default_text));
  }
  return result;
}

}  // namespace grag

namespace grag {
namespace {
namespace fs = std::filesystem;

fs::path WorkspacesRoot(const Config& base) {
  return fs::path(base.Resolve(base.server.workspaces_dir));
}

// A workspace on PostgreSQL names a database of its own: the writer lock and the tables are a
// database's.
Status CheckOwnDatabase(const Config& base, const Config& workspace, std::string_view name) {
  if (base.store.url.empty() || workspace.store.url != base.store.url) return Status::Ok();
  return Status::InvalidArgument("workspace \"" + std::string(name) +
                                 "\" would share the server's PostgreSQL database: give it one "
                                 "of its own (store.url in its grag.toml)");
}

}  // namespace

Status ValidateWorkspaceName(std::string_view name, bool allow_default) {
  auto ok_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  };
  const bool well_formed = !name.empty() && name.size() <= 64 && name[0] != '-' && name[0] != '_' &&
                           std::all_of(name.begin(), name.end(), ok_char);
  if (!well_formed) {
    return Status::InvalidArgument(
        "a workspace name is 1 to 64 lower-case letters, digits, '-' and '_', starting with a "
        "letter or digit, not \"" +
        std::string(name) + "\"");
  }
  if (name == kDefaultWorkspace && !allow_default) {
    return Status::InvalidArgument("\"default\" is the server's own project, not a workspace");
  }
  return Status::Ok();
}

std::string WorkspaceDir(const Config& base, std::string_view name) {
  return (WorkspacesRoot(base) / std::string(name)).string();
}

Result<std::vector<std::string>> ListWorkspaces(const Config& base) {
  std::vector<std::string> names;
  std::error_code ec;
  const fs::path root = WorkspacesRoot(base);
  if (!fs::exists(root, ec)) return names;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(ec) && ValidateWorkspaceName(name).ok()) names.push_back(name);
  }
  if (ec) return Status::IoError("cannot list " + root.string() + ": " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

Result<Config> LoadWorkspaceConfig(const Config& base, std::string_view name) {
  if (name == kDefaultWorkspace) return base;
  GRAG_RETURN_IF_ERROR(ValidateWorkspaceName(name));
  const fs::path dir = WorkspaceDir(base, name);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::NotFound("no workspace \"" + std::string(name) + "\"");
  }
  Config config = base;
  config.root = dir.string();
  // Paths the server's project resolved against its own root: a workspace's own files are
  // its folder's (input/, output/), its prompts its own only when it has them.
  config.prompts_dir = fs::absolute(base.Resolve(base.prompts_dir), ec).string();
  if (fs::is_directory(dir / "prompts", ec)) config.prompts_dir = "prompts";
  const fs::path file = dir / "grag.toml";
  if (fs::exists(file, ec)) GRAG_RETURN_IF_ERROR(ApplyConfigFile(config, file.string()));
  config.server = base.server;
  // The project's replica is its database's, not the one the workspace names.
  if (config.store.url != base.store.url && config.store.read_url == base.store.read_url) {
    config.store.read_url.clear();
  }
  GRAG_RETURN_IF_ERROR(CheckOwnDatabase(base, config, name));
  GRAG_RETURN_IF_ERROR(ValidateConfig(config).WithContext(file.string()));
  return config;
}

Result<std::string> CreateWorkspace(const Config& base, std::string_view name,
                                    const std::map<std::string, std::string>& settings) {
  GRAG_RETURN_IF_ERROR(ValidateWorkspaceName(name));
  const fs::path dir = WorkspaceDir(base, name);
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    return Status::AlreadyExists("workspace \"" + std::string(name) + "\" exists");
  }
  // The settings checked before anything is written.
  Config check = base;
  for (const auto& [key, value] : settings) {
    if (key.starts_with("server.")) {
      return Status::InvalidArgument("a workspace cannot set " + key +
                                     ": the server's settings are the server's");
    }
    GRAG_RETURN_IF_ERROR(ApplySetting(check, key, value));
  }
  GRAG_RETURN_IF_ERROR(ValidateConfig(check));
  GRAG_RETURN_IF_ERROR(CheckOwnDatabase(base, check, name));
  std::string text =
      "# Workspace " + std::string(name) +
      ": what this file sets overrides the server project's grag.toml; the rest is inherited.\n";
  // Top-level keys first: after a [section] header they would be the section's.
  std::string section;
  for (const bool top : {true, false}) {
    for (const SettingInfo& s : ListSettings(check)) {
      const size_t dot = s.key.rfind('.');
      if (!settings.contains(s.key) || top != (dot == std::string::npos)) continue;
      if (!top && s.key.substr(0, dot) != section) {
        section = s.key.substr(0, dot);
        text += "\n[" + section + "]\n";
      }
      text += s.key.substr(top ? 0 : dot + 1) + " = " + s.value_text + "\n";
    }
  }
  fs::create_directories(dir / "input", ec);
  if (ec) return Status::IoError("cannot create " + (dir / "input").string() + ": " + ec.message());
  std::ofstream out(dir / "grag.toml", std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    fs::remove_all(dir, ec);
    return Status::IoError("cannot write " + (dir / "grag.toml").string());
  }
  return dir.string();
}

Result<std::vector<WorkspaceInfo>> DescribeWorkspaces(const Config& base) {
  GRAG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListWorkspaces(base));
  std::vector<WorkspaceInfo> out;
  for (const std::string& name : names) {
    WorkspaceInfo info;
    info.name = name;
    info.dir = WorkspaceDir(base, name);
    auto config = LoadWorkspaceConfig(base, name);
    if (config.ok()) {
      info.index = config->IndexLabel();
      std::error_code ec;
      info.indexed =
          !config->store.url.empty() || fs::exists(config->Resolve(config->store.path), ec);
    } else {
      info.status = config.status();
    }
    out.push_back(std::move(info));
  }
  return out;
}

Status DeleteWorkspace(const Config& base, std::string_view name) {
  GRAG_RETURN_IF_ERROR(ValidateWorkspaceName(name));
  const fs::path dir = WorkspaceDir(base, name);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::NotFound("no workspace \"" + std::string(name) + "\"");
  }
  fs::remove_all(dir, ec);
  if (ec) return Status::IoError("cannot delete " + dir.string() + ": " + ec.message());
  return Status::Ok();
}

}  // namespace grag
