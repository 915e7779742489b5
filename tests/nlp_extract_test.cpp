// The NLP extractor on known sentences (names, noun phrases, compounds, stop words, non-ASCII
// names, descriptions), co-occurrence relationships and their window, pruning thresholds (node
// frequency, degree, weight percentile, PMI) and determinism, and a run over the whole book.
#include "grag/nlp_extract.h"
#include "grag/nlp_prune.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace grag {
namespace {

ParsedExtraction Extract(std::string_view text, const NlpExtractorOptions& options = {}) {
  auto r = ExtractNlp(text, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : ParsedExtraction{};
}

std::vector<std::string> Names(const ParsedExtraction& x) {
  std::vector<std::string> out;
  for (const auto& e : x.entities) out.push_back(e.name);
  return out;
}

const EntityMention* Find(const ParsedExtraction& x, std::string_view name) {
  const std::string key = NormalizeEntityName(name);
  for (const auto& e : x.entities) {
    if (e.name_key == key) return &e;
  }
  return nullptr;
}

const RelationshipMention* FindRel(const ParsedExtraction& x, std::string_view a,
                                   std::string_view b) {
  const std::string ka = NormalizeEntityName(a);
  const std::string kb = NormalizeEntityName(b);
  for (const auto& r : x.relationships) {
    if ((r.source_key == ka && r.target_key == kb) || (r.source_key == kb && r.target_key == ka)) {
      return &r;
    }
  }
  return nullptr;
}

// ------------------------------------------------------------------------------ entities

TEST(NlpExtractTest, SentenceInitialNameIsExtractedAndFunctionWordsAreNot) {
  auto x = Extract("Marley was dead: to begin with. There is no doubt whatever about that.");
  EXPECT_EQ(Names(x), std::vector<std::string>{"Marley"});
  ASSERT_NE(Find(x, "Marley"), nullptr);
  EXPECT_EQ(Find(x, "Marley")->type, "proper noun");
  EXPECT_EQ(Find(x, "Marley")->name_key, "marley");
  EXPECT_EQ(Find(x, "Marley")->description, "Marley was dead: to begin with.");
}

TEST(NlpExtractTest, ProperNounRunsAndTitlesDropped) {
  auto x = Extract(
      "Bob Cratchit, clerk to Ebenezer Scrooge. Mr. Fezziwig, a kind-hearted, jovial old "
      "merchant. Mrs. Cratchit, wife of Bob Cratchit.");
  EXPECT_NE(Find(x, "Bob Cratchit"), nullptr);
  EXPECT_NE(Find(x, "Ebenezer Scrooge"), nullptr);
  EXPECT_NE(Find(x, "Fezziwig"), nullptr);
  EXPECT_NE(Find(x, "Cratchit"), nullptr);  // Mrs. Cratchit
  EXPECT_EQ(Find(x, "Mr. Fezziwig"), nullptr);
  EXPECT_EQ(Find(x, "Mr"), nullptr);
  EXPECT_EQ(Find(x, "Mrs"), nullptr);
  ASSERT_NE(Find(x, "jovial old merchant"), nullptr);
  EXPECT_EQ(Find(x, "jovial old merchant")->type, "noun phrase");
  EXPECT_NE(Find(x, "kind-hearted"), nullptr);
  // The title's '.' does not end the sentence.
  EXPECT_EQ(Find(x, "Fezziwig")->description, "Mr. Fezziwig, a kind-hearted, jovial old merchant.");
}

TEST(NlpExtractTest, NamesWithParticlesAndInitials) {
  auto x = Extract(
      "Ghost of Christmas Past, a phantom showing things past. The book was printed by J. B. "
      "Lippincott in Philadelphia. Vincent van Gogh painted it.");
  EXPECT_NE(Find(x, "Ghost of Christmas Past"), nullptr);
  EXPECT_NE(Find(x, "J. B. Lippincott"), nullptr);
  EXPECT_NE(Find(x, "Philadelphia"), nullptr);
  EXPECT_NE(Find(x, "Vincent van Gogh"), nullptr);
  EXPECT_EQ(Find(x, "phantom showing things past"), nullptr);  // four words: not a noun phrase
  EXPECT_EQ(Find(x, "The"), nullptr);
}

TEST(NlpExtractTest, PossessiveEndsAName) {
  auto x = Extract("Scrooge and Marley's name was on the door. Scrooge's nephew came in.");
  EXPECT_NE(Find(x, "Scrooge"), nullptr);
  EXPECT_NE(Find(x, "Marley"), nullptr);
  EXPECT_EQ(Find(x, "Marley's"), nullptr);
  EXPECT_EQ(Find(x, "Marley's name"), nullptr);
  for (const auto& e : x.entities) EXPECT_EQ(e.name.find('\''), std::string::npos) << e.name;
}

TEST(NlpExtractTest, HyphenatedCompounds) {
  auto x = Extract(
      "Old Marley was as dead as a door-nail. He kept the counting-house open to-day for "
      "twenty-five clerks.");
  ASSERT_NE(Find(x, "door-nail"), nullptr);
  EXPECT_EQ(Find(x, "door-nail")->type, "noun phrase");
  EXPECT_EQ(Find(x, "door-nail")->name, "door-nail");
  EXPECT_NE(Find(x, "counting-house"), nullptr);  // alone, and in the run "counting-house open"
  EXPECT_EQ(Find(x, "to-day"), nullptr);          // "to" is a function word
  EXPECT_EQ(Find(x, "twenty-five"), nullptr);     // number words
  EXPECT_EQ(Find(x, "twenty-five clerks"), nullptr);
  NlpExtractorOptions no_compounds;
  no_compounds.hyphenated_compounds = false;
  EXPECT_EQ(Find(Extract("It was a door-nail.", no_compounds), "door-nail"), nullptr);
}

TEST(NlpExtractTest, StopWordsAreNeverExtracted) {
  auto x = Extract(
      "The clock struck. But nobody came. When it was over, They left. I said so! This is "
      "It. However, Scrooge stayed. \"Why?\" asked He.");
  EXPECT_NE(Find(x, "Scrooge"), nullptr);
  for (const char* stop : {"the", "but", "when", "they", "i", "this", "it", "however", "why", "he",
                           "nobody", "so", "asked"}) {
    for (const auto& e : x.entities) {
      const auto words = " " + e.name_key + " ";
      EXPECT_EQ(words.find(" " + std::string(stop) + " "), std::string::npos) << e.name;
    }
  }
}

TEST(NlpExtractTest, CapitalisedOnlyBySentenceStartIsNotAName) {
  // "Darkness" starts a sentence and is written in lower case elsewhere: a common noun.
  auto x = Extract("Darkness is cheap, and Scrooge liked it. He liked the darkness of the room.");
  EXPECT_EQ(Find(x, "Darkness"), nullptr);
  EXPECT_NE(Find(x, "Scrooge"), nullptr);
  // After an opening quote likewise.
  auto y = Extract("Scrooge said, \"Darkness is cheap.\" The darkness was deep.");
  EXPECT_EQ(Find(y, "Darkness"), nullptr);
}

TEST(NlpExtractTest, NonAsciiNames) {
  auto x = Extract("Zoë Álvarez met Jürgen Groß in Zürich. ÉMILE ZOLA wrote about Łódź.");
  EXPECT_NE(Find(x, "Zoë Álvarez"), nullptr);
  EXPECT_NE(Find(x, "Jürgen Groß"), nullptr);
  EXPECT_NE(Find(x, "Zürich"), nullptr);
  EXPECT_NE(Find(x, "Łódź"), nullptr);
  ASSERT_NE(Find(x, "Émile Zola"), nullptr);  // all caps: same key as the mixed-case spelling
  EXPECT_EQ(Find(x, "Zoë Álvarez")->name, "Zoë Álvarez");
  EXPECT_EQ(Find(x, "Zoë Álvarez")->name_key, NormalizeEntityName("ZOË ÁLVAREZ"));
}

TEST(NlpExtractTest, DuplicateMentionsAreOneEntityWithTheFirstSentence) {
  auto x = Extract("Scrooge was mean. Everyone knew Scrooge. SCROOGE!");
  ASSERT_EQ(x.entities.size(), 1u);
  EXPECT_EQ(x.entities[0].name, "Scrooge");
  EXPECT_EQ(x.entities[0].description, "Scrooge was mean.");
}

TEST(NlpExtractTest, DescriptionsAreCollapsedAndCutAtAWordBoundary) {
  std::string text = "Scrooge\n  walked";
  for (int i = 0; i < 80; ++i) text += " slowly";
  text += ".";
  NlpExtractorOptions o;
  o.max_description_bytes = 60;
  auto x = Extract(text, o);
  ASSERT_NE(Find(x, "Scrooge"), nullptr);
  const std::string& d = Find(x, "Scrooge")->description;
  EXPECT_LE(d.size(), 60u);
  EXPECT_EQ(d.rfind("Scrooge walked slowly slowly", 0), 0u) << d;
  EXPECT_EQ(d.substr(d.size() - 3), "\xE2\x80\xA6");  // …
  EXPECT_EQ(d.find('\n'), std::string::npos);
}

TEST(NlpExtractTest, ExcludeWordsAndBadInput) {
  NlpExtractorOptions o;
  o.exclude_words = {"STAVE"};
  auto x = Extract("Stave One. Scrooge sat in his counting-house.", o);
  EXPECT_EQ(Find(x, "Stave"), nullptr);
  EXPECT_NE(Find(x, "Scrooge"), nullptr);

  // Invalid UTF-8 bytes are separators, never a crash.
  auto y = Extract(std::string("Bob\xff Cratchit met \xc3 Tiny Tim.\xe2\x82"));
  EXPECT_NE(Find(y, "Tiny Tim"), nullptr);
  EXPECT_TRUE(Extract("").entities.empty());
  EXPECT_TRUE(Extract("  ... !!! \n\n ").entities.empty());

  NlpExtractorOptions bad;
  bad.max_name_words = 0;
  EXPECT_EQ(ExtractNlp("Scrooge", bad).status().code(), ErrorCode::kInvalidArgument);
  bad = {};
  bad.max_description_bytes = 3;
  EXPECT_EQ(ExtractNlp("Scrooge", bad).status().code(), ErrorCode::kInvalidArgument);
}

TEST(NlpExtractTest, FingerprintFollowsTheOptionsThatChangeOutput) {
  NlpExtractorOptions a;
  NlpExtractorOptions b;
  EXPECT_EQ(NlpExtractorFingerprint(a), NlpExtractorFingerprint(b));
  EXPECT_NE(NlpExtractorFingerprint(a).find(kNlpExtractorModel), std::string::npos);
  b.sentence_window = 0;
  EXPECT_NE(NlpExtractorFingerprint(a), NlpExtractorFingerprint(b));
  b = {};
  b.exclude_words = {"Stave", "chapter"};
  NlpExtractorOptions c;
  c.exclude_words = {"CHAPTER", "stave"};
  EXPECT_EQ(NlpExtractorFingerprint(b), NlpExtractorFingerprint(c));
}

// ------------------------------------------------------------------------------ relationships

TEST(NlpExtractTest, CoOccurrenceWithinASentenceCountsSentences) {
  NlpExtractorOptions o;
  o.sentence_window = 0;
  auto x = Extract(
      "Scrooge met Marley in the counting-house. Scrooge and Marley talked. Bob Cratchit "
      "waited.",
      o);
  const auto* r = FindRel(x, "Scrooge", "Marley");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->strength, 2);
  EXPECT_EQ(r->description, "Scrooge met Marley in the counting-house.");
  EXPECT_EQ(r->source, "Scrooge");  // first occurrence first
  EXPECT_EQ(r->source_key, "scrooge");
  EXPECT_EQ(r->target_key, "marley");
  ASSERT_NE(FindRel(x, "Marley", "counting-house"), nullptr);
  EXPECT_EQ(FindRel(x, "Marley", "counting-house")->strength, 1);
  EXPECT_EQ(FindRel(x, "Scrooge", "Bob Cratchit"), nullptr);  // never in one sentence
  for (const auto& rel : x.relationships) EXPECT_NE(rel.source_key, rel.target_key);
}

TEST(NlpExtractTest, SentenceWindowLinksNeighbours) {
  const std::string text =
      "Scrooge sat alone. Bob Cratchit wrote. The fire was small. Fred came in.";
  NlpExtractorOptions o;  // default window 1: same or next sentence
  auto x = Extract(text, o);
  const auto* r = FindRel(x, "Scrooge", "Bob Cratchit");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->strength, 1);
  EXPECT_EQ(r->description, "Scrooge sat alone. Bob Cratchit wrote.");
  EXPECT_EQ(FindRel(x, "Scrooge", "Fred"), nullptr);  // three sentences apart
  o.sentence_window = -1;                             // the whole chunk
  EXPECT_NE(FindRel(Extract(text, o), "Scrooge", "Fred"), nullptr);
  o.sentence_window = 0;
  EXPECT_TRUE(Extract(text, o).relationships.empty());
}

