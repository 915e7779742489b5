// A lexical embedder: text to a fixed-length vector with no model weights and no network, for
// the no-LLM mode. Similar vectors mean shared words (and word pieces), not shared meaning:
// "Marley" is close to "Jacob Marley's ghost", "sad" is not close to "unhappy". Label results
// built with it as lexical.
//
// How a text becomes a vector (version 1; any change to it changes the model name):
//   1. NFKC, Unicode case folding and accent stripping (utf8proc), so "ZOË", "Zoë" and "zoe"
//      agree. Invalid UTF-8 bytes count as spaces.
//   2. Words: maximal runs of letters and digits; single ASCII letters ("s" of "Marley's") are
//      dropped.
//   3. Features: each word (weight 1, or 0.1 for a built-in list of English function words) and
//      the word's 3-grams (weight 0.35; none for function words), so inflections and compounds
//      still overlap ("ghost" / "ghosts"). The 3-grams are of code points, over the word padded
//      as "<word>" but with '<' joined to the first code point: "ghost" gives "<gho", "hos",
//      "ost", "st>"; a word of two code points one ("<ox>"), of one code point none. (Version 1
//      has always cut them so; plain 3-grams would be a new version.)
//   4. Sublinear term frequency: a feature seen n times weighs (1 + ln n) times its weight.
//   5. Signed feature hashing (64-bit FNV-1a, finalised) into `dimension` buckets, then L2
//      normalisation. Each bucket's sum is exact (weights in fixed point, in steps of 2^-32 for
//      any text under 512 KiB), so a vector depends on the text alone, not on the order its
//      features are met. A text without words gives the zero vector (no NaN); grag's vector
//      index treats it as similar to nothing.
// No corpus statistics (IDF) are used: the embedder is stateless, so a question embedded today
// and a chunk embedded last month agree as long as the model name is the same.
//
// What to expect (384 dimensions): "Who is Jacob Marley?" against a few sentences about Marley
// scores about 0.4, against sentences about Bob Cratchit about 0.05; unrelated texts land
// within about ±0.1 of 0 (hash collisions). A similarity floor tuned for neural embeddings
// (0.5 and up) is too high for these vectors. Speed: ~60 us for a 1200-token chunk, ~1.4 us
// for a question (Release, bench/nlp_extract_bench).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grag/llm.h"
#include "grag/records.h"
#include "grag/status.h"

namespace grag {

struct LexicalEmbedderOptions {
  // Vector length. 384, the size of small sentence-embedding models: the hashing collisions of a
  // 1200-token chunk (some thousand distinct features) stay tolerable, and vectors stay small
  // (1.5 KB). Allowed: 8 to 65536.
  size_t dimension = 384;
};

// "grag-lexical-hash-v1-d<dimension>": stored with every vector, so vectors of another dimension
// or a later version are recognised as stale.
std::string LexicalEmbedderModelName(size_t dimension);

// One text's vector (see above). `dimension` must be at least 1. Thread-safe.
std::vector<float> LexicalEmbed(std::string_view text, size_t dimension);

// The EmbeddingModel over LexicalEmbed. Never makes a network call; fails only when memory runs
// out (kInternal). Usage()
// counts Embed calls (`calls`); tokens and HTTP counters stay 0, as nothing is spent.
// Thread-safe: one instance may be shared by all workers.
class LexicalEmbedder final : public EmbeddingModel {
 public:
  // The default dimension (384).
  LexicalEmbedder();
  // kInvalidArgument when the dimension is outside 8-65536.
  static Result<std::unique_ptr<LexicalEmbedder>> Create(LexicalEmbedderOptions options);

  Result<EmbeddingResponse> Embed(const std::vector<std::string>& inputs) override;
  const std::string& model() const override { return model_; }
  LlmUsage Usage() const override;

  size_t dimension() const { return dimension_; }

 private:
  struct PrivateTag {
    explicit PrivateTag() = default;
  };

 public:
  LexicalEmbedder(PrivateTag, size_t dimension);  // use Create

 private:
  size_t dimension_;
  std::string model_;
  std::atomic<int64_t> calls_{0};
};

}  // namespace grag
