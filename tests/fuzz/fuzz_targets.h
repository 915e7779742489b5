// Fuzz targets: each takes any bytes and must neither crash, hang, leak, nor break the invariant
// it checks (a broken invariant aborts, which the fuzzer reports). libFuzzer drives them in the
// fuzz build (scripts/fuzz.sh, one executable per target); fuzz_corpus_test replays every
// stored input in the normal test suite, so a fixed finding stays fixed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace grag::fuzz {

using TargetFn = void (*)(std::string_view data);

struct Target {
  const char* name;  // the corpus folder under tests/fuzz/corpus/
  TargetFn fn;
};

// Every target, in a fixed order.
std::span<const Target> Targets();

// The target called `name`, or nullptr.
const Target* FindTarget(std::string_view name);

}  // namespace grag::fuzz
