// Retrieval evaluation on a QA set with gold passages (HotpotQA-100 by default): indexes the
// passages with the real pipeline (no LLM: the NLP extractor and the lexical embedder), then
// asks every question of every method and prints, per split, recall@2/5/10, all-supports@5,
// recall and all-supports at a fixed context size (the same characters for every method, BM25
// included), and the query p50.
//
//   build-release/bench/retrieval_eval [--data DIR] [--budget CHARS]... [--opt key=value]...
//                                      [--questions N] [--keep DIR] [--json]
//
// Data: DIR/hotpotqa_train.json (questions: question, supporting_facts [[title, i]]) and
// DIR/hotpotqa_train_corpus.json (title -> sentences). Each passage becomes one document,
// "title\n\ntext", with the title as its title field (as a JSON record). Splits: "tune" is the
// first half of the questions (what the defaults were tuned on), "test" the second half.
// --opt sets a RetrievalOptions field for every method (damping=0.6, graph_weight=1.5, ...).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <tuple>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "grag/indexer.h"
#include "grag/lexical_embedder.h"
#include "grag/local_search.h"
#include "grag/retrieval.h"
#include "grag/retrieval_eval.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Question {
  std::string text;
  std::set<std::string> gold;  // passage titles = document ids
  std::string type;            // HotpotQA: bridge or comparison
};

struct Args {
  std::string data = std::string(GRAG_SOURCE_DIR) + "/bench/data/hotpotqa-100";
  std::vector<int64_t> budgets;  // context sizes in characters; empty: 8000 and local's size
  std::vector<std::pair<std::string, std::string>> opts;
  size_t questions = 0;  // 0: all
  std::string keep;      // keep the index here
  bool json_out = false;
  bool explain = false;  // print the misses of graph@2 with seeds and each method's top 5
  bool lazy = false;     // read each question's neighbourhood instead of keeping the graph
};

[[noreturn]] void Die(const std::string& m) {
  std::fprintf(stderr, "retrieval_eval: %s\n", m.c_str());
  std::exit(1);
}

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) Die("cannot read " + path);
  return json::parse(in);
}

// Sets one RetrievalOptions field by name.
void SetOption(RetrievalOptions& o, const std::string& key, const std::string& value) {
  const double v = std::stod(value);
  if (key == "top_k")
    o.top_k = static_cast<int>(v);
  else if (key == "candidates")
    o.candidates = static_cast<int>(v);
  else if (key == "rrf_k")
    o.rrf_k = v;
  else if (key == "vector_weight")
    o.vector_weight = v;
  else if (key == "bm25_weight")
    o.bm25_weight = v;
  else if (key == "graph_weight")
    o.graph_weight = v;
  else if (key == "unanchored_graph_weight")
    o.unanchored_graph_weight = v;
  else if (key == "lexical_vector_weight")
    o.lexical_vector_weight = v;
  else if (key == "damping")
    o.damping = v;
  else if (key == "entity_to_chunk")
    o.entity_to_chunk = v;
  else if (key == "min_name_specificity")
    o.min_name_specificity = v;
  else if (key == "max_embedding_seeds")
    o.max_embedding_seeds = static_cast<int>(v);
  else if (key == "lexical_similarity_floor")
    o.lexical_similarity_floor = v;
  else if (key == "passage_seed_share")
    o.passage_seed_share = v;
  else if (key == "passage_seeds")
    o.passage_seeds = static_cast<int>(v);
  else if (key == "max_name_words")
    o.max_name_words = static_cast<int>(v);
  else if (key == "fact_seed_share")
    o.fact_seed_share = v;
  else if (key == "titled_chunk_share")
    o.titled_chunk_share = v;
  else if (key == "fact_sentences")
    o.fact_sentences = static_cast<int>(v);
  else if (key == "specific_entities_first")
    o.specific_entities_first = v != 0;
  else if (key == "exclude_seed_mass")
    o.exclude_seed_mass = v != 0;
  else if (key == "diversity")
    o.diversity = v;
  else if (key == "passage_weight")
    o.passage_weight = v;
  else if (key == "chain_links")
    o.chain_links = static_cast<int64_t>(v);
  else if (key == "chain_depth")
    o.chain_depth = static_cast<int64_t>(v);
  else
    Die("unknown option " + key);
}

// What one method ranked for one question: document ids best first and their text sizes.
struct Ranking {
  std::vector<std::string> docs;
  std::vector<int64_t> chars;
  double micros = 0;
};

