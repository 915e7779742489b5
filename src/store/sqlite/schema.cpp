// The index schema, its forward migrations, and opening an index file.
//
// docs/schema.md documents every table and column; keep the two in step. Never edit a released
// migration: add a new step instead, so every older index can be brought forward.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "grag/log.h"
#include "store_impl.h"

namespace grag::store {
namespace {

// Version 1: the initial schema.
constexpr std::string_view kSchemaV1 = R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE documents (
  id           TEXT PRIMARY KEY,
  title        TEXT NOT NULL,
  source_path  TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  text         TEXT NOT NULL,
  created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  updated_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);

-- seq is an explicit INTEGER PRIMARY KEY because chunks_fts refers to rows by rowid, and only an
-- INTEGER PRIMARY KEY keeps rowids stable across VACUUM.
CREATE TABLE chunks (
  seq          INTEGER PRIMARY KEY,
  id           TEXT NOT NULL UNIQUE,
  document_id  TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
  chunk_index  INTEGER NOT NULL,
  text         TEXT NOT NULL,
  n_tokens     INTEGER NOT NULL,
  start_token  INTEGER NOT NULL,
  created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  UNIQUE (document_id, chunk_index)
);

CREATE VIRTUAL TABLE chunks_fts USING fts5(
  text,
  content = 'chunks',
  content_rowid = 'seq',
  tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
  INSERT INTO chunks_fts (rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
  INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
CREATE TRIGGER chunks_fts_update AFTER UPDATE OF text ON chunks BEGIN
  INSERT INTO chunks_fts (chunks_fts, rowid, text) VALUES ('delete', old.seq, old.text);
  INSERT INTO chunks_fts (rowid, text) VALUES (new.seq, new.text);
END;

CREATE TABLE extractions (
  id              INTEGER PRIMARY KEY,
  chunk_id        TEXT NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
  extractor       TEXT NOT NULL CHECK (extractor IN ('llm', 'nlp')),
  model           TEXT NOT NULL,
  status          TEXT NOT NULL CHECK (status IN ('ok', 'skipped')),
  reason          TEXT NOT NULL DEFAULT '',
  gleaning_rounds INTEGER NOT NULL DEFAULT 0,
  params_hash     TEXT NOT NULL DEFAULT '',
  created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  UNIQUE (chunk_id, extractor, model)
);
CREATE INDEX extractions_by_extractor ON extractions (extractor, model, status);

CREATE TABLE entity_mentions (
  id            INTEGER PRIMARY KEY,
  extraction_id INTEGER NOT NULL REFERENCES extractions(id) ON DELETE CASCADE,
  name          TEXT NOT NULL,
  name_key      TEXT NOT NULL,
  type          TEXT NOT NULL,
  description   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX entity_mentions_extraction ON entity_mentions (extraction_id);
CREATE INDEX entity_mentions_key ON entity_mentions (name_key);

CREATE TABLE relationship_mentions (
  id            INTEGER PRIMARY KEY,
  extraction_id INTEGER NOT NULL REFERENCES extractions(id) ON DELETE CASCADE,
  source        TEXT NOT NULL,
  target        TEXT NOT NULL,
  source_key    TEXT NOT NULL,
  target_key    TEXT NOT NULL,
  description   TEXT NOT NULL DEFAULT '',
  strength      REAL NOT NULL DEFAULT 1
);
CREATE INDEX relationship_mentions_extraction ON relationship_mentions (extraction_id);
CREATE INDEX relationship_mentions_keys ON relationship_mentions (source_key, target_key);

CREATE TABLE entities (
  id                INTEGER PRIMARY KEY,
  name_key          TEXT NOT NULL UNIQUE,
  name              TEXT NOT NULL,
  type              TEXT NOT NULL,
  type_counts       TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(type_counts)),
  description       TEXT NOT NULL DEFAULT '',
  description_hash  TEXT NOT NULL DEFAULT '',
  description_model TEXT NOT NULL DEFAULT '',
  degree            INTEGER NOT NULL DEFAULT 0,
  frequency         INTEGER NOT NULL DEFAULT 0,
  created_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  updated_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);
CREATE INDEX entities_by_degree ON entities (degree DESC, name_key);

-- Undirected: each pair once, smaller id first.
CREATE TABLE relationships (
  id                INTEGER PRIMARY KEY,
  source_id         INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
  target_id         INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
  description       TEXT NOT NULL DEFAULT '',
  description_hash  TEXT NOT NULL DEFAULT '',
  description_model TEXT NOT NULL DEFAULT '',
  weight            REAL NOT NULL DEFAULT 0,
  frequency         INTEGER NOT NULL DEFAULT 0,
  created_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  updated_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  CHECK (source_id < target_id),
  UNIQUE (source_id, target_id)
);
CREATE INDEX relationships_by_target ON relationships (target_id);

CREATE TABLE entity_chunks (
  entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
  chunk_id  TEXT NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
  PRIMARY KEY (entity_id, chunk_id)
) WITHOUT ROWID;
CREATE INDEX entity_chunks_by_chunk ON entity_chunks (chunk_id);

CREATE TABLE relationship_chunks (
  relationship_id INTEGER NOT NULL REFERENCES relationships(id) ON DELETE CASCADE,
  chunk_id        TEXT NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
  PRIMARY KEY (relationship_id, chunk_id)
) WITHOUT ROWID;
CREATE INDEX relationship_chunks_by_chunk ON relationship_chunks (chunk_id);

CREATE TABLE clusterings (
  id               INTEGER PRIMARY KEY,
  method           TEXT NOT NULL,
  seed             INTEGER NOT NULL,
  resolution       REAL NOT NULL,
  max_cluster_size INTEGER NOT NULL,
  modularity       REAL,
  warm_start       INTEGER NOT NULL DEFAULT 0 CHECK (warm_start IN (0, 1)),
  note             TEXT NOT NULL DEFAULT '',
  created_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);

-- parent_id is deferred so a hierarchy can be written in any order within one transaction.
CREATE TABLE communities (
  id            INTEGER PRIMARY KEY,
  level         INTEGER NOT NULL CHECK (level >= 0),
  parent_id     INTEGER REFERENCES communities(id) ON DELETE CASCADE
                DEFERRABLE INITIALLY DEFERRED,
  size          INTEGER NOT NULL DEFAULT 0,
  weight        INTEGER NOT NULL DEFAULT 0,
  clustering_id INTEGER REFERENCES clusterings(id) ON DELETE SET NULL,
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  updated_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  CHECK ((level = 0) = (parent_id IS NULL))
);
CREATE INDEX communities_by_level ON communities (level);
CREATE INDEX communities_by_parent ON communities (parent_id);

CREATE TABLE community_members (
  community_id INTEGER NOT NULL REFERENCES communities(id) ON DELETE CASCADE,
  entity_id    INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
  PRIMARY KEY (community_id, entity_id)
) WITHOUT ROWID;
CREATE INDEX community_members_by_entity ON community_members (entity_id);

CREATE TABLE reports (
  community_id       INTEGER PRIMARY KEY REFERENCES communities(id) ON DELETE CASCADE,
  status             TEXT NOT NULL CHECK (status IN ('ok', 'gap')),
  reason             TEXT NOT NULL DEFAULT '',
  title              TEXT NOT NULL DEFAULT '',
  summary            TEXT NOT NULL DEFAULT '',
  full_content       TEXT NOT NULL DEFAULT '',
  findings           TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(findings)),
  rating             REAL,
  rating_explanation TEXT NOT NULL DEFAULT '',
  input_hash         TEXT NOT NULL DEFAULT '',
  generator          TEXT NOT NULL CHECK (generator IN ('llm', 'extractive')),
  model              TEXT NOT NULL DEFAULT '',
  created_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  updated_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);

CREATE TABLE embeddings (
  owner_kind TEXT NOT NULL CHECK (owner_kind IN ('entity', 'chunk', 'report')),
  owner_id   TEXT NOT NULL,
  model      TEXT NOT NULL,
  dimension  INTEGER NOT NULL CHECK (dimension > 0),
  vector     BLOB NOT NULL CHECK (length(vector) = 4 * dimension),
  input_hash TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  PRIMARY KEY (owner_kind, owner_id)
);

-- One model and dimension per owner kind. All rows of a kind agree, so comparing with any one
-- other row is enough (and cheap through the primary key).
CREATE TRIGGER embeddings_one_space_insert BEFORE INSERT ON embeddings
WHEN EXISTS (SELECT 1 FROM (SELECT model, dimension FROM embeddings
                            WHERE owner_kind = new.owner_kind AND owner_id <> new.owner_id LIMIT 1)
             WHERE model <> new.model OR dimension <> new.dimension)
BEGIN
  SELECT RAISE(ABORT, 'embedding model or dimension differs from the stored ones of this kind');
END;
CREATE TRIGGER embeddings_one_space_update BEFORE UPDATE ON embeddings
WHEN EXISTS (SELECT 1 FROM (SELECT model, dimension FROM embeddings
                            WHERE owner_kind = new.owner_kind AND owner_id <> new.owner_id LIMIT 1)
             WHERE model <> new.model OR dimension <> new.dimension)
BEGIN
  SELECT RAISE(ABORT, 'embedding model or dimension differs from the stored ones of this kind');
END;

-- An owner's vector goes with it (embeddings has no foreign key: its owner is polymorphic).
CREATE TRIGGER entities_delete_embedding AFTER DELETE ON entities BEGIN
  DELETE FROM embeddings WHERE owner_kind = 'entity' AND owner_id = CAST(old.id AS TEXT);
END;
CREATE TRIGGER chunks_delete_embedding AFTER DELETE ON chunks BEGIN
  DELETE FROM embeddings WHERE owner_kind = 'chunk' AND owner_id = old.id;
END;
CREATE TRIGGER reports_delete_embedding AFTER DELETE ON reports BEGIN
  DELETE FROM embeddings WHERE owner_kind = 'report' AND owner_id = CAST(old.community_id AS TEXT);
END;

CREATE TABLE llm_cache (
  key        TEXT PRIMARY KEY,
  value      TEXT NOT NULL,
  model      TEXT NOT NULL DEFAULT '',
  kind       TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
);

CREATE TABLE runs (
  id          INTEGER PRIMARY KEY,
  command     TEXT NOT NULL,
  status      TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'interrupted')),
  stage       TEXT NOT NULL DEFAULT '',
  message     TEXT NOT NULL DEFAULT '',
  counters    TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(counters)),
  started_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  finished_at TEXT
);

