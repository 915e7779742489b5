// Exact tiktoken byte-pair encoding for OpenAI's `cl100k_base` and `o200k_base` encodings.
//
// Token ids are identical to tiktoken's (`encode_ordinary`): text is split with the encoding's
// pre-tokenisation pattern (PCRE2, JIT-compiled), then each piece is byte-pair merged with the
// encoding's ranks. The vocabularies come from the npm `tiktoken` package; the build turns
// them into lookup tables embedded in the library, so nothing is read or built at run time.
// Character classes follow Unicode 16.0, as in npm tiktoken 1.0.22, even where the system PCRE2's
// tables are older (src/text/unicode_delta.h); the parity test checks every code point's handling
// against it.
//
// Thread-safety: a Tokenizer is immutable; every method may be called from any number of
// threads at once. Instances are owned by the library and live until the process exits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grag/status.h"

namespace grag {

class Tokenizer {
 public:
  // The shared tokenizer for "cl100k_base" or "o200k_base", set up on first use (its tables
  // are built into the library, src/text/vocab_image.h: about 0.1 ms) and cached; concurrent
  // first calls wait for one. InvalidArgument for any other name.
  static Result<const Tokenizer*> Get(std::string_view encoding);
  // Whether Get would know `encoding`, without building anything.
  static Status CheckEncoding(std::string_view encoding);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `utf8_text`. Special tokens such as "<|endoftext|>" are encoded as ordinary
  // text (tiktoken's encode_ordinary). Any input is accepted: should `utf8_text` hold invalid
  // UTF-8, each valid stretch is encoded on its own and every byte of an invalid sequence becomes
  // its single-byte token, so DecodeBytes(Encode(s)) == s for every byte string s.
  std::vector<uint32_t> Encode(std::string_view utf8_text) const;

  // Appends the token ids of `utf8_text` to *out (same rules as Encode).
  void EncodeTo(std::string_view utf8_text, std::vector<uint32_t>* out) const;

  // Encode(utf8_text).size(), without building the vector.
  size_t Count(std::string_view utf8_text) const;

  // Count(text), and how much of the text's count holds in any longer text that starts with it:
  // the pre-tokeniser's pieces of text[0, settled) hold settled_tokens tokens wherever the text
  // is followed by more (only its last piece or two can merge with what follows).
  struct PrefixCount {
    size_t tokens = 0;
    size_t settled = 0;
    size_t settled_tokens = 0;
    bool full_pattern = false;  // which compilation of the pattern it was made with
  };
  PrefixCount CountPrefix(std::string_view utf8_text) const;

  // A part of a larger text whose PrefixCount is known: `text` (the string CountPrefix was given)
  // is found at `offset`.
  struct KnownPart {
    size_t offset = 0;
    std::string_view text;
    PrefixCount count;
  };
  // Count(utf8_text), exactly, without tokenizing again the settled stretches of the known parts
  // (ascending by offset). A part that is not where it says, or that the pieces before it do not
  // end at, is simply tokenized again.
  size_t CountWithParts(std::string_view utf8_text, std::span<const KnownPart> parts) const;

  // The bytes the tokens stand for, concatenated. A token boundary may fall inside a UTF-8
  // sequence, so a slice of a token stream can decode to invalid UTF-8. Special-token ids decode
  // to their text; ids outside the vocabulary are skipped.
  std::string DecodeBytes(std::span<const uint32_t> tokens) const;

  // "cl100k_base" or "o200k_base".
  std::string_view name() const;

  class Impl;  // defined in src/text/tokenizer.cpp

 private:
  class Key {  // only Get() can make one, so only Get() constructs tokenizers
    friend class Tokenizer;
    Key() = default;
  };

 public:
  Tokenizer(Key, std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace grag
