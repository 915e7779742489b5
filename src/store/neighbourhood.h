// The walk behind Store::LoadGraphNeighbourhood, shared by the backends (internal to the store
// module): a backend supplies the reads, a hop at a time, and the walk is the same on all of
// them, so every store reaches the same neighbourhood.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grag/status.h"
#include "grag/store.h"
#include "grag/store_types.h"

namespace grag::store {

// A backend's reads for one walk, all within one snapshot. Each call covers many nodes at once
// (one hop's), so a backend answers it with a query or a few, not one per node.
class NeighbourhoodReader {
 public:
  virtual ~NeighbourhoodReader() = default;
  // Per entity of `ids`: its relationships as (other entity, weight): those where it is the
  // source by target id, then those where it is the target by relationship id.
  virtual Status Edges(
      const std::vector<int64_t>& ids,
      std::unordered_map<int64_t, std::vector<std::pair<int64_t, double>>>* out) = 0;
  // Per entity of `ids`: its first `limit` chunk ids, by chunk id.
  virtual Status ChunksOf(const std::vector<int64_t>& ids, size_t limit,
                          std::unordered_map<int64_t, std::vector<std::string>>* out) = 0;
  // Per chunk of `ids`: the ids of its entities, ascending.
  virtual Status EntitiesOf(const std::vector<std::string>& ids,
                            std::unordered_map<std::string, std::vector<int64_t>>* out) = 0;
  // The entities of `ids` (ascending) that exist, by id.
  virtual Status Entities(const std::vector<int64_t>& ids,
                          std::vector<GraphSnapshot::Entity>* out) = 0;
  // (chunk id, its document's title) for the chunks of `ids` (ascending) that exist, by id.
  virtual Status ChunkTitles(const std::vector<std::string>& ids,
                             std::vector<std::pair<std::string, std::string>>* out) = 0;
};

// Breadth-first from the seeds over relationships and entity-chunk links, within `limits`: an
// entity follows its max_fanout heaviest relationships (ties in read order) and its first
// max_fanout chunks; a chunk its first max_fanout entities; nothing beyond `hops`, and no more
// than max_entities / max_chunks nodes, in the order reached. The nodes of one hop are read
// together (at most three reads a hop), and since a node only appends to the queue they are
// exactly the nodes a one-at-a-time walk would visit next, in the same order.
Result<GraphSnapshot> WalkNeighbourhood(const std::vector<int64_t>& entity_ids,
                                        const std::vector<std::string>& chunk_ids,
                                        const Store::NeighbourhoodLimits& limits,
                                        NeighbourhoodReader& reader);

}  // namespace grag::store