TEST(NlpExtractTest, QuotedSpeechStaysInItsSentence) {
  // "Bah!" said Scrooge: the '!' is followed by a lower-case word, so the sentence goes on.
  NlpExtractorOptions o;
  o.sentence_window = 0;
  auto x =
      Extract("\"A merry Christmas, uncle!\" cried Fred. \"Bah!\" said Scrooge, \"Humbug!\"", o);
  EXPECT_NE(FindRel(x, "Christmas", "Fred"), nullptr);
  EXPECT_EQ(FindRel(x, "Fred", "Scrooge"), nullptr);
}

TEST(NlpExtractTest, AQuotedTitleIsOneNameAndDialogueIsNot) {
  // Titles of works in quotes, mid-sentence: one name each, stop words and all.
  auto x = Extract(
      "He is best known for his role in the television series \"Charmed\" and for \"Army "
      "Wives\". The single \"Falling Away from Me\" debuted on the show \u201cNeighbours\u201d.");
  EXPECT_NE(Find(x, "Charmed"), nullptr);
  EXPECT_NE(Find(x, "Army Wives"), nullptr);
  EXPECT_NE(Find(x, "Falling Away from Me"), nullptr);
  EXPECT_EQ(Find(x, "Falling Away"), nullptr);
  EXPECT_NE(Find(x, "Neighbours"), nullptr);
  // Dialogue opens a sentence, follows a comma, or ends in punctuation inside the quotes; a
  // quoted phrase in lower case is not a title.
  auto d = Extract(
      "\u201cHumbug\u201d said the clerk. Then he said, \"Stop\" and they heard him say "
      "\"Wait!\" twice, and \"never again\" once.");
  EXPECT_EQ(Find(d, "Humbug"), nullptr);
  EXPECT_EQ(Find(d, "Stop"), nullptr);
  EXPECT_EQ(Find(d, "Wait"), nullptr);
  EXPECT_EQ(Find(d, "never again"), nullptr);
}

