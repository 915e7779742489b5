// The index pipeline's extraction stage: what RunIndex calls (stages.h).
#include "stages.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "grag/extract.h"
#include "grag/hash.h"
#include "grag/log.h"
#include "grag/nlp_extract.h"
#include "grag/words.h"
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

// Chunks judged before the rest of a run's chunks are sent, and the count after which a run
// that has still found no entity stops all the same.
constexpr int kProbeChunks = 4;
// Where the median yield of a run's first extraction replies is kept (for the next small run).
constexpr std::string_view kYieldMetaKey = "extraction_yield_median";
constexpr int kLateCheckChunks = 16;

// Watches for an extraction that yields nothing and, when it does, says why and what to change.
class EmptyWatch {
 public:
  // A chunk whose extraction held no entity: its text, the model's first reply (or the error in
  // its place) and why it was skipped ("" when it was not).
  void Record(const std::string& text, const std::string& reply, const std::string& skip_reason) {
    std::lock_guard lock(mu_);
    // What the built-in extractor finds in the same text: how many names it holds.
    Result<ParsedExtraction> nlp = ExtractNlp(text, NlpExtractorOptions(), "");
    if (nlp.ok()) nlp_entities_ += static_cast<int64_t>(nlp->entities.size());
    if (sample_reply_.empty() || (sample_reason_.empty() && !skip_reason.empty())) {
      sample_text_ = text;
      sample_reply_ = reply.empty() ? "(an empty reply)" : reply;
      sample_reason_ = skip_reason;
    }
  }

  // OK unless `chunks` chunks gave no entity at all while their text holds some (or every reply
  // was unreadable): then kUnavailable with the diagnosis.
  Status Judge(const ChatModel& model, const std::string& where, size_t chunks, int64_t entities,
               int64_t skipped, const ExtractorOptions& opts) const {
    if (entities > 0 || chunks == 0) return Status::Ok();
    std::lock_guard lock(mu_);
    const bool unreadable = skipped == static_cast<int64_t>(chunks);
    // Fewer than two names a chunk: the text may hold nothing worth extracting (a table of
    // numbers, a licence): nothing to say yet.
    if (!unreadable && nlp_entities_ < 2 * static_cast<int64_t>(chunks)) return Status::Ok();
    std::string cause;
    std::string fix;
    const std::string& r = sample_reason_.empty() ? sample_reply_ : sample_reason_;
    if (r.find("spent its reply thinking") != std::string::npos) {
      cause = "the model is a reasoning model that used its whole reply thinking";
      fix = "set llm.reasoning_effort = \"low\" or llm.think = \"off\"";
    } else if (sample_reply_ == "(an empty reply)") {
      cause =
          "the model returned nothing: a wrong model name, or a prompt cut short by the server's "
          "context window";
      fix =
          "check llm.model; with Ollama set llm.api_style = \"ollama\" so that each request "
          "carries the context window it needs";
    } else if (unreadable) {
      cause =
          "the replies are not the JSON the extraction prompt asks for (a model too small for "
          "the prompt, or one that ignores JSON mode)";
      fix = std::string(opts.json_mode ? "" : "set llm.json_mode = true, ") +
            "use a larger model, or adapt prompts/extract_graph.md to it; with Ollama set "
            "llm.api_style = \"ollama\" (its OpenAI endpoint cuts long prompts to its default "
            "context window, instructions first)";
    } else {
      cause =
          "the model answered with no entities: its context window may have cut the prompt (an "
          "Ollama server's OpenAI endpoint keeps only its default window, 2,048 or 4,096 "
          "tokens, and drops the start of the prompt where the instructions are), or the model "
          "is too small to follow the extraction prompt";
      fix = "with Ollama set llm.api_style = \"ollama\"; otherwise try a larger model";
    }
    return Status::Unavailable(fmt::format(
        "extraction found no entity in the first {} chunks ({} of the replies unreadable), though "
        "the built-in extractor finds {} names and phrases in them: the run stopped before "
        "spending more "
        "(what was extracted is kept; the next run resumes).\n"
        "  model: {}{}\n  a reply: {}\n  for the text: {}\n  likely cause: {}\n  what to change: "
        "{}; `grag doctor` tries the model on a sample chunk and reports what came back. To index "
        "all the same, set extraction.stop_if_empty = false",
        chunks, skipped, nlp_entities_, model.model_for(ChatRole::kExtract),
        where.empty() ? "" : " at " + where, Excerpt(sample_reply_, 300),
        Excerpt(sample_text_, 160), cause, fix));
  }

