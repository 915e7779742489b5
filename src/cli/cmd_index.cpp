// grag index [PATH...]: build or update the index.
#include <unistd.h>

#include <csignal>
#include <filesystem>

#include <fmt/format.h>

#include "cli.h"
#include "progress.h"
#include "update.h"
#include "grag/engine.h"
#include "grag/engine_json.h"
#include "grag/index_types.h"
#include "grag/log.h"

namespace grag::cli {
namespace {

std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};

// Ctrl-C and SIGTERM (kill, systemd, a container stopping) stop the run cleanly: the calls in
// flight finish and are stored, nothing is repeated by the next run.
extern "C" void OnInterrupt(int sig) {
  g_signal = sig;
  g_interrupted = true;
  std::signal(SIGINT, SIG_DFL);  // a second one ends the process at once
  std::signal(SIGTERM, SIG_DFL);
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// "plan: 1 document to add, ..." — what the update is about to do.
std::string PlanLine(const IndexPlan& p) {
  std::string line = "plan: " + std::to_string(p.documents_added.size()) + " to add, " +
                     std::to_string(p.documents_changed.size()) + " changed, " +
                     std::to_string(p.documents_removed.size()) + " to remove, " +
                     std::to_string(p.documents_unchanged) + " unchanged; " +
                     Plural(p.chunks_to_extract, "chunk", "chunks") + " to extract";
  if (p.extraction_calls_max > 0) {
    line += " (at most " + Plural(p.extraction_calls_max, "LLM call", "LLM calls") + ")";
  }
  if (p.chunks_removed > 0) line += ", " + Plural(p.chunks_removed, "chunk", "chunks") + " to drop";
  return line;
}

void PrintPlanDetail(const IndexPlan& p) {
  auto list = [](const char* what, const std::vector<std::string>& ids) {
    for (const auto& id : ids) std::cout << "  " << what << " " << id << "\n";
  };
  std::cout << PlanLine(p) << "\n";
  list("add", p.documents_added);
  list("change", p.documents_changed);
  list("remove", p.documents_removed);
  const CallEstimate& e = p.estimate;
  if (e.calls.Total() == 0) return;
  std::cout << "expected LLM calls: " << e.calls.Total() << " (" << e.calls.extract
            << " extraction, " << e.calls.glean << " gleaning, " << e.calls.resolve
            << " resolution, " << e.calls.summarize << " summaries, " << e.calls.report
            << " reports), about " << FormatCount(e.prompt_tokens) << " tokens in and "
            << FormatCount(e.completion_tokens) << " out";
  if (e.cost) std::cout << fmt::format(", about {:.2f} at the configured prices", *e.cost);
  if (e.deferred_reports > 0) {
    std::cout << "\n  reports.mode = lazy: no report call now; about " << e.deferred_reports
              << " report calls (what reports.mode = eager would make now) are left to the global "
                 "questions that read the reports";
  } else if (e.calls.report > 0) {
    std::cout << "\n  reports.mode = lazy would leave the " << e.calls.report
              << " report calls to the global questions that read the reports";
  }
  if (e.cost) {
    std::cout << "\n  by role:";
    const char* sep = " ";
    for (const RoleCost& r : e.by_role) {
      std::cout << sep << r.role << " " << r.calls << " calls, " << FormatCount(r.prompt_tokens)
                << " in, " << FormatCount(r.completion_tokens) << " out"
                << (r.cost ? fmt::format(", {:.2f}", *r.cost) : "");
      sep = "; ";
    }
  }
  std::cout
      << "\n  extraction is exact; the rest depends on what extraction finds and is estimated "
      << (e.history_runs > 0
              ? "from this index's " + Plural(e.history_runs, "earlier run", "earlier runs") +
                    (e.update ? " that updated it" : " that built it")
              : std::string("from typical ratios (no earlier run of this kind to learn "
                            "from)"))
      << "\n";
}

void PrintSummary(const IndexSummary& s, bool graph_only) {
  if (!graph_only) {
    std::cout << "documents: " << s.documents_added << " added, " << s.documents_changed
              << " changed, " << s.documents_unchanged << " unchanged, " << s.documents_removed
              << " removed";
    if (!s.load_issues.empty())
      std::cout << " (" << s.load_issues.size() << " files with problems, see above)";
    std::cout << "\nchunks: " << s.chunks << " (" << s.chunks_added << " new, " << s.chunks_removed
              << " removed); extracted " << s.chunks_extracted << " this run";
    if (s.chunks_skipped) std::cout << ", " << s.chunks_skipped << " skipped (retried next run)";
    if (s.chunks_empty) std::cout << ", " << s.chunks_empty << " with no entity";
    std::cout << "\n";
  }
  std::cout << "graph: " << s.entities << " entities, " << s.relationships << " relationships";
  if (s.graph_unchanged) std::cout << " (inputs unchanged since the last merge: kept as it was)";
  std::cout << "\nresolution: " << s.resolution_fresh << " new "
            << (s.resolution_fresh == 1 ? "name" : "names") << " resolved, " << s.resolution_merged
            << " names folded into another entity";
  if (s.resolution_adjudicated > 0) {
    std::cout << " (" << s.resolution_adjudicated << " pairs judged by the LLM in "
              << s.resolution_llm_calls << " calls)";
  }
  if (s.descriptions_summarized)
    std::cout << ", " << s.descriptions_summarized << " descriptions summarised";
  if (s.descriptions_appended)
    std::cout << ", " << s.descriptions_appended << " summaries extended without a call";
  std::cout << "\ncommunities:";
  for (const auto& [l, n] : s.communities_per_level)
    std::cout << " level " << l << ": " << n << ";";
  std::cout << " modularity " << s.modularity;
  if (s.communities_unchanged) {
    std::cout << " (graph unchanged: kept as they were)";
  } else if (s.communities_kept + s.communities_removed > 0) {
    std::cout << " (" << (s.communities_warm_start ? "warm start: " : "") << s.communities_kept
              << " kept, " << s.communities_new << " new, " << s.communities_removed << " gone)";
  }
  if (!s.community_note.empty()) std::cout << "\n  " << s.community_note;
  std::cout << "\nreports: " << s.reports_generated << " written, " << s.reports_reused
            << " unchanged";
  if (s.report_gaps) std::cout << ", " << s.report_gaps << " gaps (retried next run)";
  if (s.reports_kept_stale) {
    std::cout << ", " << s.reports_kept_stale
              << " kept though their community changed a little (stale; --refresh-reports "
                 "rewrites them)";
  }
  if (s.reports_deferred) {
    std::cout << "; " << s.reports_deferred
              << " deferred to the global questions that read them (reports.mode = lazy), "
                 "extractive until then";
  }
  if (s.reports_extractive > s.reports_deferred && !s.no_llm) {
    std::cout << "; " << s.reports_extractive - s.reports_deferred
              << " of small communities extractive (no call)";
  }
  if (s.embeddings_written) std::cout << "\nembeddings: " << s.embeddings_written << " written";
  if (!s.embedding_model.empty()) {
    std::cout << "\nembedding model: " << s.embedding_model
              << (IsLexicalEmbeddingModel(s.embedding_model) ? " (lexical, built in)" : "");
  }
  if (s.no_llm) {
    std::cout << "\nno-LLM mode: built-in NLP extraction and extractive reports, no model called"
                 " (configure llm.base_url and llm.model to use an LLM)\ntime: "
              << FormatDuration(s.elapsed_seconds) << "\n";
    return;
  }
  std::cout << "\nLLM: " << s.usage.calls << " calls (" << s.calls.extract << " extraction, "
            << s.calls.glean << " gleaning, " << s.calls.resolve << " resolution, "
            << s.calls.summarize << " summaries, " << s.calls.report << " reports; "
            << s.usage.cache_hits << " from cache), " << FormatCount(s.usage.prompt_tokens)
            << " tokens in, " << FormatCount(s.usage.completion_tokens) << " out";
  for (const EndpointUsage& e : s.usage.endpoints) std::cout << "\n  " << FormatEndpoint(e, true);
  std::cout << "\ntime: " << FormatDuration(s.elapsed_seconds) << "\n";
}

}  // namespace

void AddIndexFlags(CLI::App* cmd, IndexFlags& f) {
  cmd->add_flag("--dry-run", f.dry_run,
                "Show what would be added, changed, removed and extracted, and stop (no model "
                "call, nothing written)");
  cmd->add_flag("--json", f.json, "Print the summary (or the plan) as JSON");
  cmd->add_flag("--refresh-reports", f.refresh_reports,
                "Rewrite every report whose community changed since it was written, stale ones "
                "included (by default a small change keeps the report, marked stale; see "
                "communities.report_refresh_threshold)");
  cmd->add_flag("--no-progress", f.no_progress, "No progress display on stderr");
  cmd->add_flag("--wait", f.wait,
                "When another grag process is writing this index, wait for it to finish instead "
                "of failing");
}

int RunUpdate(const GlobalOptions& g, const std::string& command, const IndexRequest& given,
              const IndexFlags& f, const BeforeUpdate& before) {
  IndexRequest request = given;
  request.refresh_reports = request.refresh_reports || f.refresh_reports;
  auto config = LoadProjectConfig(g);
  if (!config.ok()) return Fail(config.status());
  EngineOptions eo;
  eo.writable = true;
  // One writer per index: a second run would pay for every call twice. A dry run only reads.
  eo.take_writer_lock = !f.dry_run;
  eo.wait_for_writer = f.wait;
  eo.lock_holder = "grag " + command;
  eo.on_wait = [&g](const std::string& holder) {
    if (!g.quiet) std::cerr << "waiting for " << holder << " to finish writing the index...\n";
  };
  auto engine = Engine::Open(*config, eo);
  if (!engine.ok()) return Fail(engine.status());
  if (before) {
    Result<std::string> said = before(**engine);
    if (!said.ok()) return Fail(said.status());
    if (said->empty()) return kExitOk;  // nothing to do
    if (!g.quiet) std::cerr << *said << "\n";
  }
  const bool pretty = isatty(STDOUT_FILENO) != 0;
  if (f.dry_run) {
    auto plan = (*engine)->Plan(request);
    if (!plan.ok()) return Fail(plan.status());
    if (f.json) {
      std::cout << IndexPlanJson(*plan, pretty) << "\n";
    } else {
      PrintPlanDetail(*plan);
    }
    return kExitOk;
  }
  ProgressPrinter printer(!f.no_progress && !g.quiet);
  IndexCallbacks callbacks;
  callbacks.on_progress = [&printer](const IndexProgress& p) {
    printer.Update({p.stage, p.done, p.total, p.usage.calls,
                    p.usage.prompt_tokens + p.usage.completion_tokens, p.elapsed_seconds});
  };
  // The plan comes once the input is read, after the load's progress: on a line of its own.
  callbacks.on_plan = [&g, &printer](const IndexPlan& p) {
    printer.Finish();
    if (!g.quiet) std::cerr << PlanLine(p) << "\n";
  };
  callbacks.cancel = &g_interrupted;
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  auto summary = (*engine)->Index(request, callbacks);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  printer.Finish();
  if (!summary.ok()) {
    if (summary.status().code() == ErrorCode::kCancelled) {
      std::cerr << "interrupted: the work done so far is stored; run `grag " << command
                << "` again to resume\n";
      return 128 + (g_signal.load() != 0 ? g_signal.load() : SIGINT);  // 130 or 143
    }
    if (summary.status().code() != ErrorCode::kNotFound &&
        summary.status().code() != ErrorCode::kInvalidArgument &&
        summary.status().code() != ErrorCode::kCorruption) {
      std::cerr << "(the work done so far is stored; fix the problem and run `grag " << command
                << "` again to resume)\n";
    }
    return Fail(summary.status());
  }
  if (f.json) {
    std::cout << IndexSummaryJson(*summary, &summary->plan, pretty) << "\n";
  } else {
    PrintSummary(*summary, request.graph_only);
  }
  return kExitOk;
}

namespace {

// grag index --worker: extraction for the runs that share it, until Ctrl-C (or, with --once,
// until the work it took part in is done).
int RunWorker(const GlobalOptions& g, bool once, const std::string& name) {
  auto config = LoadProjectConfig(g);
  if (!config.ok()) return Fail(config.status());
  if (config->store.url.empty()) {
    return Fail(Status::InvalidArgument(
        "indexing workers need a PostgreSQL index (store.url) that every worker reaches; this "
        "project's index is the SQLite file " +
        config->IndexLabel()));
  }
  EngineOptions eo;
  eo.writable = true;
  eo.take_writer_lock = false;  // the run holds it; a worker writes replies and its claims only
  eo.lock_holder = "grag index --worker";
  auto engine = Engine::Open(*config, eo);
  if (!engine.ok()) return Fail(engine.status());
  WorkerOptions options;
  options.name = name;
  options.once = once;
  options.cancel = &g_interrupted;
  bool said_waiting = false;
  options.on_progress = [&g, &said_waiting](const WorkState& state, int64_t mine, bool waiting) {
    if (g.quiet) return;
    if (waiting) {
      if (!said_waiting && state.total == 0) {
        std::cerr << "waiting for a run to share its extraction (extraction.distribute)...\n";
      }
      said_waiting = true;
      return;
    }
    said_waiting = false;
    std::cerr << fmt::format("extract: {} of {} shared chunks done ({} by this worker)\n",
                             state.done, state.total, mine);
  };
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
  auto summary = (*engine)->Work(options);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!summary.ok()) {
    if (summary.status().code() == ErrorCode::kCancelled) {
      std::cerr << "interrupted: the chunks this worker held go to the others once its lease "
                   "(extraction.worker_lease) expires\n";
      return 128 + (g_signal.load() != 0 ? g_signal.load() : SIGINT);
    }
    return Fail(summary.status());
  }
  std::cout << "worker " << summary->name << ": " << summary->chunks << " chunks extracted, "
            << summary->usage.calls << " calls (" << summary->usage.cache_hits << " from cache), "
            << FormatCount(summary->usage.prompt_tokens) << " tokens in, "
            << FormatCount(summary->usage.completion_tokens) << " out, "
            << FormatDuration(summary->elapsed_seconds) << "\n";
  return kExitOk;
}

}  // namespace

