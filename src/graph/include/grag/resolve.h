// Entity resolution: which extracted names are one real thing (seed 004's resolution stage).
//
// Extraction gives one node per normalised name, so "Jacob Marley", "Marley" and "Ghost of Jacob
// Marley" split one character's edges across three nodes. ResolveEntities decides which names
// to join, in four steps:
//   1. Blocking: only plausible pairs are compared: compatible types; a shared distinctive
//      name token, prefix or acronym key ("FTC" ~ "Federal Trade Commission"); token
//      containment ("Marley" in "Jacob Marley"); articles, honorifics and legal suffixes
//      ("The", "Mr.", "Corp") ignored for blocking. A token shared by too many names
//      (ResolveOptions::max_block) is not a blocking key. Description mentions: a pair is also
//      compared when one entity's description names the other after an identity phrase ("also
//      known as", "refers to", "identified as", "(X)", the first "is" of the description...),
//      or when a role name's first sentence names it ("Scrooge's wife": "...Bob Cratchit's
//      wife"); only the judge may join such a pair. Names are looked up per description n-gram
//      in a hash map, so this is linear in the description text.
//   2. Similarity: name_weight x NameSimilarity + embedding_weight x cosine of the description
//      embeddings (0.5 / 0.5 by default, seed 004).
//   3. Decision bands: >= merge_threshold merges; [adjudicate_threshold, merge_threshold) goes
//      to the LLM in batches (JSON verdicts with a reason); below stays apart. Without an LLM
//      only no_llm_merge_threshold merges.
//   4. Guards: a conflict (MergeConflict: different given names, numbers or years, different
//      distinctive modifiers) keeps a pair apart whatever its score, and so does a short name
//      that fits several entities that stay apart ("Smith" with John and Jane Smith). With a
//      judge, soft conflicts (an age modifier against another lead word, "Young Scrooge" /
//      "Older Scrooge"; a spouse role against the honorific form, "Cratchit's wife" / "Mrs.
//      Cratchit"; organisation / geo / person types of near-identical names) and the word
//      conflicts of description-linked pairs go to the judge instead, and a short name that fits
//      several entities has each fit judged (it stays apart only if the judge joins it to two
//      entities that must stay apart). Types, gender honorifics, generations, numbers, versions
//      and editions always block. A female honorific against a name without one ("Mrs.
//      Fezziwig" / "Fezziwig") is a soft conflict. Without a judge, only firm conflicts among
//      the fits keep a short name apart (different given names, possession, numbers, versions,
//      gender honorifics, types, generations); otherwise it joins its best fit (highest score,
//      then frequency) whose extra words are proper words of the corpus, not possessors, on the
//      name alone ("Marley" -> "Jacob Marley" beside "Old Jacob Marley" and "Ghost of Jacob
//      Marley"). A fit whose extra words are only seen at sentence starts ("Whereat Scrooge")
//      or repeat the short name ("Scrooge Scrooge") is no other entity. A leading kinship title
//      ("Uncle Scrooge", "Aunt ...") is a form of address, stripped like an honorific.
//   5. Shapes (corpus signal: a "common word" is written in lower case in the descriptions at
//      least as often as capitalised inside a sentence). Only a given name or a proper modifier
//      extends a name into the same name on the score alone ("Jacob Marley" / "Marley"); an
//      extension by common words or a preposition ("Full Project Gutenberg License", "City of
//      London"), and two common nouns up to an article ("The Baby" / "Baby"), go to the judge
//      (without one they stay apart). Pairs that rarely join are not judged: a common noun inside
//      a longer description ("Shop" / "Back-shop"), a person or event name followed by common
//      words ("Christmas" / "Christmas Day"; organisations and places are still judged), lead
//      modifiers of two common nouns, a role name's mention after a preposition.
// Resolution is incremental: only pairs with at least one `fresh` entity are compared; links
// decided earlier are passed in and kept. User decisions (must_link / cannot_link) win over
// everything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grag/llm.h"
#include "grag/prompts.h"
#include "grag/status.h"

