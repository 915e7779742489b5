// The report stage: finest first, each community as soon as its children are done (not level by
// level), `concurrency` at once, one PutReport per report as it arrives.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "grag/hash.h"
#include "grag/log.h"
#include "grag/parallel.h"
#include "grag/report.h"
#include "report_input.h"

namespace grag {
namespace {

using report_internal::BuildReportInput;
using report_internal::ChildReport;
using report_internal::ChildReports;
using report_internal::GraphEntity;
using report_internal::GraphRelationship;
using report_internal::LoadGraph;
using report_internal::ReportGraph;

constexpr std::string_view kComponent = "report";
constexpr std::string_view kRetryPrompt =
    "Your reply was not a JSON object in the format asked for above. Reply again with only that "
    "JSON object.";

Status CheckOptions(const ReportOptions& o) {
  if (o.max_context_tokens <= 0) {
    return Status::InvalidArgument("report max_context_tokens must be positive");
  }
  if (o.concurrency < 1) return Status::InvalidArgument("report concurrency must be at least 1");
  if (o.max_findings < 1) return Status::InvalidArgument("report max_findings must be at least 1");
  if (o.max_tokens && *o.max_tokens < 1) {
    return Status::InvalidArgument("report max_tokens must be positive");
  }
  return Status::Ok();
}

// Community ids of each level, finest level first; within a level by id.
std::vector<std::vector<size_t>> LevelsFinestFirst(const ReportGraph& graph,
                                                   const ReportOptions& options) {
  std::map<int64_t, std::vector<size_t>, std::greater<>> by_level;
  for (size_t i = 0; i < graph.communities.size(); ++i) {
    if (options.include && !options.include(graph.communities[i])) continue;
    by_level[graph.communities[i].level].push_back(i);
  }
  std::vector<std::vector<size_t>> out;
  for (auto& [level, indices] : by_level) {
    std::sort(indices.begin(), indices.end(), [&](size_t a, size_t b) {
      return graph.communities[a].id < graph.communities[b].id;
    });
    out.push_back(std::move(indices));
  }
  return out;
}

struct Stored {
  ReportStatus status = ReportStatus::kGap;
  std::string input_hash;
  bool stale = false;
  ReportBasis basis;
};

// What a report's basis must match for the report to be kept through small changes: the prompt
// template, the format instruction, the model and the context budget.
std::string ReportParams(const ReportOptions& options, std::string_view model_name) {
  Hasher h;
  h.Add(options.prompt).Add(options.json_instruction).Add(model_name);
  h.Add(std::to_string(options.max_context_tokens));
  return h.HexDigest();
}

std::vector<int64_t> SortedMembers(const CommunityRecord& community) {
  std::vector<int64_t> members = community.entity_ids;
  std::sort(members.begin(), members.end());
  return members;
}

// Summed weight of the relationships with both ends in the community.
double InternalWeight(const ReportGraph& graph, const std::vector<int64_t>& sorted_members) {
  double total = 0;
  for (int64_t id : sorted_members) {
    auto from = graph.relationships_from.find(id);
    if (from == graph.relationships_from.end()) continue;
    for (size_t r : from->second) {
      const GraphRelationship& rel = graph.relationships[r];
      if (std::binary_search(sorted_members.begin(), sorted_members.end(), rel.target_id)) {
        total += rel.weight;
      }
    }
  }
  return total;
}

ReportBasis BasisOf(const ReportGraph& graph, const CommunityRecord& community,
                    const std::string& params) {
  ReportBasis b;
  b.members = SortedMembers(community);
  b.internal_weight = InternalWeight(graph, b.members);
  b.params = params;
  return b;
}

// Members of `now` (sorted) not in the basis, and members of the basis not in `now`.
struct MemberDiff {
  std::vector<int64_t> added;
  std::vector<int64_t> removed;
};
MemberDiff DiffMembers(const std::vector<int64_t>& now, const ReportBasis& basis) {
  MemberDiff d;
  std::set_difference(now.begin(), now.end(), basis.members.begin(), basis.members.end(),
                      std::back_inserter(d.added));
  std::set_difference(basis.members.begin(), basis.members.end(), now.begin(), now.end(),
                      std::back_inserter(d.removed));
  return d;
}

// What a stale report does not cover yet: the members that came and went since its basis, the
// best connected first, so global search and readers still see the new material.
std::string StaleNote(const ReportGraph& graph, const CommunityRecord& community,
                      const ReportBasis& basis) {
  constexpr size_t kListed = 10;
  const auto [added, removed] = DiffMembers(SortedMembers(community), basis);
  auto entity = [&graph](int64_t id) -> const GraphEntity* {
    auto it = graph.entity_index.find(id);
    return it == graph.entity_index.end() ? nullptr : &graph.entities[it->second];
  };
  std::string note = "## Since this report was written\n";
  if (added.empty() && removed.empty()) {
    return note +
           "The descriptions and relationships of some members changed a little; the "
           "report above does not reflect that yet.";
  }
  std::vector<const GraphEntity*> fresh;
  for (int64_t id : added) {
    if (const GraphEntity* e = entity(id)) fresh.push_back(e);
  }
  std::stable_sort(fresh.begin(), fresh.end(), [](const GraphEntity* a, const GraphEntity* b) {
    return a->degree > b->degree;
  });
  if (!fresh.empty()) {
    note += fmt::format("New member{}:\n", fresh.size() == 1 ? "" : "s");
    for (size_t i = 0; i < fresh.size() && i < kListed; ++i) {
      note +=
          "- " + fresh[i]->name + (fresh[i]->brief.empty() ? "" : ": " + fresh[i]->brief) + "\n";
    }
    if (fresh.size() > kListed) note += fmt::format("- and {} more\n", fresh.size() - kListed);
  }
  if (!removed.empty()) {
    std::vector<std::string> names;
    for (int64_t id : removed) {
      if (const GraphEntity* e = entity(id)) names.push_back(e->name);
    }
    note += fmt::format("No longer members: {} entit{}", removed.size(),
                        removed.size() == 1 ? "y" : "ies");
    if (!names.empty()) {
      if (names.size() > kListed) names.resize(kListed);
      note += " (" + fmt::format("{}", fmt::join(names, ", ")) + ")";
    }
    note += "\n";
  }
  while (!note.empty() && note.back() == '\n') note.pop_back();
  return note;
}

// Whether the stored report of `community` may stand, stale, instead of being rewritten.
bool KeepStale(const ReportGraph& graph, const CommunityRecord& community, const Stored& stored,
               const std::string& params, const ReportOptions& options) {
  if (options.refresh_all || options.refresh_threshold <= 0) return false;
  if (stored.status != ReportStatus::kOk || stored.basis.params != params) return false;
  const std::vector<int64_t> members = SortedMembers(community);
  const double change = CommunityChange(
      stored.basis, members, InternalWeight(graph, members), [&graph](int64_t id) -> int64_t {
        auto it = graph.entity_index.find(id);
        return it == graph.entity_index.end() ? 0 : graph.entities[it->second].degree;
      });
  return change < options.refresh_threshold;
}

struct ModelCall {
  Result<ParsedReport> parsed = Status::Internal("no call made");
  int calls = 0;
  int cache_hits = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// One report call, and one retry when the reply cannot be parsed. The validator keeps a bad
// reply out of the cache, so the retry (and a later run) reaches the model again.
ModelCall CallModel(ChatModel& model, const ReportOptions& options, const std::string& prompt) {
  ModelCall out;
  ChatRequest req;
  req.role = ChatRole::kSummarize;
  req.messages.push_back({"user", prompt});
  req.json_mode = options.json_mode;
  req.max_tokens = options.max_tokens;
  std::string rejected;  // the reply the validator refused last (Chat is synchronous)
  req.validator = [&rejected](const std::string& content) {
    Status st = ParseReportReply(content).status();
    if (!st.ok()) rejected = content;
    return st;
  };
  auto account = [&out](const Result<ChatResponse>& reply) {
    ++out.calls;
    if (!reply.ok()) return;
    if (reply->cache_hit) ++out.cache_hits;
    out.prompt_tokens += reply->prompt_tokens;
    out.completion_tokens += reply->completion_tokens;
  };
  Result<ChatResponse> reply = model.Chat(req);
  account(reply);
  if (!reply.ok() && reply.status().code() == ErrorCode::kParse) {
    // Show the model its bad reply and ask for the object alone: a plain repeat at temperature 0
    // tends to repeat the mistake.
    ChatRequest retry = req;
    if (!rejected.empty()) {
      retry.messages.push_back({"assistant", rejected});
      retry.messages.push_back({"user", std::string(kRetryPrompt)});
    }
    reply = model.Chat(retry);
    account(reply);
  }
  if (!reply.ok()) {
    out.parsed = reply.status();
  } else {
    out.parsed = ParseReportReply(reply->content);  // the validator accepted it: it parses
  }
  return out;
}

// Entity references given as local ids ("3", as the tables number them) become names.
std::vector<std::string> ResolveEntities(const std::vector<std::string>& refs,
                                         const std::vector<std::string>& names) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& ref : refs) {
    std::string name = ref;
    if (!ref.empty() && ref.size() <= 9 &&
        std::all_of(ref.begin(), ref.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const size_t k = std::stoul(ref);
      if (k >= 1 && k <= names.size()) name = names[k - 1];
    }
    if (seen.insert(name).second) out.push_back(std::move(name));
  }
  return out;
}

ReportRecord OkRecord(ParsedReport parsed, const ReportInput& in, const ReportOptions& options,
                      const std::string& model_name, ReportBasis basis) {
  if (parsed.title.empty()) parsed.title = "Community " + std::to_string(in.community_id);
  if (parsed.findings.size() > static_cast<size_t>(options.max_findings)) {
    parsed.findings.resize(static_cast<size_t>(options.max_findings));
  }
  for (Finding& f : parsed.findings) f.entities = ResolveEntities(f.entities, in.entity_names);
  ReportRecord r;
  r.community_id = in.community_id;
  r.status = ReportStatus::kOk;
  r.full_content = RenderReportMarkdown(parsed);
  r.title = std::move(parsed.title);
  r.summary = std::move(parsed.summary);
  r.findings = std::move(parsed.findings);
  r.rating = parsed.rating;
  r.rating_explanation = std::move(parsed.rating_explanation);
  r.input_hash = in.input_hash;
  r.generator = ReportGenerator::kLlm;
  r.model = model_name;
  r.basis = std::move(basis);
  return r;
}

ReportRecord GapRecord(const ReportInput& in, std::string reason, const std::string& model_name) {
  ReportRecord r;
  r.community_id = in.community_id;
  r.status = ReportStatus::kGap;
  r.reason = std::move(reason);
  r.input_hash = in.input_hash;
  r.generator = ReportGenerator::kLlm;
  r.model = model_name;
  return r;
}

Result<std::unordered_map<int64_t, Stored>> LoadStored(Store& store, ChildReports* ok_reports) {
  GRAG_ASSIGN_OR_RETURN(std::vector<ReportRecord> reports, store.ListReports());
  std::unordered_map<int64_t, Stored> stored;
  for (ReportRecord& r : reports) {
    stored[r.community_id] = Stored{r.status, r.input_hash, r.stale, std::move(r.basis)};
    if (r.status == ReportStatus::kOk) {
      (*ok_reports)[r.community_id] = ChildReport{std::move(r.full_content), r.input_hash};
    }
  }
  return stored;
}

// What reporting one community came to.
struct ReportStep {
  ModelCall call;
  std::optional<ReportRecord> record;
  Status put;
  bool failed = false;  // an error that stops the run came from this community
};

// The state of one GenerateReports call, shared by its workers.
struct ReportRun {
  ReportRun(Store& st, ChatModel& m, const Tokenizer& tok, const ReportOptions& opts,
            const ReportProgressFn& on_progress, const ReportGraph& g, ChildReports& ok,
            const std::unordered_map<int64_t, Stored>& from_store, const std::string& model_nm,
            const std::string& report_params, ReportStageSummary& out)
      : store(st),
        model(m),
        tokenizer(tok),
        options(opts),
        progress(on_progress),
        graph(g),
        ok_reports(ok),
        stored(from_store),
        model_name(model_nm),
        params(report_params),
        summary(out) {}

