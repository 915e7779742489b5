#include "grag/loader.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <optional>
#include <set>
#include <system_error>

#include <utf8proc.h>

#include "grag/hash.h"
#include "csv.h"
#include "utf8.h"

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

fs::path AbsoluteNormal(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  if (ec) a = p;
  a = a.lexically_normal();
  if (!a.has_filename() && a.has_parent_path() && a != a.root_path()) a = a.parent_path();
  return a;
}

// `p` absolute with its parent folders resolved (symlinks, "..") but its last component kept,
// so a symlinked file keeps its own name.
fs::path ParentCanonical(const fs::path& p) {
  const fs::path a = AbsoluteNormal(p);
  if (!a.has_parent_path() || a == a.root_path()) return a;
  std::error_code ec;
  const fs::path parent = fs::weakly_canonical(a.parent_path(), ec);
  if (ec) return a;
  return (parent / a.filename()).lexically_normal();
}

// `a` relative to `base` when it lies under it.
std::optional<fs::path> RelativeUnder(const fs::path& a, const fs::path& base) {
  fs::path rel = a.lexically_relative(base);
  if (rel.empty() || rel == "." || *rel.begin() == "..") return std::nullopt;
  return rel;
}

// `file` relative to `base` when it is under it (as spelled, or with symlinked parents
// resolved on both sides), else absolute with its parents resolved.
std::string RelativeOrAbsolute(const fs::path& file, const fs::path& base) {
  if (auto rel = RelativeUnder(AbsoluteNormal(file), AbsoluteNormal(base))) {
    return rel->generic_string();
  }
  const fs::path resolved = ParentCanonical(file);
  std::error_code ec;
  const fs::path base_resolved = fs::weakly_canonical(AbsoluteNormal(base), ec);
  if (!ec) {
    if (auto rel = RelativeUnder(resolved, base_resolved)) return rel->generic_string();
  }
  return resolved.generic_string();
}

std::string DocIdFor(const fs::path& file, const fs::path& base) {
  return RelativeOrAbsolute(file, base);
}

// Whether `text` (valid UTF-8) holds nothing but white space.
bool IsBlank(std::string_view text) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  auto left = static_cast<utf8proc_ssize_t>(text.size());
  while (left > 0) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(p, left, &cp);
    if (n <= 0) return false;
    const auto cat = utf8proc_category(cp);
    const bool space = cp == '\t' || cp == '\n' || cp == '\v' || cp == '\f' || cp == '\r' ||
                       cp == 0xFEFF || cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
                       cat == UTF8PROC_CATEGORY_ZP;
    if (!space) return false;
    p += n;
    left -= n;
  }
  return true;
}

LoadIssue Issue(std::string path, std::string message, bool skipped) {
  LoadIssue i;
  i.path = std::move(path);
  i.message = std::move(message);
  i.skipped = skipped;
  return i;
}

// Checks and, by policy, repairs one text. Returns false when the text must be skipped.
bool CheckText(std::string& text, const std::string& where, const LoadOptions& options,
               std::vector<LoadIssue>& issues) {
  const size_t bad = FindInvalidUtf8(text);
  if (bad == std::string::npos) return true;
  if (options.invalid_utf8 == InvalidUtf8Policy::kRepair) {
    issues.push_back(Issue(
        where,
        "invalid UTF-8 at byte offset " + std::to_string(bad) + "; bad bytes replaced with U+FFFD",
        false));
    text = RepairUtf8(text);
    return true;
  }
  issues.push_back(Issue(where,
                         "invalid UTF-8 at byte offset " + std::to_string(bad) +
                             "; skipped (set input.invalid_utf8 = \"repair\" to load it with "
                             "bad bytes replaced)",
                         true));
  return false;
}

// source_path is filled in by LoadFile, which knows the project root.
Document MakeDoc(std::string id, std::string title, std::string text) {
  Document d;
  d.id = std::move(id);
  d.title = std::move(title);
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
    out.issues.push_back(Issue(where, "not a JSON object; skipped", true));
    return;
  }
  auto text_it = rec.find(options.json_text_field);
  if (text_it == rec.end() || !text_it->is_string()) {
    out.issues.push_back(Issue(where,
                               "has no string field \"" + options.json_text_field +
                                   "\" (set input.json_text_field); skipped",
                               true));
    return;
  }
  std::string text = text_it->get<std::string>();  // nlohmann validated the UTF-8 already
  std::string id;
  if (auto it = rec.find(options.json_id_field); it != rec.end()) id = JsonScalarToString(*it);
  if (id.empty()) id = doc_base + "#" + std::to_string(index);
  std::string title;
  if (auto it = rec.find(options.json_title_field); it != rec.end())
    title = JsonScalarToString(*it);
  if (title.empty()) title = id;
  if (IsBlank(text)) {
    out.issues.push_back(Issue(
        where,
        text.empty() ? "has an empty text; skipped" : "has a text of only white space; skipped",
        true));
    return;
  }
  out.documents.push_back(MakeDoc(std::move(id), std::move(title), std::move(text)));
}

