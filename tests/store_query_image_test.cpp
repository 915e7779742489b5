// Query images (Store::RefreshQueryImages) in an SQLite index: a question reads the same
// neighbourhood and the same vectors from an image as from the tables; any write to a table an
// image is made from drops it in the same transaction; a damaged image is read around and
// reported by Check; a truncated one never decodes.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "grag/store.h"
#include "store/query_image.h"
#include "store/reply_codec.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::TempDir;

// Vectors have no image since schema 7: each is kept once, in its row.
const std::vector<std::string> kAll = {"graph", "words"};

bool Has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Everything a snapshot holds, as one comparable string.
std::string Dump(const GraphSnapshot& g) {
  std::string out;
  for (const auto& e : g.entities) {
    out += "E" + std::to_string(e.id) + ":" + e.name_key + ":" + std::to_string(e.frequency) + ";";
  }
  for (const auto& e : g.edges) {
    out += "R" + std::to_string(e.source_id) + "-" + std::to_string(e.target_id) + ":" +
           std::to_string(e.weight) + ";";
  }
  for (size_t i = 0; i < g.chunk_ids.size(); ++i) {
    out += "C" + g.chunk_ids[i] + ":" + g.chunk_titles[i] + ";";
  }
  for (const auto& l : g.links) {
    out += "L" + std::to_string(l.entity_id) + "@" + std::to_string(l.chunk) + ";";
  }
  return out;
}

std::string Dump(const PackedEmbeddings& p) {
  std::string out = p.model + "/" + std::to_string(p.dimension) + ":";
  for (const auto& id : p.ids) out += id + ",";
  for (float v : p.values) out += std::to_string(v) + ",";
  return out;
}

class QueryImageTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open() {
    store_.reset();
    auto opened = Store::Open(path_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
  }

  std::vector<std::string> Images() {
    auto info = store_->Info();
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? info->query_images : std::vector<std::string>{};
  }

  void AddDoc(const std::string& id, const std::string& title, int chunks) {
    Document d;
    d.id = id;
    d.title = title;
    d.source_path = "/in/" + id;
    d.content_hash = "h:" + id;
    std::vector<ChunkRecord> records;
    for (int i = 0; i < chunks; ++i) {
      ChunkRecord c;
      c.id = id + "#" + static_cast<char>('z' - i);  // ids sort against document order
      c.document_id = id;
      c.index = i;
      c.text = "text " + id + " " + std::to_string(i);
      c.n_tokens = 3;
      d.text += c.text + "\n";
      records.push_back(c);
    }
    ASSERT_TRUE(store_->UpsertDocument(d).ok());
    ASSERT_TRUE(store_->ReplaceDocumentChunks(id, records).ok());
  }

  int64_t AddEntity(const std::string& key) {
    EntityRecord e;
    e.name_key = key;
    e.name = key;
    e.type = "PERSON";
    auto id = store_->UpsertEntity(e);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.value_or(0);
  }

  int64_t AddRelationship(int64_t a, int64_t b, double weight, int64_t frequency = 1) {
    RelationshipRecord r;
    r.source_id = std::min(a, b);
    r.target_id = std::max(a, b);
    r.weight = weight;
    r.frequency = frequency;
    auto id = store_->UpsertRelationship(r);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.value_or(0);
  }

