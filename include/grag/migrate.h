// Copying an index to another store (grag migrate): an SQLite file or a PostgreSQL database,
// either way, verified table by table.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/status.h"

namespace grag {

struct TableCopy {
  std::string table;
  int64_t source_rows = 0;
  int64_t target_rows = 0;
  std::string source_checksum;  // hex SHA-256
  std::string target_checksum;
  bool matches() const { return source_rows == target_rows && source_checksum == target_checksum; }
};

struct CopyReport {
  std::string source;  // locations as shown (a URL without its password)
  std::string target;
  std::vector<TableCopy> tables;  // IndexTables() order
  int64_t rows = 0;               // copied, all tables
  double seconds = 0;             // the whole copy, verification included
};

struct CopyOptions {
  // Called while a table is copied (every few thousand rows, and once it is done) with the rows
  // written so far and the table's total. An error stops the copy, which then writes nothing,
  // and is returned. Empty: no progress.
  std::function<Status(std::string_view table, int64_t rows_done, int64_t rows_total)> on_progress;
};

// Opens the index at `from` for reading and the store at `to` (an SQLite file path or a
// PostgreSQL URL, as Store::Open takes; created when missing, with its writer lock held) and
// copies with CopyIndex. An SQLite file this call created is deleted again when the copy fails.
// Errors name the locations without passwords: kNotFound (no index at `from`), kInvalidArgument
// (the same location twice, a bad location), kUnavailable (a server unreachable, a writer lock
// taken), and CopyIndex's.
Result<CopyReport> MigrateIndex(const std::string& from, const std::string& to,
                                const CopyOptions& options = {});

}  // namespace grag
