// Entity resolution (see include/grag/resolve.h for the four steps).
//
// Every entity's name is parsed once into a NameForm: accent-folded lower-case tokens
// ("I.B.M." -> "ibm", "Win10" -> "win" "10", "Scrooge's" -> "scrooge" marked possessive), with
// leading articles, honorifics (remembered for their gender) and trailing legal suffixes
// removed, numbers (digits, Roman numerals, ordinal words) given their value, and acronym keys
// (the initials of the name). Blocking, similarity and the guards all work on NameForms.
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
namespace resolve_internal {

size_t EditDistance(std::string_view a, std::string_view b, size_t cap) {
  const size_t n = a.size(), m = b.size();
  if ((n > m ? n - m : m - n) > cap) return cap + 1;
  // The table a row at a time: row i needs rows i - 1 and i - 2 (for a swap), so three rows,
  // on the stack for names of up to 63 bytes. It was a vector per row, on every comparison of
  // two tokens.
  const size_t w = m + 1;
  std::array<size_t, 3 * 64> small{};
  std::vector<size_t> large(w > 64 ? 3 * w : 0);
  size_t* rows = w > 64 ? large.data() : small.data();
  auto row = [&](size_t i) { return rows + (i % 3) * w; };
  for (size_t j = 0; j <= m; ++j) row(0)[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    size_t* cur = row(i);
    const size_t* prev = row(i - 1);
    const size_t* prev2 = row(i > 1 ? i - 2 : 0);  // read only when i > 1
    cur[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      }
    }
  }
  return std::min(row(n)[m], cap + 1);
}

}  // namespace resolve_internal

namespace {

// ---------------------------------------------------------------------------------------------
// Word lists (generic English; nothing from any data set)
// ---------------------------------------------------------------------------------------------

bool IsArticle(std::string_view w) { return w == "the" || w == "a" || w == "an"; }

// 'm' / 'f' for gendered honorifics, 'n' for neutral titles, 0 for other words.
char HonorificGender(std::string_view w) {
  static const std::unordered_map<std::string_view, char> k = {
      {"mr", 'm'},        {"mister", 'm'},   {"sir", 'm'},        {"lord", 'm'},
      {"king", 'm'},      {"prince", 'm'},   {"monsieur", 'm'},   {"herr", 'm'},
      {"master", 'm'},    {"mrs", 'f'},      {"ms", 'f'},         {"miss", 'f'},
      {"mistress", 'f'},  {"madame", 'f'},   {"mme", 'f'},        {"mlle", 'f'},
      {"dame", 'f'},      {"lady", 'f'},     {"queen", 'f'},      {"princess", 'f'},
      {"frau", 'f'},      {"dr", 'n'},       {"doctor", 'n'},     {"prof", 'n'},
      {"professor", 'n'}, {"rev", 'n'},      {"reverend", 'n'},   {"president", 'n'},
      {"chair", 'n'},     {"chairman", 'm'}, {"chairwoman", 'f'}, {"senator", 'n'},
      {"sen", 'n'},       {"judge", 'n'},    {"gov", 'n'},        {"governor", 'n'},
      {"gen", 'n'},       {"general", 'n'},  {"capt", 'n'},       {"captain", 'n'},
      {"col", 'n'},       {"lt", 'n'},       {"sgt", 'n'},        {"st", 'n'},
      {"saint", 'n'},     {"pope", 'n'},     {"ceo", 'n'}};
  auto it = k.find(w);
  return it == k.end() ? 0 : it->second;
}

// Kinship words used as a title before a name ("Uncle Scrooge", "Aunt Polly"): 'm' / 'f', else
// 0. Before a name they are a form of address, like an honorific, not a given name. Only the
// leading title of a name is stripped (not "Father", "Mother", "Brother", "Sister": "Father
// Christmas", "Sister Act" are names of their own).
char KinshipTitleGender(std::string_view w) {
  static const std::unordered_map<std::string_view, char> k = {
      {"uncle", 'm'},  {"grandpa", 'm'}, {"granddad", 'm'}, {"grandad", 'm'}, {"aunt", 'f'},
      {"auntie", 'f'}, {"aunty", 'f'},   {"grandma", 'f'},  {"granny", 'f'},  {"gran", 'f'}};
  auto it = k.find(w);
  return it == k.end() ? 0 : it->second;
}

bool IsLegalSuffix(std::string_view w) {
  static const std::unordered_set<std::string_view> k = {
      "inc", "incorporated", "corp", "corporation", "co", "company", "ltd", "limited",
      "llc", "plc",          "gmbh", "ag",          "sa", "nv",      "bv",  "lp",
      "llp", "pty",          "srl",  "spa",         "ab", "oy",      "kg",  "sarl"};
  return k.count(w) > 0;
}

bool IsGeneration(std::string_view w) {
  return w == "jr" || w == "sr" || w == "junior" || w == "senior" || w == "ii" || w == "iii" ||
         w == "iv";
}

int OrdinalWord(std::string_view w) {
  static const std::unordered_map<std::string_view, int> k = {
      {"first", 1}, {"second", 2},  {"third", 3},  {"fourth", 4}, {"fifth", 5},
      {"sixth", 6}, {"seventh", 7}, {"eighth", 8}, {"ninth", 9},  {"tenth", 10}};
  auto it = k.find(w);
  return it == k.end() ? 0 : it->second;
}

// Common English hypocorisms (given-name short forms): a generic list.
const std::string* NicknameRoot(std::string_view w) {
  static const std::unordered_map<std::string_view, std::string> k = {
      {"bill", "william"},      {"will", "william"},      {"billy", "william"},
      {"willy", "william"},     {"liam", "william"},      {"bob", "robert"},
      {"rob", "robert"},        {"bobby", "robert"},      {"robbie", "robert"},
      {"bert", "robert"},       {"dick", "richard"},      {"rick", "richard"},
      {"rich", "richard"},      {"ricky", "richard"},     {"jim", "james"},
      {"jimmy", "james"},       {"jamie", "james"},       {"joe", "joseph"},
      {"joey", "joseph"},       {"tom", "thomas"},        {"tommy", "thomas"},
      {"tim", "timothy"},       {"timmy", "timothy"},     {"mike", "michael"},
      {"mick", "michael"},      {"mickey", "michael"},    {"dan", "daniel"},
      {"danny", "daniel"},      {"dave", "david"},        {"davy", "david"},
      {"ed", "edward"},         {"eddie", "edward"},      {"ned", "edward"},
      {"ted", "edward"},        {"teddy", "theodore"},    {"theo", "theodore"},
      {"chris", "christopher"}, {"tony", "anthony"},      {"andy", "andrew"},
      {"drew", "andrew"},       {"steve", "stephen"},     {"steven", "stephen"},
      {"sam", "samuel"},        {"ben", "benjamin"},      {"benny", "benjamin"},
      {"nick", "nicholas"},     {"alex", "alexander"},    {"al", "albert"},
      {"fred", "frederick"},    {"freddie", "frederick"}, {"harry", "henry"},
      {"hank", "henry"},        {"jack", "john"},         {"johnny", "john"},
      {"jon", "john"},          {"pete", "peter"},        {"phil", "philip"},
      {"ron", "ronald"},        {"ken", "kenneth"},       {"larry", "lawrence"},
      {"matt", "matthew"},      {"pat", "patrick"},       {"greg", "gregory"},
      {"jeff", "jeffrey"},      {"josh", "joshua"},       {"ray", "raymond"},
      {"charlie", "charles"},   {"chuck", "charles"},     {"liz", "elizabeth"},
      {"beth", "elizabeth"},    {"betty", "elizabeth"},   {"lizzie", "elizabeth"},
      {"kate", "katherine"},    {"katie", "katherine"},   {"kathy", "katherine"},
      {"cathy", "catherine"},   {"meg", "margaret"},      {"maggie", "margaret"},
      {"peggy", "margaret"},    {"sue", "susan"},         {"susie", "susan"},
      {"jenny", "jennifer"},    {"jen", "jennifer"},      {"becky", "rebecca"},
      {"abby", "abigail"},      {"annie", "anne"},        {"ann", "anne"},
      {"nancy", "anne"},        {"molly", "mary"},        {"polly", "mary"},
      {"sally", "sarah"},       {"vicky", "victoria"},    {"fanny", "frances"},
      {"fran", "frances"},      {"nell", "eleanor"},      {"ellie", "eleanor"}};
  auto it = k.find(w);
  return it == k.end() ? nullptr : &it->second;
}

// ---------------------------------------------------------------------------------------------
// Text helpers
// ---------------------------------------------------------------------------------------------

// NFKC, case folding, accents stripped; nullopt when not UTF-8.
std::string Fold(std::string_view s) {
  utf8proc_uint8_t* out = nullptr;
  const auto len = utf8proc_map(
      reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
      &out,
      static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT |
                                     UTF8PROC_CASEFOLD | UTF8PROC_STRIPMARK));
  if (len < 0) {
    std::string r(s);
    for (auto& c : r) {
      if (static_cast<unsigned char>(c) >= 0x80)
        c = ' ';
      else
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return r;
  }
  std::string r(reinterpret_cast<char*>(out), static_cast<size_t>(len));
  std::free(out);
  return r;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsUpperAscii(char c) { return c >= 'A' && c <= 'Z'; }
bool IsLowerAscii(char c) { return c >= 'a' && c <= 'z'; }
bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsDigit);
}

