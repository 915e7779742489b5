// What entity resolution costs in a full LLM index, and what it does to the graph: Microsoft
// GraphRAG's own extraction of *A Christmas Carol* (its 42 text units, 529 entities and 978
// relationships, tests/data/ms_christmas_carol/) is replayed chunk by chunk by a scripted chat
// model, and the book is indexed with the real pipeline twice, resolution off and on. The model
// answers entity-pair adjudications from the gold labels of tests/data/resolution/ (what a
// careful LLM would say), summaries and reports with short canned texts. Every call goes through
// the pipeline as a real one would; the driver counts them by kind.
//
//   build-release/bench/resolution_cost [--json] [--set key=value]...
//
// --set applies a setting to both runs (communities.llm_report_min_size=0 and
// summaries.max_descriptions=4 give the calls before small communities went extractive and
// summaries waited for the token limit).
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "grag/indexer.h"
#include "grag/lexical_embedder.h"
#include "grag/store.h"

namespace grag {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  return json::parse(in);
}

struct Unit {
  std::string marker;  // a stretch of its text, to recognise it in a prompt
  json extraction;     // the reply its extraction call gets
};

struct Book {
  std::vector<std::string> texts;
  std::vector<Unit> units;
  std::map<std::string, std::string> cluster_of_name;  // gold cluster by entity name
};

Book LoadBook() {
  const std::string data = std::string(GRAG_SOURCE_DIR) + "/tests/data/";
  Book b;
  const json texts = ReadJson(data + "christmas_carol/ms_text_units.json");
  const json ids = ReadJson(data + "ms_christmas_carol/text_units.json");
  std::map<std::string, size_t> unit_of_id;
  for (const auto& t : ids)
    unit_of_id[t["id"].get<std::string>()] = t["human_readable_id"].get<size_t>();
  b.units.resize(texts.size());
  for (const auto& t : texts) {
    const auto i = t["human_readable_id"].get<size_t>();
    std::string text = t["text"];
    text = text.substr(text.find('\n') + 1);  // "title: a-christmas-carol.txt.\n"
    if (b.texts.size() <= i) b.texts.resize(i + 1);
    b.texts[i] = text;
    b.units[i].marker = text.substr(std::min<size_t>(text.size() / 2, 400), 80);
    b.units[i].extraction = {{"entities", json::array()}, {"relationships", json::array()}};
  }
  std::map<std::string, json> gold;  // by MS entity id: name, description, cluster
  const json labelled = ReadJson(data + "resolution/christmas_carol.json");
  for (const auto& e : labelled["entities"]) {
    gold[e["id"].get<std::string>()] = e;
    b.cluster_of_name[e["name"].get<std::string>()] = e["cluster"].get<std::string>();
  }
  for (const auto& e : ReadJson(data + "ms_christmas_carol/entities.json")) {
    const json& g = gold.at(e["id"].get<std::string>());
    std::string first = g["description"];
    first = first.substr(
        0, first.find(". ") == std::string::npos ? first.size() : first.find(". ") + 1);
    for (const auto& tu : e["text_unit_ids"]) {
      const size_t u = unit_of_id.at(tu.get<std::string>());
      b.units[u].extraction["entities"].push_back(
          {{"name", e["title"]},
           {"type", e["type"]},
           {"description", fmt::format("{} (Seen in part {} of the book.)", first, u + 1)}});
    }
  }
  for (const auto& r : ReadJson(data + "ms_christmas_carol/relationships.json")) {
    const double n = static_cast<double>(r["text_unit_ids"].size());
    for (const auto& tu : r["text_unit_ids"]) {
      const size_t u = unit_of_id.at(tu.get<std::string>());
      b.units[u].extraction["relationships"].push_back(
          {{"source", r["source"]},
           {"target", r["target"]},
           {"description", r["description"]},
           {"strength", std::max(1.0, r["weight"].get<double>() / n)}});
    }
  }
  return b;
}

std::string Kind(const std::string& prompt) {
  if (prompt.find("Pair 1:") != std::string::npos) return "adjudicate";
  if (prompt.find("were missed in the last extraction") != std::string::npos) return "glean";
  if (prompt.find("Extract the entities and relationships") != std::string::npos) return "extract";
  if (prompt.find("Descriptions:") != std::string::npos) return "summarize";
  if (prompt.find("Write a report on the community") != std::string::npos) return "report";
  return "other";
}

// The name after `label` ("A: name: ") up to " |".
std::string NameAfter(const std::string& prompt, size_t from, const std::string& label) {
  const size_t at = prompt.find(label, from);
  if (at == std::string::npos) return "";
  const size_t start = at + label.size();
  return prompt.substr(start, prompt.find(" |", start) - start);
}

