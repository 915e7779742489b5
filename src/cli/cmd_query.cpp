// grag query [--method auto|global|local|basic|hybrid|drift|lazy] "question": answer from the
// index.
#include <unistd.h>

#include <optional>
#include <sstream>

#include "cli.h"
#include "progress.h"
#include "grag/engine.h"
#include "grag/engine_json.h"

namespace grag::cli {
namespace {

struct QueryOpts {
  std::string question;
  std::string method;  // empty: query.method
  std::optional<int64_t> level;
  std::optional<int64_t> top_k;
  std::optional<int64_t> budget;  // lazy: relevance calls (lazy.budget)
  std::string model;              // the model that answers; empty: llm.query.model, llm.model
  bool json = false;
  bool no_stream = false;
  bool explain = false;  // --route: say what auto would do, and stop
};

// Prints the answer as it arrives when stdout is a terminal (and neither --json nor --no-stream
// is given); sets `streamed` once something was printed. Empty otherwise.
std::function<void(std::string_view)> AnswerStream(const QueryOpts& o, bool& streamed) {
  if (o.json || o.no_stream || !isatty(STDOUT_FILENO)) return {};
  return [&streamed](std::string_view d) {
    std::cout << d << std::flush;
    streamed = true;
  };
}

void PrintGlobal(const GlobalSearchResult& r, bool llm) {
  const auto& s = r.stats;
  if (!r.citations.empty()) {
    std::cout << "\nSources (community reports):\n";
    for (const auto& c : r.citations) {
      std::cout << "  [" << c.community_id << "] " << c.title << " (level " << c.level << ")\n";
    }
  }
  if (!llm) {
    std::cout << "\nlevel " << s.level << ": " << s.reports_used
              << " reports scored without an LLM; " << s.points_kept << " points kept; "
              << FormatDuration(static_cast<double>(s.wall_time.count()) / 1000) << "\n";
    return;
  }
  std::cout << "\nlevel " << s.level << ": " << s.reports_used << " reports in " << s.map_calls
            << " map calls (" << s.map_calls_failed << " dropped out)";
  if (s.reports_left_out) std::cout << ", " << s.reports_left_out << " reports left out by the cap";
  std::cout << "; " << s.points_kept << " points kept, "
            << (s.points_zero_score + s.points_over_budget) << " dropped; " << s.reduce_calls
            << (s.reduce_calls == 1 ? " reduce call; " : " reduce calls; ")
            << FormatCount(s.tokens_in) << " tokens in, " << FormatCount(s.tokens_out) << " out; "
            << FormatDuration(static_cast<double>(s.wall_time.count()) / 1000) << "\n";
}

void PrintLocal(const LocalSearchResult& r) {
  const auto& ctx = r.context;
  if (!r.citations.empty()) {
    std::cout << "\nSources:\n";
    for (const auto& c : r.citations) {
      std::cout << "  [" << c.id << "] " << DescribeLocalItem(ctx.items[c.item]) << "\n";
    }
  }
  if (!ctx.matches.empty()) {
    std::cout << "\nmatched entities:";
    for (const auto& m : ctx.matches) {
      std::cout << " " << m.name;
      if (m.similarity)
        std::cout << " (" << static_cast<int>(*m.similarity * 100 + 0.5) / 100.0 << ")";
      std::cout << ";";
    }
    std::cout << "\ncontext: " << ctx.items.size() << " items, " << ctx.used_tokens << "/"
              << ctx.budget_tokens << " tokens\n";
  }
  for (const auto& d : ctx.diagnostics) std::cerr << "note: " << d << "\n";
}

void PrintPassages(const PassageSearchResult& r) {
  if (!r.citations.empty()) {
    std::cout << "\nSources:\n";
    for (const auto& c : r.citations) {
      const auto& chunk = r.retrieval.chunks[c.chunk];
      std::cout << "  [" << c.id << "] chunk " << chunk.index << " of document "
                << chunk.document_id << "\n";
    }
  }
  std::cout << "\n" << r.placed << " passages in the context, " << r.context_tokens << " tokens";
  if (r.retrieval.stats.reranked) std::cout << " (reranked)";
  std::cout << "; retrieval "
            << FormatDuration(static_cast<double>(r.retrieval.stats.total_time.count()) / 1e6)
            << "\n";
  for (const auto& d : r.retrieval.diagnostics) std::cerr << "note: " << d << "\n";
}

void PrintDrift(const DriftSearchResult& r) {
  if (!r.citations.empty()) {
    std::cout << "\nSources:\n";
    for (const auto& c : r.citations) {
      std::cout << "  [" << c.id << "] ";
      switch (c.kind) {
        case LocalItemType::kChunk:
          std::cout << "chunk " << c.chunk_index << " of document " << c.document_id;
          break;
        case LocalItemType::kReport:
          std::cout << "report of community " << c.community_id << ": " << c.title;
          break;
        case LocalItemType::kEntity:
          std::cout << "entity " << c.title;
          break;
        case LocalItemType::kRelationship:
          std::cout << "relationship " << c.title;
          break;
      }
      std::cout << "\n";
    }
  }
  bool any = false;
  for (const auto& a : r.actions) {
    if (a.depth == 0) continue;
    if (!any) std::cout << "\nFollow-ups:\n";
    any = true;
    std::cout << "  " << std::string(static_cast<size_t>(2 * (a.depth - 1)), ' ') << "- " << a.query
              << " (";
    if (a.outcome == DriftOutcome::kOk) {
      std::cout << "score " << a.score;
    } else {
      std::cout << DriftOutcomeName(a.outcome);
    }
    std::cout << ")\n";
  }
  const auto& s = r.stats;
  std::cout << "\n"
            << s.calls() << " calls of at most " << s.max_calls << " (hyde " << s.hyde_calls
            << " + primer " << s.primer_calls << " + follow-ups " << s.local_calls << " + reduce "
            << s.reduce_calls << "); " << r.primer_reports.size() << " reports in the primer";
  if (s.failed) std::cout << "; " << s.failed << " failed";
  if (s.unparseable) std::cout << "; " << s.unparseable << " unparseable";
  std::cout << "; " << FormatCount(s.tokens_in) << " tokens in, " << FormatCount(s.tokens_out)
            << " out; " << FormatDuration(static_cast<double>(s.wall_time.count()) / 1000) << "\n";
  for (const auto& d : r.diagnostics) std::cerr << "note: " << d << "\n";
}

void PrintLazy(const LazySearchResult& r) {
  const auto& s = r.stats;
  if (!r.citations.empty()) {
    std::cout << "\nSources (passages tested relevant):\n";
    for (size_t i : r.citations) {
      const LazyTest& t = r.tests[i];
      std::cout << "  [" << t.label << "] chunk " << t.chunk_index << " of document "
                << t.document_id << "\n";
    }
  }
  // The cost after the answer, by kind (what --route bounded before).
  std::cerr << "lazy: " << s.refine_calls << " refine + " << s.relevance_calls << " relevance ("
            << s.passages_tested << " passages, " << s.passages_relevant
            << " relevant, stop: " << LazyStopName(s.stop) << ") + " << s.claim_calls
            << " claims + " << s.reduce_calls << " reduce = " << s.calls() << " calls, "
            << FormatCount(s.tokens_in) << " tokens in\n";
}

// Where each citation's text is in its document, in characters: "[S3] carol.txt chars 10234–10391".
void PrintPassagesCited(const std::vector<SourceCitation>& cited) {
  bool any = false;
  for (const SourceCitation& c : cited) {
    for (const SourceSpan& s : c.spans) {
      if (!any) std::cout << "\nPassages:\n";
      any = true;
      std::cout << "  [" << c.id << "] " << s.document_id << " chars " << s.start << "\u2013"
                << s.end;
      if (s.precision != SpanPrecision::kSentence) {
        std::cout << " (" << SpanPrecisionName(s.precision) << ")";
      }
      std::cout << "\n";
    }
  }
}

}  // namespace

Command AddQueryCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "query",
      "Answer a question from the index. auto (default): the router sends questions about the "
      "whole corpus (themes, trends) to global, questions joining several named things to "
      "local, and lookups to hybrid. global: map-reduce over the community reports of one "
      "level. local: the entities the question names, their graph neighbourhood, reports and "
      "the passages hybrid retrieval ranks best. basic: the passages nearest the question by "
      "embedding. hybrid: the passages of vector, BM25 and graph retrieval fused. drift: a primer "
      "over the best-matching reports drafts an answer and follow-up questions, the best "
      "follow-ups are answered by local search, one call writes the answer (needs an LLM; at "
      "most drift.* bounded calls, see --route). lazy (budgeted search): tests passages for "
      "relevance within --budget model calls; for indexes built without a model (auto sends "
      "global questions there when a model is configured and no report was written by one). "
      "Without an LLM the other methods' answers are "
      "extractive: quoted from the reports and sources, with citations.");
  auto o = std::make_shared<QueryOpts>();
  cmd->add_option("QUESTION", o->question,
                  "The question; - reads it from standard input (for long or scripted questions)")
      ->required();
  std::vector<std::string> methods;
  for (QueryMethod m : kQueryMethods) methods.emplace_back(QueryMethodName(m));
  methods.emplace_back("budgeted");
  cmd->add_option("-m,--method", o->method,
                  QueryMethodNames(" | ") + " (also: budgeted) (default query.method, auto)")
      ->check(CLI::IsMember(methods));
  cmd->add_option("--level", o->level,
                  "global: community level, 0 (coarsest) to the index's deepest (default "
                  "global_search.level); with --method auto it means global")
      ->check(CLI::Range(kLevelRange.min, kLevelRange.max));
  cmd->add_option("--k", o->top_k,
                  "local: matched entities at most; basic, hybrid: passages retrieved; " +
                      RangeText(kTopKRange.min, kTopKRange.max))
      ->check(CLI::Range(kTopKRange.min, kTopKRange.max));
  cmd->add_option("--budget", o->budget,
                  "lazy: relevance-test calls at most, " +
                      RangeText(kBudgetRange.min, kBudgetRange.max) +
                      " (default lazy.budget, 20); the refine, claims and reduce calls come on "
                      "top and are reported")
      ->check(CLI::Range(kBudgetRange.min, kBudgetRange.max));
  cmd->add_option("--model", o->model,
                  "The model that answers this question, on the query role's server (default "
                  "llm.query.model, else llm.model); nothing indexed changes");
  cmd->add_flag("--json", o->json,
                "Print answer, citations, context or points, route, diagnostics and statistics "
                "as JSON");
  cmd->add_flag("--no-stream", o->no_stream, "Print the answer when complete, not as it arrives");
  cmd->add_flag("--route", o->explain,
                "Only say what --method (auto by default) would do with the question (method, "
                "reason, estimated and at most LLM calls, tokens); nothing is answered");
  return {cmd, [o, &g]() {
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            if (o->question == "-") {
              std::ostringstream in;
              in << std::cin.rdbuf();
              o->question = in.str();
              while (!o->question.empty() &&
                     (o->question.back() == '\n' || o->question.back() == '\r')) {
                o->question.pop_back();
              }
            }
            // A flag beats the setting: --budget is lazy.budget for this question.
            if (o->budget) config->lazy.budget = *o->budget;
            auto method = ParseQueryMethod(o->method.empty() ? config->query.method : o->method);
            if (!method.ok()) return Fail(method.status());
            auto engine = Engine::Open(*config);
            if (!engine.ok()) return Fail(engine.status());
            const bool pretty = isatty(STDOUT_FILENO) != 0;
            if (o->explain) {
              auto route = (*engine)->Route(o->question, *method);
              if (!route.ok()) return Fail(route.status());
              if (o->json) {
                std::cout << QueryRouteJson(*route, o->question, pretty) << "\n";
              } else {
                std::cout << QueryMethodName(route->method) << " ("
                          << QuestionKindName(route->decision.kind)
                          << "): " << route->decision.reason << "; about " << route->estimated_calls
                          << " LLM calls, " << FormatCount(route->estimated_tokens) << " tokens";
                if (!route->cost_note.empty()) std::cout << "; " << route->cost_note;
                std::cout << "\n";
              }
              return kExitOk;
            }
            QueryRequest request;
            request.question = o->question;
            request.method = *method;
            request.budget = o->budget;
            request.level = o->level;
            request.top_k = o->top_k;
            request.model = o->model;
            bool streamed = false;
            request.on_answer_delta = AnswerStream(*o, streamed);
            auto r = (*engine)->Query(request);
            if (!r.ok()) return Fail(r.status());
            if (o->json) {
              std::cout << QueryResultJson(*r, o->question, pretty) << "\n";
              return kExitOk;
            }
            if (r->route) {
              std::cerr << "route: " << QueryMethodName(r->route->method) << " ("
                        << r->route->decision.reason << ")\n";
            }
            if (!streamed) std::cout << r->answer;
            std::cout << "\n";
            PrintPassagesCited(r->source_citations);
            if (r->global) PrintGlobal(*r->global, r->llm);
            if (r->local) PrintLocal(*r->local);
            if (r->passages) PrintPassages(*r->passages);
            if (r->drift) PrintDrift(*r->drift);
            if (r->lazy) PrintLazy(*r->lazy);
            return kExitOk;
          }};
}

}  // namespace grag::cli
