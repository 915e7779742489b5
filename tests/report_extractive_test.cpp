// Extractive community reports (no LLM): report content (title, findings
// citing entities and chunks, fallbacks, rating), input hashes (reuse on a re-run, regeneration
// when a member's description changes), and a whole book indexed with a crude proper-noun graph
// for speed and sanity.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "grag/chunker.h"
#include "grag/extract.h"
#include "grag/extractive_report.h"
#include "grag/extractive_search.h"
#include "grag/words.h"
#include "grag/leiden.h"
#include "grag/store.h"
#include "grag/tokenizer.h"
#include "support/store_fixture.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const Tokenizer& Tok() {
  static const Tokenizer* tok = Tokenizer::Get("o200k_base").value();
  return *tok;
}

// ---------------------------------------------------------------- reports on a small story

class ExtractiveReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<std::string> texts = {
        "Marley was dead: to begin with. Scrooge signed the register of Marley's burial. Scrooge "
        "and Marley were partners for many years. The fog came down thick.",
        "Bob Cratchit worked for Scrooge in a cold counting-house. Bob Cratchit told Tiny Tim "
        "that Scrooge was a hard master. Tiny Tim blessed everyone.",
        "Fred invited Scrooge to dinner. Fred laughed at his uncle.",
        "The Ghost of Christmas Past took Scrooge to the warehouse of Fezziwig. Fezziwig gave a "
        "ball for his apprentices. Belle left Scrooge for his love of gain."};
    auto chunk_id = [](size_t i) { return "c" + std::to_string(i) + "aaaaaaaaaaaaaaaaaaaa"; };
    auto store = testing::OpenStoreWithChunks(dir_ / "index.db", "carol.txt", texts, chunk_id);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    for (size_t i = 0; i < texts.size(); ++i) chunk_ids_.push_back(chunk_id(i));

    Entity("Scrooge", "person", "A miser.", {0, 1, 2, 3});
    Entity("Marley", "person", "Scrooge's dead partner.", {0});
    Entity("Bob Cratchit", "person", "Scrooge's clerk.", {1});
    Entity("Tiny Tim", "person", "Bob's son.", {1});
    Entity("Fred", "person", "", {2});
    Entity("Fezziwig", "person", "Scrooge's old master.", {3});
    Entity("Belle", "person", "Scrooge's former fiancee.", {3});
    Entity("Ghost of Christmas Past", "spirit", "The first spirit.", {3});
    Rel("Scrooge", "Marley", 9, "Scrooge and Marley were business partners");
    Rel("Scrooge", "Bob Cratchit", 8, "Bob Cratchit is Scrooge's clerk");
    Rel("Bob Cratchit", "Tiny Tim", 7, "Tiny Tim is Bob Cratchit's son");
    Rel("Scrooge", "Fred", 6, "Fred is Scrooge's nephew");
    Rel("Scrooge", "Fezziwig", 3, "Scrooge was apprenticed to Fezziwig");
    Rel("Scrooge", "Belle", 3, "Belle was engaged to Scrooge");
    Rel("Ghost of Christmas Past", "Scrooge", 4, "The Ghost shows Scrooge his past");
    Rel("Fezziwig", "Belle", 1, "Belle attended Fezziwig's ball");
    Rel("Ghost of Christmas Past", "Fezziwig", 1, "");
    ASSERT_TRUE(store_->RecomputeGraphStats().ok());
    SetCommunities();
  }

  void Entity(const std::string& name, const std::string& type, const std::string& description,
              const std::vector<int>& chunks) {
    EntityRecord e;
    e.name = name;
    e.name_key = NormalizeEntityName(name);
    e.type = type;
    e.description = description;
    auto id = store_->UpsertEntity(e);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ids_[name] = *id;
    std::vector<std::string> links;
    for (int c : chunks) links.push_back(chunk_ids_[static_cast<size_t>(c)]);
    ASSERT_TRUE(store_->SetEntityChunks(*id, links).ok());
  }

  void Rel(const std::string& a, const std::string& b, double weight, const std::string& desc) {
    RelationshipRecord r;
    r.source_id = ids_.at(a);
    r.target_id = ids_.at(b);
    r.weight = weight;
    r.description = desc;
    auto id = store_->UpsertRelationship(r);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    rel_ids_[a + "|" + b] = *id;
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

  // level 0: 1 {Scrooge, Marley, Bob Cratchit, Tiny Tim, Fred}, 2 {Fezziwig, Belle, Ghost}
  // level 1: 3 {Scrooge, Marley, Fred} and 4 {Bob Cratchit, Tiny Tim}, children of 1
  void SetCommunities() {
    auto st = store_->ReplaceCommunities(
        ClusteringRecord{},
        {Community(1, 0, {}, {"Scrooge", "Marley", "Bob Cratchit", "Tiny Tim", "Fred"}),
         Community(2, 0, {}, {"Fezziwig", "Belle", "Ghost of Christmas Past"}),
         Community(3, 1, 1, {"Scrooge", "Marley", "Fred"}),
         Community(4, 1, 1, {"Bob Cratchit", "Tiny Tim"})});
    ASSERT_TRUE(st.ok()) << st.status().ToString();
  }

  ReportStageSummary Generate(const ExtractiveReportOptions& options = {}) {
    auto summary = GenerateExtractiveReports(*store_, Tok(), options);
    EXPECT_TRUE(summary.ok()) << summary.status().ToString();
    return summary.value_or(ReportStageSummary{});
  }

  ReportRecord Report(int64_t community) {
    auto r = store_->GetReport(community);
    EXPECT_TRUE(r.ok() && r->has_value());
    return r.ok() && r->has_value() ? **r : ReportRecord{};
  }

  std::string Ids(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ", ") + std::to_string(ids_.at(n));
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  std::vector<std::string> chunk_ids_;
  std::map<std::string, int64_t> ids_;
  std::map<std::string, int64_t> rel_ids_;
};

