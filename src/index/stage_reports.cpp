// The index pipeline's reports stage: what RunIndex calls (stages.h).
#include "stages.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "grag/extractive_report.h"
#include "grag/hash.h"
#include "grag/literal_value.h"
#include "grag/log.h"
#include "grag/prompts.h"
#include "grag/report.h"

namespace grag {
namespace {

// Which communities are worth an LLM report. A community of a few entities (an island of two
// or three) is worth no call: its report is assembled from its own sentences, so every entity
// still has a reported community. Members that are literal values (dates, numbers, amounts,
// quantities) do not count: a hub and its attributes, or a chain of dates, says nothing a model
// could add to its sentences.
Result<std::function<bool(const CommunityRecord&)>> LlmWorthy(Store& store, int64_t min_size) {
  std::unordered_set<int64_t> literal;
  if (min_size > 0) {
    GRAG_ASSIGN_OR_RETURN(std::vector<EntityRecord> entities, store.ListEntities());
    for (const EntityRecord& e : entities) {
      if (IsLiteralValue(e.name, e.type)) literal.insert(e.id);
    }
  }
  return std::function<bool(const CommunityRecord&)>(
      [min_size, literal = std::move(literal)](const CommunityRecord& community) {
        if (community.size < min_size) return false;
        int64_t things = 0;
        for (int64_t id : community.entity_ids) things += literal.count(id) ? 0 : 1;
        return things >= min_size;
      });
}

Result<ReportOptions> LlmReportOptions(const Config& c, const std::atomic<bool>* cancel) {
  ReportOptions ro;
  GRAG_ASSIGN_OR_RETURN(ro.prompt,
                        LoadPrompt(c.Resolve(c.prompts_dir), PromptId::kCommunityReport));
  ro.concurrency = static_cast<int>(LlmConcurrency(c, "summarize"));
  ro.json_mode = c.llm.json_mode;
  ro.cancel = cancel;  // Ctrl-C: no new community starts
  ro.refresh_threshold = c.communities.report_refresh_threshold;
  return ro;
}

void AddUp(ReportStageSummary& out, const ReportStageSummary& more) {
  out.communities += more.communities;
  out.generated += more.generated;
  out.reused += more.reused;
  out.gaps += more.gaps;
}

// The reports of every community: by the LLM, or (no LLM) assembled from the community's own
// sentences. With reports.mode = lazy the LLM writes none: a community that would need a call
// gets an extractive report for now (WriteDeferredReports writes the real one).
Result<ReportStageSummary> WriteReports(Run& run, const Tokenizer& tok, bool refresh_all) {
  const Config& c = run.config();
  auto progress = [&run](const ReportProgress& p) { run.Progress("reports", p.done, p.total); };
  ExtractiveReportOptions eo;
  eo.cancel = run.cancel_flag();
  if (run.chat() == nullptr) return GenerateExtractiveReports(run.store(), tok, eo, progress);
  const int64_t min_size = c.communities.llm_report_min_size;
  GRAG_ASSIGN_OR_RETURN(auto llm_worthy, LlmWorthy(run.store(), min_size));
  eo.include = [llm_worthy](const CommunityRecord& community) { return !llm_worthy(community); };
  GRAG_ASSIGN_OR_RETURN(ReportOptions ro, LlmReportOptions(c, run.cancel_flag()));
  ro.include = llm_worthy;
  ro.refresh_all = refresh_all;
  ro.defer = c.reports.mode == "lazy";
  // Small ones first: they are children a larger community's prompt may draw on.
  ReportStageSummary small;
  if (min_size > 0) {
    GRAG_ASSIGN_OR_RETURN(small, GenerateExtractiveReports(run.store(), tok, eo, progress));
  }
  GRAG_ASSIGN_OR_RETURN(ReportStageSummary out,
                        GenerateReports(run.store(), *run.chat(), tok, ro, progress));
  AddUp(out, small);
  out.extractive = small.generated + small.reused;
  if (out.deferred > 0) {
    std::unordered_set<int64_t> deferred;
    for (const CommunityReportOutcome& o : out.outcomes) {
      if (o.action == ReportAction::kDeferred) deferred.insert(o.community_id);
    }
    eo.include = [&deferred](const CommunityRecord& community) {
      return deferred.count(community.id) != 0;
    };
    GRAG_ASSIGN_OR_RETURN(ReportStageSummary stand_ins,
                          GenerateExtractiveReports(run.store(), tok, eo, progress));
    out.generated += stand_ins.generated;
    out.reused += stand_ins.reused;
    out.gaps += stand_ins.gaps;
    out.extractive += stand_ins.generated + stand_ins.reused;
  }
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
  s.reports_deferred = rs.deferred;
  if (run.cancelled()) return Status::Cancelled("interrupted");
  return Status::Ok();
}

namespace {

// The reports a question wrote, embedded as the embed stage would embed them, when the index's
// report vectors are `embedder`'s (else the next index run embeds them).
Result<int64_t> EmbedWrittenReports(const Config& config, Store& store, EmbeddingModel& embedder,
                                    const ReportStageSummary& rs, const std::atomic<bool>* cancel) {
  GRAG_ASSIGN_OR_RETURN(std::optional<EmbeddingSpace> space,
                        store.GetEmbeddingSpace(EmbeddingOwner::kReport));
  if (!space || space->model != embedder.model()) return int64_t{0};
  std::vector<EmbedItem> todo;
  for (const CommunityReportOutcome& o : rs.outcomes) {
    if (o.action != ReportAction::kGenerated) continue;
    GRAG_ASSIGN_OR_RETURN(std::optional<ReportRecord> r, store.GetReport(o.community_id));
    if (r && r->status == ReportStatus::kOk && !r->full_content.empty()) {
      todo.push_back(ReportEmbedItem(*r));
    }
  }
  int64_t written = 0;
  GRAG_RETURN_IF_ERROR(EmbedItems(config, store, embedder, EmbeddingOwner::kReport, todo, cancel,
                                  "embed reports", {}, written));
  return written;
}

}  // namespace

Result<DeferredReports> WriteDeferredReports(const Config& config, Store& store, ChatModel& chat,
                                             const std::vector<int64_t>& community_ids,
                                             const std::atomic<bool>* cancel,
                                             EmbeddingModel* embedder) {
  DeferredReports out;
  GRAG_ASSIGN_OR_RETURN(std::vector<ReportRecord> reports,
                        store.ListReports(std::nullopt, /*findings=*/false));
  std::unordered_map<int64_t, const ReportRecord*> report_of;
  for (const ReportRecord& r : reports) report_of[r.community_id] = &r;
  GRAG_ASSIGN_OR_RETURN(std::vector<CommunityRecord> communities, store.ListCommunities());
  std::unordered_map<int64_t, const CommunityRecord*> community_of;
  for (const CommunityRecord& c : communities) community_of[c.id] = &c;

  // Those without a model's report yet: a stand-in, a gap, or nothing.
  const int64_t min_size = config.communities.llm_report_min_size;
  std::vector<const CommunityRecord*> candidates;
  for (int64_t id : community_ids) {
    auto c = community_of.find(id);
    if (c == community_of.end() || c->second->size < min_size) continue;
    auto r = report_of.find(id);
    if (r != report_of.end() && r->second->status == ReportStatus::kOk &&
        r->second->generator == ReportGenerator::kLlm) {
      continue;
    }
    candidates.push_back(c->second);
  }
  if (candidates.empty()) return out;
  GRAG_ASSIGN_OR_RETURN(auto llm_worthy, LlmWorthy(store, min_size));
  std::unordered_set<int64_t> chosen;
  const auto budget = static_cast<size_t>(std::max<int64_t>(0, config.reports.lazy_per_question));
  for (const CommunityRecord* c : candidates) {
    if (!llm_worthy(*c)) continue;
    if (chosen.size() < budget) {
      chosen.insert(c->id);
    } else {
      ++out.pending;
    }
  }
  if (chosen.empty()) return out;
  GRAG_ASSIGN_OR_RETURN(const Tokenizer* tok, Tokenizer::Get(config.chunks.encoding));
  GRAG_ASSIGN_OR_RETURN(ReportOptions ro, LlmReportOptions(config, cancel));
  ro.include = [&chosen](const CommunityRecord& c) { return chosen.count(c.id) != 0; };
  Log(LogLevel::kInfo, "reports",
      fmt::format("reports.mode = lazy: writing {} community reports for this question{}",
                  chosen.size(),
                  out.pending > 0 ? fmt::format(" ({} more wait for later questions)", out.pending)
                                  : std::string()));
  GRAG_ASSIGN_OR_RETURN(ReportStageSummary rs, GenerateReports(store, chat, *tok, ro, {}));
  out.written = rs.generated;
  out.gaps = rs.gaps;
  out.calls = rs.llm_calls;
  out.prompt_tokens = rs.prompt_tokens;
  out.completion_tokens = rs.completion_tokens;
  if (embedder != nullptr) {
    // The reports are stored: a failure here costs only their vectors until the next run.
    Result<int64_t> embedded = EmbedWrittenReports(config, store, *embedder, rs, cancel);
    if (embedded.ok()) {
      out.embedded = *embedded;
    } else {
      Log(LogLevel::kWarn, "reports",
          "the reports written for this question were not embedded (" +
              embedded.status().ToString() + "); the next index run embeds them");
    }
  }
  return out;
}

}  // namespace grag
