// Local search, steps 1-4: match entities, collect and rank candidates, fill the budget.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory_resource>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grag/words.h"
#include "grag/local_search.h"
#include "grag/log.h"

namespace grag {
namespace {

constexpr std::string_view kLog = "local";

// Single-word names shorter than this match only when the question spells them with the same
// case as the entity's name: "US" must not be matched by "tell us about...".
constexpr size_t kShortNameBytes = 4;

// The three budgeted types, in the order their sections appear and spare budget is offered.
constexpr std::array<LocalItemType, 3> kBudgeted = {
    LocalItemType::kChunk, LocalItemType::kRelationship, LocalItemType::kReport};

Status CheckOptions(const LocalSearchOptions& o) {
  if (o.top_k_entities < 1) return Status::InvalidArgument("top_k_entities must be at least 1");
  if (!(o.similarity_floor >= -1 && o.similarity_floor <= 1)) {
    return Status::InvalidArgument("similarity_floor must be within [-1, 1]");
  }
  if (o.context_budget_tokens < 1) {
    return Status::InvalidArgument("context_budget_tokens must be at least 1");
  }
  for (double s : {o.chunk_share, o.relationship_share, o.report_share}) {
    if (!(s >= 0) || !std::isfinite(s)) {
      return Status::InvalidArgument("budget shares must be finite and not negative");
    }
  }
  if (!(o.chunk_share + o.relationship_share + o.report_share > 0)) {
    return Status::InvalidArgument("at least one budget share must be above zero");
  }
  if (o.max_name_words < 0) return Status::InvalidArgument("max_name_words must not be negative");
  if (!(o.entity_share > 0 && o.entity_share <= 1)) {
    return Status::InvalidArgument("entity_share must be within (0, 1]");
  }
  return Status::Ok();
}

bool IsWordByte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) != 0 || u >= 0x80;
}

// `name` occurs in `text` with the same case, not inside a longer word.
bool ContainsWordExact(std::string_view text, std::string_view name) {
  if (name.empty()) return false;
  for (size_t at = text.find(name); at != std::string_view::npos; at = text.find(name, at + 1)) {
    const bool left = at == 0 || !IsWordByte(text[at - 1]);
    const size_t end = at + name.size();
    const bool right = end == text.size() || !IsWordByte(text[end]);
    if (left && right) return true;
  }
  return false;
}

// A word of the normalised question and the whitespace-separated piece of the question as
// typed that it came from (for the case check of short names).
struct QuestionWord {
  std::string key;
  std::string_view piece;
};

std::vector<QuestionWord> QuestionWords(std::string_view question) {
  std::vector<QuestionWord> words;
  size_t start = 0;
  while (start < question.size()) {
    size_t end = question.find_first_of(" \t\r\n\f\v", start);
    if (end == std::string_view::npos) end = question.size();
    if (end > start) {
      const std::string_view piece = question.substr(start, end - start);
      for (auto& w : SplitNormalizedName(NormalizeEntityName(piece)))
        words.push_back({std::move(w), piece});
    }
    start = end + 1;
  }
  return words;
}

// Entities named in the question, in question order. Greedy longest match from the left, so
// "Digital Markets Act" is one match, not also "Markets". A few indexed look-ups per word.
Result<std::vector<EntityRecord>> MatchNames(Store& store, std::string_view question,
                                             int max_words) {
  std::vector<EntityRecord> found;
  if (max_words <= 0) return found;
  const auto words = QuestionWords(question);
  std::set<int64_t> seen;
  size_t i = 0;
  while (i < words.size()) {
    size_t matched_len = 0;
    const size_t longest = std::min(static_cast<size_t>(max_words), words.size() - i);
    for (size_t len = longest; len >= 1 && matched_len == 0; --len) {
      std::string key = words[i].key;
      for (size_t j = 1; j < len; ++j) key += ' ' + words[i + j].key;
      auto entity = store.GetEntityByKey(key);
      if (!entity.ok()) return entity.status().WithContext("looking up names in the question");
      if (!entity->has_value()) continue;
      const EntityRecord& e = **entity;
      if (len == 1 && key.size() < kShortNameBytes && !ContainsWordExact(words[i].piece, e.name)) {
        continue;
      }
      matched_len = len;
      if (seen.insert(e.id).second) found.push_back(e);
    }
    i += std::max<size_t>(matched_len, 1);
  }
  return found;
}

