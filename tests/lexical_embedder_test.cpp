// The lexical embedder: unit vectors of a fixed dimension, similarity that follows shared words
// and word pieces, determinism across instances, well-defined vectors for empty text, the
// EmbeddingModel contract (model name, usage, batch order) and thread-safety.
#include "grag/lexical_embedder.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "vector/lexical_fold.h"

namespace grag {
namespace {

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0;
  double na = 0;
  double nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return na == 0 || nb == 0 ? 0 : dot / std::sqrt(na * nb);
}

double Norm(const std::vector<float>& v) {
  double n = 0;
  for (float x : v) n += static_cast<double>(x) * x;
  return std::sqrt(n);
}

double Sim(std::string_view a, std::string_view b) {
  return Cosine(LexicalEmbed(a, 384), LexicalEmbed(b, 384));
}

TEST(LexicalEmbedderTest, IdenticalTextsHaveCosineOne) {
  const auto v = LexicalEmbed("Scrooge was a squeezing, wrenching, grasping old sinner.", 384);
  EXPECT_EQ(v.size(), 384u);
  EXPECT_NEAR(Norm(v), 1.0, 1e-5);
  EXPECT_NEAR(Sim("Scrooge was a squeezing, wrenching, grasping old sinner.",
                  "Scrooge was a squeezing, wrenching, grasping old sinner."),
              1.0, 1e-6);
  // Case, accents and compatibility forms fold away.
  EXPECT_NEAR(Sim("ZOË ÁLVAREZ", "zoe alvarez"), 1.0, 1e-6);
  EXPECT_NEAR(Sim("Ｓｃｒｏｏｇｅ", "scrooge"), 1.0, 1e-6);
}

TEST(LexicalEmbedderTest, SharedWordsBeatUnrelatedTexts) {
  const double shared = Sim("The ghost of Jacob Marley visits Scrooge on Christmas Eve.",
                            "Scrooge is visited by a ghost on Christmas Eve.");
  const double unrelated = Sim("The ghost of Jacob Marley visits Scrooge on Christmas Eve.",
                               "Quarterly revenue grew in the semiconductor division.");
  EXPECT_GT(shared, 0.4);
  EXPECT_LT(std::abs(unrelated), 0.2);
  EXPECT_GT(shared, unrelated + 0.3);
}

TEST(LexicalEmbedderTest, NameMatchesALongerMentionOfIt) {
  const double marley = Sim("Marley", "Jacob Marley's ghost");
  EXPECT_GT(marley, 0.4);
  EXPECT_GT(marley, Sim("Marley", "the Cratchit family dinner") + 0.3);
  EXPECT_GT(marley, Sim("Marley", "Bob Cratchit's Christmas goose") + 0.3);
  // Word pieces: inflections still overlap.
  EXPECT_GT(Sim("ghosts", "ghost"), Sim("ghosts", "goose") + 0.2);
  // Function words barely count.
  EXPECT_GT(Sim("Who is Jacob Marley?", "Jacob Marley"), 0.8);
}

TEST(LexicalEmbedderTest, EmptyTextGivesTheZeroVector) {
  const std::vector<std::string_view> texts = {"", "   ", "...!?", std::string_view("\xff\xfe", 2)};
  for (std::string_view text : texts) {
    const auto v = LexicalEmbed(text, 64);
    ASSERT_EQ(v.size(), 64u);
    for (float x : v) {
      EXPECT_FALSE(std::isnan(x));
      EXPECT_EQ(x, 0.0f);
    }
  }
  // A text of function words only is still a unit vector, not zero.
  EXPECT_NEAR(Norm(LexicalEmbed("the and of", 64)), 1.0, 1e-5);
  // Invalid UTF-8 around words: the words still count.
  EXPECT_NEAR(Cosine(LexicalEmbed("Marley\xff ghost", 384), LexicalEmbed("Marley ghost", 384)), 1.0,
              1e-6);
}

TEST(LexicalEmbedderTest, ModelContract) {
  LexicalEmbedder a;
  EXPECT_EQ(a.dimension(), 384u);
  EXPECT_EQ(a.model(), "grag-lexical-hash-v1-d384");
  EXPECT_NE(a.model().find("lexical"), std::string::npos);
  const std::vector<std::string> inputs = {"Marley was dead", "", "Bob Cratchit"};
  auto r = a.Embed(inputs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->dimension, 384u);
  EXPECT_EQ(r->model, a.model());
  EXPECT_EQ(r->prompt_tokens, 0);
  ASSERT_EQ(r->vectors.size(), 3u);
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_EQ(r->vectors[i].size(), 384u);
    EXPECT_EQ(r->vectors[i], LexicalEmbed(inputs[i], 384)) << "input order kept";
  }
  auto empty = a.Embed({});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->dimension, 0u);
  EXPECT_TRUE(empty->vectors.empty());

  const LlmUsage u = a.Usage();
  EXPECT_EQ(u.calls, 2);
  EXPECT_EQ(u.http_requests, 0);
  EXPECT_EQ(u.prompt_tokens, 0);
  EXPECT_EQ(u.failures, 0);
}

