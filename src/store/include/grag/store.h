// The index store: everything an index holds, behind one interface with two backends.
//
// Documents, chunks (with full-text search), per-chunk extraction results, the merged entity
// graph, communities, reports, embeddings, the LLM reply cache and run state. The SQLite backend
// (src/store/sqlite/) keeps them in one file (e.g. <root>/output/index.db; docs/schema.md
// documents its tables for users of the `sqlite3` shell); the PostgreSQL backend
// (src/store/postgres/) in one database that several processes share. Store::Open picks the
// backend from the location. No SQL leaves this module: the methods below are the whole
// contract, and a backend implements all of them.
//
// Durability: a process crash at any moment leaves the index as of the last committed
// transaction. SQLite: WAL mode with synchronous=NORMAL, so a power loss may also lose the last
// few commits but never leaves a half-written one. Callers make each unit of pipeline work (one
// chunk's extraction, one report, one document's chunks) a single transaction.
//
// Thread-safety: every method may be called from any thread. Writes go through one connection,
// serialised by one mutex, so there is one writer at a time; an open Transaction holds that
// mutex, and calls from the owning thread join it (its reads see its own writes). Reads from
// other threads do not wait for it: they run on a small pool of read connections and see the
// index as of the last commit. Keep transactions short; never hold one across an LLM call or
// while waiting for another thread that writes to the store.
//
// Errors: methods return Status/Result; database errors become kUnavailable (locked by another
// process, server unreachable), kInvalidArgument (a constraint the caller broke), kIoError,
// kCorruption or kInternal, with a message naming what was being done.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/cache.h"
#include "grag/documents.h"
#include "grag/status.h"
#include "grag/store_tables.h"
#include "grag/store_types.h"

namespace grag {

struct StoreOptions {
  // Create the file (and its parent folders) when missing; else a missing file is kNotFound.
  // Commands that only read an index (query, stats) turn this off.
  bool create_if_missing = true;
  // Open for reading only: nothing is written (no journal-mode switch, no migration, no lock),
  // so an index on read-only media or in a read-only folder can be queried; write methods fail
  // with kIoError. An index written by an older grag must be opened once for writing first
  // (kInvalidArgument says so). Implies !create_if_missing.
  bool read_only = false;
  // Open for writing when possible, else (read-only media or permissions) as read_only does.
  // For commands that read but like to write their LLM replies to the cache (query).
  bool allow_read_only = false;
  // One writer per index: take the index's writer lock (<path>.lock, released by the OS when
  // the process ends, however it ends) for the Store's lifetime. When another process holds it:
  // kUnavailable naming that process, unless `wait_for_writer`. Writing commands set this;
  // readers never need it (WAL lets them read beside a writer).
  bool writer_lock = false;
  bool wait_for_writer = false;
  // Called once, with who holds the lock, before waiting for it.
  std::function<void(const std::string& holder)> on_wait;
  // Written into the lock file for others to see ("grag index"); the pid is added.
  std::string lock_holder = "grag";
  // Screen the file for damage (SQLite's quick_check) when it changed since the last check
  // that passed, which grag records beside the index (<path>.verified) and keeps current when
  // a Store closes. Damage: kCorruption saying what to do.
  bool verify = true;
  // Read connections map the file (SQLite's mmap_size) instead of copying pages into their
  // cache: for a store that answers questions, which reads a few thousand scattered pages once
  // (a one-off local question on 1,669 transcripts: 51 -> 45 ms). Off for a store being
  // indexed: its readers scan whole tables, and every mapped page they touch would stay
  // resident in the process. A read_only store always maps.
  bool map_reads = false;
  // How long a write waits for another process holding the index before failing with
  // kUnavailable. Long enough to ride out a concurrent `grag` writer's transaction.
  int busy_timeout_ms = 10000;
};

class Transaction;

// The part of a store backend that Transaction drives. A backend's Begin() takes its write
// mutex, runs BEGIN (depth 0) or a SAVEPOINT, calls Opened() and hands both to a Transaction.
class TransactionOwner {
 public:
  // Transactions open: the outermost and its savepoints. Guarded by the write mutex.
  int open_transactions() const { return open_; }

