// DRIFT search: HyDE and report matching, the primer folds, rounds of follow-ups answered by
// local search, and one reduce call (see grag/drift_search.h).
#include "grag/drift_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "drift_replies.h"
#include "drift_select.h"
#include "grag/log.h"
#include "grag/parallel.h"
#include "grag/question.h"
#include "grag/words.h"

namespace grag {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::chrono::milliseconds Since(SteadyClock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start);
}

Status CheckOptions(const DriftSearchOptions& o) {
  if (o.primer_top_k < 1) return Status::InvalidArgument("drift.primer_top_k must be at least 1");
  if (o.primer_folds < 1) return Status::InvalidArgument("drift.primer_folds must be at least 1");
  if (o.primer_fold_tokens < 500)
    return Status::InvalidArgument("drift.primer_fold_tokens must be at least 500");
  if (o.followups_per_answer < 0 || o.depth < 0 || o.breadth < 0)
    return Status::InvalidArgument(
        "drift.followups_per_answer, drift.depth and drift.breadth must be at least 0");
  if (!(o.depth_decay > 0 && o.depth_decay <= 1))
    return Status::InvalidArgument("drift.depth_decay must be above 0 and at most 1");
  if (o.min_parent_score < 0 || o.min_parent_score > 100)
    return Status::InvalidArgument("drift.min_parent_score must be between 0 and 100");
  if (o.reduce_budget_tokens < 100)
    return Status::InvalidArgument("drift.reduce_budget_tokens must be at least 100");
  const int64_t least = (o.hyde ? 1 : 0) + 2;
  if (o.max_calls != 0 && o.max_calls < least)
    return Status::InvalidArgument(fmt::format(
        "drift.max_calls must be 0 (the formula's bound) or at least {} (hyde, one primer call "
        "and the reduce)",
        least));
  struct Check {
    const std::string* text;
    std::string_view name;
    std::vector<std::string_view> placeholders;
  };
  for (const Check& c : std::initializer_list<Check>{
           {&o.hyde_prompt, "hyde", {"{{question}}", "{{report_template}}"}},
           {&o.primer_prompt, "primer", {"{{question}}", "{{reports}}"}},
           {&o.local_prompt,
            "follow-up",
            {"{{question}}", "{{global_question}}", "{{entities}}", "{{relationships}}",
             "{{reports}}", "{{chunks}}"}},
           {&o.reduce_prompt, "reduce", {"{{question}}", "{{answers}}"}}}) {
    for (std::string_view p : c.placeholders) {
      if (c.text->find(p) == std::string::npos) {
        return Status::InvalidArgument("the DRIFT " + std::string(c.name) +
                                       " prompt lacks the placeholder " + std::string(p));
      }
    }
  }
  return Status::Ok();
}

double Cosine(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size() || a.empty()) return 0;
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 0;
}

struct ReportCandidate {
  ReportRecord report;
  int64_t weight = 0;
  double score = 0;
};

// Every usable report (ok, with text), with its community's weight.
Result<std::vector<ReportCandidate>> LoadReports(Store& store) {
  GRAG_ASSIGN_OR_RETURN(std::vector<ReportRecord> reports, store.ListReports({}, false));
  GRAG_ASSIGN_OR_RETURN(std::vector<CommunityRecord> communities, store.ListCommunities());
  std::map<int64_t, int64_t> weight;
  for (const CommunityRecord& c : communities) weight[c.id] = c.weight;
  std::vector<ReportCandidate> out;
  for (ReportRecord& r : reports) {
    if (r.status != ReportStatus::kOk) continue;
    if (r.full_content.empty() && r.summary.empty()) continue;
    ReportCandidate& c = out.emplace_back();
    c.weight = weight.count(r.community_id) ? weight[r.community_id] : 0;
    c.report = std::move(r);
  }
  if (out.empty()) {
    return Status::NotFound(
        "no community report to read: DRIFT's primer reads the reports (run `grag index`)");
  }
  return out;
}

// The report DRIFT's HyDE imitates: the highest-weight one, lowest id on a tie.
const ReportCandidate& TemplateReport(const std::vector<ReportCandidate>& reports) {
  return *std::min_element(reports.begin(), reports.end(), [](const auto& a, const auto& b) {
    if (a.weight != b.weight) return a.weight > b.weight;
    return a.report.community_id < b.report.community_id;
  });
}

