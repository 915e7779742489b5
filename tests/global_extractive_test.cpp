// Extractive global search (no LLM): a generic question ranks the largest communities first and
// cites several; a specific question ranks the lexically matching community first; a question
// nothing matches is not covered; level selection, the answer budget, search terms, and runs
// over Microsoft GraphRAG's 122 Christmas Carol reports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "global_search_fixture.h"
#include "grag/extractive_search.h"
#include "grag/words.h"
#include "grag/store.h"
#include "grag/tokenizer.h"
#include "support/store_fixture.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const Tokenizer& Tok() {
  static const Tokenizer* tok = Tokenizer::Get("o200k_base").value();
  return *tok;
}

std::vector<int64_t> Cited(const GlobalSearchResult& r) {
  std::vector<int64_t> ids;
  for (const GlobalCitation& c : r.citations) ids.push_back(c.community_id);
  return ids;
}

// Communities with the weights (chunks spanned) and reports below, written straight into a
// temporary index:
//   level 0: 1 (weight 8, children 11 and 12), 2 (weight 5), 3 (weight 1, about whaling),
//            4 (weight 2)
//   level 1: 11 (weight 6), 12 (weight 5)
class ExtractiveGlobalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> texts;
    for (int i = 0; i < 10; ++i) texts.push_back("chunk text " + std::to_string(i));
    auto store = testing::OpenStoreWithChunks(dir_ / "index.db", "doc.txt", texts,
                                              [](size_t i) { return "chunk" + std::to_string(i); });
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();

    // Entity name -> the chunks it spans.
    const std::vector<std::pair<std::string, std::vector<int>>> entities = {
        {"Scrooge", {0, 1, 2, 3, 4, 5}}, {"Marley", {6, 7}}, {"Fred", {0, 1, 2}},
        {"Cratchit", {0, 1, 2, 3, 4}},   {"Ahab", {9}},      {"Fezziwig", {8, 9}}};
    for (const auto& [name, in] : entities) {
      EntityRecord e;
      e.name = name;
      e.name_key = name;
      auto id = store_->UpsertEntity(e);
      ASSERT_TRUE(id.ok());
      ids_[name] = *id;
      std::vector<std::string> links;
      for (int c : in) links.push_back("chunk" + std::to_string(c));
      ASSERT_TRUE(store_->SetEntityChunks(*id, links).ok());
    }
    auto st = store_->ReplaceCommunities(
        ClusteringRecord{},
        {Community(1, 0, {}, {"Scrooge", "Marley", "Fred"}), Community(2, 0, {}, {"Cratchit"}),
         Community(3, 0, {}, {"Ahab"}), Community(4, 0, {}, {"Fezziwig"}),
         Community(11, 1, 1, {"Scrooge"}), Community(12, 1, 1, {"Marley", "Fred"})});
    ASSERT_TRUE(st.ok()) << st.status().ToString();

    Report(1, "Scrooge, Marley and Fred", "A miser, his dead partner and his cheerful nephew.",
           {"Scrooge refuses Fred's invitation to dinner", "Marley's ghost warns Scrooge"});
    Report(2, "The Cratchit household", "A poor but loving family at Christmas.",
           {"Bob Cratchit works for Scrooge in a cold office", "Tiny Tim is ill"});
    Report(3, "Captain Ahab and the whaling ship",
           "A captain hunting a white whale from his whaling ship, harpoon in hand.",
           {"Ahab throws the harpoon at the whale", "The crew of the whaling ship fears Ahab"});
    Report(4, "Fezziwig's ball", "An old merchant's Christmas party for his apprentices.",
           {"Fezziwig dances with Mrs Fezziwig"});
    Report(11, "Scrooge alone", "The miser in his counting-house.", {"Scrooge counts his money"});
    Report(12, "Marley and Fred", "The dead partner and the nephew.", {"Marley's chains"});
  }

  CommunityRecord Community(int64_t id, int64_t level, std::optional<int64_t> parent,
                            const std::vector<std::string>& members) {
    CommunityRecord c;
    c.id = id;
    c.level = level;
    c.parent_id = parent;
    for (const auto& m : members) c.entity_ids.push_back(ids_.at(m));
    return c;
  }

  void Report(int64_t community, const std::string& title, const std::string& summary,
              const std::vector<std::string>& findings) {
    ReportRecord r;
    r.community_id = community;
    r.title = title;
    r.summary = summary;
    r.full_content = "# " + title + "\n\n" + summary;
    for (const auto& f : findings) {
      r.findings.push_back({f, "Because the text says so. [Data: Entities (1)]", {}});
      r.full_content += "\n\n## " + f + "\n\nBecause the text says so.";
    }
    r.generator = ReportGenerator::kExtractive;
    ASSERT_TRUE(store_->PutReport(r).ok());
  }

  GlobalSearchResult Search(std::string_view question, GlobalSearchOptions options = {},
                            const ExtractiveGlobalOptions& extractive = {}) {
    auto r = ExtractiveGlobalSearch(*store_, Tok(), question, options, extractive);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : GlobalSearchResult{};
  }

  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  std::map<std::string, int64_t> ids_;
};

