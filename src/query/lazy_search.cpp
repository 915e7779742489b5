// Budgeted search: refine, rank, best-first relevance tests within the budget, claims, reduce.
#include "grag/lazy_search.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>

#include "global_plan.h"
#include "global_points.h"
#include "grag/log.h"
#include "grag/parallel.h"
#include "grag/words.h"
#include "lazy_frontier.h"
#include "lazy_replies.h"

namespace grag {
namespace {

using SteadyClock = std::chrono::steady_clock;

// A relevance call's share: which passages it tests.
struct PendingTest {
  size_t chunk = 0;  // tree index
  int64_t community = 0;
};

// 1480 -> "1,480"
std::string FormatCount(int64_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The chunk's best window of at most `max_tokens` tokens: the run of whole sentences holding the
// most distinct query terms (ties: the earliest); a generic question takes the opening window.
std::pair<size_t, size_t> BestWindow(std::string_view text, const std::set<std::string>& terms,
                                     const Tokenizer& tokenizer, int64_t max_tokens) {
  std::vector<Sentence> sentences = SplitSentences(text);
  if (sentences.empty()) return {0, text.size()};
  const size_t n = sentences.size();
  std::vector<size_t> begin(n), end(n);
  std::vector<int64_t> tokens(n);
  std::vector<std::set<std::string>> held(n);
  for (size_t i = 0; i < n; ++i) {
    begin[i] = sentences[i].offset;
    end[i] = i + 1 < n ? sentences[i + 1].offset : text.size();
    tokens[i] = static_cast<int64_t>(tokenizer.Count(text.substr(begin[i], end[i] - begin[i])));
    if (!terms.empty()) {
      for (std::string& t : ContentTerms(sentences[i].text)) {
        if (terms.count(t) != 0) held[i].insert(std::move(t));
      }
    }
  }
  size_t best_i = 0, best_j = 0;
  size_t best_score = 0;
  bool have = false;
  for (size_t i = 0; i < n; ++i) {
    std::set<std::string> in;
    int64_t used = 0;
    size_t j = i;
    for (; j < n && (j == i || used + tokens[j] <= max_tokens); ++j) {
      used += tokens[j];
      in.insert(held[j].begin(), held[j].end());
    }
    if (!have || in.size() > best_score) {
      best_i = i;
      best_j = j;
      best_score = in.size();
      have = true;
    }
    if (terms.empty()) break;  // generic: the opening window
  }
  size_t b = begin[best_i];
  size_t e = best_j > 0 ? end[best_j - 1] : text.size();
  // One sentence longer than the window: its first max_tokens tokens.
  const std::string cut = query::TruncateToTokens(tokenizer, text.substr(b, e - b), max_tokens);
  e = b + cut.size();
  while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\n' || text[e - 1] == '\r' ||
                   text[e - 1] == '\t')) {
    --e;
  }
  return {b, e};
}

std::string PassageBlock(const std::string& label, std::string_view text) {
  std::string out = "<passage id=\"" + label + "\">\n";
  out.append(text);
  out += "\n</passage>\n";
  return out;
}

void Count(LazyStats& stats, const ChatResponse& r) {
  stats.tokens_in += r.prompt_tokens;
  stats.tokens_out += r.completion_tokens;
  stats.cache_hits += r.cache_hit ? 1 : 0;
}

// The state of one LazySearch call, and its steps.
struct LazyRun {
  // One relevance call of a wave: the passages it tests and its prompt.
  struct Call {
    std::vector<size_t> tests;  // indices into result.tests
    std::string prompt;
  };
  // One claims call: the relevant passages it reads whole.
  struct Batch {
    std::vector<const LazyTest*> tests;
    std::string passages = "\n";
    int64_t tokens = 0;
  };