 protected:
  virtual ~TransactionOwner() = default;
  void Opened() { ++open_; }
  // Commits (commit) or rolls back the innermost open transaction, at `depth`: 0 is the
  // outermost one, deeper ones are savepoints. Called on the thread that began it, with the
  // write mutex held and open_transactions() already counting it out.
  virtual Status FinishTransaction(int depth, bool commit) = 0;

 private:
  friend class Transaction;
  int open_ = 0;
};

// Records packed, in their order (consumed: each vector is released once copied).
// kInvalidArgument when they disagree on model or dimension.
Result<PackedEmbeddings> PackEmbeddings(std::vector<EmbeddingRecord> records);

class Store {
 public:
  // Opens (or creates) the index at `path`: WAL mode, foreign keys on, busy timeout,
  // synchronous=NORMAL; migrates an index written with an older schema forward, one
  // transaction per step. Errors: kNotFound (missing, or an empty file, and !create_if_missing),
  // kInvalidArgument (an index written by a newer grag), kCorruption (not a database, an SQLite
  // file that is not a grag index, or damaged: the message says what to do), kUnavailable
  // (locked, or the writer lock is taken), kIoError (among others: opened for writing on
  // read-only media, which the message names).
  //
  // `location` is an SQLite file path, or a PostgreSQL URL (postgresql://... or postgres://...)
  // for the PostgreSQL backend (see its header for what differs).
  static Result<std::unique_ptr<Store>> Open(const std::string& location,
                                             const StoreOptions& options = {});

  // The newest schema version of an SQLite index this build reads and writes.
  static int64_t LatestSchemaVersion();

  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // ---- transactions

  // Begins a write transaction (BEGIN IMMEDIATE, so a concurrent writer in another process is
  // waited for up front rather than failing at commit). Inside a transaction on the same
  // thread, Begin() nests as a savepoint: its Commit() folds into the outer transaction and its
  // rollback undoes only its own part. Every write method below runs in its own (nested)
  // transaction, so each call is atomic on its own and composes inside a caller's transaction.
  virtual Result<Transaction> Begin() = 0;

  // Begins a write transaction whose parts stand or fall together, for a caller that gives up
  // on the first failed write anyway (a stage writing its results). In SQLite the Begin() calls
  // and write methods inside it nest without savepoints (a savepoint copies every page its part
  // touches to a journal first), so a failed part cannot be undone alone: it dooms the whole. A
  // later Begin() inside it then fails, and Commit() rolls everything back and fails (kInternal:
  // the caller went on past the part's error). Backends without the mode (PostgreSQL) give an
  // ordinary Begin().
  virtual Result<Transaction> BeginAllOrNothing();

  // Runs `write` (store writes) in a write transaction shared with the other threads' concurrent
  // calls, and returns once that transaction is committed (group commit): each unit of work is
  // still durable before it counts as done, but units that finish together share a commit. A
  // failing `write` is rolled back alone and returns its error. Inside a transaction of this
  // thread, `write` runs in it. `write` may run on another thread, and more than once (a group
  // is tried whole first, then write by write when one of it fails), so it must do nothing but
  // store writes.
  virtual Status WriteGrouped(const std::function<Status()>& write) = 0;

  // Runs `write` (store writes, owning what it writes) in a later write transaction, with the
  // other deferred writes of a bounded window, and returns at once: a unit of work whose loss
  // only means doing it again (a model's reply, a chunk's extraction) need not pay a commit of
  // its own nor wait for one. It is committed within kDeferredWindow (or once kDeferredBatch
  // writes wait), at FlushDeferred, or when the store closes; a process killed before then
  // loses it whole, never part of it. `committed` (optional) runs once it is. A failing write
  // is rolled back alone and its error returned by a later WriteDeferred or FlushDeferred. As
  // with WriteGrouped, `write` may run more than once.
  // Inside a transaction of this thread, runs in it at once. The default commits at once.
  virtual Status WriteDeferred(std::function<Status()> write,
                               std::function<void()> committed = nullptr) {
    Status st = WriteGrouped(write);
    if (st.ok() && committed) committed();
    return st;
  }
  // Commits every deferred write made before the call (inside this thread's transaction: writes
  // those still queued into it); returns the first error of a deferred write not yet reported.
  virtual Status FlushDeferred() { return Status::Ok(); }
  static constexpr std::chrono::milliseconds kDeferredWindow{100};
  static constexpr size_t kDeferredBatch = 64;

