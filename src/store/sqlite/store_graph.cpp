// Store: extraction results, the merged entity graph, communities and reports.
#include <algorithm>
#include <string>
#include <deque>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "grag/hash.h"
#include "grag/store.h"
#include "json_fields.h"
#include "mention_record.h"
#include "mention_sql.h"
#include "names.h"
#include "community_checks.h"
#include "neighbourhood.h"
#include "compressed_text.h"
#include "store_impl.h"

namespace grag {
namespace {

// True when a row with `id` exists in `table`'s `column` (both trusted literals).
Result<bool> RowExists(sqlite::Connection& conn, std::string_view sql, std::string_view id) {
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt, conn.Prepare(sql));
  return stmt.BindAll(id).Step();
}

Result<bool> RowExists(sqlite::Connection& conn, std::string_view sql, int64_t id) {
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt, conn.Prepare(sql));
  return stmt.BindAll(id).Step();
}

Result<std::vector<std::string>> TextColumn(sqlite::Stmt& stmt) {
  std::vector<std::string> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back(stmt.Text(0));
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------- extraction results

Status SqliteStore::PutExtraction(const ExtractionRecord& r) {
  if (r.extractor.model.empty()) {
    return Status::InvalidArgument("an extraction result needs the extractor's model name");
  }
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  sqlite::Connection& conn = impl_->conn;
  GRAG_ASSIGN_OR_RETURN(bool chunk_found,
                        RowExists(conn, "SELECT 1 FROM chunks WHERE id = ?", r.chunk_id));
  if (!chunk_found) {
    return Status::InvalidArgument("no chunk " + r.chunk_id + " to store an extraction for");
  }
  const std::string_view kind = ExtractorKindName(r.extractor.kind);
  {
    // The cascade removes the old result's mentions.
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt del,
        conn.Prepare("DELETE FROM extractions WHERE chunk_id = ? AND extractor = ? AND model = ?"));
    GRAG_RETURN_IF_ERROR(del.BindAll(r.chunk_id, kind, r.extractor.model).Run());
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt insert,
        conn.Prepare("INSERT INTO extractions (chunk_id, extractor, model, status, reason, "
                     "gleaning_rounds, params_hash, mentions, entity_count, relationship_count) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
    insert.BindAll(r.chunk_id, kind, r.extractor.model, store::ExtractionStatusName(r.status),
                   r.reason, r.gleaning_rounds, r.params_hash, std::nullopt,
                   static_cast<int64_t>(r.entities.size()),
                   static_cast<int64_t>(r.relationships.size()));
    store::BindMentions(insert, 8, r.entities, r.relationships);
    sqlite::BindHash(insert, 7, r.params_hash);  // as bytes: half the room
    GRAG_RETURN_IF_ERROR(insert.Run());
  }
  return tx.Commit();
}

Result<std::optional<ExtractionRecord>> SqliteStore::GetExtraction(std::string_view chunk_id,
                                                                   const ExtractorId& extractor) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  sqlite::Connection& conn = read.conn();
  ExtractionRecord r;
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      conn.Prepare("SELECT status, reason, gleaning_rounds, params_hash, created_at, mentions "
                   "FROM extractions WHERE chunk_id = ? AND extractor = ? AND model = ?"));
  stmt.BindAll(chunk_id, ExtractorKindName(extractor.kind), extractor.model);
  GRAG_ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) return std::optional<ExtractionRecord>();
  r.chunk_id = std::string(chunk_id);
  r.extractor = extractor;
  r.status = store::ParseExtractionStatus(stmt.Text(0));
  r.reason = stmt.Text(1);
  r.gleaning_rounds = stmt.Int(2);
  r.params_hash = sqlite::HashText(stmt, 3);
  r.created_at = stmt.Text(4);
  GRAG_RETURN_IF_ERROR(store::ReadMentions(stmt, 5, &r.entities, &r.relationships)
                           .WithContext("chunk " + r.chunk_id));
  return std::optional<ExtractionRecord>(std::move(r));
}

Result<std::vector<std::string>> SqliteStore::ChunksNeedingExtraction(
    const ExtractorId& extractor) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT c.id FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM extractions "
                          "e WHERE e.chunk_id = c.id AND e.extractor = ? AND e.model = ? AND "
                          "e.status = 'ok') ORDER BY c.document_id, c.chunk_index"));
  stmt.BindAll(ExtractorKindName(extractor.kind), extractor.model);
  return TextColumn(stmt);
}

