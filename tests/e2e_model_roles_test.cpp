// End to end: a model per role. Extraction goes to one server, answers to another, and the rest
// (summaries, reports) to [llm]'s, each with the model named for its role.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

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

// A project at `root` holding the book, not indexed yet.
bool InitBookProject(const std::string& root) {
  if (RunCommand(Grag("init " + ShellQuote(root))).exit_code != 0) return false;
  return std::filesystem::copy_file(
      std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
      root + "/input/christmas_carol.txt");
}

TEST(E2eModelRolesTest, ExtractionAndAnswersGoToTheirOwnModels) {
  TempDir dir;
  const std::string root = dir / "roles";
  ASSERT_TRUE(InitBookProject(root));
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

  // Routed to global, the question is planned once: the router's plan (made to estimate the
  // cost) is the one global search sends, so its estimate is what it spends.
  auto routed = RunCommand(env + Grag("--root " + ShellQuote(root) +
                                      " query --json 'What are the main themes of the story?'"));
  ASSERT_EQ(routed.exit_code, 0) << routed.err;
  const auto route_json = nlohmann::json::parse(routed.out);
  ASSERT_EQ(route_json["route"]["method"], "global") << routed.out;
  EXPECT_TRUE(route_json["stats"]["plan_from_route"].get<bool>()) << routed.out;
  EXPECT_EQ(route_json["stats"]["map_calls"].get<int64_t>() + 1,
            route_json["route"]["estimated_llm_calls"].get<int64_t>());
  auto explicit_global = RunCommand(
      env + Grag("--root " + ShellQuote(root) +
                 " query --method global --json 'What are the main themes of the story?'"));
  ASSERT_EQ(explicit_global.exit_code, 0) << explicit_global.err;
  EXPECT_FALSE(nlohmann::json::parse(explicit_global.out)["stats"]["plan_from_route"].get<bool>());

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

    // The OpenAI-compatible endpoint: a chat model grag-METHOD/MODEL, listed by /v1/models.
    const std::string base = "http://127.0.0.1:" + std::to_string(serve.port());
    auto models = RunCommand("curl -s " + ShellQuote(base + "/v1/models"));
    std::set<std::string> ids;
    const auto listed = nlohmann::json::parse(models.out);
    for (const auto& m : listed["data"]) {
      ids.insert(m["id"].get<std::string>());
    }
    EXPECT_TRUE(ids.count("grag-local") && ids.count("grag-local/cheap-model") &&
                ids.count("grag-global/strong-model"))
        << models.out;
    auto chat = [&](const std::string& model) {
      nlohmann::json body = {
          {"model", model},
          {"messages", {{{"role", "user"}, {"content", "Who is Bob Cratchit?"}}}}};
      return RunCommand("curl -s -o /dev/stderr -w '%{http_code}' -X POST " +
                        ShellQuote(base + "/v1/chat/completions") +
                        " -H 'Content-Type: application/json' -d " + ShellQuote(body.dump()));
    };
    const size_t chat_before = query_server.requests().size();
    auto chatted = chat("grag-local/cheap-model");
    ASSERT_EQ(chatted.out, "200") << chatted.err;
    EXPECT_EQ(nlohmann::json::parse(chatted.err)["model"], "grag-local/cheap-model");
    requests = query_server.requests();
    ASSERT_GT(requests.size(), chat_before);
    for (size_t i = chat_before; i < requests.size(); ++i) {
      EXPECT_EQ(requests[i].Model(), "cheap-model");
    }
    auto refused = chat("grag-local/gpt-9");
    EXPECT_EQ(refused.out, "400") << refused.err;
    EXPECT_THAT(refused.err,
                ::testing::HasSubstr("server.query_models: cheap-model, strong-model"));
    EXPECT_EQ(query_server.requests().size(), requests.size());
    EXPECT_EQ(serve.Stop(SIGTERM), 0) << serve.log();
  }

  // The MCP query tool offers the same models, and refuses others before a call.
  {
    const std::string session = dir / "mcp.jsonl";
    {
      auto call = [](int id, nlohmann::json args) {
        return nlohmann::json{{"jsonrpc", "2.0"},
                              {"id", id},
                              {"method", "tools/call"},
                              {"params", {{"name", "query"}, {"arguments", std::move(args)}}}}
            .dump();
      };
      std::ofstream in(session);
      in << nlohmann::json{{"jsonrpc", "2.0"},
                           {"id", 1},
                           {"method", "initialize"},
                           {"params",
                            {{"protocolVersion", "2025-06-18"},
                             {"capabilities", nlohmann::json::object()},
                             {"clientInfo", {{"name", "roles"}, {"version", "1"}}}}}}
                .dump()
         << "\n"
         << nlohmann::json{{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}}.dump() << "\n"
         << call(3, {{"question", "Who is Fezziwig?"},  // not asked before: not cached
                     {"method", "local"},
                     {"model", "cheap-model"}})
         << "\n"
         << call(4, {{"question", "Who is Jacob Marley?"}, {"method", "local"}, {"model", "gpt-9"}})
         << "\n";
    }
    const size_t before = query_server.requests().size();
    auto mcp = RunCommand(env + Grag("--root " + ShellQuote(root) +
                                     " --set server.query_models=cheap-model mcp < " +
                                     ShellQuote(session)));
    ASSERT_EQ(mcp.exit_code, 0) << mcp.err;
    std::map<int, nlohmann::json> replies;
    std::istringstream lines(mcp.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      auto reply = nlohmann::json::parse(line);
      replies[reply["id"].get<int>()] = reply;
    }
    for (const auto& tool : replies[2]["result"]["tools"]) {
      if (tool["name"] != "query") continue;
      EXPECT_EQ(tool["inputSchema"]["properties"]["model"]["enum"],
                nlohmann::json::array({"cheap-model"}));
    }
    EXPECT_FALSE(replies[3]["result"].value("isError", false)) << replies[3].dump();
    EXPECT_TRUE(replies[4]["result"].value("isError", false)) << replies[4].dump();
    EXPECT_THAT(replies[4].dump(), ::testing::HasSubstr("cheap-model"));
    EXPECT_THAT(replies[4].dump(), ::testing::HasSubstr("gpt-9"));
    std::set<std::string> asked;
    auto requests = query_server.requests();
    for (size_t i = before; i < requests.size(); ++i) asked.insert(requests[i].Model());
    EXPECT_EQ(asked, std::set<std::string>{"cheap-model"});
  }

  // The command line chooses any model: its user is the operator.
  {
    const size_t before = query_server.requests().size();
    auto q = RunCommand(env + Grag("--root " + ShellQuote(root) +
                                   " query --method local --model tiny-model 'Who is Scrooge?'"));
    ASSERT_EQ(q.exit_code, 0) << q.err;
    auto requests = query_server.requests();
    ASSERT_GT(requests.size(), before);
    EXPECT_EQ(requests.back().Model(), "tiny-model");
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

// The header a server saw on every chat request it was sent ("" where absent).
std::set<std::string> Headers(const FakeOpenAIServer& s, std::string_view name) {
  std::set<std::string> out;
  for (const FakeRequest& r : s.requests()) {
    if (r.IsChat()) out.insert(r.Header(name));
  }
  return out;
}

// reports.mode = lazy, as a user runs it: the index sends no report prompt, the dry run says
// where the report calls went, and each global question writes the reports it reads (within
// reports.lazy_per_question) for the questions after it; the router still picks global search.
TEST(E2eModelRolesTest, LazyReportsAreWrittenByTheGlobalQuestionsThatReadThem) {
  TempDir dir;
  const std::string root = dir / "lazy";
  ASSERT_TRUE(InitBookProject(root));
  FakeOpenAIServer server{FakeGraphRagHandler()};
  const std::string grag = "GRAG_LLM_BASE_URL=" + server.base_url() + " GRAG_LLM_MODEL=m " +
                           Grag("--root " + ShellQuote(root) +
                                " --set reports.mode=lazy --set reports.lazy_per_question=3 ");
  auto reports_sent = [&server] {
    int64_t n = 0;
    for (const FakeRequest& r : server.requests()) {
      n += r.IsChat() && PromptKind(r.LastUserMessage()) == "report" ? 1 : 0;
    }
    return n;
  };
  auto dry = RunCommand(grag + "index --dry-run");
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_THAT(dry.out, ::testing::HasSubstr("reports.mode = lazy: no report call now"));
  auto index = RunCommand(grag + "index --json");
  ASSERT_EQ(index.exit_code, 0) << index.err;
  const auto summary = nlohmann::json::parse(index.out);
  EXPECT_EQ(summary["llm"]["calls_by_kind"]["report"].get<int64_t>(), 0) << index.out;
  const auto deferred = summary["reports"]["deferred"].get<int64_t>();
  EXPECT_GT(deferred, 3) << index.out;
  EXPECT_EQ(reports_sent(), 0);

  auto ask = [&](const std::string& args) {
    auto q = RunCommand(grag + "query --json " + args);
    EXPECT_EQ(q.exit_code, 0) << q.err;
    return q.exit_code == 0 ? nlohmann::json::parse(q.out) : nlohmann::json::object();
  };
  const auto first = ask("--method global --level 0 'What are the main themes?'");
  const auto written = first["stats"]["reports_written"].get<int64_t>();
  const auto pending = first["stats"]["reports_pending"].get<int64_t>();
  EXPECT_GE(written, 1) << first.dump();
  EXPECT_LE(written, 3);
  EXPECT_GT(first["stats"]["report_tokens_in"].get<int64_t>(), 0);
  EXPECT_EQ(reports_sent(), written);
  // The next question at that level writes what the first left, and reads what it wrote.
  const auto second = ask("--method global --level 0 'Who are the main characters?'");
  EXPECT_EQ(second["stats"]["reports_written"].get<int64_t>(), std::min<int64_t>(pending, 3));
  EXPECT_EQ(second["stats"]["reports_pending"].get<int64_t>(), std::max<int64_t>(pending - 3, 0));
  // Routed: global search (not budgeted search for want of model-written reports), its cost
  // note counting the reports it may write.
  const auto routed = ask("'What are the main themes of the story?'");
  EXPECT_EQ(routed["route"]["method"], "global") << routed.dump();
  EXPECT_THAT(routed["route"]["cost_note"].get<std::string>(),
              ::testing::HasSubstr("reports.mode = lazy"));
  auto stats = RunCommand(Grag("--root " + ShellQuote(root) + " stats --json"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(nlohmann::json::parse(stats.out)["reports_llm"].get<int64_t>(), reports_sent())
      << stats.out;

  // A server's questions asked at once write different reports, each after the one before:
  // what they say they wrote is what the index gained, and no report was asked for twice.
  {
    testing::ServerProcess serve;
    ASSERT_TRUE(serve.Start("env GRAG_LLM_BASE_URL=" + server.base_url() + " GRAG_LLM_MODEL=m " +
                            Grag("--root " + ShellQuote(root) +
                                 " --set reports.mode=lazy --set reports.lazy_per_question=2 "
                                 "serve --port 0")))
        << serve.log();
    const std::string url = "http://127.0.0.1:" + std::to_string(serve.port()) + "/v1/query";
    const int64_t llm_before =
        nlohmann::json::parse(
            RunCommand(Grag("--root " + ShellQuote(root) + " stats --json")).out)["reports_llm"]
            .get<int64_t>();
    const int64_t sent_before = reports_sent();
    std::vector<std::string> answers(3);
    std::vector<std::thread> askers;
    for (size_t i = 0; i < answers.size(); ++i) {
      askers.emplace_back([&, i] {
        const nlohmann::json body = {
            {"question", "What are the main themes? (" + std::to_string(i) + ")"},
            {"method", "global"},
            {"level", 1}};
        answers[i] =
            RunCommand("curl -s -X POST " + ShellQuote(url) +
                       " -H 'Content-Type: application/json' -d " + ShellQuote(body.dump()))
                .out;
      });
    }
    for (auto& t : askers) t.join();
    int64_t together = 0;
    for (const std::string& a : answers) {
      const auto j = nlohmann::json::parse(a, nullptr, false);
      ASSERT_TRUE(j.is_object() && j.contains("stats")) << a;
      together += j["stats"]["reports_written"].get<int64_t>();
    }
    EXPECT_GT(together, 2);
    EXPECT_EQ(reports_sent() - sent_before, together);
    const int64_t llm_after =
        nlohmann::json::parse(
            RunCommand(Grag("--root " + ShellQuote(root) + " stats --json")).out)["reports_llm"]
            .get<int64_t>();
    EXPECT_EQ(llm_after - llm_before, together);
  }
}

TEST(E2eModelRolesTest, ARoleHasServersAKeyAndLimitsOfItsOwn) {
  TempDir dir;
  const std::string root = dir / "roles";
  ASSERT_TRUE(InitBookProject(root));
  // Extraction on two slow servers, so that its limit is reached and can be seen kept.
  auto slow = [inner = FakeGraphRagHandler()](const FakeRequest& r) {
    testing::FakeReply reply = inner(r);
    reply.delay = std::chrono::milliseconds(25);
    return reply;
  };
  FakeOpenAIServer main_server{FakeGraphRagHandler()};
  FakeOpenAIServer gpu1{slow};
  FakeOpenAIServer gpu2{slow};
  FakeOpenAIServer answers{FakeGraphRagHandler()};
  {
    std::ofstream toml(root + "/grag.toml", std::ios::app);
    toml << "\n[llm.extract]\nmodel = \"small-model\"\nconcurrency = 2\n"
         << "[[llm.extract.endpoints]]\nname = \"gpu1\"\nbase_url = \"" << gpu1.base_url()
         << "\"\n[[llm.extract.endpoints]]\nname = \"gpu2\"\nbase_url = \"" << gpu2.base_url()
         << "\"\n[llm.query]\nbase_url = \"" << answers.base_url()
         << "\"\napi_key_env = \"ANSWERS_KEY\"\n";
  }
  const std::string env = "GRAG_LLM_BASE_URL=" + main_server.base_url() +
                          " GRAG_LLM_MODEL=strong-model GRAG_LLM_API_KEY=main-key ";

  // The role's key variable unset: a clear error before any call, naming the setting.
  auto unset = RunCommand(env + Grag("--root " + ShellQuote(root) + " index"));
  EXPECT_EQ(unset.exit_code, 2) << unset.err;
  EXPECT_THAT(unset.err, ::testing::HasSubstr("llm.query.api_key_env names ANSWERS_KEY, which is "
                                              "not set"));
  EXPECT_EQ(main_server.request_count() + gpu1.request_count() + answers.request_count(), 0);

  const std::string keyed = env + "ANSWERS_KEY=answers-key ";
  auto index = RunCommand(
      keyed + Grag("--root " + ShellQuote(root) + " --set llm.concurrency=16 index --json"));
  ASSERT_EQ(index.exit_code, 0) << index.err;
  // Every extraction on the role's two servers, two at a time on each, without [llm]'s key.
  for (const FakeOpenAIServer* gpu : {&gpu1, &gpu2}) {
    EXPECT_GT(gpu->request_count(), 5);
    const std::set<std::string> kinds = Kinds(*gpu);
    EXPECT_TRUE(kinds.count("extract")) << ::testing::PrintToString(kinds);
    EXPECT_EQ(kinds.size(), kinds.count("glean") ? 2u : 1u);  // nothing but extraction
    EXPECT_EQ(Models(*gpu), std::set<std::string>{"small-model"});
    EXPECT_LE(gpu->max_in_flight(), 2);
    EXPECT_EQ(Headers(*gpu, "Authorization"), std::set<std::string>{""});
  }
  EXPECT_EQ(gpu1.max_in_flight() + gpu2.max_in_flight(), 4) << "the role's limit was not reached";
  EXPECT_FALSE(Kinds(main_server).count("extract"));
  EXPECT_EQ(Headers(main_server, "Authorization"), std::set<std::string>{"Bearer main-key"});
  // The run's usage names each of the role's servers.
  std::set<std::string> names;
  const auto summary = nlohmann::json::parse(index.out);
  for (const auto& e : summary["llm"]["endpoints"]) {
    names.insert(e["role"].get<std::string>() + "/" + e["name"].get<std::string>());
  }
  EXPECT_TRUE(names.count("llm.extract/gpu1") && names.count("llm.extract/gpu2"))
      << ::testing::PrintToString(names);

  // Answers on the query role's server, with the key its variable holds.
  auto q = RunCommand(
      keyed + Grag("--root " + ShellQuote(root) + " query --method local 'Who is Jacob Marley?'"));
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_GT(answers.request_count(), 0);
  EXPECT_EQ(Headers(answers, "Authorization"), std::set<std::string>{"Bearer answers-key"});
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
