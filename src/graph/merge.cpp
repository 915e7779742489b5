#include "grag/merge.h"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "grag/hash.h"

namespace grag {
namespace {

constexpr std::string_view kSummarizePrompt =
    "You are writing one description of the entity or relationship below for a knowledge "
    "graph, from the descriptions gathered from several passages of the corpus.\n"
    "Combine them into a single, coherent description in the third person that keeps every "
    "distinct fact; where they contradict each other, keep both and say so. Include the name "
    "so the description stands on its own. Reply with the description only.\n\n"
    "Name: {name}\nDescriptions:\n{descriptions}";

template <typename T>
std::string MostFrequent(const std::map<std::string, T>& counts) {
  std::string best;
  T best_count{};
  for (const auto& [k, c] : counts) {  // map order: ties go to the smallest key
    if (c > best_count) {
      best = k;
      best_count = c;
    }
  }
  return best;
}

// Descriptions are kept distinct through `seen` (the graph's texts: equal texts are one text,
// so their addresses tell them apart).
void AddDistinct(std::vector<std::string_view>& list, std::set<std::string_view>& seen,
                 std::string_view s) {
  if (!s.empty() && seen.insert(s).second) list.push_back(s);
}

// Sorted and distinct (chunks come in runs: a chunk's mentions are together).
void SortUnique(std::vector<std::string_view>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  v.shrink_to_fit();
}

void AddChunk(std::vector<std::string_view>& chunks, std::string_view chunk) {
  if (chunks.empty() || chunks.back().data() != chunk.data()) chunks.push_back(chunk);
}

}  // namespace

std::string_view TextPool::Intern(std::string_view text) {
  if (auto it = index_.find(text); it != index_.end()) return *it;
  const std::string& kept = texts_.emplace_back(text);
  return *index_.insert(std::string_view(kept)).first;
}

struct MentionMerger::State {
  struct EntityAcc {
    MergedEntity e;
    std::map<std::string, int64_t> spellings;           // from the entity's own mentions
    std::map<std::string, int64_t> endpoint_spellings;  // as a relationship endpoint
    bool mentioned = false;                             // has a mention of its own
  };
  std::shared_ptr<TextPool> texts = std::make_shared<TextPool>();
  std::map<std::string, EntityAcc, std::less<>> ents;
  std::map<std::pair<std::string, std::string>, MergedRelationship> rels;

  EntityAcc& Entity(std::string_view key) {
    auto it = ents.find(key);
    if (it == ents.end()) {
      it = ents.emplace(std::string(key), EntityAcc{}).first;
      it->second.e.name_key = std::string(key);
    }
    return it->second;
  }

  // Repeats are dropped at the end (KeepFirst), not here: a set per entity and relationship
  // would cost more than the few repeats (the same sentence in several chunks) it saves.
  static void AddDescription(std::vector<std::string_view>& list, std::string_view text) {
    if (!text.empty() && (list.empty() || list.back().data() != text.data())) list.push_back(text);
  }