// The value of a canonical Roman numeral ("lviii" -> 58), or 0.
int RomanValue(std::string_view s) {
  if (s.empty() || s.size() > 9) return 0;
  auto val = [](char c) {
    switch (c) {
      case 'i':
        return 1;
      case 'v':
        return 5;
      case 'x':
        return 10;
      case 'l':
        return 50;
      case 'c':
        return 100;
      case 'd':
        return 500;
      case 'm':
        return 1000;
      default:
        return 0;
    }
  };
  int total = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const int v = val(s[i]);
    if (v == 0) return 0;
    const int next = i + 1 < s.size() ? val(s[i + 1]) : 0;
    total += v < next ? -v : v;
  }
  if (total <= 0 || total >= 4000) return 0;
  // Canonical form check: re-encode and compare.
  static const std::pair<int, const char*> kTable[] = {
      {1000, "m"}, {900, "cm"}, {500, "d"}, {400, "cd"}, {100, "c"}, {90, "xc"}, {50, "l"},
      {40, "xl"},  {10, "x"},   {9, "ix"},  {5, "v"},    {4, "iv"},  {1, "i"}};
  std::string enc;
  int t = total;
  for (const auto& [v, sym] : kTable) {
    while (t >= v) {
      enc += sym;
      t -= v;
    }
  }
  return enc == s ? total : 0;
}

using resolve_internal::EditDistance;

// Dice coefficient of padded character trigrams.
double TrigramDice(std::string_view a, std::string_view b) {
  if (a.empty() || b.empty()) return 0;
  // Each trigram as a number, its bytes big-endian: sorted as the 3-byte strings would be, and
  // without a string per trigram.
  auto grams = [](std::string_view s) {
    std::vector<uint32_t> g;
    g.reserve(s.size() + 1);
    uint32_t window = (uint32_t{'#'} << 8) | uint32_t{'#'};
    auto push = [&](unsigned char c) {
      window = ((window << 8) | c) & 0xFFFFFFu;
      g.push_back(window);
    };
    for (char c : s) push(static_cast<unsigned char>(c));
    push('#');
    std::sort(g.begin(), g.end());
    return g;
  };
  auto ga = grams(a), gb = grams(b);
  size_t common = 0, i = 0, j = 0;
  while (i < ga.size() && j < gb.size()) {
    if (ga[i] == gb[j]) {
      ++common;
      ++i;
      ++j;
    } else if (ga[i] < gb[j]) {
      ++i;
    } else {
      ++j;
    }
  }
  return 2.0 * static_cast<double>(common) / static_cast<double>(ga.size() + gb.size());
}

// ---------------------------------------------------------------------------------------------
// Parsed names
// ---------------------------------------------------------------------------------------------

struct Token {
  std::string text;
  int number = 0;           // > 0: a number (digits, Roman numeral, ordinal word)
  bool possessive = false;  // "scrooge" of "Scrooge's"
  bool acronym = false;     // written as an acronym ("FTC", "I.B.M.", "BofA")
  bool generation = false;  // "Sr.", "Jr.", "III" at the end of a person's name
  bool stop = false;        // a stop word (kept for acronyms, ignored for matching)
};

struct NameForm {
  std::vector<Token> tokens;    // cleaned (no leading article/honorific, no legal suffix)
  std::vector<size_t> content;  // indices of non-stop tokens
  std::string joined;           // content tokens concatenated
  char gender = 0;              // from an honorific: 'm' / 'f'
  size_t words = 0;             // words without articles and honorifics, legal suffix included
  bool indefinite = false;      // began with "a" / "an"
  std::vector<std::string> initials;  // acronym keys of the full name
  std::string acronym;                // the whole name as one acronym ("ftc"), or ""
  bool person = false;
  bool aside = false;  // the name has a parenthesis, often another name ("Boy (Ignorance)")
  std::string type;
};

bool GenericType(std::string_view t) {
  return t.empty() || t == "proper noun" || t == "noun phrase" || t == "unknown";
}

std::string LowerAscii(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// Splits the folded text into raw word tokens with their possessive marks.
struct RawWord {
  std::string text;
  bool possessive = false;
  bool acronym = false;
};

bool IsApostrophe(std::string_view s, size_t i, size_t* len) {
  if (s[i] == '\'') {
    *len = 1;
    return true;
  }
  if (s.compare(i, 3, "\xE2\x80\x99") == 0 || s.compare(i, 3, "\xE2\x80\x98") == 0) {
    *len = 3;
    return true;
  }
  return false;
}

bool IsWordByte(const std::string& s, size_t i, size_t* len) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    *len = 1;
    return IsDigit(static_cast<char>(c)) || IsAsciiAlpha(static_cast<char>(c));
  }
  utf8proc_int32_t cp = 0;
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                  static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  if (n <= 0) {
    *len = 1;
    return false;
  }
  *len = static_cast<size_t>(n);
  const auto cat = utf8proc_category(cp);
  return (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
         (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO) ||
         cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC;
}

// What an apostrophe at s[i] (of `alen` bytes) does to the word being read (`word`, possibly
// empty): kPossessive ends it as a possessive and skips to `*next` ("scrooge's", "bakers'"),
// kInside keeps it going ("o'brien"), kBreak ends it plainly.
enum class Apostrophe { kPossessive, kInside, kBreak };
Apostrophe ClassifyApostrophe(const std::string& s, size_t i, size_t alen, std::string_view word,
                              size_t* next) {
  const size_t after = i + alen;
  size_t l2 = 0;
  const bool next_word = after < s.size() && IsWordByte(s, after, &l2);
  *next = after;
  if (!word.empty() && next_word && (s[after] == 's' || s[after] == 'S')) {
    size_t l3 = 0;
    if (after + 1 >= s.size() || !IsWordByte(s, after + 1, &l3)) {  // "scrooge's"
      *next = after + 1;
      return Apostrophe::kPossessive;
    }
  }
  if (!word.empty() && !next_word && (word.back() == 's' || word.back() == 'S')) {  // "bakers'"
    return Apostrophe::kPossessive;
  }
  if (!word.empty() && next_word) return Apostrophe::kInside;  // "o'brien"
  return Apostrophe::kBreak;
}