  // Every community in one order (finest level first, by id within a level), each started as
  // soon as the children it may draw on are done rather than level by level, so the LLM calls
  // of one level overlap the next level's where the hierarchy allows (a parent whose children
  // finished early starts early).
  void Schedule(const std::vector<std::vector<size_t>>& levels) {
    for (const auto& level : levels) order.insert(order.end(), level.begin(), level.end());
    const size_t n = order.size();
    std::unordered_map<int64_t, size_t> position;  // community id -> position in `order`
    for (size_t k = 0; k < n; ++k) position[graph.communities[order[k]].id] = k;
    waiting_on.assign(n, 0);
    parents_of.resize(n);
    for (size_t k = 0; k < n; ++k) {
      auto kids = graph.children.find(graph.communities[order[k]].id);
      if (kids == graph.children.end()) continue;
      for (int64_t child : kids->second) {
        auto c = position.find(child);
        if (c == position.end()) continue;  // not reported in this run: its stored report stands
        ++waiting_on[k];
        parents_of[c->second].push_back(k);
      }
    }
    outcomes.resize(n);
    fresh.resize(n);
    finished.assign(n, 0);
    remaining = n;
    for (size_t k = 0; k < n; ++k) {
      if (waiting_on[k] == 0) ready.insert(k);
    }
  }