std::string ReportText(const ReportRecord& r) {
  const std::string& body = r.full_content.empty() ? r.summary : r.full_content;
  return fmt::format("[C{}] community {}, level {}\n{}\n\n", r.community_id, r.community_id,
                     r.level, body);
}

// Scores the reports against `queries` (cosine, the best of them) and sorts them best first
// (ties: lower id). Without usable report embeddings, BM25 of `question`; returns true then.
Result<bool> RankReports(Store& store, std::vector<ReportCandidate>& reports,
                         const std::vector<std::vector<float>>& queries, const std::string& model,
                         std::string_view question, std::vector<std::string>& diagnostics) {
  bool by_words = true;
  if (!queries.empty()) {
    GRAG_ASSIGN_OR_RETURN(PackedEmbeddings packed,
                          store.ListPackedEmbeddings(EmbeddingOwner::kReport));
    const auto dim = static_cast<size_t>(packed.dimension);
    if (packed.ids.empty()) {
      diagnostics.push_back("no report embeddings: reports matched by words");
    } else if (packed.model != model || dim != queries.front().size()) {
      diagnostics.push_back("the report embeddings were made by " + packed.model + ", not " +
                            model + ": reports matched by words");
    } else {
      std::map<std::string, size_t> row;
      for (size_t i = 0; i < packed.ids.size(); ++i) row[packed.ids[i]] = i;
      for (ReportCandidate& c : reports) {
        auto it = row.find(std::to_string(c.report.community_id));
        c.score = 0;
        if (it == row.end()) continue;
        std::span<const float> v(packed.values.data() + it->second * dim, dim);
        for (const auto& q : queries) c.score = std::max(c.score, Cosine(q, v));
      }
      by_words = false;
    }
  }
  if (by_words) {
    std::vector<std::string> texts;
    texts.reserve(reports.size());
    for (const ReportCandidate& c : reports) texts.push_back(ReportText(c.report));
    GRAG_ASSIGN_OR_RETURN(std::vector<double> scores, store.RankTexts(texts, question));
    for (size_t i = 0; i < reports.size() && i < scores.size(); ++i) reports[i].score = scores[i];
  }
  std::stable_sort(reports.begin(), reports.end(), [](const auto& a, const auto& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.report.community_id < b.report.community_id;
  });
  return by_words;
}

struct Fold {
  std::vector<size_t> reports;  // indices into the ranked candidates
  std::string prompt;
};

// The top `primer_top_k` reports, in rank order, packed into at most primer_folds prompts of at
// most primer_fold_tokens each. A report too big for a prompt on its own is left out.
std::vector<Fold> PackFolds(const std::vector<ReportCandidate>& ranked, std::string_view question,
                            const DriftSearchOptions& o, const Tokenizer& tokenizer,
                            std::vector<std::string>& diagnostics) {
  const std::map<std::string, std::string> base = {
      {"question", std::string(question)},
      {"max_followups", std::to_string(o.followups_per_answer)}};
  auto fill = [&](const std::string& reports) {
    auto values = base;
    values["reports"] = reports;
    return FillPrompt(o.primer_prompt, values);
  };
  const auto overhead = static_cast<int64_t>(tokenizer.Count(fill("")));
  std::vector<Fold> folds;
  std::string current;
  int64_t used = overhead;
  std::vector<size_t> members;
  auto close = [&] {
    if (members.empty()) return;
    folds.push_back({std::move(members), fill(current)});
    members.clear();
    current.clear();
    used = overhead;
  };
  const size_t k = std::min(ranked.size(), static_cast<size_t>(o.primer_top_k));
  for (size_t i = 0; i < k; ++i) {
    const std::string text = ReportText(ranked[i].report);
    const auto tokens = static_cast<int64_t>(tokenizer.Count(text));
    if (overhead + tokens > o.primer_fold_tokens) {
      diagnostics.push_back(fmt::format("report C{} is too long for one primer prompt: left out",
                                        ranked[i].report.community_id));
      continue;
    }
    if (used + tokens > o.primer_fold_tokens) {
      close();
      if (static_cast<int64_t>(folds.size()) >= o.primer_folds) break;
    }
    current += text;
    used += tokens;
    members.push_back(i);
  }
  if (static_cast<int64_t>(folds.size()) < o.primer_folds) close();
  return folds;
}