  // ---- documents

  // Inserts or updates a document by id. Updating keeps its chunks (call ReplaceDocumentChunks
  // for a changed text); kChanged means the content hash differs.
  virtual Result<DocumentChange> UpsertDocument(const Document& doc) = 0;
  virtual Result<std::optional<Document>> GetDocument(std::string_view id) = 0;
  // All documents without their text, ordered by id.
  virtual Result<std::vector<DocumentInfo>> ListDocuments() = 0;
  // Deletes a document and, by cascade, its chunks, their extraction results, mentions,
  // entity/relationship links, chunk embeddings and full-text entries. Merged entities,
  // relationships and communities stay until the graph is rebuilt. Returns false if absent.
  virtual Result<bool> DeleteDocument(std::string_view id) = 0;

  // ---- chunks

  // Makes `chunks` (all with document_id == document_id) the document's chunks: chunks whose id
  // is already stored are kept with their extraction results (their index and offsets are
  // updated), new ones are added, the rest are deleted with everything hanging off them.
  // Errors: kNotFound if the document is absent; kInvalidArgument for a chunk of another
  // document, duplicate ids or indexes, or an id stored for another document.
  virtual Result<ChunkChanges> ReplaceDocumentChunks(std::string_view document_id,
                                                     const std::vector<ChunkRecord>& chunks) = 0;
  virtual Result<std::optional<ChunkRecord>> GetChunk(std::string_view id) = 0;
  // The document's chunks in order.
  virtual Result<std::vector<ChunkRecord>> ListChunks(std::string_view document_id) = 0;
  // Every chunk id, by document and position.
  virtual Result<std::vector<std::string>> ListChunkIds() = 0;
  virtual Result<int64_t> CountChunks() = 0;
  virtual Result<int64_t> CountEntities() = 0;

  // BM25 full-text search over chunk text: the best `k` chunks containing any of the query's
  // words (Porter-stemmed, case- and diacritic-insensitive), best first. Words in more than half
  // the chunks are left out of the query (BM25 weighs them about zero, yet each would make
  // nearly every chunk a match to score), unless the index has fewer than 20 chunks. The query
  // is plain text:
  // quotes, operators (AND, OR, NOT, NEAR), `*`, `^`, `:` and parentheses have no special meaning,
  // so no query can be a syntax error. A query with no words returns nothing.
  virtual Result<std::vector<ChunkHit>> SearchChunks(std::string_view query, int k) = 0;
  // BM25 of some texts that are not chunks (community reports, for the extractive global
  // search) against a plain-text query, with the chunks' tokenizer and SQLite's BM25 (k1 1.2,
  // b 0.75), the IDF taken over these texts: one score per text, in order, higher is better,
  // 0 for a text that matches no word. Uses a temporary table of this connection; writes
  // nothing to the index (works on a read-only one).
  virtual Result<std::vector<double>> RankTexts(const std::vector<std::string>& texts,
                                                std::string_view query) = 0;

  // ---- extraction results

  // Stores one chunk's result for `record.extractor`, replacing an earlier result of the same
  // extractor for that chunk (mentions included). kInvalidArgument if the chunk is absent.
  virtual Status PutExtraction(const ExtractionRecord& record) = 0;
  virtual Result<std::optional<ExtractionRecord>> GetExtraction(std::string_view chunk_id,
                                                                const ExtractorId& extractor) = 0;
  // Chunks without an ok result from `extractor` (never extracted, or skipped last time), by
  // document and position: the work an extraction stage has left.
  virtual Result<std::vector<std::string>> ChunksNeedingExtraction(
      const ExtractorId& extractor) = 0;
  // Every mention in ok results from `extractor`, by chunk.
  virtual Result<std::vector<ChunkEntityMention>> ListEntityMentions(
      const ExtractorId& extractor) = 0;
  virtual Result<std::vector<ChunkRelationshipMention>> ListRelationshipMentions(
      const ExtractorId& extractor) = 0;
  // The same mentions in the same order, one at a time, so that a large index's mentions are
  // never all in memory (the merge). A Status other than ok from `fn` ends the scan and is
  // returned. `fn` must not use the store (it runs inside the store's read).
  virtual Status ScanEntityMentions(
      const ExtractorId& extractor,
      const std::function<Status(const ChunkEntityMention& mention)>& fn) = 0;
  virtual Status ScanRelationshipMentions(
      const ExtractorId& extractor,
      const std::function<Status(const ChunkRelationshipMention& mention)>& fn) = 0;
  // A digest of what the lists and scans above give for `extractor`, read without touching a
  // mention: which ok results, of which chunks, in which order, each result by its id and the
  // time it was stored. Replacing or removing a result, or adding one, changes it. The merge
  // compares it with the one it last merged to skip work whose inputs are unchanged.
  virtual Result<std::string> ExtractionsDigest(const ExtractorId& extractor) = 0;

