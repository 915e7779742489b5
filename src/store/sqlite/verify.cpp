#include "verify.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace grag::store {
namespace {

std::string StatPart(const std::string& file) {
  struct stat st {};
  if (stat(file.c_str(), &st) != 0) return "0 0";
  const int64_t ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return std::to_string(st.st_size) + " " + std::to_string(ns);
}

std::string StampPath(const std::string& path) { return path + ".verified"; }

}  // namespace

std::string FilesStamp(const std::string& path) {
  return "v1 " + StatPart(path) + " " + StatPart(path + "-wal");
}

bool StampMatches(const std::string& path) {
  std::ifstream in(StampPath(path));
  std::string line;
  if (!in || !std::getline(in, line)) return false;
  return line == FilesStamp(path);
}

void RecordStamp(const std::string& path) {
  // A store that wrote nothing (a question answered from the cache) leaves the stamp as it was:
  // no file written and renamed on every question.
  if (StampMatches(path)) return;
  const std::string stamp = FilesStamp(path);
  const std::string tmp = StampPath(path) + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return;
    out << stamp << "\n";
    if (!out) return;
  }
  (void)std::rename(tmp.c_str(), StampPath(path).c_str());
}

std::string DamageAdvice() {
  return "restore it from a backup, or delete it and run `grag index` to rebuild it (`grag check` "
         "lists the damage)";
}

Status QuickCheck(sqlite::Connection& conn, const std::string& path) {
  auto stmt = conn.Prepare("PRAGMA quick_check(3)");
  if (!stmt.ok()) {
    return Status::Corruption("the index " + path + " is damaged (" + stmt.status().message() +
                              "): " + DamageAdvice());
  }
  std::string problems;
  while (true) {
    auto row = stmt->Step();
    if (!row.ok()) {
      problems += (problems.empty() ? "" : "; ") + row.status().message();
      break;
    }
    if (!*row) break;
    // Lines come as "*** in database main ***\nPage 12: ..."; the header says nothing here.
    std::istringstream lines(stmt->Text(0));
    for (std::string line; std::getline(lines, line);) {
      if (line == "ok" || line.empty() || line.starts_with("***")) continue;
      problems += (problems.empty() ? "" : "; ") + line;
    }
  }
  if (problems.empty()) return Status::Ok();
  return Status::Corruption("the index " + path + " is damaged (" + problems +
                            "): " + DamageAdvice());
}

}  // namespace grag::store
