// Scoring retrieval against gold (see grag/retrieval_eval.h).
#include "grag/retrieval_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "grag/words.h"

namespace grag {
namespace {

using nlohmann::json;

constexpr std::string_view kFields[] = {"question", "gold_chunks", "gold_documents", "answers",
                                        "evidence"};

Status LineError(int64_t line, const std::string& what) {
  return Status::InvalidArgument(fmt::format("line {}: {}", line, what));
}

// A gold field: an array of strings; empty strings are dropped (they would match anything).
Result<std::vector<std::string>> StringArray(const json& object, const char* field, int64_t line) {
  std::vector<std::string> out;
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return out;
  if (!it->is_array()) {
    return LineError(line, fmt::format("\"{}\" must be an array of strings", field));
  }
  for (const auto& v : *it) {
    if (!v.is_string()) {
      return LineError(
          line, fmt::format("\"{}\" must be an array of strings, found {}", field, v.type_name()));
    }
    std::string s = v.get<std::string>();
    if (s.find_first_not_of(" \t\r\n") != std::string::npos) out.push_back(std::move(s));
  }
  return out;
}

// How deep arrays and objects nest in a JSON text (brackets inside strings do not count). A
// question line needs 2; a line nested thousands deep would exhaust the stack of any recursive
// walk of the parsed value, so it is refused before parsing.
int MaxNesting(std::string_view text) {
  int depth = 0, max = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max = std::max(max, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max;
}

constexpr int kMaxNesting = 16;

int64_t CodePoints(std::string_view text) {
  int64_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

std::vector<std::string> SortedTerms(std::string_view text) {
  std::vector<std::string> terms = ContentTerms(text);
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  return terms;
}

}  // namespace

Result<std::vector<EvalQuestion>> ParseEvalQuestions(std::string_view jsonl) {
  std::vector<EvalQuestion> out;
  int64_t line = 0;
  size_t pos = 0;
  while (pos < jsonl.size()) {
    size_t end = jsonl.find('\n', pos);
    if (end == std::string_view::npos) end = jsonl.size();
    std::string_view text = jsonl.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (line == 1 && text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // a BOM
    if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    if (MaxNesting(text) > kMaxNesting) {
      return LineError(line, fmt::format("JSON nested more than {} deep (a question line needs 2)",
                                         kMaxNesting));
    }
    json object;
    try {
      object = json::parse(text);
    } catch (const json::exception& e) {
      // nlohmann's message says where in the line and what it expected.
      std::string why = e.what();
      const auto colon = why.find("parse error");
      return LineError(
          line, "not valid JSON (" + (colon == std::string::npos ? why : why.substr(colon)) + ")");
    }
    if (!object.is_object()) {
      return LineError(line, "expected a JSON object {\"question\": ..., ...}");
    }
    for (const auto& [key, value] : object.items()) {
      if (std::find(std::begin(kFields), std::end(kFields), key) == std::end(kFields)) {
        return LineError(line, fmt::format("unknown field \"{}\" (fields: question, gold_chunks, "
                                           "gold_documents, answers, evidence)",
                                           key));
      }
    }
    EvalQuestion q;
    q.line = line;
    auto question = object.find("question");
    if (question == object.end() || !question->is_string() ||
        question->get<std::string>().find_first_not_of(" \t\r\n") == std::string::npos) {
      return LineError(line, "\"question\" must be a non-empty string");
    }
    q.question = question->get<std::string>();
    GRAG_ASSIGN_OR_RETURN(q.gold_chunks, StringArray(object, "gold_chunks", line));
    GRAG_ASSIGN_OR_RETURN(q.gold_documents, StringArray(object, "gold_documents", line));
    GRAG_ASSIGN_OR_RETURN(q.answers, StringArray(object, "answers", line));
    GRAG_ASSIGN_OR_RETURN(q.evidence, StringArray(object, "evidence", line));
    if (q.gold_chunks.empty() && q.gold_documents.empty() && q.answers.empty() &&
        q.evidence.empty()) {
      return LineError(line,
                       "no gold to score against: give at least one non-empty gold_chunks, "
                       "gold_documents, answers or evidence");
    }
    out.push_back(std::move(q));
  }
  if (out.empty()) return Status::InvalidArgument("no question in the file (it is empty)");
  return out;
}

EvalPassage MakeEvalPassage(std::string chunk_id, std::string document_id, std::string_view text) {
  EvalPassage p;
  p.chunk_id = std::move(chunk_id);
  p.document_id = std::move(document_id);
  p.chars = CodePoints(text);
  p.folded = " " + NormalizeEntityName(text) + " ";
  p.terms = SortedTerms(text);
  return p;
}

double RecallOf(std::span<const std::string> found, std::span<const std::string> gold) {
  const std::set<std::string> want(gold.begin(), gold.end());
  if (want.empty()) return 0;
  const std::set<std::string> have(found.begin(), found.end());
  size_t hit = 0;
  for (const auto& g : want) hit += have.count(g);
  return static_cast<double>(hit) / static_cast<double>(want.size());
}

size_t CountWithinBudget(std::span<const int64_t> sizes, int64_t budget) {
  int64_t used = 0;
  size_t n = 0;
  for (int64_t s : sizes) {
    if (used + s > budget) break;
    used += s;
    ++n;
  }
  return n;
}

bool ContainsAnswer(std::span<const EvalPassage> passages, std::span<const std::string> answers) {
  for (const auto& a : answers) {
    const std::string key = NormalizeEntityName(a);
    if (key.empty()) continue;
    const std::string needle = " " + key + " ";
    for (const auto& p : passages) {
      if (p.folded.find(needle) != std::string::npos) return true;
    }
  }
  return false;
}

bool EvidenceCovered(std::string_view sentence, std::span<const EvalPassage> passages,
                     double threshold) {
  const std::vector<std::string> words = SortedTerms(sentence);
  if (words.empty()) return false;
  const auto need =
      static_cast<size_t>(std::ceil(threshold * static_cast<double>(words.size()) - 1e-9));
  for (const auto& p : passages) {
    size_t hit = 0;
    for (const auto& w : words) {
      hit += std::binary_search(p.terms.begin(), p.terms.end(), w) ? 1 : 0;
    }
    if (hit >= need) return true;
  }
  return false;
}

EvalScore ScorePassages(const EvalQuestion& question, std::span<const EvalPassage> passages) {
  EvalScore s;
  s.passages = static_cast<int64_t>(passages.size());
  std::vector<std::string> chunks, documents;
  for (const auto& p : passages) {
    s.chars += p.chars;
    chunks.push_back(p.chunk_id);
    documents.push_back(p.document_id);
  }
  if (!question.gold_chunks.empty()) s.chunk_recall = RecallOf(chunks, question.gold_chunks);
  if (!question.gold_documents.empty()) {
    s.document_recall = RecallOf(documents, question.gold_documents);
  }
  if (!question.answers.empty()) {
    s.answer_contained = ContainsAnswer(passages, question.answers) ? 1.0 : 0.0;
  }
  if (!question.evidence.empty()) {
    size_t covered = 0;
    for (const auto& e : question.evidence) covered += EvidenceCovered(e, passages) ? 1 : 0;
    s.evidence_coverage =
        static_cast<double>(covered) / static_cast<double>(question.evidence.size());
  }
  return s;
}

std::optional<double> PairedMargin(int64_t n, double sum, double sum_squares) {
  if (n < 2) return std::nullopt;
  // Two-sided 95% points of Student's t for 1-30 degrees of freedom; beyond, the first
  // correction of the normal's 1.96 (within 0.003 of the exact value from 30 on).
  static constexpr double kT95[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                    2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                    2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                    2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  const auto df = n - 1;
  const double t = df <= 30 ? kT95[df - 1] : 1.96 + 2.372 / static_cast<double>(df);
  const double count = static_cast<double>(n);
  const double mean = sum / count;
  // Rounding can take a zero variance a hair below zero.
  const double variance = std::max(0.0, (sum_squares - count * mean * mean) / (count - 1));
  return t * std::sqrt(variance / count);
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(q * static_cast<double>(values.size()));
  const size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(i, values.size() - 1)];
}

}  // namespace grag