Result<std::vector<ChunkEntityMention>> SqliteStore::ListEntityMentions(
    const ExtractorId& extractor) {
  std::vector<ChunkEntityMention> out;
  GRAG_RETURN_IF_ERROR(ScanEntityMentions(extractor, [&](const ChunkEntityMention& m) {
    out.push_back(m);
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<ChunkRelationshipMention>> SqliteStore::ListRelationshipMentions(
    const ExtractorId& extractor) {
  std::vector<ChunkRelationshipMention> out;
  GRAG_RETURN_IF_ERROR(ScanRelationshipMentions(extractor, [&](const ChunkRelationshipMention& m) {
    out.push_back(m);
    return Status::Ok();
  }));
  return out;
}

namespace {

// Each mention of an ok extraction of `extractor`, with its chunk id, in chunk order and then in
// the order extracted: `Chunked` is ChunkEntityMention or ChunkRelationshipMention.
template <typename Chunked>
Status ScanMentions(ReadHandle& read, const ExtractorId& extractor,
                    const std::function<Status(const Chunked& mention)>& fn) {
  using Mention = decltype(Chunked::mention);
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt, read.conn().Prepare(sqlite::kScanMentionsSql));
  stmt.BindAll(ExtractorKindName(extractor.kind), extractor.model);
  Chunked m;
  std::vector<Mention> mentions;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return Status::Ok();
    mentions.clear();
    std::vector<EntityMention>* entities = nullptr;
    std::vector<RelationshipMention>* relationships = nullptr;
    if constexpr (std::is_same_v<Mention, EntityMention>) {
      entities = &mentions;
    } else {
      relationships = &mentions;
    }
    m.chunk_id = stmt.Text(0);
    GRAG_RETURN_IF_ERROR(
        store::ReadMentions(stmt, 1, entities, relationships).WithContext("chunk " + m.chunk_id));
    for (Mention& mention : mentions) {
      m.mention = std::move(mention);
      GRAG_RETURN_IF_ERROR(fn(m));
    }
  }
}

}  // namespace

Status SqliteStore::ScanEntityMentions(
    const ExtractorId& extractor,
    const std::function<Status(const ChunkEntityMention& mention)>& fn) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  return ScanMentions<ChunkEntityMention>(read, extractor, fn);
}

Status SqliteStore::ScanRelationshipMentions(
    const ExtractorId& extractor,
    const std::function<Status(const ChunkRelationshipMention& mention)>& fn) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  return ScanMentions<ChunkRelationshipMention>(read, extractor, fn);
}

Result<std::string> SqliteStore::ExtractionsDigest(const ExtractorId& extractor) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT e.id, e.chunk_id, e.created_at FROM extractions e JOIN chunks c "
                          "ON c.id = e.chunk_id WHERE e.extractor = ? AND e.model = ? AND "
                          "e.status = 'ok' ORDER BY c.document_id, c.chunk_index"));
  stmt.BindAll(ExtractorKindName(extractor.kind), extractor.model);
  Hasher h;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    h.Add(stmt.Text(0)).Add("\t").Add(stmt.Text(1)).Add("\t").Add(stmt.Text(2)).Add("\n");
  }
  return h.HexDigest();
}

// ---------------------------------------------------------------- entities

namespace {

constexpr std::string_view kEntityColumns =
    "id, name_key, name, type, type_counts, description, description_hash, description_model, "
    "degree, frequency, description_basis";

EntityRecord ReadEntity(const sqlite::Stmt& stmt) {
  EntityRecord e;
  e.id = stmt.Int(0);
  e.name_key = stmt.Text(1);
  e.name = stmt.Text(2);
  e.type = stmt.Text(3);
  e.type_counts = store::CountsFromJson(stmt.Text(4));
  e.description = stmt.Text(5);
  e.description_hash = sqlite::HashText(stmt, 6);
  e.description_model = stmt.Text(7);
  e.degree = stmt.Int(8);
  e.frequency = stmt.Int(9);
  e.description_basis = stmt.Text(10);
  return e;
}

Result<std::optional<EntityRecord>> OneEntity(sqlite::Stmt& stmt) {
  GRAG_ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) return std::optional<EntityRecord>();
  return std::optional<EntityRecord>(ReadEntity(stmt));
}

// Makes `chunk_ids` the chunk links of one owner in a link table (entity_chunks,
// relationship_chunks, which name a chunk by its seq), writing only the links that differ: an
// update leaves most owners' links as they are, and rewriting them all cost most of a merge's
// writes.
Status SetLinks(sqlite::Connection& conn, std::string_view table, std::string_view owner_column,
                int64_t owner_id, const std::vector<std::string>& chunk_ids) {
  const std::string t(table);
  const std::string col(owner_column);
  std::unordered_map<std::string, int64_t> stored;  // chunk id -> seq
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt read,
        conn.Prepare("SELECT c.id, l.chunk_seq FROM " + t +
                     " l JOIN chunks c ON c.seq = l.chunk_seq WHERE l." + col + " = ?"));
    read.BindAll(owner_id);
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, read.Step());
      if (!row) break;
      stored.emplace(read.Text(0), read.Int(1));
    }
  }
  const std::unordered_set<std::string> wanted(chunk_ids.begin(), chunk_ids.end());
  for (const auto& [chunk_id, seq] : stored) {
    if (wanted.count(chunk_id)) continue;
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt del, conn.Prepare("DELETE FROM " + t + " WHERE " + col +
                                                         " = ? AND chunk_seq = ?"));
    GRAG_RETURN_IF_ERROR(del.BindAll(owner_id, seq).Run());
  }
  // A chunk that does not exist gives a NULL seq, which the NOT NULL refuses.
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt insert,
                        conn.Prepare("INSERT INTO " + t + " (" + col +
                                     ", chunk_seq) VALUES (?, (SELECT seq FROM chunks WHERE id = "
                                     "?)) ON CONFLICT DO NOTHING"));
  for (const std::string& chunk_id : chunk_ids) {
    if (stored.count(chunk_id)) continue;
    Status st = insert.BindAll(owner_id, chunk_id).Run();
    if (!st.ok()) {
      return st.WithContext("linking " + std::string(owner_column) + " " +
                            std::to_string(owner_id) + " to chunk " + chunk_id +
                            " (does the chunk exist?)");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<int64_t> SqliteStore::UpsertEntity(const EntityRecord& e) {
  if (e.name_key.empty()) return Status::InvalidArgument("an entity needs a name_key");
  auto lock = impl_->Lock();
  // Inside a caller's transaction (a merge: thousands of these) no savepoint of its own.
  std::optional<Transaction> own;
  if (impl_->open_transactions() == 0) {
    GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
    own.emplace(std::move(tx));
  }
  GRAG_RETURN_IF_ERROR(impl_->DropGraphImage());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      impl_->conn.Prepare(
          "INSERT INTO entities (name_key, name, type, type_counts, description, "
          "description_hash, description_model, description_basis) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
          "ON CONFLICT (name_key) DO UPDATE SET name = excluded.name, type = excluded.type, "
          "type_counts = excluded.type_counts, description = excluded.description, "
          "description_hash = excluded.description_hash, "
          "description_model = excluded.description_model, "
          "description_basis = excluded.description_basis"
          " RETURNING id"));
  stmt.BindAll(e.name_key, e.name, e.type, store::CountsToJson(e.type_counts), e.description,
               e.description_hash, e.description_model, e.description_basis);
  sqlite::BindHash(stmt, 6, e.description_hash);  // as bytes: half the room
  GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return Status::Internal("INSERT ... RETURNING gave no row");
  const int64_t id = stmt.Int(0);
  GRAG_RETURN_IF_ERROR(stmt.Run());
  if (own) GRAG_RETURN_IF_ERROR(own->Commit());
  return id;
}

Result<std::optional<EntityRecord>> SqliteStore::GetEntity(int64_t id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT " + std::string(kEntityColumns) + " FROM entities WHERE id = ?"));
  stmt.BindAll(id);
  return OneEntity(stmt);
}

Result<std::optional<EntityRecord>> SqliteStore::GetEntityByKey(std::string_view name_key) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  // The entity of that name, else the one an extracted name of that key was resolved into.
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT " + std::string(kEntityColumns) +
                          " FROM entities WHERE name_key = ?1 UNION ALL SELECT " +
                          std::string(kEntityColumns) +
                          " FROM entities WHERE name_key = (SELECT canonical_key FROM "
                          "entity_aliases WHERE name_key = ?1) LIMIT 1"));
  stmt.BindAll(name_key);
  return OneEntity(stmt);
}

