// Scoring retrieval against a user's gold (grag eval, bench/retrieval_eval): the question file
// format and the measures, with no store and no model, so each rule is tested on its own.
//
// Measures, for one question and one ranked list of passages already cut to what is measured
// (the first k, or what fits a number of characters):
//   recall            the share of the question's distinct gold items (chunk ids, document
//                     ids) that the passages hold;
//   answer contained  whether one passage holds one of the gold answers, compared case- and
//                     punctuation-folded (NormalizeEntityName) on word boundaries, so "1990"
//                     is not found in "19905" and "U.S." matches "u s";
//   evidence          the share of evidence sentences covered: a sentence is covered when at
//                     least 70% of its distinct content words (ContentTerms: stemmed, function
//                     words out) occur in one passage. Evidence is often paraphrased, so exact
//                     sentences would rarely match; one passage, so that words scattered over
//                     several passages do not count as the fact.
//
// Thread-safety: plain functions over their arguments; no state.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grag/search_results.h"
#include "grag/status.h"

namespace grag {

// A retrieved passage with what scoring needs, computed once per chunk (MakeEvalPassage).
struct EvalPassage {
  std::string chunk_id;
  std::string document_id;
  int64_t chars = 0;               // Unicode code points of its text
  std::string folded;              // " " + NormalizeEntityName(text) + " "
  std::vector<std::string> terms;  // ContentTerms(text), sorted, distinct
};
EvalPassage MakeEvalPassage(std::string chunk_id, std::string document_id, std::string_view text);

// Share of distinct `gold` ids among `found` (0 when gold is empty).
double RecallOf(std::span<const std::string> found, std::span<const std::string> gold);

// How many of the first passages fit `budget` characters, their sizes in rank order: the list
// stops at the first passage that would pass it (as a context builder does; nothing is cut
// mid-passage).
size_t CountWithinBudget(std::span<const int64_t> sizes, int64_t budget);

// Whether one of `answers` occurs in one of the passages (see the header comment).
bool ContainsAnswer(std::span<const EvalPassage> passages, std::span<const std::string> answers);

// Whether at least `threshold` of the sentence's distinct content words occur in one passage.
// A sentence without content words is never covered (nothing says it was found).
inline constexpr double kEvidenceThreshold = 0.7;
bool EvidenceCovered(std::string_view sentence, std::span<const EvalPassage> passages,
                     double threshold = kEvidenceThreshold);

// One question's measures on one cut list; a measure is nullopt when the question has no gold
// of its kind.
struct EvalScore {
  std::optional<double> chunk_recall;
  std::optional<double> document_recall;
  std::optional<double> answer_contained;   // 0 or 1
  std::optional<double> evidence_coverage;  // share of its sentences covered
  int64_t passages = 0;
  int64_t chars = 0;
};
EvalScore ScorePassages(const EvalQuestion& question, std::span<const EvalPassage> passages);

// The value at quantile q (0-1) of `values` (nearest rank; 0 when empty). Sorts a copy.
double Quantile(std::vector<double> values, double q);

// The 95% margin of the mean of `n` paired differences (a method's score minus BM25's on the
// same question), given their sum and sum of squares: Student's t for n - 1 degrees of freedom
// times the standard error. A difference inside its margin could be the luck of which
// questions were asked. nullopt under two differences.
std::optional<double> PairedMargin(int64_t n, double sum, double sum_squares);

}  // namespace grag
