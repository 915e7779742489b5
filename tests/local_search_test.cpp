// Local search on small fixed graphs in a temporary index, with a scripted chat model:
// seed 000's FTC test, the stop rule, matching (floor, k, names, fallback without embeddings),
// the budget (proportions, whole items, spare shares) and citations.
#include "grag/local_search.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "grag/extract.h"
#include "grag/store.h"
#include "grag/tokenizer.h"
#include "grag/vector_index.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kEmbedModel[] = "scripted-embedding";

const Tokenizer& Tok() {
  static const Tokenizer* tok = Tokenizer::Get("o200k_base").value();
  return *tok;
}

// A temporary index with helpers that write one record each and fail the test on error.
class TestIndex {
 public:
  TestIndex() {
    auto store = Store::Open(dir_ / "index.db");
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }
  Store& store() { return *store_; }

  int64_t Entity(const std::string& name, const std::string& type, const std::string& desc) {
    EntityRecord e;
    e.name = name;
    e.name_key = NormalizeEntityName(name);
    e.type = type;
    e.description = desc;
    auto id = store_->UpsertEntity(e);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    ids_[name] = *id;
    return *id;
  }
  int64_t id(const std::string& name) const { return ids_.at(name); }

  int64_t Rel(const std::string& a, const std::string& b, double weight, const std::string& desc) {
    RelationshipRecord r;
    r.source_id = id(a);
    r.target_id = id(b);
    r.weight = weight;
    r.description = desc;
    auto rid = store_->UpsertRelationship(r);
    EXPECT_TRUE(rid.ok()) << rid.status().ToString();
    return *rid;
  }

  // Adds a document with the given chunk texts; returns the chunk ids ("<doc>#<i>").
  std::vector<std::string> Doc(const std::string& doc_id, const std::vector<std::string>& texts) {
    Document d;
    d.id = doc_id;
    d.title = doc_id;
    d.source_path = doc_id;
    for (const auto& t : texts) d.text += t + "\n";
    d.content_hash = "hash-" + doc_id;
    EXPECT_TRUE(store_->UpsertDocument(d).ok());
    std::vector<ChunkRecord> chunks;
    std::vector<std::string> ids;
    for (size_t i = 0; i < texts.size(); ++i) {
      ChunkRecord c;
      c.id = doc_id + "#" + std::to_string(i);
      c.document_id = doc_id;
      c.index = static_cast<int64_t>(i);
      c.text = texts[i];
      chunks.push_back(c);
      ids.push_back(c.id);
    }
    auto changes = store_->ReplaceDocumentChunks(doc_id, chunks);
    EXPECT_TRUE(changes.ok()) << changes.status().ToString();
    return ids;
  }

  void Links(const std::string& entity, const std::vector<std::string>& chunk_ids) {
    EXPECT_TRUE(store_->SetEntityChunks(id(entity), chunk_ids).ok());
  }

  void Communities(const std::vector<CommunityRecord>& communities) {
    EXPECT_TRUE(store_->RecomputeGraphStats().ok());
    auto c = store_->ReplaceCommunities(ClusteringRecord{}, communities);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
  }

