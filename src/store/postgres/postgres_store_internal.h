// PostgresStore's class and what its source files share (postgres_store.cpp: transactions,
// the reply cache, opening; postgres_documents.cpp: documents, chunks, extractions;
// postgres_graph.cpp: entities, relationships, resolution; postgres_reports.cpp: communities,
// reports, embeddings, runs; postgres_tables.cpp: inspection and whole tables). Private to the
// PostgreSQL backend.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../group_commit.h"
#include "postgres_store.h"
#include "pq.h"

namespace grag::store::postgres_internal {

using pq::Args;
using pq::Rows;

// Words of a plain-text query: runs of ASCII letters and digits and of non-ASCII characters,
// as the SQLite store splits them, so no input means anything but words. Bytes that are not
// UTF-8 separate words (PostgreSQL refuses them in text).
std::vector<std::string> QueryWords(std::string_view query, size_t max_words);

// The first column of every row, as text.
std::vector<std::string> TextColumn(const Rows& rows);

class PostgresStore;

class PgReplyCache final : public KeyValueCache {
 public:
  explicit PgReplyCache(PostgresStore* store) : store_(store) {}
  std::optional<std::string> Get(std::string_view key) override;
  Status Put(std::string_view key, std::string_view value, std::string_view model,
             std::string_view kind) override;

 private:
  PostgresStore* store_;  // not owned; the store owns this
};

// The connection one read call uses (PostgresStore::Read): the writer's, under its mutex, on the
// thread with an open transaction (its reads see its writes); else one of a small pool of read
// connections, which sees the last commit and waits for nobody. Returns the pooled connection
// when it goes.
class ReadHandle {
 public:
  ReadHandle(PostgresStore* store, std::unique_lock<std::recursive_mutex> lock)
      : store_(store), lock_(std::move(lock)) {}
  ReadHandle(PostgresStore* store, std::unique_ptr<pq::Connection> reader)
      : store_(store), reader_(std::move(reader)) {}
  ReadHandle(ReadHandle&& other) noexcept
      : store_(other.store_),
        lock_(std::move(other.lock_)),
        reader_(std::move(other.reader_)),
        snapshot_(std::move(other.snapshot_)),
        in_snapshot_(std::exchange(other.in_snapshot_, false)) {}
  ReadHandle& operator=(ReadHandle&&) = delete;
  ~ReadHandle();
  pq::Connection& conn();
  // One snapshot for the reads of a multi-statement call (ended when the handle goes).
  Status BeginSnapshot();

 private:
  PostgresStore* store_;
  std::unique_lock<std::recursive_mutex> lock_;  // the writer path
  std::unique_ptr<pq::Connection> reader_;       // the pool path
  std::optional<Transaction> snapshot_;          // the writer path's read transaction
  bool in_snapshot_ = false;                     // the pool path's read transaction
};

class PostgresStore final : public Store, private TransactionOwner {
 public:
  PostgresStore(std::string url, std::string redacted, pq::Connection conn, bool read_only,
                int busy_timeout_ms)
      : url_(std::move(url)),
        redacted_(std::move(redacted)),
        conn_(std::move(conn)),
        read_only_(read_only),
        busy_timeout_ms_(busy_timeout_ms) {}
  ~PostgresStore() override = default;

  Result<Transaction> Begin() override { return BeginTx(true); }
  Status WriteGrouped(const std::function<Status()>& write) override;

  Result<DocumentChange> UpsertDocument(const Document& doc) override;
  Result<std::optional<Document>> GetDocument(std::string_view id) override;
  Result<std::vector<DocumentInfo>> ListDocuments() override;
  Result<bool> DeleteDocument(std::string_view id) override;

  Result<ChunkChanges> ReplaceDocumentChunks(std::string_view document_id,
                                             const std::vector<ChunkRecord>& chunks) override;
  Result<std::optional<ChunkRecord>> GetChunk(std::string_view id) override;
  Result<std::vector<ChunkRecord>> ListChunks(std::string_view document_id) override;
  Result<std::vector<std::string>> ListChunkIds() override;
  Result<int64_t> CountChunks() override;
  Result<int64_t> CountEntities() override;
  Result<std::vector<ChunkHit>> SearchChunks(std::string_view query, int k) override;
  Result<std::vector<double>> RankTexts(const std::vector<std::string>& texts,
                                        std::string_view query) override;

