#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "grag/chunker.h"
#include "grag/extract.h"
#include "grag/extractive_report.h"
#include "grag/nlp_prune.h"
#include "grag/hash.h"
#include "grag/indexer.h"
#include "grag/leiden.h"
#include "grag/lexical_embedder.h"
#include "grag/log.h"
#include "grag/merge.h"
#include "grag/nlp_extract.h"
#include "grag/parallel.h"
#include "grag/prompts.h"
#include "grag/report.h"
#include "grag/resolve.h"

namespace grag {
namespace {

using Clock = std::chrono::steady_clock;

// The run's chat model within its budget (llm.max_calls, llm.max_cost): once the calls that
// reached the model (cache hits are free) or their cost at the configured prices reach the limit,
// every further call fails with kResourceExhausted, which stops the run like any model error:
// what was done is stored and the next run resumes. Calls already in flight finish, so a run may
// end up to llm.concurrency calls over the limit.
class BudgetedChat : public ChatModel {
 public:
  BudgetedChat(ChatModel& inner, const LlmConfig& c)
      : inner_(inner), config_(c), base_(inner.Usage()) {}

  Result<ChatResponse> Chat(const ChatRequest& request) override {
    const LlmUsage u = inner_.Usage() - base_;
    const int64_t calls = u.calls - u.cache_hits;
    if (config_.max_calls > 0 && calls >= config_.max_calls) {
      return Status(ErrorCode::kResourceExhausted,
                    fmt::format("the run's LLM budget is spent: {} calls made (llm.max_calls = "
                                "{}); raise it, or run again to go on from here",
                                calls, config_.max_calls));
    }
    const double cost =
        (static_cast<double>(u.prompt_tokens) * config_.price_input_per_million +
         static_cast<double>(u.completion_tokens) * config_.price_output_per_million) /
        1e6;
    if (config_.max_cost > 0 && cost >= config_.max_cost) {
      return Status(ErrorCode::kResourceExhausted,
                    fmt::format("the run's LLM budget is spent: {:.4f} spent (llm.max_cost = "
                                "{}); raise it, or run again to go on from here",
                                cost, config_.max_cost));
    }
    return inner_.Chat(request);
  }
  const std::string& model() const override { return inner_.model(); }
  LlmUsage Usage() const override { return inner_.Usage(); }

 private:
  ChatModel& inner_;
  const LlmConfig& config_;
  const LlmUsage base_;
};

// Shared state of one run: the context, the clock and the progress reporting.
class Run {
 public:
  Run(const Config& config, IndexContext& ctx)
      : config_(config),
        ctx_(ctx),
        start_(Clock::now()),
        chat_base_(ctx.chat ? ctx.chat->Usage() : LlmUsage{}),
        embed_base_(ctx.embedder ? ctx.embedder->Usage() : LlmUsage{}),
        // The built-in embedder spends nothing: its calls are not model calls.
        count_embedder_(ctx.embedder != nullptr &&
                        !IsLexicalEmbeddingModel(ctx.embedder->model())) {}

  const Config& config() const { return config_; }
  Store& store() { return *ctx_.store; }
  ChatModel* chat() { return ctx_.chat; }
  EmbeddingModel* embedder() { return ctx_.embedder; }
  bool cancelled() const { return ctx_.cancel != nullptr && ctx_.cancel->load(); }
  const std::atomic<bool>* cancel_flag() const { return ctx_.cancel; }
  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // This run's usage: the models' counters minus what they held when the run began.
  LlmUsage Usage() const {
    LlmUsage u;
    if (ctx_.chat) u += ctx_.chat->Usage() - chat_base_;
    if (count_embedder_) u += ctx_.embedder->Usage() - embed_base_;
    return u;
  }

  // Chat calls of this run so far (cache hits included).
  int64_t ChatCalls() const { return ctx_.chat ? (ctx_.chat->Usage() - chat_base_).calls : 0; }

  void Plan(const IndexPlan& plan) {
    if (ctx_.on_plan) ctx_.on_plan(plan);
  }

  // The run's record in the store, whose counters FlushUsage keeps current.
  void SetRunId(int64_t id) { run_id_ = id; }

  // Writes this run's LLM spend to its record when it changed. Called as each unit of work is
  // committed (inside the unit's own transaction where there is one, so the spend costs no commit
  // of its own), so a run that is killed still accounts for what it spent (all but the calls in
  // flight).
  void FlushUsage() {
    if (run_id_ == 0) return;
    {
      std::lock_guard<std::mutex> lock(flush_mu_);
      if (SameUsage(Usage(), flushed_)) return;
    }
    // The store's lock before ours: a unit of work calls this inside its transaction, which
    // holds the store's lock.
    auto tx = ctx_.store->Begin();
    if (!tx.ok()) return;
    std::lock_guard<std::mutex> lock(flush_mu_);
    const LlmUsage u = Usage();
    if (SameUsage(u, flushed_)) return;
    if (ctx_.store->UpdateRun(run_id_, "", UsageCounters(u)).ok() && tx->Commit().ok()) {
      flushed_ = u;
    }
  }

  static bool SameUsage(const LlmUsage& a, const LlmUsage& b) {
    return a.calls == b.calls && a.cache_hits == b.cache_hits &&
           a.prompt_tokens == b.prompt_tokens && a.completion_tokens == b.completion_tokens &&
           a.http_requests == b.http_requests && a.failures == b.failures;
  }

  static std::map<std::string, int64_t> UsageCounters(const LlmUsage& u) {
    std::map<std::string, int64_t> out = {{"llm_calls", u.calls},
                                          {"llm_cache_hits", u.cache_hits},
                                          {"llm_http_requests", u.http_requests},
                                          {"llm_failures", u.failures},
                                          {"tokens_in", u.prompt_tokens},
                                          {"tokens_out", u.completion_tokens}};
    out.merge(EndpointRunCounters(u.endpoints));
    return out;
  }

  // `flush`: write the spend first (false: the unit just done wrote it in its transaction).
  void Progress(const std::string& stage, int64_t done, int64_t total, bool flush = true) {
    if (flush) FlushUsage();
    if (!ctx_.on_progress) return;
    IndexProgress p;
    p.stage = stage;
    p.done = done;
    p.total = total;
    p.usage = Usage();
    p.elapsed_seconds = Elapsed();
    std::lock_guard<std::mutex> lock(progress_mu_);  // one progress line at a time
    ctx_.on_progress(p);
  }

