// grag eval FILE: the user's questions with gold, scored for every retrieval method beside
// BM25 (the scoring is EvaluateRetrieval's, grag/engine_eval.h; this only parses and prints).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>

#include "cli.h"
#include "grag/engine.h"
#include "grag/engine_eval.h"

namespace grag::cli {
namespace {

// Files shorter than this finish before a progress line would help.
constexpr int64_t kProgressFrom = 20;
// Characters of a method's column in the tables: "0.567 (-10.0 ±20.5)" and a space.
constexpr size_t kColumn = 20;

// A table row without the padding of its last column.
std::string Trimmed(std::string line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto b = item.find_first_not_of(' ');
    const auto e = item.find_last_not_of(' ');
    if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
  }
  return out;
}

std::string Cell(const std::optional<double>& v, const std::optional<double>& base,
                 const std::optional<double>& margin) {
  if (!v) return "-";
  if (!base) return fmt::format("{:.3f}", *v);
  if (!margin) return fmt::format("{:.3f} ({:+.1f})", *v, (*v - *base) * 100);
  return fmt::format("{:.3f} ({:+.1f} ±{:.1f})", *v, (*v - *base) * 100, *margin);
}

// One table: a row per measure present, a column per method (BM25 first, the others with
// their difference from it in points).
void PrintTable(const EvalReport& r, const std::string& title,
                const std::vector<const EvalAverages*>& cols) {
  std::cout << title << "\n";
  std::string head = fmt::format("  {:<20}", "");
  for (const auto& m : r.methods) head += fmt::format("{:<{}}", m.method, kColumn);
  std::cout << Trimmed(head) << "\n";
  using Margins = EvalAverages::Margins;
  struct Row {
    const char* name;
    std::optional<double> EvalAverages::*field;
    std::optional<double> Margins::*margin;
    int64_t present;
  };
  const Row rows[] = {
      {"chunk recall", &EvalAverages::chunk_recall, &Margins::chunk_recall, r.with_chunks},
      {"document recall", &EvalAverages::document_recall, &Margins::document_recall,
       r.with_documents},
      {"answer contained", &EvalAverages::answer_contained, &Margins::answer_contained,
       r.with_answers},
      {"evidence coverage", &EvalAverages::evidence_coverage, &Margins::evidence_coverage,
       r.with_evidence}};
  for (const auto& row : rows) {
    if (row.present == 0) continue;
    std::string line = fmt::format("  {:<20}", row.name);
    for (size_t i = 0; i < cols.size(); ++i) {
      const auto& base = i == 0 ? std::optional<double>() : cols[0]->*row.field;
      const std::string cell = Cell(cols[i]->*row.field, base, cols[i]->vs_bm25_margin.*row.margin);
      // At least one space between cells; fmt pads by code points ("±" is one).
      line += fmt::format("{:<{}}", cell + " ", kColumn);
    }
    std::cout << Trimmed(line) << "\n";
  }
  std::string sizes = fmt::format("  {:<20}", "passages / chars");
  for (const auto* c : cols) {
    sizes += fmt::format("{:<{}}", fmt::format("{:.1f} / {:.0f}", c->passages, c->chars), kColumn);
  }
  std::cout << Trimmed(sizes) << "\n\n";
}

void PrintReport(const EvalReport& r, const std::string& file) {
  std::cout << fmt::format(
      "grag eval: {} questions from {} (with gold chunks {}, documents {}, answers {}, "
      "evidence {})\neach method beside BM25: in brackets the difference in points and, from {} "
      "questions on, its 95% margin\n(a difference inside its margin could be the luck of the "
      "questions asked)\n\n",
      r.questions, file, r.with_chunks, r.with_documents, r.with_answers, r.with_evidence,
      kMinMarginQuestions);
  for (size_t ci = 0; ci < r.cutoffs.size(); ++ci) {
    std::vector<const EvalAverages*> at, chars;
    for (const auto& m : r.methods) {
      at.push_back(&m.at_k[ci]);
      chars.push_back(&m.at_bm25_chars[ci]);
    }
    PrintTable(r, fmt::format("top {} passages", r.cutoffs[ci]), at);
    PrintTable(r,
               fmt::format("within the characters of BM25's top {} ({:.0f} on average)",
                           r.cutoffs[ci], r.methods.front().at_k[ci].chars),
               chars);
  }
  std::string p50 = fmt::format("  {:<20}", "latency p50 ms");
  std::string p95 = fmt::format("  {:<20}", "latency p95 ms");
  for (const auto& m : r.methods) {
    p50 += fmt::format("{:<{}}", fmt::format("{:.1f}", m.p50_ms), kColumn);
    p95 += fmt::format("{:<{}}", fmt::format("{:.1f}", m.p95_ms), kColumn);
  }
  std::cout << Trimmed(p50) << "\n" << Trimmed(p95) << "\n";
  for (const auto& m : r.methods) {
    if (m.context_chars) {
      std::cout << fmt::format(
          "\nlocal: the chunk passages local search's context placed ({:.1f} on average; no LLM "
          "call); the whole context (entities, relationships, reports, chunks) held {:.0f} "
          "characters on average\n",
          m.at_k.back().passages, *m.context_chars);
    }
  }
}

void PrintExplain(const EvalReport& r) {
  for (const auto& d : r.per_question) {
    std::cout << fmt::format("\nline {}: {}\n", d.line, d.question);
    for (const auto& m : d.methods) {
      std::vector<std::string> misses;
      if (!m.missed_chunks.empty()) {
        misses.push_back(fmt::format("chunks {}", fmt::join(m.missed_chunks, ", ")));
      }
      if (!m.missed_documents.empty()) {
        misses.push_back(fmt::format("documents {}", fmt::join(m.missed_documents, ", ")));
      }
      for (const auto& e : m.missed_evidence) misses.push_back("evidence \"" + e + "\"");
      if (m.answer_found && !*m.answer_found) misses.push_back("no gold answer in the text");
      if (misses.empty()) {
        std::cout << fmt::format("  {:<7} found everything in its top {}\n", m.method, r.k);
        continue;
      }
      std::cout << fmt::format("  {:<7} missed: {}\n", m.method, fmt::join(misses, "; "));
      for (size_t i = 0; i < m.top.size(); ++i) {
        const auto& h = m.top[i];
        std::cout << fmt::format("          {}. {}{}, chunk {}: {}\n", i + 1, h.gold ? "* " : "",
                                 h.document_id, h.index, h.preview);
      }
    }
  }
  if (!r.per_question.empty()) std::cout << "\n(* a gold passage)\n";
}

}  // namespace

