// Character-level citations: chunk byte offsets (the window's bytes in the document's text,
// edges moved inward off broken characters) on the book, on Markdown with emoji and CJK at the
// window edges, and with the title prefix; the span locator (quote, sentence, chunk; offsets
// located in an old index); claims cut from answers; and, through the engine on a no-LLM index
// of the book, every method's spans inside the context it used, unmoved by adding and removing
// other documents.
#include "grag/citations.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/engine_citations.h"
#include "grag/chunker.h"
#include "grag/engine.h"
#include "engine/engine_internal.h"
#include "grag/engine_json.h"
#include "grag/store.h"
#include "support/temp_dir.h"

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

// ---------------------------------------------------------------- the span locator

// One document cut into three chunks by the real chunker (offsets stored), or stored without
// offsets as an index from before schema 8 holds them.
class SpanLocatorTest : public ::testing::Test {
 protected:
  static constexpr char kText[] =
      "Marley was dead: to begin with. There is no doubt whatever about that. The register of "
      "his burial was signed by the clergyman, the clerk, the undertaker, and the chief "
      "mourner.\n\nScrooge signed it. And Scrooge's name was good upon 'Change, for anything he "
      "chose to put his hand to. Old Marley was as dead as a door-nail.\n\nScrooge knew he was "
      "dead? Of course he did. How could it be otherwise? Scrooge and he were partners for I "
      "don't know how many years.";

  void Open(bool with_offsets, bool prepend_title = false) {
    auto store = Store::Open(dir_ / "index.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    doc_.id = "carol.txt";
    doc_.title = "carol.txt";
    doc_.source_path = "input/carol.txt";
    doc_.text = kText;
    doc_.content_hash = "h1";
    ASSERT_TRUE(store_->UpsertDocument(doc_).ok());
    ChunkOptions o;
    o.size = 40;
    o.overlap = 5;
    o.prepend_title = prepend_title;
    auto chunks = ChunkDocument(doc_, o);
    ASSERT_TRUE(chunks.ok());
    for (const Chunk& c : *chunks) {
      ChunkRecord r;
      r.id = c.id;
      r.document_id = c.document_id;
      r.index = c.index;
      r.text = c.text;
      if (with_offsets) {
        r.start_byte = static_cast<int64_t>(c.start_byte);
        r.end_byte = static_cast<int64_t>(c.end_byte);
      }
      records_.push_back(r);
    }
    ASSERT_TRUE(store_->ReplaceDocumentChunks(doc_.id, records_).ok());
    ASSERT_GE(records_.size(), 3u);
  }

  std::vector<CitedChunk> All() const {
    std::vector<CitedChunk> out;
    for (const auto& r : records_) out.push_back({r.id});
    return out;
  }

  // The span's text is the document's at its offsets, and lies in its chunk.
  void ExpectConsistent(const SourceSpan& s) {
    EXPECT_EQ(s.text, doc_.text.substr(static_cast<size_t>(s.byte_start),
                                       static_cast<size_t>(s.byte_end - s.byte_start)));
    EXPECT_EQ(s.start, CodePoints(std::string_view(doc_.text).substr(0, s.byte_start)));
    EXPECT_EQ(s.end - s.start, CodePoints(s.text));
    bool inside = false;
    for (const auto& r : records_) {
      if (r.id == s.chunk_id) inside = r.text.find(s.text) != std::string::npos;
    }
    EXPECT_TRUE(inside) << s.text;
    EXPECT_EQ(s.content_hash, "h1");
    EXPECT_EQ(s.source_path, "input/carol.txt");
  }

  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  Document doc_;
  std::vector<ChunkRecord> records_;
};

TEST_F(SpanLocatorTest, QuoteSentenceOrChunk) {
  Open(true);
  SpanLocator locator(*store_, SpanOptions{});
  // Verbatim (line breaks and double spaces folded): a quote.
  auto quote = locator.Locate("Scrooge  signed\nit.", "", All());
  ASSERT_TRUE(quote.ok()) << quote.status().ToString();
  ASSERT_FALSE(quote->empty());
  EXPECT_EQ(quote->front().precision, SpanPrecision::kQuote);
  EXPECT_EQ(quote->front().text, "Scrooge signed it.");
  EXPECT_FALSE(quote->front().located);
  ExpectConsistent(quote->front());
  // A paraphrase: the sentence holding its words.
  auto sentence =
      locator.Locate("The clergyman and the undertaker signed the burial register.", "", All());
  ASSERT_TRUE(sentence.ok());
  ASSERT_FALSE(sentence->empty());
  EXPECT_EQ(sentence->front().precision, SpanPrecision::kSentence);
  EXPECT_THAT(sentence->front().text, ::testing::HasSubstr("The register of his burial"));
  EXPECT_THAT(sentence->front().text, ::testing::Not(::testing::HasSubstr("Marley was dead")));
  EXPECT_GE(sentence->front().overlap, 0.35);
  ExpectConsistent(sentence->front());
  // Unrelated: the whole (first) chunk, one span.
  auto chunk = locator.Locate("Quantum chromodynamics explains gluons.", "", {{records_[1].id}});
  ASSERT_TRUE(chunk.ok());
  ASSERT_EQ(chunk->size(), 1u);
  EXPECT_EQ(chunk->front().precision, SpanPrecision::kChunk);
  EXPECT_EQ(chunk->front().byte_start, records_[1].start_byte);
  EXPECT_EQ(chunk->front().byte_end, records_[1].end_byte);
  ExpectConsistent(chunk->front());
  // A window of a chunk bounds the span.
  const size_t cut = records_[0].text.find("There is");
  auto window = locator.Locate("Marley was dead: to begin with.", "", {{records_[0].id, cut}});
  ASSERT_TRUE(window.ok());
  ASSERT_EQ(window->size(), 1u);
  EXPECT_NE(window->front().precision, SpanPrecision::kQuote);
  EXPECT_GE(window->front().byte_start, static_cast<int64_t>(cut));
}

TEST_F(SpanLocatorTest, OldIndexWithoutOffsetsLocatesTheChunks) {
  Open(false, /*prepend_title=*/true);
  SpanLocator locator(*store_, SpanOptions{});
  auto r = locator.Locate("Scrooge and he were partners for many years.", "", All());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->empty());
  EXPECT_TRUE(r->front().located);
  EXPECT_NE(r->front().precision, SpanPrecision::kChunk);
  EXPECT_THAT(r->front().text, ::testing::HasSubstr("partners"));
  ExpectConsistent(r->front());
  // The title prefix is never part of a span.
  auto whole = locator.Locate("", "", {{records_[0].id}});
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(whole->size(), 1u);
  EXPECT_EQ(whole->front().byte_start, 0);
  ExpectConsistent(whole->front());
}

