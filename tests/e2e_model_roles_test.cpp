// End to end: a model per role. Extraction goes to one server, answers to another, and the rest
// (summaries, reports) to [llm]'s, each with the model named for its role.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "support/fake_graphrag_llm.h"
#include "support/fake_openai_server.h"
#include "support/run_command.h"
#include "support/server_process.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::FakeGraphRagHandler;
using testing::FakeOpenAIServer;
using testing::FakeRequest;
using testing::PromptKind;
using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

std::string Grag(const std::string& args) { return ShellQuote(GRAG_BINARY) + " " + args; }

// The prompt kinds a server was sent, and the models asked for.
std::set<std::string> Kinds(const FakeOpenAIServer& s, size_t from = 0) {
  std::set<std::string> out;
  auto requests = s.requests();
  for (size_t i = from; i < requests.size(); ++i) {
    if (requests[i].IsChat()) out.insert(PromptKind(requests[i].LastUserMessage()));
  }
  return out;
}

std::set<std::string> Models(const FakeOpenAIServer& s) {
  std::set<std::string> out;
  for (const FakeRequest& r : s.requests()) {
    if (r.IsChat()) out.insert(r.Model());
  }
  return out;
}

TEST(E2eModelRolesTest, ExtractionAndAnswersGoToTheirOwnModels) {
  TempDir dir;
  const std::string root = dir / "roles";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  std::filesystem::copy_file(
      std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
      root + "/input/christmas_carol.txt");
  FakeOpenAIServer main_server{FakeGraphRagHandler()};     // [llm]: summaries, reports
  FakeOpenAIServer extract_server{FakeGraphRagHandler()};  // llm.extract
  FakeOpenAIServer query_server{FakeGraphRagHandler()};    // llm.query
  const std::string env =
      "GRAG_LLM_BASE_URL=" + main_server.base_url() + " GRAG_LLM_MODEL=strong-model " +
      "GRAG_LLM_EXTRACT_BASE_URL=" + extract_server.base_url() +
      " GRAG_LLM_EXTRACT_MODEL=small-model GRAG_LLM_QUERY_BASE_URL=" + query_server.base_url() +
      " ";

  // Every chunk gleaned, so that gleaning's calls are seen to go to the extraction model too.
  auto index = RunCommand(env + Grag("--root " + ShellQuote(root) +
                                     " --set extraction.glean_below_yield=0 index --json"));
  ASSERT_EQ(index.exit_code, 0) << index.err;
  EXPECT_GT(nlohmann::json::parse(index.out)["entities"].get<int>(), 50);
  EXPECT_EQ(Kinds(extract_server), (std::set<std::string>{"extract", "glean"}));
  EXPECT_EQ(Models(extract_server), std::set<std::string>{"small-model"});
  EXPECT_EQ(query_server.request_count(), 0);
  const std::set<std::string> main_kinds = Kinds(main_server);
  EXPECT_FALSE(main_kinds.count("extract")) << "an extraction went to [llm]'s server";
  EXPECT_TRUE(main_kinds.count("report") || main_kinds.count("summarize"));
  EXPECT_EQ(Models(main_server), std::set<std::string>{"strong-model"});

  const int extract_before = extract_server.request_count();
  const int main_before = main_server.request_count();
  for (const char* question : {"query --method global --level 0 --json 'What are the main themes?'",
                               "query --method local --json 'Who is Jacob Marley?'"}) {
    auto q = RunCommand(env + Grag("--root " + ShellQuote(root) + " " + question));
    ASSERT_EQ(q.exit_code, 0) << q.err;
  }
  EXPECT_EQ(extract_server.request_count(), extract_before);
  EXPECT_EQ(main_server.request_count(), main_before);
  const std::set<std::string> answered = Kinds(query_server);
  EXPECT_TRUE(answered.count("map") && answered.count("reduce") && answered.count("local"))
      << ::testing::PrintToString(answered);
  EXPECT_EQ(Models(query_server), std::set<std::string>{"strong-model"});

  auto stats = RunCommand(Grag("--root " + ShellQuote(root) + " stats --json"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  auto s = nlohmann::json::parse(stats.out);
  EXPECT_GT(s["llm_calls_by_role"]["extract"].get<int>(), 0);
  EXPECT_GT(s["llm_calls_by_role"]["summarize"].get<int>(), 0);
  // Tokens by role, and with prices (the small model's own), costs at each role's prices.
  const std::string prices =
      "--set llm.price_input_per_million=5 --set llm.price_output_per_million=15 "
      "--set llm.extract.price_input_per_million=0.1 "
      "--set llm.extract.price_output_per_million=0.4 ";
  auto priced =
      RunCommand(env + Grag("--root " + ShellQuote(root) + " " + prices + "stats --json"));
  ASSERT_EQ(priced.exit_code, 0) << priced.err;
  const auto by_role = nlohmann::json::parse(priced.out)["llm_by_role"];
  for (const char* role : {"extract", "summarize"}) {
    const auto& r = by_role[role];
    ASSERT_GT(r["prompt_tokens"].get<double>(), 0) << role << " " << by_role.dump();
    const double in = std::string(role) == "extract" ? 0.1 : 5;
    const double out = std::string(role) == "extract" ? 0.4 : 15;
    EXPECT_NEAR(
        r["cost"].get<double>(),
        (r["prompt_tokens"].get<double>() * in + r["completion_tokens"].get<double>() * out) / 1e6,
        1e-9)
        << role;
  }
  auto text = RunCommand(env + Grag("--root " + ShellQuote(root) + " " + prices + "stats"));
  EXPECT_THAT(text.out, ::testing::HasSubstr("tokens       extract ")) << text.out;

  // A request may choose the model that answers it, among server.query_models, on the query
  // role's server; any other is refused before a call.
  {
    testing::ServerProcess serve;
    ASSERT_TRUE(serve.Start("env " + env +
                            Grag("--root " + ShellQuote(root) +
                                 " --set server.query_models=cheap-model,strong-model"
                                 " serve --port 0")))
        << serve.log();
    const std::string url = "http://127.0.0.1:" + std::to_string(serve.port()) + "/v1/query";
    auto ask = [&](const std::string& model) {
      nlohmann::json body = {{"question", "Who is Jacob Marley?"}, {"method", "local"}};
      if (!model.empty()) body["model"] = model;
      return RunCommand("curl -s -o /dev/stderr -w '%{http_code}' -X POST " + ShellQuote(url) +
                        " -H 'Content-Type: application/json' -d " + ShellQuote(body.dump()));
    };
    const size_t before = query_server.requests().size();
    auto cheap = ask("cheap-model");
    EXPECT_EQ(cheap.out, "200") << cheap.err;
    std::set<std::string> asked;
    auto requests = query_server.requests();
    for (size_t i = before; i < requests.size(); ++i) asked.insert(requests[i].Model());
    EXPECT_EQ(asked, std::set<std::string>{"cheap-model"});
    auto other = ask("gpt-9");
    EXPECT_EQ(other.out, "400");
    EXPECT_THAT(other.err, ::testing::HasSubstr("server.query_models"));
    EXPECT_EQ(query_server.requests().size(), requests.size());  // refused before any call
    EXPECT_EQ(serve.Stop(SIGTERM), 0) << serve.log();
  }

  // Changing the extraction model re-extracts; changing the answer model changes nothing indexed.
  auto same = RunCommand(env + "GRAG_LLM_QUERY_MODEL=other " +
                         Grag("--root " + ShellQuote(root) + " index --dry-run --json"));
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_EQ(nlohmann::json::parse(same.out)["chunks_to_extract"], 0) << same.out;
  auto changed = RunCommand(env + "GRAG_LLM_EXTRACT_MODEL=tiny " +
                            Grag("--root " + ShellQuote(root) + " index --dry-run --json"));
  ASSERT_EQ(changed.exit_code, 0) << changed.err;
  EXPECT_EQ(nlohmann::json::parse(changed.out)["chunks_to_extract"], 42) << changed.out;
}

TEST(E2eModelRolesTest, ARoleWithoutADefaultModelIsAClearError) {
  TempDir dir;
  const std::string root = dir / "p";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  auto r = RunCommand("GRAG_LLM_QUERY_BASE_URL=http://127.0.0.1:9/v1 " +
                      Grag("--root " + ShellQuote(root) + " stats"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, ::testing::HasSubstr("llm.query"));
}

}  // namespace
}  // namespace grag
