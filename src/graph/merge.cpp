#include "grag/merge.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

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

void AddDistinct(std::vector<std::string>& list, std::set<std::string>& seen,
                 const std::string& s) {
  if (!s.empty() && seen.insert(s).second) list.push_back(s);
}

}  // namespace

MergedGraph MergeMentions(const std::vector<ChunkEntityMention>& entities,
                          const std::vector<ChunkRelationshipMention>& relationships) {
  struct EntityAcc {
    MergedEntity e;
    std::map<std::string, int64_t> spellings;
    std::set<std::string> seen_desc;
    std::set<std::string> chunks;
  };
  std::map<std::string, EntityAcc> ents;
  for (const auto& cm : entities) {
    const auto& m = cm.mention;
    if (m.name_key.empty()) continue;
    auto& acc = ents[m.name_key];
    acc.e.name_key = m.name_key;
    ++acc.spellings[m.name];
    if (!m.type.empty()) ++acc.e.type_counts[m.type];
    AddDistinct(acc.e.descriptions, acc.seen_desc, m.description);
    acc.chunks.insert(cm.chunk_id);
  }

  struct RelAcc {
    MergedRelationship r;
    std::set<std::string> seen_desc;
    std::set<std::string> chunks;
  };
  std::map<std::pair<std::string, std::string>, RelAcc> rels;
  for (const auto& cm : relationships) {
    const auto& m = cm.mention;
    if (m.source_key.empty() || m.target_key.empty() || m.source_key == m.target_key) continue;
    const bool swap = m.target_key < m.source_key;
    const std::string& a = swap ? m.target_key : m.source_key;
    const std::string& b = swap ? m.source_key : m.target_key;
    auto& acc = rels[{a, b}];
    acc.r.source_key = a;
    acc.r.target_key = b;
    acc.r.weight += m.strength;
    AddDistinct(acc.r.descriptions, acc.seen_desc, m.description);
    acc.chunks.insert(cm.chunk_id);
    // An endpoint no chunk extracted as an entity still becomes one.
    for (const auto* end : {&m.source, &m.target}) {
      const std::string& key = end == &m.source ? m.source_key : m.target_key;
      auto& ea = ents[key];
      if (ea.e.name_key.empty()) {
        ea.e.name_key = key;
        ea.e.inferred = true;
      }
      if (ea.e.inferred) ++ea.spellings[*end];
      ea.chunks.insert(cm.chunk_id);
    }
  }

  MergedGraph g;
  g.entities.reserve(ents.size());
  for (auto& [key, acc] : ents) {
    acc.e.name = MostFrequent(acc.spellings);
    acc.e.type = MostFrequent(acc.e.type_counts);
    acc.e.chunk_ids.assign(acc.chunks.begin(), acc.chunks.end());
    g.entities.push_back(std::move(acc.e));
  }
  g.relationships.reserve(rels.size());
  for (auto& [key, acc] : rels) {
    acc.r.chunk_ids.assign(acc.chunks.begin(), acc.chunks.end());
    g.relationships.push_back(std::move(acc.r));
  }
  return g;
}

size_t CollapseResolved(MergedGraph& graph,
                        const std::unordered_map<std::string, std::string>& canonical_of) {
  auto target = [&](const std::string& key) -> const std::string& {
    auto it = canonical_of.find(key);
    return it == canonical_of.end() ? key : it->second;
  };
  std::map<std::string, size_t> index_of;  // canonical key -> position in `out`
  std::vector<MergedEntity> out;
  std::vector<std::set<std::string>> seen_desc;
  std::vector<std::set<std::string>> chunks;
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

  struct RelAcc {
    MergedRelationship r;
    std::set<std::string> seen_desc;
    std::set<std::string> chunks;
  };
  std::map<std::pair<std::string, std::string>, RelAcc> rels;
  for (auto& r : graph.relationships) {
    std::string a = target(r.source_key);
    std::string b = target(r.target_key);
    if (a == b) continue;  // the two ends are one entity now
    if (b < a) std::swap(a, b);
    auto& acc = rels[{a, b}];
    acc.r.source_key = a;
    acc.r.target_key = b;
    acc.r.weight += r.weight;
    for (const auto& d : r.descriptions) AddDistinct(acc.r.descriptions, acc.seen_desc, d);
    acc.chunks.insert(r.chunk_ids.begin(), r.chunk_ids.end());
  }
  graph.entities = std::move(out);
  graph.relationships.clear();
  graph.relationships.reserve(rels.size());
  for (auto& [key, acc] : rels) {
    acc.r.chunk_ids.assign(acc.chunks.begin(), acc.chunks.end());
    graph.relationships.push_back(std::move(acc.r));
  }
  return folded;
}

