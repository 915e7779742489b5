// Building one community's prompt within the token budget (see grag/report.h for the rules).
#include "report_input.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>
#include <unordered_set>

#include "grag/words.h"
#include "grag/hash.h"
#include "grag/parallel.h"
#include "grag/prompts.h"

namespace grag::report_internal {
namespace {

// The leading newline puts the table on its own line after "<entities>".
constexpr std::string_view kEntityHeader = "\nid,entity,type,description,degree\n";
constexpr std::string_view kRelationshipHeader = "\nid,source,target,description,weight\n";
constexpr std::string_view kReportsIntro =
    "\nReports on parts of this community. The entities of each part, and the relationships "
    "inside it, are summarised by its report instead of listed below.\n";
constexpr std::string_view kEntitiesLabel = "-----Entities-----";
// Bumped when the prompt layout changes in a way the prompt text alone would not show.
constexpr std::string_view kHashVersion = "grag/report/v1";

// A CSV field: one line (control whitespace becomes a space), quoted when it holds a comma or
// a quote, so every row stays one line the model can read and cite.
std::string Csv(std::string_view s) {
  std::string flat;
  flat.reserve(s.size());
  for (char c : s) flat += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  const auto b = flat.find_first_not_of(' ');
  if (b == std::string::npos) return {};
  flat = flat.substr(b, flat.find_last_not_of(' ') - b + 1);
  if (flat.find_first_of(",\"") == std::string::npos) return flat;
  std::string out = "\"";
  for (char c : flat) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Integers without a fraction; others with at most two decimals. Always ends with a digit,
// which keeps a row's token count additive (see Row).
std::string FormatWeight(double w) {
  if (!std::isfinite(w)) return "0";
  if (w == std::floor(w) && std::fabs(w) < 1e15) return std::to_string(static_cast<int64_t>(w));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", w);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

int64_t Count(const Tokenizer& tokenizer, std::string_view text) {
  return static_cast<int64_t>(tokenizer.Count(text));
}

// The rows and reports chosen for one prompt.
struct Selection {
  std::vector<size_t> entities;       // indices into the ranked member list, ascending
  std::vector<size_t> relationships;  // indices into the ranked internal list, ascending
  std::vector<size_t> children;       // indices into the ranked child list, in order
  bool truncated = false;
};

}  // namespace

Result<ReportGraph> LoadGraph(Store& store, const Tokenizer& tokenizer, int workers) {
  ReportGraph g;
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityRecord> entities, store.ListEntities());
  GRAG_ASSIGN_OR_RETURN(std::vector<RelationshipRecord> relationships, store.ListRelationships());
  GRAG_ASSIGN_OR_RETURN(g.communities, store.ListCommunities());

  g.entities.reserve(entities.size());
  for (const EntityRecord& e : entities) {
    g.entity_index.emplace(e.id, g.entities.size());
    GraphEntity& ge = g.entities.emplace_back();
    ge.id = e.id;
    ge.name = e.name;
    ge.brief = ShortenAtWord(e.description, 200);
  }
  // Degrees from the relationships themselves, so ranking does not depend on whether the
  // caller ran RecomputeGraphStats.
  std::vector<const RelationshipRecord*> known;
  for (const RelationshipRecord& r : relationships) {
    auto s = g.entity_index.find(r.source_id);
    auto t = g.entity_index.find(r.target_id);
    if (s == g.entity_index.end() || t == g.entity_index.end()) continue;
    ++g.entities[s->second].degree;
    ++g.entities[t->second].degree;
    known.push_back(&r);
  }
  for (size_t i = 0; i < entities.size(); ++i) {
    const EntityRecord& e = entities[i];
    g.entities[i].row.body = "," + Csv(e.name) + "," + Csv(e.type) + "," + Csv(e.description) +
                             "," + std::to_string(g.entities[i].degree) + "\n";
  }
  g.relationships.reserve(known.size());
  for (const RelationshipRecord* r : known) {
    const GraphEntity& s = g.entities[g.entity_index.at(r->source_id)];
    const GraphEntity& t = g.entities[g.entity_index.at(r->target_id)];
    GraphRelationship rel{r->id, r->source_id, r->target_id, r->weight, s.degree + t.degree, {}};
    rel.row.body = "," + Csv(s.name) + "," + Csv(t.name) + "," + Csv(r->description) + "," +
                   FormatWeight(r->weight) + "\n";
    g.relationships_from[std::min(r->source_id, r->target_id)].push_back(g.relationships.size());
    g.relationships.push_back(std::move(rel));
  }

  // Each row is counted once per run, however many levels list it.
  const size_t n_entities = g.entities.size();
  const size_t cores = std::max<size_t>(1, std::thread::hardware_concurrency());
  ParallelFor(n_entities + g.relationships.size(),
              std::min(cores, static_cast<size_t>(std::max(workers, 1))), [&](size_t i) {
                Row& row = i < n_entities ? g.entities[i].row : g.relationships[i - n_entities].row;
                row.body_tokens = Count(tokenizer, row.body);
              });

  for (size_t i = 0; i < g.communities.size(); ++i) {
    const CommunityRecord& c = g.communities[i];
    g.community_index.emplace(c.id, i);
    if (c.parent_id) g.children[*c.parent_id].push_back(c.id);
  }
  return g;
}

namespace {

// One community's report input, built in steps: its rows ranked, the child reports that may
// stand in for rows, the selection within the budget, then the prompt and its hash.
class InputBuilder {
 public:
  InputBuilder(const ReportGraph& graph, const CommunityRecord& community,
               const ChildReports& reports, const Tokenizer& tokenizer,
               const ReportOptions& options)
      : graph_(graph),
        community_(community),
        reports_(reports),
        tokenizer_(tokenizer),
        options_(options),
        budget_(options.max_context_tokens) {}

