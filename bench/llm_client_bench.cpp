// What the LLM client itself costs per call, next to the model's seconds: building the body,
// parsing the reply, hashing the cache key, counting. The transport is an in-process stub, so
// only the client is measured. Also the parsers on realistic sizes (a 1536-dimension embedding
// batch, a long stream).
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "grag/llm.h"
#include "llm/wire.h"

namespace grag {
namespace {

std::string ChatBody(size_t content_bytes) {
  nlohmann::json body = {
      {"id", "chatcmpl-1"},
      {"model", "gpt-4o-mini"},
      {"choices",
       {{{"index", 0},
         {"message", {{"role", "assistant"}, {"content", std::string(content_bytes, 'x')}}},
         {"finish_reason", "stop"}}}},
      {"usage", {{"prompt_tokens", 1200}, {"completion_tokens", 400}}}};
  return body.dump();
}

class StubTransport final : public HttpTransport {
 public:
  explicit StubTransport(std::string body) : body_(std::move(body)) {}
  Result<HttpResponse> Post(const HttpRequest&) override {
    HttpResponse r;
    r.status = 200;
    r.body = body_;
    return r;
  }

 private:
  std::string body_;
};

ChatRequest Prompt(size_t bytes, int salt) {
  ChatRequest r;
  r.messages.push_back({"system", "You extract entities and relationships."});
  r.messages.push_back({"user", std::string(bytes, 'p') + std::to_string(salt)});
  return r;
}

std::unique_ptr<OpenAIClient> Client(KeyValueCache* cache) {
  OpenAIOptions o;
  o.base_url = "http://127.0.0.1:1/v1";
  o.model = "gpt-4o-mini";
  o.transport = std::make_shared<StubTransport>(ChatBody(2000));
  o.cache = cache;
  return std::move(OpenAIClient::Create(o)).value();
}

// A chunk-sized prompt (~1200 tokens) and a 2 KB reply, no cache.
void BM_ChatCall(benchmark::State& state) {
  auto client = Client(nullptr);
  ChatRequest req = Prompt(5000, 0);
  for (auto _ : state) benchmark::DoNotOptimize(client->Chat(req));
}
BENCHMARK(BM_ChatCall);

void BM_ChatCacheHit(benchmark::State& state) {
  InMemoryCache cache;
  auto client = Client(&cache);
  ChatRequest req = Prompt(5000, 0);
  if (!client->Chat(req).ok()) state.SkipWithError("first call failed");
  for (auto _ : state) benchmark::DoNotOptimize(client->Chat(req));
}
BENCHMARK(BM_ChatCacheHit);

void BM_ParseEmbeddingBatch(benchmark::State& state) {
  nlohmann::json data = nlohmann::json::array();
  for (int i = 0; i < 16; ++i) {
    std::vector<float> v(1536);
    for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k % 97) / 97.0f - 0.5f;
    data.push_back({{"index", i}, {"embedding", v}});
  }
  std::string body = nlohmann::json{{"data", data}, {"usage", {{"prompt_tokens", 4000}}}}.dump();
  for (auto _ : state) benchmark::DoNotOptimize(llm_internal::ParseEmbeddingReply(body, 16));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
}
BENCHMARK(BM_ParseEmbeddingBatch);

void BM_ParseStream(benchmark::State& state) {
  std::string stream;
  for (int i = 0; i < 1000; ++i) {
    stream += R"(data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"word "}}]})";
    stream += "\n\n";
  }
  stream += "data: [DONE]\n\n";
  for (auto _ : state) {
    llm_internal::SseParser parser;
    llm_internal::ChatStreamAssembler assembler(nullptr);
    auto handler = [&](std::string_view, std::string_view data) { return assembler.OnEvent(data); };
    for (size_t at = 0; at < stream.size(); at += 1400) {  // packet-sized pieces
      benchmark::DoNotOptimize(parser.Feed(std::string_view(stream).substr(at, 1400), handler));
    }
    benchmark::DoNotOptimize(assembler.Finish());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * stream.size()));
}
BENCHMARK(BM_ParseStream);

}  // namespace
}  // namespace grag

BENCHMARK_MAIN();
