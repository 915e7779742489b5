// Character-level citations: chunk byte offsets (the window's bytes in the document's text,
// edges moved inward off broken characters) on the book, on Markdown with emoji and CJK at the
// window edges, and with the title prefix.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "grag/chunker.h"

namespace grag {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Document Doc(std::string id, std::string text) {
  Document d;
  d.id = std::move(id);
  d.title = d.id;
  d.text = std::move(text);
  return d;
}

// A chunk's text without the title prefix and without U+FFFD at either edge (the broken bytes of
// a character cut by the window). The documents below hold no U+FFFD of their own.
std::string WindowText(const Chunk& c, const std::string& prefix, int* cut_edges) {
  EXPECT_EQ(c.text.substr(0, prefix.size()), prefix);
  std::string_view t = std::string_view(c.text).substr(prefix.size());
  while (t.starts_with(kReplacement)) {
    t.remove_prefix(kReplacement.size());
    ++*cut_edges;
  }
  while (t.ends_with(kReplacement)) {
    t.remove_suffix(kReplacement.size());
    ++*cut_edges;
  }
  return std::string(t);
}

// doc.text[start_byte, end_byte) is the chunk's text, for every chunk; returns the number of
// replacement characters stripped at window edges.
int ExpectOffsetsIdentity(const Document& doc, const ChunkOptions& options) {
  auto chunks = ChunkDocument(doc, options);
  EXPECT_TRUE(chunks.ok()) << chunks.status().ToString();
  if (!chunks.ok()) return 0;
  EXPECT_FALSE(chunks->empty());
  const std::string prefix = options.prepend_title ? "title: " + doc.title + ".\n" : "";
  int cut = 0;
  size_t previous_start = 0;
  for (const Chunk& c : *chunks) {
    EXPECT_LE(c.start_byte, c.end_byte);
    if (c.start_byte > c.end_byte) continue;
    EXPECT_LE(c.end_byte, doc.text.size());
    EXPECT_GE(c.start_byte, previous_start) << "chunk " << c.index;
    previous_start = c.start_byte;
    EXPECT_EQ(doc.text.substr(c.start_byte, c.end_byte - c.start_byte), WindowText(c, prefix, &cut))
        << "chunk " << c.index;
  }
  EXPECT_EQ(chunks->back().end_byte, doc.text.size());
  return cut;
}

TEST(ChunkOffsetsTest, EveryChunkOfTheBook) {
  std::string text =
      ReadFile(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);  // the loader strips the BOM
  ChunkOptions options;
  ExpectOffsetsIdentity(Doc("christmas_carol.txt", text), options);
  options.size = 300;
  options.overlap = 50;
  options.prepend_title = true;
  ExpectOffsetsIdentity(Doc("christmas_carol.txt", text), options);
}

TEST(ChunkOffsetsTest, MarkdownWithEmojiAndCjkAtTheEdges) {
  std::string md = "# Notes 📝\n\n";
  for (int i = 0; i < 40; ++i) {
    md += "- 東京の会議 " + std::to_string(i) + " 🎉👩‍💻 résumé naïve 한국어 🧪\n";
  }
  ChunkOptions options;
  options.size = 7;  // windows of a few tokens: many edges cut a character apart
  options.overlap = 2;
  const int cut = ExpectOffsetsIdentity(Doc("notes.md", md), options);
  EXPECT_GT(cut, 0) << "no window edge fell inside a character: the test tests nothing";
  options.prepend_title = true;
  options.encoding = "cl100k_base";
  EXPECT_GT(ExpectOffsetsIdentity(Doc("notes.md", md), options), 0);
}

TEST(ChunkOffsetsTest, AWindowInsideOneCharacterIsEmpty) {
  // cl100k_base splits an emoji into several byte tokens: one-token windows inside it.
  ChunkOptions options;
  options.encoding = "cl100k_base";
  options.size = 1;
  options.overlap = 0;
  auto chunks = ChunkDocument(Doc("e.md", "🧪"), options);
  ASSERT_TRUE(chunks.ok());
  ASSERT_GT(chunks->size(), 1u);
  for (const Chunk& c : *chunks) {
    EXPECT_EQ(c.start_byte, c.end_byte);
  }
}

}  // namespace
}  // namespace grag
