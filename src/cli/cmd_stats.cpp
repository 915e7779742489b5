// grag stats: what the index holds and what it cost.
#include <unistd.h>

#include <map>

#include <fmt/format.h>

#include "cli.h"
#include "progress.h"
#include "grag/engine.h"
#include "grag/engine_json.h"

namespace grag::cli {
namespace {

int PrintDocuments(Engine& engine, bool json) {
  auto docs = engine.Documents();
  if (!docs.ok()) return Fail(docs.status());
  if (json) {
    std::cout << DocumentsJson(*docs, isatty(STDOUT_FILENO) != 0) << "\n";
    return kExitOk;
  }
  for (const auto& d : *docs) {
    std::cout << d.id << "\t" << d.chunk_count << " chunks\t" << d.title << "\n";
  }
  if (docs->empty()) std::cout << "no documents: run `grag index` first\n";
  return kExitOk;
}

void PrintStats(const IndexStats& st) {
  const StoreStats& s = st.store;
  auto counter = [&](const char* k) -> int64_t {
    auto it = st.spent.find(k);
    return it == st.spent.end() ? 0 : it->second;
  };
  std::cout << "documents      " << s.documents << "\nchunks         " << s.chunks << " ("
            << s.extractions_ok << " extracted, " << s.extractions_skipped << " skipped";
  if (s.extractions_empty > 0) {
    std::cout << "; " << s.extractions_empty << " extracted with no entity";
    if (s.extractions_empty * 2 > s.extractions_ok)
      std::cout << ": check the model with `grag doctor`";
  }
  std::cout << ")\nentities       " << s.entities;
  if (st.merged_names > 0) {
    std::cout << " (" << st.merged_names << " extracted names resolved into another:";
    for (const auto& [m, n] : st.merged_by_method) std::cout << " " << m << " " << n;
    std::cout << ")";
  }
  std::cout << "\nrelationships  " << s.relationships << "\ncommunities    " << s.communities;
  if (!s.communities_per_level.empty()) {
    std::cout << " (";
    bool first = true;
    for (const auto& [l, n] : s.communities_per_level) {
      std::cout << (first ? "" : ", ") << "level " << l << ": " << n;
      first = false;
    }
    std::cout << ")";
  }
  std::cout << "\nmodularity     ";
  if (s.modularity) {
    std::cout << *s.modularity;
  } else {
    std::cout << "-";
  }
  std::cout << "\nreports        " << s.reports_ok;
  if (s.reports_ok > 0) std::cout << " (" << s.reports_llm << " written by a model)";
  if (s.reports_gap) std::cout << " (+" << s.reports_gap << " gaps)";
  if (s.reports_stale) {
    std::cout << "\n               " << s.reports_stale
              << " stale: their community changed a little since they were written (below "
                 "communities.report_refresh_threshold); `grag index --refresh-reports` rewrites "
                 "them";
  }
  for (const auto& [owner, space] : st.embeddings) {
    std::cout << "\nembeddings     " << owner << ": " << space.count << " (" << space.model << ", "
              << space.dimension << " dimensions"
              << (IsLexicalEmbeddingModel(space.model) ? ", lexical: built in, no model" : "")
              << ")";
  }
  std::cout << "\nLLM spent      " << counter("llm_calls") << " calls ("
            << counter("llm_cache_hits") << " from cache), " << FormatCount(counter("tokens_in"))
            << " tokens in, " << FormatCount(counter("tokens_out")) << " out, over " << s.runs
            << " runs\n";
  if (counter("calls_extract") + counter("calls_summarize") + counter("calls_report") > 0) {
    std::cout << "  by role      extract " << counter("calls_extract") + counter("calls_glean")
              << " (gleaning " << counter("calls_glean") << "), summarize "
              << counter("calls_summarize") + counter("calls_report") << " (reports "
              << counter("calls_report") << "), resolve " << counter("calls_resolve") << "\n";
    // Tokens (and costs at the prices configured now) by role, where the runs kept them.
    bool tokens = false;
    for (const RoleCost& r : st.by_role) tokens = tokens || r.prompt_tokens > 0;
    if (tokens) {
      std::cout << "  tokens       ";
      const char* sep = "";
      for (const RoleCost& r : st.by_role) {
        std::cout << sep << r.role << " " << FormatCount(r.prompt_tokens) << " in, "
                  << FormatCount(r.completion_tokens) << " out"
                  << (r.cost ? fmt::format(" ({:.2f})", *r.cost) : "");
        sep = "; ";
      }
      std::cout << "\n";
    }
  }
  for (const EndpointUsage& e : st.endpoints) {
    std::cout << "  " << FormatEndpoint(e, false) << "\n";
  }
  if (st.work) {
    std::cout << "extracting     " << st.work->done << " of " << st.work->total
              << " shared chunks done, " << st.work->claimed << " in hand\n";
    for (const WorkerProgress& w : st.work->workers) {
      std::cout << "  worker " << w.name << ": " << w.done << " done, " << w.claimed << " in hand, "
                << w.spent.calls << " calls, seen " << fmt::format("{:.0f}", w.seconds_since_seen)
                << " s ago\n";
    }
  }
  int64_t cache_bytes = 0;
  for (const CacheModelStats& c : s.cache_by_model) cache_bytes += c.bytes;
  std::cout << "reply cache    " << s.cache_entries << " entries, " << FormatCount(cache_bytes)
            << " bytes stored (`grag cache prune` removes what the index no longer needs)\n";
  // By kind (chat/summarize, chat/query, embedding, ...), over the models.
  std::map<std::string, std::pair<int64_t, int64_t>> by_kind;
  for (const CacheModelStats& c : s.cache_by_model) {
    by_kind[c.kind].first += c.entries;
    by_kind[c.kind].second += c.bytes;
  }
  if (!by_kind.empty()) {
    std::cout << "  by kind     ";
    for (const auto& [kind, n] : by_kind) {
      std::cout << " " << kind << " " << n.first << " (" << FormatCount(n.second) << " bytes)"
                << (kind == by_kind.rbegin()->first ? "" : ",");
    }
    std::cout << "\n";
  }
  std::cout << "index file     " << FormatCount(s.file_bytes) << " bytes";
  if (s.free_bytes > 0) std::cout << " (+" << FormatCount(s.free_bytes) << " free)";
  std::cout << "\n";
  if (!s.space.empty()) {
    std::cout << "  by table     bytes (with its indexes)\n";
    size_t shown = 0;
    int64_t rest = 0;
    for (const TableSpace& t : s.space) {
      if (++shown > 12) {
        rest += t.bytes + t.index_bytes;
        continue;
      }
      std::cout << "    " << t.table
                << std::string(t.table.size() < 26 ? 26 - t.table.size() : 1, ' ')
                << FormatCount(t.bytes + t.index_bytes);
      if (t.index_bytes > 0) std::cout << " (indexes " << FormatCount(t.index_bytes) << ")";
      std::cout << "\n";
    }
    if (rest > 0)
      std::cout << "    (" << s.space.size() - 12 << " more)" << std::string(16, ' ')
                << FormatCount(rest) << "\n";
  }
  if (!st.top_entities.empty()) {
    std::cout << "\ntop entities by degree:\n";
    for (const auto& e : st.top_entities) {
      std::cout << "  " << e.degree << "\t" << e.name << " (" << (e.type.empty() ? "?" : e.type)
                << ")\n";
    }
  }
}

}  // namespace

Command AddStatsCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "stats",
      "Show the index: documents, chunks, entities, relationships, communities per level, "
      "modularity, skipped chunks, reports, LLM calls and tokens spent, top entities by degree");
  struct Opts {
    int top = 10;
    bool json = false;
    bool documents = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--top", o->top, "How many top entities to list")->default_val(10);
  cmd->add_flag("--json", o->json, "Print as JSON");
  cmd->add_flag(
      "--documents", o->documents,
      "List the indexed documents (id, chunks, title) instead: the ids `grag remove` takes");
  return {cmd, [o, &g]() {
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            auto engine = Engine::Open(*config);
            if (!engine.ok()) return Fail(engine.status());
            if (o->documents) return PrintDocuments(**engine, o->json);
            auto stats = (*engine)->Stats(o->top);
            if (!stats.ok()) return Fail(stats.status());
            if (o->json) {
              std::cout << IndexStatsJson(*stats, isatty(STDOUT_FILENO) != 0) << "\n";
            } else {
              PrintStats(*stats);
            }
            return kExitOk;
          }};
}

}  // namespace grag::cli