  // A settled position (done, or failed: the run stops) frees its parents. Called with mu held.
  void Settle(size_t k) {
    --remaining;
    if (finished[k]) {
      const CommunityReportOutcome& o = outcomes[k];
      if (fresh[k]) {
        ok_reports[o.community_id] = std::move(*fresh[k]);
      } else if (o.action == ReportAction::kGap || o.action == ReportAction::kDeferred) {
        ok_reports.erase(o.community_id);  // a stale report must not stand in for new content
      }
    }
    for (size_t parent : parents_of[k]) {
      if (--waiting_on[parent] == 0) ready.insert(parent);
    }
    cv.notify_all();
  }

  // The children's reports as they stand now (all of them are done), copied under the
  // lock: other workers add to ok_reports meanwhile.
  ChildReports KidsReports(const CommunityRecord& community) {
    ChildReports kids_reports;
    {
      std::lock_guard lock(mu);
      if (auto kids = graph.children.find(community.id); kids != graph.children.end()) {
        for (int64_t child : kids->second) {
          if (auto r = ok_reports.find(child); r != ok_reports.end()) {
            kids_reports.emplace(child, r->second);
          }
        }
      }
    }
    return kids_reports;
  }

  void ReportOne(size_t i) {
    const CommunityRecord& community = graph.communities[order[i]];
    if (options.cancel != nullptr && options.cancel->load()) {
      std::lock_guard lock(mu);
      if (fatal.ok()) fatal = Status::Cancelled("report stage interrupted");
      stop = true;
      return;
    }
    const ChildReports kids_reports = KidsReports(community);
    const ReportInput in =
        BuildReportInput(graph, community, kids_reports, tokenizer, options, model_name);
    CommunityReportOutcome& o = outcomes[i];
    o.community_id = community.id;
    o.level = community.level;
    o.child_reports_used = in.child_reports_used;
    o.context_tokens = in.context_tokens;
    o.truncated = in.truncated;

    ReportStep step;
    Decide(community, in, o, step);
    if (step.record) PutRecord(i, community, in, o, step);
    Count(i, community, o, step);
  }

