// Entity resolution: blocking, name similarity, guards, decision bands, adjudication (batched,
// bad replies, transport failures), prior and user links, determinism, and the no-LLM band on
// NLP-style names from A Christmas Carol.
#include "grag/resolve.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "grag/extract.h"
#include "grag/lexical_embedder.h"
#include "graph/resolve_internal.h"

namespace grag {
namespace {

// The edit distance keeps three rows of the table, not all of them: on random strings over a
// small alphabet (so swaps and repeats are common), every cap, it agrees with the whole table.
size_t WholeTableEditDistance(std::string_view a, std::string_view b, size_t cap) {
  const size_t n = a.size(), m = b.size();
  if ((n > m ? n - m : m - n) > cap) return cap + 1;
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1, 0));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return std::min(d[n][m], cap + 1);
}

TEST(EditDistanceTest, SameAsTheWholeTable) {
  std::mt19937 rng(5);
  auto word = [&](size_t max_len) {
    std::string w(rng() % (max_len + 1), 'a');
    for (char& c : w) c = static_cast<char>('a' + rng() % 4);
    return w;
  };
  size_t small_distances = 0;
  for (int i = 0; i < 20000; ++i) {
    // Mostly names' lengths; now and then longer than the stack rows (64).
    const size_t max_len = i % 50 == 0 ? 90 : 12;
    const std::string a = word(max_len);
    std::string b = a;
    if (rng() % 2 && b.size() > 1) std::swap(b[rng() % (b.size() - 1)], b.back());
    if (rng() % 2) b = word(max_len);
    const size_t cap = rng() % 2 ? 1 + rng() % 3 : 200;
    const size_t got = resolve_internal::EditDistance(a, b, cap);
    ASSERT_EQ(got, WholeTableEditDistance(a, b, cap)) << a << " / " << b << " cap " << cap;
    if (got <= 2) ++small_distances;
  }
  EXPECT_EQ(resolve_internal::EditDistance("jonathan", "jonahtan", 2), 1u);  // one swap
  EXPECT_EQ(resolve_internal::EditDistance("kitten", "sitting", 5), 3u);
  EXPECT_GT(small_distances, 2000u);
}

ResolveEntity E(std::string name, std::string type = "", std::string desc = "", bool fresh = true,
                int64_t frequency = 1) {
  ResolveEntity e;
  e.key = NormalizeEntityName(name);
  e.name = std::move(name);
  e.type = std::move(type);
  e.description = std::move(desc);
  e.frequency = frequency;
  e.fresh = fresh;
  return e;
}

ResolveInput In(std::vector<ResolveEntity> entities) {
  ResolveInput in;
  in.entities = std::move(entities);
  return in;
}

bool Same(const ResolveResult& r, size_t a, size_t b) { return r.canonical[a] == r.canonical[b]; }

// Counts the "Pair N:" blocks of an adjudication prompt.
size_t PairsIn(const ChatRequest& req) {
  const std::string& p = req.messages.back().content;
  size_t n = 0;
  for (size_t at = p.find("Pair "); at != std::string::npos; at = p.find("Pair ", at + 1)) {
    if (at + 5 < p.size() && p[at + 5] >= '1' && p[at + 5] <= '9') ++n;
  }
  return n;
}

// A judge that answers every pair with `same`.
ScriptedChatModel::Responder AllSame(bool same) {
  return [same](const ChatRequest& req) -> Result<std::string> {
    nlohmann::json v = nlohmann::json::array();
    for (size_t k = 1; k <= PairsIn(req); ++k)
      v.push_back({{"pair", k}, {"same", same}, {"reason", "test"}});
    return nlohmann::json{{"verdicts", v}}.dump();
  };
}

// ---- blocking ----

TEST(ResolveBlockingTest, AcronymsContainmentAndAffixesAreCompared) {
  auto r =
      ResolveEntities(In({E("FTC", "organization"), E("Federal Trade Commission", "organization"),
                          E("Jacob Marley", "person"), E("Marley", "person"),
                          E("The Acme Corp.", "organization"), E("Acme", "organization")}),
                      {}, nullptr, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.pairs_compared, 3);  // exactly the three plausible pairs
  EXPECT_DOUBLE_EQ(NameSimilarity("I.B.M.", "IBM"), 1.0);
  EXPECT_GE(NameSimilarity("FTC", "Federal Trade Commission"), 0.9);
  EXPECT_GE(NameSimilarity("Marley", "Jacob Marley"), 0.8);
  EXPECT_DOUBLE_EQ(NameSimilarity("Mr. Scrooge", "Scrooge"), 1.0);
  EXPECT_DOUBLE_EQ(NameSimilarity("The Acme Corp.", "ACME Corporation"), 1.0);
  EXPECT_DOUBLE_EQ(NameSimilarity("Contoso Ltd", "Contoso Limited"), 1.0);
  EXPECT_LT(NameSimilarity("FTC", "FCC"), 0.6);
  EXPECT_LT(NameSimilarity("Apple", "Banana"), 0.3);
}

TEST(ResolveBlockingTest, IncompatibleTypesAreNeverCompared) {
  auto r = ResolveEntities(
      In({E("Jordan", "geo"), E("Jordan", "person"), E("Michael Jordan", "person")}), {}, nullptr,
      nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.pairs_compared, 1);  // geo Jordan meets neither person
  EXPECT_FALSE(Same(*r, 0, 1));
  // The NLP extractor's types and an empty type are compatible with anything.
  auto g = ResolveEntities(In({E("Jordan", "proper noun"), E("Jordan", "person"), E("Jordan", "")}),
                           {}, nullptr, nullptr);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->stats.pairs_compared, 3);
}

