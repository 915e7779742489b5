// Entity resolution and merging: per-chunk mentions become one graph.
//
// Entities merge on their normalised name (NormalizeEntityName). The type is the most frequent
// one among the mentions; every type's count is kept, so nothing is lost on a conflict. Every
// distinct description is kept; SummarizeDescriptions turns a long list into one text.
// Relationships are undirected pairs: weight = sum of strengths. A relationship naming an
// entity that no chunk extracted creates that entity (flagged `inferred`) instead of being
// dropped.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grag/llm.h"
#include "grag/store_types.h"

namespace grag {

// The texts a merged graph's descriptions and chunk ids point into, each distinct text once:
// the NLP extractor's co-occurrences in one sentence all carry that sentence, so the mentions'
// descriptions are mostly the same few texts. A text's address never changes.
class TextPool {
 public:
  std::string_view Intern(std::string_view text);
  size_t size() const { return texts_.size(); }

 private:
  std::deque<std::string> texts_;
  std::unordered_set<std::string_view> index_;
};

struct MergedEntity {
  std::string name_key;
  std::string name;  // the most frequent spelling (ties: the smallest)
  std::string type;  // the most frequent type (ties: the smallest); empty when inferred
  std::map<std::string, int64_t> type_counts;
  // Both point into the graph's `texts`.
  std::vector<std::string_view> descriptions;  // distinct, in order of first mention
  std::vector<std::string_view> chunk_ids;     // distinct, sorted
  bool inferred = false;                       // only ever seen as a relationship endpoint
};

struct MergedRelationship {
  std::string source_key;  // source_key < target_key
  std::string target_key;
  double weight = 0;  // sum of the mentions' strengths
  std::vector<std::string_view> descriptions;
  std::vector<std::string_view> chunk_ids;
};

struct MergedGraph {
  std::vector<MergedEntity> entities;             // sorted by name_key
  std::vector<MergedRelationship> relationships;  // sorted by (source_key, target_key)
  std::shared_ptr<const TextPool> texts;          // what the descriptions and chunk ids point into
};

// Merges mentions as they come (a store's scan: Store::ScanEntityMentions), holding only what
// the merged graph holds, never the mentions themselves. The result does not depend on the
// order of the mentions except for the order of descriptions, which follows the order in which
// they were added.
class MentionMerger {
 public:
  MentionMerger();
  ~MentionMerger();
  MentionMerger(MentionMerger&&) noexcept;
  MentionMerger& operator=(MentionMerger&&) noexcept;

  void Add(std::string_view chunk_id, const EntityMention& mention);
  void Add(std::string_view chunk_id, const RelationshipMention& mention);
  // The graph of everything added; the merger is empty again afterwards.
  MergedGraph Finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Mentions in any order; the result does not depend on their order except for the order of
// descriptions, which follows the mentions' order.
MergedGraph MergeMentions(const std::vector<ChunkEntityMention>& entities,
                          const std::vector<ChunkRelationshipMention>& relationships);

// Folds resolved names into their entity (entity resolution's output: every key that maps to a
// different key in `canonical_of`, which must be present in the graph): the entity keeps the
// canonical key and its spelling; types are counted together; descriptions are the canonical's
// then the others' (distinct); chunks are united. Relationships move to the canonical keys;
// self-loops made by a merge are dropped and parallel ones summed. Keys missing from
// `canonical_of` stay as they are. Returns how many entities were folded away.
size_t CollapseResolved(MergedGraph& graph,
                        const std::unordered_map<std::string, std::string>& canonical_of);

struct SummarizeOptions {
  // Descriptions are joined as they are while they fit max_joined_tokens (nano-graphrag's and
  // Microsoft GraphRAG's rule: a summary call only when the joined list is too long; short
  // lists kept verbatim lose nothing). With max_descriptions > 0, more distinct descriptions
  // than that go to the summarizer too; 0: their number alone never does.
  size_t max_descriptions = 0;
  size_t max_joined_tokens = 500;  // joined descriptions above this go to the summarizer
  int max_summary_tokens = 300;    // the summary's length limit (max_tokens of the call)
  TokenCounter count_tokens;       // empty: EstimateTokens
};

// A fingerprint of a description list (order-independent; kInputHashDigits hex digits), stored
// beside the merged description so an unchanged list is never summarised again.
std::string DescriptionsHash(const std::string& name,
                             const std::vector<std::string_view>& descriptions);

// Without a summarizer (no-LLM mode): the first descriptions, one per line, as many as fit
// max_descriptions and max_joined_tokens (at least one).
std::string JoinDescriptionsWithin(const std::vector<std::string_view>& descriptions,
                                   const SummarizeOptions& options);

// Whether `descriptions` need the summarizer under `options`.
bool NeedsSummary(const std::vector<std::string_view>& descriptions,
                  const SummarizeOptions& options);

// The descriptions joined, one per line, in order.
std::string JoinDescriptions(const std::vector<std::string_view>& descriptions);

// ---- updates: appending to a summary instead of summarising again
// A summary records which descriptions it covers (its basis: a short fingerprint of each, and
// the tokens it summarised). When an update brings new descriptions, they are appended verbatim
// to the stored text while everything not in the summary totals at most `refresh_share` of the
// tokens the summary covers and at most max_joined_tokens: the summary plus the new material
// stand, at no call. A description that is gone (a removed document) forces a new summary, so
// removed material never lingers.

// The basis of a summary just written from `descriptions`.
std::string SummaryBasis(const std::vector<std::string_view>& descriptions,
                         const SummarizeOptions& options);

struct AppendedDescription {
  std::string description;
  std::string basis;
  size_t appended = 0;  // descriptions added this time
};
// The stored summary `description` with the descriptions `basis` does not cover appended, when
// that is within the limits above; nullopt when a new summary is needed (or the basis is empty or
// unreadable).
std::optional<AppendedDescription> AppendToSummary(
    const std::string& description, const std::string& basis,
    const std::vector<std::string_view>& descriptions, double refresh_share,
    const SummarizeOptions& options);

// One merged description of `name` from `descriptions` (which NeedsSummary), by the summarizer.
Result<std::string> SummarizeDescriptions(ChatModel& model, const std::string& name,
                                          const std::vector<std::string_view>& descriptions,
                                          const SummarizeOptions& options);

}  // namespace grag
