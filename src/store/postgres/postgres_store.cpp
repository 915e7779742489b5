// PostgresStore: every Store method over one libpq connection (see postgres_store.h).
#include "postgres_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "../community_checks.h"
#include "../group_commit.h"
#include "../json_fields.h"
#include "../names.h"
#include "../neighbourhood.h"
#include "../table_sql.h"
#include "grag/hash.h"
#include "grag/log.h"
#include "grag/utf8_sequence.h"
#include "postgres_schema.h"
#include "pq.h"

namespace grag::store {
namespace {

using pq::Args;
using pq::Rows;

// Advisory lock keys (two int4): "grag" in ASCII, then what the lock is for.
constexpr int64_t kLockClass = 0x67726167;
constexpr int64_t kWriterLock = 1;
constexpr int64_t kMigrationLock = 2;

// Length of the valid UTF-8 sequence at s[i], 0 when the byte there starts none.
size_t Utf8Length(std::string_view s, size_t i) {
  return Utf8SequenceLength(reinterpret_cast<const unsigned char*>(s.data()), i, s.size());
}

// Words of a plain-text query: runs of ASCII letters and digits and of non-ASCII characters,
// as the SQLite store splits them, so no input means anything but words. Bytes that are not
// UTF-8 separate words (PostgreSQL refuses them in text).
std::vector<std::string> QueryWords(std::string_view query, size_t max_words) {
  // Length of the word character at i, 0 for a separator.
  auto word_char = [&](size_t i) -> size_t {
    const auto ch = static_cast<unsigned char>(query[i]);
    if (ch >= 0x80) return Utf8Length(query, i);
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ? 1 : 0;
  };
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  size_t i = 0;
  while (i < query.size() && out.size() < max_words) {
    while (i < query.size() && word_char(i) == 0) ++i;
    const size_t start = i;
    for (size_t n = 0; i < query.size() && (n = word_char(i)) > 0;) i += n;
    if (i == start) break;
    std::string word(query.substr(start, i - start));
    if (seen.insert(word).second) out.push_back(std::move(word));
  }
  return out;
}

// FTS5's BM25 parameters and IDF, so that scores read as the SQLite store's do.
constexpr double kK1 = 1.2;
constexpr double kB = 0.75;
double Idf(double n, double df) {
  const double idf = std::log((n - df + 0.5) / (df + 0.5));
  return idf <= 0 ? 1e-6 : idf;
}

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
  Result<std::map<std::string, std::string>> ListEmbeddingHashes(EmbeddingOwner owner) override;
  Result<std::optional<EmbeddingSpace>> GetEmbeddingSpace(EmbeddingOwner owner) override;
  Result<int64_t> DeleteEmbeddings(EmbeddingOwner owner) override;

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

// ---------------------------------------------------------------- transactions

Result<Transaction> PostgresStore::BeginTx(bool write) {
  std::unique_lock lock(mu_);
  const int depth = open_transactions();
  Status st;
  if (depth == 0) {
    st = conn_.Exec(write ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  } else if (conn_.InFailedTransaction()) {
    st = Status::Internal("the enclosing transaction failed and must be rolled back");
  } else {
    st = conn_.Exec("SAVEPOINT sp" + std::to_string(depth));
  }
  if (!st.ok()) return st.WithContext("beginning a transaction on " + redacted_);
  if (depth == 0) tx_thread_ = std::this_thread::get_id();
  Opened();
  return Transaction(this, std::move(lock), depth);
}

Status PostgresStore::FinishTransaction(int depth, bool commit) {
  // Called by Transaction with mu_ held and the transaction already counted out.
  if (depth == 0) tx_thread_ = std::thread::id();
  Status st;
  if (depth == 0) {
    if (!conn_.InTransaction()) {
      if (commit) st = Status::IoError("the transaction was lost (connection reset)");
    } else if (commit && conn_.InFailedTransaction()) {
      (void)conn_.Exec("ROLLBACK");
      st = Status::IoError("the transaction was rolled back after an earlier error");
    } else if (commit) {
      st = conn_.Exec("COMMIT");
      if (!st.ok() && conn_.InTransaction()) (void)conn_.Exec("ROLLBACK");
    } else {
      st = conn_.Exec("ROLLBACK");
    }
  } else {
    const std::string sp = "sp" + std::to_string(depth);
    if (commit && !conn_.InFailedTransaction()) {
      st = conn_.Exec("RELEASE SAVEPOINT " + sp);
    } else {
      st = conn_.Exec("ROLLBACK TO SAVEPOINT " + sp);
      if (st.ok()) st = conn_.Exec("RELEASE SAVEPOINT " + sp);
      if (st.ok() && commit) st = Status::IoError("the savepoint was rolled back after an error");
    }
  }
  return st;
}

Status PostgresStore::WriteGrouped(const std::function<Status()>& write) {
  {
    auto lock = Lock();
    if (open_transactions() > 0) return write();
  }
  return group_commit_.Run(write);
}

Result<Rows> PostgresStore::Write(std::string_view sql, const Args& args) {
  auto lock = Lock();
  if (open_transactions() == 0) return conn_.Query(sql, args);
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_ASSIGN_OR_RETURN(Rows rows, conn_.Query(sql, args));
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return rows;
}

Result<ReadHandle> PostgresStore::Read() {
  if (tx_thread_.load() == std::this_thread::get_id()) return ReadHandle(this, Lock());
  {
    std::unique_lock lock(pool_mu_);
    pool_cv_.wait(lock, [&] { return !idle_readers_.empty() || readers_open_ < kMaxReaders; });
    if (!idle_readers_.empty()) {
      std::unique_ptr<pq::Connection> reader = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return ReadHandle(this, std::move(reader));
    }
    ++readers_open_;
  }
  Result<pq::Connection> opened = pq::Connection::Open(url_, redacted_);
  Status st = opened.status();
  if (st.ok()) {
    st = opened->Exec(
        "SET default_transaction_read_only = on; SET application_name = 'grag reader'");
  }
  if (!st.ok()) {
    {
      std::lock_guard lock(pool_mu_);
      --readers_open_;
    }
    pool_cv_.notify_one();
    // The writer's connection still works: read there.
    Log(LogLevel::kDebug, "store",
        "opening a read connection: " + st.ToString() + "; reading via the writer's");
    return ReadHandle(this, Lock());
  }
  return ReadHandle(this, std::make_unique<pq::Connection>(std::move(opened).value()));
}

void PostgresStore::ReturnReader(std::unique_ptr<pq::Connection> reader) {
  {
    std::lock_guard lock(pool_mu_);
    if (reader != nullptr && pq::Pq().status(reader->get()) == CONNECTION_OK &&
        !reader->InTransaction()) {
      idle_readers_.push_back(std::move(reader));
    } else {
      --readers_open_;  // broken: the next reader opens a new one
    }
  }
  pool_cv_.notify_one();
}

ReadHandle::~ReadHandle() {
  if (reader_ == nullptr) {
    if (snapshot_.has_value() && snapshot_->active()) (void)snapshot_->Commit();
    return;
  }
  if (in_snapshot_) (void)reader_->Exec("COMMIT");
  store_->ReturnReader(std::move(reader_));
}

pq::Connection& ReadHandle::conn() { return reader_ ? *reader_ : store_->conn(); }

Status ReadHandle::BeginSnapshot() {
  if (reader_ == nullptr) {
    GRAG_ASSIGN_OR_RETURN(Transaction tx, store_->BeginRead());
    snapshot_.emplace(std::move(tx));
    return Status::Ok();
  }
  GRAG_RETURN_IF_ERROR(reader_->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  in_snapshot_ = true;
  return Status::Ok();
}

// ---------------------------------------------------------------- documents

Result<DocumentChange> PostgresStore::UpsertDocument(const Document& doc) {
  if (doc.id.empty()) return Status::InvalidArgument("a document needs an id");
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_ASSIGN_OR_RETURN(Rows found,
                        conn_.Query("SELECT content_hash FROM documents WHERE id = $1", {doc.id}));
  DocumentChange change = DocumentChange::kAdded;
  if (!found.empty()) {
    change = found.View(0, 0) == doc.content_hash ? DocumentChange::kUnchanged
                                                  : DocumentChange::kChanged;
  }
  Status st;
  if (change == DocumentChange::kAdded) {
    st = conn_.Exec(
        "INSERT INTO documents (id, title, source_path, content_hash, text) "
        "VALUES ($1, $2, $3, $4, $5)",
        {doc.id, doc.title, doc.source_path, doc.content_hash, doc.text});
  } else if (change == DocumentChange::kChanged) {
    st = conn_.Exec(
        "UPDATE documents SET title = $2, source_path = $3, content_hash = $4, text = $5, "
        "updated_at = grag_now() WHERE id = $1",
        {doc.id, doc.title, doc.source_path, doc.content_hash, doc.text});
  } else {
    st = conn_.Exec(
        "UPDATE documents SET title = $2, source_path = $3, updated_at = grag_now() "
        "WHERE id = $1 AND (title IS DISTINCT FROM $2 OR source_path IS DISTINCT FROM $3)",
        {doc.id, doc.title, doc.source_path});
  }
  if (!st.ok()) return st.WithContext("storing document " + doc.id);
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return change;
}

Result<std::optional<Document>> PostgresStore::GetDocument(std::string_view id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query(
          "SELECT id, title, source_path, text, content_hash FROM documents WHERE id = $1", {id}));
  if (rows.empty()) return std::optional<Document>();
  Document doc;
  doc.id = rows.Text(0, 0);
  doc.title = rows.Text(0, 1);
  doc.source_path = rows.Text(0, 2);
  doc.text = rows.Text(0, 3);
  doc.content_hash = rows.Text(0, 4);
  return std::optional<Document>(std::move(doc));
}

Result<std::vector<DocumentInfo>> PostgresStore::ListDocuments() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query("SELECT d.id, d.title, d.source_path, d.content_hash, "
                                   "(SELECT count(*) FROM chunks c WHERE c.document_id = d.id), "
                                   "d.created_at, d.updated_at FROM documents d ORDER BY d.id"));
  std::vector<DocumentInfo> out(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) {
    DocumentInfo& info = out[static_cast<size_t>(i)];
    info.id = rows.Text(i, 0);
    info.title = rows.Text(i, 1);
    info.source_path = rows.Text(i, 2);
    info.content_hash = rows.Text(i, 3);
    info.chunk_count = rows.Int(i, 4);
    info.created_at = rows.Text(i, 5);
    info.updated_at = rows.Text(i, 6);
  }
  return out;
}

Result<bool> PostgresStore::DeleteDocument(std::string_view id) {
  GRAG_ASSIGN_OR_RETURN(Rows rows, Write("DELETE FROM documents WHERE id = $1", {id}));
  return rows.Affected() > 0;
}

// ---------------------------------------------------------------- chunks

constexpr std::string_view kChunkColumns =
    "id, document_id, chunk_index, text, n_tokens, start_token, start_byte, end_byte";

ChunkRecord ReadChunk(const Rows& rows, int i) {
  ChunkRecord c;
  c.id = rows.Text(i, 0);
  c.document_id = rows.Text(i, 1);
  c.index = rows.Int(i, 2);
  c.text = rows.Text(i, 3);
  c.n_tokens = rows.Int(i, 4);
  c.start_token = rows.Int(i, 5);
  c.start_byte = rows.Int(i, 6);
  c.end_byte = rows.Int(i, 7);
  return c;
}

std::vector<std::string> TextColumn(const Rows& rows) {
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) out.push_back(rows.Text(i, 0));
  return out;
}

