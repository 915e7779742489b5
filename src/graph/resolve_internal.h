// Entity resolution's internals, shared by its files and exposed for its tests. Private to
// src/graph: resolve_names.cpp parses and compares names; resolve_mentions.cpp finds the names
// descriptions give other entities; resolve.cpp blocks, scores, asks the judge and clusters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <utility>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grag/resolve.h"

namespace grag::resolve_internal {

// Optimal string alignment distance (edits: insert, delete, substitute, swap two neighbours),
// capped: cap + 1 when larger.
size_t EditDistance(std::string_view a, std::string_view b, size_t cap);

inline bool IsArticle(std::string_view w) { return w == "the" || w == "a" || w == "an"; }
// 'm' / 'f' for gendered honorifics, 'n' for neutral titles, 0 for other words.
char HonorificGender(std::string_view w);

// Common English hypocorisms (given-name short forms): a generic list.
const std::string* NicknameRoot(std::string_view w);

// NFKC, case folding, accents stripped; nullopt when not UTF-8.
std::string Fold(std::string_view s);

inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool IsUpperAscii(char c) { return c >= 'A' && c <= 'Z'; }
inline bool IsLowerAscii(char c) { return c >= 'a' && c <= 'z'; }
bool AllDigits(std::string_view s);

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

bool GenericType(std::string_view t);

std::string LowerAscii(std::string_view s);

bool IsApostrophe(std::string_view s, size_t i, size_t* len);

bool IsWordByte(const std::string& s, size_t i, size_t* len);

// What an apostrophe at s[i] (of `alen` bytes) does to the word being read (`word`, possibly
// empty): kPossessive ends it as a possessive and skips to `*next` ("scrooge's", "bakers'"),
// kInside keeps it going ("o'brien"), kBreak ends it plainly.
enum class Apostrophe { kPossessive, kInside, kBreak };

Apostrophe ClassifyApostrophe(const std::string& s, size_t i, size_t alen, std::string_view word,
                              size_t* next);

// Parses a name once: folded tokens, articles/honorifics/legal suffixes removed, numbers valued,
// acronym keys (see resolve_names.cpp).
NameForm ParseName(std::string_view name, std::string_view type);

// "women" -> "woman", "cities" -> "city", "clerks" -> "clerk".
std::string Singular(const std::string& w);

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

bool TypesCompatible(const NameForm& a, const NameForm& b);

// Types an extractor often confuses for one thing: a building or an institution (organisation
// / geo), a family or a group (organisation / person).
bool TypesConfusable(const NameForm& a, const NameForm& b);

// How two parsed names compare: similarity, containment and the conflict that keeps them apart.
PairInfo Compare(const NameForm& A, const NameForm& B);

// ---- description mentions (resolve_mentions.cpp): entity A's description names entity B

// Two entity indices as one key, the smaller first.
inline uint64_t PairKey(size_t a, size_t b) {
  if (a > b) std::swap(a, b);
  return (static_cast<uint64_t>(a) << 32) | static_cast<uint64_t>(b);
}

struct DescWord {
  std::string text;         // folded
  bool possessive = false;  // "Scrooge's" -> "scrooge"
  bool boundary = false;    // punctuation (a clause or sentence end) before this word
  bool paren = false;       // directly after "("
  bool lower = false;       // written in lower case
  bool capital = false;     // capitalised, not the first word of a sentence
  uint32_t sentence = 0;
};

enum MentionKind : uint8_t { kNoMention = 0, kIdentityMention = 1, kRoleMention = 2 };

// A function word of descriptions ("of", "and", "who", "the"): it ends the name it follows.
bool IsMentionFunctionWord(std::string_view w);

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

Corpus ReadCorpus(const ResolveInput& input);

// Pairs (PairKey of entity indices) whose descriptions link them, with the kind of link.
std::vector<std::pair<uint64_t, uint8_t>> DescriptionMentions(const ResolveInput& input,
                                                              const ResolveOptions& options,
                                                              const Corpus& corpus);

}  // namespace grag::resolve_internal
