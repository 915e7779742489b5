// Documents handed over by a front end (an HTTP upload, an MCP tool call) are saved as files in
// the project's input folder (config.input.dir), where the next update picks them up like any
// other file: the input folder stays the one source of truth, so `grag index` from a shell and
// an upload through the server never disagree about what the corpus is.
#pragma once

#include <string>
#include <string_view>

#include "grag/config.h"
#include "grag/status.h"

namespace grag {

// Checks the text of a document a client hands over: kInvalidArgument when it is empty (blank)
// or not UTF-8 (naming the first invalid byte's offset).
Status CheckDocumentText(std::string_view text);

// Checks a document id a client chose: a relative '/'-separated path inside the input folder,
// any Unicode allowed. Refused (kInvalidArgument, saying why): empty, not valid UTF-8, control
// characters, a backslash, a leading '/', an empty, "." or ".." segment, a hidden segment
// (".x", which the loader skips), more than 255 bytes in a segment or 1024 in all.
Status ValidateDocumentId(std::string_view id);

// The id a document gets when the client gave none: the title made safe as a file name (slashes
// and control characters replaced), else "doc-" and the first 12 hex digits of the text's
// SHA-256; ".txt" is appended when the name has no extension the loader reads.
std::string DefaultDocumentId(std::string_view title, std::string_view text);

struct SavedInput {
  std::string id;         // the document id the next update gives it (== the relative file path)
  std::string path;       // the file written
  bool replaced = false;  // a file of that name was there before
};

// Writes `content` to <input.dir>/<id> (folders created; written to a temporary file and
// renamed, so a reader never sees half a file). `id` must pass ValidateDocumentId; an id with no
// extension the loader reads gets ".txt". Errors: kInvalidArgument for the id, kIoError.
Result<SavedInput> SaveInputDocument(const Config& config, std::string_view id,
                                     std::string_view content);

// Removes <input.dir>/<id>. Returns false when there is no such file. Errors: the id's, kIoError.
Result<bool> DeleteInputDocument(const Config& config, std::string_view id);

}  // namespace grag
