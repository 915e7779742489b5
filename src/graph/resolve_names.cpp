// Entity resolution, names: every entity's name is parsed once into a NameForm (accent-folded
// lower-case tokens, "I.B.M." -> "ibm", "Win10" -> "win" "10", "Scrooge's" -> "scrooge" marked
// possessive; leading articles, honorifics (remembered for their gender) and trailing legal
// suffixes removed; numbers given their value; acronym keys), and two NameForms are compared
// token by token (Compare). Blocking, similarity and the guards in resolve.cpp work on these.
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grag/words.h"
#include "resolve_internal.h"

namespace grag::resolve_internal {

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

// ---------------------------------------------------------------------------------------------
// Word lists (generic English; nothing from any data set)
// ---------------------------------------------------------------------------------------------

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

namespace {

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

}  // namespace

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

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsDigit);
}

namespace {

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

}  // namespace

bool GenericType(std::string_view t) {
  return t.empty() || t == "proper noun" || t == "noun phrase" || t == "unknown";
}

std::string LowerAscii(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

namespace {

// Splits the folded text into raw word tokens with their possessive marks.
struct RawWord {
  std::string text;
  bool possessive = false;
  bool acronym = false;
};

}  // namespace

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

namespace {

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

// 1. Raw words: runs of letters/digits; "'s" / "s'" mark the word possessive; an apostrophe
// between letters joins ("o'brien"); letter/digit boundaries split ("win10", "4o").
// dotted[k]: raw word k ended with a '.' directly (initials).
std::vector<RawWord> RawWords(const std::string& folded, std::vector<bool>* dotted_out) {
  std::vector<bool>& dotted = *dotted_out;
  std::vector<RawWord> raw;
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

  return raw;
}

// 2. Runs of single letters merged ("i b m" -> "ibm", "h w" -> "hw"), and which words are
// acronyms.
std::vector<RawWord> MergeInitials(const std::vector<RawWord>& raw, const std::vector<bool>& dotted,
                                   const std::set<std::string>& acronym_words, bool all_caps) {
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

  return words;
}

// 3. Tokens: leading articles and honorifics stripped (remembered in f), trailing legal
// suffixes too (at least one word kept), numbers valued, stop words marked; f's content.
void BuildTokens(const std::vector<RawWord>& words, std::string_view name, bool all_caps,
                 NameForm& f) {
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
}

// 4. Acronym forms: the name as one acronym, and the initials of the full name.
void AcronymForms(NameForm& f) {
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
}

}  // namespace

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
  std::vector<bool> dotted;
  const std::vector<RawWord> raw = RawWords(folded, &dotted);
  BuildTokens(MergeInitials(raw, dotted, acronym_words, all_caps), name, all_caps, f);
  AcronymForms(f);
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

namespace {

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

}  // namespace

bool TypesCompatible(const NameForm& a, const NameForm& b) {
  return a.type == b.type || GenericType(a.type) || GenericType(b.type);
}

namespace {

PairInfo CompareNames(const NameForm& A, const NameForm& B, bool check_types);

}  // namespace

bool TypesConfusable(const NameForm& a, const NameForm& b) {
  auto one_of = [&](std::string_view x, std::string_view y) {
    return (a.type == x && b.type == y) || (a.type == y && b.type == x);
  };
  return one_of("organization", "geo") || one_of("organization", "person") ||
         one_of("organisation", "geo") || one_of("organisation", "person") ||
         one_of("organization", "location") || one_of("organisation", "location");
}

namespace {

// Names this similar with confusable types go to the judge.
constexpr double kConfusableTypeName = 0.8;

}  // namespace

PairInfo Compare(const NameForm& A, const NameForm& B) {
  if (TypesCompatible(A, B) || !TypesConfusable(A, B)) return CompareNames(A, B, true);
  PairInfo p = CompareNames(A, B, false);
  const bool soft = !p.conflict && p.name >= kConfusableTypeName && !p.modifier_containment &&
                    !p.plural_mismatch && !p.both_extra;
  p.conflict = "types differ";
  p.severity = soft ? kSoft : kStrict;
  return p;
}

namespace {

// How two names' words line up, and what CompareNames derives from it first.
struct Measured {
  Alignment al;
  double cover_a = 0, cover_b = 0;  // share of each name's content words matched
  bool acronym_match = false;       // one name is the other's acronym
};

// Similarity and containment: p.name, a_in_b / b_in_a, and the containment's details.
Measured Measure(const NameForm& A, const NameForm& B, PairInfo& p) {
  Measured m{Align(A, B)};
  const Alignment& al = m.al;
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

  m.cover_a = cover_a;
  m.cover_b = cover_b;
  m.acronym_match = acronym_match;
  return m;
}

// Conflicts no similarity overrides (types, gender honorifics, generations): true when one
// ends the comparison. A female honorific against none is left as a soft conflict.
bool FirmConflict(const NameForm& A, const NameForm& B, const Measured& m, bool check_types,
                  PairInfo& p) {
  const Alignment& al = m.al;
  if (check_types && !TypesCompatible(A, B)) {
    p.conflict = "types differ";
    p.severity = kStrict;
    return true;
  }
  if (A.gender != 0 && B.gender != 0 && A.gender != B.gender) {
    p.conflict = "honorifics differ";
    p.severity = kStrict;
    return true;
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
      return true;
    }
  }
  return false;
}

// Numbers, versions and editions that differ: true when they do (a strict conflict).
bool NumberConflict(const NameForm& A, const NameForm& B, const Measured& m, PairInfo& p) {
  const Alignment& al = m.al;
  const double cover_a = m.cover_a, cover_b = m.cover_b;
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
    return true;
  }
  if (sa.empty() != sb.empty() && al.matches > 0) {
    // "Windows" / "Windows 10": the name without a number is all inside the numbered one.
    const bool base_inside = sa.empty() ? cover_a >= 0.74 : cover_b >= 0.74;
    if (base_inside) {
      p.conflict = "versions differ";
      p.severity = kStrict;
      return true;
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
      return true;
    }
  }
  return false;
}