class ReplayModel {
 public:
  explicit ReplayModel(const Book& book, KeyValueCache* cache) : book_(book) {
    ScriptedModelOptions mo;
    mo.cache = cache;
    mo.model = "replay-ms-graphrag";
    model_ = std::make_unique<ScriptedChatModel>(
        [this](const ChatRequest& req) -> Result<std::string> { return Reply(req); }, mo);
  }
  ChatModel* get() { return model_.get(); }
  std::map<std::string, int64_t> Calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  Result<std::string> Reply(const ChatRequest& req) {
    std::string last;
    for (const auto& m : req.messages) {
      if (m.role == "user") last = m.content;
    }
    const std::string kind = Kind(last);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_[kind];
    }
    if (kind == "extract") {
      for (const auto& u : book_.units) {
        if (last.find(u.marker) != std::string::npos) return u.extraction.dump();
      }
      return std::string(R"({"entities": [], "relationships": []})");
    }
    if (kind == "glean") return std::string(R"({"entities": [], "relationships": []})");
    if (kind == "summarize") return std::string("A summary of the descriptions above.");
    if (kind == "adjudicate") {
      json verdicts = json::array();
      size_t pos = 0;
      for (int pair = 1;; ++pair) {
        pos = last.find("Pair " + std::to_string(pair) + ":", pos);
        if (pos == std::string::npos) break;
        const auto a = book_.cluster_of_name.find(NameAfter(last, pos, "A: name: "));
        const auto b = book_.cluster_of_name.find(NameAfter(last, pos, "B: name: "));
        const bool same = a != book_.cluster_of_name.end() && b != book_.cluster_of_name.end() &&
                          a->second == b->second;
        verdicts.push_back({{"pair", pair}, {"same", same}, {"reason", "gold label"}});
        ++pos;
      }
      return json{{"verdicts", verdicts}}.dump();
    }
    if (kind == "report") {
      json finding = {{"summary", "A finding"}, {"explanation", "What the community shows."}};
      return json{{"title", "A community"},
                  {"summary", "What these entities share."},
                  {"rating", 5},
                  {"rating_explanation", "moderate"},
                  {"findings", json::array({finding, finding, finding})}}
          .dump();
    }
    return std::string("{}");
  }

  const Book& book_;
  std::unique_ptr<ScriptedChatModel> model_;
  std::mutex mu_;
  std::map<std::string, int64_t> calls_;
};

struct Outcome {
  std::map<std::string, int64_t> calls;
  int64_t total = 0;
  IndexSummary summary;
  int64_t merged_names = 0;
  int64_t merged_right = 0;  // names folded into an entity of the same gold cluster
  double seconds = 0;
  int64_t estimated_calls = 0;  // what the dry run predicted (typical ratios: a first index)
};

std::vector<std::pair<std::string, std::string>> g_settings;  // --set, for both runs

Outcome IndexBook(const Book& book, bool resolve) {
  const fs::path root = fs::temp_directory_path() / fmt::format("grag-resolution-cost-{}", resolve);
  fs::remove_all(root);
  fs::create_directories(root / "input");
  for (size_t i = 0; i < book.texts.size(); ++i) {
    std::ofstream(root / "input" / fmt::format("part{:02}.txt", i)) << book.texts[i];
  }
  Config config;
  config.root = root.string();
  config.chunks.size = 2000;  // one chunk per text unit, as Microsoft had them
  config.chunks.overlap = 0;
  config.llm.concurrency = 8;
  config.resolution.enabled = resolve;
  for (const auto& [key, value] : g_settings) {
    const Status st = ApplySetting(config, key, value);
    if (!st.ok()) throw std::runtime_error(st.message());
  }
  auto store = std::move(Store::Open(config.Resolve(config.store.path))).value();
  ReplayModel model(book, &store->ReplyCache());
  LexicalEmbedder embedder;
  IndexContext ctx;
  ctx.store = store.get();
  ctx.chat = model.get();
  ctx.embedder = &embedder;
  auto plan = PlanIndex(config, {}, ctx);
  if (!plan.ok()) throw std::runtime_error(plan.status().ToString());
  const auto start = std::chrono::steady_clock::now();
  auto summary = RunIndex(config, {}, ctx);
  Outcome o;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!summary.ok()) throw std::runtime_error(summary.status().ToString());
  o.summary = *summary;
  o.estimated_calls = plan->estimate.calls.Total();
  o.calls = model.Calls();
  for (const auto& [k, n] : o.calls) o.total += n;
  std::map<std::string, std::string> name_of;
  const auto aliases = store->ListAliases().value();
  for (const auto& a : aliases) name_of[a.name_key] = a.name;
  for (const auto& a : aliases) {
    if (a.name_key == a.canonical_key) continue;
    ++o.merged_names;
    auto x = book.cluster_of_name.find(a.name);
    auto y = book.cluster_of_name.find(name_of[a.canonical_key]);
    if (x != book.cluster_of_name.end() && y != book.cluster_of_name.end() &&
        x->second == y->second) {
      ++o.merged_right;
    } else if (std::getenv("GRAG_EXPLAIN") != nullptr) {
      std::cerr << "not in one gold cluster: " << a.name << " -> " << name_of[a.canonical_key]
                << " (" << a.method << " " << a.score << ": " << a.reason << ")\n";
    }
  }
  store.reset();
  fs::remove_all(root);
  return o;
}

