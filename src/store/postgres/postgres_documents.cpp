// PostgresStore: documents, chunks (their text search) and extraction results.
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

namespace {

// FTS5's BM25 parameters and IDF, so that scores read as the SQLite store's do.
constexpr double kK1 = 1.2;
constexpr double kB = 0.75;
double Idf(double n, double df) {
  const double idf = std::log((n - df + 0.5) / (df + 0.5));
  return idf <= 0 ? 1e-6 : idf;
}

}  // namespace

// ---------------------------------------------------------------- documents

Result<DocumentChange> PostgresStore::UpsertDocument(const Document& doc) {
  if (doc.id.empty()) return Status::InvalidArgument("a document needs an id");
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_ASSIGN_OR_RETURN(Rows found,
                        conn_.Query("SELECT content_hash FROM documents WHERE id = $1", {doc.id}));
  DocumentChange change = DocumentChange::kAdded;
  if (!found.empty()) {
    change = found.View(0, 0) == doc.content_hash ? DocumentChange::kUnchanged
                                                  : DocumentChange::kChanged;
  }
  Status st;
  if (change == DocumentChange::kAdded) {
    st = conn_.Exec(
        "INSERT INTO documents (id, title, source_path, content_hash, text) "
        "VALUES ($1, $2, $3, $4, $5)",
        {doc.id, doc.title, doc.source_path, doc.content_hash, doc.text});
  } else if (change == DocumentChange::kChanged) {
    st = conn_.Exec(
        "UPDATE documents SET title = $2, source_path = $3, content_hash = $4, text = $5, "
        "updated_at = grag_now() WHERE id = $1",
        {doc.id, doc.title, doc.source_path, doc.content_hash, doc.text});
  } else {
    st = conn_.Exec(
        "UPDATE documents SET title = $2, source_path = $3, updated_at = grag_now() "
        "WHERE id = $1 AND (title IS DISTINCT FROM $2 OR source_path IS DISTINCT FROM $3)",
        {doc.id, doc.title, doc.source_path});
  }
  if (!st.ok()) return st.WithContext("storing document " + doc.id);
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return change;
}

Result<std::optional<Document>> PostgresStore::GetDocument(std::string_view id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query(
          "SELECT id, title, source_path, text, content_hash FROM documents WHERE id = $1", {id}));
  if (rows.empty()) return std::optional<Document>();
  Document doc;
  doc.id = rows.Text(0, 0);
  doc.title = rows.Text(0, 1);
  doc.source_path = rows.Text(0, 2);
  doc.text = rows.Text(0, 3);
  doc.content_hash = rows.Text(0, 4);
  return std::optional<Document>(std::move(doc));
}

Result<std::vector<DocumentInfo>> PostgresStore::ListDocuments() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query("SELECT d.id, d.title, d.source_path, d.content_hash, "
                                   "(SELECT count(*) FROM chunks c WHERE c.document_id = d.id), "
                                   "d.created_at, d.updated_at FROM documents d ORDER BY d.id"));
  std::vector<DocumentInfo> out(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i) {
    DocumentInfo& info = out[static_cast<size_t>(i)];
    info.id = rows.Text(i, 0);
    info.title = rows.Text(i, 1);
    info.source_path = rows.Text(i, 2);
    info.content_hash = rows.Text(i, 3);
    info.chunk_count = rows.Int(i, 4);
    info.created_at = rows.Text(i, 5);
    info.updated_at = rows.Text(i, 6);
  }
  return out;
}

Result<bool> PostgresStore::DeleteDocument(std::string_view id) {
  GRAG_ASSIGN_OR_RETURN(Rows rows, Write("DELETE FROM documents WHERE id = $1", {id}));
  return rows.Affected() > 0;
}

// ---------------------------------------------------------------- chunks

constexpr std::string_view kChunkColumns =
    "id, document_id, chunk_index, text, n_tokens, start_token, start_byte, end_byte";