TEST(NlpExtractTest, AnAdverbOpeningASentenceIsNoName) {
  auto x = Extract(
      "Originally designed as a robot, Baymax was rebuilt. Eventually he left Tokyo. Later Kelly "
      "came. Beverly Hills is in California.");
  EXPECT_EQ(Find(x, "Originally"), nullptr);
  EXPECT_EQ(Find(x, "Eventually"), nullptr);
  EXPECT_NE(Find(x, "Baymax"), nullptr);
  EXPECT_NE(Find(x, "Tokyo"), nullptr);
  EXPECT_NE(Find(x, "Beverly Hills"), nullptr);  // more name words follow
  // Capitalised mid-sentence too: a name wherever it stands.
  auto y = Extract("Shockingly won the race. The horse Shockingly is fast.");
  EXPECT_NE(Find(y, "Shockingly"), nullptr);
}

TEST(NlpExtractTest, Deterministic) {
  const std::string text =
      "Scrooge knew Marley was dead. Of course he did. Scrooge and he were partners for I "
      "don't know how many years. Bob Cratchit and Tiny Tim went to the counting-house, where "
      "the Ghost of Christmas Present waited with Mrs. Cratchit.";
  auto a = Extract(text);
  for (int i = 0; i < 3; ++i) {
    auto b = Extract(text);
    ASSERT_EQ(a.entities.size(), b.entities.size());
    for (size_t k = 0; k < a.entities.size(); ++k) {
      EXPECT_EQ(a.entities[k].name, b.entities[k].name);
      EXPECT_EQ(a.entities[k].description, b.entities[k].description);
    }
    ASSERT_EQ(a.relationships.size(), b.relationships.size());
    for (size_t k = 0; k < a.relationships.size(); ++k) {
      EXPECT_EQ(a.relationships[k].source_key, b.relationships[k].source_key);
      EXPECT_EQ(a.relationships[k].target_key, b.relationships[k].target_key);
      EXPECT_EQ(a.relationships[k].strength, b.relationships[k].strength);
    }
  }
  // Entities come in order of first occurrence.
  ASSERT_GE(a.entities.size(), 2u);
  EXPECT_EQ(a.entities[0].name, "Scrooge");
  EXPECT_EQ(a.entities[1].name, "Marley");
}

