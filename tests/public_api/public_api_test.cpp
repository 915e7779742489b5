// A program that uses grag as a library user would: it is compiled with include/grag/ alone on
// its include path and linked with the engine only (tests/CMakeLists.txt), and it indexes a
// small corpus without a model and asks it questions. That it builds at all is half the test:
// nothing it needs lives under src/.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "grag/config.h"
#include "grag/engine.h"
#include "grag/engine_json.h"
#include "grag/project.h"

namespace {

namespace fs = std::filesystem;

class PublicApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/grag-public-api-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(PublicApiTest, IndexesAndAnswersThroughTheEngineAlone) {
  grag::Result<grag::InitResult> init = grag::InitProject(dir_);
  ASSERT_TRUE(init.ok()) << init.status().ToString();
  std::ofstream(dir_ + "/input/ships.txt")
      << "The Halden Shipping Company was founded by Marta Kowal in Bergen in 1911. "
         "Marta Kowal sailed the ship Nordlys to Iceland.\n\n"
         "Jonas Berg captained the Nordlys after 1925 and kept its logbook in Bergen.\n";

  grag::Result<grag::Config> config = grag::LoadConfig(dir_);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  grag::DisableModels(*config);

  {
    grag::EngineOptions writable;
    writable.writable = true;
    auto writer = grag::Engine::Open(*config, writable);
    ASSERT_TRUE(writer.ok()) << writer.status().ToString();
    grag::Result<grag::IndexSummary> summary = (*writer)->Index(grag::IndexRequest{});
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    EXPECT_EQ(summary->documents_added, 1);
    EXPECT_GT(summary->entities, 0);
  }

  auto reader = grag::Engine::Open(*config);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_TRUE((*reader)->Warm().ok());

  grag::SearchRequest search;
  search.question = "Who captained the Nordlys?";
  grag::Result<grag::RetrievalResult> ranked = (*reader)->Search(search);
  ASSERT_TRUE(ranked.ok()) << ranked.status().ToString();
  ASSERT_FALSE(ranked->chunks.empty());
  EXPECT_EQ(ranked->method, grag::RetrievalMethod::kHybrid);  // search.method's default

  grag::QueryRequest question;
  question.question = "Who is Marta Kowal?";
  question.method = grag::QueryMethod::kLocal;
  grag::Result<grag::QueryResult> answer = (*reader)->Query(question);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->method, grag::QueryMethod::kLocal);
  EXPECT_FALSE(answer->llm);
  EXPECT_NE(answer->answer.find("Marta Kowal"), std::string::npos) << answer->answer;
  EXPECT_NE(grag::QueryResultJson(*answer, question.question, false).find("\"method\":\"local\""),
            std::string::npos);

  grag::Result<grag::IndexStats> stats = (*reader)->Stats(5);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->store.documents, 1);
  EXPECT_EQ((*reader)->ModelUsage().calls, 0);  // no model configured
}

}  // namespace
