// Retrieval (grag/retrieval.h): the forward-push walk against igraph's exact personalised
// PageRank, reciprocal rank fusion, and the three signals on a small index built by the real
// pipeline in the no-LLM mode: the walk reaches a two-hop passage no question word names, a
// generic question word does not seed the walk in place of a name, and the evidence chain
// moves the article the first passage names up to follow it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <igraph/igraph.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "grag/indexer.h"
#include "grag/lexical_embedder.h"
#include "grag/local_search.h"
#include "grag/log.h"
#include "grag/retrieval.h"
#include "grag/tokenizer.h"
#include "query/ppr.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using ::testing::ElementsAre;
using testing::TempDir;

// ---------------------------------------------------------------- the walk

// A random strongly connected weighted digraph, as our transition graph and as igraph's.
struct RandomGraph {
  query::TransitionGraph transitions;
  std::vector<igraph_integer_t> from, to;
  std::vector<double> weights;
  int nodes = 0;
};

RandomGraph MakeRandomGraph(int nodes, int extra_edges, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, nodes - 1);
  std::uniform_real_distribution<double> weight(0.5, 4.0);
  std::vector<std::vector<std::pair<int, double>>> out(static_cast<size_t>(nodes));
  for (int u = 0; u < nodes; ++u)
    out[static_cast<size_t>(u)].push_back({(u + 1) % nodes, weight(rng)});
  for (int i = 0; i < extra_edges; ++i) {
    const int u = pick(rng);
    const int v = pick(rng);
    if (u != v) out[static_cast<size_t>(u)].push_back({v, weight(rng)});
  }
  RandomGraph g;
  g.nodes = nodes;
  g.transitions.offsets.push_back(0);
  for (int u = 0; u < nodes; ++u) {
    double total = 0;
    for (const auto& [v, w] : out[static_cast<size_t>(u)]) total += w;
    for (const auto& [v, w] : out[static_cast<size_t>(u)]) {
      g.transitions.targets.push_back(static_cast<uint32_t>(v));
      g.transitions.probabilities.push_back(static_cast<float>(w / total));
      g.from.push_back(u);
      g.to.push_back(v);
      g.weights.push_back(w);
    }
    g.transitions.offsets.push_back(static_cast<uint32_t>(g.transitions.targets.size()));
  }
  return g;
}

std::vector<double> IgraphPersonalizedPageRank(const RandomGraph& g,
                                               const std::vector<double>& reset, double damping) {
  igraph_vector_int_t edges;
  igraph_vector_int_init(&edges, static_cast<igraph_integer_t>(2 * g.from.size()));
  for (size_t i = 0; i < g.from.size(); ++i) {
    VECTOR(edges)[2 * i] = g.from[i];
    VECTOR(edges)[2 * i + 1] = g.to[i];
  }
  igraph_t graph;
  igraph_create(&graph, &edges, g.nodes, IGRAPH_DIRECTED);
  igraph_vector_t weights, reset_v, result;
  igraph_vector_init(&weights, static_cast<igraph_integer_t>(g.weights.size()));
  for (size_t i = 0; i < g.weights.size(); ++i) VECTOR(weights)[i] = g.weights[i];
  igraph_vector_init(&reset_v, g.nodes);
  for (int i = 0; i < g.nodes; ++i) VECTOR(reset_v)[i] = reset[static_cast<size_t>(i)];
  igraph_vector_init(&result, 0);
  igraph_real_t value = 0;
  EXPECT_EQ(igraph_personalized_pagerank(&graph, IGRAPH_PAGERANK_ALGO_PRPACK, &result, &value,
                                         igraph_vss_all(), IGRAPH_DIRECTED, damping, &reset_v,
                                         &weights, nullptr),
            IGRAPH_SUCCESS);
  std::vector<double> out(static_cast<size_t>(g.nodes));
  for (int i = 0; i < g.nodes; ++i) out[static_cast<size_t>(i)] = VECTOR(result)[i];
  igraph_vector_destroy(&result);
  igraph_vector_destroy(&reset_v);
  igraph_vector_destroy(&weights);
  igraph_destroy(&graph);
  igraph_vector_int_destroy(&edges);
  return out;
}

TEST(PersonalizedPageRankTest, ForwardPushAgreesWithIgraphsExactAnswer) {
  const RandomGraph g = MakeRandomGraph(300, 1500, 7);
  const std::vector<std::pair<uint32_t, double>> seeds = {{3, 2.0}, {150, 1.0}, {299, 1.0}};
  std::vector<double> reset(300, 0.0);
  for (const auto& [n, w] : seeds) reset[n] = w;
  for (double damping : {0.5, 0.85}) {
    query::PprOptions o;
    o.damping = damping;
    o.epsilon = 1e-9;
    const auto push = query::PersonalizedPageRank(g.transitions, seeds, o);
    const auto exact = IgraphPersonalizedPageRank(g, reset, damping);
    std::vector<double> ours(300, 0.0);
    double total = 0;
    for (const auto& [n, p] : push) {
      ours[n] = p;
      total += p;
    }
    EXPECT_NEAR(total, 1.0, 1e-6);
    double l1 = 0;
    for (size_t i = 0; i < ours.size(); ++i) l1 += std::abs(ours[i] - exact[i]);
    EXPECT_LT(l1, 1e-4) << "damping " << damping;
    // Sorted best first, as promised.
    for (size_t i = 1; i < push.size(); ++i) EXPECT_GE(push[i - 1].second, push[i].second);
  }
}

