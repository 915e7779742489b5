// End to end, the compact index (issue 37): the grag binary indexes against a loopback
// OpenAI-compatible server; `grag cache prune` removes only the reply cache entries written
// before the last complete run and the file shrinks; `grag stats --json` says what takes the
// room; the compressed replies still answer (a question asked again makes no request).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

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

class E2eCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "carol";
    auto init = RunCommand(Grag("init " + ShellQuote(root_)));
    ASSERT_EQ(init.exit_code, 0) << init.err;
    std::ifstream in(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
    std::stringstream book;
    book << in.rdbuf();
    text_ = book.str();
    ASSERT_GT(text_.size(), 60000u);
  }

  void Write(const std::string& name, size_t from, size_t size) {
    std::ofstream(root_ + "/input/" + name) << text_.substr(from, size);
  }
  std::string Grag(const std::string& args) const { return ShellQuote(GRAG_BINARY) + " " + args; }
  std::string Run(const std::string& args) const {
    return "GRAG_LLM_BASE_URL=" + server_.base_url() + " GRAG_LLM_MODEL=fake-model " +
           "GRAG_EMBEDDING_MODEL=fake-embed GRAG_LLM_API_KEY=sk-test " +
           Grag("--root " + ShellQuote(root_) + " " + args);
  }
  nlohmann::json Json(const std::string& args) const {
    auto r = RunCommand(Run(args));
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }
  int64_t CacheEntries() const { return Json("stats --json")["cache_entries"].get<int64_t>(); }

  TempDir dir_;
  std::string root_;
  std::string text_;
  FakeOpenAIServer server_{FakeGraphRagHandler()};
};

TEST_F(E2eCacheTest, PruneRemovesOnlyWhatTheLastCompleteRunDidNotWriteAndTheFileShrinks) {
  Write("first.txt", 0, 30000);
  ASSERT_EQ(RunCommand(Run("index --no-progress")).exit_code, 0);
  const int64_t first = CacheEntries();
  ASSERT_GT(first, 5);
  // What the index keeps in its own tables is not kept twice: no extraction or embedding reply
  // stays once the run is complete; the summaries, the judge's and the reports' do.
  std::set<std::string> kinds;
  const nlohmann::json cache = Json("stats --json")["cache"];
  for (const auto& c : cache) kinds.insert(c["kind"].get<std::string>());
  EXPECT_EQ(kinds.count("chat/extract"), 0u);
  EXPECT_EQ(kinds.count("embedding"), 0u);
  EXPECT_EQ(kinds.count("chat/summarize"), 1u) << cache.dump();
  const auto text = RunCommand(Run("stats"));
  EXPECT_NE(text.out.find("\n  by kind "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" chat/summarize "), std::string::npos) << text.out;
  Write("second.txt", 30000, 30000);
  ASSERT_EQ(RunCommand(Run("index --no-progress")).exit_code, 0);
  const int64_t both = CacheEntries();
  ASSERT_GT(both, first);

  // What takes the room, by table.
  const nlohmann::json stats = Json("stats --json");
  ASSERT_TRUE(stats["space"].is_array());
  int64_t total = 0;
  bool cache_listed = false, embeddings_listed = false;
  for (const auto& t : stats["space"]) {
    total += t["bytes"].get<int64_t>() + t["index_bytes"].get<int64_t>();
    cache_listed |= t["table"] == "llm_cache";
    embeddings_listed |= t["table"] == "embeddings";
  }
  EXPECT_TRUE(cache_listed && embeddings_listed) << stats["space"].dump();
  // The pages in use: free pages (the dropped replies') belong to no table.
  EXPECT_EQ(total, stats["file_bytes"].get<int64_t>()) << stats["space"].dump();

  // A dry run changes nothing.
  const nlohmann::json dry = Json("cache prune --dry-run --json");
  EXPECT_EQ(dry["entries_removed"].get<int64_t>(), first);
  EXPECT_EQ(CacheEntries(), both);

  const auto before = std::filesystem::file_size(root_ + "/output/index.db");
  auto pruned = RunCommand(Run("cache prune"));
  ASSERT_EQ(pruned.exit_code, 0) << pruned.err;
  EXPECT_NE(pruned.out.find("removed " + std::to_string(first) + " reply cache entries"),
            std::string::npos)
      << pruned.out;
  EXPECT_EQ(CacheEntries(), both - first);  // the second run's are kept
  EXPECT_LT(std::filesystem::file_size(root_ + "/output/index.db"), before);

  // The index still answers, and a re-run makes no request.
  const int requests = server_.request_count();
  ASSERT_EQ(RunCommand(Run("index --no-progress")).exit_code, 0);
  EXPECT_EQ(server_.request_count(), requests);

  // A question asked twice: the second answer comes from the compressed cache entry.
  ASSERT_EQ(RunCommand(Run("query --method local \"Who is Marley?\"")).exit_code, 0);
  const int asked = server_.request_count();
  EXPECT_GT(asked, requests);
  ASSERT_EQ(RunCommand(Run("query --method local \"Who is Marley?\"")).exit_code, 0);
  EXPECT_EQ(server_.request_count(), asked);

  // --older-than: by age; bad ages are refused with exit 2.
  EXPECT_EQ(Json("cache prune --older-than 0m --json")["entries_kept"].get<int64_t>(), 0);
  EXPECT_EQ(CacheEntries(), 0);
  EXPECT_EQ(RunCommand(Run("cache prune --older-than soon")).exit_code, 2);
}

}  // namespace
}  // namespace grag
