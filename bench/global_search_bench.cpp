// Global search's own overhead on Microsoft GraphRAG's 122 Christmas Carol reports: everything a
// query costs apart from the models' time. Models answer instantly (ScriptedChatModel), so
// BM_GlobalSearch is selection + token counting + batching + map prompts + map threads + reply
// parsing + ranking + the reduce prompt; BM_PlanGlobalSearch is the part before any model call.
//
//   build-release/bench/global_search_bench --benchmark_min_time=2s
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "../tests/global_search_fixture.h"
#include "../tests/support/temp_dir.h"
#include "grag/global_search.h"
#include "grag/llm.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace {

constexpr const char* kQuestion = "What are the main themes of the story?";

// One index for every benchmark, loaded on first use.
grag::Store& CarolIndex() {
  static grag::testing::TempDir* dir = new grag::testing::TempDir();
  static grag::Store* store = [] {
    auto opened = grag::Store::Open(*dir / "index.db");
    if (!opened.ok()) {
      std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
      std::exit(1);
    }
    auto loaded = grag::testing::LoadChristmasCarolReports(
        **opened, GRAG_SOURCE_DIR "/tests/data/ms_christmas_carol");
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      std::exit(1);
    }
    return opened->release();
  }();
  return *store;
}

const grag::Tokenizer& Tok() {
  static const grag::Tokenizer* tokenizer = grag::Tokenizer::Get("o200k_base").value();
  return *tokenizer;
}

void BM_PlanGlobalSearch(benchmark::State& state) {
  grag::Store& store = CarolIndex();
  grag::GlobalSearchOptions options;
  options.level = state.range(0);
  size_t batches = 0;
  size_t reports = 0;
  for (auto _ : state) {
    auto plan = grag::PlanGlobalSearch(store, Tok(), kQuestion, options);
    if (!plan.ok()) {
      state.SkipWithError(plan.status().ToString().c_str());
      return;
    }
    batches = plan->batches.size();
    reports = plan->reports.size();
    benchmark::DoNotOptimize(plan);
  }
  state.counters["reports"] = static_cast<double>(reports);
  state.counters["batches"] = static_cast<double>(batches);
}
BENCHMARK(BM_PlanGlobalSearch)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

void BM_GlobalSearch(benchmark::State& state) {
  grag::Store& store = CarolIndex();
  grag::GlobalSearchOptions options;
  options.level = state.range(0);
  // A realistic reply: a few points, one citing a report, one zero-scored.
  const std::string map_reply = R"({"points": [
    {"description": "Scrooge's redemption through the spirits' visits [Data: Reports (1, 2)].",
     "score": 85},
    {"description": "Poverty and charity in Victorian London.", "score": 60},
    {"description": "Nothing else here.", "score": 0}]})";
  int64_t map_calls = 0;
  for (auto _ : state) {
    // Fresh models each time: a scripted model keeps every request it saw.
    grag::ScriptedChatModel map(
        [&](const grag::ChatRequest&) -> grag::Result<std::string> { return map_reply; });
    grag::ScriptedChatModel reduce([](const grag::ChatRequest&) -> grag::Result<std::string> {
      return std::string("Redemption, generosity and memory.");
    });
    auto result = grag::GlobalSearch(store, map, reduce, Tok(), kQuestion, options);
    if (!result.ok()) {
      state.SkipWithError(result.status().ToString().c_str());
      return;
    }
    map_calls = result->stats.map_calls;
    benchmark::DoNotOptimize(result);
  }
  state.counters["map_calls"] = static_cast<double>(map_calls);
}
BENCHMARK(BM_GlobalSearch)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