  void Report(int64_t community, const std::string& title, const std::string& content) {
    ReportRecord r;
    r.community_id = community;
    r.title = title;
    r.summary = content;
    r.full_content = "# " + title + "\n\n" + content;
    const Status s = store_->PutReport(r);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

  void Embed(const std::string& entity, std::vector<float> v) {
    EmbeddingRecord r;
    r.owner = EmbeddingOwner::kEntity;
    r.owner_id = std::to_string(id(entity));
    r.model = kEmbedModel;
    r.vector = std::move(v);
    const Status s = store_->PutEmbeddings({r});
    EXPECT_TRUE(s.ok()) << s.ToString();
  }

 private:
  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  std::map<std::string, int64_t> ids_;
};

CommunityRecord Community(int64_t id, std::vector<int64_t> members) {
  CommunityRecord c;
  c.id = id;
  c.level = 0;
  c.entity_ids = std::move(members);
  return c;
}

// Embeds questions to chosen vectors (4 dimensions: regulation, baking, other, nothing);
// anything not listed points at "nothing", similar to no entity.
std::unique_ptr<ScriptedEmbeddingModel> Embedder(std::map<std::string, std::vector<float>> table) {
  return std::make_unique<ScriptedEmbeddingModel>(
      [table](const std::string& input) -> Result<std::vector<float>> {
        if (auto it = table.find(input); it != table.end()) return it->second;
        return std::vector<float>{0, 0, 0, 1};
      },
      kEmbedModel);
}

// The seed's graph: a regulation community (FTC, Digital Markets Act, European Commission)
// and an unconnected baking community (Sourdough, Wild Yeast), with chunks and reports.
class SeedGraph : public ::testing::Test {
 protected:
  void SetUp() override {
    ix_.Entity("FTC", "organization", "The US Federal Trade Commission, a competition regulator.");
    ix_.Entity("Digital Markets Act", "law", "EU regulation of large online gatekeepers.");
    ix_.Entity("European Commission", "organization", "The EU executive that enforces the DMA.");
    ix_.Entity("Sourdough", "food", "Bread leavened by a fermented starter.");
    ix_.Entity("Wild Yeast", "organism", "Yeast living in the flour, used in starters.");
    ftc_dma_ = ix_.Rel("FTC", "Digital Markets Act", 8, "The FTC studied the DMA as a model.");
    dma_ec_ =
        ix_.Rel("Digital Markets Act", "European Commission", 6, "The Commission enforces it.");
    bread_yeast_ = ix_.Rel("Sourdough", "Wild Yeast", 9, "Sourdough rises with wild yeast.");
    auto news = ix_.Doc("news/ftc.txt",
                        {"The FTC sued a platform over its advertising and cited the Digital "
                         "Markets Act as an example of gatekeeper rules.",
                         "The European Commission opened its first Digital Markets Act case."});
    auto baking = ix_.Doc("baking/bread.txt", {"Sourdough bread rises slowly with wild yeast."});
    ftc_chunk_ = news[0];
    ix_.Links("FTC", {news[0]});
    ix_.Links("Digital Markets Act", {news[0], news[1]});
    ix_.Links("European Commission", {news[1]});
    ix_.Links("Sourdough", baking);
    ix_.Links("Wild Yeast", baking);
    ix_.Communities({Community(1, {ix_.id("FTC"), ix_.id("Digital Markets Act"),
                                   ix_.id("European Commission")}),
                     Community(2, {ix_.id("Sourdough"), ix_.id("Wild Yeast")})});
    ix_.Report(1, "Digital market regulators", "Regulators on both sides of the Atlantic.");
    ix_.Report(2, "Baking with wild yeast", "Sourdough and the yeasts that raise it.");
    ix_.Embed("FTC", {1, 0, 0.1f, 0});
    ix_.Embed("Digital Markets Act", {0.9f, 0, 0.3f, 0});
    ix_.Embed("European Commission", {0.6f, 0, 0.8f, 0});
    ix_.Embed("Sourdough", {0, 1, 0, 0});
    ix_.Embed("Wild Yeast", {0, 0.9f, 0.4f, 0});
  }

  std::vector<std::string> Ids(const LocalContext& ctx, LocalItemType type) {
    std::vector<std::string> out;
    for (const auto& item : ctx.items) {
      if (item.type == type) out.push_back(item.id);
    }
    return out;
  }
  std::string E(const std::string& name) { return "E" + std::to_string(ix_.id(name)); }