// One label per chunk for the whole question, in the order Relabel meets them. Used by one
// thread: labels are given after a round's contexts are built, in action order, so the same
// question gives the same prompts (and hits the reply cache) whichever context finished first.
class ChunkLabeler {
 public:
  std::string Label(const std::string& chunk_id) {
    auto [it, added] = labels_.emplace(chunk_id, "");
    if (added) it->second = "S" + std::to_string(labels_.size());
    return it->second;
  }

  // Replaces the context's own S<rank> chunk ids with the question's labels: the item's id, the
  // "[S<n>]" its text starts with, its token count and the chunks section.
  void Relabel(LocalContext& ctx, const Tokenizer& tokenizer) {
    ctx.chunks_text.clear();
    for (LocalContextItem& item : ctx.items) {
      if (item.type != LocalItemType::kChunk) continue;
      const std::string old_tag = "[" + item.id + "]";
      item.id = Label(item.chunk_id);
      if (item.text.starts_with(old_tag)) {
        item.text = "[" + item.id + "]" + item.text.substr(old_tag.size());
        const auto tokens = static_cast<int64_t>(tokenizer.Count(item.text));
        ctx.used_tokens += tokens - item.tokens;
        item.tokens = tokens;
      }
      ctx.chunks_text += item.text;
    }
  }

 private:
  std::map<std::string, std::string> labels_;
};

// The ids (E12, S3, C7, R40) `text` names that `known` holds, in order of first mention.
std::vector<std::string> IdsIn(std::string_view text,
                               const std::map<std::string, DriftCitation>& known) {
  auto is_alnum = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  };
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c != 'E' && c != 'R' && c != 'C' && c != 'S') continue;
    if (i > 0 && is_alnum(text[i - 1])) continue;
    size_t end = i + 1;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    if (end == i + 1 || (end < text.size() && is_alnum(text[end]))) continue;
    std::string id(text.substr(i, end - i));
    i = end - 1;
    if (known.count(id) == 0 || !seen.insert(id).second) continue;
    out.push_back(std::move(id));
  }
  return out;
}

DriftCitation CitationOf(const LocalContextItem& item) {
  DriftCitation c;
  c.id = item.id;
  c.kind = item.type;
  c.chunk_id = item.chunk_id;
  c.document_id = item.document_id;
  c.chunk_index = item.chunk_index;
  c.entity_id = item.entity_id;
  c.relationship_id = item.relationship_id;
  c.source_id = item.source_id;
  c.target_id = item.target_id;
  c.community_id = item.community_id;
  c.title = item.type == LocalItemType::kRelationship ? item.source_name + " -- " + item.target_name
                                                      : item.name;
  return c;
}

// What one chat call came back with, read into an action.
void ReadReply(const Result<ChatResponse>& reply, bool primer, DriftAction& a, DriftStats& stats) {
  if (!reply.ok()) {
    a.outcome = DriftOutcome::kFailed;
    a.error = reply.status().ToString();
    ++stats.failed;
    return;
  }
  a.prompt_tokens = reply->prompt_tokens;
  a.completion_tokens = reply->completion_tokens;
  a.cache_hit = reply->cache_hit;
  stats.tokens_in += reply->prompt_tokens;
  stats.tokens_out += reply->completion_tokens;
  stats.cache_hits += reply->cache_hit ? 1 : 0;
  Result<query::DriftReply> parsed = primer ? query::ParsePrimerReply(reply->content)
                                            : query::ParseDriftLocalReply(reply->content);
  if (!parsed.ok()) {
    a.outcome = DriftOutcome::kUnparseable;
    a.answer = reply->content;
    a.score = 0;
    ++stats.unparseable;
    return;
  }
  a.outcome = DriftOutcome::kOk;
  a.answer = std::move(parsed->answer);
  a.score = parsed->score;
  a.follow_ups = std::move(parsed->follow_ups);
}