Result<ChunkChanges> PostgresStore::ReplaceDocumentChunks(std::string_view document_id,
                                                          const std::vector<ChunkRecord>& chunks) {
  std::unordered_set<std::string_view> new_ids;
  std::unordered_set<int64_t> new_indexes;
  const std::string doc_id(document_id);
  for (const ChunkRecord& c : chunks) {
    if (c.document_id != document_id) {
      return Status::InvalidArgument("chunk " + c.id + " belongs to document " + c.document_id +
                                     ", not " + doc_id);
    }
    if (c.id.empty()) return Status::InvalidArgument("a chunk needs an id");
    if (!new_ids.insert(c.id).second) {
      return Status::InvalidArgument("chunk id " + c.id + " appears twice in document " + doc_id);
    }
    if (c.index < 0 || !new_indexes.insert(c.index).second) {
      return Status::InvalidArgument("chunk index " + std::to_string(c.index) +
                                     " is negative or repeated in document " + doc_id);
    }
  }
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  {
    GRAG_ASSIGN_OR_RETURN(Rows doc, conn_.Query("SELECT 1 FROM documents WHERE id = $1", {doc_id}));
    if (doc.empty()) return Status::NotFound("no document " + doc_id);
  }
  GRAG_ASSIGN_OR_RETURN(Rows existing,
                        conn_.Query("SELECT id FROM chunks WHERE document_id = $1", {doc_id}));
  ChunkChanges changes;
  for (int i = 0; i < existing.size(); ++i) {
    const std::string id = existing.Text(i, 0);
    if (new_ids.count(id) != 0) {
      ++changes.kept;
      continue;
    }
    GRAG_RETURN_IF_ERROR(conn_.Exec("DELETE FROM chunks WHERE id = $1", {id}));
    ++changes.removed;
  }
  changes.added = static_cast<int64_t>(chunks.size()) - changes.kept;
  // Kept chunks may move: park their indexes out of the way of UNIQUE(document_id, chunk_index).
  GRAG_RETURN_IF_ERROR(conn_.Exec(
      "UPDATE chunks SET chunk_index = -1 - chunk_index WHERE document_id = $1", {doc_id}));
  constexpr std::string_view kUpsert =
      "INSERT INTO chunks (id, document_id, chunk_index, text, n_tokens, start_token, "
      "start_byte, end_byte) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO UPDATE "
      "SET chunk_index = excluded.chunk_index, n_tokens = excluded.n_tokens, "
      "start_token = excluded.start_token, start_byte = excluded.start_byte, "
      "end_byte = excluded.end_byte WHERE chunks.document_id = excluded.document_id "
      "AND chunks.text = excluded.text";
  for (const ChunkRecord& c : chunks) {
    const Args args = {c.id,       c.document_id, c.index,      c.text,
                       c.n_tokens, c.start_token, c.start_byte, c.end_byte};
    Result<int64_t> n = conn_.Changes(kUpsert, args);
    if (!n.ok()) return n.status().WithContext("storing chunk " + c.id);
    if (*n > 0) continue;
    GRAG_ASSIGN_OR_RETURN(Rows owner,
                          conn_.Query("SELECT document_id FROM chunks WHERE id = $1", {c.id}));
    const std::string owner_doc = owner.empty() ? std::string() : owner.Text(0, 0);
    if (owner_doc != c.document_id) {
      return Status::InvalidArgument("chunk id " + c.id + " already belongs to document " +
                                     owner_doc);
    }
    // Same id, new text: treat it as a new chunk so stale extraction results go.
    GRAG_RETURN_IF_ERROR(conn_.Exec("DELETE FROM chunks WHERE id = $1", {c.id}));
    GRAG_RETURN_IF_ERROR(conn_.Exec(kUpsert, args));
    --changes.kept;
    ++changes.added;
    ++changes.removed;
  }
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return changes;
}

Result<std::optional<ChunkRecord>> PostgresStore::GetChunk(std::string_view id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query(
                     "SELECT " + std::string(kChunkColumns) + " FROM chunks WHERE id = $1", {id}));
  if (rows.empty()) return std::optional<ChunkRecord>();
  return std::optional<ChunkRecord>(ReadChunk(rows, 0));
}

Result<std::vector<ChunkRecord>> PostgresStore::ListChunks(std::string_view document_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query("SELECT " + std::string(kChunkColumns) +
                                                         " FROM chunks WHERE document_id = $1 "
                                                         "ORDER BY chunk_index",
                                                     {document_id}));
  std::vector<ChunkRecord> out;
  for (int i = 0; i < rows.size(); ++i) out.push_back(ReadChunk(rows, i));
  return out;
}

Result<std::vector<std::string>> PostgresStore::ListChunkIds() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query("SELECT id FROM chunks ORDER BY document_id, chunk_index"));
  return TextColumn(rows);
}

Result<int64_t> PostgresStore::CountChunks() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  return read.conn().QueryInt("SELECT count(*) FROM chunks");
}

Result<int64_t> PostgresStore::CountEntities() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  return read.conn().QueryInt("SELECT count(*) FROM entities");
}

Result<std::vector<ChunkHit>> PostgresStore::SearchChunks(std::string_view query, int k) {
  std::vector<ChunkHit> out;
  const std::vector<std::string> words = QueryWords(query, 128);
  if (words.empty() || k <= 0) return out;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  // Each word as a phrase of its terms (a word the parser splits, "marley—dead", is a phrase as
  // FTS5 reads a quoted string) and the chunks holding it: GIN look-ups.
  GRAG_ASSIGN_OR_RETURN(
      Rows per_word,
      read.conn().Query(
          "SELECT u.i, phraseto_tsquery('grag_text', u.x)::text, "
          "(SELECT count(*) FROM chunks WHERE tsv @@ phraseto_tsquery('grag_text', u.x)) "
          "FROM unnest($1::text[]) WITH ORDINALITY AS u(x, i) ORDER BY u.i",
          {pq::TextArray(words)}));
  GRAG_ASSIGN_OR_RETURN(
      Rows corpus, read.conn().Query("SELECT count(*), coalesce(avg(n_terms), 0) FROM chunks"));
  const double n = corpus.Double(0, 0);
  const double avgdl = std::max(1.0, corpus.Double(0, 1));
  struct Word {
    std::string text;
    std::string tsquery;
    double df;
  };
  std::vector<Word> present;
  std::vector<Word> kept;
  for (int i = 0; i < per_word.size(); ++i) {
    Word w{words[static_cast<size_t>(per_word.Int(i, 0) - 1)], per_word.Text(i, 1),
           per_word.Double(i, 2)};
    if (w.df <= 0 || w.tsquery.empty()) continue;
    present.push_back(w);
    if (2 * w.df <= n) kept.push_back(std::move(w));
  }
  // Words in more than half the chunks weigh about nothing yet match nearly every chunk: left
  // out, as the SQLite store does, unless they are all there is in a small index (or the query
  // is one word).
  if (words.size() == 1 || (kept.empty() && n < 20)) kept = present;
  if (kept.empty()) return out;
  std::string match;
  std::vector<std::string> kept_words;
  std::vector<std::string> idfs;
  for (const Word& w : kept) {
    if (!match.empty()) match += " | ";
    match += "(" + w.tsquery + ")";
    kept_words.push_back(w.text);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", Idf(n, w.df));
    idfs.emplace_back(buf);
  }
  // BM25 with FTS5's parameters: each word's IDF spread over its terms, term frequencies from
  // the tsvector's positions, the document length from n_terms.
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query(
          "WITH w AS (SELECT l AS lex, u.idf / greatest(1, cardinality(tsvector_to_array("
          "to_tsvector('grag_text', u.x)))) AS wt FROM unnest($2::text[], $3::float8[]) AS "
          "u(x, idf), unnest(tsvector_to_array(to_tsvector('grag_text', u.x))) AS l) "
          "SELECT c.id, c.document_id, c.chunk_index, s.score FROM chunks c, LATERAL ("
          "SELECT coalesce(sum(w.wt * t.tf * ($6::float8 + 1) / (t.tf + $6::float8 * (1 - "
          "$7::float8 + $7::float8 * c.n_terms / "
          "$4::float8))), 0) AS score FROM (SELECT e.lexeme, coalesce(array_length(e.positions, "
          "1), 1) AS tf FROM unnest(c.tsv) AS e) t JOIN w ON w.lex = t.lexeme) s "
          "WHERE c.tsv @@ $1::tsquery ORDER BY s.score DESC, c.id LIMIT $5",
          {match, pq::TextArray(kept_words), pq::TextArray(idfs), avgdl, int64_t{k}, kK1, kB}));
  for (int i = 0; i < rows.size(); ++i) {
    ChunkHit& hit = out.emplace_back();
    hit.chunk_id = rows.Text(i, 0);
    hit.document_id = rows.Text(i, 1);
    hit.index = rows.Int(i, 2);
    hit.score = rows.Double(i, 3);
  }
  return out;
}

Result<std::vector<double>> PostgresStore::RankTexts(const std::vector<std::string>& texts,
                                                     std::string_view query) {
  std::vector<double> scores(texts.size(), 0.0);
  const std::vector<std::string> words = QueryWords(query, 128);
  if (words.empty() || texts.empty()) return scores;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  // Per text its length, and per (text, word term) the term's frequency; BM25 here, with the
  // IDF over these texts.
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query(
          "WITH t AS (SELECT u.i, to_tsvector('grag_text', u.x) AS v FROM unnest($1::text[]) "
          "WITH ORDINALITY AS u(x, i)), "
          "w AS (SELECT u.j, l AS lex, 1.0 / greatest(1, cardinality(tsvector_to_array("
          "to_tsvector('grag_text', u.x)))) AS wt FROM unnest($2::text[]) WITH ORDINALITY AS "
          "u(x, j), unnest(tsvector_to_array(to_tsvector('grag_text', u.x))) AS l), "
          "d AS (SELECT t.i, (SELECT coalesce(sum(coalesce(array_length(e.positions, 1), 1)), 0) "
          "FROM unnest(t.v) AS e) AS dl FROM t), "
          "m AS (SELECT t.i, w.j, w.wt, coalesce(array_length(e.positions, 1), 1) AS tf "
          "FROM t, unnest(t.v) AS e, w WHERE w.lex = e.lexeme) "
          "SELECT d.i, d.dl, m.j, m.wt, m.tf FROM d LEFT JOIN m ON m.i = d.i ORDER BY d.i",
          {pq::TextArray(texts), pq::TextArray(words)}));
  const size_t n = texts.size();
  std::vector<double> dl(n, 0);
  struct Hit {
    size_t text;
    int64_t word;
    double wt;
    double tf;
  };
  std::vector<Hit> hits;
  std::map<int64_t, std::unordered_set<size_t>> texts_of_word;
  for (int r = 0; r < rows.size(); ++r) {
    const int64_t i = rows.Int(r, 0) - 1;
    if (i < 0 || static_cast<size_t>(i) >= n) continue;
    dl[static_cast<size_t>(i)] = rows.Double(r, 1);
    if (rows.IsNull(r, 2)) continue;
    hits.push_back({static_cast<size_t>(i), rows.Int(r, 2), rows.Double(r, 3), rows.Double(r, 4)});
    texts_of_word[rows.Int(r, 2)].insert(static_cast<size_t>(i));
  }
  double avgdl = 0;
  for (double d : dl) avgdl += d;
  avgdl = std::max(1.0, avgdl / static_cast<double>(n));
  for (const Hit& h : hits) {
    const double idf =
        Idf(static_cast<double>(n), static_cast<double>(texts_of_word[h.word].size()));
    scores[h.text] +=
        idf * h.wt * h.tf * (kK1 + 1) / (h.tf + kK1 * (1 - kB + kB * dl[h.text] / avgdl));
  }
  for (double& s : scores) s = std::max(0.0, s);
  return scores;
}

// ---------------------------------------------------------------- extraction results

Status PostgresStore::PutExtraction(const ExtractionRecord& r) {
  if (r.extractor.model.empty()) {
    return Status::InvalidArgument("an extraction result needs the extractor's model name");
  }
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_ASSIGN_OR_RETURN(Rows chunk,
                        conn_.Query("SELECT 1 FROM chunks WHERE id = $1", {r.chunk_id}));
  if (chunk.empty()) {
    return Status::InvalidArgument("no chunk " + r.chunk_id + " to store an extraction for");
  }
  const std::string_view kind = ExtractorKindName(r.extractor.kind);
  GRAG_RETURN_IF_ERROR(
      conn_.Exec("DELETE FROM extractions WHERE chunk_id = $1 AND extractor = $2 AND model = $3",
                 {r.chunk_id, kind, r.extractor.model}));
  GRAG_ASSIGN_OR_RETURN(
      const int64_t extraction_id,
      conn_.QueryInt("INSERT INTO extractions (id, chunk_id, extractor, model, status, reason, "
                     "gleaning_rounds, params_hash) VALUES ((SELECT coalesce(max(id), 0) + 1 FROM "
                     "extractions), $1, $2, $3, $4, $5, $6, $7) RETURNING id",
                     {r.chunk_id, kind, r.extractor.model, ExtractionStatusName(r.status), r.reason,
                      r.gleaning_rounds, r.params_hash}));
  if (!r.entities.empty()) {
    std::vector<std::string> name, key, type, desc;
    for (const EntityMention& m : r.entities) {
      name.push_back(m.name);
      key.push_back(m.name_key);
      type.push_back(m.type);
      desc.push_back(m.description);
    }
    GRAG_RETURN_IF_ERROR(conn_.Exec(
        "INSERT INTO entity_mentions (extraction_id, name, name_key, type, description) "
        "SELECT $1::bigint, a, b, c, d FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) "
        "WITH ORDINALITY AS u(a, b, c, d, o) ORDER BY o",
        {extraction_id, pq::TextArray(name), pq::TextArray(key), pq::TextArray(type),
         pq::TextArray(desc)}));
  }
  if (!r.relationships.empty()) {
    std::vector<std::string> src, tgt, skey, tkey, desc, strength;
    for (const RelationshipMention& m : r.relationships) {
      src.push_back(m.source);
      tgt.push_back(m.target);
      skey.push_back(m.source_key);
      tkey.push_back(m.target_key);
      desc.push_back(m.description);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", m.strength);
      strength.emplace_back(buf);
    }
    GRAG_RETURN_IF_ERROR(conn_.Exec(
        "INSERT INTO relationship_mentions (extraction_id, source, target, source_key, "
        "target_key, description, strength) SELECT $1::bigint, a, b, c, d, e, f FROM "
        "unnest($2::text[], "
        "$3::text[], $4::text[], $5::text[], $6::text[], $7::float8[]) WITH ORDINALITY AS "
        "u(a, b, c, d, e, f, o) ORDER BY o",
        {extraction_id, pq::TextArray(src), pq::TextArray(tgt), pq::TextArray(skey),
         pq::TextArray(tkey), pq::TextArray(desc), pq::TextArray(strength)}));
  }
  return tx.Commit();
}