ChunkRecord ReadChunk(const Rows& rows, int i) {
  ChunkRecord c;
  c.id = rows.Text(i, 0);
  c.document_id = rows.Text(i, 1);
  c.index = rows.Int(i, 2);
  c.text = rows.Text(i, 3);
  c.n_tokens = rows.Int(i, 4);
  c.start_token = rows.Int(i, 5);
  c.start_byte = rows.Int(i, 6);
  c.end_byte = rows.Int(i, 7);
  return c;
}
Result<ChunkChanges> PostgresStore::ReplaceDocumentChunks(std::string_view document_id,
                                                          const std::vector<ChunkRecord>& chunks) {
  std::unordered_set<std::string_view> new_ids;
  std::unordered_set<int64_t> new_indexes;
  const std::string doc_id(document_id);
  for (const ChunkRecord& c : chunks) {
    if (c.document_id != document_id) {
      return Status::InvalidArgument("chunk " + c.id + " belongs to document " + c.document_id +
                                     ", not " + doc_id);
    }
    if (c.id.empty()) return Status::InvalidArgument("a chunk needs an id");
    if (!new_ids.insert(c.id).second) {
      return Status::InvalidArgument("chunk id " + c.id + " appears twice in document " + doc_id);
    }
    if (c.index < 0 || !new_indexes.insert(c.index).second) {
      return Status::InvalidArgument("chunk index " + std::to_string(c.index) +
                                     " is negative or repeated in document " + doc_id);
    }
  }
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  {
    GRAG_ASSIGN_OR_RETURN(Rows doc, conn_.Query("SELECT 1 FROM documents WHERE id = $1", {doc_id}));
    if (doc.empty()) return Status::NotFound("no document " + doc_id);
  }
  GRAG_ASSIGN_OR_RETURN(Rows existing,
                        conn_.Query("SELECT id FROM chunks WHERE document_id = $1", {doc_id}));
  ChunkChanges changes;
  for (int i = 0; i < existing.size(); ++i) {
    const std::string id = existing.Text(i, 0);
    if (new_ids.count(id) != 0) {
      ++changes.kept;
      continue;
    }
    GRAG_RETURN_IF_ERROR(conn_.Exec("DELETE FROM chunks WHERE id = $1", {id}));
    ++changes.removed;
  }
  changes.added = static_cast<int64_t>(chunks.size()) - changes.kept;
  // Kept chunks may move: park their indexes out of the way of UNIQUE(document_id, chunk_index).
  GRAG_RETURN_IF_ERROR(conn_.Exec(
      "UPDATE chunks SET chunk_index = -1 - chunk_index WHERE document_id = $1", {doc_id}));
  constexpr std::string_view kUpsert =
      "INSERT INTO chunks (id, document_id, chunk_index, text, n_tokens, start_token, "
      "start_byte, end_byte) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO UPDATE "
      "SET chunk_index = excluded.chunk_index, n_tokens = excluded.n_tokens, "
      "start_token = excluded.start_token, start_byte = excluded.start_byte, "
      "end_byte = excluded.end_byte WHERE chunks.document_id = excluded.document_id "
      "AND chunks.text = excluded.text";
  for (const ChunkRecord& c : chunks) {
    const Args args = {c.id,       c.document_id, c.index,      c.text,
                       c.n_tokens, c.start_token, c.start_byte, c.end_byte};
    Result<int64_t> n = conn_.Changes(kUpsert, args);
    if (!n.ok()) return n.status().WithContext("storing chunk " + c.id);
    if (*n > 0) continue;
    GRAG_ASSIGN_OR_RETURN(Rows owner,
                          conn_.Query("SELECT document_id FROM chunks WHERE id = $1", {c.id}));
    const std::string owner_doc = owner.empty() ? std::string() : owner.Text(0, 0);
    if (owner_doc != c.document_id) {
      return Status::InvalidArgument("chunk id " + c.id + " already belongs to document " +
                                     owner_doc);
    }
    // Same id, new text: treat it as a new chunk so stale extraction results go.
    GRAG_RETURN_IF_ERROR(conn_.Exec("DELETE FROM chunks WHERE id = $1", {c.id}));
    GRAG_RETURN_IF_ERROR(conn_.Exec(kUpsert, args));
    --changes.kept;
    ++changes.added;
    ++changes.removed;
  }
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return changes;
}