TEST(ResolveBlockingTest, OnlyPairsWithAFreshEntityAreCompared) {
  auto old_only = ResolveEntities(In({E("Acme", "", "", false), E("Acme Corp", "", "", false)}), {},
                                  nullptr, nullptr);
  ASSERT_TRUE(old_only.ok());
  EXPECT_EQ(old_only->stats.pairs_compared, 0);
  EXPECT_EQ(old_only->stats.fresh, 0);
  auto one = ResolveEntities(
      In({E("Acme", "", "", false), E("Acme Corp", "", "", false), E("ACME Inc.", "", "", true)}),
      {}, nullptr, nullptr);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->stats.pairs_compared, 2);
  EXPECT_EQ(one->stats.fresh, 1);
}

TEST(ResolveBlockingTest, AFrequentTokenIsNotABlockingKey) {
  std::vector<ResolveEntity> es;
  for (int i = 0; i < 30; ++i)
    es.push_back(E("Street " + std::to_string(1000 + i * 7) + " Zq" + std::to_string(i)));
  ResolveOptions o;
  o.max_block = 10;
  auto r = ResolveEntities(In(es), o, nullptr, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.pairs_compared, 0);
  o.max_block = 100;
  r = ResolveEntities(In(es), o, nullptr, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.pairs_compared, 30 * 29 / 2);
}

// ---- guards ----

TEST(ResolveGuardTest, ConflictsKeepPairsApart) {
  auto conflict = [](const char* a, const char* b, const char* type = "") {
    return MergeConflict(E(a, type), E(b, type));
  };
  EXPECT_TRUE(conflict("John Smith", "Jane Smith", "person"));
  EXPECT_TRUE(conflict("Windows 10", "Windows 11", "product"));
  EXPECT_TRUE(conflict("Windows", "Windows 10", "product"));
  EXPECT_TRUE(conflict("WWDC 2023", "WWDC 2024", "event"));
  EXPECT_TRUE(conflict("iPhone 15", "iPhone 15 Pro", "product"));
  EXPECT_TRUE(conflict("Super Bowl LVII", "Super Bowl LVIII", "event"));
  EXPECT_TRUE(conflict("Ghost of Christmas Past", "Ghost of Christmas Present"));
  EXPECT_TRUE(conflict("Ghost of Christmas Past", "Ghost of Christmas Yet to Come"));
  EXPECT_TRUE(conflict("Bank of America", "Bank of England", "organization"));
  EXPECT_TRUE(conflict("George H. W. Bush", "George W. Bush", "person"));
  EXPECT_TRUE(conflict("William H. Gates Sr.", "William H. Gates III", "person"));
  EXPECT_TRUE(conflict("Mr. Smith", "Ms. Smith", "person"));
  EXPECT_TRUE(conflict("Scrooge", "Scrooge's nephew"));
  EXPECT_TRUE(conflict("Jordan", "Jordan", "geo") == std::nullopt);
  EXPECT_TRUE(MergeConflict(E("Jordan", "geo"), E("Jordan", "person")));
  // Typos, spellings and versions written differently are not conflicts.
  EXPECT_FALSE(conflict("Microsoft", "Microsft", "organization"));
  EXPECT_FALSE(conflict("Maria Garcia", "Maria Garica", "person"));
  EXPECT_FALSE(conflict("María García", "Maria Garcia", "person"));
  EXPECT_FALSE(conflict("Super Bowl LVIII", "Super Bowl 58", "event"));
  EXPECT_FALSE(conflict("Python 3.12", "Python 3.12.0", "product"));
  EXPECT_FALSE(conflict("World War II", "Second World War", "event"));
  EXPECT_FALSE(conflict("Bill Gates", "William Gates", "person"));
  EXPECT_FALSE(conflict("Jacob Marley", "Marley", "person"));
}

TEST(ResolveGuardTest, AShortNameFittingSeveralEntitiesJoinsNone) {
  ScriptedChatModel judge(AllSame(true));
  auto r = ResolveEntities(
      In({E("Smith", "person"), E("John Smith", "person"), E("Jane Smith", "person")}), {}, nullptr,
      &judge);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(Same(*r, 0, 1));
  EXPECT_FALSE(Same(*r, 0, 2));
  EXPECT_FALSE(Same(*r, 1, 2));
  EXPECT_GE(r->stats.guarded, 1);
  // With only one Smith, the short name joins it.
  ScriptedChatModel judge2(AllSame(true));
  auto one =
      ResolveEntities(In({E("Smith", "person"), E("John Smith", "person")}), {}, nullptr, &judge2);
  ASSERT_TRUE(one.ok());
  EXPECT_TRUE(Same(*one, 0, 1));
}

TEST(ResolveGuardTest, ClustersAreNotChainedAcrossAConflict) {
  // The judge says yes to everything; "Ghost of Christmas" may join one spirit, but the two
  // spirits never end up together.
  ScriptedChatModel judge(AllSame(true));
  auto r = ResolveEntities(In({E("Ghost of Christmas Past"), E("Ghost of Christmas"),
                               E("Ghost of Christmas Present"), E("Christmas Past Ghost")}),
                           {}, nullptr, &judge);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(Same(*r, 0, 2));
  EXPECT_FALSE(Same(*r, 2, 3));
}

