// Entity resolution: names that one entity's description gives another (resolve_internal.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grag/resolve.h"
#include "grag/words.h"
#include "resolve_internal.h"

namespace grag::resolve_internal {

// ---------------------------------------------------------------------------------------------
// Description mentions: entity A's description names entity B ("PHANTOM, also referred to as
// the Ghost of Christmas Yet to Come"; "Scrooge's clerk, later identified as Bob Cratchit").
// Names that share no word are then still compared, and only the judge may join them. Every
// entity name is a key of a hash map; each description's word n-grams are looked up in it, so
// the cost is linear in the description text.
// ---------------------------------------------------------------------------------------------

// Splits text into folded words with their possessive marks, clause boundaries and sentence
// numbers (at most max_words words).
std::vector<DescWord> DescWords(const std::string& text, size_t max_words) {
  std::vector<DescWord> out;
  std::string cur;
  bool cur_lower = true, cur_ascii = true, pending_boundary = false, pending_paren = false;
  uint32_t sentence = 0;
  bool pending_sentence = false;
  auto flush = [&](bool possessive) {
    if (cur.empty()) return;
    DescWord w;
    if (cur_ascii) {
      w.text = LowerAscii(cur);
    } else {
      w.text = Fold(cur);
      w.text.erase(std::remove(w.text.begin(), w.text.end(), ' '), w.text.end());
    }
    w.possessive = possessive;
    w.lower = cur_lower && std::any_of(cur.begin(), cur.end(), IsLowerAscii);
    w.capital = IsUpperAscii(cur[0]) && !out.empty() && !pending_sentence;
    if (pending_sentence) {
      ++sentence;
      pending_sentence = false;
    }
    w.boundary = pending_boundary;
    w.paren = pending_paren;
    w.sentence = sentence;
    pending_boundary = pending_paren = false;
    out.push_back(std::move(w));
    cur.clear();
    cur_lower = cur_ascii = true;
  };
  size_t i = 0;
  while (i < text.size() && out.size() < max_words) {
    size_t len = 1, alen = 0;
    if (IsWordByte(text, i, &len)) {
      for (size_t k = i; k < i + len; ++k) {
        if (IsUpperAscii(text[k])) cur_lower = false;
        if (static_cast<unsigned char>(text[k]) >= 0x80) cur_ascii = false;
      }
      cur.append(text, i, len);
      i += len;
      continue;
    }
    if (IsApostrophe(text, i, &alen)) {
      const Apostrophe a = ClassifyApostrophe(text, i, alen, cur, &i);
      if (a != Apostrophe::kInside) flush(a == Apostrophe::kPossessive);
      continue;
    }
    const char c = text[i];
    const std::string_view prev =
        out.empty() ? std::string_view() : std::string_view(out.back().text);
    flush(false);
    if (c == ',' || c == ';' || c == ':' || c == '(' || c == ')' || c == '[' || c == ']' ||
        c == '\n') {
      pending_boundary = true;
      if (c == '(') pending_paren = true;
    } else if (c == '.' || c == '!' || c == '?') {
      const bool space_after = i + 1 >= text.size() || text[i + 1] == ' ' || text[i + 1] == '\n';
      const std::string_view last =
          out.empty() ? std::string_view() : std::string_view(out.back().text);
      (void)prev;
      // "Mr. Scrooge", "i.e. the", "St. Paul": an abbreviation's dot ends nothing.
      const bool abbreviation = c == '.' && (last.size() <= 2 || HonorificGender(last) != 0);
      if (space_after && !abbreviation) {
        pending_boundary = true;
        pending_sentence = true;
      }
    }
    i += len;
  }
  flush(false);
  return out;
}

bool IsMentionFunctionWord(std::string_view w) {
  static const std::unordered_set<std::string_view> k = {
      "of",     "in",     "on",    "at",    "to",    "for",   "by",    "with",  "from", "and",
      "or",     "who",    "which", "that",  "whose", "whom",  "is",    "was",   "are",  "were",
      "has",    "had",    "have",  "as",    "but",   "when",  "where", "while", "its",  "his",
      "her",    "their",  "he",    "she",   "it",    "they",  "the",   "a",     "an",   "after",
      "before", "during", "since", "until", "into",  "about", "than",  "not",   "also", "now"};
  return k.count(w) > 0;
}

// Phrases that make the name after them another name of the entity described.
const std::vector<std::vector<std::string_view>>& IdentityPhrases() {
  static const std::vector<std::vector<std::string_view>> k = {{"known", "as"},
                                                               {"referred", "to", "as"},
                                                               {"refers", "to"},
                                                               {"refer", "to"},
                                                               {"referring", "to"},
                                                               {"identified", "as"},
                                                               {"another", "name", "for"},
                                                               {"other", "name", "for"},
                                                               {"nickname", "for"},
                                                               {"called"},
                                                               {"named"},
                                                               {"alias"},
                                                               {"aka"},
                                                               {"a", "k", "a"},
                                                               {"i", "e"},
                                                               {"namely"},
                                                               {"renamed", "itself"},
                                                               {"renamed", "to"},
                                                               {"renamed"},
                                                               {"formerly"},
                                                               {"short", "for"},
                                                               {"stands", "for"},
                                                               {"abbreviation", "for"},
                                                               {"acronym", "for"},
                                                               {"official", "name", "of"},
                                                               {"same", "as"},
                                                               {"described", "as"},
                                                               {"better", "known", "as"},
                                                               {"otherwise", "known", "as"},
                                                               {"is", "actually"},
                                                               {"in", "fact"}};
  return k;
}

bool IsNameCue(std::string_view w) {
  return w == "title" || w == "name" || w == "nickname" || w == "epithet" || w == "alias" ||
         w == "moniker" || w == "pseudonym" || w == "byname" || w == "sobriquet";
}

// Whether the mention starting at word s follows an identity phrase (skipping articles,
// honorifics and a possessor: "refers to the Cratchit family's Christmas dinner"), the first
// copula of the first sentence ("Old Joe is a grey-haired rascal"), a "(", or "to"/"for"/"of"
// after a naming cue ("a title given by Bob to Mr. Scrooge").
bool IdentityMention(const std::vector<DescWord>& w, size_t s, size_t first_copula) {
  if (w[s].paren) return true;
  bool possessor = false;
  size_t q = s;
  for (int steps = 0; steps < 6 && q > 0 && !w[q].boundary; ++steps) {
    const size_t p = q - 1;  // a phrase would end here
    for (const auto& ph : IdentityPhrases()) {
      if (ph.size() > p + 1) continue;
      bool ok = true;
      for (size_t k = 0; k < ph.size() && ok; ++k) {
        const size_t at = p + 1 - ph.size() + k;
        ok = w[at].text == ph[k] && (k == 0 || !w[at].boundary);
      }
      if (ok) return true;
    }
    if (p == first_copula) return true;
    if ((w[p].text == "to" || w[p].text == "for" || w[p].text == "of") && p > 0) {
      for (size_t b = p; b-- > 0 && p - b <= 12;) {
        if (IsNameCue(w[b].text)) return true;
        if (w[b].boundary) break;
      }
    }
    const bool skippable = IsArticle(w[p].text) ||
                           (HonorificGender(w[p].text) != 0 && !w[p].possessive) ||
                           w[p].possessive || (possessor && steps < 5);
    if (w[p].possessive) possessor = true;
    if (!skippable) return false;
    q = p;
  }
  return false;
}

// Whether the mention starting at word s is the object of a preposition ("a bridge in the
// market-town", "any nation other than the United States"): a relation, not another name.
bool AfterPreposition(const std::vector<DescWord>& w, size_t s) {
  static const std::unordered_set<std::string_view> k = {
      "in",      "at",      "on",      "of",     "by",     "from",    "to",      "for",
      "with",    "than",    "near",    "into",   "onto",   "through", "across",  "within",
      "under",   "over",    "between", "among",  "around", "behind",  "beyond",  "toward",
      "towards", "upon",    "about",   "during", "after",  "before",  "outside", "inside",
      "without", "against", "along",   "beside", "via",    "like"};
  size_t q = s;
  while (q > 0 && !w[q].boundary &&
         (IsArticle(w[q - 1].text) || w[q - 1].text == "this" || w[q - 1].text == "that" ||
          w[q - 1].text == "its" || w[q - 1].text == "his" || w[q - 1].text == "her" ||
          w[q - 1].text == "their")) {
    --q;
  }
  return q > 0 && !w[q].boundary && k.count(w[q - 1].text) > 0;
}

// The mention key of a name: its folded words without leading articles and honorifics.
std::vector<DescWord> NameWords(const std::string& name) {
  auto w = DescWords(name, 16);
  size_t b = 0;
  while (b + 1 < w.size() && !w[b].possessive &&
         (IsArticle(w[b].text) || HonorificGender(w[b].text) != 0)) {
    ++b;
  }
  w.erase(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(b));
  return w;
}

std::string JoinWords(const std::vector<DescWord>& w, size_t from, size_t to) {
  std::string s;
  for (size_t k = from; k < to; ++k) {
    if (k > from) s += ' ';
    s += w[k].text;
  }
  return s;
}

// Pairs (entity indices, a < b) whose descriptions link them, with the kind of link.
constexpr size_t kMaxDescriptionWords = 400;  // of each description, for mentions and common words

Corpus ReadCorpus(const ResolveInput& input) {
  Corpus c;
  const size_t n = input.entities.size();
  c.desc.resize(n);
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> uses;  // lower, capitalised
  for (size_t i = 0; i < n; ++i) {
    if (input.entities[i].description.empty()) continue;
    c.desc[i] = DescWords(input.entities[i].description, kMaxDescriptionWords);
    for (const auto& w : c.desc[i]) {
      if (!w.lower && !w.capital) continue;
      auto& u = uses[Singular(w.text)];
      (w.lower ? u.first : u.second) += 1;
    }
  }
  for (const auto& [word, u] : uses) {
    c.seen.insert(word);
    if (u.second > 0 && u.second >= u.first) c.proper.insert(word);
    if (u.first == 0) continue;
    c.common.insert(word);
    if (u.first >= u.second) c.common_noun.insert(word);
  }
  return c;
}

std::vector<std::pair<uint64_t, uint8_t>> DescriptionMentions(const ResolveInput& input,
                                                              const ResolveOptions& options,
                                                              const Corpus& corpus) {
  constexpr size_t kMaxKeyWords = 8;
  constexpr size_t kMaxPerDescriber = 4;    // mentions of each kind per description
  constexpr size_t kMaxRoleDescribers = 3;  // a name mentioned by more role names is a topic
  const size_t n = input.entities.size();
  const auto& desc = corpus.desc;
  const auto& common = corpus.common;
  std::vector<std::string> keys(n);
  std::vector<char> role(n, 0);  // the name is a role or an epithet, not a proper name
  std::unordered_map<std::string, std::vector<uint32_t>> index;
  size_t max_len = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto& e = input.entities[i];
    const auto w = NameWords(e.name.empty() ? e.key : e.name);
    if (w.empty() || w.size() > kMaxKeyWords) continue;
    keys[i] = JoinWords(w, 0, w.size());
    bool possessive_role = false, all_common = true, any_content = false;
    for (size_t k = 0; k < w.size(); ++k) {
      if (w[k].possessive && k + 1 < w.size()) {
        possessive_role = true;
        continue;
      }
      if (IsNameFiller(w[k].text)) continue;
      any_content = true;
      if (common.count(Singular(w[k].text)) == 0) all_common = false;
    }
    role[i] = possessive_role || (any_content && all_common);
    if (!any_content) continue;
    if (w.size() == 1) {
      const std::string& t = w[0].text;
      if (t.size() < 3 || AllDigits(t) || common.count(Singular(t)) > 0 || HonorificGender(t) != 0)
        continue;
    }
    index[keys[i]].push_back(static_cast<uint32_t>(i));
    max_len = std::max(max_len, w.size());
  }
  struct Found {
    uint32_t describer, other;
    uint8_t kind;
    const std::string* key;
  };
  std::vector<Found> found;
  std::unordered_map<std::string_view, std::unordered_set<uint32_t>> role_describers;
  for (size_t i = 0; i < n; ++i) {
    const auto& w = desc[i];
    if (w.empty()) continue;
    size_t first_copula = w.size();
    for (size_t k = 0; k < w.size() && w[k].sentence == 0; ++k) {
      if (w[k].text == "is" || w[k].text == "was" || w[k].text == "are" || w[k].text == "were") {
        first_copula = k;
        break;
      }
    }
    size_t identities = 0, roles = 0;
    std::string key;
    for (size_t s = 0; s < w.size();) {
      const std::string* hit = nullptr;
      size_t hit_len = 0;
      for (size_t len = std::min(max_len, w.size() - s); len >= 1; --len) {
        bool crosses = false;
        for (size_t k = s + 1; k < s + len && !crosses; ++k) crosses = w[k].boundary;
        if (crosses) continue;
        key = JoinWords(w, s, s + len);
        auto it = index.find(key);
        if (it != index.end()) {
          hit = &it->first;
          hit_len = len;
          break;
        }
      }
      if (hit == nullptr) {
        ++s;
        continue;
      }
      if (w[s + hit_len - 1].possessive || *hit == keys[i]) {  // a possessor, or itself
        ++s;
        continue;
      }
      const size_t t = s + hit_len;
      const bool ends = t == w.size() || w[t].boundary || IsMentionFunctionWord(w[t].text);
      uint8_t kind = kNoMention;
      if (ends && IdentityMention(w, s, first_copula) && identities < kMaxPerDescriber) {
        kind = kIdentityMention;
        ++identities;
      } else if (role[i] && w[s].sentence == 0 && roles < kMaxPerDescriber &&
                 !AfterPreposition(w, s)) {
        kind = kRoleMention;
        ++roles;
        role_describers[*hit].insert(static_cast<uint32_t>(i));
      }
      if (kind != kNoMention) {
        for (uint32_t j : index.find(*hit)->second) {
          if (j != i) found.push_back({static_cast<uint32_t>(i), j, kind, hit});
        }
      }
      s = t;
    }
  }
  std::unordered_map<uint64_t, uint8_t> kinds;
  for (const auto& f : found) {
    if (f.kind == kRoleMention && role_describers[*f.key].size() > kMaxRoleDescribers) continue;
    if (index[*f.key].size() > options.max_block) continue;
    uint8_t& k = kinds[PairKey(f.describer, f.other)];
    if (k == kNoMention || f.kind < k) k = f.kind;
  }
  std::vector<std::pair<uint64_t, uint8_t>> out(kinds.begin(), kinds.end());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace grag::resolve_internal
