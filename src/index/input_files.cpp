// Saving and removing documents a front end hands over (see grag/input_files.h).
#include "grag/input_files.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "grag/hash.h"
#include "grag/loader.h"

namespace grag {
namespace {

namespace fs = std::filesystem;

bool HasKnownExtension(std::string_view id) {
  const auto slash = id.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? id : id.substr(slash + 1);
  const auto dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  const std::string ext(name.substr(dot));
  for (const auto& known : LoadOptions{}.extensions) {
    if (ext == known) return true;
  }
  return false;
}

std::string WithExtension(std::string_view id) {
  std::string out(id);
  if (!HasKnownExtension(id)) out += ".txt";
  return out;
}

}  // namespace

Status CheckDocumentText(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return Status::InvalidArgument("the document is empty");
  }
  if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    return Status::InvalidArgument("the document is not UTF-8 text (invalid byte at offset " +
                                   std::to_string(bad) +
                                   "); grag reads .txt, .md, .json, .jsonl and .csv");
  }
  return Status::Ok();
}

Status ValidateDocumentId(std::string_view id) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("document id \"" + std::string(id) + "\" " + why);
  };
  if (id.empty()) return Status::InvalidArgument("document id must not be empty");
  if (id.size() > 1024) return bad("is longer than 1024 bytes");
  if (FindInvalidUtf8(id) != std::string_view::npos) return bad("is not valid UTF-8");
  for (unsigned char c : id) {
    if (c < 0x20 || c == 0x7f) return bad("holds a control character");
    if (c == '\\') return bad("holds a backslash (use '/' between folders)");
  }
  if (id.front() == '/') return bad("must be relative to the input folder (no leading '/')");
  size_t start = 0;
  while (start <= id.size()) {
    size_t end = id.find('/', start);
    if (end == std::string_view::npos) end = id.size();
    const std::string_view seg = id.substr(start, end - start);
    if (seg.empty()) return bad("has an empty path segment");
    if (seg == "." || seg == "..") return bad("may not hold \".\" or \"..\" segments");
    if (seg.front() == '.')
      return bad("has a hidden segment (\"" + std::string(seg) + "\"), which indexing skips");
    if (seg.size() > 255) return bad("has a segment longer than 255 bytes");
    start = end + 1;
  }
  return Status::Ok();
}

std::string DefaultDocumentId(std::string_view title, std::string_view text) {
  std::string name;
  for (unsigned char c : title) {
    if (c < 0x20 || c == 0x7f || c == '/' || c == '\\') {
      name += '_';
    } else {
      name += static_cast<char>(c);
    }
  }
  while (!name.empty() && (name.front() == '.' || name.front() == ' ')) name.erase(0, 1);
  while (!name.empty() && name.back() == ' ') name.pop_back();
  if (name.size() > 200 || FindInvalidUtf8(name) != std::string::npos) name.clear();
  if (name.empty()) name = "doc-" + Sha256Hex(text).substr(0, 12);
  return WithExtension(name);
}

Result<SavedInput> SaveInputDocument(const Config& config, std::string_view id,
                                     std::string_view content) {
  GRAG_RETURN_IF_ERROR(ValidateDocumentId(id));
  SavedInput out;
  out.id = WithExtension(id);
  GRAG_RETURN_IF_ERROR(ValidateDocumentId(out.id));
  const fs::path dir = config.Resolve(config.input.dir);
  const fs::path path = dir / fs::u8path(out.id);
  out.path = path.string();
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec)
    return Status::IoError("cannot create " + path.parent_path().string() + ": " + ec.message());
  if (fs::is_directory(path, ec))
    return Status::InvalidArgument("document id \"" + out.id + "\" names a folder");
  out.replaced = fs::exists(path, ec);
  // Written beside the target (hidden, so an update running now skips it) and renamed over it.
  const fs::path tmp = path.parent_path() / (".grag-upload-" + std::to_string(::getpid()) + "-" +
                                             Sha256Hex(out.id).substr(0, 8));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Status::IoError("cannot write " + tmp.string());
    f.write(content.data(), static_cast<std::streamsize>(content.size()));
    f.flush();
    if (!f) {
      fs::remove(tmp, ec);
      return Status::IoError("cannot write " + tmp.string() + " (disk full?)");
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignore;
    fs::remove(tmp, ignore);
    return Status::IoError("cannot move the upload to " + path.string() + ": " + ec.message());
  }
  return out;
}

Result<bool> DeleteInputDocument(const Config& config, std::string_view id) {
  GRAG_RETURN_IF_ERROR(ValidateDocumentId(id));
  const fs::path path = fs::path(config.Resolve(config.input.dir)) / fs::u8path(std::string(id));
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  if (!fs::remove(path, ec) || ec) {
    return Status::IoError("cannot remove " + path.string() + (ec ? ": " + ec.message() : ""));
  }
  return true;
}

}  // namespace grag