TEST_F(ExtractiveReportTest, TitleNamesTopEntitiesAndFindingsCiteEntitiesAndChunks) {
  const ReportStageSummary summary = Generate();
  EXPECT_EQ(summary.communities, 4);
  EXPECT_EQ(summary.generated, 4);
  EXPECT_EQ(summary.llm_calls, 0);
  // Finest level first, as the LLM stage.
  ASSERT_EQ(summary.outcomes.size(), 4u);
  EXPECT_EQ(summary.outcomes[0].level, 1);
  EXPECT_EQ(summary.outcomes[3].level, 0);

  const ReportRecord r = Report(1);
  EXPECT_EQ(r.status, ReportStatus::kOk);
  EXPECT_EQ(r.generator, ReportGenerator::kExtractive);
  EXPECT_TRUE(r.model.empty());
  EXPECT_FALSE(r.input_hash.empty());
  // Scrooge has degree 6, Bob Cratchit 2, then the ties by name.
  EXPECT_EQ(r.title, "Scrooge, Bob Cratchit and Fred");
  ASSERT_GE(r.findings.size(), 3u);
  ASSERT_LE(r.findings.size(), 6u);
  // The sentence naming the most members comes first, and leads the summary.
  EXPECT_EQ(r.findings[0].summary, "Bob Cratchit told Tiny Tim that Scrooge was a hard master.");
  EXPECT_THAT(r.findings[0].entities, ElementsAre("Scrooge", "Bob Cratchit", "Tiny Tim"));
  EXPECT_THAT(r.findings[0].explanation,
              HasSubstr("[Data: Entities (" + Ids({"Scrooge", "Bob Cratchit", "Tiny Tim"}) +
                        "); Relationships (" + std::to_string(rel_ids_.at("Scrooge|Bob Cratchit")) +
                        ", " + std::to_string(rel_ids_.at("Bob Cratchit|Tiny Tim")) +
                        "); Sources (chunk " + chunk_ids_[1].substr(0, 12) + ")]"));
  EXPECT_THAT(r.findings[0].explanation, HasSubstr("Bob Cratchit is Scrooge's clerk"));
  EXPECT_THAT(
      r.summary,
      HasSubstr("5 entities (all person) centred on Scrooge, Bob Cratchit and "
                "Fred, with 4 relationships among them; their source text spans 4 chunks."));
  EXPECT_THAT(r.summary, HasSubstr("Bob Cratchit told Tiny Tim that Scrooge was a hard master."));
  for (const Finding& f : r.findings) {
    EXPECT_THAT(f.explanation, HasSubstr("[Data: Entities (")) << f.summary;
    EXPECT_THAT(f.explanation, HasSubstr("Sources (chunk ")) << f.summary;
    EXPECT_FALSE(f.entities.empty());
  }
  // Every member is named by some finding: picks favour members not yet covered.
  std::set<std::string> named;
  for (const Finding& f : r.findings) named.insert(f.entities.begin(), f.entities.end());
  EXPECT_EQ(named,
            (std::set<std::string>{"Scrooge", "Marley", "Bob Cratchit", "Tiny Tim", "Fred"}));
  // Overlapping or repeated sentences are not cited twice.
  std::set<std::string> summaries;
  for (const Finding& f : r.findings) EXPECT_TRUE(summaries.insert(f.summary).second);

  // full_content is the markdown global search and embeddings read.
  EXPECT_THAT(r.full_content, StartsWith("# Scrooge, Bob Cratchit and Fred\n\n"));
  EXPECT_THAT(r.full_content, HasSubstr("\n\n## " + r.findings[1].summary + "\n\n"));
  // weight 4 chunks, 5 members: 1.5 log2(5) + 0.5 log2(6) = 4.77...
  ASSERT_TRUE(r.rating.has_value());
  EXPECT_DOUBLE_EQ(*r.rating, 4.8);
  EXPECT_THAT(r.rating_explanation, HasSubstr("5 entities whose source text spans 4 chunks"));
}