Command AddIndexCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "index",
      "Build or update the index: load, chunk, extract entities and relationships (with the "
      "LLM, or the built-in NLP extractor when none is configured), merge and resolve entities "
      "(names of one thing become one entity; see `grag entities`), detect communities "
      "(Leiden), write community reports (LLM or extractive), embed. Works out what changed "
      "by content hash and does only that: new and edited documents are extracted, removed ones "
      "leave the graph, communities start from the previous partition and only reports whose "
      "inputs changed are rewritten. Re-running on unchanged input makes no LLM call, chunks no "
      "document again and keeps the graph as it is (its inputs are compared by fingerprint).");
  struct Opts {
    std::vector<std::string> paths;
    IndexFlags flags;
    bool worker = false;
    bool once = false;
    std::string worker_name;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("PATH", o->paths,
                  "Files or folders to index (default: the input folder, input.dir). Documents "
                  "gone from a folder indexed are removed from the index");
  AddIndexFlags(cmd, o->flags);
  cmd->add_flag("--worker", o->worker,
                "Be an indexing worker (PostgreSQL index): extract the chunks that a run with "
                "extraction.distribute shares, with this machine's llm.endpoints, until Ctrl-C");
  cmd->add_flag("--once", o->once, "With --worker: stop once the run's shared extraction is done");
  cmd->add_option("--worker-name", o->worker_name,
                  "With --worker: its name in grag stats (default HOST:PID; unique per worker)");
  return {cmd, [o, &g]() {
            if (o->worker) return RunWorker(g, o->once, o->worker_name);
            if (o->once || !o->worker_name.empty()) {
              return Fail(Status::InvalidArgument("--once and --worker-name go with --worker"));
            }
            IndexRequest request;
            request.paths = o->paths;
            return RunUpdate(g, "index", request, o->flags);
          }};
}