Result<std::optional<ExtractionRecord>> PostgresStore::GetExtraction(std::string_view chunk_id,
                                                                     const ExtractorId& extractor) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  GRAG_ASSIGN_OR_RETURN(
      Rows head,
      read.conn().Query("SELECT id, status, reason, gleaning_rounds, params_hash, created_at "
                        "FROM extractions WHERE chunk_id = $1 AND extractor = $2 AND model = $3",
                        {chunk_id, ExtractorKindName(extractor.kind), extractor.model}));
  if (head.empty()) return std::optional<ExtractionRecord>();
  ExtractionRecord r;
  const int64_t id = head.Int(0, 0);
  r.chunk_id = std::string(chunk_id);
  r.extractor = extractor;
  r.status = ParseExtractionStatus(head.View(0, 1));
  r.reason = head.Text(0, 2);
  r.gleaning_rounds = head.Int(0, 3);
  r.params_hash = head.Text(0, 4);
  r.created_at = head.Text(0, 5);
  GRAG_ASSIGN_OR_RETURN(Rows ents,
                        read.conn().Query("SELECT name, name_key, type, description FROM "
                                          "entity_mentions WHERE extraction_id = $1 ORDER BY id",
                                          {id}));
  for (int i = 0; i < ents.size(); ++i) {
    r.entities.push_back({ents.Text(i, 0), ents.Text(i, 1), ents.Text(i, 2), ents.Text(i, 3)});
  }
  GRAG_ASSIGN_OR_RETURN(
      Rows rels, read.conn().Query("SELECT source, target, source_key, target_key, description, "
                                   "strength FROM relationship_mentions WHERE extraction_id = $1 "
                                   "ORDER BY id",
                                   {id}));
  for (int i = 0; i < rels.size(); ++i) {
    r.relationships.push_back({rels.Text(i, 0), rels.Text(i, 1), rels.Text(i, 2), rels.Text(i, 3),
                               rels.Text(i, 4), rels.Double(i, 5)});
  }
  return std::optional<ExtractionRecord>(std::move(r));
}

Result<std::vector<std::string>> PostgresStore::ChunksNeedingExtraction(
    const ExtractorId& extractor) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query("SELECT c.id FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM "
                                   "extractions e WHERE e.chunk_id = c.id AND e.extractor = $1 AND "
                                   "e.model = $2 AND e.status = 'ok') ORDER BY c.document_id, "
                                   "c.chunk_index",
                                   {ExtractorKindName(extractor.kind), extractor.model}));
  return TextColumn(rows);
}

Result<std::vector<ChunkEntityMention>> PostgresStore::ListEntityMentions(
    const ExtractorId& extractor) {
  std::vector<ChunkEntityMention> out;
  GRAG_RETURN_IF_ERROR(ScanEntityMentions(extractor, [&](const ChunkEntityMention& m) {
    out.push_back(m);
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<ChunkRelationshipMention>> PostgresStore::ListRelationshipMentions(
    const ExtractorId& extractor) {
  std::vector<ChunkRelationshipMention> out;
  GRAG_RETURN_IF_ERROR(ScanRelationshipMentions(extractor, [&](const ChunkRelationshipMention& m) {
    out.push_back(m);
    return Status::Ok();
  }));
  return out;
}

Result<std::string> PostgresStore::ExtractionsDigest(const ExtractorId& extractor) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT e.id, e.chunk_id, e.created_at FROM extractions e JOIN chunks c "
                        "ON c.id = e.chunk_id WHERE e.extractor = $1 AND e.model = $2 AND "
                        "e.status = 'ok' ORDER BY c.document_id, c.chunk_index",
                        {ExtractorKindName(extractor.kind), extractor.model}));
  Hasher h;
  for (int i = 0; i < rows.size(); ++i) {
    h.Add(rows.Text(i, 0)).Add("\t").Add(rows.Text(i, 1)).Add("\t").Add(rows.Text(i, 2)).Add("\n");
  }
  return h.HexDigest();
}

namespace {

// Runs `select` through a cursor in one snapshot, a batch of rows at a time, so that a large
// result is never held whole in memory; `row_fn` gets each batch and a row of it.
Status ScanCursor(ReadHandle& read, const std::string& select, const Args& args,
                  const std::function<Status(const Rows& rows, int row)>& row_fn) {
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  pq::Connection& conn = read.conn();
  GRAG_RETURN_IF_ERROR(conn.Exec("DECLARE grag_scan NO SCROLL CURSOR FOR " + select, args));
  Status st = Status::Ok();
  while (st.ok()) {
    Result<Rows> rows = conn.Query("FETCH 2000 FROM grag_scan");
    if (!rows.ok()) {
      st = rows.status();
      break;
    }
    if (rows->empty()) break;
    for (int i = 0; i < rows->size() && st.ok(); ++i) st = row_fn(*rows, i);
  }
  Status closed = conn.Exec("CLOSE grag_scan");
  return st.ok() ? closed : st;
}

}  // namespace

Status PostgresStore::ScanEntityMentions(
    const ExtractorId& extractor,
    const std::function<Status(const ChunkEntityMention& mention)>& fn) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  ChunkEntityMention m;
  return ScanCursor(
      read,
      "SELECT e.chunk_id, m.name, m.name_key, m.type, m.description FROM entity_mentions m JOIN "
      "extractions e ON e.id = m.extraction_id JOIN chunks c ON c.id = e.chunk_id WHERE "
      "e.extractor = $1 AND e.model = $2 AND e.status = 'ok' ORDER BY c.document_id, "
      "c.chunk_index, m.id",
      {ExtractorKindName(extractor.kind), extractor.model}, [&](const Rows& rows, int i) {
        m.chunk_id = rows.Text(i, 0);
        m.mention.name = rows.Text(i, 1);
        m.mention.name_key = rows.Text(i, 2);
        m.mention.type = rows.Text(i, 3);
        m.mention.description = rows.Text(i, 4);
        return fn(m);
      });
}

Status PostgresStore::ScanRelationshipMentions(
    const ExtractorId& extractor,
    const std::function<Status(const ChunkRelationshipMention& mention)>& fn) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  ChunkRelationshipMention m;
  return ScanCursor(
      read,
      "SELECT e.chunk_id, m.source, m.target, m.source_key, m.target_key, m.description, "
      "m.strength FROM relationship_mentions m JOIN extractions e ON e.id = m.extraction_id JOIN "
      "chunks c ON c.id = e.chunk_id WHERE e.extractor = $1 AND e.model = $2 AND e.status = 'ok' "
      "ORDER BY c.document_id, c.chunk_index, m.id",
      {ExtractorKindName(extractor.kind), extractor.model}, [&](const Rows& rows, int i) {
        m.chunk_id = rows.Text(i, 0);
        m.mention.source = rows.Text(i, 1);
        m.mention.target = rows.Text(i, 2);
        m.mention.source_key = rows.Text(i, 3);
        m.mention.target_key = rows.Text(i, 4);
        m.mention.description = rows.Text(i, 5);
        m.mention.strength = rows.Double(i, 6);
        return fn(m);
      });
}

// ---------------------------------------------------------------- entities

constexpr std::string_view kEntityColumns =
    "id, name_key, name, type, type_counts, description, description_hash, description_model, "
    "degree, frequency, description_basis";

EntityRecord ReadEntity(const Rows& rows, int i) {
  EntityRecord e;
  e.id = rows.Int(i, 0);
  e.name_key = rows.Text(i, 1);
  e.name = rows.Text(i, 2);
  e.type = rows.Text(i, 3);
  e.type_counts = CountsFromJson(rows.View(i, 4));
  e.description = rows.Text(i, 5);
  e.description_hash = rows.Text(i, 6);
  e.description_model = rows.Text(i, 7);
  e.degree = rows.Int(i, 8);
  e.frequency = rows.Int(i, 9);
  e.description_basis = rows.Text(i, 10);
  return e;
}

// Replaces the chunk links of one owner (entity_chunks, relationship_chunks).
Status SetLinks(pq::Connection& conn, const std::string& table, const std::string& column,
                int64_t owner_id, const std::vector<std::string>& chunk_ids) {
  GRAG_RETURN_IF_ERROR(
      conn.Exec("DELETE FROM " + table + " WHERE " + column + " = $1", {owner_id}));
  if (chunk_ids.empty()) return Status::Ok();
  Status st = conn.Exec("INSERT INTO " + table + " (" + column +
                            ", chunk_id) SELECT $1::bigint, c FROM unnest($2::text[]) AS c "
                            "ON CONFLICT DO NOTHING",
                        {owner_id, pq::TextArray(chunk_ids)});
  if (!st.ok()) {
    return st.WithContext("linking " + column + " " + std::to_string(owner_id) +
                          " to its chunks (do the chunks exist?)");
  }
  return st;
}

Result<int64_t> PostgresStore::UpsertEntity(const EntityRecord& e) {
  if (e.name_key.empty()) return Status::InvalidArgument("an entity needs a name_key");
  // Ids as SQLite assigns them (the largest plus one), so both stores number alike.
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      Write("INSERT INTO entities (id, name_key, name, type, type_counts, description, "
            "description_hash, description_model, description_basis) VALUES ((SELECT "
            "coalesce(max(id), 0) + 1 FROM entities), $1, $2, $3, $4, $5, $6, $7, $8) "
            "ON CONFLICT (name_key) DO UPDATE SET name = excluded.name, type = excluded.type, "
            "type_counts = excluded.type_counts, description = excluded.description, "
            "description_hash = excluded.description_hash, "
            "description_model = excluded.description_model, "
            "description_basis = excluded.description_basis, updated_at = grag_now() "
            "RETURNING id",
            {e.name_key, e.name, e.type, CountsToJson(e.type_counts), e.description,
             e.description_hash, e.description_model, e.description_basis}));
  if (rows.empty()) return Status::Internal("INSERT ... RETURNING gave no row");
  return rows.Int(0, 0);
}

Result<std::optional<EntityRecord>> PostgresStore::GetEntity(int64_t id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query("SELECT " + std::string(kEntityColumns) +
                                                         " FROM entities WHERE id = $1",
                                                     {id}));
  if (rows.empty()) return std::optional<EntityRecord>();
  return std::optional<EntityRecord>(ReadEntity(rows, 0));
}

Result<std::optional<EntityRecord>> PostgresStore::GetEntityByKey(std::string_view name_key) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  const std::string cols(kEntityColumns);
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query("SELECT " + cols +
                                       " FROM entities WHERE name_key = $1 UNION ALL "
                                       "SELECT " +
                                       cols +
                                       " FROM entities WHERE name_key = (SELECT canonical_key FROM "
                                       "entity_aliases WHERE name_key = $1) LIMIT 1",
                                   {name_key}));
  if (rows.empty()) return std::optional<EntityRecord>();
  return std::optional<EntityRecord>(ReadEntity(rows, 0));
}

Result<std::vector<EntityRecord>> PostgresStore::ListEntities(int64_t limit) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  const std::optional<int64_t> lim = limit < 0 ? std::nullopt : std::optional<int64_t>(limit);
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query("SELECT " + std::string(kEntityColumns) +
                                       " FROM entities ORDER BY degree DESC, name_key LIMIT $1",
                                   {lim}));
  std::vector<EntityRecord> out;
  out.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) out.push_back(ReadEntity(rows, i));
  return out;
}

Result<bool> PostgresStore::DeleteEntity(int64_t id) {
  GRAG_ASSIGN_OR_RETURN(Rows rows, Write("DELETE FROM entities WHERE id = $1", {id}));
  return rows.Affected() > 0;
}

Status PostgresStore::SetEntityChunks(int64_t entity_id,
                                      const std::vector<std::string>& chunk_ids) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_RETURN_IF_ERROR(SetLinks(conn_, "entity_chunks", "entity_id", entity_id, chunk_ids));
  return tx.Commit();
}

Result<std::vector<std::string>> PostgresStore::GetEntityChunks(int64_t entity_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT l.chunk_id FROM entity_chunks l JOIN chunks c ON c.id = l.chunk_id "
                        "WHERE l.entity_id = $1 ORDER BY c.document_id, c.chunk_index",
                        {entity_id}));
  return TextColumn(rows);
}

// ---------------------------------------------------------------- relationships

constexpr std::string_view kRelationshipSelect =
    "SELECT r.id, r.source_id, r.target_id, r.description, r.description_hash, "
    "r.description_model, r.weight, r.frequency, s.degree + t.degree, r.description_basis "
    "FROM relationships r "
    "JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id ";

std::vector<RelationshipRecord> ReadRelationships(const Rows& rows) {
  std::vector<RelationshipRecord> out(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) {
    RelationshipRecord& r = out[static_cast<size_t>(i)];
    r.id = rows.Int(i, 0);
    r.source_id = rows.Int(i, 1);
    r.target_id = rows.Int(i, 2);
    r.description = rows.Text(i, 3);
    r.description_hash = rows.Text(i, 4);
    r.description_model = rows.Text(i, 5);
    r.weight = rows.Double(i, 6);
    r.frequency = rows.Int(i, 7);
    r.combined_degree = rows.Int(i, 8);
    r.description_basis = rows.Text(i, 9);
  }
  return out;
}