 private:
  // On one line, cut at a word (never inside a character), quoted.
  static std::string Excerpt(std::string_view text, size_t max) {
    return "\"" + ShortenAtWord(text, max) + "\"";
  }

  mutable std::mutex mu_;
  int64_t nlp_entities_ = 0;   // guarded by mu_
  std::string sample_text_;    // guarded by mu_
  std::string sample_reply_;   // guarded by mu_
  std::string sample_reason_;  // guarded by mu_
};

// Shares the chunks' first passes with `grag index --worker` processes (extraction.distribute)
// and takes part until every one is done: their replies are then in the reply cache, where the
// run's own extraction finds them. The first chunks are extracted and judged here first, as a
// lone run does, before anything is shared.
Status ShareExtraction(Run& run, ChatModel& chat, const ExtractionSetup& setup,
                       const std::vector<std::string>& pending) {
  const Config& c = run.config();
  const size_t concurrency = static_cast<size_t>(LlmConcurrency(c, "extract"));
  const size_t probe =
      c.extraction.stop_if_empty ? std::min(pending.size(), static_cast<size_t>(kProbeChunks)) : 0;
  if (probe > 0) {
    EmptyWatch watch;
    std::atomic<int64_t> entities{0};
    std::atomic<int64_t> skipped{0};
    const Status probed = ParallelForStatus(
        probe, std::min(probe, concurrency),
        [&](size_t k) -> Status {
          GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk, run.store().GetChunk(pending[k]));
          if (!chunk) return Status::Ok();
          auto r = ExtractChunk(chat, setup.first_opts, chunk->text);
          if (!r.ok()) return r.status().WithContext("extracting chunk " + pending[k]);
          entities += static_cast<int64_t>(r->result.entities.size());
          if (r->skipped) ++skipped;
          if (r->result.entities.empty()) {
            watch.Record(chunk->text, r->first_reply, r->skipped ? r->reason : "");
          }
          return Status::Ok();
        },
        run.cancel_flag());
    GRAG_RETURN_IF_ERROR(probed);
    GRAG_RETURN_IF_ERROR(
        watch.Judge(chat, c.llm.base_url, probe, entities.load(), skipped.load(), setup.opts));
  }
  if (pending.size() == probe) return Status::Ok();
  const std::vector<std::string> shared(pending.begin() + static_cast<std::ptrdiff_t>(probe),
                                        pending.end());
  GRAG_RETURN_IF_ERROR(run.store().PublishWork(setup.params, shared));
  Log(LogLevel::kInfo, "extract",
      fmt::format("shared {} chunks with indexing workers (`grag index --worker`)", shared.size()));
  WorkLoopOptions o;
  o.name = fmt::format("run {}", ::getpid());
  o.concurrency = std::max<size_t>(1, concurrency);
  o.lease = std::chrono::milliseconds(static_cast<int64_t>(c.extraction.worker_lease * 1000));
  o.poll = std::chrono::milliseconds(200);
  o.until_done = true;
  o.cancel = run.cancel_flag();
  o.on_progress = [&run](const WorkState& state, int64_t, bool) {
    run.Progress("extract", state.done, state.total, /*flush=*/false);
  };
  Result<int64_t> mine = RunWorkLoop(run.store(), chat, setup, o);
  if (std::optional<WorkState> state = run.store().GetWorkState().value_or(std::nullopt)) {
    for (const WorkerProgress& w : state->workers) {
      Log(LogLevel::kInfo, "extract",
          fmt::format("worker {}: {} chunks, {} calls", w.name, w.done, w.spent.calls));
    }
  }
  // Withdrawn whatever happened: the workers stop; what they stored stays in the cache.
  const Status cleared = run.store().ClearWork();
  GRAG_RETURN_IF_ERROR(mine.status());
  return cleared;
}

