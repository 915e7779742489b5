// The index pipeline's load and chunk stage: what RunIndex calls (stages.h).
#include "stages.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

#include "grag/chunker.h"
#include "grag/log.h"

namespace grag {
namespace {

// A document to write, with its chunks.
struct ToWrite {
  Document doc;
  std::vector<ChunkRecord> chunks;
};

// Where the settings the stored chunks were cut with are kept.
constexpr std::string_view kChunkSettingsKey = "chunk_settings";

// What a document's chunks depend on besides its text and title. The version is bumped whenever
// the chunker changes what it cuts.
std::string ChunkSettings(const ChunkOptions& o) {
  return fmt::format("chunker v1 size={} overlap={} encoding={} title={}", o.size, o.overlap,
                     o.encoding, o.prepend_title);
}

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
    r.start_byte = static_cast<int64_t>(ch.start_byte);
    r.end_byte = static_cast<int64_t>(ch.end_byte);
    records.push_back(std::move(r));
  }
  return records;
}

// What a run costs per chunk (and per token of its chunks) in an index without history of its
// own, measured by bench/index_cost on extractions shaped like a real model's (generated
// ~100-token passages at GPT-3.5's density, and Microsoft's extraction of the book in 1,200-token
// chunks): selective gleaning takes about one chunk in five; the judge runs into its cap
// (resolution.max_judge_share) on both; summaries follow the text's volume (descriptions pile up
// per token of text), and LLM reports a share of the chunks plus one per ~800 tokens, at most
// 0.43 per distinct name the text holds.
constexpr double kGleanShare = 0.22;    // of the chunks, with extraction.glean_below_yield
constexpr double kJudgePerChunk = 0.1;  // uncapped
constexpr double kSummariesPerToken = 0.00014;
constexpr double kReportsPerChunk = 0.36;
constexpr double kReportsPerToken = 0.0012;
// ... but no more than the text names things to report on: a text that names little (the sparse
// transcripts of bench/incremental_cost) gets few reports whatever its length.
constexpr double kReportsPerName = 0.43;
// An update (an existing graph): bench/incremental_cost's transcripts, adding 1-10%.
constexpr double kUpdateSummariesPerChunk = 0.15;
constexpr double kUpdateReportsPerChunk = 0.5;
// Prompt tokens per call beyond the chunk's own (extraction: the prompt; gleaning: the prompt
// and the names found), and per call of the other kinds, on the same benchmark.
constexpr double kExtractPromptTokens = 200;
constexpr double kGleanPromptTokens = 350;
constexpr double kJudgePromptTokens = 2400;
constexpr double kSummaryPromptTokens = 1500;
constexpr double kReportPromptTokens = 1500;
constexpr double kCompletionTokens = 400;
// The model roles an index run calls (grag/config.h's LlmRoleConfig), as its counters name them.
constexpr const char* kIndexRoles[] = {"extract", "summarize", "resolve"};

// Distinct capitalised words not at a sentence's start ("Marley", "London"): what the text
// names, roughly, in one pass over it. The reports a model's graph gets follow the number of
// things it names more closely than the chunks or tokens do: sparse transcripts and dense
// encyclopedic passages differ ten times in names per token.
class NameCounter {
 public:
  void Add(std::string_view text) {
    bool sentence_start = true;
    std::string run;  // the capitalised words in a row so far ("jacob marley")
    auto settle = [&] {
      if (!run.empty()) seen_.insert(std::move(run));
      run.clear();
    };
    size_t i = 0;
    while (i < text.size()) {
      const char ch = text[i];
      if (std::isalpha(static_cast<unsigned char>(ch))) {
        size_t j = i;
        while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) ||
                                   static_cast<unsigned char>(text[j]) >= 0x80)) {
          ++j;
        }
        if (!sentence_start && ch >= 'A' && ch <= 'Z' && j - i > 1) {
          if (!run.empty()) run += ' ';
          for (size_t k = i; k < j; ++k) {
            run += static_cast<char>(std::tolower(static_cast<unsigned char>(text[k])));
          }
        } else {
          settle();
        }
        sentence_start = false;
        i = j;
        continue;
      }
      if (ch != ' ') settle();
      if (ch == '.' || ch == '!' || ch == '?' || ch == '\n' || ch == '"') sentence_start = true;
      ++i;
    }
    settle();
  }
  int64_t distinct() const { return static_cast<int64_t>(seen_.size()); }

 private:
  std::unordered_set<std::string> seen_;
};

