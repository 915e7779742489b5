// The PostgreSQL store's shared extraction work (Store::PublishWork and the rest): the chunks
// an index run shares with `grag index --worker` processes, claimed with FOR UPDATE SKIP LOCKED
// under leases their holders renew.
#include <string>

#include "postgres_store_internal.h"

namespace grag::store::postgres_internal {

namespace {

// A lease as an interval PostgreSQL adds to now().
std::string Interval(std::chrono::milliseconds lease) {
  return std::to_string(std::max<int64_t>(1, lease.count())) + " milliseconds";
}

}  // namespace

Status PostgresStore::PublishWork(std::string_view params,
                                  const std::vector<std::string>& chunk_ids) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, Begin());
  GRAG_RETURN_IF_ERROR(conn().Exec("DELETE FROM extraction_work"));
  // In batches: one statement per chunk would be a round trip each.
  constexpr size_t kBatch = 500;
  for (size_t first = 0; first < chunk_ids.size(); first += kBatch) {
    const size_t last = std::min(chunk_ids.size(), first + kBatch);
    std::string sql = "INSERT INTO extraction_work (seq, chunk_id, params) VALUES ";
    Args args;
    args.emplace_back(params);
    for (size_t i = first; i < last; ++i) {
      if (i > first) sql += ", ";
      sql += "(" + std::to_string(i) + ", $" + std::to_string(args.size() + 1) + ", $1)";
      args.emplace_back(chunk_ids[i]);
    }
    GRAG_RETURN_IF_ERROR(conn().Exec(sql + " ON CONFLICT (chunk_id) DO NOTHING", args));
  }
  return tx.Commit();
}

Result<std::vector<std::string>> PostgresStore::ClaimWork(std::string_view worker,
                                                          std::string_view params, size_t n,
                                                          std::chrono::milliseconds lease) {
  std::vector<std::string> out;
  {
    GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
    GRAG_ASSIGN_OR_RETURN(
        Rows published,
        read.conn().Query("SELECT params FROM extraction_work WHERE NOT done LIMIT 1"));
    if (published.empty()) return out;
    if (published.View(0, 0) != params) {
      return Status::InvalidArgument(
          "the published extraction work was made with other settings than this worker's (the "
          "extraction model, prompt, entity types or gleaning differ): its replies would not be "
          "used, so it takes none; run the worker with the indexing run's settings");
    }
  }
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      Write("UPDATE extraction_work SET owner = $1, lease_until = now() + $2::interval, "
            "attempts = attempts + 1 WHERE chunk_id IN (SELECT chunk_id FROM extraction_work "
            "WHERE NOT done AND (owner = '' OR lease_until < now()) ORDER BY seq LIMIT $3 FOR "
            "UPDATE SKIP LOCKED) RETURNING chunk_id, seq",
            {worker, Interval(lease), static_cast<int64_t>(n)}));
  std::vector<std::pair<int64_t, std::string>> claimed;
  for (int r = 0; r < rows.size(); ++r) claimed.emplace_back(rows.Int(r, 1), rows.Text(r, 0));
  std::sort(claimed.begin(), claimed.end());
  for (auto& [seq, id] : claimed) out.push_back(std::move(id));
  GRAG_RETURN_IF_ERROR(RenewWork(worker, lease));
  return out;
}

Status PostgresStore::RenewWork(std::string_view worker, std::chrono::milliseconds lease) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, Begin());
  GRAG_RETURN_IF_ERROR(conn().Exec(
      "UPDATE extraction_work SET lease_until = now() + $2::interval WHERE owner = $1 AND NOT "
      "done",
      {worker, Interval(lease)}));
  GRAG_RETURN_IF_ERROR(conn().Exec(
      "INSERT INTO extraction_workers (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET "
      "seen_at = now()",
      {worker}));
  return tx.Commit();
}

Status PostgresStore::FinishWork(std::string_view worker, std::string_view chunk_id,
                                 const WorkSpend& spend) {
  return Write(
             "UPDATE extraction_work SET done = true, done_by = $1, owner = '', calls = $3, "
             "prompt_tokens = $4, completion_tokens = $5 WHERE chunk_id = $2 AND owner = $1 AND "
             "NOT done",
             {worker, chunk_id, spend.calls, spend.prompt_tokens, spend.completion_tokens})
      .status();
}

Result<std::optional<WorkState>> PostgresStore::GetWorkState() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows totals,
      read.conn().Query("SELECT min(params), count(*), count(*) FILTER (WHERE done), count(*) "
                        "FILTER (WHERE NOT done AND owner <> '' AND lease_until >= now()) FROM "
                        "extraction_work"));
  if (totals.empty() || totals.Int(0, 1) == 0) return std::optional<WorkState>();
  WorkState state;
  state.params = totals.Text(0, 0);
  state.total = totals.Int(0, 1);
  state.done = totals.Int(0, 2);
  state.claimed = totals.Int(0, 3);
  GRAG_ASSIGN_OR_RETURN(
      Rows workers,
      read.conn().Query(
          "SELECT w.name, extract(epoch FROM now() - w.seen_at)::float8, "
          "(SELECT count(*) FROM extraction_work e WHERE e.owner = w.name AND NOT e.done AND "
          "e.lease_until >= now()), "
          "(SELECT count(*) FROM extraction_work e WHERE e.done_by = w.name), "
          "(SELECT coalesce(sum(calls), 0) FROM extraction_work e WHERE e.done_by = w.name), "
          "(SELECT coalesce(sum(prompt_tokens), 0) FROM extraction_work e WHERE e.done_by = "
          "w.name), "
          "(SELECT coalesce(sum(completion_tokens), 0) FROM extraction_work e WHERE e.done_by = "
          "w.name) FROM extraction_workers w ORDER BY w.name"));
  for (int r = 0; r < workers.size(); ++r) {
    WorkerProgress w;
    w.name = workers.Text(r, 0);
    w.seconds_since_seen = workers.Double(r, 1);
    w.claimed = workers.Int(r, 2);
    w.done = workers.Int(r, 3);
    w.spent.calls = workers.Int(r, 4);
    w.spent.prompt_tokens = workers.Int(r, 5);
    w.spent.completion_tokens = workers.Int(r, 6);
    if (w.claimed > 0 || w.done > 0) state.workers.push_back(std::move(w));
  }
  return std::optional<WorkState>(std::move(state));
}

Status PostgresStore::ClearWork() {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, Begin());
  GRAG_RETURN_IF_ERROR(conn().Exec("DELETE FROM extraction_work"));
  GRAG_RETURN_IF_ERROR(conn().Exec("DELETE FROM extraction_workers"));
  return tx.Commit();
}

}  // namespace grag::store::postgres_internal