 private:
  const Config& config_;
  IndexContext& ctx_;
  Clock::time_point start_;
  LlmUsage chat_base_;
  LlmUsage embed_base_;
  bool count_embedder_;
  std::mutex progress_mu_;  // serialises on_progress calls
  int64_t run_id_ = 0;
  std::mutex flush_mu_;  // guards flushed_
  LlmUsage flushed_;     // what the run's record holds
};

// The meta key holding the name keys of the entities changed by merges since the communities
// were last detected (a JSON array): written with the graph, cleared with the communities, so a
// run killed in between resumes to the same communities.
constexpr std::string_view kPendingChangesKey = "communities_pending_changes";

Result<std::set<std::string>> PendingChanges(Store& store) {
  std::set<std::string> out;
  GRAG_ASSIGN_OR_RETURN(std::optional<std::string> text, store.GetMeta(kPendingChangesKey));
  if (!text || text->empty()) return out;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return out;
  for (const auto& k : j) {
    if (k.is_string()) out.insert(k.get<std::string>());
  }
  return out;
}

// ---------------------------------------------------------------- load and chunk

struct LoadedDocument {
  Document doc;
  std::vector<ChunkRecord> chunks;
};

// The input as the request describes it, chunked, and the stored documents it no longer has.
struct Gathered {
  std::vector<LoadedDocument> documents;
  std::vector<LoadIssue> issues;
  std::vector<std::string> to_remove;  // document ids
  std::vector<DocumentInfo> stored;    // the index's documents before the update
};

// Whether `path` lies in `folder` (both as spelled, or with symlinked parents resolved).
bool IsUnderFolder(const std::string& path, const std::string& folder) {
  const std::string rel = SourcePathFor(path, folder);
  return !std::filesystem::path(rel).is_absolute();
}

Result<std::vector<ChunkRecord>> ChunkRecords(const Document& doc, const ChunkOptions& copts) {
  GRAG_ASSIGN_OR_RETURN(std::vector<Chunk> chunks, ChunkDocument(doc, copts));
  std::vector<ChunkRecord> records;
  records.reserve(chunks.size());
  for (auto& ch : chunks) {
    ChunkRecord r;
    r.id = std::move(ch.id);
    r.document_id = doc.id;
    r.index = ch.index;
    r.text = std::move(ch.text);
    r.n_tokens = static_cast<int64_t>(ch.n_tokens);
    r.start_token = static_cast<int64_t>(ch.start_token);
    records.push_back(std::move(r));
  }
  return records;
}

Result<Gathered> Gather(const Config& c, const IndexRequest& request, Store& store,
                        const std::atomic<bool>* cancel) {
  Gathered out;
  GRAG_ASSIGN_OR_RETURN(out.stored, store.ListDocuments());
  const std::vector<DocumentInfo>& stored = out.stored;
  std::set<std::string> stored_ids;
  for (const auto& d : stored) stored_ids.insert(d.id);
  for (const auto& id : request.remove) {
    if (!stored_ids.count(id)) {
      return Status::NotFound("no document \"" + id +
                              "\" in the index (`grag stats --documents` lists them)");
    }
    out.to_remove.push_back(id);
  }
  const bool whole_input = request.paths.empty() && request.remove.empty();
  std::vector<std::string> paths = request.paths;
  if (whole_input) {
    const std::string input = c.Resolve(c.input.dir);
    std::error_code ec;
    if (!std::filesystem::is_directory(input, ec)) {
      return Status::NotFound("input folder " + input +
                              " does not exist: put documents there or name files to index");
    }
    paths.push_back(input);
  }
  if (paths.empty()) return out;
  GRAG_ASSIGN_OR_RETURN(LoadResult loaded, LoadDocuments(paths, LoadOptionsFor(c)));
  out.issues = std::move(loaded.issues);
  const auto skipped = std::count_if(out.issues.begin(), out.issues.end(),
                                     [](const LoadIssue& i) { return i.skipped; });
  if (loaded.documents.empty() && skipped > 0) {
    // Nothing to index and something went wrong: a failure, not an empty success. Nothing is
    // removed either.
    std::string first = out.issues.front().path + ": " + out.issues.front().message;
    for (const auto& i : out.issues) {
      if (i.skipped) {
        first = i.path + ": " + i.message;
        break;
      }
    }
    return Status::IoError("no input file could be read (" + std::to_string(skipped) +
                           (skipped == 1 ? " problem" : " problems") + "; first: " + first + ")");
  }

  const ChunkOptions copts = ChunkOptionsFor(c);
  std::set<std::string> present;
  for (auto& doc : loaded.documents) {
    if (cancel != nullptr && cancel->load()) return Status::Cancelled("interrupted");
    present.insert(doc.id);
    // Chunking is cheap next to an LLM call, and re-chunking every document keeps chunks true
    // to the current chunk settings; unchanged chunks keep their ids and their extraction.
    GRAG_ASSIGN_OR_RETURN(std::vector<ChunkRecord> chunks, ChunkRecords(doc, copts));
    out.documents.push_back({std::move(doc), std::move(chunks)});
  }

  // Folders are synchronised: a stored document that came from a folder being indexed and whose
  // file is gone from it leaves the index; so does a record gone from a file that was read
  // cleanly. A document whose file is still there but could not be read this time (unreadable,
  // invalid UTF-8, a bad record) is kept: a transient problem must never delete work.
  std::vector<std::string> folders;
  if (request.sync_folders || whole_input) {
    for (const auto& p : paths) {
      std::error_code ec;
      if (std::filesystem::is_directory(p, ec)) folders.push_back(p);
    }
  }
  if (folders.empty()) return out;
  const std::string root = c.root;
  std::set<std::string> troubled;  // source files with a problem this run
  for (const auto& issue : out.issues) {
    if (issue.skipped) troubled.insert(issue.source_path);
  }
  std::set<std::string> read_cleanly;  // source files that gave documents and no problem
  for (const auto& ld : out.documents) {
    if (!troubled.count(ld.doc.source_path)) read_cleanly.insert(ld.doc.source_path);
  }
  const std::string input_dir = c.Resolve(c.input.dir);
  for (const auto& d : stored) {
    if (present.count(d.id)) continue;
    if (std::find(out.to_remove.begin(), out.to_remove.end(), d.id) != out.to_remove.end())
      continue;
    // The stored source path is relative to the project root. Indexes written before that may
    // hold one relative to another working directory; for a plain file the id (its path
    // relative to the input folder) locates it too. A record's id says nothing about its file:
    // it is judged by the stored path alone, and kept when that does not lead anywhere.
    const std::string stored_file = ResolveSourcePath(d.source_path, root);
    const std::string source = SourcePathFor(stored_file, root);
    std::vector<std::string> candidates = {stored_file};
    const bool plain_file = d.id.find('#') == std::string::npos &&
                            d.id == d.source_path.substr(d.source_path.size() >= d.id.size()
                                                             ? d.source_path.size() - d.id.size()
                                                             : 0);
    if (plain_file) {
      candidates.push_back(
          (std::filesystem::path(input_dir) / d.id).lexically_normal().generic_string());
    }
    bool under = false;
    bool file_exists = false;
    for (const auto& file : candidates) {
      for (const auto& f : folders) under = under || IsUnderFolder(file, f);
      std::error_code ec;
      file_exists = file_exists || std::filesystem::exists(file, ec);
    }
    if (!under) continue;
    if (troubled.count(source)) {
      Log(LogLevel::kWarn, "load",
          "kept " + d.id + ": its file " + d.source_path + " could not be read this run");
      continue;
    }
    const bool gone = !file_exists || read_cleanly.count(source) > 0;
    if (gone) {
      out.to_remove.push_back(d.id);
    } else {
      Log(LogLevel::kWarn, "load",
          "kept " + d.id + ": its file " + d.source_path + " is still there but gave no document");
    }
  }
  return out;
}

// Typical calls per chunk extracted, for an index without history of its own: what
// bench/incremental_cost measures on its transcript corpus (a first index; adding 1-10%).
struct CallRatios {
  double glean = 1;  // per gleaning round configured
  double resolve = 0;
  double summarize = 0;
  double report = 0;
  double prompt_tokens_per_call = 0;      // 0: the chunk size plus the prompt's ~1,500
  double completion_tokens_per_call = 0;  // 0: 400
};
constexpr CallRatios kTypicalFullIndex{1, 0.002, 0.07, 0.1, 0, 0};
constexpr CallRatios kTypicalUpdate{1, 0.01, 0.15, 0.5, 0, 0};

Result<CallEstimate> EstimateCalls(Store& store, const Config& c, int64_t chunks) {
  CallEstimate e;
  GRAG_ASSIGN_OR_RETURN(std::optional<ClusteringRecord> clustered, store.LatestClustering());
  e.update = clustered.has_value();
  CallRatios r = e.update ? kTypicalUpdate : kTypicalFullIndex;
  r.glean *= static_cast<double>(std::max<int64_t>(0, c.extraction.gleanings));
  // This index's own runs of the same kind, when it has some.
  GRAG_ASSIGN_OR_RETURN(std::vector<RunRecord> runs, store.ListRuns(100));
  std::map<std::string, double> sum;
  for (const RunRecord& run : runs) {
    auto get = [&run](const char* key) {
      auto it = run.counters.find(key);
      return it == run.counters.end() ? 0.0 : static_cast<double>(it->second);
    };
    if (run.status != RunStatus::kOk || get("calls_extract") <= 0 ||
        (get("update_run") > 0) != e.update) {
      continue;
    }
    ++e.history_runs;
    for (const char* key : {"calls_extract", "calls_glean", "calls_resolve", "calls_summarize",
                            "calls_report", "llm_calls", "tokens_in", "tokens_out"}) {
      sum[key] += get(key);
    }
  }
  if (e.history_runs > 0) {
    const double per = sum["calls_extract"];
    r = {sum["calls_glean"] / per,
         sum["calls_resolve"] / per,
         sum["calls_summarize"] / per,
         sum["calls_report"] / per,
         sum["tokens_in"] / std::max(1.0, sum["llm_calls"]),
         sum["tokens_out"] / std::max(1.0, sum["llm_calls"])};
  }
  const auto n = static_cast<double>(chunks);
  auto times = [n](double ratio) { return static_cast<int64_t>(std::llround(n * ratio)); };
  e.calls.extract = chunks;
  e.calls.glean = times(r.glean);
  e.calls.resolve = times(r.resolve);
  e.calls.summarize = times(r.summarize);
  e.calls.report = times(r.report);
  const auto calls = static_cast<double>(e.calls.Total());
  const double in = r.prompt_tokens_per_call > 0 ? r.prompt_tokens_per_call
                                                 : static_cast<double>(c.chunks.size) + 1500;
  const double out = r.completion_tokens_per_call > 0 ? r.completion_tokens_per_call : 400;
  e.prompt_tokens = static_cast<int64_t>(std::llround(calls * in));
  e.completion_tokens = static_cast<int64_t>(std::llround(calls * out));
  if (c.llm.price_input_per_million > 0 || c.llm.price_output_per_million > 0) {
    e.cost = (static_cast<double>(e.prompt_tokens) * c.llm.price_input_per_million +
              static_cast<double>(e.completion_tokens) * c.llm.price_output_per_million) /
             1e6;
  }
  return e;
}

Result<IndexPlan> PlanFrom(const Gathered& g, Store& store, const ExtractorId& extractor,
                           const Config& c) {
  IndexPlan plan;
  plan.load_issues = g.issues;
  std::map<std::string, const DocumentInfo*> by_id;
  for (const auto& d : g.stored) by_id[d.id] = &d;
  GRAG_ASSIGN_OR_RETURN(std::vector<std::string> stored_chunks, store.ListChunkIds());
  const std::set<std::string> stored_chunk_set(stored_chunks.begin(), stored_chunks.end());
  GRAG_ASSIGN_OR_RETURN(std::vector<std::string> pending, store.ChunksNeedingExtraction(extractor));
  const std::set<std::string> pending_set(pending.begin(), pending.end());

  std::set<std::string> reloaded;
  for (const auto& ld : g.documents) {
    reloaded.insert(ld.doc.id);
    auto it = by_id.find(ld.doc.id);
    const bool changed = it != by_id.end() && it->second->content_hash != ld.doc.content_hash;
    if (it == by_id.end()) {
      plan.documents_added.push_back(ld.doc.id);
    } else if (changed) {
      plan.documents_changed.push_back(ld.doc.id);
    } else {
      ++plan.documents_unchanged;
    }
    std::set<std::string> now;
    for (const auto& ch : ld.chunks) {
      now.insert(ch.id);
      if (!stored_chunk_set.count(ch.id) || pending_set.count(ch.id)) ++plan.chunks_to_extract;
    }
    if (changed) {
      GRAG_ASSIGN_OR_RETURN(std::vector<ChunkRecord> old, store.ListChunks(ld.doc.id));
      for (const auto& ch : old) plan.chunks_removed += now.count(ch.id) ? 0 : 1;
    }
  }
  const std::set<std::string> removed(g.to_remove.begin(), g.to_remove.end());
  for (const auto& id : g.to_remove) {
    plan.documents_removed.push_back(id);
    plan.chunks_removed += by_id.count(id) ? by_id[id]->chunk_count : 0;
  }
  // Chunks an earlier run stored but did not get to (or skipped), in documents not reloaded now:
  // only the pending chunks are read, to learn their document.
  if (reloaded.size() < by_id.size()) {
    for (const auto& id : pending) {
      GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk, store.GetChunk(id));
      if (chunk && !reloaded.count(chunk->document_id) && !removed.count(chunk->document_id)) {
        ++plan.chunks_to_extract;
      }
    }
  }
  plan.extraction_calls_max =
      extractor.kind == ExtractorKind::kLlm
          ? plan.chunks_to_extract * (1 + std::max<int64_t>(0, c.extraction.gleanings))
          : 0;
  if (extractor.kind == ExtractorKind::kLlm && plan.chunks_to_extract > 0) {
    GRAG_ASSIGN_OR_RETURN(plan.estimate, EstimateCalls(store, c, plan.chunks_to_extract));
  }
  return plan;
}

Status Apply(Run& run, Gathered& g, IndexSummary& s) {
  const auto total = static_cast<int64_t>(g.documents.size() + g.to_remove.size());
  int64_t done = 0;
  // Documents go in by batches, a transaction each: a commit per document cost more than
  // chunking it (each writes its pages and a full-text segment again). A run stopped mid-batch
  // reads that batch again next time, which costs no model call; progress counts a document only
  // once its batch is committed.
  constexpr size_t kBatchDocuments = 64;
  constexpr size_t kBatchBytes = size_t{4} << 20;
  for (size_t begin = 0; begin < g.documents.size();) {
    if (run.cancelled()) return Status::Cancelled("interrupted");
    std::vector<std::pair<DocumentChange, ChunkChanges>> changes;
    size_t end = begin;
    {
      GRAG_ASSIGN_OR_RETURN(Transaction tx, run.store().Begin());
      for (size_t bytes = 0;
           end < g.documents.size() && end - begin < kBatchDocuments && bytes < kBatchBytes;
           ++end) {
        const LoadedDocument& ld = g.documents[end];
        bytes += ld.doc.text.size();
        GRAG_ASSIGN_OR_RETURN(DocumentChange change, run.store().UpsertDocument(ld.doc));
        GRAG_ASSIGN_OR_RETURN(ChunkChanges cc,
                              run.store().ReplaceDocumentChunks(ld.doc.id, ld.chunks));
        changes.emplace_back(change, cc);
      }
      GRAG_RETURN_IF_ERROR(tx.Commit());
    }
    begin = end;
    for (const auto& [change, cc] : changes) {
      switch (change) {
        case DocumentChange::kAdded:
          ++s.documents_added;
          break;
        case DocumentChange::kChanged:
          ++s.documents_changed;
          break;
        case DocumentChange::kUnchanged:
          ++s.documents_unchanged;
          break;
      }
      s.chunks_added += cc.added;
      s.chunks_removed += cc.removed;
      run.Progress("load", ++done, total);
    }
  }
  std::map<std::string, int64_t> chunk_count;
  for (const auto& d : g.stored) chunk_count[d.id] = d.chunk_count;
  for (const auto& id : g.to_remove) {
    GRAG_ASSIGN_OR_RETURN(bool removed, run.store().DeleteDocument(id));
    if (removed) {
      ++s.documents_removed;
      s.chunks_removed += chunk_count[id];
      Log(LogLevel::kInfo, "index", "removed " + id);
    }
    run.Progress("load", ++done, total);
  }
  GRAG_ASSIGN_OR_RETURN(s.chunks, run.store().CountChunks());
  return Status::Ok();
}

Status LoadAndChunk(Run& run, const IndexRequest& request, const ExtractorId& extractor,
                    IndexSummary& s, IndexPlan& plan) {
  GRAG_ASSIGN_OR_RETURN(Gathered g, Gather(run.config(), request, run.store(), run.cancel_flag()));
  s.load_issues = g.issues;
  for (const auto& issue : g.issues) {
    Log(issue.skipped ? LogLevel::kWarn : LogLevel::kInfo, "load",
        issue.path + ": " + issue.message);
  }
  GRAG_ASSIGN_OR_RETURN(plan, PlanFrom(g, run.store(), extractor, run.config()));
  run.Plan(plan);
  return Apply(run, g, s);
}

// ---------------------------------------------------------------- extraction

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

NlpPruneOptions NlpPruneOptionsFor(const Config& c) {
  NlpPruneOptions o;
  o.min_node_freq = c.extraction.nlp.min_node_freq;
  o.min_edge_weight_pct = c.extraction.nlp.min_edge_weight_pct;
  o.pmi_weights = c.extraction.nlp.pmi_weights;
  return o;
}

// The no-LLM extractor: microseconds per chunk, so one pass on the calling thread plus workers.
Status ExtractWithNlp(Run& run, const ExtractorId& extractor,
                      const std::vector<std::string>& pending, IndexSummary& s) {
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
          GRAG_ASSIGN_OR_RETURN(Transaction tx, run.store().Begin());
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

Status Extract(Run& run, const ExtractorId& extractor, IndexSummary& s) {
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
        // The chunk's extraction and the run's spend so far, committed (with the chunks that
        // finished at the same time) before the chunk counts as done.
        const Status stored = run.store().WriteGrouped([&]() -> Status {
          GRAG_RETURN_IF_ERROR(run.store().PutExtraction(rec));
          run.FlushUsage();
          return Status::Ok();
        });
        if (!stored.ok()) return stored;
        run.Progress("extract", ++done, total, /*flush=*/false);
        return Status::Ok();
      },
      run.cancel_flag());
  s.chunks_extracted = extracted;
  s.chunks_skipped = skipped;
  return st;
}