TEST(PersonalizedPageRankTest, TouchesOnlyWhatTheMassReaches) {
  // Two components: a walk started in one never scores the other.
  query::TransitionGraph g;
  g.offsets = {0, 1, 2, 3, 4};
  g.targets = {1, 0, 3, 2};
  g.probabilities = {1, 1, 1, 1};
  const std::vector<std::pair<uint32_t, double>> seeds = {{0, 1.0}};
  const auto r = query::PersonalizedPageRank(g, seeds);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].first, 0u);
  EXPECT_EQ(r[1].first, 1u);
  EXPECT_TRUE(query::PersonalizedPageRank(g, std::vector<std::pair<uint32_t, double>>{}).empty());
}

// ---------------------------------------------------------------- fusion

TEST(ReciprocalRankFusionTest, WeightedRanksAddUp) {
  // a: 1/(1+1) + 1/(1+3) = 0.75; b: 1/(1+2) + 2/(1+1) = 1.333; c: 1/(1+3) = 0.25 (list 1 only,
  // which has weight 1); d: 2/(1+2) = 0.667.
  const auto fused = ReciprocalRankFusion({{"a", "b", "c"}, {"b", "d", "a"}}, {1.0, 2.0}, 1.0);
  ASSERT_EQ(fused.size(), 4u);
  std::vector<std::string> order;
  for (const auto& [id, s] : fused) order.push_back(id);
  EXPECT_THAT(order, ElementsAre("b", "a", "d", "c"));
  EXPECT_NEAR(fused[0].second, 1.0 / 3 + 1.0, 1e-12);
  EXPECT_NEAR(fused[1].second, 0.5 + 0.25 * 2, 1e-12);
  // A zero weight leaves its list out; ties keep first appearance.
  const auto one = ReciprocalRankFusion({{"x", "y"}, {"y", "x"}}, {1.0, 0.0}, 60);
  EXPECT_EQ(one[0].first, "x");
  const auto tie = ReciprocalRankFusion({{"p"}, {"q"}}, {1.0, 1.0}, 60);
  EXPECT_EQ(tie[0].first, "p");
}

// ---------------------------------------------------------------- the signals on an index

// A folder's input/ indexed by the real pipeline without an LLM, and a retriever on it.
struct FolderIndex {
  std::unique_ptr<Store> store;
  LexicalEmbedder embedder;
  std::unique_ptr<Retriever> retriever;
};

void IndexFolder(const TempDir& dir, FolderIndex& out) {
  Config config;
  config.root = dir.path().string();
  auto store = Store::Open(dir / "output/index.db");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  out.store = std::move(store).value();
  IndexContext ctx;
  ctx.store = out.store.get();
  ctx.embedder = &out.embedder;
  auto indexed = RunIndex(config, {}, ctx);
  ASSERT_TRUE(indexed.ok()) << indexed.status().ToString();
  auto retriever = Retriever::Open(*out.store, &out.embedder);
  ASSERT_TRUE(retriever.ok()) << retriever.status().ToString();
  out.retriever = std::move(retriever).value();
}

