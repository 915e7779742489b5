// The NLP extractor: a one-pass scanner turns the chunk into words and sentences, two passes
// over the words collect names and noun phrases, and co-occurrence within the sentence window
// gives the relationships. See grag/nlp_extract.h for the rules.
#include "grag/nlp_extract.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace grag {
namespace {

// ------------------------------------------------------------------------------ word lists

// Words that never form or start a phrase besides the function words (grag/words.h): number
// words, very common verbs, adverbs and interjections. Lower-case ASCII.
constexpr std::string_view kPhraseBreakers[] = {
    "abroad",     "according",  "across",    "afterwards",   "ago",       "ah",         "ahead",
    "alas",       "almost",     "alone",     "along",        "already",   "although",   "always",
    "amongst",    "anew",       "another",   "anybody",      "anyhow",    "anyone",     "anything",
    "anyway",     "anywhere",   "apart",     "around",       "aside",     "ask",        "asked",
    "away",       "aye",        "back",      "bah",          "became",    "because",    "become",
    "becomes",    "began",      "begin",     "begun",        "behind",    "beside",     "besides",
    "beyond",     "bore",       "bought",    "broke",        "brought",   "called",     "came",
    "caught",     "certainly",  "come",      "comes",        "coming",    "concerning", "crept",
    "cried",      "drew",       "drove",     "eh",           "eight",     "eighteen",   "eighty",
    "eleven",     "elsewhere",  "enough",    "etc",          "even",      "everybody",  "everyone",
    "everything", "everywhere", "except",    "far",          "felt",      "fifteen",    "fifty",
    "find",       "first",      "five",      "flew",         "forgot",    "former",     "formerly",
    "forth",      "forty",      "fought",    "found",        "four",      "fourteen",   "gave",
    "get",        "gets",       "getting",   "give",         "given",     "gives",      "go",
    "goes",       "going",      "gone",      "got",          "grew",      "hast",       "hath",
    "hear",       "heard",      "held",      "hello",        "hence",     "hereafter",  "hey",
    "hid",        "hither",     "ho",        "however",      "hullo",     "hundred",    "hurrah",
    "including",  "indeed",     "keep",      "kept",         "knew",      "know",       "known",
    "knows",      "last",       "latter",    "least",        "left",      "less",       "look",
    "looked",     "looking",    "looks",     "lost",         "made",      "make",       "makes",
    "making",     "meant",      "meanwhile", "met",          "mine",      "moreover",   "mostly",
    "nay",        "neither",    "never",     "nevertheless", "next",      "nine",       "nineteen",
    "ninety",     "nobody",     "none",      "nothing",      "nowhere",   "o",          "oft",
    "often",      "oh",         "onto",      "others",       "otherwise", "ought",      "ourselves",
    "paid",       "perhaps",    "put",       "quite",        "ran",       "rang",       "rather",
    "really",     "regarding",  "replied",   "rode",         "round",     "said",       "sang",
    "sank",       "sat",        "saw",       "say",          "saying",    "says",       "second",
    "see",        "seem",       "seemed",    "seems",        "seen",      "sees",       "sent",
    "seven",      "seventeen",  "seventy",   "shalt",        "shook",     "since",      "six",
    "sixteen",    "sixty",      "somebody",  "somehow",      "someone",   "something",  "sometime",
    "sometimes",  "somewhat",   "somewhere", "soon",         "sought",    "spent",      "spoke",
    "still",      "stole",      "stood",     "struck",       "take",      "taken",      "takes",
    "taking",     "taught",     "tell",      "tells",        "ten",       "thee",       "thence",
    "thereafter", "thereby",    "therefore", "therein",      "thine",     "think",      "thinks",
    "third",      "thirteen",   "thirty",    "thither",      "thou",      "though",     "thought",
    "thousand",   "three",      "threw",     "throughout",   "thy",       "till",       "together",
    "told",       "took",       "toward",    "towards",      "tried",     "try",        "turned",
    "twelve",     "twenty",     "two",       "unless",       "unto",      "used",       "want",
    "wanted",     "well",       "went",      "wept",         "whatever",  "whatsoever", "whence",
    "whenever",   "whereas",    "whereby",   "wherein",      "whither",   "whoever",    "whole",
    "wilt",       "wore",       "wrote",     "ye",           "yes",       "yonder",     "yourself",
    "yourselves",
};

// Titles dropped from the front of a name; never names on their own.
constexpr std::string_view kTitles[] = {"dr",   "frau",   "herr",   "hon",  "madam", "madame",
                                        "miss", "mister", "mlle",   "mme",  "mr",    "mrs",
                                        "ms",   "mx",     "messrs", "prof", "rev",   "sir"};

// Lower-case words allowed between capitalised words of one name.
constexpr std::string_view kParticles[] = {"da", "de", "del", "della", "den", "der", "di",
                                           "du", "la", "le",  "of",    "van", "von"};

enum WordClass : uint8_t { kStop = 1, kTitle = 2, kAbbreviation = 4, kParticle = 8 };

// The classes of a lower-cased word: one hash lookup for all the lists.
uint8_t Lexicon(std::string_view lower) {
  struct Table {
    std::unordered_map<std::string_view, uint8_t> classes;
    size_t longest = 0;
    void Add(std::span<const std::string_view> words, WordClass c) {
      for (auto w : words) {
        classes[w] |= c;
        longest = std::max(longest, w.size());
      }
    }
  };
  static const Table kTable = [] {
    Table t;
    t.Add(FunctionWords(), kStop);
    t.Add(kPhraseBreakers, kStop);
    t.Add(kTitles, kTitle);
    t.Add(Abbreviations(), kAbbreviation);
    t.Add(kParticles, kParticle);
    return t;
  }();
  if (lower.size() > kTable.longest) return 0;
  auto it = kTable.classes.find(lower);
  return it == kTable.classes.end() ? 0 : it->second;
}

// ------------------------------------------------------------------------------ characters

struct CodePoint {
  int32_t cp = -1;  // -1: an invalid byte
  size_t len = 1;
};

CodePoint Decode(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return {c, 1};
  utf8proc_int32_t cp = 0;
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                  static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
  if (n <= 0) return {-1, 1};
  return {cp, static_cast<size_t>(n)};
}

enum class Kind { kUpper, kLower, kCaseless, kMark, kDigit, kSpace, kNewline, kOther };

constexpr auto kAsciiKinds = [] {
  std::array<Kind, 128> kinds{};
  for (int c = 0; c < 128; ++c) {
    Kind k = Kind::kOther;
    if (c >= 'a' && c <= 'z') k = Kind::kLower;
    if (c >= 'A' && c <= 'Z') k = Kind::kUpper;
    if (c >= '0' && c <= '9') k = Kind::kDigit;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') k = Kind::kSpace;
    if (c == '\n') k = Kind::kNewline;
    kinds[static_cast<size_t>(c)] = k;
  }
  return kinds;
}();

Kind Classify(int32_t cp) {
  if (cp < 0) return Kind::kOther;
  if (cp < 0x80) return kAsciiKinds[static_cast<size_t>(cp)];
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LT:
      return Kind::kUpper;
    case UTF8PROC_CATEGORY_LL:
      return Kind::kLower;
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return Kind::kCaseless;
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
      return Kind::kMark;
    case UTF8PROC_CATEGORY_ND:
      return Kind::kDigit;
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return Kind::kNewline;
    case UTF8PROC_CATEGORY_ZS:
      return Kind::kSpace;
    default:
      return Kind::kOther;
  }
}

