// grag eval, black box: a small no-LLM index of four hand-written documents, a hand-written
// question file with every kind of gold, the JSON report's shape and the measures an easy
// question must get; a bad file is refused with exit 2 and its line number, never a crash.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_command.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using nlohmann::json;
using testing::RunCommand;
using testing::ShellQuote;
using testing::TempDir;

class E2eEvalTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    root_ = (*dir_) / "tales";
    auto init = RunCommand(Grag("init " + ShellQuote(root_)));
    ASSERT_EQ(init.exit_code, 0) << init.err;
    Write(root_ + "/input/marley.txt",
          "Jacob Marley was the business partner of Ebenezer Scrooge in the counting-house. "
          "Marley died seven years before the story begins, on Christmas Eve. His ghost wears "
          "a heavy chain forged of cash-boxes, keys, padlocks and ledgers.\n");
    Write(root_ + "/input/fezziwig.txt",
          "Mr. Fezziwig was the kind old merchant to whom young Ebenezer Scrooge was "
          "apprenticed. Fezziwig held a Christmas ball for his apprentices and employees in his "
          "warehouse, with a fiddler and mince-pies.\n");
    Write(root_ + "/input/cratchit.txt",
          "Bob Cratchit is the underpaid clerk of Ebenezer Scrooge. His youngest son, Tiny Tim, "
          "is ill and walks with a crutch. The Cratchit family eats a small goose at Christmas "
          "dinner.\n");
    Write(root_ + "/input/belle.txt",
          "Belle was engaged to young Ebenezer Scrooge but released him, because he had come to "
          "love gold more than her. She later married another man and had many children.\n");
    auto index = RunCommand(Grag("--root " + ShellQuote(root_) + " --no-llm index --no-progress"));
    ASSERT_EQ(index.exit_code, 0) << index.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::string Grag(const std::string& args) { return ShellQuote(GRAG_BINARY) + " " + args; }
  static std::string InRoot(const std::string& args) {
    return Grag("--root " + ShellQuote(root_) + " --no-llm " + args);
  }
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  // A question file in the test's folder.
  static std::string File(const std::string& name, const std::string& text) {
    const std::string path = (*dir_) / name;
    Write(path, text);
    return path;
  }
  // The id of the chunk BM25 ranks first for `question` (as a user would find it).
  static std::string TopChunk(const std::string& question) {
    auto r = RunCommand(InRoot("search --json --method bm25 --k 1 " + ShellQuote(question)));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto j = json::parse(r.out);
    return j["chunks"].at(0)["chunk_id"].get<std::string>();
  }

  static TempDir* dir_;
  static std::string root_;
};

TempDir* E2eEvalTest::dir_ = nullptr;
std::string E2eEvalTest::root_;

std::string Questions(const std::string& tiny_tim_chunk) {
  return json{{"question", "Who was the business partner of Scrooge and died on Christmas Eve?"},
              {"gold_documents", {"marley.txt"}},
              {"answers", {"Jacob Marley"}}}
             .dump() +
         "\n" +
         json{{"question", "Which son of the clerk walks with a crutch?"},
              {"gold_chunks", {tiny_tim_chunk}},
              {"evidence", {"Tiny Tim, the youngest son, walks with a crutch."}}}
             .dump() +
         "\n\n" +
         json{{"question", "Who held a Christmas ball for his apprentices?"},
              {"gold_documents", {"fezziwig.txt"}},
              {"answers", {"Fezziwig", "a fiddler"}},
              {"evidence", {"Fezziwig gave a ball at Christmas for the apprentices."}}}
             .dump() +
         "\n";
}

