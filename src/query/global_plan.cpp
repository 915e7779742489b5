// Report selection, the map-call cap, the seeded shuffle and token-bounded batching.
#include "global_plan.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "grag/prompts.h"

namespace grag {
namespace query {
namespace {

bool EndsWithNewline(std::string_view s) { return !s.empty() && s.back() == '\n'; }

// Length of `s` without an incomplete UTF-8 sequence at its end (a token boundary may split a
// character; the tokenizer's own decoding does not repair that).
size_t CompleteUtf8Length(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t need = 1;
    if ((c & 0xE0) == 0xC0) {
      need = 2;
    } else if ((c & 0xF0) == 0xE0) {
      need = 3;
    } else if ((c & 0xF8) == 0xF0) {
      need = 4;
    }
    return need > back ? n - back : n;
  }
  return n;
}

// One selected report, ready to batch.
struct Piece {
  GlobalReportInfo info;
  std::string block;   // <report id=...> ... </report>
  int64_t tokens = 0;  // of block + "\n", the share it adds to a map prompt
  // block + "\n" and its count, which Pack reuses for the prompts it is in.
  std::string line;
  Tokenizer::PrefixCount count;

  void SetBlock(std::string b, const Tokenizer& tokenizer) {
    block = std::move(b);
    line = block + "\n";
    count = tokenizer.CountPrefix(line);
    tokens = static_cast<int64_t>(count.tokens);
  }
};

bool HigherWeight(const Piece* a, const Piece* b) {
  if (a->info.weight != b->info.weight) return a->info.weight > b->info.weight;
  const double ra = a->info.rating.value_or(-1);
  const double rb = b->info.rating.value_or(-1);
  if (ra != rb) return ra > rb;
  return a->info.community_id < b->info.community_id;
}

// The kept reports in prompt order: by id (so the store's order does not matter), then shuffled.
std::vector<const Piece*> ShuffledOrder(std::vector<const Piece*> kept, uint64_t seed) {
  std::sort(kept.begin(), kept.end(), [](const Piece* a, const Piece* b) {
    return a->info.community_id < b->info.community_id;
  });
  SeededShuffle(kept, seed);
  return kept;
}

size_t EstimatedBatches(const std::vector<const Piece*>& by_weight, size_t k, uint64_t seed,
                        int64_t budget) {
  const auto order = ShuffledOrder({by_weight.begin(), by_weight.begin() + k}, seed);
  std::vector<int64_t> tokens;
  tokens.reserve(order.size());
  for (const Piece* p : order) tokens.push_back(p->tokens);
  return CountBatches(tokens, budget);
}

// Next-fit packing by the pieces' token counts, then checked against the real count of each
// whole prompt: BPE counts are not quite additive across a join, so a batch the estimate lets
// through but the tokenizer does not gives up its last reports to the next batch.
std::vector<GlobalBatch> Pack(const std::vector<const Piece*>& order, const std::string& templ,
                              std::string_view question, int64_t window, int64_t budget,
                              const Tokenizer& tokenizer) {
  std::vector<GlobalBatch> batches;
  size_t i = 0;
  while (i < order.size()) {
    size_t j = i;
    int64_t sum = 0;
    while (j < order.size() && (j == i || sum + order[j]->tokens <= budget)) {
      sum += order[j]->tokens;
      ++j;
    }
    for (;;) {
      std::vector<const std::string*> blocks;
      for (size_t k = i; k < j; ++k) blocks.push_back(&order[k]->block);
      const std::string joined = JoinBlocks(blocks);
      GlobalBatch batch;
      batch.prompt =
          FillPrompt(templ, {{"question", std::string(question)}, {"report_batch", joined}});
      // The exact count of the whole prompt, but the reports' own pieces are not tokenized
      // again: only the template, the question and the joins between reports are.
      std::vector<Tokenizer::KnownPart> parts;
      if (const size_t at = batch.prompt.find(joined); at != std::string::npos) {
        size_t offset = at + 1;  // JoinBlocks starts with a newline
        for (size_t k = i; k < j; ++k) {
          parts.push_back({offset, order[k]->line, order[k]->count});
          offset += order[k]->line.size();
        }
      }
      batch.prompt_tokens = static_cast<int64_t>(tokenizer.CountWithParts(batch.prompt, parts));
      if (batch.prompt_tokens <= window || j - i == 1) {
        for (size_t k = i; k < j; ++k) batch.community_ids.push_back(order[k]->info.community_id);
        batches.push_back(std::move(batch));
        break;
      }
      --j;
    }
    i = j;
  }
  return batches;
}

}  // namespace

Status ValidateGlobalOptions(const GlobalSearchOptions& o) {
  if (o.level < 0) return Status::InvalidArgument("level must be >= 0 (0 is the coarsest)");
  if (o.map_batch_tokens <= 0) return Status::InvalidArgument("map_batch_tokens must be > 0");
  if (o.max_map_calls < 1) return Status::InvalidArgument("max_map_calls must be >= 1");
  if (o.reduce_budget_tokens <= 0) {
    return Status::InvalidArgument("reduce_budget_tokens must be > 0");
  }
  if (o.map_reply_max_tokens && *o.map_reply_max_tokens < 1) {
    return Status::InvalidArgument("map_reply_max_tokens must be >= 1");
  }
  if (o.reduce_reply_max_tokens && *o.reduce_reply_max_tokens < 1) {
    return Status::InvalidArgument("reduce_reply_max_tokens must be >= 1");
  }
  if (o.map_timeout.count() <= 0) return Status::InvalidArgument("map_timeout must be > 0");
  if (o.concurrency < 1) return Status::InvalidArgument("concurrency must be >= 1");
  for (const auto& [text, id] : {std::pair{&o.map_prompt, PromptId::kGlobalMap},
                                 std::pair{&o.reduce_prompt, PromptId::kGlobalReduce}}) {
    const PromptInfo& info = GetPromptInfo(id);
    for (std::string_view ph : info.placeholders) {
      if (text->find(ph) == std::string::npos) {
        return Status::InvalidArgument(std::string(info.file_name) + " prompt lacks the " +
                                       "placeholder " + std::string(ph));
      }
    }
  }
  return Status::Ok();
}

std::vector<const CommunityRecord*> SelectCommunities(const std::vector<CommunityRecord>& all,
                                                      int64_t level) {
  std::unordered_set<int64_t> parents;
  for (const CommunityRecord& c : all) {
    if (c.parent_id) parents.insert(*c.parent_id);
  }
  std::vector<const CommunityRecord*> out;
  for (const CommunityRecord& c : all) {
    if (c.level == level || (c.level < level && parents.count(c.id) == 0)) out.push_back(&c);
  }
  std::sort(out.begin(), out.end(),
            [](const CommunityRecord* a, const CommunityRecord* b) { return a->id < b->id; });
  return out;
}

std::string ReportBody(const ReportRecord& r) {
  const auto trimmed = [](std::string_view s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos) return std::string_view();
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
  };
  if (auto content = trimmed(r.full_content); !content.empty()) return std::string(content);
  // No markdown rendering stored: rebuild the same shape from the parts.
  std::string body = "# " + r.title;
  if (!r.summary.empty()) body += "\n\n" + r.summary;
  for (const Finding& f : r.findings) {
    body += "\n\n## " + f.summary;
    if (!f.explanation.empty()) body += "\n\n" + f.explanation;
  }
  return body;
}