namespace grag {

struct ResolveEntity {
  std::string key;          // the name_key (NormalizeEntityName of the name)
  std::string name;         // the display spelling, as extracted
  std::string type;         // as extracted (lower-cased); "" when unknown
  std::string description;  // the entity's descriptions joined (for embeddings and the LLM)
  int64_t frequency = 0;    // chunks naming it
  bool fresh = true;        // not resolved in an earlier run: compared this run
  // Where it is named (any ids, sorted: the pipeline numbers the chunks). Without a judge, a
  // short name joins a longer one it fits only where both are named in one place ("Marley" in a
  // chunk that also says "Jacob Marley"): a surname alone means the full name said nearby, not
  // any bearer of it across the corpus. Empty: not known, no such limit.
  std::vector<uint32_t> contexts;
};

struct ResolveOptions {
  // The judge's prompt, with {{pairs}} (the resolve_entities.md prompt file; the pipeline passes
  // LoadPrompt(prompts_dir, PromptId::kResolveEntities)).
  std::string adjudication_prompt =
      std::string(GetPromptInfo(PromptId::kResolveEntities).default_text);
  double name_weight = 0.5;
  double embedding_weight = 0.5;
  double merge_threshold = 0.85;        // with an adjudicating LLM
  double adjudicate_threshold = 0.6;    // with an adjudicating LLM
  double no_llm_merge_threshold = 0.9;  // without one (tuned for the lexical embedder)
  size_t adjudication_batch = 25;       // candidate pairs per LLM call
  size_t max_block = 100;               // a blocking key held by more names is not used
  size_t max_description_chars = 600;   // per entity, in an adjudication prompt
  int llm_concurrency = 4;              // adjudication calls in flight
  // The description cosine is rescaled linearly from [cosine_low, cosine_high] to [0, 1] (and
  // clamped) before it is weighted. Negative: chosen by the embedder, 0.05-0.4 for the lexical
  // embedder (whose vectors score low, see lexical_embedder.h), 0.3-0.85 for neural models.
  // A pair whose names alone are this similar is adjudicated even when the descriptions share
  // few words (variants of one entity are often described in different words).
  double adjudicate_name_threshold = 0.8;
  double cosine_low = -1;
  double cosine_high = -1;
  size_t embedding_batch = 256;       // descriptions per Embed call
  size_t max_embedding_chars = 2000;  // of each description, for its embedding
  size_t max_fits = 32;               // a short name fitting more entities than this is ambiguous
  // The judge's calls at most (at least one when any pair is asked). The most similar pairs go
  // first, then those of the most frequent names; the rest stay apart, as without a judge.
  // Negative: no limit.
  int64_t max_judge_calls = -1;
};

enum class ResolveMethod { kRule, kSimilarity, kLlm, kUser };
std::string_view ResolveMethodName(ResolveMethod method);  // "rule" | "similarity" | "llm" | "user"

// A decision to join two entities (indices into the input).
struct ResolveLink {
  size_t a = 0;
  size_t b = 0;
  double score = 0;  // the combined similarity (1 for user links)
  ResolveMethod method = ResolveMethod::kSimilarity;
  std::string reason;  // a few words: the rule, the band, or the LLM's reason
};

struct ResolveInput {
  std::vector<ResolveEntity> entities;
  // Links decided in earlier runs between entities still present: kept as they are.
  std::vector<ResolveLink> prior_links;
  // User decisions: pairs that must be one entity, and pairs that must stay apart.
  std::vector<std::pair<size_t, size_t>> must_link;
  std::vector<std::pair<size_t, size_t>> cannot_link;
};

struct ResolveStats {
  int64_t fresh = 0;              // entities resolved this run
  int64_t pairs_compared = 0;     // candidate pairs scored
  int64_t guarded = 0;            // pairs kept apart by a guard
  int64_t adjudicated = 0;        // pairs sent to the LLM
  int64_t not_judged_capped = 0;  // pairs beyond max_judge_calls: kept apart unjudged
  int64_t not_judged_single = 0;  // of them, pairs of two names seen in one chunk each
  int64_t llm_calls = 0;          // adjudication calls (cache hits included)
  int64_t merged = 0;             // new links made this run
  int64_t embedded = 0;           // descriptions embedded
};

struct ResolveResult {
  std::vector<ResolveLink> links;  // the links made this run (prior and user links not repeated)
  // Entity i's cluster: the index of its canonical member (the most complete common spelling;
  // every member of a cluster has the same value; a singleton points at itself).
  std::vector<size_t> canonical;
  ResolveStats stats;
};

// Token-set and character similarity of two names with an acronym match, in [0, 1].
double NameSimilarity(std::string_view a, std::string_view b);

// Why two entities must not be merged ("given names differ", "numbers differ"...), or nullopt.
std::optional<std::string> MergeConflict(const ResolveEntity& a, const ResolveEntity& b);

// Resolves `input`. `embedder` (may be null: name similarity only, renormalised) embeds the
// descriptions of the entities in candidate pairs; `adjudicator` (may be null: the no-LLM band)
// judges the middle band. Fails only when a model call fails.
Result<ResolveResult> ResolveEntities(const ResolveInput& input, const ResolveOptions& options,
                                      EmbeddingModel* embedder, ChatModel* adjudicator);

// How many adjudication calls resolving would make at most, without calling any model, for
// the plan and cost estimate before a run.
int64_t EstimateAdjudicationCalls(const ResolveInput& input, const ResolveOptions& options);

}  // namespace grag
