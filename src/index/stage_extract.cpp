// The index pipeline's extraction stage: what RunIndex calls (stages.h).
#include "stages.h"

#include <algorithm>
#include <thread>
#include <unordered_map>

#include "grag/extract.h"
#include "grag/hash.h"
#include "grag/log.h"
#include "grag/nlp_extract.h"
#include "grag/parallel.h"
#include "grag/prompts.h"

namespace grag {
namespace {

std::string ExtractionParamsHash(const std::string& prompt, const ExtractorOptions& o) {
  Hasher h;
  h.Add(prompt);
  for (const auto& t : o.entity_types) h.Add(t);
  h.Add(std::to_string(o.gleanings));
  return h.HexDigest();
}

NlpExtractorOptions NlpOptionsFor(const Config& c) {
  NlpExtractorOptions o;
  o.sentence_window = static_cast<int>(c.extraction.nlp.sentence_window);
  o.exclude_words = c.extraction.nlp.exclude_words;
  return o;
}

// The no-LLM extractor: microseconds per chunk, so one pass on the calling thread plus workers.
Status ExtractWithNlp(Run& run, const ExtractorId& extractor,
                      const std::vector<std::string>& pending, ExtractSummary& s) {
  const NlpExtractorOptions opts = NlpOptionsFor(run.config());
  const std::string params = Sha256Hex(NlpExtractorFingerprint(opts));
  // A document's title names what its chunks are about (a JSON or CSV title field; a plain
  // file's title is its file name, which names nothing and is left out by ExtractNlp).
  std::unordered_map<std::string, std::string> title_of;
  {
    GRAG_ASSIGN_OR_RETURN(std::vector<DocumentInfo> docs, run.store().ListDocuments());
    for (auto& d : docs) title_of.emplace(std::move(d.id), std::move(d.title));
  }
  std::atomic<int64_t> done{0};
  const auto total = static_cast<int64_t>(pending.size());
  run.Progress("extract", 0, total);
  // A chunk takes about a millisecond here, less than committing it: each worker extracts a
  // batch of chunks and commits them in one transaction, and only then do they count as done
  // (a run stopped mid-batch redoes that batch). One commit per chunk wrote over 300 KB of
  // pages per chunk.
  constexpr size_t kBatch = 32;
  const size_t batches = (pending.size() + kBatch - 1) / kBatch;
  Status st = ParallelForStatus(
      batches, std::max<size_t>(1, std::thread::hardware_concurrency()),
      [&](size_t b) -> Status {
        const size_t first = b * kBatch;
        const size_t last = std::min(pending.size(), first + kBatch);
        std::vector<ExtractionRecord> records;
        records.reserve(last - first);
        for (size_t i = first; i < last; ++i) {
          if (run.cancelled()) return Status::Cancelled("interrupted");
          Status one = [&]() -> Status {
            GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk,
                                  run.store().GetChunk(pending[i]));
            if (!chunk) return Status::Ok();  // deleted meanwhile
            auto title = title_of.find(chunk->document_id);
            GRAG_ASSIGN_OR_RETURN(
                ParsedExtraction parsed,
                ExtractNlp(chunk->text, opts, title != title_of.end() ? title->second : ""));
            ExtractionRecord& rec = records.emplace_back();
            rec.chunk_id = pending[i];
            rec.extractor = extractor;
            rec.params_hash = params;
            rec.entities = std::move(parsed.entities);
            rec.relationships = std::move(parsed.relationships);
            return Status::Ok();
          }();
          if (!one.ok()) return one.WithContext("extracting chunk " + pending[i]);
        }
        const Status stored = [&]() -> Status {
          GRAG_ASSIGN_OR_RETURN(Transaction tx, run.store().BeginAllOrNothing());
          for (const ExtractionRecord& rec : records) {
            GRAG_RETURN_IF_ERROR(run.store().PutExtraction(rec));
          }
          return tx.Commit();
        }();
        if (!stored.ok()) {
          return stored.WithContext("storing the extractions of chunks " + pending[first] + " to " +
                                    pending[last - 1]);
        }
        done += static_cast<int64_t>(last - first);
        run.Progress("extract", done.load(), total);
        return Status::Ok();
      },
      run.cancel_flag());
  s.chunks_extracted = done;
  return st;
}

}  // namespace

Status Extract(Run& run, const ExtractorId& extractor, ExtractSummary& s) {
  GRAG_ASSIGN_OR_RETURN(std::vector<std::string> pending,
                        run.store().ChunksNeedingExtraction(extractor));
  if (pending.empty()) return Status::Ok();
  ChatModel* chat = run.chat();
  if (extractor.kind == ExtractorKind::kNlp || chat == nullptr) {
    return ExtractWithNlp(run, extractor, pending, s);
  }
  const Config& c = run.config();
  ExtractorOptions opts;
  GRAG_ASSIGN_OR_RETURN(opts.prompt, LoadPrompt(c.Resolve(c.prompts_dir), PromptId::kExtractGraph));
  opts.entity_types = c.extraction.entity_types;
  opts.gleanings = static_cast<int>(c.extraction.gleanings);
  opts.json_mode = c.llm.json_mode;
  const std::string params = ExtractionParamsHash(opts.prompt, opts);

  std::atomic<int64_t> done{0};
  std::atomic<int64_t> extracted{0};
  std::atomic<int64_t> skipped{0};
  const auto total = static_cast<int64_t>(pending.size());
  run.Progress("extract", 0, total);
  Status st = ParallelForStatus(
      pending.size(), static_cast<size_t>(LlmConcurrency(c)),
      [&](size_t i) -> Status {
        auto chunk = run.store().GetChunk(pending[i]);
        if (!chunk.ok()) return chunk.status();
        if (!chunk->has_value()) return Status::Ok();  // deleted meanwhile: nothing to do
        auto result = ExtractChunk(*chat, opts, (*chunk)->text);
        if (!result.ok()) return result.status().WithContext("extracting chunk " + pending[i]);
        ExtractionRecord rec;
        rec.chunk_id = pending[i];
        rec.extractor = extractor;
        rec.params_hash = params;
        rec.gleaning_rounds = result->gleaning_rounds;
        if (result->skipped) {
          rec.status = ExtractionStatus::kSkipped;
          rec.reason = result->reason;
          Log(LogLevel::kWarn, "extract",
              "chunk " + pending[i] + " of " + (*chunk)->document_id +
                  " skipped: " + result->reason);
          ++skipped;
        } else {
          rec.entities = std::move(result->result.entities);
          rec.relationships = std::move(result->result.relationships);
          ++extracted;
        }
        // The chunk's extraction and the run's spend so far, deferred: committed with the
        // chunks (and the replies) of the same window, after the replies it was made of. A run
        // killed before that commit does the chunk again (its replies, if committed, from the
        // cache), to the same result. The stage flushes before it returns.
        const Status stored = run.store().WriteDeferred([&run, rec = std::move(rec)]() -> Status {
          GRAG_RETURN_IF_ERROR(run.store().PutExtraction(rec));
          run.FlushUsage();
          return Status::Ok();
        });
        if (!stored.ok()) return stored;
        run.Progress("extract", ++done, total, /*flush=*/false);
        return Status::Ok();
      },
      run.cancel_flag());
  // Whatever the outcome, the chunks done so far are committed before the stage returns (the
  // deferred writes hold a reference to `run`).
  const Status flushed = run.store().FlushDeferred();
  s.chunks_extracted = extracted;
  s.chunks_skipped = skipped;
  return st.ok() ? flushed : st;
}

}  // namespace grag
