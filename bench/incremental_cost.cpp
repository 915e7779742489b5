// What an incremental update costs on a corpus whose documents share entities (issue 19): a
// generated set of podcast-like transcripts (two hosts in every episode, guests and topics drawn
// from a Zipf-distributed cast, so popular entities recur in many episodes, as in real
// transcripts) is indexed in full through the real pipeline with a scripted chat model, then
// 1%, 5% and 10% more episodes are added to copies of that index. The model extracts the cast
// names a chunk mentions (descriptions differ chunk by chunk, so popular entities gather many
// and get summarised) and answers gleaning, summaries, adjudication and reports with canned
// replies; every call goes through the pipeline as a real one would and is counted by kind.
//
//   build-release/bench/incremental_cost [--docs N] [--json] [--set key=value]...
//
// --set applies a setting to every run (communities.report_refresh_threshold=0 and
// summaries.refresh_share=0 give the cost of rewriting whatever changed).
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "grag/indexer.h"
#include "grag/store.h"
#include "support/fake_graphrag_llm.h"
#include "support/transcripts.h"

namespace grag {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using bench::Cast;
using bench::MakeCast;

// Answers like a model that follows grag's prompts, counting calls by kind.
class CastModel {
 public:
  CastModel(const Cast& cast, KeyValueCache* cache) : cast_(cast) {
    ScriptedModelOptions mo;
    mo.cache = cache;
    mo.model = "incremental-cost-bench";
    model_ = std::make_unique<ScriptedChatModel>(
        [this](const ChatRequest& req) -> Result<std::string> { return Reply(req); }, mo);
  }
  ChatModel* get() { return model_.get(); }
  std::map<std::string, int64_t> Calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.clear();
  }

 private:
  Result<std::string> Reply(const ChatRequest& req) {
    std::string last;
    for (const auto& m : req.messages) {
      if (m.role == "user") last = m.content;
    }
    const std::string kind = testing::PromptKind(last);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_[kind];
    }
    if (kind == "extract") return Extract(last);
    if (kind == "adjudicate") {
      json verdicts = json::array();
      for (int pair = 1; last.find("Pair " + std::to_string(pair) + ":") != std::string::npos;
           ++pair) {
        verdicts.push_back({{"pair", pair}, {"same", false}, {"reason", "different people"}});
      }
      return json{{"verdicts", verdicts}}.dump();
    }
    return testing::FakeGraphRagReply(last);
  }

  std::string Extract(const std::string& prompt) const {
    return bench::CastExtraction(cast_, prompt);
  }

  const Cast& cast_;
  std::unique_ptr<ScriptedChatModel> model_;
  std::mutex mu_;
  std::map<std::string, int64_t> calls_;
};

std::vector<std::pair<std::string, std::string>> g_settings;

Config ProjectConfig(const fs::path& root) {
  Config config;
  config.root = root.string();
  config.llm.concurrency = 8;
  for (const auto& [key, value] : g_settings) {
    const Status st = ApplySetting(config, key, value);
    if (!st.ok()) throw std::runtime_error(st.message());
  }
  return config;
}

struct Outcome {
  std::map<std::string, int64_t> calls;
  int64_t total = 0;
  IndexSummary summary;
  int64_t stale_reports = 0;
  double seconds = 0;
  CallEstimate estimate;  // what the dry run predicted
};

Outcome Index(const Cast& cast, const fs::path& root) {
  const Config config = ProjectConfig(root);
  auto store = std::move(Store::Open(config.Resolve(config.store.path))).value();
  CastModel model(cast, &store->ReplyCache());
  IndexContext ctx;
  ctx.store = store.get();
  ctx.chat = model.get();
  auto plan = PlanIndex(config, {}, ctx);
  if (!plan.ok()) throw std::runtime_error(plan.status().ToString());
  const auto start = std::chrono::steady_clock::now();
  auto summary = RunIndex(config, {}, ctx);
  if (!summary.ok()) throw std::runtime_error(summary.status().ToString());
  Outcome o;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  o.summary = *summary;
  o.estimate = plan->estimate;
  o.calls = model.Calls();
  for (const auto& [k, n] : o.calls) o.total += n;
  const auto reports = store->ListReports().value();
  for (const auto& r : reports) o.stale_reports += r.stale ? 1 : 0;
  return o;
}

void WriteEpisodes(const Cast& cast, const fs::path& root, int from, int to) {
  bench::WriteEpisodes(cast, (root / "input").string(), from, to);
}

