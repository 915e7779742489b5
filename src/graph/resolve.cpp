// Entity resolution (see include/grag/resolve.h for the four steps).
//
// Names are parsed and compared in resolve_names.cpp, and descriptions read for the other names
// they give an entity in resolve_mentions.cpp; here they are blocked, scored, judged and
// clustered.
#include "grag/resolve.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "grag/lexical_embedder.h"
#include "grag/literal_value.h"
#include "grag/log.h"
#include "grag/parallel.h"
#include "grag/words.h"
#include "resolve_internal.h"

namespace grag {

namespace {

using namespace resolve_internal;  // NOLINT: names, their parsing and comparison

// ---------------------------------------------------------------------------------------------
// Union-find with member lists
// ---------------------------------------------------------------------------------------------

struct Clusters {
  std::vector<size_t> parent;
  std::vector<std::vector<size_t>> members;
  explicit Clusters(size_t n) : parent(n), members(n) {
    for (size_t i = 0; i < n; ++i) {
      parent[i] = i;
      members[i] = {i};
    }
  }
  size_t Find(size_t x) {
    while (parent[x] != x) {
      parent[x] = parent[parent[x]];
      x = parent[x];
    }
    return x;
  }
  void Union(size_t a, size_t b) {
    a = Find(a);
    b = Find(b);
    if (a == b) return;
    if (members[a].size() < members[b].size()) std::swap(a, b);
    parent[b] = a;
    members[a].insert(members[a].end(), members[b].begin(), members[b].end());
    members[b].clear();
    members[b].shrink_to_fit();
  }
};

// ---------------------------------------------------------------------------------------------
// Adjudication
// ---------------------------------------------------------------------------------------------

constexpr std::string_view kAdjudicationFormat =
    "Reply with one JSON object and nothing else: {\"verdicts\": [{\"pair\": <pair number>, "
    "\"same\": true or false, \"reason\": \"<a few words>\"}]} with one verdict for every pair.";

std::string Truncate(std::string_view s, size_t max_chars) {
  if (s.size() <= max_chars) return std::string(s);
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
  return std::string(s.substr(0, cut)) + "...";
}

std::string OneLine(std::string s) {
  for (auto& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

struct Verdict {
  bool same = false;
  std::string reason;
};

// Parses {"verdicts": [...]} (tolerating text around the object). Fills `out` for the pairs it
// finds (1-based numbers up to n); kParse when the reply is unusable or misses pairs.
Status ParseVerdicts(const std::string& content, size_t n, std::map<size_t, Verdict>* out) {
  const auto b = content.find('{');
  const auto e = content.rfind('}');
  if (b == std::string::npos || e == std::string::npos || e < b) {
    return Status::Parse("adjudication reply holds no JSON object");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(content.substr(b, e - b + 1));
  } catch (const std::exception& ex) {
    return Status::Parse(std::string("adjudication reply is not JSON: ") + ex.what());
  }
  const nlohmann::json* list = nullptr;
  if (j.is_object()) {
    for (const char* k : {"verdicts", "results", "pairs", "decisions"}) {
      auto it = j.find(k);
      if (it != j.end() && it->is_array()) {
        list = &*it;
        break;
      }
    }
  }
  if (list == nullptr) return Status::Parse("adjudication reply has no \"verdicts\" array");
  try {
    size_t position = 0;
    for (const auto& v : *list) {
      ++position;
      if (!v.is_object()) continue;
      size_t pair = 0;
      if (auto it = v.find("pair"); it != v.end()) {
        if (it->is_number_integer())
          pair = static_cast<size_t>(std::max<int64_t>(0, it->get<int64_t>()));
        else if (it->is_string())
          pair = static_cast<size_t>(std::atol(it->get<std::string>().c_str()));
      } else {
        pair = position;
      }
      if (pair < 1 || pair > n) continue;
      auto it = v.find("same");
      if (it == v.end()) continue;
      bool same = false;
      if (it->is_boolean())
        same = it->get<bool>();
      else if (it->is_string()) {
        const std::string s = LowerAscii(it->get<std::string>());
        if (s == "true" || s == "yes")
          same = true;
        else if (s == "false" || s == "no")
          same = false;
        else
          continue;
      } else {
        continue;
      }
      Verdict verdict;
      verdict.same = same;
      if (auto r = v.find("reason"); r != v.end() && r->is_string())
        verdict.reason = r->get<std::string>();
      (*out)[pair] = verdict;
    }
  } catch (const std::exception& ex) {
    return Status::Parse(std::string("adjudication reply: ") + ex.what());
  }
  if (out->size() < n) {
    return Status::Parse(fmt::format("adjudication reply answers {} of {} pairs", out->size(), n));
  }
  return Status::Ok();
}

std::string DescribeEntity(const ResolveEntity& e, size_t max_chars) {
  std::string s = "name: " + OneLine(e.name);
  if (!e.type.empty()) s += " | type: " + OneLine(e.type);
  s += " | description: " + (e.description.empty() ? std::string("(none)")
                                                   : OneLine(Truncate(e.description, max_chars)));
  return s;
}

// ---------------------------------------------------------------------------------------------
// The resolver
// ---------------------------------------------------------------------------------------------

struct Candidate {
  uint32_t a = 0, b = 0;  // ranks... no: entity indices, a < b by rank
  PairInfo info;
  double cosine = 0;
  bool has_cosine = false;
  double score = 0;
  uint8_t mention = 0;  // MentionKind: a description links the two
  // A soft conflict not worth a judge: lead modifiers of two common-noun names ("the dead man"
  // / "the old man"), or of a group against one member ("Young Cratchits" / "Peter Cratchit").
  bool weak_soft = false;
};

std::vector<std::string> BlockingKeys(const NameForm& f) {
  std::vector<std::string> keys;
  for (size_t c : f.content) {
    const Token& t = f.tokens[c];
    if (t.number != 0) {
      keys.push_back("n:" + std::to_string(t.number));
      continue;
    }
    if (t.text.size() >= 2) keys.push_back("t:" + Singular(t.text));
    if (t.text.size() >= 4) keys.push_back("p:" + t.text.substr(0, 4));
    if (t.acronym) keys.push_back("a:" + t.text);
    if (const std::string* root = NicknameRoot(t.text)) keys.push_back("t:" + *root);
  }
  if (f.content.size() >= 2) keys.push_back("j:" + f.joined);
  if (f.content.size() == 1) keys.push_back("j:" + f.joined);
  if (!f.acronym.empty()) keys.push_back("a:" + f.acronym);
  for (const auto& ini : f.initials) keys.push_back("a:" + ini);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

struct Prepared {
  std::vector<NameForm> forms;
  // common[i]: a bit per content token of forms[i] (the first 64): a common word of the corpus
  // (written in lower case in some description). generic[i]: every content word is common.
  std::vector<uint64_t> common;
  std::vector<char> generic;
  // proper[i]: a bit per content token: a proper word of the corpus (Corpus::proper); unseen[i]:
  // a word of letters the descriptions never show inside a sentence (Corpus::seen).
  std::vector<uint64_t> proper;
  std::vector<uint64_t> unseen;
  std::vector<size_t> rank;  // rank[i]: position of entity i in the canonical order
  std::vector<Candidate> candidates;
};

// Blocking and name comparison (no model calls).
Prepared Prepare(const ResolveInput& input, const ResolveOptions& options) {
  const size_t n = input.entities.size();
  Prepared p;
  p.forms.resize(n);
  for (size_t i = 0; i < n; ++i) {
    p.forms[i] =
        ParseName(input.entities[i].name.empty() ? input.entities[i].key : input.entities[i].name,
                  input.entities[i].type);
  }
  // The canonical order: independent of the input order.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const auto& a = input.entities[x];
    const auto& b = input.entities[y];
    return std::tie(a.key, a.name, a.type, a.description, a.frequency, a.fresh) <
           std::tie(b.key, b.name, b.type, b.description, b.frequency, b.fresh);
  });
  p.rank.resize(n);
  for (size_t r = 0; r < n; ++r) p.rank[order[r]] = r;

  std::unordered_map<std::string, std::vector<uint32_t>> index;
  for (size_t r = 0; r < n; ++r) {
    const size_t i = order[r];
    for (auto& k : BlockingKeys(p.forms[i])) index[k].push_back(static_cast<uint32_t>(r));
  }
  std::vector<uint64_t> pairs;  // by rank
  for (const auto& [key, list] : index) {
    if (list.size() < 2 || list.size() > options.max_block) continue;
    for (size_t x = 0; x < list.size(); ++x) {
      const size_t ix = order[list[x]];
      for (size_t y = x + 1; y < list.size(); ++y) {
        const size_t iy = order[list[y]];
        if (!input.entities[ix].fresh && !input.entities[iy].fresh) continue;
        if (!TypesCompatible(p.forms[ix], p.forms[iy]) &&
            !TypesConfusable(p.forms[ix], p.forms[iy]))
          continue;
        pairs.push_back(PairKey(list[x], list[y]));
      }
    }
  }
  // Pairs that a description links, by rank.
  std::unordered_map<uint64_t, uint8_t> mentions;
  const Corpus corpus = ReadCorpus(input);
  p.common.assign(n, 0);
  p.generic.assign(n, 0);
  p.proper.assign(n, 0);
  p.unseen.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const NameForm& f = p.forms[i];
    bool all = !f.content.empty();
    for (size_t c = 0; c < f.content.size(); ++c) {
      const Token& t = f.tokens[f.content[c]];
      // A name in capitals makes every short word look like an acronym ("SHOP"): a word the
      // corpus writes in lower case is still a word ("US" and "IT" stay acronyms).
      const bool common = t.number == 0 && t.text.size() >= (t.acronym ? 3 : 2) &&
                          !(t.acronym && IsMentionFunctionWord(t.text)) &&
                          corpus.common_noun.count(Singular(t.text)) > 0;
      if (common && c < 64) p.common[i] |= uint64_t{1} << c;
      if (t.number == 0 && c < 64) {
        const std::string w = Singular(t.text);
        if (corpus.proper.count(w) > 0) p.proper[i] |= uint64_t{1} << c;
        if (!t.acronym && !input.entities[i].description.empty() && corpus.seen.count(w) == 0) {
          p.unseen[i] |= uint64_t{1} << c;
        }
      }
      all = all && common;
    }
    p.generic[i] = all ? 1 : 0;
  }
  for (const auto& [key, kind] : DescriptionMentions(input, options, corpus)) {
    const size_t ix = key >> 32, iy = key & 0xffffffffu;
    if (!input.entities[ix].fresh && !input.entities[iy].fresh) continue;
    if (!TypesCompatible(p.forms[ix], p.forms[iy])) continue;
    const uint64_t rk = PairKey(p.rank[ix], p.rank[iy]);
    mentions[rk] = kind;
    pairs.push_back(rk);
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  // Literal values (dates, numbers, amounts, quantities) are attributes, not things with
  // variant names: "1987" and "12 March 1987", "$4.5 million" and "4.5 million" are different
  // values or one value said two ways, and neither is worth a comparison, let alone a judge.
  // A real model extracts many of them (half of its entities on encyclopedic text), and they
  // share number tokens with one another. Only the same normalised value is one entity.
  {
    std::vector<char> literal(n, 0);
    for (size_t i = 0; i < n; ++i) {
      const ResolveEntity& e = input.entities[i];
      literal[i] = IsLiteralValue(e.name.empty() ? e.key : e.name, e.type) ? 1 : 0;
    }
    std::erase_if(pairs, [&](uint64_t k) {
      return literal[order[k >> 32]] || literal[order[k & 0xffffffffu]];
    });
  }
  p.candidates.resize(pairs.size());
  const size_t workers =
      std::max<size_t>(1, std::min<size_t>(8, std::thread::hardware_concurrency()));
  const size_t chunk = 2048;
  const size_t chunks = (pairs.size() + chunk - 1) / chunk;
  ParallelFor(chunks, workers, [&](size_t c) {
    for (size_t k = c * chunk; k < std::min(pairs.size(), (c + 1) * chunk); ++k) {
      Candidate& cand = p.candidates[k];
      cand.a = static_cast<uint32_t>(order[pairs[k] >> 32]);
      cand.b = static_cast<uint32_t>(order[pairs[k] & 0xffffffffu]);
      cand.info = Compare(p.forms[cand.a], p.forms[cand.b]);
      cand.weak_soft = cand.info.severity == kSoft && cand.info.lead_modifier &&
                       ((p.generic[cand.a] && p.generic[cand.b]) || cand.info.plural_mismatch);
      if (!mentions.empty()) {
        auto it = mentions.find(pairs[k]);
        if (it != mentions.end()) cand.mention = it->second;
      }
    }
  });
  return p;
}

// Whether a judge may join a pair despite its guard: a soft conflict, or different name words
// when a description links the two.
bool Judgeable(const Candidate& c) {
  return c.info.conflict &&
         ((c.info.severity == kSoft && (!c.weak_soft || c.mention != kNoMention)) ||
          (c.info.severity == kNameWords && c.mention != kNoMention));
}

// A soft conflict is adjudicated when the names are at least this similar.
constexpr double kSoftAskName = 0.45;

// Whether the pair goes to the judge whatever its score (given a judge and no merge by score).
bool AlwaysAsk(const Candidate& c) {
  return c.mention != kNoMention || (Judgeable(c) && c.info.name >= kSoftAskName);
}

// Organisations and places are often named without their descriptors ("Delta" for "Delta Air
// Lines"); so may be two names of unknown type. People, events and things are not.
bool DropsDescriptors(const NameForm& a, const NameForm& b) {
  auto org_or_place = [](const std::string& t) {
    return t == "organization" || t == "organisation" || t == "geo" || t == "location" ||
           t == "place" || t == "city" || t == "country" || t == "company";
  };
  return org_or_place(a.type) || org_or_place(b.type) ||
         (GenericType(a.type) && GenericType(b.type));
}

// How a pair without a name conflict may be joined: on its score, only by the judge, or not at
// all (unless a description links the two).
enum Route : uint8_t { kByScore, kByJudge, kNotJoined };

Route RouteOf(const Candidate& c, const Prepared& p) {
  const PairInfo& info = c.info;
  if (info.same_words) {
    // "The FTC" / "FTC" is one name; "The Baby" / "Baby" are common nouns, which in one corpus
    // name different things in different scenes.
    if (p.generic[c.a] || p.generic[c.b]) return kByJudge;
  }
  if (info.a_in_b != info.b_in_a && (info.extra != 0 || info.extra_function)) {
    const size_t longer = info.longer_is_a ? c.a : c.b;
    const size_t shorter = info.longer_is_a ? c.b : c.a;
    const bool extra_common = (info.extra & p.common[longer]) != 0;
    const bool descriptive = extra_common || info.extra_function;
    // A parenthesis often gives another name ("Boy (Ignorance)"): for the judge.
    if (p.forms[longer].aside && descriptive) return kByJudge;
    // The owners against their things ("Poulterers" / "Poulterers' shops"): sometimes one
    // entity in the extraction; for the judge.
    if (info.possessor && descriptive) return kByJudge;
    // A common noun inside a longer description ("shop" / "back-shop", "city" / "City of
    // London", "ghost" / "Ghost of Jacob Marley"): a kind, a part or an owner of it.
    if (p.generic[shorter] && descriptive) return kNotJoined;
    // A name followed by common words names another thing ("Christmas" / "Christmas Day",
    // "Ghost" / "Ghost of Christmas Past"), except that organisations and places drop such
    // words from their names ("Delta Air Lines", "New York City", "United States of America").
    if (info.modifier_containment && descriptive && !DropsDescriptors(p.forms[c.a], p.forms[c.b])) {
      return kNotJoined;
    }
    // Only a given name or a proper modifier ("Jacob Marley" / "Marley") extends a name into
    // the same name; common words or a preposition ("Full Project Gutenberg License", "City of
    // London", "Spirit of Tiny Tim") make it another thing, or the same only in context.
    if (extra_common || info.extra_function) return kByJudge;
  }
  // A modifier containment, a singular against a plural, or two names that each have words the
  // other lacks never merge on the score alone.
  if (info.modifier_containment || info.plural_mismatch || info.both_extra) return kByJudge;
  return kByScore;
}

// Whether two entities are named in one place (either's places unknown: yes).
bool ShareContext(const ResolveEntity& a, const ResolveEntity& b) {
  if (a.contexts.empty() || b.contexts.empty()) return true;
  auto i = a.contexts.begin();
  auto j = b.contexts.begin();
  while (i != a.contexts.end() && j != b.contexts.end()) {
    if (*i == *j) return true;
    if (*i < *j) {
      ++i;
    } else {
      ++j;
    }
  }
  return false;
}

// Whether the longer name of a fit extends the short one only with proper words of the corpus
// ("Jacob Marley" / "Marley": "Jacob" is capitalised inside sentences).
bool ProperExtension(const Candidate& c, const Prepared& p) {
  const size_t longer = c.info.longer_is_a ? c.a : c.b;
  const uint64_t extra = c.info.extra;
  if (extra == 0 || c.info.extra_function || (extra & ~p.proper[longer]) != 0) return false;
  // A possessor is an owner, not a given name ("St. Paul's Churchyard" / "Churchyard").
  const NameForm& lf = p.forms[longer];
  for (size_t k = 0; k < lf.content.size() && k < 64; ++k) {
    if ((extra >> k & 1) != 0 && lf.tokens[lf.content[k]].possessive) return false;
  }
  return true;
}

// Whether a fit of the short name `x` is no other entity: its extra words are a word seen only
// at sentence starts ("Whereat Scrooge") or repeat the short name ("Scrooge Scrooge").
bool SpuriousFit(const Candidate& c, size_t x, const Prepared& p) {
  const size_t longer = c.a == x ? c.b : c.a;
  const uint64_t extra = c.info.extra;
  if (extra == 0) return false;
  if ((extra & p.unseen[longer]) != 0) return true;
  const NameForm& lf = p.forms[longer];
  const NameForm& sf = p.forms[x];
  for (size_t k = 0; k < lf.content.size() && k < 64; ++k) {
    if ((extra >> k & 1) == 0) continue;
    const std::string& w = lf.tokens[lf.content[k]].text;
    bool repeated = false;
    for (size_t s : sf.content) repeated = repeated || sf.tokens[s].text == w;
    if (!repeated) return false;
  }
  return true;
}

double CalibratedCosine(double cosine, double low, double high) {
  if (high <= low) return cosine;
  return std::clamp((cosine - low) / (high - low), 0.0, 1.0);
}

}  // namespace

std::string_view ResolveMethodName(ResolveMethod method) {
  switch (method) {
    case ResolveMethod::kRule:
      return "rule";
    case ResolveMethod::kSimilarity:
      return "similarity";
    case ResolveMethod::kLlm:
      return "llm";
    case ResolveMethod::kUser:
      return "user";
  }
  return "similarity";
}

double NameSimilarity(std::string_view a, std::string_view b) {
  return Compare(ParseName(a, ""), ParseName(b, "")).name;
}

std::optional<std::string> MergeConflict(const ResolveEntity& a, const ResolveEntity& b) {
  return Compare(ParseName(a.name.empty() ? a.key : a.name, a.type),
                 ParseName(b.name.empty() ? b.key : b.name, b.type))
      .conflict;
}

int64_t EstimateAdjudicationCalls(const ResolveInput& input, const ResolveOptions& options) {
  const Prepared p = Prepare(input, options);
  const double total_w = options.name_weight + options.embedding_weight;
  int64_t band = 0;
  for (const auto& c : p.candidates) {
    if (c.info.conflict && !Judgeable(c)) continue;
    if (AlwaysAsk(c)) {
      ++band;
      continue;
    }
    if (!c.info.conflict && RouteOf(c, p) == kNotJoined) continue;
    // The best the description could add: a cosine of 1.
    const double best =
        total_w > 0 ? (options.name_weight * c.info.name + options.embedding_weight) / total_w
                    : c.info.name;
    if (best >= options.adjudicate_threshold || c.info.name >= options.adjudicate_name_threshold)
      ++band;
  }
  const auto batch = static_cast<int64_t>(std::max<size_t>(1, options.adjudication_batch));
  const int64_t calls = (band + batch - 1) / batch;
  return options.max_judge_calls >= 0
             ? std::min(calls, std::max<int64_t>(1, options.max_judge_calls))
             : calls;
}

namespace {

struct BatchOutcome {
  Status error;                        // a transport failure (not a bad reply)
  std::map<size_t, Verdict> verdicts;  // 1-based pair number -> verdict
  int64_t calls = 0;
};

BatchOutcome Adjudicate(ChatModel& model, const ResolveInput& input, const ResolveOptions& options,
                        const std::vector<const Candidate*>& batch) {
  BatchOutcome out;
  std::string pairs;
  for (size_t k = 0; k < batch.size(); ++k) {
    pairs +=
        fmt::format("Pair {}:\n  A: {}\n  B: {}\n", k + 1,
                    DescribeEntity(input.entities[batch[k]->a], options.max_description_chars),
                    DescribeEntity(input.entities[batch[k]->b], options.max_description_chars));
  }
  ChatRequest req;
  req.role = ChatRole::kResolve;
  req.messages.push_back({"user", FillPrompt(options.adjudication_prompt, {{"pairs", pairs}})});
  req.temperature = 0.0;
  req.json_mode = true;
  req.max_tokens = static_cast<int>(64 + 48 * batch.size());
  const size_t n = batch.size();
  std::string rejected;
  req.validator = [n, &rejected](const std::string& content) {
    std::map<size_t, Verdict> v;
    Status st = ParseVerdicts(content, n, &v);
    if (!st.ok()) rejected = content;
    return st;
  };
  auto reply = model.Chat(req);
  ++out.calls;
  if (!reply.ok() && reply.status().code() == ErrorCode::kParse) {
    const std::string first_rejected = rejected;
    ChatRequest retry = req;
    if (!first_rejected.empty()) {
      retry.messages.push_back({"assistant", first_rejected});
      retry.messages.push_back(
          {"user", "That reply was not usable. " + std::string(kAdjudicationFormat)});
    }
    rejected.clear();
    reply = model.Chat(retry);
    ++out.calls;
    if (!reply.ok() && reply.status().code() == ErrorCode::kParse) {
      // Keep whatever verdicts the last bad reply holds; the missing pairs stay apart.
      const std::string& last = rejected.empty() ? first_rejected : rejected;
      std::map<size_t, Verdict> partial;
      (void)ParseVerdicts(last, n, &partial);
      out.verdicts = std::move(partial);
      return out;
    }
  }
  if (!reply.ok()) {
    out.error = reply.status();
    return out;
  }
  (void)ParseVerdicts(reply->content, n, &out.verdicts);
  return out;
}

// One resolution run: the candidate pairs, scored, banded, judged and clustered, one step per
// method, each reading and updating what the steps before it decided.
class Resolution {
 public:
  Resolution(const ResolveInput& input, const ResolveOptions& options, EmbeddingModel* embedder,
             ChatModel* judge)
      : input_(input),
        options_(options),
        embedder_(embedder),
        judge_(judge),
        n_(input.entities.size()),
        llm_(judge != nullptr),
        merge_t_(llm_ ? options.merge_threshold : options.no_llm_merge_threshold),
        adj_t_(llm_ ? options.adjudicate_threshold : merge_t_),
        low_t_(std::min({merge_t_, adj_t_, options.adjudicate_threshold})),
        nw_(std::max(0.0, options.name_weight)),
        ew_(embedder != nullptr ? std::max(0.0, options.embedding_weight) : 0.0) {}