std::string DescriptionsHash(const std::string& name,
                             const std::vector<std::string>& descriptions) {
  std::vector<std::string> sorted = descriptions;
  std::sort(sorted.begin(), sorted.end());
  Hasher h;
  h.Add(name);
  for (const auto& d : sorted) h.Add(d);
  return h.HexDigest();
}

std::string JoinDescriptions(const std::vector<std::string>& descriptions) {
  std::string out;
  for (size_t i = 0; i < descriptions.size(); ++i) {
    if (i) out += "\n";
    out += descriptions[i];
  }
  return out;
}

std::string JoinDescriptionsWithin(const std::vector<std::string>& descriptions,
                                   const SummarizeOptions& options) {
  std::string out;
  size_t kept = 0;
  for (const auto& d : descriptions) {
    if (options.max_descriptions > 0 && kept == options.max_descriptions) break;
    std::string next = kept == 0 ? d : out + "\n" + d;
    const size_t tokens = options.count_tokens ? options.count_tokens(next) : EstimateTokens(next);
    if (kept > 0 && tokens > options.max_joined_tokens) break;
    out = std::move(next);
    ++kept;
  }
  return out;
}

bool NeedsSummary(const std::vector<std::string>& descriptions, const SummarizeOptions& options) {
  if (options.max_descriptions > 0 && descriptions.size() > options.max_descriptions) return true;
  if (descriptions.size() < 2) return false;
  const std::string joined = JoinDescriptions(descriptions);
  const size_t tokens =
      options.count_tokens ? options.count_tokens(joined) : EstimateTokens(joined);
  return tokens > options.max_joined_tokens;
}

namespace {

// 16 hex digits of SHA-256: enough to tell a description from the others of one entity.
std::string ShortHash(const std::string& description) {
  return Sha256Hex(description).substr(0, 16);
}

size_t CountTokens(const std::string& text, const SummarizeOptions& options) {
  return options.count_tokens ? options.count_tokens(text) : EstimateTokens(text);
}

}  // namespace

std::string SummaryBasis(const std::vector<std::string>& descriptions,
                         const SummarizeOptions& options) {
  nlohmann::json summarized = nlohmann::json::array();
  for (const auto& d : descriptions) summarized.push_back(ShortHash(d));
  return nlohmann::json{{"summarized", summarized},
                        {"summarized_tokens", CountTokens(JoinDescriptions(descriptions), options)},
                        {"appended", nlohmann::json::array()}}
      .dump();
}

std::optional<AppendedDescription> AppendToSummary(const std::string& description,
                                                   const std::string& basis,
                                                   const std::vector<std::string>& descriptions,
                                                   double refresh_share,
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
  std::vector<std::string> extra;  // not in the summary: appended before, or new
  std::vector<std::string> fresh;  // new this time
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
                                          const std::vector<std::string>& descriptions,
                                          const SummarizeOptions& options) {
  std::vector<std::string> sorted = descriptions;  // order-independent prompt: cache-friendly
  std::sort(sorted.begin(), sorted.end());
  std::string list;
  for (const auto& d : sorted) list += "- " + d + "\n";
  std::string prompt(kSummarizePrompt);
  prompt.replace(prompt.find("{name}"), 6, name);
  prompt.replace(prompt.find("{descriptions}"), 14, list);
  ChatRequest req;
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
