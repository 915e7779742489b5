// Store: entity resolution (aliases, the resolver's links, a person's overrides) and meta values.
#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "../alias_sql.h"
#include "grag/store.h"
#include "store_impl.h"

namespace grag {

Result<std::vector<EntityAlias>> SqliteStore::ListAliases() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        read.conn().Prepare(std::string(store::kListAliasesSql)));
  std::vector<EntityAlias> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back(
        {stmt.Text(0), stmt.Text(1), stmt.Text(2), stmt.Double(3), stmt.Text(4), stmt.Text(5)});
  }
  return out;
}

Result<std::unordered_map<std::string, std::string>> SqliteStore::CanonicalKeys(
    const std::vector<std::string>& name_keys) {
  std::unordered_map<std::string, std::string> out;
  if (name_keys.empty()) return out;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT canonical_key FROM entity_aliases WHERE name_key = ?1"));
  for (const auto& key : name_keys) {
    stmt.BindAll(key);  // binding again resets the statement
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (row) out.emplace(key, stmt.Text(0));
  }
  return out;
}

Result<std::vector<ResolutionLinkRecord>> SqliteStore::ListResolutionLinks() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        read.conn().Prepare("SELECT key_a, key_b, score, method, reason FROM "
                                            "resolution_links ORDER BY key_a, key_b"));
  std::vector<ResolutionLinkRecord> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back({stmt.Text(0), stmt.Text(1), stmt.Double(2), stmt.Text(3), stmt.Text(4)});
  }
  return out;
}

Status SqliteStore::ReplaceResolution(const std::vector<EntityAlias>& aliases,
                                      const std::vector<ResolutionLinkRecord>& links) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(/*write=*/true));
  sqlite::Connection& conn = impl_->conn;
  GRAG_RETURN_IF_ERROR(conn.Exec("DELETE FROM entity_aliases; DELETE FROM resolution_links;"));
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt stmt,
        conn.Prepare("INSERT INTO entity_aliases (name_key, name, canonical_key, score, method, "
                     "reason) SELECT * FROM (SELECT ? AS name_key, ? AS name, ? AS canonical_key, "
                     "? AS score, ? AS method, ? AS reason) a WHERE NOT (" +
                     std::string(store::kDerivedAliasCondition) + ")"));
    for (const auto& a : aliases) {
      GRAG_RETURN_IF_ERROR(
          stmt.BindAll(a.name_key, a.name, a.canonical_key, a.score, a.method, a.reason)
              .Run()
              .WithContext("storing the alias " + a.name_key));
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                          conn.Prepare("INSERT INTO resolution_links (key_a, key_b, score, "
                                       "method, reason) VALUES (?, ?, ?, ?, ?) ON CONFLICT "
                                       "DO NOTHING"));
    for (const auto& l : links) {
      if (l.key_a == l.key_b) continue;
      const auto [a, b] = std::minmax(l.key_a, l.key_b);
      GRAG_RETURN_IF_ERROR(stmt.BindAll(a, b, l.score, l.method, l.reason)
                               .Run()
                               .WithContext("storing the resolution link " + a + " ~ " + b));
    }
  }
  return tx.Commit();
}

Status SqliteStore::PutEntityOverride(std::string_view key_a, std::string_view key_b, bool merge) {
  if (key_a == key_b || key_a.empty() || key_b.empty()) {
    return Status::InvalidArgument("an override needs two different names");
  }
  const auto [a, b] = std::minmax(key_a, key_b);
  auto lock = impl_->Lock();
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      impl_->conn.Prepare("INSERT INTO entity_overrides (key_a, key_b, decision) VALUES (?, ?, ?) "
                          "ON CONFLICT (key_a, key_b) DO UPDATE SET decision = excluded.decision, "
                          "created_at = excluded.created_at"));
  return stmt.BindAll(a, b, std::string_view(merge ? "merge" : "split")).Run();
}

Result<bool> SqliteStore::DeleteEntityOverride(std::string_view key_a, std::string_view key_b) {
  const auto [a, b] = std::minmax(key_a, key_b);
  auto lock = impl_->Lock();
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      impl_->conn.Prepare(
          "DELETE FROM entity_overrides WHERE key_a = ? AND key_b = ? RETURNING 1"));
  return stmt.BindAll(a, b).Step();
}

Result<std::vector<EntityOverride>> SqliteStore::ListEntityOverrides() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        read.conn().Prepare("SELECT key_a, key_b, decision, created_at FROM "
                                            "entity_overrides ORDER BY created_at, key_a, key_b"));
  std::vector<EntityOverride> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back({stmt.Text(0), stmt.Text(1), stmt.Text(2) == "merge", stmt.Text(3)});
  }
  return out;
}

Result<std::optional<std::string>> SqliteStore::GetMeta(std::string_view key) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        read.conn().Prepare("SELECT value FROM meta WHERE key = ?"));
  GRAG_ASSIGN_OR_RETURN(bool row, stmt.BindAll(key).Step());
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(stmt.Text(0));
}

Status SqliteStore::SetMeta(std::string_view key, std::string_view value) {
  auto lock = impl_->Lock();
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        impl_->conn.Prepare("INSERT INTO meta (key, value) VALUES (?, ?) ON "
                                            "CONFLICT (key) DO UPDATE SET value = excluded.value"));
  return stmt.BindAll(key, value).Run();
}

}  // namespace grag
