// Character-level citations: from an id an answer cites ("S3", "E12", "C7", "T5") to the
// passage(s) of the original document it rests on, as byte and character offsets.
//
// A span always comes from the text of a chunk the method read (a placed chunk, a tested window,
// or a chunk of the cited community, entity or relationship), so it lies inside the context the
// answer was written from. Within a chunk, the best span for the claim (the answer's sentence
// that cites the id) is, in order: the claim or a given quote found verbatim (white space
// folded): kQuote; the sentence, or run of window_sentences sentences, whose content words
// cover most of the claim's (weighted by rarity), when that share reaches min_overlap:
// kSentence; else the whole chunk (or window): kChunk. No model call; bounded reads (at most
// candidate_chunks chunks per citation).
//
// Offsets: chunks store their window in the document's text (ChunkRecord::start_byte). An index
// written before schema 8 has -1 there until its next `grag index`; the locator then finds the
// chunk's text in the document's (SourceSpan::located). Offsets are per document: updates of
// other documents cannot move them; a changed document gets a new content_hash.
//
// Thread-safety: a SpanLocator caches what it read; one per question, used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grag/search_results.h"
#include "grag/status.h"
#include "grag/store.h"

namespace grag {

struct SpanOptions {
  // Share of the claim's content words (idf-weighted) a sentence span must hold to be offered
  // rather than the whole chunk: 0.35 is about "the claim's main names and one more word".
  double min_overlap = 0.35;
  int max_spans = 3;          // spans per citation
  int window_sentences = 2;   // a claim often joins two neighbouring sentences
  int candidate_chunks = 10;  // chunks of a community/entity/relationship looked at per citation
};

// A chunk to look in; [window_begin, window_end) restricts the search to those bytes of its
// text (budgeted search tests a window of a chunk, not all of it).
struct CitedChunk {
  std::string chunk_id;
  size_t window_begin = 0;
  size_t window_end = std::numeric_limits<size_t>::max();
};

class SpanLocator {
 public:
  SpanLocator(Store& store, const SpanOptions& options);

  // The best spans for `claim` among `chunks` (a `quote`, when given, is tried first), best
  // first, at most max_spans: quote and sentence spans first; a chunk span only when no chunk
  // gave better (then the first chunk's). A chunk or document no longer in the index is skipped.
  Result<std::vector<SourceSpan>> Locate(std::string_view claim, std::string_view quote,
                                         const std::vector<CitedChunk>& chunks);

  // Candidate chunks: those of a community (its members' chunks), an entity, or a relationship
  // (chunks of both ends, else of either), best for `claim` first by BM25, at most
  // candidate_chunks.
  Result<std::vector<CitedChunk>> CommunityChunks(int64_t community_id, std::string_view claim);
  Result<std::vector<CitedChunk>> EntityChunks(int64_t entity_id, std::string_view claim);
  Result<std::vector<CitedChunk>> RelationshipChunks(int64_t source_id, int64_t target_id,
                                                     std::string_view claim);

 private:
  struct ChunkPlace;
  Result<const Document*> GetDocument(const std::string& id);
  Result<const ChunkRecord*> GetChunk(const std::string& id);
  Result<std::optional<ChunkPlace>> Place(const ChunkRecord& chunk, const Document& doc);
  Result<std::vector<CitedChunk>> Ranked(std::vector<std::string> ids, std::string_view claim);
  double Idf(const std::string& term);
  SourceSpan MakeSpan(const Document& doc, const ChunkRecord& chunk, int64_t byte_start,
                      int64_t byte_end, bool located);

  Store& store_;
  SpanOptions options_;
  std::map<std::string, std::optional<Document>> documents_;
  std::map<std::string, std::optional<ChunkRecord>> chunks_;
  std::optional<std::map<int64_t, std::vector<std::string>>> community_chunks_;
  std::map<std::string, double> idf_;
  struct SentenceWords {
    std::vector<std::pair<size_t, size_t>> bounds;  // bytes of the region
    std::vector<std::unordered_set<std::string>> words;
  };
  std::map<std::string, SentenceWords> sentences_;  // by chunk id and region
  std::optional<int64_t> chunk_count_;
};

// Each id of `ids` cited in `answer` (as a word: "S3", "[S3]", "[Data: S3, E2]"), with the
// answer's sentence around its first mention, citation markers removed; in order of first
// mention. A marker standing alone after a sentence's end ("… end. [S3]") belongs to that
// sentence.
std::vector<std::pair<std::string, std::string>> CitedClaims(std::string_view answer,
                                                             const std::set<std::string>& ids);

// The number of Unicode code points in `utf8` (bytes that do not continue a character).
int64_t CodePoints(std::string_view utf8);

}  // namespace grag
