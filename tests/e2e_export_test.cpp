// grag export and grag sql as a user runs them: the binary on a no-LLM index of part of A
// Christmas Carol. Exports are checked against `grag stats --json`; grag sql answers on each
// view in each output form, refuses writes with exit code 2, and leaves the index as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "grag/hash.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using nlohmann::json;
using testing::ReadFile;
using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

class E2eExportTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    root_ = new std::string(*dir_ / "carol");
    auto init = RunCommand(Grag("init " + ShellQuote(*root_)));
    ASSERT_EQ(init.exit_code, 0) << init.err;
    const std::string book =
        ReadFile(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
    std::ofstream(*root_ + "/input/carol.txt") << book.substr(0, 80000);
    auto index = RunCommand(In("--no-llm index --no-progress"));
    ASSERT_EQ(index.exit_code, 0) << index.err;
    auto stats = RunCommand(In("stats --json"));
    ASSERT_EQ(stats.exit_code, 0) << stats.err;
    stats_ = new json(json::parse(stats.out));
  }
  static void TearDownTestSuite() {
    delete stats_;
    delete root_;
    delete dir_;
  }

  static std::string Grag(const std::string& args) { return ShellQuote(GRAG_BINARY) + " " + args; }
  static std::string In(const std::string& args) {
    return Grag("--root " + ShellQuote(*root_) + " " + args);
  }
  static int64_t Stat(const char* key) { return (*stats_)[key].get<int64_t>(); }

  // Data rows of a CSV file, by Python's csv module.
  static int64_t CsvRows(const std::string& path) {
    auto r =
        RunCommand("python3 -c " +
                   ShellQuote("import sys, csv; print(sum(1 for _ in csv.reader(open(sys.argv[1], "
                              "newline='', encoding='utf-8'))) - 1)") +
                   " " + ShellQuote(path));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::stoll(r.out);
  }

  static TempDir* dir_;
  static std::string* root_;
  static json* stats_;
  TempDir out_;
};

TempDir* E2eExportTest::dir_ = nullptr;
std::string* E2eExportTest::root_ = nullptr;
json* E2eExportTest::stats_ = nullptr;

TEST_F(E2eExportTest, CsvRowCountsMatchGragStats) {
  const std::string out = out_ / "csv";
  auto r = RunCommand(In("export --format csv --out " + ShellQuote(out) + " --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json summary = json::parse(r.out);
  EXPECT_EQ(summary["format"], "csv");
  EXPECT_EQ(summary["files"].size(), 6u);
  EXPECT_EQ(CsvRows(out + "/documents.csv"), Stat("documents"));
  EXPECT_EQ(CsvRows(out + "/text_units.csv"), Stat("chunks"));
  EXPECT_EQ(CsvRows(out + "/entities.csv"), Stat("entities"));
  EXPECT_EQ(CsvRows(out + "/relationships.csv"), Stat("relationships"));
  EXPECT_EQ(CsvRows(out + "/communities.csv"), Stat("communities"));
  EXPECT_EQ(CsvRows(out + "/community_reports.csv"), Stat("reports"));
  // The summary's counts are the files' counts.
  for (const auto& f : summary["files"]) {
    EXPECT_EQ(f["counts"]["rows"].get<int64_t>(), CsvRows(f["path"].get<std::string>()))
        << f["path"];
  }

  // Again into the same folder: refused (usage, exit 2) unless --force.
  auto again = RunCommand(In("export --format csv --out " + ShellQuote(out)));
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  EXPECT_EQ(RunCommand(In("export --format csv --force --out " + ShellQuote(out))).exit_code, 0);
}

TEST_F(E2eExportTest, GraphmlJsonAndNeo4jParseBack) {
  auto g = RunCommand(In("export --format graphml --out " + ShellQuote(out_ / "g")));
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out.find("graph.graphml"), std::string::npos) << g.out;
  auto parsed =
      RunCommand("python3 -c " +
                 ShellQuote("import sys, xml.etree.ElementTree as ET\n"
                            "ns = {'g': 'http://graphml.graphdrawing.org/xmlns'}\n"
                            "g = ET.parse(sys.argv[1]).getroot().find('g:graph', ns)\n"
                            "print(len(g.findall('g:node', ns)), len(g.findall('g:edge', ns)))") +
                 " " + ShellQuote(out_ / "g/graph.graphml"));
  ASSERT_EQ(parsed.exit_code, 0) << parsed.err;
  EXPECT_EQ(parsed.out,
            std::to_string(Stat("entities")) + " " + std::to_string(Stat("relationships")) + "\n");

  auto j = RunCommand(In("export --format json --out " + ShellQuote(out_ / "j")));
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const json entities = json::parse(ReadFile(out_ / "j/entities.json"));
  EXPECT_EQ(static_cast<int64_t>(entities.size()), Stat("entities"));
  const json reports = json::parse(ReadFile(out_ / "j/community_reports.json"));
  EXPECT_EQ(static_cast<int64_t>(reports.size()), Stat("reports"));

  auto n = RunCommand(In("export --format neo4j --out " + ShellQuote(out_ / "n")));
  ASSERT_EQ(n.exit_code, 0) << n.err;
  EXPECT_EQ(CsvRows(out_ / "n/entities.csv"), Stat("entities"));
  EXPECT_EQ(CsvRows(out_ / "n/relationships.csv"), Stat("relationships"));
  EXPECT_EQ(ReadFile(out_ / "n/relationships.csv").substr(0, 21), ":START_ID,:END_ID,wei");
  EXPECT_TRUE(std::filesystem::exists(out_ / "n/load.cypher"));
}

TEST_F(E2eExportTest, BadUsageExitsTwoWithAMessage) {
  auto bad = RunCommand(In("export --format xml --out " + ShellQuote(out_ / "x")));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("graphml, csv, json or neo4j"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(out_ / "x"));
  EXPECT_EQ(RunCommand(In("export --format csv")).exit_code, 2);  // no --out
  // No index there: a clear error, not a crash.
  auto none = RunCommand(Grag("--root " + ShellQuote(out_ / "nothing") +
                              " export --format csv --out " + ShellQuote(out_ / "y")));
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("error:"), std::string::npos) << none.err;
  EXPECT_EQ(RunCommand(In("sql --csv --json \"SELECT 1\"")).exit_code, 2);
}

