// Community reports: one LLM-written report per community, finest level first (seed 000 step 4).
//
// The prompt. Seed 000's Community report prompt (PromptId::kCommunityReport, editable by the
// user) is filled with two tables in Microsoft GraphRAG's style, with short integer ids local to
// the prompt so that findings can cite them:
//   {{entities}}       id,entity,type,description,degree      ranked by degree
//   {{relationships}}  id,source,target,description,weight   internal ones (both ends in the
//                                                            community), ranked by combined
//                                                            degree, then weight
// Degrees are over the whole graph. The two tables share a token budget (counted with the real
// tokenizer) and are cut by whole rows, never mid-row.
//
// Bottom-up. When a community's own rows do not fit, its children's reports (written earlier in
// the same run, finest level first) stand in for the children's rows: the children with the most
// tokens of rows are substituted first, one at a time, until the rest fits (Microsoft GraphRAG's
// approach). A substituted child's entities and the relationships inside it are left out; the
// relationships between children stay, as no child report holds them. The reports go at the top
// of the {{entities}} value (the seed prompt's only slot for what the community is made of), so an
// edited prompt file gets them too. When even all the children's reports leave it too long, the
// largest children's reports are kept as far as they fit and the remaining rows are cut by rank.
//
// The reply format. The seed prompt stays verbatim in the prompt file; the JSON format
// instruction (ReportOptions::json_instruction) is appended in code after the filled prompt. So a
// user editing the prompt file changes what the reports say, while the format the parser relies
// on travels with the parser and cannot be lost by an edit. The reply is parsed tolerantly (see
// ParseReportReply); a reply that cannot be parsed is rejected by the call's validator (so it is
// never cached), asked for once more, and then recorded as a gap (ReportStatus::kGap with the
// reason) instead of failing the run.
//
// Re-runs. Each report stores an input hash: the exact prompt sent (template, instruction, every
// row and child report in it), the ids and input hashes of the child reports used, and the model.
// A community whose stored ok report has the same hash is not regenerated, so a re-run on an
// unchanged graph makes no LLM call, and a changed description regenerates only the communities
// whose prompt showed it: its own and its ancestors'. Gaps are always tried again.
//
// Updates. A report is worth rewriting when its community changed materially, not whenever one
// more description or one more member changed its prompt. Each LLM report records its basis (the
// members, the summed weight of the relationships inside the community, and a fingerprint of
// prompt template, format and model). When a community's prompt changed but the community changed
// less than ReportOptions::refresh_threshold since the basis (see CommunityChange), the report
// stands, marked stale (ReportRecord::stale), with no call; the change is measured against the
// basis, so small changes add up until they cross the threshold. A parent is measured on its own
// members, so a rewritten child does not force its parent. ReportOptions::refresh_all (grag index
// --refresh-reports) rewrites every report whose prompt changed, stale or not.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/llm.h"
#include "grag/prompts.h"
#include "grag/status.h"
#include "grag/store.h"
#include "grag/store_types.h"
#include "grag/tokenizer.h"

namespace grag {

// The JSON format instruction appended after the filled Community report prompt.
inline constexpr std::string_view kReportJsonInstruction =
    R"(Return only a JSON object in this format:
{"title": "<a short, specific name for the community that names its key entities>",
 "summary": "<one paragraph on what ties these entities together>",
 "rating": <how important the community is, from 0 to 10>,
 "rating_explanation": "<one sentence on why>",
 "findings": [{"summary": "<the finding in one line>",
               "explanation": "<a few sentences, grounded only in the data above>",
               "entities": ["<name of an entity the finding rests on>", "..."]}]}
Give 3 to 6 findings. Use only what the data above says.)";

