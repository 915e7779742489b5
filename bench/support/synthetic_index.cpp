#include "support/synthetic_index.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <string>
#include <random>
#include <unordered_set>

#include "grag/extract.h"

namespace grag::bench {

std::string EntityName(int i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "Entity %05d", i);
  return buf;
}

namespace {

using grag::EmbeddingOwner;

// Deterministic pseudo-words, so texts tokenise like prose rather than like one repeated token.
std::string Words(std::mt19937& rng, int n) {
  static const std::vector<std::string> kSyllables = {
      "ka", "lo", "mi",  "ren", "sa",  "tor", "vel", "un",  "pri", "dos", "gal", "che",
      "ba", "nu", "fie", "qua", "zer", "op",  "lin", "ast", "mon", "tek", "ri",  "sol"};
  std::uniform_int_distribution<size_t> syl(0, kSyllables.size() - 1);
  std::uniform_int_distribution<int> len(1, 3);
  std::string s;
  for (int w = 0; w < n; ++w) {
    if (w > 0) s += (w % 12 == 0) ? ". " : " ";
    const int l = len(rng);
    for (int k = 0; k < l; ++k) s += kSyllables[syl(rng)];
  }
  return s + ".";
}

std::vector<float> Normalised(std::vector<float> v) {
  double n = 0;
  for (float x : v) n += static_cast<double>(x) * x;
  const auto scale = static_cast<float>(1.0 / std::sqrt(n));
  for (float& x : v) x *= scale;
  return v;
}

std::vector<std::vector<float>> Centroids() {
  std::mt19937 rng(kSeed + 1);
  std::normal_distribution<float> normal;
  std::vector<std::vector<float>> c(kClusters, std::vector<float>(kDim));
  for (auto& v : c) {
    for (float& x : v) x = normal(rng);
    v = Normalised(std::move(v));
  }
  return c;
}

void Check(const grag::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}
template <typename T>
T Check(grag::Result<T> r, const char* what) {
  Check(r.status(), what);
  return std::move(r).value();
}

void Generate(grag::Store& store) {
  std::mt19937 rng(kSeed);
  const auto centroids = Centroids();
  std::normal_distribution<float> normal;
  auto tx = Check(store.Begin(), "begin");

  std::vector<std::string> chunk_ids;  // document d's chunk c at d * kChunksPerDoc + c
  for (int d = 0; d < kClusters; ++d) {
    grag::Document doc;
    doc.id = "docs/cluster-" + std::to_string(d) + ".txt";
    doc.title = doc.id;
    doc.source_path = doc.id;
    doc.content_hash = "h" + std::to_string(d);
    std::vector<grag::ChunkRecord> chunks;
    for (int c = 0; c < kChunksPerDoc; ++c) {
      grag::ChunkRecord ch;
      ch.id = doc.id + "#" + std::to_string(c);
      ch.document_id = doc.id;
      ch.index = c;
      ch.text = Words(rng, 220);  // ~300-400 tokens, a typical chunk
      doc.text += ch.text + "\n";
      chunks.push_back(std::move(ch));
      chunk_ids.push_back(chunks.back().id);
    }
    Check(store.UpsertDocument(doc).status(), "document");
    Check(store.ReplaceDocumentChunks(doc.id, chunks).status(), "chunks");
  }

  std::vector<int64_t> ids(kEntities);
  std::uniform_int_distribution<int> chunk_of(0, kChunksPerDoc - 1);
  for (int i = 0; i < kEntities; ++i) {
    grag::EntityRecord e;
    e.name = EntityName(i);
    e.name_key = grag::NormalizeEntityName(e.name);
    e.type = "organization";
    e.description = Words(rng, 30);
    ids[static_cast<size_t>(i)] = Check(store.UpsertEntity(e), "entity");
    const int doc = i / kClusterSize;
    const int a = chunk_of(rng);
    const int b = (a + 1 + chunk_of(rng) % (kChunksPerDoc - 1)) % kChunksPerDoc;
    Check(store.SetEntityChunks(ids[static_cast<size_t>(i)],
                                {chunk_ids[static_cast<size_t>(doc * kChunksPerDoc + a)],
                                 chunk_ids[static_cast<size_t>(doc * kChunksPerDoc + b)]}),
          "entity chunks");
  }

  // Pairs first, then inserted in key order: the store's (source, target) index then grows at
  // its end instead of at random pages, which is what makes a bulk load of this size fast.
  std::unordered_set<uint64_t> seen;
  std::vector<uint64_t> pairs;
  pairs.reserve(kRelationships);
  std::uniform_int_distribution<int> any(0, kEntities - 1);
  std::uniform_int_distribution<int> in_cluster(0, kClusterSize - 1);
  std::uniform_real_distribution<double> unit(0, 1);
  while (static_cast<int>(pairs.size()) < kRelationships) {
    const int a = any(rng);
    const int b = unit(rng) < 0.8 ? (a / kClusterSize) * kClusterSize + in_cluster(rng) : any(rng);
    if (a == b) continue;
    const auto lo = static_cast<uint64_t>(std::min(a, b));
    const auto hi = static_cast<uint64_t>(std::max(a, b));
    if (seen.insert(lo << 32 | hi).second) pairs.push_back(lo << 32 | hi);
  }
  std::sort(pairs.begin(), pairs.end());
  std::uniform_int_distribution<int> weight(1, 10);
  for (uint64_t p : pairs) {
    grag::RelationshipRecord r;
    r.source_id = ids[p >> 32];
    r.target_id = ids[p & 0xffffffffu];
    r.weight = weight(rng);
    r.description = Words(rng, 14);
    Check(store.UpsertRelationship(r).status(), "relationship");
  }
  Check(store.RecomputeGraphStats(), "graph stats");

  // Level 0: 100 communities of 10 clusters; level 1: one community per cluster.
  std::vector<grag::CommunityRecord> communities;
  for (int top = 0; top < kClusters / 10; ++top) {
    grag::CommunityRecord c;
    c.id = top + 1;
    c.level = 0;
    for (int i = top * 10 * kClusterSize; i < (top + 1) * 10 * kClusterSize; ++i) {
      c.entity_ids.push_back(ids[static_cast<size_t>(i)]);
    }
    communities.push_back(std::move(c));
  }
  for (int cl = 0; cl < kClusters; ++cl) {
    grag::CommunityRecord c;
    c.id = 1000 + cl;
    c.level = 1;
    c.parent_id = cl / 10 + 1;
    for (int i = cl * kClusterSize; i < (cl + 1) * kClusterSize; ++i) {
      c.entity_ids.push_back(ids[static_cast<size_t>(i)]);
    }
    communities.push_back(std::move(c));
  }
  Check(store.ReplaceCommunities(grag::ClusteringRecord{}, communities).status(), "communities");
  for (const auto& c : communities) {
    grag::ReportRecord r;
    r.community_id = c.id;
    r.title = "Community " + std::to_string(c.id);
    r.summary = Words(rng, 60);
    r.full_content = "# " + r.title + "\n\n" + r.summary + "\n\n" + Words(rng, 250);
    Check(store.PutReport(r), "report");
  }

  std::vector<grag::EmbeddingRecord> batch;
  for (int i = 0; i < kEntities; ++i) {
    std::vector<float> v = centroids[static_cast<size_t>(i / kClusterSize)];
    for (float& x : v) x += 0.08f * normal(rng);
    grag::EmbeddingRecord e;
    e.owner = EmbeddingOwner::kEntity;
    e.owner_id = std::to_string(ids[static_cast<size_t>(i)]);
    e.model = kModel;
    e.vector = Normalised(std::move(v));
    batch.push_back(std::move(e));
    if (batch.size() == 10'000) {
      Check(store.PutEmbeddings(batch), "embeddings");
      batch.clear();
    }
  }
  // Chunk vectors near their cluster's centroid too, so the vector signal has something to rank.
  for (size_t c = 0; c < chunk_ids.size(); ++c) {
    std::vector<float> v = centroids[c / kChunksPerDoc];
    for (float& x : v) x += 0.1f * normal(rng);
    grag::EmbeddingRecord e;
    e.owner = EmbeddingOwner::kChunk;
    e.owner_id = chunk_ids[c];
    e.model = kModel;
    e.vector = Normalised(std::move(v));
    batch.push_back(std::move(e));
    if (batch.size() == 10'000) {
      Check(store.PutEmbeddings(batch), "embeddings");
      batch.clear();
    }
  }
  if (!batch.empty()) Check(store.PutEmbeddings(batch), "embeddings");
  Check(tx.Commit(), "commit");
}

}  // namespace

