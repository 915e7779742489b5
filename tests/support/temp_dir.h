// A temporary folder removed with everything in it when the object dies.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <iterator>
#include <string>
#include <string_view>

namespace grag::testing {

// A file's whole content ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  // Through a stringstream: GCC 12 at -O3 sees a null streambuf in istreambuf_iterator
  // construction (-Wnull-dereference, a false positive).
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "grag-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string operator/(std::string_view rel) const { return (path_ / rel).string(); }
  std::string File(std::string_view rel) const { return *this / rel; }

  // Writes `content` to `rel` (creating parent folders) and returns the full path.
  std::string Write(std::string_view rel, std::string_view content) const {
    const auto p = path_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary)
        .write(content.data(), static_cast<std::streamsize>(content.size()));
    return p.string();
  }

 private:
  std::filesystem::path path_;
};

}  // namespace grag::testing