Result<std::vector<EntityRecord>> SqliteStore::ListEntities(int64_t limit) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        read.conn().Prepare("SELECT " + std::string(kEntityColumns) +
                                            " FROM entities ORDER BY degree DESC, name_key "
                                            "LIMIT ?"));
  stmt.BindAll(limit);  // a negative LIMIT means no limit in SQLite
  std::vector<EntityRecord> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back(ReadEntity(stmt));
  }
  return out;
}

Result<bool> SqliteStore::DeleteEntity(int64_t id) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  GRAG_RETURN_IF_ERROR(impl_->DropGraphImage());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        impl_->conn.Prepare("DELETE FROM entities WHERE id = ?"));
  GRAG_RETURN_IF_ERROR(stmt.BindAll(id).Run());
  const bool deleted = sqlite3_changes(impl_->conn.get()) > 0;
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return deleted;
}

Status SqliteStore::SetEntityChunks(int64_t entity_id, const std::vector<std::string>& chunk_ids) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  GRAG_RETURN_IF_ERROR(impl_->DropGraphImage());
  GRAG_RETURN_IF_ERROR(SetLinks(impl_->conn, "entity_chunks", "entity_id", entity_id, chunk_ids));
  return tx.Commit();
}

Result<std::vector<std::string>> SqliteStore::GetEntityChunks(int64_t entity_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(std::shared_ptr<const store::GraphImage> image,
                        store::CachedGraphImage(*impl_, read.conn()));
  if (image) return image->EntityChunksInDocumentOrder(entity_id);
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT c.id FROM entity_chunks l JOIN chunks c ON c.seq = "
                          "l.chunk_seq WHERE l.entity_id = ? ORDER BY c.document_id, "
                          "c.chunk_index"));
  stmt.BindAll(entity_id);
  return TextColumn(stmt);
}

Result<ChunkLinks> SqliteStore::ListChunkLinks() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  sqlite::Connection& conn = read.conn();
  ChunkLinks links;
  auto read_links = [&](std::string_view sql,
                        std::vector<std::pair<int64_t, std::string>>& out) -> Status {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt, conn.Prepare(sql));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      out.emplace_back(stmt.Int(0), stmt.Text(1));
    }
    return Status::Ok();
  };
  GRAG_RETURN_IF_ERROR(
      read_links("SELECT l.entity_id, c.id FROM entity_chunks l JOIN chunks c "
                 "ON c.seq = l.chunk_seq ORDER BY l.entity_id, c.document_id, "
                 "c.chunk_index",
                 links.entities));
  GRAG_RETURN_IF_ERROR(
      read_links("SELECT l.relationship_id, c.id FROM relationship_chunks l "
                 "JOIN chunks c ON c.seq = l.chunk_seq ORDER BY l.relationship_id, "
                 "c.document_id, c.chunk_index",
                 links.relationships));
  return links;
}

