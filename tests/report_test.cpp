// Community reports: prompt building within the token budget, child-report substitution,
// tolerant parsing, retry-once-then-gap, input hashes (re-runs and changed descriptions), and the
// finest-level-first order.
#include "grag/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "grag/prompts.h"
#include "grag/store.h"
#include "grag/tokenizer.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kEntityHeader = "id,entity,type,description,degree\n";

// The name in the first row of the prompt's entity table.
std::string FirstEntity(const std::string& prompt) {
  const std::string marker = std::string(kEntityHeader) + "1,";
  const auto at = prompt.find(marker);
  if (at == std::string::npos) return "?";
  const auto start = at + marker.size();
  return prompt.substr(start, prompt.find(',', start) - start);
}

// Rows in the prompt's entity table.
int EntityRows(const std::string& prompt) {
  auto start = prompt.find(kEntityHeader);
  if (start == std::string::npos) return 0;
  start += kEntityHeader.size();
  const std::string table = prompt.substr(start, prompt.find("</entities>", start) - start);
  return static_cast<int>(std::count(table.begin(), table.end(), '\n'));
}

// A well-formed reply naming the community after the first entity of its table.
std::string GoodReply(const std::string& prompt) {
  const std::string who = FirstEntity(prompt);
  nlohmann::json j = {
      {"title", "Report on " + who},
      {"summary", "What ties " + who + " to the rest."},
      {"rating", 6.5},
      {"rating_explanation", "Central to the story."},
      {"findings",
       {{{"summary", "First about " + who}, {"explanation", "Why one."}, {"entities", {who}}},
        {{"summary", "Second"}, {"explanation", "Why two."}, {"entities", {who}}},
        {{"summary", "Third"},
         {"explanation", "Why three."},
         {"entities", nlohmann::json::array()}}}}};
  return j.dump();
}