std::string XmlAttr(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "&quot;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '\n':
        out += ' ';
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The open follow-ups and everything ever queued, for duplicate checks.
class FollowUpPool {
 public:
  FollowUpPool(std::string_view question, double threshold, int64_t max_tokens,
               const Tokenizer& tokenizer)
      : threshold_(threshold), max_tokens_(max_tokens), tokenizer_(tokenizer) {
    seen_.push_back(Terms(question));
  }

  struct Open {
    std::string query;
    size_t parent = 0;
    int64_t depth = 0;
    double priority = 0;
    double similarity = 0;
    bool embedded = false;
    size_t order = 0;
  };

  // Queues `text` (proposed by action `parent`) unless empty, too long or a near-duplicate.
  // Returns false when dropped as a duplicate.
  bool Add(std::string_view text, size_t parent, int64_t depth, double priority) {
    std::string q = query::NormalizeFollowUp(text);
    if (q.empty()) return true;
    if (max_tokens_ > 0 && static_cast<int64_t>(tokenizer_.Count(q)) > max_tokens_) return true;
    std::vector<std::string> terms = Terms(q);
    for (const auto& s : seen_) {
      if (Same(terms, s, q)) return false;
    }
    seen_.push_back(terms);
    seen_text_.push_back(Lower(q));
    open_.push_back({std::move(q), parent, depth, priority, 0, false, order_++});
    return true;
  }

  std::vector<Open>& open() { return open_; }

 private:
  static std::string Lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  }
  static std::vector<std::string> Terms(std::string_view text) {
    std::vector<std::string> t = ContentTerms(text);
    std::sort(t.begin(), t.end());
    t.erase(std::unique(t.begin(), t.end()), t.end());
    return t;
  }
  bool Same(const std::vector<std::string>& a, const std::vector<std::string>& b,
            const std::string& text) const {
    if (a.empty() || b.empty()) {  // no content words: compare the texts
      const std::string l = Lower(text);
      return std::find(seen_text_.begin(), seen_text_.end(), l) != seen_text_.end();
    }
    return query::TermJaccard(a, b) >= threshold_;
  }

  double threshold_;
  int64_t max_tokens_;
  const Tokenizer& tokenizer_;
  std::vector<std::vector<std::string>> seen_;
  std::vector<std::string> seen_text_;
  std::vector<Open> open_;
  size_t order_ = 0;
};

// The state of one DriftSearch call, and its steps.
struct DriftRun {
  // One follow-up of a round: its local context and, when asked, the reply.
  struct Outcome {
    Result<LocalContext> context = Status::Internal("not built");
    std::optional<Result<ChatResponse>> reply;
  };

  DriftRun(Store& store_in, ChatModel& chat_in, EmbeddingModel* embedder_in,
           const Tokenizer& tokenizer_in, std::string_view question_in,
           const DriftSearchOptions& options_in, const Retriever* retriever_in,
           SteadyClock::time_point start_in)
      : store(store_in),
        chat(chat_in),
        embedder(embedder_in),
        tokenizer(tokenizer_in),
        question(question_in),
        options(options_in),
        retriever(retriever_in),
        start(start_in) {}

  Store& store;
  ChatModel& chat;
  EmbeddingModel* embedder;
  const Tokenizer& tokenizer;
  std::string_view question;
  const DriftSearchOptions& options;
  const Retriever* retriever;
  SteadyClock::time_point start;
  DriftSearchResult result;
  DriftStats& stats = result.stats;
  std::vector<ReportCandidate> reports;
  size_t workers = 0;
  // Calls left under the cap, the reduce's kept back.
  int64_t cap = 0;
  std::vector<float> question_vector;
  std::map<std::string, DriftCitation> known;  // every id any answer could cite

  ChatRequest Request(std::string prompt, bool json) const {
    ChatRequest r;
    r.role = ChatRole::kQuery;
    r.messages = {{"user", std::move(prompt)}};
    r.max_tokens = options.reply_max_tokens;
    r.json_mode = json;
    return r;
  }

  // ---- HyDE
  void Hyde() {
    if (options.hyde) {
      const ReportCandidate& templ = TemplateReport(reports);
      ChatRequest r = Request(
          FillPrompt(options.hyde_prompt, {{"question", std::string(question)},
                                           {"report_template", templ.report.full_content.empty()
                                                                   ? templ.report.summary
                                                                   : templ.report.full_content}}),
          false);
      Result<ChatResponse> reply = chat.Chat(r);
      ++stats.hyde_calls;
      --cap;
      if (!reply.ok()) {
        ++stats.failed;
        result.diagnostics.push_back("the hypothetical answer failed (" +
                                     reply.status().ToString() + "): reports matched by question");
      } else {
        stats.tokens_in += reply->prompt_tokens;
        stats.tokens_out += reply->completion_tokens;
        stats.cache_hits += reply->cache_hit ? 1 : 0;
        result.hyde_text = reply->content;
      }
    }
  }