Result<int64_t> PostgresStore::UpsertRelationship(const RelationshipRecord& r) {
  if (r.source_id == r.target_id) {
    return Status::InvalidArgument("a relationship needs two distinct entities (got " +
                                   std::to_string(r.source_id) + " twice)");
  }
  const int64_t a = std::min(r.source_id, r.target_id);
  const int64_t b = std::max(r.source_id, r.target_id);
  Result<Rows> rows = Write(
      "INSERT INTO relationships (id, source_id, target_id, description, "
      "description_hash, description_model, weight, description_basis) VALUES ((SELECT "
      "coalesce(max(id), 0) + 1 FROM relationships), $1, $2, $3, $4, $5, $6, $7) "
      "ON CONFLICT (source_id, target_id) DO UPDATE SET description = "
      "excluded.description, description_hash = excluded.description_hash, "
      "description_model = excluded.description_model, weight = excluded.weight, "
      "description_basis = excluded.description_basis, updated_at = grag_now() "
      "RETURNING id",
      {a, b, r.description, r.description_hash, r.description_model, r.weight,
       r.description_basis});
  if (!rows.ok()) {
    return rows.status().WithContext("relationship " + std::to_string(a) + "-" + std::to_string(b) +
                                     " (do both entities exist?)");
  }
  if (rows->empty()) return Status::Internal("INSERT ... RETURNING gave no row");
  return rows->Int(0, 0);
}

Result<std::vector<RelationshipRecord>> PostgresStore::ListRelationships() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query(std::string(kRelationshipSelect) +
                                                     "ORDER BY r.weight DESC, r.id"));
  return ReadRelationships(rows);
}

Result<std::vector<RelationshipRecord>> PostgresStore::ListRelationshipsOf(int64_t entity_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows,
                        read.conn().Query(std::string(kRelationshipSelect) +
                                              "WHERE r.source_id = $1 OR r.target_id = $1 "
                                              "ORDER BY r.weight DESC, r.id",
                                          {entity_id}));
  return ReadRelationships(rows);
}

Result<std::vector<RelationshipRecord>> PostgresStore::ListRelationshipEdgesOf(int64_t entity_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query(
          "SELECT r.id, r.source_id, r.target_id, r.weight, r.frequency, m.degree + o.degree "
          "FROM relationships r JOIN entities m ON m.id = $1 "
          "JOIN entities o ON o.id = CASE WHEN r.source_id = $1 THEN r.target_id "
          "ELSE r.source_id END "
          "WHERE r.source_id = $1 OR r.target_id = $1",
          {entity_id}));
  std::vector<RelationshipRecord> out(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) {
    RelationshipRecord& r = out[static_cast<size_t>(i)];
    r.id = rows.Int(i, 0);
    r.source_id = rows.Int(i, 1);
    r.target_id = rows.Int(i, 2);
    r.weight = rows.Double(i, 3);
    r.frequency = rows.Int(i, 4);
    r.combined_degree = rows.Int(i, 5);
  }
  return out;
}

Result<std::vector<std::optional<std::string>>> PostgresStore::GetRelationshipDescriptions(
    const std::vector<int64_t>& ids) {
  std::vector<std::optional<std::string>> out(ids.size());
  if (ids.empty()) return out;
  std::vector<std::string> texts;
  texts.reserve(ids.size());
  for (int64_t id : ids) texts.push_back(std::to_string(id));
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows,
                        read.conn().Query("SELECT id, description FROM relationships WHERE id = "
                                          "ANY($1::bigint[])",
                                          {pq::TextArray(texts)}));
  std::unordered_map<int64_t, std::string> found;
  found.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) found.emplace(rows.Int(i, 0), rows.Text(i, 1));
  for (size_t i = 0; i < ids.size(); ++i) {
    if (auto it = found.find(ids[i]); it != found.end()) out[i] = it->second;
  }
  return out;
}

Status PostgresStore::SetRelationshipChunks(int64_t relationship_id,
                                            const std::vector<std::string>& chunk_ids) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_RETURN_IF_ERROR(
      SetLinks(conn_, "relationship_chunks", "relationship_id", relationship_id, chunk_ids));
  return tx.Commit();
}

Result<bool> PostgresStore::DeleteRelationship(int64_t id) {
  GRAG_ASSIGN_OR_RETURN(Rows rows, Write("DELETE FROM relationships WHERE id = $1", {id}));
  return rows.Affected() > 0;
}

Result<ChunkLinks> PostgresStore::ListChunkLinks() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  ChunkLinks links;
  GRAG_ASSIGN_OR_RETURN(
      Rows ents,
      read.conn().Query("SELECT l.entity_id, l.chunk_id FROM entity_chunks l JOIN chunks c "
                        "ON c.id = l.chunk_id ORDER BY l.entity_id, c.document_id, "
                        "c.chunk_index"));
  for (int i = 0; i < ents.size(); ++i)
    links.entities.emplace_back(ents.Int(i, 0), ents.Text(i, 1));
  GRAG_ASSIGN_OR_RETURN(
      Rows rels,
      read.conn().Query(
          "SELECT l.relationship_id, l.chunk_id FROM relationship_chunks l JOIN chunks c "
          "ON c.id = l.chunk_id ORDER BY l.relationship_id, c.document_id, "
          "c.chunk_index"));
  for (int i = 0; i < rels.size(); ++i) {
    links.relationships.emplace_back(rels.Int(i, 0), rels.Text(i, 1));
  }
  return links;
}

Result<GraphSnapshot> PostgresStore::LoadGraphSnapshot() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  GraphSnapshot g;
  {
    GRAG_ASSIGN_OR_RETURN(
        Rows rows, read.conn().Query("SELECT id, name_key, frequency FROM entities ORDER BY id"));
    g.entities.reserve(static_cast<size_t>(rows.size()));
    for (int i = 0; i < rows.size(); ++i) {
      g.entities.push_back({rows.Int(i, 0), rows.Text(i, 1), rows.Int(i, 2)});
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        Rows rows,
        read.conn().Query("SELECT source_id, target_id, weight FROM relationships ORDER BY id"));
    g.edges.reserve(static_cast<size_t>(rows.size()));
    for (int i = 0; i < rows.size(); ++i) {
      g.edges.push_back({rows.Int(i, 0), rows.Int(i, 1), rows.Double(i, 2)});
    }
  }
  std::unordered_map<int64_t, uint32_t> chunk_of_seq;
  {
    GRAG_ASSIGN_OR_RETURN(
        Rows rows,
        read.conn().Query("SELECT c.seq, c.id, d.title FROM chunks c JOIN documents d ON "
                          "d.id = c.document_id ORDER BY c.document_id, c.chunk_index"));
    for (int i = 0; i < rows.size(); ++i) {
      chunk_of_seq.emplace(rows.Int(i, 0), static_cast<uint32_t>(g.chunk_ids.size()));
      g.chunk_ids.push_back(rows.Text(i, 1));
      g.chunk_titles.push_back(rows.Text(i, 2));
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        Rows rows, read.conn().Query("SELECT l.entity_id, c.seq FROM entity_chunks l JOIN chunks "
                                     "c ON c.id = l.chunk_id ORDER BY l.entity_id, c.seq"));
    g.links.reserve(static_cast<size_t>(rows.size()));
    for (int i = 0; i < rows.size(); ++i) {
      auto it = chunk_of_seq.find(rows.Int(i, 1));
      if (it != chunk_of_seq.end()) g.links.push_back({rows.Int(i, 0), it->second});
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        Rows rows,
        read.conn().Query("SELECT a.name_key, e.id FROM entity_aliases a JOIN entities e ON "
                          "e.name_key = a.canonical_key WHERE a.name_key <> a.canonical_key "
                          "ORDER BY a.name_key"));
    for (int i = 0; i < rows.size(); ++i) g.aliases.emplace_back(rows.Text(i, 0), rows.Int(i, 1));
  }
  return g;
}

namespace {

// LoadGraphNeighbourhood's reads (store/neighbourhood.h): one query per kind and hop, the ids
// passed as an array (= ANY($1)), rows in the orders the walk expects.
class PostgresNeighbourhoodReader final : public store::NeighbourhoodReader {
 public:
  explicit PostgresNeighbourhoodReader(pq::Connection& conn) : conn_(conn) {}

  Status Edges(const std::vector<int64_t>& ids,
               std::unordered_map<int64_t, std::vector<std::pair<int64_t, double>>>* out) override {
    GRAG_ASSIGN_OR_RETURN(
        Rows rows,
        conn_.Query("SELECT e, other, weight FROM (SELECT source_id AS e, target_id AS other, "
                    "weight, 0 AS side, target_id AS k FROM relationships WHERE source_id = "
                    "ANY($1::bigint[]) UNION ALL SELECT target_id, source_id, weight, 1, id FROM "
                    "relationships WHERE target_id = ANY($1::bigint[])) r ORDER BY e, side, k",
                    {pq::TextArray(Texts(ids))}));
    for (int i = 0; i < rows.size(); ++i) {
      (*out)[rows.Int(i, 0)].push_back({rows.Int(i, 1), rows.Double(i, 2)});
    }
    return Status::Ok();
  }

  Status ChunksOf(const std::vector<int64_t>& ids, size_t limit,
                  std::unordered_map<int64_t, std::vector<std::string>>* out) override {
    GRAG_ASSIGN_OR_RETURN(
        Rows rows, conn_.Query("SELECT entity_id, chunk_id FROM (SELECT entity_id, chunk_id, "
                               "row_number() OVER (PARTITION BY entity_id ORDER BY chunk_id) AS n "
                               "FROM entity_chunks WHERE entity_id = ANY($1::bigint[])) t WHERE "
                               "n <= $2 ORDER BY entity_id, chunk_id",
                               {pq::TextArray(Texts(ids)), static_cast<int64_t>(limit)}));
    for (int i = 0; i < rows.size(); ++i) (*out)[rows.Int(i, 0)].push_back(rows.Text(i, 1));
    return Status::Ok();
  }

  Status EntitiesOf(const std::vector<std::string>& ids,
                    std::unordered_map<std::string, std::vector<int64_t>>* out) override {
    GRAG_ASSIGN_OR_RETURN(
        Rows rows, conn_.Query("SELECT chunk_id, entity_id FROM entity_chunks WHERE chunk_id = "
                               "ANY($1::text[]) ORDER BY chunk_id, entity_id",
                               {pq::TextArray(ids)}));
    for (int i = 0; i < rows.size(); ++i) (*out)[rows.Text(i, 0)].push_back(rows.Int(i, 1));
    return Status::Ok();
  }

  Status Entities(const std::vector<int64_t>& ids,
                  std::vector<GraphSnapshot::Entity>* out) override {
    GRAG_ASSIGN_OR_RETURN(Rows rows,
                          conn_.Query("SELECT id, name_key, frequency FROM entities WHERE id = "
                                      "ANY($1::bigint[]) ORDER BY id",
                                      {pq::TextArray(Texts(ids))}));
    for (int i = 0; i < rows.size(); ++i) {
      out->push_back({rows.Int(i, 0), rows.Text(i, 1), rows.Int(i, 2)});
    }
    return Status::Ok();
  }

  Status ChunkTitles(const std::vector<std::string>& ids,
                     std::vector<std::pair<std::string, std::string>>* out) override {
    GRAG_ASSIGN_OR_RETURN(
        Rows rows, conn_.Query("SELECT c.id, d.title FROM chunks c JOIN documents d ON d.id = "
                               "c.document_id WHERE c.id = ANY($1::text[]) ORDER BY c.id",
                               {pq::TextArray(ids)}));
    for (int i = 0; i < rows.size(); ++i) out->emplace_back(rows.Text(i, 0), rows.Text(i, 1));
    return Status::Ok();
  }

 private:
  static std::vector<std::string> Texts(const std::vector<int64_t>& ids) {
    std::vector<std::string> out;
    out.reserve(ids.size());
    for (int64_t id : ids) out.push_back(std::to_string(id));
    return out;
  }
  pq::Connection& conn_;
};

}  // namespace

Result<GraphSnapshot> PostgresStore::LoadGraphNeighbourhood(
    const std::vector<int64_t>& entity_ids, const std::vector<std::string>& chunk_ids,
    const NeighbourhoodLimits& limits) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  PostgresNeighbourhoodReader reader(read.conn());
  return store::WalkNeighbourhood(entity_ids, chunk_ids, limits, reader);
}

Result<int64_t> PostgresStore::CountChunksWithPhrase(std::string_view phrase) {
  const std::vector<std::string> words = QueryWords(phrase, 16);
  if (words.empty()) return int64_t{0};
  std::string text;
  for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  return read.conn().QueryInt(
      "SELECT count(*) FROM chunks WHERE tsv @@ phraseto_tsquery('grag_text', $1)", {text});
}

Result<std::vector<int64_t>> PostgresStore::CountChunksWithWords(
    const std::vector<std::string>& words) {
  std::vector<int64_t> df(words.size(), 0);
  if (words.empty()) return df;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query(
                     "SELECT u.i, (SELECT count(*) FROM chunks WHERE tsv @@ "
                     "phraseto_tsquery('grag_text', u.x)) FROM unnest($1::text[]) WITH ORDINALITY "
                     "AS u(x, i)",
                     {pq::TextArray(words)}));
  for (int i = 0; i < rows.size(); ++i) {
    const int64_t at = rows.Int(i, 0) - 1;
    if (at >= 0 && static_cast<size_t>(at) < df.size())
      df[static_cast<size_t>(at)] = rows.Int(i, 1);
  }
  return df;
}