Result<std::optional<ChunkRecord>> PostgresStore::GetChunk(std::string_view id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query(
                     "SELECT " + std::string(kChunkColumns) + " FROM chunks WHERE id = $1", {id}));
  if (rows.empty()) return std::optional<ChunkRecord>();
  return std::optional<ChunkRecord>(ReadChunk(rows, 0));
}

Result<std::vector<ChunkRecord>> PostgresStore::ListChunks(std::string_view document_id) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(Rows rows, read.conn().Query("SELECT " + std::string(kChunkColumns) +
                                                         " FROM chunks WHERE document_id = $1 "
                                                         "ORDER BY chunk_index",
                                                     {document_id}));
  std::vector<ChunkRecord> out;
  for (int i = 0; i < rows.size(); ++i) out.push_back(ReadChunk(rows, i));
  return out;
}

Result<std::vector<std::string>> PostgresStore::ListChunkIds() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query("SELECT id FROM chunks ORDER BY document_id, chunk_index"));
  return TextColumn(rows);
}

Result<int64_t> PostgresStore::CountChunks() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  return read.conn().QueryInt("SELECT count(*) FROM chunks");
}

Result<int64_t> PostgresStore::CountEntities() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  return read.conn().QueryInt("SELECT count(*) FROM entities");
}

Result<std::vector<ChunkHit>> PostgresStore::SearchChunks(std::string_view query, int k) {
  std::vector<ChunkHit> out;
  const std::vector<std::string> words = QueryWords(query, 128);
  if (words.empty() || k <= 0) return out;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  // Each word as a phrase of its terms (a word the parser splits, "marley—dead", is a phrase as
  // FTS5 reads a quoted string) and the chunks holding it: GIN look-ups.
  GRAG_ASSIGN_OR_RETURN(
      Rows per_word,
      read.conn().Query(
          "SELECT u.i, phraseto_tsquery('grag_text', u.x)::text, "
          "(SELECT count(*) FROM chunks WHERE tsv @@ phraseto_tsquery('grag_text', u.x)) "
          "FROM unnest($1::text[]) WITH ORDINALITY AS u(x, i) ORDER BY u.i",
          {pq::TextArray(words)}));
  GRAG_ASSIGN_OR_RETURN(
      Rows corpus, read.conn().Query("SELECT count(*), coalesce(avg(n_terms), 0) FROM chunks"));
  const double n = corpus.Double(0, 0);
  const double avgdl = std::max(1.0, corpus.Double(0, 1));
  struct Word {
    std::string text;
    std::string tsquery;
    double df;
  };
  std::vector<Word> present;
  std::vector<Word> kept;
  for (int i = 0; i < per_word.size(); ++i) {
    Word w{words[static_cast<size_t>(per_word.Int(i, 0) - 1)], per_word.Text(i, 1),
           per_word.Double(i, 2)};
    if (w.df <= 0 || w.tsquery.empty()) continue;
    present.push_back(w);
    if (2 * w.df <= n) kept.push_back(std::move(w));
  }
  // Words in more than half the chunks weigh about nothing yet match nearly every chunk: left
  // out, as the SQLite store does, unless they are all there is in a small index (or the query
  // is one word).
  if (words.size() == 1 || (kept.empty() && n < 20)) kept = present;
  if (kept.empty()) return out;
  std::string match;
  std::vector<std::string> kept_words;
  std::vector<std::string> idfs;
  for (const Word& w : kept) {
    if (!match.empty()) match += " | ";
    match += "(" + w.tsquery + ")";
    kept_words.push_back(w.text);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", Idf(n, w.df));
    idfs.emplace_back(buf);
  }
  // BM25 with FTS5's parameters: each word's IDF spread over its terms, term frequencies from
  // the tsvector's positions, the document length from n_terms.
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query(
          "WITH w AS (SELECT l AS lex, u.idf / greatest(1, cardinality(tsvector_to_array("
          "to_tsvector('grag_text', u.x)))) AS wt FROM unnest($2::text[], $3::float8[]) AS "
          "u(x, idf), unnest(tsvector_to_array(to_tsvector('grag_text', u.x))) AS l) "
          "SELECT c.id, c.document_id, c.chunk_index, s.score FROM chunks c, LATERAL ("
          "SELECT coalesce(sum(w.wt * t.tf * ($6::float8 + 1) / (t.tf + $6::float8 * (1 - "
          "$7::float8 + $7::float8 * c.n_terms / "
          "$4::float8))), 0) AS score FROM (SELECT e.lexeme, coalesce(array_length(e.positions, "
          "1), 1) AS tf FROM unnest(c.tsv) AS e) t JOIN w ON w.lex = t.lexeme) s "
          "WHERE c.tsv @@ $1::tsquery ORDER BY s.score DESC, c.id LIMIT $5",
          {match, pq::TextArray(kept_words), pq::TextArray(idfs), avgdl, int64_t{k}, kK1, kB}));
  for (int i = 0; i < rows.size(); ++i) {
    ChunkHit& hit = out.emplace_back();
    hit.chunk_id = rows.Text(i, 0);
    hit.document_id = rows.Text(i, 1);
    hit.index = rows.Int(i, 2);
    hit.score = rows.Double(i, 3);
  }
  return out;
}

