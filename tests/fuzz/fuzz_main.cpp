// libFuzzer entry point for one target, chosen at build time (GRAG_FUZZ_TARGET).
#include <cstdio>
#include <cstdlib>

#include "fuzz/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const grag::fuzz::Target* target = [] {
    const grag::fuzz::Target* t = grag::fuzz::FindTarget(GRAG_FUZZ_TARGET);
    if (t == nullptr) {
      std::fprintf(stderr, "no fuzz target %s\n", GRAG_FUZZ_TARGET);
      std::abort();
    }
    return t;
  }();
  target->fn(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
