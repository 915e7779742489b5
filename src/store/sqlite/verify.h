// Open-time damage screening (internal to the store module).
//
// A full check reads the whole file, so it is not run on every open: the state of the files
// (size and modification time of the index and its WAL) at the last check that passed is kept
// beside the index (<path>.verified), and an open whose files match it skips the check. grag's
// own writes keep that record current when the Store closes, so a check runs only on the first
// open after something else touched the files (a crash, a copy, a disk or a user writing into
// it) — which is when damage can have appeared.
#pragma once

#include <string>

#include "grag/status.h"
#include "sqlite.h"

namespace grag::store {

// "v1 <size> <mtime ns> <wal size> <wal mtime ns>" of the index at `path` now.
std::string FilesStamp(const std::string& path);

// Whether the stamp recorded beside `path` equals FilesStamp(path).
bool StampMatches(const std::string& path);

// Records FilesStamp(path) beside `path`; best effort (read-only media cannot keep it).
void RecordStamp(const std::string& path);

// PRAGMA quick_check on `conn`: ok, or kCorruption quoting the first problems with what to do.
Status QuickCheck(sqlite::Connection& conn, const std::string& path);

// The advice every damage message ends with.
std::string DamageAdvice();

}  // namespace grag::store
