// Extractive global search (no LLM): BM25 relevance blended with community size scores each
// report, then the LLM path's drop-zero / sort / budget logic, and an answer assembled from the
// top reports. See grag/extractive_search.h for the formulas.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grag/extractive_search.h"
#include "grag/log.h"
#include "grag/words.h"
#include "global_plan.h"

namespace grag {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::chrono::milliseconds Since(SteadyClock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start);
}

// `text` without its "[Data: ...]" citations, whose ids and labels are not content.
std::string WithoutCitations(std::string_view text) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t at = text.find("[Data:", pos);
    if (at == std::string_view::npos) break;
    const size_t end = text.find(']', at);
    if (end == std::string_view::npos) break;
    out.append(text.substr(pos, at - pos));
    pos = end + 1;
  }
  out.append(text.substr(pos));
  return out;
}

// ---------------------------------------------------------------- scoring

// One selected report as scored.
struct Doc {
  const CommunityRecord* community = nullptr;
  const ReportRecord* report = nullptr;
  double prior = 0;
  double lexical = 0;
  int score = 0;
};

std::string DocText(const ReportRecord& r) {
  std::string text = r.title + "\n" + r.title + "\n";
  if (r.findings.empty()) return text + query::ReportBody(r);
  text += r.summary;
  for (const Finding& f : r.findings) text += "\n" + f.summary + "\n" + f.explanation;
  return text;
}

// The question's content words as written (not stemmed: the full-text tokenizer stems), for
// the BM25 query.
std::string QueryWords(std::string_view question) {
  std::string out;
  for (std::string& word : SplitNormalizedName(NormalizeEntityName(question))) {
    if (IsNonContentWord(word)) continue;
    if (!out.empty()) out += ' ';
    out += word;
  }
  return out;
}

// BM25 of each doc against the question (SQLite FTS5, the IDF over these reports), over the
// best doc's: in (0, 1] for a doc that matches, 0 for one that does not.
Status ScoreLexical(Store& store, std::string_view question, std::vector<Doc>* docs) {
  std::vector<std::string> texts;
  texts.reserve(docs->size());
  for (const Doc& d : *docs) texts.push_back(WithoutCitations(DocText(*d.report)));
  GRAG_ASSIGN_OR_RETURN(std::vector<double> bm25, store.RankTexts(texts, QueryWords(question)));
  const double best = bm25.empty() ? 0 : *std::max_element(bm25.begin(), bm25.end());
  for (size_t i = 0; i < docs->size(); ++i) {
    (*docs)[i].lexical = best > 0 ? bm25[i] / best : 0;
  }
  return Status::Ok();
}

void ScorePrior(std::vector<Doc>* docs) {
  double max_weight = 0;
  double max_size = 0;
  for (const Doc& d : *docs) {
    max_weight = std::max(max_weight, static_cast<double>(d.community->weight));
    max_size = std::max(max_size, static_cast<double>(d.community->entity_ids.size()));
  }
  const auto norm = [](double v, double max) {
    return max > 0 ? std::log1p(std::max(v, 0.0)) / std::log1p(max) : 0;
  };
  for (Doc& d : *docs) {
    d.prior = 0.75 * norm(static_cast<double>(d.community->weight), max_weight) +
              0.25 * norm(static_cast<double>(d.community->entity_ids.size()), max_size);
  }
}

int Score(const Doc& d, bool generic, double relevance_weight) {
  if (generic) return std::max(1, static_cast<int>(std::lround(100 * d.prior)));
  if (d.lexical <= 0) return 0;
  const double blended = relevance_weight * d.lexical + (1 - relevance_weight) * d.prior;
  return std::clamp(static_cast<int>(std::lround(100 * blended)), 1, 100);
}

// ---------------------------------------------------------------- rendering

// The report's findings as (headline, body); from "## " sections of full_content when the
// report was stored without parsed findings.
std::vector<std::pair<std::string, std::string>> FindingsOf(const ReportRecord& r) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Finding& f : r.findings) out.emplace_back(f.summary, f.explanation);
  if (!out.empty()) return out;
  size_t pos = 0;
  const std::string& md = r.full_content;
  while ((pos = md.find("\n## ", pos)) != std::string::npos) {
    const size_t start = pos + 4;
    const size_t eol = md.find('\n', start);
    const size_t next = md.find("\n## ", start);
    const std::string headline = md.substr(start, eol == std::string::npos ? eol : eol - start);
    const std::string body = eol == std::string::npos
                                 ? ""
                                 : md.substr(eol, next == std::string::npos ? next : next - eol);
    out.emplace_back(headline, body);
    pos = start;
  }
  return out;
}