  TestIndex ix_;
  int64_t ftc_dma_ = 0, dma_ec_ = 0, bread_yeast_ = 0;
  std::string ftc_chunk_;
};

// Seed 000's test.
TEST_F(SeedGraph, QuestionNamingFtcPlacesFtcItsNeighbourAndItsChunkButNothingUnconnected) {
  auto embedder = Embedder({});
  ScriptedChatModel chat([](const ChatRequest&) -> Result<std::string> {
    return std::string("The FTC looked at the DMA [E1][R1], see [S1].");
  });
  auto result = LocalSearch(ix_.store(), chat, embedder.get(), Tok(),
                            "What has the FTC said about gatekeepers?");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const LocalContext& ctx = result->context;
  EXPECT_FALSE(result->nothing_found);

  ASSERT_EQ(ctx.matches.size(), 1u);
  EXPECT_EQ(ctx.matches[0].name, "FTC");
  EXPECT_TRUE(ctx.matches[0].by_name);
  EXPECT_TRUE(ctx.used_embeddings);

  // The FTC entity, the relationship to its neighbour, its community's report and its chunk.
  EXPECT_THAT(Ids(ctx, LocalItemType::kEntity), ElementsAre(E("FTC")));
  EXPECT_THAT(Ids(ctx, LocalItemType::kRelationship), ElementsAre("R" + std::to_string(ftc_dma_)));
  EXPECT_THAT(Ids(ctx, LocalItemType::kReport), ElementsAre("C1"));
  // Its chunk first; the walk may add the neighbour's other chunk (a second hop), never the
  // baking chunk.
  const auto chunk_items = Ids(ctx, LocalItemType::kChunk);
  ASSERT_FALSE(chunk_items.empty());
  EXPECT_EQ(chunk_items[0], "S1");
  for (const auto& item : ctx.items) {
    if (item.type == LocalItemType::kChunk) {
      EXPECT_EQ(item.document_id, "news/ftc.txt") << item.id;
    }
  }
  const LocalContextItem* rel = ctx.Find("R" + std::to_string(ftc_dma_));
  ASSERT_NE(rel, nullptr);
  EXPECT_THAT(std::set<std::string>({rel->source_name, rel->target_name}),
              ElementsAre("Digital Markets Act", "FTC"));
  const LocalContextItem* chunk = ctx.Find("S1");
  ASSERT_NE(chunk, nullptr);
  EXPECT_EQ(chunk->chunk_id, ftc_chunk_);
  EXPECT_EQ(chunk->document_id, "news/ftc.txt");
  EXPECT_EQ(chunk->chunk_index, 0);

  // All of it reached the model, and nothing of the baking community did.
  ASSERT_EQ(chat.RequestCount(), 1u);
  const std::string prompt = chat.Requests()[0].messages.back().content;
  EXPECT_EQ(prompt, result->prompt);
  EXPECT_THAT(prompt, HasSubstr("What has the FTC said about gatekeepers?"));
  EXPECT_THAT(prompt, HasSubstr("[" + E("FTC") + "] FTC (organization)"));
  EXPECT_THAT(prompt, HasSubstr("Digital Markets Act"));
  EXPECT_THAT(prompt, HasSubstr("The FTC sued a platform"));
  EXPECT_THAT(prompt, HasSubstr("Digital market regulators"));
  for (const char* unrelated : {"Sourdough", "sourdough", "yeast", "Yeast", "Baking"}) {
    EXPECT_THAT(prompt, Not(HasSubstr(unrelated)));
  }
  for (const auto& item : ctx.items) {
    EXPECT_NE(item.community_id, 2);
    EXPECT_NE(item.document_id, "baking/bread.txt");
  }
  // The DMA-Commission edge does not touch FTC.
  EXPECT_EQ(ctx.Find("R" + std::to_string(dma_ec_)), nullptr);
  EXPECT_EQ(result->answer, "The FTC looked at the DMA [E1][R1], see [S1].");
}

TEST_F(SeedGraph, NothingClearsTheFloorSoNoModelCall) {
  // Nearest entity (FTC) at similarity ~0.45: below the floor, and no name in the question.
  auto embedder = Embedder({{"What about quantum chromodynamics?", {0.45f, 0, 0, 0.89f}}});
  ScriptedChatModel chat;  // an empty queue: a call would fail
  std::vector<std::string> deltas;
  LocalSearchOptions options;
  options.on_answer_delta = [&](std::string_view d) { deltas.emplace_back(d); };
  auto result = LocalSearch(ix_.store(), chat, embedder.get(), Tok(),
                            "What about quantum chromodynamics?", options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(result->nothing_found);
  EXPECT_THAT(result->answer, HasSubstr("The index has nothing on this question"));
  EXPECT_EQ(chat.RequestCount(), 0u);
  EXPECT_THAT(deltas, ElementsAre(result->answer));
  EXPECT_TRUE(result->context.matches.empty());
  EXPECT_TRUE(result->context.items.empty());
  EXPECT_TRUE(result->prompt.empty());
  EXPECT_THAT(result->context.diagnostics,
              ElementsAre(HasSubstr("the nearest, 'FTC', is at 0.449")));

  // The same question with the floor lowered matches FTC (0.449) but not DMA (0.428).
  options.similarity_floor = 0.44;
  ScriptedChatModel chat2(
      [](const ChatRequest&) -> Result<std::string> { return std::string("ok"); });
  auto lowered = LocalSearch(ix_.store(), chat2, embedder.get(), Tok(),
                             "What about quantum chromodynamics?", options);
  ASSERT_TRUE(lowered.ok());
  ASSERT_FALSE(lowered->nothing_found);
  ASSERT_EQ(lowered->context.matches.size(), 1u);
  EXPECT_EQ(lowered->context.matches[0].name, "FTC");
  EXPECT_TRUE(lowered->context.matches[0].by_embedding);
  EXPECT_NEAR(*lowered->context.matches[0].similarity,
              0.45 / std::sqrt(1.01 * (0.45 * 0.45 + 0.89 * 0.89)), 1e-4);
  EXPECT_EQ(chat2.RequestCount(), 1u);
}

TEST_F(SeedGraph, AtMostKEntitiesByEmbeddingMostSimilarFirst) {
  const std::string q = "Which rules govern online gatekeepers?";
  auto embedder = Embedder({{q, {0.9f, 0, 0.3f, 0}}});  // DMA 1.0, FTC ~0.97, Commission ~0.76
  LocalSearchOptions options;
  auto all = BuildLocalContext(ix_.store(), embedder.get(), Tok(), q, options);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->matches.size(), 3u);
  EXPECT_EQ(all->matches[0].name, "Digital Markets Act");
  EXPECT_EQ(all->matches[1].name, "FTC");
  EXPECT_EQ(all->matches[2].name, "European Commission");
  for (const auto& m : all->matches) {
    EXPECT_TRUE(m.by_embedding);
    EXPECT_FALSE(m.by_name);
    EXPECT_GE(*m.similarity, 0.5);
  }

  options.top_k_entities = 2;
  auto two = BuildLocalContext(ix_.store(), embedder.get(), Tok(), q, options);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->matches.size(), 2u);
  EXPECT_EQ(two->matches[0].name, "Digital Markets Act");
  EXPECT_EQ(two->matches[1].name, "FTC");
  EXPECT_THAT(Ids(*two, LocalItemType::kEntity), ElementsAre(E("Digital Markets Act"), E("FTC")));
  // Both matched: their edge ranks first, then edges with one matched end.
  const auto rels = Ids(*two, LocalItemType::kRelationship);
  ASSERT_EQ(rels.size(), 2u);
  EXPECT_EQ(rels[0], "R" + std::to_string(ftc_dma_));
  EXPECT_EQ(rels[1], "R" + std::to_string(dma_ec_));
  // The chunk both were extracted from ranks first.
  const LocalContextItem* s1 = two->Find("S1");
  ASSERT_NE(s1, nullptr);
  EXPECT_EQ(s1->chunk_id, ftc_chunk_);
  EXPECT_EQ(s1->via.size(), 2u);
}

