// Tokenizer vocabularies as byte images: see vocab_image.h.
#include "vocab_image.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bpe.h"

namespace grag {
namespace {

// Reads the JSON string that starts at s[*pos] (the opening quote); leaves *pos after it.
Result<std::string> ReadJsonString(std::string_view s, size_t* pos) {
  if (*pos >= s.size() || s[*pos] != '"') return Status::Corruption("expected a JSON string");
  std::string out;
  size_t i = *pos + 1;
  size_t quote = 0;  // the next '"' at or after i (memchr: fast over megabytes of base64)
  while (true) {
    if (quote < i) quote = s.find('"', i);
    if (quote == std::string_view::npos) return Status::Corruption("unterminated JSON string");
    const size_t stop = std::min(quote, s.substr(0, quote).find('\\', i));
    out.append(s.data() + i, stop - i);
    i = stop + 1;
    if (s[stop] == '"') break;
    if (i >= s.size()) return Status::Corruption("unterminated JSON string");
    const char e = s[i++];
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'u': {
        // Rare in these files; let nlohmann decode \uXXXX (and surrogate pairs) for us.
        size_t end = i + 4;
        if (end + 1 < s.size() && s[end] == '\\' && s[end + 1] == 'u') end += 6;
        try {
          out += nlohmann::json::parse("\"\\u" + std::string(s.substr(i, end - i)) + "\"")
                     .get<std::string>();
        } catch (const std::exception& ex) {
          return Status::Corruption(std::string("bad \\u escape: ") + ex.what());
        }
        i = end;
        break;
      }
      default:
        out += e;
        break;  // \" \\ \/
    }
  }
  *pos = i;
  return out;
}

// The vocabulary file's three members. bpe_ranks is megabytes of base64, which a general JSON
// parser reads a character at a time; it is cut out and read directly, and nlohmann parses the
// small rest.
struct VocabJson {
  std::string pat_str;
  std::string bpe_ranks;
  std::vector<std::pair<uint32_t, std::string>> special_tokens;  // id, text
};

Result<VocabJson> ParseVocabJson(std::string_view text) {
  VocabJson v;
  std::string rest;  // `text` without the bpe_ranks value
  constexpr std::string_view kKey = "\"bpe_ranks\"";
  if (const size_t key = text.find(kKey); key != std::string_view::npos) {
    size_t pos = text.find_first_not_of(" \t\r\n:", key + kKey.size());
    if (pos != std::string_view::npos && text[pos] == '"') {
      const size_t value = pos;
      GRAG_ASSIGN_OR_RETURN(v.bpe_ranks, ReadJsonString(text, &pos));
      rest = std::string(text.substr(0, value)) + "\"\"" + std::string(text.substr(pos));
    }
  }
  if (v.bpe_ranks.empty()) rest = std::string(text);
  try {
    const auto j = nlohmann::json::parse(rest);
    v.pat_str = j.at("pat_str").get<std::string>();
    if (v.bpe_ranks.empty()) v.bpe_ranks = j.at("bpe_ranks").get<std::string>();
    if (j.contains("special_tokens")) {
      for (const auto& [name, id] : j.at("special_tokens").items()) {
        v.special_tokens.emplace_back(id.get<uint32_t>(), name);
      }
    }
  } catch (const std::exception& e) {
    return Status::Corruption(e.what());
  }
  return v;
}

// Image layout (native byte order; made and read by the same build):
//   magic "GRAGVOC1", then uint64 pattern bytes, special-token count, BPE offset, BPE bytes
//   the pattern
//   per special token: uint32 id, uint32 length, the text
//   zero padding to 8 bytes, then the BpeVocab image
constexpr std::string_view kMagic = "GRAGVOC1";
constexpr size_t kHeader = 8 + 4 * 8;

void AppendU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<const char*>(&v), 4); }
void AppendU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }

}  // namespace

Result<std::string> PackVocabulary(std::string_view json_text) {
  GRAG_ASSIGN_OR_RETURN(VocabJson parsed, ParseVocabJson(json_text));
  BpeVocab vocab;
  GRAG_RETURN_IF_ERROR(vocab.Build(parsed.bpe_ranks));
  std::string body = parsed.pat_str;
  for (const auto& [id, text] : parsed.special_tokens) {
    AppendU32(&body, id);
    AppendU32(&body, static_cast<uint32_t>(text.size()));
    body += text;
  }
  const size_t bpe_offset = (kHeader + body.size() + 7) / 8 * 8;
  const std::string bpe = vocab.Image();
  std::string out(kMagic);
  AppendU64(&out, parsed.pat_str.size());
  AppendU64(&out, parsed.special_tokens.size());
  AppendU64(&out, bpe_offset);
  AppendU64(&out, bpe.size());
  out += body;
  out.resize(bpe_offset, '\0');
  out += bpe;
  return out;
}

Result<VocabImage> ReadVocabImage(std::string_view image) {
  if (image.size() < kHeader || !image.starts_with(kMagic)) {
    return Status::Corruption("not a vocabulary image");
  }
  uint64_t header[4];
  std::memcpy(header, image.data() + kMagic.size(), sizeof(header));
  const auto [pat_size, n_special, bpe_offset, bpe_size] =
      std::tuple(header[0], header[1], header[2], header[3]);
  if (bpe_offset > image.size() || bpe_size != image.size() - bpe_offset ||
      pat_size > bpe_offset - kHeader) {
    return Status::Corruption("vocabulary image has the wrong size");
  }
  VocabImage out;
  out.pat_str = image.substr(kHeader, pat_size);
  size_t pos = kHeader + pat_size;
  for (uint64_t i = 0; i < n_special; ++i) {
    if (pos + 8 > bpe_offset) return Status::Corruption("vocabulary image: bad special token");
    uint32_t id = 0, len = 0;
    std::memcpy(&id, image.data() + pos, 4);
    std::memcpy(&len, image.data() + pos + 4, 4);
    pos += 8;
    if (len > bpe_offset - pos) return Status::Corruption("vocabulary image: bad special token");
    out.special_tokens.emplace_back(id, image.substr(pos, len));
    pos += len;
  }
  out.bpe = image.substr(bpe_offset);
  return out;
}

}  // namespace grag
