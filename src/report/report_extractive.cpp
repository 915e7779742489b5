// Extractive community reports (no LLM): titles from top entities, findings from the source
// sentences naming the most members, input hashes to skip unchanged communities. See
// grag/extractive_report.h for the rules.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grag/extractive_report.h"
#include "grag/hash.h"
#include "grag/log.h"
#include "grag/words.h"

namespace grag {
namespace {

constexpr std::string_view kComponent = "report";
// Bumped when the report's layout or selection rules change, so stored reports are redone.
constexpr std::string_view kHashVersion = "grag/report-extractive/v3";
// Entity ids a citation lists before "+more" (Microsoft GraphRAG's convention).
constexpr size_t kMaxCitedIds = 5;

// ---------------------------------------------------------------- helpers

// "A", "A and B", "A, B and C".
std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out;
}

std::string Plural(int64_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

// "3, 7, 12" with at most kMaxCitedIds, then "+more".
std::string IdList(const std::vector<int64_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size() && i < kMaxCitedIds; ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ids[i]);
  }
  if (ids.size() > kMaxCitedIds) out += ", +more";
  return out;
}

// "[Data: Entities (3, 7); Relationships (12); Sources (chunk 1a2b3c4d5e6f)]"
std::string Citation(const std::vector<int64_t>& entities, const std::vector<int64_t>& rels,
                     const std::string& chunk_id) {
  std::vector<std::string> parts;
  if (!entities.empty()) parts.push_back("Entities (" + IdList(entities) + ")");
  if (!rels.empty()) parts.push_back("Relationships (" + IdList(rels) + ")");
  if (!chunk_id.empty()) parts.push_back("Sources (chunk " + chunk_id.substr(0, 12) + ")");
  std::string out = "[Data: ";
  for (size_t i = 0; i < parts.size(); ++i) out += (i > 0 ? "; " : "") + parts[i];
  return out + "]";
}

bool IsTerminator(char c) { return c == '.' || c == '!' || c == '?'; }

// `text` ending with a full stop (or other terminator).
std::string Sentenced(std::string text) {
  if (!text.empty() && !IsTerminator(text.back()) && text.back() != '"') text += '.';
  return text;
}

double Rating(int64_t weight, int64_t size) {
  const double r = 1.5 * std::log2(1.0 + static_cast<double>(std::max<int64_t>(weight, 0))) +
                   0.5 * std::log2(1.0 + static_cast<double>(std::max<int64_t>(size, 0)));
  return std::round(std::min(10.0, r) * 10.0) / 10.0;
}

Status CheckOptions(const ExtractiveReportOptions& o) {
  if (o.min_findings < 0 || o.max_findings < 1 || o.min_findings > o.max_findings) {
    return Status::InvalidArgument(
        "extractive reports need 0 <= min_findings <= max_findings and max_findings >= 1");
  }
  if (o.title_entities < 1) return Status::InvalidArgument("title_entities must be at least 1");
  if (o.headline_chars < 16 || o.max_sentence_chars < 16) {
    return Status::InvalidArgument("headline_chars and max_sentence_chars must be at least 16");
  }
  if (o.max_report_tokens < 1) return Status::InvalidArgument("max_report_tokens must be >= 1");
  return Status::Ok();
}

// FNV-1a, 64 bits: a second hash of a sentence, independent of std::hash's.
uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// ---------------------------------------------------------------- the graph and the text

// What a report needs of a sentence that names an entity, kept for the whole run; its text is
// read again only if a report quotes it (the corpus's text is not held in memory: a community
// at the top of the hierarchy names sentences from most of it).
struct AnalysedSentence {
  // Where SplitSentences's text starts in the chunk (Sentence::offset), so a quote is cut from
  // the chunk again without splitting all of it.
  uint32_t offset = 0;
  uint32_t text_size = 0;  // bytes, whitespace runs collapsed
  // Overlapping chunks repeat sentences, and a repeat is known by two independent hashes of its
  // text (std::hash and FNV-1a); this number is the same for every sentence of the run with the
  // same two, so a community's repeats are found in a vector rather than by hashing again.
  uint32_t distinct = 0;
  bool complete = true;
  uint64_t fnv = 0;  // checks a quote cut again from the chunk
  // The entities it names (indices in entities_), ascending; never empty.
  std::vector<uint32_t> mentions;
};

struct AnalysedChunk {
  std::string id;
  std::string document_id;
  int64_t index = 0;
  std::vector<AnalysedSentence> sentences;  // those naming an entity
};