TEST_F(SeedGraph, NamedEntitiesComeFirstAndCountTowardsK) {
  const std::string q = "Did the FTC ever look at bread?";
  auto embedder = Embedder({{q, {0, 1, 0.2f, 0}}});  // Sourdough ~0.98, Wild Yeast ~0.97
  LocalSearchOptions options;
  options.top_k_entities = 2;
  auto ctx = BuildLocalContext(ix_.store(), embedder.get(), Tok(), q, options);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  ASSERT_EQ(ctx->matches.size(), 2u);
  EXPECT_EQ(ctx->matches[0].name, "FTC");
  EXPECT_TRUE(ctx->matches[0].by_name);
  EXPECT_FALSE(ctx->matches[0].by_embedding);
  EXPECT_EQ(ctx->matches[1].name, "Sourdough");

  options.top_k_entities = 1;
  auto one = BuildLocalContext(ix_.store(), embedder.get(), Tok(), q, options);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->matches.size(), 1u);
  EXPECT_EQ(one->matches[0].name, "FTC");
}

TEST_F(SeedGraph, NamesMatchOnWordBoundariesLongestFirstAndShortNamesByCase) {
  ix_.Entity("US", "geo", "The United States.");
  ix_.Entity("Markets", "concept", "Markets in general.");
  ix_.Entity("Act", "concept", "A law.");
  auto embedder = Embedder({});
  auto names = [&](const std::string& q) {
    std::vector<std::string> out;
    auto ctx = BuildLocalContext(ix_.store(), embedder.get(), Tok(), q);
    EXPECT_TRUE(ctx.ok()) << ctx.status().ToString();
    if (ctx.ok()) {
      for (const auto& m : ctx->matches) out.push_back(m.name);
    }
    return out;
  };
  EXPECT_THAT(names("What does the digital-markets act's text say?"),
              ElementsAre("Digital Markets Act"));
  EXPECT_THAT(names("Tell us about sourdough in the US"), ElementsAre("Sourdough", "US"));
  EXPECT_THAT(names("Tell us about it"), ElementsAre());
  EXPECT_THAT(names("Is FTCX an FTC?"), ElementsAre("FTC"));
  EXPECT_THAT(names("Where are Markets headed?"), ElementsAre("Markets"));
}