// ---------------------------------------------------------------- merge

struct Description {
  std::string hash;
  std::string text;
  std::string model;
  std::string basis;  // what a summary covers (grag/merge.h SummaryBasis)
};

// The merged description for one entity or relationship: the stored one when its inputs are
// unchanged, else joined or summarised.
struct DescriptionJob {
  std::string name;
  const std::vector<std::string>* descriptions;
  std::string hash;
  Description result;
  bool resolved = false;  // taken from the store: inputs unchanged
  Description stored;     // what the store holds for it (empty when new)
};

Status ResolveDescriptions(Run& run, std::vector<DescriptionJob>& jobs, IndexSummary& s) {
  SummarizeOptions so;
  const SummaryConfig& sc = run.config().summaries;
  so.max_joined_tokens = static_cast<size_t>(sc.max_joined_tokens);
  so.max_descriptions = static_cast<size_t>(sc.max_descriptions);
  so.max_summary_tokens = static_cast<int>(sc.max_summary_tokens);
  const Tokenizer* tok = Tokenizer::Get(run.config().chunks.encoding).value_or(nullptr);
  if (tok != nullptr) so.count_tokens = [tok](std::string_view t) { return tok->Count(t); };
  std::vector<size_t> llm_jobs;
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto& j = jobs[i];
    if (j.resolved) continue;
    if (!NeedsSummary(*j.descriptions, so)) {
      j.result = {j.hash, JoinDescriptions(*j.descriptions), "", ""};
    } else if (run.chat() != nullptr) {
      // An update's few new descriptions ride along with the stored summary (no call).
      std::optional<AppendedDescription> appended;
      if (!j.stored.model.empty()) {
        appended =
            AppendToSummary(j.stored.text, j.stored.basis, *j.descriptions, sc.refresh_share, so);
      }
      if (appended) {
        j.result = {j.hash, std::move(appended->description), j.stored.model,
                    std::move(appended->basis)};
        ++s.descriptions_appended;
      } else {
        llm_jobs.push_back(i);
      }
    } else {
      j.result = {j.hash, JoinDescriptionsWithin(*j.descriptions, so), "", ""};
    }
  }
  if (llm_jobs.empty()) return Status::Ok();
  std::atomic<int64_t> done{0};
  const auto total = static_cast<int64_t>(llm_jobs.size());
  Status st = ParallelForStatus(
      llm_jobs.size(), static_cast<size_t>(LlmConcurrency(run.config())),
      [&](size_t k) -> Status {
        auto& j = jobs[llm_jobs[k]];
        auto summary = SummarizeDescriptions(*run.chat(), j.name, *j.descriptions, so);
        if (summary.ok()) {
          j.result = {j.hash, *summary, run.chat()->model(), SummaryBasis(*j.descriptions, so)};
        } else if (summary.status().code() == ErrorCode::kParse) {
          // An empty summary twice: keep every description rather than lose any.
          j.result = {j.hash, JoinDescriptions(*j.descriptions), "", ""};
        } else {
          return summary.status().WithContext("summarising " + j.name);
        }
        run.Progress("summarize", ++done, total);
        return Status::Ok();
      },
      run.cancel_flag());
  s.descriptions_summarized += done;
  return st;
}

