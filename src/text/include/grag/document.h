// Documents: the unit of input. Loaded from .txt, .md, .json, .jsonl and .csv files.
#pragma once

#include <string>

namespace grag {

struct Document {
  // Stable id. For plain files: the path relative to the input root (e.g. "books/carol.txt");
  // for JSON/CSV records: the configured id field, else "<path>#<record index>".
  std::string id;
  // Human-readable title: the file name for plain files, or the configured title field.
  std::string title;
  // The source file the document came from: relative to the project root when it is under it,
  // else absolute (see LoadOptions::root_dir).
  std::string source_path;
  // Valid UTF-8 text.
  std::string text;
  // SHA-256 of `text` (hex), used to detect edits.
  std::string content_hash;
};

}  // namespace grag