// An entity name as words, for matching against a sentence's normalised words.
struct Phrase {
  uint32_t entity = 0;  // index in entities_
  std::vector<std::string> words;
};

struct Member {
  const EntityRecord* entity = nullptr;
  int64_t degree = 0;
  const std::vector<std::string>* chunks = nullptr;
};

// A sentence that names members of the community being written.
struct Candidate {
  const AnalysedSentence* sentence = nullptr;
  const AnalysedChunk* chunk = nullptr;
  std::vector<size_t> members;  // indices into the ranked member list, ascending (= by rank)
  int64_t degree_sum = 0;
  size_t order = 0;  // document order, for ties
};

// Hashes a std::string and a std::string_view of the same bytes alike (as std::hash does), so a
// map keyed by strings is searched with views.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class Reporter {
 public:
  Reporter(Store& store, const Tokenizer& tokenizer, const ExtractiveReportOptions& options)
      : store_(store), tokenizer_(tokenizer), options_(options) {}

  Status Load();
  Result<ReportStageSummary> Run(const ReportProgressFn& progress);

 private:
  Result<std::vector<Member>> Members(const CommunityRecord& community);
  std::vector<const RelationshipRecord*> InternalRelationships(const std::vector<Member>& members);
  std::string InputHash(const CommunityRecord& community, const std::vector<Member>& members,
                        const std::vector<const RelationshipRecord*>& rels) const;
  Result<const AnalysedChunk*> Chunk(const std::string& id);
  Result<std::string> SentenceText(const Candidate& c);
  void BuildPhrases();
  std::vector<uint32_t> Mentions(const std::string& sentence);
  Result<std::vector<Candidate>> Candidates(const std::vector<Member>& members);
  std::vector<const Candidate*> Pick(const std::vector<Candidate>& candidates) const;
  Finding SentenceFinding(const Candidate& c, const std::string& text,
                          const std::vector<Member>& members,
                          const std::vector<const RelationshipRecord*>& rels) const;
  void AddFallbackFindings(const std::vector<Member>& members,
                           const std::vector<const RelationshipRecord*>& rels,
                           std::vector<Finding>* findings) const;
  std::string Summary(const CommunityRecord& community, const std::vector<Member>& members,
                      size_t internal_rels, const std::string* best) const;
  Result<ReportRecord> Build(const CommunityRecord& community, const std::vector<Member>& members,
                             const std::vector<const RelationshipRecord*>& rels,
                             int64_t* content_tokens);

  Store& store_;
  const Tokenizer& tokenizer_;
  const ExtractiveReportOptions& options_;
  std::vector<EntityRecord> entities_;
  std::unordered_map<int64_t, size_t> entity_index_;  // entity id -> index in entities_
  std::unordered_map<int64_t, int64_t> degree_;       // over the whole graph
  std::vector<RelationshipRecord> relationships_;
  // Entity id -> relationships whose smaller end it is, so each internal one is found once.
  std::unordered_map<int64_t, std::vector<size_t>> rels_from_;
  std::vector<CommunityRecord> communities_;
  std::unordered_map<int64_t, ReportRecord> stored_;  // community id -> report (no content)
  std::unordered_map<int64_t, std::vector<std::string>> entity_chunks_;     // loaded on demand
  std::unordered_map<std::string, std::unique_ptr<AnalysedChunk>> chunks_;  // on demand
  // First word -> phrases.
  std::unordered_map<std::string, std::vector<Phrase>, StringHash, std::equal_to<>> phrases_;
  // The FirstWordBits of phrases_'s keys: most words of a sentence start no name, and this
  // tells so without hashing the word (no false negatives; false positives only cost a lookup).
  std::vector<uint64_t> first_word_bits_;
  std::vector<std::string_view> words_;  // Mentions's scratch, kept for its capacity
  // Entity index -> rank among the members of the community being written (kNotMember
  // otherwise); Candidates sets and clears its members' entries.
  static constexpr uint32_t kNotMember = UINT32_MAX;
  std::vector<uint32_t> rank_;
  // (hash, fnv) -> AnalysedSentence::distinct, for the sentences analysed so far.
  struct PairHash {
    size_t operator()(const std::pair<uint64_t, uint64_t>& p) const {
      return static_cast<size_t>(p.first ^ (p.second * 0x9E3779B97F4A7C15ull));
    }
  };
  std::unordered_map<std::pair<uint64_t, uint64_t>, uint32_t, PairHash> distinct_;
  std::vector<char> seen_;                // by distinct sentence: Candidates's, all 0 between calls
  std::vector<uint32_t> member_scratch_;  // Candidates's, kept for its capacity
  bool phrases_built_ = false;
};

