// The lexical embedder: unit vectors of a fixed dimension, similarity that follows shared words
// and word pieces, determinism across instances, well-defined vectors for empty text, the
// EmbeddingModel contract (model name, usage, batch order) and thread-safety.
#include "grag/lexical_embedder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include <thread>

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
// faster embedder must give the same floats, rounding included. The features of a text are summed
// in the order the feature map visits them, so a change of map or allocation policy that changed
// that order would change the last bits. The digest was taken from the embedder before its feature
// map came from an arena.
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
  EXPECT_EQ(h, 0xe0df81b56b834b64ULL) << std::hex << h;
}

}  // namespace
}  // namespace grag
