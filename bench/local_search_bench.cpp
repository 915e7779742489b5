// Local search context building (no LLM) on a synthetic index of 100k entities and 500k
// relationships: store queries, vector search, ranking, token counting and budget filling.
//
// The index is bench/support/synthetic_index.h's. Each question names one entity and embeds near
// its cluster's centroid, so the default k = 10 entities are matched.
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
#include "grag/retrieval.h"
#include "grag/store.h"
#include "grag/tokenizer.h"
#include "grag/vector_index.h"
#include "support/synthetic_index.h"

namespace {

using grag::EmbeddingOwner;

template <typename T>
T Check(grag::Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, r.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

struct Fixture {
  std::unique_ptr<grag::bench::SyntheticIndex> index;
  std::unique_ptr<grag::Store> store;
  const grag::Tokenizer* tokenizer = nullptr;
  grag::bench::Questions questions;
  std::unique_ptr<grag::VectorIndex> exact;
  std::unique_ptr<grag::VectorIndex> hnsw;
  std::unique_ptr<grag::Retriever> retriever;  // kept, for the chunk lane (a server's)

  ~Fixture() {
    retriever.reset();
    store.reset();
  }
};

Fixture& Get() {
  // Shared by the benchmarks; destroyed at exit, which removes the temporary index.
  static const std::unique_ptr<Fixture> f = [] {
    auto fx = std::make_unique<Fixture>();
    fx->index = grag::bench::MakeSyntheticIndex();
    fx->store = Check(grag::Store::Open(fx->index->path), "open");
    fx->tokenizer = Check(grag::Tokenizer::Get("o200k_base"), "tokenizer");
    fx->questions = grag::bench::MakeQuestions(64);
    auto t0 = std::chrono::steady_clock::now();
    grag::VectorIndexOptions exact;
    exact.max_exact_floats = std::numeric_limits<size_t>::max();
    fx->exact =
        Check(grag::VectorIndex::Build(*fx->store, EmbeddingOwner::kEntity, exact), "exact");
    std::fprintf(stderr, "loaded %zu entity vectors for exact search in %.2f s\n",
                 fx->exact->size(), grag::bench::SecondsSince(t0));
    // 100k x 64 is under the default exact threshold; force the graph to measure it.
    grag::VectorIndexOptions hnsw;
    hnsw.max_exact_floats = 0;
    t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    fx->hnsw = Check(grag::VectorIndex::Build(*fx->store, EmbeddingOwner::kEntity, hnsw), "hnsw");
    std::fprintf(stderr, "built the HNSW index in %.1f s (%.1f s of CPU)\n",
                 grag::bench::SecondsSince(t0),
                 static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
    t0 = std::chrono::steady_clock::now();
    fx->retriever =
        Check(grag::Retriever::Open(*fx->store, fx->questions.embedder.get()), "retriever");
    std::fprintf(stderr, "opened the retriever in %.1f s\n", grag::bench::SecondsSince(t0));
    return fx;
  }();
  return *f;
}

void Run(benchmark::State& state, const grag::VectorIndex* index,
         const grag::Retriever* retriever) {
  Fixture& f = Get();
  grag::LocalSearchOptions options;  // the defaults: k 10, floor 0.5, 12,000 tokens
  std::vector<double> micros;
  std::vector<double> cpu_micros;  // this thread's CPU time: what a busy machine cannot inflate
  size_t q = 0;
  int64_t items = 0;
  int64_t tokens = 0;
  int64_t matched = 0;
  for (auto _ : state) {
    const std::string& question = f.questions.texts[q++ % f.questions.texts.size()];
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = grag::bench::ThreadCpuMicros();
    auto ctx = grag::BuildLocalContext(*f.store, f.questions.embedder.get(), *f.tokenizer, question,
                                       options, index, retriever);
    micros.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    cpu_micros.push_back(grag::bench::ThreadCpuMicros() - c0);
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

void BM_LocalContextOneShot(benchmark::State& state) { Run(state, nullptr, nullptr); }
void BM_LocalContextKeptExact(benchmark::State& state) {
  Run(state, Get().exact.get(), Get().retriever.get());
}
void BM_LocalContextKeptHnsw(benchmark::State& state) {
  Run(state, Get().hnsw.get(), Get().retriever.get());
}

BENCHMARK(BM_LocalContextOneShot)->Unit(benchmark::kMillisecond)->Iterations(30);
BENCHMARK(BM_LocalContextKeptExact)->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK(BM_LocalContextKeptHnsw)->Unit(benchmark::kMillisecond)->Iterations(200);

}  // namespace

BENCHMARK_MAIN();