Result<std::string> GoodResponder(const ChatRequest& req) {
  return GoodReply(req.messages.front().content);
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(dir_ / "index.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    auto tok = Tokenizer::Get("o200k_base");
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tok_ = *tok;
  }

  int64_t Entity(const std::string& name, const std::string& description,
                 const std::string& type = "person") {
    EntityRecord e;
    e.name_key = name;
    e.name = name;
    e.type = type;
    e.description = description;
    auto id = store_->UpsertEntity(e);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    ids_[name] = id.value_or(0);
    return id.value_or(0);
  }

  void Relate(const std::string& a, const std::string& b, const std::string& description,
              double weight = 1) {
    RelationshipRecord r;
    r.source_id = ids_.at(a);
    r.target_id = ids_.at(b);
    r.description = description;
    r.weight = weight;
    ASSERT_TRUE(store_->UpsertRelationship(r).ok());
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

  void SetCommunities(const std::vector<CommunityRecord>& communities) {
    auto st = store_->ReplaceCommunities(ClusteringRecord{}, communities);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
  }

  // Eight entities in a three-level hierarchy:
  //   level 0: 1 {N1..N8}
  //   level 1: 10 {N1..N4}, 11 {N5..N8}
  //   level 2: 100 {N1,N2}, 101 {N3,N4} (under 10); 110 {N5,N6}, 111 {N7,N8} (under 11)
  void BuildHierarchy() {
    for (int i = 1; i <= 8; ++i) {
      Entity("N" + std::to_string(i), "description of N" + std::to_string(i));
    }
    Relate("N1", "N2", "n1 and n2");
    Relate("N3", "N4", "n3 and n4");
    Relate("N5", "N6", "n5 and n6");
    Relate("N7", "N8", "n7 and n8");
    Relate("N1", "N3", "n1 and n3");
    Relate("N5", "N7", "n5 and n7");
    Relate("N1", "N5", "n1 and n5");
    SetCommunities({Community(1, 0, {}, {"N1", "N2", "N3", "N4", "N5", "N6", "N7", "N8"}),
                    Community(10, 1, 1, {"N1", "N2", "N3", "N4"}),
                    Community(11, 1, 1, {"N5", "N6", "N7", "N8"}),
                    Community(100, 2, 10, {"N1", "N2"}), Community(101, 2, 10, {"N3", "N4"}),
                    Community(110, 2, 11, {"N5", "N6"}), Community(111, 2, 11, {"N7", "N8"})});
  }

  std::map<int64_t, ReportAction> Actions(const ReportStageSummary& s) {
    std::map<int64_t, ReportAction> out;
    for (const auto& o : s.outcomes) out[o.community_id] = o.action;
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  const Tokenizer* tok_ = nullptr;
  std::map<std::string, int64_t> ids_;
};

// ---------------------------------------------------------------- the prompt

TEST_F(ReportTest, PromptCarriesSeedPromptAndTablesRankedByDegree) {
  Entity("Scrooge", "A miser, later generous.");
  Entity("Cratchit", "Scrooge's clerk, poor but cheerful.");
  Entity("Marley", "Scrooge's late partner, a ghost.");
  Entity("Fred", "Scrooge's nephew.");
  Entity("Tiny Tim", "Cratchit's son.");
  Entity("London", "The city of the story.", "geo");
  Relate("Scrooge", "Cratchit", "employs", 3);
  Relate("Scrooge", "Marley", "was partner of", 9);
  Relate("Scrooge", "Fred", "is uncle of", 2);
  Relate("Scrooge", "London", "lives in", 1);
  Relate("Cratchit", "Tiny Tim", "is father of", 8);
  Relate("Cratchit", "Marley", "remembers", 1);
  SetCommunities(
      {Community(1, 0, {}, {"London", "Tiny Tim", "Fred", "Marley", "Cratchit", "Scrooge"})});

  ScriptedChatModel model(GoodResponder);
  auto summary = GenerateReports(*store_, model, *tok_, ReportOptions{});
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->generated, 1);
  ASSERT_EQ(model.RequestCount(), 1u);
  const ChatRequest req = model.Requests()[0];
  EXPECT_TRUE(req.json_mode);
  EXPECT_EQ(req.max_tokens, 4000);
  ASSERT_EQ(req.messages.size(), 1u);
  const std::string& prompt = req.messages[0].content;

  // Seed 000's prompt, verbatim around the tables, then the JSON instruction.
  EXPECT_EQ(
      prompt.rfind("Write a report on the community of related entities below.\n\n<entities>\n"
                   "id,entity,type,description,degree\n",
                   0),
      0u);
  EXPECT_THAT(prompt, HasSubstr("</entities>\n<relationships>\nid,source,target,description,"
                                "weight\n"));
  EXPECT_THAT(prompt, HasSubstr("</relationships>\n\nReturn a title, a one-paragraph summary of "
                                "what ties these entities\ntogether, and 3 to 6 key findings, "
                                "each with the entities it rests on.\n\n" +
                                std::string(kReportJsonInstruction)));

  // Entities by degree (Scrooge 4, Cratchit 3, Marley 2, then degree 1 by name).
  EXPECT_THAT(prompt, HasSubstr("1,Scrooge,person,\"A miser, later generous.\",4\n"
                                "2,Cratchit,person,\"Scrooge's clerk, poor but cheerful.\",3\n"
                                "3,Marley,person,\"Scrooge's late partner, a ghost.\",2\n"
                                "4,Fred,person,Scrooge's nephew.,1\n"
                                "5,London,geo,The city of the story.,1\n"
                                "6,Tiny Tim,person,Cratchit's son.,1\n</entities>"));
  // Relationships by combined degree, then weight.
  // Ties on combined degree (5) go to the heavier, then the older relationship.
  EXPECT_THAT(prompt, HasSubstr("\n1,Scrooge,Cratchit,employs,3\n"
                                "2,Scrooge,Marley,was partner of,9\n"
                                "3,Scrooge,Fred,is uncle of,2\n"
                                "4,Scrooge,London,lives in,1\n"
                                "5,Cratchit,Marley,remembers,1\n"
                                "6,Cratchit,Tiny Tim,is father of,8\n</relationships>"));

  // The stored report, with markdown full_content as global search reads it.
  auto report = store_->GetReport(1);
  ASSERT_TRUE(report.ok() && report->has_value());
  const ReportRecord& r = **report;
  EXPECT_EQ(r.status, ReportStatus::kOk);
  EXPECT_EQ(r.title, "Report on Scrooge");
  EXPECT_EQ(r.full_content,
            "# Report on Scrooge\n\nWhat ties Scrooge to the rest.\n\n## First about Scrooge\n\n"
            "Why one.\n\n## Second\n\nWhy two.\n\n## Third\n\nWhy three.");
  ASSERT_EQ(r.findings.size(), 3u);
  EXPECT_THAT(r.findings[0].entities, ElementsAre("Scrooge"));
  EXPECT_EQ(r.rating, 6.5);
  EXPECT_EQ(r.rating_explanation, "Central to the story.");
  EXPECT_EQ(r.model, "scripted");
  EXPECT_EQ(r.generator, ReportGenerator::kLlm);
  EXPECT_EQ(r.input_hash.size(), 64u);
}

TEST_F(ReportTest, EditedPromptTemplateStillGetsTheJsonInstruction) {
  Entity("A", "a");
  Entity("B", "b");
  Relate("A", "B", "knows");
  SetCommunities({Community(1, 0, {}, {"A", "B"})});
  ReportOptions options;
  options.prompt = "Summarise.\nE: {{entities}}\nR: {{relationships}}";  // no trailing newline
  auto plan = PlanReports(*store_, *tok_, options, "m");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->size(), 1u);
  const std::string& prompt = (*plan)[0].input.prompt;
  EXPECT_EQ(prompt.rfind("Summarise.\nE: \nid,entity", 0), 0u);
  EXPECT_THAT(prompt, HasSubstr("\n1,A,B,knows,1\n\n" + std::string(kReportJsonInstruction)));
}

