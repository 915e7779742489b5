#include "grag/project.h"

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
