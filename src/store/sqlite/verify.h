// Open-time damage screening (internal to the store module).
//
// A full check reads the whole file, so it is not run on every open: the state of the files
// (identity, size, modification and change times of the index and its WAL, and a digest of the
// index's first page) at the last check that passed is kept
// beside the index (<path>.verified), and an open whose files match it skips the check. grag's
// own writes keep that record current when the Store closes, so a check runs only on the first
// open after something else touched the files (a crash, a copy, a disk or a user writing into
// it) — which is when damage can have appeared. The change time (ctime) is what makes the record
// trustworthy: a modification time can be set back after a write (touch -r), a change time
// cannot, so bytes written into the file with its size and mtime kept are still noticed.
#pragma once

#include <string>

#include "grag/status.h"
#include "sqlite.h"

namespace grag::store {

// "v2 <dev:ino> <size> <mtime ns> <ctime ns> <first-page digest>" of the index at `path` now,
// then the same stat fields of its WAL.
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