bool IsLetter(Kind k) { return k == Kind::kUpper || k == Kind::kLower || k == Kind::kCaseless; }
bool IsWordChar(Kind k) { return IsLetter(k) || k == Kind::kMark || k == Kind::kDigit; }
bool IsSpace(Kind k) { return k == Kind::kSpace || k == Kind::kNewline; }
bool IsHyphen(int32_t cp) { return cp == '-' || cp == 0x2010 || cp == 0x2011; }
bool IsApostrophe(int32_t cp) { return cp == '\'' || cp == 0x2019; }
bool IsTerminator(int32_t cp) {
  return cp == '.' || cp == '!' || cp == '?' || cp == 0x2026 || cp == 0x3002 || cp == 0xFF01 ||
         cp == 0xFF1F;
}
// Closing quotes and brackets that may follow a sentence's terminator.
bool IsCloser(int32_t cp) {
  return cp == '"' || cp == '\'' || cp == ')' || cp == ']' || cp == 0x201D || cp == 0x2019 ||
         cp == 0xBB;
}
// Opening quotes and brackets: the word after one may be capitalised for that reason alone.
bool IsOpener(int32_t cp) {
  return cp == '(' || cp == '[' || cp == 0x201C || cp == 0x2018 || cp == 0xAB || cp == 0xBF ||
         cp == 0xA1;
}

// Lower-cases (simple case mapping) into `out`; returns false when the text has no letter.
void LowerInto(std::string_view word, std::string& out) {
  out.clear();
  for (size_t i = 0; i < word.size();) {
    const CodePoint c = Decode(word, i);
    if (c.cp >= 0 && c.cp < 0x80) {
      out += static_cast<char>(c.cp >= 'A' && c.cp <= 'Z' ? c.cp + ('a' - 'A') : c.cp);
    } else if (c.cp >= 0) {
      utf8proc_uint8_t buf[4];
      const auto n = utf8proc_encode_char(utf8proc_tolower(c.cp), buf);
      out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
    } else {
      out += word[i];
    }
    i += c.len;
  }
}

// Text with whitespace runs collapsed to one space, trimmed; it stops once longer than `limit`
// bytes (callers that cut to `limit` lose nothing).
std::string Collapse(std::string_view text, size_t limit = std::string_view::npos) {
  std::string out;
  out.reserve(std::min(text.size(), limit == std::string_view::npos ? limit : limit + 4));
  bool space = false;
  for (size_t i = 0; i < text.size() && out.size() <= limit;) {
    const auto b = static_cast<unsigned char>(text[i]);
    const CodePoint c = b < 0x80 ? CodePoint{b, 1} : Decode(text, i);
    if (IsSpace(Classify(c.cp))) {
      space = !out.empty();
    } else {
      if (space) out += ' ';
      space = false;
      out.append(text.substr(i, c.len));
    }
    i += c.len;
  }
  return out;
}

// `text` cut at a word boundary to at most `max_bytes` (>= 16), with "…" when cut.
std::string Cut(std::string text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // …
  size_t cut = text.rfind(' ', max_bytes - kEllipsis.size());
  if (cut == std::string::npos || cut == 0) {  // one long word: cut before a character start
    cut = max_bytes - kEllipsis.size();
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  }
  text.resize(cut);
  while (!text.empty() && (text.back() == ',' || text.back() == ';' || text.back() == ':')) {
    text.pop_back();
  }
  text += kEllipsis;
  return text;
}

