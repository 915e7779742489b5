// Entity and relationship extraction without a model: noun phrases from a hand-written scanner
// over Unicode character classes, in the spirit of Microsoft GraphRAG's `regex_english`
// extractor (its "fast" indexing method), and graph pruning as that method does it.
//
// What a chunk yields:
//   - names ("proper noun"): runs of capitalised words, such as "Ebenezer Scrooge", "Bob
//     Cratchit", "Zoë Álvarez", with "of" and name particles (van, de, da, ...) allowed inside
//     ("Ghost of Christmas Past") and initials kept ("J. B. Lippincott"). Leading titles (Mr.,
//     Mrs., Dr., Sir, ...) are dropped, so "Mr. Fezziwig" and "Fezziwig" merge. A possessive
//     ends a name ("Marley's" gives "Marley").
//   - noun phrases ("noun phrase"): runs of 2 to `max_noun_phrase_words` lower-case content
//     words ("counting house", "old man") and hyphenated compounds ("counting-house",
//     "door-nail"). With no part-of-speech tagger this is an approximation: a run is any
//     sequence of words that are not on the stop list (function words, pronouns, auxiliaries,
//     very common verbs and adverbs, number words), uninterrupted by punctuation.
//   - case as evidence: a capitalised word is part of a name unless it is a stop word ("The",
//     "But", "When", "He", "I" never are). Mid-sentence, that is all. A word whose capital may
//     be due to its place (first of a sentence, after an opening quote) is not when its
//     lower-case form occurs in the chunk ("Darkness is cheap" with "the darkness" elsewhere),
//     nor when it stands alone before punctuation or an object, as imperatives and
//     interjections do ("Stop!", "Bless you", "[Illustration]"), unless the chunk also
//     capitalises it mid-sentence; "Marley was dead" gives "Marley". ALL CAPS words are names
//     inside lower-case text ("the FTC said") but in an all-caps line (a heading: "STAVE ONE")
//     only when the chunk also capitalises them mid-sentence. The price: a name seen only in
//     address at a sentence start ("Belle," said he) is missed.
//   - noun phrases skip "-ly" adverbs and do not end on a word that looks like a past tense
//     ("bells ceased" is no phrase).
// Each distinct phrase (by NormalizeEntityName) is one EntityMention whose description is the
// first sentence it occurs in, whitespace collapsed and cut at a word boundary.
//
// Relationships: two phrases are related when they occur in sentences at most `sentence_window`
// apart. The strength is the number of such pairs of sentence occurrences in the chunk (each
// phrase counted once per sentence), so it is a co-occurrence count, not the 1-10 scale of the
// LLM prompt; merging sums it over chunks. The description is the first sentence holding both
// (or, when none does, the first two sentences within the window that do).
//
// Everything here is deterministic (same text and options, same result, in the same order) and
// thread-safe: no shared state, no model weights, no regex compiled at run time. Measured with
// bench/nlp_extract_bench.cpp (Release, a busy 2-core VM): 0.26 ms a 1200-token chunk (52
// entities, 189 relationships); the Christmas Carol's 42 chunks extracted, merged and pruned in
// 30 ms (1,674 entities and 7,275 relationships before pruning, 261 and 556 after).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grag/extract.h"
#include "grag/status.h"

namespace grag {

// Name and version stored as ExtractorId::model for NLP results. Bumped whenever a change to
// the extractor changes its output, so stored results of an older version are re-extracted.
inline constexpr std::string_view kNlpExtractorModel = "grag-nlp-en/4";

struct NlpExtractorOptions {
  // Co-occurrence window in sentences: 0 = same sentence only; 1 = the same or the next
  // sentence (default: Dickens-length sentences often name one character and refer to another
  // just after); < 0 = anywhere in the chunk, as Microsoft GraphRAG does for a text unit.
  int sentence_window = 1;
  // Names longer than this many words are dropped (title-case headings, not names). Counts
  // particles and initials: "Ghost of Christmas Yet" is 4.
  int max_name_words = 5;
  // Lower-case runs of 2 to this many content words are noun phrases; longer runs are mostly
  // clause fragments and are dropped. 0 or 1: no lower-case multi-word phrases.
  int max_noun_phrase_words = 3;
  // Hyphenated lower-case words with two or more content parts ("counting-house") are phrases.
  bool hyphenated_compounds = true;
  // Longer words are never part of a phrase (URLs, hashes, garbage). Counted in code points.
  // Microsoft's default is 15; hyphenated compounds need more.
  int max_word_chars = 24;
  // Descriptions (sentences) are cut at a word boundary to at most this many bytes, with "…".
  int max_description_bytes = 300;
  // More words that never form or start a phrase (case-insensitive), on top of the built-in
  // stop list; Microsoft's `exclude_nouns`.
  std::vector<std::string> exclude_words;
};

// A canonical text of the options that change the output (with kNlpExtractorModel), to be
// hashed into ExtractionRecord::params_hash: changed options mean stale results.
std::string NlpExtractorFingerprint(const NlpExtractorOptions& options);

// Extracts one chunk. Entities come in order of first occurrence, relationships in order of
// first co-occurrence; keys are filled with NormalizeEntityName, types are "proper noun" or
// "noun phrase". Invalid UTF-8 bytes count as separators.
//
// `title`, the chunk's document title, when it names something (TitleEntityName), is an entity
// of type "title" in every chunk of the document: found wherever its words occur in a row in
// any case (so a sentence-initial title is not cut short: "Guitar World is..." gives "Guitar
// World", not "World"), and there even when the chunk does not spell it. It is related to every
// other phrase of the chunk: a document's chunks are about its title.
//
// Errors: kInvalidArgument for options out of range (max_name_words or max_word_chars < 1,
// max_description_bytes < 16). Thread-safe.
Result<ParsedExtraction> ExtractNlp(std::string_view chunk_text, const NlpExtractorOptions& options,
                                    std::string_view title = {});

// The entity a document title names: `title` without a trailing parenthetical qualifier ("Kiss
// and Tell (1945 film)" gives "Kiss and Tell"); empty when it names nothing: a file name
// ("notes.txt"), a generated id ("data.jsonl#3"), no letters, more than 10 words.
std::string TitleEntityName(std::string_view title);

}  // namespace grag
