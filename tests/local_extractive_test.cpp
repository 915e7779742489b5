// Extractive local search (no LLM): the context is BuildLocalContext's, the answer names the
// matched entity with its description, relationships, the sentences of its chunks that name it
// and its community's report, citing context ids the CLI can resolve; nothing_found when no
// entity matches; the rendering limits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "grag/extract.h"
#include "grag/extractive_search.h"
#include "grag/words.h"
#include "grag/local_search.h"
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

// Jacob Marley and Scrooge in community 1 (with a report), Bob Cratchit in community 2.
// Chunks: 0 and 1 name Marley, 2 is about the Cratchits, 3 is linked to Marley but names him
// only as "he".
class ExtractiveLocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<std::string> texts = {
        "Marley was dead: to begin with. The register of his burial was signed by the "
        "clergyman. Scrooge signed it.",
        "Jacob Marley had been dead seven years. Scrooge never painted out old Marley's name. "
        "The fog was thick.",
        "Bob Cratchit shivered in the tank. Tiny Tim sat by the fire.",
        "He was as dead as a door-nail. Nobody doubted it."};
    auto store = testing::OpenStoreWithChunks(dir_ / "index.db", "carol.txt", texts,
                                              [](size_t i) { return "chunk" + std::to_string(i); });
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    marley_ = Entity("Jacob Marley", "person", "Scrooge's late business partner.",
                     {"chunk1", "chunk0", "chunk3"});
    scrooge_ = Entity("Scrooge", "person", "A miser.", {"chunk0", "chunk1", "chunk2"});
    bob_ = Entity("Bob Cratchit", "person", "Scrooge's clerk.", {"chunk2"});
    partners_ = Rel(marley_, scrooge_, 9, "Marley and Scrooge were business partners");
    Rel(scrooge_, bob_, 5, "Bob Cratchit is Scrooge's clerk");
    ASSERT_TRUE(store_->RecomputeGraphStats().ok());
    CommunityRecord one;
    one.id = 1;
    one.entity_ids = {marley_, scrooge_};
    CommunityRecord two;
    two.id = 2;
    two.entity_ids = {bob_};
    ASSERT_TRUE(store_->ReplaceCommunities(ClusteringRecord{}, {one, two}).ok());
    ReportRecord r;
    r.community_id = 1;
    r.title = "Scrooge and Marley";
    r.summary = "The firm of Scrooge and Marley, one partner dead.";
    r.full_content = "# Scrooge and Marley\n\n" + r.summary;
    ASSERT_TRUE(store_->PutReport(r).ok());
  }

  int64_t Entity(const std::string& name, const std::string& type, const std::string& desc,
                 const std::vector<std::string>& chunks) {
    EntityRecord e;
    e.name = name;
    e.name_key = NormalizeEntityName(name);
    e.type = type;
    e.description = desc;
    auto id = store_->UpsertEntity(e);
    EXPECT_TRUE(id.ok());
    EXPECT_TRUE(store_->SetEntityChunks(*id, chunks).ok());
    return *id;
  }

  int64_t Rel(int64_t a, int64_t b, double weight, const std::string& desc) {
    RelationshipRecord r;
    r.source_id = a;
    r.target_id = b;
    r.weight = weight;
    r.description = desc;
    auto id = store_->UpsertRelationship(r);
    EXPECT_TRUE(id.ok());
    return *id;
  }

  LocalSearchResult Search(std::string_view question, const LocalSearchOptions& options = {},
                           const ExtractiveLocalOptions& extractive = {}) {
    auto r = ExtractiveLocalSearch(*store_, nullptr, Tok(), question, options, extractive);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : LocalSearchResult{};
  }

  // The chunks the answer cites.
  static std::set<std::string> CitedChunks(const LocalSearchResult& r) {
    std::set<std::string> out;
    for (const LocalCitation& c : r.citations) {
      const LocalContextItem& item = r.context.items[c.item];
      if (item.type == LocalItemType::kChunk) out.insert(item.chunk_id);
    }
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  int64_t marley_ = 0;
  int64_t scrooge_ = 0;
  int64_t bob_ = 0;
  int64_t partners_ = 0;
};