struct Tally {
  double recall2 = 0, recall5 = 0, recall10 = 0, all5 = 0;
  std::map<int64_t, double> recall_at_budget, all_at_budget;
  double context_recall = 0, context_all = 0;  // local: its whole context
  std::vector<double> micros;
  int n = 0;
};

// The gold rules are grag eval's (grag/retrieval_eval.h), so this bench and a user's
// `grag eval` count a passage the same way.
double RecallAt(const Ranking& r, const std::set<std::string>& gold, size_t k) {
  const std::vector<std::string> found(
      r.docs.begin(), r.docs.begin() + static_cast<std::ptrdiff_t>(std::min(k, r.docs.size())));
  return RecallOf(found, std::vector<std::string>(gold.begin(), gold.end()));
}

// The ranking cut where its text reaches `budget` characters (a passage that would pass the
// budget is left out, as a context builder does).
double RecallWithin(const Ranking& r, const std::set<std::string>& gold, int64_t budget) {
  return RecallAt(r, gold, CountWithinBudget(r.chars, budget));
}

int Main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--data")
      a.data = next();
    else if (arg == "--budget")
      a.budgets.push_back(std::stoll(next()));
    else if (arg == "--questions")
      a.questions = std::stoul(next());
    else if (arg == "--keep")
      a.keep = next();
    else if (arg == "--json")
      a.json_out = true;
    else if (arg == "--explain")
      a.explain = true;
    else if (arg == "--lazy")
      a.lazy = true;
    else if (arg == "--opt") {
      const std::string kv = next();
      const auto eq = kv.find('=');
      if (eq == std::string::npos) Die("--opt wants key=value");
      a.opts.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else {
      Die("unknown argument " + arg);
    }
  }

  // ---- the data
  const json qs = ReadJson(a.data + "/hotpotqa_train.json");
  const json corpus = ReadJson(a.data + "/hotpotqa_train_corpus.json");
  std::vector<Question> questions;
  for (const auto& q : qs) {
    Question x;
    x.text = q["question"].get<std::string>();
    for (const auto& f : q["supporting_facts"]) x.gold.insert(f[0].get<std::string>());
    x.type = q.value("type", std::string());
    questions.push_back(std::move(x));
    if (a.questions > 0 && questions.size() == a.questions) break;
  }
  std::string root = a.keep;
  if (root.empty()) {
    char tmpl[] = "/tmp/grag-eval-XXXXXX";
    root = mkdtemp(tmpl);
  }
  fs::create_directories(root + "/input");
  {
    std::ofstream out(root + "/input/passages.jsonl");
    for (auto it = corpus.begin(); it != corpus.end(); ++it) {
      std::string text;
      for (const auto& s : it.value()) text += s.get<std::string>();
      out << json{{"id", it.key()}, {"title", it.key()}, {"text", it.key() + "\n\n" + text}}.dump()
          << "\n";
    }
  }

  // ---- the index (no LLM)
  Config config;
  config.root = root;
  LexicalEmbedder embedder;
  const auto t_index = std::chrono::steady_clock::now();
  auto store = Store::Open(root + "/output/index.db");
  if (!store.ok()) Die(store.status().ToString());
  {
    IndexContext ctx;
    ctx.store = store->get();
    ctx.embedder = &embedder;
    auto s = RunIndex(config, {}, ctx);
    if (!s.ok()) Die("index: " + s.status().ToString());
    std::fprintf(
        stderr,
        "indexed %lld documents, %lld chunks, %lld entities, %lld relationships in %.1f s\n",
        static_cast<long long>(s->documents_added + s->documents_unchanged),
        static_cast<long long>(s->chunks), static_cast<long long>(s->entities),
        static_cast<long long>(s->relationships),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_index).count());
  }
  auto tok = Tokenizer::Get(config.chunks.encoding);
  if (!tok.ok()) Die(tok.status().ToString());
  RetrieverOptions ropts;
  ropts.load_graph = !a.lazy;
  auto retriever = Retriever::Open(**store, &embedder, ropts);
  if (!retriever.ok()) Die(retriever.status().ToString());

  RetrievalOptions base;
  for (const auto& [k, v] : a.opts) SetOption(base, k, v);
  base.top_k = 200;  // deep lists: the budget cuts them

  const std::vector<std::string> methods = {"bm25", "vector", "graph", "hybrid", "local"};
  // Local search's context: its chunk lane in rank order (what it placed).
  auto local_ranking = [&](const std::string& q, int64_t* context_chars) {
    Ranking r;
    LocalSearchOptions lo;
    lo.similarity_floor = config.local_search.lexical_similarity_floor;
    const auto t = std::chrono::steady_clock::now();
    for (const auto& [k, v] : a.opts) SetOption(lo.retrieval, k, v);
    lo.retrieval.top_k = 100;
    auto ctx = BuildLocalContext(**store, &embedder, **tok, q, lo, nullptr, retriever->get());
    r.micros =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count();
    if (!ctx.ok()) Die("local: " + ctx.status().ToString());
    int64_t chars = 0;
    for (const auto& item : ctx->items) {
      chars += static_cast<int64_t>(item.text.size());
      if (item.type != LocalItemType::kChunk) continue;
      r.docs.push_back(item.document_id);
      r.chars.push_back(static_cast<int64_t>(item.text.size()));
    }
    *context_chars = chars;
    return r;
  };

  // One split at a time: its name, a description and its questions. "tune" is the first half
  // (what the defaults were tuned on), "test" the second; by type where the data has types.
  struct Split {
    std::string name, what;
    std::vector<size_t> items;
  };
  std::vector<Split> splits;
  const size_t half = questions.size() / 2;
  auto range = [](size_t b, size_t e) {
    std::vector<size_t> v;
    for (size_t i = b; i < e; ++i) v.push_back(i);
    return v;
  };
  splits.push_back({"tune", fmt::format("questions 1-{}", half), range(0, half)});
  splits.push_back({"test", fmt::format("questions {}-{}", half + 1, questions.size()),
                    range(half, questions.size())});
  for (const std::string type : {"bridge", "comparison"}) {
    Split sp{type, "questions of type " + type, {}};
    for (size_t i = 0; i < questions.size(); ++i) {
      if (questions[i].type == type) sp.items.push_back(i);
    }
    if (!sp.items.empty()) splits.push_back(std::move(sp));
  }
  splits.push_back(
      {"all", fmt::format("questions 1-{}", questions.size()), range(0, questions.size())});
  std::map<std::string, std::map<std::string, Tally>> tallies;  // split -> method -> tally
  std::map<std::string, double> local_chars_sum;
  std::vector<int64_t> budgets = a.budgets;
  const bool auto_budget = budgets.empty();
  if (auto_budget) budgets = {2000, 8000};

  // First pass: rankings per question and method.
  std::vector<std::map<std::string, Ranking>> rankings(questions.size());
  std::vector<int64_t> local_chars(questions.size(), 0);
  for (size_t i = 0; i < questions.size(); ++i) {
    const std::string& q = questions[i].text;
    for (const auto& m : methods) {
      if (m == "local") {
        rankings[i][m] = local_ranking(q, &local_chars[i]);
        continue;
      }
      RetrievalOptions o = base;
      o.method = ParseRetrievalMethod(m).value();
      const auto t = std::chrono::steady_clock::now();
      auto r = (*retriever)->Retrieve(q, o);
      Ranking rk;
      rk.micros =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count();
      if (!r.ok()) Die(m + ": " + r.status().ToString());
      for (const auto& c : r->chunks) {
        rk.docs.push_back(c.document_id);
        rk.chars.push_back(static_cast<int64_t>(c.text.size()));
      }
      rankings[i][m] = std::move(rk);
      if (a.explain && m == "hybrid" && RecallAt(rankings[i]["graph"], questions[i].gold, 2) < 1) {
        std::printf("\nQ%zu %s\n  gold:", i + 1, q.c_str());
        for (const auto& g : questions[i].gold) std::printf(" [%s]", g.c_str());
        std::printf("\n  seeds:");
        for (const auto& s : r->seeds) {
          std::printf(" %s(%.2f%s)", s.name_key.c_str(), s.weight,
                      s.by_name   ? fmt::format(" spec {:.2f}", s.specificity).c_str()
                      : s.by_fact ? " fact"
                                  : " emb");
        }
        std::printf("\n");
        for (const auto& mm : {"bm25", "vector", "graph", "hybrid"}) {
          const Ranking& rr = rankings[i][mm];
          std::printf("  %-7s", mm);
          for (size_t k = 0; k < std::min<size_t>(5, rr.docs.size()); ++k) {
            std::printf(" %s%s;", questions[i].gold.count(rr.docs[k]) ? "*" : "",
                        rr.docs[k].c_str());
          }
          std::printf("\n");
        }
      }
    }
  }
  int64_t mean_local = 0;
  for (int64_t c : local_chars) mean_local += c;
  mean_local /= std::max<int64_t>(1, static_cast<int64_t>(questions.size()));
  if (auto_budget) budgets.push_back(mean_local);

  for (const auto& sp : splits) {
    const std::string& split = sp.name;
    for (const auto& m : methods) {
      Tally& t = tallies[split][m];
      for (size_t i : sp.items) {
        const Ranking& r = rankings[i][m];
        const auto& gold = questions[i].gold;
        t.recall2 += RecallAt(r, gold, 2);
        t.recall5 += RecallAt(r, gold, 5);
        t.recall10 += RecallAt(r, gold, 10);
        t.all5 += RecallAt(r, gold, 5) == 1.0 ? 1 : 0;
        for (int64_t b : budgets) {
          // Local's chunk lane is cut like every other ranking; its whole context is below.
          const double rec = RecallWithin(r, gold, b);
          t.recall_at_budget[b] += rec;
          t.all_at_budget[b] += rec == 1.0 ? 1 : 0;
        }
        if (m == "local") {
          const double rec = RecallWithin(r, gold, std::numeric_limits<int64_t>::max());
          t.context_recall += rec;
          t.context_all += rec == 1.0 ? 1 : 0;
        }
        t.micros.push_back(r.micros);
        ++t.n;
      }
    }
  }

  json out = json::object();
  for (const auto& sp : splits) {
    const std::string& split = sp.name;
    std::printf("\n== %s: %s (%zu)\n", split.c_str(), sp.what.c_str(), sp.items.size());
    std::printf("%-8s %7s %7s %8s %8s", "method", "R@2", "R@5", "R@10", "All@5");
    for (int64_t b : budgets)
      std::printf("  R@%-6lld All@%-5lld", static_cast<long long>(b), static_cast<long long>(b));
    std::printf("  p50 ms\n");
    for (const auto& m : methods) {
      Tally t = tallies[split][m];
      const double n = std::max(1, t.n);
      std::sort(t.micros.begin(), t.micros.end());
      const double p50 = t.micros.empty() ? 0 : t.micros[t.micros.size() / 2] / 1000;
      std::printf("%-8s %7.3f %7.3f %8.3f %8.3f", m.c_str(), t.recall2 / n, t.recall5 / n,
                  t.recall10 / n, t.all5 / n);
      json jm = {{"recall@2", t.recall2 / n},
                 {"recall@5", t.recall5 / n},
                 {"recall@10", t.recall10 / n},
                 {"all_supports@5", t.all5 / n},
                 {"p50_ms", p50}};
      for (int64_t b : budgets) {
        std::printf("  %8.3f %10.3f", t.recall_at_budget[b] / n, t.all_at_budget[b] / n);
        jm["recall_within_" + std::to_string(b)] = t.recall_at_budget[b] / n;
        jm["all_supports_within_" + std::to_string(b)] = t.all_at_budget[b] / n;
      }
      std::printf("  %6.2f\n", p50);
      if (m == "local") {
        jm["context_recall"] = t.context_recall / n;
        jm["context_all_supports"] = t.context_all / n;
      }
      out[split][m] = jm;
    }
    const Tally& lt = tallies[split]["local"];
    const Tally& bt = tallies[split]["bm25"];
    const double n = std::max(1, lt.n);
    std::printf(
        "local's whole context (entities, relationships, reports, chunks; %lld characters "
        "on average) holds %.3f of the gold passages (all of them: %.3f); BM25 cut at "
        "that size: %.3f (%.3f)\n",
        static_cast<long long>(mean_local), lt.context_recall / n, lt.context_all / n,
        bt.recall_at_budget.count(mean_local) ? bt.recall_at_budget.at(mean_local) / n : 0.0,
        bt.all_at_budget.count(mean_local) ? bt.all_at_budget.at(mean_local) / n : 0.0);
  }
  std::printf(
      "\nbudgets are characters of chunk text in rank order; local's rows cut its chunk "
      "lane (its own budget: %lld tokens of context)\n",
      static_cast<long long>(config.local_search.context_budget_tokens));
  if (a.json_out) std::printf("%s\n", out.dump(2).c_str());
  if (a.keep.empty()) {
    retriever->reset();
    store->reset();
    fs::remove_all(root);
  }
  return 0;
}

}  // namespace
}  // namespace grag

int main(int argc, char** argv) { return grag::Main(argc, argv); }