// ------------------------------------------------------------------------------ pruning

ChunkEntityMention E(std::string chunk, std::string name) {
  ChunkEntityMention m;
  m.chunk_id = std::move(chunk);
  m.mention.name_key = NormalizeEntityName(name);
  m.mention.name = std::move(name);
  m.mention.type = "proper noun";
  m.mention.description = "seen";
  return m;
}

ChunkRelationshipMention R(std::string chunk, std::string a, std::string b, double strength) {
  ChunkRelationshipMention m;
  m.chunk_id = std::move(chunk);
  m.mention.source_key = NormalizeEntityName(a);
  m.mention.target_key = NormalizeEntityName(b);
  m.mention.source = std::move(a);
  m.mention.target = std::move(b);
  m.mention.strength = strength;
  m.mention.description = "together";
  return m;
}

std::set<std::string> Keys(const MergedGraph& g) {
  std::set<std::string> out;
  for (const auto& e : g.entities) out.insert(e.name_key);
  return out;
}

std::set<std::string> Edges(const MergedGraph& g) {
  std::set<std::string> out;
  for (const auto& r : g.relationships) out.insert(r.source_key + "-" + r.target_key);
  return out;
}

TEST(NlpPruneTest, RareNodesGoWithTheirEdges) {
  // a, b, c in two chunks; d in one.
  auto g = MergeMentions(
      {E("1", "a"), E("2", "a"), E("1", "b"), E("2", "b"), E("1", "c"), E("2", "c"), E("1", "d")},
      {R("1", "a", "b", 1), R("2", "a", "b", 1), R("1", "b", "c", 1), R("1", "c", "d", 5)});
  NlpPruneOptions o;
  o.keep_sole_names = false;  // these tests are about the counts alone
  o.min_edge_weight_pct = 0;
  o.pmi_weights = false;
  auto stats = PruneNlpGraph(g, o);
  EXPECT_EQ(Keys(g), (std::set<std::string>{"a", "b", "c"}));
  EXPECT_EQ(Edges(g), (std::set<std::string>{"a-b", "b-c"}));
  EXPECT_EQ(stats.entities_before, 4);
  EXPECT_EQ(stats.entities_after, 3);
  EXPECT_EQ(stats.relationships_before, 3);
  EXPECT_EQ(stats.relationships_after, 2);

  o.min_node_freq = 3;  // nothing is in three chunks
  PruneNlpGraph(g, o);
  EXPECT_TRUE(g.entities.empty());
  EXPECT_TRUE(g.relationships.empty());
}

