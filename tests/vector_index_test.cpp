// VectorIndex: exact scans and the HNSW graph, built from records and from a store.

#include "grag/vector_index.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "grag/store.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

EmbeddingRecord Rec(std::string id, std::vector<float> v, std::string model = "m") {
  EmbeddingRecord r;
  r.owner = EmbeddingOwner::kEntity;
  r.owner_id = std::move(id);
  r.model = std::move(model);
  r.vector = std::move(v);
  return r;
}

std::vector<std::string> Ids(const std::vector<VectorHit>& hits) {
  std::vector<std::string> out;
  for (const auto& h : hits) out.push_back(h.id);
  return out;
}

std::vector<float> RandomVector(std::mt19937& rng, size_t dim) {
  std::normal_distribution<float> normal;
  std::vector<float> v(dim);
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(VectorIndexTest, ExactSearchRanksByCosineSimilarity) {
  std::vector<EmbeddingRecord> recs;
  recs.push_back(Rec("a", {1, 0, 0}));
  recs.push_back(Rec("b", {10, 10, 0}));  // not unit length: normalised on the way in
  recs.push_back(Rec("c", {0, 0, 3}));
  recs.push_back(Rec("d", {-1, 0, 0}));
  auto index = VectorIndex::FromRecords(std::move(recs));
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_FALSE((*index)->approximate());
  EXPECT_EQ((*index)->size(), 4u);
  EXPECT_EQ((*index)->dimension(), 3u);
  EXPECT_EQ((*index)->model(), "m");

  const std::vector<float> query = {2, 0, 0};  // any length
  auto hits = (*index)->Search(query, 3);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_THAT(Ids(*hits), ElementsAre("a", "b", "c"));
  EXPECT_THAT((*hits)[0].similarity, FloatNear(1.0f, 1e-6f));
  EXPECT_THAT((*hits)[1].similarity, FloatNear(static_cast<float>(std::sqrt(0.5)), 1e-6f));
  EXPECT_THAT((*hits)[2].similarity, FloatNear(0.0f, 1e-6f));

  auto all = (*index)->Search(query, 100);  // k beyond the size: everything
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(Ids(*all), ElementsAre("a", "b", "c", "d"));
  EXPECT_THAT(all->back().similarity, FloatNear(-1.0f, 1e-6f));

  auto none = (*index)->Search(query, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(VectorIndexTest, TiesGoToTheSmallerIdWhateverTheInputOrder) {
  std::vector<EmbeddingRecord> recs;
  recs.push_back(Rec("z", {0, 1}));
  recs.push_back(Rec("y", {0, 1}));
  recs.push_back(Rec("x", {0, 1}));
  recs.push_back(Rec("w", {1, 0}));
  auto index = VectorIndex::FromRecords(std::move(recs));
  ASSERT_TRUE(index.ok());
  auto hits = (*index)->Search(std::vector<float>{0, 1}, 2);
  ASSERT_TRUE(hits.ok());
  EXPECT_THAT(Ids(*hits), ElementsAre("x", "y"));
}

TEST(VectorIndexTest, RejectsMixedModelsOrDimensionsAndWrongQueries) {
  {
    std::vector<EmbeddingRecord> recs;
    recs.push_back(Rec("a", {1, 0}, "m1"));
    recs.push_back(Rec("b", {1, 0}, "m2"));
    auto index = VectorIndex::FromRecords(std::move(recs));
    ASSERT_FALSE(index.ok());
    EXPECT_EQ(index.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(index.status().message(), HasSubstr("m2"));
  }
  {
    std::vector<EmbeddingRecord> recs;
    recs.push_back(Rec("a", {1, 0}));
    recs.push_back(Rec("b", {1, 0, 0}));
    EXPECT_EQ(VectorIndex::FromRecords(std::move(recs)).status().code(),
              ErrorCode::kInvalidArgument);
  }
  std::vector<EmbeddingRecord> recs;
  recs.push_back(Rec("a", {1, 0}));
  auto index = VectorIndex::FromRecords(std::move(recs));
  ASSERT_TRUE(index.ok());
  auto hits = (*index)->Search(std::vector<float>{1, 0, 0}, 1);
  ASSERT_FALSE(hits.ok());
  EXPECT_EQ(hits.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(hits.status().message(), HasSubstr("dimension 3"));
}

TEST(VectorIndexTest, EmptyIndexAnswersNothing) {
  auto index = VectorIndex::FromRecords({});
  ASSERT_TRUE(index.ok());
  EXPECT_EQ((*index)->size(), 0u);
  EXPECT_EQ((*index)->dimension(), 0u);
  auto hits = (*index)->Search(std::vector<float>{1, 2, 3}, 5);
  ASSERT_TRUE(hits.ok());
  EXPECT_TRUE(hits->empty());
}

TEST(VectorIndexTest, UnusableVectorsMatchNothing) {
  std::vector<EmbeddingRecord> recs;
  recs.push_back(Rec("zero", {0, 0}));
  recs.push_back(Rec("nan", {NAN, 1}));
  recs.push_back(Rec("ok", {1, 1}));
  auto index = VectorIndex::FromRecords(std::move(recs));
  ASSERT_TRUE(index.ok());
  EXPECT_EQ((*index)->unusable(), 2u);
  auto hits = (*index)->Search(std::vector<float>{1, 0}, 3);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->size(), 3u);
  EXPECT_EQ((*hits)[0].id, "ok");
  EXPECT_THAT((*hits)[1].similarity, FloatNear(0.0f, 1e-6f));
  EXPECT_THAT((*hits)[2].similarity, FloatNear(0.0f, 1e-6f));
}

// Recall of the HNSW graph against exact scans on unstructured random vectors, the hard case.
TEST(VectorIndexTest, HnswAboveTheThresholdKeepsRecallAndIsDeterministic) {
  constexpr size_t kN = 2000;
  constexpr size_t kDim = 32;
  constexpr size_t kK = 10;
  std::mt19937 rng(7);
  std::vector<EmbeddingRecord> recs;
  for (size_t i = 0; i < kN; ++i)
    recs.push_back(Rec("e" + std::to_string(i), RandomVector(rng, kDim)));

  VectorIndexOptions exact_options;
  exact_options.max_exact_floats = kN * kDim;
  VectorIndexOptions hnsw_options;
  hnsw_options.max_exact_floats = kN * kDim - 1;  // just past the threshold: HNSW
  auto exact = VectorIndex::FromRecords(recs, exact_options);
  auto hnsw = VectorIndex::FromRecords(recs, hnsw_options);
  auto hnsw_again = VectorIndex::FromRecords(recs, hnsw_options);
  ASSERT_TRUE(exact.ok() && hnsw.ok() && hnsw_again.ok());
  EXPECT_FALSE((*exact)->approximate());
  EXPECT_TRUE((*hnsw)->approximate());

  size_t found = 0;
  constexpr size_t kQueries = 100;
  for (size_t q = 0; q < kQueries; ++q) {
    const auto query = RandomVector(rng, kDim);
    auto want = (*exact)->Search(query, kK);
    auto got = (*hnsw)->Search(query, kK);
    auto got_again = (*hnsw_again)->Search(query, kK);
    ASSERT_TRUE(want.ok() && got.ok() && got_again.ok());
    ASSERT_EQ(got->size(), kK);
    EXPECT_EQ(Ids(*got), Ids(*got_again)) << "same vectors and seed, same graph";
    const auto want_ids = Ids(*want);
    const std::set<std::string> truth(want_ids.begin(), want_ids.end());
    for (const auto& h : *got) found += truth.count(h.id);
    for (size_t i = 1; i < got->size(); ++i) {
      EXPECT_GE((*got)[i - 1].similarity, (*got)[i].similarity);
    }
  }
  const double recall = static_cast<double>(found) / (kQueries * kK);
  EXPECT_GE(recall, 0.95) << "recall@10 = " << recall;
}

TEST(VectorIndexTest, ConcurrentSearchesAgreeWithSerialOnes) {
  constexpr size_t kN = 1000;
  constexpr size_t kDim = 16;
  std::mt19937 rng(11);
  std::vector<EmbeddingRecord> recs;
  for (size_t i = 0; i < kN; ++i)
    recs.push_back(Rec("e" + std::to_string(i), RandomVector(rng, kDim)));
  VectorIndexOptions options;
  options.max_exact_floats = 0;
  auto index = VectorIndex::FromRecords(std::move(recs), options);
  ASSERT_TRUE(index.ok());
  ASSERT_TRUE((*index)->approximate());

  std::vector<std::vector<float>> queries;
  std::vector<std::vector<std::string>> serial;
  for (int i = 0; i < 100; ++i) {
    queries.push_back(RandomVector(rng, kDim));
    serial.push_back(Ids((*index)->Search(queries.back(), 10).value()));
  }
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < queries.size(); ++i) {
        auto hits = (*index)->Search(queries[i], 10);
        if (!hits.ok() || Ids(*hits) != serial[i]) ++mismatches[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

TEST(VectorIndexTest, BuildsFromTheStoresVectorsOfOneOwnerKind) {
  testing::TempDir dir;
  auto store = Store::Open(dir / "index.db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<EmbeddingRecord> recs;
  recs.push_back(Rec("1", {1, 0, 0}, "embed-model"));
  recs.push_back(Rec("2", {0, 1, 0}, "embed-model"));
  const Status put = (*store)->PutEmbeddings(recs);
  ASSERT_TRUE(put.ok()) << put.ToString();
  EmbeddingRecord chunk = Rec("chunk-a", {1, 0}, "other-model");
  chunk.owner = EmbeddingOwner::kChunk;
  const Status put_chunk = (*store)->PutEmbeddings({chunk});
  ASSERT_TRUE(put_chunk.ok()) << put_chunk.ToString();

  auto index = VectorIndex::Build(**store, EmbeddingOwner::kEntity);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ((*index)->size(), 2u);
  EXPECT_EQ((*index)->model(), "embed-model");
  auto hits = (*index)->Search(std::vector<float>{0, 0.9f, 0.1f}, 1);
  ASSERT_TRUE(hits.ok());
  EXPECT_THAT(Ids(*hits), ElementsAre("2"));

  auto reports = VectorIndex::Build(**store, EmbeddingOwner::kReport);
  ASSERT_TRUE(reports.ok());
  EXPECT_EQ((*reports)->size(), 0u);
}

}  // namespace
}  // namespace grag