  // Each text once, where it came first (equal texts are one text of the pool).
  static void KeepFirst(std::vector<std::string_view>& list) {
    if (list.size() > 1) {
      std::unordered_set<const char*> seen;
      seen.reserve(list.size());
      size_t kept = 0;
      for (const std::string_view d : list) {
        if (seen.insert(d.data()).second) list[kept++] = d;
      }
      list.resize(kept);
    }
    list.shrink_to_fit();
  }
};

MentionMerger::MentionMerger() : state_(std::make_unique<State>()) {}
MentionMerger::~MentionMerger() = default;
MentionMerger::MentionMerger(MentionMerger&&) noexcept = default;
MentionMerger& MentionMerger::operator=(MentionMerger&&) noexcept = default;

void MentionMerger::Add(std::string_view chunk_id, const EntityMention& m) {
  if (m.name_key.empty()) return;
  State& s = *state_;
  auto& acc = s.Entity(m.name_key);
  acc.mentioned = true;
  ++acc.spellings[m.name];
  if (!m.type.empty()) ++acc.e.type_counts[m.type];
  if (!m.description.empty()) {
    State::AddDescription(acc.e.descriptions, s.texts->Intern(m.description));
  }
  AddChunk(acc.e.chunk_ids, s.texts->Intern(chunk_id));
}

void MentionMerger::Add(std::string_view chunk_id, const RelationshipMention& m) {
  if (m.source_key.empty() || m.target_key.empty() || m.source_key == m.target_key) return;
  State& s = *state_;
  const bool swap = m.target_key < m.source_key;
  const std::string& a = swap ? m.target_key : m.source_key;
  const std::string& b = swap ? m.source_key : m.target_key;
  const std::string_view chunk = s.texts->Intern(chunk_id);
  auto it = s.rels.find({a, b});
  if (it == s.rels.end()) {
    it = s.rels.emplace(std::make_pair(a, b), MergedRelationship{}).first;
    it->second.source_key = a;
    it->second.target_key = b;
  }
  MergedRelationship& r = it->second;
  r.weight += m.strength;
  if (!m.description.empty()) {
    State::AddDescription(r.descriptions, s.texts->Intern(m.description));
  }
  AddChunk(r.chunk_ids, chunk);
  // An endpoint no chunk extracted as an entity still becomes one.
  for (const auto* end : {&m.source, &m.target}) {
    auto& ea = s.Entity(end == &m.source ? m.source_key : m.target_key);
    ++ea.endpoint_spellings[*end];
    AddChunk(ea.e.chunk_ids, chunk);
  }
}

MergedGraph MentionMerger::Finish() {
  State s = std::move(*state_);
  state_ = std::make_unique<State>();
  MergedGraph g;
  g.entities.reserve(s.ents.size());
  for (auto& [key, acc] : s.ents) {
    // Spelt as its own mentions spell it; an entity seen only as an endpoint, as they do.
    acc.e.inferred = !acc.mentioned;
    acc.e.name = MostFrequent(acc.mentioned ? acc.spellings : acc.endpoint_spellings);
    acc.e.type = MostFrequent(acc.e.type_counts);
    SortUnique(acc.e.chunk_ids);
    State::KeepFirst(acc.e.descriptions);
    g.entities.push_back(std::move(acc.e));
  }
  s.ents.clear();
  g.relationships.reserve(s.rels.size());
  for (auto& [key, r] : s.rels) {
    SortUnique(r.chunk_ids);
    State::KeepFirst(r.descriptions);
    g.relationships.push_back(std::move(r));
  }
  g.texts = std::move(s.texts);
  return g;
}

MergedGraph MergeMentions(const std::vector<ChunkEntityMention>& entities,
                          const std::vector<ChunkRelationshipMention>& relationships) {
  MentionMerger merger;
  for (const auto& cm : entities) merger.Add(cm.chunk_id, cm.mention);
  for (const auto& cm : relationships) merger.Add(cm.chunk_id, cm.mention);
  return merger.Finish();
}

size_t CollapseResolved(MergedGraph& graph,
                        const std::unordered_map<std::string, std::string>& canonical_of) {
  auto target = [&](const std::string& key) -> const std::string& {
    auto it = canonical_of.find(key);
    return it == canonical_of.end() ? key : it->second;
  };
  std::map<std::string, size_t> index_of;  // canonical key -> position in `out`
  std::vector<MergedEntity> out;
  std::vector<std::set<std::string_view>> seen_desc;
  std::vector<std::set<std::string_view>> chunks;
  // Canonical entities first, so their spelling and descriptions lead.
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& e : graph.entities) {
      const std::string& to = target(e.name_key);
      const bool own = to == e.name_key;
      if ((pass == 0) != own) continue;
      auto [it, inserted] = index_of.emplace(to, out.size());
      if (inserted) {
        MergedEntity m;
        m.name_key = to;
        m.name = own ? e.name : to;
        m.inferred = true;
        out.push_back(std::move(m));
        seen_desc.emplace_back();
        chunks.emplace_back();
      }
      const size_t i = it->second;
      MergedEntity& m = out[i];
      for (const auto& [t, c] : e.type_counts) m.type_counts[t] += c;
      for (const auto& d : e.descriptions) AddDistinct(m.descriptions, seen_desc[i], d);
      chunks[i].insert(e.chunk_ids.begin(), e.chunk_ids.end());
      m.inferred = m.inferred && e.inferred;
    }
  }
  const size_t folded = graph.entities.size() - out.size();
  if (folded == 0) return 0;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].type = MostFrequent(out[i].type_counts);
    out[i].chunk_ids.assign(chunks[i].begin(), chunks[i].end());
  }
  std::sort(out.begin(), out.end(),
            [](const MergedEntity& a, const MergedEntity& b) { return a.name_key < b.name_key; });

  // A relationship keeps its descriptions and chunks unless another one moves onto its ends;
  // only then are the two lists united (in the order of the relationships, each once).
  std::map<std::pair<std::string, std::string>, size_t> rel_index;  // ends -> position in `rels`
  std::vector<MergedRelationship> rels;
  std::unordered_map<size_t, std::set<std::string_view>> rel_seen;  // of the united ones
  for (auto& r : graph.relationships) {
    std::string a = target(r.source_key);
    std::string b = target(r.target_key);
    if (a == b) continue;  // the two ends are one entity now
    if (b < a) std::swap(a, b);
    auto [it, inserted] = rel_index.emplace(std::make_pair(a, b), rels.size());
    if (inserted) {
      r.source_key = std::move(a);
      r.target_key = std::move(b);
      rels.push_back(std::move(r));
      continue;
    }
    MergedRelationship& into = rels[it->second];
    into.weight += r.weight;
    auto [seen, first] = rel_seen.try_emplace(it->second);
    if (first) seen->second.insert(into.descriptions.begin(), into.descriptions.end());
    for (const auto& d : r.descriptions) AddDistinct(into.descriptions, seen->second, d);
    std::vector<std::string_view> united;
    std::set_union(into.chunk_ids.begin(), into.chunk_ids.end(), r.chunk_ids.begin(),
                   r.chunk_ids.end(), std::back_inserter(united));
    into.chunk_ids = std::move(united);
  }
  std::sort(rels.begin(), rels.end(), [](const MergedRelationship& x, const MergedRelationship& y) {
    return std::tie(x.source_key, x.target_key) < std::tie(y.source_key, y.target_key);
  });
  graph.entities = std::move(out);
  graph.relationships = std::move(rels);
  return folded;
}