CREATE TABLE run_stages (
  run_id     INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  stage      TEXT NOT NULL,
  status     TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
  done       INTEGER NOT NULL DEFAULT 0,
  total      INTEGER NOT NULL DEFAULT 0,
  checkpoint TEXT NOT NULL DEFAULT '',
  started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  PRIMARY KEY (run_id, stage)
);
)sql";

// v2: what incremental community detection needs to skip an unchanged graph and to report drift.
constexpr std::string_view kSchemaV2 = R"sql(
ALTER TABLE clusterings ADD COLUMN graph_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE clusterings ADD COLUMN fresh_modularity REAL;
)sql";

// v3: entity resolution. Every extracted name key the resolver has seen maps to the entity it
// belongs to (itself when it stands alone); links are the pairwise decisions that made the
// clusters; overrides are a person's decisions, which win and survive re-indexing.
constexpr std::string_view kSchemaV3 = R"sql(
CREATE TABLE entity_aliases (
  name_key      TEXT PRIMARY KEY,
  name          TEXT NOT NULL,
  canonical_key TEXT NOT NULL,
  score         REAL NOT NULL DEFAULT 1,
  method        TEXT NOT NULL DEFAULT '' CHECK (method IN ('', 'rule', 'similarity', 'llm', 'user')),
  reason        TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE INDEX entity_aliases_by_canonical ON entity_aliases (canonical_key);

CREATE TABLE resolution_links (
  key_a  TEXT NOT NULL,
  key_b  TEXT NOT NULL,
  score  REAL NOT NULL,
  method TEXT NOT NULL CHECK (method IN ('rule', 'similarity', 'llm')),
  reason TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  CHECK (key_a < key_b),
  PRIMARY KEY (key_a, key_b)
) WITHOUT ROWID;

CREATE TABLE entity_overrides (
  key_a    TEXT NOT NULL,
  key_b    TEXT NOT NULL,
  decision TEXT NOT NULL CHECK (decision IN ('merge', 'split')),
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  CHECK (key_a < key_b),
  PRIMARY KEY (key_a, key_b)
) WITHOUT ROWID;
)sql";

