// The API reference page (GET /docs: Swagger UI over /openapi.json) in Debian's chromium,
// headless, through the pinned puppeteer-core: it must render every route of the API under the
// server's Content-Security-Policy, and "Try it out" on GET /health must get the server's answer.
//
// usage: node api_docs_browser.js GRAG_BASE_URL CHROMIUM
// Prints one JSON object: {operations: ["GET /health", ...], tried: {status, body}, errors: [...],
// browser}. Exits 1 on failure to run.
'use strict';
const puppeteer = require('puppeteer-core');

const [grag, chromium] = process.argv.slice(2);
const WAIT = {timeout: 120000};  // an upper bound, never a speed requirement
const errors = [];  // the page's console errors and uncaught exceptions

(async () => {
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  try {
    const tab = await browser.newPage();
    // Failed loads are listed by URL below; the browser's own favicon request is not the page's.
    tab.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) {
        errors.push(m.text());
      }
    });
    tab.on('pageerror', (e) => errors.push(String(e)));
    tab.on('response', (r) => {
      if (r.status() >= 400 && !r.url().endsWith('/favicon.ico')) {
        errors.push(`${r.status()} ${r.url()}`);
      }
    });
    await tab.goto(grag + '/docs', {waitUntil: 'load', ...WAIT});
    await tab.waitForSelector('.opblock', WAIT);
    const operations = await tab.$$eval('.opblock-summary', (els) => els.map((e) => {
      const method = e.querySelector('.opblock-summary-method');
      const path = e.querySelector('.opblock-summary-path');
      return `${method ? method.textContent.trim() : '?'} ${
        path ? (path.getAttribute('data-path') || path.textContent).trim() : '?'}`;
    }));
    // Try it out: GET /health.
    const health = await tab.$('#operations-default-get_health, [id$="get_health"]');
    let tried = null;
    if (health) {
      await health.$eval('.opblock-summary-control', (e) => e.click());
      await tab.waitForSelector('.try-out__btn', WAIT);
      await tab.$eval('.try-out__btn', (e) => e.click());
      await tab.waitForSelector('.execute', WAIT);
      await tab.$eval('.execute', (e) => e.click());
      const cell = '.live-responses-table tbody .response-col_status';
      await tab.waitForSelector(cell, WAIT);
      tried = await tab.evaluate((sel) => ({
        status: document.querySelector(sel).textContent.trim(),
        body: (document.querySelector('.live-responses-table .microlight') || {}).textContent,
      }), cell);
    }
    console.log(JSON.stringify({operations, tried, errors, browser: await browser.version()}));
  } finally {
    await browser.close();
  }
})().catch((e) => {
  console.log(JSON.stringify({error: String(e && e.stack || e), errors}));
  process.exit(1);
});
