#!/usr/bin/env node
// Encode throughput of the npm `tiktoken` package (Rust compiled to WebAssembly), on the same
// texts as bench/tokenizer_bench.cpp, for scripts/bench_tokenizer.sh.
//
//   NODE_PATH=<repo>/.deps/npm/node_modules node tiktoken_bench.js CORPUS_DIR [RUNS]
//
// CORPUS_DIR holds book.txt and mixed.json (an array of strings), written by
// `tokenizer_bench --dump_corpus=CORPUS_DIR`. Prints one line per encoding and text:
//   node <encoding> <text> <median MB/s> <runs>
// where MB/s is UTF-8 bytes encoded (encode_ordinary) per second of the process's CPU time (as
// Google Benchmark counts the C++ side), the median of RUNS timed runs after a warm-up run.
'use strict';
const fs = require('fs');
const path = require('path');

let tiktoken;
try {
  tiktoken = require('tiktoken');
} catch (e) {
  process.stderr.write('cannot load the npm package "tiktoken" (' + e.message +
                       '): run scripts/setup.sh\n');
  process.exit(3);
}

const dir = process.argv[2];
const runs = Number(process.argv[3] || 7);
if (!dir) {
  process.stderr.write('usage: tiktoken_bench.js CORPUS_DIR [RUNS]\n');
  process.exit(2);
}
const texts = {
  book: [fs.readFileSync(path.join(dir, 'book.txt'), 'utf8')],
  mixed: JSON.parse(fs.readFileSync(path.join(dir, 'mixed.json'), 'utf8')),
};

function median(values) {
  const v = [...values].sort((a, b) => a - b);
  return v[Math.floor(v.length / 2)];
}

for (const name of ['cl100k_base', 'o200k_base']) {
  const enc = tiktoken.get_encoding(name);
  for (const [label, segments] of Object.entries(texts)) {
    const bytes = segments.reduce((n, s) => n + Buffer.byteLength(s, 'utf8'), 0);
    const once = () => {
      const t0 = process.cpuUsage();
      for (const s of segments) enc.encode_ordinary(s);
      const t = process.cpuUsage(t0);
      return (t.user + t.system) / 1e6;
    };
    once();  // warm-up: wasm tiering, caches
    const rates = [];
    for (let r = 0; r < runs; r++) rates.push(bytes / once() / 1e6);
    console.log(`node ${name} ${label} ${median(rates).toFixed(2)} ${runs}`);
  }
  enc.free();
}
