// Loading documents from files and folders: .txt, .md, .json, .jsonl and .csv.
//
// Every document comes out as valid UTF-8. Binary files and invalid UTF-8 never crash the
// loader: they produce a LoadIssue naming the file and the byte offset, and the file is either
// skipped or repaired (bad bytes replaced by U+FFFD), as LoadOptions says.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grag/documents.h"
#include "grag/status.h"

namespace grag {

enum class InvalidUtf8Policy {
  kSkip,    // leave the file out and report it (default: never index garbage silently)
  kRepair,  // replace each invalid sequence with U+FFFD and report it
};

Result<InvalidUtf8Policy> ParseInvalidUtf8Policy(std::string_view name);  // "skip" | "repair"

struct LoadOptions {
  // Document ids are file paths relative to this folder (files outside it keep their absolute
  // path), so the same input always maps to the same ids. Empty: the current directory.
  std::string base_dir;
  // Documents' and issues' source_path are relative to this folder (the project root) when the
  // file is under it, else absolute, however the paths were spelled (relative to another
  // working directory, through a symlinked parent): the same file always gets the same
  // source_path. Empty: the current directory.
  std::string root_dir;
  // JSON / JSONL records: which fields hold the text, the id and the title. A record without
  // the text field is reported and skipped; without an id it gets "<path>#<record index>".
  std::string json_text_field = "text";
  std::string json_id_field = "id";
  std::string json_title_field = "title";
  // CSV (header row required, RFC 4180 quoting): the same for columns.
  std::string csv_text_column = "text";
  std::string csv_id_column = "id";
  std::string csv_title_column = "title";
  InvalidUtf8Policy invalid_utf8 = InvalidUtf8Policy::kSkip;
  // File name extensions picked up when walking a folder (an explicitly named file is loaded
  // as plain text when its extension is not one of these).
  std::vector<std::string> extensions = {".txt", ".md", ".json", ".jsonl", ".csv"};
};

struct LoadResult {
  std::vector<Document> documents;  // sorted by id
  std::vector<LoadIssue> issues;
};

// Loads the given files and folders (folders recursively; hidden entries are ignored; symlinked
// folders are followed, and a link back into a folder already being walked is reported as an
// issue and not followed). A symlinked file keeps the link's path as its id and source path.
// Empty and whitespace-only files are reported and skipped: they have nothing to index.
// Fails only when a named path does not exist or cannot be read at all, or two documents get
// the same id; per-file problems become issues.
Result<LoadResult> LoadDocuments(const std::vector<std::string>& paths, const LoadOptions& options);

// Reads the documents of the given files and folders one at a time, in id order: what
// LoadDocuments returns, without holding the whole input at once. Opening lists the files and
// fails as LoadDocuments does (a named path missing, two documents with one id); a plain-text
// file is read only when its turn comes. A file of records (.json, .jsonl, .ndjson, .csv) is
// read when the reader opens, as only its content says which ids it holds, and its documents
// are held until their turn; so is a plain file whose id another file's document could share.
class DocumentReader {
 public:
  static Result<DocumentReader> Open(const std::vector<std::string>& paths,
                                     const LoadOptions& options);
  DocumentReader(DocumentReader&&) noexcept;
  DocumentReader& operator=(DocumentReader&&) noexcept;
  ~DocumentReader();

  // The next document, or nullopt once all have been read.
  std::optional<Document> Next();
  // Documents still to come, at most: a file that turns out empty or unreadable gives none.
  size_t Remaining() const;
  // Takes the problems met so far, in LoadDocuments' order (all of them once Next returned
  // nullopt).
  std::vector<LoadIssue> TakeIssues();

 private:
  struct Impl;
  explicit DocumentReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `path` as LoadOptions::root_dir says source paths are written: relative to `root` when the
// file is under it (compared both as spelled and with symlinked parents resolved), else
// absolute; '/'-separated and lexically normal. The final component is never resolved, so a
// symlink keeps its own name.
std::string SourcePathFor(const std::string& path, const std::string& root);

// Where a stored source path (SourcePathFor's result) is on disk: `root`/path when relative.
std::string ResolveSourcePath(const std::string& source_path, const std::string& root);

// Byte offset of the first invalid UTF-8 sequence in `text`, or npos when it is all valid.
size_t FindInvalidUtf8(std::string_view text);

// `text` with every invalid UTF-8 sequence replaced by U+FFFD.
std::string RepairUtf8(std::string_view text);

}  // namespace grag