Result<CallEstimate> EstimateCalls(Store& store, const Config& c, int64_t chunks, int64_t tokens,
                                   int64_t names) {
  CallEstimate e;
  GRAG_ASSIGN_OR_RETURN(std::optional<ClusteringRecord> clustered, store.LatestClustering());
  e.update = clustered.has_value();
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
    for (const char* role : kIndexRoles) {
      for (const char* way : {"tokens_in_", "tokens_out_"}) {
        const std::string key = way + std::string(role);
        sum[key] += get(key.c_str());
      }
    }
  }
  const auto n = static_cast<double>(chunks);
  const double t = static_cast<double>(std::max<int64_t>(tokens, 0));
  auto count = [](double x) { return static_cast<int64_t>(std::llround(std::max(0.0, x))); };
  // The judge's cap: a share of the extraction calls, at least one call.
  const double judge_cap = c.resolution.max_judge_share > 0
                               ? std::max(1.0, std::ceil(c.resolution.max_judge_share * n))
                               : 1e18;
  e.calls.extract = chunks;
  // Per model role (extract: extraction and gleaning; resolve: the judge; summarize: summaries
  // and reports), so that each is costed at its role's prices.
  std::map<std::string, std::pair<double, double>> role_tokens;  // role -> tokens in, out
  if (e.history_runs > 0) {
    const double per = sum["calls_extract"];
    e.calls.glean = count(n * sum["calls_glean"] / per);
    e.calls.resolve = count(std::min(judge_cap, n * sum["calls_resolve"] / per));
    e.calls.summarize = count(n * sum["calls_summarize"] / per);
    e.calls.report = count(n * sum["calls_report"] / per);
    // Tokens a call of each role took in the earlier runs (runs that kept no tokens by role:
    // the average call's).
    const double any_calls = std::max(1.0, sum["llm_calls"]);
    const std::map<std::string, std::pair<double, double>> calls_by_role = {
        {"extract",
         {sum["calls_extract"] + sum["calls_glean"],
          static_cast<double>(e.calls.extract + e.calls.glean)}},
        {"resolve", {sum["calls_resolve"], static_cast<double>(e.calls.resolve)}},
        {"summarize",
         {sum["calls_summarize"] + sum["calls_report"],
          static_cast<double>(e.calls.summarize + e.calls.report)}}};
    for (const auto& [role, calls] : calls_by_role) {
      const auto& [past, expected] = calls;
      const double in = sum["tokens_in_" + role];
      const double out = sum["tokens_out_" + role];
      const bool known = past > 0 && in > 0;
      role_tokens[role] = {expected * (known ? in / past : sum["tokens_in"] / any_calls),
                           expected * (known ? out / past : sum["tokens_out"] / any_calls)};
    }
  } else {
    const double rounds = static_cast<double>(std::max<int64_t>(0, c.extraction.gleanings));
    const double gleaned = c.extraction.glean_below_yield > 0 ? kGleanShare : 1.0;
    e.calls.glean = count(n * rounds * gleaned);
    e.calls.resolve = c.resolution.enabled ? count(std::min(judge_cap, kJudgePerChunk * n)) : 0;
    e.calls.summarize = count(e.update ? kUpdateSummariesPerChunk * n : kSummariesPerToken * t);
    e.calls.report = count(e.update ? kUpdateReportsPerChunk * n
                                    : std::min(kReportsPerChunk * n + kReportsPerToken * t,
                                               kReportsPerName * static_cast<double>(names)));
    Log(LogLevel::kDebug, "plan",
        fmt::format("estimated from {} chunks, {} tokens, {} names", chunks, tokens, names));
    const double per_chunk = n > 0 ? t / n : 0;
    auto out = [](int64_t calls) { return static_cast<double>(calls) * kCompletionTokens; };
    role_tokens["extract"] = {
        t + kExtractPromptTokens * n +
            static_cast<double>(e.calls.glean) * (per_chunk + kGleanPromptTokens),
        out(e.calls.extract + e.calls.glean)};
    role_tokens["resolve"] = {static_cast<double>(e.calls.resolve) * kJudgePromptTokens,
                              out(e.calls.resolve)};
    role_tokens["summarize"] = {static_cast<double>(e.calls.summarize) * kSummaryPromptTokens +
                                    static_cast<double>(e.calls.report) * kReportPromptTokens,
                                out(e.calls.summarize + e.calls.report)};
  }
  if (c.reports.mode == "lazy") {
    // The index writes no LLM report: what eager mode would spend on them moves to the global
    // questions that read them. Earlier lazy runs made no report calls, so with only those the
    // typical ratio says what eager mode would.
    const int64_t eager = e.calls.report > 0 || e.update
                              ? e.calls.report
                              : count(std::min(kReportsPerChunk * n + kReportsPerToken * t,
                                               kReportsPerName * static_cast<double>(names)));
    auto& [in, out] = role_tokens["summarize"];
    const double calls = static_cast<double>(e.calls.summarize + e.calls.report);
    const double kept = calls > 0 ? static_cast<double>(e.calls.summarize) / calls : 1.0;
    in *= kept;
    out *= kept;
    e.deferred_reports = eager;
    e.calls.report = 0;
  }
  const bool priced = c.llm.Priced();
  for (const char* role : kIndexRoles) {
    RoleCost r;
    r.role = role;
    r.calls = role == std::string_view("extract")   ? e.calls.extract + e.calls.glean
              : role == std::string_view("resolve") ? e.calls.resolve
                                                    : e.calls.summarize + e.calls.report;
    r.prompt_tokens = count(role_tokens[role].first);
    r.completion_tokens = count(role_tokens[role].second);
    if (priced) {
      r.cost = (static_cast<double>(r.prompt_tokens) * c.llm.InputPrice(role) +
                static_cast<double>(r.completion_tokens) * c.llm.OutputPrice(role)) /
               1e6;
      e.cost = e.cost.value_or(0) + *r.cost;
    }
    e.prompt_tokens += r.prompt_tokens;
    e.completion_tokens += r.completion_tokens;
    e.by_role.push_back(std::move(r));
  }
  return e;
}