// One passage per document, Wikipedia style (the title is a JSON title field), indexed by the
// real pipeline without an LLM.
class TitledPassagesTest : public ::testing::Test {
 protected:
  // (title, text) pairs, each a document "title\n\ntext" titled by its title.
  void IndexPassages(const std::vector<std::pair<std::string, std::string>>& docs) {
    std::filesystem::create_directories(dir_.path() / "input");
    std::ofstream jsonl(dir_ / "input/passages.jsonl");
    for (const auto& [title, text] : docs) {
      jsonl
          << nlohmann::json{{"id", title}, {"title", title}, {"text", title + "\n\n" + text}}.dump()
          << "\n";
    }
    jsonl.close();
    config_.root = dir_.path().string();
    auto store = Store::Open(dir_ / "output/index.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    IndexContext ctx;
    ctx.store = store_.get();
    ctx.embedder = &embedder_;
    auto s = RunIndex(config_, {}, ctx);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
  }

  std::vector<std::string> Docs(const RetrievalResult& r) {
    std::vector<std::string> out;
    for (const auto& c : r.chunks) out.push_back(c.document_id);
    return out;
  }

  TempDir dir_;
  Config config_;
  LexicalEmbedder embedder_;
  std::unique_ptr<Store> store_;
};

class RetrievalIndexTest : public TitledPassagesTest {
 protected:
  void SetUp() override {
    std::vector<std::pair<std::string, std::string>> docs = {
        {"Kiss and Tell (1945 film)",
         "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer. "
         "In the film, two teenage girls cause their respective parents much concern when they "
         "start to become interested in boys."},
        {"Shirley Temple",
         "Shirley Temple Black was an American actress, singer and dancer. As an adult she "
         "served as United States Ambassador to Ghana and to Czechoslovakia, and as Chief of "
         "Protocol of the United States."},
        {"Corliss Archer",
         "Corliss Archer is a fictional teenage girl, the heroine of a series of short stories "
         "by F. Hugh Herbert. Corliss Archer later appeared on radio and television."},
        {"Meet Corliss Archer",
         "Meet Corliss Archer was an American radio sitcom. Janet Waldo played Corliss Archer "
         "on the radio show."},
    };
    // Distractors: many passages about films, so "film" is everywhere.
    for (int i = 0; i < 24; ++i) {
      docs.push_back({"Film number " + std::to_string(i),
                      "Film number " + std::to_string(i) + " is a film made in " +
                          std::to_string(1930 + i) + ". The film was directed by Director " +
                          std::string(1, static_cast<char>('A' + i)) +
                          " Smithson and the film "
                          "starred many actors in a comedy about parents."});
    }
    ASSERT_NO_FATAL_FAILURE(IndexPassages(docs));
    auto r = Retriever::Open(*store_, &embedder_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    retriever_ = std::move(r).value();
  }

  std::unique_ptr<Retriever> retriever_;
};

TEST_F(RetrievalIndexTest, TheWalkReachesAPassageNoQuestionWordNames) {
  // The answer is in "Shirley Temple", which shares no word with the question: only the bridge
  // in "Kiss and Tell" (which names her) leads there.
  const std::string q = "What government position was held by the star of Kiss and Tell?";
  RetrievalOptions o;
  o.method = RetrievalMethod::kBm25;
  auto bm25 = retriever_->Retrieve(q, o);
  ASSERT_TRUE(bm25.ok()) << bm25.status().ToString();
  const auto keyword = Docs(*bm25);
  // Keywords find it only through function words ("was", "the"), if at all, behind others.
  const auto keyword_rank =
      std::find(keyword.begin(), keyword.end(), "Shirley Temple") - keyword.begin();
  EXPECT_GE(keyword_rank, 2) << "the keyword signal should not rank it near the top on its own";

  o.method = RetrievalMethod::kGraph;
  auto graph = retriever_->Retrieve(q, o);
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  const auto walked = Docs(*graph);
  ASSERT_GE(walked.size(), 2u);
  EXPECT_THAT(std::vector<std::string>(walked.begin(), walked.begin() + 2),
              ::testing::UnorderedElementsAre("Kiss and Tell (1945 film)", "Shirley Temple"));
  bool named_kiss_and_tell = false;
  for (const auto& s : graph->seeds)
    named_kiss_and_tell |= s.by_name && s.name_key == "kiss and tell";
  EXPECT_TRUE(named_kiss_and_tell);

  o.method = RetrievalMethod::kHybrid;
  auto hybrid = retriever_->Retrieve(q, o);
  ASSERT_TRUE(hybrid.ok());
  const auto fused = Docs(*hybrid);
  EXPECT_NE(std::find(fused.begin(), fused.begin() + 2, "Shirley Temple"), fused.begin() + 2);
  // Each chunk says where each signal ranked it.
  EXPECT_TRUE(hybrid->chunks[0].ranks[static_cast<size_t>(Signal::kGraph)].has_value());
}

TEST_F(RetrievalIndexTest, AGenericQuestionWordDoesNotSeedTheWalkInPlaceOfAName) {
  // "Film" is an entity (capitalised at the start of every distractor), but "film" is in most
  // chunks: it points nowhere. "Shirley Temple" does.
  auto r = retriever_->Retrieve("Which film starred Shirley Temple?", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> named;
  for (const auto& s : r->seeds) {
    if (s.by_name) named.push_back(s.name_key);
  }
  EXPECT_THAT(named, ElementsAre("shirley temple"));
  EXPECT_EQ(Docs(*r).at(0), "Shirley Temple");
}

// The one-question mode (the CLI's) reads the chunk vectors on another thread while the
// question's own reads run; the first questions, asked at once from several threads, all wait
// for the same load and rank as a question asked alone does.
TEST_F(RetrievalIndexTest, OneQuestionModeLoadsTheVectorsOnceForQuestionsAskedAtOnce) {
  const std::vector<std::string> questions = {
      "What government position was held by the star of Kiss and Tell?",
      "Which film starred Shirley Temple?", "Who played Corliss Archer on the radio?"};
  RetrieverOptions lazy;
  lazy.load_graph = false;
  std::vector<std::vector<std::string>> alone;
  for (const auto& q : questions) {
    auto r = Retriever::Open(*store_, &embedder_, lazy);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto got = (*r)->Retrieve(q, {});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(got->stats.used_embeddings) << q;
    alone.push_back(Docs(*got));
  }
  for (int round = 0; round < 5; ++round) {
    auto r = Retriever::Open(*store_, &embedder_, lazy);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::vector<std::string>> together(questions.size());
    std::vector<std::thread> askers;
    for (size_t i = 0; i < questions.size(); ++i) {
      askers.emplace_back([&, i] {
        auto got = (*r)->Retrieve(questions[i], {});
        if (got.ok() && got->stats.used_embeddings) together[i] = Docs(*got);
      });
    }
    for (auto& t : askers) t.join();
    EXPECT_EQ(together, alone) << "round " << round;
  }
  // Closed before its first question: the load still running is waited for, not left behind.
  for (int round = 0; round < 5; ++round) {
    auto r = Retriever::Open(*store_, &embedder_, lazy);
    ASSERT_TRUE(r.ok());
  }
}

// In the one-question mode the vectors are read only for a method that uses them: a BM25
// search (the CLI's `--method bm25`) no longer waits at exit for a load it never needed.
TEST_F(RetrievalIndexTest, OneQuestionModeReadsNoVectorsForABm25Search) {
  SetLogLevel(LogLevel::kDebug);
  auto built = [&](RetrievalMethod method) {
    const std::string path = dir_ / ("log-" + std::string(RetrievalMethodName(method)));
    {
      auto file = LogFile::Open(path);
      EXPECT_TRUE(file.ok());
      ScopedLogFile scope(*file);
      RetrieverOptions lazy;
      lazy.load_graph = false;
      auto r = Retriever::Open(*store_, &embedder_, lazy);
      EXPECT_TRUE(r.ok());
      RetrievalOptions o;
      o.method = method;
      auto got = (*r)->Retrieve("Which film starred Shirley Temple?", o);
      EXPECT_TRUE(got.ok() && !got->chunks.empty());
    }
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      if (line.find("exact index of") != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_FALSE(built(RetrievalMethod::kBm25));
  EXPECT_TRUE(built(RetrievalMethod::kHybrid));
  SetLogLevel(LogLevel::kInfo);
}

// Without the chunks' texts: the same ranking, ids and ranks only.
TEST_F(RetrievalIndexTest, RankingWithoutReadingTheChunksIsTheSame) {
  auto r = Retriever::Open(*store_, &embedder_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const std::string q :
       {"Which film starred Shirley Temple?", "Who played Corliss Archer on the radio?"}) {
    auto full = (*r)->Retrieve(q, {});
    ASSERT_TRUE(full.ok()) << full.status().ToString();
    RetrievalOptions ids_only;
    ids_only.read_chunks = false;
    auto bare = (*r)->Retrieve(q, ids_only);
    ASSERT_TRUE(bare.ok()) << bare.status().ToString();
    ASSERT_EQ(bare->chunks.size(), full->chunks.size()) << q;
    ASSERT_FALSE(full->chunks.empty());
    for (size_t i = 0; i < full->chunks.size(); ++i) {
      EXPECT_EQ(bare->chunks[i].chunk_id, full->chunks[i].chunk_id) << q << " #" << i;
      EXPECT_EQ(bare->chunks[i].ranks, full->chunks[i].ranks) << q << " #" << i;
      EXPECT_TRUE(bare->chunks[i].text.empty());
      EXPECT_FALSE(full->chunks[i].text.empty());
    }
  }
}

// A question from the command line: the retriever reads the entity vectors (on its loading
// thread), and local search matches entities in that index instead of reading them again.
TEST_F(RetrievalIndexTest, LocalSearchMatchesInTheRetrieversEntityVectors) {
  TempDir logs;
  auto file = LogFile::Open(logs / "grag.log");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ScopedLogFile scope(*file);
  RetrieverOptions lazy;
  lazy.load_graph = false;
  auto r = Retriever::Open(*store_, &embedder_, lazy);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto entities = (*r)->EntityVectors();
  ASSERT_TRUE(entities.ok()) << entities.status().ToString();
  ASSERT_NE(*entities, nullptr);
  auto count = store_->CountEntities();
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(static_cast<int64_t>((*entities)->size()), *count);

  const Tokenizer& tok = *Tokenizer::Get("o200k_base").value();
  auto ctx = BuildLocalContext(*store_, &embedder_, tok, "Which film starred Shirley Temple?", {},
                               nullptr, r->get());
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  EXPECT_TRUE(ctx->used_embeddings);
  EXPECT_FALSE(ctx->matches.empty());
  // Read once each: the chunk vectors and the entity vectors (its log lines, thread included).
  std::ifstream in(logs / "grag.log");
  int built = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("[vector] exact index of") != std::string::npos) ++built;
  }
  EXPECT_EQ(built, 2);
}

// No entity is named and no fact seed exists: the walk starts from entity descriptions loosely
// near the question and from the passages themselves. On a book's dense graph such a guess at
// the anchored weight outvoted the one passage both BM25 and vector rank first.
TEST(RetrievalUnanchoredTest, AGuessingWalkDoesNotOutvoteTheOtherSignals) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "input");
  std::filesystem::copy_file(
      std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
      dir / "input/christmas_carol.txt");
  dir.Write("input/zorblax.txt", "Zorblax the Quantum Llama lives in Paris with Marley.");
  FolderIndex index;
  ASSERT_NO_FATAL_FAILURE(IndexFolder(dir, index));
  Retriever* retriever = index.retriever.get();
  const std::string q = "Zorblax Quantum Llama";
  RetrievalOptions o;
  o.method = RetrievalMethod::kBm25;
  ASSERT_EQ(retriever->Retrieve(q, o)->chunks.at(0).document_id, "zorblax.txt");
  o.method = RetrievalMethod::kHybrid;
  auto r = retriever->Retrieve(q, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const auto& s : r->seeds) EXPECT_FALSE(s.by_name || s.by_fact) << s.name_key;
  EXPECT_EQ(r->chunks.at(0).document_id, "zorblax.txt");
  EXPECT_THAT(r->diagnostics, ::testing::Contains(::testing::HasSubstr("unanchored_graph_weight")));
  // At the anchored weight, and without the sentence-window list (which holds the passage
  // first too), the guess wins: what the option is for.
  o.unanchored_graph_weight = o.graph_weight;
  o.passage_weight = 0;
  auto guessed = retriever->Retrieve(q, o);
  ASSERT_TRUE(guessed.ok());
  EXPECT_NE(guessed->chunks.at(0).document_id, "zorblax.txt");
}

TEST_F(RetrievalIndexTest, EachMethodRanksWithItsOwnSignal) {
  const std::string q = "Who played Corliss Archer on the radio?";
  for (auto m : {RetrievalMethod::kVector, RetrievalMethod::kBm25, RetrievalMethod::kGraph,
                 RetrievalMethod::kHybrid}) {
    RetrievalOptions o;
    o.method = m;
    o.top_k = 3;
    auto r = retriever_->Retrieve(q, o);
    ASSERT_TRUE(r.ok()) << RetrievalMethodName(m) << ": " << r.status().ToString();
    ASSERT_FALSE(r->chunks.empty()) << RetrievalMethodName(m);
    EXPECT_LE(r->chunks.size(), 3u);
    EXPECT_THAT(r->chunks[0].document_id, ::testing::AnyOf("Meet Corliss Archer", "Corliss Archer"))
        << RetrievalMethodName(m);
    if (m != RetrievalMethod::kHybrid) {
      const size_t s = m == RetrievalMethod::kVector ? 0 : m == RetrievalMethod::kBm25 ? 1 : 2;
      EXPECT_EQ(r->chunks[0].ranks[s], 1) << RetrievalMethodName(m);
      // The method's score is its own signal's.
      EXPECT_EQ(r->chunks[0].score, r->chunks[0].signal_scores[s]) << RetrievalMethodName(m);
    }
    EXPECT_FALSE(r->chunks[0].text.empty());
  }
  EXPECT_EQ(retriever_->Retrieve("  ?! ", {}).status().code(), ErrorCode::kInvalidArgument);
  RetrievalOptions bad;
  bad.damping = 1.5;
  EXPECT_EQ(retriever_->Retrieve(q, bad).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ParseRetrievalMethod("graph").value(), RetrievalMethod::kGraph);
  EXPECT_FALSE(ParseRetrievalMethod("magic").ok());
}

// The graph counts in proportion to how specific the question's most specific name is: a name
// in 2 of the 28 passages anchors the walk, one in all of them leaves the graph the weight of
// an unanchored walk.
TEST_F(RetrievalIndexTest, TheGraphCountsByHowSpecificTheQuestionsNamesAre) {
  RetrievalOptions o;
  auto named = retriever_->Retrieve("Which country did Shirley Temple serve as ambassador?", o);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  auto common = retriever_->Retrieve("Which film starred actors in a comedy about parents?", o);
  ASSERT_TRUE(common.ok()) << common.status().ToString();
  EXPECT_GT(named->stats.graph_weight, o.unanchored_graph_weight + 1.0);
  EXPECT_LE(named->stats.graph_weight, o.graph_weight);
  EXPECT_DOUBLE_EQ(common->stats.graph_weight, o.unanchored_graph_weight);
  // With the bar at the lowest specificity every name anchors fully: what the setting is for.
  o.anchored_specificity = o.min_name_specificity;
  auto full = retriever_->Retrieve("Which country did Shirley Temple serve as ambassador?", o);
  ASSERT_TRUE(full.ok());
  EXPECT_DOUBLE_EQ(full->stats.graph_weight, o.graph_weight);
}

// A sentence that says nothing a question asks, different for each document and position.
std::string Filler(int doc, int i) {
  return "On day " + std::to_string(doc * 100 + i) +
         " the weather in the valley was calm and the river ran slowly past the mill. ";
}

// Long chunks: the one that holds the question's words in one sentence comes before the one
// that repeats each of them, far apart, more often (BM25's first). Short passages (one or two
// windows each, the fixture's) leave the window list out.
TEST(RetrievalWindowsTest, TheChunkThatHoldsTheFactInOnePlaceComesFirst) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "input");
  const std::vector<std::string> terms = {"lighthouse", "keeper", "painted", "door", "green"};
  std::string spread;
  for (int i = 0; i < 45; ++i) {
    if (i % 3 == 0) {
      spread += "Someone spoke of the " + terms[static_cast<size_t>(i / 3) % terms.size()] +
                " again that evening. ";
    } else {
      spread += Filler(1, i);
    }
  }
  std::string focused;
  for (int i = 0; i < 45; ++i) {
    focused += i == 20 ? "The lighthouse keeper painted the door green. " : Filler(2, i);
  }
  dir.Write("input/spread.txt", spread);
  dir.Write("input/focused.txt", focused);
  for (int d = 3; d < 7; ++d) {
    std::string text;
    for (int i = 0; i < 45; ++i) text += Filler(d, i);
    dir.Write("input/filler" + std::to_string(d) + ".txt", text);
  }
  FolderIndex index;
  ASSERT_NO_FATAL_FAILURE(IndexFolder(dir, index));
  Retriever* retriever = index.retriever.get();
  const std::string q = "What colour did the lighthouse keeper paint the door? Green?";
  RetrievalOptions o;
  o.method = RetrievalMethod::kBm25;
  auto bm25 = retriever->Retrieve(q, o);
  ASSERT_TRUE(bm25.ok()) << bm25.status().ToString();
  ASSERT_EQ(bm25->chunks.at(0).document_id, "spread.txt");
  o.method = RetrievalMethod::kHybrid;
  auto hybrid = retriever->Retrieve(q, o);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status().ToString();
  EXPECT_GT(hybrid->stats.window_weight, 0);
  EXPECT_EQ(hybrid->chunks.at(0).document_id, "focused.txt");
  // Without the window list the repeated words win.
  o.passage_weight = 0;
  auto without = retriever->Retrieve(q, o);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->stats.window_weight, 0);
  EXPECT_EQ(without->chunks.at(0).document_id, "spread.txt");
}