  // ---- entities and relationships

  // Inserts or updates an entity by name_key and returns its id (unchanged on update).
  virtual Result<int64_t> UpsertEntity(const EntityRecord& entity) = 0;
  virtual Result<std::optional<EntityRecord>> GetEntity(int64_t id) = 0;
  // The entity with this name_key, or else the entity an extracted name with this key was
  // resolved into ("marley" finds "jacob marley").
  virtual Result<std::optional<EntityRecord>> GetEntityByKey(std::string_view name_key) = 0;
  // All entities, highest degree first (then by name_key). `limit` < 0: all.
  virtual Result<std::vector<EntityRecord>> ListEntities(int64_t limit = -1) = 0;
  // Deletes an entity with its relationships, links, memberships and embedding.
  virtual Result<bool> DeleteEntity(int64_t id) = 0;
  // Makes `chunk_ids` the chunks the entity was extracted from (for local search).
  virtual Status SetEntityChunks(int64_t entity_id, const std::vector<std::string>& chunk_ids) = 0;
  virtual Result<std::vector<std::string>> GetEntityChunks(int64_t entity_id) = 0;

  // Inserts or updates the relationship between two distinct entities (either order) and
  // returns its id. kInvalidArgument for a self-loop or an unknown entity.
  virtual Result<int64_t> UpsertRelationship(const RelationshipRecord& relationship) = 0;
  // All relationships, or those touching `entity_id`, by descending weight.
  virtual Result<std::vector<RelationshipRecord>> ListRelationships() = 0;
  virtual Result<std::vector<RelationshipRecord>> ListRelationshipsOf(int64_t entity_id) = 0;
  // The relationships touching `entity_id` without their text (description, description_hash,
  // description_model and description_basis left empty), in no particular order: what ranking
  // them needs, for a caller that shows few of many (local search), cheaper than
  // ListRelationshipsOf.
  virtual Result<std::vector<RelationshipRecord>> ListRelationshipEdgesOf(int64_t entity_id) = 0;
  // The descriptions of relationships `ids`, in that order; nullopt for an id with no
  // relationship.
  virtual Result<std::vector<std::optional<std::string>>> GetRelationshipDescriptions(
      const std::vector<int64_t>& ids) = 0;
  virtual Status SetRelationshipChunks(int64_t relationship_id,
                                       const std::vector<std::string>& chunk_ids) = 0;
  // Deletes a relationship with its chunk links. Returns false if absent.
  virtual Result<bool> DeleteRelationship(int64_t id) = 0;

  // The whole graph in compact form (ids, keys, weights, entity-chunk links), read in one
  // snapshot: what retrieval keeps in memory.
  virtual Result<GraphSnapshot> LoadGraphSnapshot() = 0;
  // The part of the graph around some entities and chunks, in the same form: what they reach in
  // `hops` steps over relationships and entity-chunk links (breadth first, at most
  // max_entities entities and max_chunks chunks, at most max_fanout steps out of any one
  // node), with the edges and links among what was reached. Entity frequencies are the
  // index-wide ones. For one question on a large index, where reading the whole graph would
  // cost more than answering.
  struct NeighbourhoodLimits {
    int hops = 3;
    size_t max_entities = 1500;
    size_t max_chunks = 1500;
    size_t max_fanout = 100;
    // Follow and return the entities' relationships (the snapshot's edges); false: the walk
    // goes over entity-chunk links only, and the snapshot holds no edges.
    bool relationships = true;
  };
  virtual Result<GraphSnapshot> LoadGraphNeighbourhood(const std::vector<int64_t>& entity_ids,
                                                       const std::vector<std::string>& chunk_ids,
                                                       const NeighbourhoodLimits& limits) = 0;
  // Chunks whose text holds `phrase` (its words in a row; case-, diacritic- and stem-
  // insensitive as the full-text search is): how specific a name is. 0 for no words.
  virtual Result<int64_t> CountChunksWithPhrase(std::string_view phrase) = 0;
  // The same for single words, all at once and faster (vocabulary look-ups): the chunks holding
  // each word, in order.
  virtual Result<std::vector<int64_t>> CountChunksWithWords(
      const std::vector<std::string>& words) = 0;