  // A random graph: documents of a few chunks, entities linked to random chunks, relationships
  // between random pairs with weights that often tie, and vectors for chunks and entities.
  void BuildRandomGraph(std::mt19937& rng) {
    const int docs = 2 + static_cast<int>(rng() % 5);
    for (int d = 0; d < docs; ++d) {
      AddDoc("doc" + std::to_string(d), "Title " + std::to_string(rng() % 3),
             1 + static_cast<int>(rng() % 4));
    }
    auto ids = store_->ListChunkIds();
    ASSERT_TRUE(ids.ok());
    chunk_ids_ = *ids;
    const int n = 3 + static_cast<int>(rng() % 12);
    entity_ids_.clear();
    for (int i = 0; i < n; ++i) entity_ids_.push_back(AddEntity("e" + std::to_string(rng())));
    for (int64_t e : entity_ids_) {
      std::set<std::string> chunks;
      const size_t k = 1 + rng() % 3;
      while (chunks.size() < std::min(k, chunk_ids_.size())) {
        chunks.insert(chunk_ids_[rng() % chunk_ids_.size()]);
      }
      ASSERT_TRUE(
          store_->SetEntityChunks(e, std::vector<std::string>(chunks.begin(), chunks.end())).ok());
    }
    const int rels = static_cast<int>(rng() % static_cast<unsigned>(2 * n + 1));
    for (int i = 0; i < rels; ++i) {
      const int64_t a = entity_ids_[rng() % entity_ids_.size()];
      const int64_t b = entity_ids_[rng() % entity_ids_.size()];
      if (a != b) {
        AddRelationship(a, b, static_cast<double>(1 + rng() % 3), static_cast<int64_t>(rng() % 4));
      }
    }
    ASSERT_TRUE(store_->RecomputeGraphStats().ok());
    // Some relationships keep a frequency the recount did not give them (no chunk links here),
    // so the image must carry the column, not a count.
    for (size_t i = 0; i + 1 < entity_ids_.size(); i += 3) {
      AddRelationship(entity_ids_[i], entity_ids_[i + 1], 4, 1 + static_cast<int64_t>(rng() % 9));
    }
    std::vector<EmbeddingRecord> vectors;
    for (const auto& c : chunk_ids_) vectors.push_back(Vector(EmbeddingOwner::kChunk, c, rng));
    for (int64_t e : entity_ids_) {
      vectors.push_back(Vector(EmbeddingOwner::kEntity, std::to_string(e), rng));
    }
    ASSERT_TRUE(store_->PutEmbeddings(vectors).ok());
  }

  static EmbeddingRecord Vector(EmbeddingOwner owner, const std::string& id, std::mt19937& rng) {
    EmbeddingRecord r;
    r.owner = owner;
    r.owner_id = id;
    r.model = "m";
    for (int i = 0; i < 4; ++i) r.vector.push_back(static_cast<float>(rng() % 100) / 7.0f);
    return r;
  }

  // Random seeds (some unknown) and limits.
  struct Question {
    std::vector<int64_t> entities;
    std::vector<std::string> chunks;
    Store::NeighbourhoodLimits limits;
  };
  Question RandomQuestion(std::mt19937& rng) {
    Question q;
    for (size_t i = 0, n = rng() % 3; i < n; ++i) {
      q.entities.push_back(rng() % 5 == 0 ? 999999 : entity_ids_[rng() % entity_ids_.size()]);
    }
    for (size_t i = 0, n = rng() % 2; i < n; ++i) {
      q.chunks.push_back(rng() % 5 == 0 ? "nowhere#0" : chunk_ids_[rng() % chunk_ids_.size()]);
    }
    q.limits.hops = 1 + static_cast<int>(rng() % 3);
    q.limits.max_entities = 1 + rng() % 12;
    q.limits.max_chunks = 1 + rng() % 12;
    q.limits.max_fanout = 1 + rng() % 4;
    q.limits.relationships = rng() % 4 != 0;
    return q;
  }

  // What Check finds wrong with the images (other checks may complain of a test's graph: an
  // entity left without chunks, say).
  std::vector<std::string> ImageProblems() {
    auto check = store_->Check();
    EXPECT_TRUE(check.ok()) << check.status().ToString();
    std::vector<std::string> problems;
    if (!check.ok()) return {"Check failed"};
    for (const auto& p : check->problems) {
      if (p.check == "query_images") problems.push_back(p.detail);
    }
    return problems;
  }

  std::string Walk(const Question& q) {
    auto g = store_->LoadGraphNeighbourhood(q.entities, q.chunks, q.limits);
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return g.ok() ? Dump(*g) : "";
  }