// ------------------------------------------------------------------------------ scanning

struct Word {
  uint32_t begin = 0;  // bytes; a possessive "'s" is not part of the word
  uint32_t end = 0;
  uint32_t sentence = 0;
  uint32_t chars = 0;  // code points
  uint32_t letters = 0;
  Kind first = Kind::kOther;  // the first letter's case
  bool all_caps = false;      // two or more letters, all upper-case
  bool has_digit = false;
  bool hyphenated = false;
  bool contraction = false;  // "don't", "o'clock": never part of a phrase
  bool possessive = false;   // ends a phrase
  bool initial = false;      // first of its sentence or after an opening quote: case is no evidence
  bool abbrev_dot = false;   // followed by a '.' that ends neither the sentence nor the phrase
  bool break_after = false;  // punctuation before the next word
};

struct Sentence {
  uint32_t begin = 0;
  uint32_t end = 0;
};

struct Scan {
  std::vector<Word> words;
  std::vector<Sentence> sentences;
};

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  Scan Run() {
    size_t i = 0;
    while (i < text_.size()) {
      const CodePoint c = Decode(text_, i);
      const Kind k = Classify(c.cp);
      if (IsWordChar(k) && k != Kind::kMark) {
        i = ScanWord(i);
      } else {
        Gap(i, c, k);
        i += c.len;
      }
    }
    CloseSentence(last_nonspace_end_);
    return std::move(scan_);
  }

 private:
  // One word from `i`; returns where scanning goes on.
  size_t ScanWord(size_t i) {
    Word w;
    w.begin = static_cast<uint32_t>(i);
    size_t j = i;
    size_t uppers = 0;
    Kind prev = Kind::kOther;
    while (j < text_.size()) {
      const CodePoint c = Decode(text_, j);
      const Kind k = Classify(c.cp);
      if (IsWordChar(k)) {
        if (IsLetter(k)) {
          if (w.letters++ == 0) w.first = k;
          if (k == Kind::kUpper) ++uppers;
        }
        if (k == Kind::kDigit) w.has_digit = true;
        if (k != Kind::kMark) ++w.chars;
        prev = k;
        j += c.len;
        continue;
      }
      if (j + c.len >= text_.size() || !IsWordChar(prev)) break;
      const CodePoint n = Decode(text_, j + c.len);
      const Kind nk = Classify(n.cp);
      if (IsHyphen(c.cp) && IsWordChar(nk) && nk != Kind::kMark) {
        w.hyphenated = true;
        ++w.chars;
        j += c.len;
        prev = Kind::kOther;
        continue;
      }
      if (IsApostrophe(c.cp) && IsLetter(prev) && IsLetter(nk)) {
        const size_t after = j + c.len + n.len;
        const bool s = n.cp == 's' || n.cp == 'S';
        if (s && (after >= text_.size() || !IsWordChar(Classify(Decode(text_, after).cp)))) {
          w.possessive = true;
          w.end = static_cast<uint32_t>(j);
          j = after;
          break;
        }
        if (nk == Kind::kLower) w.contraction = true;  // O'Brien stays a name
        ++w.chars;
        j += c.len;
        prev = Kind::kOther;
        continue;
      }
      break;
    }
    if (!w.possessive) w.end = static_cast<uint32_t>(j);
    w.all_caps = w.letters >= 2 && uppers == w.letters;
    StartWord(w);
    scan_.words.push_back(w);
    last_nonspace_end_ = j;
    last_word_end_ = j;
    return j;
  }

  // Sentence and phrase bookkeeping before a word is added.
  void StartWord(Word& w) {
    const bool cancel = pending_end_ && !paragraph_ && w.first == Kind::kLower;
    if ((pending_end_ && !cancel) || paragraph_) {
      CloseSentence(paragraph_ && !pending_end_ ? paragraph_close_ : pending_end_pos_);
    }
    if (!open_) {
      size_t b = sentence_begin_;
      while (b < w.begin && IsSpace(Classify(Decode(text_, b).cp))) b += Decode(text_, b).len;
      current_.begin = static_cast<uint32_t>(b);
      open_ = true;
      w.initial = true;
    }
    if (opener_) w.initial = true;
    if (gap_break_ && !scan_.words.empty()) scan_.words.back().break_after = true;
    w.sentence = static_cast<uint32_t>(scan_.sentences.size());
    pending_end_ = paragraph_ = opener_ = gap_break_ = false;
    newlines_ = 0;
  }

  void CloseSentence(size_t end) {
    if (!open_) return;
    current_.end = static_cast<uint32_t>(std::max<size_t>(end, current_.begin));
    scan_.sentences.push_back(current_);
    open_ = false;
    sentence_begin_ = end;
  }

  // A character between words.
  void Gap(size_t i, CodePoint c, Kind k) {
    if (k == Kind::kNewline) {
      if (++newlines_ == 2 && !paragraph_) {
        paragraph_ = true;
        paragraph_close_ = last_nonspace_end_;
      }
      return;
    }
    if (k == Kind::kSpace) return;
    last_nonspace_end_ = i + c.len;
    if (c.cp == '.' && i == last_word_end_ && !scan_.words.empty() &&
        IsAbbrevWord(scan_.words.back())) {
      scan_.words.back().abbrev_dot = true;
      return;
    }
    gap_break_ = true;
    if (IsTerminator(c.cp)) {
      size_t j = i + c.len;
      while (j < text_.size()) {  // more terminators and closing quotes belong to this end
        const CodePoint n = Decode(text_, j);
        if (!IsTerminator(n.cp) && !IsCloser(n.cp)) break;
        j += n.len;
      }
      if (j >= text_.size() || IsSpace(Classify(Decode(text_, j).cp))) {
        pending_end_ = true;
        pending_end_pos_ = j;
      }
      return;
    }
    if (IsOpener(c.cp)) {
      opener_ = true;
    } else if (c.cp == '"' || c.cp == '\'') {  // a straight quote opens after a space
      const int32_t before = i == 0 ? ' ' : PrevCp(i);
      if (IsSpace(Classify(before)) || IsOpener(before)) opener_ = true;
    }
  }

  int32_t PrevCp(size_t i) const {
    size_t b = i - 1;
    while (b > 0 && (static_cast<unsigned char>(text_[b]) & 0xC0) == 0x80) --b;
    return Decode(text_, b).cp;
  }

  bool IsAbbrevWord(const Word& w) {
    if (w.possessive || w.hyphenated) return false;
    if (w.letters == 1 && w.chars == 1 && w.first == Kind::kUpper) return true;  // an initial
    if (w.chars > 6) return false;
    LowerInto(text_.substr(w.begin, w.end - w.begin), lower_);
    return (Lexicon(lower_) & kAbbreviation) != 0;
  }

  std::string_view text_;
  Scan scan_;
  Sentence current_;
  bool open_ = false;
  size_t sentence_begin_ = 0;
  size_t last_nonspace_end_ = 0;
  size_t last_word_end_ = std::string_view::npos;
  bool pending_end_ = false;
  size_t pending_end_pos_ = 0;
  bool paragraph_ = false;
  size_t paragraph_close_ = 0;
  int newlines_ = 0;
  bool opener_ = false;
  bool gap_break_ = false;
  std::string lower_;
};