  // ---- query images
  //
  // Packed copies of what a one-off question reads, kept in the index beside the tables they
  // are made from: "graph" (entities, relationships, entity-chunk links and chunk titles, as
  // LoadGraphNeighbourhood walks them) and "words" (the chunk counts of the full-text index's
  // common terms). A reader uses an image in place of many row look-ups, and gets the same
  // answers from it as from the tables. Any write to the tables an image is made from drops
  // that image in the same transaction, so a reader sees a current image or none (and reads the
  // tables). An index run builds the missing ones at its end. Vectors have no image: each is
  // kept once, in its row (a second copy was a quarter of a large index's file).
  //
  // Builds the images that are missing, from the tables as they are, in one transaction; returns
  // the names it built, sorted. An image larger than kMaxQueryImageBytes is not kept. A backend
  // that keeps no images (PostgreSQL, for now) builds none.
  static constexpr size_t kMaxQueryImageBytes = size_t{256} << 20;
  virtual Result<std::vector<std::string>> RefreshQueryImages();
  // Reads the graph image into memory now, ahead of the LoadGraphNeighbourhood that will need
  // it: a one-off question does this while its vectors load on another thread (the read was a
  // quarter of a one-off hybrid search on a 1 MB document). Without an image (or a backend
  // that keeps none) it does nothing. Its errors are for the caller to ignore: the
  // LoadGraphNeighbourhood that follows meets and reports them.
  virtual Status WarmGraphImage() { return Status::Ok(); }

  // Every entity-chunk and relationship-chunk link, read in one snapshot (what exports list as
  // text unit ids).
  virtual Result<ChunkLinks> ListChunkLinks() = 0;

  // Recomputes the derived columns from the links: entity degree and frequency, relationship
  // frequency. Call after the merge stage has written entities, relationships and links.
  virtual Status RecomputeGraphStats() = 0;

  // ---- entity resolution

  // Every extracted name the resolver has placed, by name_key.
  virtual Result<std::vector<EntityAlias>> ListAliases() = 0;
  // The canonical key each of `name_keys` was resolved into, where the resolver placed it
  // (one read for all: a one-question neighbourhood resolves its titles with it).
  virtual Result<std::unordered_map<std::string, std::string>> CanonicalKeys(
      const std::vector<std::string>& name_keys) = 0;
  // The resolver's pairwise links, by (key_a, key_b).
  virtual Result<std::vector<ResolutionLinkRecord>> ListResolutionLinks() = 0;
  // Replaces the aliases and the links (the merge stage, inside its transaction).
  virtual Status ReplaceResolution(const std::vector<EntityAlias>& aliases,
                                   const std::vector<ResolutionLinkRecord>& links) = 0;
  // A person's decisions. Putting a pair replaces its earlier decision; keys are ordered here.
  virtual Status PutEntityOverride(std::string_view key_a, std::string_view key_b, bool merge) = 0;
  virtual Result<bool> DeleteEntityOverride(std::string_view key_a, std::string_view key_b) = 0;
  virtual Result<std::vector<EntityOverride>> ListEntityOverrides() = 0;

  // Small named values of the index (the meta table): settings fingerprints and the like.
  virtual Result<std::optional<std::string>> GetMeta(std::string_view key) = 0;
  virtual Status SetMeta(std::string_view key, std::string_view value) = 0;