// v4: incremental updates at a fraction of a rebuild's cost. A report records what it was written
// from (members, internal edge weight, prompt and model), so an update can keep it while its
// community changed only a little; `stale` marks such a kept report until it is rewritten. A
// merged description records which mention descriptions it covers, so new ones can be appended
// to a summary without another call.
constexpr std::string_view kSchemaV4 = R"sql(
ALTER TABLE reports ADD COLUMN stale INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reports ADD COLUMN basis TEXT NOT NULL DEFAULT '';
ALTER TABLE reports ADD COLUMN stale_note TEXT NOT NULL DEFAULT '';
ALTER TABLE entities ADD COLUMN description_basis TEXT NOT NULL DEFAULT '';
ALTER TABLE relationships ADD COLUMN description_basis TEXT NOT NULL DEFAULT '';
)sql";

// Version 5: no index of mentions by name. Nothing reads mentions by name (the merge reads
// them by extraction, in chunk order), and keeping those indexes cost the most of an index
// run's disk writes: every batch of extraction results inserted at random places all over
// them, so each commit rewrote most of their pages (the no-LLM index of 95 MiB of
// transcripts wrote 10.6 GiB for a 1.36 GiB index).
constexpr std::string_view kSchemaV5 = R"sql(
DROP INDEX IF EXISTS entity_mentions_key;
DROP INDEX IF EXISTS relationship_mentions_keys;
)sql";

// Version 6: query images (Store::RefreshQueryImages): packed copies of the graph as the
// neighbourhood walk reads it, of each kind's vectors and of the chunk counts of the full-text
// index's common terms, so a one-off question reads a few blobs instead of thousands of rows
// (and posting lists). An image is dropped in the same transaction as any change to a table it
// is made from, so it is always current or absent: by the triggers below for chunks, documents
// and embeddings, and by the store's writes of entities, relationships and entity-chunk links
// (SqliteStore::Impl::DropGraphImage, once a transaction: a trigger per row of those cost the
// no-LLM index of 95 MiB a minute of CPU).
constexpr std::string_view kSchemaV6 = R"sql(
-- An image is never changed, only dropped and built again under a new id, so a reader that has
-- decoded one keeps it for as long as its id is the stored one.
CREATE TABLE query_images (
  id   INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  data BLOB NOT NULL
);
CREATE TRIGGER query_image_chunks_insert AFTER INSERT ON chunks BEGIN
  DELETE FROM query_images WHERE name IN ('graph', 'words');
END;
CREATE TRIGGER query_image_chunks_update AFTER UPDATE OF id, document_id, chunk_index, text ON chunks BEGIN
  DELETE FROM query_images WHERE name IN ('graph', 'words');
END;
CREATE TRIGGER query_image_chunks_delete AFTER DELETE ON chunks BEGIN
  DELETE FROM query_images WHERE name IN ('graph', 'words');
END;
CREATE TRIGGER query_image_documents_insert AFTER INSERT ON documents BEGIN
  DELETE FROM query_images WHERE name = 'graph';
END;
CREATE TRIGGER query_image_documents_update AFTER UPDATE OF id, title ON documents BEGIN
  DELETE FROM query_images WHERE name = 'graph';
END;
CREATE TRIGGER query_image_documents_delete AFTER DELETE ON documents BEGIN
  DELETE FROM query_images WHERE name = 'graph';
END;
CREATE TRIGGER query_image_embeddings_insert AFTER INSERT ON embeddings BEGIN
  DELETE FROM query_images WHERE name = 'vectors:' || new.owner_kind;
END;
CREATE TRIGGER query_image_embeddings_update AFTER UPDATE ON embeddings BEGIN
  DELETE FROM query_images WHERE name = 'vectors:' || old.owner_kind OR name = 'vectors:' || new.owner_kind;
END;
CREATE TRIGGER query_image_embeddings_delete AFTER DELETE ON embeddings BEGIN
  DELETE FROM query_images WHERE name = 'vectors:' || old.owner_kind;
END;
)sql";

