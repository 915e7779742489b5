// The BPE tokenizer: known ids, round trips, invalid UTF-8, long runs, thread safety, and token
// for token parity with node tiktoken (npm tiktoken, run by tests/tools/tiktoken_ids.js) on a
// ~1.9 MB corpus of varied text (tests/support/tokenizer_corpus.h) in both encodings.
#include "grag/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "support/tiktoken_reference.h"
#include "support/tokenizer_corpus.h"

namespace grag {
namespace {

using testing::BuildTokenizerCorpus;
using testing::CorpusSegment;
using testing::Repeat;

const Tokenizer& Get(std::string_view name) {
  auto tok = Tokenizer::Get(name);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return **tok;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::vector<CorpusSegment>& Corpus() {
  static const std::vector<CorpusSegment> corpus = BuildTokenizerCorpus(
      ReadFile(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt"));
  return corpus;
}

// Printable form of text around a mismatch.
std::string Escaped(std::string_view s) {
  return nlohmann::json(std::string(s))
      .dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

std::string Describe(const Tokenizer& tok, std::span<const uint32_t> ids, size_t from) {
  std::string out;
  for (size_t i = from; i < std::min(ids.size(), from + 8); ++i) {
    out += " " + std::to_string(ids[i]) + "=" + Escaped(tok.DecodeBytes(ids.subspan(i, 1)));
  }
  return out.empty() ? " (end)" : out;
}

const char* const kEncodings[] = {"cl100k_base", "o200k_base"};

TEST(TokenizerTest, KnownIds) {
  EXPECT_EQ(Get("cl100k_base").Encode("hello world"), (std::vector<uint32_t>{15339, 1917}));
  EXPECT_EQ(Get("o200k_base").Encode("hello world"), (std::vector<uint32_t>{24912, 2375}));
  // tiktoken's README example, and a contraction.
  EXPECT_EQ(Get("cl100k_base").Encode("tiktoken is great!"),
            (std::vector<uint32_t>{83, 1609, 5963, 374, 2294, 0}));
  EXPECT_EQ(Get("cl100k_base").Encode("I'm here"), (std::vector<uint32_t>{40, 2846, 1618}));
  EXPECT_EQ(Get("o200k_base").Encode("I'm here"), (std::vector<uint32_t>{15390, 2105}));
}

TEST(TokenizerTest, EmptyString) {
  for (const char* enc : kEncodings) {
    EXPECT_TRUE(Get(enc).Encode("").empty());
    EXPECT_EQ(Get(enc).Count(""), 0u);
    EXPECT_EQ(Get(enc).DecodeBytes({}), "");
  }
}

TEST(TokenizerTest, NameAndSharedInstance) {
  for (const char* enc : kEncodings) {
    auto a = Tokenizer::Get(enc);
    auto b = Tokenizer::Get(enc);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b);
    EXPECT_EQ((*a)->name(), enc);
  }
}

TEST(TokenizerTest, UnknownEncodingIsRejected) {
  for (const char* bad : {"", "gpt2", "p50k_base", "O200K_BASE", "o200k_base "}) {
    auto tok = Tokenizer::Get(bad);
    ASSERT_FALSE(tok.ok()) << bad;
    EXPECT_EQ(tok.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(tok.status().message().find("o200k_base"), std::string::npos);
  }
}

TEST(TokenizerTest, SpecialTokensAreOrdinaryText) {
  const Tokenizer& cl = Get("cl100k_base");
  const auto ids = cl.Encode("<|endoftext|>");
  EXPECT_GT(ids.size(), 1u);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 100257u), 0);
  EXPECT_EQ(cl.DecodeBytes(ids), "<|endoftext|>");
  // Special ids still decode to their text; ids outside the vocabulary decode to nothing.
  const std::vector<uint32_t> special = {100257, 100276, 9999999};
  EXPECT_EQ(cl.DecodeBytes(special), "<|endoftext|><|endofprompt|>");
  const std::vector<uint32_t> o_special = {199999};
  EXPECT_EQ(Get("o200k_base").DecodeBytes(o_special), "<|endoftext|>");
}

TEST(TokenizerTest, CountMatchesEncodeAndDecodeRoundTrips) {
  for (const char* enc : kEncodings) {
    const Tokenizer& tok = Get(enc);
    for (const auto& seg : Corpus()) {
      const auto ids = tok.Encode(seg.text);
      ASSERT_EQ(tok.Count(seg.text), ids.size()) << enc << " " << seg.label;
      ASSERT_EQ(tok.DecodeBytes(ids), seg.text) << enc << " " << seg.label;
      std::vector<uint32_t> appended = {7};
      tok.EncodeTo(seg.text, &appended);
      ASSERT_EQ(appended.size(), ids.size() + 1);
      ASSERT_TRUE(std::equal(ids.begin(), ids.end(), appended.begin() + 1));
    }
  }
}

// CountWithParts must give Count's answer whatever the text: random joins of fragments that
// merge across a boundary (letters, digits, spaces before a word, runs of newlines, punctuation
// before a newline, contractions, combining marks, a character only the full pattern knows,
// invalid bytes) and parts that are not where they claim to be.
TEST(TokenizerTest, CountWithPartsEqualsCountOfTheWholeText) {
  const std::vector<std::string> fragments = {"a",
                                              "Zq",
                                              "x",
                                              "1",
                                              "234",
                                              " ",
                                              "   ",
                                              "\n",
                                              "\r",
                                              "\r\n",
                                              "\t",
                                              "'",
                                              "'s",
                                              "'LL",
                                              "!",
                                              "/",
                                              "<",
                                              ">",
                                              "</",
                                              "\xC3\xA9",
                                              "\xC7\x85",
                                              "\xCC\x81",
                                              "\xE4\xB8\xAD",
                                              "\xE3\x80\x80",
                                              "\xC2\xA0",
                                              "\xF0\x9F\xA6\x80",
                                              "\xF0\xB1\x8D\x90",
                                              "\xF0\x91\xBC\x84",
                                              "\xFF",
                                              "report"};
  std::mt19937 rng(20261202);
  auto random_text = [&](int max_fragments) {
    std::string out;
    const int n = static_cast<int>(rng() % static_cast<unsigned>(max_fragments + 1));
    for (int i = 0; i < n; ++i) out += fragments[rng() % fragments.size()];
    return out;
  };
  for (const char* enc : kEncodings) {
    const Tokenizer& tok = Get(enc);
    size_t reused = 0;
    for (int round = 0; round < 20000; ++round) {
      const std::string p = random_text(4);
      const std::string a = random_text(8);
      const std::string b = random_text(8);
      const std::string c = random_text(4);
      const std::string text = p + a + b + c;
      const Tokenizer::PrefixCount ca = tok.CountPrefix(a);
      const Tokenizer::PrefixCount cb = tok.CountPrefix(b);
      ASSERT_EQ(ca.tokens, tok.Count(a)) << enc << " [" << a << "]";
      ASSERT_LE(ca.settled, a.size());
      ASSERT_LE(ca.settled_tokens, ca.tokens);
      reused += ca.settled > 0 ? 1 : 0;
      const std::vector<Tokenizer::KnownPart> parts = {{p.size(), a, ca},
                                                       {p.size() + a.size(), b, cb}};
      ASSERT_EQ(tok.CountWithParts(text, parts), tok.Count(text))
          << enc << " [" << p << "|" << a << "|" << b << "|" << c << "]";
      // Misplaced parts are tokenized again, not trusted.
      const std::vector<Tokenizer::KnownPart> wrong = {{0, b, cb}, {p.size() + 1, a, ca}};
      ASSERT_EQ(tok.CountWithParts(text, wrong), tok.Count(text))
          << enc << " [" << p << "|" << a << "|" << b << "|" << c << "]";
    }
    EXPECT_GT(reused, 10000u) << enc;  // the settled prefixes were really used
  }
}

TEST(TokenizerTest, AReportBlockIsSettledUpToItsClosingBracket) {
  const std::string block = "<report id=\"7\">\n# Title\n\nSome text.\n</report>\n";
  for (const char* enc : kEncodings) {
    const Tokenizer::PrefixCount c = Get(enc).CountPrefix(block);
    EXPECT_EQ(c.tokens, Get(enc).Count(block));
    EXPECT_EQ(c.settled, block.size() - 2) << enc;  // ">\n" could take more newlines
  }
}

TEST(TokenizerTest, DecodeBytesMaySplitACharacter) {
  const Tokenizer& tok = Get("cl100k_base");
  const auto ids = tok.Encode("🦀");  // not one token: its bytes come in pieces
  ASSERT_GT(ids.size(), 1u);
  const std::string first = tok.DecodeBytes(std::span(ids).first(1));
  EXPECT_LT(first.size(), 4u);
  EXPECT_EQ(first, std::string("🦀").substr(0, first.size()));
}

TEST(TokenizerTest, InvalidUtf8NeverCrashesAndRoundTrips) {
  const std::vector<std::string> inputs = {"\xFF",
                                           "\xC3",
                                           "abc\xE2\x82",
                                           "\xE2\x82"
                                           "abc",
                                           "\xED\xA0\x80 surrogate",
                                           "\xF4\x90\x80\x80 too big",
                                           "\xC0\xAF overlong",
                                           "ok \xF0\x9F\x98 truncated emoji \xF0\x9F\x98\x80",
                                           std::string("nul\0inside", 10),
                                           "\x80\x80\x80\x80",
                                           "caf\xC3\xA9 \xC3(",
                                           Repeat("\xFE", 5000)};
  for (const char* enc : kEncodings) {
    const Tokenizer& tok = Get(enc);
    for (const auto& s : inputs) {
      const auto ids = tok.Encode(s);
      EXPECT_EQ(tok.DecodeBytes(ids), s) << enc << " " << Escaped(s);
      EXPECT_EQ(tok.Count(s), ids.size());
    }
    // Valid stretches are encoded as usual: the bad byte only splits the text.
    const std::string good = "hello world";
    auto expected = tok.Encode("hello");
    const auto bad_byte = tok.Encode("\xFF");
    ASSERT_EQ(bad_byte.size(), 1u);
    expected.push_back(bad_byte[0]);
    const auto rest = tok.Encode(" world");
    expected.insert(expected.end(), rest.begin(), rest.end());
    EXPECT_EQ(tok.Encode("hello\xFF world"), expected);
  }
}

// tiktoken's byte-pair merge, written the simple quadratic way, over a rank map rebuilt through
// the public API: checks the heap-based merge used for long pieces on pieces much longer than
// node can handle in a test.
class ReferenceBpe {
 public:
  explicit ReferenceBpe(const Tokenizer& tok) {
    for (uint32_t id = 0; id < 300000; ++id) {
      const uint32_t one[] = {id};
      const std::string bytes = tok.DecodeBytes(one);
      if (!bytes.empty() && !ranks_.count(bytes)) ranks_.emplace(bytes, id);
    }
  }
  std::vector<uint32_t> Encode(const std::string& piece) const {
    constexpr uint32_t kMax = UINT32_MAX;
    auto rank = [&](size_t a, size_t b) {
      auto it = ranks_.find(piece.substr(a, b - a));
      return it == ranks_.end() ? kMax : it->second;
    };
    std::vector<size_t> bounds;
    for (size_t i = 0; i <= piece.size(); ++i) bounds.push_back(i);
    while (true) {
      uint32_t best = kMax;
      size_t at = 0;
      for (size_t i = 0; i + 2 < bounds.size(); ++i) {
        const uint32_t r = rank(bounds[i], bounds[i + 2]);
        if (r < best) {
          best = r;
          at = i;
        }
      }
      if (best == kMax) break;
      bounds.erase(bounds.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
    std::vector<uint32_t> out;
    for (size_t i = 0; i + 1 < bounds.size(); ++i) out.push_back(rank(bounds[i], bounds[i + 1]));
    return out;
  }

 private:
  std::unordered_map<std::string, uint32_t> ranks_;
};

TEST(TokenizerTest, LongPiecesMergeExactlyLikeTiktoken) {
  testing::SplitMix64 rng(7);
  for (const char* enc : kEncodings) {
    const Tokenizer& tok = Get(enc);
    const ReferenceBpe ref(tok);
    for (int trial = 0; trial < 24; ++trial) {
      // Each of these is a single pre-tokeniser piece: a letter run, a run of symbols, a run of
      // spaces at the end of the text.
      const size_t n = 90 + rng.Below(trial < 20 ? 300 : 1500);
      std::string piece;
      switch (trial % 3) {
        case 0:
          for (size_t i = 0; i < n; ++i)
            piece += "etaoinshrdlucmfwyp"[rng.Below(rng.Chance(50) ? 4 : 18)];
          break;
        case 1:
          for (size_t i = 0; i < n; ++i)
            piece += "!=-+*/<>.,;:"[rng.Below(rng.Chance(50) ? 3 : 12)];
          break;
        default:
          piece = Repeat(" ", n);
          break;
      }
      EXPECT_EQ(tok.Encode(piece), ref.Encode(piece)) << enc << " piece of " << n << " bytes";
    }
  }
}

TEST(TokenizerTest, LongRunsStayFast) {
  // Quadratic behaviour would take minutes here; the ctest timeout would catch it.
  testing::SplitMix64 rng(11);
  std::string b64;
  for (int i = 0; i < 1 << 18; ++i)
    b64 += "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[rng.Below(64)];
  constexpr size_t kRun = size_t{1} << 18;  // quadratic work would be ~10^11 steps
  const std::vector<std::string> runs = {Repeat(" ", kRun),      Repeat("a", kRun),
                                         Repeat("A", kRun),      Repeat("\n", kRun),
                                         Repeat("中", kRun / 4), b64};
  for (const char* enc : kEncodings) {
    const Tokenizer& tok = Get(enc);
    for (const auto& s : runs) {
      const auto ids = tok.Encode(s);
      EXPECT_EQ(tok.DecodeBytes(ids), s);
      EXPECT_LT(ids.size(), s.size());
    }
  }
}

TEST(TokenizerTest, ConcurrentUseGivesTheSameIds) {
  const auto& corpus = Corpus();
  for (const char* enc : kEncodings) {
    const Tokenizer& tok = Get(enc);
    std::vector<std::vector<uint32_t>> expected;
    for (size_t i = 0; i < corpus.size(); i += 7) expected.push_back(tok.Encode(corpus[i].text));
    std::vector<int> failures(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        const Tokenizer& same = **Tokenizer::Get(enc);
        for (size_t i = 0, k = 0; i < corpus.size(); i += 7, ++k) {
          if (same.Encode(corpus[i].text) != expected[k]) ++failures[static_cast<size_t>(t)];
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int f : failures) EXPECT_EQ(f, 0) << enc;
  }
}

TEST(TokenizerTest, CorpusIsLargeAndVaried) {
  size_t bytes = 0;
  for (const auto& seg : Corpus()) bytes += seg.text.size();
  EXPECT_GE(bytes, size_t{1} << 20);
}

// The parity test proper: every segment of the corpus, both encodings, ids identical to node
// tiktoken's. A failure names the segment, the token and byte position, and shows the text there.
TEST(TokenizerParityTest, IdenticalToNodeTiktoken) {
  const auto& corpus = Corpus();
  nlohmann::json request;
  request["encodings"] = kEncodings;
  request["texts"] = nlohmann::json::array();
  for (const auto& seg : corpus) request["texts"].push_back(seg.text);
  auto reply = testing::RunNodeTiktoken(request);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  std::cout << "[ node tiktoken " << (*reply)["tiktoken"].get<std::string>() << " ] "
            << corpus.size() << " segments\n";

  for (const char* enc : kEncodings) {
    const Tokenizer& tok = Get(enc);
    const auto& lists = (*reply)["ids"][enc];
    ASSERT_EQ(lists.size(), corpus.size());
    size_t tokens = 0;
    int mismatches = 0;
    for (size_t s = 0; s < corpus.size(); ++s) {
      const std::vector<uint32_t> theirs = lists[s].get<std::vector<uint32_t>>();
      const std::vector<uint32_t> ours = tok.Encode(corpus[s].text);
      tokens += theirs.size();
      if (ours == theirs) continue;
      size_t k = 0;
      while (k < ours.size() && k < theirs.size() && ours[k] == theirs[k]) ++k;
      const size_t byte = tok.DecodeBytes(std::span(ours).first(k)).size();
      const std::string_view text = corpus[s].text;
      const size_t from = byte > 40 ? byte - 40 : 0;
      ADD_FAILURE() << enc << ": segment " << s << " (" << corpus[s].label
                    << ") differs from node tiktoken at token " << k << ", byte " << byte
                    << "\n  text there: " << Escaped(text.substr(from, byte - from)) << " <HERE> "
                    << Escaped(text.substr(byte, 40)) << "\n  ours:  " << Describe(tok, ours, k)
                    << "\n  node:  " << Describe(tok, theirs, k);
      if (++mismatches >= 10) break;
    }
    std::cout << "[ " << enc << " ] " << tokens << " tokens compared\n";
  }
}

}  // namespace
}  // namespace grag
