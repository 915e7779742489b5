// What reading an SQLite index costs the process in resident memory.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

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
    const std::string description(8192, 'x');
    for (int64_t i = 0; i * static_cast<int64_t>(description.size()) < kBytes; ++i) {
      const std::string k = std::to_string(i);
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

}  // namespace
}  // namespace grag