TEST(LexicalEmbedderTest, DimensionIsFixedAndValidated) {
  auto small = LexicalEmbedder::Create({.dimension = 64});
  ASSERT_TRUE(small.ok());
  EXPECT_EQ((*small)->model(), "grag-lexical-hash-v1-d64");
  auto r = (*small)->Embed({"a much longer text about Scrooge and the ghosts of Christmas"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->vectors[0].size(), 64u);
  EXPECT_EQ(LexicalEmbedder::Create({.dimension = 4}).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(LexicalEmbedder::Create({.dimension = 1 << 20}).status().code(),
            ErrorCode::kInvalidArgument);
}

TEST(LexicalEmbedderTest, DeterministicAcrossInstancesAndThreads) {
  const std::string text = "Tiny Tim, who bore a little crutch, said God bless Us, Every One!";
  LexicalEmbedder a;
  LexicalEmbedder b;
  const auto va = a.Embed({text});
  const auto vb = b.Embed({text});
  ASSERT_TRUE(va.ok() && vb.ok());
  EXPECT_EQ(va->vectors[0], vb->vectors[0]);

  std::vector<std::thread> threads;
  std::vector<std::vector<float>> got(8);
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) got[t] = a.Embed({text})->vectors[0];
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& v : got) EXPECT_EQ(v, va->vectors[0]);
  EXPECT_EQ(a.Usage().calls, 1 + 8 * 50);
}

}  // namespace
}  // namespace grag

namespace grag {
namespace {

// Folding ASCII by hand and only the non-ASCII runs through utf8proc gives what utf8proc gives
// for the whole text: combining marks after ASCII letters (composed, then stripped), compatibility
// forms, case folding beyond ASCII, text starting with a mark, Hangul jamo, NUL, invalid UTF-8.
TEST(LexicalFoldTest, SegmentedFoldingEqualsFoldingTheWholeText) {
  const std::vector<std::string> pieces = {"a",
                                           "Z",
                                           "e",
                                           " ",
                                           ".",
                                           "\n",
                                           "1",
                                           "\u0301",
                                           "\u0327",
                                           "\u0338",
                                           "<",
                                           "=",
                                           "\u00c9",
                                           "\u00df",
                                           "\ufb01",
                                           "\u2160",
                                           "\u1100",
                                           "\u1161",
                                           "\u11a8",
                                           "\u0130",
                                           "\u03a3",
                                           "\u212b",
                                           "\u00a0",
                                           "\u2014",
                                           "\xff",
                                           "\xc3",
                                           "\xe2\x80",
                                           "😀",
                                           "K",
                                           "\u212a",
                                           std::string(1, '\0')};
  std::mt19937 rng(11);
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    const size_t n = rng() % 16;
    for (size_t k = 0; k < n; ++k) text += pieces[rng() % pieces.size()];
    ASSERT_EQ(vector_internal::Fold(text), vector_internal::FoldWhole(text))
        << ::testing::PrintToString(text);
  }
  EXPECT_EQ(vector_internal::Fold("Cafe\u0301 NAI\u0308VE"), "cafe naive");
}

}  // namespace
}  // namespace grag