// A word in more than half of the chunks ("cancer" in a book about cancers) weighs little but
// still counts in the window list: of two windows holding "mouth" and "treated", the one that
// also says "cancer" is the one about mouth cancer. BM25 gives such a word no weight.
TEST(RetrievalWindowsTest, AWordInMostChunksStillTellsTheWindowsApart) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "input");
  auto write = [&](const std::string& name, int doc, const std::map<int, std::string>& at) {
    std::string text;
    for (int i = 0; i < 45; ++i) {
      auto it = at.find(i);
      text += it != at.end() ? it->second : Filler(doc, i);
    }
    dir.Write("input/" + name, text);
  };
  write("about_cancer.txt", 1, {{20, "Mouth cancer is treated with surgery. "}});
  write("about_rinse.txt", 2, {{30, "A sore mouth, a dry mouth, is treated with a rinse. "}});
  for (int d = 3; d < 7; ++d) {  // "cancer" in 5 of the 8 documents, one chunk each
    write("cancer" + std::to_string(d) + ".txt", d, {{5, "Cancer was the talk of the town. "}});
  }
  for (int d = 7; d < 9; ++d) write("filler" + std::to_string(d) + ".txt", d, {});
  FolderIndex index;
  ASSERT_NO_FATAL_FAILURE(IndexFolder(dir, index));
  ASSERT_EQ(index.store->CountChunks().value(), 8);
  Retriever* retriever = index.retriever.get();
  const std::string q = "How is mouth cancer treated?";
  RetrievalOptions o;
  o.method = RetrievalMethod::kBm25;
  auto bm25 = retriever->Retrieve(q, o);
  ASSERT_TRUE(bm25.ok()) << bm25.status().ToString();
  ASSERT_EQ(bm25->chunks.at(0).document_id, "about_rinse.txt") << "\"mouth\" twice wins BM25";
  o.method = RetrievalMethod::kHybrid;
  auto hybrid = retriever->Retrieve(q, o);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status().ToString();
  EXPECT_GT(hybrid->stats.window_weight, 0);
  EXPECT_EQ(hybrid->chunks.at(0).document_id, "about_cancer.txt");
  // BM25 and the window list alone: the windows decide it.
  o.lexical_vector_weight = 0;
  o.vector_weight = 0;
  o.graph_weight = 0;
  o.unanchored_graph_weight = 0;
  auto windows = retriever->Retrieve(q, o);
  ASSERT_TRUE(windows.ok()) << windows.status().ToString();
  EXPECT_EQ(windows->chunks.at(0).document_id, "about_cancer.txt");
  // Without the window list and the diversity pass (which reads the same words), BM25's order.
  o.passage_weight = 0;
  o.diversity = 0;
  auto without = retriever->Retrieve(q, o);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->chunks.at(0).document_id, "about_rinse.txt");
}