  // An entity's relationship edges (ListRelationshipEdgesOf), by id, as one string.
  std::string Edges(int64_t entity_id) {
    auto edges = store_->ListRelationshipEdgesOf(entity_id);
    EXPECT_TRUE(edges.ok()) << edges.status().ToString();
    if (!edges.ok()) return "";
    std::sort(edges->begin(), edges->end(),
              [](const RelationshipRecord& a, const RelationshipRecord& b) { return a.id < b.id; });
    std::string out;
    for (const RelationshipRecord& r : *edges) {
      out += "R" + std::to_string(r.id) + ":" + std::to_string(r.source_id) + "-" +
             std::to_string(r.target_id) + ":" + std::to_string(r.weight) + ":" +
             std::to_string(r.frequency) + ":" + std::to_string(r.combined_degree) + ";";
    }
    return out;
  }

  std::string Vectors(EmbeddingOwner owner) {
    auto p = store_->ListPackedEmbeddings(owner);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? Dump(*p) : "";
  }

  // Runs raw SQL on the index file (what no store method would do).
  void RawSql(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error != nullptr ? error : "");
    sqlite3_free(error);
    sqlite3_close(db);
  }

  // The stored bytes of an image, read past the store.
  std::string RawImage(const std::string& name, bool inflate = true) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, "SELECT data FROM query_images WHERE name = ?", -1, &stmt, nullptr);
    sqlite3_bind_text(stmt, 1, name.c_str(), -1, SQLITE_TRANSIENT);
    std::string out;
    if (sqlite3_step(stmt) == SQLITE_ROW) {
      out.assign(static_cast<const char*>(sqlite3_column_blob(stmt, 0)),
                 static_cast<size_t>(sqlite3_column_bytes(stmt, 0)));
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    // Stored compressed where that is smaller (reply_codec.h): the image is what inflates.
    if (inflate && store::DecompressedSize(out)) {
      Result<std::string> inflated = store::DecompressReply(out);
      EXPECT_TRUE(inflated.ok()) << inflated.status().ToString();
      if (inflated.ok()) out = std::move(*inflated);
    }
    return out;
  }

  TempDir dir_;
  std::string path_ = dir_.File("index.db");
  std::unique_ptr<Store> store_;
  std::vector<int64_t> entity_ids_;
  std::vector<std::string> chunk_ids_;
};

TEST_F(QueryImageTest, QuestionsReadTheSameFromTheImagesAsFromTheTables) {
  for (unsigned seed = 1; seed <= 25; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    path_ = dir_.File("index" + std::to_string(seed) + ".db");
    Open();
    std::mt19937 rng(seed);
    BuildRandomGraph(rng);
    ASSERT_TRUE(Images().empty());
    ASSERT_TRUE(store_->WarmGraphImage().ok());  // none to read: the walks read the tables
    std::vector<Question> questions;
    std::vector<std::string> from_tables;
    for (int i = 0; i < 20; ++i) {
      questions.push_back(RandomQuestion(rng));
      from_tables.push_back(Walk(questions.back()));
    }
    const std::string chunks = Vectors(EmbeddingOwner::kChunk);
    const std::string entities = Vectors(EmbeddingOwner::kEntity);
    std::vector<std::vector<std::string>> entity_chunks;
    std::vector<std::string> edges;
    for (int64_t e : entity_ids_) {
      entity_chunks.push_back(*store_->GetEntityChunks(e));
      edges.push_back(Edges(e));
    }

    auto built = store_->RefreshQueryImages();
    ASSERT_TRUE(built.ok()) << built.status().ToString();
    EXPECT_EQ(*built, kAll);
    EXPECT_EQ(Images(), kAll);
    // Read ahead (as a one-off question does while its vectors load) or on the first walk.
    if (seed % 2 == 1) {
      ASSERT_TRUE(store_->WarmGraphImage().ok());
    }
    for (size_t i = 0; i < questions.size(); ++i) {
      EXPECT_EQ(Walk(questions[i]), from_tables[i]) << "question " << i;
    }
    for (size_t i = 0; i < entity_ids_.size(); ++i) {
      EXPECT_EQ(*store_->GetEntityChunks(entity_ids_[i]), entity_chunks[i]);
      EXPECT_EQ(Edges(entity_ids_[i]), edges[i]) << "entity " << entity_ids_[i];
    }
    EXPECT_TRUE(store_->GetEntityChunks(999999)->empty());
    EXPECT_EQ(Edges(999999), "");
    EXPECT_EQ(Vectors(EmbeddingOwner::kChunk), chunks);
    EXPECT_EQ(Vectors(EmbeddingOwner::kEntity), entities);
    EXPECT_TRUE(ImageProblems().empty());
    // Nothing missing: a second refresh builds nothing.
    EXPECT_TRUE(store_->RefreshQueryImages()->empty());
  }
}

