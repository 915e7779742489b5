// Entity resolution and merging: name variants, type conflicts, weights, inferred entities,
// description summarisation thresholds.
#include "grag/merge.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <unordered_map>

#include "grag/extract.h"

namespace grag {
namespace {

ChunkEntityMention E(std::string chunk, std::string name, std::string type, std::string desc) {
  ChunkEntityMention m;
  m.chunk_id = std::move(chunk);
  m.mention.name_key = NormalizeEntityName(name);
  m.mention.name = std::move(name);
  m.mention.type = std::move(type);
  m.mention.description = std::move(desc);
  return m;
}

ChunkRelationshipMention R(std::string chunk, std::string a, std::string b, double strength,
                           std::string desc = "related") {
  ChunkRelationshipMention m;
  m.chunk_id = std::move(chunk);
  m.mention.source_key = NormalizeEntityName(a);
  m.mention.target_key = NormalizeEntityName(b);
  m.mention.source = std::move(a);
  m.mention.target = std::move(b);
  m.mention.strength = strength;
  m.mention.description = std::move(desc);
  return m;
}

TEST(MergeTest, CaseAndPunctuationVariantsMergeIntoOneEntity) {
  auto g = MergeMentions({E("c1", "Ebenezer Scrooge", "person", "A miser"),
                          E("c2", "EBENEZER SCROOGE", "person", "A miser"),
                          E("c3", "Ebenezer-Scrooge.", "person", "Reformed"),
                          E("c3", "Ebenezer Scrooge", "person", "Reformed")},
                         {});
  ASSERT_EQ(g.entities.size(), 1u);
  const auto& e = g.entities[0];
  EXPECT_EQ(e.name_key, "ebenezer scrooge");
  EXPECT_EQ(e.name, "Ebenezer Scrooge");  // the most frequent spelling
  EXPECT_EQ(e.descriptions, (std::vector<std::string_view>{"A miser", "Reformed"}));
  EXPECT_EQ(e.chunk_ids, (std::vector<std::string_view>{"c1", "c2", "c3"}));
}

TEST(MergeTest, TypeConflictTakesTheMostFrequentAndLosesNothing) {
  auto g =
      MergeMentions({E("c1", "Fezziwig", "person", "d1"), E("c2", "Fezziwig", "organization", "d2"),
                     E("c3", "Fezziwig", "person", "d3")},
                    {});
  ASSERT_EQ(g.entities.size(), 1u);
  EXPECT_EQ(g.entities[0].type, "person");
  EXPECT_EQ(g.entities[0].type_counts.at("person"), 2);
  EXPECT_EQ(g.entities[0].type_counts.at("organization"), 1);
  EXPECT_EQ(g.entities[0].descriptions.size(), 3u);
}

TEST(MergeTest, RelationshipsAreUndirectedWithSummedWeights) {
  auto g = MergeMentions(
      {E("c1", "A", "person", ""), E("c1", "B", "person", "")},
      {R("c1", "A", "B", 3, "x"), R("c2", "b", "a", 4, "y"), R("c3", "A", "B", 2, "x")});
  ASSERT_EQ(g.relationships.size(), 1u);
  EXPECT_DOUBLE_EQ(g.relationships[0].weight, 9);
  EXPECT_EQ(g.relationships[0].source_key, "a");
  EXPECT_EQ(g.relationships[0].descriptions, (std::vector<std::string_view>{"x", "y"}));
  EXPECT_EQ(g.relationships[0].chunk_ids, (std::vector<std::string_view>{"c1", "c2", "c3"}));
}

TEST(MergeTest, ARelationshipToAnUnextractedEntityCreatesIt) {
  auto g = MergeMentions({E("c1", "Scrooge", "person", "miser")},
                         {R("c1", "Scrooge", "Marley's Ghost", 5)});
  ASSERT_EQ(g.entities.size(), 2u);
  ASSERT_EQ(g.relationships.size(), 1u);
  const auto& ghost = g.entities[0].name_key == "marley s ghost" ? g.entities[0] : g.entities[1];
  EXPECT_TRUE(ghost.inferred);
  EXPECT_EQ(ghost.name, "Marley's Ghost");
  EXPECT_TRUE(ghost.type.empty());
  EXPECT_EQ(ghost.chunk_ids, (std::vector<std::string_view>{"c1"}));
}

TEST(MergeTest, ResultDoesNotDependOnMentionOrderExceptDescriptionOrder) {
  std::vector<ChunkEntityMention> es = {E("c1", "A", "person", "1"), E("c2", "B", "geo", "2"),
                                        E("c3", "a", "geo", "3")};
  std::vector<ChunkRelationshipMention> rs = {R("c1", "A", "B", 1), R("c2", "B", "C", 2)};
  auto g1 = MergeMentions(es, rs);
  std::reverse(es.begin(), es.end());
  std::reverse(rs.begin(), rs.end());
  auto g2 = MergeMentions(es, rs);
  ASSERT_EQ(g1.entities.size(), g2.entities.size());
  for (size_t i = 0; i < g1.entities.size(); ++i) {
    EXPECT_EQ(g1.entities[i].name_key, g2.entities[i].name_key);
    EXPECT_EQ(g1.entities[i].type, g2.entities[i].type);
    EXPECT_EQ(g1.entities[i].chunk_ids, g2.entities[i].chunk_ids);
  }
  EXPECT_EQ(g1.relationships.size(), g2.relationships.size());
}

TEST(SummarizeTest, SummarisedAboveTheThresholdAndNotBelow) {
  SummarizeOptions o;
  o.max_descriptions = 4;
  EXPECT_FALSE(NeedsSummary({"a"}, o));
  EXPECT_FALSE(NeedsSummary({"a", "b", "c", "d"}, o));
  EXPECT_TRUE(NeedsSummary({"a", "b", "c", "d", "e"}, o));
  o.max_joined_tokens = 5;
  EXPECT_TRUE(NeedsSummary({"a long description of many words", "another long one here"}, o));

  ScriptedChatModel model([](const ChatRequest& req) -> Result<std::string> {
    EXPECT_NE(req.messages[0].content.find("Name: Scrooge"), std::string::npos);
    EXPECT_NE(req.messages[0].content.find("- e"), std::string::npos);
    return std::string("  Scrooge is a miser who reforms.\n");
  });
  auto s = SummarizeDescriptions(model, "Scrooge", {"a", "b", "c", "d", "e"}, SummarizeOptions{});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, "Scrooge is a miser who reforms.");
  EXPECT_EQ(model.RequestCount(), 1u);
}

// Tokens counted as words, so the limits below are easy to follow.
SummarizeOptions WordCounting() {
  SummarizeOptions o;
  o.max_joined_tokens = 100;
  o.count_tokens = [](std::string_view t) {
    return static_cast<size_t>(
        std::count_if(t.begin(), t.end(), [](char c) { return c == ' ' || c == '\n'; }) + 1);
  };
  return o;
}

TEST(SummarizeTest, NewDescriptionsAreAppendedToASummaryWithinTheShare) {
  const SummarizeOptions o = WordCounting();
  const std::vector<std::string_view> first = {"one two three four five",
                                               "six seven eight nine ten"};
  const std::string basis = SummaryBasis(first, o);  // 10 words summarised
  std::vector<std::string_view> now = first;
  now.push_back("eleven twelve");
  auto appended = AppendToSummary("The summary.", basis, now, 0.5, o);
  ASSERT_TRUE(appended.has_value());
  EXPECT_EQ(appended->description, "The summary.\neleven twelve");
  EXPECT_EQ(appended->appended, 1u);

  // Next time only what is new is appended, and the allowance counts everything not summarised.
  now.push_back("thirteen fourteen");
  auto again = AppendToSummary(appended->description, appended->basis, now, 0.5, o);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->description, "The summary.\neleven twelve\nthirteen fourteen");
  now.push_back("fifteen sixteen");  // 6 words beyond the summary's 10: over half
  EXPECT_FALSE(AppendToSummary(again->description, again->basis, now, 0.5, o).has_value());
}