TEST_F(ReportTest, TruncatesWholeRowsByRankWithinTheBudget) {
  // A star: the hub has the highest degree; Leaf<i> has degree i, through entities outside the
  // community (degrees are over the whole graph).
  std::string filler;
  for (int i = 0; i < 12; ++i) filler += " The ledger, in detail, shows the firm's accounts.";
  Entity("Hub", "hub" + filler);
  for (int i = 1; i <= 10; ++i) Entity("Leaf" + std::to_string(i), "leaf" + filler);
  for (int i = 1; i <= 9; ++i) Entity("X" + std::to_string(i), "outside");
  std::vector<std::string> members = {"Hub"};
  Relate("Hub", "X1", "outside");
  for (int i = 1; i <= 10; ++i) {
    const std::string leaf = "Leaf" + std::to_string(i);
    members.push_back(leaf);
    Relate("Hub", leaf, "hub to " + leaf);
    for (int j = 1; j < i; ++j) Relate(leaf, "X" + std::to_string(j), "outside");
  }
  SetCommunities({Community(1, 0, {}, members),
                  Community(2, 0, {}, {"X1", "X2", "X3", "X4", "X5", "X6", "X7", "X8", "X9"})});

  ReportOptions options;
  options.max_context_tokens = 800;
  auto plan = PlanReports(*store_, *tok_, options, "m");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const ReportInput& in = (*plan)[0].input;
  EXPECT_TRUE(in.truncated);
  EXPECT_EQ(in.entities_total, 11);
  EXPECT_EQ(in.relationships_total, 10);
  EXPECT_GT(in.entities_listed, 0);
  EXPECT_LT(in.entities_listed, 11);
  EXPECT_LE(in.context_tokens, 800);
  EXPECT_GT(in.context_tokens, 600);  // the budget is used, not wasted
  EXPECT_EQ(in.context_tokens,
            static_cast<int64_t>(tok_->Count(in.entities) + tok_->Count(in.relationships)));

  // Whole rows only: every listed row is complete, and listed in rank order.
  std::vector<std::string> lines;
  size_t pos = in.entities.find(kEntityHeader) + kEntityHeader.size();
  while (pos < in.entities.size()) {
    const size_t nl = in.entities.find('\n', pos);
    lines.push_back(in.entities.substr(pos, nl - pos));
    pos = nl + 1;
  }
  ASSERT_EQ(static_cast<int64_t>(lines.size()), in.entities_listed);
  EXPECT_EQ(lines[0].rfind("1,Hub,person,\"hub The ledger", 0), 0u);  // degree 11
  EXPECT_EQ(lines[1].rfind("2,Leaf10,person,", 0), 0u);               // 10
  EXPECT_EQ(lines[2].rfind("3,Leaf9,person,", 0), 0u);                // 9
  for (const std::string& line : lines) {
    EXPECT_THAT(line, HasSubstr(filler + "\","));
  }
  // The lowest-ranked entity is left out entirely.
  EXPECT_THAT(in.entities, Not(HasSubstr("Leaf1,")));
  // Every listed relationship has its entities listed.
  EXPECT_GT(in.relationships_listed, 0);
  EXPECT_LT(in.relationships_listed, 10);
  const std::set<std::string> listed(in.entity_names.begin(), in.entity_names.end());
  pos = in.relationships.find("weight\n") + 7;
  for (int64_t n = 0; n < in.relationships_listed; ++n) {
    const size_t nl = in.relationships.find('\n', pos);
    const std::string row = in.relationships.substr(pos, nl - pos);
    const size_t a = row.find(',') + 1, b = row.find(',', a) + 1, c = row.find(',', b);
    EXPECT_EQ(listed.count(row.substr(a, b - 1 - a)), 1u) << row;
    EXPECT_EQ(listed.count(row.substr(b, c - b)), 1u) << row;
    pos = nl + 1;
  }
  EXPECT_THAT(in.relationships, HasSubstr("\n1,Hub,Leaf10,hub to Leaf10,1\n"));
}

TEST_F(ReportTest, ParentUsesChildReportsInPlaceOfTheLargestChildsRows) {
  std::string filler;
  for (int i = 0; i < 20; ++i) filler += " Marley's ghost walks the counting-house at night.";
  for (int i = 1; i <= 4; ++i) {
    Entity("A" + std::to_string(i), "alpha-marker-A" + std::to_string(i) + filler);
    Entity("B" + std::to_string(i),
           "beta-marker-B" + std::to_string(i) + " keeps a shop on Cornhill, near the Exchange.");
  }
  Relate("A1", "A2", "a-internal-marker");
  Relate("A2", "A3", "a-internal-marker");
  Relate("A3", "A4", "a-internal-marker");
  Relate("B1", "B2", "b-internal-marker");
  Relate("B2", "B3", "b-internal-marker");
  Relate("B3", "B4", "b-internal-marker");
  Relate("A1", "B1", "bridge-marker");
  SetCommunities({Community(1, 0, {}, {"A1", "A2", "A3", "A4", "B1", "B2", "B3", "B4"}),
                  Community(10, 1, 1, {"A1", "A2", "A3", "A4"}),
                  Community(11, 1, 1, {"B1", "B2", "B3", "B4"})});

  // A budget the big child fits in but the parent does not.
  auto sizes = PlanReports(*store_, *tok_, ReportOptions{}, "scripted");
  ASSERT_TRUE(sizes.ok());
  std::map<int64_t, int64_t> tokens;
  for (const auto& p : *sizes) tokens[p.input.community_id] = p.input.context_tokens;
  ASSERT_GT(tokens[1], tokens[10] + 100);
  ReportOptions options;
  options.max_context_tokens = (tokens[1] + tokens[10]) / 2;

  ScriptedChatModel model(GoodResponder);
  auto summary = GenerateReports(*store_, model, *tok_, options);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->generated, 3);
  EXPECT_EQ(summary->used_child_reports, 1);
  ASSERT_EQ(model.RequestCount(), 3u);
  const std::string parent = model.Requests()[2].messages[0].content;

  // The big child's report stands in for its rows; the small child's rows stay; so does the
  // relationship between the children.
  EXPECT_THAT(parent, HasSubstr("-----Report R1-----\n# Report on A1\n\nWhat ties A1"));
  EXPECT_THAT(parent, Not(HasSubstr("alpha-marker-A2")));
  EXPECT_THAT(parent, Not(HasSubstr("alpha-marker-A1")));
  EXPECT_THAT(parent, Not(HasSubstr("a-internal-marker")));
  EXPECT_THAT(parent, Not(HasSubstr("Report on B")));
  for (int i = 1; i <= 4; ++i) EXPECT_THAT(parent, HasSubstr("beta-marker-B" + std::to_string(i)));
  EXPECT_THAT(parent, HasSubstr("b-internal-marker"));
  EXPECT_THAT(parent, HasSubstr(",A1,B1,bridge-marker,1\n"));

  const auto& outcomes = summary->outcomes;
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[2].community_id, 1);
  EXPECT_THAT(outcomes[2].child_reports_used, ElementsAre(10));
  EXPECT_FALSE(outcomes[2].truncated);
  EXPECT_LE(outcomes[2].context_tokens, options.max_context_tokens);
  EXPECT_TRUE(outcomes[0].child_reports_used.empty());

  // The parent's hash covers the child report it used: the plan now says all is up to date.
  auto plan = PlanReports(*store_, *tok_, options, "scripted");
  ASSERT_TRUE(plan.ok());
  for (const auto& p : *plan) EXPECT_TRUE(p.up_to_date) << p.input.community_id;
}

