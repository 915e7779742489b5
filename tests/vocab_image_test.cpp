// The tokenizer's vocabulary images (src/text/vocab_image.h): the tables BpeVocab::Build makes,
// written once at build time and read in place at run time, must behave exactly as the built
// ones; a damaged image is refused, never read out of bounds.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "text/bpe.h"
#include "text/vocab_image.h"

extern "C" const char grag_cl100k_image_begin[];
extern "C" const char grag_cl100k_image_end[];

namespace grag {
namespace {

// A small vocabulary in tiktoken's "! <first rank> <base64 tokens...>" form: the 256 single
// bytes, then a few merges.
std::string SmallRanks() {
  static const char* kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  auto b64 = [&](const std::string& bytes) {
    std::string out;
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
      const uint32_t v =
          (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
      for (int k = 18; k >= 0; k -= 6) out += kB64[(v >> k) & 63];
    }
    if (bytes.size() - i == 1) {
      const uint32_t v = uint8_t(bytes[i]) << 16;
      out += kB64[(v >> 18) & 63];
      out += kB64[(v >> 12) & 63];
      out += "==";
    } else if (bytes.size() - i == 2) {
      const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
      for (int k = 18; k >= 6; k -= 6) out += kB64[(v >> k) & 63];
      out += '=';
    }
    return out;
  };
  std::string line = "! 0";
  for (int b = 0; b < 256; ++b) line += " " + b64(std::string(1, static_cast<char>(b)));
  for (const char* merge : {"th", "he", "the", "in", "ing", "thing", "things and more"}) {
    line += " " + b64(merge);
  }
  return line + "\n";
}

std::vector<uint32_t> Encode(const BpeVocab& v, std::string_view s) {
  std::vector<uint32_t> out;
  v.EncodePiece(reinterpret_cast<const uint8_t*>(s.data()), s.size(), &out);
  return out;
}

TEST(VocabImageTest, AViewedImageBehavesLikeTheBuiltVocabulary) {
  BpeVocab built;
  ASSERT_TRUE(built.Build(SmallRanks()).ok());
  const std::string image = built.Image();
  BpeVocab viewed;
  ASSERT_TRUE(viewed.View(image).ok());
  EXPECT_EQ(viewed.size(), built.size());
  for (uint32_t r = 0; r < built.size(); ++r) {
    EXPECT_EQ(viewed.Bytes(r), built.Bytes(r));
    const std::string_view b = built.Bytes(r);
    EXPECT_EQ(viewed.Find(reinterpret_cast<const uint8_t*>(b.data()), b.size()), r);
  }
  for (std::string_view s : {"the thing", "things and more things", "thinking", "x", "",
                             "\xff\xfe the", "inininininin"}) {
    if (s.empty()) continue;
    EXPECT_EQ(Encode(viewed, s), Encode(built, s)) << s;
    EXPECT_EQ(viewed.CountPiece(reinterpret_cast<const uint8_t*>(s.data()), s.size()),
              Encode(built, s).size());
  }
  const std::string absent = "zz";
  EXPECT_EQ(viewed.Find(reinterpret_cast<const uint8_t*>(absent.data()), absent.size()),
            BpeVocab::kNoRank);
}

TEST(VocabImageTest, DamagedImagesAreRefused) {
  BpeVocab built;
  ASSERT_TRUE(built.Build(SmallRanks()).ok());
  const std::string image = built.Image();
  BpeVocab v;
  EXPECT_EQ(v.View("").code(), ErrorCode::kCorruption);
  EXPECT_EQ(v.View(std::string(image.size(), '\0')).code(), ErrorCode::kCorruption);
  // Truncated or extended by a byte: the sizes in the header no longer add up.
  const std::string shorter = image.substr(0, image.size() - 1);
  EXPECT_EQ(v.View(shorter).code(), ErrorCode::kCorruption);
  const std::string longer = image + "x";
  EXPECT_EQ(v.View(longer).code(), ErrorCode::kCorruption);

  const std::string json = R"({"pat_str": "\\s+|\\S+", "special_tokens": {"<|end|>": 263},
                              "bpe_ranks": ")" +
                           SmallRanks().substr(0, SmallRanks().size() - 1) + "\"}";
  auto packed = PackVocabulary(json);
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  auto read = ReadVocabImage(*packed);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->pat_str, "\\s+|\\S+");
  ASSERT_EQ(read->special_tokens.size(), 1u);
  EXPECT_EQ(read->special_tokens[0].first, 263u);
  EXPECT_EQ(read->special_tokens[0].second, "<|end|>");
  for (size_t cut : {size_t{0}, size_t{7}, size_t{40}, packed->size() / 2, packed->size() - 1}) {
    const std::string damaged = packed->substr(0, cut);
    auto r = ReadVocabImage(damaged);
    if (r.ok()) {  // the header may survive a cut in the tables; the tables' check catches it
      EXPECT_FALSE(v.View(r->bpe).ok()) << "cut at " << cut;
    } else {
      EXPECT_EQ(r.status().code(), ErrorCode::kCorruption) << "cut at " << cut;
    }
  }
  EXPECT_EQ(PackVocabulary("{\"pat_str\": \"x\", \"bpe_ranks\": \"! 0 AA==\"}").status().code(),
            ErrorCode::kCorruption);  // lacks most single bytes
}

// The image the library embeds is what the packer makes from the npm package's JSON today (a
// stale image would tokenize with yesterday's tables).
TEST(VocabImageTest, TheEmbeddedImageIsTheJsonPacked) {
  const std::string path =
      std::string(GRAG_SOURCE_DIR) + "/.deps/npm/node_modules/tiktoken/encoders/cl100k_base.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) GTEST_SKIP() << path << " is not there (scripts/setup.sh fetches it)";
  std::ostringstream json;
  json << in.rdbuf();
  auto packed = PackVocabulary(json.str());
  ASSERT_TRUE(packed.ok()) << packed.status().ToString();
  const std::string_view embedded(
      grag_cl100k_image_begin,
      static_cast<size_t>(grag_cl100k_image_end - grag_cl100k_image_begin));
  EXPECT_TRUE(*packed == embedded) << "sizes " << packed->size() << " and " << embedded.size();
}

}  // namespace
}  // namespace grag