TEST(SummarizeTest, AppendingStopsWhenMaterialIsGoneOrLimitsSaySo) {
  SummarizeOptions o = WordCounting();
  const std::vector<std::string_view> first = {"one two three four five",
                                               "six seven eight nine ten"};
  const std::string basis = SummaryBasis(first, o);
  // A summarised description is gone: summarise again rather than keep it.
  EXPECT_FALSE(AppendToSummary("S", basis, {first[0], "new"}, 0.5, o).has_value());
  // An appended one is gone too.
  auto appended = AppendToSummary("S", basis, {first[0], first[1], "new"}, 0.5, o);
  ASSERT_TRUE(appended.has_value());
  EXPECT_FALSE(AppendToSummary("S\nnew", appended->basis, first, 0.5, o).has_value());
  // Share 0: always summarise; no basis or a bad one: summarise.
  EXPECT_FALSE(AppendToSummary("S", basis, {first[0], first[1], "new"}, 0, o).has_value());
  EXPECT_FALSE(AppendToSummary("S", "", {first[0], first[1], "new"}, 0.5, o).has_value());
  EXPECT_FALSE(AppendToSummary("S", "{bad", {first[0], first[1], "new"}, 0.5, o).has_value());
  // The appended text never grows past max_joined_tokens.
  o.max_joined_tokens = 1;
  EXPECT_FALSE(AppendToSummary("S", basis, {first[0], first[1], "new words"}, 0.5, o).has_value());
}