// ---------------------------------------------------------------- entity resolution

// What resolution decided this run, written with the graph in the merge's transaction.
struct Resolution {
  std::vector<EntityAlias> aliases;
  std::vector<ResolutionLinkRecord> links;
  std::string params;  // the settings fingerprint the decisions were made under
};

ResolveOptions ResolveOptionsFor(const Config& c) {
  ResolveOptions o;
  o.name_weight = c.resolution.name_weight;
  o.embedding_weight = c.resolution.embedding_weight;
  o.merge_threshold = c.resolution.merge_threshold;
  o.adjudicate_threshold = c.resolution.adjudicate_threshold;
  o.no_llm_merge_threshold = c.resolution.no_llm_merge_threshold;
  o.adjudication_batch = static_cast<size_t>(c.resolution.adjudication_batch);
  o.max_block = static_cast<size_t>(c.resolution.max_block);
  o.llm_concurrency = static_cast<int>(LlmConcurrency(c));
  return o;
}

// Decisions made under other settings, another extractor, other models or another judge's
// prompt are not reused.
std::string ResolutionParams(Run& run, const ExtractorId& extractor, const ResolveOptions& o) {
  const auto& r = run.config().resolution;
  return fmt::format(
      "v1 extractor={}:{} enabled={} weights={}/{} bands={}/{}/{} batch={} block={} "
      "llm={} embedder={} prompt={}",
      ExtractorKindName(extractor.kind), extractor.model, r.enabled, r.name_weight,
      r.embedding_weight, r.merge_threshold, r.adjudicate_threshold, r.no_llm_merge_threshold,
      r.adjudication_batch, r.max_block, run.chat() != nullptr ? run.chat()->model() : "",
      run.embedder() != nullptr ? run.embedder()->model() : "",
      run.chat() != nullptr ? Sha256Hex(o.adjudication_prompt).substr(0, 16) : "");
}

// Resolves the merged graph's names and folds each cluster into one entity. Incremental: a name
// placed by an earlier run under the same settings keeps its place (its links to names still
// present are kept) and only new names are compared; a name whose entity is gone is placed
// again. A person's overrides (grag entities merge/split) win.
Result<Resolution> ResolveGraph(Run& run, const ExtractorId& extractor, MergedGraph& g,
                                IndexSummary& s) {
  Store& store = run.store();
  const Config& config = run.config();
  ResolveOptions options = ResolveOptionsFor(config);
  if (run.chat() != nullptr) {
    GRAG_ASSIGN_OR_RETURN(
        options.adjudication_prompt,
        LoadPrompt(config.Resolve(config.prompts_dir), PromptId::kResolveEntities));
  }
  Resolution out;
  out.params = ResolutionParams(run, extractor, options);
  GRAG_ASSIGN_OR_RETURN(std::optional<std::string> stored_params,
                        store.GetMeta("resolution_params"));
  const bool reuse = stored_params && *stored_params == out.params;
  std::unordered_map<std::string, EntityAlias> prior;
  std::vector<ResolutionLinkRecord> prior_links;
  if (reuse) {
    GRAG_ASSIGN_OR_RETURN(std::vector<EntityAlias> aliases, store.ListAliases());
    for (auto& a : aliases) prior.emplace(a.name_key, std::move(a));
    GRAG_ASSIGN_OR_RETURN(prior_links, store.ListResolutionLinks());
  }
  GRAG_ASSIGN_OR_RETURN(std::vector<EntityOverride> overrides, store.ListEntityOverrides());

  const bool enabled = config.resolution.enabled;
  ResolveInput in;
  std::unordered_map<std::string, size_t> index_of;
  in.entities.reserve(g.entities.size());
  SummarizeOptions join;  // a few descriptions are enough to tell two things apart
  join.max_descriptions = 3;
  join.max_joined_tokens = 200;
  std::unordered_map<std::string, uint32_t> chunk_number;  // chunks as small ids, for locality
  for (const auto& e : g.entities) {
    index_of.emplace(e.name_key, in.entities.size());
    ResolveEntity r;
    r.key = e.name_key;
    r.name = e.name;
    r.type = e.type;
    r.description = JoinDescriptionsWithin(e.descriptions, join);
    r.frequency = static_cast<int64_t>(e.chunk_ids.size());
    for (const auto& c : e.chunk_ids) {
      r.contexts.push_back(
          chunk_number.emplace(c, static_cast<uint32_t>(chunk_number.size())).first->second);
    }
    std::sort(r.contexts.begin(), r.contexts.end());
    in.entities.push_back(std::move(r));
  }
  for (auto& r : in.entities) {
    auto it = prior.find(r.key);
    // Placed before, into an entity whose name is still here: settled.
    r.fresh = enabled && (it == prior.end() || !index_of.count(it->second.canonical_key));
    s.resolution_fresh += r.fresh ? 1 : 0;
  }
  for (const auto& l : prior_links) {
    auto a = index_of.find(l.key_a);
    auto b = index_of.find(l.key_b);
    if (a == index_of.end() || b == index_of.end()) continue;  // a name is gone: so is the link
    ResolveLink link;
    link.a = a->second;
    link.b = b->second;
    link.score = l.score;
    link.method = l.method == "rule"  ? ResolveMethod::kRule
                  : l.method == "llm" ? ResolveMethod::kLlm
                                      : ResolveMethod::kSimilarity;
    link.reason = l.reason;
    in.prior_links.push_back(std::move(link));
  }
  for (const auto& o : overrides) {
    auto a = index_of.find(o.key_a);
    auto b = index_of.find(o.key_b);
    if (a == index_of.end() || b == index_of.end()) continue;
    (o.merge ? in.must_link : in.cannot_link).emplace_back(a->second, b->second);
  }
  if (s.resolution_fresh > 0) run.Progress("resolve", 0, s.resolution_fresh);

  GRAG_ASSIGN_OR_RETURN(ResolveResult rr, ResolveEntities(in, options, run.embedder(), run.chat()));
  s.resolution_adjudicated += rr.stats.adjudicated;
  s.resolution_llm_calls += rr.stats.llm_calls;

  // The best link that placed each name, for `grag entities aliases`.
  std::vector<const ResolveLink*> best(in.entities.size(), nullptr);
  std::vector<ResolveLink> user_links;
  for (const auto& [a, b] : in.must_link)
    user_links.push_back({a, b, 1.0, ResolveMethod::kUser, "merged by a person"});
  auto rank = [](const ResolveLink& l) {  // a person's word first, then the higher score
    return std::make_pair(l.method == ResolveMethod::kUser, l.score);
  };
  auto consider = [&](const ResolveLink& l) {
    for (size_t i : {l.a, l.b}) {
      if (best[i] == nullptr || rank(l) > rank(*best[i])) best[i] = &l;
    }
  };
  for (const auto& l : in.prior_links) consider(l);
  for (const auto& l : rr.links) consider(l);
  for (const auto& l : user_links) consider(l);

  std::unordered_map<std::string, std::string> canonical_of;
  for (size_t i = 0; i < in.entities.size(); ++i) {
    const ResolveEntity& e = in.entities[i];
    const size_t c = i < rr.canonical.size() ? rr.canonical[i] : i;
    EntityAlias a;
    a.name_key = e.key;
    a.name = e.name;
    a.canonical_key = in.entities[c].key;
    if (c != i) {
      canonical_of.emplace(e.key, a.canonical_key);
      if (const ResolveLink* l = best[i]) {
        a.score = l->score;
        a.method = std::string(ResolveMethodName(l->method));
        a.reason = l->reason;
      }
    }
    out.aliases.push_back(std::move(a));
  }
  auto keep_link = [&](const ResolveLink& l) {
    if (l.method == ResolveMethod::kUser) return;
    out.links.push_back({in.entities[l.a].key, in.entities[l.b].key, l.score,
                         std::string(ResolveMethodName(l.method)), l.reason});
  };
  for (const auto& l : in.prior_links) keep_link(l);
  for (const auto& l : rr.links) keep_link(l);
  s.resolution_merged = static_cast<int64_t>(CollapseResolved(g, canonical_of));
  if (s.resolution_fresh > 0) run.Progress("resolve", s.resolution_fresh, s.resolution_fresh);
  return out;
}