TEST_F(ExtractiveReportTest, SmallCommunitiesStillGetThreeFindings) {
  Generate();
  const ReportRecord r = Report(2);  // {Fezziwig, Belle, Ghost}: three sentences name them
  ASSERT_EQ(r.findings.size(), 3u);
  EXPECT_THAT(r.findings[0].summary, HasSubstr("The Ghost of Christmas Past took Scrooge"));
  EXPECT_THAT(r.findings[0].entities, ElementsAre("Fezziwig", "Ghost of Christmas Past"));
  EXPECT_THAT(r.findings[1].summary, HasSubstr("Belle left Scrooge"));
  EXPECT_THAT(r.findings[2].summary, HasSubstr("Fezziwig gave a ball"));

  const ReportRecord small = Report(4);  // {Bob Cratchit, Tiny Tim}
  EXPECT_EQ(small.title, "Bob Cratchit and Tiny Tim");
  EXPECT_EQ(small.findings.size(), 3u);
}

// A quote is cut again from its chunk at the sentence's offset, not found by splitting the
// chunk again: it must still be SplitSentences's text, whitespace collapsed, past a title line.
TEST(ExtractiveQuoteTest, QuotesAreTheSplitSentencesAtTheirOffsets) {
  testing::TempDir dir;
  const std::string text =
      "title: carol.txt\nMarley was dead:  to begin\n with.\tScrooge   signed the\r\nregister "
      "of Marley's burial.\n\n  Old Scrooge and\n    Marley were partners for   many years. "
      "Scrooge  knew\f Marley  was dead.";
  auto store = testing::OpenStoreWithChunks((dir.path() / "index.db").string(), "carol.txt", {text},
                                            [](size_t) { return std::string(24, 'c'); });
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  std::vector<int64_t> ids;
  for (const std::string name : {"Scrooge", "Marley"}) {
    EntityRecord e;
    e.name = name;
    e.name_key = NormalizeEntityName(name);
    e.type = "person";
    auto id = (*store)->UpsertEntity(e);
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    ASSERT_TRUE((*store)->SetEntityChunks(*id, {std::string(24, 'c')}).ok());
    ids.push_back(*id);
  }
  CommunityRecord c;
  c.id = 1;
  c.entity_ids = ids;
  ASSERT_TRUE((*store)->ReplaceCommunities(ClusteringRecord{}, {c}).ok());
  ExtractiveReportOptions options;
  options.headline_chars = 400;  // whole sentences as headlines
  auto summary = GenerateExtractiveReports(**store, Tok(), options);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  auto r = (*store)->GetReport(1);
  ASSERT_TRUE(r.ok() && r->has_value());

  std::set<std::string> sentences;
  for (const Sentence& s : SplitSentences(text)) sentences.insert(s.text);
  std::vector<std::string> quoted;
  for (const Finding& f : (*r)->findings) {
    if (f.explanation.find("Sources (chunk") != std::string::npos) quoted.push_back(f.summary);
  }
  EXPECT_THAT(quoted, ElementsAre("Scrooge signed the register of Marley's burial.",
                                  "Old Scrooge and Marley were partners for many years.",
                                  "Scrooge knew Marley was dead."));
  for (const std::string& q : quoted) EXPECT_EQ(sentences.count(q), 1u) << q;
}