  Result<ResolveResult> Run() {
    GRAG_RETURN_IF_ERROR(CheckLinks());
    for (const auto& e : input_.entities) result_.stats.fresh += e.fresh ? 1 : 0;
    prep_ = Prepare(input_, options_);
    result_.stats.pairs_compared = static_cast<int64_t>(cands().size());
    if (ew_ > 0) GRAG_RETURN_IF_ERROR(ScoreWithDescriptions());
    for (auto& c : cands()) {
      if (!c.has_cosine) c.score = c.info.name;
    }
    Band();
    FindFits();
    if (llm_) {
      SendFitConflictsToTheJudge();
      CapTheJudge();
      GRAG_RETURN_IF_ERROR(AskTheJudge());
    }
    for (size_t k = 0; k < cands().size(); ++k) {
      if (decision_[k] == kMerge && methods_[k] == ResolveMethod::kLlm &&
          cands()[k].info.conflict) {
        approved_.insert(PairKey(cands()[k].a, cands()[k].b));
      }
    }
    if (llm_) {
      KeepJudgedFitConflictsApart();
    } else {
      JoinShortNamesToTheirBestFit();
    }
    Cluster();
    ChooseCanonical();
    return std::move(result_);
  }

 private:
  enum Decision : uint8_t { kApart, kMerge, kAsk };

