#include "verify.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "grag/hash.h"

namespace grag::store {
namespace {

int64_t Nanoseconds(const timespec& t) {
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// Which file it is (device, inode), its size, and when its data (mtime) and its inode (ctime)
// last changed. The mtime can be set back by anyone (touch -r, cp -p, rsync -t); the ctime
// cannot: any write or utime call moves it to the present.
std::string StatPart(const std::string& file) {
  struct stat st {};
  if (stat(file.c_str(), &st) != 0) return "0 0 0 0 0";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + " " +
         std::to_string(st.st_size) + " " + std::to_string(Nanoseconds(st.st_mtim)) + " " +
         std::to_string(Nanoseconds(st.st_ctim));
}

// A digest of the first page of the file: the SQLite header (its file change counter at offset
// 24, page size, page count, freelist, schema cookie) and the root of the schema table.
std::string HeaderDigest(const std::string& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "-";
  std::string page(4096, '\0');
  const ssize_t n = ::pread(fd, page.data(), page.size(), 0);
  ::close(fd);
  if (n <= 0) return "-";
  page.resize(static_cast<size_t>(n));
  return Sha256Hex(page).substr(0, 32);
}

std::string StampPath(const std::string& path) { return path + ".verified"; }

}  // namespace

std::string FilesStamp(const std::string& path) {
  return "v2 " + StatPart(path) + " " + HeaderDigest(path) + " " + StatPart(path + "-wal");
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