  // Reuses or keeps the stored report, or makes the record to store (a report or a gap); an
  // error that stops the run sets `fatal`.
  void Decide(const CommunityRecord& community, const ReportInput& in, CommunityReportOutcome& o,
              ReportStep& step) {
    auto it = stored.find(community.id);
    if (in.entities_total == 0) {
      step.record = GapRecord(in, "the community has no entities", model_name);
    } else if (it != stored.end() && it->second.status == ReportStatus::kOk &&
               it->second.input_hash == in.input_hash && !it->second.stale) {
      o.action = ReportAction::kReused;
    } else if (it != stored.end() && KeepStale(graph, community, it->second, params, options)) {
      o.action = ReportAction::kKeptStale;
      step.put = store.MarkReportStale(community.id, StaleNote(graph, community, it->second.basis));
    } else if (options.defer) {
      o.action = ReportAction::kDeferred;
    } else {
      step.call = CallModel(model, options, in.prompt);
      o.calls = step.call.calls;
      if (step.call.parsed.ok()) {
        step.record = OkRecord(std::move(step.call.parsed).value(), in, options, model_name,
                               BasisOf(graph, community, params));
      } else if (step.call.parsed.status().code() == ErrorCode::kParse ||
                 step.call.parsed.status().code() == ErrorCode::kTimeout) {
        step.record = GapRecord(in,
                                fmt::format("no usable reply after {} calls: {}", step.call.calls,
                                            step.call.parsed.status().ToString()),
                                model_name);
      } else {
        step.failed = true;
        std::lock_guard lock(mu);
        if (fatal.ok()) {
          fatal = step.call.parsed.status().WithContext(
              fmt::format("report of community {}", community.id));
        }
        stop = true;
      }
    }
  }