// The diversity pass: a question that asks for two things gets the chunk answering the second
// before another chunk answering the first again.
TEST(RetrievalDiversityTest, TheSecondThingAskedForComesBeforeMoreOfTheFirst) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() / "input");
  dir.Write("input/symptoms1.txt",
            "Marsh fever symptoms. The symptoms of marsh fever are chills and sweating. Marsh "
            "fever symptoms come at night. " +
                Filler(1, 0));
  dir.Write("input/symptoms2.txt",
            "More marsh fever symptoms. The symptoms of marsh fever include a headache. Marsh "
            "fever symptoms pass in a week. " +
                Filler(2, 0));
  std::string tests = "A blood smear is the test doctors use to confirm marsh fever. ";
  for (int i = 0; i < 4; ++i) tests += Filler(3, i);
  dir.Write("input/tests.txt", tests);
  for (int d = 4; d < 12; ++d)
    dir.Write("input/filler" + std::to_string(d) + ".txt", Filler(d, 0) + Filler(d, 1));
  FolderIndex index;
  ASSERT_NO_FATAL_FAILURE(IndexFolder(dir, index));
  Retriever* retriever = index.retriever.get();
  const std::string q = "What are the symptoms of marsh fever, and which test confirms it?";
  auto documents = [&](double diversity) {
    RetrievalOptions o;
    o.diversity = diversity;
    auto r = retriever->Retrieve(q, o);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::string> out;
    if (r.ok()) {
      for (const auto& c : r->chunks) out.push_back(c.document_id);
    }
    return out;
  };
  // The fusion alone puts both symptom chunks first.
  const std::vector<std::string> fused = documents(0);
  ASSERT_GE(fused.size(), 3u);
  ASSERT_THAT(std::vector<std::string>(fused.begin(), fused.begin() + 2),
              ::testing::UnorderedElementsAre("symptoms1.txt", "symptoms2.txt"));
  const std::vector<std::string> diverse = documents(1);
  ASSERT_GE(diverse.size(), 3u);
  EXPECT_EQ(diverse[1], "tests.txt");
  EXPECT_EQ(std::set<std::string>(diverse.begin(), diverse.end()),
            std::set<std::string>(fused.begin(), fused.end()));
}

