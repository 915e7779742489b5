#include "grag/citations.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>
#include <unordered_set>

#include "grag/words.h"

namespace grag {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

bool IsAlnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

// `text` with white space runs folded to one space, and where each folded byte came from.
struct Folded {
  std::string text;
  std::vector<size_t> from;
};

Folded Fold(std::string_view text) {
  Folded f;
  f.text.reserve(text.size());
  f.from.reserve(text.size());
  bool space = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (IsSpace(text[i])) {
      space = !f.text.empty();
      continue;
    }
    if (space) {
      f.text += ' ';
      f.from.push_back(i - 1);
      space = false;
    }
    f.text += text[i];
    f.from.push_back(i);
  }
  return f;
}

// The id tokens of `text` that `ids` holds: (offset, length), in order.
std::vector<std::pair<size_t, size_t>> IdTokens(std::string_view text,
                                                const std::set<std::string>& ids) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c < 'A' || c > 'Z' || (i > 0 && IsAlnum(text[i - 1]))) continue;
    size_t end = i + 1;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    if (end == i + 1 || (end < text.size() && IsAlnum(text[end]))) continue;
    if (ids.count(std::string(text.substr(i, end - i))) != 0) out.emplace_back(i, end - i);
    i = end - 1;
  }
  return out;
}

// `sentence` without the bracketed groups that cite an id ("[S3]", "[Data: Sources (3, 4)]")
// and without bare ids, on one line.
std::string WithoutMarkers(std::string_view sentence, const std::set<std::string>& ids) {
  std::string out;
  size_t i = 0;
  while (i < sentence.size()) {
    const char c = sentence[i];
    if (c == '[' || c == '(') {
      const char close = c == '[' ? ']' : ')';
      // The group, nested brackets included.
      int depth = 0;
      size_t j = i;
      for (; j < sentence.size(); ++j) {
        if (sentence[j] == '[' || sentence[j] == '(') ++depth;
        if (sentence[j] == ']' || sentence[j] == ')') {
          if (--depth == 0) break;
        }
      }
      if (j < sentence.size() && sentence[j] == close &&
          !IdTokens(sentence.substr(i, j - i), ids).empty()) {
        i = j + 1;
        continue;
      }
    }
    out += c;
    ++i;
  }
  for (const auto& [at, len] : IdTokens(out, ids)) {
    std::fill(out.begin() + static_cast<ptrdiff_t>(at),
              out.begin() + static_cast<ptrdiff_t>(at + len), ' ');
  }
  std::string text = Fold(out).text;
  // "dead ." -> "dead."
  std::string tidy;
  for (size_t k = 0; k < text.size(); ++k) {
    if (text[k] == ' ' && k + 1 < text.size() &&
        std::string_view(".,;:!?").find(text[k + 1]) != std::string_view::npos) {
      continue;
    }
    tidy += text[k];
  }
  while (!tidy.empty() && tidy.back() == ' ') tidy.pop_back();
  return tidy;
}

}  // namespace

std::string_view SpanPrecisionName(SpanPrecision p) {
  switch (p) {
    case SpanPrecision::kQuote:
      return "quote";
    case SpanPrecision::kSentence:
      return "sentence";
    case SpanPrecision::kChunk:
      return "chunk";
  }
  return "chunk";
}

