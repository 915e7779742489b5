// Word-level text tools every stage shares: name keys, function words, abbreviations, a light
// stemmer, the sentence splitter and search terms. One copy here, so the extractor, resolution,
// the extractive reports and the query answers agree on what a sentence and a word are.
//
// All lists are generic English (nothing from any data set) and lower-case ASCII; callers
// lower-case (or NormalizeEntityName) a word before asking. Thread-safe: no state but constant
// tables.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace grag {

// The key entities merge on: Unicode case-folded (NFKC), punctuation and whitespace runs
// collapsed to one space, trimmed. "Ebenezer  Scrooge", "EBENEZER SCROOGE." and
// "ebenezer-scrooge" share one key.
std::string NormalizeEntityName(std::string_view name);

// The words of a NormalizeEntityName result (split on its single spaces).
std::vector<std::string> SplitNormalizedName(std::string_view normalized);
// The same words as views into `normalized`, which must outlive them.
std::vector<std::string_view> SplitNormalizedNameViews(std::string_view normalized);
// The same into `*words` (cleared first), for a caller that reuses the vector's capacity.
void SplitNormalizedNameViews(std::string_view normalized, std::vector<std::string_view>* words);

// English function words (articles, prepositions, conjunctions, pronouns, auxiliaries and
// modals): what no search term and no name starts with. The NLP extractor adds its own
// phrase-breaking words (common verbs, adverbs, interjections) on top of these.
std::span<const std::string_view> FunctionWords();
bool IsFunctionWord(std::string_view lower);

// Words whose following '.' does not end a sentence ("Mr.", "St.", "Gen.", "vs.").
std::span<const std::string_view> Abbreviations();
bool IsAbbreviation(std::string_view lower);

// Short connecting words a name may hold ("Bank of England", "Duc de Guise") that say nothing
// about what it names: what name comparisons skip.
bool IsNameFiller(std::string_view lower);

// Plural and verb endings off, so "ghosts"/"ghost" and "haunted"/"haunting" agree. Crude (no
// dictionary), but the same on both sides of a comparison, which is all matching needs.
std::string Stem(std::string word);

struct Sentence {
  std::string text;      // whitespace runs collapsed to one space, trimmed
  size_t offset = 0;     // byte offset in the input where it starts
  bool complete = true;  // starts like a sentence (not lower case) and ends with . ! or ?
};

// Splits prose into sentences: at . ! ? (with closing quotes and brackets, ASCII or curly)
// followed by space and not by a lower-case word, in any script ('"Bah!" said Scrooge' stays
// one), never after an abbreviation (Abbreviations()) or a single capital initial, and always
// at a blank line. A chunk's "title: ...\n" prefix (chunks.prepend_title) is skipped. Cut-off
// pieces at a chunk's edges come back with complete == false.
std::vector<Sentence> SplitSentences(std::string_view text);

// The search terms of `text`: NormalizeEntityName's words, without function words, contraction
// pieces ("don", "t") and the words of questions about a corpus ("what", "main", "themes",
// "story", ...), without numbers-only words of one or two digits, stemmed (Stem). In text
// order, repeats kept.
std::vector<std::string> ContentTerms(std::string_view text);

// Whether `word` (a NormalizeEntityName word) is one ContentTerms leaves out, before or after
// stemming.
bool IsNonContentWord(const std::string& word);

// `text` on one line (whitespace runs, line breaks included, collapsed to one space, trimmed),
// then cut to at most `max_bytes` bytes at a word boundary (never inside a UTF-8 character),
// with "…" appended when cut.
std::string ShortenAtWord(std::string_view text, size_t max_bytes);

}  // namespace grag
