// Retrieval: the vector, BM25 and graph signals and their fusion (see grag/retrieval.h).
#include "grag/retrieval.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "grag/lexical_embedder.h"
#include "grag/log.h"
#include "grag/nlp_extract.h"
#include "grag/question.h"
#include "grag/vector_index.h"
#include "grag/words.h"
#include "ppr.h"
#include "retrieval_graph.h"
#include "sentence_windows.h"

namespace grag {

using SteadyClock = std::chrono::steady_clock;

namespace {

constexpr std::string_view kLog = "search";

// Single-word names shorter than this match only when the question spells them with the same
// case as the entity: "US" must not be found in "tell us".
constexpr size_t kShortNameBytes = 4;

std::chrono::microseconds Since(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - t);
}

struct QuestionWord {
  std::string key;
  std::string_view piece;  // the whitespace-separated piece of the question it came from
};

std::vector<QuestionWord> QuestionWords(std::string_view question) {
  std::vector<QuestionWord> words;
  size_t start = 0;
  while (start < question.size()) {
    size_t end = question.find_first_of(" \t\r\n\f\v", start);
    if (end == std::string_view::npos) end = question.size();
    if (end > start) {
      const std::string_view piece = question.substr(start, end - start);
      for (auto& w : SplitNormalizedName(NormalizeEntityName(piece))) {
        words.push_back({std::move(w), piece});
      }
    }
    start = end + 1;
  }
  return words;
}

// The normalised words of `text`.
std::vector<std::string> Words(std::string_view text) {
  return SplitNormalizedName(NormalizeEntityName(text));
}

// Whether `words` hold `name` (normalised words) in a row.
bool HoldsRun(const std::vector<std::string>& words, const std::vector<std::string>& name) {
  if (name.empty() || name.size() > words.size()) return false;
  for (size_t i = 0; i + name.size() <= words.size(); ++i) {
    size_t k = 0;
    while (k < name.size() && words[i + k] == name[k]) ++k;
    if (k == name.size()) return true;
  }
  return false;
}

// A name seeds the walk when its phrase is specific enough, or in too few chunks to judge.
bool SpecificEnough(const SeedEntity& s, const RetrievalOptions& o) {
  return SpecificEnoughName(s.specificity, s.chunk_frequency, o.min_name_specificity);
}

Status CheckOptions(const RetrievalOptions& o) {
  auto bad = [](const std::string& m) { return Status::InvalidArgument("retrieval: " + m); };
  if (o.top_k < 1) return bad("top_k must be at least 1");
  if (o.candidates < 1) return bad("candidates must be at least 1");
  if (!(o.rrf_k >= 0)) return bad("rrf_k must not be negative");
  for (double w : {o.vector_weight, o.bm25_weight, o.graph_weight, o.unanchored_graph_weight,
                   o.lexical_vector_weight}) {
    if (!(w >= 0) || !std::isfinite(w)) return bad("signal weights must be finite and >= 0");
  }
  if (!(o.damping > 0 && o.damping < 1)) return bad("damping must be within (0, 1)");
  if (!(o.titled_chunk_share >= 0 && o.titled_chunk_share <= 1)) {
    return bad("titled_chunk_share must be within [0, 1]");
  }
  if (!(o.entity_to_chunk >= 0 && o.entity_to_chunk <= 1)) {
    return bad("entity_to_chunk must be within [0, 1]");
  }
  if (!(o.passage_seed_share >= 0 && o.passage_seed_share <= 1)) {
    return bad("passage_seed_share must be within [0, 1]");
  }
  if (!(o.ppr_epsilon > 0)) return bad("ppr_epsilon must be positive");
  if (!(o.fact_seed_share >= 0 && o.fact_seed_share + o.passage_seed_share <= 1)) {
    return bad("fact_seed_share must be >= 0 and, with passage_seed_share, at most 1");
  }
  if (o.fact_sentences < 0) return bad("fact_sentences must not be negative");
  if (!(o.passage_weight >= 0) || !std::isfinite(o.passage_weight)) {
    return bad("passage_weight must be finite and >= 0");
  }
  if (o.passage_window_sentences < 1) return bad("passage_window_sentences must be at least 1");
  if (o.passage_pool < 0) return bad("passage_pool must not be negative");
  if (!(o.anchored_specificity >= 0 && o.anchored_specificity <= 1)) {
    return bad("anchored_specificity must be within [0, 1]");
  }
  if (o.chain_links < 0) return bad("chain_links must not be negative");
  if (!(o.diversity >= 0)) return bad("diversity must not be negative");
  if (o.chain_depth < 2) return bad("chain_depth must be at least 2");
  if (o.max_embedding_seeds < 0 || o.passage_seeds < 0 || o.max_name_words < 0) {
    return bad("seed counts must not be negative");
  }
  return Status::Ok();
}

}  // namespace

std::string_view RetrievalMethodName(RetrievalMethod method) {
  switch (method) {
    case RetrievalMethod::kVector:
      return "vector";
    case RetrievalMethod::kBm25:
      return "bm25";
    case RetrievalMethod::kGraph:
      return "graph";
    case RetrievalMethod::kHybrid:
      return "hybrid";
  }
  return "hybrid";
}

std::string RetrievalMethodNames(std::string_view separator) {
  std::string out;
  for (RetrievalMethod m : kRetrievalMethods) {
    if (!out.empty()) out += separator;
    out += RetrievalMethodName(m);
  }
  return out;
}

Result<RetrievalMethod> ParseRetrievalMethod(std::string_view name) {
  for (RetrievalMethod m : kRetrievalMethods) {
    if (name == RetrievalMethodName(m)) return m;
  }
  return Status::InvalidArgument("unknown retrieval method \"" + std::string(name) + "\" (" +
                                 RetrievalMethodNames(", ") + ")");
}

std::string_view SignalName(Signal signal) {
  switch (signal) {
    case Signal::kVector:
      return "vector";
    case Signal::kBm25:
      return "bm25";
    case Signal::kGraph:
      return "graph";
  }
  return "graph";
}