  // ---- report matching
  Status MatchReports() {
    std::vector<std::vector<float>> queries;
    std::string model;
    if (embedder != nullptr) {
      std::vector<std::string> inputs = {std::string(question)};
      if (!result.hyde_text.empty()) inputs.push_back(result.hyde_text);
      auto e = embedder->Embed(inputs);
      ++stats.embedding_requests;
      if (e.ok() && e->vectors.size() == inputs.size()) {
        question_vector = e->vectors.front();
        queries = std::move(e->vectors);
        model = embedder->model();
      } else {
        result.diagnostics.push_back("embedding the question failed" +
                                     (e.ok() ? std::string() : " (" + e.status().ToString() + ")") +
                                     ": reports matched by words");
      }
    }
    GRAG_ASSIGN_OR_RETURN(stats.reports_by_words, RankReports(store, reports, queries, model,
                                                              question, result.diagnostics));
    return Status::Ok();
  }

  // ---- primer
  Status Primer() {
    const auto primer_start = SteadyClock::now();
    std::vector<Fold> folds = PackFolds(reports, question, options, tokenizer, result.diagnostics);
    if (folds.empty()) {
      return Status::InvalidArgument(
          "drift.primer_fold_tokens is too small for any report with the prompt and question");
    }
    if (static_cast<int64_t>(folds.size()) > cap - 1) folds.resize(static_cast<size_t>(cap - 1));
    stats.max_calls = MaxDriftCalls(options, static_cast<int64_t>(folds.size()));
    for (const Fold& f : folds) {
      for (size_t i : f.reports) {
        const ReportRecord& r = reports[i].report;
        result.primer_reports.push_back({r.community_id, r.level, r.title, reports[i].score});
      }
    }
    std::map<int64_t, size_t> report_rank;
    for (size_t i = 0; i < reports.size(); ++i) report_rank[reports[i].report.community_id] = i;
    for (const DriftReportMatch& m : result.primer_reports) {
      DriftCitation c;
      c.id = "C" + std::to_string(m.community_id);
      c.kind = LocalItemType::kReport;
      c.community_id = m.community_id;
      c.title = m.title;
      known.emplace(c.id, c);
    }
    std::vector<Result<ChatResponse>> primer_replies(folds.size(),
                                                     Status::Internal("primer call not made"));
    ParallelFor(folds.size(), workers,
                [&](size_t i) { primer_replies[i] = chat.Chat(Request(folds[i].prompt, true)); });
    stats.primer_calls = static_cast<int64_t>(folds.size());
    cap -= stats.primer_calls;
    bool any_primer = false;
    std::string first_error;
    for (size_t i = 0; i < folds.size(); ++i) {
      DriftAction& a = result.actions.emplace_back();
      a.query = std::string(question);
      a.depth = 0;
      for (size_t r : folds[i].reports) a.report_ids.push_back(reports[r].report.community_id);
      ReadReply(primer_replies[i], true, a, stats);
      if (a.outcome == DriftOutcome::kFailed) {
        if (first_error.empty()) first_error = a.error;
        Log(LogLevel::kWarn, "drift",
            "primer call " + std::to_string(i + 1) + " failed: " + a.error);
        continue;
      }
      any_primer = true;
      std::map<std::string, DriftCitation> mine;
      for (int64_t id : a.report_ids) {
        const std::string key = "C" + std::to_string(id);
        mine.emplace(key, known.at(key));
      }
      a.cited = IdsIn(a.answer, mine);
    }
    stats.primer_time = Since(primer_start);
    if (!any_primer) {
      const ErrorCode code = primer_replies.front().status().code();
      const bool same =
          std::all_of(primer_replies.begin(), primer_replies.end(),
                      [&](const auto& r) { return !r.ok() && r.status().code() == code; });
      return Status(same ? code : ErrorCode::kUnavailable,
                    fmt::format("drift search: all {} primer calls failed; first: {}", folds.size(),
                                first_error));
    }
    return Status::Ok();
  }

  // Queues the follow-ups action `parent` proposed, unless it scored too low.
  void Propose(FollowUpPool& pool, size_t parent) {
    const DriftAction& a = result.actions[parent];
    if (a.outcome != DriftOutcome::kOk || a.score < options.min_parent_score) return;
    const double priority = a.score * std::pow(options.depth_decay, static_cast<double>(a.depth));
    for (const std::string& f : a.follow_ups) {
      if (!pool.Add(f, parent, a.depth + 1, priority)) ++stats.duplicates;
    }
  }