int64_t CodePoints(std::string_view utf8) {
  int64_t n = 0;
  for (char c : utf8) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

std::vector<std::pair<std::string, std::string>> CitedClaims(std::string_view answer,
                                                             const std::set<std::string>& ids) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto tokens = IdTokens(answer, ids);
  if (tokens.empty()) return out;
  std::vector<size_t> starts;
  for (const Sentence& s : SplitSentences(answer)) starts.push_back(s.offset);
  if (starts.empty() || starts.front() != 0) starts.insert(starts.begin(), 0);
  auto region = [&](size_t k) {
    const size_t end = k + 1 < starts.size() ? starts[k + 1] : answer.size();
    return answer.substr(starts[k], end - starts[k]);
  };
  std::set<std::string> seen;
  for (const auto& [at, len] : tokens) {
    std::string id(answer.substr(at, len));
    if (!seen.insert(id).second) continue;
    size_t k =
        static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), at) - starts.begin()) -
        1;
    // A marker before any word of its sentence closes the one before.
    const std::string rest = WithoutMarkers(answer.substr(starts[k], at - starts[k]), ids);
    const bool leading = std::none_of(rest.begin(), rest.end(), [](char c) {
      return IsAlnum(c) || static_cast<unsigned char>(c) >= 0x80;
    });
    if (leading && k > 0) --k;
    std::string claim = WithoutMarkers(region(k), ids);
    // Not the list item's or heading's marker ("- ", "* ", "• ", "## ").
    while (true) {
      if (!claim.empty() && std::string_view(" -*>#").find(claim.front()) != std::string::npos) {
        claim.erase(0, 1);
      } else if (claim.starts_with("\xE2\x80\xA2")) {
        claim.erase(0, 3);
      } else {
        break;
      }
    }
    if (claim.empty()) claim = WithoutMarkers(answer, ids);
    out.emplace_back(std::move(id), std::move(claim));
  }
  return out;
}

// Where a chunk's text lies in its document's: the bytes [body_begin, body_begin + body_len)
// of the chunk's text are the document's bytes from doc_start.
struct SpanLocator::ChunkPlace {
  size_t body_begin = 0;
  size_t body_len = 0;
  int64_t doc_start = 0;
  bool located = false;
};

SpanLocator::SpanLocator(Store& store, const SpanOptions& options)
    : store_(store), options_(options) {}

Result<const Document*> SpanLocator::GetDocument(const std::string& id) {
  auto it = documents_.find(id);
  if (it == documents_.end()) {
    GRAG_ASSIGN_OR_RETURN(std::optional<Document> doc, store_.GetDocument(id));
    it = documents_.emplace(id, std::move(doc)).first;
  }
  return it->second ? &*it->second : nullptr;
}

Result<const ChunkRecord*> SpanLocator::GetChunk(const std::string& id) {
  auto it = chunks_.find(id);
  if (it == chunks_.end()) {
    GRAG_ASSIGN_OR_RETURN(std::optional<ChunkRecord> chunk, store_.GetChunk(id));
    it = chunks_.emplace(id, std::move(chunk)).first;
  }
  return it->second ? &*it->second : nullptr;
}

Result<std::optional<SpanLocator::ChunkPlace>> SpanLocator::Place(const ChunkRecord& chunk,
                                                                  const Document& doc) {
  const std::string_view text = doc.text;
  if (chunk.start_byte >= 0 && chunk.end_byte >= chunk.start_byte &&
      static_cast<size_t>(chunk.end_byte) <= text.size()) {
    const std::string_view slice =
        text.substr(static_cast<size_t>(chunk.start_byte),
                    static_cast<size_t>(chunk.end_byte - chunk.start_byte));
    // The slice is the chunk's text after its title prefix and any U+FFFD of a cut character.
    const std::string prefix = "title: " + doc.title + ".\n";
    size_t at = std::string::npos;
    for (size_t candidate : {size_t{0}, prefix.size()}) {
      for (size_t skip = candidate; skip <= candidate + 3 * kReplacement.size();
           skip += kReplacement.size()) {
        if (skip > chunk.text.size()) break;
        if (chunk.text.compare(skip, slice.size(), slice) == 0) {
          at = skip;
          break;
        }
      }
      if (at != std::string::npos) break;
    }
    if (at == std::string::npos) at = chunk.text.find(slice);
    if (at != std::string::npos) {
      return std::optional<ChunkPlace>(ChunkPlace{at, slice.size(), chunk.start_byte, false});
    }
  }
  // No stored offsets (an index from before schema 8), or they no longer fit: find the text.
  std::string_view body = chunk.text;
  const std::string prefix = "title: " + doc.title + ".\n";
  if (body.starts_with(prefix) && !text.starts_with(prefix)) body.remove_prefix(prefix.size());
  while (body.starts_with(kReplacement)) body.remove_prefix(kReplacement.size());
  while (body.ends_with(kReplacement)) body.remove_suffix(kReplacement.size());
  if (body.empty()) return std::optional<ChunkPlace>();
  const size_t at = text.find(body);
  if (at == std::string_view::npos) return std::optional<ChunkPlace>();
  return std::optional<ChunkPlace>(ChunkPlace{static_cast<size_t>(body.data() - chunk.text.data()),
                                              body.size(), static_cast<int64_t>(at), true});
}

