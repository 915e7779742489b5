// Local search context building (no LLM) on a synthetic index of 100k entities and 500k
// relationships: store queries, vector search, ranking, token counting and budget filling.
//
// The index is generated once per process with a fixed seed (or reused from
// $GRAG_LOCAL_BENCH_DB when that file exists): 1,000 clusters of 100 entities, 80% of the
// edges inside a cluster, 64-dimensional entity embeddings around a centroid per cluster,
// 1,000 documents of 20 chunks (each entity linked to 2 chunks of its cluster's document), and
// two community levels (100 + 1,000 communities) with a report each. Each question names one
// entity and embeds near its cluster's centroid, so the default k = 10 entities are matched.
//
// Three ways the entity vectors are searched:
//   BM_LocalContextOneShot   no kept index: every question loads and scans the stored vectors
//                            (what a one-off `grag query --method local` does)
//   BM_LocalContextKeptExact a VectorIndex kept in memory and scanned (a server, small index)
//   BM_LocalContextKeptHnsw  a kept HNSW index (a server, large index)
// Each iteration is one question; p50 and p90 wall time per question (and p50 of the thread's
// CPU time, which a machine busy with other work does not inflate) are reported in counters (us).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "grag/extract.h"
#include "grag/llm.h"
#include "grag/local_search.h"
#include "grag/store.h"
#include "grag/tokenizer.h"
#include "grag/vector_index.h"

namespace {

using grag::EmbeddingOwner;

constexpr int kEntities = 100'000;
constexpr int kRelationships = 500'000;
constexpr int kClusterSize = 100;
constexpr int kClusters = kEntities / kClusterSize;
constexpr int kChunksPerDoc = 20;
constexpr int kDim = 64;
constexpr uint32_t kSeed = 20240607;
constexpr char kModel[] = "bench-embedding";

std::string EntityName(int i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "Entity %05d", i);
  return buf;
}

// Deterministic pseudo-words, so texts tokenise like prose rather than like one repeated token.
std::string Words(std::mt19937& rng, int n) {
  static const std::vector<std::string> kSyllables = {
      "ka", "lo", "mi",  "ren", "sa",  "tor", "vel", "un",  "pri", "dos", "gal", "che",
      "ba", "nu", "fie", "qua", "zer", "op",  "lin", "ast", "mon", "tek", "ri",  "sol"};
  std::uniform_int_distribution<size_t> syl(0, kSyllables.size() - 1);
  std::uniform_int_distribution<int> len(1, 3);
  std::string s;
  for (int w = 0; w < n; ++w) {
    if (w > 0) s += (w % 12 == 0) ? ". " : " ";
    const int l = len(rng);
    for (int k = 0; k < l; ++k) s += kSyllables[syl(rng)];
  }
  return s + ".";
}

std::vector<float> Normalised(std::vector<float> v) {
  double n = 0;
  for (float x : v) n += static_cast<double>(x) * x;
  const auto scale = static_cast<float>(1.0 / std::sqrt(n));
  for (float& x : v) x *= scale;
  return v;
}

std::vector<std::vector<float>> Centroids() {
  std::mt19937 rng(kSeed + 1);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> c(kClusters, std::vector<float>(kDim));
  for (auto& v : c) {
    for (float& x : v) x = normal(rng);
    v = Normalised(std::move(v));
  }
  return c;
}

void Check(const grag::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}
template <typename T>
T Check(grag::Result<T> r, const char* what) {
  Check(r.status(), what);
  return std::move(r).value();
}

