#!/usr/bin/env bash
# Builds grag's libFuzzer targets with clang (ASan + UBSan) and runs each for a while.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     default 600; FUZZ_TARGETS="loader config" to pick
#
# New inputs that reach new code are merged (minimised) into tests/fuzz/corpus/<target>/, which
# the normal test suite replays (tests/fuzz_corpus_test.cpp): commit them. A crash leaves its
# input in build-fuzz/fuzz-work/<target>/artifacts/ and stops the script with its report.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-600}
read -r -a TARGETS <<< "${FUZZ_TARGETS:-extraction_reply report_reply map_reply chat_wire loader config tokenizer}"
BUILD=${FUZZ_BUILD:-build-fuzz}

bash scripts/setup.sh
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGRAG_SANITIZE=ON -DGRAG_FUZZ=ON -DGRAG_WERROR=OFF -DGRAG_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$BUILD" --target $(printf 'fuzz_%s ' "${TARGETS[@]}")

for t in "${TARGETS[@]}"; do
  work="$BUILD/fuzz-work/$t"
  rm -rf "$work/new"
  mkdir -p "$work/new" "$work/artifacts"
  echo "fuzz: $t for ${SECONDS_PER_TARGET}s" >&2
  # The first folder receives new inputs; the stored corpus seeds the run.
  "$BUILD/tests/fuzz_$t" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=4096 \
    -max_len=65536 -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
    "$work/new" "tests/fuzz/corpus/$t" >"$work/log" 2>&1 || {
      echo "fuzz: $t FAILED; see $work/log and $work/artifacts/" >&2
      tail -40 "$work/log" >&2
      exit 1
    }
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*DONE" "$work/log" >&2 || true
  # Keep the stored corpus small: only inputs that add coverage.
  "$BUILD/tests/fuzz_$t" -merge=1 "tests/fuzz/corpus/$t" "$work/new" >"$work/merge.log" 2>&1
  echo "fuzz: $t: $(ls "tests/fuzz/corpus/$t" | wc -l) inputs in the stored corpus" >&2
done
