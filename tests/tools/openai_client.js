#!/usr/bin/env node
// The official OpenAI client (npm `openai`, pinned by scripts/setup.sh) against grag serve's
// OpenAI-compatible API, for tests/e2e_openai_client_test.cpp.
//
//   NODE_PATH=<repo>/.deps/npm/node_modules node openai_client.js BASE_URL API_KEY WRONG_KEY QUESTION
//
// BASE_URL is the server's /v1 (http://127.0.0.1:PORT/v1). Prints one JSON object on stdout:
//   {"openai": "<package version>", "models": [ids],
//    "answer": "...", "model": "...", "finish_reason": "stop",          (non-streaming, grag-local)
//    "streamed": "...", "chunks": N, "stream_finish_reason": "stop",     (stream: true)
//    "stream_ended": true, "stream_error": null, "raw_done": true,       (raw_done: the body ended
//                                                                         with `data: [DONE]`)
//    "wrong_key": {"threw": true, "status": 401, "error": "AuthenticationError", "message": "..."}}
// Exit code 0 when it got that far; 1 with {"error": "..."} when a call failed unexpectedly;
// 3 when the package cannot be loaded.
'use strict';

let OpenAI;
try {
  OpenAI = require('openai');
} catch (e) {
  process.stderr.write('cannot load the npm package "openai" (' + e.message + '): run scripts/setup.sh\n');
  process.exit(3);
}

const [baseURL, apiKey, wrongKey, question] = process.argv.slice(2);
if (!question) {
  process.stderr.write('usage: openai_client.js BASE_URL API_KEY WRONG_KEY QUESTION\n');
  process.exit(2);
}

function packageVersion() {
  try {
    const path = require('path');
    const fs = require('fs');
    let dir = path.dirname(require.resolve('openai'));
    for (let i = 0; i < 4; ++i, dir = path.dirname(dir)) {
      const p = path.join(dir, 'package.json');
      if (fs.existsSync(p)) {
        const j = JSON.parse(fs.readFileSync(p, 'utf8'));
        if (j.name === 'openai') return j.version;
      }
    }
  } catch (e) {
  }
  return 'unknown';
}

// Keeps a copy of every response body the client reads, to check the stream's last event.
const rawBodies = [];
async function teeFetch(url, init) {
  const res = await fetch(url, init);
  if (!res.body) return res;
  const [mine, theirs] = res.body.tee();
  const entry = {url: String(url), text: ''};
  rawBodies.push(entry);
  entry.done = new Response(mine).text().then((t) => { entry.text = t; });
  return new Response(theirs, {status: res.status, statusText: res.statusText, headers: res.headers});
}

async function main() {
  const out = {openai: packageVersion()};
  const client = new OpenAI({baseURL, apiKey, maxRetries: 0, timeout: 120000, fetch: teeFetch});

  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  out.models = models;

  const messages = [
    {role: 'system', content: 'You answer questions about the indexed book.'},
    {role: 'user', content: question},
  ];
  const completion = await client.chat.completions.create({model: 'grag-local', messages});
  out.model = completion.model;
  out.answer = completion.choices[0].message.content;
  out.finish_reason = completion.choices[0].finish_reason;

  const stream = await client.chat.completions.create({model: 'grag-local', messages, stream: true});
  let streamed = '';
  let chunks = 0;
  out.stream_finish_reason = null;
  out.stream_ended = false;
  out.stream_error = null;
  try {
    for await (const chunk of stream) {
      ++chunks;
      const choice = chunk.choices && chunk.choices[0];
      if (!choice) continue;
      if (choice.delta && typeof choice.delta.content === 'string') streamed += choice.delta.content;
      if (choice.finish_reason) out.stream_finish_reason = choice.finish_reason;
    }
    out.stream_ended = true;
  } catch (e) {
    out.stream_error = (e && e.constructor && e.constructor.name) + ': ' + (e && e.message);
  }
  out.streamed = streamed;
  out.chunks = chunks;
  const last = rawBodies[rawBodies.length - 1];
  if (last) await last.done;
  out.raw_done = !!last && /data: \[DONE\]\s*$/.test(last.text);

  const wrong = new OpenAI({baseURL, apiKey: wrongKey, maxRetries: 0, timeout: 30000});
  out.wrong_key = {threw: false};
  try {
    await wrong.chat.completions.create({model: 'grag-local', messages});
  } catch (e) {
    out.wrong_key = {
      threw: true,
      status: e.status === undefined ? null : e.status,
      error: e.constructor.name,
      is_authentication_error: e instanceof OpenAI.AuthenticationError,
      message: String(e.message),
    };
  }
  return out;
}

main().then(
    (out) => process.stdout.write(JSON.stringify(out) + '\n'),
    (e) => {
      process.stdout.write(JSON.stringify({
        error: (e && e.constructor && e.constructor.name) + ': ' + (e && e.message),
        status: e && e.status,
      }) + '\n');
      process.exit(1);
    });
