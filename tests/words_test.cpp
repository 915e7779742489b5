// The text module's shared word tools (grag/words.h): name keys, the sentence splitter the
// extractive reports, the extractive answers and retrieval share, the word lists the NLP
// extractor and the search terms share, the stemmer and ShortenAtWord.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "grag/nlp_extract.h"
#include "grag/words.h"

namespace grag {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Texts(const std::vector<Sentence>& sentences) {
  std::vector<std::string> out;
  for (const Sentence& s : sentences) out.push_back(s.text);
  return out;
}

// ---------------------------------------------------------------- sentences

// The splitter's output on random text (words, quotes, terminators, abbreviations, runs of
// spaces, tabs and line breaks, non-ASCII) is pinned: a faster splitter must cut, collapse and
// judge every sentence as before. The digest was taken from the splitter that appended a byte at
// a time.
TEST(SplitSentencesTest, RandomTextSplitsAsBefore) {
  const std::vector<std::string_view> pieces = {"Scrooge",
                                                "said",
                                                "the",
                                                "Mr.",
                                                "J.",
                                                "e.g.",
                                                "3.5",
                                                "bah",
                                                "humbug",
                                                ".",
                                                "!",
                                                "?",
                                                "...",
                                                "\"",
                                                "'",
                                                "(",
                                                ")",
                                                "[",
                                                "]",
                                                "\xE2\x80\x9C",
                                                "\xE2\x80\x9D",
                                                "\xE2\x80\x99",
                                                "caf\xC3\xA9",
                                                "-",
                                                "_",
                                                ",",
                                                ";",
                                                ":",
                                                "Marley's",
                                                "St.",
                                                "Dr.",
                                                "no.",
                                                "1842",
                                                "title: "};
  const std::vector<std::string_view> gaps = {" ",  " ",    " ",     "",      "  ",    "\t",
                                              "\n", "\n\n", "\n \n", " \r\n", "\n\t\n"};
  std::mt19937 rng(42);
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](std::string_view bytes) {
    for (char c : bytes) {
      h ^= static_cast<unsigned char>(c);
      h *= 0x100000001b3ULL;
    }
    h ^= 0xFF;
    h *= 0x100000001b3ULL;
  };
  size_t sentences = 0;
  for (int t = 0; t < 300; ++t) {
    std::string text;
    const size_t n = rng() % 120;
    for (size_t i = 0; i < n; ++i) {
      text += pieces[rng() % pieces.size()];
      text += gaps[rng() % gaps.size()];
    }
    for (const Sentence& s : SplitSentences(text)) {
      mix(s.text);
      mix(std::to_string(s.offset));
      mix(s.complete ? "1" : "0");
      ++sentences;
    }
  }
  EXPECT_GT(sentences, 1000u);
  EXPECT_EQ(h, 0x9f5b097be3173ae9ULL) << std::hex << h;
}

TEST(SplitSentencesTest, SplitsAtTerminatorsButNotAbbreviationsOrQuotedSpeech) {
  const auto s = SplitSentences(
      "Mr. Fezziwig laughed. \"Bah!\" said Scrooge, \"Humbug!\" Then J. R. Smith came in.\n"
      "It was   cold?  Yes!");
  EXPECT_THAT(Texts(s), ElementsAre("Mr. Fezziwig laughed.", "\"Bah!\" said Scrooge, \"Humbug!\"",
                                    "Then J. R. Smith came in.", "It was cold?", "Yes!"));
  for (const Sentence& x : s) EXPECT_TRUE(x.complete) << x.text;
}

TEST(SplitSentencesTest, BlankLinesEndSentencesAndCutPiecesAreIncomplete) {
  const auto s = SplitSentences(
      "title: A Christmas Carol.\nwas dead. STAVE ONE\n\nMarley was "
      "dead: to begin with. There is no doubt whatever about");
  EXPECT_THAT(Texts(s), ElementsAre("was dead.", "STAVE ONE", "Marley was dead: to begin with.",
                                    "There is no doubt whatever about"));
  EXPECT_FALSE(s[0].complete);  // starts lower case: cut at the chunk's start
  EXPECT_FALSE(s[1].complete);  // no terminator
  EXPECT_TRUE(s[2].complete);
  EXPECT_FALSE(s[3].complete);  // cut at the chunk's end
  EXPECT_EQ(s[2].offset,
            std::string_view("title: A Christmas Carol.\nwas dead. STAVE ONE\n\n").size());
}

TEST(SplitSentencesTest, CurlyQuotesCloseTheSentence) {
  const auto s = SplitSentences(
      "\xE2\x80\x9C"
      "A merry Christmas!\xE2\x80\x9D The clerk smiled.");
  EXPECT_THAT(Texts(s), ElementsAre("\xE2\x80\x9C"
                                    "A merry Christmas!\xE2\x80\x9D",
                                    "The clerk smiled."));
}