TEST_F(ExtractiveGlobalTest, GenericQuestionCitesSeveralCommunitiesLargestFirst) {
  GlobalSearchOptions o;
  o.level = 0;
  std::vector<std::string> deltas;
  o.on_answer_delta = [&](std::string_view d) { deltas.emplace_back(d); };
  const GlobalSearchResult r = Search("What are the main themes of this story?", o);
  EXPECT_FALSE(r.not_covered);
  // By weight: 1 (8 chunks), 2 (5), 4 (2), 3 (1); every report counts for a generic question.
  EXPECT_THAT(Cited(r), ElementsAre(1, 2, 4, 3));
  EXPECT_EQ(r.citations[0].title, "Scrooge, Marley and Fred");
  EXPECT_EQ(r.citations[0].level, 0);
  ASSERT_EQ(r.points.size(), 4u);
  EXPECT_EQ(r.points[0].score, 100);
  for (size_t i = 1; i < r.points.size(); ++i) {
    EXPECT_LE(r.points[i].score, r.points[i - 1].score);
    EXPECT_GT(r.points[i].score, 0);
    EXPECT_EQ(r.points[i].fate, PointFate::kKept);
  }
  EXPECT_THAT(r.answer, StartsWith(ExtractiveGlobalOptions{}.generic_intro));
  EXPECT_THAT(r.answer, HasSubstr("**Scrooge, Marley and Fred** \xE2\x80\x94 A miser, his dead "
                                  "partner and his cheerful nephew. [Data: Reports (1)]\n- "
                                  "Scrooge refuses Fred's invitation to dinner"));
  EXPECT_LT(r.answer.find("[Data: Reports (1)]"), r.answer.find("[Data: Reports (2)]"));
  EXPECT_THAT(r.answer, Not(HasSubstr("[Data: Entities")));  // the reports' own citations
  EXPECT_THAT(deltas, ElementsAre(r.answer));
  EXPECT_EQ(r.stats.map_calls, 0);
  EXPECT_EQ(r.stats.reduce_calls, 0);
  EXPECT_EQ(r.stats.reports_used, 4);
  EXPECT_EQ(r.stats.points_kept, 4);
  EXPECT_TRUE(r.map_calls.empty());
}

TEST_F(ExtractiveGlobalTest, SpecificQuestionRanksTheMatchingCommunityFirst) {
  GlobalSearchOptions o;
  o.level = 0;
  const GlobalSearchResult r = Search("Who throws the harpoon from the whaling ship?", o);
  EXPECT_FALSE(r.not_covered);
  EXPECT_THAT(Cited(r), ElementsAre(3));  // the small community, despite its weight
  EXPECT_THAT(r.answer, StartsWith(ExtractiveGlobalOptions{}.specific_intro));
  EXPECT_THAT(r.answer, HasSubstr("**Captain Ahab and the whaling ship**"));
  EXPECT_THAT(r.answer, HasSubstr("- Ahab throws the harpoon at the whale"));
  EXPECT_EQ(r.stats.points_zero_score, 3);
  EXPECT_EQ(r.points[0].community_ids, std::vector<int64_t>{3});

  // Two communities match "Scrooge"; the larger wins the near-tie on relevance.
  const GlobalSearchResult s = Search("What does Scrooge do?", o);
  ASSERT_GE(s.citations.size(), 2u);
  EXPECT_THAT(Cited(s), ElementsAre(1, 2));
  // The finding that names the question's terms is shown first.
  EXPECT_THAT(s.answer, HasSubstr("[Data: Reports (2)]\n- Bob Cratchit works for Scrooge"));
}