std::optional<int64_t> ParseId(const std::string& s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string FormatNumber(double v) { return fmt::format("{:g}", v); }

// ---------------------------------------------------------------- candidates

// What ranking a relationship needs; its description is read only if it is rendered.
struct RelCandidate {
  int64_t id = 0;
  int64_t source_id = 0;
  int64_t target_id = 0;
  double weight = 0;
  int64_t combined_degree = 0;
  std::array<int64_t, 2> via{};  // matched ends, in match order (a relationship has two ends)
  uint32_t via_count = 0;
  int64_t touches = 0;  // matched entities the relationship reaches (see ranking)
  double walk = 0;      // the walk's probability at its two ends (when there is a walk)
};

struct ReportCandidate {
  ReportRecord report;
  std::vector<int64_t> via;  // matched members
};

constexpr uint32_t kNoVia = std::numeric_limits<uint32_t>::max();

// A chunk's matched entities, as a chain through ContextBuilder::chunk_via_ (most chunks have
// one: no vector per chunk).
struct ViaLink {
  int64_t entity = 0;
  uint32_t next = kNoVia;
};

struct ChunkCandidate {
  const std::string* chunk_id = nullptr;  // in entity_chunks_ or the retrieval's ranking
  uint32_t via_count = 0;                 // matched entities extracted from it
  uint32_t via_first = kNoVia;            // their chain, in match order
  uint32_t via_last = kNoVia;
  size_t best_match = 0;  // rank of the best matched entity linked to it
  size_t position = 0;    // place in that entity's chunk list (document order)
  bool taken = false;     // already placed by the hybrid ranking
};

// Chunks: most matched entities first; then the best match's rank; then document order.
bool ChunkBefore(const ChunkCandidate& a, const ChunkCandidate& b) {
  if (a.via_count != b.via_count) return a.via_count > b.via_count;
  if (a.best_match != b.best_match) return a.best_match < b.best_match;
  return a.position < b.position;
}

// One budgeted type being filled: its ranked candidates and where filling stopped.
struct Lane {
  LocalItemType type;
  double share = 0;
  size_t count = 0;  // candidates
  size_t next = 0;   // first candidate not placed
  int64_t used = 0;
  int64_t first_share = 0;
  // The rendered candidate at `next`, kept across rounds so a retry costs no store read.
  std::optional<LocalContextItem> pending;
  std::vector<LocalContextItem> placed;
};

class ContextBuilder {
 public:
  ContextBuilder(Store& store, const Tokenizer& tokenizer, const LocalSearchOptions& options)
      : store_(store), tokenizer_(tokenizer), options_(options) {}

  // `retrieval`: the hybrid ranking of the question (options.hybrid_chunks), or null.
  Result<LocalContext> Build(EmbeddingModel* embedder, std::string_view question,
                             const VectorIndex* entity_index, const RetrievalResult* retrieval);

 private:
  Status Match(EmbeddingModel* embedder, std::string_view question,
               const VectorIndex* entity_index);
  // Nearest entities to the question, or nothing (with a diagnostic) when embeddings cannot be
  // used. Sets ctx_.used_embeddings.
  Result<std::vector<VectorHit>> NearestEntities(EmbeddingModel* embedder,
                                                 std::string_view question,
                                                 const VectorIndex* entity_index);
  Status Collect();
  // Collect's orderings: see their comments in Collect.
  void RankRelationships(const std::pmr::unordered_map<int64_t, int64_t>& neighbours);
  Status RankReports(std::map<int64_t, std::vector<int64_t>>& communities);
  void OrderChunks(const std::pmr::unordered_map<std::string_view, uint32_t>& chunk_at);
  // Reads the descriptions of the next batch of ranked relationships.
  Status ReadRelationshipTexts();
  std::vector<int64_t> ChunkVia(const ChunkCandidate& c) const;
  Result<std::string> EntityName(int64_t id);
  // Renders candidate `i` of `lane` (nullopt: it vanished from the store; skip it).
  Result<std::optional<LocalContextItem>> Render(const Lane& lane, size_t i);
  // Places the lane's candidates in rank order while they fit in `cap` tokens; true if any.
  Result<bool> Fill(Lane& lane, int64_t cap);
  Status FillBudget();
  void Assemble();

  Store& store_;
  const Tokenizer& tokenizer_;
  const LocalSearchOptions& options_;
  LocalContext ctx_;
  std::vector<EntityRecord> matched_;               // in match order
  std::unordered_map<int64_t, size_t> match_rank_;  // entity id -> index in matched_
  std::unordered_map<int64_t, std::string> names_;  // entity id -> display name (cache)
  std::vector<RelCandidate> rels_;                  // ranked
  // Descriptions of rels_[0..size), read in batches as rendering reaches them (nullopt: the
  // relationship is gone from the store).
  std::vector<std::optional<std::string>> rel_text_;
  std::vector<ReportCandidate> reports_;                 // ranked
  std::vector<ChunkCandidate> chunks_;                   // ranked
  std::vector<std::vector<std::string>> entity_chunks_;  // per matched entity: its chunk ids
  std::vector<ViaLink> chunk_via_;                       // the chunks' via chains
  std::vector<LocalContextItem> entity_items_;
  std::array<Lane, 3> lanes_{};
  const RetrievalResult* retrieval_ = nullptr;
  std::unordered_map<int64_t, double> walk_;  // entity id -> the walk's probability
};

Result<std::vector<VectorHit>> ContextBuilder::NearestEntities(EmbeddingModel* embedder,
                                                               std::string_view question,
                                                               const VectorIndex* entity_index) {
  std::vector<VectorHit> none;
  if (embedder == nullptr) {
    ctx_.diagnostics.push_back(
        "no embedding model is configured: entities were matched by name only");
    return none;
  }
  std::string model;
  size_t count = 0;
  size_t dimension = 0;
  if (entity_index != nullptr) {
    model = entity_index->model();
    count = entity_index->size();
    dimension = entity_index->dimension();
  } else {
    auto space = store_.GetEmbeddingSpace(EmbeddingOwner::kEntity);
    if (!space.ok()) return space.status().WithContext("reading the entity embeddings");
    if (space->has_value()) {
      model = (*space)->model;
      count = static_cast<size_t>((*space)->count);
      dimension = static_cast<size_t>((*space)->dimension);
    }
  }
  if (count == 0) {
    ctx_.diagnostics.push_back(
        "the index holds no entity embeddings (no embedding model was configured when it was "
        "built): entities were matched by name only");
    return none;
  }
  if (model != embedder->model()) {
    ctx_.diagnostics.push_back("the entity embeddings were made with model '" + model +
                               "' but the question would be embedded with '" + embedder->model() +
                               "': the two cannot be compared, so entities were matched by name "
                               "only (re-index to embed with the configured model)");
    return none;
  }
  auto embedded = embedder->Embed({std::string(question)});
  if (!embedded.ok()) return embedded.status().WithContext("embedding the question");
  if (embedded->vectors.size() != 1) {
    return Status::Internal("embedding the question: the model returned " +
                            std::to_string(embedded->vectors.size()) + " vectors for 1 input");
  }
  const std::vector<float>& q = embedded->vectors.front();
  if (q.size() != dimension) {
    ctx_.diagnostics.push_back("the question's embedding has dimension " +
                               std::to_string(q.size()) +
                               " but the entity embeddings have dimension " +
                               std::to_string(dimension) + ": entities were matched by name only");
    return none;
  }
  std::unique_ptr<VectorIndex> own;
  if (entity_index == nullptr) {
    // One question: a scan beats building a graph, whatever the size.
    VectorIndexOptions exact;
    exact.max_exact_floats = std::numeric_limits<size_t>::max();
    auto built = VectorIndex::Build(store_, EmbeddingOwner::kEntity, exact);
    if (!built.ok()) return built.status();
    own = std::move(built).value();
    entity_index = own.get();
  }
  auto hits = entity_index->Search(q, static_cast<size_t>(options_.top_k_entities));
  if (!hits.ok()) return hits.status().WithContext("searching the entity embeddings");
  ctx_.used_embeddings = true;
  return hits;
}

Status ContextBuilder::Match(EmbeddingModel* embedder, std::string_view question,
                             const VectorIndex* entity_index) {
  const auto k = static_cast<size_t>(options_.top_k_entities);
  GRAG_ASSIGN_OR_RETURN(auto named, MatchNames(store_, question, options_.max_name_words));
  GRAG_ASSIGN_OR_RETURN(auto hits, NearestEntities(embedder, question, entity_index));

  std::unordered_map<int64_t, double> similarity;
  for (const auto& h : hits) {
    if (auto id = ParseId(h.id)) similarity.emplace(*id, h.similarity);
  }
  auto add = [&](EntityRecord e, bool by_name) {
    LocalMatch m;
    m.entity_id = e.id;
    m.name = e.name;
    m.by_name = by_name;
    if (auto it = similarity.find(e.id); it != similarity.end()) {
      m.similarity = it->second;
      m.by_embedding = it->second >= options_.similarity_floor;
    }
    match_rank_.emplace(e.id, matched_.size());
    names_.emplace(e.id, e.name);
    ctx_.matches.push_back(std::move(m));
    matched_.push_back(std::move(e));
  };
  if (retrieval_ != nullptr) {
    // Named entities the retrieval kept: a name in too many chunks ("film", "located") points
    // nowhere and must not take a slot from one that does.
    std::unordered_map<int64_t, const SeedEntity*> seeded;
    for (const auto& s : retrieval_->seeds) seeded.emplace(s.entity_id, &s);
    std::vector<EntityRecord> kept;
    for (auto& e : named) {
      if (auto it = seeded.find(e.id); it != seeded.end() && it->second->by_name) {
        kept.push_back(std::move(e));
      }
    }
    if (!kept.empty() || named.empty()) named = std::move(kept);
  }
  // Named entities first: the user said them outright.
  for (auto& e : named) {
    if (matched_.size() == k) break;
    add(std::move(e), true);
  }
  for (const auto& h : hits) {  // most similar first
    if (matched_.size() == k) break;
    if (h.similarity < options_.similarity_floor) break;
    const auto id = ParseId(h.id);
    if (!id) {
      ctx_.diagnostics.push_back("ignored an entity embedding with a malformed owner id '" + h.id +
                                 "'");
      continue;
    }
    if (match_rank_.count(*id) != 0) continue;
    auto e = store_.GetEntity(*id);
    if (!e.ok()) return e.status().WithContext("reading matched entity " + h.id);
    if (!e->has_value()) {  // an embedding whose entity is gone: stale, not fatal
      ctx_.diagnostics.push_back("entity " + h.id + " has an embedding but no longer exists");
      continue;
    }
    add(std::move(**e), false);
  }
  if (matched_.empty() && retrieval_ != nullptr) {
    // Nothing named and no description near enough: the entities the best passages' sentences
    // that match the question name stand in, when the sentence clears the floor ("the partner
    // died" names no one, but "Mr. Marley has been dead these seven years" names Marley).
    for (const auto& s : retrieval_->seeds) {  // by seed weight
      if (matched_.size() == k) break;
      if (!s.by_fact || s.fact_match < options_.similarity_floor) continue;
      auto e = store_.GetEntity(s.entity_id);
      if (!e.ok()) return e.status().WithContext("reading matched entity " + s.name_key);
      if (!e->has_value()) continue;
      add(std::move(**e), false);
      ctx_.matches.back().by_fact = true;
      ctx_.matches.back().fact_match = s.fact_match;
    }
    if (!matched_.empty()) {
      ctx_.diagnostics.push_back(fmt::format(
          "no entity was named or near the question: matched {} named by the best passages' "
          "sentences that match it (a share of its words of at least {:.2f})",
          matched_.size(), options_.similarity_floor));
    }
  }

  if (matched_.empty() && !hits.empty()) {
    // Say how close the question came, so a user can tell "off topic" from "floor too high".
    std::string nearest = "entity " + hits.front().id;
    if (auto id = ParseId(hits.front().id)) {
      auto e = store_.GetEntity(*id);
      if (e.ok() && e->has_value()) nearest = "'" + (*e)->name + "'";
    }
    ctx_.diagnostics.push_back(
        fmt::format("no entity cleared the similarity floor {:.2f}: the nearest, {}, is at {:.3f}",
                    options_.similarity_floor, nearest, hits.front().similarity));
  }
  if (ctx_.used_embeddings && !hits.empty()) {
    Log(LogLevel::kDebug, kLog,
        fmt::format("nearest entity '{}' at similarity {:.3f} (floor {:.3f})", hits.front().id,
                    hits.front().similarity, options_.similarity_floor));
  }
  for (const auto& m : ctx_.matches) {
    Log(LogLevel::kDebug, kLog,
        fmt::format("matched E{} '{}'{}{}{}", m.entity_id, m.name, m.by_name ? " by name" : "",
                    m.similarity ? fmt::format(", similarity {:.3f}", *m.similarity) : "",
                    m.by_fact ? fmt::format(" by a fact (match {:.2f})", m.fact_match) : ""));
  }
  return Status::Ok();
}

Status ContextBuilder::Collect() {
  // The maps' nodes (thousands for a busy entity) come from one arena, freed at once.
  std::pmr::monotonic_buffer_resource arena;
  // Relationship id -> index in rels_.
  std::pmr::unordered_map<int64_t, uint32_t> rel_at(&arena);
  // Unmatched entity -> how many matched entities it links to.
  std::pmr::unordered_map<int64_t, int64_t> neighbours(&arena);
  // Chunk id -> index in chunks_.
  std::pmr::unordered_map<std::string_view, uint32_t> chunk_at(&arena);
  std::map<int64_t, std::vector<int64_t>> communities;  // community -> matched members
  entity_chunks_.reserve(matched_.size());              // chunk_at and chunks_ point into it
  for (size_t rank = 0; rank < matched_.size(); ++rank) {
    const int64_t id = matched_[rank].id;
    const std::string what = "entity " + std::to_string(id);

    auto of = store_.ListRelationshipEdgesOf(id);
    if (!of.ok()) return of.status().WithContext("reading the relationships of " + what);
    rels_.reserve(rels_.size() + of->size());
    rel_at.reserve(rel_at.size() + of->size());
    for (const RelationshipRecord& r : *of) {
      auto [it, added] = rel_at.try_emplace(r.id, static_cast<uint32_t>(rels_.size()));
      if (added) {
        RelCandidate& c = rels_.emplace_back();
        c.id = r.id;
        c.source_id = r.source_id;
        c.target_id = r.target_id;
        c.weight = r.weight;
        c.combined_degree = r.combined_degree;
      }
      RelCandidate& c = rels_[it->second];
      if (c.via_count < c.via.size()) c.via[c.via_count++] = id;
      const int64_t other = c.source_id == id ? c.target_id : c.source_id;
      if (match_rank_.count(other) == 0) ++neighbours[other];
    }

    auto member_of = store_.CommunitiesOfEntity(id);
    if (!member_of.ok())
      return member_of.status().WithContext("reading the communities of " + what);
    for (int64_t c : *member_of) communities[c].push_back(id);

    auto chunk_ids = store_.GetEntityChunks(id);
    if (!chunk_ids.ok()) return chunk_ids.status().WithContext("reading the chunks of " + what);
    const std::vector<std::string>& ids = entity_chunks_.emplace_back(std::move(*chunk_ids));
    chunks_.reserve(chunks_.size() + ids.size());
    chunk_at.reserve(chunk_at.size() + ids.size());
    chunk_via_.reserve(chunk_via_.size() + ids.size());
    for (size_t pos = 0; pos < ids.size(); ++pos) {
      auto [it, added] = chunk_at.try_emplace(ids[pos], static_cast<uint32_t>(chunks_.size()));
      if (added) {
        ChunkCandidate& c = chunks_.emplace_back();
        c.chunk_id = &ids[pos];
        c.best_match = rank;
        c.position = pos;
      }
      // Ranks come in order: the first is the best.
      ChunkCandidate& c = chunks_[it->second];
      const auto link = static_cast<uint32_t>(chunk_via_.size());
      chunk_via_.push_back({id, kNoVia});
      if (c.via_last == kNoVia) {
        c.via_first = link;
      } else {
        chunk_via_[c.via_last].next = link;
      }
      c.via_last = link;
      ++c.via_count;
    }
  }

  RankRelationships(neighbours);
  GRAG_RETURN_IF_ERROR(RankReports(communities));
  OrderChunks(chunk_at);
  return Status::Ok();
}

void ContextBuilder::RankRelationships(
    const std::pmr::unordered_map<int64_t, int64_t>& neighbours) {
  // Relationships: both ends matched first; then how many matched entities the relationship
  // reaches (its other end's links to matched entities); then with a walk, where it went most
  // (the ends' probabilities); then weight, combined degree, id. The id makes the order total,
  // so it does not depend on the order the candidates were collected in.
  for (RelCandidate& c : rels_) {
    if (c.via_count >= 2) {
      c.touches = 2;
    } else {
      const int64_t other = c.source_id == c.via[0] ? c.target_id : c.source_id;
      auto it = neighbours.find(other);
      c.touches = it == neighbours.end() ? 0 : it->second;
    }
    if (!walk_.empty()) {
      for (int64_t end : {c.source_id, c.target_id}) {
        if (auto it = walk_.find(end); it != walk_.end()) c.walk += it->second;
      }
    }
  }
  const bool walked = !walk_.empty();
  std::sort(rels_.begin(), rels_.end(), [walked](const RelCandidate& a, const RelCandidate& b) {
    const bool a_both = a.via_count >= 2;
    const bool b_both = b.via_count >= 2;
    if (a_both != b_both) return a_both;
    if (a.touches != b.touches) return a.touches > b.touches;
    if (walked && a.walk != b.walk) return a.walk > b.walk;
    if (a.weight != b.weight) return a.weight > b.weight;
    if (a.combined_degree != b.combined_degree) return a.combined_degree > b.combined_degree;
    return a.id < b.id;
  });
}

Status ContextBuilder::RankReports(std::map<int64_t, std::vector<int64_t>>& communities) {
  // Reports: most matched members first; then finer (more specific); then rating, id.
  int64_t missing = 0;
  int64_t gaps = 0;
  for (auto& [cid, via] : communities) {
    auto report = store_.GetReport(cid);
    if (!report.ok()) {
      return report.status().WithContext("reading the report of community " + std::to_string(cid));
    }
    if (!report->has_value()) {
      ++missing;
      continue;
    }
    if ((*report)->status != ReportStatus::kOk) {
      ++gaps;
      continue;
    }
    reports_.push_back({std::move(**report), std::move(via)});
  }
  if (missing + gaps > 0) {
    ctx_.diagnostics.push_back(fmt::format(
        "{} of the {} communities of the matched entities have no report{}", missing + gaps,
        communities.size(), gaps > 0 ? fmt::format(" ({} are gaps)", gaps) : ""));
  }
  std::sort(reports_.begin(), reports_.end(),
            [](const ReportCandidate& a, const ReportCandidate& b) {
              if (a.via.size() != b.via.size()) return a.via.size() > b.via.size();
              if (a.report.level != b.report.level) return a.report.level > b.report.level;
              const double ar = a.report.rating.value_or(-1);
              const double br = b.report.rating.value_or(-1);
              if (ar != br) return ar > br;
              return a.report.community_id < b.report.community_id;
            });
  return Status::Ok();
}

void ContextBuilder::OrderChunks(
    const std::pmr::unordered_map<std::string_view, uint32_t>& chunk_at) {
  // Chunks: see ChunkBefore. With one matched entity they are already in that order.
  auto sort_chunks = [this] {
    if (!std::is_sorted(chunks_.begin(), chunks_.end(), ChunkBefore)) {
      std::stable_sort(chunks_.begin(), chunks_.end(), ChunkBefore);
    }
  };
  if (retrieval_ != nullptr) {
    // Chunks in the hybrid ranking's order: those the walk from the matched entities reached
    // or that name a matched entity; then the matched entities' other chunks.
    std::vector<ChunkCandidate> ranked;
    ranked.reserve(chunks_.size());
    for (const auto& rc : retrieval_->chunks) {
      auto it = chunk_at.find(rc.chunk_id);
      const bool linked = it != chunk_at.end();
      const bool walked_to = rc.ranks[static_cast<size_t>(Signal::kGraph)].has_value();
      if (!linked && !walked_to) continue;
      if (linked) {
        ChunkCandidate& c = chunks_[it->second];
        c.taken = true;
        ranked.push_back(c);
      } else {
        ChunkCandidate& c = ranked.emplace_back();
        c.chunk_id = &rc.chunk_id;
      }
    }
    sort_chunks();
    for (const ChunkCandidate& c : chunks_) {
      if (!c.taken) ranked.push_back(c);
    }
    chunks_ = std::move(ranked);
    return;
  }
  sort_chunks();
}

std::vector<int64_t> ContextBuilder::ChunkVia(const ChunkCandidate& c) const {
  std::vector<int64_t> via;
  via.reserve(c.via_count);
  for (uint32_t at = c.via_first; at != kNoVia; at = chunk_via_[at].next) {
    via.push_back(chunk_via_[at].entity);
  }
  return via;
}

Status ContextBuilder::ReadRelationshipTexts() {
  // Rendering stops where the budget is full, a few dozen in: read 16, then as many again as
  // have been read so far.
  constexpr size_t kFirstBatch = 16;
  const size_t start = rel_text_.size();
  const size_t n = std::min(rels_.size() - start, std::max(kFirstBatch, start));
  std::vector<int64_t> ids;
  ids.reserve(n);
  for (size_t i = start; i < start + n; ++i) ids.push_back(rels_[i].id);
  auto texts = store_.GetRelationshipDescriptions(ids);
  if (!texts.ok()) return texts.status().WithContext("reading relationship descriptions");
  if (texts->size() != n) {
    return Status::Internal("the store returned " + std::to_string(texts->size()) +
                            " relationship descriptions for " + std::to_string(n) + " ids");
  }
  for (auto& t : *texts) rel_text_.push_back(std::move(t));
  return Status::Ok();
}

Result<std::string> ContextBuilder::EntityName(int64_t id) {
  if (auto it = names_.find(id); it != names_.end()) return it->second;
  auto e = store_.GetEntity(id);
  if (!e.ok()) return e.status().WithContext("reading entity " + std::to_string(id));
  std::string name = e->has_value() ? (*e)->name : "entity " + std::to_string(id);
  names_.emplace(id, name);
  return name;
}

Result<std::optional<LocalContextItem>> ContextBuilder::Render(const Lane& lane, size_t i) {
  LocalContextItem item;
  item.type = lane.type;
  item.rank = static_cast<int64_t>(i) + 1;
  switch (lane.type) {
    case LocalItemType::kRelationship: {
      while (i >= rel_text_.size()) {
        GRAG_RETURN_IF_ERROR(ReadRelationshipTexts());
      }
      // Gone from the store since it was collected: skip it.
      if (!rel_text_[i]) return std::optional<LocalContextItem>();
      const std::string& description = *rel_text_[i];
      const RelCandidate& c = rels_[i];
      item.via.assign(c.via.begin(), c.via.begin() + c.via_count);
      item.relationship_id = c.id;
      item.source_id = c.source_id;
      item.target_id = c.target_id;
      GRAG_ASSIGN_OR_RETURN(item.source_name, EntityName(c.source_id));
      GRAG_ASSIGN_OR_RETURN(item.target_name, EntityName(c.target_id));
      item.id = "R" + std::to_string(c.id);
      item.text =
          fmt::format("[{}] {} (E{}) -- {} (E{}), weight {}", item.id, item.source_name,
                      item.source_id, item.target_name, item.target_id, FormatNumber(c.weight));
      if (!description.empty()) item.text += ": " + description;
      item.text += '\n';
      break;
    }
    case LocalItemType::kReport: {
      const ReportRecord& r = reports_[i].report;
      item.via = reports_[i].via;
      item.community_id = r.community_id;
      item.level = r.level;
      item.name = r.title;
      item.id = "C" + std::to_string(r.community_id);
      // full_content is the report as markdown, title included; the summary stands in for a
      // report stored without it.
      if (!r.full_content.empty()) {
        item.text = fmt::format("[{}] community {}, level {}\n{}\n\n", item.id, r.community_id,
                                r.level, r.full_content);
      } else {
        item.text =
            fmt::format("[{}] {} (community {}, level {})\n{}\n\n", item.id,
                        r.title.empty() ? "untitled" : r.title, r.community_id, r.level, r.summary);
      }
      break;
    }
    case LocalItemType::kChunk: {
      const ChunkCandidate& c = chunks_[i];
      auto chunk = store_.GetChunk(*c.chunk_id);
      if (!chunk.ok()) return chunk.status().WithContext("reading chunk " + *c.chunk_id);
      if (!chunk->has_value()) return std::optional<LocalContextItem>();
      item.via = ChunkVia(c);
      item.chunk_id = *c.chunk_id;
      item.document_id = (*chunk)->document_id;
      item.chunk_index = (*chunk)->index;
      // Numbered by rank: placed chunks are a prefix of the ranking, so S1, S2... run on
      // (a gap only where a chunk vanished from the store since it was collected).
      item.id = options_.chunk_label ? options_.chunk_label(item.chunk_id)
                                     : "S" + std::to_string(item.rank);
      item.text = fmt::format("[{}] {}, chunk {}:\n{}\n\n", item.id, item.document_id,
                              item.chunk_index, (*chunk)->text);  // LocalItemBody's inverse
      break;
    }
    case LocalItemType::kEntity:
      break;
  }
  item.tokens = static_cast<int64_t>(tokenizer_.Count(item.text));
  return std::optional<LocalContextItem>(std::move(item));
}

Result<bool> ContextBuilder::Fill(Lane& lane, int64_t cap) {
  bool placed_any = false;
  while (lane.next < lane.count) {
    if (!lane.pending) {
      GRAG_ASSIGN_OR_RETURN(auto rendered, Render(lane, lane.next));
      if (!rendered) {  // gone from the store since it was collected
        ++lane.next;
        continue;
      }
      lane.pending = std::move(rendered);
    }
    if (lane.used + lane.pending->tokens > cap) break;  // truncate by rank: stop here
    LocalContextItem item = std::move(*lane.pending);
    lane.pending.reset();
    ++lane.next;
    lane.used += item.tokens;
    lane.placed.push_back(std::move(item));
    placed_any = true;
  }
  return placed_any;
}

Status ContextBuilder::FillBudget() {
  const int64_t budget = options_.context_budget_tokens;
  int64_t used = 0;
  // The matched entities' own lines come first, off the top, in match order.
  for (size_t i = 0; i < matched_.size(); ++i) {
    const EntityRecord& e = matched_[i];
    LocalContextItem item;
    item.type = LocalItemType::kEntity;
    item.id = "E" + std::to_string(e.id);
    item.rank = static_cast<int64_t>(i) + 1;
    item.via = {e.id};
    item.entity_id = e.id;
    item.name = e.name;
    item.entity_type = e.type;
    item.text = "[" + item.id + "] " + e.name;
    if (!e.type.empty()) item.text += " (" + e.type + ")";
    if (!e.description.empty()) item.text += ": " + e.description;
    item.text += '\n';
    item.tokens = static_cast<int64_t>(tokenizer_.Count(item.text));
    const auto cap = static_cast<int64_t>(static_cast<double>(budget) * options_.entity_share);
    if (used + item.tokens > cap && !entity_items_.empty()) break;
    if (used + item.tokens > budget) break;
    used += item.tokens;
    entity_items_.push_back(std::move(item));
  }

  const int64_t rest = budget - used;
  const double total_share =
      options_.chunk_share + options_.relationship_share + options_.report_share;
  for (size_t t = 0; t < kBudgeted.size(); ++t) {
    Lane& lane = lanes_[t];
    lane.type = kBudgeted[t];
    switch (lane.type) {
      case LocalItemType::kChunk:
        lane.share = options_.chunk_share;
        lane.count = chunks_.size();
        break;
      case LocalItemType::kRelationship:
        lane.share = options_.relationship_share;
        lane.count = rels_.size();
        break;
      case LocalItemType::kReport:
        lane.share = options_.report_share;
        lane.count = reports_.size();
        break;
      case LocalItemType::kEntity:
        break;
    }
    if (lane.share <= 0) lane.count = 0;  // a zero share asks for none of the type
    lane.first_share =
        static_cast<int64_t>(std::floor(static_cast<double>(rest) * lane.share / total_share));
    GRAG_ASSIGN_OR_RETURN(bool placed, Fill(lane, lane.first_share));
    (void)placed;
  }

  // Spare budget goes round again, in proportion to the shares of the types with items left,
  // until a round places nothing. The next item of the hungry type with the largest share, when
  // larger than its slice but within the whole spare, goes first: the other types' smaller
  // items fit round it, and it would not fit round them (a book's 1,200-token chunk lost to a
  // few report lines). When every proportional slice is too small for its type's next item, the
  // whole spare is offered to one type at a time, largest share first.
  std::array<Lane*, 3> by_share = {&lanes_[0], &lanes_[1], &lanes_[2]};
  std::stable_sort(by_share.begin(), by_share.end(),
                   [](const Lane* a, const Lane* b) { return a->share > b->share; });
  while (true) {
    int64_t taken = 0;
    double hungry_share = 0;
    for (const Lane& lane : lanes_) {
      taken += lane.used;
      if (lane.next < lane.count) hungry_share += lane.share;
    }
    const int64_t spare = rest - taken;
    if (spare <= 0 || hungry_share <= 0) break;
    bool progress = false;
    // The hungry type with the largest share (there is one: hungry_share > 0).
    const auto largest = std::find_if(by_share.begin(), by_share.end(),
                                      [](const Lane* l) { return l->next < l->count; });
    if (largest != by_share.end() && (*largest)->pending) {
      Lane& lane = **largest;
      const auto slice =
          static_cast<int64_t>(std::floor(static_cast<double>(spare) * lane.share / hungry_share));
      if (lane.pending->tokens > slice && lane.pending->tokens <= spare) {
        GRAG_ASSIGN_OR_RETURN(progress, Fill(lane, lane.used + lane.pending->tokens));
        if (progress) continue;
      }
    }
    for (Lane& lane : lanes_) {
      if (lane.next >= lane.count) continue;
      const auto slice =
          static_cast<int64_t>(std::floor(static_cast<double>(spare) * lane.share / hungry_share));
      GRAG_ASSIGN_OR_RETURN(bool placed, Fill(lane, lane.used + slice));
      progress = progress || placed;
    }
    if (progress) continue;
    for (Lane* lane : by_share) {
      if (lane->next >= lane->count) continue;
      GRAG_ASSIGN_OR_RETURN(bool placed, Fill(*lane, lane->used + spare));
      if (placed) {
        progress = true;
        break;
      }
    }
    if (!progress) break;
  }
  return Status::Ok();
}

void ContextBuilder::Assemble() {
  LocalTypeUsage entity_usage;
  entity_usage.type = LocalItemType::kEntity;
  entity_usage.candidates = static_cast<int64_t>(matched_.size());
  entity_usage.placed = static_cast<int64_t>(entity_items_.size());
  entity_usage.share_tokens = options_.context_budget_tokens;
  for (auto& item : entity_items_) {
    entity_usage.used_tokens += item.tokens;
    ctx_.entities_text += item.text;
    ctx_.items.push_back(std::move(item));
  }
  ctx_.usage.push_back(entity_usage);

  // Sections in prompt order: relationships, reports, chunks.
  for (LocalItemType type :
       {LocalItemType::kRelationship, LocalItemType::kReport, LocalItemType::kChunk}) {
    for (Lane& lane : lanes_) {
      if (lane.type != type) continue;
      LocalTypeUsage u;
      u.type = type;
      u.candidates = static_cast<int64_t>(type == LocalItemType::kChunk          ? chunks_.size()
                                          : type == LocalItemType::kRelationship ? rels_.size()
                                                                                 : reports_.size());
      u.placed = static_cast<int64_t>(lane.placed.size());
      u.share_tokens = lane.first_share;
      u.used_tokens = lane.used;
      std::string& section = type == LocalItemType::kChunk          ? ctx_.chunks_text
                             : type == LocalItemType::kRelationship ? ctx_.relationships_text
                                                                    : ctx_.reports_text;
      for (auto& item : lane.placed) {
        section += item.text;
        ctx_.items.push_back(std::move(item));
      }
      ctx_.usage.push_back(u);
    }
  }
  for (const auto& u : ctx_.usage) ctx_.used_tokens += u.used_tokens;

  for (const auto& item : ctx_.items) {
    std::string via;
    for (int64_t v : item.via) via += (via.empty() ? "E" : ", E") + std::to_string(v);
    Log(LogLevel::kDebug, kLog,
        fmt::format("placed {} {} (rank {}, {} tokens, via {}): {}", LocalItemTypeName(item.type),
                    item.id, item.rank, item.tokens, via, DescribeLocalItem(item)));
  }
  for (const auto& u : ctx_.usage) {
    Log(LogLevel::kDebug, kLog,
        fmt::format("{}: {} of {} candidates placed, {} tokens (first share {})",
                    LocalItemTypeName(u.type), u.placed, u.candidates, u.used_tokens,
                    u.share_tokens));
  }
}

Result<LocalContext> ContextBuilder::Build(EmbeddingModel* embedder, std::string_view question,
                                           const VectorIndex* entity_index,
                                           const RetrievalResult* retrieval) {
  const auto start = std::chrono::steady_clock::now();
  retrieval_ = retrieval;
  if (retrieval != nullptr) {
    for (const auto& [id, p] : retrieval->entity_scores) walk_.emplace(id, p);
  }
  ctx_.budget_tokens = options_.context_budget_tokens;
  GRAG_RETURN_IF_ERROR(Match(embedder, question, entity_index));
  // The caller shows diagnostics (the CLI prints them); the log keeps them for --verbose runs.
  for (const auto& d : ctx_.diagnostics) Log(LogLevel::kDebug, kLog, d);
  if (!matched_.empty()) {
    GRAG_RETURN_IF_ERROR(Collect());
    GRAG_RETURN_IF_ERROR(FillBudget());
  }
  Assemble();
  ctx_.build_time = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  return std::move(ctx_);
}

}  // namespace

