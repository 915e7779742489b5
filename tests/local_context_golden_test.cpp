// The local context, item by item, against a recorded copy: which items, in which order, with
// which text, via, tokens and usage. The graph is built to exercise every ranking rule (both
// ends matched, shared neighbours, the walk, weight and degree ties, chunks of several matched
// entities, empty descriptions, report levels and ratings) and is large enough that only part
// of each ranking fits the budget. Any change to how candidates are collected, ranked or
// rendered shows here as a diff.
//
// The recorded copies are tests/data/local_context/*.txt. To record them again after an
// intended change, run with GRAG_UPDATE_GOLDEN=1 and review the diff.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "grag/local_search.h"
#include "grag/store.h"
#include "grag/tokenizer.h"
#include "grag/words.h"
#include "support/temp_dir.h"

namespace grag {
namespace {

const Tokenizer& Tok() {
  static const Tokenizer* tok = Tokenizer::Get("o200k_base").value();
  return *tok;
}

// A small deterministic generator (the graph must be the same on every run and platform).
class Lcg {
 public:
  explicit Lcg(uint64_t seed) : state_(seed) {}
  uint32_t Next() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(state_ >> 33);
  }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint32_t>(n)); }

 private:
  uint64_t state_;
};

class LocalContextGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open(dir_ / "index.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    Build();
  }

  int64_t Entity(const std::string& name, const std::string& type, const std::string& desc) {
    EntityRecord e;
    e.name = name;
    e.name_key = NormalizeEntityName(name);
    e.type = type;
    e.description = desc;
    auto id = store_->UpsertEntity(e);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.value_or(0);
  }

  void Rel(int64_t a, int64_t b, double weight, const std::string& desc) {
    RelationshipRecord r;
    r.source_id = a;
    r.target_id = b;
    r.weight = weight;
    r.description = desc;
    auto id = store_->UpsertRelationship(r);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
  }

  void Build() {
    Lcg rng(20261203);
    const std::vector<std::string> words = {"harbour", "ledger", "signal", "orchard", "copper",
                                            "lantern", "meadow", "engine", "river",   "archive"};
    auto sentence = [&](int n) {
      std::string s;
      for (int i = 0; i < n; ++i) {
        s += (i ? " " : "") + words[static_cast<size_t>(rng.Below(static_cast<int>(words.size())))];
      }
      return s;
    };
    // Three entities the question names, and 60 others.
    const int64_t alice = Entity("Alice Hart", "person", "A surveyor of the northern coast.");
    const int64_t bram = Entity("Bram Stone", "person", "");
    const int64_t cora = Entity("Cora Vale", "organization", "A shipping cooperative.");
    matched_ = {alice, bram, cora};
    std::vector<int64_t> nodes;
    for (int i = 0; i < 60; ++i) {
      nodes.push_back(Entity("Node " + std::to_string(i), i % 3 == 0 ? "place" : "thing",
                             i % 4 == 0 ? "" : "Node number " + std::to_string(i) + "."));
    }
    // Both ends matched.
    Rel(alice, bram, 2, "Alice and Bram survey together.");
    Rel(bram, cora, 2, "");
    // Each matched entity to about 30 nodes (shared ones reach two or three matched entities),
    // weights from a few values so that ties fall to degree and id; some descriptions empty,
    // some long.
    for (int64_t m : matched_) {
      for (int64_t n : nodes) {
        if (rng.Below(2) != 0) continue;
        const double weight = 1 + rng.Below(3);
        const int kind = rng.Below(5);
        Rel(m, n, weight, kind == 0 ? "" : sentence(kind == 4 ? 40 : 3 + rng.Below(8)));
      }
    }
    // Among the nodes, to vary their degrees.
    for (int i = 0; i < 80; ++i) {
      const int a = rng.Below(60);
      const int b = rng.Below(60);
      if (a != b) Rel(nodes[static_cast<size_t>(a)], nodes[static_cast<size_t>(b)], 1, sentence(4));
    }
    // Documents: chunks naming matched entities and nodes.
    std::vector<std::string> chunk_ids;
    for (int d = 0; d < 6; ++d) {
      const std::string doc_id = "docs/d" + std::to_string(d) + ".txt";
      Document doc;
      doc.id = doc_id;
      doc.title = doc_id;
      doc.source_path = doc_id;
      doc.content_hash = "hash-" + doc_id;
      std::vector<ChunkRecord> chunks;
      for (int c = 0; c < 12; ++c) {
        ChunkRecord chunk;
        chunk.id = doc_id + "#" + std::to_string(c);
        chunk.document_id = doc_id;
        chunk.index = c;
        chunk.text = sentence(20 + rng.Below(40));
        if (rng.Below(3) == 0) chunk.text += " Alice Hart was there.";
        if (rng.Below(4) == 0) chunk.text += " Cora Vale shipped it.";
        doc.text += chunk.text + "\n";
        chunks.push_back(chunk);
        chunk_ids.push_back(chunk.id);
      }
      ASSERT_TRUE(store_->UpsertDocument(doc).ok());
      auto changes = store_->ReplaceDocumentChunks(doc_id, chunks);
      ASSERT_TRUE(changes.ok()) << changes.status().ToString();
    }
    for (int64_t e : matched_) {
      std::vector<std::string> linked;
      for (const auto& c : chunk_ids) {
        if (rng.Below(3) == 0) linked.push_back(c);
      }
      ASSERT_TRUE(store_->SetEntityChunks(e, linked).ok());
    }
    for (size_t i = 0; i < nodes.size(); i += 3) {
      std::vector<std::string> linked;
      for (int k = 0; k < 3; ++k) {
        linked.push_back(
            chunk_ids[static_cast<size_t>(rng.Below(static_cast<int>(chunk_ids.size())))]);
      }
      ASSERT_TRUE(store_->SetEntityChunks(nodes[i], linked).ok());
    }
    // Communities on three levels; reports with and without ratings, one without full content.
    ASSERT_TRUE(store_->RecomputeGraphStats().ok());
    std::vector<CommunityRecord> comms;
    auto community = [&](int64_t id, int64_t level, std::optional<int64_t> parent,
                         std::vector<int64_t> members) {
      CommunityRecord c;
      c.id = id;
      c.level = level;
      c.parent_id = parent;
      c.entity_ids = std::move(members);
      comms.push_back(std::move(c));
    };
    community(1, 0, std::nullopt, {alice, bram, nodes[0], nodes[1]});
    community(2, 0, std::nullopt, {cora, nodes[2], nodes[3]});
    community(3, 0, std::nullopt, {nodes[4], nodes[5]});
    community(4, 1, 1, {alice, bram});
    community(5, 1, 2, {cora, nodes[2]});
    community(6, 2, 4, {alice});
    auto c = store_->ReplaceCommunities(ClusteringRecord{}, comms);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    for (int64_t id = 1; id <= 6; ++id) {
      ReportRecord r;
      r.community_id = id;
      r.title = "Report " + std::to_string(id);
      r.summary = sentence(10);
      if (id != 5) r.full_content = "# " + r.title + "\n\n" + sentence(30);
      if (id % 2 == 0) r.rating = static_cast<double>(id);
      const Status s = store_->PutReport(r);
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }

  // Everything the context holds that reaches the prompt or the caller.
  static std::string Dump(const LocalContext& ctx) {
    std::ostringstream out;
    for (const auto& m : ctx.matches) {
      out << "match E" << m.entity_id << " " << m.name << (m.by_name ? " by-name" : "") << "\n";
    }
    for (const auto& item : ctx.items) {
      out << "--- " << LocalItemTypeName(item.type) << " " << item.id << " rank " << item.rank
          << " tokens " << item.tokens << " via";
      for (int64_t v : item.via) out << " " << v;
      out << " | " << DescribeLocalItem(item) << "\n" << item.text;
    }
    for (const auto& u : ctx.usage) {
      out << "usage " << LocalItemTypeName(u.type) << " candidates " << u.candidates << " placed "
          << u.placed << " share " << u.share_tokens << " used " << u.used_tokens << "\n";
    }
    out << "used " << ctx.used_tokens << " of " << ctx.budget_tokens << "\n";
    for (const auto& d : ctx.diagnostics) out << "diagnostic " << d << "\n";
    // The sections are the items' texts in order; check rather than repeat them.
    std::string rel, rep, chunk, ent;
    for (const auto& item : ctx.items) {
      switch (item.type) {
        case LocalItemType::kEntity:
          ent += item.text;
          break;
        case LocalItemType::kRelationship:
          rel += item.text;
          break;
        case LocalItemType::kReport:
          rep += item.text;
          break;
        case LocalItemType::kChunk:
          chunk += item.text;
          break;
      }
    }
    if (ent != ctx.entities_text || rel != ctx.relationships_text || rep != ctx.reports_text ||
        chunk != ctx.chunks_text) {
      out << "SECTIONS DIFFER FROM ITEMS\n";
    }
    return out.str();
  }

  void ExpectGolden(const std::string& name, const LocalSearchOptions& options) {
    auto ctx = BuildLocalContext(*store_, nullptr, Tok(),
                                 "What links Alice Hart, Bram Stone and Cora Vale?", options);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    const std::string got = Dump(*ctx);
    const std::string path = std::string(GRAG_TEST_DATA_DIR) + "/local_context/" + name + ".txt";
    const char* update = std::getenv("GRAG_UPDATE_GOLDEN");
    if (update != nullptr && std::string(update) == "1") {
      std::ofstream(path, std::ios::binary) << got;
      GTEST_SKIP() << "recorded " << path;
    }
    const std::string want = testing::ReadFile(path);
    ASSERT_FALSE(want.empty()) << "no recorded context at " << path;
    if (got != want) {
      std::filesystem::create_directories(GRAG_TEST_ARTIFACTS_DIR);
      const std::string actual =
          std::string(GRAG_TEST_ARTIFACTS_DIR) + "/local_context_" + name + ".txt";
      std::ofstream(actual, std::ios::binary) << got;
      ADD_FAILURE() << "the context differs from " << path << " (this run's is in " << actual
                    << "; diff them)";
    }
  }

  testing::TempDir dir_;
  std::unique_ptr<Store> store_;
  std::vector<int64_t> matched_;
};

TEST_F(LocalContextGolden, HybridChunksDefaultShares) {
  LocalSearchOptions options;
  options.context_budget_tokens = 4000;
  ExpectGolden("hybrid", options);
}

TEST_F(LocalContextGolden, DocumentOrderChunksRelationshipHeavy) {
  // Most of the budget to relationships, so that several dozen are placed (and the ranking's
  // tail is not).
  LocalSearchOptions options;
  options.hybrid_chunks = false;
  options.context_budget_tokens = 3500;
  options.chunk_share = 1;
  options.relationship_share = 4;
  options.report_share = 1;
  ExpectGolden("document_order", options);
}

TEST_F(LocalContextGolden, EverythingFits) {
  // A budget larger than every candidate: each ranking is placed whole.
  LocalSearchOptions options;
  options.hybrid_chunks = false;
  options.context_budget_tokens = 200000;
  ExpectGolden("everything", options);
}

}  // namespace
}  // namespace grag