  LazyRun(Store& store_in, const Retriever& retriever_in, ChatModel& chat_in,
          const Tokenizer& tokenizer_in, std::string_view question_in,
          const LazySearchOptions& options_in, SteadyClock::time_point start_in)
      : store(store_in),
        retriever(retriever_in),
        chat(chat_in),
        tokenizer(tokenizer_in),
        question(question_in),
        options(options_in),
        start(start_in),
        q(question_in) {}

  Store& store;
  const Retriever& retriever;
  ChatModel& chat;
  const Tokenizer& tokenizer;
  std::string_view question;
  const LazySearchOptions& options;
  SteadyClock::time_point start;
  LazySearchResult result;
  LazyStats& stats = result.stats;
  query::CommunityTree tree;
  std::unordered_map<std::string, size_t> chunk_index;
  const std::string q;
  std::set<std::string> terms;
  std::vector<double> scores;
  std::map<int64_t, double> rank_of;
  std::set<size_t> tested;
  int misses = 0;
  int wave = 0;
  bool stopped_on_misses = false;
  Status first_failure;  // of the relevance calls that got no reply
  std::mutex mu;
  std::string budget_note;
  std::map<std::string, const LazyTest*> by_label;

  // ---- 0. the hierarchy and its chunks
  Status LoadTree() {
    GRAG_ASSIGN_OR_RETURN(std::vector<CommunityRecord> communities, store.ListCommunities());
    GRAG_ASSIGN_OR_RETURN(auto community_chunks, store.CommunityChunks());
    std::vector<std::string> all_chunks;
    if (community_chunks.empty()) {
      GRAG_ASSIGN_OR_RETURN(std::vector<DocumentInfo> docs, store.ListDocuments());
      for (const DocumentInfo& d : docs) {
        GRAG_ASSIGN_OR_RETURN(std::vector<ChunkRecord> chunks, store.ListChunks(d.id));
        for (const ChunkRecord& c : chunks) all_chunks.push_back(c.id);
      }
    }
    tree = query::BuildCommunityTree(communities, community_chunks, all_chunks);
    if (tree.chunk_ids.empty()) return Status::NotFound("the index holds no chunk to search");
    stats.chunks_total = static_cast<int64_t>(tree.chunk_ids.size());
    for (size_t i = 0; i < tree.chunk_ids.size(); ++i) chunk_index[tree.chunk_ids[i]] = i;
    return Status::Ok();
  }

  // ---- 1. refine
  Status Refine() {
    if (options.refine) {
      ChatRequest req;
      req.role = ChatRole::kQuery;
      req.messages = {
          {"user",
           FillPrompt(options.refine_prompt,
                      {{"question", q}, {"max_subqueries", std::to_string(options.subqueries)}})}};
      req.json_mode = options.json_mode;
      req.max_tokens = options.reply_max_tokens;
      req.validator = [](const std::string& c) { return query::ParseRefineReply(c).status(); };
      stats.refine_calls = 1;
      Result<ChatResponse> r = chat.Chat(req);
      if (r.ok()) {
        Count(stats, *r);
        Result<query::RefineReply> parsed = query::ParseRefineReply(r->content);
        if (parsed.ok()) {
          for (std::string& s : parsed->subqueries) {
            if (static_cast<int>(result.subqueries.size()) < options.subqueries) {
              result.subqueries.push_back(std::move(s));
            }
          }
          for (std::string& t : parsed->terms) {
            if (result.terms.size() < 10) result.terms.push_back(std::move(t));
          }
        } else {
          Log(LogLevel::kWarn, "lazy", "refine reply unreadable, searching the question alone");
        }
      } else if (r.status().code() == ErrorCode::kCancelled) {
        return r.status();
      } else {
        Log(LogLevel::kWarn, "lazy",
            "refine call failed, searching the question alone: " + r.status().ToString());
      }
    }
    return Status::Ok();
  }