TEST_F(RetrievalIndexTest, ShortPassagesLeaveTheWindowListOut) {
  auto r = retriever_->Retrieve("Who played Corliss Archer on the radio?", RetrievalOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.window_weight, 0);
}

// The evidence chain: the article the first passage points to ("...played for the Philadelphia
// Eagles") moves up past look-alikes that share the question's words, in both the kept-graph
// and the one-question mode; what the question names itself keeps its place ahead of it.
class RetrievalChainTest : public TitledPassagesTest {
 protected:
  void SetUp() override {
    std::vector<std::pair<std::string, std::string>> docs = {
        {"Dick Humbert",
         "Dick Humbert was an American football end. He played for the Philadelphia Eagles "
         "from 1945 to 1949 and later coached at a high school."},
        {"Philadelphia Eagles",
         "The Philadelphia Eagles are a professional American football franchise. The Eagles "
         "play their home games at Lincoln Financial Field in Pennsylvania."},
        {"Brooklyn Dodgers (NFL)",
         "The Brooklyn Dodgers were an NFL team that played from 1930 to 1945. The NFL team "
         "was based in the state of New York."},
        {"Buffalo Bills",
         "The Buffalo Bills are an NFL team based in the state of New York. The team has "
         "played since 1946."},
    };
    for (int i = 0; i < 16; ++i) {
      docs.push_back({"Garden " + std::to_string(i),
                      "Garden " + std::to_string(i) + " is a garden planted in " +
                          std::to_string(1900 + i) + " with roses and a pond."});
    }
    ASSERT_NO_FATAL_FAILURE(IndexPassages(docs));
  }

