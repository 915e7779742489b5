// Replays every stored fuzz input (tests/fuzz/corpus/<target>/) through its target, so what the
// fuzzers found once (scripts/fuzz.sh) cannot come back, and the targets themselves keep
// building and running in the normal (sanitised) suite.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz/fuzz_targets.h"

namespace grag {
namespace {

namespace fs = std::filesystem;

TEST(FuzzCorpusTest, EveryTargetHasACorpusAndEveryInputPasses) {
  const fs::path root = fs::path(GRAG_SOURCE_DIR) / "tests/fuzz/corpus";
  for (const fuzz::Target& target : fuzz::Targets()) {
    const fs::path dir = root / target.name;
    ASSERT_TRUE(fs::is_directory(dir)) << "no corpus for " << target.name << " in " << dir;
    size_t inputs = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      SCOPED_TRACE(entry.path().string());
      target.fn(bytes.str());  // a crash or a broken invariant ends the test run
      ++inputs;
    }
    EXPECT_GT(inputs, 0u) << target.name;
  }
}

TEST(FuzzCorpusTest, TargetsAreFoundByName) {
  ASSERT_NE(fuzz::FindTarget("tokenizer"), nullptr);
  EXPECT_EQ(fuzz::FindTarget("no-such-target"), nullptr);
}

}  // namespace
}  // namespace grag
