// Nearest-neighbour search over the index's embeddings by cosine similarity.
//
// A VectorIndex holds the vectors of one owner kind (entities, chunks or reports) in memory,
// normalised to unit length, so similarity is a dot product. It is rebuilt from the store
// (Store::ListPackedEmbeddings: the kind's query image where the index keeps one), which stays
// the single source of truth.
//
// Exact or approximate: while the index holds at most `max_exact_floats` floats (vectors x
// dimension) a query scans them all: exact, and nothing to build. Above that an HNSW graph
// (hnswlib 0.6) answers in about a millisecond, at the price of a build and a small loss of
// recall (see the options for the parameters and what they measured). A caller that answers a
// single question (the CLI) should always scan: building a graph costs more than a thousand
// scans.
//
// Vectors that cannot be normalised (zero length, or holding NaN or infinity) are kept as zero
// vectors: similarity 0 to everything, so they never clear a positive floor; `unusable()` counts
// them.
//
// Thread-safety: building is single-threaded (so one set of vectors always builds the same
// graph); once built, an index is immutable and any number of threads may Search it at once.
// hnswlib is included by src/vector only: other modules search through this class.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grag/status.h"
#include "grag/store.h"
#include "grag/store_types.h"

namespace grag {

struct VectorIndexOptions {
  // Scan while vectors x dimension is at most this; HNSW above. 32M floats is a scan of about
  // 10 ms on one core here (20k vectors of 1536 dimensions: 8 ms measured), small next to the
  // question's embedding call and the answer's generation. Low-dimensional sets are scanned up
  // to large sizes on purpose: 100k x 64 scans in ~2 ms, and that is where the graph's recall
  // is worst (below).
  size_t max_exact_floats = 32'000'000;
  // HNSW links per node (hnswlib's M; level 0 gets 2M). Chosen for recall: on the worst case we
  // measured, 100k unstructured random 64-d vectors, recall@10 at ef_search 256 is 0.97 with
  // M = 32 against 0.84 with M = 16 (real embeddings cluster and reach ~1.0 either way). Costs
  // 2 * M * 4 bytes a vector and ~0.8 ms a vector to build at 64 dimensions (one core).
  size_t hnsw_m = 32;
  // Candidate list while building (hnswlib's default): enough that recall is set by the search
  // list below; lower values build faster and lose recall.
  size_t hnsw_ef_construction = 200;
  // Candidate list while searching (at least k is always used). 256: ~1 ms a query at 100k
  // vectors; recall@10 on the worst case above goes 0.72 / 0.88 / 0.97 / 1.00 at 64 / 128 / 256
  // / 512.
  size_t hnsw_ef_search = 256;
  // Seed of the level generator. Fixed, so the same vectors build the same graph and the same
  // question gets the same neighbours on every run.
  uint64_t seed = 42;
};

struct VectorHit {
  std::string id;        // the owner id, as stored (entity / community id in decimal, chunk id)
  float similarity = 0;  // cosine similarity, in [-1, 1]
};

class VectorIndex {
 public:
  // Loads every vector of `owner` from the store and builds the index. No vectors: an empty
  // index (size() == 0) whose searches return nothing. Errors: the store's; kCorruption when
  // the stored vectors disagree on model or dimension; kInternal when memory runs out.
  static Result<std::unique_ptr<VectorIndex>> Build(Store& store, EmbeddingOwner owner,
                                                    const VectorIndexOptions& options = {});

  // The same from records in memory (consumed, to spare a copy of every vector). Every record
  // must share one model and dimension: kInvalidArgument otherwise.
  static Result<std::unique_ptr<VectorIndex>> FromRecords(std::vector<EmbeddingRecord> records,
                                                          const VectorIndexOptions& options = {});
  // The same from packed vectors (consumed: an exact index keeps their buffer). kInvalidArgument
  // when the values are not ids x dimension.
  static Result<std::unique_ptr<VectorIndex>> FromPacked(PackedEmbeddings packed,
                                                         const VectorIndexOptions& options = {});

  ~VectorIndex();
  VectorIndex(const VectorIndex&) = delete;
  VectorIndex& operator=(const VectorIndex&) = delete;

  // The (at most) k vectors most similar to `query` (which need not be normalised), most
  // similar first; ties by owner id. Thread-safe. kInvalidArgument when the query's dimension
  // differs from the index's (an empty index accepts any query and returns nothing).
  Result<std::vector<VectorHit>> Search(std::span<const float> query, size_t k) const;

  size_t size() const;
  size_t dimension() const;          // 0 for an empty index
  const std::string& model() const;  // the embedding model of the vectors; empty when empty
  bool approximate() const;          // true: an HNSW graph answers; false: exact scans
  size_t unusable() const;           // vectors kept as zero vectors (see above)

  struct Impl;  // defined in src/vector
  explicit VectorIndex(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace grag
