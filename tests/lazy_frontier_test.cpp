// Budgeted search's community tree, ranking and frontier (issue 38): pure rules, no store or
// model.
#include "query/lazy_frontier.h"
#include "query/lazy_replies.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace grag::query {
namespace {

CommunityRecord Community(int64_t id, int64_t level, std::optional<int64_t> parent,
                          int64_t weight) {
  CommunityRecord c;
  c.id = id;
  c.level = level;
  c.parent_id = parent;
  c.weight = weight;
  return c;
}

// 1 (level 0) -> 10, 11; 2 (level 0) -> 20; 3 has no chunk.
CommunityTree SampleTree() {
  std::vector<CommunityRecord> cs = {
      Community(1, 0, std::nullopt, 4), Community(2, 0, std::nullopt, 2),
      Community(3, 0, std::nullopt, 1), Community(10, 1, 1, 2),
      Community(11, 1, 1, 2),           Community(20, 1, 2, 2)};
  std::map<int64_t, std::vector<std::string>> chunks = {{1, {"a", "b", "c", "d"}},
                                                        {2, {"c", "e"}},
                                                        {10, {"a", "b"}},
                                                        {11, {"c", "d"}},
                                                        {20, {"c", "e"}}};
  return BuildCommunityTree(cs, chunks);
}

TEST(LazyFrontierTest, TreeKeepsCommunitiesWithChunksAndLinksChildren) {
  CommunityTree t = SampleTree();
  EXPECT_EQ(t.communities.size(), 5u);  // 3 has no chunk to test
  EXPECT_EQ(t.roots, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(t.communities.at(1).children, (std::vector<int64_t>{10, 11}));
  EXPECT_EQ(t.chunk_ids.size(), 5u);  // a..e, each numbered once though shared
  EXPECT_EQ(t.max_weight.at(0), 4);
  // Shared chunks are one index: "c" is the same in 1, 2, 11 and 20.
  const size_t c = t.communities.at(1).chunks[2];
  EXPECT_EQ(t.chunk_ids[c], "c");
  EXPECT_EQ(t.communities.at(2).chunks[0], c);
  EXPECT_EQ(t.communities.at(20).chunks[0], c);
}

TEST(LazyFrontierTest, NoCommunitiesMeansOneRootOfAllChunks) {
  CommunityTree t = BuildCommunityTree({}, {}, {"x", "y"});
  ASSERT_EQ(t.roots, (std::vector<int64_t>{-1}));
  EXPECT_EQ(t.communities.at(-1).chunks.size(), 2u);
}

TEST(LazyFrontierTest, RankIsTheMeanOfTheBestKPlusTheSizePrior) {
  CommunityTree t = SampleTree();
  std::vector<double> s(t.chunk_ids.size(), 0.0);
  s[t.communities.at(1).chunks[0]] = 1.0;  // a
  s[t.communities.at(1).chunks[1]] = 0.5;  // b
  s[t.communities.at(1).chunks[3]] = 0.2;  // d
  // Best 2 of community 1: a and b; prior: log(5)/log(5) = 1 at the largest of level 0.
  EXPECT_NEAR(RankCommunity(t, t.communities.at(1), s, 2, 0.1), 0.75 + 0.1, 1e-9);
  // k larger than the community: the missing scores count as zero.
  EXPECT_NEAR(RankCommunity(t, t.communities.at(10), s, 4, 0.0), 1.5 / 4, 1e-9);
  // Community 2 (c, e unscored): only its size, log(3)/log(5).
  EXPECT_NEAR(RankCommunity(t, t.communities.at(2), s, 3, 0.1), 0.1 * std::log(3) / std::log(5),
              1e-9);
}

TEST(LazyFrontierTest, GenericQuestionRanksBySizeAlone) {
  CommunityTree t = SampleTree();
  const std::vector<double> none(t.chunk_ids.size(), 0.0);
  EXPECT_GT(RankCommunity(t, t.communities.at(1), none, 3, 0.1),
            RankCommunity(t, t.communities.at(2), none, 3, 0.1));
}

TEST(LazyFrontierTest, TestQueueSkipsTestedChunksAndOrdersByScoreThenDocument) {
  CommunityTree t = SampleTree();
  std::vector<double> s(t.chunk_ids.size(), 0.0);
  const auto& k = t.communities.at(1);      // a b c d
  s[k.chunks[3]] = 0.9;                     // d first
  s[k.chunks[1]] = 0.4;                     // then b
  std::set<size_t> tested = {k.chunks[0]};  // a tested already (by another community)
  EXPECT_EQ(TestQueue(k, s, tested, false),
            (std::vector<size_t>{k.chunks[3], k.chunks[1], k.chunks[2]}));
  EXPECT_EQ(TestQueue(k, s, tested, true), (std::vector<size_t>{k.chunks[3], k.chunks[1]}));
}

TEST(LazyFrontierTest, FrontierPopsBestFirstAndDropsWholeSubtrees) {
  CommunityTree t = SampleTree();
  Frontier f(t);
  f.Push(2, 0.5);
  f.Push(1, 0.5);  // tie: the lower id first
  f.Push(20, 0.9);
  EXPECT_EQ(f.Pop()->first, 20);
  EXPECT_EQ(f.Pop()->first, 1);
  f.Push(10, 0.7);
  f.Push(11, 0.6);
  f.Drop(1);  // its children go with it, queued or not
  EXPECT_TRUE(f.dropped(10));
  EXPECT_EQ(f.Pop()->first, 2);
  EXPECT_TRUE(f.empty());
  f.Push(11, 1.0);  // a dropped community is never pushed again
  EXPECT_TRUE(f.empty());
  // Pushing again updates the rank.
  f.Push(2, 0.1);
  f.Push(2, 0.8);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_DOUBLE_EQ(f.Pop()->second, 0.8);
}

// ---- the replies, read tolerantly

TEST(LazyRepliesTest, RelevanceRatingsInTheShapesModelsWrite) {
  using M = std::map<std::string, int>;
  EXPECT_EQ(
      *ParseRelevanceReply(R"({"ratings": [{"id": "T3", "score": 2}, {"id": "T4", "score": 0}]})"),
      (M{{"T3", 2}, {"T4", 0}}));
  // Fences, prose, a bare list, ids without the T, scores as strings, out of range clamped.
  EXPECT_EQ(*ParseRelevanceReply("Sure:\n```json\n[{\"id\": 7, \"score\": \"3\"}, "
                                 "{\"passage\": \"t8\", \"rating\": 9}]\n```"),
            (M{{"T7", 3}, {"T8", 3}}));
  EXPECT_EQ(*ParseRelevanceReply(R"({"T1": 1, "T2": "2"})"), (M{{"T1", 1}, {"T2", 2}}));
  // Cut off by the token cap: the complete entries before the cut.
  EXPECT_EQ(*ParseRelevanceReply(R"({"ratings": [{"id": "T1", "score": 3}, {"id": "T2", "sc)"),
            (M{{"T1", 3}}));
  EXPECT_TRUE(ParseRelevanceReply(R"({"ratings": []})")->empty());
  EXPECT_EQ(ParseRelevanceReply("I cannot rate these.").status().code(), ErrorCode::kParse);
}

TEST(LazyRepliesTest, RefineAndClaims) {
  auto refine = ParseRefineReply(
      "```json\n{\"subqueries\": [\" Who is Marley? \", \"\"], \"terms\": [\"ghost\"]}\n```");
  ASSERT_TRUE(refine.ok()) << refine.status().ToString();
  EXPECT_EQ(refine->subqueries, std::vector<std::string>{"Who is Marley?"});
  EXPECT_EQ(refine->terms, std::vector<std::string>{"ghost"});
  EXPECT_EQ(ParseRefineReply("no idea").status().code(), ErrorCode::kParse);

  auto claims = ParseClaimsReply(
      R"({"claims": [{"claim": "Marley is dead [T2].", "score": "80", "sources": ["T1", 3],)"
      R"( "quote": "dead as a door-nail"}, {"description": "Seed shape", "score": 10}]})");
  ASSERT_TRUE(claims.ok()) << claims.status().ToString();
  ASSERT_EQ(claims->size(), 2u);
  EXPECT_EQ((*claims)[0].score, 80);
  EXPECT_EQ((*claims)[0].sources, (std::vector<std::string>{"T1", "T2", "T3"}));
  EXPECT_EQ((*claims)[0].quote, "dead as a door-nail");
  EXPECT_EQ((*claims)[1].claim, "Seed shape");
  EXPECT_EQ(ParseClaimsReply("nothing here").status().code(), ErrorCode::kParse);
}

}  // namespace
}  // namespace grag::query