  // Local search's context for `q` at the similarity floor `floor`, with no entity seeding the
  // walk by embedding (those are matched by embedding, at the same floor, when local search
  // runs in the engine): every entity of the best sentences is a fact seed.
  Result<LocalContext> StandInContext(const std::string& q, double floor) {
    GRAG_ASSIGN_OR_RETURN(auto retriever, Retriever::Open(*store_, &embedder_));
    LocalSearchOptions o;
    o.similarity_floor = floor;
    o.retrieval.max_embedding_seeds = 0;
    return BuildLocalContext(*store_, &embedder_, *Tokenizer::Get("o200k_base").value(), q, o,
                             nullptr, retriever.get());
  }
};

TEST_F(RetrievalChainTest, TheArticleTheFirstPassageNamesComesSecond) {
  const std::string q =
      "From 1945 to 1949 Dick Humbert played for an NFL team based in what state?";
  for (bool kept : {true, false}) {
    SCOPED_TRACE(kept ? "the graph kept" : "one question");
    RetrieverOptions ro;
    ro.load_graph = kept;
    auto retriever = Retriever::Open(*store_, &embedder_, ro);
    ASSERT_TRUE(retriever.ok()) << retriever.status().ToString();
    RetrievalOptions o;
    o.chain_links = 0;
    auto fused = (*retriever)->Retrieve(q, o);
    ASSERT_TRUE(fused.ok()) << fused.status().ToString();
    const auto plain = Docs(*fused);
    ASSERT_EQ(plain.at(0), "Dick Humbert");
    // The look-alikes share "NFL", "team", "based", "state"; the Eagles' article none of them.
    ASSERT_NE(plain.at(1), "Philadelphia Eagles") << "the fusion alone should not find it";
    for (const auto& c : fused->chunks) EXPECT_TRUE(c.chained_by.empty());

    o.chain_links = 2;
    auto chained = (*retriever)->Retrieve(q, o);
    ASSERT_TRUE(chained.ok()) << chained.status().ToString();
    const auto docs = Docs(*chained);
    ASSERT_GE(docs.size(), 3u);
    EXPECT_EQ(docs[0], "Dick Humbert");
    EXPECT_EQ(docs[1], "Philadelphia Eagles");
    EXPECT_EQ(chained->chunks[1].chained_by, "philadelphia eagles");
    EXPECT_TRUE(chained->chunks[0].chained_by.empty());
    // Only the order changes: the same chunks, each with its fused score.
    EXPECT_THAT(docs, ::testing::UnorderedElementsAreArray(plain));
    for (const auto& c : chained->chunks) {
      auto same = std::find_if(fused->chunks.begin(), fused->chunks.end(),
                               [&](const RetrievedChunk& f) { return f.chunk_id == c.chunk_id; });
      ASSERT_NE(same, fused->chunks.end());
      EXPECT_EQ(same->score, c.score);
    }
    // Other methods rank by their own signal alone.
    o.method = RetrievalMethod::kGraph;
    auto graph = (*retriever)->Retrieve(q, o);
    ASSERT_TRUE(graph.ok());
    for (const auto& c : graph->chunks) EXPECT_TRUE(c.chained_by.empty());
  }
}

// A title whose entity was resolved under a longer name ("Christopher Nolan" into "Christopher
// Edward Nolan", as his article's first sentence says it) is found through the aliases in the
// one-question neighbourhood as in the kept graph: the walk gives the article its titled share
// in both modes alike.
class RetrievalTitleAliasTest : public TitledPassagesTest {};