TEST(ResolveGuardTest, SoftGuardsGoToTheJudgeOnlyWhenThereIsOne) {
  // An age modifier against another lead word, and a spouse role against the honorific form.
  EXPECT_TRUE(MergeConflict(E("Young Scrooge", "person"), E("Older Scrooge", "person")));
  EXPECT_TRUE(MergeConflict(E("Mrs. Cratchit", "person"), E("Cratchit's wife", "person")));
  auto people = [] {
    return In(
        {E("Young Scrooge", "person", "Young Scrooge is the earlier version of Ebenezer Scrooge."),
         E("Older Scrooge", "person", "Older Scrooge is the later version of Ebenezer Scrooge."),
         E("Mrs. Cratchit", "person", "Mrs. Cratchit is the wife of Bob Cratchit."),
         E("Cratchit's wife", "person", "Cratchit's wife is the mother in the Cratchit family.")});
  };
  LexicalEmbedder embedder;
  auto without = ResolveEntities(people(), {}, &embedder, nullptr);
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(Same(*without, 0, 1));
  EXPECT_FALSE(Same(*without, 2, 3));
  ScriptedChatModel yes(AllSame(true));
  auto with = ResolveEntities(people(), {}, &embedder, &yes);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  EXPECT_TRUE(Same(*with, 0, 1));
  EXPECT_TRUE(Same(*with, 2, 3));
  ScriptedChatModel no(AllSame(false));
  auto refused = ResolveEntities(people(), {}, &embedder, &no);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(Same(*refused, 0, 1));
  EXPECT_GE(refused->stats.adjudicated, 2);
  // Hard guards still block with a judge: given names, numbers.
  ScriptedChatModel yes2(AllSame(true));
  auto hard =
      ResolveEntities(In({E("John Smith", "person"), E("Jane Smith", "person"),
                          E("Windows 10", "product", "Windows 10, also known as Windows 11."),
                          E("Windows 11", "product")}),
                      {}, nullptr, &yes2);
  ASSERT_TRUE(hard.ok());
  EXPECT_FALSE(Same(*hard, 0, 1));
  EXPECT_FALSE(Same(*hard, 2, 3));
}

TEST(ResolveMentionTest, ADescriptionNamingAnotherEntityReachesTheJudge) {
  auto in = [] {
    return In(
        {E("Phantom", "person",
           "PHANTOM, also referred to as the Ghost of Christmas Yet to Come, is a silent spirit."),
         E("Ghost of Christmas Yet to Come", "person", "The third spirit to visit the miser."),
         E("Scrooge's clerk", "person",
           "Scrooge's clerk, later identified as Bob Cratchit, is poor."),
         E("Bob Cratchit", "person", "Bob Cratchit works for Ebenezer Scrooge in the office."),
         E("Ebenezer Scrooge", "person", "A miser of London.")});
  };
  // Without a judge a mention never merges.
  auto without = ResolveEntities(in(), {}, nullptr, nullptr);
  ASSERT_TRUE(without.ok());
  // The two identity mentions and "Scrooge's clerk" / "Ebenezer Scrooge" (a shared word, kept
  // apart by the possession guard); not Bob -> Scrooge (a plain mention by a proper name).
  EXPECT_EQ(without->stats.pairs_compared, 3);
  EXPECT_FALSE(Same(*without, 0, 1));
  EXPECT_FALSE(Same(*without, 2, 3));
  ScriptedChatModel judge(AllSame(true));
  auto with = ResolveEntities(in(), {}, nullptr, &judge);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  EXPECT_EQ(with->stats.adjudicated, 2);
  EXPECT_TRUE(Same(*with, 0, 1));
  EXPECT_TRUE(Same(*with, 2, 3));
  EXPECT_FALSE(Same(*with, 3, 4));
  EXPECT_EQ(EstimateAdjudicationCalls(in(), {}), 1);
  // A judge that says no keeps them apart.
  ScriptedChatModel no(AllSame(false));
  auto refused = ResolveEntities(in(), {}, nullptr, &no);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(Same(*refused, 0, 1));
}

TEST(ResolveMentionTest, MentionsScaleLinearly) {
  // 20,000 entities whose descriptions each name a few others: no pairwise scan.
  std::vector<ResolveEntity> es;
  for (int i = 0; i < 20000; ++i) {
    es.push_back(E("Zorblat" + std::to_string(i) + " Quenton", "person",
                   "Zorblat" + std::to_string(i) + " Quenton works with Zorblat" +
                       std::to_string((i + 1) % 20000) + " Quenton and Zorblat" +
                       std::to_string((i + 7) % 20000) + " Quenton in the city."));
  }
  ResolveOptions o;
  o.max_block = 10;
  auto r = ResolveEntities(In(std::move(es)), o, nullptr, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.pairs_compared, 0);  // plain mentions by proper names are not identities
}

// ---- bands and adjudication ----

TEST(ResolveBandTest, OnlyTheMiddleBandIsAdjudicatedInBatches) {
  ScriptedChatModel judge(AllSame(true));
  ResolveOptions o;
  o.adjudication_batch = 2;
  auto r = ResolveEntities(
      In({E("Acme Corp", "organization"), E("ACME Inc.", "organization"),  // same name: merged
          E("Jacob Marley", "person"), E("Marley", "person"),              // middle band
          E("Tim Cook", "person"), E("Cook", "person"),                    // middle band
          E("Priya Raman", "person"), E("P. Raman", "person"),             // middle band
          E("Banana", "product")}),                                        // no partner
      o, nullptr, &judge);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.adjudicated, 3);
  EXPECT_EQ(r->stats.llm_calls, 2);
  ASSERT_EQ(judge.RequestCount(), 2u);
  size_t pairs = 0;
  for (const auto& req : judge.Requests()) {
    pairs += PairsIn(req);
    EXPECT_TRUE(req.json_mode);
    EXPECT_EQ(req.temperature, 0.0);
    EXPECT_EQ(req.messages.back().content.find("Acme"), std::string::npos);
    EXPECT_EQ(req.messages.back().content.find("Banana"), std::string::npos);
  }
  EXPECT_EQ(pairs, 3u);
  EXPECT_TRUE(Same(*r, 0, 1));
  EXPECT_TRUE(Same(*r, 2, 3));
  EXPECT_TRUE(Same(*r, 4, 5));
  EXPECT_TRUE(Same(*r, 6, 7));
  EXPECT_FALSE(Same(*r, 8, 0));
  bool llm_link = false;
  for (const auto& l : r->links) llm_link = llm_link || l.method == ResolveMethod::kLlm;
  EXPECT_TRUE(llm_link);
  EXPECT_EQ(EstimateAdjudicationCalls(
                In({E("Jacob Marley", "person"), E("Marley", "person"), E("Tim Cook", "person"),
                    E("Cook", "person"), E("Priya Raman", "person"), E("P. Raman", "person")}),
                o),
            2);
}