std::vector<std::pair<std::string, double>> ReciprocalRankFusion(
    const std::vector<std::vector<std::string>>& lists, const std::vector<double>& weights,
    double rrf_k) {
  std::unordered_map<std::string, size_t> at;
  std::vector<std::pair<std::string, double>> out;
  for (size_t l = 0; l < lists.size(); ++l) {
    const double w = l < weights.size() ? weights[l] : 1.0;
    if (w <= 0) continue;
    for (size_t r = 0; r < lists[l].size(); ++r) {
      auto [it, added] = at.try_emplace(lists[l][r], out.size());
      if (added) out.emplace_back(lists[l][r], 0.0);
      out[it->second].second += w / (rrf_k + static_cast<double>(r + 1));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

// ---------------------------------------------------------------- the retriever

struct Retriever::Impl {
  Store& store;
  EmbeddingModel* embedder = nullptr;
  RerankModel* reranker = nullptr;
  // The whole graph, kept; null in the one-question mode (RetrieverOptions::load_graph off),
  // where each question reads its seeds' neighbourhood instead.
  std::unique_ptr<GraphData> full;
  RetrieverOptions options;
  int64_t total_chunks = 0;
  int64_t total_entities = 0;

  // A vector index, built at Open or (one-question mode) read and built on another thread
  // while the question's other reads run: the chunk vectors are a question's largest read
  // (3,338 chunks of 1,669 transcripts are 5 MB). Get() waits for it.
  struct LoadingIndex {
    EmbeddingOwner owner = EmbeddingOwner::kChunk;
    // Written (deferred: by the loading thread, through a const Impl, before its future is
    // ready); read after.
    mutable std::unique_ptr<VectorIndex> index;  // null: none usable
    mutable Status status;
    const Impl* loader = nullptr;  // set: built by the loading thread (StartVectors)
    bool deferred() const { return loader != nullptr; }

    bool present() const { return index != nullptr || deferred(); }
    Result<const VectorIndex*> Get() const {
      if (deferred()) loader->StartVectors().wait();
      GRAG_RETURN_IF_ERROR(status);
      return static_cast<const VectorIndex*>(index.get());
    }
  };
  LoadingIndex chunk_vectors;
  LoadingIndex entity_vectors;
  // One thread reads both, one after the other, on one connection of the store's: a second
  // thread would open (and parse the schema on) another and compete for the same two cores.
  // Started by the first question that needs vectors (StartVectors), not at opening: a BM25
  // search waited for vectors it never read (57 of its 89 ms on the medical index).
  mutable std::once_flag vectors_once;
  mutable std::shared_future<void> vectors_loaded;
  // Starts the loading thread once; the future it will be ready on.
  const std::shared_future<void>& StartVectors() const;
  std::vector<std::string> open_notes;  // why vectors are not used

  // Name specificity by key (a full-text count per name), remembered.
  mutable std::mutex specificity_mu;
  mutable std::unordered_map<std::string, std::pair<double, int64_t>> specificity;

  explicit Impl(Store& s) : store(s) {}
  ~Impl() {
    // It writes into this. Not started: nothing to wait for (call_once makes the write of
    // vectors_loaded visible to whoever passed it).
    std::call_once(vectors_once, [] {});
    if (vectors_loaded.valid()) vectors_loaded.wait();
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  // The specificity (0-1) of a phrase and the chunks whose text holds it.
  Result<std::pair<double, int64_t>> Specificity(const std::string& key) const;
  // The same for single words, looked up together.
  Result<std::vector<std::pair<double, int64_t>>> WordSpecificities(
      const std::vector<std::string>& words) const;
  double SpecificityOf(int64_t df) const {
    const double n = static_cast<double>(total_chunks);
    if (n < 1) return 1.0;
    return std::clamp(std::log((n + 1) / (static_cast<double>(df) + 0.5)) / std::log(n + 1), 0.0,
                      1.0);
  }
  Result<std::vector<float>> EmbedQuestion(std::string_view question) const;
  // The entity a normalised name is the key of, if any.
  Result<std::optional<int64_t>> EntityOfKey(const std::string& key) const;
  Result<std::vector<SeedEntity>> NamedSeeds(std::string_view question,
                                             const RetrievalOptions& o) const;
  // The sentence-window list (RetrievalTuning::passage_weight): `pool` ranked by their best
  // window of sentences.
  struct Windows {
    std::vector<std::string> ranking;  // the chunks that hold a question word, best first
    double windows_per_chunk = 0;      // the pool's sentences per window, on average
    // The question's terms each chunk of the pool holds anywhere (indices into `weights`), and
    // what each term is worth: the diversity pass (RetrievalTuning::diversity) reads them.
    std::unordered_map<std::string, std::vector<uint32_t>> held;
    std::vector<double> weights;
  };
  Result<Windows> WindowRanking(std::string_view question, const std::vector<std::string>& pool,
                                const RetrievalOptions& o) const;
  // Fact seeds from the best passages' sentences (RetrievalOptions::fact_seed_share).
  Result<std::vector<SeedEntity>> FactSeeds(const GraphData& g, std::string_view question,
                                            const std::vector<std::string>& passages,
                                            const std::vector<SeedEntity>& named,
                                            const RetrievalOptions& o) const;

  // One question's candidates: each signal's list of chunk ids, best first, and their scores,
  // by Signal.
  struct Signals {
    std::array<std::vector<std::string>, kSignalCount> lists;
    std::array<std::unordered_map<std::string, double>, kSignalCount> scores;
    // Chunks the evidence chain moved up: chunk id -> the entity that led to it.
    std::unordered_map<std::string, std::string> chained;
  };
  // The graph signal: seeds from the question's names, its embedding and the other signals'
  // best passages, walked into sig.lists[2]. True when the walk is anchored (a seed named in
  // the question or found as a fact).
  Result<bool> GraphSignal(std::string_view question, const std::vector<float>& q,
                           const std::vector<SeedEntity>& named, bool lexical,
                           const RetrievalOptions& o, Signals& sig, RetrievalResult& result) const;
  // The named seeds specific enough to walk from, and the entities near the question's vector.
  Result<std::vector<SeedEntity>> WalkSeeds(const std::vector<float>& q,
                                            const std::vector<SeedEntity>& named, bool lexical,
                                            const RetrievalOptions& o) const;
  // Personalised PageRank from the seed nodes: the entity scores and the graph's chunk list.
  void Walk(const GraphData& g, const std::vector<std::pair<uint32_t, double>>& seed_nodes,
            const RetrievalOptions& o, Signals& sig, RetrievalResult& result) const;
  // The method's ranking of the candidates (hybrid: fused, the sentence windows with them).
  Result<std::vector<std::pair<std::string, double>>> Rank(std::string_view question,
                                                           const std::vector<SeedEntity>& named,
                                                           bool graph_anchored, bool lexical,
                                                           const RetrievalOptions& o, Signals& sig,
                                                           RetrievalResult& result) const;
  // The diversity pass (RetrievalTuning::diversity) over the head of `ranked`.
  static void Diversify(std::vector<std::pair<std::string, double>>& ranked, const Windows& windows,
                        const RetrievalOptions& o);
  // One question's neighbourhood of the graph (Store::LoadGraphNeighbourhood), built to walk.
  // It carries the aliases of its chunks' titles, as the kept graph carries all of them.
  Result<std::unique_ptr<GraphData>> ReadNeighbourhood(
      const std::vector<int64_t>& seeds, const std::vector<std::string>& chunks,
      const Store::NeighbourhoodLimits& limits) const;
  // The evidence chain (RetrievalTuning::chain_links): moves up, to follow the first chunk of
  // `ranked`, the chunks of the documents titled by entities it names; sig.chained says which.
  Status FollowChain(std::vector<std::pair<std::string, double>>& ranked,
                     const std::vector<SeedEntity>& named, const RetrievalOptions& o,
                     Signals& sig) const;
  // result.chunks from the ranking (their text read when asked for or reranked), the head
  // reranked.
  Status CollectChunks(std::string_view question,
                       const std::vector<std::pair<std::string, double>>& ranked,
                       const RetrievalOptions& o, Signals& sig, RetrievalResult& result) const;
};

Result<std::pair<double, int64_t>> Retriever::Impl::Specificity(const std::string& key) const {
  if (key.find(' ') == std::string::npos) {
    GRAG_ASSIGN_OR_RETURN(auto one, WordSpecificities({key}));
    return one.front();
  }
  {
    std::lock_guard lock(specificity_mu);
    if (auto it = specificity.find(key); it != specificity.end()) return it->second;
  }
  GRAG_ASSIGN_OR_RETURN(int64_t df, store.CountChunksWithPhrase(key));
  const auto result = std::make_pair(SpecificityOf(df), df);
  std::lock_guard lock(specificity_mu);
  specificity.emplace(key, result);
  return result;
}

Result<std::vector<std::pair<double, int64_t>>> Retriever::Impl::WordSpecificities(
    const std::vector<std::string>& words) const {
  std::vector<std::pair<double, int64_t>> out(words.size());
  std::vector<std::string> missing;
  std::vector<size_t> at;
  {
    std::lock_guard lock(specificity_mu);
    for (size_t i = 0; i < words.size(); ++i) {
      if (auto it = specificity.find(words[i]); it != specificity.end()) {
        out[i] = it->second;
      } else {
        missing.push_back(words[i]);
        at.push_back(i);
      }
    }
  }
  if (missing.empty()) return out;
  GRAG_ASSIGN_OR_RETURN(std::vector<int64_t> df, store.CountChunksWithWords(missing));
  std::lock_guard lock(specificity_mu);
  for (size_t k = 0; k < missing.size(); ++k) {
    out[at[k]] = std::make_pair(SpecificityOf(df[k]), df[k]);
    specificity.emplace(missing[k], out[at[k]]);
  }
  return out;
}

Result<std::vector<float>> Retriever::Impl::EmbedQuestion(std::string_view question) const {
  auto embedded = embedder->Embed({std::string(question)});
  if (!embedded.ok()) return embedded.status().WithContext("embedding the question");
  if (embedded->vectors.size() != 1) {
    return Status::Internal("embedding the question: " + std::to_string(embedded->vectors.size()) +
                            " vectors for 1 input");
  }
  return std::move(embedded->vectors.front());
}

// Entities named in the question: greedy longest match from the left over the normalised words,
// so "Digital Markets Act" is one name and not also "Markets".
Result<std::optional<int64_t>> Retriever::Impl::EntityOfKey(const std::string& key) const {
  if (full) {
    auto it = full->node_of_key.find(key);
    if (it == full->node_of_key.end()) return std::optional<int64_t>();
    return std::optional<int64_t>(full->entity_ids[it->second]);
  }
  GRAG_ASSIGN_OR_RETURN(std::optional<EntityRecord> e, store.GetEntityByKey(key));
  if (!e) return std::optional<int64_t>();
  return std::optional<int64_t>(e->id);
}

Result<std::vector<SeedEntity>> Retriever::Impl::NamedSeeds(std::string_view question,
                                                            const RetrievalOptions& o) const {
  std::vector<SeedEntity> out;
  if (o.max_name_words <= 0) return out;
  const auto words = QuestionWords(question);
  std::unordered_set<int64_t> seen;
  size_t i = 0;
  while (i < words.size()) {
    size_t matched = 0;
    const size_t longest = std::min(static_cast<size_t>(o.max_name_words), words.size() - i);
    for (size_t len = longest; len >= 1 && matched == 0; --len) {
      std::string key = words[i].key;
      for (size_t j = 1; j < len; ++j) key += ' ' + words[i + j].key;
      GRAG_ASSIGN_OR_RETURN(std::optional<int64_t> entity, EntityOfKey(key));
      if (!entity) continue;
      if (len == 1 && key.size() < kShortNameBytes) {
        // A short word names an entity only when the question capitalises it ("US", not "us").
        const std::string_view piece = words[i].piece;
        if (!std::any_of(piece.begin(), piece.end(), [](char ch) {
              return std::isupper(static_cast<unsigned char>(ch)) != 0;
            })) {
          continue;
        }
      }
      matched = len;
      if (!seen.insert(*entity).second) break;
      GRAG_ASSIGN_OR_RETURN(auto spec, Specificity(key));
      SeedEntity s;
      s.entity_id = *entity;
      s.name_key = key;
      s.by_name = true;
      s.specificity = spec.first;
      s.chunk_frequency = spec.second;
      out.push_back(std::move(s));
    }
    i += std::max<size_t>(matched, 1);
  }
  return out;
}

Result<std::vector<SeedEntity>> Retriever::Impl::FactSeeds(const GraphData& g,
                                                           std::string_view question,
                                                           const std::vector<std::string>& passages,
                                                           const std::vector<SeedEntity>& named,
                                                           const RetrievalOptions& o) const {
  std::vector<SeedEntity> out;
  if (passages.empty() || o.fact_sentences <= 0 || o.fact_seed_share <= 0) return out;
  // The question's words with their specificity; words in most chunks say nothing, and the
  // words of the names it says outright tell which passage, not which of its sentences: the
  // fact is in the sentence that matches the rest ("played", "1945", "1949").
  std::vector<std::pair<std::string, double>> terms;
  double total = 0;
  {
    std::unordered_set<std::string> seen;
    for (const auto& s : named) {
      for (const auto& w : SplitNormalizedName(s.name_key)) seen.insert(Stem(w));
    }
    std::vector<std::string> words;
    for (const auto& w : Words(question)) {
      if (seen.insert(Stem(w)).second) words.push_back(w);
    }
    GRAG_ASSIGN_OR_RETURN(auto specs, WordSpecificities(words));
    for (size_t k = 0; k < words.size(); ++k) {
      const double spec = specs[k].first;
      if (spec < 0.2) continue;
      terms.emplace_back(Stem(words[k]), spec);
      total += spec;
    }
  }
  if (terms.empty()) return out;
  std::unordered_set<int64_t> already;
  for (const auto& s : named) already.insert(s.entity_id);
  // Entity node -> best fact score, and the best match of a sentence naming it.
  std::unordered_map<uint32_t, std::pair<double, double>> score;
  for (size_t r = 0; r < passages.size(); ++r) {
    auto c = g.chunk_of_id.find(passages[r]);
    if (c == g.chunk_of_id.end()) continue;
    GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk, store.GetChunk(passages[r]));
    if (!chunk) continue;
    // Each sentence's share of the question's specific words, which ranks the entities it names
    // against each other, and the share it holds with the sentences either side, which says
    // whether the passage answers the question there at all: a fact often takes two sentences
    // ("'Why, it's Ali Baba!' ... he did come, for the first time").
    struct Scored {
      double match = 0;
      double around = 0;
      std::vector<std::string> words;
    };
    std::vector<Scored> sentences;
    {
      std::vector<std::vector<std::string>> words_of;
      std::vector<std::unordered_set<std::string>> stems_of;
      for (const Sentence& s : SplitSentences(chunk->text)) {
        words_of.push_back(Words(s.text));
        auto& stems = stems_of.emplace_back();
        for (const auto& w : words_of.back()) stems.insert(Stem(w));
      }
      for (size_t i = 0; i < words_of.size(); ++i) {
        const size_t lo = i == 0 ? 0 : i - 1;
        const size_t hi = std::min(words_of.size() - 1, i + 1);
        double matched = 0;
        double around = 0;
        for (const auto& [t, spec] : terms) {
          if (stems_of[i].count(t) != 0) matched += spec;
          for (size_t j = lo; j <= hi; ++j) {
            if (stems_of[j].count(t) != 0) {
              around += spec;
              break;
            }
          }
        }
        if (matched > 0)
          sentences.push_back({matched / total, around / total, std::move(words_of[i])});
      }
    }
    std::stable_sort(sentences.begin(), sentences.end(),
                     [](const Scored& a, const Scored& b) { return a.match > b.match; });
    if (sentences.size() > static_cast<size_t>(o.fact_sentences)) {
      sentences.resize(static_cast<size_t>(o.fact_sentences));
    }
    const double passage_weight = 1.0 / static_cast<double>(r + 1);
    for (const Scored& sentence : sentences) {
      for (uint32_t e : g.chunk_entities[c->second]) {
        if (already.count(g.entity_ids[e])) continue;
        if (!HoldsRun(sentence.words, SplitNormalizedName(g.entity_keys[e]))) continue;
        const double s = passage_weight * sentence.match * g.EntitySpecificity(e);
        auto& [best, best_match] = score[e];
        best = std::max(best, s);
        best_match = std::max(best_match, sentence.around);
      }
    }
  }
  for (const auto& [node, s] : score) {
    SeedEntity seed;
    seed.entity_id = g.entity_ids[node];
    seed.name_key = g.entity_keys[node];
    seed.by_fact = true;
    seed.weight = s.first;
    seed.fact_match = s.second;
    out.push_back(std::move(seed));
  }
  std::sort(out.begin(), out.end(), [](const SeedEntity& a, const SeedEntity& b) {
    return a.weight != b.weight ? a.weight > b.weight : a.entity_id < b.entity_id;
  });
  return out;
}

Result<Retriever::Impl::Windows> Retriever::Impl::WindowRanking(
    std::string_view question, const std::vector<std::string>& pool,
    const RetrievalOptions& o) const {
  Windows out;
  if (pool.empty()) return out;
  // The question's content words, each weighted by its specificity (normalised IDF). A word in
  // most chunks weighs little but still counts: in a book about cancers "mouth cancer" is
  // specific by "mouth", yet the window that also says "cancer" is the one about it, and a
  // novel's hero is in most of its chunks. (FTS5's BM25 gives such words no weight at all; the
  // windows are where hybrid can do better.)
  std::vector<std::string> words;
  {
    std::unordered_set<std::string> seen;
    for (auto& w : Words(question)) {
      if (IsNonContentWord(w) || !seen.insert(w).second) continue;
      words.push_back(std::move(w));
    }
  }
  if (words.empty()) return out;
  GRAG_ASSIGN_OR_RETURN(auto specs, WordSpecificities(words));
  std::unordered_map<std::string, double> weight;  // stem -> weight
  for (size_t k = 0; k < words.size(); ++k) {
    if (specs[k].second <= 0) continue;  // in no chunk
    double& w = weight[Stem(words[k])];
    w = std::max(w, specs[k].first);
  }
  if (weight.empty()) return out;
  const auto window = static_cast<size_t>(o.passage_window_sentences);
  const query::WindowScanner scanner(weight, window);
  std::vector<std::pair<double, size_t>> scored;  // best window, position in the pool
  size_t sentences = 0;                           // in the chunks read
  size_t read = 0;
  for (size_t p = 0; p < pool.size(); ++p) {
    GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk, store.GetChunk(pool[p]));
    if (!chunk) continue;
    query::WindowScanner::Score score = scanner.Scan(chunk->text);
    if (score.best > 0) scored.emplace_back(score.best, p);
    sentences += score.sentences;
    ++read;
    out.held.emplace(pool[p], std::move(score.held));
  }
  out.weights = scanner.weights();
  if (read > 0) {
    out.windows_per_chunk =
        static_cast<double>(sentences) / static_cast<double>(read) / static_cast<double>(window);
  }
  // Ties keep the pool's order (the first fusion's).
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first + 1e-12; });
  for (const auto& [score, p] : scored) out.ranking.push_back(pool[p]);
  return out;
}