struct ReportOptions {
  // Tokens for the {{entities}} and {{relationships}} values together: Microsoft GraphRAG's
  // default (max_input_length 8000), small enough for any current model with room for the reply.
  int64_t max_context_tokens = 8000;
  // Findings kept from a reply. The prompt asks for 3 to 6; a model that sends 7 keeps all 7
  // (they cost nothing more), but a runaway list is cut so the report stays a summary.
  int max_findings = 10;
  // Communities of one level generated at once (levels run one after another, finest first).
  // GraphRAG's default; the LLM client's own concurrency limit still applies.
  int concurrency = 16;
  // The Community report prompt template, with {{entities}} and {{relationships}}. The index
  // passes LoadPrompt(prompts_dir, PromptId::kCommunityReport); the default is seed 000's.
  std::string prompt = std::string(GetPromptInfo(PromptId::kCommunityReport).default_text);
  // Appended after the filled prompt (see the file comment for why it is not in the prompt file).
  std::string json_instruction = std::string(kReportJsonInstruction);
  // Ask the server for a JSON object: fewer unparseable replies, so fewer retries and gaps.
  bool json_mode = true;
  // Reply cap: a report with 6 findings is ~1,500 tokens; the cap only stops a runaway reply
  // (a cut reply is unparseable and ends as a gap). nullopt: the server's default.
  std::optional<int> max_tokens = 4000;
  // Borrowed; when it becomes true no new community starts, the calls in flight finish and are
  // stored, and GenerateReports returns kCancelled (Ctrl-C). nullptr: never cancelled.
  const std::atomic<bool>* cancel = nullptr;
  // The communities this run writes reports for (the others are left as they are, and their
  // stored ok reports still stand in for children); empty: every community.
  std::function<bool(const CommunityRecord&)> include;
  // A report whose community changed less than this since it was written stands (marked stale)
  // instead of being rewritten (see the file comment and CommunityChange). 0: any change to the
  // prompt rewrites it. 0.2: a fifth of the members, of the internal relationship weight or of
  // the members' degree is new or gone — the size of change after which a summary of the
  // community's main entities and ties is likely to miss something; below it the report's
  // findings still hold and the new material is reachable through local search.
  double refresh_threshold = 0.2;
  // Rewrite every report whose prompt changed, however small the change (and every stale one).
  bool refresh_all = false;
  // Make no call (reports.mode = lazy at index time): a community whose stored report can be
  // neither reused nor kept stale is left as it is (ReportAction::kDeferred) for the caller to
  // give an extractive stand-in, and its report is written when a question needs it.
  bool defer = false;
};

// How much a community changed since its report's basis, from 0 (same members, same internal
// weight) upwards: the largest of (members added + members removed) / members then, |internal
// weight now - then| / weight then, and the added members' share of the members' total degree
// (a new hub counts for more than a new leaf). `internal_weight` and `degree_of` describe the
// graph now. 1 when the basis is empty.
double CommunityChange(const ReportBasis& basis, const std::vector<int64_t>& members_now,
                       double internal_weight_now,
                       const std::function<int64_t(int64_t)>& degree_of);

// A parsed reply: what a report holds before it is rendered to markdown.
struct ParsedReport {
  std::string title;  // may be empty: the generator then names the community
  std::string summary;
  std::optional<double> rating;  // clamped to [0, 10]; nullopt when absent or not a number
  std::string rating_explanation;
  std::vector<Finding> findings;  // in the reply's order
};

// Parses a report reply, accepting what a model sends within reason: code fences or prose around
// the object, the object wrapped in another ({"report": {...}}) or in an array, findings as
// strings or as an object of summary -> explanation, a finding with only an explanation, a rating
// as a string ("8", "8.5/10") or missing, `entities` as one comma-separated string, as ids or as
// objects with a name, and any number of findings. Entity references are returned as given
// (trimmed, deduplicated, numbers as their decimal text). kParse when there is no JSON object or
// it has neither a summary nor a finding.
Result<ParsedReport> ParseReportReply(std::string_view reply);

// The report as markdown, as global search feeds it to the map model (Microsoft GraphRAG's
// full_content): "# title", the summary, then "## summary" and the explanation of each finding.
std::string RenderReportMarkdown(const ParsedReport& report);

// The prompt of one community, as it was (or would be) sent.
struct ReportInput {
  int64_t community_id = 0;
  int64_t level = 0;
  std::string entities;       // the {{entities}} value: child reports (if any), then the table
  std::string relationships;  // the {{relationships}} value
  std::string prompt;         // the user message: the filled template, then the JSON instruction
  std::string input_hash;     // see the file comment
  // Children whose reports stand in for their rows, in the order they were substituted (most
  // tokens of rows first).
  std::vector<int64_t> child_reports_used;
  int64_t entities_total = 0;       // members
  int64_t entities_listed = 0;      // rows in the entity table
  int64_t relationships_total = 0;  // internal relationships
  int64_t relationships_listed = 0;
  int64_t context_tokens = 0;  // tokens of `entities` plus `relationships`
  bool truncated = false;      // rows (or child reports) were left out to fit the budget
  // Local id k of the entity table is entity_names[k - 1]: findings citing ids become names.
  std::vector<std::string> entity_names;
};