  // ---- 2. rank chunks
  Status RankChunks() {
    std::string all_terms_text = q;
    for (const std::string& s : result.subqueries) all_terms_text += "\n" + s;
    for (const std::string& t : result.terms) all_terms_text += "\n" + t;
    for (std::string& t : ContentTerms(all_terms_text)) terms.insert(std::move(t));
    stats.generic = terms.empty();
    scores.assign(tree.chunk_ids.size(), 0.0);
    if (!stats.generic) {
      std::string joined_terms;
      for (const std::string& t : result.terms) joined_terms += " " + t;
      std::vector<std::string> queries = {q + joined_terms};
      for (const std::string& s : result.subqueries) queries.push_back(s + joined_terms);
      RetrievalOptions ro = options.retrieval;
      ro.method = RetrievalMethod::kHybrid;
      ro.top_k = options.candidate_chunks;
      ro.candidates = std::max(ro.candidates, options.candidate_chunks);
      ro.read_chunks = false;
      double best = 0;
      std::set<size_t> ranked;
      for (const std::string& query_text : queries) {
        if (ContentTerms(query_text).empty()) continue;
        Result<RetrievalResult> r = retriever.Retrieve(query_text, ro);
        if (!r.ok()) {
          if (r.status().code() == ErrorCode::kInvalidArgument) continue;
          return r.status().WithContext("budgeted search ranking");
        }
        for (size_t rank = 0; rank < r->chunks.size(); ++rank) {
          auto it = chunk_index.find(r->chunks[rank].chunk_id);
          if (it == chunk_index.end()) continue;
          scores[it->second] += 1.0 / (60.0 + static_cast<double>(rank + 1));
          best = std::max(best, scores[it->second]);
          ranked.insert(it->second);
        }
      }
      if (best > 0) {
        for (double& s : scores) s /= best;
      }
      stats.candidates = static_cast<int64_t>(ranked.size());
    }
    return Status::Ok();
  }

  // The community's rank, recorded in rank_of.
  double Rank(int64_t id) {
    const query::LazyCommunity& k = tree.communities.at(id);
    return rank_of[id] = query::RankCommunity(tree, k, scores, options.community_rank_k,
                                              options.prior_weight);
  }

  // ---- 3 and 4. best first within the budget
  Status TestWithinBudget() {
    query::Frontier frontier(tree);
    for (int64_t id : tree.roots) frontier.Push(id, Rank(id));
    while (!frontier.empty() && stats.relevance_calls < options.budget) {
      const int calls_left = options.budget - static_cast<int>(stats.relevance_calls);
      const int wave_calls = std::min(options.concurrency, calls_left);
      std::vector<std::pair<int64_t, double>> members;  // communities of this wave, in rank order
      std::vector<std::vector<PendingTest>> calls = PackWave(frontier, wave_calls, members);
      if (calls.empty()) break;

      GRAG_ASSIGN_OR_RETURN(std::vector<Call> prepared, PrepareWave(calls));
      std::vector<std::optional<Result<ChatResponse>>> replies = AskRelevance(prepared);
      stats.relevance_calls += static_cast<int64_t>(prepared.size());
      GRAG_RETURN_IF_ERROR(ReadRelevance(prepared, replies));
      Deepen(frontier, prepared, members);
      ++wave;
      if (options.on_progress)
        options.on_progress(static_cast<int>(stats.relevance_calls), options.budget);
      if (misses >= options.max_misses) {
        stopped_on_misses = true;
        break;
      }
    }
    // No reply at all (the endpoint is down, the key refused): an error, not "not covered".
    if (stats.relevance_calls > 0 && stats.relevance_failed == stats.relevance_calls) {
      return Status(
          first_failure.code() == ErrorCode::kOk ? ErrorCode::kUnavailable : first_failure.code(),
          "budgeted search: all " + std::to_string(stats.relevance_calls) +
              " relevance calls failed; first: " + first_failure.message());
    }
    std::set<int64_t> visited;
    for (const LazyVisit& v : result.visits) visited.insert(v.community_id);
    stats.communities_visited = static_cast<int64_t>(visited.size());
    stats.passages_tested = static_cast<int64_t>(result.tests.size());
    if (stopped_on_misses) {
      stats.stop = LazyStop::kMisses;
    } else if (stats.relevance_calls >= options.budget && !frontier.empty()) {
      stats.stop = LazyStop::kBudget;
    } else {
      stats.stop = LazyStop::kExhausted;
    }
    stats.budget_exhausted = stats.stop == LazyStop::kBudget;
    result.budget_exhausted = stats.budget_exhausted;
    budget_note = "\n\n(Budget of " + std::to_string(options.budget) +
                  " relevance calls used up after testing " + FormatCount(stats.passages_tested) +
                  " of " + FormatCount(stats.chunks_total) +
                  " passages; this answer rests on what was found.)";
    return Status::Ok();
  }

