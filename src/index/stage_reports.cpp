// The index pipeline's reports stage: what RunIndex calls (stages.h).
#include "stages.h"

#include "grag/extractive_report.h"
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
  // assembled from its own sentences, so every entity still has a reported community.
  const int64_t min_size = c.communities.llm_report_min_size;
  eo.include = [min_size](const CommunityRecord& community) { return community.size < min_size; };
  ReportOptions ro;
  GRAG_ASSIGN_OR_RETURN(ro.prompt,
                        LoadPrompt(c.Resolve(c.prompts_dir), PromptId::kCommunityReport));
  ro.concurrency = static_cast<int>(LlmConcurrency(c));
  ro.json_mode = c.llm.json_mode;
  ro.cancel = run.cancel_flag();  // Ctrl-C: no new community starts
  ro.include = [min_size](const CommunityRecord& community) { return community.size >= min_size; };
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