TEST_F(ExtractiveReportTest, FallsBackOnRelationshipsThenDescriptionsWithoutText) {
  Entity("Fan", "person", "Scrooge's little sister.", {});
  Entity("Dick Wilkins", "person", "", {});
  Rel("Fan", "Dick Wilkins", 2, "Both knew Scrooge as a boy");
  auto st = store_->ReplaceCommunities(ClusteringRecord{},
                                       {Community(8, 0, {}, {"Fan", "Dick Wilkins"})});
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  Generate();
  const ReportRecord r = Report(8);
  ASSERT_EQ(r.findings.size(), 3u);
  EXPECT_EQ(r.findings[0].summary, "Fan and Dick Wilkins: Both knew Scrooge as a boy");
  EXPECT_EQ(r.findings[0].explanation, "Both knew Scrooge as a boy. [Data: Entities (" +
                                           Ids({"Fan", "Dick Wilkins"}) + "); Relationships (" +
                                           std::to_string(rel_ids_.at("Fan|Dick Wilkins")) + ")]");
  EXPECT_EQ(r.findings[1].summary, "Dick Wilkins (person)");  // ties on degree: by name
  EXPECT_THAT(r.findings[1].explanation, HasSubstr("linked to 1 other entity"));
  EXPECT_EQ(r.findings[2].summary, "Fan (person): Scrooge's little sister.");
  EXPECT_THAT(r.findings[2].explanation,
              HasSubstr("[Data: Entities (" + std::to_string(ids_.at("Fan")) + ")]"));
  EXPECT_DOUBLE_EQ(*r.rating, 0.8);  // no chunks: 0.5 log2(3)
}