  // ---- follow-ups
  void FollowUps() {
    const auto followup_start = SteadyClock::now();
    FollowUpPool pool(question, options.duplicate_jaccard, options.local.max_question_tokens,
                      tokenizer);
    for (size_t i = 0; i < result.actions.size(); ++i) Propose(pool, i);

    ChunkLabeler labeler;
    LocalSearchOptions local = options.local;
    local.chunk_label = nullptr;  // S<rank> per context; ChunkLabeler::Relabel renumbers them
    local.on_answer_delta = nullptr;
    for (int64_t d = 1; d <= options.depth; ++d) {
      auto& open = pool.open();
      if (open.empty() || cap <= 1) break;
      EmbedOpen(open);
      std::vector<query::FollowUpCandidate> cands;
      for (const auto& o : open) cands.push_back({o.priority, o.similarity, o.order});
      const auto breadth =
          static_cast<size_t>(std::min<int64_t>(options.breadth, std::max<int64_t>(cap - 1, 0)));
      std::vector<size_t> picked = query::SelectFollowUps(cands, breadth);
      if (picked.empty()) break;
      std::vector<FollowUpPool::Open> asked;
      for (size_t i : picked) asked.push_back(open[i]);
      std::sort(picked.begin(), picked.end());
      for (size_t k = picked.size(); k-- > 0;) open.erase(open.begin() + picked[k]);

      std::vector<Outcome> outcomes = AskRound(asked, local, labeler);
      const size_t first_new = result.actions.size();
      ReadRound(asked, outcomes);
      for (size_t i = first_new; i < result.actions.size(); ++i) Propose(pool, i);
    }
    stats.followup_time = Since(followup_start);
  }

  // Similarity to the question, for ties on priority (one embedding request per round).
  void EmbedOpen(std::vector<FollowUpPool::Open>& open) {
    if (embedder != nullptr && !question_vector.empty()) {
      std::vector<std::string> inputs;
      std::vector<size_t> which;
      for (size_t i = 0; i < open.size(); ++i) {
        if (open[i].embedded) continue;
        inputs.push_back(open[i].query);
        which.push_back(i);
      }
      if (!inputs.empty()) {
        auto e = embedder->Embed(inputs);
        ++stats.embedding_requests;
        if (e.ok() && e->vectors.size() == inputs.size()) {
          for (size_t k = 0; k < which.size(); ++k) {
            open[which[k]].similarity = Cosine(question_vector, e->vectors[k]);
            open[which[k]].embedded = true;
          }
        }
      }
    }
  }

  // Builds the round's local contexts and asks the follow-ups that found something.
  std::vector<Outcome> AskRound(const std::vector<FollowUpPool::Open>& asked,
                                const LocalSearchOptions& local, ChunkLabeler& labeler) {
    std::vector<Outcome> outcomes(asked.size());
    ParallelFor(asked.size(), workers, [&](size_t i) {
      outcomes[i].context =
          BuildLocalContext(store, embedder, tokenizer, asked[i].query, local, nullptr, retriever);
    });
    // Labels in action order, whatever order the contexts were built in.
    for (Outcome& out : outcomes) {
      if (out.context.ok()) labeler.Relabel(*out.context, tokenizer);
    }
    ParallelFor(asked.size(), workers, [&](size_t i) {
      Outcome& out = outcomes[i];
      if (!out.context.ok() || out.context->matches.empty()) return;
      const LocalContext& ctx = *out.context;
      std::string prompt = FillPrompt(
          options.local_prompt, {{"question", asked[i].query},
                                 {"global_question", std::string(question)},
                                 {"entities", ctx.entities_text},
                                 {"relationships", ctx.relationships_text},
                                 {"reports", ctx.reports_text},
                                 {"chunks", ctx.chunks_text},
                                 {"max_followups", std::to_string(options.followups_per_answer)}});
      out.reply = chat.Chat(Request(std::move(prompt), true));
    });
    return outcomes;
  }