Status Reporter::Load() {
  GRAG_ASSIGN_OR_RETURN(entities_, store_.ListEntities());
  GRAG_ASSIGN_OR_RETURN(relationships_, store_.ListRelationships());
  GRAG_ASSIGN_OR_RETURN(communities_, store_.ListCommunities());
  GRAG_ASSIGN_OR_RETURN(std::vector<ReportRecord> reports, store_.ListReports());
  for (size_t i = 0; i < entities_.size(); ++i) entity_index_.emplace(entities_[i].id, i);
  // Degrees from the relationships themselves (as the LLM report stage counts them), so the
  // ranking does not depend on whether RecomputeGraphStats ran.
  for (size_t i = 0; i < relationships_.size(); ++i) {
    const RelationshipRecord& r = relationships_[i];
    if (entity_index_.count(r.source_id) == 0 || entity_index_.count(r.target_id) == 0) continue;
    ++degree_[r.source_id];
    ++degree_[r.target_id];
    rels_from_[std::min(r.source_id, r.target_id)].push_back(i);
  }
  for (ReportRecord& r : reports) {
    r.full_content.clear();
    r.findings.clear();
    stored_.emplace(r.community_id, std::move(r));
  }
  return Status::Ok();
}

// The members that exist, highest degree first (then by name, then id).
Result<std::vector<Member>> Reporter::Members(const CommunityRecord& community) {
  std::vector<Member> members;
  for (int64_t id : community.entity_ids) {
    auto it = entity_index_.find(id);
    if (it == entity_index_.end()) continue;
    auto [chunks, added] = entity_chunks_.try_emplace(id);
    if (added) {
      auto ids = store_.GetEntityChunks(id);
      if (!ids.ok()) {
        return ids.status().WithContext("reading the chunks of entity " + std::to_string(id));
      }
      chunks->second = std::move(ids).value();
      std::sort(chunks->second.begin(), chunks->second.end());
    }
    auto d = degree_.find(id);
    members.push_back(
        {&entities_[it->second], d == degree_.end() ? 0 : d->second, &chunks->second});
  }
  std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
    if (a.degree != b.degree) return a.degree > b.degree;
    if (a.entity->name != b.entity->name) return a.entity->name < b.entity->name;
    return a.entity->id < b.entity->id;
  });
  return members;
}

// Relationships with both ends in the community, by weight (as the store lists them).
std::vector<const RelationshipRecord*> Reporter::InternalRelationships(
    const std::vector<Member>& members) {
  std::unordered_set<int64_t> ids;
  for (const Member& m : members) ids.insert(m.entity->id);
  std::vector<size_t> found;
  for (const Member& m : members) {
    auto it = rels_from_.find(m.entity->id);
    if (it == rels_from_.end()) continue;
    for (size_t i : it->second) {
      const RelationshipRecord& r = relationships_[i];
      if (ids.count(r.source_id) != 0 && ids.count(r.target_id) != 0) found.push_back(i);
    }
  }
  std::sort(found.begin(), found.end());  // the store's order: heaviest first
  std::vector<const RelationshipRecord*> out;
  for (size_t i : found) out.push_back(&relationships_[i]);
  return out;
}

std::string Reporter::InputHash(const CommunityRecord& community,
                                const std::vector<Member>& members,
                                const std::vector<const RelationshipRecord*>& rels) const {
  Hasher h;
  h.Add(kHashVersion);
  h.Add(fmt::format("{} {} {} {} {} {}", options_.min_findings, options_.max_findings,
                    options_.title_entities, options_.headline_chars, options_.max_sentence_chars,
                    options_.max_report_tokens));
  h.Add(std::to_string(community.weight));
  std::vector<const Member*> by_id;
  for (const Member& m : members) by_id.push_back(&m);
  std::sort(by_id.begin(), by_id.end(),
            [](const Member* a, const Member* b) { return a->entity->id < b->entity->id; });
  for (const Member* m : by_id) {
    const EntityRecord& e = *m->entity;
    h.Add(std::to_string(e.id)).Add(e.name).Add(e.type).Add(e.description);
    h.Add(std::to_string(m->degree)).Add(std::to_string(m->chunks->size()));
    for (const std::string& c : *m->chunks) h.Add(c);
  }
  for (const RelationshipRecord* r : rels) {
    h.Add(fmt::format("{} {} {} {}", r->id, r->source_id, r->target_id, r->weight));
    h.Add(r->description);
  }
  return h.HexDigest();
}

