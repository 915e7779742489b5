// Drives grag's web UI in a real browser (Debian's chromium, headless, through the pinned
// puppeteer-core) against a running `grag serve` whose index holds A Christmas Carol and a short
// German note with emoji (notes/geister.md), and which wants an API key: gives a wrong key then
// the right one, asks questions and opens their citations (each opens the cited passage
// highlighted in its document, then what it cites: entity, relationship, report, passage),
// opens the note's cited passage from the source list, draws the graph, clicks an entity and
// expands a node, opens a community report, uploads a document, indexes it and deletes it.
// Saves a screenshot of each page.
//
// usage: node web_ui_browser.js BASE_URL KEY SCREENSHOT_DIR CHROMIUM
// Prints one JSON object of what it saw (the C++ test checks it); exits 1 when a step failed,
// with the step and the error in that object.
'use strict';
const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');

const [base, key, shots, chromium] = process.argv.slice(2);
const PASSAGE_QUESTION = 'Was zeigte der Geist der zukünftigen Weihnacht?';
const WAIT = {timeout: 120000};  // an upper bound for a step, never a speed requirement
const out = {steps: [], screenshots: [], console_errors: [], page_errors: []};

async function step(name, f) {
  out.step = name;
  await f();
  out.steps.push(name);
}

async function shot(page, name) {
  const file = path.join(shots, `${name}.png`);
  await page.screenshot({path: file});
  out.screenshots.push(file);
}

// The side panel once it shows a loaded `kind` (or one of several): {kind, title, text}.
async function detailShown(page, kind) {
  await page.waitForFunction((kinds) => {
    const body = document.getElementById('detail-body');
    return body && !document.getElementById('detail').hidden && kinds.includes(body.dataset.kind) &&
           body.querySelector('h2, .error') !== null;
  }, WAIT, [].concat(kind));
  return page.evaluate(() => {
    const body = document.getElementById('detail-body');
    const h2 = body.querySelector('h2');
    const err = body.querySelector('.error');
    return {kind: body.dataset.kind, id: body.dataset.id, title: h2 ? h2.innerText : '',
            error: err ? err.innerText : '', text: body.innerText.slice(0, 2000),
            sections: [...body.querySelectorAll('h4')].map((x) => x.innerText)};
  });
}

// A citation's passage in the side panel: the document shown, its highlights (their text and
// code point offsets) once the first is scrolled into the panel's view.
async function passageShown(page) {
  const detail = await detailShown(page, 'passage');
  await page.waitForFunction(() => {
    const mark = document.querySelector('#detail-body mark.cited');
    if (!mark) return document.querySelector('#detail-body .error') !== null;
    // In view: inside the text's scroll box, and that box inside the panel.
    const r = mark.getBoundingClientRect();
    const box = mark.closest('pre').getBoundingClientRect();
    const p = document.getElementById('detail').getBoundingClientRect();
    return r.bottom > box.top && r.top < box.bottom && r.bottom > p.top && r.top < p.bottom;
  }, WAIT);
  detail.marks = await page.$$eval('#detail-body mark.cited', (ms) => ms.map((m) => ({
    text: m.textContent, start: Number(m.dataset.start), end: Number(m.dataset.end),
    cite: m.dataset.cite})));
  return detail;
}

// Clicks the citation link `selector`: a citation with spans opens its passage, whose "Cites"
// link then opens what it cites, `kind`. {clicked, passage?, ...the detail of `kind`}.
// `shotName`: a screenshot of the passage.
async function openCitation(page, selector, kind, shotName) {
  const clicked = await page.$eval(selector, (a) => (a.click(), a.dataset.cite));
  const first = await detailShown(page, ['passage', kind]);
  if (first.kind !== 'passage') return {clicked, ...first};
  const passage = await passageShown(page);
  if (shotName) await shot(page, shotName);
  await page.click('#detail-body a.cited-item');
  return {clicked, passage, ...(await detailShown(page, kind))};
}

async function ask(page, question, method) {
  const before = await page.$$eval('.answer', (a) => a.length);
  await page.click('#question', {clickCount: 3});
  await page.type('#question', question);
  await page.select('#method', method);
  await page.click('#ask-button');
  await page.waitForFunction((n) => {
    const cards = document.querySelectorAll('.answer');
    return cards.length > n && cards[0].querySelector('.sources, .error, p.muted:not(.meta)');
  }, WAIT, before);
  return page.evaluate(() => {
    const card = document.querySelector('.answer');
    const err = card.querySelector('.error');
    const text = card.querySelector('.answer-text');
    return {
      method: card.dataset.method || '',
      meta: card.querySelector('.meta').innerText,
      answer: text ? text.innerText : '',
      error: err ? err.innerText : '',
      inline_citations: card.querySelectorAll('.answer-text a.cite').length,
      sources: [...card.querySelectorAll('.sources li')].map((li) => li.innerText),
    };
  });
}