TEST(NlpPruneTest, IsolatedNodesGoWhenDegreeIsRequired) {
  auto g = MergeMentions(
      {E("1", "a"), E("2", "a"), E("1", "b"), E("2", "b"), E("1", "lonely"), E("2", "lonely")},
      {R("1", "a", "b", 1)});
  NlpPruneOptions o;
  o.keep_sole_names = false;  // these tests are about the counts alone
  o.min_edge_weight_pct = 0;
  o.pmi_weights = false;
  MergedGraph keep_isolated = g;
  o.min_node_degree = 0;
  PruneNlpGraph(keep_isolated, o);
  EXPECT_EQ(Keys(keep_isolated), (std::set<std::string>{"a", "b", "lonely"}));
  o.min_node_degree = 1;  // the default
  PruneNlpGraph(g, o);
  EXPECT_EQ(Keys(g), (std::set<std::string>{"a", "b"}));
}

MergedGraph Star(int edges) {
  // A hub and `edges` leaves, all in two chunks; edge i has weight i (1..edges).
  std::vector<ChunkEntityMention> ents;
  std::vector<ChunkRelationshipMention> rels;
  for (const char* c : {"1", "2"}) ents.push_back(E(c, "hub"));
  for (int i = 1; i <= edges; ++i) {
    const std::string leaf = "leaf" + std::string(i < 10 ? "0" : "") + std::to_string(i);
    for (const char* c : {"1", "2"}) ents.push_back(E(c, leaf));
    rels.push_back(R("1", "hub", leaf, i));
  }
  return MergeMentions(ents, rels);
}

