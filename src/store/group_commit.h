// Group commit, for any backend's Store::WriteGrouped: while one thread commits a batch, the
// writes of the others queue, and the next of them commits the whole queue in one transaction,
// each write in its own savepoint. Every write still returns only once it is committed, but
// writes that finish together share the commit.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "grag/status.h"
#include "grag/store.h"

namespace grag::store {

class GroupCommit {
 public:
  // `begin`: the backend's write Begin() (a transaction, or a savepoint inside this thread's).
  explicit GroupCommit(std::function<Result<Transaction>()> begin) : begin_(std::move(begin)) {}

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

  std::function<Result<Transaction>()> begin_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending*> queue_;  // guarded by mu_: waiting for the next commit
  bool committing_ = false;      // guarded by mu_: a thread commits a batch
};

}  // namespace grag::store
