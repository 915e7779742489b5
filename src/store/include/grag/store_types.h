// Plain records that go into and come out of the index store (grag/store.h).
//
// One struct per table or per question asked of the index; docs/schema.md describes the tables
// behind them. Timestamps are UTC ISO 8601 strings with milliseconds
// ("2025-01-09T12:34:56.789Z"), set by the store. Fields marked "read-only" are filled when
// reading and ignored when writing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grag/large_array.h"
#include "grag/records.h"

namespace grag {

// Entity types the built-in NLP extractor (extract module) gives and its graph pruning (graph
// module) reads: a document's title, which pruning never drops, and a capitalised name, which
// pruning keeps one of per chunk.
inline constexpr std::string_view kNlpTitleType = "title";
inline constexpr std::string_view kNlpProperNounType = "proper noun";

// A report as markdown: "# " and the title, the summary, then for each finding "## " and its
// summary and its explanation, blank lines between. The report generators write
// ReportRecord::full_content so, and the SQLite store keeps no copy of a full_content that equals
// it (it is rendered again on reading).
std::string RenderReportMarkdown(std::string_view title, std::string_view summary,
                                 const std::vector<Finding>& findings);

// ---------------------------------------------------------------- documents and chunks

// What UpsertDocument did.
enum class DocumentChange { kAdded, kChanged, kUnchanged };

// What ReplaceDocumentChunks did.
struct ChunkChanges {
  int64_t kept = 0;  // ids already present (their extraction results survive)
  int64_t added = 0;
  int64_t removed = 0;  // gone, with everything that hung off them
};

// One full-text search result.
struct ChunkHit {
  std::string chunk_id;
  std::string document_id;
  int64_t index = 0;
  double score = 0;  // BM25 relevance, higher is better (SQLite's bm25() negated)
};

// ---------------------------------------------------------------- extraction

enum class ExtractorKind { kLlm, kNlp };
std::string_view ExtractorKindName(ExtractorKind kind);  // "llm" | "nlp"

// Which extractor produced a result. LLM and NLP results, and results of different models, are
// kept apart: configuring a different extractor finds no results for it and re-extracts.
struct ExtractorId {
  ExtractorKind kind = ExtractorKind::kLlm;
  // The LLM's model name, or the NLP extractor's name and version (e.g. "regex-en/1").
  std::string model;
  bool operator==(const ExtractorId&) const = default;
};

enum class ExtractionStatus { kOk, kSkipped };

struct EntityMention {
  std::string name;      // as the extractor wrote it
  std::string name_key;  // normalised (case-folded, punctuation collapsed) by the caller
  std::string type;
  std::string description;
};

struct RelationshipMention {
  std::string source;
  std::string target;
  std::string source_key;  // normalised like EntityMention::name_key
  std::string target_key;
  std::string description;
  double strength = 1;  // 1-10 from the prompt; relationship weight is their sum
};

// One chunk's extraction result.
struct ExtractionRecord {
  std::string chunk_id;
  ExtractorId extractor;
  ExtractionStatus status = ExtractionStatus::kOk;
  std::string reason;           // why the chunk was skipped; empty when ok
  int64_t gleaning_rounds = 0;  // extra rounds that were run
  // Caller-defined fingerprint of the prompt and settings that produced the result, so a later
  // run can tell a result made with an older prompt. Empty when unused.
  std::string params_hash;
  std::vector<EntityMention> entities;
  std::vector<RelationshipMention> relationships;
  std::string created_at;  // read-only
};

// A mention together with the chunk it came from (for merging).
struct ChunkEntityMention {
  std::string chunk_id;
  EntityMention mention;
};
struct ChunkRelationshipMention {
  std::string chunk_id;
  RelationshipMention mention;
};

// ---------------------------------------------------------------- the merged graph

// One run of community detection (the whole hierarchy).
struct ClusteringRecord {
  int64_t id = 0;  // read-only: assigned by the store
  std::string method = "leiden";
  int64_t seed = 0;
  double resolution = 1;
  int64_t max_cluster_size = 0;
  std::optional<double> modularity;  // of the level-0 partition
  bool warm_start = false;           // started from the previous partition (incremental)
  std::string note;                  // e.g. why a full re-detection was done
  // Fingerprint of the graph it clustered (entities, relationships, weights) and the settings:
  // an unchanged graph is not clustered again.
  std::string graph_hash;
  // Modularity of a fresh (not warm-started) run on the same graph, when one was made to check
  // the warm start's drift.
  std::optional<double> fresh_modularity;
  std::string created_at;  // read-only
};

// The entity graph in compact form, for what keeps it in memory (retrieval): no descriptions.
struct GraphSnapshot {
  struct Entity {
    int64_t id = 0;
    std::string name_key;
    int64_t frequency = 0;  // distinct chunks linked
  };
  struct Edge {
    int64_t source_id = 0;
    int64_t target_id = 0;
    double weight = 0;
  };
  struct Link {
    int64_t entity_id = 0;
    uint32_t chunk = 0;  // index into chunk_ids
  };
  std::vector<Entity> entities;           // by id
  std::vector<Edge> edges;                // relationships, each pair once
  std::vector<std::string> chunk_ids;     // every chunk, by document and position
  std::vector<std::string> chunk_titles;  // the title of each chunk's document
  std::vector<Link> links;                // entity-chunk links (entity_chunks)
  // Extracted names resolved into another entity (entity_aliases): alias key, entity id.
  std::vector<std::pair<std::string, int64_t>> aliases;
};

// Every entity-chunk and relationship-chunk link (entity_chunks, relationship_chunks): owner id
// and chunk id, by owner then by document and position.
struct ChunkLinks {
  std::vector<std::pair<int64_t, std::string>> entities;
  std::vector<std::pair<int64_t, std::string>> relationships;
};

// ---------------------------------------------------------------- entity resolution

// One extracted name (by key) and the entity it resolved to.
struct EntityAlias {
  std::string name_key;       // the extracted name's key
  std::string name;           // its most frequent spelling
  std::string canonical_key;  // the entity's name_key; == name_key for the name the entity bears
  double score = 1;           // of the link that joined it (1 when it stands alone)
  std::string method;         // "" (the entity's own name), "rule", "similarity", "llm", "user"
  std::string reason;
};

// A pairwise decision of the resolver that two extracted names are one thing (key_a < key_b).
struct ResolutionLinkRecord {
  std::string key_a;
  std::string key_b;
  double score = 0;
  std::string method;  // "rule" | "similarity" | "llm"
  std::string reason;
};

// A person's decision: these two names are one entity (merge) or never one (split).
struct EntityOverride {
  std::string key_a;  // key_a < key_b
  std::string key_b;
  bool merge = true;
  std::string created_at;  // read-only
};

// ---------------------------------------------------------------- embeddings

enum class EmbeddingOwner { kEntity, kChunk, kReport };
std::string_view EmbeddingOwnerName(EmbeddingOwner owner);  // "entity" | "chunk" | "report"

// How the index keeps a vector's values (setting embeddings.encoding): 4-byte floats, IEEE
// half-precision floats (2 bytes a value), or one signed byte a value times the vector's largest
// magnitude / 127 (4 bytes of scale first). Reads give floats back whatever the encoding.
enum class VectorEncoding { kF32, kF16, kInt8 };
std::string_view VectorEncodingName(VectorEncoding encoding);  // "f32" | "f16" | "int8"
std::optional<VectorEncoding> ParseVectorEncoding(std::string_view name);

struct EmbeddingRecord {
  EmbeddingOwner owner = EmbeddingOwner::kEntity;
  // Entity id or community id in decimal for entities and reports; the chunk id for chunks.
  std::string owner_id;
  std::string model;
  std::vector<float> vector;
  std::string input_hash;  // fingerprint of the embedded text (InputHash), to spot stale vectors
  // Writing: how the store should keep the values; reading: how they were kept (the values read
  // back are the decoded ones). A backend that keeps only floats (PostgreSQL) ignores it.
  VectorEncoding encoding = VectorEncoding::kF32;
};

// Every vector of one owner kind back to back, by owner id: ids[i]'s vector is
// values[i * dimension, (i + 1) * dimension). What a vector index is built from, without a
// record (and an allocation) per vector.
struct PackedEmbeddings {
  std::string model;
  int64_t dimension = 0;
  std::vector<std::string> ids;
  LargeVector<float> values;  // megabytes for a large index: see grag/large_array.h
  // Per vector, SumOfSquares of its values (what normalising it takes), where known (a query
  // image keeps them); empty otherwise.
  std::vector<double> sums_of_squares;
};

// The sum of the squares of a vector's values, in double precision, first to last.
inline double SumOfSquares(std::span<const float> v) {
  double sum = 0;
  for (float x : v) sum += static_cast<double>(x) * x;
  return sum;
}

// ---------------------------------------------------------------- run state

enum class RunStatus { kRunning, kOk, kFailed, kInterrupted };
std::string_view RunStatusName(RunStatus status);

struct RunRecord {
  int64_t id = 0;
  std::string command;  // "index", "add", "remove", ...
  RunStatus status = RunStatus::kRunning;
  std::string stage;                        // the stage running now, or the last one
  std::string message;                      // error message of a failed run
  std::map<std::string, int64_t> counters;  // llm_calls, tokens_in, chunks_extracted, ...
  std::string started_at;
  std::string finished_at;  // empty while running
};

enum class StageStatus { kRunning, kDone, kFailed };

// Progress and resume point of one stage of one run.
struct StageProgress {
  std::string stage;
  StageStatus status = StageStatus::kRunning;
  int64_t done = 0;
  int64_t total = 0;       // 0 when unknown
  std::string checkpoint;  // opaque to the store: whatever the stage needs to resume
  std::string updated_at;  // read-only
};

// ---------------------------------------------------------------- read-only SQL

// ---------------------------------------------------------------- statistics

// How the index file is set up (PRAGMA values of the store's connection).
struct StoreInfo {
  std::string path;
  int64_t schema_version = 0;
  int64_t max_schema_version = 0;  // the newest schema this build reads
  std::string journal_mode;        // "wal"
  bool foreign_keys = false;
  int64_t synchronous = 0;  // 1 = NORMAL
  int64_t busy_timeout_ms = 0;
  std::string sqlite_version;
  // The query images the index holds now (Store::RefreshQueryImages), by name.
  std::vector<std::string> query_images;
};

}  // namespace grag
