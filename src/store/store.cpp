// Store: the choice of backend, and transactions (the same for every backend).
#include "grag/store.h"

#include <new>
#include <string>
#include <utility>

#include "grag/location.h"
#include "grag/log.h"
#include "sqlite/sqlite_store.h"
#if __has_include("postgres/postgres_store.h")
#include "postgres/postgres_store.h"
#define GRAG_WITH_POSTGRES 1
#endif

namespace grag {

Result<std::unique_ptr<Store>> Store::Open(const std::string& location,
                                           const StoreOptions& options) {
  if (IsPostgresUrl(location)) {
#ifdef GRAG_WITH_POSTGRES
    return store::OpenPostgresStore(location, options);
#else
    return Status::InvalidArgument("this grag was built without PostgreSQL support");
#endif
  }
  return store::OpenSqliteStore(location, options);
}

Result<PackedEmbeddings> PackEmbeddings(std::vector<EmbeddingRecord> records) {
  PackedEmbeddings packed;
  if (records.empty()) return packed;
  packed.model = records.front().model;
  packed.dimension = static_cast<int64_t>(records.front().vector.size());
  for (const EmbeddingRecord& r : records) {
    if (r.model != packed.model || static_cast<int64_t>(r.vector.size()) != packed.dimension) {
      return Status::InvalidArgument(
          "embeddings disagree: " + records.front().owner_id + " has model '" + packed.model +
          "' and dimension " + std::to_string(packed.dimension) + ", " + r.owner_id +
          " has model '" + r.model + "' and dimension " + std::to_string(r.vector.size()));
    }
  }
  try {
    packed.ids.reserve(records.size());
    packed.values.reserve(records.size() * records.front().vector.size());
    for (EmbeddingRecord& r : records) {
      packed.ids.push_back(std::move(r.owner_id));
      packed.values.insert(packed.values.end(), r.vector.begin(), r.vector.end());
      std::vector<float>().swap(r.vector);  // one copy of the vectors at a time
    }
  } catch (const std::bad_alloc&) {
    return Status::Internal("out of memory packing " + std::to_string(records.size()) +
                            " vectors of dimension " + std::to_string(packed.dimension));
  }
  return packed;
}

Result<PackedEmbeddings> Store::ListPackedEmbeddings(EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(std::vector<EmbeddingRecord> records, ListEmbeddings(owner));
  Result<PackedEmbeddings> packed = PackEmbeddings(std::move(records));
  // The store keeps one model and dimension per kind: a mix means the index is damaged.
  if (!packed.ok() && packed.status().code() == ErrorCode::kInvalidArgument) {
    return Status::Corruption(std::string(EmbeddingOwnerName(owner)) + " " +
                              packed.status().message());
  }
  return packed;
}

Result<std::vector<std::string>> Store::RefreshQueryImages() { return std::vector<std::string>{}; }

Result<int64_t> Store::ReencodeEmbeddings(VectorEncoding) { return int64_t{0}; }

namespace {
Status NoSharedWork() {
  return Status::Unimplemented(
      "indexing workers need a PostgreSQL index (store.url), which every worker's machine "
      "reaches: a SQLite index is one machine's file");
}
}  // namespace

Status Store::PublishWork(std::string_view, const std::vector<std::string>&) {
  return NoSharedWork();
}
Result<std::vector<std::string>> Store::ClaimWork(std::string_view, std::string_view, size_t,
                                                  std::chrono::milliseconds) {
  return NoSharedWork();
}
Status Store::RenewWork(std::string_view, std::chrono::milliseconds) { return NoSharedWork(); }
Status Store::FinishWork(std::string_view, std::string_view, const WorkSpend&) {
  return NoSharedWork();
}
Result<std::optional<WorkState>> Store::GetWorkState() { return std::optional<WorkState>(); }
Status Store::ClearWork() { return Status::Ok(); }

Transaction::Transaction(TransactionOwner* owner, std::unique_lock<std::recursive_mutex> lock,
                         int depth)
    : owner_(owner), lock_(std::move(lock)), depth_(depth) {}

Transaction::Transaction(Transaction&& other) noexcept
    : owner_(other.owner_),
      lock_(std::move(other.lock_)),
      depth_(other.depth_),
      active_(std::exchange(other.active_, false)) {}

Transaction::~Transaction() {
  if (!active_) return;
  Status st = Finish(/*commit=*/false);
  if (!st.ok()) Log(LogLevel::kWarn, "store", "rolling back: " + st.ToString());
}

Status Transaction::Commit() { return Finish(/*commit=*/true); }
Result<Transaction> Store::BeginAllOrNothing() { return Begin(); }

Status Transaction::Rollback() { return Finish(/*commit=*/false); }

Status Transaction::Finish(bool commit) {
  if (!active_) return Status::InvalidArgument("the transaction is already finished");
  if (owner_->open_ != depth_ + 1) {
    return Status::Internal("a nested transaction is still open; finish it first");
  }
  active_ = false;
  --owner_->open_;
  Status st = owner_->FinishTransaction(depth_, commit);
  if (lock_.owns_lock()) lock_.unlock();
  return st;
}

}  // namespace grag