TEST_F(SeedGraph, WithoutEntityEmbeddingsMatchesByNameAndSaysSo) {
  ASSERT_TRUE(ix_.store().DeleteEmbeddings(EmbeddingOwner::kEntity).ok());
  auto embedder = Embedder({});
  ScriptedChatModel chat(
      [](const ChatRequest&) -> Result<std::string> { return std::string("ok"); });
  auto result = LocalSearch(ix_.store(), chat, embedder.get(), Tok(), "What did the FTC do?");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_FALSE(result->context.used_embeddings);
  ASSERT_EQ(result->context.matches.size(), 1u);
  EXPECT_EQ(result->context.matches[0].name, "FTC");
  EXPECT_FALSE(result->context.matches[0].similarity.has_value());
  ASSERT_EQ(result->context.diagnostics.size(), 1u);
  EXPECT_THAT(result->context.diagnostics[0], HasSubstr("no entity embeddings"));
  EXPECT_THAT(result->context.diagnostics[0], HasSubstr("by name only"));
  EXPECT_TRUE(embedder->Inputs().empty())
      << "no point embedding a question with nothing to compare";
  EXPECT_EQ(chat.RequestCount(), 1u);

  // Nothing named either: nothing found, still no failure.
  auto none = LocalSearch(ix_.store(), chat, embedder.get(), Tok(), "What is the weather?");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->nothing_found);
  EXPECT_EQ(chat.RequestCount(), 1u);
}

TEST_F(SeedGraph, NoEmbeddingModelOrADifferentOneFallsBackToNames) {
  auto ctx = BuildLocalContext(ix_.store(), nullptr, Tok(), "What did the FTC do?");
  ASSERT_TRUE(ctx.ok());
  EXPECT_FALSE(ctx->used_embeddings);
  ASSERT_EQ(ctx->matches.size(), 1u);
  EXPECT_THAT(ctx->diagnostics, ElementsAre(HasSubstr("no embedding model is configured")));

  ScriptedEmbeddingModel other(4, "another-model");
  auto mismatch = BuildLocalContext(ix_.store(), &other, Tok(), "What did the FTC do?");
  ASSERT_TRUE(mismatch.ok());
  EXPECT_FALSE(mismatch->used_embeddings);
  EXPECT_THAT(mismatch->diagnostics, ElementsAre(HasSubstr("'another-model'")));
  EXPECT_TRUE(other.Inputs().empty());
}

TEST_F(SeedGraph, AKeptVectorIndexGivesTheSameContext) {
  const std::string q = "Which rules govern online gatekeepers?";
  auto embedder = Embedder({{q, {0.9f, 0, 0.3f, 0}}});
  auto index = VectorIndex::Build(ix_.store(), EmbeddingOwner::kEntity);
  ASSERT_TRUE(index.ok());
  auto with = BuildLocalContext(ix_.store(), embedder.get(), Tok(), q, {}, index->get());
  auto without = BuildLocalContext(ix_.store(), embedder.get(), Tok(), q);
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_EQ(with->entities_text + with->relationships_text + with->reports_text + with->chunks_text,
            without->entities_text + without->relationships_text + without->reports_text +
                without->chunks_text);
}

TEST_F(SeedGraph, CitationsMapIdsBackToWhatTheyAre) {
  auto embedder = Embedder({});
  const std::string e = E("FTC");
  const std::string r = "R" + std::to_string(ftc_dma_);
  ScriptedChatModel chat([&](const ChatRequest&) -> Result<std::string> {
    return "The FTC [" + e + "] studied the DMA (" + r + ", S1). Its region C1. " + e +
           " again; E999, S7, XS1 and S1x are not context ids.";
  });
  std::string streamed;
  LocalSearchOptions options;
  options.on_answer_delta = [&](std::string_view d) { streamed += d; };
  auto result =
      LocalSearch(ix_.store(), chat, embedder.get(), Tok(), "What did the FTC do?", options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(streamed, result->answer);
  std::vector<std::string> cited;
  std::vector<std::string> what;
  for (const auto& c : result->citations) {
    cited.push_back(c.id);
    what.push_back(DescribeLocalItem(result->context.items[c.item]));
  }
  EXPECT_THAT(cited, ElementsAre(e, r, "S1", "C1"));
  EXPECT_THAT(what, ElementsAre("entity FTC", "relationship FTC -- Digital Markets Act",
                                "chunk 0 of document news/ftc.txt",
                                "report of community 1 (level 0): Digital market regulators"));
}

TEST_F(SeedGraph, RejectsBadOptionsPromptsAndEmptyQuestions) {
  auto embedder = Embedder({});
  LocalSearchOptions bad;
  bad.top_k_entities = 0;
  EXPECT_EQ(BuildLocalContext(ix_.store(), embedder.get(), Tok(), "FTC?", bad).status().code(),
            ErrorCode::kInvalidArgument);
  bad = {};
  bad.chunk_share = bad.relationship_share = bad.report_share = 0;
  EXPECT_EQ(BuildLocalContext(ix_.store(), embedder.get(), Tok(), "FTC?", bad).status().code(),
            ErrorCode::kInvalidArgument);
  bad = {};
  bad.report_share = -1;
  EXPECT_EQ(BuildLocalContext(ix_.store(), embedder.get(), Tok(), "FTC?", bad).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(BuildLocalContext(ix_.store(), embedder.get(), Tok(), " ?! ").status().code(),
            ErrorCode::kInvalidArgument);
  ScriptedChatModel chat;
  LocalSearchOptions no_chunks;
  no_chunks.prompt = "{{question}} {{entities}} {{relationships}} {{reports}}";
  auto r = LocalSearch(ix_.store(), chat, embedder.get(), Tok(), "FTC?", no_chunks);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("{{chunks}}"));
}

TEST_F(SeedGraph, ModelErrorsComeBackAsStatus) {
  auto embedder = Embedder({});
  ScriptedChatModel chat(
      [](const ChatRequest&) -> Result<std::string> { return Status::Unavailable("server down"); });
  auto r = LocalSearch(ix_.store(), chat, embedder.get(), Tok(), "What did the FTC do?");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("local search answer"));
}