TEST_F(RetrievalTitleAliasTest, TheOneQuestionWalkFindsATitleResolvedUnderAnotherName) {
  std::vector<std::pair<std::string, std::string>> docs = {
      {"Christopher Nolan",
       "Christopher Edward Nolan is a British and American film director. Nolan was born in "
       "Westminster, London, and grew up in Highgate."},
      {"Inception",
       "Inception is a 2010 science fiction film written and directed by Christopher Edward "
       "Nolan. It stars Leonardo DiCaprio."},
      {"Memento", "Memento is a 2000 thriller film directed by Christopher Edward Nolan."},
  };
  for (int i = 0; i < 16; ++i) {
    docs.push_back(
        {"Garden " + std::to_string(i), "Garden " + std::to_string(i) + " is a garden planted in " +
                                            std::to_string(1900 + i) + " with roses and a pond."});
  }
  ASSERT_NO_FATAL_FAILURE(IndexPassages(docs));
  // The precondition: the title is an alias, not an entity of its own.
  auto canonical = store_->CanonicalKeys({"christopher nolan", "no such name"});
  ASSERT_TRUE(canonical.ok()) << canonical.status().ToString();
  ASSERT_EQ(canonical->size(), 1u);
  ASSERT_EQ(canonical->at("christopher nolan"), "christopher edward nolan");
  auto own = store_->GetEntityByKey("christopher edward nolan");
  ASSERT_TRUE(own.ok() && own->has_value());
  ASSERT_EQ((*own)->name_key, "christopher edward nolan");

  const std::string q = "Where was the director of Inception born?";
  std::vector<std::vector<std::pair<std::string, double>>> rankings;
  for (bool kept : {true, false}) {
    RetrieverOptions ro;
    ro.load_graph = kept;
    auto retriever = Retriever::Open(*store_, &embedder_, ro);
    ASSERT_TRUE(retriever.ok()) << retriever.status().ToString();
    RetrievalOptions o;
    o.method = RetrievalMethod::kGraph;
    auto r = (*retriever)->Retrieve(q, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto& ranking = rankings.emplace_back();
    for (const auto& c : r->chunks) ranking.emplace_back(c.document_id, c.score);
  }
  ASSERT_FALSE(rankings[0].empty());
  ASSERT_EQ(rankings[0].size(), rankings[1].size());
  for (size_t i = 0; i < rankings[0].size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(rankings[1][i].first, rankings[0][i].first);
    EXPECT_NEAR(rankings[1][i].second, rankings[0][i].second, 1e-6);
  }
}

TEST_F(RetrievalChainTest, WhatTheQuestionNamesStaysAheadOfTheChain) {
  auto retriever = Retriever::Open(*store_, &embedder_);
  ASSERT_TRUE(retriever.ok()) << retriever.status().ToString();
  const std::string q =
      "Did Dick Humbert, an end from 1945 to 1949, play in the league of the Buffalo Bills?";
  auto r = (*retriever)->Retrieve(q, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto docs = Docs(*r);
  ASSERT_GE(docs.size(), 3u);
  // The chain starts at Dick Humbert's passage, which names the Eagles, not the Bills.
  ASSERT_EQ(docs[0], "Dick Humbert") << ::testing::PrintToString(docs);
  EXPECT_EQ(docs[1], "Buffalo Bills") << ::testing::PrintToString(docs);
  EXPECT_EQ(docs[2], "Philadelphia Eagles") << ::testing::PrintToString(docs);
  EXPECT_EQ(r->chunks[2].chained_by, "philadelphia eagles");
}

// Local search's stop rule: nothing named and no description near enough. The entities that
// the hybrid ranking's best passages name, in a sentence holding enough of the question's
// words, stand in; below the floor the index still has nothing on the question.
TEST_F(RetrievalChainTest, LocalSearchMatchesWhatTheBestPassagesSentencesName) {
  const std::string q = "Which team did he play for from 1945 to 1949 before he later coached?";
  auto ctx = StandInContext(q, 0.5);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  ASSERT_FALSE(ctx->matches.empty());
  for (const auto& m : ctx->matches) {
    EXPECT_TRUE(m.by_fact) << m.name;
    EXPECT_FALSE(m.by_name || m.by_embedding) << m.name;
    EXPECT_GE(m.fact_match, 0.5) << m.name;
  }
  EXPECT_THAT(ctx->diagnostics,
              ::testing::Contains(::testing::HasSubstr("named by the best passages' sentences")));
  bool humbert = false;
  for (const auto& item : ctx->items) {
    humbert |= item.type == LocalItemType::kChunk && item.document_id == "Dick Humbert";
  }
  EXPECT_TRUE(humbert) << "the passage that holds the fact is in the context";

  auto none = StandInContext(q, 0.99);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->matches.empty());
}

// A fact often takes two sentences: the one that names the entity and the next, which says the
// rest with "he". The stand-in's match counts the sentences either side, so the entity named
// just before the answer matches.
TEST_F(RetrievalChainTest, LocalSearchMatchesAFactThatTakesTwoSentences) {
  // "Dick Humbert was an American football end." holds "football end" only; "He
  // played ... from 1945 to 1949 and later coached" holds the rest.
  const std::string q = "Which football end played from 1945 to 1949 and later coached?";
  auto ctx = StandInContext(q, 0.8);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  std::vector<std::string> names;
  for (const auto& m : ctx->matches) names.push_back(m.name);
  const auto humbert = std::find(names.begin(), names.end(), "Dick Humbert");
  ASSERT_NE(humbert, names.end()) << ::testing::PrintToString(names);
  const LocalMatch& m = ctx->matches[static_cast<size_t>(humbert - names.begin())];
  EXPECT_TRUE(m.by_fact);
  EXPECT_GE(m.fact_match, 0.8);
}

}  // namespace
}  // namespace grag
