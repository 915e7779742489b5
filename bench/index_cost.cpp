// What a full LLM index costs on extractions shaped like a real model's (issue 37), by kind of
// call, in calls and prompt tokens per 1,000 chunks, through the real pipeline (RunIndex) with a
// scripted chat model:
//
//  - "passages": 1,000 generated Wikipedia-like passages of ~100 tokens, extracted the way
//    GPT-3.5 extracts such passages (about 9 entities and 9 relationships each, half of the
//    entities literal values: dates, years, numbers, amounts, quantities), the people,
//    organisations, places and works drawn from a Zipf-distributed cast so names recur across
//    passages, often as variants ("Marta Kowal", "Kowal", "M. Kowal"; "Halden Shipping Company",
//    "Halden Shipping", "HSC"). A share of the first replies miss entities (the model
//    under-extracts a chunk: 20% of passages miss 40% of their entities and the relationships
//    touching them; 15% of the rest miss one relationship); the gleaning reply returns exactly
//    what was missed, so the entities and relationships a run ends with show what selective
//    gleaning loses against gleaning every chunk. The judge answers from the cast (same cast
//    member: same), summaries and reports with canned texts of realistic length.
//  - "book": Microsoft GraphRAG's recorded extraction of *A Christmas Carol* (42 chunks of 1,200
//    tokens, tests/data/ms_christmas_carol/) replayed chunk by chunk, with the same holdout:
//    one entity in ten (and its relationships) is given by the gleaning reply instead of the
//    first, and in one chunk in five the first reply misses 40%.
//  - "unseen": a second passage corpus from another seed with a denser, more literal-heavy
//    extraction: what the dry run estimates for a corpus it has not been tuned on.
//  - "+1%": 10 more passages added to the full passages index (an incremental update).
//
// For each: calls and prompt tokens (o200k_base, every message of the request) by kind, the
// dry-run estimate printed before the run, entities and relationships in the index, the index
// file's size against the corpus text.
//
//   build-release/bench/index_cost [--passages N] [--json] [--keep] [--questions N]
//                                  [--only passages|unseen|book] [--set key=value]...
//
// --set applies a setting to every run (extraction.glean_below_yield=0 glean every chunk,
// resolution.max_judge_share=1 lifts the judge's cap...). --keep leaves each run's project in
// the temporary directory (grag-index-cost-LABEL), for `grag stats` or sqlite3 on its index.
// --only runs one corpus (passages includes its +1% update); bench/eval_shapes.py's carol-llm
// shape keeps the book's (in $TMPDIR) to measure retrieval over the replayed extraction.
// --questions N (with --set reports.mode=lazy): after the passages index, N global questions at
// global_search.level write the reports they read (WriteDeferredReports, as the engine does
// before a global question's map calls); their report calls and tokens are printed by question.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
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

#include "grag/global_search.h"
#include "grag/indexer.h"
#include "grag/lexical_embedder.h"
#include "grag/store.h"
#include "grag/tokenizer.h"

namespace grag {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  return json::parse(in);
}

// One chunk's scripted extraction: what the first reply gives, what a gleaning reply adds, and
// the identity (gold cluster) of every name it uses.
struct Passage {
  std::string id;
  std::string title;
  std::string text;
  json first = {{"entities", json::array()}, {"relationships", json::array()}};
  json glean = {{"entities", json::array()}, {"relationships", json::array()}};
};

struct Corpus {
  std::string name;
  std::vector<Passage> passages;
  std::map<std::string, std::string> identity;  // name -> gold cluster (judge's answers)
  std::map<std::string, size_t> by_text;        // passage text -> index
  size_t text_bytes = 0;
};

// Splits a passage's full extraction into the first reply and the gleaning reply: `miss` of
// the entities (never the first, the passage's subject) go to the gleaning reply with every
// relationship that touches them; `miss_rel` more relationships too.
void Holdout(Passage& p, const json& entities, const json& relationships, double miss, int miss_rel,
             std::mt19937_64& rng) {
  std::set<std::string> held;
  const size_t n = entities.size();
  auto k = static_cast<size_t>(std::llround(miss * static_cast<double>(n)));
  std::vector<size_t> order;
  for (size_t i = 1; i < n; ++i) order.push_back(i);
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i = 0; i < std::min(k, order.size()); ++i) {
    held.insert(entities[order[i]]["name"].get<std::string>());
  }
  for (const auto& e : entities) {
    (held.count(e["name"].get<std::string>()) ? p.glean : p.first)["entities"].push_back(e);
  }
  std::vector<json> rest;
  for (const auto& r : relationships) {
    if (held.count(r["source"].get<std::string>()) || held.count(r["target"].get<std::string>())) {
      p.glean["relationships"].push_back(r);
    } else {
      rest.push_back(r);
    }
  }
  std::shuffle(rest.begin(), rest.end(), rng);
  for (size_t i = 0; i < rest.size(); ++i) {
    (static_cast<int>(i) < miss_rel ? p.glean : p.first)["relationships"].push_back(rest[i]);
  }
}

// ---- the generated passages ----

const std::vector<std::string> kFirst = {
    "Marta",  "Jonas", "Elena",   "Tomas",   "Ingrid", "Pavel", "Lucia",  "Henrik", "Sofia",
    "Anton",  "Clara", "Viktor",  "Nadia",   "Oskar",  "Irene", "Felix",  "Greta",  "Hugo",
    "Livia",  "Emil",  "Rosa",    "Arthur",  "Mira",   "Karl",  "Alma",   "Bruno",  "Dora",
    "Edgar",  "Flora", "Gustav",  "Hanna",   "Ivan",   "Julia", "Kasper", "Lena",   "Magnus",
    "Nora",   "Otto",  "Paula",   "Rafael",  "Selma",  "Theo",  "Ursula", "Walter", "Yara",
    "Zoltan", "Agnes", "Bernard", "Cecilia", "Dmitri", "Eva",   "Frank",  "Gloria", "Harald"};
