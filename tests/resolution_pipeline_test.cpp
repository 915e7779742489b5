// Entity resolution inside the index pipeline (issue 14): names of one thing become one entity,
// an update resolves only its new names, removing the document behind a merge undoes it, and a
// person's merges and splits win and survive re-indexing.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include "grag/extract.h"
#include "grag/indexer.h"
#include "grag/lexical_embedder.h"
#include "grag/store.h"
#include "support/fake_graphrag_llm.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

using testing::FakeGraphRagReply;
using testing::PromptKind;
using testing::TempDir;

struct Ent {
  std::string name;
  std::string description;
};

// What the scripted extractor finds in each document (found by its "[dN]" marker).
const std::map<std::string,
               std::pair<std::vector<Ent>, std::vector<std::pair<std::string, std::string>>>>&
Extractions() {
  static const auto* m = new std::map<
      std::string, std::pair<std::vector<Ent>, std::vector<std::pair<std::string, std::string>>>>{
      {"[d0]",
       {{{"Jacob Marley", "Jacob Marley was Scrooge's business partner; he died seven years ago."},
         {"Ebenezer Scrooge", "Ebenezer Scrooge is a miserly London businessman."}},
        {{"Jacob Marley", "Ebenezer Scrooge"}}}},
      {"[d1]",
       {{{"Marley", "Marley was Scrooge's business partner, who died seven years ago."},
         {"Scrooge", "Scrooge is a miserly businessman who keeps a counting-house in London."},
         {"Bob Cratchit", "Bob Cratchit is Scrooge's poorly paid clerk."}},
        {{"Marley", "Scrooge"}, {"Scrooge", "Bob Cratchit"}}}},
      {"[d2]",
       {{{"Fred", "Fred is Scrooge's cheerful nephew who invites him to dinner."},
         {"Scrooge", "Scrooge is a miserly businessman who refuses his nephew's invitation."}},
        {{"Fred", "Scrooge"}}}},
      {"[d3]",
       {{{"Mr. Scrooge", "Mr. Scrooge is the miserly businessman of the counting-house."},
         {"Tiny Tim", "Tiny Tim is Bob Cratchit's youngest son."},
         {"Bob Cratchit", "Bob Cratchit is a clerk and the father of Tiny Tim."}},
        {{"Mr. Scrooge", "Bob Cratchit"}, {"Tiny Tim", "Bob Cratchit"}}}},
      {"[d4]",
       {{{"Young Scrooge", "Young Scrooge is Ebenezer Scrooge as a boy, alone at his school."},
         {"Fred", "Fred is Scrooge's nephew."}},
        {{"Young Scrooge", "Fred"}}}},
  };
  return *m;
}

// The oracle of the adjudication prompt: two names are one person when their last words agree.
std::string LastWord(std::string_view line) {
  const std::string key = NormalizeEntityName(line);
  const auto sp = key.rfind(' ');
  return sp == std::string::npos ? key : key.substr(sp + 1);
}

class Model {
 public:
  explicit Model(KeyValueCache* cache) {
    ScriptedModelOptions mo;
    mo.cache = cache;
    model_ = std::make_unique<ScriptedChatModel>(
        [this](const ChatRequest& req) -> Result<std::string> {
          std::string last;
          for (const auto& m : req.messages) {
            if (m.role == "user") last = m.content;
          }
          std::lock_guard<std::mutex> lock(mu_);
          if (last.find("Pair 1:") != std::string::npos) {
            ++calls_["adjudicate"];
            judge_prompts_.push_back(last);
            return Adjudicate(last);
          }
          const std::string kind = PromptKind(last);
          ++calls_[kind];
          if (kind != "extract") return FakeGraphRagReply(last);
          for (const auto& [marker, found] : Extractions()) {
            if (last.find(marker) == std::string::npos) continue;
            nlohmann::json j{{"entities", nlohmann::json::array()},
                             {"relationships", nlohmann::json::array()}};
            for (const auto& e : found.first) {
              j["entities"].push_back(
                  {{"name", e.name}, {"type", "person"}, {"description", e.description}});
            }
            for (const auto& [a, b] : found.second) {
              j["relationships"].push_back({{"source", a},
                                            {"target", b},
                                            {"description", a + " knows " + b},
                                            {"strength", 2}});
            }
            return j.dump();
          }
          return std::string(R"({"entities": [], "relationships": []})");
        },
        mo);
  }
  ChatModel* get() { return model_.get(); }
  int Calls(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[kind];
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.clear();
    judge_prompts_.clear();
  }
  std::vector<std::string> JudgePrompts() {
    std::lock_guard<std::mutex> lock(mu_);
    return judge_prompts_;
  }