  ReportInput Build(std::string_view model_name) {
    in_.community_id = community_.id;
    in_.level = community_.level;
    RankRows();
    CountRows();
    if (full_ > budget_) RankChildren();
    Choose();
    Write();
    Hash(model_name);
    return std::move(in_);
  }

 private:
  // A child community whose report may stand in for its rows.
  struct Child {
    int64_t id = 0;
    const ChildReport* report = nullptr;
    std::string block;  // as written into the prompt
    int64_t block_tokens = 0;
    int64_t raw_tokens = 0;  // of the rows it stands in for
  };

  int64_t CostE(size_t i) const { return id_tokens_e_ + members_[i]->row.body_tokens; }
  int64_t CostR(size_t i) const { return id_tokens_r_ + internal_[i]->row.body_tokens; }

  // Whether a child report in the selection stands in for this entity / relationship.
  bool Covered(int64_t entity_id) const {
    auto it = child_of_.find(entity_id);
    return it != child_of_.end() && it->second < covered_children_;
  }
  bool CoveredRelationship(const GraphRelationship& r) const {
    auto s = child_of_.find(r.source_id);
    auto t = child_of_.find(r.target_id);
    return s != child_of_.end() && t != child_of_.end() && s->second == t->second &&
           s->second < covered_children_;
  }

  // The community's own rows, ranked: members by degree, internal relationships by combined
  // degree and weight.
  void RankRows() {
    for (int64_t id : community_.entity_ids) {
      auto it = graph_.entity_index.find(id);
      if (it != graph_.entity_index.end() && member_set_.insert(id).second) {
        members_.push_back(&graph_.entities[it->second]);
      }
    }
    std::sort(members_.begin(), members_.end(), [](const GraphEntity* a, const GraphEntity* b) {
      if (a->degree != b->degree) return a->degree > b->degree;
      if (a->name != b->name) return a->name < b->name;
      return a->id < b->id;
    });
    for (const GraphEntity* m : members_) {
      auto it = graph_.relationships_from.find(m->id);
      if (it == graph_.relationships_from.end()) continue;
      for (size_t r : it->second) {
        const GraphRelationship& rel = graph_.relationships[r];
        if (member_set_.count(rel.source_id) != 0 && member_set_.count(rel.target_id) != 0) {
          internal_.push_back(&rel);
        }
      }
    }
    std::sort(internal_.begin(), internal_.end(),
              [](const GraphRelationship* a, const GraphRelationship* b) {
                if (a->combined_degree != b->combined_degree) {
                  return a->combined_degree > b->combined_degree;
                }
                if (a->weight != b->weight) return a->weight > b->weight;
                return a->id < b->id;
              });
    in_.entities_total = static_cast<int64_t>(members_.size());
    in_.relationships_total = static_cast<int64_t>(internal_.size());
  }

  // Every row's tokens, and the whole community's (full_).
  void CountRows() {
    // Local ids run from 1; every row is charged the tokens of the largest id, an upper bound.
    id_tokens_e_ = Count(tokenizer_, std::to_string(std::max<size_t>(members_.size(), 1)));
    id_tokens_r_ = Count(tokenizer_, std::to_string(std::max<size_t>(internal_.size(), 1)));
    headers_ = Count(tokenizer_, kEntityHeader) + Count(tokenizer_, kRelationshipHeader);
    full_ = headers_;
    for (size_t i = 0; i < members_.size(); ++i) full_ += CostE(i);
    for (size_t i = 0; i < internal_.size(); ++i) full_ += CostR(i);
  }