std::string Trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1));
}

// The first paragraph after the "# title" line of a markdown report.
std::string LeadParagraph(const ReportRecord& r) {
  std::string md = Trim(r.full_content);
  if (md.rfind("# ", 0) == 0) {
    const size_t eol = md.find('\n');
    md = eol == std::string::npos ? "" : Trim(md.substr(eol));
  }
  return Trim(md.substr(0, md.find("\n\n")));
}

// One point: the report's title and summary, citing it, then its findings most relevant to the
// question (all equal for a generic one).
std::string PointText(const ReportRecord& r, const std::unordered_set<std::string>& terms,
                      int findings_per_point) {
  std::string summary = Trim(r.summary.empty() ? LeadParagraph(r) : r.summary);
  std::string out =
      "**" + (r.title.empty() ? "Community " + std::to_string(r.community_id) : r.title) + "**";
  if (!summary.empty()) out += " \xE2\x80\x94 " + ShortenAtWord(summary, 600);
  out += fmt::format(" [Data: Reports ({})]", r.community_id);

  auto findings = FindingsOf(r);
  std::vector<std::pair<int, size_t>> ranked;  // (-hits, order)
  for (size_t i = 0; i < findings.size(); ++i) {
    int hits = 0;
    for (const std::string& t : ContentTerms(findings[i].first + " " + findings[i].second)) {
      hits += terms.count(t) != 0 ? 1 : 0;
    }
    ranked.emplace_back(-hits, i);
  }
  std::sort(ranked.begin(), ranked.end());
  int shown = 0;
  for (const auto& [minus_hits, i] : ranked) {
    if (shown == findings_per_point) break;
    const std::string headline = Trim(WithoutCitations(findings[i].first));
    // An extractive report's summary quotes its best sentence, which is also its first finding.
    const std::string_view lead = std::string_view(headline).substr(0, 60);
    if (headline.empty() || summary.find(lead) != std::string::npos) continue;
    out += "\n- " + ShortenAtWord(headline, 240);
    ++shown;
  }
  return out;
}

Status CheckOptions(const GlobalSearchOptions& o, const ExtractiveGlobalOptions& e) {
  if (o.level < 0) return Status::InvalidArgument("level must be >= 0 (0 is the coarsest)");
  if (o.reduce_budget_tokens <= 0) {
    return Status::InvalidArgument("reduce_budget_tokens must be > 0");
  }
  if (o.reduce_reply_max_tokens && *o.reduce_reply_max_tokens < 1) {
    return Status::InvalidArgument("reduce_reply_max_tokens must be >= 1");
  }
  if (e.max_answer_points < 1) return Status::InvalidArgument("max_answer_points must be >= 1");
  if (e.findings_per_point < 0) {
    return Status::InvalidArgument("findings_per_point must not be negative");
  }
  if (!(e.relevance_weight >= 0 && e.relevance_weight <= 1)) {
    return Status::InvalidArgument("relevance_weight must be within [0, 1]");
  }
  return Status::Ok();
}

}  // namespace