TEST(SummarizeTest, HashIgnoresOrderButNotContent) {
  EXPECT_EQ(DescriptionsHash("x", {"a", "b"}), DescriptionsHash("x", {"b", "a"}));
  EXPECT_NE(DescriptionsHash("x", {"a", "b"}), DescriptionsHash("x", {"a", "c"}));
  EXPECT_NE(DescriptionsHash("x", {"a"}), DescriptionsHash("y", {"a"}));
}

// ---- CollapseResolved: resolution's clusters folded into one entity each

TEST(MergeTest, CollapseFoldsAliasesIntoTheCanonicalEntity) {
  auto g = MergeMentions(
      {E("c1", "Jacob Marley", "person", "Scrooge's late partner"),
       E("c2", "Marley", "person", "Dead as a door-nail"),
       E("c3", "Marley", "person", "Scrooge's late partner"),
       E("c3", "Scrooge", "person", "A miser"), E("c4", "Fred", "person", "The nephew")},
      {R("c2", "Marley", "Scrooge", 2, "partners"),
       R("c1", "Jacob Marley", "Scrooge", 3, "partners in the firm"),
       R("c3", "Marley", "Jacob Marley", 1, "the same man"),
       R("c4", "Fred", "Scrooge", 1, "uncle and nephew")});
  ASSERT_EQ(g.entities.size(), 4u);
  const size_t folded = CollapseResolved(g, {{"marley", "jacob marley"}});
  EXPECT_EQ(folded, 1u);
  ASSERT_EQ(g.entities.size(), 3u);
  const auto& jm = *std::find_if(g.entities.begin(), g.entities.end(), [](const MergedEntity& e) {
    return e.name_key == "jacob marley";
  });
  EXPECT_EQ(jm.name, "Jacob Marley");  // the canonical's spelling
  EXPECT_EQ(jm.type_counts.at("person"), 3);
  // The canonical's descriptions lead, then the alias's, each once.
  EXPECT_EQ(jm.descriptions,
            (std::vector<std::string_view>{"Scrooge's late partner", "Dead as a door-nail"}));
  EXPECT_EQ(jm.chunk_ids, (std::vector<std::string_view>{"c1", "c2", "c3"}));
  // The self-loop the merge made is gone; the two Marley-Scrooge edges are one, weights summed.
  ASSERT_EQ(g.relationships.size(), 2u);
  const auto& r = g.relationships[0];
  EXPECT_EQ(r.source_key, "fred");
  const auto& partners = g.relationships[1];
  EXPECT_EQ(partners.source_key, "jacob marley");
  EXPECT_EQ(partners.target_key, "scrooge");
  EXPECT_DOUBLE_EQ(partners.weight, 5);
  EXPECT_EQ(partners.descriptions.size(), 2u);
  EXPECT_EQ(partners.chunk_ids, (std::vector<std::string_view>{"c1", "c2"}));
  // Sorted by key, as MergeMentions leaves them.
  EXPECT_TRUE(std::is_sorted(
      g.entities.begin(), g.entities.end(),
      [](const MergedEntity& a, const MergedEntity& b) { return a.name_key < b.name_key; }));
}

