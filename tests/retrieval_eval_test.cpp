// The measures of grag eval (grag/retrieval_eval.h): the question file's parsing and errors,
// recall, the character budget, answer containment and the 70% evidence rule.
#include "grag/retrieval_eval.h"

#include <gtest/gtest.h>

#include <cmath>

#include <string>
#include <vector>

namespace grag {
namespace {

std::vector<EvalPassage> Passages(const std::vector<std::string>& texts) {
  std::vector<EvalPassage> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    out.push_back(MakeEvalPassage("c" + std::to_string(i), "d" + std::to_string(i / 2), texts[i]));
  }
  return out;
}

TEST(ParseEvalQuestionsTest, ReadsEveryGoldKindAndSkipsBlankLines) {
  auto qs = ParseEvalQuestions(
      "{\"question\": \"Who is Marley?\", \"gold_documents\": [\"carol.txt\"]}\n"
      "\n"
      "{\"question\": \"When?\", \"gold_chunks\": [\"abc\"], \"answers\": [\"1843\", \"\"], "
      "\"evidence\": [\"Marley was dead.\"]}\r\n");
  ASSERT_TRUE(qs.ok()) << qs.status().message();
  ASSERT_EQ(qs->size(), 2u);
  EXPECT_EQ((*qs)[0].line, 1);
  EXPECT_EQ((*qs)[0].gold_documents, std::vector<std::string>{"carol.txt"});
  EXPECT_EQ((*qs)[1].line, 3);
  EXPECT_EQ((*qs)[1].gold_chunks, std::vector<std::string>{"abc"});
  EXPECT_EQ((*qs)[1].answers, std::vector<std::string>{"1843"});  // the empty one dropped
  EXPECT_EQ((*qs)[1].evidence.size(), 1u);
}

TEST(ParseEvalQuestionsTest, ErrorsNameTheLine) {
  struct Case {
    std::string text;
    std::string expect;  // in the message
  };
  const std::vector<Case> cases = {
      {"{\"question\": \"a\", \"answers\": [\"x\"]}\n{not json", "line 2: not valid JSON"},
      {"[1, 2]", "line 1: expected a JSON object"},
      {"{\"question\": \"a\", \"answers\": [\"x\"], \"gold\": [1]}",
       "line 1: unknown field \"gold\""},
      {"{\"answers\": [\"x\"]}", "line 1: \"question\" must be a non-empty string"},
      {"{\"question\": \"  \", \"answers\": [\"x\"]}", "line 1: \"question\" must be"},
      {"{\"question\": \"a\", \"gold_chunks\": \"abc\"}",
       "line 1: \"gold_chunks\" must be an array"},
      {"{\"question\": \"a\", \"evidence\": [3]}", "line 1: \"evidence\" must be an array"},
      {"\n\n{\"question\": \"a\"}", "line 3: no gold"},
      {"{\"question\": \"a\", \"answers\": []}", "line 1: no gold"},
      {"{\"question\": \"a\", \"answers\": [[\"x\"]]}",
       "\"answers\" must be an array of strings, found array"},
      {"{\"question\": \"a\", \"answers\": " + std::string(100'000, '[') +
           std::string(100'000, ']') + "}",
       "line 1: JSON nested more than 16 deep"},
      {"", "no question"},
      {"\n  \n", "no question"},
  };
  for (const auto& c : cases) {
    auto qs = ParseEvalQuestions(c.text);
    ASSERT_FALSE(qs.ok()) << c.text;
    EXPECT_EQ(qs.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(qs.status().message().find(c.expect), std::string::npos)
        << c.text << " -> " << qs.status().message();
  }
}

TEST(ParseEvalQuestionsTest, BracketsInsideStringsDoNotCountAsNesting) {
  // 40 brackets and an escaped quote inside the question's string: still a depth of 2.
  const std::string question = std::string(20, '[') + "\\\" {" + std::string(20, '{');
  auto qs = ParseEvalQuestions("{\"question\": \"" + question + "\", \"answers\": [\"x\"]}");
  ASSERT_TRUE(qs.ok()) << qs.status().message();
  EXPECT_EQ((*qs)[0].question, std::string(20, '[') + "\" {" + std::string(20, '{'));
}

TEST(RetrievalEvalTest, RecallIsTheShareOfDistinctGoldFound) {
  const std::vector<std::string> found = {"a", "b", "a", "x"};
  EXPECT_DOUBLE_EQ(RecallOf(found, std::vector<std::string>{"a", "c"}), 0.5);
  EXPECT_DOUBLE_EQ(RecallOf(found, std::vector<std::string>{"a", "a", "b"}), 1.0);  // distinct
  EXPECT_DOUBLE_EQ(RecallOf(found, std::vector<std::string>{"y"}), 0.0);
  EXPECT_DOUBLE_EQ(RecallOf(found, std::vector<std::string>{}), 0.0);
}

TEST(RetrievalEvalTest, BudgetStopsAtThePassageThatWouldPassIt) {
  const std::vector<int64_t> sizes = {100, 200, 50, 10};
  EXPECT_EQ(CountWithinBudget(sizes, 0), 0u);
  EXPECT_EQ(CountWithinBudget(sizes, 99), 0u);
  EXPECT_EQ(CountWithinBudget(sizes, 100), 1u);
  EXPECT_EQ(CountWithinBudget(sizes, 349), 2u);  // 50 more would pass it: stop, not skip
  EXPECT_EQ(CountWithinBudget(sizes, 350), 3u);
  EXPECT_EQ(CountWithinBudget(sizes, 10'000), 4u);
}

TEST(RetrievalEvalTest, CharactersAreCodePoints) {
  EXPECT_EQ(MakeEvalPassage("c", "d", "héllo").chars, 5);
  EXPECT_EQ(MakeEvalPassage("c", "d", "").chars, 0);
}

TEST(RetrievalEvalTest, AnswerIsFoundCaseInsensitivelyOnWordBoundaries) {
  const auto p = Passages({"Jacob Marley died in 1836, seven years ago.", "The U.S. office."});
  EXPECT_TRUE(ContainsAnswer(p, std::vector<std::string>{"jacob MARLEY"}));
  EXPECT_TRUE(ContainsAnswer(p, std::vector<std::string>{"nope", "1836"}));  // any one answer
  EXPECT_FALSE(ContainsAnswer(p, std::vector<std::string>{"183"}));          // not inside a word
  EXPECT_FALSE(ContainsAnswer(p, std::vector<std::string>{"Scrooge"}));
  EXPECT_TRUE(ContainsAnswer(p, std::vector<std::string>{"U.S."}));
  EXPECT_FALSE(ContainsAnswer(p, std::vector<std::string>{"..."}));  // nothing left to find
  EXPECT_FALSE(ContainsAnswer({}, std::vector<std::string>{"1836"}));
}

TEST(RetrievalEvalTest, EvidenceNeedsSeventyPercentOfItsContentWordsInOnePassage) {
  // Content words of the sentence (stemmed): basal, cell, carcinoma, common, skin, cancer (6);
  // 70% of 6 is 4.2, so 5 are needed.
  const std::string sentence = "Basal cell carcinoma is the most common type of skin cancer.";
  const auto four = Passages({"Carcinoma of the skin: basal cells."});
  EXPECT_FALSE(EvidenceCovered(sentence, four)) << "4 of 6 words";
  const auto five = Passages({"BCC: basal cells carcinomas are common in skin."});
  EXPECT_TRUE(EvidenceCovered(sentence, five)) << "5 of 6 words, plurals stemmed";
  const auto paraphrase =
      Passages({"The commonest skin cancer is a carcinoma of the basal cells, BCC."});
  EXPECT_TRUE(EvidenceCovered(sentence, paraphrase)) << "all but common";
  // The same words split over two passages do not count.
  const auto split = Passages({"basal cell carcinoma", "common skin cancer"});
  EXPECT_FALSE(EvidenceCovered(sentence, split));
  EXPECT_TRUE(EvidenceCovered(sentence, split, 0.5));
  EXPECT_FALSE(EvidenceCovered("the of and", split)) << "no content word: never covered";
}

TEST(RetrievalEvalTest, ScoresOnlyTheGoldKindsPresent) {
  EvalQuestion q;
  q.question = "Where did Marley die?";
  q.gold_chunks = {"c1", "c9"};
  q.gold_documents = {"d0"};
  q.evidence = {"Marley died in London.", "Marley was a miser."};
  const auto p = Passages({"Marley died in London.", "Scrooge lived in London."});
  const EvalScore s = ScorePassages(q, p);
  EXPECT_EQ(s.passages, 2);
  EXPECT_EQ(s.chars, 22 + 24);
  ASSERT_TRUE(s.chunk_recall);
  EXPECT_DOUBLE_EQ(*s.chunk_recall, 0.5);
  ASSERT_TRUE(s.document_recall);
  EXPECT_DOUBLE_EQ(*s.document_recall, 1.0);
  EXPECT_FALSE(s.answer_contained) << "no answers given";
  ASSERT_TRUE(s.evidence_coverage);
  EXPECT_DOUBLE_EQ(*s.evidence_coverage, 0.5);
}

TEST(RetrievalEvalTest, QuantileIsNearestRank) {
  EXPECT_DOUBLE_EQ(Quantile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(Quantile({3, 1, 2}, 0.5), 2);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3, 4}, 0.5), 2);
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_DOUBLE_EQ(Quantile(v, 0.95), 95);
  EXPECT_DOUBLE_EQ(Quantile(v, 1.0), 100);
}

}  // namespace

// The margin is Student's t (n - 1 degrees of freedom) times the standard error of the mean
// difference.
TEST(RetrievalEvalTest, PairedMarginIsTTimesTheStandardError) {
  EXPECT_FALSE(PairedMargin(0, 0, 0));
  EXPECT_FALSE(PairedMargin(1, 1, 1)) << "one question says nothing of the spread";
  // Differences 1, 0, 0, 1: mean 0.5, sample variance 1/3, standard error sqrt(1/12); t(3).
  ASSERT_TRUE(PairedMargin(4, 2, 2));
  EXPECT_NEAR(*PairedMargin(4, 2, 2), 3.182 * std::sqrt(1.0 / 12), 1e-9);
  // The same difference on every question: no spread, no margin.
  ASSERT_TRUE(PairedMargin(5, 5, 5));
  EXPECT_NEAR(*PairedMargin(5, 5, 5), 0.0, 1e-12);
  // Many questions: t comes near the normal's 1.96 (t(100) = 1.984).
  const int64_t n = 101;  // differences +1 and -1 alternating, one 0
  const double sum = 0, squares = 100;
  EXPECT_NEAR(*PairedMargin(n, sum, squares), 1.984 * std::sqrt(1.0 / n), 1e-3);
  // Fewer questions, the same spread: a wider margin.
  EXPECT_GT(*PairedMargin(11, 0, 10), *PairedMargin(n, sum, squares));
}

}  // namespace grag