double SpanLocator::Idf(const std::string& term) {
  auto it = idf_.find(term);
  return it == idf_.end() ? 1.0 : it->second;
}

SourceSpan SpanLocator::MakeSpan(const Document& doc, const ChunkRecord& chunk, int64_t byte_start,
                                 int64_t byte_end, bool located) {
  SourceSpan s;
  s.document_id = doc.id;
  s.source_path = doc.source_path;
  s.title = doc.title;
  s.content_hash = doc.content_hash;
  s.chunk_id = chunk.id;
  s.byte_start = byte_start;
  s.byte_end = byte_end;
  const std::string_view text = doc.text;
  s.start = CodePoints(text.substr(0, static_cast<size_t>(byte_start)));
  s.text = std::string(
      text.substr(static_cast<size_t>(byte_start), static_cast<size_t>(byte_end - byte_start)));
  s.end = s.start + CodePoints(s.text);
  s.located = located;
  return s;
}

namespace {

// A span found in one of the cited chunks, and that chunk's place in the citation's list.
struct FoundSpan {
  SourceSpan span;
  size_t order = 0;
};

// The run of at most `window` sentences holding the largest share of the claim's weight (its
// terms' idf over claim_weight): the share and the run's byte bounds. On a tie (within
// rounding) the shorter run. A share of -1: no sentence.
std::tuple<double, size_t, size_t> BestWindow(
    const std::vector<std::pair<size_t, size_t>>& bounds,
    const std::vector<std::unordered_set<std::string>>& words,
    const std::vector<std::string>& terms, double claim_weight, size_t window,
    const std::function<double(const std::string&)>& idf) {
  double best_score = -1;
  size_t best_b = 0;
  size_t best_e = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    std::unordered_set<std::string> have;
    for (size_t j = i; j < std::min(bounds.size(), i + window); ++j) {
      have.insert(words[j].begin(), words[j].end());
      double score = 0;
      for (const auto& t : terms) score += have.count(t) != 0 ? idf(t) : 0;
      score /= claim_weight;
      const size_t b = bounds[i].first;
      const size_t e = bounds[j].second;
      if (e <= b) continue;
      // Higher share wins; on a tie (within rounding) the shorter span.
      if (score > best_score + 1e-9 ||
          (std::abs(score - best_score) <= 1e-9 && e - b < best_e - best_b)) {
        best_score = score;
        best_b = b;
        best_e = e;
      }
    }
  }
  return {best_score, best_b, best_e};
}

// The spans to show: the precise ones (or, when none is, the first chunk's), most precise and
// then most overlapping first, at most max_spans, a passage found twice shown once.
std::vector<SourceSpan> KeepBest(std::vector<FoundSpan> found, int max_spans) {
  const bool any_precise = std::any_of(found.begin(), found.end(), [](const FoundSpan& f) {
    return f.span.precision != SpanPrecision::kChunk;
  });
  std::vector<FoundSpan> kept;
  for (auto& f : found) {
    if (any_precise ? f.span.precision != SpanPrecision::kChunk : kept.empty()) {
      kept.push_back(std::move(f));
    }
  }
  std::stable_sort(kept.begin(), kept.end(), [](const FoundSpan& a, const FoundSpan& b) {
    if (a.span.precision != b.span.precision) return a.span.precision < b.span.precision;
    return a.span.overlap > b.span.overlap;
  });
  std::vector<SourceSpan> out;
  for (auto& f : kept) {
    if (static_cast<int>(out.size()) >= max_spans) break;
    // Neighbouring chunks overlap: the same passage found twice is shown once.
    const bool repeat = std::any_of(out.begin(), out.end(), [&f](const SourceSpan& s) {
      return s.document_id == f.span.document_id && s.byte_start < f.span.byte_end &&
             f.span.byte_start < s.byte_end;
    });
    if (!repeat) out.push_back(std::move(f.span));
  }
  return out;
}

}  // namespace