TEST(ShortenAtWordTest, CutsAtAWordAndMarksTheCut) {
  EXPECT_EQ(ShortenAtWord("short", 10), "short");
  EXPECT_EQ(ShortenAtWord(" two\nlines ", 20), "two lines");
  EXPECT_EQ(ShortenAtWord("one two three four", 12), "one two\xE2\x80\xA6");
  const std::string s = ShortenAtWord("\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9", 8);  // five é
  EXPECT_LE(s.size(), 8u);
  EXPECT_EQ(s, "\xC3\xA9\xC3\xA9\xE2\x80\xA6");  // whole characters only
}

TEST(SplitSentencesTest, EveryAbbreviationKeepsItsSentenceWhole) {
  for (std::string_view abbreviation : Abbreviations()) {
    std::string word(abbreviation);
    word[0] = static_cast<char>(word[0] - 'a' + 'A');
    const auto s = SplitSentences("They met " + word + ". Holt there. It rained.");
    EXPECT_THAT(Texts(s), ElementsAre("They met " + word + ". Holt there.", "It rained."))
        << abbreviation;
  }
  // A word that is not an abbreviation ends its sentence.
  EXPECT_EQ(SplitSentences("They met Holt. Then it rained.").size(), 2u);
}

TEST(SplitSentencesTest, ALowerCaseWordInAnyScriptContinuesTheSentence) {
  // "é" (U+00E9) and "ω" (U+03C9) are lower-case letters: '"Bah!" écrit-il' is one sentence.
  EXPECT_EQ(SplitSentences("\"Bah!\" \xC3\xA9"
                           "crit-il. Fin.")
                .size(),
            2u);
  EXPECT_EQ(SplitSentences("Ende! \xCF\x89mega folgt.").size(), 1u);
  // An upper-case one starts a new sentence and the sentence is complete.
  const auto s = SplitSentences("Ende! \xC3\x89mile kam.");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_TRUE(s[1].complete);
  // A sentence starting with a non-ASCII lower-case letter was cut at a chunk's start.
  EXPECT_FALSE(SplitSentences("\xC3\xA9tait l\xC3\xA0. Puis.")[0].complete);
}

TEST(NormalizeEntityNameTest, FoldsCaseAndPunctuationInAnyScript) {
  EXPECT_EQ(NormalizeEntityName("Ebenezer  Scrooge"), "ebenezer scrooge");
  EXPECT_EQ(NormalizeEntityName("EBENEZER SCROOGE."), "ebenezer scrooge");
  EXPECT_EQ(NormalizeEntityName("ebenezer-scrooge"), "ebenezer scrooge");
  EXPECT_EQ(NormalizeEntityName("\xC3\x89MILE Zola"), "\xC3\xA9mile zola");
  EXPECT_THAT(SplitNormalizedName("a b  c"), ElementsAre("a", "b", "c"));
}

TEST(WordListsTest, OneListOfFunctionWordsForSearchTermsAndTheExtractor) {
  ASSERT_FALSE(FunctionWords().empty());
  for (std::string_view w : FunctionWords()) {
    EXPECT_TRUE(IsFunctionWord(w)) << w;
    // No search term is a function word...
    EXPECT_TRUE(ContentTerms(w).empty()) << w;
  }
  // ...and the NLP extractor starts no name with one: "The" and "Of" alone name nothing.
  for (std::string_view sentence : {"Then The went home with Scrooge.", "Of came Scrooge."}) {
    auto parsed = ExtractNlp(sentence, NlpExtractorOptions{});
    ASSERT_TRUE(parsed.ok());
    for (const auto& e : parsed->entities) {
      EXPECT_FALSE(IsFunctionWord(e.name_key)) << e.name_key;
    }
  }
  EXPECT_FALSE(IsFunctionWord("scrooge"));
  EXPECT_TRUE(IsAbbreviation("mr"));
  EXPECT_FALSE(IsAbbreviation("holt"));
  EXPECT_TRUE(IsNameFiller("of"));
  EXPECT_FALSE(IsNameFiller("bank"));
}

TEST(ContentTermsTest, DropsStopAndQuestionWordsAndStems) {
  EXPECT_TRUE(ContentTerms("What are the main themes of this story?").empty());
  EXPECT_THAT(ContentTerms("Who haunted Scrooge's ghosts in 1843, at 12?"),
              ElementsAre("haunt", "scrooge", "ghost", "1843"));
  EXPECT_THAT(ContentTerms("Stories of the whaling ships"), ElementsAre("whal", "ship"));
}

TEST(StemTest, EndingsOffSoFormsAgree) {
  EXPECT_EQ(Stem("ghosts"), Stem("ghost"));
  EXPECT_EQ(Stem("haunted"), Stem("haunting"));
  EXPECT_EQ(Stem("stories"), "story");
  EXPECT_EQ(Stem("bus"), "bus");  // too short, and "us" is no plural
  EXPECT_EQ(Stem("glass"), "glass");
  EXPECT_EQ(Stem("analysis"), "analysis");
}

}  // namespace
}  // namespace grag
