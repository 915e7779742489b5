// Store: query images (grag/store.h) in table query_images. An image goes in the transaction of
// any change to a table it is made from: by the schema's triggers on chunks and documents
// (schema.cpp, version 6), and by Impl::DropGraphImage from the store's writes of entities,
// relationships and entity-chunk links. Vectors have no image since schema 7: they are read from
// their rows, each kept once (PackRows).
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../query_image.h"
#include "../reply_codec.h"
#include "../vector_codec.h"
#include "grag/log.h"
#include "grag/store.h"
#include "store_impl.h"

namespace grag {

namespace {

constexpr std::string_view kGraphImage = "graph";
constexpr std::string_view kWordsImage = "words";
// The words image lists the terms in at least this many chunks: counting a rarer term's chunks
// walks a short posting list, as cheap as looking it up.
constexpr int64_t kCountedTermMinChunks = 64;

Result<std::string> BuildGraphImage(sqlite::Connection& conn) {
  store::GraphImageBuilder b;
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt s, conn.Prepare("SELECT id, name_key, frequency, degree FROM main.entities"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      b.AddEntity(s.Int(0), s.Text(1), s.Int(2), s.Int(3));
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt s,
        conn.Prepare("SELECT c.id, d.title, c.document_id, c.chunk_index FROM main.chunks c "
                     "JOIN main.documents d ON d.id = c.document_id ORDER BY c.id"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      b.AddChunk(s.Text(0), s.Text(1), s.Text(2), s.Int(3));
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt s,
        conn.Prepare("SELECT id, source_id, target_id, weight, frequency FROM main.relationships"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      b.AddRelationship(s.Int(0), s.Int(1), s.Int(2), s.Double(3), s.Int(4));
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt s,
                          conn.Prepare("SELECT l.entity_id, c.id FROM main.entity_chunks l JOIN "
                                       "main.chunks c ON c.seq = l.chunk_seq"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      b.AddLink(s.Int(0), s.Text(1));
    }
  }
  return b.Finish();
}

// Every term of the chunks' full-text index in at least kCountedTermMinChunks chunks, with its
// count (fts5vocab's row table walks the whole index once).
Result<std::string> BuildWordsImage(sqlite::Connection& conn) {
  // The vocabulary table WordFrequencies (store_docs.cpp) reads too.
  GRAG_RETURN_IF_ERROR(
      conn.Exec("CREATE VIRTUAL TABLE IF NOT EXISTS temp.grag_chunk_terms USING "
                "fts5vocab(main, chunks_fts, row)"));
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt s,
                        conn.Prepare("SELECT term, doc FROM temp.grag_chunk_terms"));
  std::vector<std::pair<std::string, int64_t>> counts;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    if (s.Int(1) >= kCountedTermMinChunks) counts.emplace_back(s.Text(0), s.Int(1));
  }
  return store::EncodeTermCounts(std::move(counts), kCountedTermMinChunks);
}

// The stored id of the named image, 0 when there is none (also where there is no table of
// images: an index opened with an older build's migrations, as tests do).
Result<int64_t> ImageId(sqlite::Connection& conn, std::string_view name) {
  Result<sqlite::Stmt> prepared = conn.Prepare("SELECT id FROM query_images WHERE name = ?");
  if (!prepared.ok()) return int64_t{0};
  GRAG_ASSIGN_OR_RETURN(bool found, prepared->BindAll(name).Step());
  return found ? prepared->Int(0) : int64_t{0};
}

// An image is stored compressed (zlib, reply_codec.h) when that is smaller: the graph image of
// 1,000 densely extracted passages went from 0.91 to 0.25 MB, a sixth of the file, and inflating
// it costs a one-off question about 3 ms. Its own magic tells a plain image. Level 6 packs a
// tenth tighter than level 1 in 5 times the time, a few ms once per index run.
constexpr int kImageLevel = 6;

// A stored image's bytes as an image: inflated into fresh storage when stored compressed.
Result<store::ImageBytes> Inflated(store::ImageBytes stored) {
  const std::optional<size_t> size = store::DecompressedSize(stored.view());
  if (!size) return stored;
  store::ImageBytes out;
  char* at = out.Allocate(*size);
  GRAG_RETURN_IF_ERROR(store::DecompressInto(stored.view(), at));
  return out;
}

// The named image's bytes, inflated; nullopt when there is none.
Result<std::optional<std::string>> ReadImage(sqlite::Connection& conn, std::string_view name) {
  std::optional<std::string> image;
  GRAG_ASSIGN_OR_RETURN(int64_t id, ImageId(conn, name));
  if (id == 0) return image;
  store::ImageBytes bytes;
  GRAG_ASSIGN_OR_RETURN(bool found, conn.ReadBlob("query_images", "data", id, [&](size_t size) {
    return bytes.Allocate(size);
  }));
  if (!found) return image;
  GRAG_ASSIGN_OR_RETURN(store::ImageBytes inflated, Inflated(std::move(bytes)));
  image = std::string(inflated.view());
  return image;
}

// The cached decoded image `name` if its stored id is still `*id`, else the stored one decoded
// (and cached); null when there is none or it does not decode.
template <typename Image>
Result<std::shared_ptr<const Image>> Cached(SqliteStore::Impl& impl, sqlite::Connection& conn,
                                            std::string_view name, int64_t* cached_id,
                                            std::shared_ptr<const Image>* cached) {
  GRAG_ASSIGN_OR_RETURN(int64_t id, ImageId(conn, name));
  if (id == 0) return std::shared_ptr<const Image>();
  {
    std::lock_guard lock(impl.image_mu);
    if (*cached_id == id) return *cached;
  }
  // By row id, so the bytes are the id's even if the image has been built again since; into
  // storage the decoded image keeps (not zeroed first: the blob overwrites every byte).
  store::ImageBytes bytes;
  GRAG_ASSIGN_OR_RETURN(bool found, conn.ReadBlob("query_images", "data", id, [&](size_t size) {
    return bytes.Allocate(size);
  }));
  if (!found) return std::shared_ptr<const Image>();  // dropped since
  Result<store::ImageBytes> inflated = Inflated(std::move(bytes));
  Result<std::unique_ptr<Image>> decoded = inflated.ok()
                                               ? Image::Decode(std::move(inflated).value())
                                               : Result<std::unique_ptr<Image>>(inflated.status());
  std::shared_ptr<const Image> image;
  if (decoded.ok()) {
    image = std::move(decoded).value();
  } else if (decoded.status().code() == ErrorCode::kNotFound) {
    // An older build's image: read the tables until the next index run replaces it.
    Log(LogLevel::kDebug, "store",
        "query image " + std::string(name) + ": " + decoded.status().message());
  } else {
    Log(LogLevel::kWarn, "store",
        "query image " + std::string(name) + ": " + decoded.status().message() +
            "; reading the tables instead (`grag check` tells more)");
  }
  std::lock_guard lock(impl.image_mu);
  *cached_id = id;
  *cached = image;
  return image;
}

// A kind's vectors read from their rows, decoded from their stored encoding. The arrays are
// sized once from a count of the rows: grown row by row, the values array of 3,431 entity
// vectors was copied into a fresh mapping at each doubling, a sixth of a one-off search's time.
Result<PackedEmbeddings> PackRows(sqlite::Connection& conn, EmbeddingOwner owner) {
  const std::string kind(EmbeddingOwnerName(owner));
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt count,
                        conn.Prepare("SELECT count(*), max(dimension) FROM main.embeddings "
                                     "WHERE owner_kind = ?"));
  GRAG_ASSIGN_OR_RETURN(bool counted, count.BindAll(kind).Step());
  const int64_t rows = counted ? count.Int(0) : 0;
  const int64_t widest = counted ? count.Int(1) : 0;
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        conn.Prepare("SELECT owner_id, model, vector, encoding, dimension FROM "
                                     "main.embeddings WHERE owner_kind = ? ORDER BY owner_id"));
  stmt.BindAll(kind);
  PackedEmbeddings packed;
  packed.ids.reserve(static_cast<size_t>(rows));
  packed.values.reserve(static_cast<size_t>(rows) * static_cast<size_t>(widest));
  std::string_view encoding_name;
  VectorEncoding encoding = VectorEncoding::kF32;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    const int64_t dim = stmt.Int(4);
    if (packed.ids.empty()) {
      packed.model = stmt.Text(1);
      packed.dimension = dim;
    } else if (dim != packed.dimension || stmt.TextView(1) != packed.model) {
      return Status::Corruption(
          kind + " embeddings disagree: " + packed.ids.front() + " has model '" + packed.model +
          "' and dimension " + std::to_string(packed.dimension) + ", " + stmt.Text(0) +
          " has model '" + stmt.Text(1) + "' and dimension " + std::to_string(dim));
    }
    if (packed.ids.empty() || stmt.TextView(3) != encoding_name) {
      const std::optional<VectorEncoding> parsed = ParseVectorEncoding(stmt.Text(3));
      if (!parsed) {
        return Status::Corruption("the embedding of " + kind + " " + stmt.Text(0) +
                                  " has an unknown encoding '" + stmt.Text(3) + "'");
      }
      encoding = *parsed;
      encoding_name = VectorEncodingName(encoding);
    }
    packed.ids.push_back(stmt.Text(0));
    const size_t at = packed.values.size();
    packed.values.resize(at + static_cast<size_t>(dim));
    Status decoded =
        store::DecodeVector(stmt.Blob(2), encoding,
                            std::span<float>(packed.values.data() + at, static_cast<size_t>(dim)));
    if (!decoded.ok())
      return decoded.WithContext("the embedding of " + kind + " " + packed.ids.back());
  }
  return packed;
}

}  // namespace

