#include "group_commit.h"

#include <utility>

namespace grag::store {

Status GroupCommit::Run(const std::function<Status()>& write) {
  Pending w;
  w.write = &write;
  std::unique_lock lock(mu_);
  queue_.push_back(&w);
  while (!w.done) {
    if (committing_) {
      cv_.wait(lock);
      continue;
    }
    committing_ = true;
    std::vector<Pending*> batch;
    batch.swap(queue_);  // this write included
    lock.unlock();
    const std::vector<Status> statuses = CommitBatch(batch);
    lock.lock();
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i]->status = statuses[i];
      batch[i]->done = true;
    }
    committing_ = false;
    cv_.notify_all();
  }
  return w.status;
}

std::optional<std::vector<Status>> GroupCommit::CommitBatchWhole(
    const std::vector<Pending*>& batch) {
  Result<Transaction> tx = begin_all_or_nothing_();
  if (!tx.ok()) return std::vector<Status>(batch.size(), tx.status());
  for (const Pending* pending : batch) {
    Result<Transaction> part = begin_();  // no savepoint: a part of the whole
    Status st = part.ok() ? (*pending->write)() : part.status();
    if (st.ok()) st = part->Commit();
    if (!st.ok()) return std::nullopt;  // `tx` rolls back as it goes out of scope
  }
  const Status committed = tx->Commit();
  return std::vector<Status>(batch.size(), committed);
}

std::vector<Status> GroupCommit::CommitBatch(const std::vector<Pending*>& batch) {
  if (begin_all_or_nothing_) {
    std::optional<std::vector<Status>> whole = CommitBatchWhole(batch);
    if (whole) return std::move(*whole);
  }
  std::vector<Status> statuses(batch.size());
  Result<Transaction> tx = begin_();
  if (!tx.ok()) return std::vector<Status>(batch.size(), tx.status());
  for (size_t i = 0; i < batch.size(); ++i) {
    Result<Transaction> savepoint = begin_();
    Status st = savepoint.ok() ? (*batch[i]->write)() : savepoint.status();
    if (st.ok()) st = savepoint->Commit();
    statuses[i] = st;  // a failed write's savepoint rolls back as it goes out of scope
  }
  const Status committed = tx->Commit();
  if (!committed.ok()) return std::vector<Status>(batch.size(), committed);
  return statuses;
}

}  // namespace grag::store
