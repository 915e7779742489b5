// Store: the choice of backend, and transactions (the same for every backend).
#include "grag/store.h"

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