void LoadJson(std::string content, const std::string& doc_base, const fs::path& file, bool lines,
              const LoadOptions& options, LoadResult& out) {
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
        out.issues.push_back(Issue(where,
                                   "line " + std::to_string(line_no) + " (byte offset " +
                                       std::to_string(line_start) +
                                       ") is not valid JSON; skipped: " + e.what(),
                                   true));
      }
    }
    return;
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(content);
  } catch (const nlohmann::json::parse_error& e) {
    out.issues.push_back(Issue(
        where, "not valid JSON at byte offset " + std::to_string(e.byte) + "; skipped: " + e.what(),
        true));
    return;
  } catch (const nlohmann::json::exception& e) {
    // Valid syntax the parser still refuses, e.g. a number out of double's range (found by
    // the loader fuzzer: "444444.44e4464" ended the process).
    out.issues.push_back(
        Issue(where, std::string("cannot be read as JSON; skipped: ") + e.what(), true));
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
    out.issues.push_back(Issue(where, table.status().message() + "; skipped", true));
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
    out.issues.push_back(Issue(
        where,
        "has no column \"" + options.csv_text_column + "\" (set input.csv_text_column); skipped",
        true));
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
    std::string text = cell(text_col);
    if (IsBlank(text)) {
      out.issues.push_back(Issue(
          where + " row " + std::to_string(r),
          text.empty() ? "has an empty text; skipped" : "has a text of only white space; skipped",
          true));
      continue;
    }
    out.documents.push_back(MakeDoc(std::move(id), std::move(title), std::move(text)));
  }
}

void LoadOneFile(const fs::path& file, const fs::path& base, const LoadOptions& options,
                 LoadResult& out) {
  const std::string where = file.generic_string();
  auto content = ReadFile(file);
  if (!content.ok()) {
    out.issues.push_back(Issue(where, content.status().message() + "; skipped", true));
    return;
  }
  std::string text = std::move(content).value();
  const size_t sniff = std::min(text.size(), kBinarySniffBytes);
  if (const void* nul = std::memchr(text.data(), '\0', sniff); nul != nullptr) {
    const auto offset = static_cast<const char*>(nul) - text.data();
    out.issues.push_back(Issue(
        where, "looks binary (NUL byte at byte offset " + std::to_string(offset) + "); skipped",
        true));
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
  if (IsBlank(text)) {
    out.issues.push_back(
        Issue(where, text.empty() ? "is empty; skipped" : "holds only white space; skipped", true));
    return;
  }
  out.documents.push_back(MakeDoc(doc_base, file.filename().string(), std::move(text)));
}

// LoadOneFile, with the source path of what it produced written as LoadOptions::root_dir says.
void LoadFile(const fs::path& file, const fs::path& base, const fs::path& root,
              const LoadOptions& options, LoadResult& out) {
  const size_t first_doc = out.documents.size();
  const size_t first_issue = out.issues.size();
  LoadOneFile(file, base, options, out);
  const std::string source = RelativeOrAbsolute(file, root);
  for (size_t i = first_doc; i < out.documents.size(); ++i) out.documents[i].source_path = source;
  for (size_t i = first_issue; i < out.issues.size(); ++i) out.issues[i].source_path = source;
}

bool Hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

}  // namespace

std::string SourcePathFor(const std::string& path, const std::string& root) {
  std::error_code ec;
  return RelativeOrAbsolute(path, root.empty() ? fs::current_path(ec) : fs::path(root));
}

std::string ResolveSourcePath(const std::string& source_path, const std::string& root) {
  const fs::path p(source_path);
  if (p.is_absolute() || root.empty()) return p.lexically_normal().generic_string();
  return AbsoluteNormal(fs::path(root) / p).generic_string();
}

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