Status PostgresStore::RecomputeGraphStats() {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_RETURN_IF_ERROR(conn_.Exec(
      "UPDATE entities e SET degree = coalesce(d.n, 0) FROM entities x LEFT JOIN ("
      "SELECT id, count(*) AS n FROM (SELECT source_id AS id FROM relationships UNION ALL "
      "SELECT target_id FROM relationships) r GROUP BY id) d ON d.id = x.id "
      "WHERE e.id = x.id AND e.degree IS DISTINCT FROM coalesce(d.n, 0)"));
  GRAG_RETURN_IF_ERROR(conn_.Exec(
      "UPDATE entities e SET frequency = coalesce(f.n, 0) FROM entities x LEFT JOIN ("
      "SELECT entity_id, count(*) AS n FROM entity_chunks GROUP BY entity_id) f "
      "ON f.entity_id = x.id WHERE e.id = x.id AND e.frequency IS DISTINCT FROM coalesce(f.n, 0)"));
  GRAG_RETURN_IF_ERROR(conn_.Exec(
      "UPDATE relationships r SET frequency = coalesce(f.n, 0) FROM relationships x LEFT JOIN ("
      "SELECT relationship_id, count(*) AS n FROM relationship_chunks GROUP BY relationship_id) f "
      "ON f.relationship_id = x.id WHERE r.id = x.id AND r.frequency IS DISTINCT FROM "
      "coalesce(f.n, 0)"));
  return tx.Commit();
}

// ---------------------------------------------------------------- entity resolution and meta

Result<std::vector<EntityAlias>> PostgresStore::ListAliases() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query("SELECT name_key, name, canonical_key, score, method, reason "
                                   "FROM entity_aliases ORDER BY name_key"));
  std::vector<EntityAlias> out;
  for (int i = 0; i < rows.size(); ++i) {
    out.push_back({rows.Text(i, 0), rows.Text(i, 1), rows.Text(i, 2), rows.Double(i, 3),
                   rows.Text(i, 4), rows.Text(i, 5)});
  }
  return out;
}

Result<std::vector<ResolutionLinkRecord>> PostgresStore::ListResolutionLinks() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows,
                        read.conn().Query("SELECT key_a, key_b, score, method, reason FROM "
                                          "resolution_links ORDER BY key_a, key_b"));
  std::vector<ResolutionLinkRecord> out;
  for (int i = 0; i < rows.size(); ++i) {
    out.push_back(
        {rows.Text(i, 0), rows.Text(i, 1), rows.Double(i, 2), rows.Text(i, 3), rows.Text(i, 4)});
  }
  return out;
}

Status PostgresStore::ReplaceResolution(const std::vector<EntityAlias>& aliases,
                                        const std::vector<ResolutionLinkRecord>& links) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_RETURN_IF_ERROR(conn_.Exec("DELETE FROM entity_aliases; DELETE FROM resolution_links;"));
  if (!aliases.empty()) {
    std::vector<std::string> key, name, canon, score, method, reason;
    for (const auto& a : aliases) {
      key.push_back(a.name_key);
      name.push_back(a.name);
      canon.push_back(a.canonical_key);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", a.score);
      score.emplace_back(buf);
      method.push_back(a.method);
      reason.push_back(a.reason);
    }
    GRAG_RETURN_IF_ERROR(
        conn_
            .Exec("INSERT INTO entity_aliases (name_key, name, canonical_key, score, method, "
                  "reason) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], "
                  "$4::float8[], $5::text[], $6::text[])",
                  {pq::TextArray(key), pq::TextArray(name), pq::TextArray(canon),
                   pq::TextArray(score), pq::TextArray(method), pq::TextArray(reason)})
            .WithContext("storing the aliases"));
  }
  std::vector<std::string> ka, kb, score, method, reason;
  for (const auto& l : links) {
    if (l.key_a == l.key_b) continue;
    const auto [a, b] = std::minmax(l.key_a, l.key_b);
    ka.push_back(a);
    kb.push_back(b);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", l.score);
    score.emplace_back(buf);
    method.push_back(l.method);
    reason.push_back(l.reason);
  }
  if (!ka.empty()) {
    GRAG_RETURN_IF_ERROR(
        conn_
            .Exec("INSERT INTO resolution_links (key_a, key_b, score, method, reason) SELECT * "
                  "FROM unnest($1::text[], $2::text[], $3::float8[], $4::text[], $5::text[]) "
                  "ON CONFLICT DO NOTHING",
                  {pq::TextArray(ka), pq::TextArray(kb), pq::TextArray(score),
                   pq::TextArray(method), pq::TextArray(reason)})
            .WithContext("storing the resolution links"));
  }
  return tx.Commit();
}

Status PostgresStore::PutEntityOverride(std::string_view key_a, std::string_view key_b,
                                        bool merge) {
  if (key_a == key_b || key_a.empty() || key_b.empty()) {
    return Status::InvalidArgument("an override needs two different names");
  }
  const auto [a, b] = std::minmax(key_a, key_b);
  return Write(
             "INSERT INTO entity_overrides (key_a, key_b, decision) VALUES ($1, $2, $3) "
             "ON CONFLICT (key_a, key_b) DO UPDATE SET decision = excluded.decision, "
             "created_at = excluded.created_at",
             {a, b, merge ? "merge" : "split"})
      .status();
}

Result<bool> PostgresStore::DeleteEntityOverride(std::string_view key_a, std::string_view key_b) {
  const auto [a, b] = std::minmax(key_a, key_b);
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, Write("DELETE FROM entity_overrides WHERE key_a = $1 AND key_b = $2", {a, b}));
  return rows.Affected() > 0;
}

Result<std::vector<EntityOverride>> PostgresStore::ListEntityOverrides() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows,
                        read.conn().Query("SELECT key_a, key_b, decision, created_at FROM "
                                          "entity_overrides ORDER BY created_at, key_a, key_b"));
  std::vector<EntityOverride> out;
  for (int i = 0; i < rows.size(); ++i) {
    out.push_back({rows.Text(i, 0), rows.Text(i, 1), rows.View(i, 2) == "merge", rows.Text(i, 3)});
  }
  return out;
}

Result<std::optional<std::string>> PostgresStore::GetMeta(std::string_view key) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows,
                        read.conn().Query("SELECT value FROM meta WHERE key = $1", {key}));
  if (rows.empty()) return std::optional<std::string>();
  return std::optional<std::string>(rows.Text(0, 0));
}

Status PostgresStore::SetMeta(std::string_view key, std::string_view value) {
  return Write(
             "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET "
             "value = excluded.value",
             {key, value})
      .status();
}

// ---------------------------------------------------------------- communities

Result<int64_t> PostgresStore::ReplaceCommunities(const ClusteringRecord& clustering,
                                                  const std::vector<CommunityRecord>& communities) {
  GRAG_RETURN_IF_ERROR(store::CheckCommunityHierarchy(communities));
  std::unordered_set<int64_t> kept;  // the new hierarchy's ids
  for (const CommunityRecord& c : communities) kept.insert(c.id);

  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_ASSIGN_OR_RETURN(
      const int64_t clustering_id,
      conn_.QueryInt("INSERT INTO clusterings (id, method, seed, resolution, max_cluster_size, "
                     "modularity, warm_start, note, graph_hash, fresh_modularity) VALUES ((SELECT "
                     "coalesce(max(id), 0) + 1 FROM clusterings), $1, $2, $3, $4, $5, $6, $7, "
                     "$8, $9) RETURNING id",
                     {clustering.method, clustering.seed, clustering.resolution,
                      clustering.max_cluster_size, clustering.modularity, clustering.warm_start,
                      clustering.note, clustering.graph_hash, clustering.fresh_modularity}));
  // Upsert first and delete afterwards: a kept community whose old parent goes must already
  // point at its new parent, or the parent's ON DELETE CASCADE would take it (and its report).
  for (const CommunityRecord& c : communities) {
    GRAG_RETURN_IF_ERROR(conn_.Exec(
        "INSERT INTO communities (id, level, parent_id, clustering_id) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (id) DO UPDATE SET level = excluded.level, parent_id = excluded.parent_id, "
        "clustering_id = excluded.clustering_id, updated_at = grag_now()",
        {c.id, c.level, c.parent_id, clustering_id}));
    GRAG_RETURN_IF_ERROR(
        conn_.Exec("DELETE FROM community_members WHERE community_id = $1", {c.id}));
    if (c.entity_ids.empty()) continue;
    std::vector<std::string> ids;
    for (int64_t e : c.entity_ids) ids.push_back(std::to_string(e));
    Status st = conn_.Exec(
        "INSERT INTO community_members (community_id, entity_id) SELECT $1::bigint, e FROM "
        "unnest($2::bigint[]) AS e ON CONFLICT DO NOTHING",
        {c.id, pq::TextArray(ids)});
    if (!st.ok()) {
      return st.WithContext("community " + std::to_string(c.id) +
                            " members (do the entities exist?)");
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(Rows all, conn_.Query("SELECT id FROM communities"));
    std::vector<std::string> stale;
    for (int i = 0; i < all.size(); ++i) {
      if (kept.count(all.Int(i, 0)) == 0) stale.push_back(all.Text(i, 0));
    }
    if (!stale.empty()) {
      GRAG_RETURN_IF_ERROR(conn_.Exec("DELETE FROM communities WHERE id = ANY($1::bigint[])",
                                      {pq::TextArray(stale)}));
    }
  }
  GRAG_RETURN_IF_ERROR(conn_.Exec(
      "UPDATE communities c SET size = coalesce(s.size, 0), weight = coalesce(s.weight, 0) "
      "FROM communities x LEFT JOIN (SELECT m.community_id, count(DISTINCT m.entity_id) AS size, "
      "count(DISTINCT l.chunk_id) AS weight FROM community_members m LEFT JOIN entity_chunks l "
      "ON l.entity_id = m.entity_id GROUP BY m.community_id) s ON s.community_id = x.id "
      "WHERE c.id = x.id"));
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return clustering_id;
}

Result<std::vector<CommunityRecord>> PostgresStore::ListCommunities(std::optional<int64_t> level) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  std::vector<CommunityRecord> out;
  std::unordered_map<int64_t, size_t> index_of;
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT id, level, parent_id, size, weight, clustering_id FROM communities "
                        "WHERE $1::bigint IS NULL OR level = $1 ORDER BY level, id",
                        {level}));
  for (int i = 0; i < rows.size(); ++i) {
    CommunityRecord& c = out.emplace_back();
    c.id = rows.Int(i, 0);
    c.level = rows.Int(i, 1);
    c.parent_id = rows.OptInt(i, 2);
    c.size = rows.Int(i, 3);
    c.weight = rows.Int(i, 4);
    c.clustering_id = rows.OptInt(i, 5).value_or(0);
    index_of[c.id] = out.size() - 1;
  }
  GRAG_ASSIGN_OR_RETURN(
      Rows members,
      read.conn().Query(
          "SELECT m.community_id, m.entity_id FROM community_members m JOIN communities "
          "c ON c.id = m.community_id WHERE $1::bigint IS NULL OR c.level = $1 "
          "ORDER BY m.community_id, m.entity_id",
          {level}));
  for (int i = 0; i < members.size(); ++i) {
    auto it = index_of.find(members.Int(i, 0));
    if (it != index_of.end()) out[it->second].entity_ids.push_back(members.Int(i, 1));
  }
  return out;
}

Result<std::vector<int64_t>> PostgresStore::CommunitiesOfEntity(int64_t entity_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT c.id FROM community_members m JOIN communities c ON c.id = "
                        "m.community_id WHERE m.entity_id = $1 ORDER BY c.level, c.id",
                        {entity_id}));
  std::vector<int64_t> out;
  for (int i = 0; i < rows.size(); ++i) out.push_back(rows.Int(i, 0));
  return out;
}

Result<std::map<int64_t, std::vector<std::string>>> PostgresStore::CommunityChunks(
    std::optional<int64_t> level) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  std::string sql =
      "SELECT k.community_id, k.chunk_id FROM (SELECT DISTINCT m.community_id, l.chunk_id FROM "
      "community_members m JOIN entity_chunks l ON l.entity_id = m.entity_id";
  if (level) sql += " JOIN communities o ON o.id = m.community_id WHERE o.level = $1";
  sql +=
      ") k JOIN chunks c ON c.id = k.chunk_id ORDER BY k.community_id, c.document_id, "
      "c.chunk_index";
  Args args;
  if (level) args.emplace_back(*level);
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query(sql, args));
  std::map<int64_t, std::vector<std::string>> out;
  for (int i = 0; i < rows.size(); ++i) out[rows.Int(i, 0)].push_back(rows.Text(i, 1));
  return out;
}