  // One action per asked follow-up, read from its outcome.
  void ReadRound(const std::vector<FollowUpPool::Open>& asked, std::vector<Outcome>& outcomes) {
    for (size_t i = 0; i < asked.size(); ++i) {
      DriftAction& a = result.actions.emplace_back();
      a.query = asked[i].query;
      a.depth = asked[i].depth;
      a.parent = asked[i].parent;
      a.priority = asked[i].priority;
      Outcome& out = outcomes[i];
      if (!out.context.ok()) {
        a.outcome = DriftOutcome::kFailed;
        a.error = out.context.status().ToString();
        ++stats.failed;
        continue;
      }
      if (!out.reply) {
        a.outcome = DriftOutcome::kNothingFound;
        a.error = "no entity in the index matches this follow-up: not asked";
        continue;
      }
      ++stats.local_calls;
      --cap;
      ReadReply(*out.reply, false, a, stats);
      std::map<std::string, DriftCitation> mine;
      for (const LocalContextItem& item : out.context->items) {
        mine.emplace(item.id, CitationOf(item));
      }
      a.cited = IdsIn(a.answer, mine);
      known.insert(mine.begin(), mine.end());
    }
  }

  // ---- reduce: the primer's notes first, then the follow-ups' by score; whole notes only
  Result<DriftSearchResult> Reduce() {
    std::vector<size_t> notes;
    for (size_t i = 0; i < result.actions.size(); ++i) {
      const DriftAction& a = result.actions[i];
      if (a.outcome != DriftOutcome::kOk && a.outcome != DriftOutcome::kUnparseable) continue;
      if (a.answer.empty()) continue;
      notes.push_back(i);
    }
    std::stable_sort(notes.begin(), notes.end(), [&](size_t x, size_t y) {
      const DriftAction& a = result.actions[x];
      const DriftAction& b = result.actions[y];
      if ((a.depth == 0) != (b.depth == 0)) return a.depth == 0;
      return a.score > b.score;
    });
    const std::string empty_prompt =
        FillPrompt(options.reduce_prompt, {{"question", std::string(question)}, {"answers", ""}});
    auto used = static_cast<int64_t>(tokenizer.Count(empty_prompt));
    std::string blocks;
    size_t kept = 0;
    for (size_t i : notes) {
      const DriftAction& a = result.actions[i];
      const std::string block =
          fmt::format("<note query=\"{}\" score=\"{}\" depth=\"{}\">\n{}\n</note>\n",
                      XmlAttr(a.query), a.score, a.depth, a.answer);
      const auto tokens = static_cast<int64_t>(tokenizer.Count(block));
      if (used + tokens > options.reduce_budget_tokens) break;
      used += tokens;
      blocks += block;
      ++kept;
    }
    if (kept == 0) {
      return Status::InvalidArgument(
          "drift.reduce_budget_tokens " + std::to_string(options.reduce_budget_tokens) +
          " cannot hold the primer's first note with the prompt and question");
    }
    if (kept < notes.size()) {
      result.diagnostics.push_back(fmt::format(
          "{} of {} notes left out of the reduce to stay within drift.reduce_budget_tokens",
          notes.size() - kept, notes.size()));
    }
    ChatRequest reduce =
        Request(FillPrompt(options.reduce_prompt,
                           {{"question", std::string(question)}, {"answers", blocks}}),
                false);
    reduce.max_tokens = options.reduce_reply_max_tokens;
    reduce.on_delta = options.on_answer_delta;
    const auto reduce_start = SteadyClock::now();
    Result<ChatResponse> answer = chat.Chat(reduce);
    stats.reduce_time = Since(reduce_start);
    stats.reduce_calls = 1;
    if (!answer.ok()) return answer.status().WithContext("drift search reduce");
    stats.tokens_in += answer->prompt_tokens;
    stats.tokens_out += answer->completion_tokens;
    stats.cache_hits += answer->cache_hit ? 1 : 0;
    result.answer = std::move(answer->content);
    for (const std::string& id : IdsIn(result.answer, known)) {
      result.citations.push_back(known.at(id));
    }
    stats.wall_time = Since(start);
    Log(LogLevel::kDebug, "drift",
        fmt::format("{} calls (hyde {}, primer {}, follow-ups {}, reduce 1; bound {}), {} failed, "
                    "{} unparseable, {} ms",
                    stats.calls(), stats.hyde_calls, stats.primer_calls, stats.local_calls,
                    stats.max_calls, stats.failed, stats.unparseable, stats.wall_time.count()));
    return std::move(result);
  }
};

}  // namespace

std::string_view DriftOutcomeName(DriftOutcome outcome) {
  switch (outcome) {
    case DriftOutcome::kOk:
      return "ok";
    case DriftOutcome::kUnparseable:
      return "unparseable";
    case DriftOutcome::kFailed:
      return "failed";
    case DriftOutcome::kNothingFound:
      return "nothing_found";
    case DriftOutcome::kNotAsked:
      return "not_asked";
  }
  return "unknown";
}

