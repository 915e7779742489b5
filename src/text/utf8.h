// UTF-8 helpers for the tokenizer and the chunker (internal to the text module).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace grag {

// Length in bytes of the longest prefix of `s` that is well-formed UTF-8 (no overlong forms, no
// surrogates, nothing above U+10FFFF, no truncated sequence at the end). Equals s.size() when
// all of `s` is valid.
size_t ValidUtf8Length(std::string_view s);

// Length of the invalid sequence that starts at s[0] (which must not begin a valid character):
// its "maximal subpart" in the sense of Unicode §3.9 / the WHATWG decoder, always >= 1.
size_t InvalidUtf8Length(std::string_view s);

// Decodes raw bytes the way Python's bytes.decode("utf-8", errors="replace") and JavaScript's
// TextDecoder do: every maximal subpart of an invalid sequence becomes one U+FFFD. tiktoken's
// decode (and so Microsoft GraphRAG's chunker) produces text this way when a token window ends
// or starts inside a multi-byte character.
std::string DecodeUtf8Lossy(std::string_view bytes);

}  // namespace grag