Result<std::vector<double>> PostgresStore::RankTexts(const std::vector<std::string>& texts,
                                                     std::string_view query) {
  std::vector<double> scores(texts.size(), 0.0);
  const std::vector<std::string> words = QueryWords(query, 128);
  if (words.empty() || texts.empty()) return scores;
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  // Per text its length, and per (text, word term) the term's frequency; BM25 here, with the
  // IDF over these texts.
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query(
          "WITH t AS (SELECT u.i, to_tsvector('grag_text', u.x) AS v FROM unnest($1::text[]) "
          "WITH ORDINALITY AS u(x, i)), "
          "w AS (SELECT u.j, l AS lex, 1.0 / greatest(1, cardinality(tsvector_to_array("
          "to_tsvector('grag_text', u.x)))) AS wt FROM unnest($2::text[]) WITH ORDINALITY AS "
          "u(x, j), unnest(tsvector_to_array(to_tsvector('grag_text', u.x))) AS l), "
          "d AS (SELECT t.i, (SELECT coalesce(sum(coalesce(array_length(e.positions, 1), 1)), 0) "
          "FROM unnest(t.v) AS e) AS dl FROM t), "
          "m AS (SELECT t.i, w.j, w.wt, coalesce(array_length(e.positions, 1), 1) AS tf "
          "FROM t, unnest(t.v) AS e, w WHERE w.lex = e.lexeme) "
          "SELECT d.i, d.dl, m.j, m.wt, m.tf FROM d LEFT JOIN m ON m.i = d.i ORDER BY d.i",
          {pq::TextArray(texts), pq::TextArray(words)}));
  const size_t n = texts.size();
  std::vector<double> dl(n, 0);
  struct Hit {
    size_t text;
    int64_t word;
    double wt;
    double tf;
  };
  std::vector<Hit> hits;
  std::map<int64_t, std::unordered_set<size_t>> texts_of_word;
  for (int r = 0; r < rows.size(); ++r) {
    const int64_t i = rows.Int(r, 0) - 1;
    if (i < 0 || static_cast<size_t>(i) >= n) continue;
    dl[static_cast<size_t>(i)] = rows.Double(r, 1);
    if (rows.IsNull(r, 2)) continue;
    hits.push_back({static_cast<size_t>(i), rows.Int(r, 2), rows.Double(r, 3), rows.Double(r, 4)});
    texts_of_word[rows.Int(r, 2)].insert(static_cast<size_t>(i));
  }
  double avgdl = 0;
  for (double d : dl) avgdl += d;
  avgdl = std::max(1.0, avgdl / static_cast<double>(n));
  for (const Hit& h : hits) {
    const double idf =
        Idf(static_cast<double>(n), static_cast<double>(texts_of_word[h.word].size()));
    scores[h.text] +=
        idf * h.wt * h.tf * (kK1 + 1) / (h.tf + kK1 * (1 - kB + kB * dl[h.text] / avgdl));
  }
  for (double& s : scores) s = std::max(0.0, s);
  return scores;
}

