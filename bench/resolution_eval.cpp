// Entity-resolution evaluation on the labelled gold sets in tests/data/resolution/ (see the
// README there): resolves every file in each mode and prints pairwise precision, recall (over
// all gold pairs and over the pairs reachable from names and descriptions), F1, the pairs
// compared and adjudicated, adjudication calls per 1,000 entities and wall time.
//
//   build-release/bench/resolution_eval [--data DIR] [--json] [--explain MODE]
//                                       [--opt key=value]...
//
// Modes: "no-llm" (the lexical embedder, no adjudicator: the no-LLM band), "llm" (the lexical
// embedder and a scripted adjudicator that answers from the gold labels: it parses the pairs out
// of the prompt and says "same" iff their gold clusters agree, so it measures blocking, the
// bands and the guards with a perfect judge) and "names" (no embedder, no adjudicator).
// Christmas Carol is scored on its clean subset (no `conflated` / `uncertain` entity in a
// scored pair), but all its entities are resolved. --explain MODE prints the false positives
// and the missed name/description pairs of that mode. --opt sets a ResolveOptions field
// (merge_threshold=0.9, adjudicate_threshold=0.5, no_llm_merge_threshold=0.8, cosine_low=...).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "grag/extract.h"
#include "grag/lexical_embedder.h"
#include "grag/llm.h"
#include "grag/resolve.h"

