// End to end, no LLM (issue 7): the grag binary indexes A Christmas Carol and answers a global and
// a local question with the built-in extractor, embedder, reports and answers. A loopback
// OpenAI-compatible server is configured as well, and must receive no request at all.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "grag/store.h"
#include "support/fake_graphrag_llm.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::FakeGraphRagHandler;
using testing::FakeOpenAIServer;
using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

class E2eNoLlmTest : public ::testing::Test {
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
  // A model is configured (so a request would reach the server), but --no-llm overrides it.
  std::string Offline(const std::string& args) const {
    return "GRAG_LLM_BASE_URL=" + server_.base_url() + " GRAG_LLM_MODEL=fake-model " +
           "GRAG_EMBEDDING_MODEL=fake-embed GRAG_LLM_API_KEY=sk-test " +
           Grag("--root " + ShellQuote(root_) + " --no-llm " + args);
  }

  TempDir dir_;
  std::string root_;
  FakeOpenAIServer server_{FakeGraphRagHandler()};
};

TEST_F(E2eNoLlmTest, IndexesAndAnswersWithoutASingleRequest) {
  auto index = RunCommand(Offline("index --json --no-progress"));
  ASSERT_EQ(index.exit_code, 0) << index.err;
  auto summary = nlohmann::json::parse(index.out);
  EXPECT_TRUE(summary["no_llm"].get<bool>());
  EXPECT_EQ(summary["chunks"]["extracted"], 42);
  EXPECT_GT(summary["entities"].get<int>(), 50);
  EXPECT_GT(summary["reports"]["generated"].get<int>(), 5);
  EXPECT_EQ(summary["llm"]["calls"], 0);
  EXPECT_NE(summary["embedding_model"].get<std::string>().find("lexical"), std::string::npos);

  // The generic question: a non-empty answer citing several communities, largest first.
  auto global = RunCommand(Offline("query --json \"What are the main themes of this story?\""));
  ASSERT_EQ(global.exit_code, 0) << global.err;
  auto g = nlohmann::json::parse(global.out);
  EXPECT_FALSE(g["llm"].get<bool>());
  EXPECT_FALSE(g["not_covered"].get<bool>());
  EXPECT_GT(g["answer"].get<std::string>().size(), 200u);
  EXPECT_GE(g["citations"].size(), 3u);
  EXPECT_NE(g["answer"].get<std::string>().find("Scrooge"), std::string::npos) << g["answer"];

  // The local question: the answer is about Marley and cites chunks that mention him.
  auto local = RunCommand(Offline("query --json --method local \"Who is Jacob Marley?\""));
  ASSERT_EQ(local.exit_code, 0) << local.err;
  auto l = nlohmann::json::parse(local.out);
  EXPECT_FALSE(l["nothing_found"].get<bool>());
  const std::string answer = l["answer"];
  EXPECT_NE(answer.find("Marley"), std::string::npos) << answer;
  bool matched_marley = false;
  for (const auto& m : l["matched_entities"]) {
    if (m["name"].get<std::string>().find("Marley") != std::string::npos) matched_marley = true;
  }
  EXPECT_TRUE(matched_marley) << l["matched_entities"];
  std::set<std::string> cited_chunks;
  for (const auto& c : l["citations"]) {
    const std::string source = c["source"];
    if (source.rfind("chunk", 0) == 0) cited_chunks.insert(source);
  }
  EXPECT_FALSE(cited_chunks.empty()) << l["citations"];
  {
    StoreOptions so;
    so.create_if_missing = false;
    auto store = Store::Open(root_ + "/output/index.db", so);
    ASSERT_TRUE(store.ok());
    const std::vector<std::string> chunk_ids = (*store)->ListChunkIds().value();
    int about_marley = 0;
    for (const auto& item : l["context"]) {
      if (item["type"] != "chunk") continue;
      for (const auto& c : l["citations"]) {
        if (c["id"] != item["id"]) continue;
        // The cited chunk's text names Marley.
        const std::string source = item["source"];
        for (const auto& id : chunk_ids) {
          auto chunk = (*store)->GetChunk(id).value();
          if (chunk && source.find("chunk " + std::to_string(chunk->index) + " ") == 0 &&
              chunk->text.find("Marley") != std::string::npos) {
            ++about_marley;
          }
        }
      }
    }
    EXPECT_GT(about_marley, 0);
  }

  // Nothing of the above reached the configured model.
  EXPECT_EQ(server_.request_count(), 0);
}