  std::vector<Candidate>& cands() { return prep_.candidates; }

  Status CheckLinks() const {
    auto check = [this](const std::vector<std::pair<size_t, size_t>>& v,
                        const char* what) -> Status {
      for (const auto& [a, b] : v) {
        if (a >= n_ || b >= n_) {
          return Status::InvalidArgument(fmt::format(
              "{}: entity index {} out of range ({} entities)", what, std::max(a, b), n_));
        }
      }
      return Status::Ok();
    };
    GRAG_RETURN_IF_ERROR(check(input_.must_link, "must_link"));
    GRAG_RETURN_IF_ERROR(check(input_.cannot_link, "cannot_link"));
    for (const auto& l : input_.prior_links) {
      if (l.a >= n_ || l.b >= n_)
        return Status::InvalidArgument("prior link: entity index out of range");
    }
    return Status::Ok();
  }

  // Embeddings of the descriptions in pairs that could reach a band, and each such pair's score
  // from its name similarity and description cosine.
  Status ScoreWithDescriptions() {
    std::vector<char> need(n_, 0);
    for (const auto& c : cands()) {
      if (c.info.conflict && !(llm_ && Judgeable(c))) continue;
      if ((nw_ * c.info.name + ew_) / (nw_ + ew_) < low_t_ && !(llm_ && AlwaysAsk(c))) continue;
      need[c.a] = need[c.b] = 1;
    }
    std::vector<size_t> ids;
    for (size_t i = 0; i < n_; ++i) {
      if (need[i] && !input_.entities[i].description.empty()) ids.push_back(i);
    }
    std::sort(ids.begin(), ids.end(),
              [&](size_t x, size_t y) { return prep_.rank[x] < prep_.rank[y]; });
    std::vector<std::vector<float>> vecs(n_);
    const size_t batch = std::max<size_t>(1, options_.embedding_batch);
    for (size_t s = 0; s < ids.size(); s += batch) {
      std::vector<std::string> texts;
      for (size_t k = s; k < std::min(ids.size(), s + batch); ++k) {
        texts.push_back(
            Truncate(input_.entities[ids[k]].description, options_.max_embedding_chars));
      }
      auto r = embedder_->Embed(texts);
      if (!r.ok()) return r.status().WithContext("entity resolution: embedding descriptions");
      if (r->vectors.size() != texts.size()) {
        return Status::Internal(
            "entity resolution: the embedder returned a wrong number of vectors");
      }
      for (size_t k = 0; k < texts.size(); ++k) vecs[ids[s + k]] = std::move(r->vectors[k]);
      result_.stats.embedded += static_cast<int64_t>(texts.size());
    }
    double low = options_.cosine_low, high = options_.cosine_high;
    if (low < 0 || high < 0) {
      const bool lexical = IsLexicalEmbeddingModel(embedder_->model());
      low = lexical ? 0.05 : 0.3;
      high = lexical ? 0.4 : 0.85;
    }
    for (auto& c : cands()) {
      const auto& va = vecs[c.a];
      const auto& vb = vecs[c.b];
      if (va.empty() || vb.empty() || va.size() != vb.size()) continue;
      double dot = 0, na = 0, nb = 0;
      for (size_t k = 0; k < va.size(); ++k) {
        dot += static_cast<double>(va[k]) * vb[k];
        na += static_cast<double>(va[k]) * va[k];
        nb += static_cast<double>(vb[k]) * vb[k];
      }
      if (na <= 0 || nb <= 0) continue;
      c.cosine = dot / std::sqrt(na * nb);
      c.has_cosine = true;
      c.score = (nw_ * c.info.name + ew_ * CalibratedCosine(c.cosine, low, high)) / (nw_ + ew_);
    }
    return Status::Ok();
  }