void Generate(grag::Store& store) {
  std::mt19937 rng(kSeed);
  const auto centroids = Centroids();
  std::normal_distribution<float> normal;
  auto tx = Check(store.Begin(), "begin");

  std::vector<std::string> chunk_ids;  // document d's chunk c at d * kChunksPerDoc + c
  for (int d = 0; d < kClusters; ++d) {
    grag::Document doc;
    doc.id = "docs/cluster-" + std::to_string(d) + ".txt";
    doc.title = doc.id;
    doc.source_path = doc.id;
    doc.content_hash = "h" + std::to_string(d);
    std::vector<grag::ChunkRecord> chunks;
    for (int c = 0; c < kChunksPerDoc; ++c) {
      grag::ChunkRecord ch;
      ch.id = doc.id + "#" + std::to_string(c);
      ch.document_id = doc.id;
      ch.index = c;
      ch.text = Words(rng, 220);  // ~300-400 tokens, a typical chunk
      doc.text += ch.text + "\n";
      chunks.push_back(std::move(ch));
      chunk_ids.push_back(chunks.back().id);
    }
    Check(store.UpsertDocument(doc).status(), "document");
    Check(store.ReplaceDocumentChunks(doc.id, chunks).status(), "chunks");
  }

  std::vector<int64_t> ids(kEntities);
  std::uniform_int_distribution<int> chunk_of(0, kChunksPerDoc - 1);
  for (int i = 0; i < kEntities; ++i) {
    grag::EntityRecord e;
    e.name = EntityName(i);
    e.name_key = grag::NormalizeEntityName(e.name);
    e.type = "organization";
    e.description = Words(rng, 30);
    ids[static_cast<size_t>(i)] = Check(store.UpsertEntity(e), "entity");
    const int doc = i / kClusterSize;
    const int a = chunk_of(rng);
    const int b = (a + 1 + chunk_of(rng) % (kChunksPerDoc - 1)) % kChunksPerDoc;
    Check(store.SetEntityChunks(ids[static_cast<size_t>(i)],
                                {chunk_ids[static_cast<size_t>(doc * kChunksPerDoc + a)],
                                 chunk_ids[static_cast<size_t>(doc * kChunksPerDoc + b)]}),
          "entity chunks");
  }

  // Pairs first, then inserted in key order: the store's (source, target) index then grows at
  // its end instead of at random pages, which is what makes a bulk load of this size fast.
  std::unordered_set<uint64_t> seen;
  std::vector<uint64_t> pairs;
  pairs.reserve(kRelationships);
  std::uniform_int_distribution<int> any(0, kEntities - 1);
  std::uniform_int_distribution<int> in_cluster(0, kClusterSize - 1);
  std::uniform_real_distribution<double> unit(0, 1);
  while (static_cast<int>(pairs.size()) < kRelationships) {
    const int a = any(rng);
    const int b = unit(rng) < 0.8 ? (a / kClusterSize) * kClusterSize + in_cluster(rng) : any(rng);
    if (a == b) continue;
    const auto lo = static_cast<uint64_t>(std::min(a, b));
    const auto hi = static_cast<uint64_t>(std::max(a, b));
    if (seen.insert(lo << 32 | hi).second) pairs.push_back(lo << 32 | hi);
  }
  std::sort(pairs.begin(), pairs.end());
  std::uniform_int_distribution<int> weight(1, 10);
  for (uint64_t p : pairs) {
    grag::RelationshipRecord r;
    r.source_id = ids[p >> 32];
    r.target_id = ids[p & 0xffffffffu];
    r.weight = weight(rng);
    r.description = Words(rng, 14);
    Check(store.UpsertRelationship(r).status(), "relationship");
  }
  Check(store.RecomputeGraphStats(), "graph stats");

  // Level 0: 100 communities of 10 clusters; level 1: one community per cluster.
  std::vector<grag::CommunityRecord> communities;
  for (int top = 0; top < kClusters / 10; ++top) {
    grag::CommunityRecord c;
    c.id = top + 1;
    c.level = 0;
    for (int i = top * 10 * kClusterSize; i < (top + 1) * 10 * kClusterSize; ++i) {
      c.entity_ids.push_back(ids[static_cast<size_t>(i)]);
    }
    communities.push_back(std::move(c));
  }
  for (int cl = 0; cl < kClusters; ++cl) {
    grag::CommunityRecord c;
    c.id = 1000 + cl;
    c.level = 1;
    c.parent_id = cl / 10 + 1;
    for (int i = cl * kClusterSize; i < (cl + 1) * kClusterSize; ++i) {
      c.entity_ids.push_back(ids[static_cast<size_t>(i)]);
    }
    communities.push_back(std::move(c));
  }
  Check(store.ReplaceCommunities(grag::ClusteringRecord{}, communities).status(), "communities");
  for (const auto& c : communities) {
    grag::ReportRecord r;
    r.community_id = c.id;
    r.title = "Community " + std::to_string(c.id);
    r.summary = Words(rng, 60);
    r.full_content = "# " + r.title + "\n\n" + r.summary + "\n\n" + Words(rng, 250);
    Check(store.PutReport(r), "report");
  }

  std::vector<grag::EmbeddingRecord> batch;
  for (int i = 0; i < kEntities; ++i) {
    std::vector<float> v = centroids[static_cast<size_t>(i / kClusterSize)];
    for (float& x : v) x += 0.08f * normal(rng);
    grag::EmbeddingRecord e;
    e.owner = EmbeddingOwner::kEntity;
    e.owner_id = std::to_string(ids[static_cast<size_t>(i)]);
    e.model = kModel;
    e.vector = Normalised(std::move(v));
    batch.push_back(std::move(e));
    if (batch.size() == 10'000) {
      Check(store.PutEmbeddings(batch), "embeddings");
      batch.clear();
    }
  }
  Check(tx.Commit(), "commit");
}