  Status PutExtraction(const ExtractionRecord& record) override;
  Result<std::optional<ExtractionRecord>> GetExtraction(std::string_view chunk_id,
                                                        const ExtractorId& extractor) override;
  Result<std::vector<std::string>> ChunksNeedingExtraction(const ExtractorId& extractor) override;
  Result<std::vector<ChunkEntityMention>> ListEntityMentions(const ExtractorId& extractor) override;
  Result<std::vector<ChunkRelationshipMention>> ListRelationshipMentions(
      const ExtractorId& extractor) override;
  Result<std::string> ExtractionsDigest(const ExtractorId& extractor) override;
  Status ScanEntityMentions(
      const ExtractorId& extractor,
      const std::function<Status(const ChunkEntityMention& mention)>& fn) override;
  Status ScanRelationshipMentions(
      const ExtractorId& extractor,
      const std::function<Status(const ChunkRelationshipMention& mention)>& fn) override;

  Result<int64_t> UpsertEntity(const EntityRecord& entity) override;
  Result<std::optional<EntityRecord>> GetEntity(int64_t id) override;
  Result<std::optional<EntityRecord>> GetEntityByKey(std::string_view name_key) override;
  Result<std::vector<EntityRecord>> ListEntities(int64_t limit) override;
  Result<bool> DeleteEntity(int64_t id) override;
  Status SetEntityChunks(int64_t entity_id, const std::vector<std::string>& chunk_ids) override;
  Result<std::vector<std::string>> GetEntityChunks(int64_t entity_id) override;
  Result<int64_t> UpsertRelationship(const RelationshipRecord& relationship) override;
  Result<std::vector<RelationshipRecord>> ListRelationships() override;
  Result<std::vector<RelationshipRecord>> ListRelationshipsOf(int64_t entity_id) override;
  Result<std::vector<RelationshipRecord>> ListRelationshipEdgesOf(int64_t entity_id) override;
  Result<std::vector<std::optional<std::string>>> GetRelationshipDescriptions(
      const std::vector<int64_t>& ids) override;
  Status SetRelationshipChunks(int64_t relationship_id,
                               const std::vector<std::string>& chunk_ids) override;
  Result<bool> DeleteRelationship(int64_t id) override;
  Result<GraphSnapshot> LoadGraphSnapshot() override;
  Result<GraphSnapshot> LoadGraphNeighbourhood(const std::vector<int64_t>& entity_ids,
                                               const std::vector<std::string>& chunk_ids,
                                               const NeighbourhoodLimits& limits) override;
  Result<int64_t> CountChunksWithPhrase(std::string_view phrase) override;
  Result<std::vector<int64_t>> CountChunksWithWords(const std::vector<std::string>& words) override;
  Result<ChunkLinks> ListChunkLinks() override;
  Status RecomputeGraphStats() override;

  Result<std::vector<EntityAlias>> ListAliases() override;
  Result<std::unordered_map<std::string, std::string>> CanonicalKeys(
      const std::vector<std::string>& name_keys) override;
  Result<std::vector<ResolutionLinkRecord>> ListResolutionLinks() override;
  Status ReplaceResolution(const std::vector<EntityAlias>& aliases,
                           const std::vector<ResolutionLinkRecord>& links) override;
  Status PutEntityOverride(std::string_view key_a, std::string_view key_b, bool merge) override;
  Result<bool> DeleteEntityOverride(std::string_view key_a, std::string_view key_b) override;
  Result<std::vector<EntityOverride>> ListEntityOverrides() override;
  Result<std::optional<std::string>> GetMeta(std::string_view key) override;
  Status SetMeta(std::string_view key, std::string_view value) override;

  Status PublishWork(std::string_view params, const std::vector<std::string>& chunk_ids) override;
  Result<std::vector<std::string>> ClaimWork(std::string_view worker, std::string_view params,
                                             size_t n, std::chrono::milliseconds lease) override;
  Status RenewWork(std::string_view worker, std::chrono::milliseconds lease) override;
  Status FinishWork(std::string_view worker, std::string_view chunk_id,
                    const WorkSpend& spend) override;
  Result<std::optional<WorkState>> GetWorkState() override;
  Status ClearWork() override;

  Result<int64_t> ReplaceCommunities(const ClusteringRecord& clustering,
                                     const std::vector<CommunityRecord>& communities) override;
  Result<std::vector<CommunityRecord>> ListCommunities(std::optional<int64_t> level) override;
  Result<std::vector<int64_t>> CommunitiesOfEntity(int64_t entity_id) override;
  Result<std::map<int64_t, std::vector<std::string>>> CommunityChunks(
      std::optional<int64_t> level) override;
  Result<std::optional<ClusteringRecord>> LatestClustering() override;