TEST_F(ExtractiveLocalTest, AnswersFromTheMatchedEntityAndCitesChunksAboutIt) {
  std::vector<std::string> deltas;
  LocalSearchOptions o;
  o.on_answer_delta = [&](std::string_view d) { deltas.emplace_back(d); };
  const LocalSearchResult r = Search("Who is Jacob Marley?", o);
  ASSERT_FALSE(r.nothing_found);
  ASSERT_EQ(r.context.matches.size(), 1u);
  EXPECT_EQ(r.context.matches[0].entity_id, marley_);
  const std::string e = "E" + std::to_string(marley_);
  EXPECT_THAT(r.answer, StartsWith("**Jacob Marley** (person): Scrooge's late business partner. [" +
                                   e + "]"));
  EXPECT_THAT(r.answer, HasSubstr("Relationships:\n- Jacob Marley \xE2\x80\x94 Scrooge: Marley and "
                                  "Scrooge were business partners [R" +
                                  std::to_string(partners_) + "]"));
  // The chunks in the context's order (the hybrid ranking's: the chunk that says "Jacob
  // Marley" in full first), each quoting the sentences that name Marley, in text order; the
  // chunk that only says "he" is passed over.
  EXPECT_THAT(r.answer, HasSubstr("From the source text:\n- \xE2\x80\x9C"
                                  "Jacob Marley had been dead seven years. "
                                  "\xE2\x80\xA6 Scrooge never painted out old Marley's "
                                  "name.\xE2\x80\x9D (carol.txt, chunk 1) [S1]\n- "
                                  "\xE2\x80\x9C"
                                  "Marley was dead: to "
                                  "begin with.\xE2\x80\x9D (carol.txt, chunk 0) [S2]"));
  EXPECT_THAT(r.answer, Not(HasSubstr("door-nail")));
  EXPECT_THAT(r.answer, HasSubstr("Community reports:\n- **Scrooge and Marley**: The firm of "
                                  "Scrooge and Marley, one partner dead. [C1]"));
  EXPECT_EQ(CitedChunks(r), (std::set<std::string>{"chunk0", "chunk1"}));
  // Every citation resolves to a context item, as a model's answer would.
  std::vector<std::string> cited;
  for (const LocalCitation& c : r.citations) cited.push_back(c.id);
  EXPECT_THAT(cited, ElementsAre(e, "R" + std::to_string(partners_), "S1", "S2", "C1"));
  EXPECT_TRUE(r.prompt.empty());
  EXPECT_THAT(deltas, ElementsAre(r.answer));
}

TEST_F(ExtractiveLocalTest, TheContextIsTheOneTheLlmPathBuilds) {
  const LocalSearchResult r = Search("Who is Jacob Marley?");
  auto context = BuildLocalContext(*store_, nullptr, Tok(), "Who is Jacob Marley?");
  ASSERT_TRUE(context.ok());
  ASSERT_EQ(r.context.items.size(), context->items.size());
  for (size_t i = 0; i < context->items.size(); ++i) {
    EXPECT_EQ(r.context.items[i].id, context->items[i].id);
    EXPECT_EQ(r.context.items[i].text, context->items[i].text);
  }
  EXPECT_EQ(r.context.chunks_text, context->chunks_text);
  // Nothing from the unconnected chunk about the Cratchits reaches the answer.
  EXPECT_THAT(r.answer, Not(HasSubstr("Tiny Tim")));
}

TEST_F(ExtractiveLocalTest, NothingFoundWhenNoEntityMatches) {
  std::vector<std::string> deltas;
  LocalSearchOptions o;
  o.on_answer_delta = [&](std::string_view d) { deltas.emplace_back(d); };
  const LocalSearchResult r = Search("What is the weather on Mars?", o);
  EXPECT_TRUE(r.nothing_found);
  EXPECT_EQ(r.answer, o.nothing_found_answer);
  EXPECT_TRUE(r.citations.empty());
  EXPECT_THAT(deltas, ElementsAre(o.nothing_found_answer));
}

TEST_F(ExtractiveLocalTest, RendersWithinItsLimits) {
  ExtractiveLocalOptions few;
  few.max_chunks = 1;
  few.sentences_per_chunk = 1;
  few.max_relationships = 0;
  few.max_reports = 0;
  const LocalSearchResult r = Search("Tell me about Jacob Marley and Bob Cratchit", {}, few);
  ASSERT_EQ(r.context.matches.size(), 2u);
  EXPECT_THAT(r.answer, HasSubstr("**Bob Cratchit** (person): Scrooge's clerk. [E" +
                                  std::to_string(bob_) + "]"));
  EXPECT_THAT(r.answer, Not(HasSubstr("Relationships:")));
  EXPECT_THAT(r.answer, Not(HasSubstr("Community reports:")));
  EXPECT_EQ(CitedChunks(r).size(), 1u);
  EXPECT_THAT(r.answer, Not(HasSubstr("\xE2\x80\xA6")));  // one sentence, nothing cut

  ExtractiveLocalOptions one;
  one.max_entities = 1;
  const LocalSearchResult s = Search("Tell me about Jacob Marley and Bob Cratchit", {}, one);
  EXPECT_THAT(s.answer,
              HasSubstr("\n\nAlso matched: Bob Cratchit [E" + std::to_string(bob_) + "]."));
  EXPECT_THAT(s.answer, Not(HasSubstr("Scrooge's clerk. [E")));

  ExtractiveLocalOptions bad;
  bad.sentences_per_chunk = 0;
  EXPECT_EQ(ExtractiveLocalSearch(*store_, nullptr, Tok(), "Jacob Marley", {}, bad).status().code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace grag