  void Ask(size_t k) {
    decision_[k] = kAsk;
    ask_index_.push_back(k);
  }

  // Each pair merged on its score, sent to the judge, or left apart.
  void Band() {
    decision_.assign(cands().size(), kApart);
    reasons_.assign(cands().size(), "");
    methods_.assign(cands().size(), ResolveMethod::kSimilarity);
    for (size_t k = 0; k < cands().size(); ++k) {
      const auto& c = cands()[k];
      if (c.info.conflict) {
        if (llm_ && Judgeable(c) && (AlwaysAsk(c) || c.score >= adj_t_)) {
          Ask(k);
        } else if (c.score >= low_t_) {
          ++result_.stats.guarded;
        }
        continue;
      }
      const Route route = RouteOf(c, prep_);
      if (c.score >= merge_t_ && route == kByScore) {
        decision_[k] = kMerge;
        if (c.info.name >= 0.999 && c.has_cosine) {
          methods_[k] = ResolveMethod::kRule;
          reasons_[k] = fmt::format("same name, descriptions agree (score {:.2f})", c.score);
        } else {
          reasons_[k] = fmt::format("similar (name {:.2f}, score {:.2f})", c.info.name, c.score);
        }
      } else if (llm_ && (AlwaysAsk(c) || (route != kNotJoined &&
                                           (c.score >= adj_t_ ||
                                            c.info.name >= options_.adjudicate_name_threshold)))) {
        Ask(k);
      }
    }
  }