TEST(MergeTest, CollapseWithNothingToFoldChangesNothing) {
  auto g = MergeMentions({E("c1", "A", "person", "a"), E("c1", "B", "person", "b")},
                         {R("c1", "A", "B", 1)});
  const auto before = g.entities.size();
  EXPECT_EQ(CollapseResolved(g, {}), 0u);
  EXPECT_EQ(CollapseResolved(g, {{"a", "a"}}), 0u);
  EXPECT_EQ(g.entities.size(), before);
  EXPECT_EQ(g.relationships.size(), 1u);
}

// ---- equivalence with the merge as it was before it streamed (every text a std::string of its
// own): same graph, same descriptions in the same order, same hashes, with and without resolution.

struct RefEntity {
  std::string name_key, name, type;
  std::map<std::string, int64_t> type_counts;
  std::vector<std::string> descriptions, chunk_ids;
  bool inferred = false;
};
struct RefRelationship {
  std::string source_key, target_key;
  double weight = 0;
  std::vector<std::string> descriptions, chunk_ids;
};
struct RefGraph {
  std::vector<RefEntity> entities;
  std::vector<RefRelationship> relationships;
};

std::string RefMostFrequent(const std::map<std::string, int64_t>& counts) {
  std::string best;
  int64_t best_count = 0;
  for (const auto& [k, c] : counts) {
    if (c > best_count) {
      best = k;
      best_count = c;
    }
  }
  return best;
}

void RefAddDistinct(std::vector<std::string>& list, std::set<std::string>& seen,
                    const std::string& s) {
  if (!s.empty() && seen.insert(s).second) list.push_back(s);
}

RefGraph RefMerge(const std::vector<ChunkEntityMention>& entities,
                  const std::vector<ChunkRelationshipMention>& relationships) {
  struct EntityAcc {
    RefEntity e;
    std::map<std::string, int64_t> spellings;
    std::set<std::string> seen_desc, chunks;
  };
  std::map<std::string, EntityAcc> ents;
  for (const auto& cm : entities) {
    const auto& m = cm.mention;
    if (m.name_key.empty()) continue;
    auto& acc = ents[m.name_key];
    acc.e.name_key = m.name_key;
    ++acc.spellings[m.name];
    if (!m.type.empty()) ++acc.e.type_counts[m.type];
    RefAddDistinct(acc.e.descriptions, acc.seen_desc, m.description);
    acc.chunks.insert(cm.chunk_id);
  }
  struct RelAcc {
    RefRelationship r;
    std::set<std::string> seen_desc, chunks;
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
    RefAddDistinct(acc.r.descriptions, acc.seen_desc, m.description);
    acc.chunks.insert(cm.chunk_id);
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
  RefGraph g;
  for (auto& [key, acc] : ents) {
    acc.e.name = RefMostFrequent(acc.spellings);
    acc.e.type = RefMostFrequent(acc.e.type_counts);
    acc.e.chunk_ids.assign(acc.chunks.begin(), acc.chunks.end());
    g.entities.push_back(std::move(acc.e));
  }
  for (auto& [key, acc] : rels) {
    acc.r.chunk_ids.assign(acc.chunks.begin(), acc.chunks.end());
    g.relationships.push_back(std::move(acc.r));
  }
  return g;
}

void RefCollapse(RefGraph& graph,
                 const std::unordered_map<std::string, std::string>& canonical_of) {
  auto target = [&](const std::string& key) -> const std::string& {
    auto it = canonical_of.find(key);
    return it == canonical_of.end() ? key : it->second;
  };
  std::map<std::string, size_t> index_of;
  std::vector<RefEntity> out;
  std::vector<std::set<std::string>> seen_desc, chunks;
  for (int pass = 0; pass < 2; ++pass) {
    for (auto& e : graph.entities) {
      const std::string& to = target(e.name_key);
      const bool own = to == e.name_key;
      if ((pass == 0) != own) continue;
      auto [it, inserted] = index_of.emplace(to, out.size());
      if (inserted) {
        RefEntity m;
        m.name_key = to;
        m.name = own ? e.name : to;
        m.inferred = true;
        out.push_back(std::move(m));
        seen_desc.emplace_back();
        chunks.emplace_back();
      }
      const size_t i = it->second;
      RefEntity& m = out[i];
      for (const auto& [t, c] : e.type_counts) m.type_counts[t] += c;
      for (const auto& d : e.descriptions) RefAddDistinct(m.descriptions, seen_desc[i], d);
      chunks[i].insert(e.chunk_ids.begin(), e.chunk_ids.end());
      m.inferred = m.inferred && e.inferred;
    }
  }
  if (graph.entities.size() == out.size()) return;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].type = RefMostFrequent(out[i].type_counts);
    out[i].chunk_ids.assign(chunks[i].begin(), chunks[i].end());
  }
  std::sort(out.begin(), out.end(),
            [](const RefEntity& a, const RefEntity& b) { return a.name_key < b.name_key; });
  struct RelAcc {
    RefRelationship r;
    std::set<std::string> seen_desc, chunks;
  };
  std::map<std::pair<std::string, std::string>, RelAcc> rels;
  for (auto& r : graph.relationships) {
    std::string a = target(r.source_key);
    std::string b = target(r.target_key);
    if (a == b) continue;
    if (b < a) std::swap(a, b);
    auto& acc = rels[{a, b}];
    acc.r.source_key = a;
    acc.r.target_key = b;
    acc.r.weight += r.weight;
    for (const auto& d : r.descriptions) RefAddDistinct(acc.r.descriptions, acc.seen_desc, d);
    acc.chunks.insert(r.chunk_ids.begin(), r.chunk_ids.end());
  }
  graph.entities = std::move(out);
  graph.relationships.clear();
  for (auto& [key, acc] : rels) {
    acc.r.chunk_ids.assign(acc.chunks.begin(), acc.chunks.end());
    graph.relationships.push_back(std::move(acc.r));
  }
}