// Each chunk's first reply comes first; gleaning follows only for the chunks of a window
// whose yield (entities and relationships per token) falls well below the run's median: an
// under-extracted chunk. Most chunks a capable model extracts in one go, and a gleaning call
// costs more prompt than the extraction itself. The median is taken over the first replies
// of every window so far, in chunk order, so a run decides the same whatever the order in
// which replies arrive. A run of few chunks (an update) uses the figure the last larger run
// stored instead.
struct Slot {
  std::optional<ChunkRecord> chunk;
  ChunkExtraction result;
  double yield = 0;
  bool ready = false;  // its first reply is in
};
constexpr size_t kWindow = 64;
constexpr size_t kOwnMedianFrom = 32;  // first replies before a run trusts its own median

// The state of one extraction by a chat model (Extract), window by window.
struct LlmExtraction {
  LlmExtraction(Run& r, const ExtractorId& id, ChatModel* model, const ExtractionSetup& set_up,
                const std::string& params_hash, const std::vector<std::string>& chunk_ids)
      : run(r),
        extractor(id),
        chat(model),
        c(r.config()),
        opts(set_up.opts),
        params(params_hash),
        pending(chunk_ids),
        total(static_cast<int64_t>(chunk_ids.size())),
        glean_below(set_up.glean_below),
        first_opts(set_up.first_opts) {}

  // Records the chunk's extraction (deferred, committed with its window) and counts it.
  Status Finish(size_t i, Slot& slot) {
    if (!slot.chunk) return Status::Ok();
    ChunkExtraction& r = slot.result;
    ExtractionRecord rec;
    rec.chunk_id = pending[i];
    rec.extractor = extractor;
    rec.params_hash = params;
    rec.gleaning_rounds = r.gleaning_rounds;
    if (r.skipped) {
      rec.status = ExtractionStatus::kSkipped;
      rec.reason = r.reason;
      Log(LogLevel::kWarn, "extract",
          "chunk " + pending[i] + " of " + slot.chunk->document_id + " skipped: " + r.reason);
      ++skipped;
    } else {
      rec.entities = std::move(r.result.entities);
      rec.relationships = std::move(r.result.relationships);
      ++extracted;
      if (rec.entities.empty()) ++empty;
    }
    // The chunk's extraction and the run's spend so far, deferred: committed with the chunks
    // (and the replies) of the same window, after the replies it was made of. A run killed
    // before that commit does the chunk again (its replies, if committed, from the cache), to
    // the same result. The stage flushes before it returns.
    const Status stored = run.store().WriteDeferred([&run = run, rec = std::move(rec)]() -> Status {
      GRAG_RETURN_IF_ERROR(run.store().PutExtraction(rec));
      run.FlushUsage();
      return Status::Ok();
    });
    if (!stored.ok()) return stored;
    run.Progress("extract", ++done, total, /*flush=*/false);
    return Status::Ok();
  }

  // The first reply for chunk `i` of the window starting at `base`.
  Status FirstPass(size_t base, size_t i) {
    Slot& slot = slots[i - base];
    GRAG_ASSIGN_OR_RETURN(slot.chunk, run.store().GetChunk(pending[i]));
    if (!slot.chunk) return Status::Ok();  // deleted meanwhile: nothing to do
    auto result = ExtractChunk(*chat, first_opts, slot.chunk->text);
    if (!result.ok()) return result.status().WithContext("extracting chunk " + pending[i]);
    slot.result = std::move(result).value();
    slot.yield = ExtractionYield(slot.result.result, slot.chunk->n_tokens);
    if (slot.result.skipped) ++first_skipped;
    entities_found += static_cast<int64_t>(slot.result.result.entities.size());
    if (slot.result.result.entities.empty()) {
      watch.Record(slot.chunk->text, slot.result.first_reply,
                   slot.result.skipped ? slot.result.reason : "");
    }
    ++first_done;
    slot.ready = true;
    // Without selective gleaning the chunk is done (gleaned as configured): it is committed
    // now, not with its window.
    if (glean_below <= 0) return Finish(i, slot);
    // Waits for its window; its reply's spend is in the run's record already (Run::RecordSpend).
    return Status::Ok();
  }

