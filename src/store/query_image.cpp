// Query images: see query_image.h.
#include "query_image.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <numeric>
#include <span>
#include <type_traits>
#include <unordered_map>

namespace grag::store {

namespace {

// Older layouts: "GGI1" (no relationship ids or degrees), "GGI2" (40-byte edges that also held
// the other end's id and 64-bit frequencies).
constexpr uint32_t kOlderGraphMagics[] = {0x31494747, 0x32494747};
constexpr uint32_t kGraphMagic = 0x33494747;  // "GGI3"

// Appends fixed-width little-endian values (the native layout: store_state.cpp checks it).
class ByteWriter {
 public:
  template <typename T>
  void Put(T v) {
    char raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    out_.append(raw, sizeof(T));
  }
  void Str(std::string_view s) {
    Put(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void Raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  // Zero bytes up to a multiple of `n`.
  void Pad(size_t n) { out_.append((n - out_.size() % n) % n, '\0'); }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads what ByteWriter wrote; every read checks the bytes left, and a failed one leaves the reader
// failed (reads after it return zeros) so a caller checks once at the end.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  bool ok() const { return ok_; }
  size_t left() const { return in_.size() - pos_; }

  template <typename T>
  T Get() {
    T v{};
    if (!Need(sizeof(T))) return v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view Str() {
    const auto n = Get<uint32_t>();
    if (!Need(n)) return {};
    std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // Skips ByteWriter::Pad's bytes.
  void Pad(size_t n) {
    const size_t skip = (n - pos_ % n) % n;
    if (Need(skip)) pos_ += skip;
  }
  // A count of items of `item_bytes` each that must still fit in the bytes left.
  uint64_t Count(size_t item_bytes) {
    const auto n = Get<uint64_t>();
    if (ok_ && item_bytes > 0 && n > left() / item_bytes) ok_ = false;
    return ok_ ? n : 0;
  }
  // `n` items of T in place, after the padding that aligns them to 8 bytes (ByteWriter::Pad(8)
  // before them); the bytes read must start 8-aligned.
  template <typename T>
  std::span<const T> View(uint64_t n) {
    static_assert(alignof(T) <= 8 && std::is_trivially_copyable_v<T>);
    Pad(8);
    if (!ok_ || n > left() / sizeof(T)) {
      ok_ = false;
      return {};
    }
    const char* at = in_.data() + pos_;
    if (reinterpret_cast<uintptr_t>(at) % alignof(T) != 0) {
      ok_ = false;
      return {};
    }
    pos_ += n * sizeof(T);
    return {reinterpret_cast<const T*>(at), static_cast<size_t>(n)};
  }
  template <typename T>
  void Array(std::vector<T>& out, uint64_t n) {
    out.resize(Need(n * sizeof(T)) ? n : 0);
    if (!out.empty()) std::memcpy(out.data(), in_.data() + pos_, n * sizeof(T));
    pos_ += out.size() * sizeof(T);
  }

 private:
  bool Need(uint64_t n) {
    if (!ok_ || n > left()) ok_ = false;
    return ok_;
  }
  std::string_view in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Compressed-row offsets: each row's start, then the total; rows of `counts` items.
std::vector<uint64_t> Starts(const std::vector<uint64_t>& counts) {
  std::vector<uint64_t> start(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), start.begin() + 1);
  return start;
}

// Offsets that rise from 0 to `total`, one more than `rows`.
bool ValidStarts(std::span<const uint64_t> start, size_t rows, uint64_t total) {
  if (start.size() != rows + 1 || start.front() != 0 || start.back() != total) return false;
  return std::is_sorted(start.begin(), start.end());
}

}  // namespace

ImageBytes::ImageBytes(std::string_view bytes) {
  if (!bytes.empty()) std::memcpy(Allocate(bytes.size()), bytes.data(), bytes.size());
}

char* ImageBytes::Allocate(size_t size) {
  words_ = LargeVector<uint64_t>((size + 7) / 8);
  size_ = size;
  return reinterpret_cast<char*>(words_.data());
}

bool IsOlderGraphImage(std::string_view bytes) {
  uint32_t magic = 0;
  if (bytes.size() < sizeof(magic)) return false;
  std::memcpy(&magic, bytes.data(), sizeof(magic));
  return std::find(std::begin(kOlderGraphMagics), std::end(kOlderGraphMagics), magic) !=
         std::end(kOlderGraphMagics);
}

// ---------------------------------------------------------------- building

void GraphImageBuilder::AddEntity(int64_t id, std::string_view name_key, int64_t frequency,
                                  int64_t degree) {
  entities_.push_back({id, std::string(name_key), frequency, degree});
}

void GraphImageBuilder::AddChunk(std::string_view chunk_id, std::string_view title,
                                 std::string_view document_id, int64_t index) {
  chunks_.push_back({std::string(chunk_id), std::string(title), std::string(document_id), index});
}

void GraphImageBuilder::AddRelationship(int64_t id, int64_t source_id, int64_t target_id,
                                        double weight, int64_t frequency) {
  relationships_.push_back({id, source_id, target_id, weight, frequency});
}

void GraphImageBuilder::AddLink(int64_t entity_id, std::string_view chunk_id) {
  links_.emplace_back(entity_id, std::string(chunk_id));
}

Result<std::string> GraphImageBuilder::Finish() {
  std::sort(entities_.begin(), entities_.end(),
            [](const Entity& a, const Entity& b) { return a.id < b.id; });
  std::sort(chunks_.begin(), chunks_.end(),
            [](const Chunk& a, const Chunk& b) { return a.id < b.id; });
  const size_t n_entities = entities_.size();
  const size_t n_chunks = chunks_.size();
  auto entity_at = [&](int64_t id) -> int64_t {
    auto it = std::lower_bound(entities_.begin(), entities_.end(), id,
                               [](const Entity& e, int64_t v) { return e.id < v; });
    return it != entities_.end() && it->id == id ? it - entities_.begin() : -1;
  };
  auto chunk_at = [&](const std::string& id) -> int64_t {
    auto it = std::lower_bound(chunks_.begin(), chunks_.end(), id,
                               [](const Chunk& c, const std::string& v) { return c.id < v; });
    return it != chunks_.end() && it->id == id ? it - chunks_.begin() : -1;
  };

  // An entity's edges as the tables list them: where it is the source by target id, then where
  // it is the target by relationship id.
  struct Edge {
    bool as_target;
    int64_t order;  // target id, or relationship id
    double weight;
    int64_t id;
    int64_t frequency;
    int64_t other_at;
  };
  std::vector<std::vector<Edge>> edges(n_entities);
  for (const Relationship& r : relationships_) {
    const int64_t s = entity_at(r.source), t = entity_at(r.target);
    if (s < 0 || t < 0) {
      return Status::Corruption("relationship " + std::to_string(r.id) +
                                " names an entity the graph does not hold");
    }
    edges[static_cast<size_t>(s)].push_back({false, r.target, r.weight, r.id, r.frequency, t});
    edges[static_cast<size_t>(t)].push_back({true, r.id, r.weight, r.id, r.frequency, s});
  }
  std::vector<std::vector<uint32_t>> chunks_of(n_entities), entities_of(n_chunks);
  for (const auto& [entity, chunk] : links_) {
    const int64_t e = entity_at(entity), c = chunk_at(chunk);
    if (e < 0 || c < 0) {
      return Status::Corruption("a link of entity " + std::to_string(entity) + " and chunk " +
                                chunk + " names a missing entity or chunk");
    }
    chunks_of[static_cast<size_t>(e)].push_back(static_cast<uint32_t>(c));
    entities_of[static_cast<size_t>(c)].push_back(static_cast<uint32_t>(e));
  }

  ByteWriter w;
  w.Put(kGraphMagic);
  w.Put(static_cast<uint64_t>(n_entities));
  // Fixed-width arrays start 8-aligned (Pad), so a decoded image views them in place.
  w.Pad(8);
  for (const Entity& e : entities_) w.Put(e.id);
  w.Pad(8);
  for (const Entity& e : entities_) w.Put(e.frequency);
  w.Pad(8);
  for (const Entity& e : entities_) w.Put(e.degree);
  for (const Entity& e : entities_) w.Str(e.name_key);
  w.Put(static_cast<uint64_t>(n_chunks));
  for (const Chunk& c : chunks_) w.Str(c.id);
  for (const Chunk& c : chunks_) w.Str(c.title);
  // Each chunk's rank in document order, as SQL's ORDER BY document_id, chunk_index gives it.
  std::vector<uint32_t> by_place(n_chunks);
  std::iota(by_place.begin(), by_place.end(), 0u);
  std::sort(by_place.begin(), by_place.end(), [&](uint32_t a, uint32_t b) {
    const Chunk &x = chunks_[a], &y = chunks_[b];
    return x.document_id != y.document_id ? x.document_id < y.document_id : x.index < y.index;
  });
  std::vector<uint32_t> rank(n_chunks);
  for (size_t r = 0; r < n_chunks; ++r) rank[by_place[r]] = static_cast<uint32_t>(r);
  w.Pad(8);
  w.Raw(rank.data(), rank.size() * sizeof(uint32_t));

  std::vector<uint64_t> counts(n_entities);
  for (size_t i = 0; i < n_entities; ++i) {
    auto& list = edges[i];
    std::sort(list.begin(), list.end(), [](const Edge& a, const Edge& b) {
      return a.as_target != b.as_target ? b.as_target : a.order < b.order;
    });
    counts[i] = list.size();
  }
  w.Pad(8);
  for (uint64_t v : Starts(counts)) w.Put(v);
  w.Pad(8);
  for (const auto& list : edges) {
    for (const Edge& e : list) {
      // As GraphImage::Edge lays them out; the other end's id is entity_ids_[other_at].
      w.Put(e.weight);
      w.Put(e.id);
      w.Put(static_cast<uint32_t>(e.other_at));
      w.Put(static_cast<uint32_t>(std::clamp<int64_t>(e.frequency, 0, UINT32_MAX)));
    }
  }
  auto put_rows = [&](std::vector<std::vector<uint32_t>>& rows) {
    std::vector<uint64_t> n(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      std::sort(rows[i].begin(), rows[i].end());
      rows[i].erase(std::unique(rows[i].begin(), rows[i].end()), rows[i].end());
      n[i] = rows[i].size();
    }
    w.Pad(8);
    for (uint64_t v : Starts(n)) w.Put(v);
    w.Pad(8);
    for (const auto& row : rows) w.Raw(row.data(), row.size() * sizeof(uint32_t));
  };
  put_rows(chunks_of);
  put_rows(entities_of);
  return w.Take();
}

// ---------------------------------------------------------------- reading

Result<std::unique_ptr<GraphImage>> GraphImage::Decode(ImageBytes bytes) {
  static_assert(sizeof(Edge) == 24 && std::is_trivially_copyable_v<Edge>,
                "an edge is two 8-byte and two 4-byte fields, as Finish writes them");
  std::unique_ptr<GraphImage> g(new GraphImage());
  g->bytes_ = std::move(bytes);
  if (IsOlderGraphImage(g->bytes_.view())) {
    return Status::NotFound("a graph image of an older version (the next index run rebuilds it)");
  }
  ByteReader r(g->bytes_.view());
  if (r.Get<uint32_t>() != kGraphMagic) {
    return Status::Corruption("not a graph image (or one of another version)");
  }
  const uint64_t n_entities = r.Count(3 * sizeof(int64_t));
  g->entity_ids_ = r.View<int64_t>(n_entities);
  g->frequencies_ = r.View<int64_t>(n_entities);
  g->degrees_ = r.View<int64_t>(n_entities);
  g->name_keys_.reserve(n_entities);
  for (uint64_t i = 0; i < n_entities && r.ok(); ++i) g->name_keys_.push_back(r.Str());
  const uint64_t n_chunks = r.Count(2 * sizeof(uint32_t));
  g->chunk_ids_.reserve(n_chunks);
  g->titles_.reserve(n_chunks);
  for (uint64_t i = 0; i < n_chunks && r.ok(); ++i) g->chunk_ids_.push_back(r.Str());
  for (uint64_t i = 0; i < n_chunks && r.ok(); ++i) g->titles_.push_back(r.Str());
  g->document_order_ = r.View<uint32_t>(n_chunks);
  // Rows: n + 1 offsets, then as many items as the last offset says.
  auto rows = [&](std::span<const uint64_t>& start, size_t n, auto& items) {
    if (!r.ok() || n + 1 > r.left() / sizeof(uint64_t)) return false;
    start = r.View<uint64_t>(n + 1);
    const uint64_t total = start.empty() ? 0 : start.back();
    using Item = typename std::remove_reference_t<decltype(items)>::value_type;
    items = r.View<Item>(total);
    return r.ok() && ValidStarts(start, n, total);
  };
  const bool whole = r.ok() && rows(g->edge_start_, n_entities, g->edges_) &&
                     rows(g->entity_chunk_start_, n_entities, g->entity_chunks_) &&
                     rows(g->chunk_entity_start_, n_chunks, g->chunk_entities_) && r.left() == 0 &&
                     std::is_sorted(g->entity_ids_.begin(), g->entity_ids_.end()) &&
                     std::is_sorted(g->chunk_ids_.begin(), g->chunk_ids_.end()) &&
                     std::all_of(g->edges_.begin(), g->edges_.end(),
                                 [&](const Edge& e) { return e.other_at < n_entities; }) &&
                     std::all_of(g->entity_chunks_.begin(), g->entity_chunks_.end(),
                                 [&](uint32_t c) { return c < n_chunks; }) &&
                     std::all_of(g->chunk_entities_.begin(), g->chunk_entities_.end(),
                                 [&](uint32_t e) { return e < n_entities; }) &&
                     std::all_of(g->document_order_.begin(), g->document_order_.end(),
                                 [&](uint32_t o) { return o < n_chunks; });
  if (!whole) return Status::Corruption("the graph image is truncated or inconsistent");
  return g;
}

int64_t GraphImage::EntityAt(int64_t id) const {
  auto it = std::lower_bound(entity_ids_.begin(), entity_ids_.end(), id);
  return it != entity_ids_.end() && *it == id ? it - entity_ids_.begin() : -1;
}

int64_t GraphImage::ChunkAt(std::string_view id) const {
  auto it = std::lower_bound(chunk_ids_.begin(), chunk_ids_.end(), id);
  return it != chunk_ids_.end() && *it == id ? it - chunk_ids_.begin() : -1;
}

Result<GraphSnapshot> GraphImage::Walk(const std::vector<int64_t>& entity_ids,
                                       const std::vector<std::string>& chunk_ids,
                                       const Store::NeighbourhoodLimits& limits) const {
  // WalkNeighbourhood (neighbourhood.cpp) on positions instead of ids and strings: the same
  // nodes in the same order, the same snapshot. Seeds the image does not hold are reached (they
  // count against the limits, as there) but hold nothing.
  const size_t n_entities = entity_ids_.size();
  std::vector<int> entity_depth(n_entities, -1), chunk_depth(chunk_ids_.size(), -1);
  std::unordered_map<int64_t, int> unknown_entities;
  std::vector<std::string> unknown_chunks;
  size_t entities_reached = 0, chunks_reached = 0;
  struct Node {
    bool is_entity;
    int64_t id;  // an entity's id
    int64_t at;  // its position (entity or chunk), -1 when the image does not hold it
    int depth;
  };
  std::vector<Node> frontier;
  // Entities in the order the walk reads their relationships (the order matters below).
  std::vector<int64_t> read_order;
  auto add_entity = [&](int64_t id, int64_t at, int depth) {
    if (entities_reached >= limits.max_entities) return;
    if (at >= 0) {
      if (entity_depth[static_cast<size_t>(at)] >= 0) return;
      entity_depth[static_cast<size_t>(at)] = depth;
    } else if (!unknown_entities.emplace(id, depth).second) {
      return;
    }
    ++entities_reached;
    frontier.push_back({true, id, at, depth});
  };
  auto add_chunk = [&](int64_t at, int depth) {
    if (chunks_reached >= limits.max_chunks || chunk_depth[static_cast<size_t>(at)] >= 0) return;
    chunk_depth[static_cast<size_t>(at)] = depth;
    ++chunks_reached;
    frontier.push_back({false, 0, at, depth});
  };
  for (int64_t id : entity_ids) add_entity(id, EntityAt(id), 0);
  for (const std::string& id : chunk_ids) {
    const int64_t at = ChunkAt(id);
    if (at >= 0) {
      add_chunk(at, 0);
    } else if (chunks_reached < limits.max_chunks &&
               std::find(unknown_chunks.begin(), unknown_chunks.end(), id) ==
                   unknown_chunks.end()) {
      unknown_chunks.push_back(id);  // reached, holds nothing
      ++chunks_reached;
    }
  }
  std::vector<std::pair<uint64_t, double>> by_weight;
  while (!frontier.empty()) {
    const std::vector<Node> wave = std::move(frontier);
    frontier.clear();
    for (const Node& n : wave) {
      if (n.is_entity) read_order.push_back(n.id);
    }
    for (const Node& n : wave) {
      if (n.depth >= limits.hops || n.at < 0) continue;
      const auto i = static_cast<size_t>(n.at);
      if (n.is_entity) {
        // The strongest relationships first when there are too many to follow.
        by_weight.clear();
        for (uint64_t k = edge_start_[i]; limits.relationships && k < edge_start_[i + 1]; ++k) {
          by_weight.emplace_back(k, edges_[k].weight);
        }
        std::stable_sort(by_weight.begin(), by_weight.end(),
                         [](const auto& a, const auto& b) { return a.second > b.second; });
        for (size_t k = 0; k < by_weight.size() && k < limits.max_fanout; ++k) {
          const Edge& e = edges_[by_weight[k].first];
          add_entity(entity_ids_[e.other_at], static_cast<int64_t>(e.other_at), n.depth + 1);
        }
        const uint64_t first = entity_chunk_start_[i];
        for (uint64_t k = first; k < entity_chunk_start_[i + 1] && k - first < limits.max_fanout;
             ++k) {
          add_chunk(entity_chunks_[k], n.depth + 1);
        }
      } else {
        const uint64_t first = chunk_entity_start_[i];
        for (uint64_t k = first; k < chunk_entity_start_[i + 1] && k - first < limits.max_fanout;
             ++k) {
          const uint32_t e = chunk_entities_[k];
          add_entity(entity_ids_[e], e, n.depth + 1);
        }
      }
    }
  }

  GraphSnapshot g;
  for (size_t i = 0; i < n_entities; ++i) {
    if (entity_depth[i] >= 0) {
      g.entities.push_back({entity_ids_[i], std::string(name_keys_[i]), frequencies_[i]});
    }
  }

  // Edges in the order the shared walk lists them: it keeps each entity's relationships in a
  // hash map filled in read order and goes through that map, so a map of the same keys filled
  // in the same order goes through them in the same order.
  std::unordered_map<int64_t, char> order;
  if (limits.relationships) {
    for (int64_t id : read_order) order.emplace(id, 0);
  }
  for (const auto& [id, unused] : order) {
    const int64_t at = EntityAt(id);
    if (at < 0) continue;
    const auto i = static_cast<size_t>(at);
    for (uint64_t k = edge_start_[i]; k < edge_start_[i + 1]; ++k) {
      const Edge& e = edges_[k];
      const int64_t other = entity_ids_[e.other_at];
      if (id < other && entity_depth[e.other_at] >= 0) g.edges.push_back({id, other, e.weight});
    }
  }
  for (size_t c = 0; c < chunk_ids_.size(); ++c) {
    if (chunk_depth[c] < 0) continue;
    const auto index = static_cast<uint32_t>(g.chunk_ids.size());
    for (uint64_t k = chunk_entity_start_[c]; k < chunk_entity_start_[c + 1]; ++k) {
      const uint32_t e = chunk_entities_[k];
      if (entity_depth[e] >= 0) g.links.push_back({entity_ids_[e], index});
    }
    g.chunk_ids.emplace_back(chunk_ids_[c]);
    g.chunk_titles.emplace_back(titles_[c]);
  }
  return g;
}

std::vector<std::string> GraphImage::EntityChunksInDocumentOrder(int64_t entity_id) const {
  std::vector<std::string> out;
  const int64_t at = EntityAt(entity_id);
  if (at < 0) return out;
  const auto i = static_cast<size_t>(at);
  std::vector<uint32_t> chunks(
      entity_chunks_.begin() + static_cast<int64_t>(entity_chunk_start_[i]),
      entity_chunks_.begin() + static_cast<int64_t>(entity_chunk_start_[i + 1]));
  std::sort(chunks.begin(), chunks.end(),
            [&](uint32_t a, uint32_t b) { return document_order_[a] < document_order_[b]; });
  out.reserve(chunks.size());
  for (uint32_t c : chunks) out.emplace_back(chunk_ids_[c]);
  return out;
}

std::vector<RelationshipRecord> GraphImage::RelationshipEdgesOf(int64_t entity_id) const {
  std::vector<RelationshipRecord> out;
  const int64_t at = EntityAt(entity_id);
  if (at < 0) return out;
  const auto i = static_cast<size_t>(at);
  out.reserve(edge_start_[i + 1] - edge_start_[i]);
  for (uint64_t k = edge_start_[i]; k < edge_start_[i + 1]; ++k) {
    const Edge& e = edges_[k];
    RelationshipRecord& r = out.emplace_back();
    r.id = e.relationship_id;
    const int64_t other = entity_ids_[e.other_at];
    // The tables keep source_id < target_id (their CHECK).
    r.source_id = std::min(entity_id, other);
    r.target_id = std::max(entity_id, other);
    r.weight = e.weight;
    r.frequency = e.frequency;
    r.combined_degree = degrees_[i] + degrees_[e.other_at];
  }
  return out;
}

// ---------------------------------------------------------------- words

constexpr uint32_t kTermsMagic = 0x31495457;  // "WTI1"

std::string EncodeTermCounts(std::vector<std::pair<std::string, int64_t>> counts,
                             int64_t min_count) {
  std::erase_if(counts, [&](const auto& c) { return c.second < min_count; });
  std::sort(counts.begin(), counts.end());
  ByteWriter w;
  w.Put(kTermsMagic);
  w.Put(min_count);
  w.Put(static_cast<uint64_t>(counts.size()));
  for (const auto& c : counts) w.Put(c.second);
  for (const auto& c : counts) w.Str(c.first);
  return w.Take();
}

Result<std::unique_ptr<TermCounts>> TermCounts::Decode(ImageBytes bytes) {
  std::unique_ptr<TermCounts> t(new TermCounts());
  t->bytes_ = std::move(bytes);
  ByteReader r(t->bytes_.view());
  if (r.Get<uint32_t>() != kTermsMagic) {
    return Status::Corruption("not a words image (or one of another version)");
  }
  t->min_count_ = r.Get<int64_t>();
  const uint64_t n = r.Count(sizeof(int64_t) + sizeof(uint32_t));
  r.Array(t->counts_, n);
  t->terms_.reserve(n);
  for (uint64_t i = 0; i < n && r.ok(); ++i) t->terms_.push_back(r.Str());
  if (!r.ok() || r.left() != 0 || !std::is_sorted(t->terms_.begin(), t->terms_.end())) {
    return Status::Corruption("the words image is truncated or inconsistent");
  }
  return t;
}

std::optional<int64_t> TermCounts::Find(std::string_view term) const {
  auto it = std::lower_bound(terms_.begin(), terms_.end(), term);
  if (it == terms_.end() || *it != term) return std::nullopt;
  return counts_[static_cast<size_t>(it - terms_.begin())];
}

}  // namespace grag::store