Result<GraphSnapshot> SqliteStore::LoadGraphSnapshot() {
  // One read transaction: the four lists describe the same graph.
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  sqlite::Connection& conn = read.conn();
  GraphSnapshot g;
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                          conn.Prepare("SELECT id, name_key, frequency FROM entities ORDER BY id"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      g.entities.push_back({stmt.Int(0), stmt.Text(1), stmt.Int(2)});
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                          conn.Prepare("SELECT source_id, target_id, weight FROM relationships"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      g.edges.push_back({stmt.Int(0), stmt.Int(1), stmt.Double(2)});
    }
  }
  std::unordered_map<int64_t, uint32_t> chunk_of_seq;
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt stmt,
        conn.Prepare("SELECT c.seq, c.id, d.title FROM chunks c JOIN documents d ON d.id = "
                     "c.document_id ORDER BY c.document_id, c.chunk_index"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      chunk_of_seq.emplace(stmt.Int(0), static_cast<uint32_t>(g.chunk_ids.size()));
      g.chunk_ids.push_back(stmt.Text(1));
      g.chunk_titles.push_back(stmt.Text(2));
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt stmt,
        conn.Prepare("SELECT entity_id, chunk_seq FROM entity_chunks ORDER BY entity_id, "
                     "chunk_seq"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      auto it = chunk_of_seq.find(stmt.Int(1));
      if (it != chunk_of_seq.end()) g.links.push_back({stmt.Int(0), it->second});
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                          conn.Prepare("SELECT a.name_key, e.id FROM entity_aliases a JOIN "
                                       "entities e ON e.name_key = a.canonical_key WHERE "
                                       "a.name_key <> a.canonical_key ORDER BY a.name_key"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      g.aliases.emplace_back(stmt.Text(0), stmt.Int(1));
    }
  }
  return g;
}

namespace {

// LoadGraphNeighbourhood's reads (neighbourhood.h). Here one prepared statement per kind, run
// once per node: SQLite has no round trip to save, and measured on a 3,338-chunk index a batched
// statement (the hop's ids as a json_each list) cost more than these index look-ups (its sort
// and list), and read every chunk of an entity where this stops at the limit.
class SqliteNeighbourhoodReader final : public store::NeighbourhoodReader {
 public:
  explicit SqliteNeighbourhoodReader(sqlite::Connection& conn) : conn_(conn) {}

  Status Edges(const std::vector<int64_t>& ids,
               std::unordered_map<int64_t, std::vector<std::pair<int64_t, double>>>* out) override {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt * stmt,
        Prepared(&related_,
                 "SELECT target_id, weight FROM relationships WHERE source_id = ?1 UNION ALL "
                 "SELECT source_id, weight FROM relationships WHERE target_id = ?1"));
    for (int64_t id : ids) {
      auto& edges = (*out)[id];
      stmt->BindAll(id);
      while (true) {
        GRAG_ASSIGN_OR_RETURN(bool row, stmt->Step());
        if (!row) break;
        edges.push_back({stmt->Int(0), stmt->Double(1)});
      }
    }
    return Status::Ok();
  }

  Status ChunksOf(const std::vector<int64_t>& ids, size_t limit,
                  std::unordered_map<int64_t, std::vector<std::string>>* out) override {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt * stmt,
        Prepared(&chunks_of_,
                 "SELECT c.id FROM entity_chunks l JOIN chunks c ON c.seq = l.chunk_seq "
                 "WHERE l.entity_id = ? ORDER BY c.id"));
    for (int64_t id : ids) {
      auto& chunks = (*out)[id];
      stmt->BindAll(id);
      while (chunks.size() < limit) {
        GRAG_ASSIGN_OR_RETURN(bool row, stmt->Step());
        if (!row) break;
        chunks.push_back(stmt->Text(0));
      }
    }
    return Status::Ok();
  }

  Status EntitiesOf(const std::vector<std::string>& ids,
                    std::unordered_map<std::string, std::vector<int64_t>>* out) override {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt * stmt,
        Prepared(&entities_of_,
                 "SELECT entity_id FROM entity_chunks WHERE chunk_seq = (SELECT seq FROM chunks "
                 "WHERE id = ?) ORDER BY entity_id"));
    for (const std::string& id : ids) {
      auto& entities = (*out)[id];
      stmt->BindAll(id);
      while (true) {
        GRAG_ASSIGN_OR_RETURN(bool row, stmt->Step());
        if (!row) break;
        entities.push_back(stmt->Int(0));
      }
    }
    return Status::Ok();
  }

  Status Entities(const std::vector<int64_t>& ids,
                  std::vector<GraphSnapshot::Entity>* out) override {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                          conn_.Prepare("SELECT name_key, frequency FROM entities WHERE id = ?"));
    for (int64_t id : ids) {
      stmt.BindAll(id);
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (row) out->push_back({id, stmt.Text(0), stmt.Int(1)});
    }
    return Status::Ok();
  }

  Status ChunkTitles(const std::vector<std::string>& ids,
                     std::vector<std::pair<std::string, std::string>>* out) override {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt stmt,
        conn_.Prepare("SELECT d.title FROM chunks c JOIN documents d ON d.id = c.document_id "
                      "WHERE c.id = ?"));
    for (const std::string& id : ids) {
      stmt.BindAll(id);
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (row) out->emplace_back(id, stmt.Text(0));  // else deleted meanwhile
    }
    return Status::Ok();
  }

 private:
  // `*slot`, prepared from `sql` on first use and kept for the walk's later hops.
  Result<sqlite::Stmt*> Prepared(std::optional<sqlite::Stmt>* slot, const char* sql) {
    if (!*slot) {
      GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt, conn_.Prepare(sql));
      slot->emplace(std::move(stmt));
    }
    return &**slot;
  }

  sqlite::Connection& conn_;
  std::optional<sqlite::Stmt> related_, chunks_of_, entities_of_;
};

}  // namespace

Result<GraphSnapshot> store::LoadNeighbourhoodFromTables(sqlite::Connection& conn,
                                                         const std::vector<int64_t>& entity_ids,
                                                         const std::vector<std::string>& chunk_ids,
                                                         const Store::NeighbourhoodLimits& limits) {
  SqliteNeighbourhoodReader reader(conn);
  return store::WalkNeighbourhood(entity_ids, chunk_ids, limits, reader);
}