  // Pack the best communities' next passages into at most wave_calls calls (empty: none left).
  std::vector<std::vector<PendingTest>> PackWave(query::Frontier& frontier, int wave_calls,
                                                 std::vector<std::pair<int64_t, double>>& members) {
    std::vector<std::vector<PendingTest>> calls(1);
    std::set<size_t> in_wave;
    while (!frontier.empty()) {
      if (static_cast<int>(calls.size()) == wave_calls &&
          static_cast<int>(calls.back().size()) == options.tests_per_call) {
        break;
      }
      auto [id, r] = *frontier.Pop();
      const query::LazyCommunity& k = tree.communities.at(id);
      std::set<size_t> skip = tested;
      skip.insert(in_wave.begin(), in_wave.end());
      std::vector<size_t> queue = query::TestQueue(k, scores, skip, !stats.generic);
      if (queue.empty()) {
        // Everything it holds was tested elsewhere (its children hold no more): nothing to do.
        continue;
      }
      members.emplace_back(id, r);
      int taken = 0;
      for (size_t c : queue) {
        if (taken == options.tests_per_call) break;
        if (static_cast<int>(calls.back().size()) == options.tests_per_call) {
          if (static_cast<int>(calls.size()) == wave_calls) break;
          calls.emplace_back();
        }
        calls.back().push_back({c, id});
        in_wave.insert(c);
        ++taken;
      }
    }
    if (calls.back().empty()) calls.pop_back();
    return calls;
  }

  // Number the passages and read their windows.
  Result<std::vector<Call>> PrepareWave(const std::vector<std::vector<PendingTest>>& calls) {
    std::vector<Call> prepared(calls.size());
    for (size_t ci = 0; ci < calls.size(); ++ci) {
      std::string passages = "\n";
      for (const PendingTest& p : calls[ci]) {
        GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk,
                              store.GetChunk(tree.chunk_ids[p.chunk]));
        LazyTest& t = result.tests.emplace_back();
        t.label = "T" + std::to_string(result.tests.size());
        t.chunk_id = tree.chunk_ids[p.chunk];
        if (chunk) {
          t.document_id = chunk->document_id;
          t.chunk_index = chunk->index;
        }
        t.community_id = p.community;
        t.call = static_cast<int>(stats.relevance_calls + static_cast<int64_t>(ci));
        std::string_view text = chunk ? std::string_view(chunk->text) : std::string_view();
        std::tie(t.window_begin, t.window_end) =
            BestWindow(text, terms, tokenizer, options.test_window_tokens);
        const std::string_view window = text.substr(t.window_begin, t.window_end - t.window_begin);
        t.tokens = static_cast<int64_t>(tokenizer.Count(window));
        passages += PassageBlock(t.label, window);
        prepared[ci].tests.push_back(result.tests.size() - 1);
        tested.insert(p.chunk);
      }
      prepared[ci].prompt =
          FillPrompt(options.relevance_prompt, {{"question", q}, {"passages", passages}});
    }
    return prepared;
  }