  // Two entities whose names conflict, unless the judge joined that very pair: its name
  // conflict (a soft one, or different words of names a description links) no longer keeps
  // their clusters apart.
  bool Conflicting(size_t u, size_t v) const {
    return Compare(prep_.forms[u], prep_.forms[v]).conflict.has_value() &&
           approved_.count(PairKey(u, v)) == 0;
  }

  // fits_[x]: the longer names (other entity, candidate) that short name x fits inside.
  void FindFits() {
    fits_.assign(n_, {});
    for (size_t k = 0; k < cands().size(); ++k) {
      const auto& c = cands()[k];
      if (c.info.conflict || (c.score < std::min(adj_t_, options_.adjudicate_threshold) &&
                              c.info.name < options_.adjudicate_name_threshold)) {
        continue;
      }
      const size_t ca = prep_.forms[c.a].content.size(), cb = prep_.forms[c.b].content.size();
      if (c.info.a_in_b && !c.info.b_in_a && ca < cb + (prep_.forms[c.a].acronym.empty() ? 0 : 9)) {
        fits_[c.a].push_back({c.b, k});
      } else if (c.info.b_in_a && !c.info.a_in_b) {
        fits_[c.b].push_back({c.a, k});
      }
    }
    for (auto& f : fits_) {
      std::sort(f.begin(), f.end(), [&](const auto& u, const auto& v) {
        return prep_.rank[u.first] < prep_.rank[v.first];
      });
    }
  }