  // The window starting at `base`: its first replies (the probe's judged before the rest), the
  // gleaning of its under-extracted chunks, and their records.
  Status Window(size_t base) {
    Status st = Status::Ok();
    const size_t end = std::min(pending.size(), base + kWindow);
    slots.assign(end - base, Slot{});
    size_t from = base;
    if (base == 0 && probe > 0) {
      st = ParallelForStatus(
          probe, std::min(probe, concurrency), [&](size_t k) { return FirstPass(base, k); },
          run.cancel_flag());
      if (st.ok()) {
        st = watch.Judge(*chat, c.llm.base_url, probe, entities_found.load(), first_skipped.load(),
                         opts);
        watch_stopped = !st.ok();
      }
      from = probe;
    }
    if (st.ok()) {
      st = ParallelForStatus(
          end - from, concurrency,
          [&](size_t k) -> Status {
            GRAG_RETURN_IF_ERROR(FirstPass(base, from + k));
            // Chunks the first ones did not judge: still nothing after many is no better.
            const int64_t finished = first_done.load();
            if (c.extraction.stop_if_empty && finished >= kLateCheckChunks &&
                entities_found.load() == 0) {
              Status judged = watch.Judge(*chat, c.llm.base_url, static_cast<size_t>(finished), 0,
                                          first_skipped.load(), opts);
              if (!judged.ok()) watch_stopped = true;
              return judged;
            }
            return Status::Ok();
          },
          run.cancel_flag());
    }
    if (!st.ok()) {
      // Stopped for extracting nothing: the chunks extracted so far are kept as they came
      // (empty: nothing to glean), so `grag stats` counts them. Any other failure leaves the
      // window to the next run, which finds the replies in the cache.
      if (watch_stopped && glean_below > 0) {
        for (size_t k = 0; k < slots.size(); ++k) {
          if (!slots[k].ready) continue;
          const Status kept = Finish(base + k, slots[k]);
          if (!kept.ok()) Log(LogLevel::kWarn, "extract", kept.ToString());
        }
      }
      return st;
    }
    const std::vector<size_t> glean = ToGlean();
    st = ParallelForStatus(
        glean.size(), concurrency,
        [&](size_t g) -> Status {
          Slot& slot = slots[glean[g]];
          const Status gl = GleanChunk(*chat, opts, slot.chunk->text, slot.result);
          if (!gl.ok()) return gl.WithContext("gleaning chunk " + pending[base + glean[g]]);
          return Status::Ok();
        },
        run.cancel_flag());
    if (!st.ok()) return st;
    if (glean_below > 0) {
      for (size_t k = 0; k < slots.size() && st.ok(); ++k) st = Finish(base + k, slots[k]);
    }
    return st;
  }

  // Which chunks of the window to glean (their slots); the window's yields join `yields`.
  std::vector<size_t> ToGlean() {
    std::vector<size_t> glean;
    if (glean_below > 0) {
      for (const Slot& slot : slots) {
        if (slot.chunk && !slot.result.skipped) yields.push_back(slot.yield);
      }
      std::optional<double> median;
      if (yields.size() >= kOwnMedianFrom || (!stored_median && !yields.empty())) {
        std::vector<double> sorted = yields;
        std::nth_element(sorted.begin(),
                         sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2),
                         sorted.end());
        median = sorted[sorted.size() / 2];
      } else {
        median = stored_median;
      }
      for (size_t k = 0; k < slots.size(); ++k) {
        if (slots[k].chunk && !slots[k].result.skipped && median &&
            slots[k].yield < glean_below * *median) {
          glean.push_back(k);
        }
      }
    }
    return glean;
  }

  Run& run;
  const ExtractorId& extractor;
  ChatModel* const chat;
  const Config& c;
  const ExtractorOptions& opts;
  const std::string& params;
  const std::vector<std::string>& pending;
  std::atomic<int64_t> done{0};
  std::atomic<int64_t> extracted{0};
  std::atomic<int64_t> skipped{0};
  std::atomic<int64_t> empty{0};
  std::atomic<int64_t> entities_found{0};  // by first replies
  std::atomic<int64_t> first_done{0};      // first replies in
  std::atomic<int64_t> first_skipped{0};   // of them, unparseable
  EmptyWatch watch;
  const int64_t total;
  const double glean_below;
  std::optional<double> stored_median;
  std::vector<double> yields;  // first replies of this run, extracted (not skipped) ones
  const ExtractorOptions& first_opts;
  std::vector<Slot> slots;
  std::atomic<bool> watch_stopped{false};  // the empty-extraction watch stopped the run
  size_t concurrency = 0;
  size_t probe = 0;  // chunks judged before the rest are sent
};

}  // namespace