std::string_view LocalItemBody(const LocalContextItem& item) {
  std::string_view body = item.text;
  if (item.type != LocalItemType::kChunk) return body;
  // The label line and the blank line after the text, as Render places them.
  const size_t eol = body.find('\n');
  if (body.starts_with("[") && eol != std::string_view::npos) body.remove_prefix(eol + 1);
  if (body.ends_with("\n\n")) body.remove_suffix(2);
  return body;
}

Result<LocalContext> BuildLocalContext(Store& store, EmbeddingModel* embedder,
                                       const Tokenizer& tokenizer, std::string_view question,
                                       const LocalSearchOptions& options,
                                       const VectorIndex* entity_index,
                                       const Retriever* retriever) {
  GRAG_RETURN_IF_ERROR(CheckOptions(options));
  GRAG_RETURN_IF_ERROR(CheckQuestion(question, tokenizer, options.max_question_tokens));
  std::optional<RetrievalResult> retrieval;
  std::unique_ptr<Retriever> own;  // kept to the end: the context may use its entity vectors
  if (options.hybrid_chunks) {
    if (retriever == nullptr) {
      // One question: read the neighbourhood it needs, not the whole graph.
      RetrieverOptions ro;
      ro.load_graph = false;
      GRAG_ASSIGN_OR_RETURN(own, Retriever::Open(store, embedder, ro));
      retriever = own.get();
    }
    RetrievalOptions ro = options.retrieval;
    ro.method = RetrievalMethod::kHybrid;
    ro.read_chunks = false;  // Render reads the chunks it places
    GRAG_ASSIGN_OR_RETURN(RetrievalResult r, retriever->Retrieve(question, ro));
    retrieval = std::move(r);
    if (entity_index == nullptr) {
      // The entity vectors the retrieval searched, when it read them: no second copy.
      GRAG_ASSIGN_OR_RETURN(entity_index, retriever->EntityVectors());
    }
  }
  ContextBuilder builder(store, tokenizer, options);
  return builder.Build(embedder, question, entity_index, retrieval ? &*retrieval : nullptr);
}

}  // namespace grag