  // A short name that fits several entities that stay apart joins none of them. Without a
  // judge: all of them stay apart. With one: the judge sees each such pair (none is joined on
  // its score alone), and the short name stays apart only when the judge joins it to two
  // entities that must stay apart.
  bool FitConflict(const std::vector<std::pair<size_t, size_t>>& f, bool only_merged) const {
    if (f.size() > options_.max_fits) return true;
    for (size_t u = 0; u < f.size(); ++u) {
      if (only_merged && decision_[f[u].second] != kMerge) continue;
      for (size_t v = u + 1; v < f.size(); ++v) {
        if (only_merged && decision_[f[v].second] != kMerge) continue;
        if (Conflicting(f[u].first, f[v].first)) return true;
      }
    }
    return false;
  }

  void SendFitConflictsToTheJudge() {
    for (size_t x = 0; x < n_; ++x) {
      if (fits_[x].size() < 2 || !FitConflict(fits_[x], false)) continue;
      for (const auto& [other, k] : fits_[x]) {
        (void)other;
        if (decision_[k] != kMerge) continue;
        Ask(k);
      }
    }
    // Candidate order: batches independent of input order.
    std::sort(ask_index_.begin(), ask_index_.end());
  }

  // The judge's calls are capped (ResolveOptions::max_judge_calls): on a realistic extraction
  // the pairs grow faster than the duplicates. The most similar pairs go first (they are the
  // likely duplicates), then those of the most frequent names; the ones left stay apart, as
  // without a judge. Logged, with how many of them are two names seen in one chunk each (a
  // verdict on those moves a mention or two). Putting such pairs last lost more right merges
  // on the book replay than it saved (bench/RESULTS.md).
  void CapTheJudge() {
    if (ask_index_.empty() || options_.max_judge_calls < 0) return;
    const size_t bs = std::max<size_t>(1, options_.adjudication_batch);
    const size_t room = static_cast<size_t>(std::max<int64_t>(1, options_.max_judge_calls)) * bs;
    std::vector<size_t> judged = ask_index_, by_rule;
    auto single = [&](size_t k) {
      const ResolveEntity& ea = input_.entities[cands()[k].a];
      const ResolveEntity& eb = input_.entities[cands()[k].b];
      return ea.frequency <= 1 && eb.frequency <= 1 && ea.contexts.size() == 1 &&
             eb.contexts.size() == 1;
    };
    if (judged.size() > room) {
      auto weight = [&](size_t k) {
        return std::min(input_.entities[cands()[k].a].frequency,
                        input_.entities[cands()[k].b].frequency);
      };
      std::stable_sort(judged.begin(), judged.end(), [&](size_t x, size_t y) {
        if (cands()[x].score != cands()[y].score) return cands()[x].score > cands()[y].score;
        return weight(x) > weight(y);
      });
      by_rule.assign(judged.begin() + static_cast<std::ptrdiff_t>(room), judged.end());
      judged.resize(room);
      std::sort(judged.begin(), judged.end());
      for (size_t k : by_rule) result_.stats.not_judged_single += single(k) ? 1 : 0;
      result_.stats.not_judged_capped = static_cast<int64_t>(by_rule.size());
    }
    // Without a judge these pairs stay apart: the ones that could merge on their score alone
    // were merged above, and those here that score higher are short names fitting several
    // entities, which stay apart without a judge.
    for (size_t k : by_rule) decision_[k] = kApart;
    if (!by_rule.empty()) {
      Log(LogLevel::kInfo, "resolve",
          fmt::format("the judge's cap of {} calls (resolution.max_judge_share) left {} "
                      "candidate pairs apart unjudged ({} of them of two names seen in one chunk "
                      "each)",
                      std::max<int64_t>(1, options_.max_judge_calls), by_rule.size(),
                      result_.stats.not_judged_single));
    }
    ask_index_ = std::move(judged);
  }