  // ---- shared extraction work (indexing workers, PostgreSQL)
  //
  // An index run that shares its extraction (extraction.distribute) publishes the chunks to
  // extract; `grag index --worker` processes, on any machine, claim them a few at a time with a
  // lease they renew while they work, send the extraction calls (their replies go to the reply
  // cache) and mark them done; a dead worker's lease expires and another claims its chunks.
  // The run then extracts every chunk from the cache, as a single process would. The default
  // (SQLite) says kUnimplemented: workers need a database several machines reach.

  // Publishes `chunk_ids` (in order) as work described by `params` (what the run extracts
  // with: workers with other settings refuse it), replacing earlier work.
  virtual Status PublishWork(std::string_view params, const std::vector<std::string>& chunk_ids);
  // Claims up to `n` chunks that are not done and not leased (or whose lease expired) for
  // `worker`, leased for `lease`, in published order. kInvalidArgument when the published work
  // has other params than `params` (the message says so). Empty: nothing to claim now.
  virtual Result<std::vector<std::string>> ClaimWork(std::string_view worker,
                                                     std::string_view params, size_t n,
                                                     std::chrono::milliseconds lease);
  // Extends `worker`'s leases by `lease` from now and records it as alive (its heartbeat).
  virtual Status RenewWork(std::string_view worker, std::chrono::milliseconds lease);
  // Marks `chunk_id` done by `worker` with what its calls spent (ignored when the chunk is no
  // longer `worker`'s: its lease expired and another took it).
  virtual Status FinishWork(std::string_view worker, std::string_view chunk_id,
                            const WorkSpend& spend);
  // The published work and its workers, or nullopt when none is published.
  virtual Result<std::optional<WorkState>> GetWorkState();
  // Removes the published work (a run's extraction is over).
  virtual Status ClearWork();

  // ---- communities

  // Replaces the whole community hierarchy in one transaction and records the clustering that
  // produced it; returns the clustering's id. Communities whose id persists keep their report
  // (the report module compares input hashes to decide whether to regenerate it); the others are
  // deleted with their reports. Parents need not come before children. size and weight are
  // computed from the members. kInvalidArgument for an unknown entity or parent, or a duplicate id.
  virtual Result<int64_t> ReplaceCommunities(const ClusteringRecord& clustering,
                                             const std::vector<CommunityRecord>& communities) = 0;
  // Communities (with members), coarsest level first, or only those of `level`.
  virtual Result<std::vector<CommunityRecord>> ListCommunities(
      std::optional<int64_t> level = {}) = 0;
  // Ids of the communities an entity belongs to, coarsest first.
  virtual Result<std::vector<int64_t>> CommunitiesOfEntity(int64_t entity_id) = 0;
  // Each community's distinct chunks (through its members' entity_chunks), in document order
  // (document id, then chunk index), for every community or only those of `level`. A community
  // whose members link no chunk is absent. One query: budgeted search reads the whole map.
  virtual Result<std::map<int64_t, std::vector<std::string>>> CommunityChunks(
      std::optional<int64_t> level = {}) = 0;
  virtual Result<std::optional<ClusteringRecord>> LatestClustering() = 0;

  // ---- reports

  // Inserts or replaces the report of a community. kInvalidArgument if the community is absent.
  virtual Status PutReport(const ReportRecord& report) = 0;
  // Marks a stored report as covering an older version of its community (ReportRecord::stale),
  // with a note on what changed since (ReportRecord::stale_note); a missing report is not an
  // error. PutReport clears both.
  virtual Status MarkReportStale(int64_t community_id, std::string_view note) = 0;
  virtual Result<std::optional<ReportRecord>> GetReport(int64_t community_id) = 0;
  // Reports (ok and gaps), coarsest level first, or only those of `level`. `findings` false
  // leaves ReportRecord::findings empty where full_content holds the report's rendering (what
  // global search reads), and ReportRecord::basis empty (only report refreshes read it): parsing
  // them is most of the cost of listing.
  virtual Result<std::vector<ReportRecord>> ListReports(std::optional<int64_t> level = {},
                                                        bool findings = true) = 0;

  // ---- embeddings

