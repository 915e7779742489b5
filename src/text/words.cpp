// The shared word tools (grag/words.h): name keys, word lists, stems, sentences, search terms.
#include "grag/words.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>
#include <unordered_set>

namespace grag {
namespace {

// ---------------------------------------------------------------- word lists

constexpr std::string_view kFunctionWords[] = {
    "a",       "about",      "above",   "after", "again",   "against", "all",    "also",
    "am",      "an",         "and",     "any",   "are",     "as",      "at",     "be",
    "been",    "before",     "being",   "below", "between", "both",    "but",    "by",
    "can",     "could",      "did",     "do",    "does",    "doing",   "done",   "down",
    "during",  "each",       "either",  "else",  "ever",    "every",   "few",    "for",
    "from",    "further",    "had",     "has",   "have",    "having",  "he",     "her",
    "here",    "hers",       "herself", "him",   "himself", "his",     "how",    "i",
    "if",      "in",         "into",    "is",    "it",      "its",     "itself", "just",
    "let",     "like",       "may",     "me",    "might",   "more",    "most",   "much",
    "must",    "my",         "myself",  "no",    "nor",     "not",     "now",    "of",
    "off",     "on",         "once",    "one",   "only",    "or",      "other",  "our",
    "ours",    "out",        "over",    "own",   "same",    "shall",   "she",    "should",
    "so",      "some",       "such",    "than",  "that",    "the",     "their",  "theirs",
    "them",    "themselves", "then",    "there", "these",   "they",    "this",   "those",
    "through", "thus",       "to",      "too",   "under",   "until",   "up",     "upon",
    "us",      "very",       "was",     "we",    "were",    "what",    "when",   "where",
    "whether", "which",      "while",   "who",   "whom",    "whose",   "why",    "will",
    "with",    "would",      "yet",     "you",   "your",    "yours",   "cannot", "many",
    "within",  "without",    "among",   "via",   "per",
};

// Pieces of contractions as NormalizeEntityName leaves them ("don't" gives "don" and "t").
constexpr std::string_view kContractionPieces[] = {
    "s",     "t",     "d",    "ll",  "m",      "re",      "ve",     "don",  "isn",   "aren", "wasn",
    "weren", "doesn", "didn", "won", "wouldn", "shouldn", "couldn", "hasn", "haven", "hadn",
};

// The words of questions about a whole corpus: a question made only of these and function words
// ("What are the main themes of this story?") asks for the big picture, and matching them
// against text would only find noise.
constexpr std::string_view kQuestionWords[] = {
    "main",          "major",        "key",        "chief",       "central",    "principal",
    "primary",       "important",    "importance", "significant", "overall",    "general",
    "broad",         "biggest",      "largest",    "theme",       "themes",     "topic",
    "topics",        "subject",      "subjects",   "idea",        "ideas",      "thread",
    "threads",       "motif",        "motifs",     "message",     "messages",   "point",
    "points",        "issue",        "issues",     "story",       "stories",    "book",
    "books",         "novel",        "novels",     "text",        "texts",      "corpus",
    "document",      "documents",    "dataset",    "data",        "collection", "content",
    "contents",      "tale",         "narrative",  "passage",     "passages",   "summary",
    "summarise",     "summarize",    "summarised", "summarized",  "overview",   "describe",
    "description",   "explain",      "tell",       "discuss",     "discussed",  "list",
    "give",          "show",         "say",        "says",        "said",       "mention",
    "mentioned",     "happen",       "happens",    "happened",    "thing",      "things",
    "kind",          "kinds",        "type",       "types",       "aspect",     "aspects",
    "part",          "parts",        "role",       "roles",       "entities",   "entity",
    "relationships", "relationship", "sources",    "source",      "chunk",      "chunks",
    "report",        "reports",      "community",  "communities", "please",     "know",
    "find",          "something",    "anything",   "everything",
};

constexpr std::string_view kAbbreviations[] = {
    "capt", "col", "dr", "esq", "fr", "gen",  "hon", "jr",  "lt", "messrs", "mlle", "mme",
    "mr",   "mrs", "ms", "mt",  "mx", "prof", "rev", "sgt", "sr", "st",     "vs"};

constexpr std::string_view kNameFillers[] = {"a",  "an", "the", "of", "and",  "or",   "in", "on",
                                             "at", "to", "for", "by", "with", "from", "de"};

using WordSet = std::unordered_set<std::string_view>;

WordSet MakeSet(std::initializer_list<std::span<const std::string_view>> lists) {
  WordSet set;
  for (auto list : lists) set.insert(list.begin(), list.end());
  return set;
}

const WordSet& NonContentWords() {
  static const WordSet kSet = MakeSet({kFunctionWords, kContractionPieces, kQuestionWords});
  return kSet;
}

bool IsShortNumber(const std::string& w) {
  return w.size() <= 2 &&
         std::all_of(w.begin(), w.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// ---------------------------------------------------------------- name keys

bool IsSeparator(utf8proc_int32_t cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
      return true;
    default:
      return false;
  }
}

std::string LowerAscii(std::string s) {
  for (char& c : s) c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

// ---------------------------------------------------------------- sentence splitting

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
bool IsLower(char c) { return c >= 'a' && c <= 'z'; }

// Whether the character at text[i] is a lower-case letter, in any script ("émile", "ωmega").
bool StartsLower(std::string_view text, size_t i) {
  const auto byte = static_cast<unsigned char>(text[i]);
  if (byte < 0x80) return IsLower(text[i]);
  utf8proc_int32_t cp = 0;
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                                  static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
  return n > 0 && utf8proc_category(cp) == UTF8PROC_CATEGORY_LL;
}
bool IsUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool IsAlpha(char c) { return IsLower(c) || IsUpper(c); }
bool IsTerminator(char c) { return c == '.' || c == '!' || c == '?'; }

// Closing quotes and brackets that belong to the sentence before them: the length of the one at
// text[i], or 0.
size_t CloserAt(std::string_view text, size_t i) {
  const char c = text[i];
  if (c == '"' || c == '\'' || c == ')' || c == ']' || c == '_') return 1;
  for (std::string_view closer : {"\xE2\x80\x9D", "\xE2\x80\x99"}) {  // ” ’
    if (text.substr(i, closer.size()) == closer) return closer.size();
  }
  return 0;
}

// Opening quotes and brackets before a sentence's first word: the length of the one at text[i].
size_t OpenerAt(std::string_view text, size_t i) {
  const char c = text[i];
  if (c == '"' || c == '\'' || c == '(' || c == '[' || c == '_' || c == '-') return 1;
  for (std::string_view opener : {"\xE2\x80\x9C", "\xE2\x80\x98"}) {  // “ ‘
    if (text.substr(i, opener.size()) == opener) return opener.size();
  }
  return 0;
}

// The period at text[dot] ends an abbreviation ("Mr.") or an initial ("J."), not a sentence.
bool EndsAbbreviation(std::string_view text, size_t dot) {
  size_t w = dot;
  while (w > 0 && IsAlpha(text[w - 1])) --w;
  if (w == dot) return false;
  const std::string_view word = text.substr(w, dot - w);
  if (word.size() == 1) return IsUpper(word[0]);
  std::string lower(word);
  for (char& c : lower) c = IsUpper(c) ? static_cast<char>(c - 'A' + 'a') : c;
  return IsAbbreviation(lower);
}

// The sentence text[begin, end), whitespace collapsed; nullopt when it holds no letter or digit.
std::optional<Sentence> MakeSentence(std::string_view text, size_t begin, size_t end) {
  Sentence s;
  s.text.reserve(end - begin);
  bool space = false;
  bool has_word = false;
  // A run of non-space bytes at a time, appended whole.
  for (size_t i = begin; i < end;) {
    if (IsSpace(text[i])) {
      space = !s.text.empty();
      ++i;
      continue;
    }
    size_t j = i;
    for (; j < end && !IsSpace(text[j]); ++j) {
      const char c = text[j];
      has_word =
          has_word || IsAlpha(c) || (c >= '0' && c <= '9') || static_cast<unsigned char>(c) >= 0x80;
    }
    if (s.text.empty()) s.offset = i;
    if (space) s.text += ' ';
    space = false;
    s.text.append(text, i, j - i);
    i = j;
  }
  if (!has_word) return std::nullopt;
  size_t first = 0;
  while (first < s.text.size()) {
    const size_t n = OpenerAt(s.text, first);
    if (n == 0) break;
    first += n;
  }
  size_t last = s.text.size();
  for (bool more = true; more && last > 0;) {
    more = false;
    for (size_t n : {size_t{1}, size_t{3}}) {
      if (last >= n && CloserAt(s.text, last - n) == n) {
        last -= n;
        more = true;
        break;
      }
    }
  }
  const bool starts_well = first < s.text.size() && !StartsLower(s.text, first);
  s.complete = starts_well && last > 0 && IsTerminator(s.text[last - 1]);
  return s;
}

// Where the sentence that has a terminator at text[i] ends (past its closers), or nullopt when
// the terminator does not end a sentence.
std::optional<size_t> SentenceEnd(std::string_view text, size_t i) {
  size_t j = i + 1;
  while (j < text.size() && IsTerminator(text[j])) ++j;
  while (j < text.size()) {
    const size_t n = CloserAt(text, j);
    if (n == 0) break;
    j += n;
  }
  if (j < text.size() && !IsSpace(text[j])) return std::nullopt;  // "3.5", "e.g."
  if (text[i] == '.' && j == i + 1 && EndsAbbreviation(text, i)) return std::nullopt;
  size_t k = j;
  while (k < text.size() && IsSpace(text[k])) ++k;
  if (k < text.size() && StartsLower(text, k)) return std::nullopt;  // '"Bah!" said Scrooge'
  return j;
}

}  // namespace

std::vector<Sentence> SplitSentences(std::string_view text) {
  std::vector<Sentence> out;
  size_t start = 0;
  if (text.substr(0, 7) == "title: ") {  // chunks.prepend_title's prefix is not prose
    const size_t nl = text.find('\n');
    start = nl == std::string_view::npos ? text.size() : nl + 1;
  }
  auto emit = [&](size_t end) {
    if (auto s = MakeSentence(text, start, end)) out.push_back(std::move(*s));
  };
  for (size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {  // a blank line ends a paragraph, and with it a sentence
      size_t j = i + 1;
      while (j < text.size() && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r')) ++j;
      if (j < text.size() && text[j] == '\n') {
        emit(i);
        start = j + 1;
        i = j;
      }
      continue;
    }
    if (!IsTerminator(c)) continue;
    if (auto end = SentenceEnd(text, i)) {
      emit(*end);
      start = *end;
      i = *end - 1;
    }
  }
  emit(text.size());
  return out;
}

std::string ShortenAtWord(std::string_view raw, size_t max_bytes) {
  std::string flat;  // descriptions joined from several mentions hold line breaks
  flat.reserve(raw.size());
  for (char c : raw) {
    if (!IsSpace(c)) {
      flat += c;
    } else if (!flat.empty() && flat.back() != ' ') {
      flat += ' ';
    }
  }
  if (!flat.empty() && flat.back() == ' ') flat.pop_back();
  const std::string_view text = flat;
  if (text.size() <= max_bytes) return flat;
  constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // …
  if (max_bytes < kEllipsis.size()) return {};
  size_t cut = max_bytes - kEllipsis.size();
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  const size_t space = text.rfind(' ', cut);
  if (space != std::string_view::npos && space > cut / 2) cut = space;
  while (cut > 0 && (IsSpace(text[cut - 1]) || text[cut - 1] == ',' || text[cut - 1] == ';' ||
                     text[cut - 1] == ':')) {
    --cut;
  }
  return std::string(text.substr(0, cut)) + std::string(kEllipsis);
}

std::span<const std::string_view> FunctionWords() { return kFunctionWords; }

bool IsFunctionWord(std::string_view lower) {
  static const WordSet kSet = MakeSet({kFunctionWords});
  return kSet.count(lower) != 0;
}

std::span<const std::string_view> Abbreviations() { return kAbbreviations; }

bool IsAbbreviation(std::string_view lower) {
  return std::find(std::begin(kAbbreviations), std::end(kAbbreviations), lower) !=
         std::end(kAbbreviations);
}

bool IsNameFiller(std::string_view lower) {
  return std::find(std::begin(kNameFillers), std::end(kNameFillers), lower) !=
         std::end(kNameFillers);
}

std::string Stem(std::string w) {
  if (w.size() > 4 && w.ends_with("ies")) {
    w.replace(w.size() - 3, 3, "y");
  } else if (w.size() > 4 && w.ends_with("sses")) {
    w.resize(w.size() - 2);
  } else if (w.size() > 3 && w.back() == 's' && !w.ends_with("ss") && !w.ends_with("us") &&
             !w.ends_with("is")) {
    w.pop_back();
  }
  if (w.size() > 5 && w.ends_with("ing")) {
    w.resize(w.size() - 3);
  } else if (w.size() > 4 && w.ends_with("ed")) {
    w.resize(w.size() - 2);
  }
  return w;
}

bool IsNonContentWord(const std::string& word) {
  const auto& stop = NonContentWords();
  return stop.count(word) != 0 || IsShortNumber(word) || stop.count(Stem(word)) != 0;
}

std::vector<std::string> ContentTerms(std::string_view text) {
  const auto& stop = NonContentWords();
  std::vector<std::string> terms;
  for (std::string& word : SplitNormalizedName(NormalizeEntityName(text))) {
    if (stop.count(word) != 0 || IsShortNumber(word)) continue;
    std::string stem = Stem(std::move(word));
    if (stop.count(stem) != 0) continue;
    terms.push_back(std::move(stem));
  }
  return terms;
}

void SplitNormalizedNameViews(std::string_view normalized, std::vector<std::string_view>* words) {
  words->clear();
  size_t start = 0;
  while (start < normalized.size()) {
    size_t end = normalized.find(' ', start);
    if (end == std::string_view::npos) end = normalized.size();
    if (end > start) words->push_back(normalized.substr(start, end - start));
    start = end + 1;
  }
}

std::vector<std::string_view> SplitNormalizedNameViews(std::string_view normalized) {
  std::vector<std::string_view> words;
  SplitNormalizedNameViews(normalized, &words);
  return words;
}

std::vector<std::string> SplitNormalizedName(std::string_view normalized) {
  const std::vector<std::string_view> views = SplitNormalizedNameViews(normalized);
  return std::vector<std::string>(views.begin(), views.end());
}

std::string NormalizeEntityName(std::string_view name) {
  // ASCII (nearly all of an English text: the reports stage folds every sentence) folds to lower
  // case byte for byte, as utf8proc would, at a fraction of its cost.
  static const std::array<bool, 128> kAsciiSeparator = [] {
    std::array<bool, 128> t{};
    for (int c = 0; c < 128; ++c) t[static_cast<size_t>(c)] = IsSeparator(c);
    return t;
  }();
  if (std::all_of(name.begin(), name.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u != 0 && u < 0x80;
      })) {
    // Written in place (never longer than the name), not appended a byte at a time.
    std::string out(name.size(), '\0');
    size_t n = 0;
    bool pending_space = false;
    for (char c : name) {
      if (kAsciiSeparator[static_cast<unsigned char>(c)]) {
        pending_space = n > 0;
      } else {
        if (pending_space) out[n++] = ' ';
        pending_space = false;
        out[n++] = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
      }
    }
    out.resize(n);
    return out;
  }
  utf8proc_uint8_t* folded = nullptr;
  const auto len =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(name.data()),
                   static_cast<utf8proc_ssize_t>(name.size()), &folded,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE |
                                                  UTF8PROC_COMPAT | UTF8PROC_CASEFOLD));
  std::string out;
  if (len < 0) {  // not UTF-8: fall back to ASCII lower-casing
    out = LowerAscii(std::string(name));
  } else {
    std::string f(reinterpret_cast<char*>(folded), static_cast<size_t>(len));
    std::free(folded);
    out.reserve(f.size());
    bool pending_space = false;
    utf8proc_ssize_t i = 0;
    const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(f.data());
    while (i < len) {
      utf8proc_int32_t cp = 0;
      const auto n = utf8proc_iterate(p + i, len - i, &cp);
      if (n <= 0) break;
      if (IsSeparator(cp)) {
        pending_space = !out.empty();
      } else {
        if (pending_space) out += ' ';
        pending_space = false;
        out.append(f, static_cast<size_t>(i), static_cast<size_t>(n));
      }
      i += n;
    }
  }
  return out;
}

}  // namespace grag