// A cheap 20-bit fingerprint of a word (its length and first and last bytes), for the filter
// in front of phrases_.
constexpr size_t kFirstWordBits = size_t{1} << 20;
size_t FirstWordBit(std::string_view w) {
  uint64_t x = w.size();
  for (size_t k = 0; k < 3 && k < w.size(); ++k) {
    x = x << 8 | static_cast<unsigned char>(w[k]);
    x = x << 8 | static_cast<unsigned char>(w[w.size() - 1 - k]);
  }
  return static_cast<size_t>((x * 0x9E3779B97F4A7C15ull) >> 44);
}

void Reporter::BuildPhrases() {
  phrases_built_ = true;
  first_word_bits_.assign(kFirstWordBits / 64, 0);
  for (size_t i = 0; i < entities_.size(); ++i) {
    const EntityRecord& e = entities_[i];
    std::set<std::string> keys = {NormalizeEntityName(e.name), NormalizeEntityName(e.name_key)};
    for (const std::string& key : keys) {
      // A name of nothing but stop words or a short number ("it", "the", "12") would be found
      // everywhere; so would a single word of two letters.
      if (ContentTerms(key).empty()) continue;
      std::vector<std::string> words = SplitNormalizedName(key);
      if (words.empty() || (words.size() == 1 && words[0].size() < 3)) continue;
      std::string first = words[0];
      const size_t bit = FirstWordBit(first);
      first_word_bits_[bit / 64] |= uint64_t{1} << (bit % 64);
      phrases_[first].push_back({static_cast<uint32_t>(i), std::move(words)});
    }
  }
}