Status SqliteStore::Impl::DropGraphImage() {
  if (open_transactions() == 0)
    return Status::Internal("dropping the graph image outside a transaction");
  if (graph_image_dropped) return Status::Ok();
  Result<sqlite::Stmt> drop = conn.Prepare("DELETE FROM query_images WHERE name = 'graph'");
  // No table of images (an index opened with an older build's migrations): nothing to drop.
  if (drop.ok()) GRAG_RETURN_IF_ERROR(drop->Run());
  graph_image_dropped = true;
  return Status::Ok();
}

Result<std::vector<std::string>> SqliteStore::RefreshQueryImages() {
  std::vector<std::string> built;
  if (impl_->read_only) return built;
  GRAG_ASSIGN_OR_RETURN(Transaction tx, impl_->Begin(true));
  sqlite::Connection& conn = impl_->conn;
  auto keep = [&](const std::string& name, const std::string& data) -> Status {
    if (data.size() > kMaxQueryImageBytes) {
      Log(LogLevel::kInfo, "store",
          "query image " + name + " not kept: " + std::to_string(data.size() >> 20) +
              " MiB is over the " + std::to_string(kMaxQueryImageBytes >> 20) + " MiB limit");
      return Status::Ok();
    }
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt put,
                          conn.Prepare("INSERT INTO query_images (name, data) VALUES (?, ?)"));
    put.Bind(1, name);
    const std::optional<std::string> packed = store::CompressReply(data, kImageLevel);
    const std::string& stored = packed ? *packed : data;
    put.BindBlob(2, stored.data(), stored.size());
    GRAG_RETURN_IF_ERROR(put.Run());
    built.push_back(name);
    return Status::Ok();
  };
  GRAG_ASSIGN_OR_RETURN(int64_t graph, ImageId(conn, kGraphImage));
  if (graph != 0) {
    // An older build's layout is replaced.
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt head,
                          conn.Prepare("SELECT substr(data, 1, 4) FROM query_images WHERE id = ?"));
    GRAG_ASSIGN_OR_RETURN(bool found, head.BindAll(graph).Step());
    if (found && store::IsOlderGraphImage(head.Blob(0))) {
      GRAG_ASSIGN_OR_RETURN(sqlite::Stmt drop,
                            conn.Prepare("DELETE FROM query_images WHERE id = ?"));
      GRAG_RETURN_IF_ERROR(drop.BindAll(graph).Run());
      graph = 0;
    }
  }
  if (graph == 0) {
    GRAG_ASSIGN_OR_RETURN(std::string data, BuildGraphImage(conn));
    GRAG_RETURN_IF_ERROR(keep(std::string(kGraphImage), data));
  }
  GRAG_ASSIGN_OR_RETURN(int64_t words, ImageId(conn, kWordsImage));
  if (words == 0) {
    GRAG_ASSIGN_OR_RETURN(std::string data, BuildWordsImage(conn));
    GRAG_RETURN_IF_ERROR(keep(std::string(kWordsImage), data));
  }
  GRAG_RETURN_IF_ERROR(tx.Commit());
  std::sort(built.begin(), built.end());
  return built;
}