// ------------------------------------------------------------------------------ phrases

// A set of words as sorted 64-bit hashes: one allocation, where a hash set allocates a node per
// word (a chunk has about a thousand). A collision would only cost a case heuristic its vote.
class WordSet {
 public:
  void Add(std::string_view word) { hashes_.push_back(std::hash<std::string_view>{}(word)); }
  void Seal() {
    std::sort(hashes_.begin(), hashes_.end());
    hashes_.erase(std::unique(hashes_.begin(), hashes_.end()), hashes_.end());
  }
  bool contains(std::string_view word) const {  // after Seal
    return std::binary_search(hashes_.begin(), hashes_.end(), std::hash<std::string_view>{}(word));
  }

 private:
  std::vector<size_t> hashes_;
};

constexpr std::string_view kProperNoun = kNlpProperNounType;
constexpr std::string_view kNounPhrase = "noun phrase";
constexpr std::string_view kTitleType = kNlpTitleType;

struct Phrase {
  std::string name;  // first spelling
  std::string key;
  std::string_view type;
  size_t first_word = 0;            // where it first occurs
  std::vector<uint32_t> sentences;  // ascending, distinct
};

class PhraseFinder {
 public:
  // `title`: the document's title as an entity name (TitleEntityName), or empty.
  PhraseFinder(std::string_view text, const Scan& scan, const NlpExtractorOptions& options,
               std::string_view title)
      : text_(text), words_(scan.words), options_(options), title_(title) {
    std::string lower;
    for (const auto& w : options.exclude_words) {
      LowerInto(w, lower);
      exclude_.insert(lower);
    }
    lowers_.resize(words_.size());
    for (size_t i = 0; i < words_.size(); ++i) {
      const Word& w = words_[i];
      LowerInto(Text(w), lowers_[i]);
      if (w.first == Kind::kLower) lower_forms_.Add(lowers_[i]);
      if (w.first == Kind::kUpper && !w.initial && !w.all_caps) upper_forms_.Add(lowers_[i]);
      if (w.sentence >= sentence_has_lower_.size()) sentence_has_lower_.resize(w.sentence + 1);
      if (w.first == Kind::kLower) sentence_has_lower_[w.sentence] = true;
    }
    lower_forms_.Seal();
    upper_forms_.Seal();
    info_.resize(words_.size());
    for (size_t i = 0; i < words_.size(); ++i) ClassifyWord(i);
  }

  // Index of the title's phrase in what Find returned, or npos without a title.
  size_t title_index() const { return title_index_; }

  std::vector<Phrase> Find() {
    FindTitle();
    FindQuotedTitles();
    FindNames();
    if (options_.max_noun_phrase_words >= 2 || options_.hyphenated_compounds) FindNounPhrases();
    std::stable_sort(phrases_.begin(), phrases_.end(),
                     [](const Phrase& a, const Phrase& b) { return a.first_word < b.first_word; });
    for (size_t i = 0; i < phrases_.size(); ++i) {
      if (!title_index_key_.empty() && phrases_[i].key == title_index_key_) title_index_ = i;
    }
    return std::move(phrases_);
  }

 private:
  struct Info {
    bool stop = false;
    bool title = false;
    bool particle = false;
    bool name = false;       // may be part of a name
    bool content = false;    // may be part of a noun phrase
    bool compound = false;   // a hyphenated word with two content parts
    bool past = false;       // a lower-case word that looks like a past tense
    bool tentative = false;  // a name only when more name words follow
  };

  std::string_view Text(const Word& w) const { return text_.substr(w.begin, w.end - w.begin); }

