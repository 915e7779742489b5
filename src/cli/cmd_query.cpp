// grag query --method global|local "question": answer from the index.
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <sstream>

#include "cli/cli.h"
#include "cli/progress.h"
#include "grag/extractive.h"
#include "grag/global_search.h"
#include "grag/lexical_embedder.h"
#include "grag/local_search.h"
#include "grag/log.h"
#include "grag/question.h"
#include "grag/models.h"
#include "grag/store.h"

namespace grag::cli {
namespace {

struct QueryOpts {
  std::string question;
  std::string method = "global";
  std::optional<int64_t> level;
  std::optional<int64_t> top_k;
  bool json = false;
  bool no_stream = false;
};

// Prints the answer as it arrives when stdout is a terminal (and neither --json nor --no-stream
// is given); sets `streamed` once something was printed. Empty otherwise.
std::function<void(std::string_view)> AnswerStream(const QueryOpts& o, bool& streamed) {
  if (o.json || o.no_stream || !isatty(STDOUT_FILENO)) return {};
  return [&streamed](std::string_view d) {
    std::cout << d << std::flush;
    streamed = true;
  };
}

// `chat` nullptr: the extractive answer (no LLM).
int RunGlobal(const Config& config, const QueryOpts& o, Store& store, ChatModel* chat,
              const Tokenizer& tok) {
  GlobalSearchOptions opts;
  const auto& g = config.global_search;
  opts.level = o.level.value_or(g.level);
  opts.max_question_tokens = config.query.max_question_tokens;
  opts.map_batch_tokens = g.map_batch_tokens;
  opts.max_map_calls = static_cast<int>(g.max_map_calls);
  opts.reduce_budget_tokens = g.reduce_budget_tokens;
  opts.map_timeout = std::chrono::milliseconds(static_cast<int64_t>(g.map_timeout_seconds * 1000));
  opts.concurrency = static_cast<int>(config.llm.concurrency);
  opts.map_json_mode = config.llm.json_mode;
  const std::string prompts = config.Resolve(config.prompts_dir);
  auto map_prompt = LoadPrompt(prompts, PromptId::kGlobalMap);
  if (!map_prompt.ok()) return Fail(map_prompt.status());
  auto reduce_prompt = LoadPrompt(prompts, PromptId::kGlobalReduce);
  if (!reduce_prompt.ok()) return Fail(reduce_prompt.status());
  opts.map_prompt = *map_prompt;
  opts.reduce_prompt = *reduce_prompt;
  bool streamed = false;
  opts.on_answer_delta = AnswerStream(o, streamed);
  auto r = chat != nullptr ? GlobalSearch(store, *chat, *chat, tok, o.question, opts)
                           : ExtractiveGlobalSearch(store, tok, o.question, opts);
  if (!r.ok()) return Fail(r.status());
  const auto& s = r->stats;
  if (o.json) {
    nlohmann::json cites = nlohmann::json::array();
    for (const auto& c : r->citations) {
      cites.push_back({{"community", c.community_id}, {"level", c.level}, {"title", c.title}});
    }
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : r->points) {
      points.push_back({{"description", p.description}, {"score", p.score},
                        {"communities", p.community_ids}, {"fate", PointFateName(p.fate)}});
    }
    nlohmann::json calls = nlohmann::json::array();
    for (const auto& m : r->map_calls) {
      calls.push_back({{"batch", m.batch}, {"communities", m.community_ids},
                       {"outcome", MapCallOutcomeName(m.outcome)}, {"error", m.error},
                       {"points", m.points}, {"latency_ms", m.latency.count()}});
    }
    PrintJson({{"method", "global"},
               {"question", o.question},
               {"answer", r->answer},
               {"llm", chat != nullptr},
               {"not_covered", r->not_covered},
               {"citations", cites},
               {"points", points},
               {"map_calls", calls},
               {"stats",
                {{"level", s.level}, {"communities_selected", s.communities_selected},
                 {"reports_used", s.reports_used}, {"reports_left_out", s.reports_left_out},
                 {"reports_missing", s.reports_missing}, {"map_calls", s.map_calls},
                 {"map_calls_failed", s.map_calls_failed}, {"points_kept", s.points_kept},
                 {"points_dropped", s.points_zero_score + s.points_over_budget},
                 {"reduce_calls", s.reduce_calls}, {"tokens_in", s.tokens_in},
                 {"tokens_out", s.tokens_out}, {"wall_ms", s.wall_time.count()}}}});
    return kExitOk;
  }
  if (!streamed) std::cout << r->answer;
  std::cout << "\n";
  if (!r->citations.empty()) {
    std::cout << "\nSources (community reports):\n";
    for (const auto& c : r->citations) {
      std::cout << "  [" << c.community_id << "] " << c.title << " (level " << c.level << ")\n";
    }
  }
  if (chat == nullptr) {
    std::cout << "\nlevel " << s.level << ": " << s.reports_used
              << " reports scored without an LLM; " << s.points_kept << " points kept; "
              << FormatDuration(static_cast<double>(s.wall_time.count()) / 1000) << "\n";
    return kExitOk;
  }
  std::cout << "\nlevel " << s.level << ": " << s.reports_used << " reports in " << s.map_calls
            << " map calls (" << s.map_calls_failed << " dropped out)";
  if (s.reports_left_out) std::cout << ", " << s.reports_left_out << " reports left out by the cap";
  std::cout << "; " << s.points_kept << " points kept, "
            << (s.points_zero_score + s.points_over_budget) << " dropped; " << s.reduce_calls
            << (s.reduce_calls == 1 ? " reduce call; " : " reduce calls; ")
            << FormatCount(s.tokens_in) << " tokens in, " << FormatCount(s.tokens_out) << " out; "
            << FormatDuration(static_cast<double>(s.wall_time.count()) / 1000) << "\n";
  return kExitOk;
}

// `chat` nullptr: the extractive answer (no LLM).
int RunLocal(const Config& config, const QueryOpts& o, Store& store, ChatModel* chat,
             EmbeddingModel* embedder, const Tokenizer& tok) {
  LocalSearchOptions opts;
  const auto& l = config.local_search;
  opts.top_k_entities = static_cast<int>(o.top_k.value_or(l.top_k));
  opts.max_question_tokens = config.query.max_question_tokens;
  opts.similarity_floor = embedder != nullptr && IsLexicalEmbeddingModel(embedder->model())
                              ? l.lexical_similarity_floor
                              : l.similarity_floor;
  opts.context_budget_tokens = l.context_budget_tokens;
  opts.chunk_share = l.chunk_share;
  opts.relationship_share = l.relationship_share;
  opts.report_share = l.report_share;
  auto prompt = LoadPrompt(config.Resolve(config.prompts_dir), PromptId::kLocalSearch);
  if (!prompt.ok()) return Fail(prompt.status());
  opts.prompt = *prompt;
  bool streamed = false;
  opts.on_answer_delta = AnswerStream(o, streamed);
  auto r = chat != nullptr ? LocalSearch(store, *chat, embedder, tok, o.question, opts)
                           : ExtractiveLocalSearch(store, embedder, tok, o.question, opts);
  if (!r.ok()) return Fail(r.status());
  const auto& ctx = r->context;
  if (o.json) {
    nlohmann::json matches = nlohmann::json::array();
    for (const auto& m : ctx.matches) {
      matches.push_back({{"entity", m.entity_id}, {"name", m.name},
                         {"similarity", m.similarity ? nlohmann::json(*m.similarity) : nlohmann::json()},
                         {"by_name", m.by_name}, {"by_embedding", m.by_embedding}});
    }
    nlohmann::json items = nlohmann::json::array();
    for (const auto& it : ctx.items) {
      items.push_back({{"id", it.id}, {"type", LocalItemTypeName(it.type)}, {"rank", it.rank},
                       {"tokens", it.tokens}, {"source", DescribeLocalItem(it)}});
    }
    nlohmann::json cites = nlohmann::json::array();
    for (const auto& c : r->citations) {
      cites.push_back({{"id", c.id}, {"source", DescribeLocalItem(ctx.items[c.item])}});
    }
    PrintJson({{"method", "local"},
               {"question", o.question},
               {"answer", r->answer},
               {"llm", chat != nullptr},
               {"nothing_found", r->nothing_found},
               {"matched_entities", matches},
               {"context", items},
               {"citations", cites},
               {"diagnostics", ctx.diagnostics},
               {"stats",
                {{"budget_tokens", ctx.budget_tokens}, {"used_tokens", ctx.used_tokens},
                 {"used_embeddings", ctx.used_embeddings},
                 {"prompt_tokens", r->response.prompt_tokens},
                 {"completion_tokens", r->response.completion_tokens},
                 {"build_ms", static_cast<double>(ctx.build_time.count()) / 1000}}}});
    return kExitOk;
  }
  if (!streamed) std::cout << r->answer;
  std::cout << "\n";
  if (!r->citations.empty()) {
    std::cout << "\nSources:\n";
    for (const auto& c : r->citations) {
      std::cout << "  [" << c.id << "] " << DescribeLocalItem(ctx.items[c.item]) << "\n";
    }
  }
  if (!ctx.matches.empty()) {
    std::cout << "\nmatched entities:";
    for (const auto& m : ctx.matches) {
      std::cout << " " << m.name;
      if (m.similarity) std::cout << " (" << static_cast<int>(*m.similarity * 100 + 0.5) / 100.0 << ")";
      std::cout << ";";
    }
    std::cout << "\ncontext: " << ctx.items.size() << " items, " << ctx.used_tokens << "/"
              << ctx.budget_tokens << " tokens\n";
  }
  for (const auto& d : ctx.diagnostics) std::cerr << "note: " << d << "\n";
  return kExitOk;
}

}  // namespace

