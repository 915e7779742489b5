// Hybrid retrieval (vector + BM25 + graph walk, fused) on the synthetic 100k-entity /
// 500k-relationship index (bench/support/synthetic_index.h), two ways:
//   BM_HybridKept     a Retriever opened once and kept (a server): one question per iteration
//   BM_HybridOneShot  what one `grag search` does: open the store, open a Retriever that reads
//                     only the question's graph neighbourhood, ask once
// plus the same two for BM25 alone, the baseline measured in the same run. Counters: p50 and
// p90 wall time (us), p50 of the thread's CPU time (which a busy machine does not inflate), and
// chunks returned.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "grag/retrieval.h"
#include "grag/store.h"
#include "support/synthetic_index.h"

namespace {

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
  grag::bench::Questions questions;
  std::unique_ptr<grag::Store> store;
  std::unique_ptr<grag::Retriever> retriever;
  ~Fixture() {
    retriever.reset();
    store.reset();
  }
};

Fixture& Get() {
  static const std::unique_ptr<Fixture> f = [] {
    auto fx = std::make_unique<Fixture>();
    fx->index = grag::bench::MakeSyntheticIndex();
    fx->questions = grag::bench::MakeQuestions(64);
    fx->store = Check(grag::Store::Open(fx->index->path), "open");
    const auto t0 = std::chrono::steady_clock::now();
    fx->retriever =
        Check(grag::Retriever::Open(*fx->store, fx->questions.embedder.get()), "retriever");
    std::fprintf(stderr, "opened the retriever (graph, chunk and entity vectors) in %.2f s\n",
                 grag::bench::SecondsSince(t0));
    return fx;
  }();
  return *f;
}

void Report(benchmark::State& state, std::vector<double>& micros, std::vector<double>& cpu,
            int64_t chunks) {
  state.counters["p50_us"] = grag::bench::Percentile(micros, 0.5);
  state.counters["p90_us"] = grag::bench::Percentile(micros, 0.9);
  state.counters["p50_cpu_us"] = grag::bench::Percentile(cpu, 0.5);
  state.counters["chunks"] = static_cast<double>(chunks) / static_cast<double>(micros.size());
}

void Kept(benchmark::State& state, grag::RetrievalMethod method) {
  Fixture& f = Get();
  grag::RetrievalOptions o;
  o.method = method;
  std::vector<double> micros, cpu;
  int64_t chunks = 0;
  size_t q = 0;
  // The first question builds the walk's transition graph; keep that out of the figures.
  (void)f.retriever->Retrieve(f.questions.texts[0], o);
  for (auto _ : state) {
    const std::string& question = f.questions.texts[q++ % f.questions.texts.size()];
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = grag::bench::ThreadCpuMicros();
    auto r = f.retriever->Retrieve(question, o);
    micros.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(grag::bench::ThreadCpuMicros() - c0);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    chunks += static_cast<int64_t>(r->chunks.size());
  }
  Report(state, micros, cpu, chunks);
}

void OneShot(benchmark::State& state, grag::RetrievalMethod method) {
  Fixture& f = Get();
  grag::RetrievalOptions o;
  o.method = method;
  std::vector<double> micros, cpu;
  int64_t chunks = 0;
  size_t q = 0;
  for (auto _ : state) {
    const std::string& question = f.questions.texts[q++ % f.questions.texts.size()];
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = grag::bench::ThreadCpuMicros();
    grag::StoreOptions so;
    so.create_if_missing = false;
    so.allow_read_only = true;
    auto store = Check(grag::Store::Open(f.index->path, so), "open");
    grag::RetrieverOptions ro;
    ro.load_graph = false;  // what the CLI does: read only the question's neighbourhood
    auto retriever =
        Check(grag::Retriever::Open(*store, f.questions.embedder.get(), ro), "retriever");
    auto r = retriever->Retrieve(question, o);
    retriever.reset();
    store.reset();
    micros.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(grag::bench::ThreadCpuMicros() - c0);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    chunks += static_cast<int64_t>(r->chunks.size());
  }
  Report(state, micros, cpu, chunks);
}

void BM_Bm25Kept(benchmark::State& s) { Kept(s, grag::RetrievalMethod::kBm25); }
void BM_HybridKept(benchmark::State& s) { Kept(s, grag::RetrievalMethod::kHybrid); }
void BM_Bm25OneShot(benchmark::State& s) { OneShot(s, grag::RetrievalMethod::kBm25); }
void BM_HybridOneShot(benchmark::State& s) { OneShot(s, grag::RetrievalMethod::kHybrid); }

BENCHMARK(BM_Bm25Kept)->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK(BM_HybridKept)->Unit(benchmark::kMillisecond)->Iterations(200);
BENCHMARK(BM_Bm25OneShot)->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK(BM_HybridOneShot)->Unit(benchmark::kMillisecond)->Iterations(10);

}  // namespace

BENCHMARK_MAIN();
