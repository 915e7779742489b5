// CopyIndex and MigrateIndex (grag/store_copy.h): a generic table-by-table copy through
// Store::SnapshotTables and Store::InsertRows, verified by counts and checksums.
#include "grag/store_copy.h"

#include <bit>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "grag/config.h"
#include "grag/location.h"
#include "grag/hash.h"

namespace grag {
namespace {

constexpr size_t kBatchRows = 2000;

// One value in the form both backends give alike, tagged with its kind.
std::string Canonical(const CellValue& cell, ColumnType type) {
  if (std::holds_alternative<std::monostate>(cell)) return "N";
  if (const auto* v = std::get_if<int64_t>(&cell)) return "I" + std::to_string(*v);
  if (const auto* d = std::get_if<double>(&cell)) {
    return "R" + std::to_string(std::bit_cast<uint64_t>(*d));
  }
  if (const auto* f = std::get_if<std::vector<float>>(&cell)) {
    std::string out = "V";
    out.resize(1 + f->size() * sizeof(float));
    if (!f->empty()) std::memcpy(out.data() + 1, f->data(), f->size() * sizeof(float));
    return out;
  }
  const std::string& text = std::get<std::string>(cell);
  if (type == ColumnType::kJson) {
    // PostgreSQL's jsonb respaces and reorders what SQLite keeps as written.
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) {
      return "J" + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  return "T" + text;
}

class TableHash {
 public:
  void Add(const IndexTable& table, const TableRow& row) {
    for (size_t i = 0; i < row.size(); ++i) hasher_.Add(Canonical(row[i], table.columns[i].type));
    ++rows_;
  }
  int64_t rows() const { return rows_; }
  std::string Digest() { return hasher_.HexDigest(); }

 private:
  Hasher hasher_;
  int64_t rows_ = 0;
};

// kAlreadyExists when `target` holds any row but the preset ones.
Status CheckEmpty(Store& target) {
  GRAG_ASSIGN_OR_RETURN(std::unique_ptr<TableSnapshot> snapshot, target.SnapshotTables());
  // Tables with preset rows last, so that the message names a table of index data if any.
  std::vector<const IndexTable*> tables;
  for (const IndexTable& table : IndexTables()) {
    if (table.preset_keys.empty()) tables.push_back(&table);
  }
  for (const IndexTable& table : IndexTables()) {
    if (!table.preset_keys.empty()) tables.push_back(&table);
  }
  for (const IndexTable* t : tables) {
    const IndexTable& table = *t;
    int64_t rows = 0;
    if (table.preset_keys.empty()) {
      GRAG_ASSIGN_OR_RETURN(rows, snapshot->Count(table));
    } else {
      GRAG_RETURN_IF_ERROR(snapshot->Scan(table, [&](const TableRow& row) {
        const auto* key = std::get_if<std::string>(&row[0]);
        bool preset = false;
        for (std::string_view k : table.preset_keys) preset = preset || (key && *key == k);
        if (!preset) ++rows;
        return Status::Ok();
      }));
    }
    if (rows > 0) {
      return Status::AlreadyExists("it already holds an index (table " + std::string(table.name) +
                                   " has " + std::to_string(rows) +
                                   " rows): migrate copies into an empty store only");
    }
  }
  return Status::Ok();
}

Status CopyTables(Store& source, Store& target, const CopyOptions& options, CopyReport& report) {
  GRAG_ASSIGN_OR_RETURN(std::unique_ptr<TableSnapshot> from, source.SnapshotTables());
  GRAG_ASSIGN_OR_RETURN(Transaction tx, target.Begin());
  GRAG_RETURN_IF_ERROR(CheckEmpty(target));
  for (const IndexTable& table : IndexTables()) {
    GRAG_ASSIGN_OR_RETURN(const int64_t total, from->Count(table));
    TableHash hash;
    std::vector<TableRow> batch;
    batch.reserve(std::min<size_t>(kBatchRows, static_cast<size_t>(total)));
    auto flush = [&]() -> Status {
      GRAG_RETURN_IF_ERROR(target.InsertRows(table, batch));
      batch.clear();
      if (options.on_progress) return options.on_progress(table.name, hash.rows(), total);
      return Status::Ok();
    };
    GRAG_RETURN_IF_ERROR(from->Scan(table, [&](const TableRow& row) -> Status {
      hash.Add(table, row);
      batch.push_back(row);
      return batch.size() >= kBatchRows ? flush() : Status::Ok();
    }));
    if (!batch.empty() || hash.rows() == 0) GRAG_RETURN_IF_ERROR(flush());
    TableCopy& copy = report.tables.emplace_back();
    copy.table = table.name;
    copy.source_rows = hash.rows();
    copy.source_checksum = hash.Digest();
    report.rows += copy.source_rows;
  }
  GRAG_RETURN_IF_ERROR(target.FinishInsertRows());

  // Read everything back through the target's own transaction before committing it.
  std::string mismatches;
  {
    GRAG_ASSIGN_OR_RETURN(std::unique_ptr<TableSnapshot> written, target.SnapshotTables());
    for (size_t t = 0; t < IndexTables().size(); ++t) {
      const IndexTable& table = IndexTables()[t];
      TableHash hash;
      GRAG_RETURN_IF_ERROR(written->Scan(table, [&](const TableRow& row) {
        hash.Add(table, row);
        return Status::Ok();
      }));
      TableCopy& copy = report.tables[t];
      copy.target_rows = hash.rows();
      copy.target_checksum = hash.Digest();
      if (!copy.matches()) {
        mismatches += (mismatches.empty() ? "" : "; ") + copy.table + " (" +
                      std::to_string(copy.source_rows) + " rows, checksum " +
                      copy.source_checksum.substr(0, 12) + " read back as " +
                      std::to_string(copy.target_rows) + " rows, checksum " +
                      copy.target_checksum.substr(0, 12) + ")";
      }
    }
  }
  if (!mismatches.empty()) {
    return Status::Corruption("the copy differs from the source in " + mismatches +
                              "; nothing was written");
  }
  return tx.Commit();
}

}  // namespace

Result<CopyReport> CopyIndex(Store& source, Store& target, const CopyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  CopyReport report;
  GRAG_RETURN_IF_ERROR(CopyTables(source, target, options, report));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

Result<CopyReport> MigrateIndex(const std::string& from, const std::string& to,
                                const CopyOptions& options) {
  namespace fs = std::filesystem;
  const std::string from_label = IsPostgresUrl(from) ? RedactUrlPassword(from) : from;
  const std::string to_label = IsPostgresUrl(to) ? RedactUrlPassword(to) : to;
  if (from.empty() || to.empty()) return Status::InvalidArgument("migrate needs two locations");
  std::error_code ec;
  const bool same_file = !IsPostgresUrl(from) && !IsPostgresUrl(to) && fs::exists(to, ec) &&
                         fs::equivalent(from, to, ec);
  if (from == to || same_file) {
    return Status::InvalidArgument("the source and the target are the same index (" + to_label +
                                   ")");
  }
  StoreOptions read;
  read.read_only = true;
  read.create_if_missing = false;
  auto source = Store::Open(from, read);
  if (!source.ok()) {
    if (source.status().code() == ErrorCode::kNotFound) {
      return Status::NotFound("no index at " + from_label + " to migrate");
    }
    return source.status().WithContext("opening the source " + from_label);
  }

  const bool created_file = !IsPostgresUrl(to) && !fs::exists(to, ec);
  StoreOptions write;
  write.writer_lock = true;
  write.lock_holder = "grag migrate";
  Result<CopyReport> copied = Status::Internal("not run");
  {
    auto target = Store::Open(to, write);
    if (!target.ok()) {
      copied = target.status().WithContext("opening the target " + to_label);
    } else {
      copied = CopyIndex(**source, **target, options);
      if (!copied.ok()) {
        Status st = copied.status();
        copied = st.code() == ErrorCode::kAlreadyExists
                     ? Status::AlreadyExists(to_label + ": " + st.message())
                     : st.WithContext("copying " + from_label + " to " + to_label);
      }
    }
  }  // the target closes (and releases its lock) before a failed new file is removed
  if (!copied.ok()) {
    if (created_file) {
      for (const char* suffix : {"", "-wal", "-shm", "-journal", ".lock", ".verified"}) {
        fs::remove(to + suffix, ec);
      }
    }
    return copied.status();
  }
  copied->source = from_label;
  copied->target = to_label;
  return copied;
}

}  // namespace grag