// Version 7: a compact index. Each vector is kept once, in its row, in the encoding the
// embeddings.encoding setting chose (f32, f16 or int8: grag/store_types.h VectorEncoding), so the
// table is rebuilt with an encoding column and a size check per encoding; the vectors' query
// images (a second copy of every vector, a quarter of a large index) are dropped with the
// triggers that kept them current. Rows keep their f32 values; the next index run re-encodes
// them (Store::ReencodeEmbeddings). The reply cache needs no step: a compressed value is stored
// as a BLOB beside the TEXT values older builds wrote (reply_codec.h).
//
// The rebuild renames the new table over the old one with legacy_alter_table on: the triggers
// on entities, chunks and reports name `embeddings`, which does not exist between the DROP and
// the RENAME, and SQLite's default RENAME would refuse to re-check them.
constexpr std::string_view kSchemaV7 = R"sql(
DELETE FROM query_images WHERE name LIKE 'vectors:%';
DROP TRIGGER IF EXISTS query_image_embeddings_insert;
DROP TRIGGER IF EXISTS query_image_embeddings_update;
DROP TRIGGER IF EXISTS query_image_embeddings_delete;

CREATE TABLE embeddings_v7 (
  owner_kind TEXT NOT NULL CHECK (owner_kind IN ('entity', 'chunk', 'report')),
  owner_id   TEXT NOT NULL,
  model      TEXT NOT NULL,
  dimension  INTEGER NOT NULL CHECK (dimension > 0),
  encoding   TEXT NOT NULL DEFAULT 'f32' CHECK (encoding IN ('f32', 'f16', 'int8')),
  vector     BLOB NOT NULL CHECK (length(vector) = CASE encoding WHEN 'f32' THEN 4 * dimension
                                                   WHEN 'f16' THEN 2 * dimension
                                                   ELSE 4 + dimension END),
  input_hash TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  PRIMARY KEY (owner_kind, owner_id)
);
INSERT INTO embeddings_v7 (owner_kind, owner_id, model, dimension, encoding, vector, input_hash,
                           created_at)
  SELECT owner_kind, owner_id, model, dimension, 'f32', vector, input_hash, created_at
  FROM embeddings ORDER BY owner_kind, owner_id;
DROP TABLE embeddings;
PRAGMA legacy_alter_table = ON;
ALTER TABLE embeddings_v7 RENAME TO embeddings;
PRAGMA legacy_alter_table = OFF;

CREATE TRIGGER embeddings_one_space_insert BEFORE INSERT ON embeddings
WHEN EXISTS (SELECT 1 FROM (SELECT model, dimension FROM embeddings
                            WHERE owner_kind = new.owner_kind AND owner_id <> new.owner_id LIMIT 1)
             WHERE model <> new.model OR dimension <> new.dimension)
BEGIN
  SELECT RAISE(ABORT, 'embedding model or dimension differs from the stored ones of this kind');
END;
CREATE TRIGGER embeddings_one_space_update BEFORE UPDATE ON embeddings
WHEN EXISTS (SELECT 1 FROM (SELECT model, dimension FROM embeddings
                            WHERE owner_kind = new.owner_kind AND owner_id <> new.owner_id LIMIT 1)
             WHERE model <> new.model OR dimension <> new.dimension)
BEGIN
  SELECT RAISE(ABORT, 'embedding model or dimension differs from the stored ones of this kind');
END;
)sql";

// Version 8: character-level citations. Each chunk's window in its document's text, in UTF-8
// bytes, so a citation can name the characters it rests on; -1 on rows written before, until the
// next index run fills them in (a citation meanwhile locates the chunk's text in the document).
constexpr std::string_view kSchemaV8 = R"sql(
ALTER TABLE chunks ADD COLUMN start_byte INTEGER NOT NULL DEFAULT -1;
ALTER TABLE chunks ADD COLUMN end_byte INTEGER NOT NULL DEFAULT -1;
)sql";

// Version 9: the link tables name a chunk by its integer `seq` instead of its 64-character id
// (twice per link, with the index by chunk): on a densely extracted index they were a seventh of
// the file. Rebuilt, links kept; grag sql's views of the same names still show `chunk_id`.
constexpr std::string_view kSchemaV9 = R"sql(
CREATE TABLE entity_chunks_v9 (
  entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
  chunk_seq INTEGER NOT NULL REFERENCES chunks(seq) ON DELETE CASCADE,
  PRIMARY KEY (entity_id, chunk_seq)
) WITHOUT ROWID;
INSERT INTO entity_chunks_v9 (entity_id, chunk_seq)
  SELECT l.entity_id, c.seq FROM entity_chunks l JOIN chunks c ON c.id = l.chunk_id
  ORDER BY l.entity_id, c.seq;
DROP TABLE entity_chunks;
ALTER TABLE entity_chunks_v9 RENAME TO entity_chunks;
CREATE INDEX entity_chunks_by_chunk ON entity_chunks (chunk_seq);

CREATE TABLE relationship_chunks_v9 (
  relationship_id INTEGER NOT NULL REFERENCES relationships(id) ON DELETE CASCADE,
  chunk_seq       INTEGER NOT NULL REFERENCES chunks(seq) ON DELETE CASCADE,
  PRIMARY KEY (relationship_id, chunk_seq)
) WITHOUT ROWID;
INSERT INTO relationship_chunks_v9 (relationship_id, chunk_seq)
  SELECT l.relationship_id, c.seq FROM relationship_chunks l JOIN chunks c ON c.id = l.chunk_id
  ORDER BY l.relationship_id, c.seq;
DROP TABLE relationship_chunks;
ALTER TABLE relationship_chunks_v9 RENAME TO relationship_chunks;
CREATE INDEX relationship_chunks_by_chunk ON relationship_chunks (chunk_seq);
)sql";

