// SHA-256 (grag/hash.h) against known digests. Chunk ids, cache keys and input hashes stored in
// existing indexes are these digests, so a change of library must not change one bit of them.
#include <gtest/gtest.h>

#include <string>

#include "grag/hash.h"

namespace grag {
namespace {

TEST(HashTest, Sha256HexMatchesTheStandardTestVectors) {
  // FIPS 180-2 examples.
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Each part is hashed after its length as 8 little-endian bytes (values computed with Python's
// hashlib over exactly those bytes).
TEST(HashTest, HasherPrefixesEachPartWithItsLength) {
  EXPECT_EQ(Hasher().HexDigest(), Sha256Hex(""));
  EXPECT_EQ(Hasher().Add("ab").Add("c").HexDigest(),
            "43ee655579de01ca739b3f95c1c2d3f46d353b2c0df818064ea594506cdb2617");
  EXPECT_EQ(Hasher().Add("a").Add("bc").HexDigest(),
            "9a8acca1b6c6c0befd3fbc756aed625da998c998f7252e738c4ef061906b9b21");
  EXPECT_EQ(Hasher().Add("books/carol.txt").Add(std::string(1000, 'x')).HexDigest(),
            "8c52e438b0914cc986017bb5f6394ce93779fd1a23329f376f325eb5179564f9");
}

}  // namespace
}  // namespace grag
