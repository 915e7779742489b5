#include "grag/loader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "grag/hash.h"
#include "text/csv.h"
#include "text/utf8.h"

namespace grag {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kBom = "\xEF\xBB\xBF";
constexpr size_t kBinarySniffBytes = 8192;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

Result<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError("cannot open " + path.string() + ": " + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return Status::IoError("cannot read " + path.string());
  return buf.str();
}

std::string DocIdFor(const fs::path& file, const fs::path& base) {
  std::error_code ec;
  fs::path abs = fs::weakly_canonical(file, ec);
  if (ec) abs = fs::absolute(file);
  fs::path rel = abs.lexically_relative(base);
  if (!rel.empty() && *rel.begin() != "..") return rel.generic_string();
  return abs.generic_string();
}

// Checks and, by policy, repairs one text. Returns false when the text must be skipped.
bool CheckText(std::string& text, const std::string& where, const LoadOptions& options,
               std::vector<LoadIssue>& issues) {
  const size_t bad = FindInvalidUtf8(text);
  if (bad == std::string::npos) return true;
  if (options.invalid_utf8 == InvalidUtf8Policy::kRepair) {
    issues.push_back({where, "invalid UTF-8 at byte offset " + std::to_string(bad) +
                                 "; bad bytes replaced with U+FFFD",
                      false});
    text = RepairUtf8(text);
    return true;
  }
  issues.push_back({where, "invalid UTF-8 at byte offset " + std::to_string(bad) +
                               "; skipped (set input.invalid_utf8 = \"repair\" to load it with "
                               "bad bytes replaced)",
                    true});
  return false;
}

Document MakeDoc(std::string id, std::string title, const fs::path& source, std::string text) {
  Document d;
  d.id = std::move(id);
  d.title = std::move(title);
  d.source_path = source.generic_string();
  d.text = std::move(text);
  d.content_hash = Sha256Hex(d.text);
  return d;
}

std::string JsonScalarToString(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number() || v.is_boolean()) return v.dump();
  return {};
}

void AddRecord(const nlohmann::json& rec, size_t index, const std::string& doc_base,
               const fs::path& file, const LoadOptions& options, LoadResult& out) {
  const std::string where = file.generic_string() + " record " + std::to_string(index);
  if (!rec.is_object()) {
    out.issues.push_back({where, "not a JSON object; skipped", true});
    return;
  }
  auto text_it = rec.find(options.json_text_field);
  if (text_it == rec.end() || !text_it->is_string()) {
    out.issues.push_back({where, "has no string field \"" + options.json_text_field +
                                     "\" (set input.json_text_field); skipped",
                          true});
    return;
  }
  std::string text = text_it->get<std::string>();  // nlohmann validated the UTF-8 already
  std::string id;
  if (auto it = rec.find(options.json_id_field); it != rec.end()) id = JsonScalarToString(*it);
  if (id.empty()) id = doc_base + "#" + std::to_string(index);
  std::string title;
  if (auto it = rec.find(options.json_title_field); it != rec.end()) title = JsonScalarToString(*it);
  if (title.empty()) title = id;
  out.documents.push_back(MakeDoc(std::move(id), std::move(title), file, std::move(text)));
}

void LoadJson(std::string content, const std::string& doc_base, const fs::path& file,
              bool lines, const LoadOptions& options, LoadResult& out) {
  const std::string where = file.generic_string();
  if (!CheckText(content, where, options, out.issues)) return;
  if (lines) {
    size_t pos = 0;
    size_t line_no = 0;
    size_t record = 0;
    while (pos < content.size()) {
      size_t end = content.find('\n', pos);
      if (end == std::string::npos) end = content.size();
      std::string_view line(content.data() + pos, end - pos);
      ++line_no;
      const size_t line_start = pos;
      pos = end + 1;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      try {
        AddRecord(nlohmann::json::parse(line), record++, doc_base, file, options, out);
      } catch (const nlohmann::json::exception& e) {
        out.issues.push_back({where, "line " + std::to_string(line_no) + " (byte offset " +
                                         std::to_string(line_start) +
                                         ") is not valid JSON; skipped: " + e.what(),
                              true});
      }
    }
    return;
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(content);
  } catch (const nlohmann::json::parse_error& e) {
    out.issues.push_back({where, "not valid JSON at byte offset " + std::to_string(e.byte) +
                                     "; skipped: " + e.what(),
                          true});
    return;
  }
  if (doc.is_array()) {
    for (size_t i = 0; i < doc.size(); ++i) AddRecord(doc[i], i, doc_base, file, options, out);
  } else {
    AddRecord(doc, 0, doc_base, file, options, out);
    // A single object is one document: its id defaults to the file's, not "<file>#0".
    if (!out.documents.empty() && out.documents.back().id == doc_base + "#0") {
      out.documents.back().id = doc_base;
      if (out.documents.back().title == doc_base + "#0") out.documents.back().title = doc_base;
    }
  }
}

