// What reading an SQLite index costs the process in resident memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <string_view>

#include "grag/large_array.h"
#include "grag/store.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::TempDir;

// The file-backed pages resident in this process (RssFile of /proc/self/status), in bytes.
int64_t ResidentFileBytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "RssFile:") {
      int64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    std::getline(in, key);
  }
  return -1;
}

// How much RssFile grows while the store scans every entity mention.
int64_t ScanGrowth(Store& store, const ExtractorId& extractor, int64_t& scanned) {
  const int64_t before = ResidentFileBytes();
  scanned = 0;
  EXPECT_TRUE(store
                  .ScanEntityMentions(extractor,
                                      [&](const ChunkEntityMention& m) {
                                        scanned +=
                                            static_cast<int64_t>(m.mention.description.size());
                                        return Status::Ok();
                                      })
                  .ok());
  return ResidentFileBytes() - before;
}

// An index being written (an index run) reads its whole tables once, the merge every mention: its
// readers do not map the file, whose touched pages would stay resident in the process and make
// its memory grow with the index. A read-only index, or one opened to answer questions
// (StoreOptions::map_reads), reads through the map.
TEST(StoreMemoryTest, AnIndexOpenForWritingScansWithoutMappingTheFile) {
  if (ResidentFileBytes() < 0) GTEST_SKIP() << "no RssFile in /proc/self/status";
  TempDir dir;
  const std::string path = dir / "index.db";
  const ExtractorId nlp{ExtractorKind::kNlp, "regex-en/1"};
  constexpr int64_t kBytes = int64_t{48} << 20;
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->UpsertDocument(Document{"d", "d", "d.txt", "text", "h"}).ok());
    ChunkRecord chunk;
    chunk.id = "c";
    chunk.document_id = "d";
    chunk.text = "text";
    chunk.n_tokens = 1;
    ASSERT_TRUE((*store)->ReplaceDocumentChunks("d", {chunk}).ok());
    ExtractionRecord r;
    r.chunk_id = "c";
    r.extractor = nlp;
    // Descriptions that do not compress (the store keeps an extraction's mentions compressed):
    // the file holds about as many bytes as the scan reads.
    std::mt19937 random(7);
    constexpr std::string_view kLetters =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-";
    std::string description(8192, ' ');
    for (int64_t i = 0; i * static_cast<int64_t>(description.size()) < kBytes; ++i) {
      const std::string k = std::to_string(i);
      for (char& c : description) c = kLetters[random() % kLetters.size()];
      r.entities.push_back({"E" + k, "e" + k, "PERSON", k + description});
    }
    ASSERT_TRUE((*store)->PutExtraction(r).ok());
  }  // closed: everything is in the main file

  int64_t scanned = 0;
  {
    auto writable = Store::Open(path);
    ASSERT_TRUE(writable.ok()) << writable.status().ToString();
    const int64_t growth = ScanGrowth(**writable, nlp, scanned);
    EXPECT_GE(scanned, kBytes);
    EXPECT_LT(growth, kBytes / 4) << "RssFile grew by " << growth << " bytes";
  }
  {
    // The map is what the figure above would show: a read-only index's scan leaves the pages
    // resident.
    StoreOptions ro;
    ro.read_only = true;
    auto readonly = Store::Open(path, ro);
    ASSERT_TRUE(readonly.ok()) << readonly.status().ToString();
    const int64_t growth = ScanGrowth(**readonly, nlp, scanned);
    EXPECT_GE(scanned, kBytes);
    EXPECT_GT(growth, kBytes / 2) << "RssFile grew by " << growth << " bytes";
  }
  {
    // Writable but answering questions (grag query caches its replies): its readers map too.
    StoreOptions query;
    query.create_if_missing = false;
    query.map_reads = true;
    auto answering = Store::Open(path, query);
    ASSERT_TRUE(answering.ok()) << answering.status().ToString();
    const int64_t growth = ScanGrowth(**answering, nlp, scanned);
    EXPECT_GE(scanned, kBytes);
    EXPECT_GT(growth, kBytes / 2) << "RssFile grew by " << growth << " bytes";
  }
}

// ---------------------------------------------------------------- large arrays

// The AnonHugePages of the /proc/self/smaps mapping that holds `p`, in KiB (-1: not found).
int64_t HugePagesAt(const void* p) {
  std::ifstream in("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    uintptr_t begin = 0;
    uintptr_t end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
      continue;
    }
    if (inside && line.starts_with("AnonHugePages:")) {
      return std::stoll(line.substr(line.find(':') + 1));
    }
  }
  return -1;
}

bool TransparentHugePagesOn() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(in, mode);
  return mode.find("[always]") != std::string::npos || mode.find("[madvise]") != std::string::npos;
}

TEST(LargeArrayTest, ALargeArrayStartsOnAHugePageAndKeepsItsValuesAsItGrows) {
  LargeVector<float> v;
  for (int i = 0; i < 1000; ++i) v.push_back(static_cast<float>(i));  // small: operator new
  v.resize(3 << 20);                                                  // 12 MiB: mapped
  std::iota(v.begin() + 1000, v.end(), 1000.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data()) % (uintptr_t{2} << 20), 0u);
  for (size_t i = 0; i < v.size(); i += 4099) ASSERT_EQ(v[i], static_cast<float>(i)) << i;
  EXPECT_EQ(v.back(), static_cast<float>(v.size() - 1));
  // Where the kernel offers transparent huge pages, the touched array is backed by them: a few
  // page faults where 4 KiB pages took one per page (grag/large_array.h).
  if (TransparentHugePagesOn()) {
    EXPECT_GT(HugePagesAt(v.data() + (1 << 20)), 0);
  }
  LargeVector<float> moved = std::move(v);
  EXPECT_EQ(moved[12345], 12345.0f);
  LargeVector<float>().swap(moved);
  EXPECT_TRUE(moved.empty());
}

}  // namespace
}  // namespace grag