TEST_F(ExtractiveReportTest, UnchangedCommunitiesAreReusedAndChangedOnesRedone) {
  Generate();
  const ReportRecord before = Report(4);
  const ReportStageSummary again = Generate();
  EXPECT_EQ(again.generated, 0);
  EXPECT_EQ(again.reused, 4);

  // Marley is in communities 1 and 3: only they are redone.
  EntityRecord marley = store_->GetEntity(ids_.at("Marley")).value().value();
  marley.description = "Scrooge's partner, seven years dead.";
  ASSERT_TRUE(store_->UpsertEntity(marley).ok());
  const ReportStageSummary changed = Generate();
  EXPECT_EQ(changed.generated, 2);
  EXPECT_EQ(changed.reused, 2);
  for (const CommunityReportOutcome& o : changed.outcomes) {
    const bool redone = o.community_id == 1 || o.community_id == 3;
    EXPECT_EQ(o.action, redone ? ReportAction::kGenerated : ReportAction::kReused)
        << o.community_id;
  }
  EXPECT_EQ(Report(4).input_hash, before.input_hash);
  EXPECT_NE(Report(3).input_hash, "");

  // Different options shape different reports: everything is redone.
  ExtractiveReportOptions fewer;
  fewer.max_findings = 3;
  EXPECT_EQ(Generate(fewer).generated, 4);
  EXPECT_LE(Report(1).findings.size(), 3u);
}

TEST_F(ExtractiveReportTest, ReplacesLlmReportsAndWritesGapsForEmptyCommunities) {
  ReportRecord llm;
  llm.community_id = 4;
  llm.title = "Written by a model";
  llm.summary = "...";
  llm.generator = ReportGenerator::kLlm;
  llm.model = "some-model";
  ASSERT_TRUE(store_->PutReport(llm).ok());
  Generate();
  EXPECT_EQ(Report(4).generator, ReportGenerator::kExtractive);
  EXPECT_EQ(Report(4).title, "Bob Cratchit and Tiny Tim");

  auto st = store_->ReplaceCommunities(ClusteringRecord{},
                                       {Community(1, 0, {}, {"Scrooge"}), Community(9, 0, {}, {})});
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  const ReportStageSummary s = Generate();
  EXPECT_EQ(s.gaps, 1);
  EXPECT_EQ(Report(9).status, ReportStatus::kGap);
  const ReportRecord alone = Report(1);
  EXPECT_EQ(alone.title, "Scrooge");
  EXPECT_THAT(alone.summary, StartsWith("Scrooge (person) alone; its source text spans 4 chunks."));
  EXPECT_GE(alone.findings.size(), 3u);
}

TEST_F(ExtractiveReportTest, ReportsProgressAndHonoursCancel) {
  std::vector<int64_t> done;
  auto s = GenerateExtractiveReports(*store_, Tok(), {},
                                     [&](const ReportProgress& p) { done.push_back(p.done); });
  ASSERT_TRUE(s.ok());
  EXPECT_THAT(done, ElementsAre(1, 2, 3, 4));

  std::atomic<bool> cancel{true};
  ExtractiveReportOptions o;
  o.cancel = &cancel;
  EXPECT_EQ(GenerateExtractiveReports(*store_, Tok(), o).status().code(), ErrorCode::kCancelled);

  ExtractiveReportOptions bad;
  bad.min_findings = 7;
  EXPECT_EQ(GenerateExtractiveReports(*store_, Tok(), bad).status().code(),
            ErrorCode::kInvalidArgument);
}

// ---------------------------------------------------------------- a whole book

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// Runs of capitalised words ("Bob Cratchit", "Scrooge") in a sentence, minus sentence-initial
// function words: a crude stand-in for the NLP extractor, enough to give the report stage a
// book-sized graph.
std::vector<std::string> ProperNouns(const std::string& sentence) {
  static const std::set<std::string> kSkip = {
      "The",  "He",    "She",   "It",    "I",     "But",    "And",       "A",    "In",  "If",
      "What", "There", "This",  "That",  "They",  "You",    "We",        "His",  "Her", "Oh",
      "Yes",  "No",    "So",    "As",    "At",    "When",   "Not",       "Then", "Why", "Who",
      "Now",  "One",   "For",   "Of",    "To",    "With",   "My",        "Is",   "Was", "All",
      "Come", "Let",   "Stave", "STAVE", "Ghost", "Spirit", "Christmas", "Mr",   "Mrs", "Miss"};
  std::vector<std::string> out;
  std::string run;
  auto flush = [&] {
    if (!run.empty() && kSkip.count(run) == 0) out.push_back(run);
    run.clear();
  };
  size_t i = 0;
  while (i < sentence.size()) {
    size_t j = i;
    while (j < sentence.size() && std::isalpha(static_cast<unsigned char>(sentence[j]))) ++j;
    if (j == i) {
      if (sentence[i] != ' ') flush();
      ++i;
      continue;
    }
    const std::string word = sentence.substr(i, j - i);
    const bool cap = std::isupper(static_cast<unsigned char>(word[0])) && word.size() >= 3 &&
                     std::islower(static_cast<unsigned char>(word.back()));
    if (cap && !(run.empty() && kSkip.count(word) != 0)) {
      run += (run.empty() ? "" : " ") + word;
    } else {
      flush();
    }
    i = j;
  }
  flush();
  return out;
}