std::string DescriptionsHash(const std::string& name,
                             const std::vector<std::string_view>& descriptions) {
  std::vector<std::string_view> sorted = descriptions;
  std::sort(sorted.begin(), sorted.end());
  Hasher h;
  h.Add(name);
  for (const auto& d : sorted) h.Add(d);
  return h.HexDigest().substr(0, kInputHashDigits);
}

std::string JoinDescriptions(const std::vector<std::string_view>& descriptions) {
  std::string out;
  for (size_t i = 0; i < descriptions.size(); ++i) {
    if (i) out += "\n";
    out += descriptions[i];
  }
  return out;
}

std::string JoinDescriptionsWithin(const std::vector<std::string_view>& descriptions,
                                   const SummarizeOptions& options) {
  std::string out;
  size_t kept = 0;
  for (const auto& d : descriptions) {
    if (options.max_descriptions > 0 && kept == options.max_descriptions) break;
    std::string next = out;
    if (kept > 0) next += "\n";
    next += d;
    const size_t tokens = options.count_tokens ? options.count_tokens(next) : EstimateTokens(next);
    if (kept > 0 && tokens > options.max_joined_tokens) break;
    out = std::move(next);
    ++kept;
  }
  return out;
}

bool NeedsSummary(const std::vector<std::string_view>& descriptions,
                  const SummarizeOptions& options) {
  if (options.max_descriptions > 0 && descriptions.size() > options.max_descriptions) return true;
  if (descriptions.size() < 2) return false;
  const std::string joined = JoinDescriptions(descriptions);
  const size_t tokens =
      options.count_tokens ? options.count_tokens(joined) : EstimateTokens(joined);
  return tokens > options.max_joined_tokens;
}