  // Stores vectors (replacing any for the same owner) in one transaction. Every vector of one
  // owner kind must share one model and dimension: kInvalidArgument names the stored model and
  // dimension otherwise (DeleteEmbeddings first to switch models). Owners are not checked to
  // exist, but deleting an entity, chunk or report deletes its vector.
  virtual Status PutEmbeddings(const std::vector<EmbeddingRecord>& records) = 0;
  virtual Result<std::optional<EmbeddingRecord>> GetEmbedding(EmbeddingOwner owner,
                                                              std::string_view owner_id) = 0;
  // Every vector of one owner kind, by owner id.
  virtual Result<std::vector<EmbeddingRecord>> ListEmbeddings(EmbeddingOwner owner) = 0;
  // The same vectors packed (model, dimension, ids and values; empty when there are none).
  // kCorruption when the stored vectors of the kind
  // disagree on model or dimension.
  virtual Result<PackedEmbeddings> ListPackedEmbeddings(EmbeddingOwner owner);
  // owner id -> input_hash of every vector of one owner kind, without reading the vectors: what
  // an update needs to tell which texts changed.
  virtual Result<std::map<std::string, std::string>> ListEmbeddingHashes(EmbeddingOwner owner) = 0;
  // The model and dimension of a kind's vectors, or nullopt when there are none.
  virtual Result<std::optional<EmbeddingSpace>> GetEmbeddingSpace(EmbeddingOwner owner) = 0;
  // Deletes every vector of one owner kind; returns how many.
  virtual Result<int64_t> DeleteEmbeddings(EmbeddingOwner owner) = 0;
  // Deletes the vectors of these owners of one kind (an id without one is skipped); returns how
  // many went.
  virtual Result<int64_t> DeleteEmbeddingsOf(EmbeddingOwner owner,
                                             const std::vector<std::string>& owner_ids) = 0;
  // Rewrites every stored vector kept in another encoding in `encoding` (from its stored values:
  // no model call); returns how many. A backend that keeps only floats (PostgreSQL) returns 0.
  virtual Result<int64_t> ReencodeEmbeddings(VectorEncoding encoding);

  // ---- LLM reply cache

  // The reply cache kept in the index (table llm_cache), for the LLM client. Same lifetime and
  // thread-safety as the Store. A failing read is logged and counts as a miss.
  virtual KeyValueCache& ReplyCache() = 0;
  // Removes reply cache entries (CachePruneOptions says which) in one transaction and gives the
  // room back (SQLite: VACUUM, which needs the writer and as much free disk as the index).
  virtual Result<CachePruneResult> PruneReplyCache(const CachePruneOptions& options) = 0;

  // ---- upkeep

  // How the file's pages are used, read without scanning it.
  struct FileSpace {
    int64_t file_bytes = 0;
    int64_t free_bytes = 0;  // pages nothing uses (SQLite's freelist)
    // A migration left values to compress and pages to give back: the next index run compacts
    // (store.compact = auto) whatever the free pages.
    bool compact_requested = false;
  };
  // nullopt for a backend without one file to measure (PostgreSQL).
  virtual Result<std::optional<FileSpace>> GetFileSpace() { return std::optional<FileSpace>(); }
  // Rewrites the file densely and gives free pages back (SQLite: VACUUM, which needs the writer
  // and as much free disk as the index; B-tree pages an index run filled in no particular order
  // are left partly empty). Returns the file's bytes before and after; a backend that
  // keeps its own tables (PostgreSQL's autovacuum) does nothing and returns nullopt.
  virtual Result<std::optional<std::pair<int64_t, int64_t>>> Compact() {
    return std::optional<std::pair<int64_t, int64_t>>();
  }

  // ---- run state

  // Records a new run of `command` as running and returns its id. Runs still marked running
  // are marked interrupted first: one index is written by one grag process at a time.
  virtual Result<int64_t> BeginRun(std::string_view command) = 0;
  // Sets the current stage (unless empty) and merges `counters` into the run's counters
  // (given keys overwrite, others stay).
  virtual Status UpdateRun(int64_t run_id, std::string_view stage,
                           const std::map<std::string, int64_t>& counters) = 0;
  virtual Status FinishRun(int64_t run_id, RunStatus status, std::string_view message = {}) = 0;
  virtual Result<std::optional<RunRecord>> GetRun(int64_t run_id) = 0;
  // The latest runs, newest first.
  virtual Result<std::vector<RunRecord>> ListRuns(int64_t limit = 20) = 0;
  // Inserts or updates one stage's progress within a run.
  virtual Status SetStageProgress(int64_t run_id, const StageProgress& progress) = 0;
  virtual Result<std::vector<StageProgress>> ListStageProgress(int64_t run_id) = 0;
  // Each counter summed over all runs (LLM calls and tokens spent on this index).
  virtual Result<std::map<std::string, int64_t>> TotalRunCounters() = 0;