  // Stores step.record and logs it.
  void PutRecord(size_t i, const CommunityRecord& community, const ReportInput& in,
                 CommunityReportOutcome& o, ReportStep& step) {
    const std::optional<ReportRecord>& record = step.record;
    step.put = store.PutReport(*record);
    if (step.put.ok()) {
      o.action =
          record->status == ReportStatus::kOk ? ReportAction::kGenerated : ReportAction::kGap;
      o.reason = record->reason;
      if (record->status == ReportStatus::kOk) {
        fresh[i] = ChildReport{record->full_content, record->input_hash};
      }
      if (record->status == ReportStatus::kGap) {
        Log(LogLevel::kWarn, kComponent,
            fmt::format("community {}: recorded a gap: {}", community.id, record->reason));
      } else {
        Log(LogLevel::kDebug, kComponent,
            fmt::format("community {} (level {}): \"{}\", {} findings, {} context tokens, "
                        "{} child reports, {} calls",
                        community.id, community.level, record->title, record->findings.size(),
                        in.context_tokens, in.child_reports_used.size(), step.call.calls));
      }
    }
  }

  // Adds the community's calls and outcome to the summary and the progress.
  void Count(size_t i, const CommunityRecord& community, const CommunityReportOutcome& o,
             ReportStep& step) {
    std::lock_guard lock(mu);
    summary.llm_calls += step.call.calls;
    summary.cache_hits += step.call.cache_hits;
    summary.prompt_tokens += step.call.prompt_tokens;
    summary.completion_tokens += step.call.completion_tokens;
    prog.llm_calls += step.call.calls;
    prog.prompt_tokens += step.call.prompt_tokens;
    prog.completion_tokens += step.call.completion_tokens;
    if (!step.put.ok()) {
      step.failed = true;
      if (fatal.ok()) {
        fatal =
            step.put.WithContext(fmt::format("storing the report of community {}", community.id));
      }
      stop = true;
    }
    if (step.failed) return;  // nothing final to count
    finished[i] = 1;
    ++prog.done;
    prog.level = community.level;
    if (o.action == ReportAction::kGenerated) ++prog.generated;
    if (o.action == ReportAction::kReused || o.action == ReportAction::kKeptStale) {
      ++prog.reused;
    }
    if (o.action == ReportAction::kGap) ++prog.gaps;
    if (progress) progress(prog);
  }

