// Byte-pair encoding over a tiktoken vocabulary (internal to the text module).
//
// BpeVocab maps byte strings to ranks (= token ids) and back, and runs tiktoken's merge on one
// pre-tokenised piece. It is immutable after Build() and safe to use from many threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grag/status.h"

namespace grag {

class BpeVocab {
 public:
  static constexpr uint32_t kNoRank = UINT32_MAX;

  BpeVocab() = default;
  // The tables may live in an image (View), so a copy or a move would need care; none is needed.
  BpeVocab(const BpeVocab&) = delete;
  BpeVocab& operator=(const BpeVocab&) = delete;

  // Parses tiktoken's `bpe_ranks` text as shipped in the npm package's encoders/*.json: one or
  // more lines "! <first rank> <base64 token> <base64 token> ...", the i-th token of a line
  // having rank <first rank> + i. (The plain ".tiktoken" format, "<base64> <rank>" per line, is
  // accepted too.) Every single byte must be a token, as in all tiktoken encodings.
  Status Build(std::string_view bpe_ranks);

  // The built tables as one byte image, and a vocabulary that reads such an image in place: the
  // build runs Build once and embeds the image (src/text/vocab_image.h), so that loading a
  // tokenizer at run time is a few pointer assignments instead of ~100 ms of parsing and
  // hashing. View checks the image's shape (magic, sizes) but trusts its contents; `image` must
  // be 8-byte aligned and outlive this vocabulary.
  std::string Image() const;
  Status View(std::string_view image);

  // Rank of the byte string [p, p + n), or kNoRank.
  uint32_t Find(const uint8_t* p, size_t n) const;

  // Bytes of token `rank`; empty when `rank` is not in the vocabulary.
  std::string_view Bytes(uint32_t rank) const {
    if (rank + 1 >= offsets_.size()) return {};
    return arena_.substr(offsets_[rank], offsets_[rank + 1] - offsets_[rank]);
  }

  // Number of rank slots (highest rank + 1).
  size_t size() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }

  // Appends the tokens of one piece (a pre-tokeniser match, n >= 1) to *out, exactly as
  // tiktoken's byte_pair_encode: repeatedly merge the adjacent pair whose concatenation has the
  // lowest rank, leftmost first. O(n log n) for long pieces, linear scans for short ones.
  void EncodePiece(const uint8_t* p, size_t n, std::vector<uint32_t>* out) const;

  // Number of tokens EncodePiece would append.
  size_t CountPiece(const uint8_t* p, size_t n) const;

 private:
  template <typename Sink>
  void Merge(const uint8_t* p, size_t n, Sink&& sink) const;
  template <typename Sink>
  void MergeSmall(const uint8_t* p, size_t n, Sink&& sink) const;
  template <typename Sink>
  void MergeLarge(const uint8_t* p, size_t n, Sink&& sink) const;

  // A token's first (up to) 8 bytes live in its slot, so looking up a short token, which is
  // what the merge does most, touches one cache line and never the arena.
  struct Slot {
    uint64_t prefix;   // first min(len, 8) bytes, zero-padded
    uint32_t rank;     // kNoRank: empty slot
    uint32_t len_tag;  // length in the low 8 bits, 24 bits of the hash above them
  };

  // The tables, read through views: into the vectors below after Build, into the image after
  // View.
  std::string_view arena_;             // all token bytes, in rank order
  std::span<const uint32_t> offsets_;  // token r is arena_[offsets_[r], offsets_[r + 1])
  std::span<const Slot> slots_;        // open addressing, linear probing; size is a power of two
  size_t mask_ = 0;
  size_t max_token_len_ = 0;
  uint32_t byte_rank_[256] = {};         // rank of each single byte
  std::span<const uint32_t> pair_rank_;  // rank of each two-byte string (65536), or kNoRank

  // What Build made (empty after View).
  std::string own_arena_;
  std::vector<uint32_t> own_offsets_;
  std::vector<Slot> own_slots_;
  std::vector<uint32_t> own_pair_rank_;
};

}  // namespace grag
