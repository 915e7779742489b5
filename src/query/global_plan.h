// Internal to global search: report selection, shuffling, batching and map-prompt building.
// PlanGlobalSearch (grag/global_search.h) is built from these; they are separate so tests and
// the benchmark can check each step.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "grag/global_search.h"
#include "grag/status.h"
#include "grag/store_types.h"
#include "grag/tokenizer.h"

namespace grag::query {

// Checks the options that do not depend on the index. kInvalidArgument names the bad field.
Status ValidateGlobalOptions(const GlobalSearchOptions& options);

// The communities global search reads at `level`: those of that level plus the coarser ones that
// have no children (so each clustered entity is in exactly one), ascending by id.
std::vector<const CommunityRecord*> SelectCommunities(const std::vector<CommunityRecord>& all,
                                                      int64_t level);

// Fisher-Yates driven by mt19937_64 with rejection sampling: unlike std::shuffle and
// std::uniform_int_distribution, whose algorithms the standard leaves open, this gives the same
// order on every platform and standard library, so a query is reproducible anywhere.
template <typename T>
void SeededShuffle(std::vector<T>& items, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = items.size(); i > 1; --i) {
    const uint64_t range = i;
    const uint64_t limit = std::mt19937_64::max() - std::mt19937_64::max() % range;
    uint64_t x = rng();
    while (x >= limit) x = rng();
    std::swap(items[i - 1], items[static_cast<size_t>(x % range)]);
  }
}

// The text a report contributes to a map prompt: its full content (or, when that is empty, its
// title, summary and findings) inside <report id="..."> ... </report>, so the map model sees an
// id it can cite.
std::string ReportBlock(int64_t community_id, std::string_view body);
std::string ReportBody(const ReportRecord& report);

// The longest prefix of `text` whose tokens number at most `max_tokens`, ending on a whole
// UTF-8 character.
std::string TruncateToTokens(const Tokenizer& tokenizer, std::string_view text, int64_t max_tokens);

// How many batches next-fit packing makes of items with these token counts (in this order) when
// each batch may hold `budget` tokens. An item larger than the budget gets a batch of its own.
size_t CountBatches(const std::vector<int64_t>& tokens, int64_t budget);

// The {{report_batch}} text of a batch: a newline, then each block followed by a newline.
std::string JoinBlocks(const std::vector<const std::string*>& blocks);

}  // namespace grag::query
