// Group commit, for any backend's Store::WriteGrouped: while one thread commits a batch, the
// writes of the others queue, and the next of them commits the whole queue in one transaction,
// each write in its own savepoint. Every write still returns only once it is committed, but
// writes that finish together share the commit.
//
// With a backend's all-or-nothing Begin (Store::BeginAllOrNothing), a batch is first tried in
// one transaction without savepoints (they copy every page a write touches, in SQLite); only
// when a write of it fails is the batch rolled back and done again, each write in a savepoint,
// so that the failing one is rolled back alone. A write must therefore do nothing but store
// writes that another attempt may repeat.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "grag/status.h"
#include "grag/store.h"

namespace grag::store {

class GroupCommit {
 public:
  // `begin`: the backend's write Begin() (a transaction, or a savepoint inside this thread's).
  // `begin_all_or_nothing` (optional): its BeginAllOrNothing().
  explicit GroupCommit(std::function<Result<Transaction>()> begin,
                       std::function<Result<Transaction>()> begin_all_or_nothing = nullptr)
      : begin_(std::move(begin)), begin_all_or_nothing_(std::move(begin_all_or_nothing)) {}

  // Runs `write` in the next group's transaction (maybe on another thread) and returns once that
  // is committed. A failing `write` is rolled back alone and returns its error; a failing commit
  // fails every write of the group. The backend handles "inside this thread's own transaction"
  // before calling this.
  Status Run(const std::function<Status()>& write);

 private:
  struct Pending {
    const std::function<Status()>* write = nullptr;
    bool done = false;
    Status status;
  };
  std::vector<Status> CommitBatch(const std::vector<Pending*>& batch);
  // The batch without savepoints; nullopt when a write failed (all rolled back).
  std::optional<std::vector<Status>> CommitBatchWhole(const std::vector<Pending*>& batch);

  std::function<Result<Transaction>()> begin_;
  std::function<Result<Transaction>()> begin_all_or_nothing_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending*> queue_;  // guarded by mu_: waiting for the next commit
  bool committing_ = false;      // guarded by mu_: a thread commits a batch
};

}  // namespace grag::store
