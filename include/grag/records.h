// What the index holds, as the engine hands it out: documents, chunks, entities,
// relationships, communities and their reports, runs, and what the store reports of itself.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace grag {

// A document without its text: what change detection and listings need.
struct DocumentInfo {
  std::string id;
  std::string title;
  std::string source_path;
  std::string content_hash;
  int64_t chunk_count = 0;  // read-only
  std::string created_at;   // read-only
  std::string updated_at;   // read-only: last change of content or metadata
};

struct ChunkRecord {
  // Content-derived (document id + text), so unchanged input maps to the same id and keeps its
  // extraction results. Unique across the index.
  std::string id;
  std::string document_id;
  int64_t index = 0;  // position in the document, from 0
  std::string text;
  int64_t n_tokens = 0;     // tokens of `text` in the chunking encoding
  int64_t start_token = 0;  // offset of the first token in the document's token sequence
  // The window in the document's text, in UTF-8 bytes: [start_byte, end_byte), title prefix
  // excluded (grag/chunker.h Chunk). -1: not known (an index written before schema 8, until its
  // next `grag index`); a citation then locates the chunk's text in the document.
  int64_t start_byte = -1;
  int64_t end_byte = -1;
};

struct EntityRecord {
  // Assigned by the store on first insert; stays the same while an entity with this name_key
  // exists (upserts keep it), so embeddings, memberships and citations stay valid.
  int64_t id = 0;
  std::string name_key;  // unique
  std::string name;      // display name
  std::string type;      // the most frequent type
  // Mentions per type, so nothing is lost when mentions disagree on the type.
  std::map<std::string, int64_t> type_counts;
  std::string description;  // the merged description used downstream
  // Fingerprint of the set of mention descriptions `description` was built from: when it is
  // unchanged there is no need to summarise again.
  std::string description_hash;
  std::string description_model;  // summarizer model; empty if descriptions were just joined
  // Which mention descriptions `description` covers (the merge module's format; empty when it
  // is the descriptions joined): lets new ones be appended to a summary without a call.
  std::string description_basis;
  int64_t degree = 0;     // read-only: relationships touching it (RecomputeGraphStats)
  int64_t frequency = 0;  // read-only: distinct chunks it is linked to (RecomputeGraphStats)
};

// An undirected edge. The store keeps source_id < target_id (it swaps them if needed).
struct RelationshipRecord {
  int64_t id = 0;  // assigned by the store; stable while the pair exists
  int64_t source_id = 0;
  int64_t target_id = 0;
  std::string description;
  std::string description_hash;
  std::string description_model;
  std::string description_basis;  // as EntityRecord::description_basis
  double weight = 0;              // sum of the mentions' strengths
  int64_t frequency = 0;          // read-only: distinct chunks linked (RecomputeGraphStats)
  int64_t combined_degree = 0;    // read-only: degree(source) + degree(target)
};

struct CommunityRecord {
  int64_t id = 0;                    // chosen by the caller, kept stable across updates
  int64_t level = 0;                 // 0 is the coarsest level; deeper levels are finer
  std::optional<int64_t> parent_id;  // none at level 0
  std::vector<int64_t> entity_ids;   // members
  int64_t size = 0;                  // read-only: members
  int64_t weight = 0;                // read-only: distinct chunks of its members (at write time)
  int64_t clustering_id = 0;         // read-only: the clustering that last wrote it
};

struct Finding {
  std::string summary;
  std::string explanation;
  std::vector<std::string> entities;  // names of the entities the finding rests on
};

enum class ReportStatus { kOk, kGap };

enum class ReportGenerator { kLlm, kExtractive };

// What an LLM report was written from, so an update can tell how much its community has changed
// since (see ReportOptions::refresh_threshold).
struct ReportBasis {
  std::vector<int64_t> members;  // entity ids, sorted
  double internal_weight = 0;    // summed weight of the relationships inside the community
  std::string params;            // fingerprint of prompt, format and model; empty: no basis
};

struct ReportRecord {
  int64_t community_id = 0;
  ReportStatus status = ReportStatus::kOk;
  std::string reason;  // why there is a gap; empty when ok
  std::string title;
  std::string summary;
  std::string full_content;  // the report as markdown, as global search feeds it to the model
  std::vector<Finding> findings;
  std::optional<double> rating;  // importance 0-10, when the generator gives one
  std::string rating_explanation;
  // Fingerprint of the inputs (members, their descriptions, internal relationships, child
  // reports used): a report whose inputs hash the same need not be regenerated.
  std::string input_hash;
  ReportGenerator generator = ReportGenerator::kLlm;
  std::string model;  // empty for extractive reports
  // The community changed since the report was written, but too little to be worth a call: the
  // report stands for the older version until a larger change or `--refresh-reports`.
  bool stale = false;
  // For a stale report: what changed since (new and departed members, with short descriptions),
  // written without a call. Read back, it is also appended to full_content.
  std::string stale_note;
  ReportBasis basis;
  int64_t level = 0;       // read-only: the community's level
  std::string updated_at;  // read-only
};