  // One worker: takes ready communities, lowest position first, until none is left.
  void Work() {
    std::unique_lock lock(mu);
    for (;;) {
      cv.wait(lock,
              [this] { return stop.load() || remaining == 0 || !ready.empty() || in_flight == 0; });
      if (stop.load() || remaining == 0) return;
      if (ready.empty()) {  // nothing running, nothing ready: the hierarchy loops
        if (fatal.ok()) {
          fatal = Status::Internal("the community hierarchy has a cycle");
        }
        stop = true;
        cv.notify_all();
        return;
      }
      const size_t k = *ready.begin();
      ready.erase(ready.begin());
      ++in_flight;
      lock.unlock();
      ReportOne(k);
      lock.lock();
      --in_flight;
      Settle(k);
    }
  }

  // The finished communities' outcomes, counted into the summary.
  void Tally() {
    for (size_t i = 0; i < order.size(); ++i) {
      if (!finished[i]) continue;
      const CommunityReportOutcome& o = outcomes[i];
      switch (o.action) {
        case ReportAction::kGenerated:
          ++summary.generated;
          break;
        case ReportAction::kReused:
          ++summary.reused;
          break;
        case ReportAction::kGap:
          ++summary.gaps;
          break;
        case ReportAction::kKeptStale:
          ++summary.kept_stale;
          break;
        case ReportAction::kDeferred:
          ++summary.deferred;
          break;
      }
      if (!o.child_reports_used.empty()) ++summary.used_child_reports;
      if (o.truncated) ++summary.truncated;
      summary.outcomes.push_back(o);
    }
  }

  Store& store;
  ChatModel& model;
  const Tokenizer& tokenizer;
  const ReportOptions& options;
  const ReportProgressFn& progress;
  const ReportGraph& graph;
  ChildReports& ok_reports;  // guarded by mu while the workers run
  const std::unordered_map<int64_t, Stored>& stored;
  const std::string& model_name;
  const std::string& params;
  ReportStageSummary& summary;  // guarded by mu while the workers run

