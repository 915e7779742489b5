// A grag project folder: grag.toml, prompts/, input/ and output/ (the index); and workspaces,
// several projects behind one `grag serve`.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "grag/config.h"
#include "grag/status.h"

namespace grag {

struct InitResult {
  std::vector<std::string> written;  // files created
  std::vector<std::string> kept;     // files that already existed and were left alone
};

// Creates `dir` (if needed) with a commented grag.toml, prompts/ holding seed 000's five
// prompts, and an empty input/ folder. Existing files are never overwritten unless `force`.
Result<InitResult> InitProject(const std::string& dir, bool force = false);

// ---------------------------------------------------------------- workspaces
//
// A workspace is a project folder <root>/<server.workspaces_dir>/NAME with its own input/,
// index (output/index.db) and, optionally, its own grag.toml and prompts/: the settings its
// grag.toml sets override the server project's, and the rest (models, keys, chunking, ...)
// are the server project's. The server project itself is the workspace "default".

inline constexpr std::string_view kDefaultWorkspace = "default";

// Lower-case letters, digits, '-' and '_', starting with a letter or digit, at most 64; not
// "default" unless `allow_default`.
Status ValidateWorkspaceName(std::string_view name, bool allow_default = false);

// The workspace's folder (whether or not it exists).
std::string WorkspaceDir(const Config& base, std::string_view name);

// The workspaces under `base`'s project, sorted; "default" not included.
Result<std::vector<std::string>> ListWorkspaces(const Config& base);

// The settings workspace `name` runs with: `base` with its folder as the root and its
// grag.toml applied over it; its prompts/ when it has one, else base's. The server settings
// ([server]) are always base's. "default" is base itself. kNotFound when it does not exist.
// On PostgreSQL (base.store.url set) a workspace names its own database in its grag.toml:
// the writer lock and the tables are a database's.
Result<Config> LoadWorkspaceConfig(const Config& base, std::string_view name);

// Creates workspace `name` (its folder, input/ and a grag.toml holding `settings`, which
// are checked as `grag config --set` checks them) and returns its folder. kAlreadyExists when
// it exists.
Result<std::string> CreateWorkspace(const Config& base, std::string_view name,
                                    const std::map<std::string, std::string>& settings = {});

struct WorkspaceInfo {
  std::string name;
  std::string dir;
  std::string index;     // where its index is (IndexLabel); empty when its settings are wrong
  bool indexed = false;  // a SQLite index file exists, or the index is on PostgreSQL
  Status status;         // what is wrong with its grag.toml, if anything
};

// ListWorkspaces, described.
Result<std::vector<WorkspaceInfo>> DescribeWorkspaces(const Config& base);

// Deletes workspace `name`'s folder: its documents, settings and SQLite index.
Status DeleteWorkspace(const Config& base, std::string_view name);

}  // namespace grag