// What the index holds for one owner kind: every vector of a kind shares model and dimension.
struct EmbeddingSpace {
  std::string model;
  int64_t dimension = 0;
  int64_t count = 0;
};

// One value of a result row: NULL, an integer, a real or text (a BLOB is shown as
// "<blob: N bytes>").
struct SqlValue {
  enum class Kind { kNull, kInteger, kReal, kText };
  Kind kind = Kind::kNull;
  int64_t integer = 0;
  double real = 0;
  std::string text;
};

// What Store::RunReadOnlySql returned.
struct SqlRows {
  std::vector<std::string> columns;
  std::vector<std::vector<SqlValue>> rows;
  bool truncated = false;  // more rows than max_rows: the rest were not read
};

struct CacheModelStats {
  std::string model;
  std::string kind;
  int64_t entries = 0;
  int64_t bytes = 0;
};

// Row counts for `grag stats`.
// The room one table takes in the index, its indexes apart.
struct TableSpace {
  std::string table;
  int64_t bytes = 0;        // the table's own pages (with overflow pages and TOAST)
  int64_t index_bytes = 0;  // its indexes' pages
};

// What `grag cache prune` removes from the reply cache: the entries written before
// `before` (an ISO-8601 UTC time as the cache's created_at, e.g. "2026-12-01T00:00:00.000Z"), or,
// when it is empty, those written before the newest complete index run began (what they
// answered is in the index's tables, or is no longer asked). With `kind` set, the entries of that
// kind instead, whatever their age (an index run that completes removes "chat/extract":
// ChatCacheKind). `dry_run`: count, remove nothing. `compact` false: the room stays free for
// later writes instead of being given back (SQLite: no VACUUM).
struct CachePruneOptions {
  std::string before;
  std::string kind;
  bool dry_run = false;
  bool compact = true;
};

struct CachePruneResult {
  std::string before;        // the cut-off used ("" when there was none: nothing removed)
  int64_t entries = 0;       // removed (or, dry run, that would be)
  int64_t entries_left = 0;  // kept
  int64_t value_bytes = 0;   // their stored values' bytes
  int64_t file_bytes_before = 0;
  int64_t file_bytes_after = 0;  // after giving the room back (SQLite: VACUUM)
};

struct StoreStats {
  int64_t documents = 0;
  int64_t chunks = 0;
  int64_t extractions_ok = 0;
  int64_t extractions_skipped = 0;
  int64_t extractions_empty = 0;  // extracted without error but with no entity
  int64_t entity_mentions = 0;
  int64_t relationship_mentions = 0;
  int64_t entities = 0;
  int64_t relationships = 0;
  int64_t communities = 0;
  std::map<int64_t, int64_t> communities_per_level;
  std::optional<double> modularity;  // of the latest clustering
  int64_t reports_ok = 0;
  int64_t reports_gap = 0;
  int64_t reports_stale = 0;  // ok reports kept through a small change (ReportRecord::stale)
  int64_t reports_llm = 0;    // ok reports a model wrote (generator 'llm'), not extractive
  std::map<std::string, int64_t> embeddings_per_owner;  // "entity" -> count
  int64_t cache_entries = 0;
  std::vector<CacheModelStats> cache_by_model;
  int64_t runs = 0;
  int64_t file_bytes = 0;  // database pages in use (excludes the WAL)
  // What takes the room, by table, largest first (SQLite: dbstat, each table's pages and its
  // indexes' pages, full-text tables under "chunks_fts"; PostgreSQL: pg_table_size and
  // pg_indexes_size). Empty where the backend cannot tell.
  std::vector<TableSpace> space;
  int64_t free_bytes = 0;  // SQLite: pages on the free list (VACUUM gives them back)
};

// What `grag check` found. `problems` empty: the index is sound.
struct IntegrityProblem {
  std::string check;   // "sqlite", "foreign_keys", "fts", "orphans", "communities"
  std::string detail;  // what is wrong, naming the table and row where it can
};

struct IntegrityReport {
  std::vector<std::string> checks_run;  // in order
  std::vector<IntegrityProblem> problems;
  std::vector<std::string> notes;  // checks that could not run here, and why
  bool ok() const { return problems.empty(); }
};

// What one worker's calls for one chunk spent (Store::FinishWork).
struct WorkSpend {
  int64_t calls = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// Shared extraction work as it stands (Store::GetWorkState).
struct WorkerProgress {
  std::string name;
  int64_t claimed = 0;  // leased now
  int64_t done = 0;
  WorkSpend spent;
  double seconds_since_seen = 0;  // since its last claim, heartbeat or finished chunk
};

struct WorkState {
  std::string params;
  int64_t total = 0;
  int64_t done = 0;
  int64_t claimed = 0;  // leased now, not done
  std::vector<WorkerProgress> workers;
};

// Whether vectors stored under `model` (EmbeddingSpace::model) came from grag's built-in lexical
// embedder (any dimension or version), not a model: its similarities run lower than a neural
// model's, so thresholds differ.
bool IsLexicalEmbeddingModel(std::string_view model);

}  // namespace grag