Status Merge(Run& run, const ExtractorId& extractor, IndexSummary& s) {
  Store& store = run.store();
  GRAG_ASSIGN_OR_RETURN(auto entity_mentions, store.ListEntityMentions(extractor));
  GRAG_ASSIGN_OR_RETURN(auto rel_mentions, store.ListRelationshipMentions(extractor));
  MergedGraph g = MergeMentions(entity_mentions, rel_mentions);
  entity_mentions.clear();
  rel_mentions.clear();
  GRAG_ASSIGN_OR_RETURN(Resolution resolution, ResolveGraph(run, extractor, g, s));
  if (extractor.kind == ExtractorKind::kNlp) {
    // Phrases seen once and weak co-occurrences are noise, as in Microsoft's fast method.
    const NlpPruneStats ps = PruneNlpGraph(g, NlpPruneOptionsFor(run.config()));
    Log(LogLevel::kDebug, "merge",
        fmt::format("NLP graph pruned from {} to {} entities and {} to {} relationships",
                    ps.entities_before, ps.entities_after, ps.relationships_before,
                    ps.relationships_after));
  }

  GRAG_ASSIGN_OR_RETURN(std::vector<EntityRecord> old_entities, store.ListEntities());
  std::unordered_map<std::string, const EntityRecord*> old_by_key;
  std::unordered_map<int64_t, std::string> key_of_id;
  for (const auto& e : old_entities) {
    old_by_key[e.name_key] = &e;
    key_of_id[e.id] = e.name_key;
  }
  GRAG_ASSIGN_OR_RETURN(std::vector<RelationshipRecord> old_rels, store.ListRelationships());
  std::map<std::pair<std::string, std::string>, const RelationshipRecord*> old_rel_by_keys;
  for (const auto& r : old_rels) {
    std::string a = key_of_id[r.source_id];
    std::string b = key_of_id[r.target_id];
    if (b < a) std::swap(a, b);
    old_rel_by_keys[{a, b}] = &r;
  }

  // Descriptions: reuse the stored text when the description set is unchanged.
  std::vector<DescriptionJob> jobs;
  jobs.reserve(g.entities.size() + g.relationships.size());
  for (const auto& e : g.entities) {
    DescriptionJob j{e.name, &e.descriptions, DescriptionsHash(e.name_key, e.descriptions),
                     {},     false,           {}};
    if (auto it = old_by_key.find(e.name_key); it != old_by_key.end()) {
      j.stored = {it->second->description_hash, it->second->description,
                  it->second->description_model, it->second->description_basis};
      if (j.stored.hash == j.hash) {
        j.result = j.stored;
        j.resolved = true;
      }
    }
    jobs.push_back(std::move(j));
  }
  for (const auto& r : g.relationships) {
    const std::string label = r.source_key + " — " + r.target_key;
    DescriptionJob j{label, &r.descriptions, DescriptionsHash(label, r.descriptions),
                     {},    false,           {}};
    if (auto it = old_rel_by_keys.find({r.source_key, r.target_key}); it != old_rel_by_keys.end()) {
      j.stored = {it->second->description_hash, it->second->description,
                  it->second->description_model, it->second->description_basis};
      if (j.stored.hash == j.hash) {
        j.result = j.stored;
        j.resolved = true;
      }
    }
    jobs.push_back(std::move(j));
  }
  GRAG_RETURN_IF_ERROR(ResolveDescriptions(run, jobs, s));

  // Write the graph in one transaction: readers never see half a merge.
  GRAG_ASSIGN_OR_RETURN(Transaction tx, store.Begin());
  std::unordered_map<std::string, int64_t> id_of_key;
  std::set<std::string> keep;
  // Entities whose mentions or relationships changed: only they may change community (see
  // DetectCommunities). Added to what earlier merges left pending.
  GRAG_ASSIGN_OR_RETURN(std::set<std::string> changed, PendingChanges(store));
  const size_t pending_before = changed.size();
  for (size_t i = 0; i < g.entities.size(); ++i) {
    const auto& e = g.entities[i];
    if (auto it = old_by_key.find(e.name_key);
        it == old_by_key.end() || it->second->description_hash != jobs[i].hash) {
      changed.insert(e.name_key);
    }
    EntityRecord rec;
    rec.name_key = e.name_key;
    rec.name = e.name;
    rec.type = e.type;
    rec.type_counts = e.type_counts;
    rec.description = jobs[i].result.text;
    rec.description_hash = jobs[i].result.hash;
    rec.description_model = jobs[i].result.model;
    rec.description_basis = jobs[i].result.basis;
    GRAG_ASSIGN_OR_RETURN(int64_t id, store.UpsertEntity(rec));
    GRAG_RETURN_IF_ERROR(store.SetEntityChunks(id, e.chunk_ids));
    id_of_key[e.name_key] = id;
    keep.insert(e.name_key);
  }
  for (const auto& e : old_entities) {
    if (!keep.count(e.name_key)) GRAG_RETURN_IF_ERROR(store.DeleteEntity(e.id).status());
  }
  std::set<std::pair<int64_t, int64_t>> kept_pairs;
  for (size_t i = 0; i < g.relationships.size(); ++i) {
    const auto& r = g.relationships[i];
    const auto& d = jobs[g.entities.size() + i].result;
    if (auto it = old_rel_by_keys.find({r.source_key, r.target_key});
        it == old_rel_by_keys.end() || it->second->weight != r.weight ||
        it->second->description_hash != d.hash) {
      changed.insert(r.source_key);
      changed.insert(r.target_key);
    }
    RelationshipRecord rec;
    rec.source_id = id_of_key.at(r.source_key);
    rec.target_id = id_of_key.at(r.target_key);
    rec.weight = r.weight;
    rec.description = d.text;
    rec.description_hash = d.hash;
    rec.description_model = d.model;
    rec.description_basis = d.basis;
    GRAG_ASSIGN_OR_RETURN(int64_t id, store.UpsertRelationship(rec));
    GRAG_RETURN_IF_ERROR(store.SetRelationshipChunks(id, r.chunk_ids));
    kept_pairs.insert(std::minmax(rec.source_id, rec.target_id));
  }
  for (const auto& r : old_rels) {
    if (kept_pairs.count(std::minmax(r.source_id, r.target_id))) continue;
    // A relationship gone (or an entity gone with it): both ends changed, the ones that remain.
    for (int64_t end : {r.source_id, r.target_id}) {
      if (keep.count(key_of_id[end])) changed.insert(key_of_id[end]);
    }
    if (keep.count(key_of_id[r.source_id]) && keep.count(key_of_id[r.target_id])) {
      GRAG_RETURN_IF_ERROR(store.DeleteRelationship(r.id).status());
    }
  }
  GRAG_ASSIGN_OR_RETURN(std::optional<ClusteringRecord> clustered, store.LatestClustering());
  if (clustered && changed.size() != pending_before) {  // a first index needs no list
    GRAG_RETURN_IF_ERROR(store.SetMeta(kPendingChangesKey, nlohmann::json(changed).dump()));
  }
  GRAG_RETURN_IF_ERROR(store.ReplaceResolution(resolution.aliases, resolution.links));
  GRAG_RETURN_IF_ERROR(store.SetMeta("resolution_params", resolution.params));
  GRAG_RETURN_IF_ERROR(store.RecomputeGraphStats());
  GRAG_RETURN_IF_ERROR(tx.Commit());
  s.entities = static_cast<int64_t>(g.entities.size());
  s.relationships = static_cast<int64_t>(g.relationships.size());
  s.entities_changed = static_cast<int64_t>(changed.size() - pending_before);
  run.Progress("merge", 1, 1);
  return Status::Ok();
}