Result<int64_t> SqliteStore::CountChunksWithPhrase(std::string_view phrase) {
  const std::string match = store::FtsPhraseQuery(phrase);
  if (match.empty()) return int64_t{0};
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?"));
  stmt.BindAll(match);
  GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? stmt.Int(0) : int64_t{0};
}

// ---------------------------------------------------------------- relationships

namespace {

constexpr std::string_view kRelationshipSelect =
    "SELECT r.id, r.source_id, r.target_id, r.description, r.description_hash, "
    "r.description_model, r.weight, r.frequency, s.degree + t.degree, r.description_basis "
    "FROM relationships r "
    "JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id ";

Result<std::vector<RelationshipRecord>> ReadRelationships(sqlite::Stmt& stmt) {
  std::vector<RelationshipRecord> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    RelationshipRecord& r = out.emplace_back();
    r.id = stmt.Int(0);
    r.source_id = stmt.Int(1);
    r.target_id = stmt.Int(2);
    r.description = stmt.Text(3);
    r.description_hash = sqlite::HashText(stmt, 4);
    r.description_model = stmt.Text(5);
    r.weight = stmt.Double(6);
    r.frequency = stmt.Int(7);
    r.combined_degree = stmt.Int(8);
    r.description_basis = stmt.Text(9);
  }
  return out;
}

}  // namespace

Result<int64_t> SqliteStore::UpsertRelationship(const RelationshipRecord& r) {
  if (r.source_id == r.target_id) {
    return Status::InvalidArgument("a relationship needs two distinct entities (got " +
                                   std::to_string(r.source_id) + " twice)");
  }
  const int64_t a = std::min(r.source_id, r.target_id);
  const int64_t b = std::max(r.source_id, r.target_id);
  auto lock = impl_->Lock();
  std::optional<Transaction> own;  // as in UpsertEntity
  if (impl_->open_transactions() == 0) {
    GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
    own.emplace(std::move(tx));
  }
  GRAG_RETURN_IF_ERROR(impl_->DropGraphImage());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      impl_->conn.Prepare(
          "INSERT INTO relationships (source_id, target_id, description, description_hash, "
          "description_model, weight, description_basis) VALUES (?, ?, ?, ?, ?, ?, ?) "
          "ON CONFLICT (source_id, target_id) DO UPDATE SET description = excluded.description, "
          "description_hash = excluded.description_hash, "
          "description_model = excluded.description_model, weight = excluded.weight, "
          "description_basis = excluded.description_basis RETURNING id"));
  stmt.BindAll(a, b, r.description, r.description_hash, r.description_model, r.weight,
               r.description_basis);
  sqlite::BindHash(stmt, 4, r.description_hash);  // as bytes: half the room
  Result<bool> row = stmt.Step();
  if (!row.ok()) {
    return row.status().WithContext("relationship " + std::to_string(a) + "-" + std::to_string(b) +
                                    " (do both entities exist?)");
  }
  if (!*row) return Status::Internal("INSERT ... RETURNING gave no row");
  const int64_t id = stmt.Int(0);
  GRAG_RETURN_IF_ERROR(stmt.Run());
  if (own) GRAG_RETURN_IF_ERROR(own->Commit());
  return id;
}

Result<std::vector<RelationshipRecord>> SqliteStore::ListRelationships() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt, read.conn().Prepare(std::string(kRelationshipSelect) +
                                                               "ORDER BY r.weight DESC, r.id"));
  return ReadRelationships(stmt);
}

Result<std::vector<RelationshipRecord>> SqliteStore::ListRelationshipsOf(int64_t entity_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        read.conn().Prepare(std::string(kRelationshipSelect) +
                                            "WHERE r.source_id = ?1 OR r.target_id = ?1 "
                                            "ORDER BY r.weight DESC, r.id"));
  stmt.BindAll(entity_id);
  return ReadRelationships(stmt);
}

Result<std::vector<RelationshipRecord>> SqliteStore::ListRelationshipEdgesOf(int64_t entity_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  {
    // The graph image holds them when it is current (a one-off question has read it for the
    // walk already); a read inside a write transaction sees the writes, which drop the image.
    GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
    GRAG_ASSIGN_OR_RETURN(std::shared_ptr<const store::GraphImage> image,
                          store::CachedGraphImage(*impl_, read.conn()));
    if (image) return image->RelationshipEdgesOf(entity_id);
  }
  // The entity's own degree is read once a branch, the other end's per row; no text column.
  // No ORDER BY: the caller ranks them itself, and SQLite's sorter would be a quarter of the
  // cost. One branch per end, each an index range (no row is in both: source_id < target_id),
  // cheaper than an OR's de-duplicating multi-index scan.
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare(
          "SELECT r.id, r.source_id, r.target_id, r.weight, r.frequency, m.degree + o.degree "
          "FROM relationships r JOIN entities m ON m.id = ?1 JOIN entities o ON o.id = "
          "r.target_id WHERE r.source_id = ?1 UNION ALL "
          "SELECT r.id, r.source_id, r.target_id, r.weight, r.frequency, m.degree + o.degree "
          "FROM relationships r JOIN entities m ON m.id = ?1 JOIN entities o ON o.id = "
          "r.source_id WHERE r.target_id = ?1"));
  stmt.BindAll(entity_id);
  std::vector<RelationshipRecord> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    RelationshipRecord& r = out.emplace_back();
    r.id = stmt.Int(0);
    r.source_id = stmt.Int(1);
    r.target_id = stmt.Int(2);
    r.weight = stmt.Double(3);
    r.frequency = stmt.Int(4);
    r.combined_degree = stmt.Int(5);
  }
  return out;
}

