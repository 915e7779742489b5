// Tokenizer vocabularies as byte images (internal to the text module).
//
// The npm `tiktoken` package ships each encoding as JSON: its pre-tokenisation pattern, its
// special tokens and megabytes of base64 ranks. Turning that into lookup tables takes ~100 ms of
// CPU, which every one-off command would pay. So the build does it once: grag_pack_vocab
// (src/text/tools/pack_vocab.cpp) reads the JSON, builds the tables (BpeVocab::Build) and writes
// them as one image, which vocab_blobs.S embeds in the library; at run time ReadVocabImage and
// BpeVocab::View point into that image without copying or hashing anything.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grag/status.h"

namespace grag {

// The parts of an image, as views into it.
struct VocabImage {
  std::string_view pat_str;                                           // pre-tokenisation pattern
  std::vector<std::pair<uint32_t, std::string_view>> special_tokens;  // id, text
  std::string_view bpe;  // a BpeVocab::Image(), 8-byte aligned when the image is
};

// The image of an npm tiktoken encoders/<name>.json file. Corruption for a malformed file.
Result<std::string> PackVocabulary(std::string_view json_text);

// The parts of `image` (PackVocabulary's output; 8-byte aligned). Corruption for anything else.
Result<VocabImage> ReadVocabImage(std::string_view image);

}  // namespace grag
