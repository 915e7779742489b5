// The index pipeline's reports stage: what RunIndex calls (stages.h).
#include "stages.h"

#include <unordered_set>

#include "grag/extractive_report.h"
#include "grag/literal_value.h"
#include "grag/prompts.h"
#include "grag/report.h"

namespace grag {
namespace {

// The reports of every community: by the LLM, or (no LLM) assembled from the community's own
// sentences.
Result<ReportStageSummary> WriteReports(Run& run, const Tokenizer& tok, bool refresh_all) {
  const Config& c = run.config();
  auto progress = [&run](const ReportProgress& p) { run.Progress("reports", p.done, p.total); };
  ExtractiveReportOptions eo;
  eo.cancel = run.cancel_flag();
  if (run.chat() == nullptr) return GenerateExtractiveReports(run.store(), tok, eo, progress);
  // A community of a few entities (an island of two or three) is worth no call: its report is
  // assembled from its own sentences, so every entity still has a reported community. Members
  // that are literal values (dates, numbers, amounts, quantities) do not count: a hub and its
  // attributes, or a chain of dates, says nothing a model could add to its sentences.
  const int64_t min_size = c.communities.llm_report_min_size;
  std::unordered_set<int64_t> literal;
  if (min_size > 0) {
    GRAG_ASSIGN_OR_RETURN(std::vector<EntityRecord> entities, run.store().ListEntities());
    for (const EntityRecord& e : entities) {
      if (IsLiteralValue(e.name, e.type)) literal.insert(e.id);
    }
  }
  auto llm_worthy = [min_size, literal = std::move(literal)](const CommunityRecord& community) {
    if (community.size < min_size) return false;
    int64_t things = 0;
    for (int64_t id : community.entity_ids) things += literal.count(id) ? 0 : 1;
    return things >= min_size;
  };
  eo.include = [llm_worthy](const CommunityRecord& community) { return !llm_worthy(community); };
  ReportOptions ro;
  GRAG_ASSIGN_OR_RETURN(ro.prompt,
                        LoadPrompt(c.Resolve(c.prompts_dir), PromptId::kCommunityReport));
  ro.concurrency = static_cast<int>(LlmConcurrency(c, "summarize"));
  ro.json_mode = c.llm.json_mode;
  ro.cancel = run.cancel_flag();  // Ctrl-C: no new community starts
  ro.include = llm_worthy;
  ro.refresh_threshold = c.communities.report_refresh_threshold;
  ro.refresh_all = refresh_all;
  // Small ones first: they are children a larger community's prompt may draw on.
  ReportStageSummary small;
  if (min_size > 0) {
    GRAG_ASSIGN_OR_RETURN(small, GenerateExtractiveReports(run.store(), tok, eo, progress));
  }
  GRAG_ASSIGN_OR_RETURN(ReportStageSummary out,
                        GenerateReports(run.store(), *run.chat(), tok, ro, progress));
  out.communities += small.communities;
  out.generated += small.generated;
  out.reused += small.reused;
  out.gaps += small.gaps;
  out.extractive = small.generated + small.reused;
  return out;
}

}  // namespace

Status Reports(Run& run, ReportsSummary& s, bool refresh_all) {
  GRAG_ASSIGN_OR_RETURN(const Tokenizer* tok, Tokenizer::Get(run.config().chunks.encoding));
  GRAG_ASSIGN_OR_RETURN(ReportStageSummary rs, WriteReports(run, *tok, refresh_all));
  s.reports_kept_stale = rs.kept_stale;
  s.reports_generated = rs.generated;
  s.reports_reused = rs.reused;
  s.reports_extractive = rs.extractive;
  s.report_gaps = rs.gaps;
  if (run.cancelled()) return Status::Cancelled("interrupted");
  return Status::Ok();
}

}  // namespace grag