Result<std::optional<ClusteringRecord>> PostgresStore::LatestClustering() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT id, method, seed, resolution, max_cluster_size, modularity, "
                        "warm_start, note, created_at, graph_hash, fresh_modularity "
                        "FROM clusterings ORDER BY id DESC LIMIT 1"));
  if (rows.empty()) return std::optional<ClusteringRecord>();
  ClusteringRecord c;
  c.id = rows.Int(0, 0);
  c.method = rows.Text(0, 1);
  c.seed = rows.Int(0, 2);
  c.resolution = rows.Double(0, 3);
  c.max_cluster_size = rows.Int(0, 4);
  c.modularity = rows.OptDouble(0, 5);
  c.warm_start = rows.Bool(0, 6);
  c.note = rows.Text(0, 7);
  c.created_at = rows.Text(0, 8);
  c.graph_hash = rows.Text(0, 9);
  c.fresh_modularity = rows.OptDouble(0, 10);
  return std::optional<ClusteringRecord>(std::move(c));
}

// ---------------------------------------------------------------- reports

constexpr std::string_view kReportSelect =
    "SELECT r.community_id, r.status, r.reason, r.title, r.summary, r.full_content, r.findings, "
    "r.rating, r.rating_explanation, r.input_hash, r.generator, r.model, c.level, r.updated_at, "
    "r.stale, r.basis, r.stale_note FROM reports r JOIN communities c ON c.id = r.community_id ";

// `findings`: false leaves them out where full_content holds the rendering, and the basis out
// (ListReports for global search's prompts).
ReportRecord ReadReport(const Rows& rows, int i, bool findings = true) {
  ReportRecord r;
  r.community_id = rows.Int(i, 0);
  r.status = ParseReportStatus(rows.View(i, 1));
  r.reason = rows.Text(i, 2);
  r.title = rows.Text(i, 3);
  r.summary = rows.Text(i, 4);
  r.full_content = rows.Text(i, 5);
  if (findings || r.full_content.empty()) r.findings = FindingsFromJson(rows.View(i, 6));
  r.rating = rows.OptDouble(i, 7);
  r.rating_explanation = rows.Text(i, 8);
  r.input_hash = rows.Text(i, 9);
  r.generator = ParseReportGenerator(rows.View(i, 10));
  r.model = rows.Text(i, 11);
  r.level = rows.Int(i, 12);
  r.updated_at = rows.Text(i, 13);
  r.stale = rows.Bool(i, 14);
  if (findings) r.basis = ReportBasisFromJson(rows.View(i, 15));
  r.stale_note = rows.Text(i, 16);
  if (r.stale && !r.stale_note.empty()) r.full_content += "\n\n" + r.stale_note;
  return r;
}

Status PostgresStore::PutReport(const ReportRecord& r) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_ASSIGN_OR_RETURN(Rows found,
                        conn_.Query("SELECT 1 FROM communities WHERE id = $1", {r.community_id}));
  if (found.empty()) {
    return Status::InvalidArgument("no community " + std::to_string(r.community_id) +
                                   " for a report");
  }
  GRAG_RETURN_IF_ERROR(conn_.Exec(
      "INSERT INTO reports (community_id, status, reason, title, summary, full_content, "
      "findings, rating, rating_explanation, input_hash, generator, model, stale, basis) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) "
      "ON CONFLICT (community_id) DO UPDATE SET status = excluded.status, "
      "reason = excluded.reason, title = excluded.title, summary = excluded.summary, "
      "full_content = excluded.full_content, findings = excluded.findings, "
      "rating = excluded.rating, rating_explanation = excluded.rating_explanation, "
      "input_hash = excluded.input_hash, generator = excluded.generator, "
      "model = excluded.model, stale = excluded.stale, basis = excluded.basis, "
      "stale_note = '', updated_at = grag_now()",
      {r.community_id, ReportStatusName(r.status), r.reason, r.title, r.summary, r.full_content,
       FindingsToJson(r.findings), r.rating, r.rating_explanation, r.input_hash,
       ReportGeneratorName(r.generator), r.model, r.stale, ReportBasisToJson(r.basis)}));
  return tx.Commit();
}

Status PostgresStore::MarkReportStale(int64_t community_id, std::string_view note) {
  return Write("UPDATE reports SET stale = true, stale_note = $1 WHERE community_id = $2",
               {note, community_id})
      .status();
}

Result<std::optional<ReportRecord>> PostgresStore::GetReport(int64_t community_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query(std::string(kReportSelect) + "WHERE r.community_id = $1", {community_id}));
  if (rows.empty()) return std::optional<ReportRecord>();
  return std::optional<ReportRecord>(ReadReport(rows, 0));
}

Result<std::vector<ReportRecord>> PostgresStore::ListReports(std::optional<int64_t> level,
                                                             bool findings) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query(std::string(kReportSelect) +
                                                         "WHERE $1::bigint IS NULL OR c.level = $1 "
                                                         "ORDER BY c.level, r.community_id",
                                                     {level}));
  std::vector<ReportRecord> out;
  for (int i = 0; i < rows.size(); ++i) out.push_back(ReadReport(rows, i, findings));
  return out;
}

// ---------------------------------------------------------------- embeddings

std::string SpaceName(EmbeddingOwner owner, std::string_view model, int64_t dimension) {
  return std::string(EmbeddingOwnerName(owner)) + " embeddings of model " + std::string(model) +
         " (dimension " + std::to_string(dimension) + ")";
}

constexpr std::string_view kEmbeddingColumns =
    "owner_kind, owner_id, model, dimension, vector, input_hash";

EmbeddingRecord ReadEmbedding(const Rows& rows, int i) {
  EmbeddingRecord r;
  r.owner = ParseEmbeddingOwner(rows.View(i, 0));
  r.owner_id = rows.Text(i, 1);
  r.model = rows.Text(i, 2);
  r.vector = pq::ParseRealArray(rows.View(i, 4));
  r.input_hash = rows.Text(i, 5);
  return r;
}

Status PostgresStore::PutEmbeddings(const std::vector<EmbeddingRecord>& records) {
  std::map<EmbeddingOwner, std::pair<std::string, int64_t>> batch_space;
  for (const EmbeddingRecord& r : records) {
    if (r.owner_id.empty() || r.model.empty() || r.vector.empty()) {
      return Status::InvalidArgument("an embedding needs an owner id, a model and a vector");
    }
    const int64_t dim = static_cast<int64_t>(r.vector.size());
    auto [it, added] = batch_space.try_emplace(r.owner, r.model, dim);
    if (!added && (it->second.first != r.model || it->second.second != dim)) {
      return Status::InvalidArgument("one batch mixes " +
                                     SpaceName(r.owner, it->second.first, it->second.second) +
                                     " with " + SpaceName(r.owner, r.model, dim));
    }
  }
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  for (const auto& [owner, space] : batch_space) {
    GRAG_ASSIGN_OR_RETURN(
        Rows rows,
        conn_.Query("SELECT model, dimension FROM embeddings WHERE owner_kind = $1 LIMIT 1",
                    {EmbeddingOwnerName(owner)}));
    if (!rows.empty() && (rows.View(0, 0) != space.first || rows.Int(0, 1) != space.second)) {
      return Status::InvalidArgument(
          "the index holds " + SpaceName(owner, rows.View(0, 0), rows.Int(0, 1)) + "; refusing " +
          SpaceName(owner, space.first, space.second) +
          ": vectors of different models cannot be compared (delete the old ones to switch)");
    }
  }
  for (const EmbeddingRecord& r : records) {
    GRAG_RETURN_IF_ERROR(conn_.Exec(
        "INSERT INTO embeddings (owner_kind, owner_id, model, dimension, vector, input_hash) "
        "VALUES ($1, $2, $3, $4, $5::real[], $6) ON CONFLICT (owner_kind, owner_id) DO UPDATE "
        "SET model = excluded.model, dimension = excluded.dimension, vector = excluded.vector, "
        "input_hash = excluded.input_hash, created_at = grag_now()",
        {EmbeddingOwnerName(r.owner), r.owner_id, r.model, static_cast<int64_t>(r.vector.size()),
         pq::RealArray(r.vector), r.input_hash}));
  }
  return tx.Commit();
}

Result<std::optional<EmbeddingRecord>> PostgresStore::GetEmbedding(EmbeddingOwner owner,
                                                                   std::string_view owner_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows,
                        read.conn().Query("SELECT " + std::string(kEmbeddingColumns) +
                                              " FROM embeddings WHERE owner_kind = $1 AND "
                                              "owner_id = $2",
                                          {EmbeddingOwnerName(owner), owner_id}));
  if (rows.empty()) return std::optional<EmbeddingRecord>();
  return std::optional<EmbeddingRecord>(ReadEmbedding(rows, 0));
}

Result<std::vector<EmbeddingRecord>> PostgresStore::ListEmbeddings(EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query("SELECT " + std::string(kEmbeddingColumns) +
                                                         " FROM embeddings WHERE owner_kind = $1 "
                                                         "ORDER BY owner_id",
                                                     {EmbeddingOwnerName(owner)}));
  std::vector<EmbeddingRecord> out;
  out.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) out.push_back(ReadEmbedding(rows, i));
  return out;
}

Result<std::map<std::string, std::string>> PostgresStore::ListEmbeddingHashes(
    EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT owner_id, input_hash FROM embeddings WHERE owner_kind = $1",
                        {EmbeddingOwnerName(owner)}));
  std::map<std::string, std::string> out;
  for (int i = 0; i < rows.size(); ++i) out.emplace(rows.Text(i, 0), rows.Text(i, 1));
  return out;
}

Result<std::optional<EmbeddingSpace>> PostgresStore::GetEmbeddingSpace(EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT model, dimension, (SELECT count(*) FROM embeddings WHERE "
                        "owner_kind = $1) FROM embeddings WHERE owner_kind = $1 LIMIT 1",
                        {EmbeddingOwnerName(owner)}));
  if (rows.empty()) return std::optional<EmbeddingSpace>();
  return std::optional<EmbeddingSpace>(
      EmbeddingSpace{rows.Text(0, 0), rows.Int(0, 1), rows.Int(0, 2)});
}

Result<int64_t> PostgresStore::DeleteEmbeddings(EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(Rows rows, Write("DELETE FROM embeddings WHERE owner_kind = $1",
                                         {EmbeddingOwnerName(owner)}));
  return rows.Affected();
}

// ---------------------------------------------------------------- runs

constexpr std::string_view kRunColumns =
    "id, command, status, stage, message, counters::text, started_at, finished_at";

RunRecord ReadRun(const Rows& rows, int i) {
  RunRecord r;
  r.id = rows.Int(i, 0);
  r.command = rows.Text(i, 1);
  r.status = ParseRunStatus(rows.View(i, 2));
  r.stage = rows.Text(i, 3);
  r.message = rows.Text(i, 4);
  r.counters = CountsFromJson(rows.View(i, 5));
  r.started_at = rows.Text(i, 6);
  r.finished_at = rows.IsNull(i, 7) ? std::string() : rows.Text(i, 7);
  return r;
}

Result<int64_t> PostgresStore::BeginRun(std::string_view command) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_RETURN_IF_ERROR(conn_.Exec(
      "UPDATE runs SET status = 'interrupted', finished_at = grag_now() WHERE status = 'running'"));
  GRAG_ASSIGN_OR_RETURN(
      const int64_t id,
      conn_.QueryInt("INSERT INTO runs (id, command, status) VALUES ((SELECT coalesce(max(id), 0) "
                     "+ 1 FROM runs), $1, 'running') RETURNING id",
                     {command}));
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return id;
}

Status PostgresStore::UpdateRun(int64_t run_id, std::string_view stage,
                                const std::map<std::string, int64_t>& counters) {
  GRAG_ASSIGN_OR_RETURN(Rows rows,
                        Write("UPDATE runs SET stage = CASE WHEN $2 = '' THEN stage ELSE $2 END, "
                              "counters = counters || $3::jsonb WHERE id = $1",
                              {run_id, stage, CountsToJson(counters)}));
  if (rows.Affected() == 0) return Status::NotFound("no run " + std::to_string(run_id));
  return Status::Ok();
}

Status PostgresStore::FinishRun(int64_t run_id, RunStatus status, std::string_view message) {
  if (status == RunStatus::kRunning) {
    return Status::InvalidArgument("a run cannot finish as running");
  }
  GRAG_ASSIGN_OR_RETURN(Rows rows, Write("UPDATE runs SET status = $2, message = $3, "
                                         "finished_at = grag_now() WHERE id = $1",
                                         {run_id, RunStatusName(status), message}));
  if (rows.Affected() == 0) return Status::NotFound("no run " + std::to_string(run_id));
  return Status::Ok();
}

Result<std::optional<RunRecord>> PostgresStore::GetRun(int64_t run_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query(
                     "SELECT " + std::string(kRunColumns) + " FROM runs WHERE id = $1", {run_id}));
  if (rows.empty()) return std::optional<RunRecord>();
  return std::optional<RunRecord>(ReadRun(rows, 0));
}

Result<std::vector<RunRecord>> PostgresStore::ListRuns(int64_t limit) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  const std::optional<int64_t> lim = limit < 0 ? std::nullopt : std::optional<int64_t>(limit);
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query("SELECT " + std::string(kRunColumns) +
                                                         " FROM runs ORDER BY id DESC LIMIT $1",
                                                     {lim}));
  std::vector<RunRecord> out;
  for (int i = 0; i < rows.size(); ++i) out.push_back(ReadRun(rows, i));
  return out;
}