// ---------------------------------------------------------------- communities

// The graph community detection sees, in a fixed node order (by entity id).
struct CommunityGraph {
  std::vector<EntityRecord> entities;  // node i = entities[i]
  std::unordered_map<int64_t, uint32_t> node_of;
  std::vector<GraphEdge> edges;  // sorted
  std::string hash;              // of the graph and the clustering settings
};

Result<CommunityGraph> LoadCommunityGraph(Store& store, const CommunityConfig& cc) {
  CommunityGraph g;
  GRAG_ASSIGN_OR_RETURN(g.entities, store.ListEntities());
  GRAG_ASSIGN_OR_RETURN(std::vector<RelationshipRecord> rels, store.ListRelationships());
  std::sort(g.entities.begin(), g.entities.end(),
            [](const EntityRecord& a, const EntityRecord& b) { return a.id < b.id; });
  for (size_t i = 0; i < g.entities.size(); ++i) {
    g.node_of[g.entities[i].id] = static_cast<uint32_t>(i);
  }
  g.edges.reserve(rels.size());
  for (const auto& r : rels) {
    g.edges.push_back(
        {g.node_of.at(r.source_id), g.node_of.at(r.target_id), std::max(r.weight, 1e-6)});
  }
  std::sort(g.edges.begin(), g.edges.end(), [](const GraphEdge& a, const GraphEdge& b) {
    return std::tie(a.source, a.target) < std::tie(b.source, b.target);
  });
  Hasher h;
  h.Add("seed=" + std::to_string(cc.seed) + " resolution=" + std::to_string(cc.resolution) +
        " max_cluster_size=" + std::to_string(cc.max_cluster_size));
  for (const auto& e : g.entities) h.Add(std::to_string(e.id) + " " + e.name_key);
  for (const auto& e : g.edges) {
    h.Add(std::to_string(e.source) + "-" + std::to_string(e.target) + ":" +
          std::to_string(e.weight));
  }
  g.hash = h.HexDigest();
  return g;
}

// The stored hierarchy in the graph's node ids (members no longer in the graph left out).
Result<std::vector<PriorCluster>> LoadPriorClusters(Store& store, const CommunityGraph& g) {
  GRAG_ASSIGN_OR_RETURN(std::vector<CommunityRecord> stored, store.ListCommunities());
  std::vector<PriorCluster> prior;
  prior.reserve(stored.size());
  for (const auto& c : stored) {
    PriorCluster p;
    p.id = c.id;
    p.level = static_cast<int32_t>(c.level);
    for (int64_t e : c.entity_ids) {
      if (auto it = g.node_of.find(e); it != g.node_of.end()) p.members.push_back(it->second);
    }
    std::sort(p.members.begin(), p.members.end());
    prior.push_back(std::move(p));
  }
  return prior;
}

Status DetectCommunities(Run& run, IndexSummary& s) {
  Store& store = run.store();
  const auto& cc = run.config().communities;
  GRAG_ASSIGN_OR_RETURN(CommunityGraph g, LoadCommunityGraph(store, cc));
  GRAG_ASSIGN_OR_RETURN(std::optional<ClusteringRecord> last, store.LatestClustering());
  GRAG_ASSIGN_OR_RETURN(std::vector<PriorCluster> prior, LoadPriorClusters(store, g));
  if (last && last->graph_hash == g.hash && !prior.empty()) {
    // Same graph, same settings: the stored hierarchy stands.
    GRAG_RETURN_IF_ERROR(store.SetMeta(kPendingChangesKey, ""));
    for (const auto& p : prior) ++s.communities_per_level[p.level];
    s.modularity = last->modularity.value_or(0);
    s.communities_unchanged = true;
    run.Progress("communities", 1, 1);
    return Status::Ok();
  }

  LeidenOptions lo;
  lo.max_cluster_size = static_cast<size_t>(cc.max_cluster_size);
  lo.resolution = cc.resolution;
  lo.seed = static_cast<uint64_t>(cc.seed);
  GRAG_ASSIGN_OR_RETURN(ClusterHierarchy fresh, HierarchicalLeiden(g.entities.size(), g.edges, lo));
  ClusterHierarchy h;
  ClusteringRecord clustering;
  const bool warm = cc.incremental && !prior.empty();
  if (warm) {
    // Start from the previous partition so untouched regions keep their communities; compare
    // with the fresh run to catch a warm start stuck in a worse optimum.
    LeidenStart start = StartFrom(g.entities.size(), prior);
    // Only the changed entities (both ends of every new, reweighted or removed relationship
    // among them) may move; the rest keep their communities, as blocks. Not their neighbours
    // too: a hub's neighbours are half the graph. Without a known change set (a resumed run)
    // every node may move.
    GRAG_ASSIGN_OR_RETURN(const std::set<std::string> changed, PendingChanges(store));
    if (cc.local_updates && !changed.empty()) {
      start.movable.assign(g.entities.size(), 0);
      for (size_t i = 0; i < g.entities.size(); ++i) {
        if (changed.count(g.entities[i].name_key)) start.movable[i] = 1;
      }
    }
    GRAG_ASSIGN_OR_RETURN(ClusterHierarchy warmed,
                          HierarchicalLeiden(g.entities.size(), g.edges, lo, &start));
    const double drift = fresh.modularity - warmed.modularity;
    clustering.fresh_modularity = fresh.modularity;
    if (drift > cc.drift_threshold) {
      h = std::move(fresh);
      clustering.note = fmt::format(
          "full re-detection: the warm start's modularity {:.4f} was {:.4f} below a fresh "
          "run's {:.4f} (communities.drift_threshold {})",
          warmed.modularity, drift, h.modularity, cc.drift_threshold);
      s.community_note = clustering.note;
      Log(LogLevel::kInfo, "communities", clustering.note);
    } else {
      h = std::move(warmed);
      clustering.warm_start = true;
    }
  } else {
    h = std::move(fresh);
  }
  s.communities_warm_start = clustering.warm_start;

  // Ids stay stable: a community takes the id of the previous one it overlaps most.
  const std::vector<int64_t> ids = MatchClusterIds(h, prior);
  std::set<int64_t> old_ids;
  for (const auto& p : prior) old_ids.insert(p.id);
  std::vector<CommunityRecord> records;
  records.reserve(h.clusters.size());
  for (size_t i = 0; i < h.clusters.size(); ++i) {
    const auto& cl = h.clusters[i];
    CommunityRecord r;
    r.id = ids[i];
    r.level = cl.level;
    if (cl.parent >= 0) r.parent_id = ids[static_cast<size_t>(cl.parent)];
    r.entity_ids.reserve(cl.members.size());
    for (uint32_t m : cl.members) r.entity_ids.push_back(g.entities[m].id);
    records.push_back(std::move(r));
    ++s.communities_per_level[cl.level];
    if (old_ids.erase(ids[i]) > 0) {
      ++s.communities_kept;
    } else {
      ++s.communities_new;
    }
  }
  s.communities_removed = static_cast<int64_t>(old_ids.size());
  clustering.seed = cc.seed;
  clustering.resolution = cc.resolution;
  clustering.max_cluster_size = cc.max_cluster_size;
  clustering.modularity = h.modularity;
  clustering.graph_hash = g.hash;
  GRAG_ASSIGN_OR_RETURN(Transaction tx, store.Begin());
  GRAG_RETURN_IF_ERROR(store.ReplaceCommunities(clustering, records).status());
  GRAG_RETURN_IF_ERROR(store.SetMeta(kPendingChangesKey, ""));
  GRAG_RETURN_IF_ERROR(tx.Commit());
  s.modularity = h.modularity;
  run.Progress("communities", 1, 1);
  return Status::Ok();
}