  bool IsStop(std::string_view lower) const {
    return (Lexicon(lower) & kStop) != 0 ||
           (!exclude_.empty() && exclude_.contains(std::string(lower)));
  }

  void ClassifyWord(size_t i) {
    const Word& w = words_[i];
    Info& in = info_[i];
    const std::string& lower = lowers_[i];
    const uint8_t classes = Lexicon(lower);
    in.stop = (classes & kStop) != 0 || (!exclude_.empty() && exclude_.contains(lower));
    in.title = (classes & kTitle) != 0;
    in.particle = w.first == Kind::kLower && (classes & kParticle) != 0;
    const bool usable =
        w.letters > 0 && !w.contraction && static_cast<int>(w.chars) <= options_.max_word_chars;
    if (!usable || in.stop || in.title) return;
    if (w.first == Kind::kUpper) {
      const bool initial_letter = w.letters == 1 && w.chars == 1 && w.abbrev_dot;
      const bool seen_lower = (w.initial || w.all_caps) && lower_forms_.contains(lower);
      const Capital capital = CapitalMeansName(i);
      in.name = (w.letters >= 2 || initial_letter) && !seen_lower && capital != Capital::kNo;
      in.tentative = capital == Capital::kTentative;
      // "Old men ..." at a sentence start may begin a lower-case phrase.
      in.content = seen_lower && !w.all_caps && !w.has_digit && !IsAdverb(lower);
    } else if (w.first == Kind::kLower && !w.has_digit) {
      // A hyphenated word is a content word only as a compound: not "to-day", "twenty-five".
      in.compound = w.hyphenated && IsCompound(lower);
      in.content = w.hyphenated ? in.compound : !IsAdverb(lower);
      in.past = !w.hyphenated && IsPastTense(lower);
    }
  }

  // Whether a capitalised word (not a stop word, not seen in lower case) is a name. Mid-sentence
  // capitals are. A word in ALL CAPS is when it is also written capitalised mid-sentence in the
  // chunk, or when its sentence has lower-case words (an acronym, "the FTC said"), not when the
  // whole sentence is in capitals (a heading: "STAVE ONE"). A word that may be capitalised only
  // for starting a sentence or a quote is when it is also capitalised mid-sentence, or is
  // followed by what follows a subject ("Marley was dead", "Marley's ghost"), not by
  // punctuation or an object as imperatives and interjections are ("Stop!", "Bless you"); else
  // it is tentative: a name only if more name words follow ("Ghost of Christmas Past"), as an
  // "-ly" word capitalised only so always is.
  enum class Capital { kNo, kYes, kTentative };
  Capital CapitalMeansName(size_t i) const {
    const Word& w = words_[i];
    if (!w.initial && !w.all_caps) return Capital::kYes;
    if (upper_forms_.contains(lowers_[i])) return Capital::kYes;
    if (w.all_caps) return sentence_has_lower_[w.sentence] ? Capital::kYes : Capital::kNo;
    // An adverb opening a sentence ("Originally designed as", "Eventually he") is no name on
    // its own ("Beverly Hills" is one).
    if (IsAdverb(lowers_[i])) return Capital::kTentative;
    if (w.possessive || (Joined(i) && !IsObjectCue(lowers_[i + 1]))) return Capital::kYes;
    return Capital::kTentative;
  }

  static bool IsObjectCue(std::string_view lower) {
    static const std::unordered_set<std::string_view> kCues = {
        "a",   "an",   "her",   "him",  "his",  "it",   "me", "my", "not", "of",  "our", "that",
        "the", "thee", "their", "them", "this", "thou", "to", "us", "ye",  "you", "your"};
    return kCues.contains(lower);
  }

  // "-ly" adverbs ("curiously", "perfectly") are not part of noun phrases; a few nouns and
  // adjectives that end so are.
  static bool IsAdverb(std::string_view lower) {
    static const std::unordered_set<std::string_view> kNotAdverbs = {
        "assembly", "butterfly", "comely",   "costly",  "deadly",  "elderly", "family",
        "friendly", "ghastly",   "homely",   "homily",  "kindly",  "likely",  "lively",
        "lonely",   "lovely",    "monopoly", "orderly", "stately", "supply",  "timely",
        "worldly",  "yearly",    "weekly",   "monthly"};
    return lower.size() >= 6 && lower.ends_with("ly") && !kNotAdverbs.contains(lower);
  }

  // Looks like a past tense or participle ("resounded", "pointed"): not the head of a phrase.
  static bool IsPastTense(std::string_view lower) {
    static const std::unordered_set<std::string_view> kNotPast = {
        "aged",    "beloved", "blessed", "crooked", "cursed", "hundred", "jagged",  "kindred",
        "learned", "naked",   "ragged",  "rugged",  "sacred", "wicked",  "wretched"};
    return lower.size() >= 5 && lower.ends_with("ed") && !lower.ends_with("eed") &&
           !kNotPast.contains(lower);
  }

  // At least two parts of a hyphenated word are content words: "counting-house", not "to-day".
  bool IsCompound(std::string_view lower) const {
    int content = 0;
    size_t start = 0;
    while (start <= lower.size()) {
      size_t end = start;
      while (end < lower.size() && lower[end] != '-' &&
             !(static_cast<unsigned char>(lower[end]) == 0xE2 && end + 2 < lower.size() &&
               static_cast<unsigned char>(lower[end + 1]) == 0x80 &&
               (static_cast<unsigned char>(lower[end + 2]) == 0x90 ||
                static_cast<unsigned char>(lower[end + 2]) == 0x91))) {
        ++end;
      }
      const std::string_view part = lower.substr(start, end - start);
      if (part.size() >= 2 && !IsStop(part)) ++content;
      start = end + (end < lower.size() && lower[end] == '-' ? 1 : 3);
    }
    return content >= 2;
  }