TEST(NlpPruneTest, EdgesBelowTheWeightPercentileAreDropped) {
  auto g = Star(10);  // weights 1..10: numpy.percentile(40) = 1 + 0.4 * 9 = 4.6
  NlpPruneOptions o;
  o.keep_sole_names = false;  // these tests are about the counts alone
  o.pmi_weights = false;      // raw counts, to check the threshold
  auto stats = PruneNlpGraph(g, o);
  EXPECT_DOUBLE_EQ(stats.edge_weight_threshold, 4.6);
  ASSERT_EQ(g.relationships.size(), 6u);
  for (const auto& r : g.relationships) EXPECT_GE(r.weight, 5);
  // Nodes isolated by the edge pruning stay (as in Microsoft GraphRAG).
  EXPECT_EQ(g.entities.size(), 11u);
  EXPECT_TRUE(
      std::is_sorted(g.relationships.begin(), g.relationships.end(),
                     [](const auto& a, const auto& b) { return a.target_key < b.target_key; }));

  auto h = Star(10);
  o.min_edge_weight_pct = 90;  // 1 + 0.9 * 9 = 9.1
  PruneNlpGraph(h, o);
  EXPECT_EQ(h.relationships.size(), 1u);
  auto all = Star(10);
  o.min_edge_weight_pct = 0;
  PruneNlpGraph(all, o);
  EXPECT_EQ(all.relationships.size(), 10u);
  o.min_edge_weight_pct = 250;  // clamped to 100: only the heaviest
  PruneNlpGraph(all, o);
  EXPECT_EQ(all.relationships.size(), 1u);
}

