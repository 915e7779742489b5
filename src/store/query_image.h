// Query images (Store::RefreshQueryImages), internal to the store module: the byte layouts of
// the graph image and of a packed-vectors image, how a backend builds them from its rows, and
// the graph image as a NeighbourhoodReader, so the walk over an image is the walk over the
// tables (neighbourhood.h) with the same answers.
//
// Layout: little-endian, the same on every platform grag builds for (store_state.cpp guards it).
// A 4-byte magic and a version open each image; Decode checks every length against the bytes,
// so a damaged image is an error, never a read out of bounds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grag/status.h"
#include "grag/store_types.h"
#include "neighbourhood.h"

namespace grag::store {

// Collects a graph's rows in any order and lays them out as a graph image.
class GraphImageBuilder {
 public:
  void AddEntity(int64_t id, std::string_view name_key, int64_t frequency);
  void AddChunk(std::string_view chunk_id, std::string_view title);
  void AddRelationship(int64_t id, int64_t source_id, int64_t target_id, double weight);
  void AddLink(int64_t entity_id, std::string_view chunk_id);
  // The image; kCorruption when a relationship or link names an entity or chunk not added (the
  // tables break their own foreign keys).
  Result<std::string> Finish();

 private:
  struct Entity {
    int64_t id;
    std::string name_key;
    int64_t frequency;
  };
  struct Relationship {
    int64_t id, source, target;
    double weight;
  };
  std::vector<Entity> entities_;
  std::vector<std::pair<std::string, std::string>> chunks_;  // (id, title)
  std::vector<Relationship> relationships_;
  std::vector<std::pair<int64_t, std::string>> links_;
};

// A decoded graph image: answers the walk's reads exactly as the tables would (the order of
// each list included). The views point into the image's bytes, which it owns.
class GraphImage final : public NeighbourhoodReader {
 public:
  static Result<std::unique_ptr<GraphImage>> Decode(std::string bytes);

  size_t entity_count() const { return entity_ids_.size(); }
  size_t chunk_count() const { return chunk_ids_.size(); }

  Status Edges(const std::vector<int64_t>& ids,
               std::unordered_map<int64_t, std::vector<std::pair<int64_t, double>>>* out) override;
  Status ChunksOf(const std::vector<int64_t>& ids, size_t limit,
                  std::unordered_map<int64_t, std::vector<std::string>>* out) override;
  Status EntitiesOf(const std::vector<std::string>& ids,
                    std::unordered_map<std::string, std::vector<int64_t>>* out) override;
  Status Entities(const std::vector<int64_t>& ids,
                  std::vector<GraphSnapshot::Entity>* out) override;
  Status ChunkTitles(const std::vector<std::string>& ids,
                     std::vector<std::pair<std::string, std::string>>* out) override;

 private:
  GraphImage() = default;
  // Position of an entity id / chunk id, or -1.
  int64_t EntityAt(int64_t id) const;
  int64_t ChunkAt(std::string_view id) const;

  std::string bytes_;
  std::vector<int64_t> entity_ids_;  // ascending
  std::vector<int64_t> frequencies_;
  std::vector<std::string_view> name_keys_;
  std::vector<std::string_view> chunk_ids_;  // ascending (byte order, as SQLite's BINARY)
  std::vector<std::string_view> titles_;
  // Compressed rows: entity i's edges are edges_[edge_start_[i], edge_start_[i + 1]).
  struct Edge {
    int64_t other;
    double weight;
  };
  std::vector<uint64_t> edge_start_;
  std::vector<Edge> edges_;
  std::vector<uint64_t> entity_chunk_start_;
  std::vector<uint32_t> entity_chunks_;  // chunk positions, ascending per entity
  std::vector<uint64_t> chunk_entity_start_;
  std::vector<uint32_t> chunk_entities_;  // entity positions, ascending per chunk
};

// A packed-vectors image and back.
std::string EncodePackedEmbeddings(const PackedEmbeddings& packed);
Result<PackedEmbeddings> DecodePackedEmbeddings(std::string_view bytes);

}  // namespace grag::store