// Version 10: smaller rows. Entities and relationships lose created_at and updated_at (written,
// never read: two 24-character texts on each of a dense index's many rows); the embeddings table
// is a WITHOUT ROWID table keyed by (owner_kind, owner_id), without created_at (a kind's vectors
// are read in key order without a second index); description and embedding input hashes keep 16
// hex digits (64 bits, what telling a changed input from an unchanged one needs; the code writes
// the same prefix). On 1,000 densely extracted passages these were a sixth of the file.
constexpr std::string_view kSchemaV10 = R"sql(
ALTER TABLE entities DROP COLUMN created_at;
ALTER TABLE entities DROP COLUMN updated_at;
UPDATE entities SET description_hash = substr(description_hash, 1, 16)
  WHERE length(description_hash) > 16;
ALTER TABLE relationships DROP COLUMN created_at;
ALTER TABLE relationships DROP COLUMN updated_at;
UPDATE relationships SET description_hash = substr(description_hash, 1, 16)
  WHERE length(description_hash) > 16;

DROP TRIGGER IF EXISTS embeddings_one_space_insert;
DROP TRIGGER IF EXISTS embeddings_one_space_update;
CREATE TABLE embeddings_v10 (
  owner_kind TEXT NOT NULL CHECK (owner_kind IN ('entity', 'chunk', 'report')),
  owner_id   TEXT NOT NULL,
  model      TEXT NOT NULL,
  dimension  INTEGER NOT NULL CHECK (dimension > 0),
  encoding   TEXT NOT NULL DEFAULT 'f32' CHECK (encoding IN ('f32', 'f16', 'int8')),
  vector     BLOB NOT NULL CHECK (length(vector) = CASE encoding WHEN 'f32' THEN 4 * dimension
                                                   WHEN 'f16' THEN 2 * dimension
                                                   ELSE 4 + dimension END),
  input_hash TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (owner_kind, owner_id)
) WITHOUT ROWID;
INSERT INTO embeddings_v10 (owner_kind, owner_id, model, dimension, encoding, vector, input_hash)
  SELECT owner_kind, owner_id, model, dimension, encoding, vector, substr(input_hash, 1, 16)
  FROM embeddings ORDER BY owner_kind, owner_id;
DROP TABLE embeddings;
PRAGMA legacy_alter_table = ON;
ALTER TABLE embeddings_v10 RENAME TO embeddings;
PRAGMA legacy_alter_table = OFF;

CREATE TRIGGER embeddings_one_space_insert BEFORE INSERT ON embeddings
WHEN EXISTS (SELECT 1 FROM (SELECT model, dimension FROM embeddings
                            WHERE owner_kind = new.owner_kind AND owner_id <> new.owner_id LIMIT 1)
             WHERE model <> new.model OR dimension <> new.dimension)
BEGIN
  SELECT RAISE(ABORT, 'embedding model or dimension differs from the stored ones of this kind');
END;
CREATE TRIGGER embeddings_one_space_update BEFORE UPDATE ON embeddings
WHEN EXISTS (SELECT 1 FROM (SELECT model, dimension FROM embeddings
                            WHERE owner_kind = new.owner_kind AND owner_id <> new.owner_id LIMIT 1)
             WHERE model <> new.model OR dimension <> new.dimension)
BEGIN
  SELECT RAISE(ABORT, 'embedding model or dimension differs from the stored ones of this kind');
END;
)sql";

// Version 11: an extraction's mentions are one value in its row (mention_record.h) instead of a
// row each in entity_mentions and relationship_mentions: names, keys and descriptions compress
// to a quarter as one value, and the per-row overhead and the two indexes by extraction go. The
// counts stay as columns (stats, the empty-extraction check). The migration writes the plain
// JSON form; an extraction stored later is compressed. A report's findings may be stored
// compressed too (a BLOB), so the reports table is rebuilt with a CHECK that allows it.
constexpr std::string_view kSchemaV11 = R"sql(
ALTER TABLE extractions ADD COLUMN mentions BLOB NOT NULL DEFAULT '{"e":[],"r":[]}';
ALTER TABLE extractions ADD COLUMN entity_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE extractions ADD COLUMN relationship_count INTEGER NOT NULL DEFAULT 0;
UPDATE extractions SET
  mentions = json_object(
    'e', (SELECT json_group_array(json_array(m.name, m.name_key, m.type, m.description))
          FROM (SELECT * FROM entity_mentions WHERE extraction_id = extractions.id
                ORDER BY id) m),
    'r', (SELECT json_group_array(json_array(m.source, m.target, m.source_key, m.target_key,
                                             m.description, m.strength))
          FROM (SELECT * FROM relationship_mentions WHERE extraction_id = extractions.id
                ORDER BY id) m)),
  entity_count = (SELECT count(*) FROM entity_mentions WHERE extraction_id = extractions.id),
  relationship_count =
    (SELECT count(*) FROM relationship_mentions WHERE extraction_id = extractions.id);
DROP TABLE entity_mentions;
DROP TABLE relationship_mentions;