// Where a community stands before a run: what PlanReports returns.
struct PlannedReport {
  ReportInput input;
  // An ok report with this input hash is stored: no call needed. False also for a community
  // without entities, which gets a gap without a call.
  bool up_to_date = false;
  // Not up to date, but changed too little to rewrite: the stored report would stand, stale.
  bool keep_stale = false;
};

// Builds every community's prompt as GenerateReports would now, finest level first, using the
// reports stored now for child substitution, and says which are up to date. A community is not
// up to date if a child it draws a report from is not. For cost estimates and dry runs; makes no
// LLM call and writes nothing. `model_name` goes into the input hash (ChatModel::model()).
Result<std::vector<PlannedReport>> PlanReports(Store& store, const Tokenizer& tokenizer,
                                               const ReportOptions& options,
                                               std::string_view model_name);

// kKeptStale: the prompt changed but the community too little to rewrite it (marked stale).
enum class ReportAction { kGenerated, kReused, kGap, kKeptStale, kDeferred };

// What happened to one community in a run.
struct CommunityReportOutcome {
  int64_t community_id = 0;
  int64_t level = 0;
  ReportAction action = ReportAction::kReused;
  std::string reason;                       // why it is a gap
  std::vector<int64_t> child_reports_used;  // as ReportInput::child_reports_used
  int64_t context_tokens = 0;
  bool truncated = false;
  int calls = 0;  // ChatModel::Chat calls made for it (0 when reused)
};

struct ReportStageSummary {
  int64_t communities = 0;
  int64_t generated = 0;      // new ok reports written
  int64_t reused = 0;         // stored ok reports whose inputs had not changed
  int64_t gaps = 0;           // gaps written (unparseable after the retry, timeout, no members)
  int64_t llm_calls = 0;      // Chat calls, retries included
  int64_t cache_hits = 0;     // of those, answered from the reply cache
  int64_t prompt_tokens = 0;  // as the model reported them
  int64_t completion_tokens = 0;
  int64_t used_child_reports = 0;  // communities whose prompt drew on child reports
  int64_t truncated = 0;           // communities whose prompt was cut to fit
  int64_t extractive = 0;          // of all communities, those with an extractive report (no call)
  int64_t kept_stale = 0;          // prompt changed, community barely: the report stands, stale
  int64_t deferred = 0;            // ReportOptions::defer: left for a question to write
  std::vector<CommunityReportOutcome> outcomes;  // finest level first, by community id
};

// Progress after each community. Counters are the run's so far.
struct ReportProgress {
  int64_t level = 0;  // the level being generated
  int64_t done = 0;   // communities finished, all levels
  int64_t total = 0;  // communities, all levels
  int64_t generated = 0;
  int64_t reused = 0;
  int64_t gaps = 0;
  int64_t llm_calls = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};
// Called from worker threads, one call at a time (under an internal lock): it needs no locking
// of its own but must be quick and must not call back into the report module.
using ReportProgressFn = std::function<void(const ReportProgress&)>;

// Writes a report (or a gap) for every community of the store's hierarchy: levels finest first,
// each level's communities concurrently (options.concurrency), each report stored with its own
// PutReport as soon as it arrives (a crash loses at most the calls in flight), communities whose
// ok report has the same input hash skipped. Gaps, not errors: an unparseable reply after one
// retry, a timeout, a community without members. Errors stop the run (calls in flight finish and
// are stored; no new one starts) and are returned: a store error, or a model error other than
// kParse and kTimeout (kUnavailable, kRateLimited, kInvalidArgument, ... : every later call
// would fail the same way); kCancelled when options.cancel was set; kInvalidArgument for bad
// options. A re-run resumes: what was stored is reused.
//
// Reads the graph and the hierarchy once at the start: do not change them during the run.
// `model` and `tokenizer` are borrowed for the call; the store's other users may go on.
Result<ReportStageSummary> GenerateReports(Store& store, ChatModel& model,
                                           const Tokenizer& tokenizer, const ReportOptions& options,
                                           const ReportProgressFn& progress = {});

}  // namespace grag