  // Children with reports, most tokens of rows first.
  void RankChildren() {
    const auto children_it = graph_.children.find(community_.id);
    if (children_it != graph_.children.end()) {
      for (int64_t child_id : children_it->second) {
        auto rep = reports_.find(child_id);
        auto rec = graph_.community_index.find(child_id);
        if (rep == reports_.end() || rep->second.full_content.empty() ||
            rec == graph_.community_index.end()) {
          continue;
        }
        kids_.push_back(Child{child_id, &rep->second, {}, 0, 0});
        for (int64_t e : graph_.communities[rec->second].entity_ids) {
          if (member_set_.count(e) != 0) child_of_.emplace(e, kids_.size() - 1);
        }
      }
      for (size_t i = 0; i < members_.size(); ++i) {
        auto it = child_of_.find(members_[i]->id);
        if (it != child_of_.end()) kids_[it->second].raw_tokens += CostE(i);
      }
      for (size_t i = 0; i < internal_.size(); ++i) {
        auto s = child_of_.find(internal_[i]->source_id);
        auto t = child_of_.find(internal_[i]->target_id);
        if (s != child_of_.end() && t != child_of_.end() && s->second == t->second) {
          kids_[s->second].raw_tokens += CostR(i);
        }
      }
      // Stable order before the ranking so that the member -> child map can be rebuilt after it.
      std::vector<size_t> order(kids_.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (kids_[a].raw_tokens != kids_[b].raw_tokens)
          return kids_[a].raw_tokens > kids_[b].raw_tokens;
        return kids_[a].id < kids_[b].id;
      });
      std::vector<Child> ranked;
      std::vector<size_t> new_index(kids_.size());
      for (size_t i = 0; i < order.size(); ++i) {
        new_index[order[i]] = i;
        ranked.push_back(std::move(kids_[order[i]]));
      }
      kids_ = std::move(ranked);
      for (auto& [entity, index] : child_of_) index = new_index[index];
      for (size_t k = 0; k < kids_.size(); ++k) {
        kids_[k].block = "-----Report R" + std::to_string(k + 1) + "-----\n" +
                         kids_[k].report->full_content + "\n\n";
        kids_[k].block_tokens = Count(tokenizer_, kids_[k].block);
      }
    }
  }

  // What goes in: every row when it fits; else child reports in place of their rows, the
  // largest first, until it fits; else as many reports, then rows by rank, as fit.
  void Choose() {
    const int64_t reports_overhead =
        Count(tokenizer_, kReportsIntro) + Count(tokenizer_, kEntitiesLabel);
    bool fits = full_ <= budget_;
    if (!fits && !kids_.empty()) {
      int64_t total = full_ + reports_overhead;
      for (size_t k = 0; k < kids_.size() && !fits; ++k) {
        total += kids_[k].block_tokens - kids_[k].raw_tokens;
        if (total <= budget_) {
          fits = true;
          covered_children_ = k + 1;
        }
      }
    }
    if (fits) {
      for (size_t i = 0; i < members_.size(); ++i) {
        if (!Covered(members_[i]->id)) sel_.entities.push_back(i);
      }
      for (size_t i = 0; i < internal_.size(); ++i) {
        if (!CoveredRelationship(*internal_[i])) sel_.relationships.push_back(i);
      }
    } else {
      // Too long even with every child's report: the largest children's reports as far as they
      // fit, then the rows that are left, by rank.
      sel_.truncated = true;
      int64_t used = headers_;
      if (!kids_.empty() && used + reports_overhead + kids_[0].block_tokens <= budget_) {
        used += reports_overhead;
        while (covered_children_ < kids_.size() &&
               used + kids_[covered_children_].block_tokens <= budget_) {
          used += kids_[covered_children_].block_tokens;
          ++covered_children_;
        }
      }
      std::vector<bool> listed(members_.size(), false);
      std::unordered_map<int64_t, size_t> rank_of;  // entity id -> index into members_
      for (size_t i = 0; i < members_.size(); ++i) rank_of.emplace(members_[i]->id, i);
      // Relationships by rank, each with the endpoints not listed yet (Microsoft's order), so
      // every listed relationship's entities are there to read.
      for (size_t i = 0; i < internal_.size(); ++i) {
        if (CoveredRelationship(*internal_[i])) continue;
        int64_t need = CostR(i);
        std::vector<size_t> ends;
        for (int64_t end : {internal_[i]->source_id, internal_[i]->target_id}) {
          const size_t e = rank_of.at(end);
          if (!listed[e] && !Covered(end)) {
            need += CostE(e);
            ends.push_back(e);
          }
        }
        if (used + need > budget_) break;
        used += need;
        sel_.relationships.push_back(i);
        for (size_t e : ends) listed[e] = true;
      }
      for (size_t i = 0; i < members_.size(); ++i) {
        if (listed[i] || Covered(members_[i]->id)) continue;
        if (used + CostE(i) > budget_) break;
        used += CostE(i);
        listed[i] = true;
      }
      for (size_t i = 0; i < members_.size(); ++i) {
        if (listed[i]) sel_.entities.push_back(i);
      }
    }
    for (size_t k = 0; k < covered_children_; ++k) sel_.children.push_back(k);
  }

