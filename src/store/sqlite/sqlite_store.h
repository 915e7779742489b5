// The SQLite backend of Store: one index file in WAL mode (docs/schema.md has its tables).
//
// Writes go through one connection under one recursive mutex (see store_impl.h). Reads from a
// thread with no transaction open use a pool of read-only connections to the same file, so a
// query runs beside an indexing transaction of another thread (WAL lets readers see the last
// commit while a writer works).
#pragma once

#include <memory>
#include <string>

#include "grag/store.h"

namespace grag {
namespace store {

// Store::Open for an SQLite file path.
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const StoreOptions& options);

}  // namespace store

class SqliteStore final : public Store {
 public:
  struct Impl;  // store_impl.h
  explicit SqliteStore(std::unique_ptr<Impl> impl);
  ~SqliteStore() override;

  Result<Transaction> Begin() override;
  Result<Transaction> BeginAllOrNothing() override;
  Status WriteGrouped(const std::function<Status()>& write) override;
  Status WriteDeferred(std::function<Status()> write,
                       std::function<void()> committed = nullptr) override;
  Status FlushDeferred() override;
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
  Result<PackedEmbeddings> ListPackedEmbeddings(EmbeddingOwner owner) override;
  Result<std::vector<std::string>> RefreshQueryImages() override;
  Status WarmGraphImage() override;
  Result<std::map<std::string, std::string>> ListEmbeddingHashes(EmbeddingOwner owner) override;
  Result<std::optional<EmbeddingSpace>> GetEmbeddingSpace(EmbeddingOwner owner) override;
  Result<int64_t> DeleteEmbeddings(EmbeddingOwner owner) override;
  Result<int64_t> DeleteEmbeddingsOf(EmbeddingOwner owner,
                                     const std::vector<std::string>& owner_ids) override;
  Result<int64_t> ReencodeEmbeddings(VectorEncoding encoding) override;
  KeyValueCache& ReplyCache() override;
  Result<CachePruneResult> PruneReplyCache(const CachePruneOptions& options) override;
  Result<std::optional<FileSpace>> GetFileSpace() override;
  Result<std::optional<std::pair<int64_t, int64_t>>> Compact() override;
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

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace grag