int Main(int argc, char** argv) {
  bool json_out = false;
  int docs = 400;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      json_out = true;
    } else if (a == "--docs" && i + 1 < argc) {
      docs = std::stoi(argv[++i]);
    } else if (a == "--set" && i + 1 < argc) {
      const std::string kv = argv[++i];
      const auto eq = kv.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--set expects key=value");
      g_settings.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else {
      throw std::runtime_error("usage: incremental_cost [--docs N] [--json] [--set key=value]...");
    }
  }
  const Cast cast = MakeCast();
  const fs::path base = fs::temp_directory_path() / "grag-incremental-cost";
  fs::remove_all(base);
  WriteEpisodes(cast, base / "full", 0, docs);
  const Outcome full = Index(cast, base / "full");

  std::vector<std::pair<int, Outcome>> updates;
  for (int percent : {1, 5, 10}) {
    const fs::path copy = base / fmt::format("plus{}", percent);
    fs::copy(base / "full", copy, fs::copy_options::recursive);
    WriteEpisodes(cast, copy, docs, docs + std::max(1, docs * percent / 100));
    updates.emplace_back(percent, Index(cast, copy));
  }
  fs::remove_all(base);

  std::set<std::string> kinds;
  for (const auto& [k, n] : full.calls) kinds.insert(k);
  for (const auto& [p, o] : updates) {
    for (const auto& [k, n] : o.calls) kinds.insert(k);
  }
  auto get = [](const Outcome& o, const std::string& k) {
    return o.calls.count(k) ? o.calls.at(k) : int64_t{0};
  };
  if (json_out) {
    json out = {{"documents", docs}, {"full", {{"calls", full.calls}, {"total", full.total}}}};
    for (const auto& [p, o] : updates) {
      out["updates"].push_back(
          {{"percent", p},
           {"calls", o.calls},
           {"total", o.total},
           {"share", static_cast<double>(o.total) / static_cast<double>(full.total)},
           {"estimated_calls", o.estimate.calls.Total()},
           {"pipeline_calls", o.summary.calls.Total()},
           {"reports_generated", o.summary.reports_generated},
           {"reports_reused", o.summary.reports_reused},
           {"stale_reports", o.stale_reports},
           {"communities_kept", o.summary.communities_kept},
           {"communities_new", o.summary.communities_new},
           {"communities_removed", o.summary.communities_removed}});
    }
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "{} generated transcripts sharing a Zipf cast; full index {} chunks, {} entities, {} "
      "communities, {:.1f} s\n\n",
      docs, full.summary.chunks, full.summary.entities,
      full.summary.reports_generated + full.summary.reports_reused + full.summary.report_gaps,
      full.seconds);
  std::cout << fmt::format("{:<18}{:>10}", "calls", "full");
  for (const auto& [p, o] : updates) std::cout << fmt::format("{:>12}", fmt::format("+{}%", p));
  std::cout << "\n";
  for (const auto& k : kinds) {
    std::cout << fmt::format("{:<18}{:>10}", k, get(full, k));
    for (const auto& [p, o] : updates) std::cout << fmt::format("{:>12}", get(o, k));
    std::cout << "\n";
  }
  std::cout << fmt::format("{:<18}{:>10}", "all", full.total);
  for (const auto& [p, o] : updates) std::cout << fmt::format("{:>12}", o.total);
  std::cout << "\n" << fmt::format("{:<18}{:>10}", "share of full", "100%");
  for (const auto& [p, o] : updates) {
    std::cout << fmt::format("{:>12}", fmt::format("{:.1f}%", 100.0 * static_cast<double>(o.total) /
                                                                  static_cast<double>(full.total)));
  }
  auto estimated = [](const Outcome& o) {
    const double actual = static_cast<double>(o.summary.calls.Total());
    return fmt::format("{} ({:+.0f}%)", o.estimate.calls.Total(),
                       100.0 * (static_cast<double>(o.estimate.calls.Total()) - actual) / actual);
  };
  std::cout << "\n" << fmt::format("{:<18}{:>10}", "dry-run estimate", estimated(full));
  for (const auto& [p, o] : updates) std::cout << fmt::format("{:>12}", estimated(o));
  std::cout << "\n" << fmt::format("{:<18}{:>10}", "stale reports", full.stale_reports);
  for (const auto& [p, o] : updates) std::cout << fmt::format("{:>12}", o.stale_reports);
  std::cout << "\n" << fmt::format("{:<18}{:>10}", "communities new", full.summary.communities_new);
  for (const auto& [p, o] : updates) {
    std::cout << fmt::format(
        "{:>12}", fmt::format("{}/{}", o.summary.communities_new, o.summary.communities_removed));
  }
  std::cout << "  (new/removed)\n";
  for (const auto& [p, o] : updates) {
    std::cout << fmt::format(
        "+{}%: warm start {}, {} entities changed{}\n", p,
        o.summary.communities_warm_start ? "kept" : "dropped", o.summary.entities_changed,
        o.summary.community_note.empty() ? "" : "; " + o.summary.community_note);
  }
  return 0;
}

}  // namespace
}  // namespace grag

int main(int argc, char** argv) {
  try {
    return grag::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "incremental_cost: " << e.what() << "\n";
    return 1;
  }
}