TEST_F(ExtractiveGlobalTest, NothingMatchingIsNotCovered) {
  GlobalSearchOptions o;
  o.level = 0;
  const GlobalSearchResult r = Search("What is the capital of Peru?", o);
  EXPECT_TRUE(r.not_covered);
  EXPECT_EQ(r.answer, o.not_covered_answer);
  EXPECT_TRUE(r.citations.empty());
  EXPECT_EQ(r.stats.points_zero_score, 4);
  for (const GlobalPoint& p : r.points) EXPECT_EQ(p.fate, PointFate::kZeroScore);
}

TEST_F(ExtractiveGlobalTest, SelectsTheLevelAndTheChildlessCoarserCommunities) {
  GlobalSearchOptions o;  // level 2: deeper than the index, so its finest communities
  const GlobalSearchResult r = Search("Summarize the main ideas.", o);
  const std::vector<int64_t> cited = Cited(r);
  EXPECT_EQ(std::set<int64_t>(cited.begin(), cited.end()), (std::set<int64_t>{11, 12, 2, 3, 4}));
  // 12 (5 chunks, 2 members) edges out 11 (6 chunks, 1 member): size counts a quarter.
  ASSERT_FALSE(r.citations.empty());
  EXPECT_EQ(r.citations[0].community_id, 12);
  EXPECT_EQ(r.citations[0].level, 1);
  EXPECT_EQ(r.stats.communities_selected, 5);
}

TEST_F(ExtractiveGlobalTest, KeepsWholePointsWithinTheAnswerLimits) {
  GlobalSearchOptions o;
  o.level = 0;
  ExtractiveGlobalOptions two;
  two.max_answer_points = 2;
  const GlobalSearchResult r = Search("What are the main themes?", o, two);
  EXPECT_THAT(Cited(r), ElementsAre(1, 2));
  EXPECT_EQ(r.stats.points_kept, 2);
  EXPECT_EQ(r.stats.points_over_budget, 2);
  EXPECT_EQ(r.points[2].fate, PointFate::kOverBudget);
  EXPECT_THAT(r.answer, Not(HasSubstr("Reports (4)")));

  o.reduce_reply_max_tokens = 5;  // not even the first point fits
  auto tiny = ExtractiveGlobalSearch(*store_, Tok(), "What are the main themes?", o);
  EXPECT_EQ(tiny.status().code(), ErrorCode::kInvalidArgument);

  o.level = -1;
  EXPECT_EQ(ExtractiveGlobalSearch(*store_, Tok(), "x", o).status().code(),
            ErrorCode::kInvalidArgument);
}

TEST_F(ExtractiveGlobalTest, AnIndexWithoutReportsIsNotFound) {
  testing::TempDir dir;
  auto empty = Store::Open(dir / "index.db");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(ExtractiveGlobalSearch(**empty, Tok(), "What are the main themes?").status().code(),
            ErrorCode::kNotFound);
}

TEST(ExtractiveGlobalCarolTest, MicrosoftReportsAnswerGenericAndSpecificQuestions) {
  testing::TempDir dir;
  auto store = Store::Open(dir / "index.db");
  ASSERT_TRUE(store.ok());
  auto loaded =
      testing::LoadChristmasCarolReports(**store, GRAG_TEST_DATA_DIR "/ms_christmas_carol");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto communities = (*store)->ListCommunities(0);
  ASSERT_TRUE(communities.ok());
  int64_t heaviest = 0;
  int64_t max_weight = -1;
  for (const CommunityRecord& c : *communities) {
    if (c.weight > max_weight) {
      max_weight = c.weight;
      heaviest = c.id;
    }
  }

  GlobalSearchOptions o;
  o.level = 0;
  auto themes =
      ExtractiveGlobalSearch(**store, Tok(), "What are the main themes of this story?", o);
  ASSERT_TRUE(themes.ok()) << themes.status().ToString();
  EXPECT_FALSE(themes->not_covered);
  EXPECT_GE(themes->citations.size(), 3u);
  EXPECT_EQ(themes->citations[0].community_id, heaviest);
  // Reports stored without parsed findings show their "## " headings.
  EXPECT_THAT(themes->answer, HasSubstr("\n- "));

  auto fezziwig = ExtractiveGlobalSearch(**store, Tok(), "Who is Fezziwig?", o);
  ASSERT_TRUE(fezziwig.ok());
  ASSERT_FALSE(fezziwig->citations.empty());
  EXPECT_THAT(fezziwig->citations[0].title, HasSubstr("Fezziwig"));
}

}  // namespace
}  // namespace grag