int64_t MaxDriftCalls(const DriftSearchOptions& o, int64_t folds) {
  const int64_t bound = (o.hyde ? 1 : 0) + folds + o.depth * o.breadth + 1;
  return o.max_calls > 0 ? std::min(bound, o.max_calls) : bound;
}

std::string DriftCostNote(const DriftSearchOptions& o, int64_t folds) {
  std::string note = fmt::format("at most {} calls: ", MaxDriftCalls(o, folds));
  if (o.hyde) note += "hyde 1 + ";
  note += fmt::format("primer {} + {}\u00d7{} follow-ups + reduce 1", folds, o.depth, o.breadth);
  const int64_t uncapped = (o.hyde ? 1 : 0) + folds + o.depth * o.breadth + 1;
  if (o.max_calls > 0 && o.max_calls < uncapped) {
    note += fmt::format(", capped by drift.max_calls = {}", o.max_calls);
  }
  return note;
}

Result<DriftPlan> PlanDriftSearch(Store& store, EmbeddingModel* embedder,
                                  const Tokenizer& tokenizer, std::string_view question,
                                  const DriftSearchOptions& options) {
  GRAG_RETURN_IF_ERROR(CheckOptions(options));
  GRAG_RETURN_IF_ERROR(CheckQuestion(question, tokenizer, options.local.max_question_tokens));
  GRAG_ASSIGN_OR_RETURN(std::vector<ReportCandidate> reports, LoadReports(store));
  std::vector<std::vector<float>> queries;
  std::string model;
  if (embedder != nullptr) {
    auto e = embedder->Embed({std::string(question)});
    if (e.ok() && !e->vectors.empty()) {
      queries.push_back(std::move(e->vectors.front()));
      model = embedder->model();
    }
  }
  std::vector<std::string> diagnostics;
  GRAG_RETURN_IF_ERROR(RankReports(store, reports, queries, model, question, diagnostics).status());
  std::vector<Fold> folds = PackFolds(reports, question, options, tokenizer, diagnostics);
  DriftPlan plan;
  for (const Fold& f : folds) {
    for (size_t i : f.reports) plan.candidate_reports.push_back(reports[i].report.community_id);
    plan.estimated_tokens += static_cast<int64_t>(tokenizer.Count(f.prompt));
  }
  plan.folds_exact = !options.hyde;
  plan.folds = options.hyde ? options.primer_folds : static_cast<int64_t>(folds.size());
  plan.max_calls = MaxDriftCalls(options, plan.folds);
  plan.cost_note = DriftCostNote(options, plan.folds);
  const auto q = static_cast<int64_t>(tokenizer.Count(question));
  if (options.hyde) {
    plan.estimated_tokens +=
        q + static_cast<int64_t>(tokenizer.Count(ReportText(TemplateReport(reports).report)));
  }
  plan.estimated_tokens +=
      options.depth * options.breadth * (options.local.context_budget_tokens + 600) +
      options.reduce_budget_tokens / 2;
  return plan;
}

Result<DriftSearchResult> DriftSearch(Store& store, ChatModel& chat, EmbeddingModel* embedder,
                                      const Tokenizer& tokenizer, std::string_view question,
                                      const DriftSearchOptions& options,
                                      const Retriever* retriever) {
  const auto start = SteadyClock::now();
  GRAG_RETURN_IF_ERROR(CheckOptions(options));
  GRAG_RETURN_IF_ERROR(CheckQuestion(question, tokenizer, options.local.max_question_tokens));
  DriftRun run(store, chat, embedder, tokenizer, question, options, retriever, start);
  DriftSearchResult& result = run.result;
  GRAG_ASSIGN_OR_RETURN(run.reports, LoadReports(store));
  if (std::none_of(run.reports.begin(), run.reports.end(), [](const ReportCandidate& c) {
        return c.report.generator == ReportGenerator::kLlm;
      })) {
    result.diagnostics.push_back(
        "the reports were written without a model (extractive digests): the primer reads names "
        "and phrases, not summaries");
  }
  run.workers = static_cast<size_t>(std::max(1, options.concurrency));
  run.cap = options.max_calls > 0 ? options.max_calls : INT64_MAX;

  run.Hyde();
  GRAG_RETURN_IF_ERROR(run.MatchReports());
  GRAG_RETURN_IF_ERROR(run.Primer());
  run.FollowUps();
  return run.Reduce();
}

}  // namespace grag