// ---------------------------------------------------------------- extraction results

Status PostgresStore::PutExtraction(const ExtractionRecord& r) {
  if (r.extractor.model.empty()) {
    return Status::InvalidArgument("an extraction result needs the extractor's model name");
  }
  GRAG_ASSIGN_OR_RETURN(Transaction tx, BeginTx(true));
  GRAG_ASSIGN_OR_RETURN(Rows chunk,
                        conn_.Query("SELECT 1 FROM chunks WHERE id = $1", {r.chunk_id}));
  if (chunk.empty()) {
    return Status::InvalidArgument("no chunk " + r.chunk_id + " to store an extraction for");
  }
  const std::string_view kind = ExtractorKindName(r.extractor.kind);
  GRAG_RETURN_IF_ERROR(
      conn_.Exec("DELETE FROM extractions WHERE chunk_id = $1 AND extractor = $2 AND model = $3",
                 {r.chunk_id, kind, r.extractor.model}));
  GRAG_ASSIGN_OR_RETURN(
      const int64_t extraction_id,
      conn_.QueryInt("INSERT INTO extractions (id, chunk_id, extractor, model, status, reason, "
                     "gleaning_rounds, params_hash) VALUES ((SELECT coalesce(max(id), 0) + 1 FROM "
                     "extractions), $1, $2, $3, $4, $5, $6, $7) RETURNING id",
                     {r.chunk_id, kind, r.extractor.model, ExtractionStatusName(r.status), r.reason,
                      r.gleaning_rounds, r.params_hash}));
  if (!r.entities.empty()) {
    std::vector<std::string> name, key, type, desc;
    for (const EntityMention& m : r.entities) {
      name.push_back(m.name);
      key.push_back(m.name_key);
      type.push_back(m.type);
      desc.push_back(m.description);
    }
    GRAG_RETURN_IF_ERROR(conn_.Exec(
        "INSERT INTO entity_mentions (extraction_id, name, name_key, type, description) "
        "SELECT $1::bigint, a, b, c, d FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) "
        "WITH ORDINALITY AS u(a, b, c, d, o) ORDER BY o",
        {extraction_id, pq::TextArray(name), pq::TextArray(key), pq::TextArray(type),
         pq::TextArray(desc)}));
  }
  if (!r.relationships.empty()) {
    std::vector<std::string> src, tgt, skey, tkey, desc, strength;
    for (const RelationshipMention& m : r.relationships) {
      src.push_back(m.source);
      tgt.push_back(m.target);
      skey.push_back(m.source_key);
      tkey.push_back(m.target_key);
      desc.push_back(m.description);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", m.strength);
      strength.emplace_back(buf);
    }
    GRAG_RETURN_IF_ERROR(conn_.Exec(
        "INSERT INTO relationship_mentions (extraction_id, source, target, source_key, "
        "target_key, description, strength) SELECT $1::bigint, a, b, c, d, e, f FROM "
        "unnest($2::text[], "
        "$3::text[], $4::text[], $5::text[], $6::text[], $7::float8[]) WITH ORDINALITY AS "
        "u(a, b, c, d, e, f, o) ORDER BY o",
        {extraction_id, pq::TextArray(src), pq::TextArray(tgt), pq::TextArray(skey),
         pq::TextArray(tkey), pq::TextArray(desc), pq::TextArray(strength)}));
  }
  return tx.Commit();
}