TEST(ResolveBandTest, WithoutAJudgeTheMiddleBandStaysApart) {
  auto r = ResolveEntities(
      In({E("Jacob Marley", "person"), E("Marley", "person"), E("Acme Corp"), E("ACME Inc.")}), {},
      nullptr, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(Same(*r, 0, 1));  // 0.83 by name alone is below the no-LLM band
  EXPECT_TRUE(Same(*r, 2, 3));
}

TEST(ResolveBandTest, ABadReplyIsRetriedNotCachedAndNotFatal) {
  InMemoryCache cache;
  ScriptedModelOptions mo;
  mo.cache = &cache;
  ScriptedChatModel judge(
      [](const ChatRequest&) -> Result<std::string> { return std::string("sure, they match"); },
      mo);
  auto r = ResolveEntities(In({E("Jacob Marley", "person"), E("Marley", "person")}), {}, nullptr,
                           &judge);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.llm_calls, 2);  // the call and one retry
  EXPECT_FALSE(Same(*r, 0, 1));      // no verdict: apart
  EXPECT_EQ(cache.size(), 0u);       // the validator kept the bad replies out of the cache
}

TEST(ResolveBandTest, AReplyMissingPairsKeepsTheAnsweredOnes) {
  ScriptedChatModel judge([](const ChatRequest&) -> Result<std::string> {
    return std::string(R"({"verdicts":[{"pair":1,"same":true,"reason":"same person"}]})");
  });
  ResolveOptions o;
  o.adjudication_batch = 10;
  auto r = ResolveEntities(In({E("Jacob Marley", "person"), E("Marley", "person"),
                               E("Tim Cook", "person"), E("Cook", "person")}),
                           o, nullptr, &judge);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stats.llm_calls, 2);
  const bool marley = Same(*r, 0, 1), cook = Same(*r, 2, 3);
  EXPECT_NE(marley, cook);  // pair 1 answered "same", pair 2 unanswered: apart
}

TEST(ResolveBandTest, ATransportFailureIsReturned) {
  ScriptedChatModel judge(
      [](const ChatRequest&) -> Result<std::string> { return Status::Unavailable("server down"); });
  auto r = ResolveEntities(In({E("Jacob Marley", "person"), E("Marley", "person")}), {}, nullptr,
                           &judge);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
}

TEST(ResolveBandTest, AnEmbeddingFailureIsReturned) {
  ScriptedEmbeddingModel broken(
      [](const std::string&) -> Result<std::vector<float>> { return Status::Timeout("slow"); });
  auto r =
      ResolveEntities(In({E("Acme Corp", "", "a maker of tools"), E("ACME Inc.", "", "tools")}), {},
                      &broken, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout);
}

// ---- prior and user links ----

TEST(ResolveLinksTest, PriorLinksAreKeptAndNotRepeated) {
  ResolveInput in = In({E("Apple", "", "", false), E("Banana", "", "", false), E("Cherry")});
  in.prior_links.push_back({0, 1, 0.9, ResolveMethod::kLlm, "earlier"});
  auto r = ResolveEntities(in, {}, nullptr, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Same(*r, 0, 1));
  EXPECT_FALSE(Same(*r, 0, 2));
  EXPECT_TRUE(r->links.empty());
  EXPECT_EQ(r->stats.merged, 0);
}

TEST(ResolveLinksTest, MustLinkBeatsGuardsAndCannotLinkBeatsEverything) {
  ResolveInput in =
      In({E("John Smith", "person"), E("Jane Smith", "person"), E("Acme Corp"), E("ACME Inc.")});
  in.must_link.push_back({0, 1});
  in.cannot_link.push_back({2, 3});
  auto r = ResolveEntities(in, {}, nullptr, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Same(*r, 0, 1));
  EXPECT_FALSE(Same(*r, 2, 3));
  // cannot_link also wins over a must_link and a prior link.
  ResolveInput both = In({E("A1"), E("B2"), E("C3")});
  both.must_link.push_back({0, 1});
  both.prior_links.push_back({1, 2, 1, ResolveMethod::kUser, ""});
  both.cannot_link.push_back({0, 2});
  auto b = ResolveEntities(both, {}, nullptr, nullptr);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(Same(*b, 0, 1));
  EXPECT_FALSE(Same(*b, 0, 2));
  ResolveInput bad = In({E("A1")});
  bad.must_link.push_back({0, 5});
  EXPECT_EQ(ResolveEntities(bad, {}, nullptr, nullptr).status().code(),
            ErrorCode::kInvalidArgument);
}

// ---- determinism and canonical names ----

std::set<std::set<std::string>> ClustersOf(const ResolveInput& in, const ResolveResult& r) {
  std::map<std::string, std::set<std::string>> by;
  for (size_t i = 0; i < in.entities.size(); ++i) {
    by[in.entities[r.canonical[i]].name + "/" + in.entities[r.canonical[i]].type].insert(
        in.entities[i].name + "/" + in.entities[i].type);
  }
  std::set<std::set<std::string>> out;
  for (auto& [k, v] : by) {
    std::set<std::string> s = v;
    s.insert("canonical=" + k);
    out.insert(s);
  }
  return out;
}