// Stored offsets that no longer fit the chunk (a hand-edited index) do not throw: the chunk is
// located instead, or skipped.
TEST_F(SpanLocatorTest, OffsetsThatDoNotFitAreNotTrusted) {
  Open(true);
  ChunkRecord tiny;
  tiny.id = "tiny";
  tiny.document_id = doc_.id;
  tiny.index = 99;
  tiny.text = "Old";
  tiny.start_byte = 0;
  tiny.end_byte = 200;
  records_.push_back(tiny);
  ASSERT_TRUE(store_->ReplaceDocumentChunks(doc_.id, records_).ok());
  SpanLocator locator(*store_, SpanOptions{});
  auto r = locator.Locate("Old Marley", "", {{"tiny"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_TRUE(r->front().located);
  EXPECT_EQ(r->front().text, "Old");
}

TEST(CitedClaimsTest, TheSentenceAroundEachMarker) {
  const std::set<std::string> ids = {"S1", "S2", "E4", "C7"};
  const auto claims = CitedClaims(
      "Marley was dead [S2]. Scrooge signed the register of his burial [S1, E4]. "
      "He was a tight-fisted hand at the grindstone. [C7] S9 is not cited.",
      ids);
  ASSERT_EQ(claims.size(), 4u);
  EXPECT_EQ(claims[0], std::make_pair(std::string("S2"), std::string("Marley was dead.")));
  EXPECT_EQ(claims[1].first, "S1");
  EXPECT_EQ(claims[1].second, "Scrooge signed the register of his burial.");
  EXPECT_EQ(claims[2].first, "E4");
  // A marker after the full stop belongs to the sentence before it.
  EXPECT_EQ(claims[3],
            std::make_pair(std::string("C7"),
                           std::string("He was a tight-fisted hand at the grindstone.")));
  EXPECT_TRUE(CitedClaims("No markers here.", ids).empty());
  // A list item's marker is not part of its claim.
  const auto items = CitedClaims("- Marley was dead. [S1]\n- Scrooge signed it. [S2]\n", ids);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].second, "Marley was dead.");
  EXPECT_EQ(items[1].second, "Scrooge signed it.");
}

// ---------------------------------------------------------------- every method, via the engine

// A no-LLM project of two parts of the book, and every method's answer: each span's text is the
// document's at its offsets and lies in a chunk the method's context holds.
class EngineSpansTest : public ::testing::Test {
 protected:
  void SetUp() override {
    book_ =
        testing::ReadFile(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt");
    if (book_.starts_with("\xEF\xBB\xBF")) book_.erase(0, 3);
    dir_.Write("proj/input/part1.txt", book_.substr(0, 60000));
    dir_.Write("proj/input/part2.md", "# Stave two\n\n" + book_.substr(60000, 40000));
    config_.root = dir_ / "proj";
  }

  std::unique_ptr<Engine> Index() {
    EngineOptions o;
    o.writable = true;
    auto e = Engine::Open(config_, o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (!e.ok()) return nullptr;
    auto summary = (*e)->Index({});
    EXPECT_TRUE(summary.ok()) << summary.status().ToString();
    return std::move(e).value();
  }

  // The chunks a method's context held, or read for a cited report/entity/relationship.
  static std::set<std::string> ContextChunks(Engine& engine, const QueryResult& r) {
    std::set<std::string> out;
    Store& store = EngineInternals::store(engine);
    auto add_entity = [&](int64_t id) {
      auto chunks = store.GetEntityChunks(id);
      if (chunks.ok()) out.insert(chunks->begin(), chunks->end());
    };
    auto add_community = [&](int64_t id) {
      auto all = store.CommunityChunks();
      if (all.ok() && all->count(id) != 0) out.insert(all->at(id).begin(), all->at(id).end());
    };
    if (r.passages) {
      for (size_t i = 0; i < r.passages->placed; ++i) {
        out.insert(r.passages->retrieval.chunks[i].chunk_id);
      }
    }
    if (r.local) {
      for (const auto& item : r.local->context.items) {
        if (item.type == LocalItemType::kChunk) out.insert(item.chunk_id);
        if (item.type == LocalItemType::kEntity) add_entity(item.entity_id);
        if (item.type == LocalItemType::kRelationship) {
          add_entity(item.source_id);
          add_entity(item.target_id);
        }
        if (item.type == LocalItemType::kReport) add_community(item.community_id);
      }
    }
    if (r.global) {
      for (const auto& c : r.global->citations) add_community(c.community_id);
    }
    return out;
  }

  // Checks every span of `r`; returns them by citation id and chunk.
  std::map<std::string, SourceSpan> ExpectSpansInContext(Engine& engine, const QueryResult& r) {
    std::map<std::string, SourceSpan> out;
    const std::set<std::string> context = ContextChunks(engine, r);
    EXPECT_FALSE(r.source_citations.empty()) << QueryMethodName(r.method) << ": " << r.answer;
    for (const SourceCitation& c : r.source_citations) {
      EXPECT_FALSE(c.spans.empty()) << c.id;
      for (size_t i = 0; i < c.spans.size(); ++i) {
        for (size_t k = 0; k < i; ++k) {
          const SourceSpan& a = c.spans[i];
          const SourceSpan& b = c.spans[k];
          EXPECT_FALSE(a.document_id == b.document_id && a.byte_start < b.byte_end &&
                       b.byte_start < a.byte_end)
              << c.id << ": one passage twice (overlapping chunks)";
        }
      }
      for (const SourceSpan& s : c.spans) {
        auto doc = EngineInternals::store(engine).GetDocument(s.document_id);
        EXPECT_TRUE(doc.ok() && doc->has_value());
        if (!doc.ok() || !doc->has_value()) continue;
        const std::string& text = (*doc)->text;
        EXPECT_EQ(s.text, text.substr(static_cast<size_t>(s.byte_start),
                                      static_cast<size_t>(s.byte_end - s.byte_start)));
        EXPECT_EQ(s.start, CodePoints(std::string_view(text).substr(0, s.byte_start)));
        EXPECT_FALSE(s.located);  // a fresh index stores the offsets
        EXPECT_EQ(context.count(s.chunk_id), 1u) << c.id << " cites outside the context";
        auto chunk = EngineInternals::store(engine).GetChunk(s.chunk_id);
        EXPECT_TRUE(chunk.ok() && chunk->has_value());
        if (!chunk.ok() || !chunk->has_value()) continue;
        EXPECT_NE((*chunk)->text.find(s.text), std::string::npos) << c.id;
        EXPECT_EQ((*chunk)->document_id, s.document_id);
        out.emplace(c.id + "@" + s.chunk_id, s);
      }
    }
    return out;
  }

  testing::TempDir dir_;
  Config config_;
  std::string book_;
};

TEST_F(EngineSpansTest, EveryMethodsSpansLieInItsContextAndSurviveOtherDocumentsChanging) {
  auto engine = Index();
  ASSERT_NE(engine, nullptr);
  const std::vector<std::pair<QueryMethod, std::string>> asks = {
      {QueryMethod::kGlobal, "What are the main themes of the story?"},
      {QueryMethod::kLocal, "Who was Marley and what happened to him?"},
      {QueryMethod::kBasic, "What did the register of Marley's burial say?"},
      {QueryMethod::kHybrid, "What did Scrooge say about Christmas to his nephew?"},
  };
  std::map<int, std::map<std::string, SourceSpan>> before;
  for (size_t i = 0; i < asks.size(); ++i) {
    QueryRequest q;
    q.method = asks[i].first;
    q.question = asks[i].second;
    auto r = engine->Query(q);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    before[static_cast<int>(i)] = ExpectSpansInContext(*engine, *r);
    // The JSON every front end gets carries them.
    const auto j = nlohmann::json::parse(QueryResultJson(*r, q.question, false));
    ASSERT_FALSE(j["citations"].empty());
    const auto& cite = j["citations"][0];
    ASSERT_TRUE(cite.contains("claim"));
    ASSERT_FALSE(cite["spans"].empty()) << cite.dump();
    const auto& span = cite["spans"][0];
    for (const char* key : {"document_id", "source_path", "title", "content_hash", "start", "end",
                            "byte_start", "byte_end", "precision", "text"}) {
      EXPECT_TRUE(span.contains(key)) << key;
    }
  }
  // Another document comes, then part 2 goes: part 1's spans do not move.
  dir_.Write("proj/input/other.txt", "Tiny Tim sang a song about the Cratchits and Christmas.");
  ASSERT_TRUE(engine->Index({}).ok());
  std::filesystem::remove(dir_ / "proj/input/part2.md");
  ASSERT_TRUE(engine->Index({}).ok());
  for (size_t i = 0; i < asks.size(); ++i) {
    QueryRequest q;
    q.method = asks[i].first;
    q.question = asks[i].second;
    auto r = engine->Query(q);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (const SourceCitation& c : r->source_citations) {
      for (const SourceSpan& s : c.spans) {
        if (s.document_id != "part1.txt") continue;
        // The same chunk of part 1 cited before keeps its offsets.
        for (const auto& [key, old] : before[static_cast<int>(i)]) {
          if (old.chunk_id != s.chunk_id || old.precision != SpanPrecision::kChunk ||
              s.precision != SpanPrecision::kChunk) {
            continue;
          }
          EXPECT_EQ(old.byte_start, s.byte_start);
          EXPECT_EQ(old.byte_end, s.byte_end);
        }
        EXPECT_EQ(s.text, book_.substr(static_cast<size_t>(s.byte_start),
                                       static_cast<size_t>(s.byte_end - s.byte_start)));
      }
    }
  }
  // Every chunk of part 1 still has the offsets it was cut with.
  auto chunks = EngineInternals::store(*engine).ListChunks("part1.txt");
  ASSERT_TRUE(chunks.ok());
  ASSERT_FALSE(chunks->empty());
  for (const ChunkRecord& c : *chunks) {
    ASSERT_GE(c.start_byte, 0);
    EXPECT_NE(c.text.find(book_.substr(static_cast<size_t>(c.start_byte),
                                       static_cast<size_t>(c.end_byte - c.start_byte))),
              std::string::npos);
  }
}

}  // namespace
}  // namespace grag
