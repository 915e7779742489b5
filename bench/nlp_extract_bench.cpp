// The no-LLM pieces on the Christmas Carol book, chunked as `grag index` does (1200/100 tokens,
// o200k_base):
//
//   nlp_extract/chunk      ExtractNlp on every chunk in turn; time per chunk (the issue asks for
//                          well under a millisecond in Release)
//   nlp_extract/book       extract every chunk, merge, prune with the defaults: the graph the
//                          no-LLM index starts from; counters give its size before and after
//   lexical_embed/chunk    LexicalEmbed (384 dimensions) of every chunk in turn; time per chunk
//   lexical_embed/question LexicalEmbed of a short question
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "grag/chunker.h"
#include "grag/lexical_embedder.h"
#include "grag/merge.h"
#include "grag/nlp_extract.h"
#include "grag/nlp_prune.h"

namespace {

const std::vector<std::string>& Chunks() {
  static const std::vector<std::string> chunks = [] {
    std::ifstream in(
        std::string(GRAG_SOURCE_DIR) + "/tests/data/christmas_carol/christmas_carol.txt",
        std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    grag::Document doc;
    doc.id = "christmas_carol.txt";
    doc.title = "christmas_carol.txt";
    doc.text = ss.str();
    std::vector<std::string> out;
    auto chunked = grag::ChunkDocument(doc, grag::ChunkOptions{});
    if (chunked.ok()) {
      for (auto& c : *chunked) out.push_back(std::move(c.text));
    }
    return out;
  }();
  return chunks;
}

void BM_ExtractChunk(benchmark::State& state) {
  const auto& chunks = Chunks();
  if (chunks.empty()) {
    state.SkipWithError("book not found");
    return;
  }
  const grag::NlpExtractorOptions options;
  size_t i = 0;
  int64_t entities = 0;
  int64_t relationships = 0;
  for (auto _ : state) {
    auto r = grag::ExtractNlp(chunks[i++ % chunks.size()], options);
    entities += static_cast<int64_t>(r->entities.size());
    relationships += static_cast<int64_t>(r->relationships.size());
    benchmark::DoNotOptimize(r);
  }
  state.counters["entities_per_chunk"] =
      static_cast<double>(entities) / static_cast<double>(state.iterations());
  state.counters["relationships_per_chunk"] =
      static_cast<double>(relationships) / static_cast<double>(state.iterations());
  state.counters["chunks"] = static_cast<double>(chunks.size());
}
BENCHMARK(BM_ExtractChunk)->Name("nlp_extract/chunk")->Unit(benchmark::kMicrosecond);

void BM_ExtractBook(benchmark::State& state) {
  const auto& chunks = Chunks();
  grag::NlpPruneStats stats;
  for (auto _ : state) {
    std::vector<grag::ChunkEntityMention> ents;
    std::vector<grag::ChunkRelationshipMention> rels;
    for (size_t i = 0; i < chunks.size(); ++i) {
      auto r = grag::ExtractNlp(chunks[i], {});
      for (auto& e : r->entities) ents.push_back({std::to_string(i), std::move(e)});
      for (auto& x : r->relationships) rels.push_back({std::to_string(i), std::move(x)});
    }
    auto graph = grag::MergeMentions(ents, rels);
    stats = grag::PruneNlpGraph(graph, {});
    benchmark::DoNotOptimize(graph);
  }
  state.counters["entities_before"] = static_cast<double>(stats.entities_before);
  state.counters["entities_after"] = static_cast<double>(stats.entities_after);
  state.counters["relationships_before"] = static_cast<double>(stats.relationships_before);
  state.counters["relationships_after"] = static_cast<double>(stats.relationships_after);
}
BENCHMARK(BM_ExtractBook)->Name("nlp_extract/book")->Unit(benchmark::kMillisecond);

void BM_EmbedChunk(benchmark::State& state) {
  const auto& chunks = Chunks();
  if (chunks.empty()) {
    state.SkipWithError("book not found");
    return;
  }
  size_t i = 0;
  for (auto _ : state) {
    auto v = grag::LexicalEmbed(chunks[i++ % chunks.size()], 384);
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_EmbedChunk)->Name("lexical_embed/chunk")->Unit(benchmark::kMicrosecond);

void BM_EmbedQuestion(benchmark::State& state) {
  for (auto _ : state) {
    auto v = grag::LexicalEmbed("Who is Jacob Marley?", 384);
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_EmbedQuestion)->Name("lexical_embed/question")->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