TEST_F(E2eEvalTest, ScoresEveryMethodBesideBm25AsJson) {
  const std::string file = File("q.jsonl", Questions(TopChunk("Tiny Tim crutch")));
  auto r = RunCommand(InRoot("eval --json --k 1 --no-progress " + ShellQuote(file)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["questions"], 3);
  EXPECT_EQ(j["k"], 1);
  EXPECT_EQ(j["cutoffs"], json::array({1, 10}));
  EXPECT_EQ(j["gold"], json({{"chunks", 1}, {"documents", 2}, {"answers", 2}, {"evidence", 2}}));
  EXPECT_EQ(j["method_order"], json::array({"bm25", "vector", "graph", "hybrid", "local"}));
  EXPECT_TRUE(j["diagnostics"].empty()) << j["diagnostics"];
  EXPECT_FALSE(j.contains("per_question"));
  for (const std::string m : {"bm25", "vector", "graph", "hybrid", "local"}) {
    const json& jm = j["methods"][m];
    for (const char* cut : {"1", "10"}) {
      for (const char* block : {"at_k", "at_bm25_chars"}) {
        const json& a = jm[block][cut];
        for (const char* field :
             {"chunk_recall", "document_recall", "answer_contained", "evidence_coverage"}) {
          ASSERT_TRUE(a[field].is_number()) << m << " " << block << " " << cut << " " << field;
          EXPECT_GE(a[field].get<double>(), 0.0);
          EXPECT_LE(a[field].get<double>(), 1.0);
        }
        EXPECT_EQ(a.contains("vs_bm25_points"), m != "bm25") << m;
        EXPECT_EQ(a.contains("vs_bm25_margin_points"), m != "bm25") << m;
        if (m != "bm25") {
          // Two questions hold documents: too few for a margin.
          EXPECT_TRUE(a["vs_bm25_margin_points"]["document_recall"].is_null()) << m;
        }
      }
    }
    EXPECT_GE(jm["latency_ms"]["p95"].get<double>(), jm["latency_ms"]["p50"].get<double>());
    EXPECT_EQ(jm.contains("context_chars"), m == "local") << m;
  }
  // Easy questions, one document each: BM25's first passage is the right one.
  const json& bm25 = j["methods"]["bm25"]["at_k"]["1"];
  EXPECT_DOUBLE_EQ(bm25["document_recall"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(bm25["chunk_recall"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(bm25["answer_contained"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(bm25["mean_passages"].get<double>(), 1.0);
  // BM25 within its own characters is BM25 at k.
  EXPECT_EQ(j["methods"]["bm25"]["at_bm25_chars"]["1"]["document_recall"], bm25["document_recall"]);
  EXPECT_EQ(j["methods"]["bm25"]["at_bm25_chars"]["1"]["mean_chars"], bm25["mean_chars"]);
  // Local search's passages are measured without the "[S1] doc, chunk N:" label its context
  // gives them: its first passage here is BM25's, to the character.
  const json& local = j["methods"]["local"]["at_k"]["1"];
  EXPECT_DOUBLE_EQ(local["document_recall"].get<double>(), 1.0);
  EXPECT_EQ(local["mean_chars"], bm25["mean_chars"]);
  // The difference is in points: 100 × (method − BM25).
  const json& hybrid = j["methods"]["hybrid"]["at_k"]["1"];
  EXPECT_NEAR(hybrid["vs_bm25_points"]["document_recall"].get<double>(),
              100 * (hybrid["document_recall"].get<double>() - 1.0), 1e-9);
}

TEST_F(E2eEvalTest, ExplainMethodsLimitAndText) {
  const std::string file = File("q2.jsonl", Questions(TopChunk("Tiny Tim crutch")));
  auto r = RunCommand(
      InRoot("eval --json --explain --methods hybrid,local --limit 2 --k 1 " + ShellQuote(file)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["questions"], 2);
  EXPECT_EQ(j["method_order"], json::array({"bm25", "hybrid", "local"}));
  ASSERT_EQ(j["per_question"].size(), 2u);
  const json& q1 = j["per_question"][0];
  EXPECT_EQ(q1["line"], 1);
  const json& b = q1["methods"]["bm25"];
  ASSERT_EQ(b["top"].size(), 1u);
  EXPECT_EQ(b["top"][0]["document_id"], "marley.txt");
  EXPECT_TRUE(b["top"][0]["gold"].get<bool>());
  EXPECT_TRUE(b["missed_documents"].empty());
  EXPECT_TRUE(b["answer_found"].get<bool>());
  EXPECT_EQ(j["per_question"][1]["line"], 2);  // line 3 is blank

  auto text = RunCommand(InRoot("eval --explain --k 1 " + ShellQuote(file)));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("top 1 passages"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("within the characters of BM25's top 1"), std::string::npos);
  EXPECT_NE(text.out.find("latency p50 ms"), std::string::npos);
  EXPECT_NE(text.out.find("from 10 questions on, its 95% margin"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("\u00b1"), std::string::npos) << "two questions: no margin";
  EXPECT_NE(text.out.find("line 4: Who held a Christmas ball"), std::string::npos) << text.out;
}

TEST_F(E2eEvalTest, WarnsAboutGoldTheIndexDoesNotHold) {
  const std::string file = File(
      "q3.jsonl", json{{"question", "Who is Belle?"}, {"gold_documents", {"nowhere.txt"}}}.dump());
  auto r = RunCommand(InRoot("eval --json " + ShellQuote(file)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("line 1: gold document \"nowhere.txt\" is not in the index"),
            std::string::npos)
      << r.err;
  EXPECT_DOUBLE_EQ(
      json::parse(r.out)["methods"]["bm25"]["at_k"]["5"]["document_recall"].get<double>(), 0.0);
}

TEST_F(E2eEvalTest, BadFilesExitTwoNamingTheLine) {
  struct Case {
    std::string name, text, expect;
  };
  const std::string ok = json{{"question", "Who is Belle?"}, {"answers", {"Belle"}}}.dump();
  const std::vector<Case> cases = {
      {"bad_json.jsonl", ok + "\n{\"question\": \"x\", \n", "line 2: not valid JSON"},
      {"unknown.jsonl", ok + "\n" + ok + "\n{\"question\": \"x\", \"gold\": [\"a\"]}\n",
       "line 3: unknown field \"gold\""},
      {"no_gold.jsonl", "{\"question\": \"Who is Belle?\"}\n", "line 1: no gold"},
      {"empty.jsonl", "", "no question"},
      {"binary.jsonl", std::string("\x00\x01\xff", 3), "line 1: not valid JSON"},
      // Valid JSON, but a question the engine refuses: still exit 2 and its line.
      {"no_words.jsonl", ok + "\n{\"question\": \"???\", \"answers\": [\"x\"]}\n",
       "question on line 2 (bm25)"},
  };
  for (const auto& c : cases) {
    auto r = RunCommand(InRoot("eval " + ShellQuote(File(c.name, c.text))));
    EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.name << ": " << r.err;
    EXPECT_EQ(r.err.find("internal"), std::string::npos) << r.err;
  }
  auto missing = RunCommand(InRoot("eval " + ShellQuote((*dir_) / "missing.jsonl")));
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find("cannot read"), std::string::npos) << missing.err;
  const std::string good = File("good.jsonl", ok + "\n");
  auto method = RunCommand(InRoot("eval --methods bm25,magic " + ShellQuote(good)));
  EXPECT_EQ(method.exit_code, 2) << method.err;
  EXPECT_NE(method.err.find("unknown method \"magic\""), std::string::npos) << method.err;
  auto k = RunCommand(InRoot("eval --k 0 " + ShellQuote(good)));
  EXPECT_EQ(k.exit_code, 2) << k.err;
}

// From ten questions with a kind of gold on, each difference from BM25 has a 95% margin: t for
// n - 1 degrees of freedom times the standard error of the questions' paired differences.
TEST_F(E2eEvalTest, MarginsFromTenQuestionsOn) {
  const std::vector<std::pair<std::string, std::string>> asked = {
      {"Who was the business partner of Scrooge?", "Jacob Marley"},
      {"Who died seven years before the story begins?", "Marley"},
      {"What is the ghost's chain forged of?", "padlocks"},
      {"Who was young Scrooge apprenticed to?", "Fezziwig"},
      {"Where did Fezziwig hold his Christmas ball?", "warehouse"},
      {"Who played music at the ball?", "fiddler"},
      {"Who is Scrooge's underpaid clerk?", "Bob Cratchit"},
      {"How does the youngest son walk?", "crutch"},
      {"What does the family eat at Christmas dinner?", "goose"},
      {"Who was engaged to young Scrooge?", "Belle"},
      {"What had Scrooge come to love more than her?", "gold"},
      {"Whom did Belle marry later?", "another man"}};
  std::string lines;
  for (const auto& [q, a] : asked) lines += json{{"question", q}, {"answers", {a}}}.dump() + "\n";
  const std::string file = File("twelve.jsonl", lines);
  auto r = RunCommand(InRoot("eval --json --explain --methods graph --k 1 " + ShellQuote(file)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["per_question"].size(), asked.size());
  double sum = 0, squares = 0;
  for (const auto& q : j["per_question"]) {
    const double d = (q["methods"]["graph"]["answer_found"].get<bool>() ? 1.0 : 0.0) -
                     (q["methods"]["bm25"]["answer_found"].get<bool>() ? 1.0 : 0.0);
    sum += d;
    squares += d * d;
  }
  const double n = static_cast<double>(asked.size());
  const double mean = sum / n;
  const double expected = 2.201 * std::sqrt((squares - n * mean * mean) / (n - 1) / n) * 100;
  ASSERT_GT(expected, 0) << "the graph and BM25 must differ on some questions, not on all";
  const json& graph = j["methods"]["graph"]["at_k"]["1"];
  ASSERT_TRUE(graph["vs_bm25_margin_points"]["answer_contained"].is_number()) << graph;
  EXPECT_NEAR(graph["vs_bm25_margin_points"]["answer_contained"].get<double>(), expected, 1e-9);
  EXPECT_NEAR(graph["vs_bm25_points"]["answer_contained"].get<double>(), 100 * mean, 1e-9);
  EXPECT_TRUE(graph["vs_bm25_margin_points"]["evidence_coverage"].is_null()) << "no such gold";

  auto text = RunCommand(InRoot("eval --methods graph --k 1 " + ShellQuote(file)));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find(fmt::format("({:+.1f} \u00b1{:.1f})",
                                      graph["vs_bm25_points"]["answer_contained"].get<double>(),
                                      expected)),
            std::string::npos)
      << text.out;
}

}  // namespace
}  // namespace grag