  // The wave's relevance calls, all at once; one reply per call.
  std::vector<std::optional<Result<ChatResponse>>> AskRelevance(const std::vector<Call>& prepared) {
    std::vector<std::optional<Result<ChatResponse>>> replies(prepared.size());
    ParallelFor(prepared.size(), prepared.size(), [&](size_t ci) {
      ChatRequest req;
      req.role = ChatRole::kQuery;
      req.messages = {{"user", prepared[ci].prompt}};
      req.json_mode = options.json_mode;
      req.max_tokens = options.reply_max_tokens;
      req.validator = [](const std::string& c) { return query::ParseRelevanceReply(c).status(); };
      Result<ChatResponse> r = chat.Chat(req);
      std::lock_guard lock(mu);
      replies[ci] = std::move(r);
    });
    return replies;
  }

  // Reads the ratings into the wave's tests; an error only when cancelled.
  Status ReadRelevance(const std::vector<Call>& prepared,
                       const std::vector<std::optional<Result<ChatResponse>>>& replies) {
    for (size_t ci = 0; ci < prepared.size(); ++ci) {
      const Result<ChatResponse>& r = *replies[ci];
      if (!r.ok()) {
        if (r.status().code() == ErrorCode::kCancelled) return r.status();
        ++(r.status().code() == ErrorCode::kParse ? stats.relevance_unparseable
                                                  : stats.relevance_failed);
        if (r.status().code() != ErrorCode::kParse && first_failure.ok()) {
          first_failure = r.status();
        }
        Log(LogLevel::kWarn, "lazy", "relevance call dropped: " + r.status().ToString());
        continue;
      }
      Count(stats, *r);
      Result<std::map<std::string, int>> ratings = query::ParseRelevanceReply(r->content);
      if (!ratings.ok()) {
        ++stats.relevance_unparseable;
        continue;
      }
      for (size_t ti : prepared[ci].tests) {
        LazyTest& t = result.tests[ti];
        auto it = ratings->find(t.label);
        t.score = it == ratings->end() ? 0 : it->second;
        t.relevant = t.score >= options.relevance_threshold;
      }
    }
    return Status::Ok();
  }

  // Deepen where relevant text was found; drop the rest.
  void Deepen(query::Frontier& frontier, const std::vector<Call>& prepared,
              const std::vector<std::pair<int64_t, double>>& members) {
    std::map<int64_t, std::pair<int, int>> tally;  // community -> tested, hits (this wave)
    for (const Call& c : prepared) {
      for (size_t ti : c.tests) {
        auto& [n, hits] = tally[result.tests[ti].community_id];
        ++n;
        hits += result.tests[ti].relevant ? 1 : 0;
      }
    }
    for (const auto& [id, r] : members) {
      const auto& [n, hits] = tally[id];
      if (n == 0) {  // packed out of this wave: back in line
        frontier.Push(id, r);
        continue;
      }
      const query::LazyCommunity& k = tree.communities.at(id);
      LazyVisit& v = result.visits.emplace_back();
      v.community_id = id;
      v.level = k.level;
      v.rank = r;
      v.tested = n;
      v.hits = hits;
      v.wave = wave;
      stats.deepest_level = std::max(stats.deepest_level, k.level);
      if (hits > 0) {
        misses = 0;
        for (int64_t child : k.children) frontier.Push(child, Rank(child));
        if (!query::TestQueue(k, scores, tested, !stats.generic).empty()) {
          frontier.Push(id, r * hits / n);
        }
      } else {
        ++misses;
        frontier.Drop(id);
      }
    }
  }