Result<std::vector<SourceSpan>> SpanLocator::Locate(std::string_view claim, std::string_view quote,
                                                    const std::vector<CitedChunk>& chunks) {
  // The claim's content words, weighted by rarity (BM25's idf over the index's chunks).
  std::vector<std::string> terms = ContentTerms(claim);
  std::sort(terms.begin(), terms.end());
  terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  {
    std::vector<std::string> unknown;
    for (const auto& t : terms) {
      if (idf_.count(t) == 0) unknown.push_back(t);
    }
    if (!unknown.empty()) {
      if (!chunk_count_) {
        auto n = store_.CountChunks();
        chunk_count_ = n.ok() ? *n : 0;
      }
      auto df = store_.CountChunksWithWords(unknown);
      for (size_t i = 0; i < unknown.size(); ++i) {
        double idf = 1.0;
        if (df.ok() && df->size() == unknown.size() && *chunk_count_ > 0) {
          const auto n = static_cast<double>(*chunk_count_);
          const auto d = static_cast<double>((*df)[i]);
          idf = std::log(1.0 + (n - d + 0.5) / (d + 0.5));
        }
        idf_[unknown[i]] = idf;
      }
    }
  }
  double claim_weight = 0;
  for (const auto& t : terms) claim_weight += Idf(t);

  std::vector<std::string> quotes;
  if (!quote.empty()) quotes.push_back(Fold(quote).text);
  if (std::string c = Fold(claim).text; c.size() >= 12) quotes.push_back(std::move(c));

  std::vector<FoundSpan> found;
  for (size_t order = 0; order < chunks.size(); ++order) {
    const CitedChunk& cited = chunks[order];
    GRAG_ASSIGN_OR_RETURN(const ChunkRecord* chunk, GetChunk(cited.chunk_id));
    if (chunk == nullptr) continue;
    GRAG_ASSIGN_OR_RETURN(const Document* doc, GetDocument(chunk->document_id));
    if (doc == nullptr) continue;
    GRAG_ASSIGN_OR_RETURN(std::optional<ChunkPlace> place, Place(*chunk, *doc));
    if (!place || place->body_len == 0) continue;
    // The bytes of the chunk's text to look in: its body, within the window.
    const size_t begin = std::max(place->body_begin, cited.window_begin);
    const size_t end = std::min(place->body_begin + place->body_len, cited.window_end);
    if (begin >= end) continue;
    const std::string_view region = std::string_view(chunk->text).substr(begin, end - begin);
    auto to_doc = [&](size_t chunk_offset) {
      return place->doc_start + static_cast<int64_t>(chunk_offset - place->body_begin);
    };
    auto span_of = [&](size_t b, size_t e, SpanPrecision p, double overlap) {
      SourceSpan s = MakeSpan(*doc, *chunk, to_doc(begin + b), to_doc(begin + e), place->located);
      s.precision = p;
      s.overlap = overlap;
      return s;
    };

    // 1. verbatim
    std::optional<SourceSpan> best;
    if (!quotes.empty()) {
      const Folded folded = Fold(region);
      for (const std::string& q : quotes) {
        if (q.empty()) continue;
        const size_t at = folded.text.find(q);
        if (at == std::string::npos) continue;
        best = span_of(folded.from[at], folded.from[at + q.size() - 1] + 1, SpanPrecision::kQuote,
                       1.0);
        break;
      }
    }
    // 2. the sentence (or run of sentences) holding most of the claim's words
    if (!best && claim_weight > 0) {
      // The region's sentences and their words, once per question (citations share chunks).
      const std::string key =
          cited.chunk_id + "@" + std::to_string(begin) + "-" + std::to_string(end);
      auto cached = sentences_.find(key);
      if (cached == sentences_.end()) {
        SentenceWords sw;
        const std::vector<Sentence> sentences = SplitSentences(region);
        for (size_t i = 0; i < sentences.size(); ++i) {
          const size_t b = sentences[i].offset;
          size_t e = i + 1 < sentences.size() ? sentences[i + 1].offset : region.size();
          while (e > b && IsSpace(region[e - 1])) --e;
          sw.bounds.emplace_back(b, e);
          const auto t = ContentTerms(region.substr(b, e - b));
          sw.words.emplace_back(t.begin(), t.end());
        }
        cached = sentences_.emplace(key, std::move(sw)).first;
      }
      const auto [best_score, best_b, best_e] =
          BestWindow(cached->second.bounds, cached->second.words, terms, claim_weight,
                     static_cast<size_t>(std::max(1, options_.window_sentences)),
                     [this](const std::string& t) { return Idf(t); });
      if (best_score >= options_.min_overlap) {
        best = span_of(best_b, best_e, SpanPrecision::kSentence, best_score);
      }
    }
    // 3. the whole chunk (or window): still the text the answer was written from
    if (!best) best = span_of(0, region.size(), SpanPrecision::kChunk, 0);
    found.push_back({std::move(*best), order});
  }
  return KeepBest(std::move(found), options_.max_spans);
}