const std::vector<std::string> kLast = {
    "Kowal",    "Lindqvist", "Moreau",  "Brandt",   "Okafor",  "Varga",   "Castell", "Halloran",
    "Nyberg",   "Petrov",    "Duval",   "Ferreira", "Grieve",  "Iversen", "Janssen", "Kerr",
    "Laszlo",   "Marchetti", "Novak",   "Olsen",    "Pryce",   "Quint",   "Rahman",  "Sandoval",
    "Thorne",   "Ulrich",    "Valdez",  "Whitlock", "Yates",   "Zeller",  "Abbott",  "Bauer",
    "Carver",   "Dalton",    "Ellison", "Fontaine", "Garrick", "Hale",    "Ingram",  "Jessup",
    "Kessler",  "Lowell",    "Mercer",  "Nash",     "Orr",     "Pell",    "Radley",  "Strand",
    "Tallis",   "Upton",     "Vance",   "Wade",     "Yardley", "Ziegler", "Ashby",   "Birch",
    "Corliss",  "Dunmore",   "Everard", "Farrow",   "Gale",    "Hollis",  "Ives",    "Joyce",
    "Kingsley", "Lacey",     "Maddox",  "Neville",  "Osgood",  "Penrose"};
const std::vector<std::string> kStem = {
    "Halden",    "Brightwater", "Northgate",   "Ashford",   "Kestrel",   "Marlow",
    "Redfern",   "Silverton",   "Thornbury",   "Westmoor",  "Ebbing",    "Falkirk",
    "Glenmore",  "Harwick",     "Ironside",    "Larkspur",  "Millbrook", "Oakridge",
    "Pemberton", "Ravensworth", "Stonebridge", "Tidewater", "Vale",      "Whitcombe",
    "Yarrow",    "Corrin",      "Dunholt",     "Elmstead",  "Fernhill",  "Greywell"};
const std::vector<std::string> kOrgKind = {
    "Shipping Company", "Records", "University",  "Football Club",
    "Railway",          "Press",   "Bank",        "Orchestra",
    "Institute",        "Party",   "Motor Works", "Theatre Company"};
const std::vector<std::string> kPlaceSuffix = {
    "", " Bay", "ton", " Falls", "ford", " Heights", "bury", " Harbour", "wick", " Springs"};
const std::vector<std::string> kWorkKind = {"Prize", "Open",  "Festival", "Medal",
                                            "Cup",   "Award", "Symphony", "Treaty"};
const std::vector<std::string> kMonths = {"January",   "February", "March",    "April",
                                          "May",       "June",     "July",     "August",
                                          "September", "October",  "November", "December"};
const std::vector<std::string> kOccupation = {"painter",    "economist", "footballer", "composer",
                                              "politician", "architect", "novelist",   "engineer",
                                              "physician",  "actress",   "journalist", "sculptor"};
const std::vector<std::string> kConceptAdj = {
    "national", "general",       "regional",  "debut",   "studio", "live",  "annual", "public",
    "royal",    "international", "municipal", "federal", "first",  "final", "youth",  "women's"};
const std::vector<std::string> kConceptNoun = {
    "team",     "election", "album",        "league",    "council",    "tour",      "award",
    "library",  "museum",   "championship", "orchestra", "festival",   "assembly",  "railway",
    "hospital", "season",   "cabinet",      "campaign",  "expedition", "exhibition"};
const std::vector<std::string> kNation = {"Norwegian", "Polish",    "Brazilian", "Canadian",
                                          "Irish",     "Hungarian", "Dutch",     "Chilean"};

struct Member {
  std::string kind;  // person, organization, geo, event
  std::string name;
  std::vector<std::string> variants;  // other spellings a passage may use
  std::string short_name;             // how a passage refers to it the second time
  std::string id;
};

struct Cast {
  std::vector<Member> members;
  std::vector<double> cumulative;  // Zipf weights
};

Cast MakeCast(std::mt19937_64& rng, size_t people, size_t orgs, size_t places, size_t works) {
  Cast cast;
  auto pick = [&rng](const std::vector<std::string>& v) -> const std::string& {
    return v[rng() % v.size()];
  };
  std::set<std::string> used;
  auto add = [&](Member m) {
    if (!used.insert(m.name).second) return;
    m.id = fmt::format("{}{}", m.kind, cast.members.size());
    cast.members.push_back(std::move(m));
  };
  for (size_t i = 0; i < people; ++i) {
    const std::string f = pick(kFirst), l = pick(kLast);
    add({"person", f + " " + l, {l, f.substr(0, 1) + ". " + l}, l, ""});
  }
  for (size_t i = 0; i < orgs; ++i) {
    const std::string s = pick(kStem), k = pick(kOrgKind);
    std::string acronym;
    for (const std::string& w : {s, k}) {
      acronym += w[0];
      for (size_t c = 1; c < w.size(); ++c) {
        if (w[c - 1] == ' ') acronym += w[c];
      }
    }
    add({"organization", s + " " + k, {s + " " + k.substr(0, k.find(' ')), acronym}, s, ""});
  }
  for (size_t i = 0; i < places; ++i) {
    const std::string name = pick(kStem) + pick(kPlaceSuffix);
    add({"geo", name, {}, name, ""});
  }
  for (size_t i = 0; i < works; ++i) {
    const std::string s = pick(kStem), k = pick(kWorkKind);
    add({"event", "the " + s + " " + k, {s + " " + k}, s + " " + k, ""});
  }
  std::shuffle(cast.members.begin(), cast.members.end(), rng);
  double total = 0;
  for (size_t i = 0; i < cast.members.size(); ++i) {
    total += 1.0 / std::pow(static_cast<double>(i + 1), 0.9);
    cast.cumulative.push_back(total);
  }
  return cast;
}