// ---------------------------------------------------------------- the budget

// A hub entity named in the question with many candidates of every type, so each type's share
// is binding: 60 relationships, 40 chunks, 12 reports (one per community level).
class BudgetGraph : public ::testing::Test {
 protected:
  static std::string Words(const std::string& stem, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? " " : "") + stem + std::to_string(i % 17);
    return s;
  }

  void Build(int relationships, int chunks, int reports) {
    ix_.Entity("Hub", "organization", "The hub of everything.");
    for (int i = 0; i < relationships; ++i) {
      const std::string n = "Spoke " + std::to_string(i);
      ix_.Entity(n, "thing", "A spoke.");
      ix_.Rel("Hub", n, 100 - i, Words("link", 20));  // weights fall with i: rank = i + 1
    }
    std::vector<std::string> texts;
    for (int i = 0; i < chunks; ++i) texts.push_back(Words("text", 60));
    if (chunks > 0) ix_.Links("Hub", ix_.Doc("docs/hub.txt", texts));
    std::vector<CommunityRecord> comms;
    for (int i = 0; i < reports; ++i) {
      CommunityRecord c = Community(100 + i, {ix_.id("Hub")});
      c.level = i;
      if (i > 0) c.parent_id = 100 + i - 1;
      comms.push_back(c);
    }
    ix_.Communities(comms);
    for (int i = 0; i < reports; ++i)
      ix_.Report(100 + i, "Report " + std::to_string(i), Words("finding", 40));
  }

  Result<LocalContext> Context(const LocalSearchOptions& options) {
    return BuildLocalContext(ix_.store(), nullptr, Tok(), "Tell me about Hub", options);
  }

  static const LocalTypeUsage& Usage(const LocalContext& ctx, LocalItemType type) {
    for (const auto& u : ctx.usage) {
      if (u.type == type) return u;
    }
    static const LocalTypeUsage none;
    return none;
  }
  static int64_t MaxItemTokens(const LocalContext& ctx, LocalItemType type) {
    int64_t m = 0;
    for (const auto& item : ctx.items) {
      if (item.type == type) m = std::max(m, item.tokens);
    }
    return m;
  }

  // Every type's items are whole, a prefix of its ranking, and add up to its usage and section.
  static void ExpectWholeItemsByRank(const LocalContext& ctx) {
    std::map<LocalItemType, int64_t> next_rank;
    std::map<LocalItemType, int64_t> tokens;
    std::map<LocalItemType, std::string> text;
    for (const auto& item : ctx.items) {
      EXPECT_EQ(item.rank, ++next_rank[item.type]) << item.id << " breaks rank order";
      EXPECT_EQ(item.tokens, static_cast<int64_t>(Tok().Count(item.text))) << item.id;
      tokens[item.type] += item.tokens;
      text[item.type] += item.text;
    }
    EXPECT_EQ(text[LocalItemType::kEntity], ctx.entities_text);
    EXPECT_EQ(text[LocalItemType::kRelationship], ctx.relationships_text);
    EXPECT_EQ(text[LocalItemType::kReport], ctx.reports_text);
    EXPECT_EQ(text[LocalItemType::kChunk], ctx.chunks_text);
    int64_t total = 0;
    for (const auto& u : ctx.usage) {
      EXPECT_EQ(u.used_tokens, tokens[u.type]) << LocalItemTypeName(u.type);
      EXPECT_EQ(u.placed, next_rank[u.type]) << LocalItemTypeName(u.type);
      total += u.used_tokens;
    }
    EXPECT_EQ(total, ctx.used_tokens);
    EXPECT_LE(ctx.used_tokens, ctx.budget_tokens);
  }

  TestIndex ix_;
};

