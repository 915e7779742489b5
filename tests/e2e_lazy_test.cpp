// End to end, budgeted search (issue 38): the real `grag index --no-llm` builds an index of A
// Christmas Carol without a model; `grag query` then has a model configured for queries only
// (the loopback fake LLM), and the router's answer to a global question comes from budgeted
// search (relevance tests, claims, the seed's reduce), not from map-reducing extractive reports.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "support/fake_graphrag_llm.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::FakeGraphRagHandler;
using testing::FakeOpenAIServer;
using testing::PromptKind;
using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

class E2eLazyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "carol";
    ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root_))).exit_code, 0);
    std::filesystem::copy_file(
        std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
        root_ + "/input/christmas_carol.txt");
  }
  std::string Grag(const std::string& args) const { return ShellQuote(GRAG_BINARY) + " " + args; }
  // The model configured for queries (llm.query needs [llm] set: the same server).
  std::string WithModel(const std::string& args) const {
    return "GRAG_LLM_BASE_URL=" + server_.base_url() + " GRAG_LLM_MODEL=query-model " +
           Grag("--root " + ShellQuote(root_) + " " + args);
  }
  std::multiset<std::string> Kinds() const {
    std::multiset<std::string> out;
    for (const auto& r : server_.requests()) {
      if (r.IsChat()) out.insert(PromptKind(r.LastUserMessage()));
    }
    return out;
  }

  TempDir dir_;
  std::string root_;
  FakeOpenAIServer server_{FakeGraphRagHandler()};
};

TEST_F(E2eLazyTest, TheRoutersGlobalAnswerOnANoLlmIndexComesFromBudgetedSearch) {
  auto index = RunCommand(WithModel("--no-llm index --json --no-progress"));
  ASSERT_EQ(index.exit_code, 0) << index.err;
  EXPECT_EQ(server_.request_count(), 0);

  // Before: the route and its bound, for --budget 50.
  auto route = RunCommand(
      WithModel("query --route --method lazy --budget 50 \"What are the main themes?\""));
  ASSERT_EQ(route.exit_code, 0) << route.err;
  EXPECT_NE(route.out.find("at most 60 calls (refine 1 + relevance <= 50 + claims <= 8 + "
                           "reduce 1)"),
            std::string::npos)
      << route.out;
  auto auto_route = RunCommand(WithModel("query --route --json \"What are the main themes?\""));
  ASSERT_EQ(auto_route.exit_code, 0) << auto_route.err;
  EXPECT_EQ(nlohmann::json::parse(auto_route.out)["method"], "lazy");
  EXPECT_EQ(server_.request_count(), 0);  // routing by rules calls nothing

  auto q = RunCommand(WithModel("query --json --budget 50 \"What are the main themes?\""));
  ASSERT_EQ(q.exit_code, 0) << q.err;
  auto j = nlohmann::json::parse(q.out);
  EXPECT_EQ(j["method"], "lazy");
  EXPECT_EQ(j["route"]["method"], "lazy");
  EXPECT_TRUE(j["llm"].get<bool>());
  const auto& s = j["stats"];
  const int relevance = s["relevance_calls"].get<int>();
  EXPECT_GT(relevance, 0);
  EXPECT_LE(relevance, 50);
  EXPECT_EQ(s["refine_calls"], 1);
  EXPECT_EQ(s["reduce_calls"], 1);
  EXPECT_GE(s["claim_calls"].get<int>(), 1);
  EXPECT_FALSE(j["citations"].empty());
  EXPECT_EQ(j["answer"].get<std::string>().rfind("The story is about its main characters.", 0), 0u);
  // What the server saw is what the result reports, kind by kind; no global map call.
  const auto kinds = Kinds();
  EXPECT_EQ(static_cast<int>(kinds.count("lazy_relevance")), relevance);
  EXPECT_EQ(kinds.count("lazy_refine"), 1u);
  EXPECT_EQ(static_cast<int>(kinds.count("lazy_claims")), s["claim_calls"].get<int>());
  EXPECT_EQ(kinds.count("reduce"), 1u);
  EXPECT_EQ(kinds.count("map"), 0u);
  EXPECT_EQ(static_cast<int64_t>(kinds.size()), s["calls"].get<int64_t>());

  // After: the calls by kind on stderr (the reply cache answers this second run).
  auto text = RunCommand(WithModel("query --method lazy \"What are the main themes?\""));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.err.find("lazy: 1 refine + "), std::string::npos) << text.err;
  EXPECT_NE(text.err.find(" reduce = "), std::string::npos) << text.err;

  // A budget out of range is a usage error, not a crash.
  auto bad = RunCommand(WithModel("query --method lazy --budget 0 \"What are the main themes?\""));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE((bad.out + bad.err).find("--budget"), std::string::npos) << bad.err;

  // Without a model: the extractive global digest, and lazy says what it needs.
  auto offline = RunCommand(
      Grag("--root " + ShellQuote(root_) + " query --json \"What are the main themes?\""));
  ASSERT_EQ(offline.exit_code, 0) << offline.err;
  EXPECT_EQ(nlohmann::json::parse(offline.out)["method"], "global");
  auto refused = RunCommand(
      Grag("--root " + ShellQuote(root_) + " query --method lazy \"What are the main themes?\""));
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("none is configured"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace grag