  // The result with `answer` (and the budget note when the budget ran out).
  LazySearchResult Finish(std::string answer) {
    if (result.budget_exhausted) {
      if (options.on_answer_delta) options.on_answer_delta(budget_note);
      answer += budget_note;
    }
    result.answer = std::move(answer);
    stats.wall_time =
        std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start);
    Log(LogLevel::kDebug, "lazy",
        std::to_string(stats.calls()) + " calls (" + std::to_string(stats.relevance_calls) +
            " relevance), " + std::to_string(stats.passages_relevant) + "/" +
            std::to_string(stats.passages_tested) +
            " passages relevant, stop: " + std::string(LazyStopName(stats.stop)));
    return result;
  }

  LazySearchResult NotCovered() {
    result.not_covered = true;
    if (options.on_answer_delta) options.on_answer_delta(options.not_covered_answer);
    return Finish(options.not_covered_answer);
  }

  // ---- 6. claims from the relevant chunks, read whole, in order of discovery (best first)
  Result<LazySearchResult> ClaimsAndReduce() {
    std::vector<const LazyTest*> relevant;
    for (const LazyTest& t : result.tests) {
      if (t.relevant) relevant.push_back(&t);
    }
    stats.passages_relevant = static_cast<int64_t>(relevant.size());
    if (relevant.empty()) return NotCovered();
    std::stable_sort(relevant.begin(), relevant.end(),
                     [](const LazyTest* a, const LazyTest* b) { return a->score > b->score; });
    GRAG_ASSIGN_OR_RETURN(std::vector<Batch> batches, PackClaimBatches(relevant));
    GRAG_ASSIGN_OR_RETURN(std::vector<GlobalPoint> claims, AskClaims(batches));
    return Reduce(std::move(claims));
  }

  // The relevant chunks packed into at most max_claim_calls prompts of claim_batch_tokens.
  Result<std::vector<Batch>> PackClaimBatches(const std::vector<const LazyTest*>& relevant) {
    const std::string empty_prompt =
        FillPrompt(options.claims_prompt, {{"question", q}, {"passages", "\n"}});
    const auto base_tokens = static_cast<int64_t>(tokenizer.Count(empty_prompt));
    std::vector<Batch> batches;
    for (const LazyTest* t : relevant) {
      GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk, store.GetChunk(t->chunk_id));
      if (!chunk) continue;
      std::string block = PassageBlock(t->label, chunk->text);
      auto tokens = static_cast<int64_t>(tokenizer.Count(block));
      const int64_t room = options.claim_batch_tokens - base_tokens;
      if (tokens > room) {
        block = PassageBlock(t->label, query::TruncateToTokens(tokenizer, chunk->text,
                                                               std::max<int64_t>(room - 40, 50)));
        tokens = static_cast<int64_t>(tokenizer.Count(block));
      }
      if (batches.empty() || batches.back().tokens + tokens > room) {
        if (static_cast<int>(batches.size()) == options.max_claim_calls) {
          ++stats.relevant_left_out;
          continue;
        }
        batches.emplace_back();
      }
      batches.back().tests.push_back(t);
      batches.back().passages += block;
      batches.back().tokens += tokens;
    }
    return batches;
  }

  // The claims calls, all at once, read into claims (fills by_label).
  Result<std::vector<GlobalPoint>> AskClaims(const std::vector<Batch>& batches) {
    std::vector<std::optional<Result<ChatResponse>>> claim_replies(batches.size());
    ParallelFor(batches.size(), static_cast<size_t>(options.concurrency), [&](size_t bi) {
      ChatRequest req;
      req.role = ChatRole::kQuery;
      req.messages = {{"user", FillPrompt(options.claims_prompt,
                                          {{"question", q}, {"passages", batches[bi].passages}})}};
      req.json_mode = options.json_mode;
      req.max_tokens = options.reply_max_tokens;
      req.validator = [](const std::string& c) { return query::ParseClaimsReply(c).status(); };
      Result<ChatResponse> r = chat.Chat(req);
      std::lock_guard lock(mu);
      claim_replies[bi] = std::move(r);
    });
    stats.claim_calls = static_cast<int64_t>(batches.size());
    for (const LazyTest& t : result.tests) by_label[t.label] = &t;
    std::vector<GlobalPoint> claims;
    Status first_error;
    for (size_t bi = 0; bi < batches.size(); ++bi) {
      const Result<ChatResponse>& r = *claim_replies[bi];
      Result<std::vector<query::ClaimReply>> parsed =
          r.ok() ? query::ParseClaimsReply(r->content)
                 : Result<std::vector<query::ClaimReply>>(r.status());
      if (r.ok()) Count(stats, *r);
      if (!parsed.ok()) {
        if (parsed.status().code() == ErrorCode::kCancelled) return parsed.status();
        ++stats.claim_calls_failed;
        if (first_error.ok()) first_error = parsed.status();
        Log(LogLevel::kWarn, "lazy", "claims call dropped: " + parsed.status().ToString());
        continue;
      }
      std::set<std::string> batch_labels;
      for (const LazyTest* t : batches[bi].tests) batch_labels.insert(t->label);
      for (query::ClaimReply& c : *parsed) {
        GlobalPoint& p = claims.emplace_back();
        p.description = std::move(c.claim);
        p.score = c.score;
        p.batch = bi;
        for (const std::string& s : c.sources) {
          if (batch_labels.count(s) != 0) p.source_ids.push_back(s);
        }
        p.named_by_model = !p.source_ids.empty();
        if (p.source_ids.empty()) p.source_ids.assign(batch_labels.begin(), batch_labels.end());
        std::set<int64_t> ids;
        for (const std::string& s : p.source_ids) ids.insert(by_label.at(s)->community_id);
        p.community_ids.assign(ids.begin(), ids.end());
      }
    }
    if (stats.claim_calls_failed == stats.claim_calls) {
      return Status(ErrorCode::kUnavailable,
                    "budgeted search: all " + std::to_string(stats.claim_calls) +
                        " claims calls dropped out; first: " + first_error.ToString());
    }
    return claims;
  }

  // ---- 7. reduce with seed 000's global reduce prompt
  Result<LazySearchResult> Reduce(std::vector<GlobalPoint> claims) {
    std::stable_sort(claims.begin(), claims.end(),
                     [](const GlobalPoint& a, const GlobalPoint& b) { return a.score > b.score; });
    std::vector<const GlobalPoint*> ranked;
    for (GlobalPoint& p : claims) {
      if (p.score == 0) {
        p.fate = PointFate::kZeroScore;
      } else {
        ranked.push_back(&p);
      }
    }
    if (ranked.empty()) {
      result.claims = std::move(claims);
      return NotCovered();
    }
    query::ReducePrompt reduce = query::BuildReducePrompt(options.reduce_prompt, question, ranked,
                                                          options.reduce_budget_tokens, tokenizer);
    if (reduce.kept == 0) {
      return Status::InvalidArgument("lazy.reduce_budget_tokens " +
                                     std::to_string(options.reduce_budget_tokens) +
                                     " cannot hold the highest-scored claim with the prompt");
    }
    std::set<std::string> cited;
    for (size_t i = 0; i < ranked.size(); ++i) {
      const_cast<GlobalPoint*>(ranked[i])->fate =
          i < reduce.kept ? PointFate::kKept : PointFate::kOverBudget;
      if (i >= reduce.kept) continue;
      for (const std::string& s : ranked[i]->source_ids) {
        if (cited.insert(s).second) {
          result.citations.push_back(static_cast<size_t>(by_label.at(s) - result.tests.data()));
        }
      }
    }
    ChatRequest req;
    req.role = ChatRole::kQuery;
    req.messages = {{"user", std::move(reduce.prompt)}};
    req.max_tokens = options.reduce_reply_max_tokens;
    if (options.on_answer_delta) req.on_delta = options.on_answer_delta;
    stats.reduce_calls = 1;
    Result<ChatResponse> answer = chat.Chat(req);
    if (!answer.ok()) return answer.status().WithContext("budgeted search reduce");
    Count(stats, *answer);
    result.claims = std::move(claims);
    return Finish(std::move(answer->content));
  }
};

}  // namespace

