// Entity and relationship extraction from chunks with an LLM (seed 000's extraction prompt).
//
// One call per chunk; the reply's JSON is parsed tolerantly (code fences, prose around the
// object, numbers as strings). A reply that is not valid JSON is asked for again once; a second
// failure skips the chunk with the reason recorded. Gleaning rounds ask, in the same
// conversation, for what the first answer missed, and merge it in.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grag/llm.h"
#include "grag/status.h"
#include "grag/store_types.h"
#include "grag/words.h"  // NormalizeEntityName: the name keys mentions carry

namespace grag {

struct ParsedExtraction {
  std::vector<EntityMention> entities;             // name_key filled, type lower-cased
  std::vector<RelationshipMention> relationships;  // keys filled, strength in [1, 10]
};

// Parses an extraction reply. kParse when no JSON object with "entities" or "relationships" can
// be found. Entries without a usable name are dropped; a missing strength counts as 1.
Result<ParsedExtraction> ParseExtractionReply(std::string_view reply);

// What the extraction prompt asks for, as a JSON Schema (ChatRequest::json_schema).
std::string_view ExtractionSchema();

struct ExtractorOptions {
  std::string prompt;                     // the extraction prompt template (seed 000's)
  std::vector<std::string> entity_types;  // filled into {{entity_types}}
  int gleanings = 1;                      // extra "what did you miss?" rounds
  bool json_mode = true;                  // ask the server for a JSON object
  std::optional<int> max_tokens;          // per reply; nullopt: the server's default
};

struct ChunkExtraction {
  bool skipped = false;
  std::string reason;       // why it was skipped
  int gleaning_rounds = 0;  // rounds that ran
  int calls = 0;            // model calls made (cache hits included)
  int first_calls = 0;      // of them, the extraction call and its retry (not gleaning)
  ParsedExtraction result;
  // The first reply's text as the model sent it (thinking removed), or the error that stood for
  // it: what a diagnosis of an empty extraction shows.
  std::string first_reply;
};

// Extracts one chunk's text, with options.gleanings rounds of GleanChunk. Thread-safe when
// `model` is (it is shared by all workers). Only model errors that are not parse failures
// (network, 4xx...) come back as errors; an unparseable chunk comes back as skipped.
Result<ChunkExtraction> ExtractChunk(ChatModel& model, const ExtractorOptions& options,
                                     std::string_view chunk_text);

// Up to options.gleanings rounds asking, in the extraction's conversation, for what `so_far`
// missed; what they find is merged into so_far.result (calls and gleaning_rounds counted). The
// model's turn holds what was found compactly (CompactExtraction), not its whole reply. A round
// that finds nothing new, or whose reply cannot be parsed, ends the gleaning; other model errors
// come back. Nothing to do for a skipped chunk.
Status GleanChunk(ChatModel& model, const ExtractorOptions& options, std::string_view chunk_text,
                  ChunkExtraction& so_far);

// What an extraction found, as gleaning shows it to the model: the JSON format of the prompt
// with names and types of the entities and the two ends of each relationship, no descriptions.
std::string CompactExtraction(const ParsedExtraction& found);

// Entities and relationships found per token of the chunk: what tells an under-extracted chunk
// (one far below the corpus's figure) from a complete one.
double ExtractionYield(const ParsedExtraction& found, int64_t chunk_tokens);

}  // namespace grag