namespace {

// The files `paths` name, folders walked (sorted within each), with the walk's own issues.
Result<std::vector<fs::path>> ListFiles(const std::vector<std::string>& paths,
                                        const LoadOptions& options, const fs::path& root,
                                        std::vector<LoadIssue>& issues) {
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& p : paths) {
    fs::path path(p);
    const auto st = fs::status(path, ec);
    if (ec || !fs::exists(st)) return Status::NotFound("no such file or folder: " + p);
    if (fs::is_directory(st)) {
      std::vector<fs::path> found;
      // Symlinked folders are followed; one that leads back into a folder being walked (a
      // loop) or to a folder already read through another link is not.
      const auto dir_options = fs::directory_options::skip_permission_denied |
                               fs::directory_options::follow_directory_symlink;
      fs::recursive_directory_iterator it(path, dir_options, ec);
      if (ec) return Status::IoError("cannot read folder " + p + ": " + ec.message());
      const fs::path top = fs::weakly_canonical(path, ec);
      std::set<fs::path> visited = {top};
      // The resolved path of the folder being walked at each depth (chain[d] holds the entries
      // at depth d): a plain folder's is its parent's plus its name, so resolving costs nothing
      // per level (weakly_canonical on each folder made the walk quadratic in the depth).
      std::vector<fs::path> chain = {top};
      for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (ec) return Status::IoError("cannot read folder " + p + ": " + ec.message());
        const fs::path& entry = it->path();
        if (Hidden(entry)) {
          if (it->is_directory(ec)) it.disable_recursion_pending();
          continue;
        }
        if (it->is_directory(ec)) {
          const size_t depth = static_cast<size_t>(it.depth());
          if (chain.size() < depth + 1) {  // not walked through here (cannot happen; be safe)
            chain.resize(depth + 1, fs::weakly_canonical(entry.parent_path(), ec));
          }
          chain.resize(depth + 1);  // back up to this folder's parent
          if (!it->is_symlink(ec)) {
            chain.push_back(chain[depth] / entry.filename());
            visited.insert(chain.back());
            continue;
          }
          // A loop: the link leads to a folder on the way to it (as walked, links resolved).
          const fs::path target = fs::weakly_canonical(entry, ec);
          bool loop = false;
          for (const fs::path& up : chain) {
            loop = loop || up == target || RelativeUnder(up, target).has_value();
          }
          if (ec || loop || visited.count(target)) {
            it.disable_recursion_pending();
            LoadIssue issue;
            issue.path = entry.generic_string();
            issue.message = loop
                                ? "is a symlink to a folder that contains it (a loop); not followed"
                                : "is a symlink to a folder already read (" +
                                      target.generic_string() + "); not followed";
            issue.skipped = false;
            issue.source_path = RelativeOrAbsolute(entry, root);
            issues.push_back(std::move(issue));
            continue;
          }
          visited.insert(target);
          chain.push_back(target);
          continue;
        }
        if (!it->is_regular_file(ec)) continue;
        const std::string ext = Lower(entry.extension().string());
        if (std::find(options.extensions.begin(), options.extensions.end(), ext) ==
            options.extensions.end()) {
          continue;
        }
        found.push_back(entry);
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(path);
    }
  }
  return files;
}

// Whether LoadOneFile reads `file` as records, whose ids only its content says.
bool IsRecordFile(const fs::path& file) {
  const std::string ext = Lower(file.extension().string());
  return ext == ".json" || ext == ".jsonl" || ext == ".ndjson" || ext == ".csv";
}

bool ById(const Document& a, const Document& b) { return a.id < b.id; }

}  // namespace

struct DocumentReader::Impl {
  LoadOptions options;
  fs::path base;
  fs::path root;
  std::vector<fs::path> files;
  std::vector<LoadIssue> walk_issues;
  // Each file's issues with its place in `files`: LoadDocuments lists them in file order.
  std::vector<std::pair<size_t, LoadIssue>> file_issues;
  // Plain-text files not read yet, by the id their document will have, in id order.
  struct Pending {
    std::string id;
    size_t file = 0;
  };
  std::vector<Pending> plain;
  std::vector<Document> held;  // read when opening, in id order
  size_t next_plain = 0;
  size_t next_held = 0;

  // Reads files[i], appending its documents to `docs`.
  void Read(size_t i, std::vector<Document>& docs) {
    LoadResult r;
    LoadFile(files[i], base, root, options, r);
    for (auto& issue : r.issues) file_issues.emplace_back(i, std::move(issue));
    for (auto& d : r.documents) docs.push_back(std::move(d));
  }
};