CREATE TABLE reports_v11 (
  community_id       INTEGER PRIMARY KEY REFERENCES communities(id) ON DELETE CASCADE,
  status             TEXT NOT NULL CHECK (status IN ('ok', 'gap')),
  reason             TEXT NOT NULL DEFAULT '',
  title              TEXT NOT NULL DEFAULT '',
  summary            TEXT NOT NULL DEFAULT '',
  full_content       TEXT NOT NULL DEFAULT '',
  findings           TEXT NOT NULL DEFAULT '[]'
                     CHECK (typeof(findings) = 'blob' OR json_valid(findings)),
  rating             REAL,
  rating_explanation TEXT NOT NULL DEFAULT '',
  input_hash         TEXT NOT NULL DEFAULT '',
  generator          TEXT NOT NULL CHECK (generator IN ('llm', 'extractive')),
  model              TEXT NOT NULL DEFAULT '',
  created_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  updated_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
  stale              INTEGER NOT NULL DEFAULT 0,
  basis              TEXT NOT NULL DEFAULT '',
  stale_note         TEXT NOT NULL DEFAULT ''
);
INSERT INTO reports_v11 (community_id, status, reason, title, summary, full_content, findings,
                         rating, rating_explanation, input_hash, generator, model, created_at,
                         updated_at, stale, basis, stale_note)
  SELECT community_id, status, reason, title, summary, full_content, findings, rating,
         rating_explanation, input_hash, generator, model, created_at, updated_at, stale, basis,
         stale_note
  FROM reports ORDER BY community_id;
DROP TABLE reports;
PRAGMA legacy_alter_table = ON;
ALTER TABLE reports_v11 RENAME TO reports;
PRAGMA legacy_alter_table = OFF;
CREATE TRIGGER reports_delete_embedding AFTER DELETE ON reports BEGIN
  DELETE FROM embeddings WHERE owner_kind = 'report' AND owner_id = CAST(old.community_id AS TEXT);
END;

-- The next index run compacts the file (store.compact = auto), compressing what this step wrote
-- plain.
INSERT INTO meta (key, value) VALUES ('compact_requested', 'schema 11')
  ON CONFLICT (key) DO UPDATE SET value = excluded.value;
)sql";

constexpr Migration kMigrations[] = {
    {1, "initial schema", kSchemaV1},
    {2, "clusterings: graph_hash, fresh_modularity", kSchemaV2},
    {3, "entity resolution: aliases, links, overrides", kSchemaV3},
    {4, "report basis and staleness, description basis", kSchemaV4},
    {5, "no index of mentions by name", kSchemaV5},
    {6, "query images", kSchemaV6},
    {7, "vectors once, in an encoding; no vectors images", kSchemaV7},
    {8, "chunks: start_byte, end_byte", kSchemaV8},
    {9, "link tables by chunk seq", kSchemaV9},
    {10, "smaller rows: no graph timestamps, vectors without rowid, 64-bit input hashes",
     kSchemaV10},
    {11, "an extraction's mentions in its row, findings compressed", kSchemaV11},
};

// Applies one step inside the caller's transaction.
Status ApplyStep(sqlite::Connection& conn, const Migration& step, int64_t from) {
  GRAG_RETURN_IF_ERROR(conn.Exec(step.sql));
  std::string meta = "INSERT INTO meta (key, value) VALUES ('schema_version', '" +
                     std::to_string(step.version) +
                     "') ON CONFLICT (key) DO UPDATE SET value = excluded.value;";
  if (from == 0) {
    meta +=
        "INSERT INTO meta (key, value) VALUES ('created_by', 'grag'), ('created_at', " GRAG_SQL_NOW
        ") ON CONFLICT (key) DO NOTHING;";
  } else {
    meta += "INSERT INTO meta (key, value) VALUES ('migrated_at', " GRAG_SQL_NOW
            ") ON CONFLICT (key) DO UPDATE SET value = excluded.value;";
  }
  meta += "PRAGMA application_id = " + std::to_string(kApplicationId) + ";";
  meta += "PRAGMA user_version = " + std::to_string(step.version) + ";";
  GRAG_RETURN_IF_ERROR(conn.Exec(meta));
  // Foreign keys are off while a step runs (so it may rebuild tables); make sure it left none
  // dangling before committing.
  GRAG_ASSIGN_OR_RETURN(std::string dangling, conn.QueryText("PRAGMA foreign_key_check"));
  if (!dangling.empty()) {
    return Status::Corruption("the step leaves rows in table " + dangling +
                              " pointing at missing rows");
  }
  return Status::Ok();
}

Status RunMigrations(sqlite::Connection& conn, std::span<const Migration> steps,
                     const std::string& path) {
  GRAG_ASSIGN_OR_RETURN(const int64_t initial, conn.QueryInt("PRAGMA user_version"));
  for (const Migration& step : steps) {
    GRAG_ASSIGN_OR_RETURN(int64_t current, conn.QueryInt("PRAGMA user_version"));
    if (current >= step.version) continue;
    GRAG_RETURN_IF_ERROR(conn.Exec("BEGIN IMMEDIATE"));
    // Another process may have migrated between our check and our lock.
    Result<int64_t> locked_version = conn.QueryInt("PRAGMA user_version");
    Status st = locked_version.status();
    if (st.ok() && *locked_version < step.version) {
      if (step.version != *locked_version + 1) {
        st = Status::Internal("no migration step to schema " + std::to_string(*locked_version + 1));
      } else {
        st = ApplyStep(conn, step, *locked_version);
      }
    }
    if (st.ok()) st = conn.Exec("COMMIT");
    if (!st.ok()) {
      (void)conn.Exec("ROLLBACK");  // may fail if SQLite already rolled back; nothing to do then
      return st.WithContext("migrating " + path + " to schema " + std::to_string(step.version) +
                            " (" + std::string(step.description) + ")");
    }
    if (initial > 0) {  // a new file is not "migrated"
      Log(LogLevel::kInfo, "store",
          "migrated " + path + " from schema " + std::to_string(current) + " to " +
              std::to_string(step.version) + " (" + std::string(step.description) + ")");
    }
  }
  return Status::Ok();
}

Status Migrate(sqlite::Connection& conn, std::span<const Migration> steps,
               const std::string& path) {
  // Must be set outside a transaction; SQLite ignores it inside one.
  GRAG_RETURN_IF_ERROR(conn.Exec("PRAGMA foreign_keys = OFF"));
  Status st = RunMigrations(conn, steps, path);
  Status on = conn.Exec("PRAGMA foreign_keys = ON");
  return st.ok() ? on : st;
}