Result<ExtractionSetup> ExtractionSetupFor(const Config& c, const ChatModel& chat) {
  ExtractionSetup s;
  GRAG_ASSIGN_OR_RETURN(s.opts.prompt,
                        LoadPrompt(c.Resolve(c.prompts_dir), PromptId::kExtractGraph));
  s.opts.entity_types = c.extraction.entity_types;
  s.opts.gleanings = static_cast<int>(c.extraction.gleanings);
  s.opts.json_mode = c.llm.json_mode;
  s.glean_below = s.opts.gleanings > 0 ? c.extraction.glean_below_yield : 0;
  s.first_opts = s.opts;
  if (s.glean_below > 0) s.first_opts.gleanings = 0;
  Hasher h;
  h.Add(ExtractionParamsHash(s.opts.prompt, s.opts));
  h.Add(chat.model_for(ChatRole::kExtract));
  h.Add(s.glean_below > 0 ? "first-pass" : "whole");
  s.params = h.HexDigest();
  return s;
}

Status Extract(Run& run, const ExtractorId& extractor, ExtractSummary& s) {
  GRAG_ASSIGN_OR_RETURN(std::vector<std::string> pending,
                        run.store().ChunksNeedingExtraction(extractor));
  if (pending.empty()) return Status::Ok();
  ChatModel* chat = run.chat();
  if (extractor.kind == ExtractorKind::kNlp || chat == nullptr) {
    return ExtractWithNlp(run, extractor, pending, s);
  }
  const Config& c = run.config();
  GRAG_ASSIGN_OR_RETURN(const ExtractionSetup setup, ExtractionSetupFor(c, *chat));
  const ExtractorOptions& opts = setup.opts;
  const std::string params = ExtractionParamsHash(opts.prompt, opts);
  if (c.extraction.distribute) GRAG_RETURN_IF_ERROR(ShareExtraction(run, *chat, setup, pending));

  LlmExtraction x(run, extractor, chat, setup, params, pending);
  run.Progress("extract", 0, x.total);
  {
    GRAG_ASSIGN_OR_RETURN(std::optional<std::string> m, run.store().GetMeta(kYieldMetaKey));
    if (m && !m->empty()) x.stored_median = std::strtod(m->c_str(), nullptr);
  }
  x.concurrency = static_cast<size_t>(LlmConcurrency(c, "extract"));
  // A model that extracts nothing (a reasoning model's thoughts parsed as its answer, a prompt
  // cut by the server's context window, a wrong model) is caught on the first few chunks, before
  // the budget is spent: those go first, a few at a time, and are judged before the rest.
  x.probe =
      c.extraction.stop_if_empty ? std::min(pending.size(), static_cast<size_t>(kProbeChunks)) : 0;
  Status st = Status::Ok();
  for (size_t base = 0; base < pending.size() && st.ok(); base += kWindow) st = x.Window(base);
  // Whatever the outcome, the chunks done so far are committed before the stage returns (the
  // deferred writes hold a reference to `run`).
  Status flushed = run.store().FlushDeferred();
  if (st.ok() && flushed.ok() && x.glean_below > 0 && x.yields.size() >= kOwnMedianFrom) {
    std::sort(x.yields.begin(), x.yields.end());
    flushed = run.store().SetMeta(kYieldMetaKey, fmt::format("{}", x.yields[x.yields.size() / 2]));
  }
  s.chunks_extracted = x.extracted;
  s.chunks_skipped = x.skipped;
  s.chunks_empty = x.empty;
  if (x.empty > 0 && st.ok()) {
    Log(LogLevel::kWarn, "extract",
        fmt::format("{} of {} chunks extracted this run hold no entity (`grag stats` counts them; "
                    "`grag doctor` checks the model)",
                    x.empty.load(), x.extracted.load()));
  }
  return st.ok() ? flushed : st;
}

}  // namespace grag