TEST_F(E2eNoLlmTest, SearchAndEveryQueryMethodWorkOnTheBook) {
  ASSERT_EQ(RunCommand(Offline("index --no-progress")).exit_code, 0);
  auto search = RunCommand(Offline("search --json \"Who is Jacob Marley?\""));
  ASSERT_EQ(search.exit_code, 0) << search.err;
  auto s = nlohmann::json::parse(search.out);
  EXPECT_EQ(s["method"], "hybrid");
  ASSERT_EQ(s["chunks"].size(), 10u);
  const auto& top = s["chunks"][0];
  EXPECT_EQ(top["rank"], 1);
  EXPECT_EQ(top["document_id"], "christmas_carol.txt");
  EXPECT_FALSE(top["text"].get<std::string>().empty());
  EXPECT_TRUE(top["signal_ranks"].contains("graph"));
  bool marley_seed = false;
  for (const auto& seed : s["seeds"]) marley_seed |= seed["name_key"] == "jacob marley";
  EXPECT_TRUE(marley_seed) << s["seeds"];
  for (const std::string m : {"vector", "bm25", "graph"}) {
    auto one =
        RunCommand(Offline("search --json --method " + m + " --k 3 \"Who is Jacob Marley?\""));
    ASSERT_EQ(one.exit_code, 0) << one.err;
    auto j = nlohmann::json::parse(one.out);
    EXPECT_EQ(j["method"], m);
    EXPECT_EQ(j["chunks"].size(), 3u) << m;
  }
  auto text = RunCommand(Offline("search --k 2 \"Tiny Tim\""));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("1. christmas_carol.txt, chunk "), std::string::npos) << text.out;

  for (const std::string m : {"basic", "hybrid"}) {
    auto q = RunCommand(Offline("query --json --method " + m + " \"Who is Jacob Marley?\""));
    ASSERT_EQ(q.exit_code, 0) << q.err;
    auto j = nlohmann::json::parse(q.out);
    EXPECT_EQ(j["method"], m);
    EXPECT_FALSE(j["llm"].get<bool>());
    EXPECT_NE(j["answer"].get<std::string>().find("Marley"), std::string::npos) << j["answer"];
    EXPECT_FALSE(j["sources"].empty());
    EXPECT_FALSE(j["citations"].empty());
  }
  // The router: the corpus question goes to global, the lookup to local or hybrid.
  auto themes = RunCommand(Offline("query --route --json \"What are the main themes?\""));
  ASSERT_EQ(themes.exit_code, 0) << themes.err;
  EXPECT_EQ(nlohmann::json::parse(themes.out)["method"], "global");
  auto marley = RunCommand(Offline("query --route --json \"Who is Jacob Marley?\""));
  ASSERT_EQ(marley.exit_code, 0) << marley.err;
  const std::string method = nlohmann::json::parse(marley.out)["method"];
  EXPECT_TRUE(method == "local" || method == "hybrid") << method;
  auto routed = RunCommand(Offline("query --json \"Who is Jacob Marley?\""));
  ASSERT_EQ(routed.exit_code, 0) << routed.err;
  auto r = nlohmann::json::parse(routed.out);
  EXPECT_EQ(r["route"]["method"], method);
  EXPECT_EQ(r["route"]["estimated_llm_calls"], 0);  // no model: nothing to spend
  EXPECT_FALSE(r["answer"].get<std::string>().empty());
  EXPECT_EQ(server_.request_count(), 0);
}

// libcurl, libpq and igraph are opened when first needed (grag/lazy_library.h), not at start-up;
// SQLite, spdlog and toml++ are built in, and cpp-httplib with OpenSSL is linked into grag-serve
// only: the dynamic loader's trace (LD_DEBUG=files) shows which a command loaded.
TEST_F(E2eNoLlmTest, AQuestionLoadsOnlyTheLibrariesItUses) {
  auto index = RunCommand("LD_DEBUG=files " + Offline("index --no-progress"));
  ASSERT_EQ(index.exit_code, 0) << index.err.substr(index.err.size() - 2000);
  EXPECT_NE(index.err.find("file=libigraph"), std::string::npos);  // clustering opened it
  auto local =
      RunCommand("LD_DEBUG=files " + Offline("query --method local \"Who is Jacob Marley?\""));
  ASSERT_EQ(local.exit_code, 0) << local.err.substr(local.err.size() - 2000);
  EXPECT_NE(local.err.find("file=libstdc++"), std::string::npos);  // the trace is there
  for (const std::string lib : {"libigraph", "libpq", "libcurl", "libcpp-httplib", "libssl",
                                "libcrypto", "libsqlite3", "libspdlog", "libtomlplusplus"}) {
    EXPECT_EQ(local.err.find("file=" + lib), std::string::npos) << lib << " was loaded";
  }
}

TEST_F(E2eNoLlmTest, NoModelConfiguredMeansTheNoLlmModeByDefault) {
  // No GRAG_LLM_* at all: no flag needed.
  auto index = RunCommand("env -u GRAG_LLM_BASE_URL -u GRAG_LLM_MODEL -u GRAG_EMBEDDING_MODEL " +
                          Grag("--root " + ShellQuote(root_) + " index --no-progress"));
  ASSERT_EQ(index.exit_code, 0) << index.err;
  EXPECT_NE(index.out.find("no-LLM mode"), std::string::npos) << index.out;
  auto stats = RunCommand(Grag("--root " + ShellQuote(root_) + " stats"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_NE(stats.out.find("lexical"), std::string::npos) << stats.out;
  auto again = RunCommand(Grag("--root " + ShellQuote(root_) + " index --json --no-progress"));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto s = nlohmann::json::parse(again.out);
  EXPECT_EQ(s["chunks"]["extracted"], 0);
  EXPECT_EQ(s["reports"]["generated"], 0);
  EXPECT_EQ(s["embeddings_written"], 0);
  EXPECT_EQ(server_.request_count(), 0);
}

}  // namespace
}  // namespace grag
