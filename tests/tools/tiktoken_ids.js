#!/usr/bin/env node
// Reference token ids from the npm `tiktoken` package, for grag's tokenizer and chunker parity
// tests (tests/tokenizer_test.cpp, tests/chunker_test.cpp).
//
//   NODE_PATH=<repo>/.deps/npm/node_modules node tiktoken_ids.js REQUEST.json REPLY.json
//
// REQUEST: {"encodings": ["cl100k_base", ...],
//           "texts": ["...", ...],                       // encoded with encode_ordinary
//           "chunks": [{"encoding": "o200k_base", "size": 1200, "overlap": 100, "text": "..."}]}
// REPLY:   {"tiktoken": "<package version>",
//           "ids": {"cl100k_base": [[ids of texts[0]], ...], ...},
//           "chunks": [[{"text": "...", "n_tokens": N}, ...], ...]}
//
// Chunks follow Microsoft GraphRAG's token splitter: windows of `size` tokens starting every
// `size - overlap` tokens, each decoded as tiktoken's decode does in Python
// (bytes.decode("utf-8", errors="replace"); TextDecoder replaces the same way), and n_tokens is
// the length of the window's text re-encoded.
'use strict';
const fs = require('fs');

let tiktoken;
try {
  tiktoken = require('tiktoken');
} catch (e) {
  process.stderr.write(
      'cannot load the npm package "tiktoken" (' + e.message + '): run scripts/setup.sh\n');
  process.exit(3);
}

// The package's "exports" hide package.json from require(); read it next to the entry point.
function packageVersion() {
  const path = require('path');
  const dir = path.dirname(require.resolve('tiktoken'));
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  return meta.version;
}

function main() {
  if (process.argv.length !== 4) {
    process.stderr.write('usage: tiktoken_ids.js REQUEST.json REPLY.json\n');
    process.exit(2);
  }
  const request = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const encoders = {};
  const encoder = (name) => (encoders[name] = encoders[name] || tiktoken.get_encoding(name));
  const reply = {tiktoken: packageVersion(), ids: {}, chunks: []};

  for (const name of request.encodings || []) {
    const enc = encoder(name);
    reply.ids[name] = (request.texts || []).map((t) => Array.from(enc.encode_ordinary(t)));
  }

  const decoder = new TextDecoder('utf-8', {fatal: false, ignoreBOM: true});
  for (const c of request.chunks || []) {
    const enc = encoder(c.encoding);
    const ids = enc.encode_ordinary(c.text);
    const out = [];
    for (let start = 0; start < ids.length; start += c.size - c.overlap) {
      const end = Math.min(start + c.size, ids.length);
      const text = decoder.decode(enc.decode(ids.slice(start, end)));
      out.push({text, n_tokens: enc.encode_ordinary(text).length});
      if (end === ids.length) break;
    }
    reply.chunks.push(out);
  }

  for (const enc of Object.values(encoders)) enc.free();
  fs.writeFileSync(process.argv[3], JSON.stringify(reply));
}

main();
