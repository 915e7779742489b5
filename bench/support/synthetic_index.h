// The synthetic index of the search benchmarks (local_search_bench, retrieval_bench): 100k
// entities and 500k relationships, built once with a fixed seed, or reused from
// $GRAG_LOCAL_BENCH_DB when that file exists (a marker beside it says it was completed).
//
// 1,000 clusters of 100 entities, 80% of the edges inside a cluster, 64-dimensional entity and
// chunk embeddings around a centroid per cluster, 1,000 documents of 20 chunks (each entity
// linked to 2 chunks of its cluster's document), and two community levels (100 + 1,000
// communities) with a report each. Each question names one entity and embeds near its cluster's
// centroid.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "grag/llm.h"
#include "grag/store.h"

namespace grag::bench {

inline constexpr int kEntities = 100'000;
inline constexpr int kRelationships = 500'000;
inline constexpr int kClusterSize = 100;
inline constexpr int kClusters = kEntities / kClusterSize;
inline constexpr int kChunksPerDoc = 20;
inline constexpr int kDim = 64;
inline constexpr uint32_t kSeed = 20240607;
inline constexpr char kModel[] = "bench-embedding";

std::string EntityName(int i);

// The index file, built when missing; the temporary folder (if any) goes with the object.
struct SyntheticIndex {
  std::filesystem::path dir;  // empty when the file came from $GRAG_LOCAL_BENCH_DB
  std::string path;
  ~SyntheticIndex();
};
std::unique_ptr<SyntheticIndex> MakeSyntheticIndex();

// `n` questions, each naming one entity, and an embedding model that embeds each near its
// entity's cluster centroid (model kModel, as the stored vectors).
struct Questions {
  std::vector<std::string> texts;
  std::unique_ptr<ScriptedEmbeddingModel> embedder;
};
Questions MakeQuestions(int n);

// This thread's CPU time: what a machine busy with other work cannot inflate.
double ThreadCpuMicros();
double SecondsSince(std::chrono::steady_clock::time_point since);

// The p50 / p90 of `micros` (sorted in place).
double Percentile(std::vector<double>& micros, double q);

}  // namespace grag::bench
