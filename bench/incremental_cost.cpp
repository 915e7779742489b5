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
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "grag/indexer.h"
#include "grag/store.h"
#include "support/fake_graphrag_llm.h"

namespace grag {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint32_t kSeed = 20261202;
constexpr int kGuests = 300;
constexpr int kTopics = 400;

// Capitalised words of at least three letters, none a stop word of the fake extractor.
const std::vector<std::string> kFirst = {
    "Abel",  "Berta", "Cyril", "Delia", "Emil",  "Fiona", "Gideon", "Hanna", "Ivo",   "Jana",
    "Kasim", "Lotta", "Milo",  "Nadia", "Oskar", "Petra", "Quinn",  "Rosa",  "Silas", "Tilde",
    "Ugo",   "Vera",  "Wendt", "Xenia", "Yusuf", "Zelda", "Arno",   "Bruna", "Cosmo", "Dana"};
const std::vector<std::string> kLast = {
    "Amsel",  "Birke", "Corvin", "Dorn",   "Eibe", "Falk",   "Gerste", "Hagen", "Ilse",   "Jordan",
    "Kiefer", "Linde", "Moos",   "Nessel", "Olm",  "Pappel", "Quitte", "Rabe",  "Salbei", "Tanne",
    "Ulme",   "Veit",  "Weide",  "Xaver",  "Ysop", "Zeder",  "Ahorn",  "Buche", "Erle",   "Fichte"};
const std::vector<std::string> kTopicHead = {"Quantum", "Solar",  "Neural",  "Ocean",   "Urban",
                                             "Crypto",  "Genome", "Fusion",  "Carbon",  "Lunar",
                                             "Polar",   "Retail", "Vaccine", "Rocket",  "Drone",
                                             "Battery", "Forest", "Desert",  "Harbour", "Metro"};
const std::vector<std::string> kTopicTail = {"Labs",    "Treaty",  "Summit",  "Project", "Index",
                                             "Council", "Network", "Fund",    "Program", "Alliance",
                                             "Studio",  "Market",  "Report",  "Forum",   "Mission",
                                             "Works",   "Bureau",  "Society", "Trust",   "Guild"};

struct Cast {
  std::vector<std::string> hosts{"Maya Lindqvist", "Tomas Okafor"};
  std::vector<std::string> guests;
  std::vector<std::string> topics;
  std::vector<std::string> all;
};

Cast MakeCast() {
  Cast c;
  for (int i = 0; static_cast<int>(c.guests.size()) < kGuests; ++i) {
    c.guests.push_back(kFirst[static_cast<size_t>(i) % kFirst.size()] + " " +
                       kLast[(static_cast<size_t>(i) / kFirst.size() * 7 + static_cast<size_t>(i)) %
                             kLast.size()]);
  }
  std::set<std::string> seen(c.guests.begin(), c.guests.end());
  std::vector<std::string> unique;
  for (const auto& g : c.guests) {
    if (std::find(unique.begin(), unique.end(), g) == unique.end()) unique.push_back(g);
  }
  c.guests = unique;
  for (size_t h = 0; h < kTopicHead.size(); ++h) {
    for (size_t t = 0; t < kTopicTail.size(); ++t) {
      c.topics.push_back(kTopicHead[h] + " " + kTopicTail[t]);
    }
  }
  c.topics.resize(kTopics);
  c.all = c.hosts;
  c.all.insert(c.all.end(), c.guests.begin(), c.guests.end());
  c.all.insert(c.all.end(), c.topics.begin(), c.topics.end());
  return c;
}

// Zipf(1.0) over n ranks: popular guests and topics recur across many episodes.
class Zipf {
 public:
  explicit Zipf(size_t n) {
    double sum = 0;
    for (size_t k = 1; k <= n; ++k) cdf_.push_back(sum += 1.0 / static_cast<double>(k));
    for (double& x : cdf_) x /= sum;
  }
  size_t operator()(std::mt19937& rng) const {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return static_cast<size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

// Episode `n`: the hosts talk with one or two guests about five to nine topics. Episodes are
// generated from their own number, so episode 403 is the same text in every run.
std::string Episode(const Cast& cast, int n) {
  static const Zipf guest_rank(cast.guests.size());
  static const Zipf topic_rank(cast.topics.size());
  std::mt19937 rng(kSeed + static_cast<uint32_t>(n));
  std::vector<std::string> guests{cast.guests[guest_rank(rng)]};
  if (rng() % 3 == 0) guests.push_back(cast.guests[guest_rank(rng)]);
  std::vector<std::string> topics;
  const size_t topic_count = 5 + rng() % 5;
  while (topics.size() < topic_count) topics.push_back(cast.topics[topic_rank(rng)]);
  std::string text = fmt::format("Episode {} of the show.\n\n", n);
  auto pick = [&rng](const std::vector<std::string>& v) -> const std::string& {
    return v[rng() % v.size()];
  };
  for (int s = 0; s < 100; ++s) {
    const std::string& host = cast.hosts[static_cast<size_t>(s) % 2];
    switch (rng() % 4) {
      case 0:
        text += fmt::format("then {} asked {} about {} and what comes next. ", host, pick(guests),
                            pick(topics));
        break;
      case 1:
        text += fmt::format("and {} said that {} works closely with {} these days. ", pick(guests),
                            pick(topics), pick(topics));
        break;
      case 2:
        text += fmt::format("so {} pointed out that {} had changed since last year. ", host,
                            pick(topics));
        break;
      default:
        text += fmt::format("then {} laughed and told a story about {} in the old days. ",
                            pick(guests), pick(topics));
        break;
    }
    if (s % 6 == 5) text += "\n\n";
  }
  return text;
}

std::string Between(const std::string& s, const std::string& open, const std::string& close) {
  const auto a = s.find(open);
  if (a == std::string::npos) return {};
  const auto b = s.find(close, a + open.size());
  return b == std::string::npos ? std::string() : s.substr(a + open.size(), b - a - open.size());
}

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

  // The cast names the chunk mentions, the ten most frequent; each linked to the next, and the
  // hosts to everyone. Descriptions carry a tag of the chunk, so no two chunks repeat one.
  std::string Extract(const std::string& prompt) const {
    const std::string text = Between(prompt, "<text>", "</text>");
    std::vector<std::pair<int, std::string>> found;
    for (const auto& name : cast_.all) {
      int n = 0;
      for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) ++n;
      if (n > 0) found.emplace_back(-n, name);
    }
    std::sort(found.begin(), found.end());
    if (found.size() > 10) found.resize(10);
    const std::string tag = std::to_string(std::hash<std::string>{}(text) % 100000);
    json entities = json::array();
    json rels = json::array();
    for (size_t i = 0; i < found.size(); ++i) {
      const std::string& name = found[i].second;
      const bool topic =
          std::find(cast_.topics.begin(), cast_.topics.end(), name) != cast_.topics.end();
      entities.push_back(
          {{"name", name},
           {"type", topic ? "organization" : "person"},
           {"description", fmt::format("{} comes up {} times in passage {} of the show, in "
                                       "conversation about current projects.",
                                       name, -found[i].first, tag)}});
      if (i > 0) {
        rels.push_back({{"source", found[i - 1].second},
                        {"target", name},
                        {"description", fmt::format("{} and {} are discussed together in "
                                                    "passage {}.",
                                                    found[i - 1].second, name, tag)},
                        {"strength", 1 + static_cast<int>(i % 5)}});
      }
    }
    return json{{"entities", entities}, {"relationships", rels}}.dump();
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
  fs::create_directories(root / "input");
  for (int n = from; n < to; ++n) {
    std::ofstream(root / "input" / fmt::format("episode{:04}.txt", n)) << Episode(cast, n);
  }
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