TEST(ResolveDeterminismTest, TheResultDoesNotDependOnInputOrderOrThreads) {
  std::vector<ResolveEntity> es = {
      E("Acme Corp", "organization", "Acme Corp makes fasteners and hand tools in Dayton.", true,
        5),
      E("ACME Corporation", "organization", "ACME Corporation, the Dayton tool maker.", true, 2),
      E("Acme", "organization", "Acme sells tools.", true, 9),
      E("Fabrikam", "organization", "Fabrikam makes coatings and textiles."),
      E("Fabrikam Coatings", "organization", "The coatings unit of Fabrikam."),
      E("John Smith", "person", "John Smith is the CFO of Acme."),
      E("Jane Smith", "person", "Jane Smith is a reporter."),
      E("Smith", "person", "Smith said the deal was good."),
      E("Jacob Marley", "person", "Jacob Marley was Scrooge's partner."),
      E("Marley", "person", "Marley was dead, Scrooge's partner."),
      E("Ghost of Jacob Marley", "person", "The ghost of Scrooge's partner Marley."),
      E("Windows 10", "product", "Windows 10 operating system."),
      E("Win10", "product", "Windows 10, Microsoft's system."),
      E("Windows 11", "product", "Windows 11 operating system.")};
  LexicalEmbedder embedder;
  ScriptedChatModel judge(AllSame(true));
  ResolveOptions o;
  o.adjudication_batch = 3;
  o.llm_concurrency = 4;
  const ResolveInput base = In(es);
  auto first = ResolveEntities(base, o, &embedder, &judge);
  ASSERT_TRUE(first.ok());
  const auto expected = ClustersOf(base, *first);
  std::mt19937 rng(7);
  for (int round = 0; round < 5; ++round) {
    std::shuffle(es.begin(), es.end(), rng);
    const ResolveInput in = In(es);
    ScriptedChatModel j2(AllSame(true));
    auto r = ResolveEntities(in, o, &embedder, &j2);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(ClustersOf(in, *r), expected) << "round " << round;
    EXPECT_EQ(r->stats.pairs_compared, first->stats.pairs_compared);
    EXPECT_EQ(r->stats.adjudicated, first->stats.adjudicated);
  }
  // The canonical spelling is the most complete frequent one.
  const auto& in0 = base;
  const size_t acme = first->canonical[0];
  EXPECT_EQ(first->canonical[1], acme);
  EXPECT_EQ(first->canonical[2], acme);
  EXPECT_EQ(in0.entities[acme].name, "Acme Corp");
}

// ---- names that are descriptions: common words, prepositions, honorifics ----

// Entities whose descriptions write `words` in lower case (the corpus signal for common words).
ResolveEntity Described(std::string name, std::string type, std::string desc) {
  return E(std::move(name), std::move(type), std::move(desc));
}

TEST(ResolveShapeTest, AnExtensionByCommonWordsOrAPrepositionIsNotAutoMerged) {
  auto in = [] {
    return In(
        {Described("FULL PROJECT GUTENBERG LICENSE", "organization",
                   "The full license of the project, with the terms of use of the works."),
         Described("PROJECT GUTENBERG LICENSE", "organization",
                   "The license of the project, with the terms of use of the works; a full copy."),
         Described("CITY OF LONDON", "geo", "The city of London where the story takes place."),
         Described("LONDON", "geo", "London, the city where the story takes place."),
         Described("SPIRIT OF TINY TIM", "person",
                   "The spirit of Tiny Tim lives on in the family."),
         Described("TINY TIM", "person", "Tiny Tim, the youngest child of the family."),
         Described("ROYALTY PAYMENT TO ACME FOUNDATION", "organization",
                   "A royalty payment due to the Acme Foundation each year."),
         Described("ACME FOUNDATION", "organization",
                   "The Acme Foundation receives a payment each year.")});
  };
  LexicalEmbedder embedder;
  auto without = ResolveEntities(in(), {}, &embedder, nullptr);
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  EXPECT_FALSE(Same(*without, 0, 1)) << "common word 'full'";
  EXPECT_FALSE(Same(*without, 2, 3)) << "'city of'";
  EXPECT_FALSE(Same(*without, 4, 5)) << "'spirit of'";
  EXPECT_FALSE(Same(*without, 6, 7)) << "'payment to'";
  EXPECT_TRUE(without->links.empty());
  // A judge may join them: nothing is joined on the score alone.
  ScriptedChatModel yes(AllSame(true));
  auto with = ResolveEntities(in(), {}, &embedder, &yes);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  EXPECT_TRUE(Same(*with, 0, 1));
  EXPECT_TRUE(Same(*with, 2, 3));
  EXPECT_TRUE(Same(*with, 4, 5));
  for (const auto& l : with->links) EXPECT_EQ(l.method, ResolveMethod::kLlm);
  // A given name still extends a name into the same name without a judge.
  auto marley = ResolveEntities(
      In({Described("JACOB MARLEY", "person",
                    "Jacob Marley was the partner of Scrooge, dead seven years."),
          Described("MARLEY", "person", "Marley was the partner of Scrooge, dead seven years.")}),
      {}, &embedder, nullptr);
  ASSERT_TRUE(marley.ok());
  EXPECT_TRUE(Same(*marley, 0, 1));
}

TEST(ResolveShapeTest, CommonNounsUpToAnArticleAreJudgedNotMerged) {
  auto in = [] {
    return In(
        {Described("THE BABY", "person", "The baby sleeps in the cradle by the fire."),
         Described("BABY", "person", "The baby sleeps in the cradle by the fire, quiet."),
         Described("THE FTC", "organization", "The FTC regulates trade and enforces the rules."),
         Described("FTC", "organization", "The FTC regulates trade and enforces the rules.")});
  };
  LexicalEmbedder embedder;
  auto without = ResolveEntities(in(), {}, &embedder, nullptr);
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(Same(*without, 0, 1)) << "'baby' is written in lower case: a common noun";
  EXPECT_TRUE(Same(*without, 2, 3)) << "a proper name up to an article";
  ScriptedChatModel yes(AllSame(true));
  auto with = ResolveEntities(in(), {}, &embedder, &yes);
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(with->stats.adjudicated, 1);
  EXPECT_TRUE(Same(*with, 0, 1));
  ScriptedChatModel no(AllSame(false));
  auto refused = ResolveEntities(in(), {}, &embedder, &no);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(Same(*refused, 0, 1));
  EXPECT_TRUE(Same(*refused, 2, 3));
}

