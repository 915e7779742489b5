// Black-box tests of the grag binary: init, config, chunk, help and exit codes.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

std::string Grag(const std::string& args) { return ShellQuote(GRAG_BINARY) + " " + args; }

TEST(CliTest, HelpListsCommandsAndExitCodes) {
  auto r = RunCommand(Grag("--help"));
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word : {"init", "config", "chunk", "--root", "Exit codes"}) {
    EXPECT_NE(r.out.find(word), std::string::npos) << word << "\n" << r.out;
  }
  r = RunCommand(Grag("chunk --help"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--overlap"), std::string::npos);
}

TEST(CliTest, UnknownCommandOrFlagIsUsageError) {
  EXPECT_EQ(RunCommand(Grag("frobnicate")).exit_code, 2);
  EXPECT_EQ(RunCommand(Grag("chunk --bogus x")).exit_code, 2);
  EXPECT_EQ(RunCommand(Grag("")).exit_code, 2);
}

TEST(CliTest, InitWritesConfigAndSeedPromptsAndKeepsExistingFiles) {
  TempDir dir;
  const std::string root = dir / "proj";
  auto r = RunCommand(Grag("init " + ShellQuote(root)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f :
       {"grag.toml", "prompts/extract_graph.md", "prompts/community_report.md",
        "prompts/global_map.md", "prompts/global_reduce.md", "prompts/local_search.md"}) {
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(root) / f)) << f;
  }
  EXPECT_TRUE(std::filesystem::is_directory(std::filesystem::path(root) / "input"));
  dir.Write("proj/prompts/global_map.md", "mine {{question}} {{report_batch}}");
  r = RunCommand(Grag("init --json " + ShellQuote(root)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["written"].empty());
  EXPECT_EQ(j["kept"].size(), 16u);  // grag.toml and the fifteen prompts
}

TEST(CliTest, ConfigShowsPrecedenceAndHidesKeys) {
  TempDir dir;
  dir.Write("grag.toml", "[llm]\nmodel = \"file-model\"\napi_key = \"sk-secret\"\n");
  auto r = RunCommand(
      "GRAG_LLM_BASE_URL=http://env:1/v1 " +
      Grag("--root " + ShellQuote(dir.path().string()) + " --set chunks.size=300 config --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  std::map<std::string, std::string> values;
  for (const auto& s : j) values[s["key"]] = s["value"];
  EXPECT_EQ(values["llm.model"], "\"file-model\"");
  EXPECT_EQ(values["llm.base_url"], "\"http://env:1/v1\"");
  EXPECT_EQ(values["chunks.size"], "300");
  EXPECT_EQ(values["llm.api_key"], "\"***\"");
  EXPECT_EQ(r.out.find("sk-secret"), std::string::npos);
}

TEST(CliTest, BadConfigIsUsageErrorWithMessage) {
  TempDir dir;
  dir.Write("grag.toml", "[chunks]\nsize = \"big\"\n");
  auto r = RunCommand(Grag("--root " + ShellQuote(dir.path().string()) + " config"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("chunks.size"), std::string::npos) << r.err;
  r = RunCommand(Grag("--root " + ShellQuote(dir.path().string()) + " --set nope=1 chunk x"));
  EXPECT_EQ(r.exit_code, 2);
}

TEST(CliTest, ChunkShowsChunksAndTokenCounts) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 400; ++i) text += "The quick brown fox jumps over the lazy dog. ";
  const std::string file = dir.Write("fox.txt", text);
  auto r = RunCommand("cd " + ShellQuote(dir.path().string()) + " && " +
                      Grag("chunk fox.txt --size 500 --overlap 50 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["document"], "fox.txt");
  const auto& chunks = j[0]["chunks"];
  ASSERT_GE(chunks.size(), 8u);
  for (size_t i = 0; i + 1 < chunks.size(); ++i) EXPECT_EQ(chunks[i]["n_tokens"], 500);
  EXPECT_EQ(chunks[0]["index"], 0);

  r = RunCommand("cd " + ShellQuote(dir.path().string()) + " && " + Grag("chunk fox.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("fox.txt: "), std::string::npos);
  EXPECT_NE(r.out.find("total: 1 documents"), std::string::npos) << r.out;
}

TEST(CliTest, ChunkReportsBadFilesWithoutCrashing) {
  TempDir dir;
  dir.Write("bad.txt", "ok \xFF\xFE bytes");
  auto r = RunCommand(Grag("chunk " + ShellQuote(dir / "bad.txt")));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.txt"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("byte offset 3"), std::string::npos) << r.err;
  r = RunCommand(Grag("chunk " + ShellQuote(dir / "missing.txt")));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing.txt"), std::string::npos);
  r = RunCommand(Grag("chunk --size 10 --overlap 10 " + ShellQuote(dir / "bad.txt")));
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

// `grag serve` replaces the process with grag-serve, the binary beside grag; a grag copied
// without it says what is missing instead of failing obscurely.
TEST(CliTest, ServeWithoutGragServeBesideItSaysWhatIsMissing) {
  TempDir dir;
  const std::filesystem::path solo = dir.path() / "grag";
  std::filesystem::copy_file(GRAG_BINARY, solo);
  std::filesystem::permissions(solo, std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  auto r = RunCommand(ShellQuote(solo.string()) + " --root " + ShellQuote(dir.path().string()) +
                      " serve --port 0");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("cannot run " + (dir.path() / "grag-serve").string()), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("installed beside grag"), std::string::npos) << r.err;
  // The help is grag's own: it needs no grag-serve.
  auto help = RunCommand(ShellQuote(solo.string()) + " serve --help");
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_NE(help.out.find("--port"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace grag