namespace {

// 16 hex digits of SHA-256: enough to tell a description from the others of one entity.
std::string ShortHash(std::string_view description) { return Sha256Hex(description).substr(0, 16); }

size_t CountTokens(const std::string& text, const SummarizeOptions& options) {
  return options.count_tokens ? options.count_tokens(text) : EstimateTokens(text);
}

}  // namespace

std::string SummaryBasis(const std::vector<std::string_view>& descriptions,
                         const SummarizeOptions& options) {
  nlohmann::json summarized = nlohmann::json::array();
  for (const auto& d : descriptions) summarized.push_back(ShortHash(d));
  return nlohmann::json{{"summarized", summarized},
                        {"summarized_tokens", CountTokens(JoinDescriptions(descriptions), options)},
                        {"appended", nlohmann::json::array()}}
      .dump();
}

std::optional<AppendedDescription> AppendToSummary(
    const std::string& description, const std::string& basis,
    const std::vector<std::string_view>& descriptions, double refresh_share,
    const SummarizeOptions& options) {
  if (basis.empty() || refresh_share <= 0) return std::nullopt;
  const nlohmann::json b = nlohmann::json::parse(basis, nullptr, /*allow_exceptions=*/false);
  if (!b.is_object() || !b.contains("summarized") || !b["summarized"].is_array() ||
      !b.contains("appended") || !b["appended"].is_array() || !b.contains("summarized_tokens") ||
      !b["summarized_tokens"].is_number()) {
    return std::nullopt;
  }
  std::set<std::string> summarized;
  std::set<std::string> appended;
  for (const auto& h : b["summarized"]) {
    if (h.is_string()) summarized.insert(h.get<std::string>());
  }
  for (const auto& h : b["appended"]) {
    if (h.is_string()) appended.insert(h.get<std::string>());
  }
  std::set<std::string> now;
  std::vector<std::string_view> extra;  // not in the summary: appended before, or new
  std::vector<std::string_view> fresh;  // new this time
  for (const auto& d : descriptions) {
    const std::string h = ShortHash(d);
    now.insert(h);
    if (summarized.count(h)) continue;
    extra.push_back(d);
    if (!appended.count(h)) fresh.push_back(d);
  }
  for (const auto& h : summarized) {
    if (!now.count(h)) return std::nullopt;  // material gone: summarise what is left
  }
  for (const auto& h : appended) {
    if (!now.count(h)) return std::nullopt;
  }
  if (fresh.empty()) return std::nullopt;  // nothing to append: not an update's case
  const double limit = std::min(refresh_share * b["summarized_tokens"].get<double>(),
                                static_cast<double>(options.max_joined_tokens));
  if (static_cast<double>(CountTokens(JoinDescriptions(extra), options)) > limit) {
    return std::nullopt;
  }
  AppendedDescription out;
  out.description = description + "\n" + JoinDescriptions(fresh);
  nlohmann::json nb = b;
  for (const auto& d : fresh) nb["appended"].push_back(ShortHash(d));
  out.basis = nb.dump();
  out.appended = fresh.size();
  return out;
}

Result<std::string> SummarizeDescriptions(ChatModel& model, const std::string& name,
                                          const std::vector<std::string_view>& descriptions,
                                          const SummarizeOptions& options) {
  std::vector<std::string_view> sorted = descriptions;  // order-independent prompt: cache-friendly
  std::sort(sorted.begin(), sorted.end());
  std::string list;
  for (const auto& d : sorted) {
    list += "- ";
    list += d;
    list += "\n";
  }
  std::string prompt(kSummarizePrompt);
  prompt.replace(prompt.find("{name}"), 6, name);
  prompt.replace(prompt.find("{descriptions}"), 14, list);
  ChatRequest req;
  req.role = ChatRole::kSummarize;
  req.messages.push_back({"user", std::move(prompt)});
  req.max_tokens = options.max_summary_tokens;
  req.validator = [](const std::string& content) {
    return content.find_first_not_of(" \t\r\n") == std::string::npos
               ? Status::Parse("empty summary")
               : Status::Ok();
  };
  GRAG_ASSIGN_OR_RETURN(ChatResponse reply, model.Chat(req));
  std::string s = reply.content;
  const auto b = s.find_first_not_of(" \t\r\n");
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace grag