// Acronym-looking words of the original spelling ("FTC", "U.S.", "BofA", "I.B.M."), folded.
std::set<std::string> AcronymWords(std::string_view name) {
  std::set<std::string> out;
  size_t i = 0;
  while (i < name.size()) {
    while (i < name.size() &&
           (name[i] == ' ' || name[i] == ',' || name[i] == '(' || name[i] == ')'))
      ++i;
    size_t j = i;
    while (j < name.size() && name[j] != ' ' && name[j] != ',' && name[j] != '(' && name[j] != ')')
      ++j;
    std::string_view w = name.substr(i, j - i);
    std::string letters;
    int upper = 0, lower = 0, dots = 0;
    bool ok = true;
    for (char c : w) {
      if (c == '.') {
        ++dots;
        continue;
      }
      if (IsUpperAscii(c))
        ++upper;
      else if (IsLowerAscii(c))
        ++lower;
      else if (!IsDigit(c)) {
        ok = false;
        break;
      }
      letters += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (ok && letters.size() >= 2 && letters.size() <= 6 && upper >= 2 &&
        (lower == 0 || lower <= upper - 1) && !AllDigits(letters)) {
      // Mixed like "BofA", "BoE" (more capitals than lower-case letters), or all capitals,
      // or dotted initials ("U.S.", "I.B.M.").
      out.insert(letters);
    } else if (ok && dots >= 1 && letters.size() >= 2 && letters.size() <= 6 && lower == 0 &&
               upper >= 1) {
      out.insert(letters);
    }
    i = j;
  }
  return out;
}

NameForm ParseName(std::string_view name, std::string_view type) {
  NameForm f;
  f.type = LowerAscii(type);
  f.person = f.type == "person";
  f.aside = name.find('(') != std::string_view::npos;
  const std::string folded = Fold(name);
  const std::set<std::string> acronym_words = AcronymWords(name);
  // Whether the whole original name is upper-case (then every short word looks like an acronym;
  // only dotted or mixed-case ones count).
  bool all_caps = true;
  int letters = 0;
  for (char c : name) {
    if (IsLowerAscii(c)) all_caps = false;
    if (IsAsciiAlpha(c)) ++letters;
  }
  all_caps = all_caps && letters > 0;

  // 1. Raw words: runs of letters/digits; "'s" / "s'" mark the word possessive; an apostrophe
  // between letters joins ("o'brien"); letter/digit boundaries split ("win10", "4o").
  std::vector<RawWord> raw;
  std::vector<bool> dotted;  // the word ended with a '.' directly (initials)
  std::string cur;
  auto flush = [&](bool possessive, bool dot) {
    if (cur.empty()) return;
    // split at letter/digit boundaries
    size_t start = 0;
    for (size_t k = 1; k <= cur.size(); ++k) {
      const bool boundary = k == cur.size() || (IsDigit(cur[k]) != IsDigit(cur[k - 1]) &&
                                                static_cast<unsigned char>(cur[k]) < 0x80 &&
                                                static_cast<unsigned char>(cur[k - 1]) < 0x80);
      if (boundary) {
        raw.push_back({cur.substr(start, k - start), false, false});
        dotted.push_back(false);
        start = k;
      }
    }
    raw.back().possessive = possessive;
    dotted.back() = dot;
    cur.clear();
  };
  size_t i = 0;
  while (i < folded.size()) {
    size_t len = 1;
    size_t alen = 0;
    if (IsWordByte(folded, i, &len)) {
      cur.append(folded, i, len);
      i += len;
      continue;
    }
    if (IsApostrophe(folded, i, &alen)) {
      const Apostrophe a = ClassifyApostrophe(folded, i, alen, cur, &i);
      if (a != Apostrophe::kInside) flush(a == Apostrophe::kPossessive, false);
      continue;
    }
    flush(false, folded[i] == '.');
    i += len;
  }
  flush(false, false);

  // 2. Merge runs of single letters ("i b m" -> "ibm", "h w" -> "hw").
  bool has_initials = false;
  for (size_t k = 0; k + 1 < raw.size(); ++k) {
    if (raw[k].text.size() == 1 && raw[k + 1].text.size() == 1 && !IsDigit(raw[k].text[0]) &&
        !IsDigit(raw[k + 1].text[0])) {
      has_initials = true;
    }
  }
  std::vector<RawWord> words;
  for (size_t k = 0; k < raw.size();) {
    if (raw[k].text.size() == 1 && !IsDigit(raw[k].text[0])) {
      size_t e = k;
      std::string m;
      while (e < raw.size() && raw[e].text.size() == 1 && !IsDigit(raw[e].text[0])) {
        m += raw[e].text;
        ++e;
      }
      RawWord w{m, raw[e - 1].possessive, e - k >= 2 && (dotted[k] || all_caps || true)};
      w.acronym = e - k >= 2;
      words.push_back(w);
      k = e;
    } else {
      RawWord w = raw[k];
      if (acronym_words.count(w.text) > 0 && (!all_caps || has_initials) &&
          (RomanValue(w.text) == 0 || k == 0)) {
        w.acronym = true;
      }
      words.push_back(w);
      ++k;
    }
  }
  // A whole name in capitals that is one short word ("FTC", "NYC") is an acronym.
  if (all_caps && words.size() == 1 && words[0].text.size() >= 2 && words[0].text.size() <= 6 &&
      acronym_words.count(words[0].text) > 0) {
    words[0].acronym = true;
  }
  if (words.size() == 2 && IsArticle(words[0].text) && acronym_words.count(words[1].text) > 0) {
    words[1].acronym = true;  // "the FTC", "THE FTC"
  }

  // 3. Strip leading articles and honorifics, trailing legal suffixes (keep at least one word).
  size_t b = 0, e = words.size();
  while (e - b > 1) {
    const std::string& w = words[b].text;
    if (IsArticle(w)) {
      if (w != "the") f.indefinite = true;  // "A Christmas Carol": a title, not "Christmas Carol"
      ++b;
      continue;
    }
    // A kinship title addresses the person named after it ("Uncle Scrooge"), not a relation
    // ("Uncle of Fred").
    const char g = HonorificGender(w) != 0           ? HonorificGender(w)
                   : IsNameFiller(words[b + 1].text) ? 0
                                                     : KinshipTitleGender(w);
    if (g != 0 && !words[b].possessive) {
      if (g == 'm' || g == 'f') f.gender = g;
      ++b;
      continue;
    }
    break;
  }
  f.words = e - b;
  while (e - b > 1 && IsLegalSuffix(words[e - 1].text) && !words[e - 1].acronym) --e;
  // "& co", "and company": drop a dangling "and" before the stripped suffix.
  while (e - b > 1 && words[e - 1].text == "and") --e;

  for (size_t k = b; k < e; ++k) {
    Token t;
    t.text = words[k].text;
    t.possessive = words[k].possessive;
    t.acronym = words[k].acronym;
    // Honorifics inside a name ("Mr. Scrooge's nephew") are ignored too.
    if (k > b && HonorificGender(t.text) != 0 && !t.possessive && t.text != "general") {
      const char g = HonorificGender(t.text);
      if ((g == 'm' || g == 'f') && f.gender == 0) f.gender = g;
      continue;
    }
    if (AllDigits(t.text)) {
      size_t z = 0;
      while (z + 1 < t.text.size() && t.text[z] == '0') ++z;
      t.text = t.text.substr(z);
      // "3.12.0" is "3.12": a trailing zero after another number is dropped.
      if (t.text == "0" && !f.tokens.empty() && f.tokens.back().number > 0) continue;
      t.number = t.text.size() <= 9 ? std::atoi(t.text.c_str()) : 1;
      if (t.number == 0) t.number = -1;  // "0" itself
    } else if (const int ord = OrdinalWord(t.text); ord > 0) {
      t.number = ord;
    } else if (!t.acronym) {
      const bool last = k + 1 == e;
      if (f.person && last && k > b && IsGeneration(t.text)) {
        t.generation = true;
      } else if (t.text.size() >= 2 || (t.text == "i" && last && k > b)) {
        const int r = RomanValue(t.text);
        // "mix", "dim", "civil" are words; only short canonical numerals after another word
        // (or in capitals) are numbers.
        if (r > 0 && k > b && (t.text.size() <= 5) &&
            (all_caps || std::any_of(name.begin(), name.end(), IsUpperAscii))) {
          // Require the original spelling to be upper-case for this word.
          std::string upper;
          for (char c : t.text)
            upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
          if (name.find(upper) != std::string_view::npos) t.number = r;
        }
      }
    }
    t.stop = t.number == 0 && !t.acronym && IsNameFiller(t.text);
    f.tokens.push_back(std::move(t));
  }
  if (f.tokens.empty() && !words.empty()) {  // only honorifics: keep them
    for (size_t k = b; k < e; ++k)
      f.tokens.push_back({words[k].text, 0, false, false, false, false});
  }
  for (size_t k = 0; k < f.tokens.size(); ++k) {
    if (!f.tokens[k].stop) {
      f.content.push_back(k);
      f.joined += f.tokens[k].text;
    }
  }
  if (f.content.empty()) {  // a name of stop words only ("The Who" is "who", kept)
    for (size_t k = 0; k < f.tokens.size(); ++k) {
      f.tokens[k].stop = false;
      f.content.push_back(k);
      f.joined += f.tokens[k].text;
    }
  }

  // 4. Acronym forms.
  if (f.content.size() == 1 && f.tokens[f.content[0]].acronym)
    f.acronym = f.tokens[f.content[0]].text;
  if (f.content.size() >= 2) {
    std::string with_stop, without_stop, without_first;
    for (size_t k = 0; k < f.tokens.size(); ++k) {
      const Token& t = f.tokens[k];
      const std::string part = t.number != 0 || t.acronym ? t.text : std::string(1, t.text[0]);
      with_stop += part;
      if (!t.stop) without_stop += part;
    }
    for (size_t c = 1; c < f.content.size(); ++c) {
      const Token& t = f.tokens[f.content[c]];
      without_first += t.number != 0 || t.acronym ? t.text : std::string(1, t.text[0]);
    }
    for (const auto& s : {with_stop, without_stop}) {
      if (s.size() >= 2 && s.size() <= 8) f.initials.push_back(s);
    }
    if (f.content.size() >= 3 && without_first.size() >= 2) f.initials.push_back(without_first);
    std::sort(f.initials.begin(), f.initials.end());
    f.initials.erase(std::unique(f.initials.begin(), f.initials.end()), f.initials.end());
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// Token matching and alignment
// ---------------------------------------------------------------------------------------------

std::string Singular(const std::string& w) {
  if (w.size() > 4 && w.compare(w.size() - 3, 3, "men") == 0)
    return w.substr(0, w.size() - 3) + "man";
  if (w.size() > 4 && w.compare(w.size() - 3, 3, "ies") == 0)
    return w.substr(0, w.size() - 3) + "y";
  if (w.size() > 3 && w.back() == 's' && w[w.size() - 2] != 's') return w.substr(0, w.size() - 1);
  return w;
}

// How well two tokens match: 1 equal, 0.9 plural/typo/nickname, 0.75 abbreviation prefix
// ("win" / "windows", "postgres" / "postgresql"), 0.5 an initial ("j" / "john"); 0 no match.
double TokenMatch(const Token& a, const Token& b) {
  if (a.number != 0 || b.number != 0) return a.number == b.number ? 1.0 : 0.0;
  const std::string& x = a.text;
  const std::string& y = b.text;
  if (x == y) return 1.0;
  if (x.size() == 1 || y.size() == 1) {
    const std::string& full = x.size() == 1 ? y : x;
    const std::string& ini = x.size() == 1 ? x : y;
    return full.size() > 1 && full[0] == ini[0] ? 0.5 : 0.0;
  }
  if (Singular(x) == Singular(y)) return 0.8;
  const std::string* rx = NicknameRoot(x);
  const std::string* ry = NicknameRoot(y);
  if ((rx != nullptr && (*rx == y || (ry != nullptr && *rx == *ry))) ||
      (ry != nullptr && *ry == x)) {
    return 0.9;
  }
  const size_t shorter = std::min(x.size(), y.size());
  if (shorter >= 5 && !AllDigits(x) && !AllDigits(y)) {
    const size_t cap = shorter >= 8 ? 2 : 1;
    if (EditDistance(x, y, cap) <= cap) return 0.9;
  }
  if (shorter >= 3 && !a.stop && !b.stop && !a.acronym && !b.acronym) {
    const std::string& s = x.size() < y.size() ? x : y;
    const std::string& l = x.size() < y.size() ? y : x;
    if (l.compare(0, s.size(), s) == 0) return 0.75;
  }
  return 0;
}

// The initials of tokens [from, to) of f's content ("federal trade commission" -> "ftc").
std::string RunInitials(const NameForm& f, size_t from, size_t to) {
  std::string s;
  for (size_t c = from; c < to; ++c) {
    const Token& t = f.tokens[f.content[c]];
    s += t.number != 0 ? t.text : std::string(1, t.text[0]);
  }
  return s;
}

struct Alignment {
  double wa = 0, wb = 0;  // matched weight on each side
  size_t na = 0, nb = 0;  // content tokens on each side
  size_t matches = 0;
  std::vector<std::pair<size_t, size_t>> pairs;  // (content index a, content index b), increasing
  std::vector<std::pair<size_t, size_t>> spans;  // for acronym matches: (a end, b end) exclusive
};

// The best order-preserving matching of the content tokens (weights from TokenMatch; an acronym
// token may match a run of the other side's tokens whose initials it spells).
Alignment Align(const NameForm& A, const NameForm& B) {
  const size_t n = A.content.size(), m = B.content.size();
  // dp[i][j]: best total weight for A[i:], B[j:].
  std::vector<std::vector<double>> dp(n + 1, std::vector<double>(m + 1, 0));
  struct Step {
    int kind = 0;  // 0 skip a, 1 skip b, 2 match 1:1, 3 acronym a -> run of b, 4 b -> run of a
    size_t len = 1;
    double w = 0;
  };
  std::vector<std::vector<Step>> how(n + 1, std::vector<Step>(m + 1));
  for (size_t i = n + 1; i-- > 0;) {
    for (size_t j = m + 1; j-- > 0;) {
      if (i == n || j == m) continue;
      double best = dp[i + 1][j];
      Step st{0, 1, 0};
      if (dp[i][j + 1] > best) {
        best = dp[i][j + 1];
        st = {1, 1, 0};
      }
      const Token& ta = A.tokens[A.content[i]];
      const Token& tb = B.tokens[B.content[j]];
      const double w = TokenMatch(ta, tb);
      if (w > 0 && 2 * w + dp[i + 1][j + 1] > best) {
        best = 2 * w + dp[i + 1][j + 1];
        st = {2, 1, w};
      }
      if (ta.acronym && ta.text.size() >= 2) {
        const size_t len = ta.text.size();
        if (j + len <= m && len >= 2 && RunInitials(B, j, j + len) == ta.text) {
          const double v = 0.9 * static_cast<double>(1 + len) + dp[i + 1][j + len];
          if (v > best) {
            best = v;
            st = {3, len, 0.9};
          }
        }
      }
      if (tb.acronym && tb.text.size() >= 2) {
        const size_t len = tb.text.size();
        if (i + len <= n && len >= 2 && RunInitials(A, i, i + len) == tb.text) {
          const double v = 0.9 * static_cast<double>(1 + len) + dp[i + len][j + 1];
          if (v > best) {
            best = v;
            st = {4, len, 0.9};
          }
        }
      }
      dp[i][j] = best;
      how[i][j] = st;
    }
  }
  Alignment al;
  al.na = n;
  al.nb = m;
  size_t i = 0, j = 0;
  while (i < n && j < m) {
    const Step& st = how[i][j];
    switch (st.kind) {
      case 0:
        ++i;
        break;
      case 1:
        ++j;
        break;
      case 2:
        al.wa += st.w;
        al.wb += st.w;
        ++al.matches;
        al.pairs.push_back({i, j});
        al.spans.push_back({i + 1, j + 1});
        ++i;
        ++j;
        break;
      case 3:
        al.wa += st.w;
        al.wb += st.w * static_cast<double>(st.len);
        ++al.matches;
        al.pairs.push_back({i, j});
        al.spans.push_back({i + 1, j + st.len});
        ++i;
        j += st.len;
        break;
      default:
        al.wa += st.w * static_cast<double>(st.len);
        al.wb += st.w;
        ++al.matches;
        al.pairs.push_back({i, j});
        al.spans.push_back({i + st.len, j + 1});
        i += st.len;
        ++j;
        break;
    }
  }
  return al;
}

struct PairInfo {
  double name = 0;
  std::optional<std::string> conflict;
  // How firm the conflict is: kSoft (an age/stage modifier against another lead word, "Young
  // Scrooge" / "Older Scrooge"; a spouse role against the honorific form, "Cratchit's wife" /
  // "Mrs. Cratchit"): with a judge the pair is adjudicated, without one it stays apart.
  // kNameWords (different given names or distinctive words, a possession): firm for name
  // evidence, but a pair that a description links ("X, also known as Y") may still be judged.
  // kStrict (types, gender honorifics, generations, numbers, versions, editions): never joined.
  int severity = 0;
  bool a_in_b = false;  // every content token of a is matched (a is a short form of b)
  bool b_in_a = false;
  // The shorter name matches the start of the longer one, not its end (head): "Fabrikam" /
  // "Fabrikam Coatings", "State" / "State of Mississippi". Usually a different, related thing.
  bool modifier_containment = false;
  bool plural_mismatch = false;  // singular against plural head noun
  bool both_extra = false;       // neither name is contained in the other
  // The same words up to articles, spacing or legal suffixes ("The Baby" / "Baby").
  bool same_words = false;
  // For a containment (one name's words all inside the other's): the longer name's content
  // words left unmatched (content indices, the first 64), and whether it has more function words
  // ("of", "to", "for") than the shorter one ("City of London" / "London").
  uint64_t extra = 0;
  bool extra_function = false;
  bool longer_is_a = false;  // the longer name of a containment is A
  // The shorter name is the possessor in the longer one ("Poulterers" / "Poulterers' shops";
  // a singular possessor is a conflict, see below).
  bool possessor = false;
  bool lead_modifier = false;  // a soft conflict of lead modifiers ("Young" / "Older" Scrooge)
};

constexpr int kSoft = 1, kNameWords = 2, kStrict = 3;

// Words that name an age or stage of one entity rather than a different one ("Young Scrooge").
bool IsStageModifier(std::string_view w) {
  static const std::unordered_set<std::string_view> k = {
      "young",  "younger", "youngest", "old",     "older", "oldest", "elder",
      "eldest", "late",    "former",   "earlier", "later", "little", "elderly"};
  return k.count(w) > 0;
}

// 'f' / 'm' for a spouse word ("wife", "husband"), else 0.
char SpouseGender(std::string_view w) {
  if (w == "wife" || w == "widow" || w == "bride") return 'f';
  if (w == "husband" || w == "widower" || w == "groom") return 'm';
  return 0;
}

bool TypesCompatible(const NameForm& a, const NameForm& b) {
  return a.type == b.type || GenericType(a.type) || GenericType(b.type);
}

PairInfo CompareNames(const NameForm& A, const NameForm& B, bool check_types);

// Types an extractor often confuses for one thing: a building or an institution (organisation
// / geo), a family or a group (organisation / person).
bool TypesConfusable(const NameForm& a, const NameForm& b) {
  auto one_of = [&](std::string_view x, std::string_view y) {
    return (a.type == x && b.type == y) || (a.type == y && b.type == x);
  };
  return one_of("organization", "geo") || one_of("organization", "person") ||
         one_of("organisation", "geo") || one_of("organisation", "person") ||
         one_of("organization", "location") || one_of("organisation", "location");
}

// Names this similar with confusable types go to the judge.
constexpr double kConfusableTypeName = 0.8;

PairInfo Compare(const NameForm& A, const NameForm& B) {
  if (TypesCompatible(A, B) || !TypesConfusable(A, B)) return CompareNames(A, B, true);
  PairInfo p = CompareNames(A, B, false);
  const bool soft = !p.conflict && p.name >= kConfusableTypeName && !p.modifier_containment &&
                    !p.plural_mismatch && !p.both_extra;
  p.conflict = "types differ";
  p.severity = soft ? kSoft : kStrict;
  return p;
}

PairInfo CompareNames(const NameForm& A, const NameForm& B, bool check_types) {
  PairInfo p;
  // ---- similarity ----
  const Alignment al = Align(A, B);
  const double na = static_cast<double>(std::max<size_t>(1, al.na));
  const double nb = static_cast<double>(std::max<size_t>(1, al.nb));
  const double cover_a = al.wa / na, cover_b = al.wb / nb;
  const double dice = (al.wa + al.wb) / (na + nb);
  double sim = 0.5 * dice + 0.5 * std::max(cover_a, cover_b);
  {
    // The same measure without word order ("World War II" / "Second World War"), a little lower.
    std::vector<bool> used(B.content.size(), false);
    double sum = 0;
    for (size_t c : A.content) {
      double best = 0;
      size_t at = B.content.size();
      for (size_t d = 0; d < B.content.size(); ++d) {
        if (used[d]) continue;
        const double w = TokenMatch(A.tokens[c], B.tokens[B.content[d]]);
        if (w > best) {
          best = w;
          at = d;
        }
      }
      if (at < B.content.size()) {
        used[at] = true;
        sum += best;
      }
    }
    const double unordered = 0.5 * (2 * sum / (na + nb)) + 0.5 * std::max(sum / na, sum / nb);
    sim = std::max(sim, 0.95 * unordered);
  }
  // A singular against a plural head noun ("portly gentleman" / "portly gentlemen") is likely
  // one member against the group.
  if (!A.content.empty() && !B.content.empty() && !al.pairs.empty() &&
      al.pairs.back().first + 1 == A.content.size() &&
      al.pairs.back().second + 1 == B.content.size()) {
    const Token& la = A.tokens[A.content.back()];
    const Token& lb = B.tokens[B.content.back()];
    if (la.text != lb.text && Singular(la.text) == Singular(lb.text)) {
      sim *= 0.85;
      p.plural_mismatch = true;
    }
  }
  if (A.joined == B.joined) sim = 1.0;
  const bool acronym_match = (!A.acronym.empty() && std::find(B.initials.begin(), B.initials.end(),
                                                              A.acronym) != B.initials.end()) ||
                             (!B.acronym.empty() && std::find(A.initials.begin(), A.initials.end(),
                                                              B.acronym) != A.initials.end());
  if (acronym_match) sim = std::max(sim, 0.9);
  const double chars = TrigramDice(A.joined, B.joined);
  sim = std::max(sim, 0.9 * chars);
  p.name = std::min(1.0, sim);
  p.a_in_b = cover_a >= 0.999 || (al.wa > 0 && al.matches == al.na && al.na < al.nb);
  p.b_in_a = cover_b >= 0.999 || (al.wb > 0 && al.matches == al.nb && al.nb < al.na);
  if (A.joined == B.joined) p.a_in_b = p.b_in_a = true;
  if (acronym_match) {
    p.a_in_b = !A.acronym.empty();
    p.b_in_a = !B.acronym.empty();
  }
  p.both_extra = (!p.a_in_b && !p.b_in_a && !acronym_match && A.joined != B.joined) ||
                 A.indefinite != B.indefinite;
  if (p.a_in_b != p.b_in_a && !acronym_match && !al.spans.empty()) {
    const bool head = p.a_in_b ? al.spans.back().second == al.nb : al.spans.back().first == al.na;
    p.modifier_containment = !head;
    // The longer name's words outside the match, and its function words.
    p.longer_is_a = p.b_in_a;
    const NameForm& longer = p.longer_is_a ? A : B;
    const NameForm& shorter = p.longer_is_a ? B : A;
    std::vector<bool> matched(longer.content.size(), false);
    for (size_t k = 0; k < al.pairs.size(); ++k) {
      const size_t from = p.longer_is_a ? al.pairs[k].first : al.pairs[k].second;
      const size_t to = p.longer_is_a ? al.spans[k].first : al.spans[k].second;
      for (size_t c = from; c < to && c < matched.size(); ++c) matched[c] = true;
    }
    for (size_t c = 0; c < matched.size() && c < 64; ++c) {
      if (!matched[c]) p.extra |= uint64_t{1} << c;
    }
    const size_t last = p.longer_is_a ? al.spans.back().first : al.spans.back().second;
    p.possessor = last >= 1 && last < longer.content.size() &&
                  longer.tokens[longer.content[last - 1]].possessive;
    auto functions = [](const NameForm& f) {
      size_t n = 0;
      for (const auto& t : f.tokens) n += t.stop ? 1 : 0;
      return n;
    };
    p.extra_function = functions(longer) > functions(shorter);
  }
  p.same_words = A.joined == B.joined;

  // ---- guards ----
  if (check_types && !TypesCompatible(A, B)) {
    p.conflict = "types differ";
    p.severity = kStrict;
    return p;
  }
  if (A.gender != 0 && B.gender != 0 && A.gender != B.gender) {
    p.conflict = "honorifics differ";
    p.severity = kStrict;
    return p;
  }
  // A female honorific against a name without one ("Mrs. Fezziwig" / "Fezziwig"): often the
  // wife, a daughter or a sister of the man. For the judge (a firmer conflict found below wins).
  if ((A.gender == 'f') != (B.gender == 'f') && (A.gender == 0 || B.gender == 0) &&
      al.matches > 0) {
    p.conflict = "a female honorific against a name without one";
    p.severity = kSoft;
  }
  // Generations: "Sr." against anything else, or two different markers.
  {
    std::string ga, gb;
    for (const auto& t : A.tokens)
      if (t.generation) ga = t.text;
    for (const auto& t : B.tokens)
      if (t.generation) gb = t.text;
    auto senior = [](const std::string& g) { return g == "sr" || g == "senior"; };
    if ((!ga.empty() && !gb.empty() && ga != gb) || (senior(ga) != senior(gb))) {
      p.conflict = "generations differ";
      p.severity = kStrict;
      return p;
    }
  }
  if (acronym_match || A.joined == B.joined) return p;
  // Numbers.
  std::vector<int> nums_a, nums_b;
  for (size_t c : A.content)
    if (A.tokens[c].number != 0) nums_a.push_back(A.tokens[c].number);
  for (size_t c : B.content)
    if (B.tokens[c].number != 0) nums_b.push_back(B.tokens[c].number);
  std::vector<int> sa = nums_a, sb = nums_b;
  std::sort(sa.begin(), sa.end());
  std::sort(sb.begin(), sb.end());
  if (!sa.empty() && !sb.empty() && sa != sb) {
    p.conflict = "numbers differ";
    p.severity = kStrict;
    return p;
  }
  if (sa.empty() != sb.empty() && al.matches > 0) {
    // "Windows" / "Windows 10": the name without a number is all inside the numbered one.
    const bool base_inside = sa.empty() ? cover_a >= 0.74 : cover_b >= 0.74;
    if (base_inside) {
      p.conflict = "versions differ";
      p.severity = kStrict;
      return p;
    }
  }
  // Editions: equal version numbers, but one name goes on after its last number
  // ("iPhone 15" / "iPhone 15 Pro", "GPT-4" / "GPT-4 Turbo"); years are not versions.
  if (!sa.empty() && sa == sb) {
    auto tail_after_number = [](const NameForm& f, const std::vector<bool>& matched) {
      size_t last = f.content.size();
      for (size_t c = 0; c < f.content.size(); ++c) {
        const int v = f.tokens[f.content[c]].number;
        if (v != 0 && (v < 1000 || v > 2100)) last = c;
      }
      if (last == f.content.size()) return false;
      for (size_t c = last + 1; c < f.content.size(); ++c)
        if (!matched[c]) return true;
      return false;
    };
    std::vector<bool> ma(A.content.size(), false), mb(B.content.size(), false);
    for (size_t k = 0; k < al.pairs.size(); ++k) {
      for (size_t c = al.pairs[k].first; c < al.spans[k].first; ++c) ma[c] = true;
      for (size_t c = al.pairs[k].second; c < al.spans[k].second; ++c) mb[c] = true;
    }
    if (tail_after_number(A, ma) != tail_after_number(B, mb)) {
      p.conflict = "editions differ";
      p.severity = kStrict;
      return p;
    }
  }
  if (al.matches == 0) return p;
  std::optional<std::string> soft;  // a soft conflict, reported when no firmer one follows
  // Possession: "Scrooge" / "Scrooge's clerk".
  for (size_t m = 0; m < al.pairs.size(); ++m) {
    const auto [ia, ib] = al.pairs[m];
    // Both names go on with matched words ("Bob Cratchit's family" / "Cratchit family"): the
    // possessive is only a spelling.
    if (m + 1 < al.pairs.size()) continue;
    const bool pa = A.tokens[A.content[ia]].possessive;
    const bool pb = B.tokens[B.content[ib]].possessive;
    if (pa != pb) {
      const NameForm& f = pa ? A : B;
      const NameForm& other = pa ? B : A;
      const std::string& w = f.tokens[f.content[pa ? ia : ib]].text;
      if (!w.empty() && w.back() == 's') continue;  // a plural possessive: "poulterers' shops"
      const size_t idx = pa ? ia : ib;
      if (idx + 1 < f.content.size()) {
        // "Cratchit's wife" / "Mrs. Cratchit": the spouse role against the honorific form of
        // the possessor (the whole other name matched) is for the judge.
        const bool spouse = idx + 2 == f.content.size() && other.gender != 0 &&
                            SpouseGender(f.tokens[f.content.back()].text) == other.gender &&
                            al.matches == other.content.size();
        if (spouse) {
          if (!soft) soft = "a spouse role against an honorific name";
          continue;
        }
        p.conflict = "one is a possession of the other";
        p.severity = kNameWords;
        return p;
      }
    }
  }
  // Substitutions: a gap where both names have unmatched words ("John" / "Jane" Smith,
  // "Ghost of Christmas Past" / "Present", "Bank of America" / "England").
  size_t pa = 0, pb = 0;
  for (size_t k = 0; k <= al.pairs.size(); ++k) {
    const size_t ea = k < al.pairs.size() ? al.pairs[k].first : al.na;
    const size_t eb = k < al.pairs.size() ? al.pairs[k].second : al.nb;
    auto all_numbers = [](const NameForm& f, size_t from, size_t to) {
      for (size_t c = from; c < to; ++c)
        if (f.tokens[f.content[c]].number == 0) return false;
      return true;
    };
    auto lone_acronym = [](const NameForm& f, size_t from, size_t to, size_t other) {
      return to == from + 1 && f.tokens[f.content[from]].acronym && other >= 2;
    };
    auto all_modifiers = [](const NameForm& f, size_t from, size_t to) {
      for (size_t c = from; c < to; ++c)
        if (!IsStageModifier(f.tokens[f.content[c]].text)) return false;
      return true;
    };
    if (ea > pa && eb > pb && !all_numbers(A, pa, ea) && !all_numbers(B, pb, eb) &&
        !lone_acronym(A, pa, ea, eb - pb) && !lone_acronym(B, pb, eb, ea - pa)) {
      if (k == 0 && k < al.pairs.size() && (all_modifiers(A, pa, ea) || all_modifiers(B, pb, eb))) {
        // "Young Scrooge" / "Older Scrooge" / "Ebenezer Scrooge": an age or stage of one
        // entity, or a different one; for the judge.
        if (!soft) soft = "lead modifiers differ";
        p.lead_modifier = true;
      } else {
        const bool person = (A.person || B.person);
        p.conflict = person && k == 0 ? "given names differ" : "distinctive words differ";
        p.severity = kNameWords;
        return p;
      }
    }
    if (k < al.pairs.size()) {
      pa = al.spans[k].first;
      pb = al.spans[k].second;
    }
  }
  // Two full person names that share only the given name ("Robert Johnson" / "Robert Jackson")
  // are caught above; a short name against a full one is not a conflict.
  if (soft) {
    p.conflict = soft;
    p.severity = kSoft;
  }
  return p;
}

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

uint64_t PairKey(size_t a, size_t b) {
  if (a > b) std::swap(a, b);
  return (static_cast<uint64_t>(a) << 32) | static_cast<uint64_t>(b);
}

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

// ---------------------------------------------------------------------------------------------
// Description mentions: entity A's description names entity B ("PHANTOM, also referred to as
// the Ghost of Christmas Yet to Come"; "Scrooge's clerk, later identified as Bob Cratchit").
// Names that share no word are then still compared, and only the judge may join them. Every
// entity name is a key of a hash map; each description's word n-grams are looked up in it, so
// the cost is linear in the description text.
// ---------------------------------------------------------------------------------------------

struct DescWord {
  std::string text;         // folded
  bool possessive = false;  // "Scrooge's" -> "scrooge"
  bool boundary = false;    // punctuation (a clause or sentence end) before this word
  bool paren = false;       // directly after "("
  bool lower = false;       // written in lower case
  bool capital = false;     // capitalised, not the first word of a sentence
  uint32_t sentence = 0;
};

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

bool IsFunctionWord(std::string_view w) {
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

enum MentionKind : uint8_t { kNoMention = 0, kIdentityMention = 1, kRoleMention = 2 };

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

// The corpus's common words: words written in lower case somewhere in the descriptions
// (singular forms). A name made of them is a description ("the baby", "back-shop"), not a
// proper name. For names, `common_noun` is stricter: written in lower case at least as often as
// capitalised inside a sentence ("shop", "city"; not "Apple" when an apple is also mentioned,
// nor "Ghost" in a book that writes "the Ghost").
struct Corpus {
  std::vector<std::vector<DescWord>> desc;  // each entity's description words
  std::unordered_set<std::string> common;
  std::unordered_set<std::string> common_noun;
  // Words capitalised inside a sentence at least once and at least as often as written in lower
  // case ("Jacob", "Ebenezer"): proper words. A word neither written in lower case nor
  // capitalised inside a sentence is only seen at sentence starts ("Whereat"): the extractor
  // may have glued it to a name.
  std::unordered_set<std::string> proper;
  std::unordered_set<std::string> seen;
};

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
      const bool ends = t == w.size() || w[t].boundary || IsFunctionWord(w[t].text);
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
                          !(t.acronym && IsFunctionWord(t.text)) &&
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

Result<ResolveResult> ResolveImpl(const ResolveInput& input, const ResolveOptions& options,
                                  EmbeddingModel* embedder, ChatModel* adjudicator) {
  const size_t n = input.entities.size();
  auto check = [n](const std::vector<std::pair<size_t, size_t>>& v, const char* what) -> Status {
    for (const auto& [a, b] : v) {
      if (a >= n || b >= n) {
        return Status::InvalidArgument(
            fmt::format("{}: entity index {} out of range ({} entities)", what, std::max(a, b), n));
      }
    }
    return Status::Ok();
  };
  GRAG_RETURN_IF_ERROR(check(input.must_link, "must_link"));
  GRAG_RETURN_IF_ERROR(check(input.cannot_link, "cannot_link"));
  for (const auto& l : input.prior_links) {
    if (l.a >= n || l.b >= n)
      return Status::InvalidArgument("prior link: entity index out of range");
  }

  ResolveResult result;
  for (const auto& e : input.entities) result.stats.fresh += e.fresh ? 1 : 0;

  Prepared prep = Prepare(input, options);
  auto& cands = prep.candidates;
  result.stats.pairs_compared = static_cast<int64_t>(cands.size());

  const bool llm = adjudicator != nullptr;
  const double merge_t = llm ? options.merge_threshold : options.no_llm_merge_threshold;
  const double adj_t = llm ? options.adjudicate_threshold : merge_t;
  const double low_t = std::min({merge_t, adj_t, options.adjudicate_threshold});
  const double nw = std::max(0.0, options.name_weight);
  const double ew = embedder != nullptr ? std::max(0.0, options.embedding_weight) : 0.0;

  // ---- embeddings of the descriptions in pairs that could reach a band ----
  if (ew > 0) {
    std::vector<char> need(n, 0);
    for (const auto& c : cands) {
      if (c.info.conflict && !(llm && Judgeable(c))) continue;
      if ((nw * c.info.name + ew) / (nw + ew) < low_t && !(llm && AlwaysAsk(c))) continue;
      need[c.a] = need[c.b] = 1;
    }
    std::vector<size_t> ids;
    for (size_t i = 0; i < n; ++i) {
      if (need[i] && !input.entities[i].description.empty()) ids.push_back(i);
    }
    std::sort(ids.begin(), ids.end(),
              [&](size_t x, size_t y) { return prep.rank[x] < prep.rank[y]; });
    std::vector<std::vector<float>> vecs(n);
    const size_t batch = std::max<size_t>(1, options.embedding_batch);
    for (size_t s = 0; s < ids.size(); s += batch) {
      std::vector<std::string> texts;
      for (size_t k = s; k < std::min(ids.size(), s + batch); ++k) {
        texts.push_back(Truncate(input.entities[ids[k]].description, options.max_embedding_chars));
      }
      auto r = embedder->Embed(texts);
      if (!r.ok()) return r.status().WithContext("entity resolution: embedding descriptions");
      if (r->vectors.size() != texts.size()) {
        return Status::Internal(
            "entity resolution: the embedder returned a wrong number of vectors");
      }
      for (size_t k = 0; k < texts.size(); ++k) vecs[ids[s + k]] = std::move(r->vectors[k]);
      result.stats.embedded += static_cast<int64_t>(texts.size());
    }
    double low = options.cosine_low, high = options.cosine_high;
    if (low < 0 || high < 0) {
      const bool lexical = IsLexicalEmbeddingModel(embedder->model());
      low = lexical ? 0.05 : 0.3;
      high = lexical ? 0.4 : 0.85;
    }
    for (auto& c : cands) {
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
      c.score = (nw * c.info.name + ew * CalibratedCosine(c.cosine, low, high)) / (nw + ew);
    }
  }
  for (auto& c : cands) {
    if (!c.has_cosine) c.score = c.info.name;
  }

  // ---- bands ----
  enum Decision : uint8_t { kApart, kMerge, kAsk };
  std::vector<uint8_t> decision(cands.size(), kApart);
  std::vector<std::string> reasons(cands.size());
  std::vector<ResolveMethod> methods(cands.size(), ResolveMethod::kSimilarity);
  std::vector<const Candidate*> ask;
  std::vector<size_t> ask_index;
  for (size_t k = 0; k < cands.size(); ++k) {
    const auto& c = cands[k];
    if (c.info.conflict) {
      if (llm && Judgeable(c) && (AlwaysAsk(c) || c.score >= adj_t)) {
        decision[k] = kAsk;
        ask.push_back(&c);
        ask_index.push_back(k);
      } else if (c.score >= low_t) {
        ++result.stats.guarded;
      }
      continue;
    }
    const Route route = RouteOf(c, prep);
    if (c.score >= merge_t && route == kByScore) {
      decision[k] = kMerge;
      if (c.info.name >= 0.999 && c.has_cosine) {
        methods[k] = ResolveMethod::kRule;
        reasons[k] = fmt::format("same name, descriptions agree (score {:.2f})", c.score);
      } else {
        reasons[k] = fmt::format("similar (name {:.2f}, score {:.2f})", c.info.name, c.score);
      }
    } else if (llm && (AlwaysAsk(c) ||
                       (route != kNotJoined &&
                        (c.score >= adj_t || c.info.name >= options.adjudicate_name_threshold)))) {
      decision[k] = kAsk;
      ask.push_back(&c);
      ask_index.push_back(k);
    }
  }

  // Pairs the judge joined: their name conflicts (soft ones, or different words of names that a
  // description links) no longer keep their clusters apart.
  std::unordered_set<uint64_t> approved;
  auto conflicting = [&](size_t u, size_t v) {
    return Compare(prep.forms[u], prep.forms[v]).conflict.has_value() &&
           approved.count(PairKey(u, v)) == 0;
  };
  std::vector<std::vector<std::pair<size_t, size_t>>> fits(n);  // entity -> (other, cand)
  for (size_t k = 0; k < cands.size(); ++k) {
    const auto& c = cands[k];
    if (c.info.conflict || (c.score < std::min(adj_t, options.adjudicate_threshold) &&
                            c.info.name < options.adjudicate_name_threshold)) {
      continue;
    }
    const size_t ca = prep.forms[c.a].content.size(), cb = prep.forms[c.b].content.size();
    if (c.info.a_in_b && !c.info.b_in_a && ca < cb + (prep.forms[c.a].acronym.empty() ? 0 : 9)) {
      fits[c.a].push_back({c.b, k});
    } else if (c.info.b_in_a && !c.info.a_in_b) {
      fits[c.b].push_back({c.a, k});
    }
  }
  for (auto& f : fits) {
    std::sort(f.begin(), f.end(), [&](const auto& u, const auto& v) {
      return prep.rank[u.first] < prep.rank[v.first];
    });
  }
  // ---- a short name that fits several entities that stay apart joins none of them ----
  // Without a judge: all of them stay apart. With one: the judge sees each such pair (none is
  // joined on its score alone), and the short name stays apart only when the judge joins it
  // to two entities that must stay apart.
  auto fit_conflict = [&](const std::vector<std::pair<size_t, size_t>>& f, bool only_merged) {
    if (f.size() > options.max_fits) return true;
    for (size_t u = 0; u < f.size(); ++u) {
      if (only_merged && decision[f[u].second] != kMerge) continue;
      for (size_t v = u + 1; v < f.size(); ++v) {
        if (only_merged && decision[f[v].second] != kMerge) continue;
        if (conflicting(f[u].first, f[v].first)) return true;
      }
    }
    return false;
  };
  if (llm) {
    for (size_t x = 0; x < n; ++x) {
      if (fits[x].size() < 2 || !fit_conflict(fits[x], false)) continue;
      for (const auto& [other, k] : fits[x]) {
        (void)other;
        if (decision[k] != kMerge) continue;
        decision[k] = kAsk;
        ask_index.push_back(k);
      }
    }
    std::sort(ask_index.begin(),
              ask_index.end());  // candidate order: batches independent of input order
    ask.clear();
    for (size_t k : ask_index) ask.push_back(&cands[k]);
  }
  // ---- what the judge is not asked ----
  // The judge's calls are capped (ResolveOptions::max_judge_calls): on a realistic extraction
  // the pairs grow faster than the duplicates. The most similar pairs go first (they are the
  // likely duplicates), then those of the most frequent names; the ones left stay apart, as
  // without a judge. Logged, with how many of them are two names seen in one chunk each (a
  // verdict on those moves a mention or two). Putting such pairs last lost more right merges
  // on the book replay than it saved (bench/RESULTS.md).
  if (llm && !ask_index.empty() && options.max_judge_calls >= 0) {
    const size_t bs = std::max<size_t>(1, options.adjudication_batch);
    const size_t room = static_cast<size_t>(std::max<int64_t>(1, options.max_judge_calls)) * bs;
    std::vector<size_t> judged = ask_index, by_rule;
    auto single = [&](size_t k) {
      const ResolveEntity& ea = input.entities[cands[k].a];
      const ResolveEntity& eb = input.entities[cands[k].b];
      return ea.frequency <= 1 && eb.frequency <= 1 && ea.contexts.size() == 1 &&
             eb.contexts.size() == 1;
    };
    if (judged.size() > room) {
      auto weight = [&](size_t k) {
        return std::min(input.entities[cands[k].a].frequency, input.entities[cands[k].b].frequency);
      };
      std::stable_sort(judged.begin(), judged.end(), [&](size_t x, size_t y) {
        if (cands[x].score != cands[y].score) return cands[x].score > cands[y].score;
        return weight(x) > weight(y);
      });
      by_rule.assign(judged.begin() + static_cast<std::ptrdiff_t>(room), judged.end());
      judged.resize(room);
      std::sort(judged.begin(), judged.end());
      for (size_t k : by_rule) result.stats.not_judged_single += single(k) ? 1 : 0;
      result.stats.not_judged_capped = static_cast<int64_t>(by_rule.size());
    }
    // Without a judge these pairs stay apart: the ones that could merge on their score alone
    // were merged above, and those here that score higher are short names fitting several
    // entities, which stay apart without a judge.
    for (size_t k : by_rule) decision[k] = kApart;
    if (!by_rule.empty()) {
      Log(LogLevel::kInfo, "resolve",
          fmt::format("the judge's cap of {} calls (resolution.max_judge_share) left {} "
                      "candidate pairs apart unjudged ({} of them of two names seen in one chunk "
                      "each)",
                      std::max<int64_t>(1, options.max_judge_calls), by_rule.size(),
                      result.stats.not_judged_single));
    }
    ask_index = std::move(judged);
    ask.clear();
    for (size_t k : ask_index) ask.push_back(&cands[k]);
  }
  // ---- adjudication (batches in candidate order, which is the canonical rank order) ----
  if (llm && !ask.empty()) {
    const size_t bs = std::max<size_t>(1, options.adjudication_batch);
    const size_t batches = (ask.size() + bs - 1) / bs;
    std::vector<BatchOutcome> outcomes(batches);
    ParallelFor(batches, static_cast<size_t>(std::max(1, options.llm_concurrency)), [&](size_t b) {
      std::vector<const Candidate*> batch(
          ask.begin() + static_cast<std::ptrdiff_t>(b * bs),
          ask.begin() + static_cast<std::ptrdiff_t>(std::min(ask.size(), (b + 1) * bs)));
      try {
        outcomes[b] = Adjudicate(*adjudicator, input, options, batch);
      } catch (const std::exception& ex) {
        outcomes[b].error = Status::Internal(std::string("entity resolution: ") + ex.what());
      }
    });
    for (size_t b = 0; b < batches; ++b) {
      result.stats.llm_calls += outcomes[b].calls;
      if (!outcomes[b].error.ok()) {
        return outcomes[b].error.WithContext("entity resolution: adjudication");
      }
    }
    result.stats.adjudicated = static_cast<int64_t>(ask.size());
    for (size_t q = 0; q < ask.size(); ++q) {
      const size_t k = ask_index[q];
      const auto& verdicts = outcomes[q / bs].verdicts;
      auto it = verdicts.find(q % bs + 1);
      if (it != verdicts.end() && it->second.same) {
        decision[k] = kMerge;
        methods[k] = ResolveMethod::kLlm;
        reasons[k] = it->second.reason.empty() ? "the LLM judged them the same" : it->second.reason;
      } else {
        decision[k] = kApart;
      }
    }
  }
  for (size_t k = 0; k < cands.size(); ++k) {
    if (decision[k] == kMerge && methods[k] == ResolveMethod::kLlm && cands[k].info.conflict) {
      approved.insert(PairKey(cands[k].a, cands[k].b));
    }
  }
  if (llm) {
    for (size_t x = 0; x < n; ++x) {
      auto& f = fits[x];
      if (f.size() < 2 || !fit_conflict(f, true)) continue;
      for (const auto& [other, k] : f) {
        (void)other;
        if (decision[k] == kMerge) ++result.stats.guarded;
        decision[k] = kApart;
      }
    }
  } else {
    // Without a judge, a short name whose fits do not firmly conflict with one another (an age
    // word or an "X of Y" extension is a soft conflict: "Old Jacob Marley", "Ghost of Jacob
    // Marley") joins its best fit: the fit whose extra words are proper words, on the name
    // alone, highest score first, then the most frequent ("Marley" -> "Jacob Marley"). Fits
    // that firmly conflict ("Smith": John and Jane Smith) keep the short name apart from all.
    // A fit whose extra words the extractor glued on ("Whereat Scrooge": a word seen only at a
    // sentence start; "Scrooge Scrooge": the short name again) is not another entity.
    for (size_t x = 0; x < n; ++x) {
      auto& f = fits[x];
      if (f.empty()) continue;
      std::vector<std::pair<size_t, size_t>> real;
      for (const auto& fit : f) {
        if (!SpuriousFit(cands[fit.second], x, prep)) real.push_back(fit);
      }
      bool hard = real.size() > options.max_fits;
      for (size_t u = 0; u < real.size() && !hard; ++u) {
        for (size_t v = u + 1; v < real.size() && !hard; ++v) {
          hard =
              Compare(prep.forms[real[u].first], prep.forms[real[v].first]).severity >= kNameWords;
        }
      }
      if (hard) {
        for (const auto& [other, k] : f) {
          (void)other;
          if (decision[k] == kMerge) ++result.stats.guarded;
          decision[k] = kApart;
        }
        continue;
      }
      if (prep.generic[x]) continue;
      size_t best = cands.size(), best_other = 0;
      for (const auto& [other, k] : real) {
        if (!ProperExtension(cands[k], prep) || RouteOf(cands[k], prep) != kByScore) continue;
        if (!ShareContext(input.entities[x], input.entities[other])) continue;
        const bool better =
            best == cands.size() || cands[k].score > cands[best].score ||
            (cands[k].score == cands[best].score &&
             (input.entities[other].frequency > input.entities[best_other].frequency ||
              (input.entities[other].frequency == input.entities[best_other].frequency &&
               prep.rank[other] < prep.rank[best_other])));
        if (better) {
          best = k;
          best_other = other;
        }
      }
      if (best == cands.size() || decision[best] == kMerge) continue;
      decision[best] = kMerge;
      reasons[best] = fmt::format("a short name's best fit (name {:.2f}, score {:.2f})",
                                  cands[best].info.name, cands[best].score);
    }
  }

  // ---- clusters: user links, prior links, then new links best first ----
  Clusters cl(n);
  std::unordered_set<uint64_t> cannot;
  for (const auto& [a, b] : input.cannot_link) cannot.insert(PairKey(a, b));
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
      if (prep.rank[p.first] > prep.rank[p.second]) std::swap(p.first, p.second);
    }
    std::sort(v.begin(), v.end(), [&](const auto& x, const auto& y) {
      return std::make_pair(prep.rank[x.first], prep.rank[x.second]) <
             std::make_pair(prep.rank[y.first], prep.rank[y.second]);
    });
    return v;
  };
  for (const auto& [a, b] : ordered_pairs(input.must_link)) {
    if (cl.Find(a) != cl.Find(b) && !crosses_cannot(a, b)) cl.Union(a, b);
  }
  {
    std::vector<std::pair<size_t, size_t>> prior;
    for (const auto& l : input.prior_links) prior.push_back({l.a, l.b});
    for (const auto& [a, b] : ordered_pairs(prior)) {
      if (cl.Find(a) != cl.Find(b) && !crosses_cannot(a, b)) cl.Union(a, b);
    }
  }
  std::vector<size_t> merges;
  for (size_t k = 0; k < cands.size(); ++k) {
    if (decision[k] == kMerge) merges.push_back(k);
  }
  std::sort(merges.begin(), merges.end(), [&](size_t x, size_t y) {
    if (cands[x].score != cands[y].score) return cands[x].score > cands[y].score;
    return x < y;  // candidates are in rank order
  });
  for (size_t k : merges) {
    const auto& c = cands[k];
    const size_t ra = cl.Find(c.a), rb = cl.Find(c.b);
    if (ra == rb) continue;
    bool blocked = crosses_cannot(c.a, c.b);
    for (size_t u : cl.members[ra]) {
      if (blocked) break;
      for (size_t v : cl.members[rb]) {
        if ((u == c.a && v == c.b) || (u == c.b && v == c.a)) continue;
        if (conflicting(u, v)) {
          blocked = true;
          break;
        }
      }
    }
    if (blocked) {
      ++result.stats.guarded;
      continue;
    }
    cl.Union(c.a, c.b);
    ResolveLink link;
    link.a = prep.rank[c.a] < prep.rank[c.b] ? c.a : c.b;
    link.b = link.a == c.a ? c.b : c.a;
    link.score = c.score;
    link.method = methods[k];
    link.reason = reasons[k];
    result.links.push_back(std::move(link));
  }
  result.stats.merged = static_cast<int64_t>(result.links.size());

  // ---- canonical member: the most complete spelling among the reasonably frequent ----
  std::vector<size_t> canonical(n, 0);
  for (size_t r = 0; r < n; ++r) {
    if (cl.Find(r) != r) continue;
    const auto& members = cl.members[r];
    int64_t max_freq = 0;
    for (size_t m : members) max_freq = std::max(max_freq, input.entities[m].frequency);
    const int64_t floor = std::max<int64_t>(1, max_freq / 4);
    size_t best = members[0];
    auto better = [&](size_t x, size_t y) {  // is x a better canonical than y?
      const auto& ex = input.entities[x];
      const auto& ey = input.entities[y];
      const bool fx = ex.frequency >= floor || max_freq == 0,
                 fy = ey.frequency >= floor || max_freq == 0;
      if (fx != fy) return fx;
      const size_t tx = prep.forms[x].content.size(), ty = prep.forms[y].content.size();
      if (tx != ty) return tx > ty;
      if (prep.forms[x].words != prep.forms[y].words)
        return prep.forms[x].words > prep.forms[y].words;
      if (ex.frequency != ey.frequency) return ex.frequency > ey.frequency;
      return prep.rank[x] < prep.rank[y];
    };
    for (size_t m : members) {
      if (better(m, best)) best = m;
    }
    for (size_t m : members) canonical[m] = best;
  }
  result.canonical = std::move(canonical);
  return result;
}

}  // namespace

Result<ResolveResult> ResolveEntities(const ResolveInput& input, const ResolveOptions& options,
                                      EmbeddingModel* embedder, ChatModel* adjudicator) {
  try {
    return ResolveImpl(input, options, embedder, adjudicator);
  } catch (const std::exception& ex) {
    return Status::Internal(std::string("entity resolution: ") + ex.what());
  }
}

}  // namespace grag