Result<std::vector<std::optional<std::string>>> SqliteStore::GetRelationshipDescriptions(
    const std::vector<int64_t>& ids) {
  std::vector<std::optional<std::string>> out;
  out.reserve(ids.size());
  if (ids.empty()) return out;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        read.conn().Prepare("SELECT description FROM relationships WHERE id = ?"));
  for (int64_t id : ids) {
    stmt.BindAll(id);
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (row) {
      out.emplace_back(stmt.Text(0));
    } else {
      out.emplace_back(std::nullopt);
    }
  }
  return out;
}

Status SqliteStore::SetRelationshipChunks(int64_t relationship_id,
                                          const std::vector<std::string>& chunk_ids) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  GRAG_RETURN_IF_ERROR(
      SetLinks(impl_->conn, "relationship_chunks", "relationship_id", relationship_id, chunk_ids));
  return tx.Commit();
}

Result<bool> SqliteStore::DeleteRelationship(int64_t id) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  GRAG_RETURN_IF_ERROR(impl_->DropGraphImage());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        impl_->conn.Prepare("DELETE FROM relationships WHERE id = ?"));
  GRAG_RETURN_IF_ERROR(stmt.BindAll(id).Run());
  const bool deleted = sqlite3_changes(impl_->conn.get()) > 0;
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return deleted;
}

Status SqliteStore::RecomputeGraphStats() {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  GRAG_RETURN_IF_ERROR(impl_->DropGraphImage());
  // Only the rows whose figures differ: an UPDATE to the same value still rewrites the row's
  // page, and an update touches few of them.
  GRAG_RETURN_IF_ERROR(impl_->conn.Exec(
      "UPDATE entities SET degree = s.degree, frequency = s.frequency FROM (SELECT e.id, "
      "(SELECT count(*) FROM relationships r WHERE r.source_id = e.id) + "
      "(SELECT count(*) FROM relationships r WHERE r.target_id = e.id) AS degree, "
      "(SELECT count(*) FROM entity_chunks l WHERE l.entity_id = e.id) AS frequency "
      "FROM entities e) AS s WHERE s.id = entities.id AND "
      "(entities.degree IS NOT s.degree OR entities.frequency IS NOT s.frequency);"
      "UPDATE relationships SET frequency = s.frequency FROM (SELECT r.id, (SELECT count(*) "
      "FROM relationship_chunks l WHERE l.relationship_id = r.id) AS frequency "
      "FROM relationships r) AS s WHERE s.id = relationships.id AND "
      "relationships.frequency IS NOT s.frequency;"));
  return tx.Commit();
}

// ---------------------------------------------------------------- communities

Result<int64_t> SqliteStore::ReplaceCommunities(const ClusteringRecord& clustering,
                                                const std::vector<CommunityRecord>& communities) {
  // Check the hierarchy up front: the parent key is deferred, so a bad parent would otherwise
  // surface only when the outermost transaction commits.
  GRAG_RETURN_IF_ERROR(store::CheckCommunityHierarchy(communities));
  std::unordered_set<int64_t> kept;  // the new hierarchy's ids
  for (const CommunityRecord& c : communities) kept.insert(c.id);

  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  sqlite::Connection& conn = impl_->conn;
  int64_t clustering_id = 0;
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt insert,
        conn.Prepare("INSERT INTO clusterings (method, seed, resolution, max_cluster_size, "
                     "modularity, warm_start, note, graph_hash, fresh_modularity) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"));
    insert.BindAll(clustering.method, clustering.seed, clustering.resolution,
                   clustering.max_cluster_size, clustering.modularity, clustering.warm_start,
                   clustering.note, clustering.graph_hash, clustering.fresh_modularity);
    GRAG_ASSIGN_OR_RETURN(bool row, insert.Step());
    if (!row) return Status::Internal("INSERT ... RETURNING gave no row");
    clustering_id = insert.Int(0);
    GRAG_RETURN_IF_ERROR(insert.Run());
  }
  // Upsert first and delete afterwards: a kept community whose old parent goes must already
  // point at its new parent, or the parent's ON DELETE CASCADE would take it (and its report).
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt upsert,
        conn.Prepare("INSERT INTO communities (id, level, parent_id, clustering_id) "
                     "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (id) DO UPDATE SET "
                     "level = excluded.level, parent_id = excluded.parent_id, "
                     "clustering_id = excluded.clustering_id, updated_at = " GRAG_SQL_NOW));
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt clear,
                          conn.Prepare("DELETE FROM community_members WHERE community_id = ?"));
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt member,
        conn.Prepare("INSERT INTO community_members (community_id, entity_id) VALUES (?, ?) "
                     "ON CONFLICT DO NOTHING"));
    for (const CommunityRecord& c : communities) {
      GRAG_RETURN_IF_ERROR(upsert.BindAll(c.id, c.level, c.parent_id, clustering_id).Run());
      GRAG_RETURN_IF_ERROR(clear.BindAll(c.id).Run());
      for (int64_t entity_id : c.entity_ids) {
        Status st = member.BindAll(c.id, entity_id).Run();
        if (!st.ok()) {
          return st.WithContext("community " + std::to_string(c.id) + " member " +
                                std::to_string(entity_id) + " (does the entity exist?)");
        }
      }
    }
  }
  {
    std::vector<int64_t> stale;
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt list, conn.Prepare("SELECT id FROM communities"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, list.Step());
      if (!row) break;
      if (kept.count(list.Int(0)) == 0) stale.push_back(list.Int(0));
    }
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt del, conn.Prepare("DELETE FROM communities WHERE id = ?"));
    for (int64_t id : stale) GRAG_RETURN_IF_ERROR(del.BindAll(id).Run());
  }
  GRAG_RETURN_IF_ERROR(conn.Exec(
      "UPDATE communities SET "
      "size = (SELECT count(*) FROM community_members m WHERE m.community_id = communities.id), "
      "weight = (SELECT count(DISTINCT l.chunk_seq) FROM community_members m "
      "          JOIN entity_chunks l ON l.entity_id = m.entity_id "
      "          WHERE m.community_id = communities.id)"));
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return clustering_id;
}