  std::mutex mu;
  ReportProgress prog;  // guarded by mu
  Status fatal;         // guarded by mu: the first error that stops the run
  std::atomic<bool> stop{false};
  std::vector<size_t> order;                    // positions -> graph.communities indices
  std::vector<size_t> waiting_on;               // children in `order` not finished yet
  std::vector<std::vector<size_t>> parents_of;  // positions whose input this one feeds
  std::vector<CommunityReportOutcome> outcomes;
  std::vector<std::optional<ChildReport>> fresh;  // new ok reports
  std::vector<char> finished;                     // char, not bool: written by several threads
  std::set<size_t> ready;  // guarded by mu: positions whose children are all done
  size_t remaining = 0;    // guarded by mu: positions not settled
  size_t in_flight = 0;    // guarded by mu: positions being reported
  std::condition_variable cv;
};

}  // namespace

double CommunityChange(const ReportBasis& basis, const std::vector<int64_t>& members_now,
                       double internal_weight_now,
                       const std::function<int64_t(int64_t)>& degree_of) {
  if (basis.params.empty() || basis.members.empty()) return 1;
  std::vector<int64_t> now = members_now;
  std::sort(now.begin(), now.end());
  const auto [added, removed] = DiffMembers(now, basis);
  const double members = static_cast<double>(added.size() + removed.size()) /
                         static_cast<double>(basis.members.size());
  double weight = 0;
  if (basis.internal_weight > 0) {
    weight = std::abs(internal_weight_now - basis.internal_weight) / basis.internal_weight;
  } else if (internal_weight_now > 0) {
    weight = 1;
  }
  double degree = 0;
  if (!added.empty()) {
    int64_t all = 0;
    int64_t fresh = 0;
    for (int64_t id : now) all += std::max<int64_t>(1, degree_of(id));
    for (int64_t id : added) fresh += std::max<int64_t>(1, degree_of(id));
    degree = static_cast<double>(fresh) / static_cast<double>(all);
  }
  return std::max({members, weight, degree});
}

Result<std::vector<PlannedReport>> PlanReports(Store& store, const Tokenizer& tokenizer,
                                               const ReportOptions& options,
                                               std::string_view model_name) {
  GRAG_RETURN_IF_ERROR(CheckOptions(options));
  GRAG_ASSIGN_OR_RETURN(ReportGraph graph, LoadGraph(store, tokenizer, options.concurrency));
  ChildReports ok_reports;
  GRAG_ASSIGN_OR_RETURN(auto stored, LoadStored(store, &ok_reports));
  const std::string params = ReportParams(options, model_name);
  std::vector<PlannedReport> out;
  std::unordered_set<int64_t> stale;
  for (const std::vector<size_t>& level : LevelsFinestFirst(graph, options)) {
    for (size_t index : level) {
      PlannedReport p;
      p.input = BuildReportInput(graph, graph.communities[index], ok_reports, tokenizer, options,
                                 model_name);
      auto it = stored.find(p.input.community_id);
      p.up_to_date = it != stored.end() && it->second.status == ReportStatus::kOk &&
                     it->second.input_hash == p.input.input_hash && p.input.entities_total > 0;
      for (int64_t child : p.input.child_reports_used) {
        if (stale.count(child) != 0) p.up_to_date = false;
      }
      if (!p.up_to_date && it != stored.end() && p.input.entities_total > 0) {
        p.keep_stale = KeepStale(graph, graph.communities[index], it->second, params, options);
      }
      if (!p.up_to_date && !p.keep_stale) stale.insert(p.input.community_id);
      out.push_back(std::move(p));
    }
  }
  return out;
}

Result<ReportStageSummary> GenerateReports(Store& store, ChatModel& model,
                                           const Tokenizer& tokenizer, const ReportOptions& options,
                                           const ReportProgressFn& progress) {
  GRAG_RETURN_IF_ERROR(CheckOptions(options));
  GRAG_ASSIGN_OR_RETURN(ReportGraph graph, LoadGraph(store, tokenizer, options.concurrency));
  ChildReports ok_reports;  // what parents may draw on; updated between levels only
  GRAG_ASSIGN_OR_RETURN(auto stored, LoadStored(store, &ok_reports));
  const std::string model_name = model.model_for(ChatRole::kSummarize);
  const std::string params = ReportParams(options, model_name);

  const std::vector<std::vector<size_t>> levels = LevelsFinestFirst(graph, options);
  ReportStageSummary summary;
  for (const auto& level : levels) summary.communities += static_cast<int64_t>(level.size());
  ReportRun run(store, model, tokenizer, options, progress, graph, ok_reports, stored, model_name,
                params, summary);
  run.prog.total = summary.communities;
  run.Schedule(levels);

  // `concurrency` workers take ready communities, lowest position (finest, then by id) first.
  ParallelFor(static_cast<size_t>(options.concurrency), static_cast<size_t>(options.concurrency),
              [&run](size_t) { run.Work(); });

  run.Tally();
  if (run.stop) {
    std::lock_guard lock(run.mu);
    Log(run.fatal.code() == ErrorCode::kCancelled ? LogLevel::kInfo : LogLevel::kError, kComponent,
        "report stage stopped: " + run.fatal.ToString());
    return run.fatal;
  }
  Log(LogLevel::kInfo, kComponent,
      fmt::format("{} communities: {} reports generated, {} reused, {} kept stale, {} gaps; {} "
                  "LLM calls",
                  summary.communities, summary.generated, summary.reused, summary.kept_stale,
                  summary.gaps, summary.llm_calls));
  return summary;
}

}  // namespace grag