TEST_F(QueryImageTest, EveryWriteToAnImagesTablesDropsItAndOnlyIt) {
  std::mt19937 rng(7);
  BuildRandomGraph(rng);
  const int64_t a = entity_ids_[0], b = entity_ids_[1];
  // Each write, and the images it drops.
  struct Write {
    std::string what;
    std::function<void()> run;
    std::vector<std::string> drops;
  };
  const std::vector<std::string> graph = {"graph"};
  const std::vector<Write> writes = {
      {"new entity", [&] { AddEntity("newcomer"); }, graph},
      {"new relationship", [&] { AddRelationship(a, AddEntity("other"), 2); }, graph},
      {"relationship deleted",
       [&] {
         const int64_t r = AddRelationship(a, b, 3);
         ASSERT_TRUE(store_->RefreshQueryImages().ok());
         ASSERT_TRUE(store_->DeleteRelationship(r).ok());
       },
       graph},
      {"entity upserted in a savepoint that rolls back, then again in its transaction",
       [&] {
         auto outer = store_->Begin();
         ASSERT_TRUE(outer.ok());
         {
           auto inner = store_->Begin();
           ASSERT_TRUE(inner.ok());
           AddEntity("undone");
           ASSERT_TRUE(inner->Rollback().ok());  // the image's drop goes with it
         }
         AddEntity("kept");
         ASSERT_TRUE(outer->Commit().ok());
       },
       graph},
      {"relationship weight",
       [&] {
         AddRelationship(a, b, 1);
         ASSERT_TRUE(store_->RefreshQueryImages().ok());
         AddRelationship(a, b, 5);
       },
       graph},
      {"entity links", [&] { ASSERT_TRUE(store_->SetEntityChunks(a, {chunk_ids_[0]}).ok()); },
       graph},
      {"graph statistics",
       [&] {
         ASSERT_TRUE(store_->SetEntityChunks(b, chunk_ids_).ok());
         ASSERT_TRUE(store_->RefreshQueryImages().ok());
         ASSERT_TRUE(store_->RecomputeGraphStats().ok());
       },
       graph},
      {"document title",
       [&] {
         auto doc = store_->GetDocument("doc0");
         ASSERT_TRUE(doc.ok() && doc->has_value());
         Document d = **doc;
         d.title = "Another title";
         ASSERT_TRUE(store_->UpsertDocument(d).ok());
       },
       graph},
      {"new chunks", [&] { AddDoc("late", "Late", 2); }, {"graph", "words"}},
      {"chunk vectors",
       [&] {
         ASSERT_TRUE(store_->PutEmbeddings({Vector(EmbeddingOwner::kChunk, "late#0", rng)}).ok());
       },
       {}},
      {"entity deleted (its vector goes too)",
       [&] { ASSERT_TRUE(store_->DeleteEntity(entity_ids_.back()).ok()); },
       {"graph"}},
      {"document deleted",
       [&] { ASSERT_TRUE(store_->DeleteDocument("doc1").ok()); },
       {"graph", "words"}},
  };
  for (const Write& w : writes) {
    SCOPED_TRACE(w.what);
    ASSERT_TRUE(store_->RefreshQueryImages().ok());
    ASSERT_EQ(Images(), kAll);
    w.run();
    const std::vector<std::string> left = Images();
    for (const std::string& image : kAll) {
      EXPECT_EQ(Has(left, image), !Has(w.drops, image)) << image;
    }
    // What is left is current.
    EXPECT_EQ(ImageProblems(), std::vector<std::string>{});
  }
  // Writes elsewhere keep them: the reply cache, run records, reports.
  ASSERT_TRUE(store_->RefreshQueryImages().ok());
  ASSERT_TRUE(store_->ReplyCache().Put("k", "v", "m", "chat").ok());
  ASSERT_TRUE(store_->BeginRun("index").ok());
  EXPECT_EQ(Images(), kAll);
}

