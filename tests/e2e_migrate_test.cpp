// grag migrate through the binary (issue 18): the demo book indexed without an LLM is copied to
// another SQLite file and, with a server (the *Postgres* case), to PostgreSQL and back; each copy
// answers, counts and checks as the original, and re-indexing it redoes nothing. Refusals (a
// non-empty target, an unreachable server) exit non-zero with a clear message.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/postgres.h"
#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

class E2eMigrateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_ / "proj";
    auto init = RunCommand(Grag("init " + ShellQuote(root_)));
    ASSERT_EQ(init.exit_code, 0) << init.err;
    std::filesystem::copy_file(
        std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
        root_ + "/input/christmas_carol.txt");
    auto index = RunCommand(On("", "index --no-progress"));
    ASSERT_EQ(index.exit_code, 0) << index.err;
  }

  static std::string Grag(const std::string& args) { return ShellQuote(GRAG_BINARY) + " " + args; }
  // `args` run offline on the project, its index at `store` (an SQLite path or a URL; "" for
  // the configured one).
  std::string On(const std::string& store, const std::string& args) const {
    std::string env = "GRAG_LLM_BASE_URL= GRAG_LLM_MODEL= GRAG_EMBEDDING_MODEL= GRAG_STORE_URL= ";
    if (store.starts_with("postgresql://")) {
      env += "GRAG_STORE_URL=" + ShellQuote(store) + " ";
    } else if (!store.empty()) {
      env += "GRAG_INDEX_PATH=" + ShellQuote(store) + " ";
    }
    return env + Grag("--root " + ShellQuote(root_) + " --no-llm " + args);
  }

  // Migrates and checks the summary: every table matches, and the index's tables have rows.
  nlohmann::json Migrate(const std::string& from, const std::string& to) {
    const auto start = std::chrono::steady_clock::now();
    auto run = RunCommand(On(from, "migrate --json --to " + ShellQuote(to)));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    EXPECT_EQ(run.exit_code, 0) << run.err;
    if (run.exit_code != 0) return {};
    auto j = nlohmann::json::parse(run.out);
    std::cout << "[ TIMING   ] grag migrate of the book index (" << j["rows"] << " rows) to "
              << (to.starts_with("postgresql://") ? "PostgreSQL" : "SQLite") << ": " << ms
              << " ms (copy " << j["seconds"] << " s)\n";
    for (const auto& t : j["tables"]) {
      EXPECT_TRUE(t["match"].get<bool>()) << t.dump();
      EXPECT_EQ(t["source_rows"], t["target_rows"]);
    }
    return j;
  }

  // What must be the same on the copy: answers and counts.
  void ExpectSameAnswers(const std::string& copy) {
    for (const std::string question :
         {"query --json --method local \"Who is Jacob Marley?\"", "stats --json"}) {
      auto a = RunCommand(On("", question));
      auto b = RunCommand(On(copy, question));
      ASSERT_EQ(a.exit_code, 0) << a.err;
      ASSERT_EQ(b.exit_code, 0) << b.err;
      auto ja = nlohmann::json::parse(a.out);
      auto jb = nlohmann::json::parse(b.out);
      if (ja.contains("answer")) {
        EXPECT_EQ(ja["answer"], jb["answer"]) << question;
      } else {
        for (const char* key : {"documents", "chunks", "entities", "relationships"}) {
          EXPECT_EQ(ja[key], jb[key]) << key;
        }
      }
    }
    auto check = RunCommand(On(copy, "check"));
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
    // The cache and fingerprints came across: an index run on unchanged input redoes nothing.
    auto index = RunCommand(On(copy, "index --json --no-progress"));
    ASSERT_EQ(index.exit_code, 0) << index.err;
    auto summary = nlohmann::json::parse(index.out);
    EXPECT_EQ(summary["chunks"]["extracted"], 0) << index.out;
  }

  TempDir dir_;
  std::string root_;
};

TEST_F(E2eMigrateTest, CopiesTheBookIndexToAnotherFileAndRefusesTwice) {
  const std::string copy = dir_ / "copy/index.db";
  auto j = Migrate("", copy);
  ASSERT_FALSE(j.empty());
  EXPECT_GT(j["rows"].get<int64_t>(), 1000);
  ExpectSameAnswers(copy);

  // The plain summary says what matched and how to switch.
  const std::string other = dir_ / "other.db";
  auto plain = RunCommand(On("", "migrate --to " + ShellQuote(other)));
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("every table's count and checksum match"), std::string::npos);
  EXPECT_NE(plain.out.find("store.path"), std::string::npos) << plain.out;

  // A target holding an index is refused, by name, and left alone.
  auto again = RunCommand(On("", "migrate --to " + ShellQuote(copy)));
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find(copy), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("already holds an index"), std::string::npos) << again.err;
  EXPECT_EQ(RunCommand(On(copy, "check")).exit_code, 0);

  // An unreachable server: a clear error without the password.
  auto down = RunCommand(
      On("", "migrate --to 'postgresql://grag:s3cret@127.0.0.1:1/grag?connect_timeout=2'"));
  EXPECT_NE(down.exit_code, 0);
  EXPECT_EQ(down.err.find("s3cret"), std::string::npos) << down.err;
  EXPECT_NE(down.err.find("127.0.0.1"), std::string::npos) << down.err;

  // --help explains how to switch the project to the copy.
  auto help = RunCommand(Grag("migrate --help"));
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("store.url"), std::string::npos) << help.out;
}

TEST_F(E2eMigrateTest, PostgresRoundTrip) {
  testing::TestDatabase db;
  const std::string why = db.CreateForTest();
  if (!why.empty()) GTEST_SKIP() << why;
  auto to_pg = Migrate("", db.url());
  ASSERT_FALSE(to_pg.empty());
  const std::string back = dir_ / "back.db";
  auto to_file = Migrate(db.url(), back);
  ASSERT_FALSE(to_file.empty());
  // Out and back, bit for bit.
  for (size_t i = 0; i < to_pg["tables"].size(); ++i) {
    EXPECT_EQ(to_pg["tables"][i]["source_checksum"], to_file["tables"][i]["target_checksum"])
        << to_pg["tables"][i]["table"];
  }
  ExpectSameAnswers(db.url());
  ExpectSameAnswers(back);
}

}  // namespace
}  // namespace grag