TEST_F(BudgetGraph, DefaultProportionsAreHonoured) {
  Build(60, 40, 12);
  LocalSearchOptions options;
  options.context_budget_tokens = 3000;
  auto ctx = Context(options);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  ExpectWholeItemsByRank(*ctx);
  const int64_t entity = Usage(*ctx, LocalItemType::kEntity).used_tokens;
  EXPECT_GT(entity, 0);
  const int64_t rest = 3000 - entity;
  const auto& chunks = Usage(*ctx, LocalItemType::kChunk);
  const auto& rels = Usage(*ctx, LocalItemType::kRelationship);
  const auto& reports = Usage(*ctx, LocalItemType::kReport);
  EXPECT_EQ(chunks.share_tokens, rest / 2);
  EXPECT_EQ(rels.share_tokens, rest / 4);
  EXPECT_EQ(reports.share_tokens, rest / 4);
  // Every type has more candidates than fit, so each fills its share to within one item, and
  // gains at most what the first round left over (less than one item of each type).
  const int64_t leftover_bound = MaxItemTokens(*ctx, LocalItemType::kChunk) +
                                 MaxItemTokens(*ctx, LocalItemType::kRelationship) +
                                 MaxItemTokens(*ctx, LocalItemType::kReport);
  for (const auto* u : {&chunks, &rels, &reports}) {
    SCOPED_TRACE(std::string(LocalItemTypeName(u->type)));
    EXPECT_LT(u->placed, u->candidates);
    EXPECT_GT(u->used_tokens, u->share_tokens - MaxItemTokens(*ctx, u->type));
    EXPECT_LE(u->used_tokens, u->share_tokens + leftover_bound);
  }
  EXPECT_GT(chunks.used_tokens, rels.used_tokens);
  EXPECT_GT(chunks.used_tokens, reports.used_tokens);
}

TEST_F(BudgetGraph, OtherProportionsAreHonouredToo) {
  Build(60, 40, 12);
  LocalSearchOptions options;
  options.context_budget_tokens = 4000;
  options.chunk_share = 1;
  options.relationship_share = 3;
  options.report_share = 1;
  auto ctx = Context(options);
  ASSERT_TRUE(ctx.ok());
  ExpectWholeItemsByRank(*ctx);
  const int64_t rest = 4000 - Usage(*ctx, LocalItemType::kEntity).used_tokens;
  const auto& rels = Usage(*ctx, LocalItemType::kRelationship);
  EXPECT_EQ(rels.share_tokens, rest * 3 / 5);
  EXPECT_GT(rels.used_tokens,
            rels.share_tokens - MaxItemTokens(*ctx, LocalItemType::kRelationship));
  EXPECT_GT(rels.used_tokens, Usage(*ctx, LocalItemType::kChunk).used_tokens * 2);
}

TEST_F(BudgetGraph, TruncatesByWholeItemsInRankOrder) {
  Build(60, 40, 12);
  LocalSearchOptions options;
  options.context_budget_tokens = 1000;
  auto ctx = Context(options);
  ASSERT_TRUE(ctx.ok());
  ExpectWholeItemsByRank(*ctx);
  // Chunks are placed whole: the section holds each chunk's full stored text.
  for (const auto& item : ctx->items) {
    if (item.type != LocalItemType::kChunk) continue;
    auto chunk = ix_.store().GetChunk(item.chunk_id);
    ASSERT_TRUE(chunk.ok() && chunk->has_value());
    EXPECT_THAT(item.text, HasSubstr((*chunk)->text + "\n"));
    // Without its label line it is the stored text itself.
    EXPECT_EQ(LocalItemBody(item), (*chunk)->text);
  }
  for (const auto& item : ctx->items) {
    if (item.type != LocalItemType::kChunk) {
      EXPECT_EQ(LocalItemBody(item), item.text);
    }
  }
  // Relationships are placed by weight: the heaviest (Spoke 0 ... ) first, without gaps.
  std::vector<std::string> targets;
  for (const auto& item : ctx->items) {
    if (item.type == LocalItemType::kRelationship) targets.push_back(item.target_name);
  }
  ASSERT_GE(targets.size(), 2u);
  EXPECT_EQ(targets[0], "Spoke 0");
  EXPECT_EQ(targets[1], "Spoke 1");
  // A budget smaller than the hub's own line places nothing rather than part of it.
  options.context_budget_tokens = 3;
  auto tiny = Context(options);
  ASSERT_TRUE(tiny.ok());
  EXPECT_TRUE(tiny->items.empty());
  EXPECT_EQ(tiny->used_tokens, 0);
  ASSERT_EQ(tiny->matches.size(), 1u);
}