// ---------------------------------------------------------------- reports

// The reports of every community: by the LLM, or (no LLM) assembled from the community's own
// sentences.
Result<ReportStageSummary> WriteReports(Run& run, const Tokenizer& tok, bool refresh_all) {
  const Config& c = run.config();
  auto progress = [&run](const ReportProgress& p) { run.Progress("reports", p.done, p.total); };
  ExtractiveReportOptions eo;
  eo.cancel = run.cancel_flag();
  if (run.chat() == nullptr) return GenerateExtractiveReports(run.store(), tok, eo, progress);
  // A community of a few entities (an island of two or three) is worth no call: its report is
  // assembled from its own sentences, so every entity still has a reported community.
  const int64_t min_size = c.communities.llm_report_min_size;
  eo.include = [min_size](const CommunityRecord& community) { return community.size < min_size; };
  ReportOptions ro;
  GRAG_ASSIGN_OR_RETURN(ro.prompt,
                        LoadPrompt(c.Resolve(c.prompts_dir), PromptId::kCommunityReport));
  ro.concurrency = static_cast<int>(LlmConcurrency(c));
  ro.json_mode = c.llm.json_mode;
  ro.cancel = run.cancel_flag();  // Ctrl-C: no new community starts
  ro.include = [min_size](const CommunityRecord& community) { return community.size >= min_size; };
  ro.refresh_threshold = c.communities.report_refresh_threshold;
  ro.refresh_all = refresh_all;
  // Small ones first: they are children a larger community's prompt may draw on.
  ReportStageSummary small;
  if (min_size > 0) {
    GRAG_ASSIGN_OR_RETURN(small, GenerateExtractiveReports(run.store(), tok, eo, progress));
  }
  GRAG_ASSIGN_OR_RETURN(ReportStageSummary out,
                        GenerateReports(run.store(), *run.chat(), tok, ro, progress));
  out.communities += small.communities;
  out.generated += small.generated;
  out.reused += small.reused;
  out.gaps += small.gaps;
  out.extractive = small.generated + small.reused;
  return out;
}

Status Reports(Run& run, IndexSummary& s, bool refresh_all) {
  GRAG_ASSIGN_OR_RETURN(const Tokenizer* tok, Tokenizer::Get(run.config().chunks.encoding));
  GRAG_ASSIGN_OR_RETURN(ReportStageSummary rs, WriteReports(run, *tok, refresh_all));
  s.reports_kept_stale = rs.kept_stale;
  s.reports_generated = rs.generated;
  s.reports_reused = rs.reused;
  s.reports_extractive = rs.extractive;
  s.report_gaps = rs.gaps;
  if (run.cancelled()) return Status::Cancelled("interrupted");
  return Status::Ok();
}

// ---------------------------------------------------------------- embeddings

struct EmbedItem {
  std::string owner_id;
  std::string text;
  std::string hash;
};

// Embeds `todo` (texts whose stored vector is missing or stale) in groups, storing each group as
// it arrives. The client spreads a group's batches over its concurrency slots.
Status EmbedOwner(Run& run, EmbeddingOwner owner, const std::vector<EmbedItem>& todo,
                  int64_t& written) {
  if (todo.empty()) return Status::Ok();
  const std::string stage = owner == EmbeddingOwner::kEntity  ? "embed entities"
                            : owner == EmbeddingOwner::kChunk ? "embed chunks"
                                                              : "embed reports";
  const size_t group =
      static_cast<size_t>(std::max<int64_t>(1, run.config().embeddings.batch_size)) *
      static_cast<size_t>(std::max<int64_t>(1, EmbeddingConcurrency(run.config())));
  int64_t done = 0;
  for (size_t start = 0; start < todo.size(); start += group) {
    if (run.cancelled()) return Status::Cancelled("interrupted");
    const size_t end = std::min(todo.size(), start + group);
    std::vector<std::string> texts;
    for (size_t i = start; i < end; ++i) texts.push_back(todo[i].text);
    auto reply = run.embedder()->Embed(texts);
    if (!reply.ok()) return reply.status().WithContext(stage);
    std::vector<EmbeddingRecord> records;
    for (size_t i = start; i < end; ++i) {
      EmbeddingRecord r;
      r.owner = owner;
      r.owner_id = todo[i].owner_id;
      r.model = run.embedder()->model();
      r.vector = std::move(reply->vectors[i - start]);
      r.input_hash = todo[i].hash;
      records.push_back(std::move(r));
    }
    GRAG_RETURN_IF_ERROR(run.store().PutEmbeddings(records).WithContext(stage));
    written += static_cast<int64_t>(records.size());
    done += static_cast<int64_t>(records.size());
    run.Progress(stage, done, static_cast<int64_t>(todo.size()));
  }
  return Status::Ok();
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

Status Embed(Run& run, IndexSummary& s) {
  if (run.embedder() == nullptr) return Status::Ok();
  Store& store = run.store();
  for (EmbeddingOwner owner :
       {EmbeddingOwner::kEntity, EmbeddingOwner::kChunk, EmbeddingOwner::kReport}) {
    GRAG_RETURN_IF_ERROR(DropOtherModelsVectors(run, owner));
  }
  {
    GRAG_ASSIGN_OR_RETURN(auto stored, store.ListEmbeddingHashes(EmbeddingOwner::kEntity));
    GRAG_ASSIGN_OR_RETURN(std::vector<EntityRecord> entities, store.ListEntities());
    std::vector<EmbedItem> todo;
    for (const auto& e : entities) {
      std::string text = e.name + ": " + e.description;
      std::string hash = Sha256Hex(text);
      std::string id = std::to_string(e.id);
      if (Stale(stored, id, hash))
        todo.push_back({std::move(id), std::move(text), std::move(hash)});
    }
    GRAG_RETURN_IF_ERROR(EmbedOwner(run, EmbeddingOwner::kEntity, todo, s.embeddings_written));
  }
  {
    GRAG_ASSIGN_OR_RETURN(auto stored, store.ListEmbeddingHashes(EmbeddingOwner::kChunk));
    GRAG_ASSIGN_OR_RETURN(std::vector<std::string> ids, store.ListChunkIds());
    std::vector<EmbedItem> todo;
    for (const auto& id : ids) {
      // A chunk id already is a hash of its text (and document): only new chunks are read.
      if (!Stale(stored, id, id)) continue;
      GRAG_ASSIGN_OR_RETURN(auto chunk, store.GetChunk(id));
      if (chunk) todo.push_back({id, std::move(chunk->text), id});
    }
    GRAG_RETURN_IF_ERROR(EmbedOwner(run, EmbeddingOwner::kChunk, todo, s.embeddings_written));
  }
  {
    GRAG_ASSIGN_OR_RETURN(auto stored, store.ListEmbeddingHashes(EmbeddingOwner::kReport));
    GRAG_ASSIGN_OR_RETURN(std::vector<ReportRecord> reports, store.ListReports());
    std::vector<EmbedItem> todo;
    for (const auto& r : reports) {
      if (r.status != ReportStatus::kOk || r.full_content.empty()) continue;
      std::string hash = Sha256Hex(r.full_content);
      std::string id = std::to_string(r.community_id);
      if (Stale(stored, id, hash)) todo.push_back({std::move(id), r.full_content, std::move(hash)});
    }
    GRAG_RETURN_IF_ERROR(EmbedOwner(run, EmbeddingOwner::kReport, todo, s.embeddings_written));
  }
  return Status::Ok();
}

}  // namespace

namespace {
constexpr std::string_view kEndpointPrefix = "endpoint:";
}  // namespace