std::string ReportBlock(int64_t community_id, std::string_view body) {
  std::string out = "<report id=\"" + std::to_string(community_id) + "\">\n";
  out.append(body);
  if (!EndsWithNewline(out)) out += '\n';
  out += "</report>";
  return out;
}

std::string TruncateToTokens(const Tokenizer& tokenizer, std::string_view text,
                             int64_t max_tokens) {
  if (max_tokens <= 0) return {};
  std::vector<uint32_t> ids = tokenizer.Encode(text);
  if (static_cast<int64_t>(ids.size()) <= max_tokens) return std::string(text);
  ids.resize(static_cast<size_t>(max_tokens));
  std::string out = tokenizer.DecodeBytes(ids);
  out.erase(CompleteUtf8Length(out));  // erase, not resize: GCC 12 -O3 -Wrestrict misfires
  return out;
}

size_t CountBatches(const std::vector<int64_t>& tokens, int64_t budget) {
  size_t batches = 0;
  int64_t used = 0;
  bool open = false;
  for (int64_t t : tokens) {
    if (!open || used + t > budget) {
      ++batches;
      used = 0;
      open = true;
    }
    used += t;
  }
  return batches;
}

std::string JoinBlocks(const std::vector<const std::string*>& blocks) {
  std::string out = "\n";
  for (const std::string* b : blocks) {
    out += *b;
    out += '\n';
  }
  return out;
}

}  // namespace query