Status PostgresStore::SetStageProgress(int64_t run_id, const StageProgress& p) {
  if (p.stage.empty()) return Status::InvalidArgument("stage progress needs a stage name");
  Status st = Write(
                  "INSERT INTO run_stages (run_id, stage, status, done, total, checkpoint) "
                  "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, stage) DO UPDATE SET "
                  "status = excluded.status, done = excluded.done, total = excluded.total, "
                  "checkpoint = excluded.checkpoint, updated_at = grag_now()",
                  {run_id, p.stage, StageStatusName(p.status), p.done, p.total, p.checkpoint})
                  .status();
  return st.ok() ? st : st.WithContext("progress of run " + std::to_string(run_id));
}

Result<std::vector<StageProgress>> PostgresStore::ListStageProgress(int64_t run_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query("SELECT stage, status, done, total, checkpoint, updated_at "
                                   "FROM run_stages WHERE run_id = $1 ORDER BY ord",
                                   {run_id}));
  std::vector<StageProgress> out;
  for (int i = 0; i < rows.size(); ++i) {
    StageProgress& p = out.emplace_back();
    p.stage = rows.Text(i, 0);
    p.status = ParseStageStatus(rows.View(i, 1));
    p.done = rows.Int(i, 2);
    p.total = rows.Int(i, 3);
    p.checkpoint = rows.Text(i, 4);
    p.updated_at = rows.Text(i, 5);
  }
  return out;
}

Result<std::map<std::string, int64_t>> PostgresStore::TotalRunCounters() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  // Integers only, as the SQLite store sums json_each's 'integer' values.
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query(
          "SELECT j.key, sum((j.value #>> '{}')::numeric)::bigint FROM runs, "
          "jsonb_each(runs.counters) AS j WHERE jsonb_typeof(j.value) = 'number' AND "
          "(j.value #>> '{}') ~ '^-?[0-9]+$' GROUP BY j.key ORDER BY j.key COLLATE \"C\""));
  std::map<std::string, int64_t> out;
  for (int i = 0; i < rows.size(); ++i) out[rows.Text(i, 0)] = rows.Int(i, 1);
  return out;
}

// ---------------------------------------------------------------- inspection

Result<StoreStats> PostgresStore::Stats() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  StoreStats s;
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks), "
                        "(SELECT count(*) FROM extractions WHERE status = 'ok'), "
                        "(SELECT count(*) FROM extractions WHERE status = 'skipped'), "
                        "(SELECT count(*) FROM entity_mentions), "
                        "(SELECT count(*) FROM relationship_mentions), "
                        "(SELECT count(*) FROM entities), (SELECT count(*) FROM relationships), "
                        "(SELECT count(*) FROM communities), "
                        "(SELECT count(*) FROM reports WHERE status = 'ok'), "
                        "(SELECT count(*) FROM reports WHERE status = 'gap'), "
                        "(SELECT count(*) FROM llm_cache), (SELECT count(*) FROM runs), "
                        "(SELECT count(*) FROM reports WHERE status = 'ok' AND stale), "
                        "pg_database_size(current_database()), "
                        "(SELECT count(*) FROM reports WHERE status = 'ok' AND generator = "
                        "'llm'), "
                        "(SELECT count(*) FROM extractions x WHERE x.status = 'ok' AND NOT "
                        "EXISTS (SELECT 1 FROM entity_mentions m WHERE m.extraction_id = x.id)), "
                        "(SELECT modularity FROM clusterings ORDER BY id DESC LIMIT 1)"));
  int col = 0;
  for (int64_t* field :
       {&s.documents, &s.chunks, &s.extractions_ok, &s.extractions_skipped, &s.entity_mentions,
        &s.relationship_mentions, &s.entities, &s.relationships, &s.communities, &s.reports_ok,
        &s.reports_gap, &s.cache_entries, &s.runs, &s.reports_stale, &s.file_bytes, &s.reports_llm,
        &s.extractions_empty}) {
    *field = rows.Int(0, col++);
  }
  s.modularity = rows.OptDouble(0, col);
  GRAG_ASSIGN_OR_RETURN(
      Rows levels,
      read.conn().Query("SELECT level, count(*) FROM communities GROUP BY level ORDER BY level"));
  for (int i = 0; i < levels.size(); ++i)
    s.communities_per_level[levels.Int(i, 0)] = levels.Int(i, 1);
  GRAG_ASSIGN_OR_RETURN(
      Rows owners,
      read.conn().Query("SELECT owner_kind, count(*) FROM embeddings GROUP BY owner_kind"));
  for (int i = 0; i < owners.size(); ++i)
    s.embeddings_per_owner[owners.Text(i, 0)] = owners.Int(i, 1);
  GRAG_ASSIGN_OR_RETURN(
      Rows cache, read.conn().Query("SELECT model, kind, count(*), sum(octet_length(value)) FROM "
                                    "llm_cache GROUP BY model, kind ORDER BY model, kind"));
  for (int i = 0; i < cache.size(); ++i) {
    s.cache_by_model.push_back(
        {cache.Text(i, 0), cache.Text(i, 1), cache.Int(i, 2), cache.Int(i, 3)});
  }
  GRAG_ASSIGN_OR_RETURN(
      Rows space,
      read.conn().Query("SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid) FROM "
                        "pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE "
                        "c.relkind = 'r' AND n.nspname = current_schema() ORDER BY "
                        "pg_total_relation_size(c.oid) DESC, c.relname"));
  for (int i = 0; i < space.size(); ++i)
    s.space.push_back({space.Text(i, 0), space.Int(i, 1), space.Int(i, 2)});
  return s;
}

Result<StoreInfo> PostgresStore::Info() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  StoreInfo info;
  info.path = redacted_;
  GRAG_ASSIGN_OR_RETURN(
      info.schema_version,
      read.conn().QueryInt("SELECT coalesce(max(version), 0) FROM grag_migrations"));
  info.max_schema_version = postgres::Migrations().back().version;
  info.journal_mode = "postgresql";
  info.foreign_keys = true;
  GRAG_ASSIGN_OR_RETURN(Rows sync,
                        read.conn().Query("SELECT current_setting('synchronous_commit')"));
  info.synchronous = sync.View(0, 0) == "off" ? 0 : 1;
  info.busy_timeout_ms = busy_timeout_ms_;
  // No SQLite here: the server that holds the index.
  info.sqlite_version = "postgresql " + read.conn().ServerVersion();
  return info;
}

Status PostgresStore::CheckIntegrity() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows,
                        read.conn().Query("SELECT id FROM chunks WHERE tsv IS DISTINCT FROM "
                                          "to_tsvector('grag_text', text) OR tsv IS NULL LIMIT 1"));
  if (!rows.empty()) {
    return Status::Corruption(redacted_ + ": full-text index out of step with chunk " +
                              rows.Text(0, 0));
  }
  return Status::Ok();
}

Result<IntegrityReport> PostgresStore::Check(int max_per_check) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  IntegrityReport report;
  const std::string limit = std::to_string(std::max(1, max_per_check));
  report.notes.push_back(
      "sqlite, foreign_keys: not applicable (PostgreSQL checks its pages and enforces foreign "
      "keys itself)");
  auto rows = [&](const std::string& check, const std::string& sql) {
    report.checks_run.push_back(check);
    Result<Rows> result = read.conn().Query(sql);
    if (!result.ok()) {
      report.problems.push_back({check, "could not run: " + result.status().message()});
      if (open_transactions() > 0 && read.conn().InFailedTransaction()) return;
      return;
    }
    for (int i = 0; i < result->size(); ++i) report.problems.push_back({check, result->Text(i, 0)});
  };
  rows("fts",
       "SELECT 'chunk ' || id || ': its tsvector is out of step with its text' FROM chunks "
       "WHERE tsv IS NULL OR tsv IS DISTINCT FROM to_tsvector('grag_text', text) LIMIT " +
           limit);
  rows("orphans",
       "(SELECT 'vector of entity ' || owner_id || ' which is gone' FROM embeddings "
       "WHERE owner_kind = 'entity' AND owner_id NOT IN (SELECT id::text FROM entities) "
       "UNION ALL SELECT 'vector of chunk ' || owner_id || ' which is gone' FROM embeddings "
       "WHERE owner_kind = 'chunk' AND owner_id NOT IN (SELECT id FROM chunks) "
       "UNION ALL SELECT 'vector of the report of community ' || owner_id || ' which is gone' "
       "FROM embeddings WHERE owner_kind = 'report' AND owner_id NOT IN "
       "(SELECT community_id::text FROM reports) "
       "UNION ALL SELECT 'entity ' || id || ' (' || name || ') is linked to no chunk' FROM "
       "entities WHERE id NOT IN (SELECT entity_id FROM entity_chunks) "
       "UNION ALL SELECT 'relationship ' || id || ' joins entity ' || source_id || ' to itself' "
       "FROM relationships WHERE source_id = target_id) LIMIT " +
           limit);
  rows("communities",
       "(SELECT 'community ' || id || ' has no members' FROM communities "
       "WHERE id NOT IN (SELECT community_id FROM community_members) "
       "UNION ALL SELECT 'community ' || c.id || ' is at level ' || c.level || ' under community ' "
       "|| p.id || ' at level ' || p.level FROM communities c JOIN communities p "
       "ON c.parent_id = p.id WHERE c.level != p.level + 1 "
       "UNION ALL SELECT 'community ' || id || ' at level ' || level || ' has no parent' "
       "FROM communities WHERE level > 0 AND parent_id IS NULL "
       "UNION ALL SELECT 'entity ' || id || ' (' || name || ') is in no community' FROM entities "
       "WHERE EXISTS (SELECT 1 FROM communities) "
       "AND (SELECT status FROM runs ORDER BY id DESC LIMIT 1) IS NOT DISTINCT FROM 'ok' "
       "AND id NOT IN (SELECT m.entity_id FROM community_members m JOIN communities c "
       "ON c.id = m.community_id WHERE c.level = 0)) LIMIT " +
           limit);
  return report;
}

Result<SqlRows> PostgresStore::RunReadOnlySql(std::string_view, int64_t,
                                              std::chrono::milliseconds) {
  return Status::Unimplemented("grag sql reads SQLite indexes; this index is in PostgreSQL at " +
                               redacted_ +
                               ": query it with psql (the tables are those of docs/schema.md)");
}

// ---------------------------------------------------------------- reply cache

std::optional<std::string> PgReplyCache::Get(std::string_view key) {
  Result<ReadHandle> read = store_->Read();
  Result<Rows> rows = read.ok()
                          ? read->conn().Query("SELECT value FROM llm_cache WHERE key = $1", {key})
                          : Result<Rows>(read.status());
  if (!rows.ok()) {
    Log(LogLevel::kWarn, "store", "reply cache read failed: " + rows.status().ToString());
    return std::nullopt;
  }
  if (rows->empty()) return std::nullopt;
  return rows->Text(0, 0);
}

Status PgReplyCache::Put(std::string_view key, std::string_view value, std::string_view model,
                         std::string_view kind) {
  if (store_->read_only()) return Status::Ok();
  return store_->WriteGrouped([&]() -> Status {
    return store_->conn().Exec(
        "INSERT INTO llm_cache (key, value, model, kind) VALUES ($1, $2, $3, $4) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value, model = excluded.model, "
        "kind = excluded.kind, created_at = grag_now()",
        {key, value, model, kind});
  });
}

// PostgreSQL compresses large values itself (TOAST), so replies are stored as text; the room
// a DELETE frees is reused by later writes (plain VACUUM), not given back to the file system.
Result<CachePruneResult> PostgresStore::PruneReplyCache(const CachePruneOptions& options) {
  if (read_only()) return Status::InvalidArgument("the index is open read-only");
  GRAG_RETURN_IF_ERROR(FlushDeferred());
  CachePruneResult out;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(out.file_bytes_before,
                        read.conn().QueryInt("SELECT pg_database_size(current_database())"));
  out.before = options.before;
  if (out.before.empty()) {
    GRAG_ASSIGN_OR_RETURN(Rows last, read.conn().Query("SELECT started_at FROM runs WHERE command "
                                                       "= 'index' AND status = 'ok' ORDER BY id "
                                                       "DESC LIMIT 1"));
    if (!last.empty()) out.before = last.Text(0, 0);
  }
  GRAG_ASSIGN_OR_RETURN(Rows counts,
                        read.conn().Query("SELECT count(*) FILTER (WHERE created_at < $1), "
                                          "coalesce(sum(octet_length(value)) FILTER (WHERE "
                                          "created_at < $1), 0), count(*) FROM llm_cache",
                                          {out.before}));
  if (!out.before.empty()) {
    out.entries = counts.Int(0, 0);
    out.value_bytes = counts.Int(0, 1);
  }
  out.entries_left = counts.Int(0, 2) - out.entries;
  out.file_bytes_after = out.file_bytes_before;
  if (options.dry_run || out.entries == 0) return out;
  GRAG_ASSIGN_OR_RETURN(Rows removed,
                        Write("DELETE FROM llm_cache WHERE created_at < $1", {out.before}));
  out.entries = removed.Affected();
  GRAG_RETURN_IF_ERROR(read.conn().Exec("VACUUM llm_cache"));
  GRAG_ASSIGN_OR_RETURN(out.file_bytes_after,
                        read.conn().QueryInt("SELECT pg_database_size(current_database())"));
  return out;
}

// ---------------------------------------------------------------- whole tables (grag migrate)