TEST(ExtractiveBookTest, ReportsOnAWholeBookQuicklyAndAnswersWithoutAModel) {
  testing::TempDir dir;
  auto opened = Store::Open(dir / "index.db");
  ASSERT_TRUE(opened.ok());
  Store& store = **opened;
  Document doc;
  doc.id = "christmas_carol.txt";
  doc.title = "A Christmas Carol";
  doc.source_path = doc.id;
  doc.text = ReadFile(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
  doc.content_hash = "book";
  ASSERT_GT(doc.text.size(), 100000u);
  auto chunks = ChunkDocument(doc, ChunkOptions{});
  ASSERT_TRUE(chunks.ok());

  // The graph: proper nouns in two or more chunks, linked when a sentence names both.
  std::map<std::string, std::set<std::string>> noun_chunks;
  std::map<std::pair<std::string, std::string>, double> pairs;
  std::vector<ChunkRecord> records;
  for (const Chunk& c : *chunks) {
    records.push_back({c.id, c.document_id, c.index, c.text, static_cast<int64_t>(c.n_tokens),
                       static_cast<int64_t>(c.start_token)});
    for (const Sentence& s : SplitSentences(c.text)) {
      std::vector<std::string> nouns = ProperNouns(s.text);
      for (const auto& n : nouns) noun_chunks[n].insert(c.id);
      for (size_t a = 0; a < nouns.size(); ++a) {
        for (size_t b = a + 1; b < nouns.size(); ++b) {
          if (nouns[a] != nouns[b]) pairs[std::minmax(nouns[a], nouns[b])] += 1;
        }
      }
    }
  }
  ASSERT_TRUE(store.UpsertDocument(doc).ok());
  ASSERT_TRUE(store.ReplaceDocumentChunks(doc.id, records).ok());
  std::map<std::string, int64_t> ids;
  std::vector<int64_t> node_entity;
  std::map<int64_t, uint32_t> node_of;
  for (const auto& [noun, in] : noun_chunks) {
    if (in.size() < 2) continue;
    EntityRecord e;
    e.name = noun;
    e.name_key = NormalizeEntityName(noun);
    e.type = "proper noun";
    auto id = store.UpsertEntity(e);
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE(store.SetEntityChunks(*id, {in.begin(), in.end()}).ok());
    ids[noun] = *id;
    node_of[*id] = static_cast<uint32_t>(node_entity.size());
    node_entity.push_back(*id);
  }
  std::vector<GraphEdge> edges;
  for (const auto& [pair, weight] : pairs) {
    if (ids.count(pair.first) == 0 || ids.count(pair.second) == 0) continue;
    RelationshipRecord r;
    r.source_id = ids[pair.first];
    r.target_id = ids[pair.second];
    r.weight = weight;
    ASSERT_TRUE(store.UpsertRelationship(r).ok());
    edges.push_back({node_of[r.source_id], node_of[r.target_id], weight});
  }
  ASSERT_TRUE(store.RecomputeGraphStats().ok());
  auto hierarchy = HierarchicalLeiden(node_entity.size(), edges, LeidenOptions{});
  ASSERT_TRUE(hierarchy.ok()) << hierarchy.status().ToString();
  std::vector<CommunityRecord> communities;
  for (const Cluster& cl : hierarchy->clusters) {
    CommunityRecord& c = communities.emplace_back();
    c.id = cl.id;
    c.level = cl.level;
    if (cl.parent >= 0) c.parent_id = cl.parent;
    for (uint32_t m : cl.members) c.entity_ids.push_back(node_entity[m]);
  }
  ASSERT_TRUE(store.ReplaceCommunities(ClusteringRecord{}, communities).ok());

  const auto t0 = std::chrono::steady_clock::now();
  auto first = GenerateExtractiveReports(store, Tok());
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = GenerateExtractiveReports(store, Tok());
  const auto t2 = std::chrono::steady_clock::now();
  ASSERT_TRUE(second.ok());
  const auto ms = [](auto d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  std::cout << chunks->size() << " chunks, " << node_entity.size() << " entities, " << edges.size()
            << " relationships, " << communities.size() << " communities in " << hierarchy->levels
            << " levels: reports in " << ms(t1 - t0) << " ms, re-run in " << ms(t2 - t1) << " ms\n";
  EXPECT_EQ(first->generated + first->gaps, static_cast<int64_t>(communities.size()));
  EXPECT_EQ(first->gaps, 0);
  EXPECT_EQ(second->reused, first->generated);
  EXPECT_LT(ms(t1 - t0), 20000);  // Debug and sanitizer builds; Release is far faster

  // A community of three or more members has three findings or more (singletons of the crude
  // graph may not: one sentence, no relationship, no description).
  std::map<int64_t, size_t> size_of;
  for (const CommunityRecord& c : communities) size_of[c.id] = c.entity_ids.size();
  auto reports = store.ListReports();
  ASSERT_TRUE(reports.ok());
  for (const ReportRecord& r : *reports) {
    if (size_of[r.community_id] >= 3) {
      EXPECT_GE(r.findings.size(), 3u) << r.full_content;
    }
  }

  GlobalSearchOptions g;
  g.level = 0;
  auto themes = ExtractiveGlobalSearch(store, Tok(), "What are the main themes of this story?", g);
  ASSERT_TRUE(themes.ok()) << themes.status().ToString();
  EXPECT_FALSE(themes->not_covered);
  EXPECT_GE(themes->citations.size(), 3u);
  std::cout << "---- global (level 0), " << themes->stats.wall_time.count() << " ms\n"
            << themes->answer << "\n";

  auto marley = ExtractiveLocalSearch(store, nullptr, Tok(), "Who is Jacob Marley?");
  ASSERT_TRUE(marley.ok()) << marley.status().ToString();
  EXPECT_FALSE(marley->nothing_found);
  EXPECT_THAT(marley->answer, HasSubstr("Marley"));
  std::cout << "---- local\n" << marley->answer << "\n";

  // A finding from a sentence quotes that sentence, read again from its chunk when the report
  // is written: it names every entity the finding lists.
  int checked = 0;
  for (const ReportRecord& r : *reports) {
    for (const Finding& f : r.findings) {
      if (f.explanation.find("(chunk ") == std::string::npos) continue;  // not from a sentence
      std::string text = f.summary;
      const std::string open = "\xE2\x80\x9C", close = "\xE2\x80\x9D ";
      if (f.explanation.rfind(open, 0) == 0) {
        text = f.explanation.substr(open.size(), f.explanation.find(close) - open.size());
      }
      if (text.ends_with("\xE2\x80\xA6")) continue;  // cut short: a name may be past the cut
      const std::string words = " " + NormalizeEntityName(text) + " ";
      for (const std::string& name : f.entities) {
        EXPECT_NE(words.find(" " + NormalizeEntityName(name) + " "), std::string::npos)
            << name << " in: " << text;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
}

}  // namespace
}  // namespace grag