TEST(ResolveShapeTest, AFemaleHonorificAgainstABareNameIsForTheJudge) {
  EXPECT_TRUE(MergeConflict(E("MRS. FEZZIWIG", "person"), E("FEZZIWIG", "person")));
  EXPECT_TRUE(MergeConflict(E("Miss Smith", "person"), E("Smith", "person")));
  EXPECT_FALSE(MergeConflict(E("Mr. Scrooge", "person"), E("Scrooge", "person")));
  EXPECT_FALSE(MergeConflict(E("Mrs. Cratchit", "person"), E("Mrs Cratchit", "person")));
  auto in = [] {
    return In(
        {Described("MRS. FEZZIWIG", "person",
                   "Fezziwig hosts the Christmas ball at the warehouse."),
         Described("FEZZIWIG", "person", "Fezziwig hosts the Christmas ball at the warehouse.")});
  };
  LexicalEmbedder embedder;
  auto without = ResolveEntities(in(), {}, &embedder, nullptr);
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(Same(*without, 0, 1));
  ScriptedChatModel yes(AllSame(true));
  auto with = ResolveEntities(in(), {}, &embedder, &yes);
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(with->stats.adjudicated, 1);
  EXPECT_TRUE(Same(*with, 0, 1));
  ScriptedChatModel no(AllSame(false));
  auto refused = ResolveEntities(in(), {}, &embedder, &no);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(Same(*refused, 0, 1));
}

TEST(ResolveShapeTest, PairsThatRarelyJoinDoNotReachTheJudge) {
  ScriptedChatModel judge(AllSame(true));
  LexicalEmbedder embedder;
  auto r = ResolveEntities(
      In({// A common noun inside a longer description: a kind or a part of it.
          Described("SHOP", "geo", "The shop sells goods; a shop on the street."),
          Described("BACK-SHOP", "geo", "The back room of the shop on the street."),
          // A name followed by common words names another thing (people, events)...
          Described("CHRISTMAS", "event",
                    "Christmas is kept by everyone in the town, a day of feasting."),
          Described("CHRISTMAS DAY", "event",
                    "Christmas Day, when the dinner is served in the town."),
          // ...but organisations drop descriptors from their names: judged.
          Described("Delta", "organization", "Delta flies passengers; an airline."),
          Described("Delta Air Lines", "organization",
                    "Delta Air Lines flies passengers; an airline."),
          // Lead modifiers of two common-noun names.
          Described("THE DEAD MAN", "person", "The dead man lies on the bed, unwatched."),
          Described("THE OLD MAN", "person", "The old man sits by the fire in the shop."),
          // A role name whose first sentence names a place after a preposition.
          Described("THE BRIDGE", "geo", "A bridge in the Market Town, by the river."),
          Described("MARKET TOWN", "geo", "Market Town, with its church and river.")}),
      {}, &embedder, &judge);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.adjudicated, 1) << "only Delta / Delta Air Lines";
  EXPECT_TRUE(Same(*r, 4, 5));
  EXPECT_FALSE(Same(*r, 0, 1));
  EXPECT_FALSE(Same(*r, 2, 3));
  EXPECT_FALSE(Same(*r, 6, 7));
  EXPECT_FALSE(Same(*r, 8, 9));
  // A parenthesis gives another name: judged even with a common word.
  ScriptedChatModel judge2(AllSame(true));
  auto aside = ResolveEntities(
      In({Described("BOY (IGNORANCE)", "person", "A boy, wretched, named Ignorance."),
          Described("IGNORANCE", "person", "Ignorance, a boy, wretched.")}),
      {}, &embedder, &judge2);
  ASSERT_TRUE(aside.ok());
  EXPECT_EQ(aside->stats.adjudicated, 1);
  EXPECT_TRUE(Same(*aside, 0, 1));
  EXPECT_EQ(
      EstimateAdjudicationCalls(In({Described("SHOP", "geo", "The shop sells goods; a shop."),
                                    Described("BACK-SHOP", "geo", "The back room of the shop.")}),
                                {}),
      0);
}

// ---- the no-LLM band on NLP-extracted names (A Christmas Carol) ----