Result<std::optional<ExtractionRecord>> PostgresStore::GetExtraction(std::string_view chunk_id,
                                                                     const ExtractorId& extractor) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  GRAG_ASSIGN_OR_RETURN(
      Rows head,
      read.conn().Query("SELECT id, status, reason, gleaning_rounds, params_hash, created_at "
                        "FROM extractions WHERE chunk_id = $1 AND extractor = $2 AND model = $3",
                        {chunk_id, ExtractorKindName(extractor.kind), extractor.model}));
  if (head.empty()) return std::optional<ExtractionRecord>();
  ExtractionRecord r;
  const int64_t id = head.Int(0, 0);
  r.chunk_id = std::string(chunk_id);
  r.extractor = extractor;
  r.status = ParseExtractionStatus(head.View(0, 1));
  r.reason = head.Text(0, 2);
  r.gleaning_rounds = head.Int(0, 3);
  r.params_hash = head.Text(0, 4);
  r.created_at = head.Text(0, 5);
  GRAG_ASSIGN_OR_RETURN(Rows ents,
                        read.conn().Query("SELECT name, name_key, type, description FROM "
                                          "entity_mentions WHERE extraction_id = $1 ORDER BY id",
                                          {id}));
  for (int i = 0; i < ents.size(); ++i) {
    r.entities.push_back({ents.Text(i, 0), ents.Text(i, 1), ents.Text(i, 2), ents.Text(i, 3)});
  }
  GRAG_ASSIGN_OR_RETURN(
      Rows rels, read.conn().Query("SELECT source, target, source_key, target_key, description, "
                                   "strength FROM relationship_mentions WHERE extraction_id = $1 "
                                   "ORDER BY id",
                                   {id}));
  for (int i = 0; i < rels.size(); ++i) {
    r.relationships.push_back({rels.Text(i, 0), rels.Text(i, 1), rels.Text(i, 2), rels.Text(i, 3),
                               rels.Text(i, 4), rels.Double(i, 5)});
  }
  return std::optional<ExtractionRecord>(std::move(r));
}

Result<std::vector<std::string>> PostgresStore::ChunksNeedingExtraction(
    const ExtractorId& extractor) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows, read.conn().Query("SELECT c.id FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM "
                                   "extractions e WHERE e.chunk_id = c.id AND e.extractor = $1 AND "
                                   "e.model = $2 AND e.status = 'ok') ORDER BY c.document_id, "
                                   "c.chunk_index",
                                   {ExtractorKindName(extractor.kind), extractor.model}));
  return TextColumn(rows);
}

Result<std::vector<ChunkEntityMention>> PostgresStore::ListEntityMentions(
    const ExtractorId& extractor) {
  std::vector<ChunkEntityMention> out;
  GRAG_RETURN_IF_ERROR(ScanEntityMentions(extractor, [&](const ChunkEntityMention& m) {
    out.push_back(m);
    return Status::Ok();
  }));
  return out;
}

Result<std::vector<ChunkRelationshipMention>> PostgresStore::ListRelationshipMentions(
    const ExtractorId& extractor) {
  std::vector<ChunkRelationshipMention> out;
  GRAG_RETURN_IF_ERROR(ScanRelationshipMentions(extractor, [&](const ChunkRelationshipMention& m) {
    out.push_back(m);
    return Status::Ok();
  }));
  return out;
}