Command AddQueryCommand(CLI::App& app, GlobalOptions& g) {
  auto* cmd = app.add_subcommand(
      "query",
      "Answer a question from the index. global: map-reduce over the community reports of one "
      "level (for questions about the whole corpus: themes, main actors). local: from the "
      "entities the question names, their neighbourhood, reports and source chunks. Without an "
      "LLM the answers are extractive: quoted from the reports and sources, with citations.");
  auto o = std::make_shared<QueryOpts>();
  cmd->add_option("QUESTION", o->question,
                  "The question; - reads it from standard input (for long or scripted questions)")
      ->required();
  cmd->add_option("-m,--method", o->method, "global | local")
      ->check(CLI::IsMember({"global", "local"}))
      ->default_str("global");
  cmd->add_option("--level", o->level,
                  "global: community level, 0 (coarsest) to the index's deepest (default "
                  "global_search.level)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000}));
  cmd->add_option("--k", o->top_k,
                  "local: matched entities at most, 1 to 1000 (default local_search.top_k)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  cmd->add_flag("--json", o->json,
                "Print answer, citations, context or points, diagnostics and statistics as JSON");
  cmd->add_flag("--no-stream", o->no_stream, "Print the answer when complete, not as it arrives");
  return {cmd, [o, &g]() {
            auto config = LoadProjectConfig(g);
            if (!config.ok()) return Fail(config.status());
            StoreOptions so;
            so.create_if_missing = false;
            so.allow_read_only = true;  // read-only media: answers are not cached, that is all
            const std::string db = config->Resolve(config->store.path);
            auto store = Store::Open(db, so);
            if (!store.ok()) {
              if (store.status().code() == ErrorCode::kNotFound) {
                return Fail(Status::NotFound("no index at " + db + ": run `grag index` first"));
              }
              return Fail(store.status());
            }
            if (o->question == "-") {
              std::ostringstream in;
              in << std::cin.rdbuf();
              o->question = in.str();
              while (!o->question.empty() &&
                     (o->question.back() == '\n' || o->question.back() == '\r')) {
                o->question.pop_back();
              }
            }
            auto tok = Tokenizer::Get(config->chunks.encoding);
            if (!tok.ok()) return Fail(tok.status());
            // Refused before anything is opened or called.
            if (Status st = CheckQuestion(o->question, **tok, config->query.max_question_tokens);
                !st.ok()) {
              return Fail(st);
            }
            if (o->level) {
              auto stats = (*store)->Stats();
              if (!stats.ok()) return Fail(stats.status());
              if (!stats->communities_per_level.empty()) {
                const int64_t deepest = stats->communities_per_level.rbegin()->first;
                if (*o->level > deepest) {
                  return Fail(Status::InvalidArgument(
                      "--level " + std::to_string(*o->level) + " is out of range: this index has "
                      "community levels 0 to " + std::to_string(deepest)));
                }
              }
            }
            auto chat = MakeChatModel(*config, &(*store)->ReplyCache());
            if (!chat.ok()) return Fail(chat.status());
            // No LLM configured (or --no-llm): extractive answers, with no network call.
            if (o->method == "global") return RunGlobal(*config, *o, **store, chat->get(), **tok);
            auto embedder = MakeEmbeddingModel(*config, &(*store)->ReplyCache());
            if (!embedder.ok()) return Fail(embedder.status());
            return RunLocal(*config, *o, **store, chat->get(), embedder->get(), **tok);
          }};
}

}  // namespace grag::cli
