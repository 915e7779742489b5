// The index pipeline's embeddings stage: what RunIndex calls (stages.h).
#include "stages.h"

#include <algorithm>

#include "grag/hash.h"
#include "grag/literal_value.h"
#include "grag/log.h"

namespace grag {
namespace {

// How vectors are kept (embeddings.encoding; ValidateConfig accepted its value).
VectorEncoding StoredEncoding(const Config& config) {
  return ParseVectorEncoding(config.embeddings.encoding).value_or(VectorEncoding::kF32);
}

// The stage's progress line for `owner`'s vectors.
std::string StageName(EmbeddingOwner owner) {
  return owner == EmbeddingOwner::kEntity  ? "embed entities"
         : owner == EmbeddingOwner::kChunk ? "embed chunks"
                                           : "embed reports";
}

// Embeds `todo` (texts whose stored vector is missing or stale) with the run's model.
Status EmbedOwner(Run& run, EmbeddingOwner owner, const std::vector<EmbedItem>& todo,
                  int64_t& written) {
  const std::string stage = StageName(owner);
  const auto total = static_cast<int64_t>(todo.size());
  return EmbedItems(
      run.config(), run.store(), *run.embedder(), owner, todo, run.cancel_flag(), stage,
      [&](int64_t done) { run.Progress(stage, done, total); }, written);
}

// Whether the stored vector of `owner_id` is missing or was made from another text.
bool Stale(const std::map<std::string, std::string>& stored, const std::string& owner_id,
           const std::string& hash) {
  auto it = stored.find(owner_id);
  return it == stored.end() || it->second != hash;
}

// Vectors of another model cannot share an index with the current one's (nor be compared
// with a question embedded by it): when the embedding model changed, they are dropped and
// every text of that kind is embedded again.
Status DropOtherModelsVectors(Run& run, EmbeddingOwner owner) {
  GRAG_ASSIGN_OR_RETURN(std::optional<EmbeddingSpace> space, run.store().GetEmbeddingSpace(owner));
  if (!space || space->model == run.embedder()->model()) return Status::Ok();
  GRAG_ASSIGN_OR_RETURN(int64_t dropped, run.store().DeleteEmbeddings(owner));
  Log(LogLevel::kInfo, "embed",
      "the embedding model changed from " + space->model + " to " + run.embedder()->model() + ": " +
          std::to_string(dropped) + " " + std::string(EmbeddingOwnerName(owner)) +
          " vectors will be embedded again");
  return Status::Ok();
}

}  // namespace

Status Embed(Run& run, EmbedSummary& s) {
  if (run.embedder() == nullptr) return Status::Ok();
  Store& store = run.store();
  for (EmbeddingOwner owner :
       {EmbeddingOwner::kEntity, EmbeddingOwner::kChunk, EmbeddingOwner::kReport}) {
    GRAG_RETURN_IF_ERROR(DropOtherModelsVectors(run, owner));
  }
  {
    GRAG_ASSIGN_OR_RETURN(auto stored, store.ListEmbeddingHashes(EmbeddingOwner::kEntity));
    GRAG_ASSIGN_OR_RETURN(std::vector<EntityRecord> entities, store.ListEntities());
    const bool literals = run.config().embeddings.literal_values;
    std::vector<EmbedItem> todo;
    std::vector<std::string> unwanted;  // literal values' vectors stored before
    for (const auto& e : entities) {
      std::string id = std::to_string(e.id);
      if (!literals && IsLiteralValue(e.name, e.type)) {
        if (stored.count(id) != 0) unwanted.push_back(std::move(id));
        continue;
      }
      std::string text = e.name + ": " + e.description;
      std::string hash = InputHash(text);
      if (Stale(stored, id, hash))
        todo.push_back({std::move(id), std::move(text), std::move(hash)});
    }
    GRAG_ASSIGN_OR_RETURN(const int64_t dropped,
                          store.DeleteEmbeddingsOf(EmbeddingOwner::kEntity, unwanted));
    if (dropped > 0) {
      Log(LogLevel::kInfo, "embed",
          std::to_string(dropped) +
              " vectors of entities that are literal values removed (embeddings.literal_values "
              "is off)");
    }
    GRAG_RETURN_IF_ERROR(EmbedOwner(run, EmbeddingOwner::kEntity, todo, s.embeddings_written));
  }
  {
    GRAG_ASSIGN_OR_RETURN(auto stored, store.ListEmbeddingHashes(EmbeddingOwner::kChunk));
    GRAG_ASSIGN_OR_RETURN(std::vector<std::string> ids, store.ListChunkIds());
    std::vector<EmbedItem> todo;
    for (const auto& id : ids) {
      // A chunk id already is a hash of its text (and document): only new chunks are read.
      std::string hash = id.substr(0, kInputHashDigits);
      if (!Stale(stored, id, hash)) continue;
      GRAG_ASSIGN_OR_RETURN(auto chunk, store.GetChunk(id));
      if (chunk) todo.push_back({id, std::move(chunk->text), std::move(hash)});
    }
    GRAG_RETURN_IF_ERROR(EmbedOwner(run, EmbeddingOwner::kChunk, todo, s.embeddings_written));
  }
  {
    GRAG_ASSIGN_OR_RETURN(auto stored, store.ListEmbeddingHashes(EmbeddingOwner::kReport));
    GRAG_ASSIGN_OR_RETURN(std::vector<ReportRecord> reports, store.ListReports());
    std::vector<EmbedItem> todo;
    for (const auto& r : reports) {
      if (r.status != ReportStatus::kOk || r.full_content.empty()) continue;
      EmbedItem item = ReportEmbedItem(r);
      if (Stale(stored, item.owner_id, item.hash)) todo.push_back(std::move(item));
    }
    GRAG_RETURN_IF_ERROR(EmbedOwner(run, EmbeddingOwner::kReport, todo, s.embeddings_written));
  }
  // Vectors kept in another encoding (an older index, or the setting changed) are rewritten in
  // the configured one from their stored values.
  GRAG_ASSIGN_OR_RETURN(const int64_t recoded,
                        store.ReencodeEmbeddings(StoredEncoding(run.config())));
  if (recoded > 0) {
    Log(LogLevel::kInfo, "embed",
        std::to_string(recoded) + " stored vectors re-encoded as " +
            run.config().embeddings.encoding + " (embeddings.encoding)");
  }
  return Status::Ok();
}

EmbedItem ReportEmbedItem(const ReportRecord& report) {
  return {std::to_string(report.community_id), report.full_content, InputHash(report.full_content)};
}

Status EmbedItems(const Config& config, Store& store, EmbeddingModel& embedder,
                  EmbeddingOwner owner, const std::vector<EmbedItem>& todo,
                  const std::atomic<bool>* cancel, std::string_view stage,
                  const std::function<void(int64_t done)>& progress, int64_t& written) {
  // The client spreads a group's batches over its concurrency slots.
  const size_t group = static_cast<size_t>(std::max<int64_t>(1, config.embeddings.batch_size)) *
                       static_cast<size_t>(std::max<int64_t>(1, EmbeddingConcurrency(config)));
  const VectorEncoding encoding = StoredEncoding(config);
  int64_t done = 0;
  for (size_t start = 0; start < todo.size(); start += group) {
    if (cancel != nullptr && cancel->load()) return Status::Cancelled("interrupted");
    const size_t end = std::min(todo.size(), start + group);
    std::vector<std::string> texts;
    for (size_t i = start; i < end; ++i) texts.push_back(todo[i].text);
    auto reply = embedder.Embed(texts);
    if (!reply.ok()) return reply.status().WithContext(std::string(stage));
    if (reply->vectors.size() != texts.size()) {
      return Status::Internal(std::string(stage) + ": the embedding model returned " +
                              std::to_string(reply->vectors.size()) + " vectors for " +
                              std::to_string(texts.size()) + " texts");
    }
    std::vector<EmbeddingRecord> records;
    for (size_t i = start; i < end; ++i) {
      EmbeddingRecord r;
      r.owner = owner;
      r.owner_id = todo[i].owner_id;
      r.model = embedder.model();
      r.vector = std::move(reply->vectors[i - start]);
      r.input_hash = todo[i].hash;
      r.encoding = encoding;
      records.push_back(std::move(r));
    }
    GRAG_RETURN_IF_ERROR(store.PutEmbeddings(records).WithContext(std::string(stage)));
    written += static_cast<int64_t>(records.size());
    done += static_cast<int64_t>(records.size());
    if (progress) progress(done);
  }
  return Status::Ok();
}

}  // namespace grag