SyntheticIndex::~SyntheticIndex() {
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

double ThreadCpuMicros() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double SecondsSince(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

double Percentile(std::vector<double>& micros, double q) {
  if (micros.empty()) return 0;
  std::sort(micros.begin(), micros.end());
  const auto at = static_cast<size_t>(std::floor(q * static_cast<double>(micros.size() - 1)));
  return micros[at];
}

std::unique_ptr<SyntheticIndex> MakeSyntheticIndex() {
  auto ix = std::make_unique<SyntheticIndex>();
  if (const char* env = std::getenv("GRAG_LOCAL_BENCH_DB"); env != nullptr && *env != 0) {
    ix->path = env;
  } else {
    std::string tmpl = (std::filesystem::temp_directory_path() / "grag-bench-XXXXXX").string();
    ix->dir = ::mkdtemp(tmpl.data());
    ix->path = (ix->dir / "index.db").string();
  }
  // A marker beside the file says generation finished: an interrupted run's file is redone.
  const std::string done = ix->path + ".complete-v2";
  const bool reuse = std::filesystem::exists(done) && std::filesystem::exists(ix->path);
  if (reuse) {
    std::fprintf(stderr, "reusing the synthetic index %s\n", ix->path.c_str());
    return ix;
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(ix->path + suffix);
  auto store = Check(grag::Store::Open(ix->path), "open");
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  Generate(*store);
  std::fprintf(stderr,
               "built the synthetic index (%d entities, %d relationships) in %.1f s (%.1f s of "
               "CPU)\n",
               kEntities, kRelationships, SecondsSince(t0),
               static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
  store.reset();
  std::FILE* marker = std::fopen(done.c_str(), "w");
  if (marker != nullptr) std::fclose(marker);
  return ix;
}

Questions MakeQuestions(int n) {
  Questions q;
  const auto centroids = Centroids();
  std::mt19937 rng(kSeed + 2);
  std::uniform_int_distribution<int> entity(0, kEntities - 1);
  std::normal_distribution<float> normal;
  std::map<std::string, std::vector<float>> table;
  for (int i = 0; i < n; ++i) {
    const int e = entity(rng);
    std::string question =
        "What do we know about " + EntityName(e) + " and the organisations it works with?";
    std::vector<float> v = centroids[static_cast<size_t>(e / kClusterSize)];
    for (float& x : v) x += 0.02f * normal(rng);
    table[question] = Normalised(std::move(v));
    q.texts.push_back(std::move(question));
  }
  q.embedder = std::make_unique<grag::ScriptedEmbeddingModel>(
      [table](const std::string& input) -> grag::Result<std::vector<float>> {
        auto it = table.find(input);
        if (it == table.end()) return grag::Status::NotFound("no vector for " + input);
        return it->second;
      },
      kModel);
  return q;
}

}  // namespace grag::bench
