#include "engine_citations.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include "engine_internal.h"

namespace grag {
namespace {

// What an item of a local context (local search, DRIFT's follow-ups) stands for, where its
// passages are.
struct Cited {
  std::string id;
  LocalItemType kind = LocalItemType::kChunk;
  std::string chunk_id;
  int64_t entity_id = 0;
  int64_t source_id = 0;
  int64_t target_id = 0;
  int64_t community_id = 0;
  std::string name;  // kEntity: its name, added to the claim when ranking its chunks
};

Result<std::vector<SourceSpan>> SpansOf(SpanLocator& locator, const Cited& c,
                                        const std::string& claim) {
  std::vector<CitedChunk> chunks;
  switch (c.kind) {
    case LocalItemType::kChunk:
      chunks.push_back({c.chunk_id});
      break;
    case LocalItemType::kEntity: {
      GRAG_ASSIGN_OR_RETURN(chunks, locator.EntityChunks(c.entity_id, claim + " " + c.name));
      break;
    }
    case LocalItemType::kRelationship: {
      GRAG_ASSIGN_OR_RETURN(chunks, locator.RelationshipChunks(c.source_id, c.target_id, claim));
      break;
    }
    case LocalItemType::kReport: {
      GRAG_ASSIGN_OR_RETURN(chunks, locator.CommunityChunks(c.community_id, claim));
      break;
    }
  }
  return locator.Locate(claim, "", chunks);
}

// The citations of an answer over context items: the claim is the answer's sentence citing
// each; `second_claim` offers another (DRIFT: the note that cited it) tried when the first gave
// no sentence.
Result<std::vector<SourceCitation>> ItemCitations(
    SpanLocator& locator, std::string_view answer, const std::vector<Cited>& cited,
    const std::function<std::string(const std::string& id)>& second_claim) {
  std::set<std::string> ids;
  for (const Cited& c : cited) ids.insert(c.id);
  std::map<std::string, std::string> claims;
  for (auto& [id, claim] : CitedClaims(answer, ids)) claims.emplace(id, std::move(claim));
  std::vector<SourceCitation> out;
  for (const Cited& c : cited) {
    SourceCitation s;
    s.id = c.id;
    s.kind = std::string(LocalItemTypeName(c.kind));
    s.claim = claims.count(c.id) != 0 ? claims[c.id] : std::string();
    GRAG_ASSIGN_OR_RETURN(s.spans, SpansOf(locator, c, s.claim));
    const bool weak = s.spans.empty() || s.spans.front().precision == SpanPrecision::kChunk;
    if (weak && second_claim) {
      const std::string other = second_claim(c.id);
      if (!other.empty()) {
        GRAG_ASSIGN_OR_RETURN(std::vector<SourceSpan> again, SpansOf(locator, c, other));
        if (!again.empty() && again.front().precision != SpanPrecision::kChunk) {
          s.spans = std::move(again);
        }
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

Cited FromLocalItem(const LocalContextItem& item) {
  Cited c;
  c.id = item.id;
  c.kind = item.type;
  c.chunk_id = item.chunk_id;
  c.entity_id = item.entity_id;
  c.source_id = item.source_id;
  c.target_id = item.target_id;
  c.community_id = item.community_id;
  c.name = item.name;
  return c;
}

Cited FromDrift(const DriftCitation& d) {
  Cited c;
  c.id = d.id;
  c.kind = d.kind;
  c.chunk_id = d.chunk_id;
  c.entity_id = d.entity_id;
  c.source_id = d.source_id;
  c.target_id = d.target_id;
  c.community_id = d.community_id;
  c.name = d.title;
  return c;
}

// The description of the best-scored kept point that `has` accepts.
std::string BestPoint(const std::vector<GlobalPoint>& points,
                      const std::function<bool(const GlobalPoint&)>& has) {
  const GlobalPoint* best = nullptr;
  for (const GlobalPoint& p : points) {
    if (p.fate != PointFate::kKept || !has(p)) continue;
    if (best == nullptr || p.score > best->score) best = &p;
  }
  return best != nullptr ? best->description : std::string();
}

}  // namespace

Result<std::vector<SourceCitation>> LocateCitations(Store& store, const SpanOptions& options,
                                                    const QueryResult& result) {
  std::vector<SourceCitation> out;
  if (options.max_spans <= 0) return out;
  SpanLocator locator(store, options);
  if (result.passages) {
    const PassageSearchResult& r = *result.passages;
    std::vector<Cited> cited;
    for (const PassageCitation& c : r.citations) {
      Cited x;
      x.id = c.id;
      x.chunk_id = r.retrieval.chunks[c.chunk].chunk_id;
      cited.push_back(std::move(x));
    }
    return ItemCitations(locator, r.answer, cited, nullptr);
  }
  if (result.local) {
    const LocalSearchResult& r = *result.local;
    std::vector<Cited> cited;
    for (const LocalCitation& c : r.citations) {
      cited.push_back(FromLocalItem(r.context.items[c.item]));
    }
    return ItemCitations(locator, r.answer, cited, nullptr);
  }
  if (result.drift) {
    const DriftSearchResult& r = *result.drift;
    std::vector<Cited> cited;
    for (const DriftCitation& c : r.citations) cited.push_back(FromDrift(c));
    // The note (primer or follow-up answer) that cited the id: its sentence is often closer to
    // the source than the reduce's.
    auto note_claim = [&r](const std::string& id) -> std::string {
      for (const DriftAction& a : r.actions) {
        if (std::find(a.cited.begin(), a.cited.end(), id) == a.cited.end()) continue;
        for (auto& [cid, claim] : CitedClaims(a.answer, {id})) return claim;
      }
      return {};
    };
    return ItemCitations(locator, r.answer, cited, note_claim);
  }
  if (result.global) {
    const GlobalSearchResult& r = *result.global;
    for (const GlobalCitation& c : r.citations) {
      SourceCitation s;
      s.id = "C" + std::to_string(c.community_id);
      s.kind = "report";
      // The point the community supports: more specific than the reduce's sentence.
      s.claim = BestPoint(r.points, [&c](const GlobalPoint& p) {
        return std::find(p.community_ids.begin(), p.community_ids.end(), c.community_id) !=
               p.community_ids.end();
      });
      GRAG_ASSIGN_OR_RETURN(std::vector<CitedChunk> chunks,
                            locator.CommunityChunks(c.community_id, s.claim));
      GRAG_ASSIGN_OR_RETURN(s.spans, locator.Locate(s.claim, "", chunks));
      out.push_back(std::move(s));
    }
    return out;
  }
  if (result.lazy) {
    const LazySearchResult& r = *result.lazy;
    for (size_t i : r.citations) {
      const LazyTest& t = r.tests[i];
      SourceCitation s;
      s.id = t.label;
      s.kind = "chunk";
      s.claim = BestPoint(r.claims, [&t](const GlobalPoint& p) {
        return std::find(p.source_ids.begin(), p.source_ids.end(), t.label) != p.source_ids.end();
      });
      // The whole chunk: the claims call read the relevant chunks whole, not only the window
      // the relevance test rated.
      const CitedChunk chunk{t.chunk_id};
      GRAG_ASSIGN_OR_RETURN(s.spans, locator.Locate(s.claim, "", {chunk}));
      out.push_back(std::move(s));
    }
    return out;
  }
  return out;
}

}  // namespace grag