TEST(NlpPruneTest, PmiWeightsArePositiveAndFavourExclusivePairs) {
  // "scrooge" is everywhere; "bob" and "tim" only appear together.
  std::vector<ChunkEntityMention> ents;
  std::vector<ChunkRelationshipMention> rels;
  for (int c = 0; c < 8; ++c) {
    const std::string id = std::to_string(c);
    ents.push_back(E(id, "scrooge"));
    ents.push_back(E(id, "x" + std::to_string(c % 4)));
    rels.push_back(R(id, "scrooge", "x" + std::to_string(c % 4), 1));
  }
  for (const char* c : {"0", "1"}) {
    ents.push_back(E(c, "bob"));
    ents.push_back(E(c, "tim"));
    rels.push_back(R(c, "bob", "tim", 1));
  }
  auto g = MergeMentions(ents, rels);
  NlpPruneOptions o;
  o.keep_sole_names = false;  // these tests are about the counts alone
  o.min_edge_weight_pct = 0;
  o.pmi_weights = true;
  PruneNlpGraph(g, o);
  double bob_tim = 0;
  double scrooge_x = 0;
  for (const auto& r : g.relationships) {
    EXPECT_GT(r.weight, 0);
    if (r.source_key == "bob") bob_tim = r.weight;
    if (r.source_key == "scrooge" && r.target_key == "x0") scrooge_x = r.weight;
  }
  EXPECT_GT(bob_tim, 0);
  EXPECT_GT(bob_tim, scrooge_x) << "a pair that only occurs together beats a hub's edge";
  // PMI uses the unpruned graph: recomputing on the same input gives the same weights.
  auto g2 = MergeMentions(ents, rels);
  PruneNlpGraph(g2, o);
  ASSERT_EQ(g.relationships.size(), g2.relationships.size());
  for (size_t i = 0; i < g.relationships.size(); ++i) {
    EXPECT_DOUBLE_EQ(g.relationships[i].weight, g2.relationships[i].weight);
  }
}

// ------------------------------------------------------------------------------ the book

