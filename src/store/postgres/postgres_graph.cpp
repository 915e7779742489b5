// PostgresStore: entities, relationships, the graph's snapshots and neighbourhoods, entity
// resolution and meta.
#include "postgres_store_internal.h"

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

#include "../alias_sql.h"
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

namespace grag::store::postgres_internal {

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

Result<std::unordered_map<std::string, std::string>> PostgresStore::CanonicalKeys(
    const std::vector<std::string>& name_keys) {
  std::unordered_map<std::string, std::string> out;
  if (name_keys.empty()) return out;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query("SELECT name_key, canonical_key FROM "
                                                     "entity_aliases WHERE name_key = ANY($1)",
                                                     {pq::TextArray(name_keys)}));
  for (int i = 0; i < rows.size(); ++i) out.emplace(rows.Text(i, 0), rows.Text(i, 1));
  return out;
}

Result<std::vector<EntityAlias>> PostgresStore::ListAliases() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query(std::string(store::kListAliasesSql)));
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
                  "$4::float8[], $5::text[], $6::text[]) AS a(name_key, name, canonical_key, "
                  "score, method, reason) WHERE NOT (" +
                      std::string(store::kDerivedAliasCondition) + ")",
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

}  // namespace grag::store::postgres_internal