  // The values; the exact count confirms the row arithmetic (and trims if a future tokenizer
  // ever broke it).
  void Write() {
    auto render = [&] {
      std::string e;
      if (!sel_.children.empty()) {
        e += kReportsIntro;
        for (size_t k : sel_.children) e += kids_[k].block;
        e += kEntitiesLabel;
      }
      e += kEntityHeader;
      in_.entity_names.clear();
      for (size_t i : sel_.entities) {
        in_.entity_names.push_back(members_[i]->name);
        e += std::to_string(in_.entity_names.size()) + members_[i]->row.body;
      }
      std::string r(kRelationshipHeader);
      int64_t n = 0;
      for (size_t i : sel_.relationships) r += std::to_string(++n) + internal_[i]->row.body;
      in_.entities = std::move(e);
      in_.relationships = std::move(r);
      in_.context_tokens = Count(tokenizer_, in_.entities) + Count(tokenizer_, in_.relationships);
    };
    render();
    while (in_.context_tokens > budget_ &&
           (!sel_.relationships.empty() || !sel_.entities.empty())) {
      if (!sel_.relationships.empty()) {
        sel_.relationships.pop_back();
      } else {
        sel_.entities.pop_back();
      }
      sel_.truncated = true;
      render();
    }
    in_.entities_listed = static_cast<int64_t>(sel_.entities.size());
    in_.relationships_listed = static_cast<int64_t>(sel_.relationships.size());
    in_.truncated = sel_.truncated;
    for (size_t k : sel_.children) in_.child_reports_used.push_back(kids_[k].id);

    in_.prompt = FillPrompt(options_.prompt,
                            {{"entities", in_.entities}, {"relationships", in_.relationships}});
    if (!options_.json_instruction.empty()) {
      if (!in_.prompt.empty() && in_.prompt.back() != '\n') in_.prompt += '\n';
      in_.prompt += "\n" + options_.json_instruction;
    }
  }

  void Hash(std::string_view model_name) {
    Hasher h;
    h.Add(kHashVersion).Add(model_name).Add(in_.prompt);
    for (size_t k : sel_.children)
      h.Add(std::to_string(kids_[k].id)).Add(kids_[k].report->input_hash);
    in_.input_hash = h.HexDigest();
  }

  const ReportGraph& graph_;
  const CommunityRecord& community_;
  const ChildReports& reports_;
  const Tokenizer& tokenizer_;
  const ReportOptions& options_;
  const int64_t budget_;
  ReportInput in_;
  std::vector<const GraphEntity*> members_;
  std::unordered_set<int64_t> member_set_;
  std::vector<const GraphRelationship*> internal_;
  int64_t id_tokens_e_ = 0, id_tokens_r_ = 0;  // local ids run from 1: the largest's tokens
  int64_t headers_ = 0;                        // tokens of the two table headers
  int64_t full_ = 0;                           // tokens of every row with the headers
  std::vector<Child> kids_;
  std::unordered_map<int64_t, size_t> child_of_;  // member entity id -> index into kids_
  Selection sel_;
  size_t covered_children_ = 0;  // kids_[0, covered_children_) stand in for their rows
};

}  // namespace

ReportInput BuildReportInput(const ReportGraph& graph, const CommunityRecord& community,
                             const ChildReports& reports, const Tokenizer& tokenizer,
                             const ReportOptions& options, std::string_view model_name) {
  return InputBuilder(graph, community, reports, tokenizer, options).Build(model_name);
}

}  // namespace grag::report_internal
