// End to end: the grag binary indexes A Christmas Carol against a loopback OpenAI-compatible
// server, then the index is checked whole, and a re-run makes no LLM call.
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "grag/store.h"
#include "support/fake_graphrag_llm.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::FakeGraphRagHandler;
using testing::FakeHandler;
using testing::FakeOpenAIServer;
using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

class E2eIndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "carol";
    auto init = RunCommand(Grag("init " + ShellQuote(root_)));
    ASSERT_EQ(init.exit_code, 0) << init.err;
    std::filesystem::copy_file(
        std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
        root_ + "/input/christmas_carol.txt");
  }

  std::string Grag(const std::string& args) const { return ShellQuote(GRAG_BINARY) + " " + args; }
  std::string Env() const {
    return "GRAG_LLM_BASE_URL=" + server_.base_url() + " GRAG_LLM_MODEL=fake-model " +
           "GRAG_EMBEDDING_MODEL=fake-embed GRAG_LLM_API_KEY=sk-test ";
  }

  TempDir dir_;
  std::string root_;
  FakeOpenAIServer server_{FakeGraphRagHandler()};
};

TEST_F(E2eIndexTest, IndexesTheBookCompletelyAndReRunsForFree) {
  auto r = RunCommand(Env() + Grag("--root " + ShellQuote(root_) + " index --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["documents"]["added"], 1);
  EXPECT_EQ(summary["chunks"]["total"], 42);
  EXPECT_EQ(summary["chunks"]["extracted"], 42);
  EXPECT_GT(summary["entities"].get<int>(), 50);
  EXPECT_GT(summary["llm"]["calls"].get<int>(), 42);
  const int requests = server_.request_count();
  EXPECT_GT(requests, 42);
  // Every request was an authenticated call for the configured models.
  for (const auto& req : server_.requests()) {
    EXPECT_EQ(req.Header("authorization"), "Bearer sk-test");
  }

  // The whole index: every entity in a community, every community with a report or a gap.
  {
    StoreOptions so;
    so.create_if_missing = false;
    auto store = Store::Open(root_ + "/output/index.db", so);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto entities = (*store)->ListEntities();
    auto communities = (*store)->ListCommunities();
    ASSERT_TRUE(entities.ok() && communities.ok());
    std::set<int64_t> covered;
    for (const auto& c : *communities) {
      if (c.level == 0) covered.insert(c.entity_ids.begin(), c.entity_ids.end());
      auto report = (*store)->GetReport(c.id);
      ASSERT_TRUE(report.ok());
      ASSERT_TRUE(report->has_value()) << "community " << c.id << " has no report and no gap";
      if ((*report)->status == ReportStatus::kOk) {
        EXPECT_FALSE((*report)->full_content.empty());
      }
    }
    for (const auto& e : *entities) EXPECT_TRUE(covered.count(e.id)) << e.name;
    auto space = (*store)->GetEmbeddingSpace(EmbeddingOwner::kEntity);
    ASSERT_TRUE(space.ok());
    ASSERT_TRUE(space->has_value());
    EXPECT_EQ((*space)->count, static_cast<int64_t>(entities->size()));
    EXPECT_EQ((*space)->model, "fake-embed");
  }

  auto stats = RunCommand(Grag("--root " + ShellQuote(root_) + " stats --json"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  auto s = nlohmann::json::parse(stats.out);
  EXPECT_EQ(s["chunks"], 42);
  EXPECT_EQ(s["chunks_skipped"], 0);
  EXPECT_FALSE(s["communities_per_level"].empty());
  EXPECT_GT(s["llm_calls"].get<int>(), 42);
  EXPECT_FALSE(s["top_entities"].empty());
  EXPECT_TRUE(s["modularity"].is_number());

  // Global and local questions through the real client.
  auto global = RunCommand(Env() + Grag("--root " + ShellQuote(root_) +
                                        " query --method global --level 0 --json "
                                        "'What are the main themes of this story?'"));
  ASSERT_EQ(global.exit_code, 0) << global.err;
  auto gj = nlohmann::json::parse(global.out);
  EXPECT_FALSE(gj["answer"].get<std::string>().empty());
  EXPECT_FALSE(gj["not_covered"].get<bool>());
  EXPECT_FALSE(gj["citations"].empty());
  EXPECT_GE(gj["stats"]["map_calls"].get<int>(), 1);
  EXPECT_EQ(gj["stats"]["reduce_calls"], 1);

  auto local = RunCommand(Env() + Grag("--root " + ShellQuote(root_) +
                                       " query -m local --json 'Who is Jacob Marley?'"));
  ASSERT_EQ(local.exit_code, 0) << local.err;
  auto lj = nlohmann::json::parse(local.out);
  EXPECT_FALSE(lj["nothing_found"].get<bool>()) << local.out.substr(0, 2000);
  bool marley = false;
  for (const auto& m : lj["matched_entities"]) {
    marley |= m["name"].get<std::string>().find("Marley") != std::string::npos;
  }
  EXPECT_TRUE(marley) << lj["matched_entities"].dump();
  EXPECT_FALSE(lj["context"].empty());

  // Hybrid search through the real client: one answer call over the ranked passages.
  const int before_hybrid = server_.request_count();
  auto hybrid = RunCommand(Env() + Grag("--root " + ShellQuote(root_) +
                                        " query -m hybrid --json 'Who is Jacob Marley?'"));
  ASSERT_EQ(hybrid.exit_code, 0) << hybrid.err;
  auto hj = nlohmann::json::parse(hybrid.out);
  EXPECT_TRUE(hj["llm"].get<bool>());
  EXPECT_EQ(hj["answer"], "Answer from the passages [S1].");
  ASSERT_EQ(hj["citations"].size(), 1u);
  EXPECT_EQ(hj["citations"][0]["id"], "S1");
  // The question's embedding (a cache miss: its first time) and the answer.
  EXPECT_LE(server_.request_count() - before_hybrid, 2);

  auto text = RunCommand(Env() + Grag("--root " + ShellQuote(root_) +
                                      " query 'What are the main themes of this story?'"));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Sources (community reports):"), std::string::npos) << text.out;
  const int after_queries = server_.request_count();

  // Unchanged input: no LLM call at all, not even a cached one.
  auto again = RunCommand(Env() + Grag("--root " + ShellQuote(root_) + " index --json"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto second = nlohmann::json::parse(again.out);
  EXPECT_EQ(second["llm"]["calls"], 0);
  EXPECT_EQ(second["documents"]["unchanged"], 1);
  EXPECT_EQ(server_.request_count(), after_queries);
  EXPECT_GT(after_queries, requests);
}

// llm.endpoints: two working servers and a broken one. The broken one is benched, every chunk is
// still extracted, and the summary and `grag stats` show what each endpoint did.
TEST_F(E2eIndexTest, SeveralEndpointsShareTheCallsAndABrokenOneIsBenched) {
  FakeOpenAIServer second{FakeGraphRagHandler()};
  FakeOpenAIServer broken{[](const testing::FakeRequest&) {
    return testing::OpenAIError(503, "overloaded", "server_error");
  }};
  const std::string endpoints = "[{name = \"a\", base_url = \"" + server_.base_url() +
                                "\", concurrency = 3}, {name = \"b\", base_url = \"" +
                                second.base_url() + "\", concurrency = 3}, {name = \"broken\", " +
                                "base_url = \"" + broken.base_url() + "\", concurrency = 2}]";
  const std::string sets = " --set " + ShellQuote("llm.endpoints=" + endpoints) +
                           " --set llm.bench_seconds=600 --set llm.bench_max_seconds=600 ";
  auto r = RunCommand(Env() + Grag("--root " + ShellQuote(root_) + sets + "index --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["chunks"]["extracted"], 42);
  EXPECT_EQ(summary["chunks"]["skipped"], 0);
  EXPECT_EQ(summary["llm"]["failures"], 0);
  const auto& eps = summary["llm"]["endpoints"];
  ASSERT_EQ(eps.size(), 3u) << summary["llm"].dump();
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& e : eps) by_name[e["name"].get<std::string>()] = e;
  EXPECT_EQ(by_name["broken"]["benched"], 1);
  EXPECT_EQ(by_name["broken"]["errors"], by_name["broken"]["requests"]);
  EXPECT_EQ(by_name["broken"]["prompt_tokens"], 0);
  EXPECT_EQ(by_name["broken"]["requests"].get<int>(), broken.request_count());
  for (const char* name : {"a", "b"}) {
    EXPECT_GT(by_name[name]["requests"].get<int>(), 0) << name;
    EXPECT_EQ(by_name[name]["errors"], 0) << name;
    EXPECT_GT(by_name[name]["prompt_tokens"].get<int>(), 0) << name;
    EXPECT_TRUE(by_name[name].contains("latency_ms_p50")) << name;
  }

  auto stats = RunCommand(Grag("--root " + ShellQuote(root_) + " stats --json"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  auto s = nlohmann::json::parse(stats.out);
  ASSERT_EQ(s["llm_endpoints"].size(), 3u) << stats.out;
  for (const auto& e : s["llm_endpoints"]) {
    EXPECT_EQ(e["role"], "llm");
    EXPECT_EQ(e["requests"], by_name[e["name"].get<std::string>()]["requests"]);
  }
  auto text = RunCommand(Grag("--root " + ShellQuote(root_) + " stats"));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("llm broken: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("benched 1 time"), std::string::npos) << text.out;
}

TEST_F(E2eIndexTest, UnreachableModelFailsClearlyAndKeepsWhatWasLoaded) {
  auto r = RunCommand("GRAG_LLM_BASE_URL=http://127.0.0.1:9/v1 GRAG_LLM_MODEL=m " +
                      Grag("--root " + ShellQuote(root_) +
                           " --set llm.max_retries=0 --set llm.timeout_seconds=5 index"));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run `grag index` again"), std::string::npos) << r.err;
  auto stats = RunCommand(Grag("--root " + ShellQuote(root_) + " stats --json"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(nlohmann::json::parse(stats.out)["chunks"], 42);
}

TEST_F(E2eIndexTest, StatsWithoutAnIndexSaysSo) {
  auto r = RunCommand(Grag("--root " + ShellQuote(root_) + " stats"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("grag index"), std::string::npos) << r.err;
}

TEST_F(E2eIndexTest, AddRemoveAndDryRunUpdateTheIndexIncrementally) {
  const std::string root = "--root " + ShellQuote(root_) + " ";
  auto first = RunCommand(Env() + Grag(root + "index --json --no-progress"));
  ASSERT_EQ(first.exit_code, 0) << first.err;

  // A new file outside the input folder: the plan names it, and nothing is called or written.
  const std::string extra = dir_ / "extra.txt";
  dir_.Write("extra.txt",
             "Fezziwig and Dick Wilkins danced at the warehouse. Fezziwig praised Dick Wilkins.");
  const int before = server_.request_count();
  auto plan = RunCommand(Env() + Grag(root + "add --dry-run --json " + ShellQuote(extra)));
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  auto pj = nlohmann::json::parse(plan.out);
  EXPECT_EQ(pj["documents"]["added"].size(), 1u);
  EXPECT_EQ(pj["chunks_to_extract"], 1);
  EXPECT_EQ(server_.request_count(), before);

  // grag add: only the new chunk is extracted; the book is not reloaded.
  auto added = RunCommand(Env() + Grag(root + "add --json --no-progress " + ShellQuote(extra)));
  ASSERT_EQ(added.exit_code, 0) << added.err;
  auto aj = nlohmann::json::parse(added.out);
  EXPECT_EQ(aj["documents"]["added"], 1);
  EXPECT_EQ(aj["documents"]["unchanged"], 0);
  EXPECT_EQ(aj["chunks"]["extracted"], 1);
  EXPECT_GT(aj["reports"]["reused"].get<int>(), 0);

  // The ids grag remove takes.
  auto docs = RunCommand(Env() + Grag(root + "stats --documents --json"));
  ASSERT_EQ(docs.exit_code, 0) << docs.err;
  std::string extra_id;
  for (const auto& d : nlohmann::json::parse(docs.out)) {
    if (d["id"].get<std::string>() != "christmas_carol.txt") extra_id = d["id"];
  }
  ASSERT_FALSE(extra_id.empty()) << docs.out;

  auto removed = RunCommand(Env() + Grag(root + "remove --no-progress " + ShellQuote(extra_id)));
  ASSERT_EQ(removed.exit_code, 0) << removed.err;
  EXPECT_NE(removed.out.find("1 removed"), std::string::npos) << removed.out;
  EXPECT_NE(removed.err.find("plan: 0 to add, 0 changed, 1 to remove"), std::string::npos)
      << removed.err;
  auto unknown = RunCommand(Env() + Grag(root + "remove no-such-doc.txt"));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("no-such-doc.txt"), std::string::npos) << unknown.err;

  // Back to the book alone: re-indexing the input folder makes no request.
  const int settled = server_.request_count();
  auto again = RunCommand(Env() + Grag(root + "index --json --no-progress"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(server_.request_count(), settled);
}

// What two indexes agree on after the same update: entities, relationships, communities.
std::string IndexFingerprint(const std::string& db) {
  StoreOptions so;
  so.create_if_missing = false;
  auto store = Store::Open(db, so);
  if (!store.ok()) return "cannot open " + db + ": " + store.status().ToString();
  std::map<int64_t, std::string> key_of;
  std::string out;
  const auto entities = (*store)->ListEntities().value();
  std::set<std::string> lines;
  for (const auto& e : entities) {
    key_of[e.id] = e.name_key;
    lines.insert("E " + e.name_key + " | " + e.type + " | " + e.description);
  }
  const auto relationships = (*store)->ListRelationships().value();
  for (const auto& r : relationships) {
    lines.insert("R " + key_of[r.source_id] + " -- " + key_of[r.target_id] + " | " +
                 std::to_string(r.weight) + " | " + r.description);
  }
  const auto communities = (*store)->ListCommunities().value();
  for (const auto& c : communities) {
    std::set<std::string> members;
    for (auto id : c.entity_ids) members.insert(key_of[id]);
    std::string line = "C " + std::to_string(c.id) + " level " + std::to_string(c.level) + ":";
    for (const auto& m : members) line += " " + m;
    auto report = (*store)->GetReport(c.id).value();
    line += report ? " | report " + report->input_hash : " | no report";
    lines.insert(line);
  }
  for (const auto& l : lines) out += l + "\n";
  return out;
}

TEST_F(E2eIndexTest, KilledMidUpdateTheNextRunCompletesIt) {
  const std::string extra = dir_ / "extra.txt";
  dir_.Write("extra.txt",
             "Fezziwig and Dick Wilkins danced at the warehouse. Fezziwig praised Dick Wilkins. "
             "Scrooge remembered Fezziwig and Belle.");
  // The reference: the same update, uninterrupted.
  const std::string ref = dir_ / "ref";
  ASSERT_EQ(RunCommand(Grag("init " + ShellQuote(ref))).exit_code, 0);
  std::filesystem::copy_file(root_ + "/input/christmas_carol.txt",
                             ref + "/input/christmas_carol.txt");
  const std::string at_ref = "--root " + ShellQuote(ref) + " ";
  ASSERT_EQ(RunCommand(Env() + Grag(at_ref + "index --no-progress")).exit_code, 0);
  auto ref_add = RunCommand(Env() + Grag(at_ref + "add --no-progress " + ShellQuote(extra)));
  ASSERT_EQ(ref_add.exit_code, 0) << ref_add.err;

  const std::string at = "--root " + ShellQuote(root_) + " ";
  ASSERT_EQ(RunCommand(Env() + Grag(at + "index --no-progress")).exit_code, 0);
  // The update's third request (past extraction, into summaries and reports) kills the process.
  const std::string pid_file = dir_ / "grag.pid";
  std::atomic<int> seen{0};
  FakeHandler normal = FakeGraphRagHandler();
  server_.SetHandler([&](const testing::FakeRequest& r) {
    if (++seen == 3) {
      std::ifstream in(pid_file);
      pid_t pid = 0;
      if (in >> pid && pid > 0) kill(pid, SIGKILL);
    }
    return normal(r);
  });
  auto killed = RunCommand(Env() + "sh -c " +
                           ShellQuote("echo $$ > " + ShellQuote(pid_file) + "; exec " +
                                      Grag(at + "add --no-progress " + ShellQuote(extra))));
  EXPECT_NE(killed.exit_code, 0) << "the process was meant to be killed mid-update";
  EXPECT_GE(seen.load(), 3);
  server_.SetHandler(normal);

  auto resumed = RunCommand(Env() + Grag(at + "add --no-progress " + ShellQuote(extra)));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(IndexFingerprint(root_ + "/output/index.db"),
            IndexFingerprint(ref + "/output/index.db"));
  // And it is settled: another run has nothing left to do.
  const int settled = server_.request_count();
  ASSERT_EQ(RunCommand(Env() + Grag(at + "add --no-progress " + ShellQuote(extra))).exit_code, 0);
  EXPECT_EQ(server_.request_count(), settled);
}

// What the model was paid for must be in the run records even when runs are killed (SIGKILL) in
// the middle of any stage: summed over the runs, the requests recorded equal the requests the
// endpoint received, less at most the calls in flight at each kill (their replies never arrived).
TEST_F(E2eIndexTest, KilledRunsStillRecordTheRequestsTheyMade) {
  const std::string at = "--root " + ShellQuote(root_) + " ";
  const std::string pid_file = dir_ / "grag.pid";
  const int concurrency = 4;
  std::atomic<int> seen{0};
  std::atomic<int> kill_at{0};
  FakeHandler normal = FakeGraphRagHandler();
  server_.SetHandler([&](const testing::FakeRequest& r) {
    if (++seen == kill_at.load()) {
      std::ifstream in(pid_file);
      pid_t pid = 0;
      if (in >> pid && pid > 0) kill(pid, SIGKILL);
    }
    testing::FakeReply reply = normal(r);
    reply.delay = std::chrono::milliseconds(5);
    return reply;
  });
  const std::string run =
      Env() + "sh -c " +
      ShellQuote("echo $$ > " + ShellQuote(pid_file) + "; exec " +
                 Grag(at + "--set llm.concurrency=" + std::to_string(concurrency) +
                      " index --no-progress"));
  // Kills spread over extraction, gleaning, summaries and reports (the book takes ~140 calls).
  int kills = 0;
  for (int step : {20, 25, 30, 30, 30}) {
    kill_at = seen.load() + step;
    auto r = RunCommand(run);
    if (r.exit_code == 0) break;
    ++kills;
  }
  kill_at = 0;
  auto done = RunCommand(run);
  ASSERT_EQ(done.exit_code, 0) << done.err;
  ASSERT_GE(kills, 3);

  StoreOptions so;
  so.create_if_missing = false;
  auto store = Store::Open(root_ + "/output/index.db", so);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto runs = (*store)->ListRuns(100);
  ASSERT_TRUE(runs.ok());
  int64_t recorded = 0;
  for (const RunRecord& rec : *runs) {
    const auto it = rec.counters.find("llm_http_requests");
    if (it != rec.counters.end()) recorded += it->second;
  }
  const int received = server_.request_count();
  EXPECT_LE(recorded, received);
  EXPECT_GE(recorded, received - kills * concurrency)
      << kills << " kills; requests received " << received;
}

}  // namespace
}  // namespace grag