TEST_F(ReportTest, WhenEvenChildReportsDoNotFitKeepsReportsThenRowsByRank) {
  std::string filler;
  for (int i = 0; i < 5; ++i) filler += " Fezziwig's ball lasts long into the night.";
  for (int i = 1; i <= 3; ++i) {
    Entity("A" + std::to_string(i), "a" + filler);
    Entity("B" + std::to_string(i), "b" + filler);
  }
  Relate("A1", "A2", "a");
  Relate("A2", "A3", "a");
  Relate("B1", "B2", "b");
  Relate("B2", "B3", "b");
  Relate("A1", "B1", "bridge");
  SetCommunities({Community(1, 0, {}, {"A1", "A2", "A3", "B1", "B2", "B3"}),
                  Community(10, 1, 1, {"A1", "A2", "A3"}),
                  Community(11, 1, 1, {"B1", "B2", "B3"})});
  // Child reports as long as the children themselves: substituting them saves nothing.
  auto long_reply = [&](const ChatRequest& req) -> Result<std::string> {
    const std::string who = FirstEntity(req.messages[0].content);
    nlohmann::json j = {{"title", "Long report on " + who},
                        {"summary", who + filler + filler + filler},
                        {"findings", nlohmann::json::array()}};
    return j.dump();
  };
  ScriptedChatModel model(long_reply);
  ReportOptions options;
  options.max_context_tokens = 400;
  auto summary = GenerateReports(*store_, model, *tok_, options);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  ASSERT_EQ(summary->outcomes.size(), 3u);
  const CommunityReportOutcome& root = summary->outcomes[2];
  EXPECT_TRUE(root.truncated);
  EXPECT_LE(root.context_tokens, 400);
  EXPECT_THAT(root.child_reports_used, ElementsAre(10));  // the second report did not fit
  EXPECT_FALSE(summary->outcomes[0].truncated);           // each child fits on its own
  const std::string prompt = model.Requests()[2].messages[0].content;
  EXPECT_THAT(prompt, HasSubstr("-----Report R1-----\n# Long report on A1"));
  EXPECT_THAT(prompt, Not(HasSubstr("Long report on B1")));
  EXPECT_THAT(prompt, Not(HasSubstr(",A2,")));  // covered by the report
  EXPECT_EQ(summary->generated, 3);
}

// ---------------------------------------------------------------- the reply

TEST(ParseReportReplyTest, AcceptsFencesProseAndWrappers) {
  const std::string obj =
      R"({"title": "T", "summary": "S", "rating": 7, "rating_explanation": "R",
          "findings": [{"summary": "F", "explanation": "E", "entities": ["A", "B"]}]})";
  for (const std::string& reply :
       {obj, "```json\n" + obj + "\n```", "Here is the report:\n" + obj + "\nHope it helps.",
        R"({"report": )" + obj + "}", "[" + obj + "]", "// note\n" + obj}) {
    auto r = ParseReportReply(reply);
    ASSERT_TRUE(r.ok()) << reply << ": " << r.status().ToString();
    EXPECT_EQ(r->title, "T");
    EXPECT_EQ(r->summary, "S");
    EXPECT_EQ(r->rating, 7);
    EXPECT_EQ(r->rating_explanation, "R");
    ASSERT_EQ(r->findings.size(), 1u);
    EXPECT_EQ(r->findings[0].summary, "F");
    EXPECT_EQ(r->findings[0].explanation, "E");
    EXPECT_THAT(r->findings[0].entities, ElementsAre("A", "B"));
  }
}