Result<std::vector<CommunityRecord>> SqliteStore::ListCommunities(std::optional<int64_t> level) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  sqlite::Connection& conn = read.conn();
  std::vector<CommunityRecord> out;
  std::unordered_map<int64_t, size_t> index_of;
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt stmt,
        conn.Prepare("SELECT id, level, parent_id, size, weight, clustering_id FROM communities "
                     "WHERE ?1 IS NULL OR level = ?1 ORDER BY level, id"));
    stmt.BindAll(level);
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      CommunityRecord& c = out.emplace_back();
      c.id = stmt.Int(0);
      c.level = stmt.Int(1);
      c.parent_id = stmt.OptInt(2);
      c.size = stmt.Int(3);
      c.weight = stmt.Int(4);
      c.clustering_id = stmt.OptInt(5).value_or(0);
      index_of[c.id] = out.size() - 1;
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt stmt,
        conn.Prepare("SELECT m.community_id, m.entity_id FROM community_members m "
                     "JOIN communities c ON c.id = m.community_id "
                     "WHERE ?1 IS NULL OR c.level = ?1 ORDER BY m.community_id, m.entity_id"));
    stmt.BindAll(level);
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      auto it = index_of.find(stmt.Int(0));
      if (it != index_of.end()) out[it->second].entity_ids.push_back(stmt.Int(1));
    }
  }
  return out;
}

Result<std::vector<int64_t>> SqliteStore::CommunitiesOfEntity(int64_t entity_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT c.id FROM community_members m JOIN communities c ON c.id = "
                          "m.community_id WHERE m.entity_id = ? ORDER BY c.level, c.id"));
  stmt.BindAll(entity_id);
  std::vector<int64_t> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back(stmt.Int(0));
  }
  return out;
}

Result<std::map<int64_t, std::vector<std::string>>> SqliteStore::CommunityChunks(
    std::optional<int64_t> level) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  std::string sql =
      "SELECT k.community_id, c.id FROM (SELECT DISTINCT m.community_id, l.chunk_seq FROM "
      "community_members m JOIN entity_chunks l ON l.entity_id = m.entity_id";
  if (level) sql += " JOIN communities o ON o.id = m.community_id WHERE o.level = ?";
  sql +=
      ") k JOIN chunks c ON c.seq = k.chunk_seq ORDER BY k.community_id, c.document_id, "
      "c.chunk_index";
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt, read.conn().Prepare(sql));
  if (level) stmt.BindAll(*level);
  std::map<int64_t, std::vector<std::string>> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out[stmt.Int(0)].push_back(stmt.Text(1));
  }
  return out;
}

Result<std::optional<ClusteringRecord>> SqliteStore::LatestClustering() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      read.conn().Prepare("SELECT id, method, seed, resolution, max_cluster_size, modularity, "
                          "warm_start, note, created_at, graph_hash, fresh_modularity "
                          "FROM clusterings ORDER BY id DESC LIMIT 1"));
  GRAG_ASSIGN_OR_RETURN(bool found, stmt.Step());
  if (!found) return std::optional<ClusteringRecord>();
  ClusteringRecord c;
  c.id = stmt.Int(0);
  c.method = stmt.Text(1);
  c.seed = stmt.Int(2);
  c.resolution = stmt.Double(3);
  c.max_cluster_size = stmt.Int(4);
  c.modularity = stmt.OptDouble(5);
  c.warm_start = stmt.Int(6) != 0;
  c.note = stmt.Text(7);
  c.created_at = stmt.Text(8);
  c.graph_hash = stmt.Text(9);
  c.fresh_modularity = stmt.OptDouble(10);
  return std::optional<ClusteringRecord>(std::move(c));
}

// ---------------------------------------------------------------- reports

