// A web page on another origin tries to drive a keyless `grag serve` through the user's browser
// (issue 42, R1): serves such a page from a server of its own (another port: another origin),
// opens it in Debian's chromium, headless, through the pinned puppeteer-core, and lets it send
// what any page may send without asking: a text/plain POST planting a document, a POST starting
// an index job, a form upload, a DELETE, and a JSON POST (which needs CORS consent).
//
// usage: node cross_origin_browser.js GRAG_BASE_URL CHROMIUM
// Prints one JSON object: {origin, results: {name: "sent" | "refused by the browser: ..."},
// browser}; the C++ test checks on the server that nothing was written. Exits 1 on failure to run.
'use strict';
const http = require('http');
const puppeteer = require('puppeteer-core');

const [grag, chromium] = process.argv.slice(2);
const WAIT = {timeout: 120000};  // an upper bound, never a speed requirement

const page = `<!doctype html><html><head><title>evil</title></head><body>
<iframe name="sink"></iframe>
<form id="upload" method="POST" action="${grag}/v1/documents" enctype="multipart/form-data"
      target="sink">
  <input name="id" value="form-planted.txt"><textarea name="text">planted by a form</textarea>
</form>
<script>
const grag = ${JSON.stringify(grag)};
const results = {};
async function attempt(name, path, init) {
  try {
    await fetch(grag + path, init);
    results[name] = 'sent';
  } catch (e) {
    results[name] = 'refused by the browser: ' + e.message;
  }
}
(async () => {
  await attempt('text_plain_document', '/v1/documents', {method: 'POST', mode: 'no-cors',
      headers: {'Content-Type': 'text/plain'},
      body: JSON.stringify({id: 'planted.txt', text: 'planted'})});
  await attempt('index_job', '/v1/index', {method: 'POST', mode: 'no-cors', body: '{}'});
  await attempt('json_document', '/v1/documents', {method: 'POST',
      headers: {'Content-Type': 'application/json'},
      body: JSON.stringify({id: 'json-planted.txt', text: 'planted'})});
  await attempt('delete', '/v1/documents/christmas_carol.txt', {method: 'DELETE', mode: 'no-cors'});
  const sink = document.querySelector('iframe');
  await new Promise((resolve) => {
    sink.addEventListener('load', resolve, {once: true});
    document.getElementById('upload').submit();
    setTimeout(resolve, 10000);
  });
  results.form_upload = 'sent';
  window.results = results;
  document.title = 'done';
})();
</script></body></html>`;

(async () => {
  const server = http.createServer((req, res) => {
    res.writeHead(200, {'Content-Type': 'text/html; charset=utf-8'});
    res.end(page);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const tab = await browser.newPage();
    await tab.goto(origin + '/', {waitUntil: 'load', ...WAIT});
    await tab.waitForFunction(() => document.title === 'done', WAIT);
    const results = await tab.evaluate(() => window.results);
    console.log(JSON.stringify({origin, results, browser: await browser.version()}));
  } finally {
    await browser.close();
    server.close();
  }
})().catch((e) => {
  console.log(JSON.stringify({error: String(e && e.stack || e)}));
  process.exit(1);
});