  // Adjudication: batches in candidate order, which is the canonical rank order.
  Status AskTheJudge() {
    if (ask_index_.empty()) return Status::Ok();
    std::vector<const Candidate*> ask;
    for (size_t k : ask_index_) ask.push_back(&cands()[k]);
    const size_t bs = std::max<size_t>(1, options_.adjudication_batch);
    const size_t batches = (ask.size() + bs - 1) / bs;
    std::vector<BatchOutcome> outcomes(batches);
    ParallelFor(batches, static_cast<size_t>(std::max(1, options_.llm_concurrency)), [&](size_t b) {
      std::vector<const Candidate*> batch(
          ask.begin() + static_cast<std::ptrdiff_t>(b * bs),
          ask.begin() + static_cast<std::ptrdiff_t>(std::min(ask.size(), (b + 1) * bs)));
      try {
        outcomes[b] = Adjudicate(*judge_, input_, options_, batch);
      } catch (const std::exception& ex) {
        outcomes[b].error = Status::Internal(std::string("entity resolution: ") + ex.what());
      }
    });
    for (size_t b = 0; b < batches; ++b) {
      result_.stats.llm_calls += outcomes[b].calls;
      if (!outcomes[b].error.ok()) {
        return outcomes[b].error.WithContext("entity resolution: adjudication");
      }
    }
    result_.stats.adjudicated = static_cast<int64_t>(ask.size());
    for (size_t q = 0; q < ask.size(); ++q) {
      const size_t k = ask_index_[q];
      const auto& verdicts = outcomes[q / bs].verdicts;
      auto it = verdicts.find(q % bs + 1);
      if (it != verdicts.end() && it->second.same) {
        decision_[k] = kMerge;
        methods_[k] = ResolveMethod::kLlm;
        reasons_[k] =
            it->second.reason.empty() ? "the LLM judged them the same" : it->second.reason;
      } else {
        decision_[k] = kApart;
      }
    }
    return Status::Ok();
  }

  void KeepJudgedFitConflictsApart() {
    for (size_t x = 0; x < n_; ++x) {
      auto& f = fits_[x];
      if (f.size() < 2 || !FitConflict(f, true)) continue;
      for (const auto& [other, k] : f) {
        (void)other;
        if (decision_[k] == kMerge) ++result_.stats.guarded;
        decision_[k] = kApart;
      }
    }
  }

  // Without a judge, a short name whose fits do not firmly conflict with one another (an age
  // word or an "X of Y" extension is a soft conflict: "Old Jacob Marley", "Ghost of Jacob
  // Marley") joins its best fit: the fit whose extra words are proper words, on the name
  // alone, highest score first, then the most frequent ("Marley" -> "Jacob Marley"). Fits
  // that firmly conflict ("Smith": John and Jane Smith) keep the short name apart from all.
  // A fit whose extra words the extractor glued on ("Whereat Scrooge": a word seen only at a
  // sentence start; "Scrooge Scrooge": the short name again) is not another entity.
  void JoinShortNamesToTheirBestFit() {
    for (size_t x = 0; x < n_; ++x) {
      auto& f = fits_[x];
      if (f.empty()) continue;
      std::vector<std::pair<size_t, size_t>> real;
      for (const auto& fit : f) {
        if (!SpuriousFit(cands()[fit.second], x, prep_)) real.push_back(fit);
      }
      bool hard = real.size() > options_.max_fits;
      for (size_t u = 0; u < real.size() && !hard; ++u) {
        for (size_t v = u + 1; v < real.size() && !hard; ++v) {
          hard = Compare(prep_.forms[real[u].first], prep_.forms[real[v].first]).severity >=
                 kNameWords;
        }
      }
      if (hard) {
        for (const auto& [other, k] : f) {
          (void)other;
          if (decision_[k] == kMerge) ++result_.stats.guarded;
          decision_[k] = kApart;
        }
        continue;
      }
      if (prep_.generic[x]) continue;
      size_t best = cands().size(), best_other = 0;
      for (const auto& [other, k] : real) {
        if (!ProperExtension(cands()[k], prep_) || RouteOf(cands()[k], prep_) != kByScore) {
          continue;
        }
        if (!ShareContext(input_.entities[x], input_.entities[other])) continue;
        const bool better =
            best == cands().size() || cands()[k].score > cands()[best].score ||
            (cands()[k].score == cands()[best].score &&
             (input_.entities[other].frequency > input_.entities[best_other].frequency ||
              (input_.entities[other].frequency == input_.entities[best_other].frequency &&
               prep_.rank[other] < prep_.rank[best_other])));
        if (better) {
          best = k;
          best_other = other;
        }
      }
      if (best == cands().size() || decision_[best] == kMerge) continue;
      decision_[best] = kMerge;
      reasons_[best] = fmt::format("a short name's best fit (name {:.2f}, score {:.2f})",
                                   cands()[best].info.name, cands()[best].score);
    }
  }

