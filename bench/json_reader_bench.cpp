// Does grag's in-place JSON reader (grag/json_view.h, 630 lines kept equal to nlohmann's
// parser by a differential test) pay for itself? The real readers built on it for every model
// reply (the chat envelope, the extraction reply) beside the same reading done with
// nlohmann::json, on realistic payloads: each text unit of A Christmas Carol with what
// Microsoft GraphRAG's recorded extraction found in it (the ~9 entities and relationships per
// 100 tokens of a real model), inside an OpenAI chat completion envelope. (Embedding replies
// are read with nlohmann: bench/llm_client_bench's BM_ParseEmbeddingBatch.)
//
//   build-rel/bench/json_reader_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <cctype>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grag/extract.h"
#include "grag/words.h"
#include "llm/wire.h"

namespace grag {
namespace {

using nlohmann::json;

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// Per text unit of the book, the extraction reply a model following seed 000's prompt gives:
// {"entities": [...], "relationships": [...]} with what Microsoft's run found in that unit.
const std::vector<std::string>& ExtractionReplies() {
  static const std::vector<std::string> replies = [] {
    const std::string dir = std::string(GRAG_SOURCE_DIR) + "/tests/data/ms_christmas_carol/";
    std::map<std::string, size_t> unit_of_id;
    for (const json& t : ReadJson(dir + "text_units.json")) {
      unit_of_id[t["id"].get<std::string>()] = unit_of_id.size();
    }
    std::vector<json> units(unit_of_id.size(),
                            json{{"entities", json::array()}, {"relationships", json::array()}});
    // The entities' descriptions are in the labelled resolution set, by the same ids.
    std::map<std::string, std::string> description;
    for (const json& e : ReadJson(std::string(GRAG_SOURCE_DIR) +
                                  "/tests/data/resolution/christmas_carol.json")["entities"]) {
      description[e["id"].get<std::string>()] = e["description"].get<std::string>();
    }
    for (const json& e : ReadJson(dir + "entities.json")) {
      for (const json& tu : e["text_unit_ids"]) {
        units[unit_of_id.at(tu.get<std::string>())]["entities"].push_back(
            {{"name", e["title"]},
             {"type", e["type"]},
             {"description", description[e["id"].get<std::string>()]}});
      }
    }
    for (const json& r : ReadJson(dir + "relationships.json")) {
      for (const json& tu : r["text_unit_ids"]) {
        units[unit_of_id.at(tu.get<std::string>())]["relationships"].push_back(
            {{"source", r["source"]},
             {"target", r["target"]},
             {"description", r["description"]},
             {"strength", 7}});
      }
    }
    std::vector<std::string> out;
    for (const json& u : units) out.push_back(u.dump(2));  // models indent their replies
    return out;
  }();
  return replies;
}

const std::vector<std::string>& ChatEnvelopes() {
  static const std::vector<std::string> bodies = [] {
    std::vector<std::string> out;
    for (const std::string& reply : ExtractionReplies()) {
      json body = {
          {"id", "chatcmpl-1"},
          {"object", "chat.completion"},
          {"created", 1733390000},
          {"model", "gpt-4o-mini-2024-07-18"},
          {"choices",
           {{{"index", 0},
             {"message", {{"role", "assistant"}, {"content", reply}, {"refusal", nullptr}}},
             {"logprobs", nullptr},
             {"finish_reason", "stop"}}}},
          {"usage",
           {{"prompt_tokens", 2950},
            {"completion_tokens", 900},
            {"total_tokens", 3850},
            {"completion_tokens_details", {{"reasoning_tokens", 0}}}}},
          {"system_fingerprint", "fp_0ba0d124f1"}};
      out.push_back(body.dump());
    }
    return out;
  }();
  return bodies;
}

int64_t TotalBytes(const std::vector<std::string>& texts) {
  int64_t n = 0;
  for (const std::string& t : texts) n += static_cast<int64_t>(t.size());
  return n;
}

// ---- the chat envelope: content, usage, model, finish_reason ----

void BM_ChatReply_JsonView(benchmark::State& state) {
  const auto& bodies = ChatEnvelopes();
  for (auto _ : state) {
    for (const std::string& body : bodies) {
      benchmark::DoNotOptimize(llm_internal::ParseChatReply(body));
    }
  }
  state.SetBytesProcessed(state.iterations() * TotalBytes(bodies));
  state.counters["replies"] = static_cast<double>(bodies.size());
}
BENCHMARK(BM_ChatReply_JsonView);

struct EnvelopeFields {
  std::string content, model, finish_reason;
  int64_t prompt_tokens = 0, completion_tokens = 0, reasoning_tokens = 0;
};

void BM_ChatReply_Nlohmann(benchmark::State& state) {
  const auto& bodies = ChatEnvelopes();
  for (auto _ : state) {
    for (const std::string& body : bodies) {
      const json j = json::parse(body, nullptr, false);
      EnvelopeFields f;
      const json& choice = j["choices"][0];
      f.content = choice["message"]["content"].get<std::string>();
      f.finish_reason = choice["finish_reason"].get<std::string>();
      f.model = j["model"].get<std::string>();
      f.prompt_tokens = j["usage"]["prompt_tokens"].get<int64_t>();
      f.completion_tokens = j["usage"]["completion_tokens"].get<int64_t>();
      f.reasoning_tokens =
          j["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int64_t>();
      benchmark::DoNotOptimize(f);
    }
  }
  state.SetBytesProcessed(state.iterations() * TotalBytes(bodies));
}
BENCHMARK(BM_ChatReply_Nlohmann);

// ---- the extraction reply: entities and relationships with normalised keys ----

void BM_ExtractionReply_JsonView(benchmark::State& state) {
  const auto& replies = ExtractionReplies();
  for (auto _ : state) {
    for (const std::string& reply : replies) benchmark::DoNotOptimize(ParseExtractionReply(reply));
  }
  state.SetBytesProcessed(state.iterations() * TotalBytes(replies));
}
BENCHMARK(BM_ExtractionReply_JsonView);

// The same mentions read with nlohmann, primary field names only (ParseExtractionReply also
// looks for the alternatives models use: this baseline does less work than the real reader).
void BM_ExtractionReply_Nlohmann(benchmark::State& state) {
  const auto& replies = ExtractionReplies();
  auto text = [](const json& o, const char* key) {
    auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  for (auto _ : state) {
    for (const std::string& reply : replies) {
      const json j = json::parse(reply, nullptr, false);
      ParsedExtraction out;
      for (const json& e : j["entities"]) {
        EntityMention m;
        m.name = text(e, "name");
        m.name_key = NormalizeEntityName(m.name);
        m.type = text(e, "type");
        for (char& c : m.type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        m.description = text(e, "description");
        out.entities.push_back(std::move(m));
      }
      for (const json& r : j["relationships"]) {
        RelationshipMention m;
        m.source = text(r, "source");
        m.target = text(r, "target");
        m.source_key = NormalizeEntityName(m.source);
        m.target_key = NormalizeEntityName(m.target);
        m.description = text(r, "description");
        m.strength = r.value("strength", 1.0);
        out.relationships.push_back(std::move(m));
      }
      benchmark::DoNotOptimize(out);
    }
  }
  state.SetBytesProcessed(state.iterations() * TotalBytes(replies));
}
BENCHMARK(BM_ExtractionReply_Nlohmann);

}  // namespace
}  // namespace grag

BENCHMARK_MAIN();