void LoadCsv(std::string content, const std::string& doc_base, const fs::path& file,
             const LoadOptions& options, LoadResult& out) {
  const std::string where = file.generic_string();
  if (content.starts_with(kBom)) content.erase(0, kBom.size());
  if (!CheckText(content, where, options, out.issues)) return;
  auto table = ParseCsv(content);
  if (!table.ok()) {
    out.issues.push_back({where, table.status().message() + "; skipped", true});
    return;
  }
  const auto& rows = table.value();
  if (rows.empty()) return;
  const auto& header = rows[0];
  auto col = [&](const std::string& name) -> std::ptrdiff_t {
    auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : it - header.begin();
  };
  const auto text_col = col(options.csv_text_column);
  if (text_col < 0) {
    out.issues.push_back({where, "has no column \"" + options.csv_text_column +
                                     "\" (set input.csv_text_column); skipped",
                          true});
    return;
  }
  const auto id_col = col(options.csv_id_column);
  const auto title_col = col(options.csv_title_column);
  for (size_t r = 1; r < rows.size(); ++r) {
    const auto& row = rows[r];
    auto cell = [&](std::ptrdiff_t c) -> std::string {
      return c >= 0 && static_cast<size_t>(c) < row.size() ? row[static_cast<size_t>(c)] : "";
    };
    if (row.size() == 1 && row[0].empty()) continue;  // blank line
    std::string id = cell(id_col);
    if (id.empty()) id = doc_base + "#" + std::to_string(r - 1);
    std::string title = cell(title_col);
    if (title.empty()) title = id;
    out.documents.push_back(MakeDoc(std::move(id), std::move(title), file, cell(text_col)));
  }
}

void LoadOneFile(const fs::path& file, const fs::path& base, const LoadOptions& options,
                 LoadResult& out) {
  const std::string where = file.generic_string();
  auto content = ReadFile(file);
  if (!content.ok()) {
    out.issues.push_back({where, content.status().message() + "; skipped", true});
    return;
  }
  std::string text = std::move(content).value();
  const size_t sniff = std::min(text.size(), kBinarySniffBytes);
  if (const void* nul = std::memchr(text.data(), '\0', sniff); nul != nullptr) {
    const auto offset = static_cast<const char*>(nul) - text.data();
    out.issues.push_back({where, "looks binary (NUL byte at byte offset " +
                                     std::to_string(offset) + "); skipped",
                          true});
    return;
  }
  const std::string doc_base = DocIdFor(file, base);
  const std::string ext = Lower(file.extension().string());
  if (ext == ".json") return LoadJson(std::move(text), doc_base, file, false, options, out);
  if (ext == ".jsonl" || ext == ".ndjson") {
    return LoadJson(std::move(text), doc_base, file, true, options, out);
  }
  if (ext == ".csv") return LoadCsv(std::move(text), doc_base, file, options, out);
  // Plain text and Markdown: a leading byte-order mark is not part of the text.
  if (std::string_view(text).starts_with(kBom)) text.erase(0, kBom.size());
  if (!CheckText(text, where, options, out.issues)) return;
  out.documents.push_back(MakeDoc(doc_base, file.filename().string(), file, std::move(text)));
}

bool Hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

}  // namespace

Result<InvalidUtf8Policy> ParseInvalidUtf8Policy(std::string_view name) {
  if (name == "skip") return InvalidUtf8Policy::kSkip;
  if (name == "repair") return InvalidUtf8Policy::kRepair;
  return Status::InvalidArgument("invalid_utf8 must be \"skip\" or \"repair\", not \"" +
                                 std::string(name) + "\"");
}

size_t FindInvalidUtf8(std::string_view text) {
  const size_t valid = ValidUtf8Length(text);
  return valid == text.size() ? std::string_view::npos : valid;
}

std::string RepairUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const size_t valid = ValidUtf8Length(text);
    out.append(text.substr(0, valid));
    if (valid == text.size()) break;
    out += "\xEF\xBF\xBD";  // one replacement per bad byte, so offsets stay easy to explain
    text.remove_prefix(valid + 1);
  }
  return out;
}

Result<LoadResult> LoadDocuments(const std::vector<std::string>& paths,
                                 const LoadOptions& options) {
  std::error_code ec;
  fs::path base = options.base_dir.empty() ? fs::current_path(ec) : fs::path(options.base_dir);
  base = fs::weakly_canonical(base, ec);
  LoadResult out;
  std::vector<fs::path> files;
  for (const auto& p : paths) {
    fs::path path(p);
    const auto st = fs::status(path, ec);
    if (ec || !fs::exists(st)) return Status::NotFound("no such file or folder: " + p);
    if (fs::is_directory(st)) {
      std::vector<fs::path> found;
      fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec);
      if (ec) return Status::IoError("cannot read folder " + p + ": " + ec.message());
      for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) return Status::IoError("cannot read folder " + p + ": " + ec.message());
        if (Hidden(it->path())) {
          if (it->is_directory(ec)) it.disable_recursion_pending();
          continue;
        }
        if (!it->is_regular_file(ec)) continue;
        const std::string ext = Lower(it->path().extension().string());
        if (std::find(options.extensions.begin(), options.extensions.end(), ext) ==
            options.extensions.end()) {
          continue;
        }
        found.push_back(it->path());
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(path);
    }
  }
  for (const auto& f : files) LoadOneFile(f, base, options, out);

  std::sort(out.documents.begin(), out.documents.end(),
            [](const Document& a, const Document& b) { return a.id < b.id; });
  for (size_t i = 1; i < out.documents.size(); ++i) {
    if (out.documents[i].id == out.documents[i - 1].id) {
      const auto& a = out.documents[i - 1];
      const auto& b = out.documents[i];
      if (a.source_path == b.source_path && a.content_hash == b.content_hash) {
        return Status::InvalidArgument("file " + a.source_path +
                                       " was given twice (document id \"" + a.id + "\")");
      }
      return Status::InvalidArgument("two documents share the id \"" + a.id + "\" (" +
                                     a.source_path + " and " + b.source_path +
                                     "): give each record a distinct id");
    }
  }
  return out;
}

}  // namespace grag