Result<std::vector<CitedChunk>> SpanLocator::Ranked(std::vector<std::string> ids,
                                                    std::string_view claim) {
  std::vector<CitedChunk> out;
  const auto k = static_cast<size_t>(std::max(1, options_.candidate_chunks));
  const std::unordered_set<std::string> mine(ids.begin(), ids.end());
  std::unordered_set<std::string> taken;
  // The index's best chunks for the claim that are among these, then these in their order. When
  // all of them are looked at anyway, no search: Locate ranks what it finds.
  if (!claim.empty() && ids.size() > k) {
    auto hits = store_.SearchChunks(claim, static_cast<int>(std::max<size_t>(200, 4 * k)));
    if (hits.ok()) {
      for (const ChunkHit& h : *hits) {
        if (out.size() >= k) break;
        if (mine.count(h.chunk_id) != 0 && taken.insert(h.chunk_id).second) {
          out.push_back({h.chunk_id});
        }
      }
    }
  }
  for (const std::string& id : ids) {
    if (out.size() >= k) break;
    if (taken.insert(id).second) out.push_back({id});
  }
  return out;
}

Result<std::vector<CitedChunk>> SpanLocator::CommunityChunks(int64_t community_id,
                                                             std::string_view claim) {
  if (!community_chunks_) {
    GRAG_ASSIGN_OR_RETURN(auto all, store_.CommunityChunks());
    community_chunks_ = std::move(all);
  }
  auto it = community_chunks_->find(community_id);
  if (it == community_chunks_->end()) return std::vector<CitedChunk>{};
  return Ranked(it->second, claim);
}

Result<std::vector<CitedChunk>> SpanLocator::EntityChunks(int64_t entity_id,
                                                          std::string_view claim) {
  GRAG_ASSIGN_OR_RETURN(std::vector<std::string> ids, store_.GetEntityChunks(entity_id));
  return Ranked(std::move(ids), claim);
}

Result<std::vector<CitedChunk>> SpanLocator::RelationshipChunks(int64_t source_id,
                                                                int64_t target_id,
                                                                std::string_view claim) {
  GRAG_ASSIGN_OR_RETURN(std::vector<std::string> a, store_.GetEntityChunks(source_id));
  GRAG_ASSIGN_OR_RETURN(std::vector<std::string> b, store_.GetEntityChunks(target_id));
  const std::unordered_set<std::string> in_b(b.begin(), b.end());
  std::vector<std::string> both;
  for (const auto& id : a) {
    if (in_b.count(id) != 0) both.push_back(id);
  }
  if (both.empty()) {
    both = a;
    both.insert(both.end(), b.begin(), b.end());
  }
  return Ranked(std::move(both), claim);
}

}  // namespace grag