TEST(ParseReportReplyTest, AcceptsLooseShapes) {
  // Findings as strings, no rating, no title.
  auto strings = ParseReportReply(R"({"summary": "S", "findings": ["one", "two"]})");
  ASSERT_TRUE(strings.ok());
  EXPECT_EQ(strings->title, "");
  EXPECT_EQ(strings->rating, std::nullopt);
  ASSERT_EQ(strings->findings.size(), 2u);  // 2 findings: kept
  EXPECT_EQ(strings->findings[1].summary, "two");
  EXPECT_EQ(strings->findings[1].explanation, "");

  // entities as one string, ids as numbers, objects with names; duplicates dropped.
  auto ents = ParseReportReply(R"({"summary": "S", "findings": [
      {"summary": "a", "entities": "Scrooge, Marley; Fred"},
      {"summary": "b", "entities": [3, "4", {"name": "Belle"}, "Belle"]}]})");
  ASSERT_TRUE(ents.ok());
  EXPECT_THAT(ents->findings[0].entities, ElementsAre("Scrooge", "Marley", "Fred"));
  EXPECT_THAT(ents->findings[1].entities, ElementsAre("3", "4", "Belle"));

  // A finding with only an explanation gets its first sentence as summary.
  auto expl = ParseReportReply(
      R"({"summary": "S", "findings": [{"explanation": "Scrooge changes. He gives."}]})");
  ASSERT_TRUE(expl.ok());
  EXPECT_EQ(expl->findings[0].summary, "Scrooge changes");
  EXPECT_EQ(expl->findings[0].explanation, "Scrooge changes. He gives.");

  // Findings as an object of summary -> explanation.
  auto map = ParseReportReply(R"({"title": "T", "findings": {"F1": "E1", "F2": "E2"}})");
  ASSERT_TRUE(map.ok());
  ASSERT_EQ(map->findings.size(), 2u);
  EXPECT_EQ(map->findings[0].summary, "F1");
  EXPECT_EQ(map->findings[0].explanation, "E1");

  // Ratings as strings, out of range, or not numbers.
  EXPECT_EQ(ParseReportReply(R"({"summary": "S", "rating": "8.5/10"})")->rating, 8.5);
  EXPECT_EQ(ParseReportReply(R"({"summary": "S", "rating": "Rating: 7"})")->rating, 7);
  EXPECT_EQ(ParseReportReply(R"({"summary": "S", "rating": 15})")->rating, 10);
  EXPECT_EQ(ParseReportReply(R"({"summary": "S", "rating": "high"})")->rating, std::nullopt);

  // Seven findings: all kept.
  nlohmann::json seven = {{"summary", "S"}, {"findings", nlohmann::json::array()}};
  for (int i = 0; i < 7; ++i) seven["findings"].push_back({{"summary", std::to_string(i)}});
  auto r7 = ParseReportReply(seven.dump());
  ASSERT_TRUE(r7.ok());
  EXPECT_EQ(r7->findings.size(), 7u);
}

TEST(ParseReportReplyTest, RejectsWhatIsNotAReport) {
  for (const char* reply : {"", "I cannot write this report.", "{\"title\": \"only a title\"}",
                            "{\"summary\": \"\", \"findings\": []}", "[1, 2]", "{\"summary\": "}) {
    auto r = ParseReportReply(reply);
    ASSERT_FALSE(r.ok()) << reply;
    EXPECT_EQ(r.status().code(), ErrorCode::kParse) << reply;
  }
}

TEST(RenderReportMarkdownTest, TitleSummaryAndFindings) {
  ParsedReport r;
  r.title = "T";
  r.summary = "S";
  r.findings = {{"F1", "E1", {}}, {"F2", "", {}}};
  EXPECT_EQ(RenderReportMarkdown(r), "# T\n\nS\n\n## F1\n\nE1\n\n## F2");
}

TEST_F(ReportTest, UnparseableReplyIsRetriedOnceThenRecordedAsAGapAndNotCached) {
  BuildHierarchy();
  InMemoryCache cache;
  ScriptedModelOptions mo;
  mo.cache = &cache;
  ScriptedChatModel model(
      [](const ChatRequest&) -> Result<std::string> { return std::string("Sorry, no JSON."); }, mo);
  auto summary = GenerateReports(*store_, model, *tok_, ReportOptions{});
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->gaps, 7);
  EXPECT_EQ(summary->generated, 0);
  EXPECT_EQ(summary->llm_calls, 14);
  EXPECT_EQ(model.RequestCount(), 14u);
  EXPECT_EQ(cache.size(), 0u);

  // The retry shows the model its bad reply and asks for the object alone.
  const auto requests = model.Requests();
  size_t retries = 0;
  for (const ChatRequest& req : requests) {
    if (req.messages.size() == 1) continue;
    ++retries;
    ASSERT_EQ(req.messages.size(), 3u);
    EXPECT_EQ(req.messages[1].role, "assistant");
    EXPECT_EQ(req.messages[1].content, "Sorry, no JSON.");
    EXPECT_THAT(req.messages[2].content, HasSubstr("JSON object"));
  }
  EXPECT_EQ(retries, 7u);

  auto reports = store_->ListReports();
  ASSERT_TRUE(reports.ok());
  ASSERT_EQ(reports->size(), 7u);
  for (const ReportRecord& r : *reports) {
    EXPECT_EQ(r.status, ReportStatus::kGap);
    EXPECT_THAT(r.reason, HasSubstr("after 2 calls"));
    EXPECT_THAT(r.reason, HasSubstr("parse_error"));
    EXPECT_EQ(r.full_content, "");
  }

  // Gaps are tried again on the next run.
  ScriptedChatModel good(GoodResponder);
  auto again = GenerateReports(*store_, good, *tok_, ReportOptions{});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->generated, 7);
  EXPECT_EQ(again->gaps, 0);
}