std::vector<int64_t> CommunitiesByWeight(const GlobalSearchPlan& plan) {
  std::vector<GlobalReportInfo> read = plan.reports;
  read.insert(read.end(), plan.left_out.begin(), plan.left_out.end());
  std::stable_sort(read.begin(), read.end(),
                   [](const auto& a, const auto& b) { return a.weight > b.weight; });
  std::vector<int64_t> ids;
  ids.reserve(read.size() + plan.missing_reports.size() + plan.gap_reports.size());
  for (const GlobalReportInfo& r : read) ids.push_back(r.community_id);
  ids.insert(ids.end(), plan.missing_reports.begin(), plan.missing_reports.end());
  ids.insert(ids.end(), plan.gap_reports.begin(), plan.gap_reports.end());
  return ids;
}

Result<GlobalSearchPlan> PlanGlobalSearch(Store& store, const Tokenizer& tokenizer,
                                          std::string_view question,
                                          const GlobalSearchOptions& options) {
  GRAG_RETURN_IF_ERROR(query::ValidateGlobalOptions(options));
  GRAG_RETURN_IF_ERROR(CheckQuestion(question, tokenizer, options.max_question_tokens));
  GRAG_ASSIGN_OR_RETURN(std::vector<CommunityRecord> communities, store.ListCommunities());

  GlobalSearchPlan plan;
  plan.level = options.level;
  for (const CommunityRecord& c : communities) plan.max_level = std::max(plan.max_level, c.level);
  const auto selected = query::SelectCommunities(communities, options.level);
  plan.communities_selected = static_cast<int64_t>(selected.size());

  // Only the levels selected from (none finer than options.level): the finer levels' reports,
  // often most of the text, are not read. The prompt shows each report's rendering
  // (ReportBody): findings are parsed only for reports stored without one.
  std::set<int64_t> levels;
  for (const CommunityRecord* c : selected) levels.insert(c->level);
  std::vector<ReportRecord> reports;
  for (int64_t level : levels) {
    GRAG_ASSIGN_OR_RETURN(std::vector<ReportRecord> of_level,
                          store.ListReports(level, /*findings=*/false));
    if (reports.empty()) {
      reports = std::move(of_level);
    } else {
      std::move(of_level.begin(), of_level.end(), std::back_inserter(reports));
    }
  }
  std::unordered_map<int64_t, const ReportRecord*> report_of;
  for (const ReportRecord& r : reports) report_of[r.community_id] = &r;

  // Room the question and the template leave for reports in one map prompt.
  const std::string empty_prompt =
      FillPrompt(options.map_prompt, {{"question", std::string(question)}, {"report_batch", "\n"}});
  const auto overhead = static_cast<int64_t>(tokenizer.Count(empty_prompt));
  const int64_t budget = options.map_batch_tokens - overhead;
  // Below this a report could not say anything useful: the settings, not the index, are wrong.
  constexpr int64_t kMinReportTokens = 64;
  if (budget < kMinReportTokens) {
    return Status::InvalidArgument(
        "map_batch_tokens " + std::to_string(options.map_batch_tokens) +
        " leaves no room for reports: the map prompt with the question alone takes " +
        std::to_string(overhead) + " tokens");
  }

  std::vector<query::Piece> pieces;
  pieces.reserve(selected.size());
  for (const CommunityRecord* c : selected) {
    auto it = report_of.find(c->id);
    if (it == report_of.end()) {
      plan.missing_reports.push_back(c->id);
      continue;
    }
    const ReportRecord& r = *it->second;
    if (r.status != ReportStatus::kOk) {
      plan.gap_reports.push_back(c->id);
      continue;
    }
    query::Piece& p = pieces.emplace_back();
    p.info.community_id = c->id;
    p.info.level = c->level;
    p.info.title = r.title;
    p.info.weight = c->weight;
    p.info.rating = r.rating;
    std::string body = query::ReportBody(r);
    p.SetBlock(query::ReportBlock(c->id, body), tokenizer);
    if (p.tokens > budget) {
      // Too long for a prompt of its own: keep its beginning (title, summary, first findings).
      const int64_t wrapper =
          static_cast<int64_t>(tokenizer.Count(query::ReportBlock(c->id, "") + "\n"));
      int64_t allowed = budget - wrapper - 8;  // slack for BPE merges across the joins
      for (;;) {
        p.SetBlock(query::ReportBlock(c->id, query::TruncateToTokens(tokenizer, body, allowed)),
                   tokenizer);
        const std::string alone = FillPrompt(
            options.map_prompt,
            {{"question", std::string(question)}, {"report_batch", query::JoinBlocks({&p.block})}});
        if (static_cast<int64_t>(tokenizer.Count(alone)) <= options.map_batch_tokens ||
            allowed <= 1) {
          break;
        }
        allowed = allowed * 9 / 10;
      }
      p.info.truncated = true;
    }
    p.info.tokens = p.tokens;
  }
  if (pieces.empty()) {
    if (communities.empty()) {
      return Status::NotFound("the index has no communities: run `grag index` first");
    }
    return Status::NotFound("no community report to search at level " +
                            std::to_string(options.level) + " (" +
                            std::to_string(plan.communities_selected) + " communities, " +
                            std::to_string(plan.missing_reports.size()) + " without a report, " +
                            std::to_string(plan.gap_reports.size()) + " with a gap)");
  }

  // The cap: keep the k highest-weight reports for the largest k whose batches fit in
  // max_map_calls. The batch count grows with k (almost always; the shuffle can make it wobble
  // by one), so a binary search on the estimate, then a check on the real batches.
  std::vector<const query::Piece*> by_weight;
  for (const query::Piece& p : pieces) by_weight.push_back(&p);
  std::sort(by_weight.begin(), by_weight.end(), query::HigherWeight);
  const auto max_calls = static_cast<size_t>(options.max_map_calls);
  size_t k = by_weight.size();
  if (query::EstimatedBatches(by_weight, k, options.shuffle_seed, budget) > max_calls) {
    size_t lo = 1;  // one report always fits one call
    size_t hi = k;  // too many
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      if (query::EstimatedBatches(by_weight, mid, options.shuffle_seed, budget) <= max_calls) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    k = lo;
  }
  for (;;) {
    const auto order =
        query::ShuffledOrder({by_weight.begin(), by_weight.begin() + k}, options.shuffle_seed);
    plan.batches = query::Pack(order, options.map_prompt, question, options.map_batch_tokens,
                               budget, tokenizer);
    if (plan.batches.size() <= max_calls || k == 1) {
      for (const query::Piece* p : order) plan.reports.push_back(p->info);
      break;
    }
    --k;
  }
  for (size_t i = k; i < by_weight.size(); ++i) plan.left_out.push_back(by_weight[i]->info);
  return plan;
}

}  // namespace grag