TEST_F(QueryImageTest, ADamagedImageIsReadAroundAndReported) {
  std::mt19937 rng(3);
  BuildRandomGraph(rng);
  Question q;
  q.entities = {entity_ids_[0]};
  const std::string tables = Walk(q);
  const std::string vectors = Vectors(EmbeddingOwner::kChunk);
  ASSERT_TRUE(store_->RefreshQueryImages().ok());
  store_.reset();
  // Cut short, and a stale copy of a bigger graph's worth of bytes.
  RawSql("UPDATE query_images SET data = substr(data, 1, length(data) - 3) WHERE name = 'graph';");
  Open();
  EXPECT_TRUE(store_->WarmGraphImage().ok());  // read around: the walk reads the tables
  EXPECT_EQ(Walk(q), tables);
  EXPECT_EQ(Vectors(EmbeddingOwner::kChunk), vectors);
  const std::vector<std::string> problems = ImageProblems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("query image graph differs"), std::string::npos) << problems[0];

  // An image that decodes but no longer matches its tables (a write around the store) is what
  // Check is for.
  store_.reset();
  RawSql("DELETE FROM query_images;");
  Open();
  ASSERT_TRUE(store_->RefreshQueryImages().ok());
  store_.reset();
  RawSql("INSERT INTO entities (name_key, name, type) VALUES ('sneaked in', 'Sneaked in', 'X');");
  Open();
  EXPECT_EQ(ImageProblems().size(), 1u);
}

TEST_F(QueryImageTest, AnOlderBuildsGraphImageIsReadAroundAndReplacedByTheNextRefresh) {
  std::mt19937 rng(7);
  BuildRandomGraph(rng);
  Question q;
  q.entities = {entity_ids_[0]};
  const std::string tables = Walk(q);
  const std::string edges = Edges(entity_ids_[0]);
  ASSERT_TRUE(store_->RefreshQueryImages().ok());
  const std::string current = RawImage("graph");
  // Kept compressed: a third of the image's bytes or less.
  EXPECT_LT(RawImage("graph", /*inflate=*/false).size() * 2, current.size());
  store_.reset();
  // What a build of the second layout left: its magic (the rest does not matter, it is not read).
  RawSql(
      "UPDATE query_images SET data = CAST('GGI2' AS BLOB) || substr(data, 5) "
      "WHERE name = 'graph';");
  ASSERT_TRUE(store::IsOlderGraphImage(RawImage("graph")));
  Open();
  EXPECT_EQ(Walk(q), tables);
  EXPECT_EQ(Edges(entity_ids_[0]), edges);
  EXPECT_TRUE(ImageProblems().empty());  // not damage
  auto built = store_->RefreshQueryImages();
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_EQ(*built, std::vector<std::string>{"graph"});
  store_.reset();
  EXPECT_EQ(RawImage("graph"), current);
  Open();
  EXPECT_EQ(Walk(q), tables);
  EXPECT_TRUE(ImageProblems().empty());
}