std::vector<std::string> Strings(const std::vector<std::string_view>& v) {
  return {v.begin(), v.end()};
}

std::vector<std::string_view> Views(const std::vector<std::string>& v) {
  return {v.begin(), v.end()};
}

void ExpectSameGraph(const RefGraph& want, const MergedGraph& got) {
  ASSERT_EQ(got.entities.size(), want.entities.size());
  for (size_t i = 0; i < want.entities.size(); ++i) {
    const RefEntity& w = want.entities[i];
    const MergedEntity& g = got.entities[i];
    SCOPED_TRACE(w.name_key);
    EXPECT_EQ(g.name_key, w.name_key);
    EXPECT_EQ(g.name, w.name);
    EXPECT_EQ(g.type, w.type);
    EXPECT_EQ(g.type_counts, w.type_counts);
    EXPECT_EQ(Strings(g.descriptions), w.descriptions);
    EXPECT_EQ(Strings(g.chunk_ids), w.chunk_ids);
    EXPECT_EQ(g.inferred, w.inferred);
    EXPECT_EQ(DescriptionsHash(g.name_key, g.descriptions),
              DescriptionsHash(w.name_key, Views(w.descriptions)));
  }
  ASSERT_EQ(got.relationships.size(), want.relationships.size());
  for (size_t i = 0; i < want.relationships.size(); ++i) {
    const RefRelationship& w = want.relationships[i];
    const MergedRelationship& g = got.relationships[i];
    SCOPED_TRACE(w.source_key + " - " + w.target_key);
    EXPECT_EQ(g.source_key, w.source_key);
    EXPECT_EQ(g.target_key, w.target_key);
    EXPECT_EQ(g.weight, w.weight);  // summed in the same order: exactly equal
    EXPECT_EQ(Strings(g.descriptions), w.descriptions);
    EXPECT_EQ(Strings(g.chunk_ids), w.chunk_ids);
  }
}

// Mentions drawn from small sets, so that keys, descriptions and chunks repeat.
void RandomMentions(std::mt19937& rng, std::vector<ChunkEntityMention>& es,
                    std::vector<ChunkRelationshipMention>& rs) {
  const std::vector<std::string> names = {"Scrooge", "SCROOGE", "Marley", "Jacob Marley",
                                          "Fred",    "Belle",   "Tim",    "Tiny Tim",
                                          "Bob",     "Fan",     "",       "Fezziwig"};
  const std::vector<std::string> types = {"person", "organization", "", "geo"};
  const std::vector<std::string> descs = {
      "",
      "A miser",
      "His late partner",
      "The nephew",
      "A long description that is well past the "
      "fifteen characters of a short string, as most of a corpus's sentences are",
      "A clerk",
      "A ghost"};
  auto pick = [&](const std::vector<std::string>& v) {
    return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
  };
  const int chunks = 1 + static_cast<int>(rng() % 6);
  for (int c = 0; c < chunks; ++c) {
    // Long chunk ids, as real ones are (64 hex digits), and by chunk, as a store gives them.
    const std::string chunk = std::string(60, 'c') + std::to_string(1000 + rng() % 9);
    for (int k = static_cast<int>(rng() % 5); k > 0; --k)
      es.push_back(E(chunk, pick(names), pick(types), pick(descs)));
    for (int k = static_cast<int>(rng() % 6); k > 0; --k) {
      rs.push_back(
          R(chunk, pick(names), pick(names), 1 + static_cast<double>(rng() % 7) / 4, pick(descs)));
    }
  }
}