TEST_F(E2eExportTest, SqlAnswersOnEveryViewInEachForm) {
  for (const char* view : {"entities", "relationships", "entity_communities", "communities",
                           "reports", "chunks", "documents"}) {
    auto r = RunCommand(In(std::string("sql --json \"SELECT * FROM ") + view + " LIMIT 3\""));
    ASSERT_EQ(r.exit_code, 0) << view << ": " << r.err;
    const json rows = json::parse(r.out);
    // Three rows each, but there is one document.
    EXPECT_EQ(rows.size(), std::string(view) == "documents" ? 1u : 3u) << view;
  }
  auto count = RunCommand(In("sql --json \"SELECT count(*) AS n FROM relationships\""));
  ASSERT_EQ(count.exit_code, 0) << count.err;
  EXPECT_EQ(json::parse(count.out)[0]["n"].get<int64_t>(), Stat("relationships"));

  auto table =
      RunCommand(In("sql \"SELECT name, degree FROM entities ORDER BY degree DESC\" "
                    "--max-rows 5"));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(table.out.substr(0, 4), "name");
  EXPECT_NE(table.out.find("Scrooge"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("first 5 rows"), std::string::npos) << table.out;

  auto csv = RunCommand(In("sql --csv \"SELECT id, level FROM communities ORDER BY id\""));
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(csv.out.substr(0, 9), "id,level\n");
  EXPECT_EQ(static_cast<int64_t>(std::count(csv.out.begin(), csv.out.end(), '\n')),
            Stat("communities") + 1);
}

TEST_F(E2eExportTest, SqlRefusesWritesWithExitTwoAndLeavesTheIndexAlone) {
  const std::string db = *root_ + "/output/index.db";
  const std::string before = Sha256Hex(ReadFile(db));
  const std::string stats_before = RunCommand(In("stats --json")).out;
  for (const char* sql :
       {"INSERT INTO main.meta (key, value) VALUES ('a', 'b')", "DROP TABLE main.entities",
        "ATTACH DATABASE '/tmp/x.db' AS x", "PRAGMA user_version = 1", "PRAGMA query_only = OFF",
        "SELECT 1; DELETE FROM main.entities", "DELETE FROM main.reports"}) {
    auto r = RunCommand(In("sql " + ShellQuote(sql)));
    EXPECT_EQ(r.exit_code, 2) << sql << ": " << r.err;
    EXPECT_NE(r.err.find("refused"), std::string::npos) << sql << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  auto error = RunCommand(In("sql \"SELECT nosuch FROM entities\""));
  EXPECT_EQ(error.exit_code, 2);
  EXPECT_NE(error.err.find("no such column"), std::string::npos) << error.err;
  EXPECT_EQ(Sha256Hex(ReadFile(db)), before);
  EXPECT_EQ(RunCommand(In("stats --json")).out, stats_before);
}

}  // namespace
}  // namespace grag