namespace grag {
namespace {

// The vectors' bytes are part of an index (stored embeddings, their cache keys by content): a
// faster embedder must give the same floats, rounding included. Each bucket's sum is exact (fixed
// point), so the bytes depend on a text's features alone, not on the feature table's layout or
// the order the features are found in. The digest was taken when the sums became exact; before,
// doubles were summed in an unordered_map's order, and 331 of 79,048 components of a test set
// differed from today's by one float rounding step (at most 1.5e-8).
uint64_t Digest(const std::vector<float>& v, uint64_t h) {
  for (float x : v) {
    uint32_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    for (int i = 0; i < 4; ++i) {
      h ^= (bits >> (8 * i)) & 0xFF;
      h *= 0x100000001b3ULL;
    }
  }
  return h;
}

TEST(LexicalEmbedderTest, VectorsKeepTheirBytes) {
  std::vector<std::string> texts = {
      "",
      "a",
      "Tiny Tim, who bore a little crutch, said God bless Us, Every One!",
      "Crème brûlée à la Ørsted — naïve façade, Straße, ΑΘΗΝΑ, 東京, ﬁne ½.",
  };
  // Long texts: thousands of distinct features, more than the arena's first buffer holds.
  std::mt19937 rng(17);
  const std::string letters = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (size_t n : {200, 2000, 20000}) {
    std::string t;
    for (size_t w = 0; w < n; ++w) {
      const size_t len = 1 + rng() % 11;
      for (size_t i = 0; i < len; ++i) t += letters[rng() % letters.size()];
      t += (rng() % 9 == 0) ? ". " : " ";
    }
    texts.push_back(t);
  }
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t dim : {8, 384, 1536}) {
    for (const std::string& t : texts) h = Digest(LexicalEmbed(t, dim), h);
  }
  EXPECT_EQ(h, 0xc83e52fb570cbe90ULL) << std::hex << h;
}

}  // namespace
}  // namespace grag