TEST_F(QueryImageTest, WordCountsFromTheWordsImageAreTheFullTextIndexs) {
  // 160 chunks: "common" in all, "often" in 70 (over the image's 64, under half the chunks, so
  // searches keep it), "rare" in 3, and stems.
  Document d;
  d.id = "d";
  d.title = "D";
  d.content_hash = "h";
  std::vector<ChunkRecord> chunks;
  for (int i = 0; i < 160; ++i) {
    ChunkRecord c;
    c.id = "d#" + std::to_string(i);
    c.document_id = "d";
    c.index = i;
    c.text = "common words";
    if (i < 70) c.text += " often running";
    if (i < 3) c.text += " rare";
    c.n_tokens = 4;
    d.text += c.text + "\n";
    chunks.push_back(c);
  }
  ASSERT_TRUE(store_->UpsertDocument(d).ok());
  ASSERT_TRUE(store_->ReplaceDocumentChunks("d", chunks).ok());
  const std::vector<std::string> words = {"common", "Often", "rare", "runs", "absent", "wordS"};
  const std::vector<int64_t> counts = {160, 70, 3, 70, 0, 160};
  EXPECT_EQ(*store_->CountChunksWithWords(words), counts);
  auto search = [&] {
    std::vector<std::string> ids;
    auto hits = store_->SearchChunks("rare often running", 10);
    EXPECT_TRUE(hits.ok()) << hits.status().ToString();
    if (!hits.ok()) return ids;
    for (const ChunkHit& h : *hits) ids.push_back(h.chunk_id);
    return ids;
  };
  const std::vector<std::string> before = search();
  ASSERT_EQ(before.size(), 10u);

  ASSERT_TRUE(store_->RefreshQueryImages().ok());
  ASSERT_TRUE(Has(Images(), "words"));
  EXPECT_EQ(*store_->CountChunksWithWords(words), counts);
  EXPECT_EQ(search(), before);
  // The image lists the common terms (as the index stems them) and leaves out the rare ones.
  auto image = store::TermCounts::Decode(RawImage("words"));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ((*image)->Find("common"), 160);
  EXPECT_EQ((*image)->Find("often"), 70);
  EXPECT_EQ((*image)->Find("run"), 70);
  EXPECT_EQ((*image)->Find("rare"), std::nullopt);
}

TEST(QueryImageCodecTest, EveryTruncationOfAnImageFailsToDecode) {
  store::GraphImageBuilder b;
  b.AddEntity(1, "a", 2, 1);
  b.AddEntity(5, "b", 1, 1);
  b.AddChunk("d#0", "D", "d", 0);
  b.AddChunk("d#1", "D", "d", 1);
  b.AddRelationship(9, 1, 5, 2.5, 3);
  b.AddLink(1, "d#0");
  b.AddLink(1, "d#1");
  b.AddLink(5, "d#1");
  auto bytes = b.Finish();
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(store::GraphImage::Decode(*bytes).ok());
  for (size_t n = 0; n < bytes->size(); ++n) {
    EXPECT_FALSE(store::GraphImage::Decode(bytes->substr(0, n)).ok()) << n;
  }
  EXPECT_FALSE(store::GraphImage::Decode(*bytes + "x").ok());
  auto image = store::GraphImage::Decode(*bytes);
  ASSERT_TRUE(image.ok());
  const auto edges = (*image)->RelationshipEdgesOf(5);
  ASSERT_EQ(edges.size(), 1u);
  EXPECT_EQ(edges[0].id, 9);
  EXPECT_EQ(edges[0].source_id, 1);
  EXPECT_EQ(edges[0].target_id, 5);
  EXPECT_EQ(edges[0].weight, 2.5);
  EXPECT_EQ(edges[0].frequency, 3);
  EXPECT_EQ(edges[0].combined_degree, 2);
  // The older layouts' magics: not damage, older images.
  for (const char* magic : {"GGI1", "GGI2"}) {
    const std::string older = magic + bytes->substr(4);
    EXPECT_TRUE(store::IsOlderGraphImage(older)) << magic;
    EXPECT_EQ(store::GraphImage::Decode(older).status().code(), ErrorCode::kNotFound) << magic;
  }
  EXPECT_FALSE(store::IsOlderGraphImage(*bytes));
  // A link to a chunk nobody added is the tables' damage, not an image.
  b.AddLink(5, "d#9");
  EXPECT_EQ(b.Finish().status().code(), ErrorCode::kCorruption);

  const std::string w = store::EncodeTermCounts({{"b", 5}, {"a", 9}, {"c", 1}}, 2);
  auto t = store::TermCounts::Decode(w);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->Find("a"), 9);
  EXPECT_EQ((*t)->Find("b"), 5);
  EXPECT_EQ((*t)->Find("c"), std::nullopt);
  for (size_t n = 0; n < w.size(); ++n)
    EXPECT_FALSE(store::TermCounts::Decode(w.substr(0, n)).ok());
}

}  // namespace
}  // namespace grag