std::string_view LazyStopName(LazyStop stop) {
  switch (stop) {
    case LazyStop::kBudget:
      return "budget";
    case LazyStop::kMisses:
      return "misses";
    case LazyStop::kExhausted:
      return "exhausted";
  }
  return "exhausted";
}

Status ValidateLazyOptions(const LazySearchOptions& o) {
  auto bad = [](const std::string& what) { return Status::InvalidArgument("lazy." + what); };
  if (o.budget < 1 || o.budget > 1000) return bad("budget must be between 1 and 1000");
  if (o.tests_per_call < 1 || o.tests_per_call > 50) {
    return bad("tests_per_call must be between 1 and 50");
  }
  if (o.test_window_tokens < 20) return bad("test_window_tokens must be at least 20");
  if (o.relevance_threshold < 1 || o.relevance_threshold > 3) {
    return bad("relevance_threshold must be 1, 2 or 3");
  }
  if (o.max_misses < 1) return bad("max_misses must be at least 1");
  if (o.community_rank_k < 1) return bad("community_rank_k must be at least 1");
  if (o.prior_weight < 0) return bad("prior_weight must not be negative");
  if (o.candidate_chunks < 1) return bad("candidate_chunks must be at least 1");
  if (o.subqueries < 0 || o.subqueries > 10) return bad("subqueries must be between 0 and 10");
  if (o.concurrency < 1) return bad("concurrency must be at least 1");
  if (o.claim_batch_tokens < 500) return bad("claim_batch_tokens must be at least 500");
  if (o.max_claim_calls < 1) return bad("max_claim_calls must be at least 1");
  if (o.reduce_budget_tokens < 100) return bad("reduce_budget_tokens must be at least 100");
  return Status::Ok();
}

