// End to end, entity resolution on the demo book in the no-LLM mode (issue 14): the grag binary
// joins "Marley" to "Jacob Marley" and "Scrooge" to "Ebenezer Scrooge", keeps the three Ghosts of
// Christmas apart, and `grag entities split/merge` corrections apply at once and survive a
// re-index.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

class E2eEntitiesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "carol";
    auto init = RunCommand(Grag("init " + ShellQuote(root_)));
    ASSERT_EQ(init.exit_code, 0) << init.err;
    std::filesystem::copy_file(
        std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
        root_ + "/input/christmas_carol.txt");
    auto index = RunCommand(In("index --json --no-progress"));
    ASSERT_EQ(index.exit_code, 0) << index.err;
    auto s = nlohmann::json::parse(index.out);
    EXPECT_GT(s["resolution"]["fresh"].get<int>(), 100);
    EXPECT_GT(s["resolution"]["merged"].get<int>(), 0);
  }

  std::string Grag(const std::string& args) const { return ShellQuote(GRAG_BINARY) + " " + args; }
  std::string In(const std::string& args) const {
    return Grag("--root " + ShellQuote(root_) + " --no-llm " + args);
  }

  // The other names of the entities whose names hold `search`, by entity name.
  std::map<std::string, std::set<std::string>> Entities(const std::string& search) {
    auto r = RunCommand(In("entities list --json --limit 1000 --search " + ShellQuote(search)));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, std::set<std::string>> out;
    for (const auto& e : nlohmann::json::parse(r.out)) {
      std::set<std::string> names;
      for (const auto& a : e["aliases"]) names.insert(a.get<std::string>());
      out[e["name"].get<std::string>()] = names;
    }
    return out;
  }

  // Whether one entity bears both names (either may be the one it is called by).
  static bool OneEntity(const std::map<std::string, std::set<std::string>>& entities,
                        const std::string& a, const std::string& b) {
    for (const auto& [name, others] : entities) {
      std::set<std::string> all = others;
      all.insert(name);
      if (all.count(a) && all.count(b)) return true;
    }
    return false;
  }

  TempDir dir_;
  std::string root_;
};

TEST_F(E2eEntitiesTest, VariantsAreOneEntityAndTheGhostsStayThree) {
  auto marley = Entities("marley");
  EXPECT_TRUE(OneEntity(marley, "Jacob Marley", "Marley")) << nlohmann::json(marley).dump();
  auto scrooge = Entities("scrooge");
  EXPECT_TRUE(OneEntity(scrooge, "Ebenezer Scrooge", "Scrooge")) << nlohmann::json(scrooge).dump();

  // The Ghosts of Christmas Past and Present (and the one the extractor calls the Ghost of
  // Christmas) stay entities of their own: none is a name of another.
  auto ghosts = Entities("ghost of christmas");
  EXPECT_TRUE(ghosts.count("Ghost of Christmas Past")) << nlohmann::json(ghosts).dump();
  EXPECT_TRUE(ghosts.count("Ghost of Christmas Present")) << nlohmann::json(ghosts).dump();
  for (const auto& [name, others] : ghosts) {
    for (const auto& o : others) {
      EXPECT_EQ(o.find("Ghost of Christmas"), std::string::npos) << o << " is a name of " << name;
    }
  }

  // `grag stats` says what resolution merged; `aliases` says how and why.
  auto stats = RunCommand(In("stats --json"));
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_GT(nlohmann::json::parse(stats.out)["resolution"]["merged"].get<int>(), 0);
  auto aliases = RunCommand(In("aliases --json"));
  EXPECT_NE(aliases.exit_code, 0);  // not a command: usage error
  aliases = RunCommand(In("entities aliases --json --search marley"));
  ASSERT_EQ(aliases.exit_code, 0) << aliases.err;
  bool listed = false;
  const auto listing = nlohmann::json::parse(aliases.out);
  for (const auto& a : listing["aliases"]) {
    if ((a["name"] == "Marley" && a["entity"] == "Jacob Marley") ||
        (a["name"] == "Jacob Marley" && a["entity"] == "Marley")) {
      listed = true;
      EXPECT_FALSE(a["method"].get<std::string>().empty());
    }
  }
  EXPECT_TRUE(listed) << aliases.out;

  // A question naming the short form finds the entity.
  auto search = RunCommand(In("query --json --method local \"Who was Marley?\""));
  ASSERT_EQ(search.exit_code, 0) << search.err;
  bool matched = false;
  const auto answer = nlohmann::json::parse(search.out);
  for (const auto& m : answer["matched_entities"]) {
    matched = matched || m["name"] == "Jacob Marley" || m["name"] == "Marley";
  }
  EXPECT_TRUE(matched) << search.out;
}

TEST_F(E2eEntitiesTest, SplitAndMergeApplyAtOnceAndSurviveReindexing) {
  auto split = RunCommand(In("entities split \"Jacob Marley\" --alias Marley --no-progress"));
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_NE(split.err.find("recorded"), std::string::npos) << split.err;
  auto after = Entities("marley");
  EXPECT_FALSE(OneEntity(after, "Jacob Marley", "Marley")) << nlohmann::json(after).dump();
  EXPECT_TRUE(after.count("Marley")) << nlohmann::json(after).dump();

  // A full re-index (here: with other resolution settings, so every name is resolved again)
  // keeps the person's decision.
  auto reindex = RunCommand(In("--set resolution.no_llm_merge_threshold=0.8 index --no-progress"));
  ASSERT_EQ(reindex.exit_code, 0) << reindex.err;
  after = Entities("marley");
  EXPECT_FALSE(OneEntity(after, "Jacob Marley", "Marley")) << nlohmann::json(after).dump();

  auto merge = RunCommand(In("entities merge Marley \"jacob marley\" --json --no-progress"));
  ASSERT_EQ(merge.exit_code, 0) << merge.err;
  EXPECT_GT(nlohmann::json::parse(merge.out)["entities"].get<int>(), 50);
  after = Entities("marley");
  EXPECT_TRUE(OneEntity(after, "Jacob Marley", "Marley")) << nlohmann::json(after).dump();
  auto aliases = RunCommand(In("entities aliases --json"));
  ASSERT_EQ(aliases.exit_code, 0) << aliases.err;
  EXPECT_FALSE(nlohmann::json::parse(aliases.out)["overrides"].empty());

  // Clear failures: an unknown name, a name that is not the entity's, no subcommand.
  auto unknown = RunCommand(In("entities merge Marley Nobody-At-All --no-progress"));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("Nobody-At-All"), std::string::npos) << unknown.err;
  auto wrong = RunCommand(In("entities split \"Jacob Marley\" --alias Fezziwig --no-progress"));
  EXPECT_EQ(wrong.exit_code, 2) << wrong.err;
  auto bare = RunCommand(In("entities"));
  EXPECT_EQ(bare.exit_code, 2);
}

}  // namespace
}  // namespace grag