  // ---- inspection

  virtual Result<StoreStats> Stats() = 0;
  virtual Result<StoreInfo> Info() = 0;
  // SQLite's integrity and foreign-key checks plus the full-text index's own check.
  // kCorruption describing the first problems found.
  virtual Status CheckIntegrity() = 0;
  // Everything `grag check` looks at: SQLite's full integrity check, foreign keys, the
  // full-text index against the chunks, and grag's own invariants (vectors of owners that are
  // gone, entities no chunk mentions, relationships naming one entity twice, communities
  // without members or at the wrong level under their parent, entities in no community).
  // Each check lists at most `max_per_check` problems. An error only when no check could run.
  virtual Result<IntegrityReport> Check(int max_per_check = 20) = 0;

  // ---- read-only SQL (grag sql)

  // Runs one SELECT written by a person on its own connection to the index file, opened
  // SQLITE_OPEN_READONLY with PRAGMA query_only on, over TEMP views of that connection that
  // docs/schema.md documents (entities, relationships, entity_communities, communities,
  // reports, chunks, documents: they shadow the tables of the same names; main.<table> reads a
  // table). Nothing in the file changes, its schema included. Refused with kInvalidArgument:
  // more than one statement, anything that writes (sqlite3_stmt_readonly), and everything an
  // authorizer does not allow (only SELECT, reads, functions, recursive CTEs and introspection
  // pragmas such as table_info). An SQL error (syntax, no such column) is kInvalidArgument too.
  // At most `max_rows` rows are read (truncated says when there were more); max_rows < 0: all.
  // A statement still running after `time_limit` (0: none) is stopped: kTimeout.
  virtual Result<SqlRows> RunReadOnlySql(std::string_view sql, int64_t max_rows,
                                         std::chrono::milliseconds time_limit) = 0;

  // ---- whole tables (copying an index to another store: grag/store_copy.h)

  // A read of the whole index at one moment (see TableSnapshot). On a thread with a
  // transaction of this store open, it reads through that transaction, its writes included.
  virtual Result<std::unique_ptr<TableSnapshot>> SnapshotTables() = 0;
  // Inserts `rows` as they are (ids included; values in IndexTable::columns order) into
  // `table`, one of IndexTables(); a row whose key is one of the table's preset_keys replaces
  // the stored one. For filling an empty store inside the caller's transaction, parents before
  // children; what the store derives from rows (the full-text index) follows as for any
  // insert. kInvalidArgument for a row that breaks a constraint, naming the table.
  virtual Status InsertRows(const IndexTable& table, const std::vector<TableRow>& rows) = 0;
  // After InsertRows: ids the store assigns later come after the inserted ones (PostgreSQL's
  // identity sequences; SQLite needs nothing).
  virtual Status FinishInsertRows() = 0;

 protected:
  Store() = default;
};

// An open transaction. Commit() makes its writes durable (or, when nested, part of the enclosing
// transaction); a Transaction destroyed without Commit() rolls back. Commit() and Rollback()
// finish it either way: after a failed Commit() the writes are rolled back. Holds the store's
// write mutex from Begin() to the end (see Store); must be finished on the thread that began it,
// and nested transactions must finish innermost first. Must not outlive its Store.
class [[nodiscard]] Transaction {
 public:
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  Status Commit();
  Status Rollback();
  bool active() const { return active_; }

  // Internal: made by a store backend only, holding its write mutex.
  Transaction(TransactionOwner* owner, std::unique_lock<std::recursive_mutex> lock, int depth);

 private:
  Status Finish(bool commit);

  TransactionOwner* owner_;
  std::unique_lock<std::recursive_mutex> lock_;  // the store's mutex, held while active
  int depth_;                                    // 0: the outermost transaction
  bool active_ = true;
};

}  // namespace grag
