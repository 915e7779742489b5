// Retrieval: the chunks a question needs, ranked, without writing an answer (`grag search`, and
// the candidates of basic, hybrid and local search).
//
// Three signals each rank chunks (seed 002's hybrid design, with HippoRAG 2's graph signal):
//   vector  the question's embedding against the chunk embeddings the index stores (cosine);
//   bm25    SQLite FTS5's BM25 over the chunk text;
//   graph   personalised PageRank over the entity graph, seeded from the entities the question
//           names (each weighted by how specific its name is in the corpus: the inverse document
//           frequency of the phrase, so "film" or "country" weigh little beside "Shirley
//           Temple"), the entities whose description embeddings are nearest the question, and,
//           lightly, the best passages of the other two signals. Chunks are nodes too, linked to
//           the entities extracted from them, so a walk goes question → entity → chunk → entity
//           → chunk: a passage whose subject the question never names is reached in two hops.
//           A chunk's score is the walk's probability of ending on it.
//   hybrid  weighted reciprocal rank fusion of the three: score = Σ weight / (rrf_k + rank).
//
// A Retriever keeps what the signals read (the graph in compact form, the chunk and entity
// vectors) in memory, built once from the store; a server keeps one per index, a command builds
// one per question. It does not see later changes to the index: open a new one after an update.
//
// Thread-safety: Retrieve may be called from any number of threads at once.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/search_results.h"
#include "grag/llm.h"
#include "grag/retrieval_tuning.h"
#include "grag/status.h"
#include "grag/store.h"

namespace grag {

class VectorIndex;

// The tunable weights (RetrievalTuning, grag/retrieval_tuning.h, where their defaults are
// explained) and the rest of retrieval's options.
struct RetrievalOptions : RetrievalTuning {
  RetrievalMethod method = RetrievalMethod::kHybrid;
  // Chunks returned.
  int top_k = 10;
  // Chunks each signal contributes to the fusion: deep enough that a chunk ranked low by one
  // signal and high by another is still seen by both.
  int candidates = 100;

  // ---- graph signal
  // Of the mass an entity passes on, the share that goes to the chunks it was extracted from
  // (the rest to its related entities, by relationship weight).
  double entity_to_chunk = 0.5;
  // Entities matched by embedding at most, and the cosine similarity they must reach (the lexical
  // floor with the built-in embedder).
  int max_embedding_seeds = 5;
  double similarity_floor = 0.5;
  double lexical_similarity_floor = 0.2;
  // The best passages of each of the vector and BM25 signals that seed the walk
  // (RetrievalTuning::passage_seed_share).
  int passage_seeds = 5;
  // The sentence-window list (RetrievalTuning::passage_weight) ranks this many of each
  // signal's best chunks; the chunks' texts are read for it.
  int passage_pool = 20;
  // Sentences per passage that may seed facts (RetrievalTuning::fact_seed_share).
  int fact_sentences = 2;
  // Longest entity name, in words, looked for in the question ("Flute Sonata in C major, BWV
  // 1033" is 7).
  int max_name_words = 10;
  // A chunk passes its mass to its entities in proportion to their specificity (the inverse
  // document frequency of how many chunks they occur in), so a walk leaves a passage through
  // what is particular to it ("Maximum Overdrive") rather than through what is everywhere
  // ("United States"). Off: evenly.
  bool specific_entities_first = true;
  // A chunk's graph score leaves out the mass it got as a seed (the walk's first stop), so the
  // signal ranks chunks by what the graph says of them, not by the other signals' seeding.
  bool exclude_seed_mass = true;

  // The walk's precision (forward-push epsilon): mass below it per node is not pushed on.
  double ppr_epsilon = 1e-6;
  // With a reranker (RetrieverOptions::reranker): the ranking's first this many chunks are
  // reordered by it; the rest keep their order after them. 0: no reranking.
  int rerank_top_n = 20;
  // Read each returned chunk from the store: its text, document and position. Off: ids,
  // scores and ranks only, for a caller that reads the few chunks it uses itself (local search
  // places 7 of 100 on a typical question); a chunk deleted since the retriever opened is then
  // not left out. Ignored (on) while a reranker reorders the head, which reads the texts.
  bool read_chunks = true;
};

struct RetrieverOptions {
  // Build the chunk and entity vector indexes (when the index holds embeddings). Off: the
  // vector signal and embedding seeds are skipped.
  bool load_vectors = true;
  // Keep the whole graph in memory (a server, an evaluation). Off: each question reads only its
  // seeds' neighbourhood from the store (Store::LoadGraphNeighbourhood), which is what one
  // question on a large index should cost; entity vectors are then read only when there are
  // at most lazy_max_entity_floats of them.
  bool load_graph = true;
  size_t lazy_max_entity_floats = 4'000'000;
  Store::NeighbourhoodLimits neighbourhood;
  // Reorders the fused ranking's head (RetrievalOptions::rerank_top_n); borrowed; may be null.
  RerankModel* reranker = nullptr;
};

class Retriever {
 public:
  // Reads the graph and the vectors from `store`. `embedder` embeds questions (nullptr: no
  // vector signal); it must be the model the index was embedded with, else the vector signal is
  // skipped with a diagnostic. Both are borrowed and must outlive the Retriever.
  static Result<std::unique_ptr<Retriever>> Open(Store& store, EmbeddingModel* embedder,
                                                 const RetrieverOptions& options = {});
  ~Retriever();
  Retriever(const Retriever&) = delete;
  Retriever& operator=(const Retriever&) = delete;

  // Ranks the chunks for `question`. Errors: kInvalidArgument (an empty question, options out
  // of range), the embedding model's, the store's.
  Result<RetrievalResult> Retrieve(std::string_view question,
                                   const RetrievalOptions& options = {}) const;

  // The entities the question names that are specific enough to seed the walk (as Retrieve's
  // name seeds), in question order: what the router counts.
  Result<std::vector<SeedEntity>> NamedEntities(std::string_view question,
                                                const RetrievalOptions& options = {}) const;

  // The entity vectors it searches for embedding seeds (null: none read, see
  // RetrieverOptions), once loaded: local search matches entities in the same index instead of
  // reading them again. Errors: the store's, when reading them failed.
  Result<const VectorIndex*> EntityVectors() const;

  struct Impl;

 private:
  explicit Retriever(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Weighted reciprocal rank fusion: each list is chunk ids best first; a chunk's score is the sum
// over lists of weight / (rrf_k + rank), ranks from 1. Highest first; ties by first appearance.
std::vector<std::pair<std::string, double>> ReciprocalRankFusion(
    const std::vector<std::vector<std::string>>& lists, const std::vector<double>& weights,
    double rrf_k);

}  // namespace grag
