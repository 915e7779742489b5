// grag index [PATH...]: build or update the index.
#include <csignal>
#include <filesystem>

#include "cli/cli.h"
#include "cli/progress.h"
#include "grag/indexer.h"
#include "grag/log.h"
#include "grag/models.h"

namespace grag::cli {
namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void OnInterrupt(int) {
  g_interrupted = true;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

nlohmann::json SummaryJson(const IndexSummary& s) {
  nlohmann::json issues = nlohmann::json::array();
  for (const auto& i : s.load_issues) {
    issues.push_back({{"path", i.path}, {"message", i.message}, {"skipped", i.skipped}});
  }
  nlohmann::json levels = nlohmann::json::object();
  for (const auto& [l, n] : s.communities_per_level) levels[std::to_string(l)] = n;
  return {
      {"run_id", s.run_id},
      {"documents", {{"added", s.documents_added}, {"changed", s.documents_changed},
                     {"unchanged", s.documents_unchanged}, {"removed", s.documents_removed}}},
      {"load_issues", issues},
      {"chunks", {{"total", s.chunks}, {"added", s.chunks_added}, {"removed", s.chunks_removed},
                  {"extracted", s.chunks_extracted}, {"skipped", s.chunks_skipped}}},
      {"entities", s.entities},
      {"relationships", s.relationships},
      {"descriptions_summarized", s.descriptions_summarized},
      {"communities_per_level", levels},
      {"modularity", s.modularity},
      {"reports", {{"generated", s.reports_generated}, {"reused", s.reports_reused},
                   {"gaps", s.report_gaps}}},
      {"embeddings_written", s.embeddings_written},
      {"llm", {{"calls", s.usage.calls}, {"cache_hits", s.usage.cache_hits},
               {"http_requests", s.usage.http_requests}, {"retries", s.usage.retries},
               {"failures", s.usage.failures}, {"prompt_tokens", s.usage.prompt_tokens},
               {"completion_tokens", s.usage.completion_tokens}}},
      {"elapsed_seconds", s.elapsed_seconds},
  };
}

void PrintSummary(const IndexSummary& s) {
  std::cout << "documents: " << s.documents_added << " added, " << s.documents_changed
            << " changed, " << s.documents_unchanged << " unchanged, " << s.documents_removed
            << " removed";
  if (!s.load_issues.empty()) std::cout << " (" << s.load_issues.size() << " files with problems, see above)";
  std::cout << "\nchunks: " << s.chunks << " (" << s.chunks_added << " new, " << s.chunks_removed
            << " removed); extracted " << s.chunks_extracted << " this run";
  if (s.chunks_skipped) std::cout << ", " << s.chunks_skipped << " skipped (retried next run)";
  std::cout << "\ngraph: " << s.entities << " entities, " << s.relationships << " relationships";
  if (s.descriptions_summarized) std::cout << ", " << s.descriptions_summarized << " descriptions summarised";
  std::cout << "\ncommunities:";
  for (const auto& [l, n] : s.communities_per_level) std::cout << " level " << l << ": " << n << ";";
  std::cout << " modularity " << s.modularity << "\nreports: " << s.reports_generated
            << " written, " << s.reports_reused << " unchanged";
  if (s.report_gaps) std::cout << ", " << s.report_gaps << " gaps (retried next run)";
  if (s.embeddings_written) std::cout << "\nembeddings: " << s.embeddings_written << " written";
  std::cout << "\nLLM: " << s.usage.calls << " calls (" << s.usage.cache_hits << " from cache), "
            << FormatCount(s.usage.prompt_tokens) << " tokens in, "
            << FormatCount(s.usage.completion_tokens) << " out\ntime: "
            << FormatDuration(s.elapsed_seconds) << "\n";
}

}  // namespace

Command AddIndexCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "index",
      "Build or update the index: load, chunk, extract entities and relationships (LLM), merge, "
      "detect communities (Leiden), write community reports (LLM), embed. Only missing or "
      "changed work is done; re-running on unchanged input makes no LLM call.");
  struct Opts {
    std::vector<std::string> paths;
    bool json = false;
    bool no_progress = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("PATH", o->paths,
                  "Files or folders to index (default: the input folder, input.dir; documents "
                  "gone from it are then removed from the index)");
  cmd->add_flag("--json", o->json, "Print the summary as JSON");
  cmd->add_flag("--no-progress", o->no_progress, "No progress display on stderr");
  return {cmd, [o, &g]() {
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            const std::string db = config->Resolve(config->store.path);
            auto store = Store::Open(db);
            if (!store.ok()) return Fail(store.status());
            (void)AddLogFile((std::filesystem::path(db).parent_path() / "grag.log").string());
            auto chat = MakeChatModel(*config, &(*store)->ReplyCache());
            if (!chat.ok()) return Fail(chat.status());
            auto embedder = MakeEmbeddingModel(*config, &(*store)->ReplyCache());
            if (!embedder.ok()) return Fail(embedder.status());

            ProgressPrinter printer(!o->no_progress && !g.quiet);
            IndexContext ctx;
            ctx.store = store->get();
            ctx.chat = chat->get();
            ctx.embedder = embedder->get();
            ctx.cancel = &g_interrupted;
            ctx.on_progress = [&printer](const IndexProgress& p) {
              printer.Update({p.stage, p.done, p.total, p.usage.calls,
                              p.usage.prompt_tokens + p.usage.completion_tokens,
                              p.elapsed_seconds});
            };
            std::signal(SIGINT, OnInterrupt);
            auto summary = RunIndex(*config, IndexRequest{o->paths}, ctx);
            std::signal(SIGINT, SIG_DFL);
            printer.Finish();
            if (!summary.ok()) {
              if (summary.status().code() == ErrorCode::kCancelled) {
                std::cerr << "interrupted: the work done so far is stored; run `grag index` "
                             "again to resume\n";
                return 130;
              }
              std::cerr << "(the work done so far is stored; fix the problem and run `grag "
                           "index` again to resume)\n";
              return Fail(summary.status());
            }
            if (o->json) {
              PrintJson(SummaryJson(*summary));
            } else {
              PrintSummary(*summary);
            }
            return kExitOk;
          }};
}

}  // namespace grag::cli
