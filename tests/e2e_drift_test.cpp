// End to end: `grag query --method drift` on the book, through the real binary and a loopback
// model server that knows grag's prompts: the call bound it states (--route) and keeps, what it
// asks of the model, the reply cache on a re-asked question, and the refusal without a model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "support/fake_graphrag_llm.h"
#include "support/fake_openai_server.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::FakeHandler;
using testing::FakeOpenAIServer;
using ::testing::HasSubstr;
using testing::PromptKind;
using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

std::string Grag(const std::string& args) { return ShellQuote(GRAG_BINARY) + " " + args; }

// Chat requests by prompt kind, from request `from` on.
std::map<std::string, int> Kinds(const FakeOpenAIServer& s, size_t from) {
  std::map<std::string, int> out;
  auto requests = s.requests();
  for (size_t i = from; i < requests.size(); ++i) {
    if (requests[i].IsChat()) ++out[PromptKind(requests[i].LastUserMessage())];
  }
  return out;
}

// The loopback model of the other e2e tests, with a primer whose follow-ups name the book's
// people (the stock one asks about words of the report layout).
FakeHandler DriftHandler() {
  return testing::Answering(
      [](const testing::FakeRequest& r) {
        const std::string prompt = r.LastUserMessage();
        if (PromptKind(prompt) != "drift_primer") return testing::FakeGraphRagReply(prompt);
        const size_t c = prompt.find("[C");
        const std::string cite = prompt.substr(c, prompt.find(']', c) - c + 1);
        return nlohmann::json{
            {"intermediate_answer", "The ghosts visit Scrooge " + cite + "."},
            {"score", 70},
            {"follow_up_queries", {"Who is Scrooge?", "Who is Marley?", "Who is Bob Cratchit?"}}}
            .dump();
      },
      16);
}

TEST(E2eDriftTest, AnswersOnTheBookWithinItsBound) {
  TempDir dir;
  const std::string root = dir / "drift";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(root))).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(root + "/prompts/drift_primer.md"));
  std::filesystem::copy_file(
      std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
      root + "/input/christmas_carol.txt");
  FakeOpenAIServer server{DriftHandler()};
  const std::string env = "GRAG_LLM_BASE_URL=" + server.base_url() + " GRAG_LLM_MODEL=fake-model ";
  const std::string grag = env + Grag("--root " + ShellQuote(root) + " ");
  auto index = RunCommand(grag + "index --json");
  ASSERT_EQ(index.exit_code, 0) << index.err;

  const std::string question = "'How did the ghosts change Scrooge?'";
  auto route = RunCommand(grag + "query --route --method drift " + question);
  ASSERT_EQ(route.exit_code, 0) << route.err;
  EXPECT_THAT(route.out,
              HasSubstr("at most 10 calls: hyde 1 + primer 2 + 2\u00d73 follow-ups + reduce 1"));
  auto route_json = RunCommand(grag + "query --route --method drift --json " + question);
  ASSERT_EQ(route_json.exit_code, 0) << route_json.err;
  EXPECT_EQ(nlohmann::json::parse(route_json.out)["max_llm_calls"], 10) << route_json.out;

  const size_t before = server.requests().size();
  auto q = RunCommand(grag + "query --method drift --json " + question);
  ASSERT_EQ(q.exit_code, 0) << q.err;
  const auto j = nlohmann::json::parse(q.out);
  EXPECT_EQ(j["method"], "drift");
  EXPECT_EQ(j["llm"], true);
  EXPECT_THAT(j["answer"].get<std::string>(), HasSubstr("The story follows its main characters"));
  const auto& stats = j["stats"];
  // The route's bound assumed 2 primer folds; the book's 10 best reports fit in fewer.
  const int primer_calls = stats["primer_calls"].get<int>();
  EXPECT_GE(primer_calls, 1);
  EXPECT_EQ(stats["max_calls"].get<int>(), 1 + primer_calls + 2 * 3 + 1);
  EXPECT_LE(stats["calls"].get<int>(), stats["max_calls"].get<int>());
  EXPECT_GE(stats["followup_calls"].get<int>(), 1) << q.out;
  const auto kinds = Kinds(server, before);
  EXPECT_EQ(kinds.count("drift_hyde") ? kinds.at("drift_hyde") : 0, 1);
  EXPECT_GE(kinds.count("drift_primer") ? kinds.at("drift_primer") : 0, 1);
  EXPECT_EQ(kinds.count("drift_reduce") ? kinds.at("drift_reduce") : 0, 1);
  EXPECT_EQ(kinds.count("map"), 0u) << "DRIFT's primer was taken for global search's map";
  int chat_calls = 0;
  for (const auto& [kind, n] : kinds) chat_calls += n;
  EXPECT_EQ(chat_calls, stats["calls"].get<int>()) << q.out;
  EXPECT_EQ(stats["followup_calls"].get<int>(),
            kinds.count("drift_local") ? kinds.at("drift_local") : 0);
  // Every citation is an id some context held, with what it stands for.
  for (const auto& c : j["citations"]) {
    EXPECT_FALSE(c["source"].get<std::string>().empty()) << c.dump();
  }

  // Asked again: HyDE and the primer come from the reply cache. (Known gap: with concurrent
  // follow-ups the S<k> labels follow the order contexts are built in, so a follow-up's or the
  // reduce's prompt can differ between runs and miss the cache.)
  const size_t again = server.requests().size();
  auto q2 = RunCommand(grag + "query --method drift --json " + question);
  ASSERT_EQ(q2.exit_code, 0) << q2.err;
  const auto kinds2 = Kinds(server, again);
  EXPECT_EQ(kinds2.count("drift_hyde") + kinds2.count("drift_primer"), 0u);

  // The plain output lists the follow-ups and the calls against the bound.
  auto plain = RunCommand(grag + "query --method drift --no-stream " + question);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.out, HasSubstr("calls of at most"));
  EXPECT_THAT(plain.out, HasSubstr("Follow-ups:\n  - Who is Scrooge?"));

  // Without a model: a usage error that names the way out, not a crash.
  auto none = RunCommand(Grag("--root " + ShellQuote(root) + " query --method drift " + question));
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_THAT(none.err, HasSubstr("--method drift needs a chat model"));
  auto none_route =
      RunCommand(Grag("--root " + ShellQuote(root) + " query --route --method drift " + question));
  EXPECT_EQ(none_route.exit_code, 2);
}

}  // namespace
}  // namespace grag