TEST(MergeEquivalenceTest, StreamedMergeEqualsTheMergeOfStringsWithAndWithoutResolution) {
  std::mt19937 rng(20261202);
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<ChunkEntityMention> es;
    std::vector<ChunkRelationshipMention> rs;
    RandomMentions(rng, es, rs);
    RefGraph want = RefMerge(es, rs);

    // Streamed as the merge stage does (entities, then relationships), from rows that are gone
    // as soon as they are added: the graph holds its own texts.
    MentionMerger merger;
    for (const auto& m : es) {
      ChunkEntityMention row = m;
      merger.Add(row.chunk_id, row.mention);
    }
    for (const auto& m : rs) {
      ChunkRelationshipMention row = m;
      merger.Add(row.chunk_id, row.mention);
    }
    MergedGraph got = merger.Finish();
    ExpectSameGraph(want, got);
    ExpectSameGraph(want, MergeMentions(es, rs));

    // The same after resolution folds some names into others.
    std::unordered_map<std::string, std::string> canonical_of;
    for (const auto& e : want.entities) {
      if (rng() % 3 == 0 && !want.entities.empty()) {
        const auto& to = want.entities[rng() % want.entities.size()].name_key;
        if (to != e.name_key && !canonical_of.count(to)) canonical_of.emplace(e.name_key, to);
      }
    }
    // A canonical key is never itself folded away (resolution's output).
    for (auto it = canonical_of.begin(); it != canonical_of.end();) {
      it = canonical_of.count(it->second) ? canonical_of.erase(it) : std::next(it);
    }
    RefCollapse(want, canonical_of);
    CollapseResolved(got, canonical_of);
    ExpectSameGraph(want, got);
    if (HasFailure()) return;
  }
}

TEST(MergeEquivalenceTest, EachDistinctTextIsKeptOnce) {
  // Three relationships of one sentence, as the NLP extractor makes them: its text is held once.
  const std::string sentence(200, 's');
  MentionMerger merger;
  for (const char* b : {"B", "C", "D"})
    merger.Add("chunk", R("chunk", "A", b, 1, sentence).mention);
  MergedGraph g = merger.Finish();
  ASSERT_EQ(g.relationships.size(), 3u);
  ASSERT_NE(g.texts, nullptr);
  EXPECT_EQ(g.texts->size(), 2u);  // the sentence and the chunk id
  for (const auto& r : g.relationships) {
    ASSERT_EQ(r.descriptions.size(), 1u);
    EXPECT_EQ(r.descriptions[0].data(), g.relationships[0].descriptions[0].data());
  }
}

TEST(MergeEquivalenceTest, AnEntityMentionedAfterItsRelationshipsIsNotInferred) {
  // The order of Add calls does not decide what is inferred or how it is spelt.
  MentionMerger merger;
  merger.Add("c1", R("c1", "SCROOGE", "Marley", 1).mention);
  merger.Add("c2", E("c2", "Scrooge", "person", "A miser").mention);
  MergedGraph g = merger.Finish();
  ASSERT_EQ(g.entities.size(), 2u);
  EXPECT_EQ(g.entities[0].name_key, "marley");
  EXPECT_TRUE(g.entities[0].inferred);
  EXPECT_FALSE(g.entities[1].inferred);
  EXPECT_EQ(g.entities[1].name, "Scrooge");
  EXPECT_EQ(g.entities[1].type, "person");
  EXPECT_EQ(Strings(g.entities[1].chunk_ids), (std::vector<std::string>{"c1", "c2"}));
}

}  // namespace
}  // namespace grag