// Checks that `conn` is a grag index this build can read (or an empty database to initialise).
Status CheckIsGragIndex(sqlite::Connection& conn, const std::string& path, int64_t latest) {
  // The first real read: this is where a file that is not SQLite fails.
  Result<int64_t> objects = conn.QueryInt("SELECT count(*) FROM sqlite_master");
  if (!objects.ok()) {
    if (objects.status().code() == ErrorCode::kCorruption) {
      return Status::Corruption(path + " is damaged or is not a grag index (" +
                                objects.status().message() + "): " + DamageAdvice());
    }
    return objects.status().WithContext("reading " + path);
  }
  GRAG_ASSIGN_OR_RETURN(int64_t app_id, conn.QueryInt("PRAGMA application_id"));
  GRAG_ASSIGN_OR_RETURN(int64_t version, conn.QueryInt("PRAGMA user_version"));
  bool empty = *objects == 0 && app_id == 0 && version == 0;
  if (app_id != kApplicationId && !empty) {
    return Status::Corruption(path + " is an SQLite database but not a grag index");
  }
  if (version > latest) {
    return Status::InvalidArgument(path + ": index was written by a newer grag (schema " +
                                   std::to_string(version) + "); this grag reads up to " +
                                   std::to_string(latest));
  }
  return Status::Ok();
}

}  // namespace

std::span<const Migration> DefaultMigrations() { return kMigrations; }

namespace {

// The message for a write refused by read-only media or permissions.
Status ReadOnlyIndex(const std::string& path, const std::string& why) {
  return Status::IoError("the index " + path + " is read-only (" + why +
                         "): reading commands (grag query, grag stats, grag check) work on it; "
                         "to update it, make its folder writable or copy it somewhere writable");
}

// A file URI for sqlite3_open_v2 with SQLITE_OPEN_URI: the characters URIs reserve escaped.
std::string FileUri(const std::string& path, std::string_view query) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string abs = fs::absolute(path, ec).lexically_normal().string();
  std::string uri = "file:";
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : abs) {
    if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7F) {
      uri += '%';
      uri += kHex[c >> 4];
      uri += kHex[c & 0xF];
    } else {
      uri += static_cast<char>(c);
    }
  }
  uri += '?';
  uri += query;
  return uri;
}

// Reads through a memory map of the file instead of read() into the page cache: a one-off
// question that reads the query images and a few thousand pages spent a fifth of its time
// allocating cache pages and copying into them (1,669 transcripts: 53 -> 46 ms). The index is
// never truncated in place (no VACUUM), the case in which a mapped read could fault.
Result<sqlite::Connection> MapForReading(Result<sqlite::Connection>& conn, bool map) {
  if (conn.ok() && map) (void)conn->Exec("PRAGMA mmap_size = 1073741824");
  return std::move(conn);
}

}  // namespace