Retriever::Retriever(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Retriever::~Retriever() = default;

Result<std::unique_ptr<Retriever>> Retriever::Open(Store& store, EmbeddingModel* embedder,
                                                   const RetrieverOptions& options) {
  auto impl = std::make_unique<Impl>(store);
  impl->embedder = embedder;
  impl->reranker = options.reranker;
  impl->options = options;
  GRAG_ASSIGN_OR_RETURN(impl->total_chunks, store.CountChunks());
  GRAG_ASSIGN_OR_RETURN(impl->total_entities, store.CountEntities());
  if (options.load_graph) {
    GRAG_ASSIGN_OR_RETURN(GraphSnapshot g, store.LoadGraphSnapshot());
    impl->full = GraphData::Build(std::move(g), impl->total_chunks);
  }

  if (options.load_vectors && embedder != nullptr) {
    for (EmbeddingOwner owner : {EmbeddingOwner::kChunk, EmbeddingOwner::kEntity}) {
      GRAG_ASSIGN_OR_RETURN(std::optional<EmbeddingSpace> space, store.GetEmbeddingSpace(owner));
      const std::string what = owner == EmbeddingOwner::kChunk ? "chunk" : "entity";
      if (!space) {
        impl->open_notes.push_back("the index holds no " + what + " embeddings");
        continue;
      }
      if (space->model != embedder->model()) {
        impl->open_notes.push_back("the " + what + " embeddings were made with '" + space->model +
                                   "', not the configured '" + embedder->model() +
                                   "': not used (re-index to embed with it)");
        continue;
      }
      if (owner == EmbeddingOwner::kEntity && !options.load_graph &&
          space->count * space->dimension > static_cast<int64_t>(options.lazy_max_entity_floats)) {
        // One question: reading every entity vector would cost more than the rest together;
        // the names and facts seed the walk.
        impl->open_notes.push_back(
            "one-question mode: the " + std::to_string(space->count) +
            " entity vectors are not read, so no entity is matched by embedding");
        continue;
      }
      Impl::LoadingIndex& into =
          owner == EmbeddingOwner::kChunk ? impl->chunk_vectors : impl->entity_vectors;
      into.owner = owner;
      if (!options.load_graph) {
        into.loader = impl.get();
        continue;
      }
      GRAG_ASSIGN_OR_RETURN(into.index, VectorIndex::Build(store, owner));
    }
  } else if (embedder == nullptr) {
    impl->open_notes.push_back("no embedding model: the vector signal is off");
  }
  return std::unique_ptr<Retriever>(new Retriever(std::move(impl)));
}

const std::shared_future<void>& Retriever::Impl::StartVectors() const {
  std::call_once(vectors_once, [this] {
    // The store reads on a connection of its own there; ~Impl waits for the thread.
    vectors_loaded = std::async(std::launch::async, [im = this, log = CurrentLogFile()] {
                       ScopedLogFile log_scope(log);  // its lines go where the opener's go
                       for (const LoadingIndex* cv : {&im->chunk_vectors, &im->entity_vectors}) {
                         if (!cv->deferred()) continue;
                         Result<std::unique_ptr<VectorIndex>> built =
                             VectorIndex::Build(im->store, cv->owner);
                         if (built.ok()) {
                           cv->index = std::move(built).value();
                         } else {
                           cv->status = built.status();
                         }
                       }
                     }).share();
  });
  return vectors_loaded;
}

Result<std::vector<SeedEntity>> Retriever::NamedEntities(std::string_view question,
                                                         const RetrievalOptions& o) const {
  GRAG_RETURN_IF_ERROR(CheckOptions(o));
  GRAG_ASSIGN_OR_RETURN(std::vector<SeedEntity> named, impl_->NamedSeeds(question, o));
  std::erase_if(named, [&](const SeedEntity& s) { return !SpecificEnough(s, o); });
  return named;
}

Result<const VectorIndex*> Retriever::EntityVectors() const { return impl_->entity_vectors.Get(); }

Result<std::vector<SeedEntity>> Retriever::Impl::WalkSeeds(const std::vector<float>& q,
                                                           const std::vector<SeedEntity>& named,
                                                           bool lexical,
                                                           const RetrievalOptions& o) const {
  // Names too common to point anywhere are dropped, unless nothing else is named.
  std::vector<SeedEntity> seeds;
  for (auto& s : named) {
    if (SpecificEnough(s, o)) seeds.push_back(s);
  }
  if (seeds.empty()) {
    for (auto& s : named) {
      if (s.specificity > 0) seeds.push_back(s);
    }
  }
  for (auto& s : seeds) s.weight = s.specificity;
  const VectorIndex* vectors = nullptr;
  if (!q.empty() && o.max_embedding_seeds > 0) {
    GRAG_ASSIGN_OR_RETURN(vectors, entity_vectors.Get());
  }
  if (vectors != nullptr && vectors->size() > 0) {
    const double floor = lexical ? o.lexical_similarity_floor : o.similarity_floor;
    auto hits = vectors->Search(q, static_cast<size_t>(o.max_embedding_seeds));
    if (!hits.ok()) return hits.status().WithContext("searching the entity embeddings");
    for (const auto& h : *hits) {
      if (h.similarity < floor) break;
      int64_t id = 0;
      try {
        id = std::stoll(h.id);
      } catch (const std::exception&) {
        continue;
      }
      auto same = std::find_if(seeds.begin(), seeds.end(),
                               [&](const SeedEntity& s) { return s.entity_id == id; });
      if (same != seeds.end()) {
        same->similarity = h.similarity;
        continue;
      }
      SeedEntity s;
      s.entity_id = id;
      s.similarity = h.similarity;
      s.weight = 0.5 * h.similarity;  // a near description counts less than a name said outright
      seeds.push_back(std::move(s));
    }
  }
  return seeds;
}

Result<bool> Retriever::Impl::GraphSignal(std::string_view question, const std::vector<float>& q,
                                          const std::vector<SeedEntity>& named, bool lexical,
                                          const RetrievalOptions& o, Signals& sig,
                                          RetrievalResult& result) const {
  GRAG_ASSIGN_OR_RETURN(std::vector<SeedEntity> seeds, WalkSeeds(q, named, lexical, o));
  // The passages the other signals rank best seed the walk too, lightly, and their sentences
  // that match the question seed the entities they name (fact seeds).
  const auto first = ReciprocalRankFusion(
      {sig.lists[0], sig.lists[1]},
      {lexical ? o.lexical_vector_weight : o.vector_weight, o.bm25_weight}, o.rrf_k);
  const size_t passages = std::min(first.size(), static_cast<size_t>(o.passage_seeds));
  std::vector<std::string> best_passages;
  for (size_t r = 0; r < passages; ++r) best_passages.push_back(first[r].first);
  // The graph to walk: the whole of it, kept; or (one question) the neighbourhood of what
  // seeds it, read now.
  const GraphData* g = full.get();
  std::unique_ptr<GraphData> local;
  if (g == nullptr) {
    std::vector<int64_t> seed_ids;
    for (const auto& s : seeds) seed_ids.push_back(s.entity_id);
    GRAG_ASSIGN_OR_RETURN(local, ReadNeighbourhood(seed_ids, best_passages, options.neighbourhood));
    g = local.get();
  }
  std::erase_if(seeds, [&](const SeedEntity& s) { return !g->node_of_entity.count(s.entity_id); });
  for (auto& s : seeds) {
    if (s.name_key.empty()) s.name_key = g->entity_keys[g->node_of_entity.at(s.entity_id)];
  }
  GRAG_ASSIGN_OR_RETURN(std::vector<SeedEntity> facts,
                        FactSeeds(*g, question, best_passages, seeds, o));
  double entity_mass = 0;
  for (const auto& s : seeds) entity_mass += s.weight;
  double fact_mass = 0;
  for (const auto& s : facts) fact_mass += s.weight;
  // Shares of the seed mass: passages, facts, and the rest for the entities the question names
  // (or its share to the others when one kind found nothing).
  double passage_share = passages == 0 ? 0.0 : o.passage_seed_share;
  double fact_share = fact_mass > 0 ? o.fact_seed_share : 0.0;
  double named_share = entity_mass > 0 ? 1.0 - passage_share - fact_share : 0.0;
  const double sum = passage_share + fact_share + named_share;
  if (sum > 0) {
    passage_share /= sum;
    fact_share /= sum;
    named_share /= sum;
  }
  std::vector<std::pair<uint32_t, double>> seed_nodes;
  for (auto& s : seeds) {
    s.weight = named_share * s.weight / entity_mass;
    seed_nodes.emplace_back(g->node_of_entity.at(s.entity_id), s.weight);
  }
  for (auto& s : facts) {
    s.weight = fact_share * s.weight / fact_mass;
    seed_nodes.emplace_back(g->node_of_entity.at(s.entity_id), s.weight);
    seeds.push_back(s);
  }
  if (passages > 0) {
    double harmonic = 0;
    for (size_t r = 0; r < passages; ++r) harmonic += 1.0 / static_cast<double>(r + 1);
    for (size_t r = 0; r < passages; ++r) {
      auto c = g->chunk_of_id.find(first[r].first);
      if (c == g->chunk_of_id.end()) continue;
      seed_nodes.emplace_back(g->entity_count() + c->second,
                              passage_share / (static_cast<double>(r + 1) * harmonic));
    }
  }
  std::sort(seeds.begin(), seeds.end(),
            [](const SeedEntity& a, const SeedEntity& b) { return a.weight > b.weight; });
  const bool anchored = std::any_of(seeds.begin(), seeds.end(),
                                    [](const SeedEntity& s) { return s.by_name || s.by_fact; });
  result.seeds = seeds;
  if (!seed_nodes.empty()) {
    Walk(*g, seed_nodes, o, sig, result);
  } else {
    result.diagnostics.push_back("the graph signal found nothing to start from");
  }
  return anchored;
}

void Retriever::Impl::Walk(const GraphData& g,
                           const std::vector<std::pair<uint32_t, double>>& seed_nodes,
                           const RetrievalOptions& o, Signals& sig, RetrievalResult& result) const {
  const auto candidates = static_cast<size_t>(o.candidates);
  query::PprOptions po;
  po.damping = o.damping;
  po.epsilon = o.ppr_epsilon;
  const auto graph = g.Graph(o.entity_to_chunk, o.titled_chunk_share, o.specific_entities_first);
  auto ranked = query::PersonalizedPageRank(*graph, seed_nodes, po);
  if (o.exclude_seed_mass) {
    // A walk that stops at its first stop says nothing about the graph.
    std::unordered_map<uint32_t, double> seed_mass;
    double total = 0;
    for (const auto& [node, w] : seed_nodes) total += w;
    for (const auto& [node, w] : seed_nodes) seed_mass[node] += w / total;
    for (auto& [node, score] : ranked) {
      if (auto it = seed_mass.find(node); it != seed_mass.end()) {
        score = std::max(0.0, score - (1.0 - o.damping) * it->second);
      }
    }
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
  }
  for (const auto& [node, score] : ranked) {
    if (node < g.entity_count()) {
      if (result.entity_scores.size() < 200) {
        result.entity_scores.emplace_back(g.entity_ids[node], score);
      }
    } else if (sig.lists[2].size() < candidates) {
      const std::string& id = g.chunk_ids[node - g.entity_count()];
      sig.lists[2].push_back(id);
      sig.scores[2][id] = score;
    }
  }
}

Result<std::vector<std::pair<std::string, double>>> Retriever::Impl::Rank(
    std::string_view question, const std::vector<SeedEntity>& named, bool graph_anchored,
    bool lexical, const RetrievalOptions& o, Signals& sig, RetrievalResult& result) const {
  auto& lists = sig.lists;
  auto& scores = sig.scores;
  std::vector<std::pair<std::string, double>> ranked;
  if (o.method != RetrievalMethod::kHybrid) {
    const size_t s = o.method == RetrievalMethod::kVector ? 0
                     : o.method == RetrievalMethod::kBm25 ? 1
                                                          : 2;
    for (const auto& id : lists[s]) ranked.emplace_back(id, scores[s][id]);
    return ranked;
  }
  if (!graph_anchored && !lists[2].empty()) {
    result.diagnostics.push_back(
        "no entity of the question was found by name or in the best passages: the graph "
        "signal counts less (search.unanchored_graph_weight)");
  }
  // The graph counts by how well its walk is anchored: the most specific name the
  // question says (RetrievalTuning::anchored_specificity).
  double anchor = 0;
  for (const auto& s : named) anchor = std::max(anchor, s.specificity);
  const double low = o.min_name_specificity;
  const double high = std::max(o.anchored_specificity, low);
  const double ramp =
      high > low ? std::clamp((anchor - low) / (high - low), 0.0, 1.0) : anchor >= high;
  const double graph_weight =
      graph_anchored
          ? o.unanchored_graph_weight + (o.graph_weight - o.unanchored_graph_weight) * ramp
          : o.unanchored_graph_weight;
  const std::vector<double> weights = {lexical ? o.lexical_vector_weight : o.vector_weight,
                                       o.bm25_weight, graph_weight};
  ranked = ReciprocalRankFusion({lists[0], lists[1], lists[2]}, weights, o.rrf_k);
  result.stats.graph_weight = graph_weight;
  if ((o.passage_weight > 0 || o.diversity > 0) && o.passage_pool > 0 && !ranked.empty()) {
    // The signals' best chunks, in the first fusion's order, ranked again by their best
    // window of sentences, and that ranking fused in.
    std::vector<std::string> pool;
    std::unordered_set<std::string> in_pool;
    const auto per = static_cast<size_t>(o.passage_pool);
    for (const auto& list : lists) {
      for (size_t r = 0; r < list.size() && r < per; ++r) in_pool.insert(list[r]);
    }
    for (const auto& [id, score] : ranked) {
      if (in_pool.count(id)) pool.push_back(id);
    }
    const auto wt = SteadyClock::now();
    GRAG_ASSIGN_OR_RETURN(Windows windows, WindowRanking(question, pool, o));
    // A chunk of two windows or fewer is ranked by its words as well as by its windows
    // (BM25 already does that); the window list counts in full from eight windows on.
    const double long_units = std::clamp((windows.windows_per_chunk - 2.0) / 6.0, 0.0, 1.0);
    Log(LogLevel::kDebug, kLog,
        fmt::format("sentence windows: {} chunks in {} us, {:.1f} windows a chunk; graph "
                    "weight {:.2f} (anchor {:.2f})",
                    pool.size(), Since(wt).count(), windows.windows_per_chunk, graph_weight,
                    anchor));
    if (long_units > 0 && o.passage_weight > 0) {
      std::vector<double> with = weights;
      with.push_back(o.passage_weight * long_units);
      result.stats.window_weight = with.back();
      ranked = ReciprocalRankFusion({lists[0], lists[1], lists[2], windows.ranking}, with, o.rrf_k);
    }
    if (o.diversity > 0) Diversify(ranked, windows, o);
  }
  return ranked;
}

// Greedy, over the first passage_pool places: each place goes to the candidate whose fused
// score, times 1 + diversity x (the worth of the question's terms it holds that the chunks
// already placed do not, as a share of all the terms' worth), is highest. A chunk outside the
// pool holds nothing new.
void Retriever::Impl::Diversify(std::vector<std::pair<std::string, double>>& ranked,
                                const Windows& windows, const RetrievalOptions& o) {
  const size_t depth = std::min(ranked.size(), static_cast<size_t>(o.passage_pool));
  double total = 0;
  for (double w : windows.weights) total += w;
  if (depth < 2 || !(total > 0)) return;
  std::vector<bool> covered(windows.weights.size(), false);
  static const std::vector<uint32_t> kNone;
  auto held_by = [&](const std::string& id) -> const std::vector<uint32_t>& {
    auto it = windows.held.find(id);
    return it == windows.held.end() ? kNone : it->second;
  };
  for (size_t place = 0; place + 1 < depth; ++place) {
    size_t best = place;
    double best_score = -1;
    for (size_t i = place; i < depth; ++i) {
      double fresh = 0;
      for (uint32_t t : held_by(ranked[i].first)) fresh += covered[t] ? 0.0 : windows.weights[t];
      const double s = ranked[i].second * (1.0 + o.diversity * fresh / total);
      if (s > best_score) {
        best_score = s;
        best = i;
      }
    }
    // Moved up, the others keep their order. The chunk's score becomes the one it was placed
    // by: what is left can only add less, so the scores still fall down the list.
    std::rotate(ranked.begin() + static_cast<std::ptrdiff_t>(place),
                ranked.begin() + static_cast<std::ptrdiff_t>(best),
                ranked.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranked[place].second = best_score;
    for (uint32_t t : held_by(ranked[place].first)) covered[t] = true;
  }
}

// A neighbourhood holds no aliases. The titles of its chunks that are not the key of one of its
// entities are looked up in one read, and those resolved into one of its entities ("Christopher
// Nolan" into "Christopher Edward Nolan") join its aliases: GraphData::Build then finds their
// entity as the kept graph's aliases find it.
Result<std::unique_ptr<GraphData>> Retriever::Impl::ReadNeighbourhood(
    const std::vector<int64_t>& seeds, const std::vector<std::string>& chunks,
    const Store::NeighbourhoodLimits& limits) const {
  GRAG_ASSIGN_OR_RETURN(GraphSnapshot near, store.LoadGraphNeighbourhood(seeds, chunks, limits));
  std::unordered_map<std::string_view, int64_t> entity_of_key;
  for (const auto& e : near.entities) entity_of_key.emplace(e.name_key, e.id);
  std::vector<std::string> titles;
  std::unordered_set<std::string> seen;
  for (const auto& title : near.chunk_titles) {
    std::string key = NormalizeEntityName(TitleEntityName(title));
    if (key.empty() || entity_of_key.count(key) || !seen.insert(key).second) continue;
    titles.push_back(std::move(key));
  }
  if (!titles.empty()) {
    GRAG_ASSIGN_OR_RETURN(auto canonical, store.CanonicalKeys(titles));
    for (const auto& [key, to] : canonical) {
      if (auto e = entity_of_key.find(to); e != entity_of_key.end()) {
        near.aliases.emplace_back(key, e->second);
      }
    }
  }
  return GraphData::Build(std::move(near), total_chunks);
}

Status Retriever::Impl::FollowChain(std::vector<std::pair<std::string, double>>& ranked,
                                    const std::vector<SeedEntity>& named, const RetrievalOptions& o,
                                    Signals& sig) const {
  if (o.chain_links <= 0 || ranked.size() < 2) return Status::Ok();
  const size_t depth = std::min(ranked.size(), static_cast<size_t>(o.chain_depth));
  std::vector<std::string> head;
  head.reserve(depth);
  for (size_t r = 0; r < depth; ++r) head.push_back(ranked[r].first);
  // The whole graph, kept; or (one question) the chunks and their entities, read now: the first
  // chunk's names and the others' titles.
  const GraphData* g = full.get();
  std::unique_ptr<GraphData> near;
  if (g == nullptr) {
    Store::NeighbourhoodLimits limits = options.neighbourhood;
    limits.hops = 1;
    limits.relationships = false;
    GRAG_ASSIGN_OR_RETURN(near, ReadNeighbourhood({}, head, limits));
    g = near.get();
  }
  const auto links =
      g->ChainLinks(head, o.min_name_specificity, static_cast<size_t>(o.chain_links));
  if (links.empty()) return Status::Ok();
  // The chunks of what the question itself names keep their places ahead of the links ("Are
  // Medici and Senet both board games?": Senet's article, not what Medici's names).
  std::unordered_set<int64_t> asked;
  for (const auto& s : named) {
    if (SpecificEnough(s, o)) asked.insert(s.entity_id);
  }
  std::vector<bool> link(ranked.size(), false);
  for (const auto& [r, entity] : links) {
    link[r] = true;
    sig.chained.emplace(ranked[r].first, g->entity_keys[entity]);
  }
  std::vector<std::pair<std::string, double>> chained;
  chained.reserve(ranked.size());
  chained.push_back(std::move(ranked[0]));
  size_t next_link = 0;  // in `links`
  auto flush_links = [&] {
    for (; next_link < links.size(); ++next_link) {
      chained.push_back(std::move(ranked[links[next_link].first]));
    }
  };
  for (size_t r = 1; r < ranked.size(); ++r) {
    if (link[r]) {
      if (next_link < links.size() && links[next_link].first == r) {
        chained.push_back(std::move(ranked[r]));  // reached in place: only asked-for chunks before
        ++next_link;
      }
      continue;
    }
    const uint32_t title = r < depth ? g->TitleOf(ranked[r].first) : GraphData::kNone;
    if (title == GraphData::kNone || !asked.count(g->entity_ids[title])) flush_links();
    chained.push_back(std::move(ranked[r]));
  }
  flush_links();
  ranked = std::move(chained);
  return Status::Ok();
}

Status Retriever::Impl::CollectChunks(std::string_view question,
                                      const std::vector<std::pair<std::string, double>>& ranked,
                                      const RetrievalOptions& o, Signals& sig,
                                      RetrievalResult& result) const {
  std::array<std::unordered_map<std::string, int>, kSignalCount> rank_of;
  for (size_t s = 0; s < kSignalCount; ++s) {
    for (size_t r = 0; r < sig.lists[s].size(); ++r)
      rank_of[s].emplace(sig.lists[s][r], static_cast<int>(r + 1));
  }
  const bool rerank = reranker != nullptr && o.rerank_top_n > 0;
  for (const auto& [id, score] : ranked) {
    RetrievedChunk rc;
    if (o.read_chunks || rerank) {
      GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk, store.GetChunk(id));
      if (!chunk) continue;  // deleted since the retriever was opened
      rc.document_id = std::move(chunk->document_id);
      rc.index = chunk->index;
      rc.text = std::move(chunk->text);
    }
    rc.chunk_id = id;
    rc.score = score;
    if (auto it = sig.chained.find(id); it != sig.chained.end()) rc.chained_by = it->second;
    for (size_t s = 0; s < kSignalCount; ++s) {
      if (auto it = rank_of[s].find(id); it != rank_of[s].end()) {
        rc.ranks[s] = it->second;
        rc.signal_scores[s] = sig.scores[s][id];
      }
    }
    result.chunks.push_back(std::move(rc));
  }
  if (!rerank || result.chunks.size() <= 1) return Status::Ok();
  // The reranker reads the head of the ranking whole and orders it; the tail stays after it.
  const auto t = SteadyClock::now();
  const size_t n = std::min(result.chunks.size(), static_cast<size_t>(o.rerank_top_n));
  std::vector<std::string> texts;
  texts.reserve(n);
  for (size_t i = 0; i < n; ++i) texts.push_back(result.chunks[i].text);
  GRAG_ASSIGN_OR_RETURN(std::vector<RerankHit> hits, reranker->Rerank(question, texts, n));
  std::vector<RetrievedChunk> head;
  std::vector<bool> used(n, false);
  for (const auto& h : hits) {
    if (h.index >= n || used[h.index]) continue;
    used[h.index] = true;
    head.push_back(std::move(result.chunks[h.index]));
    head.back().rerank_score = h.score;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!used[i]) head.push_back(std::move(result.chunks[i]));
  }
  for (size_t i = n; i < result.chunks.size(); ++i) head.push_back(std::move(result.chunks[i]));
  result.chunks = std::move(head);
  result.stats.reranked = true;
  result.stats.rerank_time = Since(t);
  return Status::Ok();
}