struct Fixture {
  std::filesystem::path dir;
  std::unique_ptr<grag::Store> store;
  const grag::Tokenizer* tokenizer = nullptr;
  std::unique_ptr<grag::ScriptedEmbeddingModel> embedder;
  std::unique_ptr<grag::VectorIndex> exact;
  std::unique_ptr<grag::VectorIndex> hnsw;
  std::vector<std::string> questions;

  ~Fixture() {
    store.reset();
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
};

double ThreadCpuMicros() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

Fixture& Get() {
  // Shared by the benchmarks; destroyed at exit, which removes the temporary index.
  static const std::unique_ptr<Fixture> f = [] {
    auto fx = std::make_unique<Fixture>();
    std::string path;
    if (const char* env = std::getenv("GRAG_LOCAL_BENCH_DB"); env != nullptr && *env != 0) {
      path = env;
    } else {
      std::string tmpl =
          (std::filesystem::temp_directory_path() / "grag-local-bench-XXXXXX").string();
      fx->dir = ::mkdtemp(tmpl.data());
      path = (fx->dir / "index.db").string();
    }
    // A marker beside the file says generation finished: an interrupted run's file is redone.
    const std::string done = path + ".complete";
    const bool reuse = std::filesystem::exists(done) && std::filesystem::exists(path);
    if (!reuse) {
      for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
    }
    fx->store = Check(grag::Store::Open(path), "open");
    if (!reuse) {
      const auto t0 = std::chrono::steady_clock::now();
      const std::clock_t c0 = std::clock();
      Generate(*fx->store);
      std::fprintf(stderr,
                   "built the synthetic index (%d entities, %d relationships) in %.1f s "
                   "(%.1f s of CPU)\n",
                   kEntities, kRelationships, Seconds(t0),
                   static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
      std::FILE* marker = std::fopen(done.c_str(), "w");
      if (marker != nullptr) std::fclose(marker);
    } else {
      std::fprintf(stderr, "reusing the synthetic index %s\n", path.c_str());
    }
    fx->tokenizer = Check(grag::Tokenizer::Get("o200k_base"), "tokenizer");

    const auto centroids = Centroids();
    std::mt19937 rng(kSeed + 2);
    std::uniform_int_distribution<int> entity(0, kEntities - 1);
    std::normal_distribution<float> normal;
    std::map<std::string, std::vector<float>> table;
    for (int q = 0; q < 64; ++q) {
      const int e = entity(rng);
      std::string question =
          "What do we know about " + EntityName(e) + " and the organisations it works with?";
      std::vector<float> v = centroids[static_cast<size_t>(e / kClusterSize)];
      for (float& x : v) x += 0.02f * normal(rng);
      table[question] = Normalised(std::move(v));
      fx->questions.push_back(std::move(question));
    }
    fx->embedder = std::make_unique<grag::ScriptedEmbeddingModel>(
        [table](const std::string& input) -> grag::Result<std::vector<float>> {
          return table.at(input);
        },
        kModel);

    auto t0 = std::chrono::steady_clock::now();
    grag::VectorIndexOptions exact;
    exact.max_exact_floats = std::numeric_limits<size_t>::max();
    fx->exact =
        Check(grag::VectorIndex::Build(*fx->store, EmbeddingOwner::kEntity, exact), "exact");
    std::fprintf(stderr, "loaded %zu entity vectors for exact search in %.2f s\n",
                 fx->exact->size(), Seconds(t0));
    // 100k x 64 is under the default exact threshold; force the graph to measure it.
    grag::VectorIndexOptions hnsw;
    hnsw.max_exact_floats = 0;
    t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    fx->hnsw = Check(grag::VectorIndex::Build(*fx->store, EmbeddingOwner::kEntity, hnsw), "hnsw");
    std::fprintf(stderr, "built the HNSW index in %.1f s (%.1f s of CPU)\n", Seconds(t0),
                 static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
    return fx;
  }();
  return *f;
}

void Run(benchmark::State& state, const grag::VectorIndex* index) {
  Fixture& f = Get();
  grag::LocalSearchOptions options;  // the defaults: k 10, floor 0.5, 12,000 tokens
  std::vector<double> micros;
  std::vector<double> cpu_micros;  // this thread's CPU time: what a busy machine cannot inflate
  size_t q = 0;
  int64_t items = 0;
  int64_t tokens = 0;
  int64_t matched = 0;
  for (auto _ : state) {
    const std::string& question = f.questions[q++ % f.questions.size()];
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = ThreadCpuMicros();
    auto ctx =
        grag::BuildLocalContext(*f.store, f.embedder.get(), *f.tokenizer, question, options, index);
    micros.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    cpu_micros.push_back(ThreadCpuMicros() - c0);
    if (!ctx.ok()) {
      state.SkipWithError(ctx.status().ToString().c_str());
      return;
    }
    items += static_cast<int64_t>(ctx->items.size());
    tokens += ctx->used_tokens;
    matched += static_cast<int64_t>(ctx->matches.size());
    benchmark::DoNotOptimize(ctx->chunks_text.data());
  }
  std::sort(micros.begin(), micros.end());
  std::sort(cpu_micros.begin(), cpu_micros.end());
  const auto n = static_cast<double>(micros.size());
  const auto p90 = static_cast<size_t>(std::floor(0.9 * (n - 1)));
  state.counters["p50_us"] = micros[micros.size() / 2];
  state.counters["p90_us"] = micros[p90];
  state.counters["p50_cpu_us"] = cpu_micros[cpu_micros.size() / 2];
  state.counters["items"] = static_cast<double>(items) / n;
  state.counters["tokens"] = static_cast<double>(tokens) / n;
  state.counters["matched"] = static_cast<double>(matched) / n;
}

void BM_LocalContextOneShot(benchmark::State& state) { Run(state, nullptr); }
void BM_LocalContextKeptExact(benchmark::State& state) { Run(state, Get().exact.get()); }
void BM_LocalContextKeptHnsw(benchmark::State& state) { Run(state, Get().hnsw.get()); }

BENCHMARK(BM_LocalContextOneShot)->Unit(benchmark::kMillisecond)->Iterations(30);
BENCHMARK(BM_LocalContextKeptExact)->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK(BM_LocalContextKeptHnsw)->Unit(benchmark::kMillisecond)->Iterations(200);

}  // namespace

BENCHMARK_MAIN();