TEST_F(BudgetGraph, AShareOneTypeCannotUsePassesToTheOthers) {
  Build(60, 40, 0);  // no reports at all: their quarter goes to chunks and relationships
  LocalSearchOptions options;
  options.context_budget_tokens = 3000;
  auto ctx = Context(options);
  ASSERT_TRUE(ctx.ok());
  ExpectWholeItemsByRank(*ctx);
  const auto& chunks = Usage(*ctx, LocalItemType::kChunk);
  const auto& rels = Usage(*ctx, LocalItemType::kRelationship);
  EXPECT_EQ(Usage(*ctx, LocalItemType::kReport).used_tokens, 0);
  EXPECT_GT(chunks.used_tokens, chunks.share_tokens + MaxItemTokens(*ctx, LocalItemType::kChunk));
  EXPECT_GT(rels.used_tokens,
            rels.share_tokens + MaxItemTokens(*ctx, LocalItemType::kRelationship));
  // Nearly the whole budget is used: what is left is smaller than any remaining item.
  EXPECT_GT(ctx->used_tokens, 3000 - MaxItemTokens(*ctx, LocalItemType::kChunk));
  // Split in proportion to the hungry types' shares: chunks get about twice the relationships.
  EXPECT_NEAR(static_cast<double>(chunks.used_tokens) / rels.used_tokens, 2.0, 0.35);
}

// Chunks far larger than the other types' items (a book's 1,200-token chunks beside report and
// relationship lines): the budget the first round leaves over goes to the next chunk when it
// fits there, rather than in slices to small items until it no longer does.
TEST_F(BudgetGraph, ALargeItemThatFitsTheSpareGoesBeforeSmallOnes) {
  Build(60, 0, 4);
  std::vector<std::string> big;
  for (int i = 0; i < 6; ++i) big.push_back(Words("page", 300));
  ix_.Links("Hub", ix_.Doc("docs/book.txt", big));
  LocalSearchOptions options;
  options.context_budget_tokens = 3000;
  auto ctx = Context(options);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  ExpectWholeItemsByRank(*ctx);
  const auto& chunks = Usage(*ctx, LocalItemType::kChunk);
  const int64_t chunk_tokens = MaxItemTokens(*ctx, LocalItemType::kChunk);
  ASSERT_LT(chunks.placed, chunks.candidates);
  // The chunks' share holds two; the spare the reports leave holds a third, which goes before
  // more relationship lines take the spare in slices.
  EXPECT_EQ(chunks.placed, 3);
  EXPECT_GT(chunks.used_tokens, chunks.share_tokens);
  EXPECT_LT(options.context_budget_tokens - ctx->used_tokens, chunk_tokens);
}

TEST_F(BudgetGraph, AnItemTooBigForItsShareLeavesTheShareToOthers) {
  Build(60, 0, 12);
  // One chunk far larger than the chunks' share (and the whole budget): no chunk can be placed,
  // and no smaller, lower-ranked chunk jumps the queue.
  ix_.Links("Hub", ix_.Doc("docs/huge.txt", {Words("huge", 5000), "a small chunk"}));
  LocalSearchOptions options;
  options.context_budget_tokens = 2000;
  auto ctx = Context(options);
  ASSERT_TRUE(ctx.ok());
  ExpectWholeItemsByRank(*ctx);
  EXPECT_EQ(Usage(*ctx, LocalItemType::kChunk).candidates, 2);
  EXPECT_EQ(Usage(*ctx, LocalItemType::kChunk).placed, 0);
  EXPECT_EQ(ctx->chunks_text, "");
  const auto& rels = Usage(*ctx, LocalItemType::kRelationship);
  const auto& reports = Usage(*ctx, LocalItemType::kReport);
  EXPECT_GT(rels.used_tokens + reports.used_tokens,
            2000 - Usage(*ctx, LocalItemType::kEntity).used_tokens -
                std::max(MaxItemTokens(*ctx, LocalItemType::kRelationship),
                         MaxItemTokens(*ctx, LocalItemType::kReport)));
}

TEST_F(BudgetGraph, AZeroShareAsksForNoneOfTheType) {
  Build(60, 40, 12);
  LocalSearchOptions options;
  options.context_budget_tokens = 3000;
  options.report_share = 0;
  auto ctx = Context(options);
  ASSERT_TRUE(ctx.ok());
  EXPECT_EQ(Usage(*ctx, LocalItemType::kReport).placed, 0);
  EXPECT_EQ(Usage(*ctx, LocalItemType::kReport).candidates, 12);
  EXPECT_GT(Usage(*ctx, LocalItemType::kChunk).used_tokens, 1400);
}

}  // namespace
}  // namespace grag
