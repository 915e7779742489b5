// Tokenizer and chunker throughput.
//
//   encode/<encoding>/book|mixed  encode throughput (bytes_per_second, per CPU second) on the
//                                 Christmas Carol book and on the mixed corpus of
//                                 tests/support/tokenizer_corpus.h (without its pathological
//                                 long runs)
//   count/<encoding>/book         the same through Count(), which builds no vector
//   chunk/<encoding>/book         chunking the book with Microsoft GraphRAG's settings (1200/100,
//                                 title prefix): chunks per second and time per chunk
//
// `tokenizer_bench --dump_corpus=DIR` writes the two texts to DIR (book.txt, mixed.json) for
// bench/tiktoken_bench.js and exits; scripts/bench_tokenizer.sh runs both side by side.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../tests/support/tokenizer_corpus.h"
#include "grag/chunker.h"
#include "grag/tokenizer.h"

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string& Book() {
  static const std::string book =
      ReadFile(std::string(GRAG_SOURCE_DIR) + "/tests/data/christmas_carol/christmas_carol.txt");
  return book;
}

const std::vector<std::string>& Mixed() {
  static const std::vector<std::string> mixed = [] {
    std::vector<std::string> out;
    for (auto& seg : grag::testing::BuildTokenizerCorpus(Book())) {
      if (!seg.long_run) out.push_back(std::move(seg.text));
    }
    return out;
  }();
  return mixed;
}

const grag::Tokenizer& Tok(const char* name) { return **grag::Tokenizer::Get(name); }

void BM_EncodeBook(benchmark::State& state, const char* enc) {
  const grag::Tokenizer& tok = Tok(enc);
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok.Encode(Book());
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Book().size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

void BM_EncodeMixed(benchmark::State& state, const char* enc) {
  const grag::Tokenizer& tok = Tok(enc);
  size_t bytes = 0;
  for (const auto& s : Mixed()) bytes += s.size();
  for (auto _ : state) {
    for (const auto& s : Mixed()) {
      auto ids = tok.Encode(s);
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void BM_CountBook(benchmark::State& state, const char* enc) {
  const grag::Tokenizer& tok = Tok(enc);
  for (auto _ : state) benchmark::DoNotOptimize(tok.Count(Book()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Book().size()));
}

void BM_ChunkBook(benchmark::State& state, const char* enc) {
  grag::Document doc;
  doc.id = "a-christmas-carol.txt";
  doc.title = "a-christmas-carol.txt";
  doc.text = Book();
  grag::ChunkOptions options;
  options.encoding = enc;
  options.prepend_title = true;
  size_t chunks = 0;
  for (auto _ : state) {
    auto out = grag::ChunkDocument(doc, options);
    chunks = out->size();
    benchmark::DoNotOptimize(out->data());
  }
  state.counters["chunks"] = static_cast<double>(chunks);
  state.counters["chunks_per_s"] = benchmark::Counter(
      static_cast<double>(chunks * state.iterations()), benchmark::Counter::kIsRate);
  // Seconds per chunk (the console shows e.g. "52u" for 52 microseconds).
  state.counters["s_per_chunk"] =
      benchmark::Counter(static_cast<double>(chunks * state.iterations()),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Book().size()));
}

int DumpCorpus(const std::string& dir) {
  std::ofstream(dir + "/book.txt", std::ios::binary) << Book();
  std::ofstream(dir + "/mixed.json", std::ios::binary) << nlohmann::json(Mixed()).dump();
  size_t bytes = 0;
  for (const auto& s : Mixed()) bytes += s.size();
  std::cout << "book: " << Book().size() << " bytes; mixed: " << Mixed().size() << " segments, "
            << bytes << " bytes\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    constexpr const char kDump[] = "--dump_corpus=";
    if (std::strncmp(argv[i], kDump, sizeof(kDump) - 1) == 0)
      return DumpCorpus(argv[i] + sizeof(kDump) - 1);
  }
  if (Book().empty()) {
    std::cerr << "cannot read tests/data/christmas_carol/christmas_carol.txt\n";
    return 1;
  }
  // First use builds the vocabulary: worth knowing, and kept out of the timings below.
  for (const char* enc : {"cl100k_base", "o200k_base"}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto tok = grag::Tokenizer::Get(enc);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!tok.ok()) {
      std::cerr << tok.status().ToString() << "\n";
      return 1;
    }
    std::cerr << enc << ": vocabulary built in " << ms << " ms\n";
  }
  // Names "<what>/<encoding>/<text>", read by scripts/bench_tokenizer.sh.
  for (const char* enc : {"cl100k_base", "o200k_base"}) {
    const std::string e = enc;
    benchmark::RegisterBenchmark(("encode/" + e + "/book").c_str(), BM_EncodeBook, enc)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("encode/" + e + "/mixed").c_str(), BM_EncodeMixed, enc)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("count/" + e + "/book").c_str(), BM_CountBook, enc)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("chunk/" + e + "/book").c_str(), BM_ChunkBook, enc)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
