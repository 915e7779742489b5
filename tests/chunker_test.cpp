// Token chunking: parity with Microsoft GraphRAG's text units for A Christmas Carol, with plain
// 1200/100 windows, and with node tiktoken on windows that cut characters apart; ids, overlap,
// option checks and edge cases.
#include "grag/chunker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "grag/hash.h"
#include "grag/tokenizer.h"
#include "support/tiktoken_reference.h"
#include "text/utf8.h"

namespace grag {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string DataPath(const std::string& name) {
  return std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/" + name;
}

Document Doc(std::string id, std::string text, std::string title = "") {
  Document d;
  d.id = std::move(id);
  d.title = title.empty() ? d.id : std::move(title);
  d.text = std::move(text);
  return d;
}

// Shows where two long texts part.
std::string FirstDifference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  const size_t from = i > 30 ? i - 30 : 0;
  auto show = [&](const std::string& s) {
    return nlohmann::json(s.substr(from, 60))
        .dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  };
  return "texts differ at byte " + std::to_string(i) + ":\n  ours:     " + show(a) +
         "\n  expected: " + show(b);
}

void ExpectSameUnits(const std::vector<Chunk>& chunks, const nlohmann::json& expected) {
  ASSERT_EQ(chunks.size(), expected.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    const std::string text = expected[i]["text"].get<std::string>();
    EXPECT_TRUE(chunks[i].text == text)
        << "chunk " << i << ": " << FirstDifference(chunks[i].text, text);
    EXPECT_EQ(chunks[i].n_tokens, expected[i]["n_tokens"].get<size_t>()) << "chunk " << i;
    EXPECT_EQ(chunks[i].index, static_cast<int>(i));
  }
}

// Microsoft GraphRAG's defaults (1200 tokens, overlap 100, o200k_base) with its title prefix
// give exactly its 42 text units. The book as Microsoft read it starts with a byte order mark,
// which documents.json (and so christmas_carol.txt) lost; it is one token, and every window
// depends on it.
TEST(ChunkerParityTest, ReproducesMicrosoftGraphRagTextUnits) {
  const Document doc =
      Doc("a-christmas-carol.txt", "\xEF\xBB\xBF" + ReadFile(DataPath("christmas_carol.txt")));
  ChunkOptions options;
  options.prepend_title = true;
  auto chunks = ChunkDocument(doc, options);
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  auto units = nlohmann::json::parse(ReadFile(DataPath("ms_text_units.json")));
  std::sort(units.begin(), units.end(), [](const auto& a, const auto& b) {
    return a["human_readable_id"].template get<int>() < b["human_readable_id"].template get<int>();
  });
  ASSERT_EQ(units.size(), 42u);
  ExpectSameUnits(*chunks, units);
  EXPECT_EQ((*chunks)[0].text.substr(0, 33), "title: a-christmas-carol.txt.\n\xEF\xBB\xBF");
}

// Without BOM and prefix: the plain windows, as computed with the npm tiktoken package.
TEST(ChunkerParityTest, ReproducesPlainWindows) {
  const Document doc = Doc("christmas_carol.txt", ReadFile(DataPath("christmas_carol.txt")));
  auto chunks = ChunkDocument(doc, ChunkOptions{});
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  ExpectSameUnits(*chunks,
                  nlohmann::json::parse(ReadFile(DataPath("windows_o200k_1200_100.json"))));
  for (size_t i = 0; i < chunks->size(); ++i) {
    EXPECT_EQ((*chunks)[i].start_token, i * 1100);
    EXPECT_EQ((*chunks)[i].end_token, std::min(i * 1100 + 1200, size_t{45770}));
  }
}