Result<GlobalSearchResult> ExtractiveGlobalSearch(Store& store, const Tokenizer& tokenizer,
                                                  std::string_view question,
                                                  const GlobalSearchOptions& options,
                                                  const ExtractiveGlobalOptions& extractive) {
  const auto start = SteadyClock::now();
  GRAG_RETURN_IF_ERROR(CheckOptions(options, extractive));
  GRAG_RETURN_IF_ERROR(CheckQuestion(question, tokenizer, options.max_question_tokens));
  GlobalSearchResult result;
  GlobalSearchStats& stats = result.stats;
  stats.level = options.level;

  // ---- select: the communities PlanGlobalSearch would, and their ok reports
  GRAG_ASSIGN_OR_RETURN(std::vector<CommunityRecord> communities, store.ListCommunities());
  GRAG_ASSIGN_OR_RETURN(std::vector<ReportRecord> reports, store.ListReports());
  std::unordered_map<int64_t, const ReportRecord*> report_of;
  for (const ReportRecord& r : reports) report_of[r.community_id] = &r;
  const auto selected = query::SelectCommunities(communities, options.level);
  stats.communities_selected = static_cast<int64_t>(selected.size());
  std::vector<Doc> docs;
  for (const CommunityRecord* c : selected) {
    auto it = report_of.find(c->id);
    if (it == report_of.end() || it->second->status != ReportStatus::kOk) {
      ++stats.reports_missing;
      continue;
    }
    Doc& d = docs.emplace_back();
    d.community = c;
    d.report = it->second;
  }
  if (docs.empty()) {
    if (communities.empty()) {
      return Status::NotFound("the index has no communities: run `grag index` first");
    }
    return Status::NotFound(fmt::format(
        "no community report to search at level {} ({} communities, {} without a report or "
        "with a gap)",
        options.level, stats.communities_selected, stats.reports_missing));
  }
  stats.reports_used = static_cast<int64_t>(docs.size());
  stats.plan_time = Since(start);

  // ---- map: score every report
  const auto map_start = SteadyClock::now();
  std::vector<std::string> terms = ContentTerms(question);
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  const bool generic = terms.empty();
  if (!generic) GRAG_RETURN_IF_ERROR(ScoreLexical(store, question, &docs));
  ScorePrior(&docs);
  for (Doc& d : docs) d.score = Score(d, generic, extractive.relevance_weight);
  // Highest score first; ties to the larger community, then the lower id, so runs repeat.
  std::sort(docs.begin(), docs.end(), [](const Doc& a, const Doc& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.prior != b.prior) return a.prior > b.prior;
    return a.community->id < b.community->id;
  });
  const std::unordered_set<std::string> term_set(terms.begin(), terms.end());
  for (const Doc& d : docs) {
    GlobalPoint& p = result.points.emplace_back();
    p.score = d.score;
    p.community_ids = {d.community->id};
    p.named_by_model = false;
    p.fate = d.score == 0 ? PointFate::kZeroScore : PointFate::kKept;
    if (d.score > 0) p.description = PointText(*d.report, term_set, extractive.findings_per_point);
  }
  stats.map_time = Since(map_start);
  stats.points_total = static_cast<int64_t>(result.points.size());

  // ---- reduce: as many whole points as fit the answer, listed
  const auto reduce_start = SteadyClock::now();
  const std::string& intro = generic ? extractive.generic_intro : extractive.specific_intro;
  int64_t budget = options.reduce_budget_tokens;
  if (options.reduce_reply_max_tokens) {
    budget = std::min<int64_t>(budget, *options.reduce_reply_max_tokens);
  }
  int64_t used = static_cast<int64_t>(tokenizer.Count(intro));
  std::string answer = intro;
  bool full = false;
  for (size_t i = 0; i < result.points.size(); ++i) {
    GlobalPoint& p = result.points[i];
    if (p.fate == PointFate::kZeroScore) {
      ++stats.points_zero_score;
      continue;
    }
    const auto tokens = static_cast<int64_t>(tokenizer.Count("\n\n" + p.description));
    if (full || stats.points_kept == extractive.max_answer_points || used + tokens > budget) {
      full = true;  // whole points only: the first that does not fit ends the list
      p.fate = PointFate::kOverBudget;
      ++stats.points_over_budget;
      continue;
    }
    used += tokens;
    answer += "\n\n" + p.description;
    ++stats.points_kept;
    const ReportRecord& r = *docs[i].report;
    result.citations.push_back({r.community_id, docs[i].community->level, r.title});
  }
  stats.reduce_time = Since(reduce_start);

  if (stats.points_kept == 0 && stats.points_over_budget == 0) {  // seed 000's stop rule
    result.not_covered = true;
    result.answer = options.not_covered_answer;
  } else if (stats.points_kept == 0) {
    return Status::InvalidArgument(
        fmt::format("the answer budget of {} tokens cannot hold the highest-scored point", budget));
  } else {
    result.answer = std::move(answer);
  }
  if (options.on_answer_delta) options.on_answer_delta(result.answer);
  stats.wall_time = Since(start);
  Log(LogLevel::kDebug, "global",
      fmt::format("extractive, level {}: {} reports scored ({} question terms{}), {} points kept, "
                  "{} ms",
                  stats.level, docs.size(), terms.size(), generic ? ", generic question" : "",
                  stats.points_kept, stats.wall_time.count()));
  return result;
}

}  // namespace grag