 private:
  static std::string Adjudicate(const std::string& prompt) {
    nlohmann::json verdicts = nlohmann::json::array();
    size_t pos = 0;
    for (int pair = 1;; ++pair) {
      pos = prompt.find("Pair " + std::to_string(pair) + ":", pos);
      if (pos == std::string::npos) break;
      auto name_of = [&](const char* side) {
        const size_t at = prompt.find(std::string(side) + "name: ", pos);
        const size_t from = at + std::string(side).size() + 6;
        return prompt.substr(from, prompt.find(" |", from) - from);
      };
      const bool same = LastWord(name_of("A: ")) == LastWord(name_of("B: "));
      verdicts.push_back(
          {{"pair", pair}, {"same", same}, {"reason", same ? "same surname" : "different"}});
      ++pos;
    }
    return nlohmann::json{{"verdicts", verdicts}}.dump();
  }

  std::unique_ptr<ScriptedChatModel> model_;
  std::mutex mu_;
  std::map<std::string, int> calls_;
  std::vector<std::string> judge_prompts_;
};

struct Project {
  TempDir dir;
  Config config;
  std::unique_ptr<Store> store;
  std::unique_ptr<Model> model;
  LexicalEmbedder embedder;

  Project() {
    for (int d = 0; d < 3; ++d) WriteDoc(d);
    config.root = dir / "proj";
    config.llm.concurrency = 2;
    store = std::move(Store::Open(config.Resolve(config.store.path))).value();
    model = std::make_unique<Model>(&store->ReplyCache());
  }
  std::string WriteDoc(int d) const {
    return dir.Write(
        "proj/input/doc" + std::to_string(d) + ".txt",
        "[d" + std::to_string(d) + "] A passage of the story, number " + std::to_string(d) + ".");
  }
  Result<IndexSummary> Run(IndexRequest request = {}) {
    IndexContext ctx;
    ctx.store = store.get();
    ctx.chat = model->get();
    ctx.embedder = &embedder;
    return RunIndex(config, request, ctx);
  }
  Result<IndexSummary> ApplyCorrections() {
    IndexRequest r;
    r.graph_only = true;
    return Run(r);
  }
  // Entity name_key -> the set of extracted name keys resolved into it.
  std::map<std::string, std::set<std::string>> Clusters() {
    std::map<std::string, std::set<std::string>> out;
    for (const auto& a : store->ListAliases().value()) out[a.canonical_key].insert(a.name_key);
    return out;
  }
  std::set<std::string> EntityKeys() {
    std::set<std::string> out;
    for (const auto& e : store->ListEntities().value()) out.insert(e.name_key);
    return out;
  }
};

TEST(ResolutionPipelineTest, VariantsBecomeOneEntityAndAnyNameFindsIt) {
  Project p;
  auto s = p.Run();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->resolution_fresh,
            6);  // jacob marley, ebenezer scrooge, marley, scrooge, bob cratchit, fred
  EXPECT_EQ(s->resolution_merged, 2);
  EXPECT_EQ(p.EntityKeys(),
            (std::set<std::string>{"bob cratchit", "ebenezer scrooge", "fred", "jacob marley"}));
  const auto clusters = p.Clusters();
  EXPECT_EQ(clusters.at("jacob marley"), (std::set<std::string>{"jacob marley", "marley"}));
  EXPECT_EQ(clusters.at("ebenezer scrooge"),
            (std::set<std::string>{"ebenezer scrooge", "scrooge"}));

  // The merged entity holds every variant's descriptions, chunks and relationships.
  auto jm = p.store->GetEntityByKey("marley");
  ASSERT_TRUE(jm.ok() && jm->has_value());
  EXPECT_EQ((*jm)->name, "Jacob Marley");
  EXPECT_EQ((*jm)->frequency, 2);  // d0's chunk and d1's
  EXPECT_NE((*jm)->description.find("who died seven years ago"), std::string::npos);
  auto rels = p.store->ListRelationshipsOf((*jm)->id);
  ASSERT_TRUE(rels.ok());
  ASSERT_EQ(rels->size(), 1u);  // Marley-Scrooge and Jacob Marley-Ebenezer Scrooge are one edge
  EXPECT_DOUBLE_EQ((*rels)[0].weight, 4);

  // Re-running on unchanged input resolves nothing again and calls no model.
  p.model->Reset();
  s = p.Run();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->resolution_fresh, 0);
  EXPECT_EQ(s->usage.calls, 0);
  EXPECT_EQ(p.Clusters(), clusters);
}

TEST(ResolutionPipelineTest, AnUpdateResolvesOnlyItsNewNames) {
  Project p;
  ASSERT_TRUE(p.Run().ok());
  const auto before = p.Clusters();
  IndexRequest add;
  add.paths = {p.WriteDoc(3)};
  add.sync_folders = false;
  p.model->Reset();
  auto s = p.Run(add);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->resolution_fresh, 2);  // mr scrooge and tiny tim; bob cratchit is known
  const auto after = p.Clusters();
  EXPECT_EQ(after.at("ebenezer scrooge"),
            (std::set<std::string>{"ebenezer scrooge", "mr scrooge", "scrooge"}));
  EXPECT_EQ(after.at("jacob marley"), before.at("jacob marley"));
  EXPECT_TRUE(after.count("tiny tim"));
}