TEST(ResolveNlpTest, ChristmasCarolNamesResolveWithoutAModel) {
  const std::string pn = "proper noun";
  ResolveInput in = In({
      E("Jacob Marley", pn,
        "Marley was dead, to begin with. Jacob Marley was Scrooge's partner. 'In life I was your "
        "partner, Jacob Marley.' Old Marley was as dead as a door-nail.",
        true, 12),
      E("Marley", pn,
        "Marley was dead, to begin with. There is no doubt that Marley was dead. Scrooge and he "
        "were partners for I don't know how many years; Scrooge was his sole executor. Old Marley "
        "was as dead as a door-nail.",
        true, 40),
      E("Ebenezer Scrooge", pn,
        "Ebenezer Scrooge, a squeezing, wrenching, grasping, scraping, clutching, covetous old "
        "sinner. Scrooge signed the register of Marley's burial; Scrooge was his sole mourner.",
        true, 3),
      E("Scrooge", pn,
        "Oh! but he was a tight-fisted hand at the grindstone, Scrooge! a squeezing, wrenching, "
        "grasping, scraping, clutching, covetous old sinner! Scrooge signed it. Scrooge never "
        "painted out Old Marley's name.",
        true, 300),
      E("Ghost of Christmas Past", pn,
        "'I am the Ghost of Christmas Past.' 'Long Past?' 'No. Your past.' The Ghost of Christmas "
        "Past, a phantom showing things past, took Scrooge to the school.",
        true, 4),
      E("Ghost of Christmas Present", pn,
        "'I am the Ghost of Christmas Present,' said the Spirit. 'Look upon me!' The Ghost of "
        "Christmas Present rose, a jolly Giant, glorious to see.",
        true, 4),
      E("Ghost of Christmas Yet to Come", pn,
        "The Ghost of Christmas Yet to Come, a phantom showing the shadows of things that have "
        "not happened. 'I am in the presence of the Ghost of Christmas Yet To Come?'",
        true, 3),
  });
  LexicalEmbedder embedder;
  auto r = ResolveEntities(in, {}, &embedder, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(Same(*r, 0, 1)) << "Jacob Marley + Marley";
  EXPECT_TRUE(Same(*r, 2, 3)) << "Ebenezer Scrooge + Scrooge";
  EXPECT_FALSE(Same(*r, 0, 2));
  EXPECT_FALSE(Same(*r, 4, 5));
  EXPECT_FALSE(Same(*r, 4, 6));
  EXPECT_FALSE(Same(*r, 5, 6));
  EXPECT_EQ(r->canonical[1], 0u) << in.entities[r->canonical[1]].name;  // the full name
  // Ebenezer Scrooge is named 3 times against Scrooge's 300: not a reasonably frequent spelling.
  EXPECT_EQ(r->canonical[2], 3u) << in.entities[r->canonical[2]].name;
}

// The names and sentences the built-in NLP extractor gives for A Christmas Carol (the demo book,
// tests/data/christmas_carol/christmas_carol.txt): each description is the sentence the name
// appeared in, and the lexical embedder scores such sentences low.
ResolveInput ChristmasCarolNlpNames() {
  const std::string pn = "proper noun";
  return In({
      E("Jacob Marley", pn, "'In life I was your partner, Jacob Marley.'", true, 7),
      E("Marley", pn,
        "Ebenezer Scrooge, a grasping, covetous old man, the surviving partner of the firm of "
        "Scrooge and Marley.",
        true, 10),
      E("Old Jacob Marley", pn, "'Old Jacob Marley, tell me more!", true, 1),
      E("Ghost of Jacob Marley", pn,
        "Ghost of Jacob Marley, a spectre of Scrooge's former partner in business.", true, 2),
      E("Ebenezer Scrooge", pn, "Bob Cratchit, clerk to Ebenezer Scrooge.", true, 5),
      E("Scrooge", pn, "[Illustration: _\"How now?\" said Scrooge, caustic and cold as ever.", true,
        36),
      E("Uncle Scrooge", pn,
        "He may rail at Christmas till he dies, but he can't help thinking better of it--I defy "
        "him--if he finds me going there, in good temper, year after year, and saying, \"Uncle "
        "Scrooge, how are you?\"",
        true, 2),
      E("Whereat Scrooge", pn,
        "Whereat Scrooge's niece's sister--the plump one with the lace tucker: not the one with "
        "the roses--blushed.",
        true, 1),
      E("Scrooge Scrooge", pn,
        "Sometimes people new to the business called Scrooge Scrooge, and sometimes Marley, but "
        "he answered to both names.",
        true, 1),
      E("Ghost of Christmas Past", pn, "Ghost of Christmas Past, a phantom showing things past.",
        true, 4),
      E("Ghost of Christmas Present", pn,
        "Ghost of Christmas Present, a spirit of a kind, generous, and hearty nature.", true, 6),
      E("Ghost of Christmas Yet to Come", pn,
        "Ghost of Christmas Yet to Come, an apparition showing the shadows of things which yet may "
        "happen.",
        true, 3),
  });
}

TEST(ResolveNlpTest, AShortNameJoinsItsBestFitWhenTheFitsDoNotFirmlyConflict) {
  // "Marley" fits "Jacob Marley", "Old Jacob Marley" and "Ghost of Jacob Marley", which only
  // soft-conflict (an age word, an "X of Y" extension): it joins the full name. "Scrooge" fits
  // "Ebenezer Scrooge"; "Whereat Scrooge" (a word seen only at a sentence start) and "Scrooge
  // Scrooge" (the name again) are no other Scrooge.
  const ResolveInput in = ChristmasCarolNlpNames();
  EXPECT_TRUE(MergeConflict(in.entities[2], in.entities[3]));  // a soft conflict
  LexicalEmbedder embedder;
  auto r = ResolveEntities(in, {}, &embedder, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(Same(*r, 0, 1)) << "Jacob Marley + Marley";
  EXPECT_TRUE(Same(*r, 4, 5)) << "Ebenezer Scrooge + Scrooge";
  EXPECT_TRUE(Same(*r, 5, 6)) << "Scrooge + Uncle Scrooge";
  EXPECT_FALSE(Same(*r, 0, 5));
  EXPECT_FALSE(Same(*r, 0, 3)) << "the Ghost of Jacob Marley is not joined on the name alone";
  for (size_t g : {9u, 10u, 11u}) {
    for (size_t o = 0; o < in.entities.size(); ++o) {
      if (o == g) continue;
      EXPECT_FALSE(Same(*r, g, o)) << in.entities[g].name << " + " << in.entities[o].name;
    }
  }
  EXPECT_EQ(r->canonical[1], 0u) << in.entities[r->canonical[1]].name;
  EXPECT_EQ(r->canonical[4], 5u) << in.entities[r->canonical[4]].name;  // the frequent spelling

  // Fits that firmly conflict keep the short name apart from all of them: given names.
  ResolveInput smiths = ChristmasCarolNlpNames();
  smiths.entities.push_back(
      E("Fan Scrooge", "proper noun",
        "'I have come to bring you home, dear brother!' said Fan Scrooge to Ebenezer.", true, 2));
  auto s = ResolveEntities(smiths, {}, &embedder, nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(Same(*s, 4, 5));
  EXPECT_FALSE(Same(*s, 5, 12));
  EXPECT_TRUE(Same(*s, 0, 1)) << "the Marleys are not affected";
  // Without a judge "Smith" stays apart from John and Jane Smith, and joins a lone John Smith.
  auto apart = ResolveEntities(
      In({E("Smith", "person"), E("John Smith", "person"), E("Jane Smith", "person")}), {}, nullptr,
      nullptr);
  ASSERT_TRUE(apart.ok());
  EXPECT_FALSE(Same(*apart, 0, 1));
  EXPECT_FALSE(Same(*apart, 0, 2));
  // A possessor or a common word is no given name.
  auto owner =
      ResolveEntities(In({E("Churchyard", "geo", "He walked past the Churchyard at night."),
                          E("St. Paul's Churchyard", "geo",
                            "Books were sold in St. Paul's Churchyard, said Paul.")}),
                      {}, &embedder, nullptr);
  ASSERT_TRUE(owner.ok());
  EXPECT_FALSE(Same(*owner, 0, 1));
}

TEST(ResolveNlpTest, AKinshipTitleIsAFormOfAddress) {
  // "Uncle Scrooge" (Fred: "Uncle Scrooge, how are you?") is a form of "Scrooge", not another
  // given name; the title still carries its gender.
  auto conflict = [](const char* a, const char* b) {
    return MergeConflict(E(a, "person"), E(b, "person"));
  };
  EXPECT_FALSE(conflict("Uncle Scrooge", "Scrooge"));
  EXPECT_FALSE(conflict("Uncle Scrooge", "Ebenezer Scrooge"));
  EXPECT_DOUBLE_EQ(NameSimilarity("Uncle Scrooge", "Scrooge"), 1.0);
  EXPECT_TRUE(conflict("Aunt Scrooge", "Mr. Scrooge"));
  EXPECT_TRUE(conflict("John Scrooge", "Ebenezer Scrooge"));
  // A kinship word before "of" names a relation, not the person.
  EXPECT_LT(NameSimilarity("Uncle of Fred", "Fred"), 1.0);
  // "Father" and "Brother" are not stripped: "Father Christmas" is not "Christmas".
  EXPECT_LT(NameSimilarity("Father Christmas", "Christmas"), 1.0);
}

}  // namespace
}  // namespace grag

namespace grag {
namespace {

// Literal values (dates, numbers, amounts) are attributes, not names with variants: never
// compared, never judged; only the same value (one key) is one entity.
TEST(ResolveLiteralTest, DatesNumbersAndAmountsAreNotCompared) {
  ScriptedChatModel judge(AllSame(true));
  auto r = ResolveEntities(
      In({E("1987", "date"), E("12 March 1987", "date"), E("March 1987", "date"),
          E("$4.5 million", "money"), E("4.5 million", "money"), E("3,200 members", "quantity"),
          E("3,200", "quantity"), E("Jacob Marley", "person"), E("Marley", "person")}),
      {}, nullptr, &judge);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stats.pairs_compared, 1);  // Marley alone
  EXPECT_FALSE(Same(*r, 0, 1));
  EXPECT_FALSE(Same(*r, 3, 4));
  EXPECT_TRUE(Same(*r, 7, 8));
  for (const ChatRequest& req : judge.Requests()) {
    EXPECT_EQ(req.messages.back().content.find("1987"), std::string::npos);
  }
}

// The judge's cap: no more calls than max_judge_calls; the most similar pairs are judged, the
// others stay apart unjudged.
TEST(ResolveCapTest, TheJudgeMakesNoMoreCallsThanItsCap) {
  auto in = [] {
    return In({E("Jacob Marley", "person"), E("Marley", "person"), E("Bob Cratchit", "person"),
               E("Cratchit", "person"), E("Fred Holywell", "person"), E("Holywell", "person"),
               E("Martha Finch", "person"), E("Finch", "person"), E("Dick Wilkins", "person"),
               E("Wilkins", "person")});
  };
  ResolveOptions o;
  o.adjudication_batch = 1;
  ScriptedChatModel all(AllSame(true));
  auto uncapped = ResolveEntities(in(), o, nullptr, &all);
  ASSERT_TRUE(uncapped.ok()) << uncapped.status().ToString();
  ASSERT_GT(uncapped->stats.adjudicated, 2);
  EXPECT_EQ(uncapped->stats.not_judged_capped, 0);

  o.max_judge_calls = 2;
  EXPECT_EQ(EstimateAdjudicationCalls(in(), o), 2);
  ScriptedChatModel capped_judge(AllSame(true));
  auto capped = ResolveEntities(in(), o, nullptr, &capped_judge);
  ASSERT_TRUE(capped.ok()) << capped.status().ToString();
  EXPECT_EQ(capped_judge.RequestCount(), 2u);
  EXPECT_EQ(capped->stats.adjudicated, 2);
  EXPECT_EQ(capped->stats.not_judged_capped, uncapped->stats.adjudicated - 2);
  int joined = 0;
  for (size_t i = 0; i < 10; i += 2) joined += Same(*capped, i, i + 1) ? 1 : 0;
  int joined_before = 0;
  for (size_t i = 0; i < 10; i += 2) joined_before += Same(*uncapped, i, i + 1) ? 1 : 0;
  EXPECT_EQ(joined_before - joined, uncapped->stats.adjudicated - 2);
}

}  // namespace
}  // namespace grag