namespace {

constexpr std::string_view kReportSelect =
    "SELECT r.community_id, r.status, r.reason, r.title, r.summary, r.full_content, r.findings, "
    "r.rating, r.rating_explanation, r.input_hash, r.generator, r.model, c.level, r.updated_at, "
    "r.stale, r.basis, r.stale_note FROM reports r JOIN communities c ON c.id = r.community_id ";

// `findings`: false leaves them out where full_content holds the rendering, and the basis out
// (ListReports for global search's prompts).
// A report's findings as JSON text: stored compressed (a BLOB, reply_codec.h) where that saves
// room (schema 11), else as the text.
Result<std::string> FindingsJson(const sqlite::Stmt& stmt, int col) {
  Result<std::string> text = sqlite::CompressibleText(stmt, col);
  if (!text.ok()) {
    return Status::Corruption("the findings of the report of community " +
                              std::to_string(stmt.Int(0)) +
                              " are damaged: " + text.status().message());
  }
  return text;
}

Result<ReportRecord> ReadReport(const sqlite::Stmt& stmt, bool findings = true) {
  ReportRecord r;
  r.community_id = stmt.Int(0);
  r.status = store::ParseReportStatus(stmt.Text(1));
  r.reason = stmt.Text(2);
  r.title = stmt.Text(3);
  r.summary = stmt.Text(4);
  r.full_content = stmt.Text(5);
  if (findings || r.full_content.empty()) {
    GRAG_ASSIGN_OR_RETURN(std::string json, FindingsJson(stmt, 6));
    r.findings = store::FindingsFromJson(json);
  }
  // Stored empty when it is the findings' rendering (PutReport).
  if (r.full_content.empty() && r.status == ReportStatus::kOk) {
    r.full_content = RenderReportMarkdown(r.title, r.summary, r.findings);
  }
  r.rating = stmt.OptDouble(7);
  r.rating_explanation = stmt.Text(8);
  r.input_hash = sqlite::HashText(stmt, 9);
  r.generator = store::ParseReportGenerator(stmt.Text(10));
  r.model = stmt.Text(11);
  r.level = stmt.Int(12);
  r.updated_at = stmt.Text(13);
  r.stale = stmt.Int(14) != 0;
  if (findings) {
    // Compressed where that saves room, as the findings are (its member ids compress well).
    Result<std::string> basis = sqlite::CompressibleText(stmt, 15);
    if (!basis.ok()) {
      return Status::Corruption("the basis of the report of community " +
                                std::to_string(r.community_id) +
                                " is damaged: " + basis.status().message());
    }
    r.basis = store::ReportBasisFromJson(*basis);
  }
  r.stale_note = stmt.Text(16);
  // What changed since a stale report was written travels with it, so global search and every
  // other reader of the report see the new members too.
  if (r.stale && !r.stale_note.empty()) r.full_content += "\n\n" + r.stale_note;
  return r;
}

}  // namespace

Status SqliteStore::PutReport(const ReportRecord& r) {
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  sqlite::Connection& conn = impl_->conn;
  GRAG_ASSIGN_OR_RETURN(bool found,
                        RowExists(conn, "SELECT 1 FROM communities WHERE id = ?", r.community_id));
  if (!found) {
    return Status::InvalidArgument("no community " + std::to_string(r.community_id) +
                                   " for a report");
  }
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      conn.Prepare("INSERT INTO reports (community_id, status, reason, title, summary, "
                   "full_content, findings, rating, rating_explanation, input_hash, generator, "
                   "model, stale, basis) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) "
                   "ON CONFLICT (community_id) DO UPDATE SET status = excluded.status, "
                   "reason = excluded.reason, title = excluded.title, "
                   "summary = excluded.summary, full_content = excluded.full_content, "
                   "findings = excluded.findings, rating = excluded.rating, "
                   "rating_explanation = excluded.rating_explanation, "
                   "input_hash = excluded.input_hash, generator = excluded.generator, "
                   "model = excluded.model, stale = excluded.stale, basis = excluded.basis, "
                   "stale_note = '', updated_at = " GRAG_SQL_NOW));
  // The rendering of title, summary and findings is not kept twice (ReadReport renders it): a
  // third of the reports' bytes.
  const bool rendered = r.status == ReportStatus::kOk &&
                        r.full_content == RenderReportMarkdown(r.title, r.summary, r.findings);
  const std::string_view content = rendered ? std::string_view() : r.full_content;
  const std::string findings = store::FindingsToJson(r.findings);
  const std::string basis = store::ReportBasisToJson(r.basis);
  stmt.BindAll(r.community_id, store::ReportStatusName(r.status), r.reason, r.title, r.summary,
               content, findings, r.rating, r.rating_explanation, r.input_hash,
               store::ReportGeneratorName(r.generator), r.model, r.stale ? 1 : 0, basis);
  // Compressed where that saves room (a third of their size): the largest part of a report. So
  // is the basis, its members' ids (a fifth of an LLM report's bytes, a quarter compressed).
  sqlite::BindCompressible(stmt, 7, findings);
  sqlite::BindCompressible(stmt, 14, basis);
  sqlite::BindHash(stmt, 10, r.input_hash);
  GRAG_RETURN_IF_ERROR(stmt.Run());
  return tx.Commit();
}

Status SqliteStore::MarkReportStale(int64_t community_id, std::string_view note) {
  auto lock = impl_->Lock();
  GRAG_ASSIGN_OR_RETURN(
      sqlite::Stmt stmt,
      impl_->conn.Prepare("UPDATE reports SET stale = 1, stale_note = ? WHERE community_id = ?"));
  return stmt.BindAll(note, community_id).Run();
}

Result<std::optional<ReportRecord>> SqliteStore::GetReport(int64_t community_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt, read.conn().Prepare(std::string(kReportSelect) +
                                                               "WHERE r.community_id = ?"));
  GRAG_ASSIGN_OR_RETURN(bool found, stmt.BindAll(community_id).Step());
  if (!found) return std::optional<ReportRecord>();
  GRAG_ASSIGN_OR_RETURN(ReportRecord r, ReadReport(stmt));
  return std::optional<ReportRecord>(std::move(r));
}

Result<std::vector<ReportRecord>> SqliteStore::ListReports(std::optional<int64_t> level,
                                                           bool findings) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt, read.conn().Prepare(std::string(kReportSelect) +
                                                               "WHERE ?1 IS NULL OR c.level = ?1 "
                                                               "ORDER BY c.level, r.community_id"));
  stmt.BindAll(level);
  std::vector<ReportRecord> out;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    GRAG_ASSIGN_OR_RETURN(ReportRecord r, ReadReport(stmt, findings));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace grag