  // Words i and i+1 are in one sentence with nothing but space between them.
  bool Joined(size_t i) const {
    return i + 1 < words_.size() && !words_[i].break_after && !words_[i].possessive &&
           words_[i].sentence == words_[i + 1].sentence;
  }

  bool IsInitial(size_t i) const { return words_[i].letters == 1 && words_[i].abbrev_dot; }

  // The document's title, wherever its words occur in a row whatever their case ("Guitar World
  // is ..." starts a sentence and "guitar" is common, yet it is the name), and as an entity of
  // its own even where the chunk does not spell it: the chunk is about it. Its words are then
  // taken, so they form no shorter name ("World").
  void FindTitle() {
    if (title_.empty()) return;
    const std::string key = NormalizeEntityName(title_);
    const std::vector<std::string> parts = SplitNormalizedName(key);
    if (parts.empty()) return;
    for (size_t i = 0; i + parts.size() <= words_.size(); ++i) {
      bool match = true;
      for (size_t k = 0; k < parts.size() && match; ++k) {
        match = NormalizeEntityName(Text(words_[i + k])) == parts[k] &&
                (k + 1 == parts.size() || Joined(i + k));
      }
      if (!match) continue;
      Add(i, i + parts.size() - 1, kTitleType);
      for (size_t k = i; k < i + parts.size(); ++k) {
        info_[k].name = false;
        info_[k].content = false;
        info_[k].compound = false;
      }
      i += parts.size() - 1;
    }
    if (!by_key_.count(key)) {
      if (words_.empty()) return;  // no sentence to hang it on
      // Not spelled in this chunk: the title still names what it is about.
      by_key_.emplace(key, phrases_.size());
      phrases_.push_back({std::string(title_), key, kTitleType, 0, {0}});
    }
    title_index_key_ = key;
  }

  // A short title-case run in double quotes, opened mid-sentence after a word and a space and
  // closed right after its last word: the title of a work ('the series "Charmed" and',
  // 'the single "Falling Away from Me"'). Its words are one name even where case alone says
  // nothing (a quote's first word) or stop words join them. Dialogue is not taken: it opens a
  // sentence or follows a comma or colon, and ends in punctuation inside the quotes.
  void FindQuotedTitles() {
    for (size_t i = 1; i < words_.size(); ++i) {
      if (!words_[i].initial || words_[i].first != Kind::kUpper ||
          words_[i - 1].sentence != words_[i].sentence || !OpensQuote(i)) {
        continue;
      }
      size_t last = i;
      while (last - i + 1 < static_cast<size_t>(options_.max_name_words) && !ClosesQuote(last) &&
             Joined(last)) {
        ++last;
      }
      if (!ClosesQuote(last)) continue;
      bool title_case = true, content = false;
      for (size_t k = i; k <= last && title_case; ++k) {
        const bool stop = info_[k].stop || info_[k].particle;
        title_case = words_[k].letters > 0 && (stop || words_[k].first == Kind::kUpper);
        content = content || !stop;
      }
      if (!title_case || !content) continue;
      Add(i, last, kProperNoun);
      for (size_t k = i; k <= last; ++k) {
        info_[k].name = false;
        info_[k].content = false;
        info_[k].compound = false;
      }
      i = last;
    }
  }

  // Between word i - 1 and word i: a space or more, then one opening double quote.
  bool OpensQuote(size_t i) const {
    const std::string_view gap =
        text_.substr(words_[i - 1].end, words_[i].begin - words_[i - 1].end);
    bool spaced = false, quoted = false;
    for (size_t k = 0; k < gap.size();) {
      const CodePoint c = Decode(gap, k);
      if (quoted) return false;  // the quote must touch the word
      if (c.cp == '"' || c.cp == 0x201C) {
        quoted = spaced;
        if (!quoted) return false;
      } else if (IsSpace(Classify(c.cp))) {
        spaced = true;
      } else {
        return false;
      }
      k += c.len;
    }
    return quoted;
  }

  // A closing double quote right after word i.
  bool ClosesQuote(size_t i) const {
    if (words_[i].end >= text_.size()) return false;
    const int32_t cp = Decode(text_, words_[i].end).cp;
    return cp == '"' || cp == 0x201D;
  }

  void FindNames() {
    for (size_t i = 0; i < words_.size();) {
      if (!info_[i].name) {
        ++i;
        continue;
      }
      size_t last = i;
      size_t j = i;
      while (Joined(j)) {
        if (info_[j + 1].name) {
          last = ++j;
        } else if (info_[j + 1].particle && Joined(j + 1) && info_[j + 2].name &&
                   !IsInitial(j + 2)) {
          j += 2;
          last = j;
        } else {
          break;
        }
      }
      AddName(i, last);
      i = last + 1;
    }
  }

  void AddName(size_t first, size_t last) {
    if (static_cast<int>(last - first + 1) > options_.max_name_words) return;
    if (first == last && info_[first].tentative) return;
    bool real = false;  // not only initials
    for (size_t k = first; k <= last; ++k) real = real || !IsInitial(k);
    if (!real) return;
    Add(first, last, kProperNoun);
  }