Result<RetrievalResult> Retriever::Retrieve(std::string_view question,
                                            const RetrievalOptions& o) const {
  const auto start = SteadyClock::now();
  GRAG_RETURN_IF_ERROR(CheckOptions(o));
  GRAG_RETURN_IF_ERROR(CheckQuestionHasWords(question));
  const Impl& im = *impl_;
  RetrievalResult result;
  result.method = o.method;
  RetrievalStats& stats = result.stats;
  stats.chunks = im.total_chunks;
  stats.entities = im.total_entities;
  result.diagnostics = im.open_notes;
  const bool lexical = im.embedder != nullptr && IsLexicalEmbeddingModel(im.embedder->model());
  stats.lexical_embeddings = lexical;
  const auto candidates = static_cast<size_t>(o.candidates);
  const bool want_vector = o.method == RetrievalMethod::kVector ||
                           o.method == RetrievalMethod::kHybrid ||
                           o.method == RetrievalMethod::kGraph;
  const bool want_bm25 = o.method != RetrievalMethod::kVector;
  const bool want_graph =
      o.method == RetrievalMethod::kGraph || o.method == RetrievalMethod::kHybrid;
  // One-question mode: the vectors load beside BM25 and the name lookup.
  if (want_vector && (im.chunk_vectors.deferred() || im.entity_vectors.deferred())) {
    im.StartVectors();
  }

  // ---- question embedding (the vector signal and the embedding seeds share it)
  std::vector<float> q;
  if (want_vector && im.embedder != nullptr &&
      (im.chunk_vectors.present() || im.entity_vectors.present())) {
    GRAG_ASSIGN_OR_RETURN(q, im.EmbedQuestion(question));
  }

  Impl::Signals sig;
  // ---- bm25 (before the vectors, which may still be loading)
  if (want_bm25) {
    const auto t = SteadyClock::now();
    GRAG_ASSIGN_OR_RETURN(std::vector<ChunkHit> hits,
                          im.store.SearchChunks(question, static_cast<int>(candidates)));
    for (const auto& h : hits) {
      sig.lists[1].push_back(h.chunk_id);
      sig.scores[1][h.chunk_id] = h.score;
    }
    stats.signal_time[1] = Since(t);
  }
  // The names the question holds (the graph's seeds), also before the vectors.
  const bool walk = want_graph && im.total_chunks > 0;
  const auto named_start = SteadyClock::now();
  std::vector<SeedEntity> named;
  if (walk) {
    GRAG_ASSIGN_OR_RETURN(named, im.NamedSeeds(question, o));
  }
  const auto named_time = Since(named_start);
  // One question: the graph image is read while the vectors finish loading on their thread.
  if (walk && !im.full && (im.chunk_vectors.deferred() || im.entity_vectors.deferred())) {
    (void)im.store.WarmGraphImage();  // its errors meet the walk's read, which reports them
  }

  // ---- vector
  const VectorIndex* chunk_vectors = nullptr;
  if (want_vector) {
    GRAG_ASSIGN_OR_RETURN(chunk_vectors, im.chunk_vectors.Get());
  }
  if (want_vector && !q.empty() && chunk_vectors != nullptr && chunk_vectors->size() > 0) {
    const auto t = SteadyClock::now();
    auto hits = chunk_vectors->Search(q, candidates);
    if (!hits.ok()) return hits.status().WithContext("searching the chunk embeddings");
    for (const auto& h : *hits) {
      sig.lists[0].push_back(h.id);
      sig.scores[0][h.id] = h.similarity;
    }
    stats.used_embeddings = true;
    stats.signal_time[0] = Since(t);
  }

  // ---- graph
  bool graph_anchored = false;  // a seed named in the question or found as a fact
  if (walk) {
    const auto t = SteadyClock::now() - named_time;
    GRAG_ASSIGN_OR_RETURN(graph_anchored,
                          im.GraphSignal(question, q, named, lexical, o, sig, result));
    stats.signal_time[2] = Since(t);
  }
  for (size_t s = 0; s < kSignalCount; ++s)
    stats.candidates[s] = static_cast<int64_t>(sig.lists[s].size());

  // ---- the method's ranking
  GRAG_ASSIGN_OR_RETURN(auto ranked,
                        im.Rank(question, named, graph_anchored, lexical, o, sig, result));
  if (o.method == RetrievalMethod::kHybrid && walk) {
    GRAG_RETURN_IF_ERROR(im.FollowChain(ranked, named, o, sig));
  }
  if (o.method == RetrievalMethod::kVector && sig.lists[0].empty()) {
    result.diagnostics.push_back(
        "the vector signal is unavailable (no usable chunk embeddings or embedding model)");
  }
  if (ranked.size() > static_cast<size_t>(o.top_k)) ranked.resize(static_cast<size_t>(o.top_k));
  GRAG_RETURN_IF_ERROR(im.CollectChunks(question, ranked, o, sig, result));
  stats.total_time = Since(start);
  Log(LogLevel::kDebug, kLog,
      fmt::format("{}: {} chunks in {} us (vector {}, bm25 {}, graph {} candidates; {} seeds)",
                  RetrievalMethodName(o.method), result.chunks.size(), stats.total_time.count(),
                  stats.candidates[0], stats.candidates[1], stats.candidates[2],
                  result.seeds.size()));
  return result;
}

}  // namespace grag