// The load stage in one pass over the input: each document is read, compared with the stored
// one, chunked unless it is settled (stored as read and chunked under the settings in force),
// counted in the plan and, with a run (not when only planning), written by batches, so that no
// more of the input than one batch is held at once. The plan is complete once the input has
// been read; the run gets it then, before any document is removed and before any model call.
class InputLoader {
 public:
  InputLoader(const Config& c, const IndexRequest& request, Store& store,
              const ExtractorId& extractor, const std::atomic<bool>* cancel, Run* run,
              IndexPlan& plan, LoadSummary& s)
      : c_(c),
        request_(request),
        store_(store),
        extractor_(extractor),
        cancel_(cancel),
        run_(run),
        plan_(plan),
        s_(s),
        copts_(ChunkOptionsFor(c)),
        settings_(ChunkSettings(copts_)) {}

  Status Load() {
    GRAG_RETURN_IF_ERROR(Open());
    GRAG_RETURN_IF_ERROR(ReadDocuments());
    issues_ = reader_ ? reader_->TakeIssues() : std::vector<LoadIssue>{};
    skipped_ =
        std::count_if(issues_.begin(), issues_.end(), [](const LoadIssue& i) { return i.skipped; });
    GRAG_RETURN_IF_ERROR(FailWhenNothingWasRead());
    FindDocumentsGoneFromFolders();
    GRAG_RETURN_IF_ERROR(CompletePlan());
    if (run_ == nullptr) return Status::Ok();
    return Apply();
  }

 private:
  int64_t Total() const {
    return seen_ + static_cast<int64_t>((reader_ ? reader_->Remaining() : 0) + to_remove_.size());
  }

  // The stored documents, the removals asked for, the input to read and the chunk settings in
  // force against those the stored chunks were cut with.
  Status Open() {
    GRAG_ASSIGN_OR_RETURN(stored_, store_.ListDocuments());
    for (const auto& d : stored_) stored_by_id_.emplace(d.id, &d);
    for (const auto& id : request_.remove) {
      if (!stored_by_id_.count(id)) {
        return Status::NotFound("no document \"" + id +
                                "\" in the index (`grag stats --documents` lists them)");
      }
      to_remove_.push_back(id);
    }
    whole_input_ = request_.paths.empty() && request_.remove.empty();
    paths_ = request_.paths;
    if (whole_input_) {
      const std::string input = c_.Resolve(c_.input.dir);
      std::error_code ec;
      if (!std::filesystem::is_directory(input, ec)) {
        return Status::NotFound("input folder " + input +
                                " does not exist: put documents there or name files to index");
      }
      paths_.push_back(input);
    }
    if (!paths_.empty()) {
      GRAG_ASSIGN_OR_RETURN(DocumentReader opened,
                            DocumentReader::Open(paths_, LoadOptionsFor(c_)));
      reader_.emplace(std::move(opened));
    }

    GRAG_ASSIGN_OR_RETURN(std::optional<std::string> stored_settings,
                          store_.GetMeta(kChunkSettingsKey));
    settings_unchanged_ = stored_settings && *stored_settings == settings_;
    // The chunks an earlier run stored_ but did not get to (or skipped), as they were before this
    // run wrote anything.
    GRAG_ASSIGN_OR_RETURN(pending_, store_.ChunksNeedingExtraction(extractor_));
    pending_set_ = std::set<std::string>(pending_.begin(), pending_.end());
    return Status::Ok();
  }

