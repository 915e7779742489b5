#include "search_objects.h"

#include <algorithm>
#include <string>

namespace py = pybind11;

namespace grag::python {
namespace {

py::str Str(std::string_view s) { return py::str(s.data(), s.size()); }

double Millis(std::chrono::microseconds t) { return static_cast<double>(t.count()) / 1000; }

// The signals' names, made once (they are the keys of every chunk's two per-signal dicts).
const std::array<py::str, kSignalCount>& SignalKeys() {
  static const auto* keys = [] {
    auto* k = new std::array<py::str, kSignalCount>;
    for (size_t s = 0; s < kSignalCount; ++s) (*k)[s] = Str(SignalName(static_cast<Signal>(s)));
    return k;
  }();
  return *keys;
}

py::dict ChunkObject(const RetrievedChunk& c, size_t rank) {
  const auto& keys = SignalKeys();
  py::dict ranks, scores;
  for (size_t s = 0; s < kSignalCount; ++s) {
    if (c.ranks[s]) {
      ranks[keys[s]] = py::int_(*c.ranks[s]);
      scores[keys[s]] = py::float_(c.signal_scores[s]);
    } else {
      ranks[keys[s]] = py::none();
      scores[keys[s]] = py::none();
    }
  }
  py::dict j;
  j["rank"] = py::int_(rank);
  j["chunk_id"] = Str(c.chunk_id);
  j["document_id"] = Str(c.document_id);
  j["chunk_index"] = py::int_(c.index);
  j["score"] = py::float_(c.score);
  j["signal_ranks"] = std::move(ranks);
  j["signal_scores"] = std::move(scores);
  if (c.rerank_score) j["rerank_score"] = py::float_(*c.rerank_score);
  if (!c.chained_by.empty()) j["chained_by"] = Str(c.chained_by);
  j["text"] = Str(c.text);
  return j;
}

py::list SeedsList(const RetrievalResult& r) {
  py::list seeds;
  for (const SeedEntity& s : r.seeds) {
    py::dict j;
    j["entity"] = py::int_(s.entity_id);
    j["name_key"] = Str(s.name_key);
    j["weight"] = py::float_(s.weight);
    j["by_name"] = py::bool_(s.by_name);
    j["by_fact"] = py::bool_(s.by_fact);
    if (s.by_name) j["specificity"] = py::float_(s.specificity);
    if (s.similarity) j["similarity"] = py::float_(*s.similarity);
    if (s.by_fact) j["fact_match"] = py::float_(s.fact_match);
    seeds.append(std::move(j));
  }
  return seeds;
}

py::dict StatsObject(const RetrievalStats& s) {
  const auto& keys = SignalKeys();
  py::dict candidates, millis;
  for (size_t i = 0; i < kSignalCount; ++i) {
    candidates[keys[i]] = py::int_(s.candidates[i]);
    millis[keys[i]] = py::float_(Millis(s.signal_time[i]));
  }
  py::dict j;
  j["chunks"] = py::int_(s.chunks);
  j["entities"] = py::int_(s.entities);
  j["candidates"] = std::move(candidates);
  j["signal_ms"] = std::move(millis);
  j["used_embeddings"] = py::bool_(s.used_embeddings);
  j["lexical_embeddings"] = py::bool_(s.lexical_embeddings);
  j["reranked"] = py::bool_(s.reranked);
  j["graph_weight"] = py::float_(s.graph_weight);
  j["window_weight"] = py::float_(s.window_weight);
  j["total_ms"] = py::float_(Millis(s.total_time));
  return j;
}

}  // namespace

py::dict SearchObject(const RetrievalResult& result, std::string_view question) {
  py::list entities;
  for (size_t i = 0; i < std::min<size_t>(20, result.entity_scores.size()); ++i) {
    py::dict e;
    e["entity"] = py::int_(result.entity_scores[i].first);
    e["score"] = py::float_(result.entity_scores[i].second);
    entities.append(std::move(e));
  }
  py::list diagnostics;
  for (const std::string& d : result.diagnostics) diagnostics.append(Str(d));
  py::list chunks;
  for (size_t i = 0; i < result.chunks.size(); ++i) {
    chunks.append(ChunkObject(result.chunks[i], i + 1));
  }
  py::dict out;
  out["method"] = Str(RetrievalMethodName(result.method));
  out["question"] = Str(question);
  out["seeds"] = SeedsList(result);
  out["entities"] = std::move(entities);
  out["diagnostics"] = std::move(diagnostics);
  out["stats"] = StatsObject(result.stats);
  out["chunks"] = std::move(chunks);
  return out;
}

}  // namespace grag::python