// Windows that cut multi-byte characters (CJK, emoji, combining marks) decode the broken bytes
// to U+FFFD exactly as tiktoken + TextDecoder do, and n_tokens is the re-encoded length.
TEST(ChunkerParityTest, BrokenCharactersMatchNodeTiktoken) {
  // clang-format cannot measure these characters and rewraps them on every run.
  // clang-format off
  const std::string text =
      "吾輩は猫である。名前はまだ無い。👨‍👩‍👧‍👦 family 🇯🇵🇺🇸 flags, 🫶🏼 "
      "hands; "
      "Zalgo: Z̷̢̛̭a̶̟͑l̵̯̈g̸̤̓o̴̮͝ and a crab 🦀🦀🦀. Ελληνικά, русский, עברית, हिन्दी, 한국어 "
      "텍스트. "
      "𠀀𠀁𠀂𪚥𩸽 rare ideographs, then plain English to finish the text off nicely.";
  // clang-format on
  struct Case {
    const char* encoding;
    size_t size;
    size_t overlap;
  };
  const std::vector<Case> cases = {{"o200k_base", 1, 0},  {"o200k_base", 3, 1},
                                   {"o200k_base", 7, 3},  {"cl100k_base", 1, 0},
                                   {"cl100k_base", 5, 2}, {"cl100k_base", 16, 5}};
  nlohmann::json request;
  request["chunks"] = nlohmann::json::array();
  for (const auto& c : cases) {
    request["chunks"].push_back(
        {{"encoding", c.encoding}, {"size", c.size}, {"overlap", c.overlap}, {"text", text}});
  }
  auto reply = testing::RunNodeTiktoken(request);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  size_t replaced = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    ChunkOptions options;
    options.encoding = cases[k].encoding;
    options.size = cases[k].size;
    options.overlap = cases[k].overlap;
    auto chunks = ChunkDocument(Doc("d", text), options);
    ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
    SCOPED_TRACE(std::string(cases[k].encoding) + " size " + std::to_string(cases[k].size));
    ExpectSameUnits(*chunks, (*reply)["chunks"][k]);
    for (const auto& c : *chunks) {
      EXPECT_EQ(ValidUtf8Length(c.text), c.text.size());
      if (c.text.find("\xEF\xBF\xBD") != std::string::npos) ++replaced;
    }
  }
  EXPECT_GT(replaced, 0u) << "no window cut a character: the test lost its point";
}

TEST(ChunkerTest, IdsAreStableContentDerivedAndDistinctAcrossDocuments) {
  const std::string text = ReadFile(DataPath("christmas_carol.txt")).substr(0, 20000);
  ChunkOptions options;
  options.size = 300;
  options.overlap = 30;
  auto a = ChunkDocument(Doc("books/carol.txt", text), options);
  auto again = ChunkDocument(Doc("books/carol.txt", text), options);
  auto other = ChunkDocument(Doc("books/copy.txt", text), options);
  ASSERT_TRUE(a.ok() && again.ok() && other.ok());
  ASSERT_GT(a->size(), 5u);
  std::set<std::string> ids;
  for (size_t i = 0; i < a->size(); ++i) {
    const Chunk& c = (*a)[i];
    EXPECT_EQ(c.id, (*again)[i].id);
    EXPECT_NE(c.id, (*other)[i].id);
    EXPECT_EQ(c.text, (*other)[i].text);
    EXPECT_EQ(c.document_id, "books/carol.txt");
    EXPECT_EQ(c.id, Hasher().Add("books/carol.txt").Add(c.text).HexDigest());
    EXPECT_EQ(c.id.size(), 64u);
    ids.insert(c.id);
  }
  EXPECT_EQ(ids.size(), a->size());

  // An edit changes only the ids of the chunks whose text changed.
  std::string edited = text;
  edited.replace(edited.size() - 100, 5, "EDIT!");
  auto b = ChunkDocument(Doc("books/carol.txt", edited), options);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), a->size());
  EXPECT_EQ((*b)[0].id, (*a)[0].id);
  EXPECT_NE(b->back().id, a->back().id);
}

TEST(ChunkerTest, RepeatedChunkTextStillGetsDistinctIds) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "All work and no play makes Jack a dull boy. ";
  ChunkOptions options;
  options.size = 10;
  options.overlap = 0;
  auto chunks = ChunkDocument(Doc("jack.txt", text), options);
  ASSERT_TRUE(chunks.ok());
  std::set<std::string> ids, texts;
  for (const auto& c : *chunks) {
    ids.insert(c.id);
    texts.insert(c.text);
  }
  EXPECT_LT(texts.size(), chunks->size() / 4);  // the text really repeats
  EXPECT_EQ(ids.size(), chunks->size());
  // The first occurrence keeps the plain content id.
  EXPECT_EQ((*chunks)[0].id, Hasher().Add("jack.txt").Add((*chunks)[0].text).HexDigest());
}

TEST(ChunkerTest, OverlapIsHonoured) {
  const std::string text = ReadFile(DataPath("christmas_carol.txt")).substr(5000, 30000);
  const Tokenizer& tok = **Tokenizer::Get("cl100k_base");
  const std::vector<uint32_t> tokens = tok.Encode(text);
  ChunkOptions options;
  options.encoding = "cl100k_base";
  options.size = 250;
  options.overlap = 40;
  auto chunks = ChunkDocument(Doc("d", text), options);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), (tokens.size() - 40 + 209) / 210);
  for (size_t i = 0; i < chunks->size(); ++i) {
    const Chunk& c = (*chunks)[i];
    EXPECT_EQ(c.start_token, i * 210);
    EXPECT_EQ(c.end_token, std::min(c.start_token + 250, tokens.size()));
    EXPECT_EQ(c.text, DecodeUtf8Lossy(tok.DecodeBytes(
                          std::span(tokens).subspan(c.start_token, c.end_token - c.start_token))));
    if (i > 0) {
      // The last 40 tokens of one window are the first 40 of the next.
      const Chunk& prev = (*chunks)[i - 1];
      EXPECT_EQ(prev.end_token - c.start_token, 40u);
    }
  }
  EXPECT_EQ(chunks->back().end_token, tokens.size());
}