  // Writes the batch read so far (nothing when only planning), one transaction.
  Status WriteBatch() {
    if (batch_.empty()) return Status::Ok();
    if (run_ == nullptr) {  // only planning
      batch_.clear();
      batch_bytes_ = 0;
      return Status::Ok();
    }
    if (run_->cancelled()) return Status::Cancelled("interrupted");
    std::vector<std::pair<DocumentChange, ChunkChanges>> changes;
    {
      GRAG_ASSIGN_OR_RETURN(Transaction tx, store_.BeginAllOrNothing());
      for (const ToWrite& w : batch_) {
        GRAG_ASSIGN_OR_RETURN(DocumentChange change, store_.UpsertDocument(w.doc));
        GRAG_ASSIGN_OR_RETURN(ChunkChanges cc, store_.ReplaceDocumentChunks(w.doc.id, w.chunks));
        changes.emplace_back(change, cc);
      }
      GRAG_RETURN_IF_ERROR(tx.Commit());
    }
    batch_.clear();
    batch_bytes_ = 0;
    for (const auto& [change, cc] : changes) {
      switch (change) {
        case DocumentChange::kAdded:
          ++s_.documents_added;
          break;
        case DocumentChange::kChanged:
          ++s_.documents_changed;
          break;
        case DocumentChange::kUnchanged:
          ++s_.documents_unchanged;
          break;
      }
      s_.chunks_added += cc.added;
      s_.chunks_removed += cc.removed;
      run_->Progress("load", ++done_, Total());
    }
    return Status::Ok();
  }

  // Each document read, compared with the stored one, counted in the plan and, unless settled,
  // chunked and written by batches.
  Status ReadDocuments() {
    while (reader_) {
      if (cancel_ != nullptr && cancel_->load()) return Status::Cancelled("interrupted");
      std::optional<Document> next = reader_->Next();
      if (!next) break;
      Document& doc = *next;
      ++seen_;
      present_.insert(doc.id);
      sources_.insert(doc.source_path);
      auto it = stored_by_id_.find(doc.id);
      const bool is_stored = it != stored_by_id_.end();
      const bool changed = is_stored && it->second->content_hash != doc.content_hash;
      if (!is_stored) {
        plan_.documents_added.push_back(doc.id);
      } else if (changed) {
        plan_.documents_changed.push_back(doc.id);
      } else {
        ++plan_.documents_unchanged;
      }
      if (settings_unchanged_ && is_stored && !changed && it->second->title == doc.title &&
          it->second->source_path == doc.source_path) {
        // Settled: no write.
        if (run_ != nullptr) {
          ++s_.documents_unchanged;
          run_->Progress("load", ++done_, Total());
        }
        continue;
      }
      if (!pending_.empty()) reloaded_.insert(doc.id);
      GRAG_ASSIGN_OR_RETURN(std::vector<ChunkRecord> chunks, ChunkRecords(doc, copts_));
      // A chunk is extracted unless it is stored (under this document: its id depends on the
      // document's) and extracted already.
      std::set<std::string> old;
      if (is_stored) {
        GRAG_ASSIGN_OR_RETURN(std::vector<ChunkRecord> stored_chunks, store_.ListChunks(doc.id));
        for (auto& ch : stored_chunks) old.insert(std::move(ch.id));
      }
      std::set<std::string> now;
      for (const auto& ch : chunks) {
        now.insert(ch.id);
        if (!old.count(ch.id) || pending_set_.count(ch.id)) {
          ++plan_.chunks_to_extract;
          tokens_to_extract_ += ch.n_tokens;
          names_.Add(ch.text);
        }
      }
      if (changed) {
        for (const auto& id : old) plan_.chunks_removed += now.count(id) ? 0 : 1;
      }
      batch_bytes_ += doc.text.size();
      batch_.push_back({std::move(doc), std::move(chunks)});
      if (batch_.size() >= kBatchDocuments || batch_bytes_ >= kBatchBytes) {
        GRAG_RETURN_IF_ERROR(WriteBatch());
      }
    }
    return WriteBatch();
  }