int Main(int argc, char** argv) {
  bool json_out = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      json_out = true;
    } else if (a == "--set" && i + 1 < argc) {
      const std::string kv = argv[++i];
      const auto eq = kv.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--set expects key=value");
      g_settings.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else {
      throw std::runtime_error("usage: resolution_cost [--json] [--set key=value]...");
    }
  }
  const Book book = LoadBook();
  const Outcome off = IndexBook(book, false);
  const Outcome on = IndexBook(book, true);
  const int64_t adjudicate = on.calls.count("adjudicate") ? on.calls.at("adjudicate") : 0;
  if (json_out) {
    auto side = [](const Outcome& o) {
      return json{{"calls", o.calls},
                  {"total", o.total},
                  {"entities", o.summary.entities},
                  {"relationships", o.summary.relationships},
                  {"reports", o.summary.reports_generated},
                  {"reports_extractive", o.summary.reports_extractive},
                  {"calls_per_chunk", static_cast<double>(o.total) / 42.0},
                  {"estimated_calls", o.estimated_calls},
                  {"merged_names", o.merged_names},
                  {"merged_right", o.merged_right},
                  {"adjudicated_pairs", o.summary.resolution_adjudicated},
                  {"seconds", o.seconds}};
    };
    std::cout << json{{"off", side(off)},
                      {"on", side(on)},
                      {"adjudication_share",
                       static_cast<double>(adjudicate) / static_cast<double>(on.total)}}
                     .dump(1)
              << "\n";
    return 0;
  }
  std::cout << "A Christmas Carol, Microsoft GraphRAG's extraction replayed (42 chunks), full LLM "
               "index\n\n";
  std::cout << fmt::format("{:<22}{:>14}{:>14}\n", "", "resolution off", "resolution on");
  std::set<std::string> kinds;
  for (const auto& [k, n] : off.calls) kinds.insert(k);
  for (const auto& [k, n] : on.calls) kinds.insert(k);
  for (const auto& k : kinds) {
    auto get = [&](const Outcome& o) { return o.calls.count(k) ? o.calls.at(k) : 0; };
    std::cout << fmt::format("{:<22}{:>14}{:>14}\n", k + " calls", get(off), get(on));
  }
  std::cout << fmt::format("{:<22}{:>14}{:>14}\n", "all calls", off.total, on.total);
  std::cout << fmt::format("{:<22}{:>14}{:>14}\n", "dry-run estimate", off.estimated_calls,
                           on.estimated_calls);
  std::cout << fmt::format("{:<22}{:>14}{:>14}\n", "entities", off.summary.entities,
                           on.summary.entities);
  std::cout << fmt::format("{:<22}{:>14}{:>14}\n", "relationships", off.summary.relationships,
                           on.summary.relationships);
  std::cout << fmt::format("{:<22}{:>14.2f}{:>14.2f}\n", "calls per chunk",
                           static_cast<double>(off.total) / 42.0,
                           static_cast<double>(on.total) / 42.0);
  std::cout << fmt::format("{:<22}{:>14}{:>14}\n", "reports written", off.summary.reports_generated,
                           on.summary.reports_generated);
  std::cout << fmt::format("{:<22}{:>14}{:>14}\n", " of them extractive",
                           off.summary.reports_extractive, on.summary.reports_extractive);
  std::cout << fmt::format("{:<22}{:>14}{:>14}\n", "pairs adjudicated", 0,
                           on.summary.resolution_adjudicated);
  std::cout << fmt::format("{:<22}{:>14.2f}{:>14.2f}\n", "seconds", off.seconds, on.seconds);
  std::cout << fmt::format(
      "\nnames folded into another entity: {} ({} of them into an entity of the same gold "
      "cluster)\n",
      on.merged_names, on.merged_right);
  std::cout << fmt::format("adjudication: {} calls = {:.1f}% of the index's {} calls\n", adjudicate,
                           100.0 * static_cast<double>(adjudicate) / static_cast<double>(on.total),
                           on.total);
  return 0;
}

}  // namespace
}  // namespace grag

int main(int argc, char** argv) {
  try {
    return grag::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "resolution_cost: " << e.what() << "\n";
    return 1;
  }
}
