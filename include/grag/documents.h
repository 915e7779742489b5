// Documents as grag reads them from the input folder, and the chunks it cuts them into
// (grag chunk previews them; the index keeps them as DocumentInfo and ChunkRecord).
#pragma once

#include <cstddef>
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

struct Chunk {
  // Lower-case hex SHA-256 of (document id, text), so unchanged input maps to the same ids on
  // every run. Should a document contain the same chunk text more than once, the repeats also
  // hash their occurrence number, keeping ids unique.
  std::string id;
  std::string document_id;
  int index = 0;  // 0-based position of the chunk within its document
  // The window's text, after the title prefix when ChunkOptions::prepend_title is set.
  std::string text;
  // Tokens in `text` as sent to a model: the text re-encoded, prefix included (Microsoft's
  // n_tokens). Usually size (+ prefix tokens); a window edge that splits a word or a character
  // can make it differ by a token or two.
  size_t n_tokens = 0;
  // The window in the document's token stream: tokens [start_token, end_token).
  size_t start_token = 0;
  size_t end_token = 0;
  // The window in the document's text, in UTF-8 bytes: [start_byte, end_byte). An edge inside a
  // multi-byte character is moved inward to the next character boundary, so
  // doc.text.substr(start_byte, end_byte - start_byte) is exactly `text` without the title prefix
  // and without the U+FFFD that the broken edge bytes decode to.
  size_t start_byte = 0;
  size_t end_byte = 0;
};

// Something that went wrong with one file or record; loading goes on.
struct LoadIssue {
  std::string path;         // as given or found, for messages
  std::string message;      // names the problem and, where it applies, the byte offset or record
  bool skipped = true;      // false: the document was still loaded (e.g. repaired UTF-8)
  std::string source_path;  // the file, as Document::source_path would name it
};

}  // namespace grag