  void FindNounPhrases() {
    for (size_t i = 0; i < words_.size();) {
      if (!info_[i].content) {
        ++i;
        continue;
      }
      size_t last = i;
      while (Joined(last) && info_[last + 1].content && words_[last + 1].first == Kind::kLower) {
        ++last;
      }
      size_t head = last;  // "bells ceased" is not a phrase; "the bells" is not either
      while (head > i && info_[head].past) --head;
      const int n = static_cast<int>(head - i + 1);
      if (n >= 2 && n <= options_.max_noun_phrase_words) Add(i, head, kNounPhrase);
      if (options_
              .hyphenated_compounds) {  // also alone: "counting-house" recurs more than its runs
        for (size_t k = i; k <= last; ++k) {
          if (info_[k].compound) Add(k, k, kNounPhrase);
        }
      }
      i = last + 1;
    }
  }

  void Add(size_t first, size_t last, std::string_view type) {
    const std::string_view raw =
        text_.substr(words_[first].begin, words_[last].end - words_[first].begin);
    std::string name = Collapse(raw);
    auto it = by_name_.find(name);
    size_t index = 0;
    if (it != by_name_.end()) {
      index = it->second;
    } else {
      std::string key = NormalizeEntityName(name);
      if (key.empty()) return;
      auto [kit, inserted] = by_key_.try_emplace(key, phrases_.size());
      if (inserted) phrases_.push_back({name, std::move(key), type, first, {}});
      index = kit->second;
      by_name_.emplace(std::move(name), index);
    }
    phrases_[index].first_word = std::min(phrases_[index].first_word, first);
    auto& sentences = phrases_[index].sentences;
    const uint32_t s = words_[first].sentence;
    if (sentences.empty() || sentences.back() != s) {
      sentences.insert(std::upper_bound(sentences.begin(), sentences.end(), s), s);
      sentences.erase(std::unique(sentences.begin(), sentences.end()), sentences.end());
    }
  }

  std::string_view text_;
  const std::vector<Word>& words_;
  const NlpExtractorOptions& options_;
  std::string_view title_;
  std::string title_index_key_;
  size_t title_index_ = std::string_view::npos;
  std::unordered_set<std::string> exclude_;
  std::vector<std::string> lowers_;       // each word lower-cased
  WordSet lower_forms_;                   // words written in lower case
  WordSet upper_forms_;                   // words capitalised mid-sentence
  std::vector<bool> sentence_has_lower_;  // by sentence: any lower-case word
  std::vector<Info> info_;
  std::vector<Phrase> phrases_;
  std::unordered_map<std::string, size_t> by_name_;
  std::unordered_map<std::string, size_t> by_key_;
};

// ------------------------------------------------------------------------------ relationships

struct Pair {
  uint32_t a = 0;  // phrase indices, a < b
  uint32_t b = 0;
  double count = 0;
  uint32_t s = 0;  // where they first co-occur: the same sentence when they ever do
  uint32_t t = 0;
};

std::vector<Pair> CoOccurrences(const std::vector<Phrase>& phrases, size_t sentence_count,
                                int window) {
  std::vector<std::vector<uint32_t>> in_sentence(sentence_count);
  for (uint32_t p = 0; p < phrases.size(); ++p) {
    for (uint32_t s : phrases[p].sentences) in_sentence[s].push_back(p);
  }
  const size_t w = window < 0 ? sentence_count : static_cast<size_t>(window);
  std::vector<Pair> pairs;
  std::unordered_map<uint64_t, size_t> index;
  auto add = [&](uint32_t x, uint32_t y, uint32_t s, uint32_t t) {
    if (x == y) return;
    const uint32_t a = std::min(x, y);
    const uint32_t b = std::max(x, y);
    auto [it, inserted] = index.try_emplace((uint64_t{a} << 32) | b, pairs.size());
    if (inserted) pairs.push_back({a, b, 0, s, t});
    Pair& p = pairs[it->second];
    p.count += 1;
    if (s == t && p.s != p.t) {  // prefer a sentence that holds both
      p.s = s;
      p.t = t;
    }
  };
  for (uint32_t s = 0; s < sentence_count; ++s) {
    const auto& here = in_sentence[s];
    for (size_t i = 0; i < here.size(); ++i) {
      for (size_t j = i + 1; j < here.size(); ++j) add(here[i], here[j], s, s);
    }
    for (size_t d = 1; d <= w && s + d < sentence_count; ++d) {
      const uint32_t t = static_cast<uint32_t>(s + d);
      for (uint32_t x : here) {
        for (uint32_t y : in_sentence[t]) add(x, y, s, t);
      }
    }
  }
  return pairs;
}

Status Validate(const NlpExtractorOptions& o) {
  if (o.max_name_words < 1) return Status::InvalidArgument("max_name_words must be at least 1");
  if (o.max_word_chars < 1) return Status::InvalidArgument("max_word_chars must be at least 1");
  if (o.max_description_bytes < 16) {
    return Status::InvalidArgument("max_description_bytes must be at least 16");
  }
  return Status::Ok();
}

// Sentences with whitespace collapsed, each made once and only when asked for.
class SentenceTexts {
 public:
  // Each sentence is collapsed only as far as a description cut to `limit` bytes needs.
  SentenceTexts(std::string_view text, const std::vector<Sentence>& sentences, size_t limit)
      : text_(text),
        limit_(limit),
        sentences_(sentences),
        cache_(sentences.size()),
        done_(sentences.size()) {}