TEST_F(ReportTest, ASecondTryThatParsesGivesAReport) {
  Entity("A", "a");
  Entity("B", "b");
  Relate("A", "B", "knows");
  SetCommunities({Community(1, 0, {}, {"A", "B"})});
  InMemoryCache cache;
  ScriptedModelOptions mo;
  mo.cache = &cache;
  ScriptedChatModel model(mo);
  model.Push(std::string("{\"title\": \"cut off"));
  model.Push(std::string(R"(```json
{"title": "A and B", "summary": "They know each other.", "findings": ["A knows B"]}
```)"));
  auto summary = GenerateReports(*store_, model, *tok_, ReportOptions{});
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->generated, 1);
  EXPECT_EQ(summary->llm_calls, 2);
  EXPECT_EQ(cache.size(), 1u);  // only the good reply
  auto r = store_->GetReport(1);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->title, "A and B");
  EXPECT_EQ((*r)->rating, std::nullopt);
  EXPECT_EQ((*r)->full_content, "# A and B\n\nThey know each other.\n\n## A knows B");
}

TEST_F(ReportTest, FindingsCitingLocalIdsGetEntityNamesAndRunawayListsAreCut) {
  Entity("Scrooge", "miser");
  Entity("Marley", "ghost");
  Entity("Fred", "nephew");
  Relate("Scrooge", "Marley", "partners");
  Relate("Scrooge", "Fred", "uncle");
  SetCommunities({Community(1, 0, {}, {"Scrooge", "Marley", "Fred"})});
  ScriptedChatModel model([](const ChatRequest&) -> Result<std::string> {
    nlohmann::json j = {{"summary", "S"}, {"findings", nlohmann::json::array()}};
    j["findings"].push_back({{"summary", "f"}, {"entities", {1, "2", "Belle", "99", "Scrooge"}}});
    for (int i = 0; i < 20; ++i) j["findings"].push_back("more " + std::to_string(i));
    return j.dump();
  });
  ReportOptions options;
  auto summary = GenerateReports(*store_, model, *tok_, options);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  auto r = store_->GetReport(1);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->title, "Community 1");  // no title in the reply
  ASSERT_EQ((*r)->findings.size(), static_cast<size_t>(options.max_findings));
  // Table order: Scrooge (degree 2), then Fred and Marley (degree 1) by name.
  EXPECT_THAT((*r)->findings[0].entities, ElementsAre("Scrooge", "Fred", "Belle", "99"));
}

// ---------------------------------------------------------------- re-runs and order

TEST_F(ReportTest, ARerunOnAnUnchangedGraphMakesNoCall) {
  BuildHierarchy();
  ScriptedChatModel model(GoodResponder);
  auto first = GenerateReports(*store_, model, *tok_, ReportOptions{});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->generated, 7);
  EXPECT_EQ(first->llm_calls, 7);
  EXPECT_EQ(model.RequestCount(), 7u);

  auto plan = PlanReports(*store_, *tok_, ReportOptions{}, model.model());
  ASSERT_TRUE(plan.ok());
  for (const auto& p : *plan) EXPECT_TRUE(p.up_to_date) << p.input.community_id;

  auto second = GenerateReports(*store_, model, *tok_, ReportOptions{});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->reused, 7);
  EXPECT_EQ(second->generated, 0);
  EXPECT_EQ(second->llm_calls, 0);
  EXPECT_EQ(model.RequestCount(), 7u);

  // A different model or prompt is a different input.
  ReportOptions edited;
  edited.prompt = "Describe.\n{{entities}}\n{{relationships}}\n";
  auto third = GenerateReports(*store_, model, *tok_, edited);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->generated, 7);
}

TEST_F(ReportTest, AChangedDescriptionRegeneratesItsCommunityAndAncestorsOnly) {
  BuildHierarchy();
  ScriptedChatModel model(GoodResponder);
  ReportOptions exact;  // every change to a prompt rewrites the report
  exact.refresh_threshold = 0;
  ASSERT_TRUE(GenerateReports(*store_, model, *tok_, ReportOptions{}).ok());
  ASSERT_EQ(model.RequestCount(), 7u);

  EntityRecord n2 = store_->GetEntity(ids_.at("N2")).value().value();
  n2.description = "a new account of N2";
  ASSERT_TRUE(store_->UpsertEntity(n2).ok());

  auto plan = PlanReports(*store_, *tok_, exact, model.model());
  ASSERT_TRUE(plan.ok());
  std::set<int64_t> stale;
  for (const auto& p : *plan) {
    if (!p.up_to_date) stale.insert(p.input.community_id);
  }
  EXPECT_EQ(stale, (std::set<int64_t>{100, 10, 1}));

  auto second = GenerateReports(*store_, model, *tok_, exact);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->generated, 3);
  EXPECT_EQ(second->reused, 4);
  EXPECT_EQ(model.RequestCount(), 10u);
  const auto actions = Actions(*second);
  for (int64_t id : {100, 10, 1}) EXPECT_EQ(actions.at(id), ReportAction::kGenerated) << id;
  for (int64_t id : {101, 110, 111, 11}) EXPECT_EQ(actions.at(id), ReportAction::kReused) << id;
  const auto requests = model.Requests();
  for (size_t i = 7; i < 10; ++i) {
    EXPECT_THAT(requests[i].messages[0].content, HasSubstr("a new account of N2"));
  }
}

TEST_F(ReportTest, ASmallChangeKeepsReportsStaleWithANoteUntilRefreshAll) {
  BuildHierarchy();
  ScriptedChatModel model(GoodResponder);
  ASSERT_TRUE(GenerateReports(*store_, model, *tok_, ReportOptions{}).ok());
  ASSERT_EQ(model.RequestCount(), 7u);
  const auto written = store_->ListReports().value();
  for (const auto& r : written) {
    EXPECT_FALSE(r.stale);
    EXPECT_FALSE(r.basis.params.empty()) << r.community_id;
    EXPECT_FALSE(r.basis.members.empty()) << r.community_id;
  }

  // A new description changes three prompts but no membership or weight: no call.
  EntityRecord n2 = store_->GetEntity(ids_.at("N2")).value().value();
  n2.description = "a new account of N2";
  ASSERT_TRUE(store_->UpsertEntity(n2).ok());
  auto plan = PlanReports(*store_, *tok_, ReportOptions{}, model.model());
  ASSERT_TRUE(plan.ok());
  for (const auto& p : *plan) {
    EXPECT_EQ(p.keep_stale, !p.up_to_date) << p.input.community_id;
  }
  auto kept = GenerateReports(*store_, model, *tok_, ReportOptions{});
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(model.RequestCount(), 7u);
  EXPECT_EQ(kept->kept_stale, 3);
  EXPECT_EQ(kept->generated, 0);
  const auto actions = Actions(*kept);
  for (int64_t id : {100, 10, 1}) EXPECT_EQ(actions.at(id), ReportAction::kKeptStale) << id;
  const auto stale = store_->GetReport(100).value().value();
  EXPECT_TRUE(stale.stale);
  EXPECT_THAT(stale.full_content, HasSubstr("## Since this report was written"));
  EXPECT_EQ(store_->Stats()->reports_stale, 3);

  // refresh_all rewrites them; a rewritten report is fresh again.
  ReportOptions refresh;
  refresh.refresh_all = true;
  auto rewritten = GenerateReports(*store_, model, *tok_, refresh);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().ToString();
  EXPECT_EQ(rewritten->generated, 3);
  EXPECT_EQ(model.RequestCount(), 10u);
  EXPECT_EQ(store_->Stats()->reports_stale, 0);
  EXPECT_THAT(store_->GetReport(100).value()->full_content, Not(HasSubstr("Since this report")));
}

TEST_F(ReportTest, FinestFirstEachParentAfterItsChildrenConcurrently) {
  BuildHierarchy();
  std::mutex mu;
  std::vector<int> rows_in_order;  // guarded by mu: leaves list 2 entities, level 1 4, root 8
  ScriptedChatModel model([&](const ChatRequest& req) -> Result<std::string> {
    {
      std::lock_guard lock(mu);
      rows_in_order.push_back(EntityRows(req.messages[0].content));
    }
    return GoodReply(req.messages[0].content);
  });
  std::vector<ReportProgress> progress;  // the callback is never called concurrently
  ReportOptions options;
  options.concurrency = 4;
  auto summary = GenerateReports(*store_, model, *tok_, options,
                                 [&](const ReportProgress& p) { progress.push_back(p); });
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  // Leaves (2 rows) first; a level-1 community (4 rows) once its two leaves are done, so at
  // least two leaves precede the first of them; the root (8 rows) last.
  ASSERT_EQ(rows_in_order.size(), 7u);
  EXPECT_EQ(rows_in_order[0], 2);
  EXPECT_EQ(rows_in_order[1], 2);
  EXPECT_EQ(rows_in_order.back(), 8);
  EXPECT_EQ(std::count(rows_in_order.begin(), rows_in_order.end(), 2), 4);
  EXPECT_EQ(std::count(rows_in_order.begin(), rows_in_order.end(), 4), 2);

  std::vector<int64_t> outcome_levels;
  for (const auto& o : summary->outcomes) outcome_levels.push_back(o.level);
  EXPECT_THAT(outcome_levels, ElementsAre(2, 2, 2, 2, 1, 1, 0));
  EXPECT_EQ(summary->outcomes[0].community_id, 100);

  ASSERT_EQ(progress.size(), 7u);
  for (size_t i = 0; i < progress.size(); ++i) {
    EXPECT_EQ(progress[i].done, static_cast<int64_t>(i + 1));
    EXPECT_EQ(progress[i].total, 7);
  }
  EXPECT_EQ(progress.back().level, 0);
  EXPECT_EQ(progress.back().generated, 7);
  EXPECT_EQ(progress.back().llm_calls, 7);
}

TEST_F(ReportTest, ASlowLeafDoesNotHoldBackAParentInAnotherBranch) {
  // Leaf 111's call waits until community 10's call (the other branch's parent) has started, or
  // 10 s. Level by level, 10 could only start after every leaf, 111 included: the wait would run
  // out. Scheduled by dependency, 10 starts as soon as 100 and 101 are done.
  BuildHierarchy();
  std::mutex mu;
  std::condition_variable cv;
  bool parent_started = false;   // guarded by mu
  bool leaf_saw_parent = false;  // guarded by mu
  ScriptedChatModel model([&](const ChatRequest& req) -> Result<std::string> {
    const std::string& prompt = req.messages[0].content;
    const int rows = EntityRows(prompt);
    if (rows == 4 && prompt.find("N1") != std::string::npos) {
      std::lock_guard lock(mu);
      parent_started = true;
      cv.notify_all();
    } else if (rows == 2 && prompt.find("N7") != std::string::npos) {
      std::unique_lock lock(mu);
      leaf_saw_parent = cv.wait_for(lock, std::chrono::seconds(10), [&] { return parent_started; });
    }
    return GoodReply(prompt);
  });
  ReportOptions options;
  options.concurrency = 4;
  auto summary = GenerateReports(*store_, model, *tok_, options);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_TRUE(leaf_saw_parent);
  EXPECT_EQ(summary->generated, 7);
}

TEST_F(ReportTest, AModelOutageStopsTheRunAndKeepsWhatWasStored) {
  BuildHierarchy();
  int calls = 0;  // concurrency 1: one call at a time
  ScriptedChatModel flaky([&](const ChatRequest& req) -> Result<std::string> {
    if (++calls > 3) return Status::Unavailable("HTTP 503 after 6 retries");
    return GoodReply(req.messages[0].content);
  });
  ReportOptions options;
  options.concurrency = 1;
  auto summary = GenerateReports(*store_, flaky, *tok_, options);
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(summary.status().message(), HasSubstr("community 111"));
  auto stored = store_->ListReports();
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->size(), 3u);  // each report was written as it arrived

  ScriptedChatModel good(GoodResponder);
  auto resumed = GenerateReports(*store_, good, *tok_, options);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->reused, 3);
  EXPECT_EQ(resumed->generated, 4);
  EXPECT_EQ(good.RequestCount(), 4u);
}

TEST_F(ReportTest, CancellingStopsBeforeTheNextCommunity) {
  BuildHierarchy();
  ScriptedChatModel model(GoodResponder);
  std::atomic<bool> cancel{false};
  ReportOptions options;
  options.concurrency = 1;
  options.cancel = &cancel;
  auto summary = GenerateReports(*store_, model, *tok_, options,
                                 [&](const ReportProgress& p) { cancel = p.done == 2; });
  ASSERT_FALSE(summary.ok());
  EXPECT_EQ(summary.status().code(), ErrorCode::kCancelled);
  EXPECT_EQ(model.RequestCount(), 2u);
  EXPECT_EQ(store_->ListReports()->size(), 2u);
}

TEST_F(ReportTest, TimeoutsAndEmptyCommunitiesAreGapsNotErrors) {
  Entity("A", "a");
  Entity("B", "b");
  Relate("A", "B", "knows");
  SetCommunities({Community(1, 0, {}, {"A", "B"}), Community(2, 0, {}, {})});
  ScriptedChatModel model([](const ChatRequest&) -> Result<std::string> {
    return Status::Timeout("no reply within 120 s");
  });
  auto summary = GenerateReports(*store_, model, *tok_, ReportOptions{});
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->gaps, 2);
  EXPECT_EQ(model.RequestCount(), 1u);  // a timeout is not retried here: the client did that
  auto one = store_->GetReport(1).value().value();
  EXPECT_EQ(one.status, ReportStatus::kGap);
  EXPECT_THAT(one.reason, HasSubstr("timeout"));
  auto two = store_->GetReport(2).value().value();
  EXPECT_EQ(two.status, ReportStatus::kGap);
  EXPECT_EQ(two.reason, "the community has no entities");
}

TEST_F(ReportTest, NoCommunitiesAndBadOptions) {
  ScriptedChatModel model(GoodResponder);
  auto none = GenerateReports(*store_, model, *tok_, ReportOptions{});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->communities, 0);
  EXPECT_EQ(none->llm_calls, 0);

  for (auto mutate : std::vector<std::function<void(ReportOptions&)>>{
           [](ReportOptions& o) { o.max_context_tokens = 0; },
           [](ReportOptions& o) { o.concurrency = 0; },
           [](ReportOptions& o) { o.max_findings = 0; },
           [](ReportOptions& o) { o.max_tokens = 0; }}) {
    ReportOptions o;
    mutate(o);
    auto r = GenerateReports(*store_, model, *tok_, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  }
}

TEST(CommunityChangeTest, MeasuresMembersWeightAndNewHubs) {
  ReportBasis basis;
  basis.members = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  basis.internal_weight = 20;
  basis.params = "p";
  auto degree = [](int64_t id) -> int64_t { return id == 99 ? 40 : 2; };
  const std::vector<int64_t> same = basis.members;
  EXPECT_DOUBLE_EQ(CommunityChange(basis, same, 20, degree), 0);
  // Weight: |21 - 20| / 20.
  EXPECT_DOUBLE_EQ(CommunityChange(basis, same, 21, degree), 0.05);
  // Members: one added (a leaf), one gone: 2 / 10; the leaf is 2 of 20 degree.
  std::vector<int64_t> swapped = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  EXPECT_DOUBLE_EQ(CommunityChange(basis, swapped, 20, degree), 0.2);
  // A new hub weighs by its degree: 40 of 18 + 40.
  std::vector<int64_t> hub = {1, 2, 3, 4, 5, 6, 7, 8, 9, 99};
  hub.push_back(10);
  EXPECT_NEAR(CommunityChange(basis, hub, 20, degree), 40.0 / 60.0, 1e-12);
  // Order of members does not matter; no basis counts as a full change.
  std::vector<int64_t> reversed(same.rbegin(), same.rend());
  EXPECT_DOUBLE_EQ(CommunityChange(basis, reversed, 20, degree), 0);
  EXPECT_DOUBLE_EQ(CommunityChange(ReportBasis{}, same, 20, degree), 1);
}

}  // namespace
}  // namespace grag