std::map<std::string, int64_t> EndpointRunCounters(const std::vector<EndpointUsage>& endpoints) {
  std::map<std::string, int64_t> out;
  for (const EndpointUsage& e : endpoints) {
    const std::string k = std::string(kEndpointPrefix) + e.role + ":" + e.name + ":";
    out[k + "requests"] = e.requests;
    out[k + "errors"] = e.errors;
    out[k + "benched"] = e.benched;
    out[k + "tokens_in"] = e.prompt_tokens;
    out[k + "tokens_out"] = e.completion_tokens;
    out[k + "latency_ms_sum"] = e.latency_ms_sum;
    out[k + "answered"] = e.answered();
  }
  return out;
}

std::vector<EndpointUsage> EndpointsFromRunCounters(
    const std::map<std::string, int64_t>& counters) {
  std::vector<EndpointUsage> out;
  for (const auto& [key, value] : counters) {
    if (!key.starts_with(kEndpointPrefix)) continue;
    // endpoint:<role>:<name>:<figure>; the name may hold colons (host:port), role and figure not.
    const std::string_view rest = std::string_view(key).substr(kEndpointPrefix.size());
    const size_t role_end = rest.find(':');
    const size_t figure_start = rest.rfind(':');
    if (role_end == std::string_view::npos || figure_start <= role_end) continue;
    const std::string role(rest.substr(0, role_end));
    const std::string name(rest.substr(role_end + 1, figure_start - role_end - 1));
    const std::string_view figure = rest.substr(figure_start + 1);
    auto it = std::find_if(out.begin(), out.end(), [&](const EndpointUsage& e) {
      return e.role == role && e.name == name;
    });
    if (it == out.end()) {
      out.emplace_back();
      it = std::prev(out.end());
      it->role = role;
      it->name = name;
    }
    if (figure == "requests") it->requests = value;
    if (figure == "errors") it->errors = value;
    if (figure == "benched") it->benched = value;
    if (figure == "tokens_in") it->prompt_tokens = value;
    if (figure == "tokens_out") it->completion_tokens = value;
    if (figure == "latency_ms_sum") it->latency_ms_sum = value;
    if (figure == "answered") it->latency_histogram = {value};  // a count without the spread
  }
  return out;
}

ExtractorId ExtractorFor(const IndexContext& context) {
  if (context.chat == nullptr) return {ExtractorKind::kNlp, std::string(kNlpExtractorModel)};
  return {ExtractorKind::kLlm, context.chat->model()};
}

ChunkOptions ChunkOptionsFor(const Config& c) {
  ChunkOptions o;
  o.size = static_cast<size_t>(c.chunks.size);
  o.overlap = static_cast<size_t>(c.chunks.overlap);
  o.encoding = c.chunks.encoding;
  o.prepend_title = c.chunks.prepend_title;
  return o;
}

LoadOptions LoadOptionsFor(const Config& c) {
  LoadOptions o;
  o.base_dir = c.Resolve(c.input.dir);
  o.root_dir = c.root;
  o.json_text_field = c.input.json_text_field;
  o.json_id_field = c.input.json_id_field;
  o.json_title_field = c.input.json_title_field;
  o.csv_text_column = c.input.csv_text_column;
  o.csv_id_column = c.input.csv_id_column;
  o.csv_title_column = c.input.csv_title_column;
  o.invalid_utf8 = ParseInvalidUtf8Policy(c.input.invalid_utf8).value_or(InvalidUtf8Policy::kSkip);
  return o;
}

Result<ChunkPreview> ChunkFiles(const std::vector<std::string>& paths, const Config& config,
                                const ChunkOptions& options, const std::string& base_dir) {
  LoadOptions load_options = LoadOptionsFor(config);
  load_options.base_dir = base_dir;
  GRAG_ASSIGN_OR_RETURN(LoadResult loaded, LoadDocuments(paths, load_options));
  ChunkPreview out;
  out.issues = std::move(loaded.issues);
  for (auto& doc : loaded.documents) {
    ChunkedDocument d;
    GRAG_ASSIGN_OR_RETURN(d.chunks, ChunkDocument(doc, options));
    for (const auto& c : d.chunks) d.tokens += c.n_tokens;
    out.chunks += static_cast<int64_t>(d.chunks.size());
    out.tokens += d.tokens;
    d.document = std::move(doc);
    out.documents.push_back(std::move(d));
  }
  return out;
}

Result<IndexPlan> PlanIndex(const Config& config, const IndexRequest& request,
                            IndexContext& context) {
  if (context.store == nullptr) return Status::InvalidArgument("PlanIndex needs a store");
  GRAG_ASSIGN_OR_RETURN(Gathered g, Gather(config, request, *context.store, context.cancel));
  return PlanFrom(g, *context.store, ExtractorFor(context), config);
}

// RunIndex with the context as given (the budget gate, if any, already in place).
static Result<IndexSummary> RunIndexWith(const Config& config, const IndexRequest& request,
                                         IndexContext& context) {
  Run run(config, context);
  IndexSummary s;
  Store& store = *context.store;
  GRAG_ASSIGN_OR_RETURN(std::optional<ClusteringRecord> clustered, store.LatestClustering());
  GRAG_ASSIGN_OR_RETURN(s.run_id, store.BeginRun("index"));
  run.SetRunId(s.run_id);
  const ExtractorId extractor = ExtractorFor(context);
  s.no_llm = context.chat == nullptr;
  if (context.embedder != nullptr) s.embedding_model = context.embedder->model();

  struct Stage {
    const char* name;
    std::function<Status()> fn;
  };
  const std::vector<Stage> stages = {
      {"load", [&] { return LoadAndChunk(run, request, extractor, s, s.plan); }},
      {"extract", [&] { return Extract(run, extractor, s); }},
      {"merge", [&] { return Merge(run, extractor, s); }},
      {"communities", [&] { return DetectCommunities(run, s); }},
      {"reports", [&] { return Reports(run, s, request.refresh_reports); }},
      {"embed", [&] { return Embed(run, s); }},
  };
  Status failure;
  for (const auto& stage : stages) {
    if (request.graph_only &&
        (std::string_view(stage.name) == "load" || std::string_view(stage.name) == "extract")) {
      continue;
    }
    (void)store.UpdateRun(s.run_id, stage.name, {});
    const int64_t calls_before = run.ChatCalls();
    Status st = stage.fn();
    run.FlushUsage();
    const int64_t stage_calls = run.ChatCalls() - calls_before;
    const std::string_view name = stage.name;
    if (name == "extract") {
      s.calls.extract = std::min(stage_calls, s.chunks_extracted + s.chunks_skipped);
      s.calls.glean = stage_calls - s.calls.extract;
    } else if (name == "merge") {
      s.calls.resolve = s.resolution_llm_calls;
      s.calls.summarize = stage_calls - s.calls.resolve;
    } else if (name == "reports") {
      s.calls.report = stage_calls;
    }
    if (!st.ok()) {
      failure = st;
      break;
    }
  }
  s.usage = run.Usage();
  s.elapsed_seconds = run.Elapsed();
  std::map<std::string, int64_t> counters = Run::UsageCounters(s.usage);
  counters["chunks_extracted"] = s.chunks_extracted;
  counters["chunks_skipped"] = s.chunks_skipped;
  counters["reports_generated"] = s.reports_generated;
  counters["calls_extract"] = s.calls.extract;
  counters["calls_glean"] = s.calls.glean;
  counters["calls_resolve"] = s.calls.resolve;
  counters["calls_summarize"] = s.calls.summarize;
  counters["calls_report"] = s.calls.report;
  counters["update_run"] = clustered.has_value() ? 1 : 0;  // for estimates (EstimateCalls)
  (void)store.UpdateRun(s.run_id, "", counters);
  if (!failure.ok()) {
    (void)store.FinishRun(
        s.run_id,
        failure.code() == ErrorCode::kCancelled ? RunStatus::kInterrupted : RunStatus::kFailed,
        failure.message());
    return failure;
  }
  GRAG_RETURN_IF_ERROR(store.FinishRun(s.run_id, RunStatus::kOk));
  return s;
}

Result<IndexSummary> RunIndex(const Config& config, const IndexRequest& request,
                              IndexContext& context) {
  if (context.store == nullptr) return Status::InvalidArgument("RunIndex needs a store");
  // Within a budget, the run's calls go through the budget's gate.
  std::optional<BudgetedChat> budgeted;
  IndexContext gated = context;
  if (context.chat != nullptr && (config.llm.max_calls > 0 || config.llm.max_cost > 0)) {
    budgeted.emplace(*context.chat, config.llm);
    gated.chat = &*budgeted;
  }
  return RunIndexWith(config, request, gated);
}

}  // namespace grag