// Reads through a cursor, a batch at a time, so a large table is never held whole in memory.
class PgTableSnapshot final : public TableSnapshot {
 public:
  explicit PgTableSnapshot(ReadHandle read) : read_(std::move(read)) {}

  Status Scan(const IndexTable& table,
              const std::function<Status(const TableRow& row)>& row_fn) override {
    pq::Connection& conn = read_.conn();
    const std::string cursor = "grag_copy_" + std::to_string(++cursors_);
    // jsonb is selected as its text (SQLite's JSON text goes back in as is).
    GRAG_RETURN_IF_ERROR(conn.Exec("DECLARE " + cursor + " NO SCROLL CURSOR FOR SELECT " +
                                   ColumnList(table, "::text") + " FROM " +
                                   std::string(table.name) + ExcludeClause(table) + " ORDER BY " +
                                   (table.order_by.empty() ? "ord" : std::string(table.order_by))));
    Status st = ReadCursor(conn, cursor, table, row_fn);
    Status closed = conn.Exec("CLOSE " + cursor);
    return st.ok() ? closed : st;
  }

  Result<int64_t> Count(const IndexTable& table) override {
    return read_.conn().QueryInt("SELECT count(*) FROM " + std::string(table.name) +
                                 ExcludeClause(table));
  }

  Status Begin() {
    GRAG_RETURN_IF_ERROR(read_.BeginSnapshot());
    // Every double as the digits that read back exactly (PostgreSQL 12+ does so by default).
    return read_.conn().Exec("SET LOCAL extra_float_digits = 3");
  }

 private:
  static Status ReadCursor(pq::Connection& conn, const std::string& cursor, const IndexTable& table,
                           const std::function<Status(const TableRow& row)>& row_fn) {
    TableRow row(table.columns.size());
    while (true) {
      GRAG_ASSIGN_OR_RETURN(Rows rows, conn.Query("FETCH 2000 FROM " + cursor));
      if (rows.empty()) return Status::Ok();
      for (int r = 0; r < rows.size(); ++r) {
        for (size_t i = 0; i < table.columns.size(); ++i) {
          const int col = static_cast<int>(i);
          if (rows.IsNull(r, col)) {
            row[i] = std::monostate();
            continue;
          }
          switch (table.columns[i].type) {
            case ColumnType::kInt:
              row[i] = rows.Int(r, col);
              break;
            case ColumnType::kBool:
              row[i] = int64_t{rows.Bool(r, col) ? 1 : 0};
              break;
            case ColumnType::kReal:
              row[i] = rows.Double(r, col);
              break;
            case ColumnType::kText:
            case ColumnType::kJson:
              row[i] = rows.Text(r, col);
              break;
            case ColumnType::kVector:
              row[i] = pq::ParseRealArray(rows.View(r, col));
              break;
          }
        }
        GRAG_RETURN_IF_ERROR(row_fn(row));
      }
    }
  }

  ReadHandle read_;
  int cursors_ = 0;
};

Result<std::unique_ptr<TableSnapshot>> PostgresStore::SnapshotTables() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  auto snapshot = std::make_unique<PgTableSnapshot>(std::move(read));
  GRAG_RETURN_IF_ERROR(snapshot->Begin());
  return std::unique_ptr<TableSnapshot>(std::move(snapshot));
}

Status PostgresStore::InsertRows(const IndexTable& table, const std::vector<TableRow>& rows) {
  if (rows.empty()) return Status::Ok();
  const size_t ncols = table.columns.size();
  // Several rows per statement (a round trip each), within libpq's 65535 parameters.
  const size_t per_statement = std::max<size_t>(1, std::min<size_t>(500, 30000 / ncols));
  std::string conflict;
  if (!table.preset_keys.empty()) {
    conflict = " ON CONFLICT (" + std::string(table.columns[0].name) + ") DO UPDATE SET ";
    for (size_t i = 1; i < ncols; ++i) {
      const std::string name(table.columns[i].name);
      conflict += (i == 1 ? "" : ", ") + name + " = excluded." + name;
    }
  }
  auto lock = Lock();
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  for (size_t start = 0; start < rows.size(); start += per_statement) {
    const size_t end = std::min(rows.size(), start + per_statement);
    std::string sql =
        "INSERT INTO " + std::string(table.name) + " (" + ColumnList(table) + ") VALUES ";
    Args args;
    args.reserve((end - start) * ncols);
    for (size_t r = start; r < end; ++r) {
      if (rows[r].size() != ncols) {
        return Status::InvalidArgument("a row of " + std::to_string(rows[r].size()) +
                                       " values for table " + std::string(table.name));
      }
      sql += r == start ? "(" : ", (";
      for (size_t i = 0; i < ncols; ++i) {
        const CellValue& cell = rows[r][i];
        if (const auto* v = std::get_if<int64_t>(&cell)) {
          args.emplace_back(table.columns[i].type == ColumnType::kBool ? pq::Arg(*v != 0)
                                                                       : pq::Arg(*v));
        } else if (const auto* d = std::get_if<double>(&cell)) {
          args.emplace_back(*d);
        } else if (const auto* s = std::get_if<std::string>(&cell)) {
          args.emplace_back(*s);
        } else if (const auto* f = std::get_if<std::vector<float>>(&cell)) {
          args.emplace_back(pq::RealArray(*f));
        } else {
          args.emplace_back(std::nullopt);
        }
        sql += (i == 0 ? "$" : ", $") + std::to_string(args.size());
      }
      sql += ")";
    }
    sql += conflict;
    Status st = conn_.Exec(sql, args);
    if (!st.ok()) return st.WithContext("copying into table " + std::string(table.name));
  }
  return tx.Commit();
}

Status PostgresStore::FinishInsertRows() {
  auto lock = Lock();
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  for (const auto& [table, column] : {std::pair{"chunks", "seq"},
                                      {"entity_mentions", "id"},
                                      {"relationship_mentions", "id"},
                                      {"run_stages", "ord"}}) {
    GRAG_RETURN_IF_ERROR(conn_.Exec(std::string("SELECT setval(pg_get_serial_sequence('") + table +
                                    "', '" + column + "'), coalesce((SELECT max(" + column +
                                    ") FROM " + table + "), 0) + 1, false)"));
  }
  return tx.Commit();
}

// ---------------------------------------------------------------- opening

// Who holds the writer lock, from the server's view of sessions.
std::string WriterLockHolder(pq::Connection& conn) {
  Result<Rows> rows = conn.Query(
      "SELECT a.application_name, a.pid, coalesce(host(a.client_addr), 'local') FROM pg_locks l "
      "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND "
      "l.classid = $1 AND l.objid = $2 AND l.objsubid = 2 AND l.database = (SELECT oid FROM "
      "pg_database WHERE datname = current_database()) LIMIT 1",
      {kLockClass, kWriterLock});
  if (!rows.ok() || rows->empty()) return "another session";
  return rows->Text(0, 0) + " (server pid " + rows->Text(0, 1) + ", from " + rows->Text(0, 2) + ")";
}

Status TakeWriterLock(pq::Connection& conn, const std::string& redacted,
                      const StoreOptions& options) {
  GRAG_ASSIGN_OR_RETURN(Rows got, conn.Query("SELECT pg_try_advisory_lock($1::int, $2::int)",
                                             {kLockClass, kWriterLock}));
  if (got.Bool(0, 0)) return Status::Ok();
  const std::string holder = WriterLockHolder(conn);
  if (!options.wait_for_writer) {
    return Status::Unavailable("another grag process is writing the index at " + redacted + ": " +
                               holder + " (wait for it, or pass --wait)");
  }
  if (options.on_wait) options.on_wait(holder);
  // lock_timeout would cut the wait short.
  GRAG_RETURN_IF_ERROR(conn.Exec("SET lock_timeout = 0"));
  GRAG_RETURN_IF_ERROR(
      conn.Exec("SELECT pg_advisory_lock($1::int, $2::int)", {kLockClass, kWriterLock}));
  return conn.Exec("SET lock_timeout = " + std::to_string(std::max(0, options.busy_timeout_ms)));
}

// The version recorded in the database, 0 when it holds no index; an error for tables that are
// not one.
Result<int64_t> SchemaVersion(pq::Connection& conn, const std::string& redacted) {
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, conn.Query("SELECT to_regclass('grag_migrations') IS NOT NULL, (SELECT count(*) "
                            "FROM pg_tables WHERE schemaname = current_schema())"));
  const bool has_migrations = rows.Bool(0, 0);
  if (!has_migrations) {
    if (rows.Int(0, 1) > 0) {
      return Status::Corruption("the database at " + redacted +
                                " holds tables but no grag index (use an empty database)");
    }
    return int64_t{0};
  }
  return conn.QueryInt("SELECT coalesce(max(version), 0) FROM grag_migrations");
}

Status Migrate(pq::Connection& conn, const std::string& redacted) {
  const auto steps = postgres::Migrations();
  GRAG_ASSIGN_OR_RETURN(const int64_t initial, SchemaVersion(conn, redacted));
  for (const postgres::PgMigration& step : steps) {
    if (initial >= step.version) continue;
    GRAG_RETURN_IF_ERROR(conn.Exec("BEGIN"));
    // Another process may be migrating too: one at a time, and re-read the version under the
    // lock.
    Status st =
        conn.Exec("SELECT pg_advisory_xact_lock($1::int, $2::int)", {kLockClass, kMigrationLock});
    if (st.ok()) {
      st = conn.Exec(
          "CREATE TABLE IF NOT EXISTS grag_migrations (version bigint PRIMARY KEY, description "
          "text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
    }
    Result<int64_t> current = st.ok() ? conn.QueryInt(
                                            "SELECT coalesce(max(version), 0) FROM "
                                            "grag_migrations")
                                      : Result<int64_t>(st);
    st = current.status();
    if (st.ok() && *current < step.version) {
      if (step.version != *current + 1) {
        st = Status::Internal("no migration step to schema " + std::to_string(*current + 1));
      }
      if (st.ok()) st = conn.Exec(step.sql);
      if (st.ok()) {
        st = conn.Exec("INSERT INTO grag_migrations (version, description) VALUES ($1, $2)",
                       {step.version, step.description});
      }
      if (st.ok()) {
        st = conn.Exec(
            "INSERT INTO meta (key, value) VALUES ('schema_version', $1) ON CONFLICT (key) DO "
            "UPDATE SET value = excluded.value",
            {std::to_string(step.version)});
      }
      if (st.ok()) {
        st = conn.Exec(*current == 0
                           ? "INSERT INTO meta (key, value) VALUES ('created_by', 'grag'), "
                             "('created_at', grag_now()) ON CONFLICT (key) DO NOTHING"
                           : "INSERT INTO meta (key, value) VALUES ('migrated_at', grag_now()) "
                             "ON CONFLICT (key) DO UPDATE SET value = excluded.value");
      }
    }
    if (st.ok()) st = conn.Exec("COMMIT");
    if (!st.ok()) {
      (void)conn.Exec("ROLLBACK");
      return st.WithContext("migrating the index at " + redacted + " to schema " +
                            std::to_string(step.version) + " (" + std::string(step.description) +
                            ")");
    }
    if (initial > 0) {
      Log(LogLevel::kInfo, "store",
          "migrated " + redacted + " to schema " + std::to_string(step.version) + " (" +
              std::string(step.description) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& url,
                                                 const StoreOptions& options) {
  const std::string redacted = pq::RedactUrl(url);
  GRAG_ASSIGN_OR_RETURN(pq::Connection conn, pq::Connection::Open(url, redacted));
  const bool read_only = options.read_only;
  std::string app = "grag: " + options.lock_holder + " (pid " + std::to_string(getpid()) + ")";
  if (app.size() > 63) app.resize(63);
  GRAG_RETURN_IF_ERROR(
      conn.Exec("SELECT set_config('application_name', $1, false), "
                "set_config('lock_timeout', $2, false)",
                {app, std::to_string(std::max(0, options.busy_timeout_ms))}));
  if (read_only) {
    GRAG_RETURN_IF_ERROR(conn.Exec("SET default_transaction_read_only = on"));
  }
  if (options.writer_lock && !read_only) {
    GRAG_RETURN_IF_ERROR(TakeWriterLock(conn, redacted, options));
  }
  const int64_t latest = postgres::Migrations().back().version;
  GRAG_ASSIGN_OR_RETURN(const int64_t version, SchemaVersion(conn, redacted));
  if (version > latest) {
    return Status::InvalidArgument(
        "the index at " + redacted + " was written by a newer grag (schema " +
        std::to_string(version) + "); this grag reads up to " + std::to_string(latest));
  }
  const bool create = options.create_if_missing && !read_only;
  if (version == 0 && !create) {
    return Status::NotFound("no index at " + redacted + " (run `grag index` first)");
  }
  if (read_only) {
    if (version < latest) {
      return Status::InvalidArgument(
          "the index at " + redacted + " was written by an older grag (schema " +
          std::to_string(version) + ", this grag uses " + std::to_string(latest) +
          "): run a writing command (grag index) on it once to upgrade it");
    }
  } else {
    GRAG_RETURN_IF_ERROR(Migrate(conn, redacted));
  }
  return std::unique_ptr<Store>(std::make_unique<PostgresStore>(
      url, redacted, std::move(conn), read_only, std::max(0, options.busy_timeout_ms)));
}

}  // namespace grag::store