Result<LazyPlan> PlanLazySearch(Store& store, const LazySearchOptions& options) {
  GRAG_RETURN_IF_ERROR(ValidateLazyOptions(options));
  GRAG_ASSIGN_OR_RETURN(StoreStats stats, store.Stats());
  LazyPlan plan;
  plan.chunks_total = stats.chunks;
  plan.communities = stats.communities;
  const int64_t refine = options.refine ? 1 : 0;
  plan.max_calls = refine + options.budget + options.max_claim_calls + 1;
  const int64_t tests = (stats.chunks + options.tests_per_call - 1) / options.tests_per_call;
  const int64_t relevance = std::min<int64_t>(options.budget, tests);
  // About a fifth of what is tested turns out relevant, read whole in claim batches.
  const int64_t claims = std::clamp<int64_t>(
      (relevance * options.tests_per_call / 5 * 1200 + options.claim_batch_tokens - 1) /
          options.claim_batch_tokens,
      1, options.max_claim_calls);
  plan.expected_calls = refine + relevance + claims + 1;
  plan.cost_note = "at most " + std::to_string(plan.max_calls) + " calls (" +
                   (refine ? "refine 1 + " : "") +
                   "relevance <= " + std::to_string(options.budget) +
                   " + claims <= " + std::to_string(options.max_claim_calls) +
                   " + reduce 1); about " + std::to_string(plan.expected_calls) + " expected";
  return plan;
}

Result<LazySearchResult> LazySearch(Store& store, const Retriever& retriever, ChatModel& chat,
                                    const Tokenizer& tokenizer, std::string_view question,
                                    const LazySearchOptions& options) {
  const auto start = SteadyClock::now();
  GRAG_RETURN_IF_ERROR(ValidateLazyOptions(options));
  GRAG_RETURN_IF_ERROR(CheckQuestion(question, tokenizer, options.max_question_tokens));
  LazyRun run(store, retriever, chat, tokenizer, question, options, start);
  GRAG_RETURN_IF_ERROR(run.LoadTree());
  GRAG_RETURN_IF_ERROR(run.Refine());
  GRAG_RETURN_IF_ERROR(run.RankChunks());
  GRAG_RETURN_IF_ERROR(run.TestWithinBudget());
  return run.ClaimsAndReduce();
}

}  // namespace grag