// Opens for reading. An index on read-only media has no -shm file and none can be made, which a
// WAL database needs to be read; it is then opened as immutable (no writer can exist there).
Result<sqlite::Connection> OpenForReading(const std::string& path, bool map) {
  const int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX;
  auto conn = sqlite::Connection::Open(path, flags);
  if (conn.ok()) {
    auto probe = conn->QueryInt("SELECT count(*) FROM sqlite_master");
    if (probe.ok() || probe.status().code() != ErrorCode::kIoError) return MapForReading(conn, map);
    Log(LogLevel::kDebug, "store",
        path + ": " + probe.status().message() + "; reading it as immutable (read-only media)");
  }
  conn = sqlite::Connection::Open(FileUri(path, "immutable=1"), flags | SQLITE_OPEN_URI);
  return MapForReading(conn, map);
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& path, const StoreOptions& options_in,
                                         std::span<const Migration> migrations) {
  namespace fs = std::filesystem;
  StoreOptions options = options_in;
  if (path.empty()) return Status::InvalidArgument("no index path given");
  if (migrations.empty()) return Status::Internal("no schema migrations");
  std::error_code ec;
  fs::file_status file = fs::status(path, ec);
  if (fs::is_directory(file)) {
    return Status::InvalidArgument(path + " is a folder, not a grag index file");
  }
  const bool create = options.create_if_missing && !options.read_only;
  const bool existed = fs::exists(file);
  // Before anything opens it: opening a WAL index creates its -wal file, which is part of the
  // state compared.
  const bool unchanged = existed && StampMatches(path);
  // An empty file (0 bytes) is what SQLite would turn into a new index without a word. Something
  // emptied it (a disk that filled, a truncating copy, a tool): a reader is told, not handed an
  // empty index; a writer starts a new index in it, saying so.
  if (existed && fs::is_regular_file(file) && fs::file_size(path, ec) == 0 && !ec) {
    if (!create) {
      return Status::NotFound(path +
                              " is an empty file (0 bytes), not an index: run `grag index` "
                              "to build one in its place");
    }
    Log(LogLevel::kWarn, "store",
        path + " was an empty file (0 bytes): a new index is built in it");
  }
  if (!existed) {
    if (!create) return Status::NotFound("no index at " + path + " (run `grag index` first)");
    fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) {
      fs::create_directories(parent, ec);
      if (ec) {
        if (ec == std::errc::read_only_file_system || ec == std::errc::permission_denied) {
          return ReadOnlyIndex(path, "cannot create " + parent.string() + ": " + ec.message());
        }
        return Status::IoError("creating " + parent.string() + ": " + ec.message());
      }
    }
  }
  if (!options.read_only) {
    // SQLite would open read-only media for writing and fail at the first write with "attempt
    // to write a readonly database"; say what is going on up front. WAL mode writes two files
    // beside the index, so its folder must be writable too.
    const fs::path parent = fs::path(path).parent_path();
    const std::string dir = parent.empty() ? "." : parent.string();
    std::string why;
    if (fs::exists(file) && access(path.c_str(), W_OK) != 0) {
      why = std::strerror(errno);
    } else if (access(dir.c_str(), W_OK) != 0) {
      why = "its folder " + dir + ": " + std::strerror(errno);
    }
    if (!why.empty()) {
      if (!options.allow_read_only || !fs::exists(file)) return ReadOnlyIndex(path, why);
      Log(LogLevel::kDebug, "store", path + " is read-only (" + why + "): opened for reading");
      options.read_only = true;
    }
  }
  store::FileLock writer_lock;
  if (options.writer_lock && !options.read_only) {
    // Named after the file, not the path it was reached by: two writers through a symlink (to
    // the file or a folder above it) must meet at the same lock.
    fs::path real = fs::weakly_canonical(fs::absolute(path, ec), ec);
    if (ec || real.empty()) real = path;
    GRAG_ASSIGN_OR_RETURN(writer_lock,
                          store::FileLock::Acquire(
                              real.string() + ".lock",
                              "pid " + std::to_string(getpid()) + " (" + options.lock_holder + ")",
                              options.wait_for_writer, options.on_wait));
  }

  const int64_t latest = migrations.back().version;
  const int write_flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
                          (options.create_if_missing ? SQLITE_OPEN_CREATE : 0);
  GRAG_ASSIGN_OR_RETURN(sqlite::Connection conn, options.read_only
                                                     ? OpenForReading(path)
                                                     : sqlite::Connection::Open(path, write_flags));
  if (options.read_only) {
    sqlite3_busy_timeout(conn.get(), options.busy_timeout_ms);
    GRAG_RETURN_IF_ERROR(CheckIsGragIndex(conn, path, latest));
    if (options.verify && !unchanged) GRAG_RETURN_IF_ERROR(QuickCheck(conn, path));
    GRAG_ASSIGN_OR_RETURN(int64_t version, conn.QueryInt("PRAGMA user_version"));
    if (version == 0) return Status::NotFound(path + " holds no index yet (run `grag index`)");
    if (version < latest) {
      return Status::InvalidArgument(
          path + " was written by an older grag (schema " + std::to_string(version) +
          ", this grag uses " + std::to_string(latest) +
          "): run a writing command (grag index) on it once to upgrade it");
    }
    GRAG_RETURN_IF_ERROR(conn.Exec("PRAGMA foreign_keys = ON"));
  } else {
    sqlite3_busy_timeout(conn.get(), options.busy_timeout_ms);
    GRAG_RETURN_IF_ERROR(CheckIsGragIndex(conn, path, latest));
    if (options.verify && existed && !unchanged) {
      GRAG_RETURN_IF_ERROR(QuickCheck(conn, path));
    }
    GRAG_ASSIGN_OR_RETURN(std::string mode, conn.QueryText("PRAGMA journal_mode = WAL"));
    if (mode != "wal") {
      // Some file systems (network mounts) cannot share WAL memory; the index still works,
      // with readers blocking writers.
      Log(LogLevel::kWarn, "store", path + ": WAL mode unavailable, using journal mode " + mode);
    }
    GRAG_RETURN_IF_ERROR(conn.Exec("PRAGMA synchronous = NORMAL"));
    // Statement journals and sorts in memory, not in temporary files: a large transaction (the
    // merge) otherwise writes its savepoints' journals to disk over and over (with 400
    // transcripts, 120 MB of temporary-file writes for a 23 MB index). They hold what one
    // statement or savepoint changed, so memory stays small.
    GRAG_RETURN_IF_ERROR(conn.Exec("PRAGMA temp_store = MEMORY"));
    // A 32 MiB page cache for the writer (SQLite's default is 2 MB): the merge writes the
    // graph in one transaction, and with a small cache its dirty pages were spilled to the WAL
    // and written there again and again (1,669 transcripts, no-LLM: the merge wrote 500 MiB
    // through write() for a graph of about 60, and took 3.7-4.5 s of CPU instead of 3.1). The
    // cache fills only as pages are used; read connections keep the default.
    GRAG_RETURN_IF_ERROR(conn.Exec("PRAGMA cache_size = -32768"));
    GRAG_RETURN_IF_ERROR(Migrate(conn, migrations, path));
  }
  GRAG_ASSIGN_OR_RETURN(int64_t fk, conn.QueryInt("PRAGMA foreign_keys"));
  if (fk != 1) return Status::Internal("this SQLite cannot enforce foreign keys");

  // Readers beside the writer need WAL (in a rollback journal a reader blocks a commit).
  GRAG_ASSIGN_OR_RETURN(std::string journal_mode, conn.QueryText("PRAGMA journal_mode"));
  auto impl = std::make_unique<SqliteStore::Impl>(path, std::move(conn));
  impl->read_only = options.read_only;
  impl->map_reads = options.read_only || options.map_reads;
  impl->pool_enabled = journal_mode == "wal";
  impl->busy_timeout_ms = options.busy_timeout_ms;
  // Checked (or just created) and written only by SQLite from here on: the state at close is
  // as sound as this one.
  impl->stamp.path = path;
  impl->stamp.enabled = options.verify;
  impl->writer_lock = std::move(writer_lock);
  return std::unique_ptr<Store>(std::make_unique<SqliteStore>(std::move(impl)));
}

}  // namespace grag::store