const Member& Draw(const Cast& cast, std::mt19937_64& rng) {
  const double x = std::uniform_real_distribution<double>(0, cast.cumulative.back())(rng);
  const auto it = std::lower_bound(cast.cumulative.begin(), cast.cumulative.end(), x);
  return cast.members[static_cast<size_t>(it - cast.cumulative.begin())];
}

struct Density {
  double literal_share = 1.0;  // 1: the usual literal sentences; more: extra ones
  double under_share = 0.2;    // passages whose first reply misses 40% of the entities
};

Corpus MakePassages(const std::string& name, size_t count, uint64_t seed, size_t first_index,
                    const Density& density) {
  std::mt19937_64 cast_rng(seed);
  const Cast cast = MakeCast(cast_rng, 900, 260, 200, 140);
  std::mt19937_64 rng(seed * 7919 + first_index);
  Corpus c;
  c.name = name;
  auto chance = [&rng](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  auto num = [&rng](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
  for (size_t i = 0; i < count; ++i) {
    Passage p;
    p.id = fmt::format("{}-{}", name, first_index + i);
    json entities = json::array(), rels = json::array();
    std::set<std::string> names;
    auto entity = [&](const std::string& n, const std::string& type, const std::string& desc,
                      const std::string& id) {
      if (!names.insert(n).second) return;
      entities.push_back({{"name", n}, {"type", type}, {"description", desc}});
      c.identity.emplace(n, id);
    };
    auto rel = [&](const std::string& a, const std::string& b, const std::string& desc) {
      if (a == b) return;
      rels.push_back(
          {{"source", a}, {"target", b}, {"description", desc}, {"strength", num(3, 9)}});
    };
    // A cast member as a passage names it: mostly its name, sometimes a variant.
    auto spell = [&](const Member& m) {
      if (!m.variants.empty() && chance(0.3)) return m.variants[rng() % m.variants.size()];
      return m.name;
    };
    const Member* subject = &cast.members[rng() % cast.members.size()];
    while (subject->kind == "geo") subject = &cast.members[rng() % cast.members.size()];
    const std::string s = subject->name;
    p.title = s;
    std::string text;
    const int year = num(1890, 2015);
    const std::string born = fmt::format("{} {} {}", num(1, 28), kMonths[rng() % 12], year);
    Member fresh_place{
        "geo", kStem[rng() % kStem.size()] + kPlaceSuffix[rng() % kPlaceSuffix.size()], {}, "", ""};
    fresh_place.short_name = fresh_place.name;
    fresh_place.id = "place:" + fresh_place.name;
    const Member& place = [&]() -> const Member& {
      if (chance(0.3)) return fresh_place;
      for (;;) {
        const Member& m = Draw(cast, rng);
        if (m.kind == "geo") return m;
      }
    }();
    auto other = [&](const std::string& kind) -> const Member& {
      for (;;) {
        const Member& m = Draw(cast, rng);
        if (m.kind == kind && m.name != s) return m;
      }
    };
    const Member& org = other("organization");
    const Member& person = other("person");
    const Member& cast_work = other("event");
    const std::string place_n = spell(place), org_n = spell(org), person_n = spell(person);
    const int y1 = year + num(18, 30), y2 = y1 + num(2, 15);
    const std::string amount = fmt::format("${}.{} million", num(1, 90), num(1, 9));
    const std::string count_n = fmt::format("{},{:03}", num(1, 40), num(0, 999));
    const std::string qty = fmt::format("{} km", num(5, 400));
    const std::string occupation = kOccupation[rng() % kOccupation.size()];
    // Half of the events a passage names are its own ("the 1994 Halden Open"), sharing words
    // with other names; a concept phrase ("national team", "debut album") recurs across passages.
    Member own_work{"event",
                    fmt::format("the {} {} {}", y2, kStem[rng() % kStem.size()],
                                kWorkKind[rng() % kWorkKind.size()]),
                    {},
                    "",
                    ""};
    own_work.id = "own:" + own_work.name;
    const Member& work = chance(0.5) ? own_work : cast_work;
    const std::string work_n = spell(work);
    const std::string concept_n = chance(0.25) ? kConceptNoun[rng() % kConceptNoun.size()]
                                               : kConceptAdj[rng() % kConceptAdj.size()] + " " +
                                                     kConceptNoun[rng() % kConceptNoun.size()];
    if (subject->kind == "person") {
      text = fmt::format("{} (born {}) is a {} {} from {}. ", s, born,
                         kNation[rng() % kNation.size()], occupation, place_n);
      entity(s, "person", fmt::format("{} is a {} born in {}.", s, occupation, place.name),
             subject->id);
      entity(born, "date", fmt::format("{} is the date of birth of {}.", born, s), born);
      entity(place_n, "geo", fmt::format("{} is the birthplace of {}.", place_n, s), place.id);
      rel(s, born, fmt::format("{} was born on {}.", s, born));
      if (chance(0.3)) {  // a model often gives the year of a date too, and the month
        const std::string month = born.substr(born.find(' ') + 1);
        const std::string part = chance(0.5) ? std::to_string(year) : month;
        entity(part, "date", fmt::format("{} is when {} was born.", part, s), part);
        rel(s, part, fmt::format("{} was born in {}.", s, part));
      }
      rel(s, place_n, fmt::format("{} comes from {}.", s, place_n));
      text += fmt::format("In {} {} joined {}, where {} worked with {}. ", y1, subject->short_name,
                          org_n, chance(0.5) ? "she" : "he", person_n);
      entity(std::to_string(y1), "date",
             fmt::format("{} is the year {} joined {}.", y1, s, org.name), std::to_string(y1));
      entity(org_n, "organization",
             fmt::format("{} is the organisation {} joined in {}.", org_n, s, y1), org.id);
      entity(person_n, "person", fmt::format("{} worked with {} at {}.", person_n, s, org.name),
             person.id);
      rel(s, org_n, fmt::format("{} joined {} in {}.", s, org_n, y1));
      rel(s, std::to_string(y1), fmt::format("{} joined {} in {}.", s, org.name, y1));
      rel(s, person_n, fmt::format("{} worked with {} at {}.", s, person_n, org.name));
      rel(person_n, org_n, fmt::format("{} worked at {}.", person_n, org_n));
      text += fmt::format("{} is best known for the {}. ", subject->short_name, concept_n);
      entity(concept_n, "event", fmt::format("The {} is what {} is best known for.", concept_n, s),
             "concept:" + concept_n);
      rel(s, concept_n, fmt::format("{} is best known for the {}.", s, concept_n));
    } else {
      const std::string what = subject->kind == "organization" ? "founded" : "first held";
      text = fmt::format("{} was {} in {} in {} by {}. ", s, what, year, place_n, person_n);
      entity(s, subject->kind,
             fmt::format("{} is a {} {} in {}.", s, subject->kind, what, place.name), subject->id);
      entity(std::to_string(year), "date", fmt::format("{} is the year {} was {}.", year, s, what),
             std::to_string(year));
      entity(place_n, "geo", fmt::format("{} is where {} was {}.", place_n, s, what), place.id);
      entity(person_n, "person", fmt::format("{} {} {} in {}.", person_n, what, s, year),
             person.id);
      rel(s, std::to_string(year), fmt::format("{} was {} in {}.", s, what, year));
      rel(s, place_n, fmt::format("{} was {} in {}.", s, what, place_n));
      rel(person_n, s, fmt::format("{} {} {}.", person_n, what, s));
      text += fmt::format("In {} {} worked with {} on a {} project. ", y1, subject->short_name,
                          org_n, occupation);
      entity(std::to_string(y1), "date",
             fmt::format("{} is the year {} worked with {}.", y1, s, org.name), std::to_string(y1));
      entity(org_n, "organization", fmt::format("{} worked with {} in {}.", org_n, s, y1), org.id);
      rel(s, org_n, fmt::format("{} worked with {} in {}.", s, org_n, y1));
      rel(s, std::to_string(y1), fmt::format("{} began its work with {} in {}.", s, org.name, y1));
      text += fmt::format("It is best known for its {}. ", concept_n);
      entity(concept_n, "event", fmt::format("The {} is what {} is best known for.", concept_n, s),
             "concept:" + concept_n);
      rel(s, concept_n, fmt::format("{} is best known for its {}.", s, concept_n));
    }
    if (chance(0.6 * density.literal_share)) {
      text += fmt::format("By {} it had {} members and a budget of {}. ", y2, count_n, amount);
      entity(count_n, "quantity",
             fmt::format("{} is the number of members of {} in {}.", count_n, s, y2), count_n);
      entity(amount, "money", fmt::format("{} is the budget of {} in {}.", amount, s, y2), amount);
      entity(std::to_string(y2), "date",
             fmt::format("{} is the year of the figures for {}.", y2, s), std::to_string(y2));
      rel(s, count_n, fmt::format("{} had {} members by {}.", s, count_n, y2));
      rel(s, amount, fmt::format("{} had a budget of {}.", s, amount));
      rel(count_n, std::to_string(y2), fmt::format("{} was the membership in {}.", count_n, y2));
    }
    if (chance(0.6)) {
      text += fmt::format("{} won {} in {}, held {} from {}. ", subject->short_name, work_n, y2,
                          qty, place_n);
      entity(work_n, "event", fmt::format("{} is an event {} won in {}.", work_n, s, y2), work.id);
      entity(qty, "quantity",
             fmt::format("{} is the distance of {} from {}.", qty, work_n, place.name), qty);
      rel(s, work_n, fmt::format("{} won {} in {}.", s, work_n, y2));
      rel(work_n, qty, fmt::format("{} was held {} from {}.", work_n, qty, place.name));
    }
    if (density.literal_share > 1 && chance(density.literal_share - 1)) {
      const std::string pct = fmt::format("{}%", num(2, 97));
      const std::string date2 = fmt::format("{} {}", kMonths[rng() % 12], y2 + num(1, 5));
      text += fmt::format("In {} its share rose to {}. ", date2, pct);
      entity(date2, "date", fmt::format("{} is when the share of {} rose.", date2, s), date2);
      entity(pct, "quantity", fmt::format("{} is the share {} reached.", pct, s), pct);
      rel(s, pct, fmt::format("{} reached a share of {}.", s, pct));
      rel(pct, date2, fmt::format("The share of {} was reached in {}.", pct, date2));
    }
    if (chance(0.5)) {
      // Often someone no other passage names: a unique name that shares a surname or a given
      // name with others.
      Member fresh{
          "person", kFirst[rng() % kFirst.size()] + " " + kLast[rng() % kLast.size()], {}, "", ""};
      fresh.id = "fresh:" + fresh.name;
      const Member& second = chance(0.6) ? fresh : other("person");
      const std::string second_n = spell(second);
      text += fmt::format("{} later praised the work of {} in a review.", second_n,
                          subject->short_name);
      entity(second_n, "person", fmt::format("{} praised the work of {}.", second_n, s), second.id);
      rel(second_n, s, fmt::format("{} praised the work of {}.", second_n, s));
    }
    // The names the text uses for the subject are its name and its short name; the extraction
    // uses the full name, as the prompt asks.
    p.text = text;
    const double miss = chance(density.under_share) ? 0.4 : 0.0;
    Holdout(p, entities, rels, miss, miss == 0 && chance(0.15) ? 1 : 0, rng);
    c.text_bytes += p.text.size();
    c.by_text[p.text] = c.passages.size();
    c.passages.push_back(std::move(p));
  }
  return c;
}

// ---- Microsoft's extraction of the book ----

Corpus LoadBook() {
  const std::string data = std::string(GRAG_SOURCE_DIR) + "/tests/data/";
  Corpus c;
  c.name = "book";
  const json texts = ReadJson(data + "christmas_carol/ms_text_units.json");
  const json ids = ReadJson(data + "ms_christmas_carol/text_units.json");
  std::map<std::string, size_t> unit_of_id;
  for (const auto& t : ids)
    unit_of_id[t["id"].get<std::string>()] = t["human_readable_id"].get<size_t>();
  c.passages.resize(texts.size());
  std::vector<json> ents(texts.size(), json::array()), rels(texts.size(), json::array());
  for (const auto& t : texts) {
    const auto i = t["human_readable_id"].get<size_t>();
    std::string text = t["text"];
    text = text.substr(text.find('\n') + 1);  // "title: a-christmas-carol.txt.\n"
    c.passages[i].id = fmt::format("part{:02}", i);
    c.passages[i].text = text;
  }
  std::map<std::string, json> gold;
  const json labelled = ReadJson(data + "resolution/christmas_carol.json");
  for (const auto& e : labelled["entities"]) {
    gold[e["id"].get<std::string>()] = e;
    c.identity[e["name"].get<std::string>()] = e["cluster"].get<std::string>();
  }
  for (const auto& e : ReadJson(data + "ms_christmas_carol/entities.json")) {
    const json& g = gold.at(e["id"].get<std::string>());
    std::string first = g["description"];
    first = first.substr(
        0, first.find(". ") == std::string::npos ? first.size() : first.find(". ") + 1);
    for (const auto& tu : e["text_unit_ids"]) {
      const size_t u = unit_of_id.at(tu.get<std::string>());
      ents[u].push_back({{"name", e["title"]}, {"type", e["type"]}, {"description", first}});
    }
  }
  for (const auto& r : ReadJson(data + "ms_christmas_carol/relationships.json")) {
    const double n = static_cast<double>(r["text_unit_ids"].size());
    for (const auto& tu : r["text_unit_ids"]) {
      const size_t u = unit_of_id.at(tu.get<std::string>());
      rels[u].push_back({{"source", r["source"]},
                         {"target", r["target"]},
                         {"description", r["description"]},
                         {"strength", std::max(1.0, r["weight"].get<double>() / n)}});
    }
  }
  std::mt19937_64 rng(37);
  for (size_t i = 0; i < c.passages.size(); ++i) {
    const bool under = rng() % 5 == 0;
    Holdout(c.passages[i], ents[i], rels[i], under ? 0.4 : 0.1, 0, rng);
    c.text_bytes += c.passages[i].text.size();
    c.by_text[c.passages[i].text] = i;
  }
  return c;
}

// ---- the scripted model ----

std::string Kind(const ChatRequest& req) {
  const std::string& last = req.messages.back().content;
  if (last.find("Pair 1:") != std::string::npos) return "judge";
  if (last.find("were missed in the last extraction") != std::string::npos) return "glean";
  if (last.find("Extract the entities and relationships") != std::string::npos) return "extract";
  if (last.find("Descriptions:") != std::string::npos) return "summarize";
  if (last.find("Write a report on the community") != std::string::npos) return "report";
  return "other";
}

std::string NameAfter(const std::string& prompt, size_t from, const std::string& label) {
  const size_t at = prompt.find(label, from);
  if (at == std::string::npos) return "";
  const size_t start = at + label.size();
  return prompt.substr(start, prompt.find(" |", start) - start);
}

struct KindCost {
  int64_t calls = 0;
  int64_t prompt_tokens = 0;
};

class Model {
 public:
  Model(const Corpus& corpus, KeyValueCache* cache) : corpus_(corpus) {
    ScriptedModelOptions mo;
    mo.cache = cache;
    mo.model = "index-cost-bench";
    tokenizer_ = Tokenizer::Get("o200k_base").value();
    model_ = std::make_unique<ScriptedChatModel>(
        [this](const ChatRequest& req) -> Result<std::string> { return Reply(req); }, mo);
  }
  ChatModel* get() { return model_.get(); }
  std::map<std::string, KindCost> Costs() {
    std::lock_guard<std::mutex> lock(mu_);
    return costs_;
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    costs_.clear();
  }

 private:
  const Passage* PassageOf(const ChatRequest& req) const {
    const std::string& first = req.messages.front().content;
    const size_t open = first.find("<text>");
    const size_t close = first.rfind("</text>");
    if (open == std::string::npos || close == std::string::npos) return nullptr;
    const auto it = corpus_.by_text.find(first.substr(open + 6, close - open - 6));
    return it == corpus_.by_text.end() ? nullptr : &corpus_.passages[it->second];
  }

  Result<std::string> Reply(const ChatRequest& req) {
    const std::string kind = Kind(req);
    int64_t tokens = 0;
    for (const auto& m : req.messages) tokens += static_cast<int64_t>(tokenizer_->Count(m.content));
    int glean_round = 0;
    for (const auto& m : req.messages) glean_round += m.role == "assistant" ? 1 : 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      costs_[kind].calls += 1;
      costs_[kind].prompt_tokens += tokens;
    }
    const std::string& last = req.messages.back().content;
    if (kind == "extract" || kind == "glean") {
      const Passage* p = PassageOf(req);
      if (p == nullptr) return std::string(R"({"entities": [], "relationships": []})");
      if (kind == "extract") return p->first.dump();
      if (glean_round == 1) return p->glean.dump();
      return std::string(R"({"entities": [], "relationships": []})");
    }
    if (kind == "summarize") {
      return std::string(
          "A merged description of the entity as the descriptions above give it: who or what it "
          "is, where and when it appears, what it did and with whom, and the figures attached to "
          "it, in one paragraph of plain prose without repetition.");
    }
    if (kind == "judge") {
      json verdicts = json::array();
      size_t pos = 0;
      for (int pair = 1;; ++pair) {
        pos = last.find("Pair " + std::to_string(pair) + ":", pos);
        if (pos == std::string::npos) break;
        const auto a = corpus_.identity.find(NameAfter(last, pos, "A: name: "));
        const auto b = corpus_.identity.find(NameAfter(last, pos, "B: name: "));
        const bool same =
            a != corpus_.identity.end() && b != corpus_.identity.end() && a->second == b->second;
        verdicts.push_back({{"pair", pair}, {"same", same}, {"reason", "the cast says so"}});
        ++pos;
      }
      return json{{"verdicts", verdicts}}.dump();
    }
    if (kind == "report") {
      json findings = json::array();
      for (int i = 0; i < 4; ++i) {
        findings.push_back(
            {{"summary", "A key finding about the community"},
             {"explanation",
              "What the entities named here did together, when and where, with the figures the "
              "relationships give, and why it matters for the community as a whole."}});
      }
      return json{{"title", "A community of related entities"},
                  {"summary",
                   "What ties these entities together: the people, organisations, places and "
                   "events of one part of the corpus and how they relate."},
                  {"rating", 5},
                  {"rating_explanation", "a moderately important community"},
                  {"findings", findings}}
          .dump();
    }
    return std::string("{}");
  }

  const Corpus& corpus_;
  const Tokenizer* tokenizer_ = nullptr;
  std::unique_ptr<ScriptedChatModel> model_;
  std::mutex mu_;
  std::map<std::string, KindCost> costs_;
};

// ---- runs ----

std::vector<std::pair<std::string, std::string>> g_settings;
bool g_keep = false;
int g_questions = 0;

// One global question of a lazy index: what it wrote before its map calls.
struct LazyQuestion {
  int64_t reads = 0;  // communities its plan reads
  DeferredReports wrote;
};

struct Outcome {
  std::string label;
  int64_t chunks = 0;
  std::map<std::string, KindCost> costs;
  int64_t calls = 0;
  int64_t prompt_tokens = 0;
  int64_t estimated_calls = 0;
  int64_t entities = 0;
  int64_t relationships = 0;
  int64_t mentions = 0;  // entity mentions kept over all chunks (what gleaning found counts)
  int64_t relationship_mentions = 0;
  int64_t reports_llm = 0;
  int64_t reports_extractive = 0;
  int64_t adjudicated = 0;
  std::vector<LazyQuestion> questions;
  uintmax_t index_bytes = 0;
  size_t text_bytes = 0;
  double seconds = 0;
};

void WriteInput(const fs::path& dir, const Corpus& c, size_t from, size_t to) {
  std::ofstream out(dir / fmt::format("{}-{}.jsonl", c.name, from));
  for (size_t i = from; i < to; ++i) {
    const Passage& p = c.passages[i];
    out << json{{"id", p.id}, {"title", p.title.empty() ? p.id : p.title}, {"text", p.text}}.dump()
        << "\n";
  }
}

Config ConfigFor(const fs::path& root) {
  Config config;
  config.root = root.string();
  config.chunks.size = 1200;
  config.llm.concurrency = 8;
  for (const auto& [key, value] : g_settings) {
    const Status st = ApplySetting(config, key, value);
    if (!st.ok()) throw std::runtime_error(st.message());
  }
  return config;
}

Outcome RunOnce(const std::string& label, const Config& config, Store& store, Model& model,
                const Corpus& corpus, int64_t chunks) {
  model.Reset();
  LexicalEmbedder embedder;
  IndexContext ctx;
  ctx.store = &store;
  ctx.chat = model.get();
  ctx.embedder = &embedder;
  auto plan = PlanIndex(config, {}, ctx);
  if (!plan.ok()) throw std::runtime_error(plan.status().ToString());
  const auto start = std::chrono::steady_clock::now();
  auto summary = RunIndex(config, {}, ctx);
  if (!summary.ok()) throw std::runtime_error(summary.status().ToString());
  Outcome o;
  o.label = label;
  o.chunks = chunks;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  o.costs = model.Costs();
  for (const auto& [k, c] : o.costs) {
    o.calls += c.calls;
    o.prompt_tokens += c.prompt_tokens;
  }
  o.estimated_calls = plan->estimate.calls.Total();
  o.entities = summary->entities;
  o.relationships = summary->relationships;
  o.reports_llm = summary->reports_generated - summary->reports_extractive;
  o.reports_extractive = summary->reports_extractive;
  o.adjudicated = summary->resolution_adjudicated;
  o.text_bytes = corpus.text_bytes;
  return o;
}

// Mentions kept in the stored extractions: what gleaning added survives here whatever
// resolution joins.
void CountMentions(Store& store, Outcome& o) {
  auto r = store.RunReadOnlySql(
      "SELECT coalesce(sum(entity_count), 0), coalesce(sum(relationship_count), 0) "
      "FROM main.extractions",
      1, std::chrono::milliseconds(0));
  if (r.ok() && !r->rows.empty()) {
    o.mentions = r->rows[0][0].integer;
    o.relationship_mentions = r->rows[0][1].integer;
  }
}

// --questions: global questions on a lazy index, each writing the reports its plan reads.
std::vector<LazyQuestion> AskLazyQuestions(const Config& config, Store& store, Model& model) {
  std::vector<LazyQuestion> out;
  if (config.reports.mode != "lazy") return out;
  const Tokenizer* tok = Tokenizer::Get(config.chunks.encoding).value();
  GlobalSearchOptions go;
  go.level = config.global_search.level;
  go.max_map_calls = static_cast<int>(config.global_search.max_map_calls);
  go.map_batch_tokens = config.global_search.map_batch_tokens;
  for (int q = 0; q < g_questions; ++q) {
    auto plan = PlanGlobalSearch(store, *tok, "What are the main themes of these passages?", go);
    if (!plan.ok()) throw std::runtime_error(plan.status().ToString());
    const std::vector<int64_t> ids = CommunitiesByWeight(*plan);
    LazyQuestion lq;
    lq.reads = static_cast<int64_t>(ids.size());
    auto wrote = WriteDeferredReports(config, store, *model.get(), ids);
    if (!wrote.ok()) throw std::runtime_error(wrote.status().ToString());
    lq.wrote = *wrote;
    out.push_back(lq);
  }
  return out;
}

Outcome IndexCorpus(const std::string& label, const Corpus& corpus, const Corpus* more,
                    Outcome* update) {
  const fs::path root = fs::temp_directory_path() / fmt::format("grag-index-cost-{}", label);
  fs::remove_all(root);
  fs::create_directories(root / "input");
  WriteInput(root / "input", corpus, 0, corpus.passages.size());
  const Config config = ConfigFor(root);
  Outcome o;
  {
    auto store = std::move(Store::Open(config.Resolve(config.store.path))).value();
    Model model(corpus, &store->ReplyCache());
    o = RunOnce(label, config, *store, model, corpus, static_cast<int64_t>(corpus.passages.size()));
    CountMentions(*store, o);
    if (more != nullptr) o.questions = AskLazyQuestions(config, *store, model);
  }
  o.index_bytes = fs::file_size(config.Resolve(config.store.path));
  if (more != nullptr && update != nullptr) {
    // The update: the same cast, 1% more passages.
    Corpus both = corpus;
    for (const Passage& p : more->passages) {
      both.by_text[p.text] = both.passages.size();
      both.passages.push_back(p);
    }
    for (const auto& [k, v] : more->identity) both.identity.emplace(k, v);
    WriteInput(root / "input", both, corpus.passages.size(), both.passages.size());
    auto store = std::move(Store::Open(config.Resolve(config.store.path))).value();
    Model model(both, &store->ReplyCache());
    *update = RunOnce(label + " +1%", config, *store, model, *more,
                      static_cast<int64_t>(more->passages.size()));
  }
  if (!g_keep) fs::remove_all(root);
  return o;
}

double Per1000(int64_t v, int64_t chunks) {
  return 1000.0 * static_cast<double>(v) / static_cast<double>(std::max<int64_t>(1, chunks));
}

json ToJson(const Outcome& o) {
  json kinds = json::object();
  for (const auto& [k, c] : o.costs) {
    kinds[k] = {{"calls", c.calls},
                {"prompt_tokens", c.prompt_tokens},
                {"calls_per_1000", Per1000(c.calls, o.chunks)},
                {"prompt_tokens_per_1000", Per1000(c.prompt_tokens, o.chunks)}};
  }
  json questions = json::array();
  for (const LazyQuestion& q : o.questions) {
    questions.push_back({{"reads", q.reads},
                         {"reports_written", q.wrote.written},
                         {"calls", q.wrote.calls},
                         {"prompt_tokens", q.wrote.prompt_tokens},
                         {"pending", q.wrote.pending}});
  }
  return {{"label", o.label},
          {"chunks", o.chunks},
          {"lazy_questions", questions},
          {"kinds", kinds},
          {"calls", o.calls},
          {"prompt_tokens", o.prompt_tokens},
          {"calls_per_chunk", static_cast<double>(o.calls) / static_cast<double>(o.chunks)},
          {"estimated_calls", o.estimated_calls},
          {"entities", o.entities},
          {"relationships", o.relationships},
          {"entity_mentions", o.mentions},
          {"relationship_mentions", o.relationship_mentions},
          {"reports_llm", o.reports_llm},
          {"reports_extractive", o.reports_extractive},
          {"pairs_adjudicated", o.adjudicated},
          {"index_bytes", o.index_bytes},
          {"text_bytes", o.text_bytes},
          {"seconds", o.seconds}};
}

void Print(const Outcome& o, const Outcome* full) {
  std::cout << fmt::format("\n{} ({} chunks; per 1,000 chunks)\n", o.label, o.chunks);
  std::cout << fmt::format("  {:<12}{:>10}{:>16}\n", "kind", "calls", "prompt tokens");
  for (const std::string k : {"extract", "glean", "judge", "summarize", "report", "other"}) {
    if (!o.costs.count(k)) continue;
    const KindCost& c = o.costs.at(k);
    std::cout << fmt::format("  {:<12}{:>10.0f}{:>15.2f}M\n", k, Per1000(c.calls, o.chunks),
                             Per1000(c.prompt_tokens, o.chunks) / 1e6);
  }
  std::cout << fmt::format("  {:<12}{:>10.0f}{:>15.2f}M\n", "all", Per1000(o.calls, o.chunks),
                           Per1000(o.prompt_tokens, o.chunks) / 1e6);
  const double extract =
      o.costs.count("extract") ? static_cast<double>(o.costs.at("extract").calls) : 0;
  const double judge = o.costs.count("judge") ? static_cast<double>(o.costs.at("judge").calls) : 0;
  std::cout << fmt::format(
      "  calls per chunk {:.2f}; judge {:.1f}% of extraction calls; dry run {} calls against {} "
      "({:+.0f}%)\n",
      static_cast<double>(o.calls) / static_cast<double>(o.chunks),
      extract > 0 ? 100.0 * judge / extract : 0.0, o.estimated_calls, o.calls,
      o.calls > 0
          ? 100.0 * static_cast<double>(o.estimated_calls - o.calls) / static_cast<double>(o.calls)
          : 0.0);
  if (full != nullptr) {
    std::cout << fmt::format(
        "  {:.2f}% of the full index's {} calls\n",
        100.0 * static_cast<double>(o.calls) / static_cast<double>(full->calls), full->calls);
    return;
  }
  std::cout << fmt::format(
      "  entities {}, relationships {}; mentions kept: {} entity, {} relationship; pairs judged "
      "{}; reports {} LLM + {} extractive\n",
      o.entities, o.relationships, o.mentions, o.relationship_mentions, o.adjudicated,
      o.reports_llm, o.reports_extractive);
  for (size_t q = 0; q < o.questions.size(); ++q) {
    const LazyQuestion& lq = o.questions[q];
    std::cout << fmt::format(
        "  lazy question {}: reads {} communities; wrote {} reports ({} calls, {:.3f}M prompt "
        "tokens), {} left for later questions\n",
        q + 1, lq.reads, lq.wrote.written, lq.wrote.calls,
        static_cast<double>(lq.wrote.prompt_tokens) / 1e6, lq.wrote.pending);
  }
  std::cout << fmt::format("  index file {:.1f} MB for {:.2f} MB of text ({:.1f}x)\n",
                           static_cast<double>(o.index_bytes) / 1e6,
                           static_cast<double>(o.text_bytes) / 1e6,
                           static_cast<double>(o.index_bytes) / static_cast<double>(o.text_bytes));
}

int Main(int argc, char** argv) {
  bool json_out = false;
  size_t passages = 1000;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      json_out = true;
    } else if (a == "--keep") {
      g_keep = true;
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
      if (only != "passages" && only != "unseen" && only != "book") {
        throw std::runtime_error("--only takes passages, unseen or book");
      }
    } else if (a == "--questions" && i + 1 < argc) {
      g_questions = std::stoi(argv[++i]);
    } else if (a == "--passages" && i + 1 < argc) {
      passages = static_cast<size_t>(std::stoul(argv[++i]));
    } else if (a == "--set" && i + 1 < argc) {
      const std::string kv = argv[++i];
      const auto eq = kv.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--set expects key=value");
      g_settings.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else {
      throw std::runtime_error(
          "usage: index_cost [--passages N] [--json] [--keep] [--questions N] "
          "[--only passages|unseen|book] [--set key=value]...");
    }
  }
  std::map<std::string, json> out;
  auto want = [&only](const char* name) { return only.empty() || only == name; };
  if (want("passages")) {
    const Corpus corpus = MakePassages("passages", passages, 2024, 0, Density{});
    const Corpus added =
        MakePassages("passages", std::max<size_t>(1, passages / 100), 2024, passages, Density{});
    Outcome update;
    const Outcome full = IndexCorpus("passages", corpus, &added, &update);
    out["passages"] = ToJson(full);
    out["update_1pct"] = ToJson(update);
    if (!json_out) {
      Print(full, nullptr);
      Print(update, &full);
    }
  }
  if (want("unseen")) {
    const Corpus unseen = MakePassages("unseen", passages, 77, 0, Density{1.6, 0.3});
    const Outcome other = IndexCorpus("unseen", unseen, nullptr, nullptr);
    out["unseen"] = ToJson(other);
    if (!json_out) Print(other, nullptr);
  }
  if (want("book")) {
    const Corpus book = LoadBook();
    const Outcome replay = IndexCorpus("book", book, nullptr, nullptr);
    out["book"] = ToJson(replay);
    if (!json_out) Print(replay, nullptr);
  }
  if (json_out) {
    json j(out);
    j["settings"] = g_settings;
    std::cout << j.dump(1) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace grag

int main(int argc, char** argv) {
  try {
    return grag::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "index_cost: " << e.what() << "\n";
    return 1;
  }
}
