// Entity resolution and merging: name variants, type conflicts, weights, inferred entities,
// description summarisation thresholds.
#include "grag/merge.h"

#include <gtest/gtest.h>

#include <algorithm>

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
  EXPECT_EQ(e.descriptions, (std::vector<std::string>{"A miser", "Reformed"}));
  EXPECT_EQ(e.chunk_ids, (std::vector<std::string>{"c1", "c2", "c3"}));
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
  EXPECT_EQ(g.relationships[0].descriptions, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(g.relationships[0].chunk_ids, (std::vector<std::string>{"c1", "c2", "c3"}));
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
  EXPECT_EQ(ghost.chunk_ids, (std::vector<std::string>{"c1"}));
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
  const std::vector<std::string> first = {"one two three four five", "six seven eight nine ten"};
  const std::string basis = SummaryBasis(first, o);  // 10 words summarised
  std::vector<std::string> now = first;
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
  const std::vector<std::string> first = {"one two three four five", "six seven eight nine ten"};
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
            (std::vector<std::string>{"Scrooge's late partner", "Dead as a door-nail"}));
  EXPECT_EQ(jm.chunk_ids, (std::vector<std::string>{"c1", "c2", "c3"}));
  // The self-loop the merge made is gone; the two Marley-Scrooge edges are one, weights summed.
  ASSERT_EQ(g.relationships.size(), 2u);
  const auto& r = g.relationships[0];
  EXPECT_EQ(r.source_key, "fred");
  const auto& partners = g.relationships[1];
  EXPECT_EQ(partners.source_key, "jacob marley");
  EXPECT_EQ(partners.target_key, "scrooge");
  EXPECT_DOUBLE_EQ(partners.weight, 5);
  EXPECT_EQ(partners.descriptions.size(), 2u);
  EXPECT_EQ(partners.chunk_ids, (std::vector<std::string>{"c1", "c2"}));
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

}  // namespace
}  // namespace grag