Command AddAddCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "add",
      "Add or update single documents without scanning the input folder, then bring the graph, "
      "communities and reports up to date. Nothing is removed.");
  struct Opts {
    std::vector<std::string> paths;
    IndexFlags flags;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("FILE", o->paths, "Files (or folders) to add; an edited file is re-indexed")
      ->required();
  AddIndexFlags(cmd, o->flags);
  return {cmd, [o, &g]() {
            IndexRequest request;
            request.paths = o->paths;
            request.sync_folders = false;
            return RunUpdate(g, "add", request, o->flags);
          }};
}

Command AddRemoveCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "remove",
      "Remove documents from the index: their chunks and mentions go, entities and relationships "
      "no other document mentions disappear, shared ones lose this document's descriptions, and "
      "the communities and reports that change are redone. The files are not touched.");
  struct Opts {
    std::vector<std::string> ids;
    IndexFlags flags;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("DOC", o->ids,
                  "Document ids as the index knows them (`grag stats --documents` lists them; a "
                  "file's id is its path relative to the input folder)")
      ->required();
  AddIndexFlags(cmd, o->flags);
  return {cmd, [o, &g]() {
            IndexRequest request;
            request.remove = o->ids;
            return RunUpdate(g, "remove", request, o->flags);
          }};
}

}  // namespace grag::cli