async function main() {
  fs.mkdirSync(shots, {recursive: true});
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
           '--disable-extensions', '--window-size=1400,900'],
    defaultViewport: {width: 1400, height: 900},
  });
  out.browser = await browser.version();
  try {
    const page = await browser.newPage();
    page.setDefaultTimeout(WAIT.timeout);
    page.on('console', (m) => {
      // A refused request is logged by the browser itself; the key steps cause those on purpose.
      if (m.type() === 'error' && !/status of 401/.test(m.text())) out.console_errors.push(m.text());
    });
    page.on('pageerror', (e) => out.page_errors.push(String(e && e.message ? e.message : e)));
    page.on('dialog', (d) => d.accept());  // the confirm() before a delete

    await step('load', async () => {
      await page.goto(`${base}/#/ask`, {waitUntil: 'load'});
      out.title = await page.title();
    });

    await step('api key', async () => {
      // The page asks for the key as soon as the server refuses it one.
      await page.waitForSelector('#key-dialog[open]');
      out.key_dialog = true;
      await page.type('#key-input', 'wrong-key');
      await page.click('#key-submit');
      await page.waitForFunction(() => document.getElementById('key-dialog').open &&
        /refused/.test(document.getElementById('key-message').textContent), WAIT);
      out.wrong_key_refused = true;
      await page.type('#key-input', key);
      await page.click('#key-submit');
      await page.waitForFunction(() => document.body.dataset.ready === 'true', WAIT);
      out.key_dialog_closed = await page.$eval('#key-dialog', (d) => !d.open);
    });

    await step('ask', async () => {
      out.auto = await ask(page, 'Who is Marley?', 'auto');
      // An inline citation of the answer opens the cited passage, then what it cites.
      const kindOf = await page.$eval('.answer .answer-text a.cite', (a) => a.dataset.cite);
      out.auto.detail = await openCitation(page, '.answer .answer-text a.cite',
                                           /^S/.test(kindOf) ? 'chunk' :
                                           /^E/.test(kindOf) ? 'entity' : 'community',
                                           'ask-passage');
      out.global = await ask(page, 'What are the main themes of this story?', 'global');
      out.global.detail = await openCitation(page, '.answer .answer-text a.cite', 'community');
      // A local answer cites entities, relationships, reports and passages: each opens.
      out.local = await ask(page, 'Who is Jacob Marley?', 'local');
      for (const [prefix, kind] of [['R', 'relationship'], ['C', 'community'], ['S', 'chunk'],
                                    ['E', 'entity']]) {
        out.local[kind] = await openCitation(
          page, `.answer .answer-text a.cite[data-cite^="${prefix}"]`, kind);
      }
      out.local.detail = out.local.entity;
      await shot(page, 'ask');
    });

    await step('cited passage', async () => {
      // A document with emoji before the cited sentence: offsets in code points, highlighted
      // in a JavaScript (UTF-16) string. Its citation in the source list opens the passage.
      out.passage = await ask(page, PASSAGE_QUESTION, 'basic');
      out.passage.detail = await openCitation(page, '.answer .sources a.source-link', 'chunk');
      await page.click('#detail-back');
      out.passage.back = await passageShown(page);
      await shot(page, 'passage');
    });

    await step('graph', async () => {
      await page.click('nav a[data-page="graph"]');
      await page.waitForSelector('#cy[data-ready="true"]');
      // The entity to click: the highest degree one not under the legend nor overlapped by
      // another node (a click there could open the other one: the layout differs from run to
      // run on a loaded machine).
      const target = await page.evaluate(() => {
        const cy = window.gragGraph;
        const area = document.getElementById('cy').getBoundingClientRect();
        const legend = document.getElementById('graph-legend').getBoundingClientRect();
        const nodes = cy.nodes().toArray().sort((a, b) => b.data('degree') - a.data('degree'));
        const covered = (n, p) => nodes.some((o) => {
          if (o === n) return false;
          const b = o.renderedBoundingBox({includeLabels: false});
          return p.x >= b.x1 - 2 && p.x <= b.x2 + 2 && p.y >= b.y1 - 2 && p.y <= b.y2 + 2;
        });
        for (const n of nodes) {
          const p = n.renderedPosition();
          const x = area.left + p.x;
          const y = area.top + p.y;
          const underLegend = x >= legend.left && x <= legend.right && y >= legend.top &&
                              y <= legend.bottom;
          if (!underLegend && !covered(n, p) && x > area.left + 5 && x < area.right - 5 &&
              y > area.top + 5 && y < area.bottom - 5) {
            return {name: n.data('label'), entity: n.data('entity'), x, y};
          }
        }
        return null;
      });
      out.graph = await page.evaluate(() => {
        const cy = window.gragGraph;
        return {nodes: cy.nodes().length, edges: cy.edges().length,
                colours: new Set(cy.nodes().map((n) => n.data('colour'))).size,
                sizes: new Set(cy.nodes().map((n) => Math.round(n.data('size')))).size,
                info: document.getElementById('graph-info').innerText,
                legend: document.getElementById('graph-legend').innerText};
      });
      out.graph.target = target;
      await shot(page, 'graph');
      await page.mouse.click(target.x, target.y);
      out.graph.detail = await detailShown(page, 'entity');
      out.graph.selected = await page.evaluate(() =>
        window.gragGraph.nodes(':selected').map((n) => n.data('label')));
      await shot(page, 'graph-entity');

      // Fewer entities, then one expanded: its neighbours join the drawing.
      await page.click('#graph-limit', {clickCount: 3});
      await page.type('#graph-limit', '20');
      await page.evaluate(() => {
        document.getElementById('cy').dataset.ready = 'false';
      });
      await page.click('#graph-reload');
      await page.waitForSelector('#cy[data-ready="true"]');
      out.graph.small = await page.evaluate(() => window.gragGraph.nodes().length);
      const top = await page.evaluate(() => window.gragGraph.nodes().toArray()
        .sort((a, b) => b.data('degree') - a.data('degree'))[0].data('entity'));
      await page.evaluate(() => window.gragGraph.$('node').unselect());
      await page.evaluate((id) => window.gragGraph.$id(`n${id}`).emit('tap'), top);
      await detailShown(page, 'entity');
      await page.click('#detail-body .expand-button');
      await page.waitForFunction((n) => window.gragGraph.nodes().length > n, WAIT,
                                 out.graph.small);
      out.graph.expanded = await page.evaluate(() => window.gragGraph.nodes().length);
      await shot(page, 'graph-expanded');
    });

    await step('communities', async () => {
      await page.click('nav a[data-page="communities"]');
      await page.waitForSelector('.community-link');
      out.communities = await page.evaluate(() => ({
        listed: document.querySelectorAll('.community-link').length,
        views: [...document.querySelectorAll('#community-view option')].map((o) => o.value),
      }));
      await page.click('.community-link');
      out.communities.detail = await detailShown(page, 'community');
      await shot(page, 'communities');
    });

    await step('documents', async () => {
      await page.click('nav a[data-page="documents"]');
      await page.waitForSelector('tr[data-doc]');
      out.documents = {before: await page.$$eval('tr[data-doc]', (r) => r.map((x) => x.dataset.doc))};
      const file = path.join(shots, 'visit.txt');
      fs.writeFileSync(file, 'Fred visited Ebenezer Scrooge on Christmas Day. Scrooge welcomed ' +
                             'Fred and his wife, and Tiny Tim came too.\n');
      const input = await page.$('#upload-file');
      await input.uploadFile(file);
      await page.click('#upload-form button[type="submit"]');
      await page.waitForFunction(() => /Saved/.test(document.getElementById('doc-message').textContent), WAIT);
      out.documents.upload_message = await page.$eval('#doc-message', (e) => e.textContent);
      await page.click('#index-button');
      await page.waitForFunction(() => {
        const s = document.getElementById('job').dataset.state;
        return s && s !== 'running';
      }, WAIT);
      out.documents.job = await page.$eval('#job', (e) => ({state: e.dataset.state, text: e.innerText}));
      await page.waitForSelector('tr[data-doc="visit.txt"]');
      out.documents.after = await page.$$eval('tr[data-doc]', (r) => r.map((x) => x.dataset.doc));
      await shot(page, 'documents');
      await page.click('tr[data-doc="visit.txt"] button.delete');
      await page.waitForFunction(() => /Deleted/.test(document.getElementById('doc-message').textContent), WAIT);
      out.documents.delete_message = await page.$eval('#doc-message', (e) => e.textContent);
    });

    await step('workspace', async () => {
      // The picker lists the workspaces; choosing one reloads the page on it.
      await page.waitForSelector('#workspace-picker:not([hidden])');
      out.workspace = {
        options: await page.$$eval('#workspace option', (o) => o.map((x) => x.value)),
      };
      await Promise.all([page.waitForNavigation({waitUntil: 'load'}),
                         page.select('#workspace', 'lighthouse')]);
      await page.waitForFunction(() => document.body.dataset.ready === 'true', WAIT);
      out.workspace.chosen = await page.$eval('#workspace', (s) => s.value);
      await page.click('nav a[data-page="ask"]');
      await page.waitForSelector('#question', {visible: true});
      out.workspace.answer = await ask(page, 'Who keeps the lighthouse of Merrow?', 'basic');
      await page.click('nav a[data-page="documents"]');
      await page.waitForSelector('tr[data-doc]');
      out.workspace.documents = await page.$$eval('tr[data-doc]', (r) => r.map((x) => x.dataset.doc));
      await shot(page, 'workspace');
    });
    out.step = 'done';
  } finally {
    await browser.close();
  }
}

main().then(() => {
  process.stdout.write(JSON.stringify(out));
}, (err) => {
  out.error = String(err && err.stack ? err.stack : err);
  process.stdout.write(JSON.stringify(out));
  process.exit(1);
});