std::vector<uint32_t> Reporter::Mentions(const std::string& sentence) {
  // Every sentence of every chunk a report quotes from comes here: its words as views, not
  // strings, in a reused vector.
  const std::string normalized = NormalizeEntityName(sentence);
  std::vector<std::string_view>& words = words_;
  SplitNormalizedNameViews(normalized, &words);
  std::vector<uint32_t> found;
  for (size_t i = 0; i < words.size(); ++i) {
    const size_t bit = FirstWordBit(words[i]);
    if ((first_word_bits_[bit / 64] >> (bit % 64) & 1) == 0) continue;
    auto it = phrases_.find(words[i]);
    if (it == phrases_.end()) continue;
    for (const Phrase& p : it->second) {
      if (i + p.words.size() > words.size()) continue;
      if (std::equal(p.words.begin() + 1, p.words.end(),
                     words.begin() + static_cast<std::ptrdiff_t>(i) + 1)) {
        found.push_back(p.entity);
      }
    }
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

// The chunk split into sentences with the entities each names; read once per run.
Result<const AnalysedChunk*> Reporter::Chunk(const std::string& id) {
  auto [it, added] = chunks_.try_emplace(id);
  if (!added) return it->second.get();
  if (!phrases_built_) BuildPhrases();
  auto chunk = store_.GetChunk(id);
  if (!chunk.ok()) return chunk.status().WithContext("reading chunk " + id);
  if (!chunk->has_value()) return static_cast<const AnalysedChunk*>(nullptr);  // gone: no text
  auto a = std::make_unique<AnalysedChunk>();
  a->id = id;
  a->document_id = (*chunk)->document_id;
  a->index = (*chunk)->index;
  const std::vector<Sentence> sentences = SplitSentences((*chunk)->text);
  for (size_t k = 0; k < sentences.size(); ++k) {
    std::vector<uint32_t> mentions = Mentions(sentences[k].text);
    if (mentions.empty()) continue;  // never a candidate
    const std::string& text = sentences[k].text;
    const uint64_t hash = std::hash<std::string_view>{}(text);
    const uint64_t fnv = Fnv1a64(text);
    const auto distinct =
        distinct_.try_emplace({hash, fnv}, static_cast<uint32_t>(distinct_.size())).first->second;
    a->sentences.push_back({static_cast<uint32_t>(sentences[k].offset),
                            static_cast<uint32_t>(text.size()), distinct, sentences[k].complete,
                            fnv, std::move(mentions)});
  }
  it->second = std::move(a);
  return it->second.get();
}

// `size` bytes of `text` from `offset` with whitespace runs collapsed to one space, as
// SplitSentences gives a sentence that starts there; nullopt when the text is not that long.
std::optional<std::string> CollapsedAt(std::string_view text, size_t offset, size_t size) {
  const auto is_space = [](char c) {  // SplitSentences's whitespace
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
  };
  std::string out;
  out.reserve(size);
  bool space = false;
  for (size_t i = offset; i < text.size() && out.size() < size; ++i) {
    if (is_space(text[i])) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += text[i];
  }
  if (out.size() != size) return std::nullopt;
  return out;
}

// The text of a candidate's sentence, cut again from its chunk.
Result<std::string> Reporter::SentenceText(const Candidate& c) {
  auto chunk = store_.GetChunk(c.chunk->id);
  if (!chunk.ok()) return chunk.status().WithContext("reading chunk " + c.chunk->id);
  std::optional<std::string> text;
  if (chunk->has_value()) {
    text = CollapsedAt((*chunk)->text, c.sentence->offset, c.sentence->text_size);
  }
  if (!text.has_value() || Fnv1a64(*text) != c.sentence->fnv) {
    return Status::Internal("chunk " + c.chunk->id +
                            " changed while the reports were written (run `grag index` again)");
  }
  return std::move(*text);
}

// Every distinct sentence of the members' chunks that names a member and is not overlong, in
// document order.
Result<std::vector<Candidate>> Reporter::Candidates(const std::vector<Member>& members) {
  // Each community's members and chunks come here, and at the top of the hierarchy that is
  // most of the corpus: entities by index and chunk ids by pointer, not by hashing strings.
  if (rank_.size() != entities_.size()) rank_.assign(entities_.size(), kNotMember);
  std::vector<const std::string*> chunk_ids;
  for (size_t i = 0; i < members.size(); ++i) {
    uint32_t& r = rank_[static_cast<size_t>(members[i].entity - entities_.data())];
    if (r == kNotMember) r = static_cast<uint32_t>(i);  // a repeated member keeps its first rank
    for (const std::string& id : *members[i].chunks) chunk_ids.push_back(&id);
  }
  struct ClearRanks {  // on every return, errors included
    const std::vector<Member>& members;
    const std::vector<EntityRecord>& entities;
    std::vector<uint32_t>& rank;
    ~ClearRanks() {
      for (const Member& m : members) {
        rank[static_cast<size_t>(m.entity - entities.data())] = kNotMember;
      }
    }
  } clear_ranks{members, entities_, rank_};
  std::sort(chunk_ids.begin(), chunk_ids.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  chunk_ids.erase(std::unique(chunk_ids.begin(), chunk_ids.end(),
                              [](const std::string* a, const std::string* b) { return *a == *b; }),
                  chunk_ids.end());
  std::vector<const AnalysedChunk*> chunks;
  for (const std::string* id : chunk_ids) {
    GRAG_ASSIGN_OR_RETURN(const AnalysedChunk* c, Chunk(*id));
    if (c != nullptr) chunks.push_back(c);
  }
  std::sort(chunks.begin(), chunks.end(), [](const AnalysedChunk* a, const AnalysedChunk* b) {
    if (a->document_id != b->document_id) return a->document_id < b->document_id;
    return a->index < b->index;
  });
  if (seen_.size() < distinct_.size()) seen_.resize(distinct_.size(), 0);
  std::vector<Candidate> out;
  for (const AnalysedChunk* c : chunks) {
    for (const AnalysedSentence& s : c->sentences) {
      std::vector<uint32_t>& named = member_scratch_;
      named.clear();
      int64_t degree_sum = 0;
      for (uint32_t e : s.mentions) {
        const uint32_t r = rank_[e];
        if (r == kNotMember) continue;
        named.push_back(r);
        degree_sum += members[r].degree;
      }
      // Past twice the quoted length a "sentence" is mostly a list or a table of contents.
      // Overlapping chunks repeat sentences: the first in document order stands.
      if (named.empty() || s.text_size > 2 * options_.max_sentence_chars || seen_[s.distinct]) {
        continue;
      }
      seen_[s.distinct] = 1;
      std::sort(named.begin(), named.end());
      out.push_back(
          {&s, c, std::vector<size_t>(named.begin(), named.end()), degree_sum, out.size()});
    }
  }
  for (const Candidate& cand : out) seen_[cand.sentence->distinct] = 0;
  return out;
}

// Greedy picks: most members named, those no earlier pick named counting double; then complete
// sentences, better-connected members, earlier text. Once there are min_findings, a sentence
// adding no new member must name at least two to be worth a finding.
std::vector<const Candidate*> Reporter::Pick(const std::vector<Candidate>& candidates) const {
  std::vector<const Candidate*> picked;
  size_t member_count = 0;
  for (const Candidate& c : candidates) {
    if (!c.members.empty()) member_count = std::max(member_count, c.members.back() + 1);
  }
  std::vector<char> covered(member_count, 0);  // by member rank
  std::vector<char> used(candidates.size(), 0);
  const auto min_picks = static_cast<size_t>(options_.min_findings);
  while (picked.size() < static_cast<size_t>(options_.max_findings)) {
    const Candidate* best = nullptr;
    size_t best_index = 0;
    std::tuple<size_t, int, int64_t> best_key{0, 0, 0};
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (used[i]) continue;
      const Candidate& c = candidates[i];
      size_t fresh = 0;
      for (size_t m : c.members) fresh += covered[m] == 0 ? 1 : 0;
      if (fresh == 0 && c.members.size() < 2 && picked.size() >= min_picks) continue;
      const std::tuple<size_t, int, int64_t> key{fresh + c.members.size(),
                                                 c.sentence->complete ? 1 : 0, c.degree_sum};
      if (best == nullptr || key > best_key) {  // strict: the earlier sentence wins a tie
        best = &c;
        best_index = i;
        best_key = key;
      }
    }
    if (best == nullptr) break;
    used[best_index] = 1;
    for (size_t m : best->members) covered[m] = 1;
    picked.push_back(best);
  }
  return picked;
}

Finding Reporter::SentenceFinding(const Candidate& c, const std::string& text,
                                  const std::vector<Member>& members,
                                  const std::vector<const RelationshipRecord*>& rels) const {
  Finding f;
  f.summary = ShortenAtWord(text, options_.headline_chars);
  std::vector<int64_t> entity_ids;
  std::unordered_set<int64_t> named;
  for (size_t m : c.members) {
    f.entities.push_back(members[m].entity->name);
    entity_ids.push_back(members[m].entity->id);
    named.insert(members[m].entity->id);
  }
  std::string explanation;
  if (f.summary != text) {
    explanation =
        "\xE2\x80\x9C" + ShortenAtWord(text, options_.max_sentence_chars) + "\xE2\x80\x9D ";
  }
  explanation += fmt::format("Names {} (chunk {} of {}).", JoinNames(f.entities), c.chunk->index,
                             c.chunk->document_id);
  std::vector<int64_t> rel_ids;
  for (const RelationshipRecord* r : rels) {  // heaviest first
    if (rel_ids.size() == 2) break;
    if (r->description.empty() || named.count(r->source_id) == 0 ||
        named.count(r->target_id) == 0) {
      continue;
    }
    const auto& s = entities_[entity_index_.at(r->source_id)];
    const auto& t = entities_[entity_index_.at(r->target_id)];
    explanation += " " + s.name + " and " + t.name + ": " +
                   Sentenced(ShortenAtWord(r->description, options_.headline_chars));
    rel_ids.push_back(r->id);
  }
  f.explanation = explanation + " " + Citation(entity_ids, rel_ids, c.chunk->id);
  return f;
}

// Findings from the strongest described internal relationships, then from the top members
// (their descriptions, or their place in the graph), until there are min_findings.
void Reporter::AddFallbackFindings(const std::vector<Member>& members,
                                   const std::vector<const RelationshipRecord*>& rels,
                                   std::vector<Finding>* findings) const {
  const auto target = static_cast<size_t>(options_.min_findings);
  for (const RelationshipRecord* r : rels) {
    if (findings->size() >= target) return;
    if (r->description.empty()) continue;
    const auto& s = entities_[entity_index_.at(r->source_id)];
    const auto& t = entities_[entity_index_.at(r->target_id)];
    Finding f;
    f.summary =
        ShortenAtWord(s.name + " and " + t.name + ": " + r->description, options_.headline_chars);
    f.explanation = Sentenced(ShortenAtWord(r->description, options_.max_sentence_chars)) + " " +
                    Citation({s.id, t.id}, {r->id}, "");
    f.entities = {s.name, t.name};
    findings->push_back(std::move(f));
  }
  for (const Member& m : members) {
    if (findings->size() >= target) return;
    const EntityRecord& e = *m.entity;
    const bool cited = std::any_of(findings->begin(), findings->end(), [&](const Finding& f) {
      return f.entities.size() == 1 && f.entities[0] == e.name;
    });
    if (cited) continue;
    Finding f;
    f.entities = {e.name};
    const std::string what = e.type.empty() ? e.name : e.name + " (" + e.type + ")";
    if (!e.description.empty()) {
      f.summary = ShortenAtWord(what + ": " + e.description, options_.headline_chars);
      f.explanation = Sentenced(ShortenAtWord(e.description, options_.max_sentence_chars));
    } else {
      f.summary = what;
      f.explanation =
          fmt::format("{} is linked to {} and was extracted from {}.", e.name,
                      Plural(m.degree, "other entity", "other entities"),
                      Plural(static_cast<int64_t>(m.chunks->size()), "chunk", "chunks"));
    }
    f.explanation += " " + Citation({e.id}, {}, "");
    findings->push_back(std::move(f));
  }
}

// The names a title shows: the top members by degree, named entities before the NLP
// extractor's lower-case noun phrases ("Scrooge, Marley and Fezziwig" rather than "dear heart
// alive, Scrooge and ...").
std::vector<std::string> TitleNames(const std::vector<Member>& members, int count) {
  std::vector<const Member*> order;
  for (const Member& m : members) order.push_back(&m);
  std::stable_partition(order.begin(), order.end(),
                        [](const Member* m) { return m->entity->type != "noun phrase"; });
  std::vector<std::string> names;
  for (size_t i = 0; i < order.size() && i < static_cast<size_t>(count); ++i) {
    names.push_back(order[i]->entity->name);
  }
  return names;
}

std::string Reporter::Summary(const CommunityRecord& community, const std::vector<Member>& members,
                              size_t internal_rels, const std::string* best) const {
  const std::vector<std::string> top = TitleNames(members, options_.title_entities);
  std::map<std::string, int64_t> types;
  for (const Member& m : members) {
    if (!m.entity->type.empty()) ++types[m.entity->type];
  }
  std::vector<std::pair<int64_t, std::string>> by_count;
  for (const auto& [type, n] : types) by_count.emplace_back(-n, type);
  std::sort(by_count.begin(), by_count.end());
  std::string type_text;  // " (all person)", " (4 person, 2 place)"
  if (by_count.size() == 1) type_text = " (all " + by_count[0].second + ")";
  for (size_t i = 0; by_count.size() > 1 && i < by_count.size() && i < 3; ++i) {
    type_text +=
        (i > 0 ? ", " : " (") + std::to_string(-by_count[i].first) + " " + by_count[i].second;
  }
  if (by_count.size() > 1) type_text += ")";
  const auto n = static_cast<int64_t>(members.size());
  std::string out;
  if (n == 1) {
    const std::string& type = members.front().entity->type;
    out = fmt::format("{}{} alone; its source text spans {}.", top.front(),
                      type.empty() ? "" : " (" + type + ")",
                      Plural(community.weight, "chunk", "chunks"));
  } else {
    out = fmt::format("{}{} centred on {}, with {} among them; their source text spans {}.",
                      Plural(n, "entity", "entities"), type_text, JoinNames(top),
                      Plural(static_cast<int64_t>(internal_rels), "relationship", "relationships"),
                      Plural(community.weight, "chunk", "chunks"));
  }
  if (best != nullptr) {
    out += " The passage naming most of them: \xE2\x80\x9C" +
           ShortenAtWord(*best, options_.max_sentence_chars) + "\xE2\x80\x9D";
  }
  return out;
}

Result<ReportRecord> Reporter::Build(const CommunityRecord& community,
                                     const std::vector<Member>& members,
                                     const std::vector<const RelationshipRecord*>& rels,
                                     int64_t* content_tokens) {
  GRAG_ASSIGN_OR_RETURN(std::vector<Candidate> candidates, Candidates(members));
  const std::vector<const Candidate*> picked = Pick(candidates);
  std::vector<std::string> quoted;
  for (const Candidate* c : picked) {
    GRAG_ASSIGN_OR_RETURN(std::string text, SentenceText(*c));
    quoted.push_back(std::move(text));
  }

  ParsedReport parsed;
  parsed.title = JoinNames(TitleNames(members, options_.title_entities));
  parsed.summary = Summary(community, members, rels.size(), quoted.empty() ? nullptr : &quoted[0]);
  for (size_t i = 0; i < picked.size(); ++i) {
    parsed.findings.push_back(SentenceFinding(*picked[i], quoted[i], members, rels));
  }
  AddFallbackFindings(members, rels, &parsed.findings);
  parsed.rating = Rating(community.weight, static_cast<int64_t>(members.size()));
  // The formula is in docs/reports.md and extractive_report.h: repeated in every extractive
  // report it was a twentieth of their bytes.
  parsed.rating_explanation =
      fmt::format("From size and weight: {} whose source text spans {}.",
                  Plural(static_cast<int64_t>(members.size()), "entity", "entities"),
                  Plural(community.weight, "chunk", "chunks"));

  std::string content = RenderReportMarkdown(parsed);
  *content_tokens = static_cast<int64_t>(tokenizer_.Count(content));
  while (*content_tokens > options_.max_report_tokens && parsed.findings.size() > 1) {
    parsed.findings.pop_back();
    content = RenderReportMarkdown(parsed);
    *content_tokens = static_cast<int64_t>(tokenizer_.Count(content));
  }

  ReportRecord r;
  r.community_id = community.id;
  r.status = ReportStatus::kOk;
  r.full_content = std::move(content);
  r.title = std::move(parsed.title);
  r.summary = std::move(parsed.summary);
  r.findings = std::move(parsed.findings);
  r.rating = parsed.rating;
  r.rating_explanation = std::move(parsed.rating_explanation);
  r.generator = ReportGenerator::kExtractive;
  return r;
}

// Community indices, finest level first, by id within a level (the LLM stage's order).
std::vector<size_t> FinestFirst(const std::vector<CommunityRecord>& communities) {
  std::vector<size_t> order(communities.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (communities[a].level != communities[b].level) {
      return communities[a].level > communities[b].level;
    }
    return communities[a].id < communities[b].id;
  });
  return order;
}

Result<ReportStageSummary> Reporter::Run(const ReportProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  ReportStageSummary summary;
  std::vector<size_t> order = FinestFirst(communities_);
  if (options_.include) {
    std::erase_if(order, [&](size_t i) { return !options_.include(communities_[i]); });
  }
  summary.communities = static_cast<int64_t>(order.size());
  ReportProgress prog;
  prog.total = summary.communities;
  for (size_t index : order) {
    if (options_.cancel != nullptr && options_.cancel->load()) {
      Log(LogLevel::kInfo, kComponent, "extractive report stage interrupted");
      return Status::Cancelled("report stage interrupted");
    }
    const CommunityRecord& community = communities_[index];
    GRAG_ASSIGN_OR_RETURN(std::vector<Member> members, Members(community));
    const std::vector<const RelationshipRecord*> rels = InternalRelationships(members);
    CommunityReportOutcome& o = summary.outcomes.emplace_back();
    o.community_id = community.id;
    o.level = community.level;

    ReportRecord record;
    record.input_hash = InputHash(community, members, rels);
    auto stored = stored_.find(community.id);
    if (members.empty()) {
      record.community_id = community.id;
      record.status = ReportStatus::kGap;
      record.reason = "the community has no entities";
      record.generator = ReportGenerator::kExtractive;
      o.action = ReportAction::kGap;
      o.reason = record.reason;
    } else if (stored != stored_.end() && stored->second.status == ReportStatus::kOk &&
               stored->second.generator == ReportGenerator::kExtractive &&
               stored->second.input_hash == record.input_hash) {
      o.action = ReportAction::kReused;
    } else {
      std::string hash = std::move(record.input_hash);
      GRAG_ASSIGN_OR_RETURN(record, Build(community, members, rels, &o.context_tokens));
      record.input_hash = std::move(hash);
      o.action = ReportAction::kGenerated;
    }
    if (o.action != ReportAction::kReused) {
      const Status put = store_.PutReport(record);
      if (!put.ok()) {
        return put.WithContext(fmt::format("storing the report of community {}", community.id));
      }
    }
    switch (o.action) {
      case ReportAction::kGenerated:
        ++summary.generated;
        ++prog.generated;
        break;
      case ReportAction::kReused:
        ++summary.reused;
        ++prog.reused;
        break;
      case ReportAction::kGap:
        ++summary.gaps;
        ++prog.gaps;
        break;
      case ReportAction::kKeptStale:  // extractive reports cost nothing: never kept stale
      case ReportAction::kDeferred:   // nor deferred
        break;
    }
    ++prog.done;
    prog.level = community.level;
    if (progress) progress(prog);
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  Log(LogLevel::kInfo, kComponent,
      fmt::format("{} communities: {} extractive reports written, {} reused, {} gaps; {} chunks "
                  "read, {} ms",
                  summary.communities, summary.generated, summary.reused, summary.gaps,
                  chunks_.size(), ms));
  return summary;
}

}  // namespace

Result<ReportStageSummary> GenerateExtractiveReports(Store& store, const Tokenizer& tokenizer,
                                                     const ExtractiveReportOptions& options,
                                                     const ReportProgressFn& progress) {
  GRAG_RETURN_IF_ERROR(CheckOptions(options));
  Reporter reporter(store, tokenizer, options);
  GRAG_RETURN_IF_ERROR(reporter.Load());
  return reporter.Run(progress);
}

}  // namespace grag