Result<PackedEmbeddings> SqliteStore::ListPackedEmbeddings(EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  return PackRows(read.conn(), owner);
}

Status SqliteStore::WarmGraphImage() {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  return store::CachedGraphImage(*impl_, read.conn()).status();
}

Result<GraphSnapshot> SqliteStore::LoadGraphNeighbourhood(const std::vector<int64_t>& entity_ids,
                                                          const std::vector<std::string>& chunk_ids,
                                                          const NeighbourhoodLimits& limits) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  GRAG_ASSIGN_OR_RETURN(std::shared_ptr<const store::GraphImage> image,
                        store::CachedGraphImage(*impl_, read.conn()));
  if (image) return image->Walk(entity_ids, chunk_ids, limits);
  return store::LoadNeighbourhoodFromTables(read.conn(), entity_ids, chunk_ids, limits);
}

Result<std::shared_ptr<const store::GraphImage>> store::CachedGraphImage(SqliteStore::Impl& impl,
                                                                         sqlite::Connection& conn) {
  return Cached<GraphImage>(impl, conn, kGraphImage, &impl.graph_image_id, &impl.graph_image);
}

Result<std::shared_ptr<const store::TermCounts>> store::CachedWordsImage(SqliteStore::Impl& impl,
                                                                         sqlite::Connection& conn) {
  return Cached<TermCounts>(impl, conn, kWordsImage, &impl.words_image_id, &impl.words_image);
}

