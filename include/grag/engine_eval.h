// grag eval: a user's questions with gold, asked of every retrieval method over one index, each
// scored beside BM25 (grag/retrieval_eval.h holds the file format and the measures). What the
// CLI's `grag eval` and scripts call; the CLI only parses flags and prints.
//
// For each question and method, one ranking is read (deep enough for the cuts below) and its
// time taken. It is then measured
//   at each cutoff (k, and 10): its first `cutoff` passages;
//   at BM25's characters: its first passages within the characters BM25's first `cutoff` used
//     for that question, so a method that returns longer passages gains nothing by it.
// Methods: bm25, vector, graph, hybrid (grag search) and local (the chunk passages of local
// search's context, in the order it placed them; no LLM call). BM25 always runs: it is the
// baseline.
//
// Thread-safety: runs on the calling thread; the engine may serve other calls meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "grag/engine.h"
#include "grag/search_results.h"
#include "grag/status.h"

namespace grag {

struct EvalOptions {
  // Methods shown beside BM25, in this order (BM25 is added first if missing). Each one of
  // bm25, vector, graph, hybrid, local.
  std::vector<std::string> methods = {"bm25", "vector", "graph", "hybrid", "local"};
  // The main cutoff; 10 is always measured too (the cutoffs a user compares with papers).
  int k = 5;
  // Questions scored at most, from the top of the file (0: all).
  int64_t limit = 0;
  // Keep each question's rankings and misses in the report (per_question): --explain.
  bool keep_details = false;
};

// Questions with a kind of gold needed before its difference from BM25 gets a margin.
inline constexpr int64_t kMinMarginQuestions = 10;

// Averages over the questions that have that kind of gold (nullopt: no question has it).
struct EvalAverages {
  std::optional<double> chunk_recall;
  std::optional<double> document_recall;
  std::optional<double> answer_contained;
  std::optional<double> evidence_coverage;
  double passages = 0;  // mean passages in the cut
  double chars = 0;     // mean characters in the cut
  // The 95% margin of each measure's difference from BM25, in points (PairedMargin over the
  // questions' paired differences): a difference inside it could be the luck of the questions
  // asked. nullopt for BM25 itself and for a measure fewer than kMinMarginQuestions questions
  // have (too few for the t distribution's margin to mean much with scores of 0 and 1).
  struct Margins {
    std::optional<double> chunk_recall;
    std::optional<double> document_recall;
    std::optional<double> answer_contained;
    std::optional<double> evidence_coverage;
  } vs_bm25_margin;
};

struct EvalMethodReport {
  std::string method;
  std::vector<EvalAverages> at_k;           // one per EvalReport::cutoffs
  std::vector<EvalAverages> at_bm25_chars;  // one per cutoff: within BM25's characters at it
  double p50_ms = 0;
  double p95_ms = 0;
  // local only: the whole context's characters (entities, relationships, reports, chunks).
  std::optional<double> context_chars;
};

// One question under one method, for --explain.
struct EvalQuestionMethod {
  std::string method;
  struct Hit {
    std::string chunk_id;
    std::string document_id;
    int64_t index = 0;    // the chunk's position in its document
    std::string preview;  // its first words
    bool gold = false;    // a gold chunk, or a chunk of a gold document
  };
  std::vector<Hit> top;                       // its first k
  std::vector<std::string> missed_chunks;     // gold chunk ids not in its first k
  std::vector<std::string> missed_documents;  // gold document ids not in its first k
  std::vector<std::string> missed_evidence;   // evidence sentences not covered by its first k
  std::optional<bool> answer_found;
  double ms = 0;
};

struct EvalQuestionDetail {
  int64_t line = 0;
  std::string question;
  std::vector<EvalQuestionMethod> methods;  // as EvalReport::methods
};

struct EvalReport {
  int64_t questions = 0;
  int k = 5;
  std::vector<int> cutoffs;  // k and 10, ascending, distinct
  // Questions with each kind of gold.
  int64_t with_chunks = 0, with_documents = 0, with_answers = 0, with_evidence = 0;
  std::vector<EvalMethodReport> methods;         // BM25 first
  std::vector<EvalQuestionDetail> per_question;  // with keep_details
  // Gold ids the index does not hold (no method can find them), and similar warnings.
  std::vector<std::string> diagnostics;
};

// Scores `questions` (ParseEvalQuestions) on `engine`'s index. `on_progress(done, total)` is
// called after each question (may be empty). Errors: kInvalidArgument for an unknown method or
// k out of 1-100; a question the engine refuses (named by its line); the store's errors.
Result<EvalReport> EvaluateRetrieval(Engine& engine, const std::vector<EvalQuestion>& questions,
                                     const EvalOptions& options,
                                     const std::function<void(int64_t, int64_t)>& on_progress = {});

// The report as JSON (the shape docs/eval.md shows); pretty: indented.
std::string EvalReportJson(const EvalReport& report, bool pretty);

}  // namespace grag