// One name a possession of the other ("Scrooge" / "Scrooge's clerk"): true when so; a spouse
// role against an honorific name is noted in `soft` for the judge instead.
bool PossessionConflict(const NameForm& A, const NameForm& B, const Alignment& al,
                        std::optional<std::string>& soft, PairInfo& p) {
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
        return true;
      }
    }
  }
  return false;
}

// Substitutions: a gap where both names have unmatched words ("John" / "Jane" Smith,
// "Ghost of Christmas Past" / "Present", "Bank of America" / "England").
bool SubstitutionConflict(const NameForm& A, const NameForm& B, const Alignment& al,
                          std::optional<std::string>& soft, PairInfo& p) {
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
        return true;
      }
    }
    if (k < al.pairs.size()) {
      pa = al.spans[k].first;
      pb = al.spans[k].second;
    }
  }
  return false;
}

PairInfo CompareNames(const NameForm& A, const NameForm& B, bool check_types) {
  PairInfo p;
  const Measured m = Measure(A, B, p);
  if (FirmConflict(A, B, m, check_types, p)) return p;
  if (m.acronym_match || A.joined == B.joined) return p;
  if (NumberConflict(A, B, m, p)) return p;
  if (m.al.matches == 0) return p;
  std::optional<std::string> soft;  // a soft conflict, reported when no firmer one follows
  if (PossessionConflict(A, B, m.al, soft, p)) return p;
  if (SubstitutionConflict(A, B, m.al, soft, p)) return p;
  // Two full person names that share only the given name ("Robert Johnson" / "Robert Jackson")
  // are caught above; a short name against a full one is not a conflict.
  if (soft) {
    p.conflict = soft;
    p.severity = kSoft;
  }
  return p;
}

}  // namespace

}  // namespace grag::resolve_internal