TEST(ResolutionPipelineTest, RemovingTheOnlyDocumentBehindAMergeUndoesIt) {
  Project p;
  ASSERT_TRUE(p.Run().ok());
  IndexRequest remove;
  remove.remove = {"doc0.txt"};  // the only one naming Jacob Marley and Ebenezer Scrooge
  auto s = p.Run(remove);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const auto keys = p.EntityKeys();
  EXPECT_TRUE(keys.count("marley"));
  EXPECT_TRUE(keys.count("scrooge"));
  EXPECT_FALSE(keys.count("jacob marley"));
  EXPECT_EQ(p.Clusters().at("marley"), (std::set<std::string>{"marley"}));
}

TEST(ResolutionPipelineTest, APersonsMergeAndSplitWinAndSurviveReResolution) {
  Project p;
  ASSERT_TRUE(p.Run().ok());
  // Split "Scrooge" off Ebenezer Scrooge; merge Fred into Bob Cratchit (wrong, but theirs to say).
  auto split = RecordEntitySplit(*p.store, "Ebenezer Scrooge", "Scrooge");
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  EXPECT_EQ(*split, 1);
  auto merged = RecordEntityMerge(*p.store, "fred", "BOB CRATCHIT");
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_TRUE(*merged);
  auto s = p.ApplyCorrections();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->chunks_extracted, 0);
  auto clusters = p.Clusters();
  EXPECT_EQ(clusters.at("ebenezer scrooge"), (std::set<std::string>{"ebenezer scrooge"}));
  EXPECT_EQ(clusters.at("scrooge"), (std::set<std::string>{"scrooge"}));
  EXPECT_EQ(clusters.at("bob cratchit"), (std::set<std::string>{"bob cratchit", "fred"}));
  for (const auto& a : p.store->ListAliases().value()) {
    if (a.name_key == "fred") {
      EXPECT_EQ(a.method, "user");
    }
  }

  // New settings resolve everything again; the person's decisions still win.
  p.config.resolution.merge_threshold = 0.9;
  s = p.Run();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->resolution_fresh, 6);
  clusters = p.Clusters();
  EXPECT_EQ(clusters.at("scrooge"), (std::set<std::string>{"scrooge"}));
  EXPECT_EQ(clusters.at("bob cratchit"), (std::set<std::string>{"bob cratchit", "fred"}));
  EXPECT_EQ(clusters.at("jacob marley"), (std::set<std::string>{"jacob marley", "marley"}));

  // Clear errors for names the index does not know, or a name that is not the entity's.
  EXPECT_EQ(RecordEntityMerge(*p.store, "Fred", "Nobody").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(RecordEntitySplit(*p.store, "Jacob Marley", "Fred").status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(RecordEntityMerge(*p.store, "Fred", "fred").status().code(),
            ErrorCode::kInvalidArgument);
}

TEST(ResolutionPipelineTest, TurnedOffNothingMergesButAPersonsMergeStillApplies) {
  Project p;
  p.config.resolution.enabled = false;
  auto s = p.Run();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->resolution_merged, 0);
  EXPECT_EQ(p.EntityKeys().size(), 6u);
  EXPECT_EQ(p.model->Calls("adjudicate"), 0);
  ASSERT_TRUE(RecordEntityMerge(*p.store, "Marley", "Jacob Marley").ok());
  ASSERT_TRUE(p.ApplyCorrections().ok());
  EXPECT_EQ(p.EntityKeys().size(), 5u);
}

TEST(ResolutionPipelineTest, TheJudgesPromptIsAnEditableFileAndEditingItResolvesAgain) {
  Project p;
  p.WriteDoc(4);  // "Young Scrooge": an age word against a given name is the judge's to decide
  ASSERT_TRUE(p.Run().ok());
  const auto default_prompts = p.model->JudgePrompts();
  ASSERT_FALSE(default_prompts.empty());
  EXPECT_NE(default_prompts[0].find("entity-resolution judge"), std::string::npos);
  p.dir.Write("proj/prompts/resolve_entities.md",
              "OUR OWN JUDGE. Same thing? Answer {\"verdicts\": [...]}.\n{{pairs}}");
  p.model->Reset();
  auto s = p.Run();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->resolution_fresh, 7);  // a new judge: every name is resolved again
  const auto edited = p.model->JudgePrompts();
  ASSERT_FALSE(edited.empty());
  EXPECT_EQ(edited[0].rfind("OUR OWN JUDGE.", 0), 0u);
  EXPECT_NE(edited[0].find("Pair 1:"), std::string::npos);
  // A prompt that lost its placeholder is refused, naming the file.
  p.dir.Write("proj/prompts/resolve_entities.md", "no pairs here");
  p.config.resolution.merge_threshold = 0.9;  // so resolution runs again
  s = p.Run();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("{{pairs}}"), std::string::npos) << s.status().ToString();
}

}  // namespace
}  // namespace grag