  const std::string& Get(uint32_t s) {
    if (!done_[s]) {
      const Sentence& sp = sentences_[s];
      cache_[s] = Collapse(text_.substr(sp.begin, sp.end - sp.begin), limit_);
      done_[s] = true;
    }
    return cache_[s];
  }

 private:
  std::string_view text_;
  size_t limit_;
  const std::vector<Sentence>& sentences_;
  std::vector<std::string> cache_;
  std::vector<bool> done_;
};

ParsedExtraction Extract(std::string_view text, const NlpExtractorOptions& options,
                         std::string_view title) {
  const Scan scan = Scanner(text).Run();
  PhraseFinder finder(text, scan, options, title);
  std::vector<Phrase> phrases = finder.Find();
  const size_t title_index = finder.title_index();
  const auto max_desc = static_cast<size_t>(options.max_description_bytes);
  SentenceTexts sentences(text, scan.sentences, max_desc);
  ParsedExtraction out;
  out.entities.reserve(phrases.size());
  for (const auto& p : phrases) {
    out.entities.push_back(
        {p.name, p.key, std::string(p.type), Cut(sentences.Get(p.sentences.front()), max_desc)});
  }
  auto pairs = CoOccurrences(phrases, scan.sentences.size(), options.sentence_window);
  if (title_index != std::string_view::npos) {
    // The title is related to everything its chunk names, once, with the sentence that names it.
    std::vector<bool> paired(phrases.size(), false);
    for (const auto& p : pairs) {
      if (p.a == title_index) paired[p.b] = true;
      if (p.b == title_index) paired[p.a] = true;
    }
    for (size_t i = 0; i < phrases.size(); ++i) {
      if (i == title_index || paired[i] || phrases[i].sentences.empty()) continue;
      const uint32_t s = phrases[i].sentences.front();
      pairs.push_back({static_cast<uint32_t>(std::min(i, title_index)),
                       static_cast<uint32_t>(std::max(i, title_index)), 1, s, s});
    }
  }
  out.relationships.reserve(pairs.size());
  for (const auto& p : pairs) {
    RelationshipMention r;
    r.source = phrases[p.a].name;
    r.target = phrases[p.b].name;
    r.source_key = phrases[p.a].key;
    r.target_key = phrases[p.b].key;
    r.strength = p.count;
    std::string description = sentences.Get(p.s);
    if (p.t != p.s) description += " " + sentences.Get(p.t);  // neighbours (window >= 1)
    r.description = Cut(std::move(description), max_desc);
    out.relationships.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::string NlpExtractorFingerprint(const NlpExtractorOptions& o) {
  std::vector<std::string> exclude;
  std::string lower;
  for (const auto& w : o.exclude_words) {
    LowerInto(w, lower);
    exclude.push_back(lower);
  }
  std::sort(exclude.begin(), exclude.end());
  exclude.erase(std::unique(exclude.begin(), exclude.end()), exclude.end());
  std::string s(kNlpExtractorModel);
  s += ";window=" + std::to_string(o.sentence_window < 0 ? -1 : o.sentence_window);
  s += ";names=" + std::to_string(o.max_name_words);
  s += ";np=" + std::to_string(o.max_noun_phrase_words);
  s += ";compounds=" + std::to_string(o.hyphenated_compounds ? 1 : 0);
  s += ";word=" + std::to_string(o.max_word_chars);
  s += ";desc=" + std::to_string(o.max_description_bytes);
  s += ";exclude=";
  for (size_t i = 0; i < exclude.size(); ++i) s += (i ? "," : "") + exclude[i];
  return s;
}

std::string TitleEntityName(std::string_view title) {
  std::string t = Collapse(title);
  // A file name (the title of a plain file) or a generated id names nothing.
  if (t.find_first_of("/\\#") != std::string::npos) return {};
  if (const size_t dot = t.rfind('.'); dot != std::string::npos && dot + 1 < t.size() &&
                                       t.size() - dot <= 6 &&
                                       t.find(' ', dot) == std::string::npos) {
    bool ext = true;
    for (size_t i = dot + 1; i < t.size(); ++i) {
      ext = ext && std::isalnum(static_cast<unsigned char>(t[i])) != 0;
    }
    if (ext) return {};
  }
  // "Kiss and Tell (1945 film)": the qualifier tells titles apart, the text says "Kiss and Tell".
  if (t.ends_with(')')) {
    if (const size_t open = t.rfind(" ("); open != std::string::npos && open > 0) t.resize(open);
  }
  const std::string key = NormalizeEntityName(t);
  const auto words = SplitNormalizedName(key);
  if (words.empty() || words.size() > 10) return {};
  if (std::none_of(t.begin(), t.end(), [](char c) {
        return std::isalpha(static_cast<unsigned char>(c)) != 0 ||
               static_cast<unsigned char>(c) >= 0x80;
      })) {
    return {};
  }
  return t;
}

Result<ParsedExtraction> ExtractNlp(std::string_view chunk_text, const NlpExtractorOptions& options,
                                    std::string_view title) {
  GRAG_RETURN_IF_ERROR(Validate(options));
  if (chunk_text.size() > UINT32_MAX / 2) {
    return Status::InvalidArgument("chunk text too long for the NLP extractor");
  }
  try {
    return Extract(chunk_text, options, TitleEntityName(title));
  } catch (const std::exception& e) {
    return Status::Internal(std::string("NLP extraction failed: ") + e.what());
  }
}

}  // namespace grag