Result<std::vector<std::string>> store::ListQueryImages(sqlite::Connection& conn) {
  std::vector<std::string> names;
  // An index opened with an older build's migrations (tests do) has no such table.
  GRAG_ASSIGN_OR_RETURN(
      int64_t exists,
      conn.QueryInt("SELECT count(*) FROM sqlite_master WHERE name = 'query_images'"));
  if (exists == 0) return names;
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        conn.Prepare("SELECT name FROM query_images ORDER BY name"));
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    names.push_back(stmt.Text(0));
  }
  return names;
}

Result<std::vector<std::string>> store::CheckQueryImages(sqlite::Connection& conn) {
  std::vector<std::string> problems;
  GRAG_ASSIGN_OR_RETURN(std::vector<std::string> names, ListQueryImages(conn));
  for (const std::string& name : names) {
    Result<std::optional<std::string>> stored = ReadImage(conn, name);
    if (!stored.ok() && stored.status().code() == ErrorCode::kCorruption) {
      problems.push_back("query image " + name + " differs from its tables (" +
                         stored.status().message() + "; delete it: `grag index` builds it again)");
      continue;
    }
    GRAG_RETURN_IF_ERROR(stored.status());
    if (!stored->has_value()) continue;
    Result<std::string> fresh = Status::NotFound("an image of an unknown kind");
    if (name == kGraphImage) {
      // An older build's layout is not damage: the next index run replaces it.
      if (store::IsOlderGraphImage(**stored)) continue;
      fresh = BuildGraphImage(conn);
    } else if (name == kWordsImage) {
      fresh = BuildWordsImage(conn);
    }
    if (!fresh.ok()) {
      problems.push_back("query image " + name + ": " + fresh.status().message());
    } else if (*fresh != **stored) {
      problems.push_back("query image " + name +
                         " differs from its tables (delete it: `grag index` builds it again)");
    }
  }
  return problems;
}

}  // namespace grag
