// The no-LLM mode end to end on A Christmas Carol (the demo's book): the whole index (load,
// chunk, NLP extraction, merge and pruning, Leiden, extractive reports, lexical embeddings into
// SQLite), a re-run on unchanged input, and one global and one local extractive answer. Real
// code paths: RunIndex, ExtractiveGlobalSearch and ExtractiveLocalSearch on a file-backed index.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "grag/extractive_search.h"
#include "grag/indexer.h"
#include "grag/lexical_embedder.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag {
namespace {

std::string ReadBook() {
  std::ifstream in(std::string(GRAG_SOURCE_DIR) + "/tests/data/christmas_carol/christmas_carol.txt",
                   std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A project folder holding the book, removed at the end.
struct Project {
  std::filesystem::path root;
  Config config;
  Project() {
    char tmpl[] = "/tmp/grag-bench-XXXXXX";
    root = mkdtemp(tmpl);
    std::filesystem::create_directories(root / "input");
    std::ofstream(root / "input" / "christmas_carol.txt", std::ios::binary) << ReadBook();
    config.root = root.string();
  }
  ~Project() { std::filesystem::remove_all(root); }
  Project(const Project&) = delete;
  Project& operator=(const Project&) = delete;
};

IndexSummary Index(Project& p, Store& store) {
  LexicalEmbedder embedder;
  IndexContext ctx;
  ctx.store = &store;
  ctx.embedder = &embedder;
  auto s = RunIndex(p.config, {}, ctx);
  if (!s.ok()) {
    fprintf(stderr, "index failed: %s\n", s.status().ToString().c_str());
    std::abort();
  }
  return *s;
}

// A fresh index of the whole book per iteration.
void BM_IndexBook(benchmark::State& state) {
  IndexSummary last;
  for (auto _ : state) {
    state.PauseTiming();
    auto p = std::make_unique<Project>();
    auto store = std::move(Store::Open(p->config.Resolve(p->config.store.path))).value();
    state.ResumeTiming();
    last = Index(*p, *store);
    state.PauseTiming();
    store.reset();
    p.reset();
    state.ResumeTiming();
  }
  state.counters["chunks"] = static_cast<double>(last.chunks);
  state.counters["entities"] = static_cast<double>(last.entities);
  state.counters["relationships"] = static_cast<double>(last.relationships);
  state.counters["reports"] = static_cast<double>(last.reports_generated);
}
BENCHMARK(BM_IndexBook)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

// Everything already stored: the cost of finding that out.
void BM_ReindexUnchanged(benchmark::State& state) {
  Project p;
  auto store = std::move(Store::Open(p.config.Resolve(p.config.store.path))).value();
  Index(p, *store);
  for (auto _ : state) benchmark::DoNotOptimize(Index(p, *store));
}
BENCHMARK(BM_ReindexUnchanged)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Queries(benchmark::State& state) {
  Project p;
  auto store = std::move(Store::Open(p.config.Resolve(p.config.store.path))).value();
  Index(p, *store);
  const Tokenizer* tok = Tokenizer::Get("o200k_base").value();
  LexicalEmbedder embedder;
  const bool global = state.range(0) == 0;
  LocalSearchOptions lo;
  lo.similarity_floor = 0.2;
  for (auto _ : state) {
    if (global) {
      auto r = ExtractiveGlobalSearch(*store, *tok, "What are the main themes of this story?");
      benchmark::DoNotOptimize(r);
    } else {
      auto r = ExtractiveLocalSearch(*store, &embedder, *tok, "Who is Jacob Marley?", lo);
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetLabel(global ? "global: main themes" : "local: Jacob Marley");
}
BENCHMARK(BM_Queries)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace grag

BENCHMARK_MAIN();