  // Clusters: user links, prior links, then new links best first; a link is refused when it
  // would put a cannot-link pair, or two conflicting names, in one cluster.
  void Cluster() {
    clusters_ = Clusters(n_);
    Clusters& cl = clusters_;
    std::unordered_set<uint64_t> cannot;
    for (const auto& [a, b] : input_.cannot_link) cannot.insert(PairKey(a, b));
    auto crosses_cannot = [&](size_t a, size_t b) {
      if (cannot.empty()) return false;
      for (size_t u : cl.members[cl.Find(a)]) {
        for (size_t v : cl.members[cl.Find(b)]) {
          if (cannot.count(PairKey(u, v))) return true;
        }
      }
      return false;
    };
    auto ordered_pairs = [&](std::vector<std::pair<size_t, size_t>> v) {
      for (auto& p : v) {
        if (prep_.rank[p.first] > prep_.rank[p.second]) std::swap(p.first, p.second);
      }
      std::sort(v.begin(), v.end(), [&](const auto& x, const auto& y) {
        return std::make_pair(prep_.rank[x.first], prep_.rank[x.second]) <
               std::make_pair(prep_.rank[y.first], prep_.rank[y.second]);
      });
      return v;
    };
    for (const auto& [a, b] : ordered_pairs(input_.must_link)) {
      if (cl.Find(a) != cl.Find(b) && !crosses_cannot(a, b)) cl.Union(a, b);
    }
    {
      std::vector<std::pair<size_t, size_t>> prior;
      for (const auto& l : input_.prior_links) prior.push_back({l.a, l.b});
      for (const auto& [a, b] : ordered_pairs(prior)) {
        if (cl.Find(a) != cl.Find(b) && !crosses_cannot(a, b)) cl.Union(a, b);
      }
    }
    std::vector<size_t> merges;
    for (size_t k = 0; k < cands().size(); ++k) {
      if (decision_[k] == kMerge) merges.push_back(k);
    }
    std::sort(merges.begin(), merges.end(), [&](size_t x, size_t y) {
      if (cands()[x].score != cands()[y].score) return cands()[x].score > cands()[y].score;
      return x < y;  // candidates are in rank order
    });
    for (size_t k : merges) {
      const auto& c = cands()[k];
      const size_t ra = cl.Find(c.a), rb = cl.Find(c.b);
      if (ra == rb) continue;
      bool blocked = crosses_cannot(c.a, c.b);
      for (size_t u : cl.members[ra]) {
        if (blocked) break;
        for (size_t v : cl.members[rb]) {
          if ((u == c.a && v == c.b) || (u == c.b && v == c.a)) continue;
          if (Conflicting(u, v)) {
            blocked = true;
            break;
          }
        }
      }
      if (blocked) {
        ++result_.stats.guarded;
        continue;
      }
      cl.Union(c.a, c.b);
      ResolveLink link;
      link.a = prep_.rank[c.a] < prep_.rank[c.b] ? c.a : c.b;
      link.b = link.a == c.a ? c.b : c.a;
      link.score = c.score;
      link.method = methods_[k];
      link.reason = reasons_[k];
      result_.links.push_back(std::move(link));
    }
    result_.stats.merged = static_cast<int64_t>(result_.links.size());
  }

  // Each cluster's canonical member: the most complete spelling among the reasonably frequent.
  void ChooseCanonical() {
    Clusters& cl = clusters_;
    std::vector<size_t> canonical(n_, 0);
    for (size_t r = 0; r < n_; ++r) {
      if (cl.Find(r) != r) continue;
      const auto& members = cl.members[r];
      int64_t max_freq = 0;
      for (size_t m : members) max_freq = std::max(max_freq, input_.entities[m].frequency);
      const int64_t floor = std::max<int64_t>(1, max_freq / 4);
      size_t best = members[0];
      auto better = [&](size_t x, size_t y) {  // is x a better canonical than y?
        const auto& ex = input_.entities[x];
        const auto& ey = input_.entities[y];
        const bool fx = ex.frequency >= floor || max_freq == 0,
                   fy = ey.frequency >= floor || max_freq == 0;
        if (fx != fy) return fx;
        const size_t tx = prep_.forms[x].content.size(), ty = prep_.forms[y].content.size();
        if (tx != ty) return tx > ty;
        if (prep_.forms[x].words != prep_.forms[y].words)
          return prep_.forms[x].words > prep_.forms[y].words;
        if (ex.frequency != ey.frequency) return ex.frequency > ey.frequency;
        return prep_.rank[x] < prep_.rank[y];
      };
      for (size_t m : members) {
        if (better(m, best)) best = m;
      }
      for (size_t m : members) canonical[m] = best;
    }
    result_.canonical = std::move(canonical);
  }

  const ResolveInput& input_;
  const ResolveOptions& options_;
  EmbeddingModel* embedder_;
  ChatModel* judge_;
  const size_t n_;
  const bool llm_;
  const double merge_t_, adj_t_, low_t_;  // thresholds: merge, ask the judge, lowest band
  const double nw_, ew_;                  // weights of name similarity and description cosine
  Prepared prep_;
  ResolveResult result_;
  std::vector<uint8_t> decision_;  // per candidate: a Decision
  std::vector<std::string> reasons_;
  std::vector<ResolveMethod> methods_;
  std::vector<size_t> ask_index_;                             // candidates for the judge
  std::unordered_set<uint64_t> approved_;                     // conflicts the judge joined
  std::vector<std::vector<std::pair<size_t, size_t>>> fits_;  // short name -> (other, cand)
  Clusters clusters_{0};
};

}  // namespace

Result<ResolveResult> ResolveEntities(const ResolveInput& input, const ResolveOptions& options,
                                      EmbeddingModel* embedder, ChatModel* adjudicator) {
  try {
    return Resolution(input, options, embedder, adjudicator).Run();
  } catch (const std::exception& ex) {
    return Status::Internal(std::string("entity resolution: ") + ex.what());
  }
}

}  // namespace grag
