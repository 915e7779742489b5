// A compact index (issue 37): vectors kept once, in f32, f16 or int8, and read back within
// tolerance (searches too); schema 7's migration of an older index; the reply cache compressed
// and still answering; pruning it.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "grag/engine.h"
#include "grag/llm.h"
#include "grag/store.h"
#include "grag/vector_index.h"
#include "store/reply_codec.h"
#include "store/sqlite/store_impl.h"
#include "store/vector_codec.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::TempDir;

// A raw SQLite connection, to look at what the store wrote (or write as an older build did).
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
  }
  ~RawDb() { sqlite3_close(db_); }
  void Exec(const std::string& sql) {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << sql << ": " << (err ? err : "");
    sqlite3_free(err);
  }
  std::string Text(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
    std::string out;
    if (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
      const unsigned char* p = sqlite3_column_text(stmt, 0);
      if (p != nullptr) out = reinterpret_cast<const char*>(p);
    }
    sqlite3_finalize(stmt);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

std::vector<float> RandomVector(std::mt19937& rng, size_t dim) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(dim);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<float> RoundTrip(const std::vector<float>& v, VectorEncoding e) {
  const std::string bytes = store::EncodeVector(v, e);
  EXPECT_EQ(bytes.size(), store::EncodedVectorSize(e, v.size()));
  std::vector<float> back(v.size());
  EXPECT_TRUE(store::DecodeVector(bytes, e, back).ok());
  return back;
}

TEST(VectorCodecTest, HalfPrecisionRoundsToNearestAndClampsToItsRange) {
  EXPECT_EQ(store::FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(store::FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(store::FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(store::FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(store::FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(store::FloatToHalf(1e9f), 0x7bff);                   // clamped, not infinite
  EXPECT_EQ(store::FloatToHalf(5.960464477539063e-8f), 0x0001);  // the smallest subnormal
  EXPECT_EQ(store::FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);     // a tie rounds to even
  EXPECT_EQ(store::FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);
  EXPECT_TRUE(std::isinf(store::HalfToFloat(store::FloatToHalf(INFINITY))));
  EXPECT_TRUE(std::isnan(store::HalfToFloat(store::FloatToHalf(NAN))));
  // Every half survives the trip through float and back.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) continue;  // NaNs
    EXPECT_EQ(store::FloatToHalf(store::HalfToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(VectorCodecTest, EachEncodingRoundTripsWithinItsPrecision) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const std::vector<float> v = RandomVector(rng, 384);
    EXPECT_EQ(RoundTrip(v, VectorEncoding::kF32), v);
    const std::vector<float> h = RoundTrip(v, VectorEncoding::kF16);
    float max_abs = 0;
    for (float x : v) max_abs = std::max(max_abs, std::fabs(x));
    const std::vector<float> q = RoundTrip(v, VectorEncoding::kInt8);
    for (size_t i = 0; i < v.size(); ++i) {
      EXPECT_NEAR(h[i], v[i], std::fabs(v[i]) / 1024 + 1e-7f) << i;
      EXPECT_NEAR(q[i], v[i], max_abs / 127 / 2 * 1.0001f) << i;
    }
  }
  // A zero vector stays zero (no division by a zero scale).
  EXPECT_EQ(RoundTrip(std::vector<float>(8, 0.0f), VectorEncoding::kInt8),
            std::vector<float>(8, 0.0f));
}

TEST(VectorCodecTest, ABlobOfTheWrongSizeIsCorruption) {
  std::vector<float> out(4);
  EXPECT_EQ(store::DecodeVector(std::string(15, '\0'), VectorEncoding::kF32, out).code(),
            ErrorCode::kCorruption);
  EXPECT_EQ(store::DecodeVector(std::string(7, '\0'), VectorEncoding::kF16, out).code(),
            ErrorCode::kCorruption);
  EXPECT_EQ(store::DecodeVector(std::string(3, '\0'), VectorEncoding::kInt8, out).code(),
            ErrorCode::kCorruption);
  EXPECT_TRUE(store::DecodeVector(std::string(8, '\0'), VectorEncoding::kInt8, out).ok());
}

class CompactStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.File("index.db");
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }

  std::vector<EmbeddingRecord> Records(size_t n, size_t dim, VectorEncoding e, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<EmbeddingRecord> out;
    for (size_t i = 0; i < n; ++i) {
      EmbeddingRecord r;
      r.owner = EmbeddingOwner::kChunk;
      r.owner_id = "c" + std::to_string(1000 + i);
      r.model = "m";
      r.vector = RandomVector(rng, dim);
      r.input_hash = r.owner_id;
      r.encoding = e;
      out.push_back(std::move(r));
    }
    return out;
  }

  TempDir dir_;
  std::string path_;
  std::unique_ptr<Store> store_;
};

TEST_F(CompactStoreTest, VectorsAreStoredInTheirEncodingOnceAndReadBackWithinTolerance) {
  for (VectorEncoding e : {VectorEncoding::kF32, VectorEncoding::kF16, VectorEncoding::kInt8}) {
    SCOPED_TRACE(std::string(VectorEncodingName(e)));
    ASSERT_TRUE(store_->DeleteEmbeddings(EmbeddingOwner::kChunk).ok());
    const auto records = Records(20, 64, e, 3);
    ASSERT_TRUE(store_->PutEmbeddings(records).ok());
    ASSERT_TRUE(store_->RefreshQueryImages().ok());
    RawDb raw(path_);
    EXPECT_EQ(raw.Text("SELECT DISTINCT length(vector) FROM embeddings"),
              std::to_string(store::EncodedVectorSize(e, 64)));
    EXPECT_EQ(raw.Text("SELECT DISTINCT encoding FROM embeddings"), VectorEncodingName(e));
    // No second copy of the vectors anywhere.
    EXPECT_EQ(raw.Text("SELECT count(*) FROM query_images WHERE name LIKE 'vectors:%'"), "0");
    auto one = store_->GetEmbedding(EmbeddingOwner::kChunk, "c1003");
    ASSERT_TRUE(one.ok() && one->has_value());
    EXPECT_EQ((*one)->encoding, e);
    EXPECT_EQ((*one)->vector, RoundTrip(records[3].vector, e));
    auto packed = store_->ListPackedEmbeddings(EmbeddingOwner::kChunk);
    ASSERT_TRUE(packed.ok()) << packed.status().ToString();
    ASSERT_EQ(packed->ids.size(), 20u);
    EXPECT_EQ(packed->dimension, 64);
    for (size_t i = 0; i < 64; ++i) {
      EXPECT_NEAR(packed->values[3 * 64 + i], records[3].vector[i], 0.05f);
    }
  }
}

// What retrieval sees: the nearest neighbours of f16 and int8 vectors are f32's.
TEST_F(CompactStoreTest, SearchesOverEncodedVectorsFindWhatF32Finds) {
  const size_t n = 400, dim = 128, k = 10;
  std::mt19937 rng(11);
  std::vector<std::vector<float>> queries;
  for (int q = 0; q < 50; ++q) queries.push_back(RandomVector(rng, dim));
  std::map<VectorEncoding, std::vector<std::vector<std::string>>> hits;
  for (VectorEncoding e : {VectorEncoding::kF32, VectorEncoding::kF16, VectorEncoding::kInt8}) {
    ASSERT_TRUE(store_->DeleteEmbeddings(EmbeddingOwner::kChunk).ok());
    ASSERT_TRUE(store_->PutEmbeddings(Records(n, dim, e, 5)).ok());
    auto index = VectorIndex::Build(*store_, EmbeddingOwner::kChunk);
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    for (const auto& q : queries) {
      auto found = (*index)->Search(q, k);
      ASSERT_TRUE(found.ok());
      std::vector<std::string> ids;
      for (const VectorHit& h : *found) ids.push_back(h.id);
      hits[e].push_back(ids);
    }
  }
  for (VectorEncoding e : {VectorEncoding::kF16, VectorEncoding::kInt8}) {
    size_t shared = 0, top1 = 0;
    for (size_t q = 0; q < queries.size(); ++q) {
      const auto& base = hits[VectorEncoding::kF32][q];
      const std::set<std::string> want(base.begin(), base.end());
      for (const auto& id : hits[e][q]) shared += want.count(id);
      top1 += hits[e][q].front() == base.front();
    }
    const double overlap = static_cast<double>(shared) / static_cast<double>(queries.size() * k);
    // Random vectors have close neighbours: the hardest case for fewer bits.
    EXPECT_GE(overlap, e == VectorEncoding::kF16 ? 0.99 : 0.95) << VectorEncodingName(e);
    EXPECT_GE(top1, queries.size() - (e == VectorEncoding::kF16 ? 0 : 2)) << VectorEncodingName(e);
  }
}

TEST_F(CompactStoreTest, ReencodingRewritesOnlyTheVectorsInAnotherEncoding) {
  const auto records = Records(10, 32, VectorEncoding::kF32, 9);
  ASSERT_TRUE(store_->PutEmbeddings(records).ok());
  auto recoded = store_->ReencodeEmbeddings(VectorEncoding::kInt8);
  ASSERT_TRUE(recoded.ok()) << recoded.status().ToString();
  EXPECT_EQ(*recoded, 10);
  EXPECT_EQ(*store_->ReencodeEmbeddings(VectorEncoding::kInt8), 0);
  RawDb raw(path_);
  EXPECT_EQ(raw.Text("SELECT sum(length(vector)) FROM embeddings"), std::to_string(10 * (32 + 4)));
  auto one = store_->GetEmbedding(EmbeddingOwner::kChunk, "c1000");
  ASSERT_TRUE(one.ok() && one->has_value());
  EXPECT_EQ((*one)->vector, RoundTrip(records[0].vector, VectorEncoding::kInt8));
  EXPECT_EQ((*one)->input_hash, "c1000");  // kept: the re-encoding is not a new embedding
}

// An index of schema 6 (vectors as f32 rows plus a vectors image) opens migrated: the same
// values, no image, and the embeddings table's triggers still delete a chunk's vector with it.
TEST(CompactMigrationTest, SchemaSixIndexOpensWithItsVectorsOnceAndUnchanged) {
  TempDir dir;
  const std::string path = dir.File("index.db");
  {
    auto old = store::OpenStore(path, {}, store::DefaultMigrations().first(6));
    ASSERT_TRUE(old.ok()) << old.status().ToString();
    ASSERT_TRUE((*old)->UpsertDocument({"d", "d", "/d", "alpha beta", "h"}).ok());
  }
  {
    RawDb raw(path);
    // As schema 6 held a chunk (this build's store also writes its offsets, schema 8).
    raw.Exec(
        "INSERT INTO chunks (id, document_id, chunk_index, text, n_tokens, start_token) "
        "VALUES ('c1', 'd', 0, 'alpha beta', 2, 0);");
    // 1.0, 0.5, -2.0 as little-endian floats, as schema 6 kept them.
    raw.Exec(
        "INSERT INTO embeddings (owner_kind, owner_id, model, dimension, vector, input_hash) "
        "VALUES ('chunk', 'c1', 'm', 3, x'0000803f0000003f000000c0', 'c1'), "
        "('entity', '7', 'm', 3, x'0000803f0000003f000000c0', 'h7');"
        "INSERT INTO query_images (name, data) VALUES ('vectors:chunk', x'00');");
    EXPECT_EQ(raw.Text("PRAGMA user_version"), "6");
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Info()->schema_version, Store::LatestSchemaVersion());
  auto packed = (*store)->ListPackedEmbeddings(EmbeddingOwner::kChunk);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  ASSERT_EQ(packed->ids, std::vector<std::string>{"c1"});
  EXPECT_EQ(std::vector<float>(packed->values.begin(), packed->values.end()),
            (std::vector<float>{1.0f, 0.5f, -2.0f}));
  auto entity = (*store)->GetEmbedding(EmbeddingOwner::kEntity, "7");
  ASSERT_TRUE(entity.ok() && entity->has_value());
  EXPECT_EQ((*entity)->encoding, VectorEncoding::kF32);
  EXPECT_EQ(*(*store)->ReencodeEmbeddings(VectorEncoding::kF16), 2);
  ASSERT_TRUE((*store)->DeleteDocument("d").ok());
  store->reset();
  RawDb raw(path);
  EXPECT_EQ(raw.Text("SELECT count(*) FROM query_images WHERE name LIKE 'vectors:%'"), "0");
  EXPECT_EQ(raw.Text("SELECT count(*) FROM embeddings WHERE owner_kind = 'chunk'"), "0");
  EXPECT_EQ(raw.Text("SELECT group_concat(encoding || ':' || length(vector)) FROM embeddings"),
            "f16:6");
  EXPECT_EQ(raw.Text("PRAGMA integrity_check"), "ok");
}

TEST(ReplyCodecTest, RepliesRoundTripAndShortOnesStayPlain) {
  std::string reply = "{\"entities\": [";
  for (int i = 0; i < 50; ++i) reply += "{\"name\": \"Entity " + std::to_string(i) + "\"},";
  reply += "]}";
  auto packed = store::CompressReply(reply);
  ASSERT_TRUE(packed.has_value());
  EXPECT_LT(packed->size(), reply.size() / 3);
  EXPECT_EQ(*store::DecompressReply(*packed), reply);
  EXPECT_FALSE(store::CompressReply("short").has_value());
  EXPECT_EQ(store::DecompressReply("Z1\x05").status().code(), ErrorCode::kCorruption);
  std::string damaged = *packed;
  damaged[damaged.size() / 2] ^= 0x55;
  EXPECT_FALSE(store::DecompressReply(damaged).ok());
}

TEST_F(CompactStoreTest, CompressedRepliesAreStoredSmallerAndStillAnswer) {
  const std::string long_reply(2000, 'x');
  KeyValueCache& cache = store_->ReplyCache();
  ASSERT_TRUE(cache.Put("k-long", long_reply, "m", "chat").ok());
  ASSERT_TRUE(cache.Put("k-short", "{}", "m", "chat").ok());
  ASSERT_TRUE(store_->FlushDeferred().ok());
  {
    RawDb raw(path_);
    EXPECT_EQ(raw.Text("SELECT typeof(value) FROM llm_cache WHERE key = 'k-long'"), "blob");
    EXPECT_LT(std::stoi(raw.Text("SELECT length(value) FROM llm_cache WHERE key = 'k-long'")), 100);
    EXPECT_EQ(raw.Text("SELECT typeof(value) FROM llm_cache WHERE key = 'k-short'"), "text");
    // What an older build wrote: plain text.
    raw.Exec("INSERT INTO llm_cache (key, value) VALUES ('k-old', '" + std::string(300, 'y') +
             "')");
  }
  EXPECT_EQ(cache.Get("k-long"), long_reply);
  EXPECT_EQ(cache.Get("k-short"), "{}");
  EXPECT_EQ(cache.Get("k-old"), std::string(300, 'y'));

  // A model asked again answers from the compressed entry, with no call.
  ScriptedModelOptions options;
  options.cache = &cache;
  options.model = "m1";
  ChatRequest req;
  req.messages = {{"user", "What did the index say? " + std::string(200, 'q')}};
  {
    ScriptedChatModel first(options);
    first.Push(std::string(1000, 'a'));
    ASSERT_TRUE(first.Chat(req).ok());
  }
  ASSERT_TRUE(store_->FlushDeferred().ok());
  RawDb raw(path_);
  EXPECT_EQ(raw.Text("SELECT count(*) FROM llm_cache WHERE typeof(value) = 'blob'"), "2");
  ScriptedChatModel second(options);  // nothing queued: only the cache can answer
  auto again = second.Chat(req);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->cache_hit);
  EXPECT_EQ(again->content, std::string(1000, 'a'));
  EXPECT_EQ(second.RequestCount(), 0u);
}

TEST_F(CompactStoreTest, PruningRemovesWhatTheLastCompleteRunDidNotNeedAndShrinksTheFile) {
  {
    RawDb raw(path_);
    std::string values;
    for (int i = 0; i < 300; ++i) {
      values += std::string(i ? "," : "") + "('old" + std::to_string(i) +
                "', randomblob(4000), '2020-01-01T00:00:00.000Z')";
    }
    raw.Exec("INSERT INTO llm_cache (key, value, created_at) VALUES " + values);
    raw.Exec(
        "INSERT INTO llm_cache (key, value, created_at) VALUES ('new', 'kept', "
        "'2030-01-01T00:00:00.000Z');"
        "INSERT INTO runs (command, status, started_at) VALUES ('index', 'ok', "
        "'2025-01-01T00:00:00.000Z'), ('index', 'failed', '2029-01-01T00:00:00.000Z')");
  }
  CachePruneOptions dry;
  dry.dry_run = true;
  auto counted = store_->PruneReplyCache(dry);
  ASSERT_TRUE(counted.ok()) << counted.status().ToString();
  EXPECT_EQ(counted->before, "2025-01-01T00:00:00.000Z");  // the last *complete* run's start
  EXPECT_EQ(counted->entries, 300);
  EXPECT_EQ(counted->entries_left, 1);
  EXPECT_EQ(counted->file_bytes_after, counted->file_bytes_before);
  auto pruned = store_->PruneReplyCache({});
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(pruned->entries, 300);
  EXPECT_GT(pruned->value_bytes, 300 * 3999);
  EXPECT_LT(pruned->file_bytes_after, pruned->file_bytes_before - 1'000'000);
  EXPECT_EQ(store_->ReplyCache().Get("new"), "kept");
  EXPECT_FALSE(store_->ReplyCache().Get("old1").has_value());
  EXPECT_LT(std::filesystem::file_size(path_), 400'000u);

  // By age: everything before a given time.
  CachePruneOptions by_age;
  by_age.before = "2031-01-01T00:00:00.000Z";
  EXPECT_EQ(store_->PruneReplyCache(by_age)->entries, 1);
}

// A report's full_content that is the rendering of its title, summary and findings (what both
// generators write) is not stored a second time: the row keeps '' and every reader (the store,
// `grag sql`'s reports view) renders it. Any other full_content is kept as written.
TEST_F(CompactStoreTest, AReportsRenderingIsStoredOnceAndReadBackWhole) {
  std::vector<int64_t> ids;
  for (const char* name : {"Alice", "Bram"}) {
    EntityRecord e;
    e.name = name;
    e.name_key = std::string(name) == "Alice" ? "alice" : "bram";
    e.type = "PERSON";
    auto id = store_->UpsertEntity(e);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids.push_back(*id);
  }
  std::vector<CommunityRecord> comms(2);
  for (size_t i = 0; i < 2; ++i) {
    comms[i].id = static_cast<int64_t>(i) + 1;
    comms[i].entity_ids = {ids[i]};
  }
  ASSERT_TRUE(store_->ReplaceCommunities(ClusteringRecord{}, comms).ok());
  ReportRecord rendered;
  rendered.community_id = 1;
  rendered.title = "Alice and her ledger";
  rendered.summary = "Alice keeps the harbour's ledger.";
  rendered.findings = {{"She counts ships", "Every morning, \"quoted\" and ü.", {"Alice"}},
                       {"A headline alone", "", {}}};
  rendered.full_content = RenderReportMarkdown(rendered.title, rendered.summary, rendered.findings);
  ASSERT_EQ(rendered.full_content,
            "# Alice and her ledger\n\nAlice keeps the harbour's ledger.\n\n## She counts "
            "ships\n\nEvery morning, \"quoted\" and ü.\n\n## A headline alone");
  ReportRecord custom = rendered;
  custom.community_id = 2;
  custom.full_content = "# Written otherwise\n\nby hand";
  ASSERT_TRUE(store_->PutReport(rendered).ok());
  ASSERT_TRUE(store_->PutReport(custom).ok());
  for (const ReportRecord* want : {&rendered, &custom}) {
    auto got = store_->GetReport(want->community_id);
    ASSERT_TRUE(got.ok() && got->has_value());
    EXPECT_EQ((*got)->full_content, want->full_content);
    auto listed = store_->ListReports(std::nullopt, /*findings=*/false);
    ASSERT_TRUE(listed.ok());
    for (const ReportRecord& r : *listed) {
      if (r.community_id == want->community_id) {
        EXPECT_EQ(r.full_content, want->full_content);
      }
    }
    auto sql = store_->RunReadOnlySql("SELECT full_content FROM reports WHERE community_id = " +
                                          std::to_string(want->community_id),
                                      10, std::chrono::milliseconds(0));
    ASSERT_TRUE(sql.ok()) << sql.status().ToString();
    ASSERT_EQ(sql->rows.size(), 1u);
    EXPECT_EQ(sql->rows[0][0].text, want->full_content);
  }
  store_.reset();
  RawDb raw(path_);
  EXPECT_EQ(raw.Text("SELECT quote(full_content) FROM reports WHERE community_id = 1"), "''");
  EXPECT_EQ(raw.Text("SELECT full_content FROM reports WHERE community_id = 2"),
            custom.full_content);
}

TEST(CacheCutoffTest, ACountAndAUnitBeforeNow) {
  const auto now = std::chrono::sys_days(std::chrono::year(2026) / 12 / 5) + std::chrono::hours(10);
  EXPECT_EQ(*CacheCutoff("30d", now), "2026-11-05T10:00:00.000Z");
  EXPECT_EQ(*CacheCutoff("2w", now), "2026-11-21T10:00:00.000Z");
  EXPECT_EQ(*CacheCutoff("90m", now), "2026-12-05T08:30:00.000Z");
  for (const char* bad : {"", "d", "30", "30s", "-1d", "1.5h", "99999999999d"}) {
    EXPECT_EQ(CacheCutoff(bad, now).status().code(), ErrorCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace grag
