// grag's web UI: one page, four views chosen by the address's hash (#/ask, #/graph,
// #/communities, #/documents), all driven by the server's JSON API. No build step: the browser
// loads these ES modules as they are, and cytoscape from /ui/cytoscape.min.js.

import {api, forgetKeyAndAsk, setWorkspace, workspace} from './api.js';
import {initAsk, showAsk} from './ask.js';
import {initCommunities, showCommunities} from './communities.js';
import {initDetail} from './detail.js';
import {initDocuments, showDocuments} from './documents.js';
import {initGraph, showGraph} from './graph.js';

const PAGES = {
  ask: showAsk,
  graph: showGraph,
  communities: showCommunities,
  documents: showDocuments,
};

function route() {
  const name = (location.hash.replace(/^#\/?/, '').split(/[/?]/)[0]) || 'ask';
  const page = PAGES[name] ? name : 'ask';
  for (const key of Object.keys(PAGES)) {
    document.getElementById(`page-${key}`).hidden = key !== page;
  }
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('active', a.dataset.page === page);
  }
  document.body.dataset.page = page;
  PAGES[page]();
}

async function status() {
  const el = document.getElementById('server-status');
  try {
    const r = await fetch('/health');  // never needs a key
    const health = await r.json();
    el.textContent = `grag ${health.version}` +
                     (health.index_loaded ? '' : ' · no index yet') +
                     (health.job_running ? ' · indexing…' : '');
  } catch {
    el.textContent = 'the server does not answer';
  }
}

// The workspace picker, shown when the key opens more than one workspace. A key that opens
// one workspace only, not the default, starts on it.
async function initWorkspaces() {
  let all;
  try {
    all = await api('/v1/workspaces');
  } catch {
    return;  // an older server, or no key given: the default workspace
  }
  const names = all.map((w) => w.name);
  if (!names.length) return;
  if (!names.includes(workspace())) setWorkspace(names[0]);
  const select = document.getElementById('workspace');
  select.replaceChildren(...names.map((name) => {
    const option = document.createElement('option');
    option.value = name;
    option.textContent = name;
    option.selected = name === workspace();
    return option;
  }));
  document.getElementById('workspace-picker').hidden = names.length < 2;
  select.addEventListener('change', () => {
    setWorkspace(select.value);
    location.reload();  // every view reads the new workspace from scratch
  });
}

async function init() {
  await initWorkspaces();
  initDetail();
  initAsk();
  initGraph();
  initCommunities();
  initDocuments();
  document.getElementById('key-button').addEventListener('click', async () => {
    await forgetKeyAndAsk();
    route();
  });
  window.addEventListener('hashchange', route);
  route();
  status();
  setInterval(status, 15000);
  // Ask for the key up front when the server wants one (a cheap authenticated call).
  api('/v1/models').then(() => {
    document.body.dataset.ready = 'true';
  }, () => {
    document.body.dataset.ready = 'true';
  });
}

init();