namespace grag {
namespace {

// A reference embedder written for clarity, not speed, from the definition in
// grag/lexical_embedder.h: its own UTF-8 decoder, word splitting by code point, a std::map from
// feature hash to weight and count, and the buckets summed in ascending hash order. The embedder
// must agree with it to 1e-6 per component (they may differ in rounding only).
namespace reference {

// The code point at s[i] and its length in bytes; length 0 when s[i] starts no valid UTF-8.
std::pair<char32_t, size_t> Decode(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = b(i);
  if (lead < 0x80) return {lead, 1};
  size_t n = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2, cp = lead & 0x1F, min = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3, cp = lead & 0x0F, min = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4, cp = lead & 0x07, min = 0x10000;
  } else {
    return {0, 0};
  }
  if (i + n > s.size()) return {0, 0};
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return {0, 0};
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {0, 0};
  return {cp, n};
}

// Letters, marks and numbers (Unicode categories L*, M*, N*) of the scripts the texts below use,
// after folding: ASCII, Latin, Greek, Cyrillic, kana, CJK ideographs, Hangul.
bool IsWordCodePoint(char32_t c) {
  if (c < 0x80) return std::isalnum(static_cast<int>(c)) != 0;
  const auto in = [c](char32_t from, char32_t to) { return c >= from && c <= to; };
  return c == 0xAA || c == 0xB5 || c == 0xBA || in(0xB2, 0xB3) || c == 0xB9 || in(0xBC, 0xBE) ||
         (in(0xC0, 0x24F) && c != 0xD7 && c != 0xF7) || in(0x300, 0x36F) ||
         (in(0x370, 0x3FF) && c != 0x375 && c != 0x37E && !in(0x384, 0x385) && c != 0x387) ||
         (in(0x400, 0x4FF) && c != 0x482) || (in(0x3041, 0x30FF) && c != 0x30A0 && c != 0x30FB) ||
         in(0x4E00, 0x9FFF) || in(0xAC00, 0xD7A3);
}

const std::set<std::string, std::less<>> kFunctionWords = {
    "a",     "about", "after", "again", "all",    "also",   "am",    "an",   "and",   "any",
    "are",   "as",    "at",    "be",    "been",   "before", "being", "but",  "by",    "can",
    "could", "did",   "do",    "does",  "for",    "from",   "had",   "has",  "have",  "he",
    "her",   "here",  "him",   "his",   "how",    "i",      "if",    "in",   "into",  "is",
    "it",    "its",   "just",  "me",    "more",   "most",   "my",    "no",   "nor",   "not",
    "now",   "of",    "on",    "one",   "only",   "or",     "other", "our",  "out",   "over",
    "own",   "said",  "same",  "she",   "should", "so",     "some",  "such", "than",  "that",
    "the",   "their", "them",  "then",  "there",  "these",  "they",  "this", "those", "through",
    "to",    "too",   "up",    "upon",  "us",     "very",   "was",   "we",   "were",  "what",
    "when",  "where", "which", "while", "who",    "whom",   "why",   "will", "with",  "would",
    "you",   "your"};

uint64_t Hash(char kind, const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : std::string(1, kind) + bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

std::vector<float> Embed(std::string_view text, size_t dimension) {
  std::string folded = vector_internal::FoldWhole(text);
  if (folded.empty() && !text.empty()) {  // not UTF-8: invalid bytes become spaces
    std::string sane;
    for (size_t i = 0; i < text.size();) {
      const size_t n = Decode(text, i).second;
      sane += n == 0 ? std::string(" ") : std::string(text.substr(i, n));
      i += std::max<size_t>(n, 1);
    }
    folded = vector_internal::FoldWhole(sane);
  }
  // Words: runs of word code points, each kept as its code points' bytes.
  std::vector<std::vector<std::string>> words(1);
  for (size_t i = 0; i < folded.size();) {
    const auto [cp, n] = Decode(folded, i);
    if (n > 0 && IsWordCodePoint(cp)) {
      words.back().push_back(folded.substr(i, n));
    } else if (!words.back().empty()) {
      words.emplace_back();
    }
    i += std::max<size_t>(n, 1);
  }
  struct Feature {
    double weight = 0;
    int count = 0;
  };
  std::map<uint64_t, Feature> features;
  const auto add = [&](char kind, const std::string& bytes, double weight) {
    Feature& f = features[Hash(kind, bytes)];
    f.weight = weight;
    ++f.count;
  };
  for (const auto& cps : words) {
    if (cps.empty()) continue;
    std::string word;
    for (const auto& cp : cps) word += cp;
    if (word.size() == 1 && !std::isdigit(static_cast<unsigned char>(word[0]))) continue;
    if (kFunctionWords.contains(word)) {
      add('w', word, 0.1);
      continue;
    }
    add('w', word, 1.0);
    // 3-grams of the units "<" + first code point, each other code point, ">".
    std::vector<std::string> units = {"<" + cps[0]};
    for (size_t k = 1; k < cps.size(); ++k) units.push_back(cps[k]);
    units.push_back(">");
    for (size_t k = 0; k + 3 <= units.size(); ++k) {
      add('g', units[k] + units[k + 1] + units[k + 2], 0.35);
    }
  }
  std::vector<double> acc(dimension, 0.0);
  for (const auto& [h, f] : features) {
    const double v = f.weight * (1.0 + std::log(static_cast<double>(f.count)));
    acc[h % dimension] += (h >> 63) != 0 ? -v : v;
  }
  double norm = 0;
  for (double x : acc) norm += x * x;
  std::vector<float> out(dimension, 0.0f);
  if (norm == 0) return out;
  for (size_t i = 0; i < dimension; ++i) out[i] = static_cast<float>(acc[i] / std::sqrt(norm));
  return out;
}

}  // namespace reference

std::string ReadBook() {
  std::ifstream in(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
                   std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(LexicalEmbedderTest, AgreesWithAReferenceImplementation) {
  std::vector<std::string> texts = {
      "",
      " \n\t.,;!?",
      "Marley was dead: to begin with. There is no doubt whatever about that.",
      "ghost ghost ghost ghosts ghostly GHOST Ghost",                   // repeats, case
      "the and of a an to in is it that through throughs the the THE",  // function words
      "a b c x y z 1 2 3 0 9 42 ox 7b b7 s",                            // single letters, digits
      "Marley's ghost; Scrooge's nephew",                               // "s" of "Marley's"
      "Crème brûlée à la Ørsted — naïve façade, Straße, ZOË Ǆemal ﬁne ½ x² Ｓｃｒｏｏｇｅ",
      "Cafe\u0301 NAI\u0308VE e\u0301e\u0301",                                    // combining marks
      "ΑΘΗΝΑ Ὀδυσσεύς σοφίας Москва́ — столица России",                            // Greek, Cyrillic
      "東 東京 東京都 北京大学的学生们在图书馆里学习。ひらがな カタカナ 한국어",  // CJK
      "Tokyo東京tower x東y 東a aθb Σ1",                                           // mixed scripts
      std::string("Marley\xff ghost \xc3 x\xe2\x80 y \xed\xa0\x80z \xf4\x90\x80\x80w"),
      std::string("\xff\xfe", 2),
      std::string("Marley\0ghost\0\0 x", 17),  // NUL bytes
      "abcdefg abcdefgh 1234567 12345678",     // 7 and 8 bytes
      "word",                                  // no byte after it
      "é",
  };
  const std::string book = ReadBook();
  ASSERT_GT(book.size(), 100000u);
  texts.push_back(book);                      // a long text: thousands of distinct features
  texts.push_back(book.substr(20000, 5200));  // a chunk
  texts.push_back(book.substr(30000, 300));   // a paragraph
  std::mt19937 rng(23);
  const std::vector<std::string> pieces = {"a", "e", "k",  "z", "q", "7", "0", "é",
                                           "ß", "θ", "東", "ж", "Ä", "ﬁ", "ö", "X"};
  for (size_t words : {10, 300, 3000}) {
    std::string t;
    for (size_t w = 0; w < words; ++w) {
      const size_t len = 1 + rng() % 9;
      for (size_t i = 0; i < len; ++i) t += pieces[rng() % pieces.size()];
      t += (rng() % 7 == 0) ? ", " : " ";
    }
    texts.push_back(t);
  }
  for (size_t dim : {8, 100, 384, 1536}) {
    for (size_t t = 0; t < texts.size(); ++t) {
      const auto got = LexicalEmbed(texts[t], dim);
      const auto want = reference::Embed(texts[t], dim);
      ASSERT_EQ(got.size(), dim);
      double worst = 0;
      size_t at = 0;
      for (size_t i = 0; i < dim; ++i) {
        if (std::abs(got[i] - want[i]) > worst) worst = std::abs(got[i] - want[i]), at = i;
      }
      EXPECT_LE(worst, 1e-6) << "text " << t << " (" << texts[t].substr(0, 60) << "), dimension "
                             << dim << ", component " << at << ": " << got[at] << " against "
                             << want[at];
    }
  }
}

}  // namespace
}  // namespace grag
