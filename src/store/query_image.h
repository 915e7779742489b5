// Query images (Store::RefreshQueryImages), internal to the store module: the byte layouts of
// the graph and words images, how a backend builds them from its rows, and the walk
// over a graph image, which reaches what the shared walk over the tables reaches
// (neighbourhood.h).
//
// Layout: little-endian, the same on every platform grag builds for (store_state.cpp guards it).
// A 4-byte magic and a version open each image; Decode checks every length against the bytes,
// so a damaged image is an error, never a read out of bounds.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grag/large_array.h"
#include "grag/status.h"
#include "grag/store.h"
#include "grag/store_types.h"

namespace grag::store {

// An image's bytes in 8-aligned storage (so a decoded image can view its arrays in place): a
// LargeVector, which is not zeroed when sized for a blob to be read into it.
class ImageBytes {
 public:
  ImageBytes() = default;
  // A copy of `bytes`.
  explicit ImageBytes(std::string_view bytes);
  // Room for `size` bytes, not initialised, for a reader to fill; replaces what was held.
  char* Allocate(size_t size);
  std::string_view view() const { return {reinterpret_cast<const char*>(words_.data()), size_}; }

 private:
  LargeVector<uint64_t> words_;
  size_t size_ = 0;
};

// Whether `bytes` open with the magic of a graph image an older build wrote (layout 1: no
// relationship ids, frequencies or degrees; layout 2: 40-byte edges). Such an image is not
// damage: the next index run
// replaces it (Store::RefreshQueryImages) and until then questions read the tables.
bool IsOlderGraphImage(std::string_view bytes);

// Collects a graph's rows in any order and lays them out as a graph image.
class GraphImageBuilder {
 public:
  void AddEntity(int64_t id, std::string_view name_key, int64_t frequency, int64_t degree);
  // A chunk, its document's title and its place (document id, index in the document).
  void AddChunk(std::string_view chunk_id, std::string_view title, std::string_view document_id,
                int64_t index);
  void AddRelationship(int64_t id, int64_t source_id, int64_t target_id, double weight,
                       int64_t frequency);
  void AddLink(int64_t entity_id, std::string_view chunk_id);
  // The image; kCorruption when a relationship or link names an entity or chunk not added (the
  // tables break their own foreign keys).
  Result<std::string> Finish();

 private:
  struct Entity {
    int64_t id;
    std::string name_key;
    int64_t frequency;
    int64_t degree;
  };
  struct Relationship {
    int64_t id, source, target;
    double weight;
    int64_t frequency;
  };
  std::vector<Entity> entities_;
  struct Chunk {
    std::string id, title, document_id;
    int64_t index;
  };
  std::vector<Chunk> chunks_;
  std::vector<Relationship> relationships_;
  std::vector<std::pair<int64_t, std::string>> links_;
};

// A decoded graph image: answers what the tables would (the order of each list included).
// Immutable once decoded, so threads may share one. The views point into the image's bytes,
// which it owns.
class GraphImage {
 public:
  // kNotFound for an image an older build wrote (IsOlderGraphImage), kCorruption for damage.
  static Result<std::unique_ptr<GraphImage>> Decode(ImageBytes bytes);
  static Result<std::unique_ptr<GraphImage>> Decode(std::string_view bytes) {
    return Decode(ImageBytes(bytes));
  }

  size_t entity_count() const { return entity_ids_.size(); }
  size_t chunk_count() const { return chunk_ids_.size(); }

  // Store::LoadGraphNeighbourhood on the image: what WalkNeighbourhood (neighbourhood.h) gives
  // over the tables, node for node and in the same order, without a string or a row per node.
  Result<GraphSnapshot> Walk(const std::vector<int64_t>& entity_ids,
                             const std::vector<std::string>& chunk_ids,
                             const Store::NeighbourhoodLimits& limits) const;
  // Store::GetEntityChunks: an entity's chunk ids in document order.
  std::vector<std::string> EntityChunksInDocumentOrder(int64_t entity_id) const;
  // Store::ListRelationshipEdgesOf: the relationships touching an entity without their text
  // (id, ends, weight, frequency and the ends' degrees summed), sources' rows first.
  std::vector<RelationshipRecord> RelationshipEdgesOf(int64_t entity_id) const;

 private:
  GraphImage() = default;
  // Position of an entity id / chunk id, or -1.
  int64_t EntityAt(int64_t id) const;
  int64_t ChunkAt(std::string_view id) const;

  // The fixed-width arrays below are views into the bytes (the layout pads each to 8 bytes), so
  // decoding copies none of them.
  ImageBytes bytes_;
  std::span<const int64_t> entity_ids_;  // ascending
  std::span<const int64_t> frequencies_;
  std::span<const int64_t> degrees_;  // the entities table's degree column
  std::vector<std::string_view> name_keys_;
  std::vector<std::string_view> chunk_ids_;  // ascending (byte order, as SQLite's BINARY)
  std::vector<std::string_view> titles_;
  std::span<const uint32_t> document_order_;  // per chunk: its rank by (document id, index)
  // Compressed rows: entity i's edges are edges_[edge_start_[i], edge_start_[i + 1]).
  struct Edge {
    double weight;
    int64_t relationship_id;
    uint32_t other_at;   // the other end's position (its id: entity_ids_[other_at])
    uint32_t frequency;  // the relationship's chunks (saturated at 2^32 - 1)
  };
  std::span<const uint64_t> edge_start_;
  std::span<const Edge> edges_;
  std::span<const uint64_t> entity_chunk_start_;
  std::span<const uint32_t> entity_chunks_;  // chunk positions, ascending per entity
  std::span<const uint64_t> chunk_entity_start_;
  std::span<const uint32_t> chunk_entities_;  // entity positions, ascending per chunk
};

// The words image: how many chunks hold each term of the full-text index (FTS5's terms, after
// its tokenizer and stemmer), for the terms in at least `min_count` chunks: the ones whose count
// costs a long posting-list scan. A term it does not list is in fewer chunks than that.
std::string EncodeTermCounts(std::vector<std::pair<std::string, int64_t>> counts,
                             int64_t min_count);
class TermCounts {
 public:
  static Result<std::unique_ptr<TermCounts>> Decode(ImageBytes bytes);
  static Result<std::unique_ptr<TermCounts>> Decode(std::string_view bytes) {
    return Decode(ImageBytes(bytes));
  }
  int64_t min_count() const { return min_count_; }
  // The term's chunk count, or nullopt when it is not listed (fewer than min_count chunks).
  std::optional<int64_t> Find(std::string_view term) const;

 private:
  TermCounts() = default;
  ImageBytes bytes_;
  int64_t min_count_ = 0;
  std::vector<std::string_view> terms_;  // ascending
  std::vector<int64_t> counts_;
};

}  // namespace grag::store