DocumentReader::DocumentReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DocumentReader::DocumentReader(DocumentReader&&) noexcept = default;
DocumentReader& DocumentReader::operator=(DocumentReader&&) noexcept = default;
DocumentReader::~DocumentReader() = default;

Result<DocumentReader> DocumentReader::Open(const std::vector<std::string>& paths,
                                            const LoadOptions& options) {
  auto m = std::make_unique<Impl>();
  m->options = options;
  std::error_code ec;
  m->base = options.base_dir.empty() ? fs::current_path(ec) : fs::path(options.base_dir);
  m->base = fs::weakly_canonical(m->base, ec);
  m->root = options.root_dir.empty() ? fs::current_path(ec) : AbsoluteNormal(options.root_dir);
  GRAG_ASSIGN_OR_RETURN(m->files, ListFiles(paths, options, m->root, m->walk_issues));
  for (size_t i = 0; i < m->files.size(); ++i) {
    if (IsRecordFile(m->files[i])) {
      m->Read(i, m->held);
    } else {
      m->plain.push_back({DocIdFor(m->files[i], m->base), i});
    }
  }
  std::sort(m->held.begin(), m->held.end(), ById);
  std::stable_sort(m->plain.begin(), m->plain.end(),
                   [](const Impl::Pending& a, const Impl::Pending& b) { return a.id < b.id; });
  // A plain file whose id another file may give too is read now, so that two documents with one
  // id are found before any is handed out.
  auto held_has = [&m](const std::string& id) {
    auto it = std::lower_bound(m->held.begin(), m->held.end(), id,
                               [](const Document& d, const std::string& v) { return d.id < v; });
    return it != m->held.end() && it->id == id;
  };
  std::vector<Impl::Pending> plain;
  std::vector<Document> clashing;
  for (size_t k = 0; k < m->plain.size(); ++k) {
    const std::string& id = m->plain[k].id;
    const bool shared = (k > 0 && m->plain[k - 1].id == id) ||
                        (k + 1 < m->plain.size() && m->plain[k + 1].id == id) || held_has(id);
    if (shared) {
      m->Read(m->plain[k].file, clashing);
    } else {
      plain.push_back(std::move(m->plain[k]));
    }
  }
  m->plain = std::move(plain);
  if (!clashing.empty()) {
    for (auto& d : clashing) m->held.push_back(std::move(d));
    std::sort(m->held.begin(), m->held.end(), ById);
  }
  for (size_t i = 1; i < m->held.size(); ++i) {
    if (m->held[i].id == m->held[i - 1].id) {
      const auto& a = m->held[i - 1];
      const auto& b = m->held[i];
      if (a.source_path == b.source_path && a.content_hash == b.content_hash) {
        return Status::InvalidArgument("file " + a.source_path +
                                       " was given twice (document id \"" + a.id + "\")");
      }
      return Status::InvalidArgument("two documents share the id \"" + a.id + "\" (" +
                                     a.source_path + " and " + b.source_path +
                                     "): give each record a distinct id");
    }
  }
  return DocumentReader(std::move(m));
}

std::optional<Document> DocumentReader::Next() {
  Impl& m = *impl_;
  while (m.next_plain < m.plain.size() || m.next_held < m.held.size()) {
    if (m.next_held < m.held.size() &&
        (m.next_plain == m.plain.size() || m.held[m.next_held].id < m.plain[m.next_plain].id)) {
      return std::move(m.held[m.next_held++]);
    }
    std::vector<Document> docs;
    m.Read(m.plain[m.next_plain++].file, docs);
    if (!docs.empty()) return std::move(docs.front());
  }
  return std::nullopt;
}

size_t DocumentReader::Remaining() const {
  return impl_->plain.size() - impl_->next_plain + impl_->held.size() - impl_->next_held;
}

std::vector<LoadIssue> DocumentReader::TakeIssues() {
  std::vector<LoadIssue> out = std::move(impl_->walk_issues);
  impl_->walk_issues.clear();
  std::stable_sort(impl_->file_issues.begin(), impl_->file_issues.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [file, issue] : impl_->file_issues) out.push_back(std::move(issue));
  impl_->file_issues.clear();
  return out;
}

Result<LoadResult> LoadDocuments(const std::vector<std::string>& paths,
                                 const LoadOptions& options) {
  GRAG_ASSIGN_OR_RETURN(DocumentReader reader, DocumentReader::Open(paths, options));
  LoadResult out;
  while (std::optional<Document> doc = reader.Next()) out.documents.push_back(std::move(*doc));
  out.issues = reader.TakeIssues();
  return out;
}

}  // namespace grag