namespace grag {
namespace {

using nlohmann::json;

struct GoldEntity {
  std::string name, type, description, cluster, evidence;
  bool clean = true;
};

struct GoldFile {
  std::string label;
  std::vector<GoldEntity> entities;
};

int Level(const std::string& evidence) {
  if (evidence == "story") return 2;
  if (evidence == "description") return 1;
  return 0;
}

bool LoadGold(const std::string& path, const std::string& label, GoldFile* out) {
  std::ifstream in(path);
  if (!in) return false;
  json j;
  try {
    j = json::parse(in);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), e.what());
    return false;
  }
  out->label = label;
  for (const auto& e : j.at("entities")) {
    GoldEntity g;
    g.name = e.at("name").get<std::string>();
    g.type = e.at("type").get<std::string>();
    std::transform(g.type.begin(), g.type.end(), g.type.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    g.description = e.at("description").get<std::string>();
    g.cluster = e.at("cluster").get<std::string>();
    g.evidence = e.value("evidence", "name");
    g.clean = !e.value("conflated", false) && !e.value("uncertain", false);
    out->entities.push_back(std::move(g));
  }
  return true;
}

std::string OneLine(std::string s) {
  for (auto& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

// The oracle: finds "name: N | type: T | description: D" lines in the prompt, pairs them up
// (A then B) and answers from the gold clusters.
ScriptedChatModel::Responder Oracle(const GoldFile& gold) {
  auto by_name = std::make_shared<std::multimap<std::string, const GoldEntity*>>();
  for (const auto& e : gold.entities) by_name->insert({OneLine(e.name) + "\x1f" + e.type, &e});
  return [by_name](const ChatRequest& req) -> Result<std::string> {
    const std::string& prompt = req.messages.back().content;
    std::istringstream in(prompt);
    std::string line;
    std::vector<const GoldEntity*> side;
    while (std::getline(in, line)) {
      const auto p = line.find("name: ");
      if (line.rfind("  A: ", 0) != 0 && line.rfind("  B: ", 0) != 0) continue;
      if (p == std::string::npos) continue;
      const auto t = line.find(" | type: ", p);
      const auto d = line.find(" | description: ", p);
      if (d == std::string::npos) continue;
      const std::string name = line.substr(p + 6, (t != std::string::npos ? t : d) - p - 6);
      const std::string type = t != std::string::npos ? line.substr(t + 9, d - t - 9) : "";
      std::string desc = line.substr(d + 16);
      if (desc.size() > 3 && desc.compare(desc.size() - 3, 3, "...") == 0)
        desc.resize(desc.size() - 3);
      const GoldEntity* found = nullptr;
      auto range = by_name->equal_range(name + "\x1f" + type);
      for (auto it = range.first; it != range.second; ++it) {
        if (OneLine(it->second->description).rfind(desc, 0) == 0) found = it->second;
      }
      side.push_back(found);
    }
    json verdicts = json::array();
    for (size_t k = 0; k + 1 < side.size(); k += 2) {
      const bool same =
          side[k] != nullptr && side[k + 1] != nullptr && side[k]->cluster == side[k + 1]->cluster;
      verdicts.push_back({{"pair", k / 2 + 1}, {"same", same}, {"reason", "gold"}});
    }
    return json{{"verdicts", verdicts}}.dump();
  };
}

// Name similarity, guard and raw lexical cosine of one pair, for --explain.
std::string Diagnose(const ResolveInput& input, size_t i, size_t j) {
  const auto& a = input.entities[i];
  const auto& b = input.entities[j];
  const auto va = LexicalEmbed(a.description, 384), vb = LexicalEmbed(b.description, 384);
  double dot = 0;
  for (size_t k = 0; k < va.size(); ++k) dot += static_cast<double>(va[k]) * vb[k];
  const auto conflict = MergeConflict(a, b);
  return fmt::format("[name {:.2f} cos {:.2f}{}]", NameSimilarity(a.name, b.name), dot,
                     conflict ? " guard: " + *conflict : std::string());
}

struct Score {
  int64_t tp = 0, fp = 0, gold = 0, gold_nd = 0, tp_nd = 0;
  double precision() const {
    return tp + fp == 0 ? 1.0 : static_cast<double>(tp) / static_cast<double>(tp + fp);
  }
  double recall() const {
    return gold == 0 ? 1.0 : static_cast<double>(tp) / static_cast<double>(gold);
  }
  double recall_nd() const {
    return gold_nd == 0 ? 1.0 : static_cast<double>(tp_nd) / static_cast<double>(gold_nd);
  }
  double f1() const {
    const double p = precision(), r = recall();
    return p + r == 0 ? 0 : 2 * p * r / (p + r);
  }
};

struct Row {
  std::string file, mode;
  Score score;
  ResolveStats stats;
  double seconds = 0;
  size_t entities = 0;
};

bool SetOption(ResolveOptions* o, const std::string& kv) {
  const auto eq = kv.find('=');
  if (eq == std::string::npos) return false;
  const std::string k = kv.substr(0, eq);
  const double v = std::atof(kv.c_str() + eq + 1);
  if (k == "name_weight")
    o->name_weight = v;
  else if (k == "embedding_weight")
    o->embedding_weight = v;
  else if (k == "merge_threshold")
    o->merge_threshold = v;
  else if (k == "adjudicate_threshold")
    o->adjudicate_threshold = v;
  else if (k == "no_llm_merge_threshold")
    o->no_llm_merge_threshold = v;
  else if (k == "adjudication_batch")
    o->adjudication_batch = static_cast<size_t>(v);
  else if (k == "max_block")
    o->max_block = static_cast<size_t>(v);
  else if (k == "cosine_low")
    o->cosine_low = v;
  else if (k == "adjudicate_name_threshold")
    o->adjudicate_name_threshold = v;
  else if (k == "cosine_high")
    o->cosine_high = v;
  else
    return false;
  return true;
}

int Main(int argc, char** argv) {
  std::string data = std::string(GRAG_SOURCE_DIR) + "/tests/data/resolution";
  bool json_out = false;
  bool dump = false;
  std::string explain;
  ResolveOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--data" && i + 1 < argc)
      data = argv[++i];
    else if (a == "--json")
      json_out = true;
    else if (a == "--dump")
      dump = true;
    else if (a == "--explain" && i + 1 < argc)
      explain = argv[++i];
    else if (a == "--opt" && i + 1 < argc) {
      if (!SetOption(&options, argv[++i])) {
        std::fprintf(stderr, "unknown option %s\n", argv[i]);
        return 2;
      }
    } else {
      std::fprintf(
          stderr, "usage: resolution_eval [--data DIR] [--json] [--explain MODE] [--opt k=v]...\n");
      return 2;
    }
  }
  std::vector<GoldFile> files(2);
  if (!LoadGold(data + "/christmas_carol.json", "christmas_carol (clean)", &files[0]) ||
      !LoadGold(data + "/synthetic.json", "synthetic", &files[1])) {
    std::fprintf(stderr, "cannot read the gold sets in %s\n", data.c_str());
    return 1;
  }
  LexicalEmbedder lexical;
  std::vector<Row> rows;
  if (dump) {  // name similarity, guard and cosine of every plausible clean pair, for tuning
    for (const auto& file : files) {
      ResolveInput in;
      for (const auto& g : file.entities)
        in.entities.push_back(
            {NormalizeEntityName(g.name), g.name, g.type, g.description, 1, true, {}});
      std::vector<std::vector<float>> v;
      for (const auto& e : in.entities) v.push_back(LexicalEmbed(e.description, 384));
      for (size_t i = 0; i < in.entities.size(); ++i) {
        if (!file.entities[i].clean) continue;
        for (size_t j = i + 1; j < in.entities.size(); ++j) {
          if (!file.entities[j].clean) continue;
          const double name = NameSimilarity(in.entities[i].name, in.entities[j].name);
          if (name < 0.5) continue;
          const auto conflict = MergeConflict(in.entities[i], in.entities[j]);
          double dot = 0;
          for (size_t k = 0; k < v[i].size(); ++k) dot += static_cast<double>(v[i][k]) * v[j][k];
          std::printf("%s\t%s\t%s\t%.3f\t%.3f\t%d\t%s\n", file.label.substr(0, 5).c_str(),
                      in.entities[i].name.c_str(), in.entities[j].name.c_str(), name, dot,
                      file.entities[i].cluster == file.entities[j].cluster ? 1 : 0,
                      conflict ? conflict->c_str() : "-");
        }
      }
    }
    return 0;
  }
  for (const auto& file : files) {
    ResolveInput input;
    for (const auto& g : file.entities) {
      ResolveEntity e;
      e.name = g.name;
      e.key = NormalizeEntityName(g.name);
      e.type = g.type;
      e.description = g.description;
      e.frequency = 1;
      input.entities.push_back(std::move(e));
    }
    for (const std::string mode : {"no-llm", "llm", "names"}) {
      ScriptedChatModel oracle(Oracle(file));
      EmbeddingModel* embedder = mode == "names" ? nullptr : &lexical;
      ChatModel* judge = mode == "llm" ? &oracle : nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      auto r = ResolveEntities(input, options, embedder, judge);
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!r.ok()) {
        std::fprintf(stderr, "%s %s: %s\n", file.label.c_str(), mode.c_str(),
                     r.status().ToString().c_str());
        return 1;
      }
      Row row;
      row.file = file.label;
      row.mode = mode;
      row.stats = r->stats;
      row.seconds = secs;
      row.entities = file.entities.size();
      const auto& ents = file.entities;
      const bool show = explain == mode;
      for (size_t i = 0; i < ents.size(); ++i) {
        if (!ents[i].clean) continue;
        for (size_t j = i + 1; j < ents.size(); ++j) {
          if (!ents[j].clean) continue;
          const bool gold = ents[i].cluster == ents[j].cluster;
          const bool pred = r->canonical[i] == r->canonical[j];
          const int level = std::max(Level(ents[i].evidence), Level(ents[j].evidence));
          if (gold) {
            ++row.score.gold;
            if (level < 2) ++row.score.gold_nd;
            if (pred) {
              ++row.score.tp;
              if (level < 2) ++row.score.tp_nd;
            } else if (show && level < 2) {
              std::printf("  MISS %-28s | %-28s (%s) %s\n", ents[i].name.c_str(),
                          ents[j].name.c_str(), level == 0 ? "name" : "description",
                          Diagnose(input, i, j).c_str());
            }
          } else if (pred) {
            ++row.score.fp;
            if (show) {
              std::printf("  FP   %-28s | %-28s -> %s %s\n", ents[i].name.c_str(),
                          ents[j].name.c_str(), ents[r->canonical[i]].name.c_str(),
                          Diagnose(input, i, j).c_str());
            }
          }
        }
      }
      rows.push_back(row);
    }
  }
  if (json_out) {
    json out = json::array();
    for (const auto& row : rows) {
      out.push_back(
          {{"file", row.file},
           {"mode", row.mode},
           {"entities", row.entities},
           {"precision", row.score.precision()},
           {"recall", row.score.recall()},
           {"recall_name_description", row.score.recall_nd()},
           {"f1", row.score.f1()},
           {"true_positive_pairs", row.score.tp},
           {"false_positive_pairs", row.score.fp},
           {"gold_pairs", row.score.gold},
           {"gold_name_description_pairs", row.score.gold_nd},
           {"pairs_compared", row.stats.pairs_compared},
           {"pairs_adjudicated", row.stats.adjudicated},
           {"llm_calls", row.stats.llm_calls},
           {"llm_calls_per_1000_entities",
            1000.0 * static_cast<double>(row.stats.llm_calls) / static_cast<double>(row.entities)},
           {"guarded", row.stats.guarded},
           {"merged", row.stats.merged},
           {"seconds", row.seconds}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-24s %-7s %6s %6s %6s %6s %5s/%-5s %8s %6s %9s %7s\n", "file", "mode", "prec",
              "rec", "rec_nd", "F1", "tp", "fp", "compared", "adjud", "calls/1k", "ms");
  for (const auto& row : rows) {
    std::printf(
        "%-24s %-7s %6.3f %6.3f %6.3f %6.3f %5lld/%-5lld %8lld %6lld %9.1f %7.1f\n",
        row.file.c_str(), row.mode.c_str(), row.score.precision(), row.score.recall(),
        row.score.recall_nd(), row.score.f1(), static_cast<long long>(row.score.tp),
        static_cast<long long>(row.score.fp), static_cast<long long>(row.stats.pairs_compared),
        static_cast<long long>(row.stats.adjudicated),
        1000.0 * static_cast<double>(row.stats.llm_calls) / static_cast<double>(row.entities),
        row.seconds * 1000);
  }
  std::printf("gold pairs: %s\n",
              [&] {
                std::string s;
                for (size_t k = 0; k < rows.size(); k += 3) {
                  s += fmt::format("{} {} (name+description {}); ", rows[k].file,
                                   rows[k].score.gold, rows[k].score.gold_nd);
                }
                return s;
              }()
                  .c_str());
  return 0;
}

}  // namespace
}  // namespace grag

int main(int argc, char** argv) { return grag::Main(argc, argv); }
