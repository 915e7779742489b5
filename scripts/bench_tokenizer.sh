#!/usr/bin/env bash
# Tokenizer encode throughput, grag beside node tiktoken on the same texts, plus chunking speed.
#
#   scripts/bench_tokenizer.sh BUILD_DIR [RUNS]
#
# BUILD_DIR is an optimised build (cmake -DCMAKE_BUILD_TYPE=Release) holding
# bench/tokenizer_bench. Texts: the Christmas Carol book and the mixed corpus of
# tests/support/tokenizer_corpus.h (prose, code, CJK, emoji, odd whitespace...; its pathological
# long runs left out because node tiktoken's merge is quadratic on them). Figures are medians of
# RUNS runs (default 7), in MB/s of UTF-8 input per second of CPU time (so that other load on the
# machine does not count against either side).
set -euo pipefail
BUILD=${1:?usage: scripts/bench_tokenizer.sh BUILD_DIR [RUNS]}
RUNS=${2:-7}
here=$(cd "$(dirname "$0")/.." && pwd)
bench="$BUILD/bench/tokenizer_bench"
[ -x "$bench" ] || { echo "bench_tokenizer: $bench not found (build the tokenizer_bench target)" >&2; exit 1; }
command -v node >/dev/null || { echo "bench_tokenizer: node not found: run scripts/setup.sh" >&2; exit 1; }
export NODE_PATH="$here/.deps/npm/node_modules"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bench" --dump_corpus="$tmp" >/dev/null

# grag: Google Benchmark repetitions, median of bytes_per_second.
"$bench" --benchmark_filter='^(encode|chunk)/' \
  --benchmark_repetitions="$RUNS" --benchmark_report_aggregates_only=true \
  --benchmark_format=json --benchmark_out="$tmp/grag.json" --benchmark_out_format=json \
  >/dev/null 2>"$tmp/grag.err" || { cat "$tmp/grag.err" >&2; exit 1; }
node "$here/bench/tiktoken_bench.js" "$tmp" "$RUNS" >"$tmp/node.txt"

node - "$tmp/grag.json" "$tmp/node.txt" <<'JS'
const fs = require('fs');
const grag = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const median = {};
for (const b of grag.benchmarks) {
  if (b.aggregate_name === 'median') median[b.run_name] = b;
}
const node = {};
for (const line of fs.readFileSync(process.argv[3], 'utf8').trim().split('\n')) {
  const [, enc, text, mbs] = line.split(' ');
  node[`${enc}/${text}`] = Number(mbs);
}
const pad = (s, n) => String(s).padEnd(n);
console.log(pad('encoding', 13) + pad('text', 7) + pad('grag MB/s', 11) + pad('node MB/s', 11) + 'ratio');
for (const enc of ['cl100k_base', 'o200k_base']) {
  for (const text of ['book', 'mixed']) {
    const b = median[`encode/${enc}/${text}`];
    const ours = b ? b.bytes_per_second / 1e6 : NaN;
    const theirs = node[`${enc}/${text}`];
    console.log(pad(enc, 13) + pad(text, 7) + pad(ours.toFixed(1), 11) + pad(theirs.toFixed(1), 11) +
                (ours / theirs).toFixed(1) + 'x');
  }
}
for (const enc of ['cl100k_base', 'o200k_base']) {
  const b = median[`chunk/${enc}/book`];
  if (!b) continue;
  console.log(`chunking the book (${enc}, 1200/100, title prefix): ${b.chunks} chunks, ` +
              `${Math.round(b.chunks_per_s)} chunks/s, ${(b.s_per_chunk * 1e6).toFixed(0)} us per chunk`);
}
JS
