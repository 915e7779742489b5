// Store: query images (grag/store.h) in table query_images; the schema's triggers drop an image
// when a table it is made from changes (schema.cpp, version 6).
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../query_image.h"
#include "grag/log.h"
#include "grag/store.h"
#include "names.h"
#include "store_impl.h"

namespace grag {

namespace {

constexpr std::string_view kGraphImage = "graph";

std::string VectorsImage(EmbeddingOwner owner) {
  return "vectors:" + std::string(EmbeddingOwnerName(owner));
}

// The named image as stored, or nullopt (also where there is no table of images: an index
// opened with an older build's migrations, as tests do).
Result<std::optional<std::string>> ReadImage(sqlite::Connection& conn, std::string_view name) {
  Result<sqlite::Stmt> prepared = conn.Prepare("SELECT data FROM query_images WHERE name = ?");
  if (!prepared.ok()) return std::optional<std::string>();
  sqlite::Stmt& stmt = *prepared;
  GRAG_ASSIGN_OR_RETURN(bool found, stmt.BindAll(name).Step());
  if (!found) return std::optional<std::string>();
  return std::optional<std::string>(std::string(stmt.Blob(0)));
}

Result<std::string> BuildGraphImage(sqlite::Connection& conn) {
  store::GraphImageBuilder b;
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt s,
                          conn.Prepare("SELECT id, name_key, frequency FROM main.entities"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      b.AddEntity(s.Int(0), s.Text(1), s.Int(2));
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt s,
        conn.Prepare("SELECT c.id, d.title FROM main.chunks c JOIN main.documents d ON d.id = "
                     "c.document_id"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      b.AddChunk(s.Text(0), s.Text(1));
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(
        sqlite::Stmt s,
        conn.Prepare("SELECT id, source_id, target_id, weight FROM main.relationships"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      b.AddRelationship(s.Int(0), s.Int(1), s.Int(2), s.Double(3));
    }
  }
  {
    GRAG_ASSIGN_OR_RETURN(sqlite::Stmt s,
                          conn.Prepare("SELECT entity_id, chunk_id FROM main.entity_chunks"));
    while (true) {
      GRAG_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      b.AddLink(s.Int(0), s.Text(1));
    }
  }
  return b.Finish();
}

// A kind's vectors read from its rows (not from an image).
Result<PackedEmbeddings> PackRows(sqlite::Connection& conn, EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(sqlite::Stmt stmt,
                        conn.Prepare("SELECT owner_id, model, vector FROM main.embeddings WHERE "
                                     "owner_kind = ? ORDER BY owner_id"));
  stmt.BindAll(EmbeddingOwnerName(owner));
  PackedEmbeddings packed;
  while (true) {
    GRAG_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    std::string_view bytes = stmt.Blob(2);
    const auto dim = static_cast<int64_t>(bytes.size() / sizeof(float));
    if (packed.ids.empty()) {
      packed.model = stmt.Text(1);
      packed.dimension = dim;
    } else if (dim != packed.dimension || stmt.Text(1) != packed.model) {
      return Status::Corruption(
          std::string(EmbeddingOwnerName(owner)) + " embeddings disagree: " + packed.ids.front() +
          " has model '" + packed.model + "' and dimension " + std::to_string(packed.dimension) +
          ", " + stmt.Text(0) + " has model '" + stmt.Text(1) + "' and dimension " +
          std::to_string(dim));
    }
    packed.ids.push_back(stmt.Text(0));
    const size_t at = packed.values.size();
    packed.values.resize(at + static_cast<size_t>(dim));
    if (dim > 0) std::memcpy(packed.values.data() + at, bytes.data(), bytes.size());
  }
  return packed;
}

}  // namespace

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
    put.BindBlob(2, data.data(), data.size());
    GRAG_RETURN_IF_ERROR(put.Run());
    built.push_back(name);
    return Status::Ok();
  };
  GRAG_ASSIGN_OR_RETURN(std::optional<std::string> graph, ReadImage(conn, kGraphImage));
  if (!graph) {
    GRAG_ASSIGN_OR_RETURN(std::string data, BuildGraphImage(conn));
    GRAG_RETURN_IF_ERROR(keep(std::string(kGraphImage), data));
  }
  for (EmbeddingOwner owner :
       {EmbeddingOwner::kChunk, EmbeddingOwner::kEntity, EmbeddingOwner::kReport}) {
    const std::string name = VectorsImage(owner);
    GRAG_ASSIGN_OR_RETURN(std::optional<std::string> have, ReadImage(conn, name));
    if (have) continue;
    GRAG_ASSIGN_OR_RETURN(PackedEmbeddings packed, PackRows(conn, owner));
    if (packed.ids.empty()) continue;  // nothing to read faster
    GRAG_RETURN_IF_ERROR(keep(name, store::EncodePackedEmbeddings(packed)));
  }
  GRAG_RETURN_IF_ERROR(tx.Commit());
  return built;
}

Result<PackedEmbeddings> SqliteStore::ListPackedEmbeddings(EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  GRAG_ASSIGN_OR_RETURN(std::optional<std::string> image,
                        ReadImage(read.conn(), VectorsImage(owner)));
  if (image) {
    Result<PackedEmbeddings> packed = store::DecodePackedEmbeddings(*image);
    if (packed.ok()) return packed;
    Log(LogLevel::kWarn, "store",
        "query image " + VectorsImage(owner) + ": " + packed.status().message() +
            "; reading the vectors from their rows (`grag check` tells more)");
  }
  return PackRows(read.conn(), owner);
}

Result<GraphSnapshot> SqliteStore::LoadGraphNeighbourhood(const std::vector<int64_t>& entity_ids,
                                                          const std::vector<std::string>& chunk_ids,
                                                          const NeighbourhoodLimits& limits) {
  GRAG_ASSIGN_OR_RETURN(ReadHandle read, impl_->Read());
  GRAG_RETURN_IF_ERROR(read.BeginSnapshot());
  GRAG_ASSIGN_OR_RETURN(std::optional<std::string> image, ReadImage(read.conn(), kGraphImage));
  if (image) {
    Result<std::unique_ptr<store::GraphImage>> g = store::GraphImage::Decode(std::move(*image));
    if (g.ok()) return store::WalkNeighbourhood(entity_ids, chunk_ids, limits, **g);
    Log(LogLevel::kWarn, "store",
        "query image graph: " + g.status().message() +
            "; reading the graph from its tables (`grag check` tells more)");
  }
  return store::LoadNeighbourhoodFromTables(read.conn(), entity_ids, chunk_ids, limits);
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
    GRAG_ASSIGN_OR_RETURN(std::optional<std::string> stored, ReadImage(conn, name));
    if (!stored) continue;
    Result<std::string> fresh = Status::NotFound("an image of an unknown kind");
    if (name == kGraphImage) {
      fresh = BuildGraphImage(conn);
    } else {
      for (EmbeddingOwner owner :
           {EmbeddingOwner::kChunk, EmbeddingOwner::kEntity, EmbeddingOwner::kReport}) {
        if (name != VectorsImage(owner)) continue;
        Result<PackedEmbeddings> packed = PackRows(conn, owner);
        fresh = packed.ok() ? Result<std::string>(store::EncodePackedEmbeddings(*packed))
                            : Result<std::string>(packed.status());
      }
    }
    if (!fresh.ok()) {
      problems.push_back("query image " + name + ": " + fresh.status().message());
    } else if (*fresh != *stored) {
      problems.push_back("query image " + name +
                         " differs from its tables (delete it: `grag index` builds it again)");
    }
  }
  return problems;
}

}  // namespace grag