std::string ReadBook() {
  std::ifstream in(std::string(GRAG_TEST_DATA_DIR) + "/christmas_carol/christmas_carol.txt",
                   std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Chunks of about 5,000 bytes (~1,200 tokens), cut at a space.
std::vector<std::string> Chunks(const std::string& book) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < book.size()) {
    size_t end = std::min(book.size(), pos + 5000);
    if (end < book.size()) end = book.rfind(' ', end);
    out.push_back(book.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

TEST(NlpPruneTest, TitlesAndTheSoleNameOfAChunkStay) {
  // "solo" is the only name of chunk 3 and "t" a document title: both seen once, both kept.
  auto title = E("2", "t");
  title.mention.type = std::string(kNlpTitleType);
  auto g = MergeMentions({E("1", "a"), E("2", "a"), E("1", "b"), E("2", "b"), title, E("3", "solo"),
                          E("3", "rare"), E("3", "rare")},
                         {R("1", "a", "b", 1), R("2", "a", "b", 1)});
  // "rare" twice in chunk 3 is still one chunk: the most frequent name is picked by chunks, the
  // tie by key order ("rare" < "solo").
  NlpPruneOptions o;
  o.min_edge_weight_pct = 0;
  o.pmi_weights = false;
  PruneNlpGraph(g, o);
  EXPECT_EQ(Keys(g), (std::set<std::string>{"a", "b", "rare", "t"}));
  o.keep_sole_names = false;
  auto h = MergeMentions({E("3", "solo"), title}, {});
  PruneNlpGraph(h, o);
  EXPECT_EQ(Keys(h), (std::set<std::string>{"t"}));  // a title stays regardless
}

TEST(NlpTitleTest, TheTitleIsAnEntityWhereverItsWordsAreAndRelatesToEverything) {
  // "Guitar" starts a sentence and is common in lower case: without the title only "World"
  // would be a name.
  const std::string text =
      "Guitar World is a monthly music magazine. It covers the guitar and guitar players such "
      "as Eric Clapton. Jimi Hendrix appeared in the magazine.";
  const auto without = Extract(text);
  EXPECT_NE(Find(without, "World"), nullptr);
  EXPECT_EQ(Find(without, "Guitar World"), nullptr);
  auto r = ExtractNlp(text, {}, "Guitar World");
  ASSERT_TRUE(r.ok());
  const EntityMention* t = Find(*r, "Guitar World");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, kNlpTitleType);
  EXPECT_EQ(Find(*r, "World"), nullptr) << "the title's words make no shorter name";
  EXPECT_NE(FindRel(*r, "Guitar World", "Jimi Hendrix"), nullptr) << "related to all it names";
  EXPECT_NE(FindRel(*r, "Guitar World", "Eric Clapton"), nullptr);
  // A chunk that never spells its title still names it.
  auto later = ExtractNlp("Its editor interviewed Eric Clapton in 1995.", {}, "Guitar World");
  ASSERT_TRUE(later.ok());
  EXPECT_NE(Find(*later, "Guitar World"), nullptr);
  EXPECT_NE(FindRel(*later, "Guitar World", "Eric Clapton"), nullptr);
}

TEST(NlpTitleTest, TitleEntityNames) {
  EXPECT_EQ(TitleEntityName("Kiss and Tell (1945 film)"), "Kiss and Tell");
  EXPECT_EQ(TitleEntityName("  Shirley   Temple "), "Shirley Temple");
  EXPECT_EQ(TitleEntityName("Leland, North Carolina"), "Leland, North Carolina");
  EXPECT_EQ(TitleEntityName("christmas_carol.txt"), "");  // a file name names nothing
  EXPECT_EQ(TitleEntityName("notes.md"), "");
  EXPECT_EQ(TitleEntityName("input/book.txt"), "");
  EXPECT_EQ(TitleEntityName("passages.jsonl#3"), "");
  EXPECT_EQ(TitleEntityName("1999"), "");
  EXPECT_EQ(TitleEntityName("one two three four five six seven eight nine ten eleven"), "");
  EXPECT_EQ(TitleEntityName("St. Paul's Cathedral"), "St. Paul's Cathedral");
}

TEST(NlpBookTest, TheBookGivesItsCharacters) {
  const std::string book = ReadBook();
  ASSERT_GT(book.size(), 100'000u);
  std::vector<ChunkEntityMention> ents;
  std::vector<ChunkRelationshipMention> rels;
  const auto chunks = Chunks(book);
  for (size_t i = 0; i < chunks.size(); ++i) {
    auto x = Extract(chunks[i]);
    for (auto& e : x.entities) ents.push_back({std::to_string(i), std::move(e)});
    for (auto& r : x.relationships) rels.push_back({std::to_string(i), std::move(r)});
  }
  auto g = MergeMentions(ents, rels);
  const auto before = g.entities.size();
  auto stats = PruneNlpGraph(g, {});  // defaults: freq 2, degree 1, PMI, 40th percentile
  EXPECT_GT(stats.edge_weight_threshold, 0);
  EXPECT_LT(g.entities.size(), before / 2) << "most phrases are seen once";
  const auto keys = Keys(g);
  for (const char* k : {"scrooge", "marley", "bob cratchit", "tiny tim", "fezziwig", "christmas",
                        "jacob marley", "fred", "topper"}) {
    EXPECT_TRUE(keys.contains(k)) << k;
  }
  for (const char* k : {"the", "but", "when", "he", "mr", "mrs", "said"}) {
    EXPECT_FALSE(keys.contains(k)) << k;
  }
  for (const auto& r : g.relationships) {
    EXPECT_TRUE(keys.contains(r.source_key) && keys.contains(r.target_key));
    EXPECT_GE(r.weight, stats.edge_weight_threshold);
  }
  EXPECT_GT(g.relationships.size(), 100u);

  // Deterministic: the same chunks give the same graph, weights included.
  auto again = MergeMentions(ents, rels);
  PruneNlpGraph(again, {});
  ASSERT_EQ(Keys(again), keys);
  ASSERT_EQ(again.relationships.size(), g.relationships.size());
  for (size_t i = 0; i < g.relationships.size(); ++i) {
    EXPECT_EQ(again.relationships[i].source_key, g.relationships[i].source_key);
    EXPECT_EQ(again.relationships[i].target_key, g.relationships[i].target_key);
    EXPECT_EQ(again.relationships[i].weight, g.relationships[i].weight);
  }
}

}  // namespace
}  // namespace grag