  // Nothing to index and something went wrong: a failure, not an empty success. Nothing is
  // removed either (and nothing was written).
  Status FailWhenNothingWasRead() const {
    if (seen_ == 0 && skipped_ > 0) {
      std::string first = issues_.front().path + ": " + issues_.front().message;
      for (const auto& i : issues_) {
        if (i.skipped) {
          first = i.path + ": " + i.message;
          break;
        }
      }
      return Status::IoError("no input file could be read (" + std::to_string(skipped_) +
                             (skipped_ == 1 ? " problem" : " problems") + "; first: " + first +
                             ")");
    }
    return Status::Ok();
  }

  // Folders are synchronised: a stored document that came from a folder being indexed and whose
  // file is gone from it leaves the index; so does a record gone from a file that was read
  // cleanly. A document whose file is still there but could not be read this time (unreadable,
  // invalid UTF-8, a bad record) is kept: a transient problem must never delete work.
  void FindDocumentsGoneFromFolders() {
    std::vector<std::string> folders;
    if (request_.sync_folders || whole_input_) {
      for (const auto& p : paths_) {
        std::error_code ec;
        if (std::filesystem::is_directory(p, ec)) folders.push_back(p);
      }
    }
    if (!folders.empty()) {
      const std::string root = c_.root;
      std::set<std::string> troubled;  // source files with a problem this run
      for (const auto& issue : issues_) {
        if (issue.skipped) troubled.insert(issue.source_path);
      }
      // Source files that gave documents and no problem.
      std::set<std::string> read_cleanly;
      for (const auto& source : sources_) {
        if (!troubled.count(source)) read_cleanly.insert(source);
      }
      const std::string input_dir = c_.Resolve(c_.input.dir);
      for (const auto& d : stored_) {
        if (present_.count(d.id)) continue;
        if (std::find(to_remove_.begin(), to_remove_.end(), d.id) != to_remove_.end()) continue;
        // The stored_ source path is relative to the project root. Indexes written before that may
        // hold one relative to another working directory; for a plain file the id (its path
        // relative to the input folder) locates it too. A record's id says nothing about its file:
        // it is judged by the stored_ path alone, and kept when that does not lead anywhere.
        const std::string stored_file = ResolveSourcePath(d.source_path, root);
        const std::string source = SourcePathFor(stored_file, root);
        std::vector<std::string> candidates = {stored_file};
        const bool plain_file =
            d.id.find('#') == std::string::npos &&
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
          to_remove_.push_back(d.id);
        } else {
          Log(LogLevel::kWarn, "load",
              "kept " + d.id + ": its file " + d.source_path +
                  " is still there but gave no document");
        }
      }
    }
  }

  // The removals in the plan, the pending chunks of documents not chunked now, and the
  // estimate of the calls.
  Status CompletePlan() {
    plan_.load_issues = issues_;
    const std::set<std::string> removed(to_remove_.begin(), to_remove_.end());
    for (const auto& id : to_remove_) {
      plan_.documents_removed.push_back(id);
      auto it = stored_by_id_.find(id);
      plan_.chunks_removed += it != stored_by_id_.end() ? it->second->chunk_count : 0;
    }
    // Chunks an earlier run stored but did not get to (or skipped), in documents not chunked now
    // (not read, or settled): only the pending chunks are read, to learn their document. Those of
    // documents chunked now may have been replaced already; they are not counted here anyway.
    if (reloaded_.size() < stored_by_id_.size()) {
      for (const auto& id : pending_) {
        GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk, store_.GetChunk(id));
        if (chunk && !reloaded_.count(chunk->document_id) && !removed.count(chunk->document_id)) {
          ++plan_.chunks_to_extract;
          tokens_to_extract_ += chunk->n_tokens;
          names_.Add(chunk->text);
        }
      }
    }
    plan_.extraction_calls_max =
        extractor_.kind == ExtractorKind::kLlm
            ? plan_.chunks_to_extract * (1 + std::max<int64_t>(0, c_.extraction.gleanings))
            : 0;
    if (extractor_.kind == ExtractorKind::kLlm && plan_.chunks_to_extract > 0) {
      GRAG_ASSIGN_OR_RETURN(plan_.estimate, EstimateCalls(store_, c_, plan_.chunks_to_extract,
                                                          tokens_to_extract_, names_.distinct()));
    }
    return Status::Ok();
  }

  // With a run: the plan announced, the documents removed, the chunk settings recorded.
  Status Apply() {
    s_.load_issues = std::move(issues_);
    for (const auto& issue : s_.load_issues) {
      Log(issue.skipped ? LogLevel::kWarn : LogLevel::kInfo, "load",
          issue.path + ": " + issue.message);
    }
    run_->Plan(plan_);
    for (const auto& id : to_remove_) {
      GRAG_ASSIGN_OR_RETURN(bool was_removed, store_.DeleteDocument(id));
      if (was_removed) {
        ++s_.documents_removed;
        s_.chunks_removed += stored_by_id_.at(id)->chunk_count;
        Log(LogLevel::kInfo, "index", "removed " + id);
      }
      run_->Progress("load", ++done_, Total());
    }
    // Recorded only when every document is chunked under them by this run_: a file that could not
    // be read this time keeps chunks cut under the old ones.
    if (whole_input_ && !settings_unchanged_ && skipped_ == 0) {
      GRAG_RETURN_IF_ERROR(store_.SetMeta(kChunkSettingsKey, settings_));
    }
    GRAG_ASSIGN_OR_RETURN(s_.chunks, store_.CountChunks());
    return Status::Ok();
  }

  // Documents go in by batches, a transaction each: a commit per document cost more than
  // chunking it (each writes its pages and a full-text segment again). A run stopped mid-batch
  // reads that batch again next time, which costs no model call; progress counts a document
  // only once its batch is committed.
  static constexpr size_t kBatchDocuments = 64;
  static constexpr size_t kBatchBytes = size_t{4} << 20;

  const Config& c_;
  const IndexRequest& request_;
  Store& store_;
  const ExtractorId& extractor_;
  const std::atomic<bool>* cancel_;
  Run* run_;
  IndexPlan& plan_;
  LoadSummary& s_;
  const ChunkOptions copts_;
  // A document stored as it is read now, chunked under these settings, keeps its chunks as
  // they are; any other is chunked again (unchanged chunks keep their ids and extraction).
  const std::string settings_;
  bool settings_unchanged_ = false;
  bool whole_input_ = false;
  std::vector<DocumentInfo> stored_;
  std::map<std::string, const DocumentInfo*> stored_by_id_;
  std::vector<std::string> to_remove_;  // document ids
  std::vector<std::string> paths_;
  std::optional<DocumentReader> reader_;
  // The chunks an earlier run stored but did not get to (or skipped), as they were before
  // this run wrote anything.
  std::vector<std::string> pending_;
  std::set<std::string> pending_set_;
  int64_t tokens_to_extract_ = 0;  // tokens of the chunks to extract (for the estimate)
  NameCounter names_;              // the names they hold, roughly (for the estimate)
  int64_t seen_ = 0;               // documents read
  int64_t done_ = 0;               // documents settled or written, then documents removed
  std::vector<ToWrite> batch_;
  size_t batch_bytes_ = 0;
  std::set<std::string> present_;   // ids of the documents read
  std::set<std::string> sources_;   // source files that gave documents
  std::set<std::string> reloaded_;  // documents chunked again (kept only with pending chunks)
  std::vector<LoadIssue> issues_;
  int64_t skipped_ = 0;  // issues that left a file or record out
};

Status LoadInput(const Config& c, const IndexRequest& request, Store& store,
                 const ExtractorId& extractor, const std::atomic<bool>* cancel, Run* run,
                 IndexPlan& plan, LoadSummary& s) {
  return InputLoader(c, request, store, extractor, cancel, run, plan, s).Load();
}

}  // namespace

Status LoadAndChunk(Run& run, const IndexRequest& request, const ExtractorId& extractor,
                    LoadSummary& s, IndexPlan& plan) {
  plan = IndexPlan{};
  return LoadInput(run.config(), request, run.store(), extractor, run.cancel_flag(), &run, plan, s);
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
                                const std::string& base_dir) {
  const ChunkOptions options = ChunkOptionsFor(config);
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
  if (context.chat != nullptr) GRAG_RETURN_IF_ERROR(CheckIndexPrompts(config));
  IndexPlan plan;
  LoadSummary unused;
  GRAG_RETURN_IF_ERROR(LoadInput(config, request, *context.store, ExtractorFor(context),
                                 context.cancel, nullptr, plan, unused));
  return plan;
}

}  // namespace grag