  Status PutReport(const ReportRecord& report) override;
  Status MarkReportStale(int64_t community_id, std::string_view note) override;
  Result<std::optional<ReportRecord>> GetReport(int64_t community_id) override;
  Result<std::vector<ReportRecord>> ListReports(std::optional<int64_t> level,
                                                bool findings) override;

  Status PutEmbeddings(const std::vector<EmbeddingRecord>& records) override;
  Result<std::optional<EmbeddingRecord>> GetEmbedding(EmbeddingOwner owner,
                                                      std::string_view owner_id) override;
  Result<std::vector<EmbeddingRecord>> ListEmbeddings(EmbeddingOwner owner) override;
  Result<std::map<std::string, std::string>> ListEmbeddingHashes(EmbeddingOwner owner) override;
  Result<std::optional<EmbeddingSpace>> GetEmbeddingSpace(EmbeddingOwner owner) override;
  Result<int64_t> DeleteEmbeddings(EmbeddingOwner owner) override;
  Result<int64_t> DeleteEmbeddingsOf(EmbeddingOwner owner,
                                     const std::vector<std::string>& owner_ids) override;

  KeyValueCache& ReplyCache() override { return reply_cache_; }
  Result<CachePruneResult> PruneReplyCache(const CachePruneOptions& options) override;

  Result<int64_t> BeginRun(std::string_view command) override;
  Status UpdateRun(int64_t run_id, std::string_view stage,
                   const std::map<std::string, int64_t>& counters) override;
  Status FinishRun(int64_t run_id, RunStatus status, std::string_view message) override;
  Result<std::optional<RunRecord>> GetRun(int64_t run_id) override;
  Result<std::vector<RunRecord>> ListRuns(int64_t limit) override;
  Status SetStageProgress(int64_t run_id, const StageProgress& progress) override;
  Result<std::vector<StageProgress>> ListStageProgress(int64_t run_id) override;
  Result<std::map<std::string, int64_t>> TotalRunCounters() override;

  Result<StoreStats> Stats() override;
  Result<StoreInfo> Info() override;
  Status CheckIntegrity() override;
  Result<IntegrityReport> Check(int max_per_check) override;
  Result<SqlRows> RunReadOnlySql(std::string_view sql, int64_t max_rows,
                                 std::chrono::milliseconds time_limit) override;

  Result<std::unique_ptr<TableSnapshot>> SnapshotTables() override;
  Status InsertRows(const IndexTable& table, const std::vector<TableRow>& rows) override;
  Status FinishInsertRows() override;

  // For the reply cache and ReadHandle.
  std::unique_lock<std::recursive_mutex> Lock() { return std::unique_lock(mu_); }
  pq::Connection& conn() { return conn_; }
  bool read_only() const { return read_only_; }
  Result<ReadHandle> Read();
  Result<Transaction> BeginRead() { return BeginTx(false); }
  void ReturnReader(std::unique_ptr<pq::Connection> reader);

 private:
  Status FinishTransaction(int depth, bool commit) override;
  // A transaction, or a savepoint inside this thread's open one. A read transaction
  // (write == false) gives multi-statement reads one snapshot (REPEATABLE READ, READ ONLY).
  Result<Transaction> BeginTx(bool write);

  // Runs one statement that writes: on its own outside a transaction (a statement is atomic),
  // in a savepoint inside one, so that its failure leaves the caller's transaction usable (a
  // failed statement aborts a whole PostgreSQL transaction, unlike SQLite's).
  Result<Rows> Write(std::string_view sql, const Args& args);

  const std::string url_;  // with its password, if any: never shown
  const std::string redacted_;
  std::recursive_mutex mu_;  // guards conn_ (and the open transactions); held by a Transaction
  pq::Connection conn_;
  const bool read_only_;
  const int busy_timeout_ms_;
  PgReplyCache reply_cache_{this};
  // The thread with an open transaction, if any (its reads use the writer connection).
  std::atomic<std::thread::id> tx_thread_{};

  // The reader pool: connections opened on demand, at most kMaxReaders at once.
  static constexpr int kMaxReaders = 8;
  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::unique_ptr<pq::Connection>> idle_readers_;  // guarded by pool_mu_
  int readers_open_ = 0;                                       // guarded by pool_mu_

  store::GroupCommit group_commit_{[this] { return BeginTx(true); }};
};

}  // namespace grag::store::postgres_internal