Command AddEvalCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "eval",
      "Score every retrieval method on your own questions with gold (a JSONL file: question "
      "plus any of gold_chunks, gold_documents, answers, evidence), each beside BM25 over the "
      "same index: recall@k, recall within BM25's characters, answer containment, evidence "
      "coverage and latency, each difference from BM25 with its 95% margin (from 10 questions "
      "on). No chat model is called. See docs/eval.md.");
  struct Opts {
    std::string file;
    std::string methods = "bm25,vector,graph,hybrid,local";
    int k = 5;
    int64_t limit = 0;
    bool explain = false;
    bool json = false;
    bool no_progress = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("FILE", o->file, "The questions, JSON Lines")->required();
  cmd->add_option("--methods", o->methods,
                  "Methods to score, comma-separated: bm25, vector, graph, hybrid, local "
                  "(BM25 always runs: it is the baseline)")
      ->capture_default_str();
  cmd->add_option("--k", o->k, "Passages measured (10 is measured too)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--limit", o->limit, "Score only the first N questions (0: all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--explain", o->explain,
                "Per question: what each method missed and what it ranked instead");
  cmd->add_flag("--json", o->json, "Print the report as JSON (with --explain: per question too)");
  cmd->add_flag("--no-progress", o->no_progress, "No progress display on stderr");
  return {cmd, [o, &g]() {
            std::ifstream in(o->file, std::ios::binary);
            if (!in) return Fail(Status::NotFound("cannot read " + o->file));
            std::ostringstream text;
            text << in.rdbuf();
            auto questions = ParseEvalQuestions(text.str());
            if (!questions.ok()) return Fail(questions.status().WithContext(o->file));
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            EngineOptions eo;
            eo.keep_graph = true;  // many questions: read the graph once
            auto engine = Engine::Open(*config, eo);
            if (!engine.ok()) return Fail(engine.status());
            EvalOptions options;
            options.methods = SplitList(o->methods);
            options.k = o->k;
            options.limit = o->limit;
            options.keep_details = o->explain;
            const bool tty = isatty(STDERR_FILENO) != 0;
            const auto start = std::chrono::steady_clock::now();
            int last_tenth = -1;
            auto progress = [&](int64_t done, int64_t total) {
              if (o->no_progress || total < kProgressFrom) return;
              const double s =
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
              const int tenth = static_cast<int>(10 * done / total);
              if (tty) {
                std::cerr << fmt::format("\r\033[Keval  {}/{} questions  {:.1f}s", done, total, s)
                          << (done == total ? "\n" : "") << std::flush;
              } else if (tenth != last_tenth) {
                std::cerr << fmt::format("eval  {}/{} questions  {:.1f}s\n", done, total, s);
              }
              last_tenth = tenth;
            };
            auto report = EvaluateRetrieval(**engine, *questions, options, progress);
            if (!report.ok()) return Fail(report.status());
            for (const auto& d : report->diagnostics) std::cerr << "note: " << d << "\n";
            if (o->json) {
              std::cout << EvalReportJson(*report, isatty(STDOUT_FILENO) != 0) << "\n";
              return kExitOk;
            }
            PrintReport(*report, o->file);
            if (o->explain) PrintExplain(*report);
            return kExitOk;
          }};
}

}  // namespace grag::cli