Result<std::string> PostgresStore::ExtractionsDigest(const ExtractorId& extractor) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  GRAG_ASSIGN_OR_RETURN(
      Rows rows,
      read.conn().Query("SELECT e.id, e.chunk_id, e.created_at FROM extractions e JOIN chunks c "
                        "ON c.id = e.chunk_id WHERE e.extractor = $1 AND e.model = $2 AND "
                        "e.status = 'ok' ORDER BY c.document_id, c.chunk_index",
                        {ExtractorKindName(extractor.kind), extractor.model}));
  Hasher h;
  for (int i = 0; i < rows.size(); ++i) {
    h.Add(rows.Text(i, 0)).Add("\t").Add(rows.Text(i, 1)).Add("\t").Add(rows.Text(i, 2)).Add("\n");
  }
  return h.HexDigest();
}

namespace {

// Runs `select` through a cursor in one snapshot, a batch of rows at a time, so that a large
// result is never held whole in memory; `row_fn` gets each batch and a row of it.
Status ScanCursor(ReadHandle& read, const std::string& select, const Args& args,
                  const std::function<Status(const Rows& rows, int row)>& row_fn) {
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  pq::Connection& conn = read.conn();
  GRAG_RETURN_IF_ERROR(conn.Exec("DECLARE grag_scan NO SCROLL CURSOR FOR " + select, args));
  Status st = Status::Ok();
  while (st.ok()) {
    Result<Rows> rows = conn.Query("FETCH 2000 FROM grag_scan");
    if (!rows.ok()) {
      st = rows.status();
      break;
    }
    if (rows->empty()) break;
    for (int i = 0; i < rows->size() && st.ok(); ++i) st = row_fn(*rows, i);
  }
  Status closed = conn.Exec("CLOSE grag_scan");
  return st.ok() ? closed : st;
}

}  // namespace

Status PostgresStore::ScanEntityMentions(
    const ExtractorId& extractor,
    const std::function<Status(const ChunkEntityMention& mention)>& fn) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  ChunkEntityMention m;
  return ScanCursor(
      read,
      "SELECT e.chunk_id, m.name, m.name_key, m.type, m.description FROM entity_mentions m JOIN "
      "extractions e ON e.id = m.extraction_id JOIN chunks c ON c.id = e.chunk_id WHERE "
      "e.extractor = $1 AND e.model = $2 AND e.status = 'ok' ORDER BY c.document_id, "
      "c.chunk_index, m.id",
      {ExtractorKindName(extractor.kind), extractor.model}, [&](const Rows& rows, int i) {
        m.chunk_id = rows.Text(i, 0);
        m.mention.name = rows.Text(i, 1);
        m.mention.name_key = rows.Text(i, 2);
        m.mention.type = rows.Text(i, 3);
        m.mention.description = rows.Text(i, 4);
        return fn(m);
      });
}

Status PostgresStore::ScanRelationshipMentions(
    const ExtractorId& extractor,
    const std::function<Status(const ChunkRelationshipMention& mention)>& fn) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, Read());
  ChunkRelationshipMention m;
  return ScanCursor(
      read,
      "SELECT e.chunk_id, m.source, m.target, m.source_key, m.target_key, m.description, "
      "m.strength FROM relationship_mentions m JOIN extractions e ON e.id = m.extraction_id JOIN "
      "chunks c ON c.id = e.chunk_id WHERE e.extractor = $1 AND e.model = $2 AND e.status = 'ok' "
      "ORDER BY c.document_id, c.chunk_index, m.id",
      {ExtractorKindName(extractor.kind), extractor.model}, [&](const Rows& rows, int i) {
        m.chunk_id = rows.Text(i, 0);
        m.mention.source = rows.Text(i, 1);
        m.mention.target = rows.Text(i, 2);
        m.mention.source_key = rows.Text(i, 3);
        m.mention.target_key = rows.Text(i, 4);
        m.mention.description = rows.Text(i, 5);
        m.mention.strength = rows.Double(i, 6);
        return fn(m);
      });
}

}  // namespace grag::store::postgres_internal