TEST(ChunkerTest, BadOptionsAreRejectedWithAClearMessage) {
  const Document doc = Doc("d", "some text");
  auto expect_invalid = [&](ChunkOptions o, const std::string& needle) {
    auto r = ChunkDocument(doc, o);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().ToString();
    EXPECT_FALSE(ValidateChunkOptions(o).ok());
  };
  ChunkOptions o;
  o.size = 0;
  o.overlap = 0;
  expect_invalid(o, "size");
  o = {};
  o.overlap = o.size;
  expect_invalid(o, "overlap (1200 tokens) must be smaller than the chunk size (1200 tokens)");
  o = {};
  o.size = 50;
  o.overlap = 100;
  expect_invalid(o, "overlap");
  o = {};
  o.encoding = "gpt2";
  expect_invalid(o, "gpt2");
  EXPECT_TRUE(ValidateChunkOptions(ChunkOptions{}).ok());
}

TEST(ChunkerTest, EmptyDocumentHasNoChunks) {
  auto chunks = ChunkDocument(Doc("empty.txt", ""), ChunkOptions{});
  ASSERT_TRUE(chunks.ok());
  EXPECT_TRUE(chunks->empty());
  ChunkOptions with_title;
  with_title.prepend_title = true;
  chunks = ChunkDocument(Doc("empty.txt", ""), with_title);
  ASSERT_TRUE(chunks.ok());
  EXPECT_TRUE(chunks->empty());
}

TEST(ChunkerTest, ShortDocumentIsOneChunk) {
  const std::string text = "Marley was dead: to begin with. There is no doubt whatever about that.";
  const Tokenizer& tok = **Tokenizer::Get("o200k_base");
  auto chunks = ChunkDocument(Doc("marley.txt", text), ChunkOptions{});
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 1u);
  const Chunk& c = chunks->front();
  EXPECT_EQ(c.text, text);
  EXPECT_EQ(c.n_tokens, tok.Count(text));
  EXPECT_EQ(c.start_token, 0u);
  EXPECT_EQ(c.end_token, c.n_tokens);
  EXPECT_EQ(c.index, 0);
  EXPECT_EQ(c.document_id, "marley.txt");

  ChunkOptions with_title;
  with_title.prepend_title = true;
  auto titled = ChunkDocument(Doc("books/marley.txt", text, "Marley"), with_title);
  ASSERT_TRUE(titled.ok());
  ASSERT_EQ(titled->size(), 1u);
  EXPECT_EQ(titled->front().text, "title: Marley.\n" + text);
  EXPECT_EQ(titled->front().n_tokens, tok.Count("title: Marley.\n" + text));
  EXPECT_NE(titled->front().id, c.id);
}

TEST(ChunkerTest, ChunksNeverSpanDocuments) {
  const std::vector<Document> docs = {
      Doc("a.txt", "First document, short."), Doc("b.txt", ""),
      Doc("c.txt", ReadFile(DataPath("christmas_carol.txt")).substr(0, 9000))};
  ChunkOptions options;
  options.size = 100;
  options.overlap = 10;
  auto all = ChunkDocuments(docs, options);
  ASSERT_TRUE(all.ok());
  size_t expected = 0;
  for (const auto& d : docs) expected += ChunkDocument(d, options)->size();
  ASSERT_EQ(all->size(), expected);
  EXPECT_EQ((*all)[0].document_id, "a.txt");
  EXPECT_EQ((*all)[0].text, "First document, short.");
  EXPECT_EQ((*all)[1].document_id, "c.txt");
  EXPECT_EQ((*all)[1].index, 0);
  EXPECT_EQ((*all)[1].start_token, 0u);
  for (size_t i = 2; i < all->size(); ++i) {
    EXPECT_EQ((*all)[i].document_id, "c.txt");
    EXPECT_EQ((*all)[i].index, (*all)[i - 1].index + 1);
  }
  ChunkOptions bad;
  bad.overlap = bad.size;
  EXPECT_FALSE(ChunkDocuments(docs, bad).ok());
}

}  // namespace
}  // namespace grag
