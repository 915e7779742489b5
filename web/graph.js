// Graph: the entities of highest degree laid out force-directed (cytoscape's cose), coloured by
// their community at the chosen level and sized by degree. A click opens the entity in the side
// panel; a double click (or the panel's button) adds its neighbours, so a large graph is drawn
// a part at a time.

import {api} from './api.js';
import {onExpand, onOpen, openDetail} from './detail.js';
import {clear, communityColour, errorBox, h, number, shorten} from './dom.js';

let cy = null;
let drawing = null;  // the promise of the current draw
let level = 0;
let minDegree = 0;
let maxDegree = 1;
let sizeScale = 1;  // smaller nodes in a large view
const communityTitles = new Map();  // id -> report title, at the level shown

// 14 to 60 pixels across (half that in a large view), by the square root of the degree within the drawn range.
function nodeSize(degree) {
  const lo = Math.sqrt(minDegree);
  const hi = Math.sqrt(maxDegree);
  const t = hi > lo ? (Math.sqrt(Math.max(minDegree, degree)) - lo) / (hi - lo) : 0.5;
  return sizeScale * (14 + 46 * Math.min(1, t));
}

function nodeElement(n, position) {
  const el = {
    group: 'nodes',
    data: {id: `n${n.id}`, entity: n.id, label: n.name, type: n.type, degree: n.degree,
           community: n.community, colour: communityColour(n.community),
           size: nodeSize(n.degree)},
  };
  if (position) el.position = position;
  return el;
}

function edgeElement(e, maxWeight) {
  return {
    group: 'edges',
    data: {id: `e${e.id}`, relationship: e.id, source: `n${e.source}`, target: `n${e.target}`,
           weight: e.weight, width: 0.8 + 3.2 * Math.min(1, e.weight / Math.max(1, maxWeight))},
  };
}

function style() {
  return [
    {selector: 'node', style: {
      'background-color': 'data(colour)', width: 'data(size)', height: 'data(size)',
      label: 'data(label)', 'font-size': 11, 'min-zoomed-font-size': 8, color: '#222',
      'text-valign': 'bottom', 'text-margin-y': 3, 'text-outline-color': '#fff',
      'text-outline-width': 2, 'border-width': 1, 'border-color': '#fff'}},
    {selector: 'node.expanded', style: {'border-width': 3, 'border-color': '#333'}},
    {selector: 'node:selected', style: {'border-width': 4, 'border-color': '#d62728'}},
    {selector: 'node.faded', style: {opacity: 0.25}},
    {selector: 'edge', style: {
      width: 'data(width)', 'line-color': '#c4c4c4', 'curve-style': 'haystack', opacity: 0.8}},
    {selector: 'edge.highlight', style: {'line-color': '#d62728', opacity: 1}},
  ];
}

function info(text) {
  document.getElementById('graph-info').textContent = text;
}

function updateInfo(view) {
  const n = cy.nodes().length;
  const e = cy.edges().length;
  const total = view ? view.entities_total : null;
  info(`${number(n)} entities and ${number(e)} relationships drawn` +
       (total !== null && total !== undefined ? ` of ${number(total)} entities` : '') +
       '. Click an entity for its details; double-click to add its neighbours.');
}

function legend() {
  const el = document.getElementById('graph-legend');
  const counts = new Map();
  cy.nodes().forEach((n) => {
    const c = n.data('community');
    if (c !== null && c !== undefined) counts.set(c, (counts.get(c) || 0) + 1);
  });
  const top = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 10);
  clear(el, h('div', {class: 'legend-title'}, `Communities, level ${level}`),
        top.map(([id, count]) => h('a', {
          href: '#', class: 'legend-item',
          onclick: (e) => {
            e.preventDefault();
            openDetail({kind: 'community', id});
          },
          onmouseenter: () => highlightCommunity(id),
          onmouseleave: () => highlightCommunity(null),
        }, h('span', {class: 'swatch', style: {background: communityColour(id)}}),
          `${shorten(communityTitles.get(id) || `community ${id}`, 34)} (${count})`)));
}

function highlightCommunity(id) {
  if (!cy) return;
  cy.batch(() => {
    cy.nodes().removeClass('faded');
    if (id !== null) cy.nodes().filter((n) => n.data('community') !== id).addClass('faded');
  });
}

function makeCy() {
  cy = cytoscape({
    container: document.getElementById('cy'),
    style: style(),
    minZoom: 0.05,
    maxZoom: 4,
    pixelRatio: 1,  // a large view draws 4x fewer pixels on a high-density screen
    textureOnViewport: true,
    hideEdgesOnViewport: true,
  });
  window.gragGraph = cy;  // for the browser test and the curious
  // The side panel opening or closing changes the drawing area's size.
  new ResizeObserver(() => cy.resize()).observe(document.getElementById('cy'));
  cy.on('tap', 'node', (evt) => {
    openDetail({kind: 'entity', id: evt.target.data('entity')});
  });
  cy.on('tap', 'edge', (evt) => {
    const e = evt.target;
    openDetail({kind: 'relationship', id: e.data('relationship'),
                source: e.source().data('entity'), target: e.target().data('entity')});
  });
  cy.on('dbltap', 'node', (evt) => expand(evt.target.data('entity')));
}

async function loadTitles() {
  communityTitles.clear();
  try {
    for (const c of await api(`/v1/communities?level=${level}`)) {
      if (c.report && c.report.title) communityTitles.set(c.id, c.report.title);
    }
  } catch {
    // titles are a nicety: the legend falls back to ids
  }
}

// Force-directed: fcose (a spectral start refined by a spring embedder) for the views people
// read; past 250 nodes only its spectral step, which takes a second where the refinement takes
// tens. cytoscape's own cose is the fallback.
function layout(n) {
  const fcose = typeof cytoscapeFcose !== 'undefined';
  if (fcose && !cytoscape.fcoseRegistered) {
    cytoscape.use(cytoscapeFcose);
    cytoscape.fcoseRegistered = true;
  }
  const options = fcose ? {
    name: 'fcose', quality: n > 250 ? 'draft' : 'default', animate: false, randomize: true,
    fit: true, padding: 30, nodeRepulsion: () => 9000, idealEdgeLength: () => 70,
    nodeSeparation: 60,
  } : {
    name: 'cose', animate: false, randomize: true, fit: true, padding: 30,
    numIter: n > 250 ? 200 : 1000,
  };
  cy.layout(options).run();
  if (fcose && n > 250) spread();
}

// The spectral layout packs nodes closer than their size: scale the positions up about their
// centre until each node has about three times its size of room, then fit the view again.
function spread() {
  const nodes = cy.nodes();
  if (nodes.length < 2) return;
  const box = nodes.boundingBox({includeLabels: false});
  const average = nodes.reduce((sum, n) => sum + n.data('size'), 0) / nodes.length;
  const want = Math.sqrt(nodes.length) * average * 3;
  const side = Math.max(box.w, box.h, 1);
  if (side >= want) return;
  const k = want / side;
  const cx = (box.x1 + box.x2) / 2;
  const cy0 = (box.y1 + box.y2) / 2;
  nodes.positions((node) => {
    const p = node.position();
    return {x: cx + (p.x - cx) * k, y: cy0 + (p.y - cy0) * k};
  });
  cy.fit(undefined, 30);
}

async function drawGraph() {
  const limit = Math.max(1, Math.min(1000, Number(document.getElementById('graph-limit').value) || 150));
  const levelSelect = document.getElementById('graph-level');
  if (levelSelect.value !== '') level = Number(levelSelect.value);
  info('Loading…');
  let view;
  try {
    view = await api(`/v1/graph?limit=${limit}&level=${level}`);
  } catch (err) {
    info('');
    clear(document.getElementById('graph-legend'), errorBox(err));
    drawing = null;  // showing the page again tries again
    return;
  }
  // The levels the index has.
  clear(levelSelect, (view.levels.length ? view.levels : [0]).map((l) =>
    h('option', {value: l, selected: l === view.level}, `${l}${l === 0 ? ' (coarsest)' : ''}`)));
  level = view.level;
  await loadTitles();
  if (!cy) makeCy();
  sizeScale = view.nodes.length > 250 ? 0.5 : 1;
  maxDegree = Math.max(1, ...view.nodes.map((n) => n.degree));
  minDegree = Math.min(maxDegree, ...view.nodes.map((n) => n.degree));
  const maxWeight = Math.max(1, ...view.edges.map((e) => e.weight));
  cy.elements().remove();
  cy.add(view.nodes.map((n) => nodeElement(n)));
  cy.add(view.edges.map((e) => edgeElement(e, maxWeight)));
  layout(view.nodes.length);
  document.getElementById('cy').dataset.ready = 'true';
  updateInfo(view);
  legend();
}

// Adds entity `id` and its heaviest neighbours around it; keeps what is drawn.
export async function expand(id, {focus = false} = {}) {
  if (!cy) return;
  let view;
  try {
    view = await api(`/v1/graph?around=${id}&limit=30&level=${level}`);
  } catch (err) {
    info(err.message);
    return;
  }
  let centre = cy.$id(`n${id}`);
  const extent = cy.extent();
  const origin = centre.nonempty() ? centre.position()
                                   : {x: (extent.x1 + extent.x2) / 2, y: (extent.y1 + extent.y2) / 2};
  const fresh = view.nodes.filter((n) => cy.$id(`n${n.id}`).empty());
  maxDegree = Math.max(maxDegree, ...view.nodes.map((n) => n.degree));
  const ring = fresh.filter((n) => n.id !== id);
  cy.batch(() => {
    for (const n of fresh) {
      if (n.id === id) cy.add(nodeElement(n, {...origin}));
    }
    ring.forEach((n, i) => {
      const angle = (2 * Math.PI * i) / Math.max(1, ring.length);
      const radius = 90 + 4 * ring.length;
      cy.add(nodeElement(n, {x: origin.x + radius * Math.cos(angle),
                             y: origin.y + radius * Math.sin(angle)}));
    });
    const maxWeight = Math.max(1, ...view.edges.map((e) => e.weight));
    for (const e of view.edges) {
      if (cy.$id(`e${e.id}`).empty()) cy.add(edgeElement(e, maxWeight));
    }
  });
  centre = cy.$id(`n${id}`);
  centre.addClass('expanded');
  if (focus) select(id);
  updateInfo(null);
  legend();
}

function select(id) {
  const node = cy.$id(`n${id}`);
  if (node.empty()) return false;
  cy.elements().unselect();
  cy.edges().removeClass('highlight');
  node.select();
  node.connectedEdges().addClass('highlight');
  cy.animate({center: {eles: node}, zoom: Math.max(cy.zoom(), 1)}, {duration: 250});
  return true;
}

// Shows entity `id`: selects it, adding it (with its neighbours) when it is not drawn.
async function focusEntity(id) {
  if (!cy) return;
  if (!select(id)) await expand(id, {focus: true});
}

function initSearch() {
  const input = document.getElementById('graph-search');
  const results = document.getElementById('graph-search-results');
  let timer = null;
  let seq = 0;
  const pick = (entity) => {
    results.hidden = true;
    input.value = entity.name;
    openDetail({kind: 'entity', id: entity.id});
    focusEntity(entity.id);
  };
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      const q = input.value.trim();
      if (!q) {
        results.hidden = true;
        return;
      }
      const mine = ++seq;
      let found;
      try {
        found = await api(`/v1/entities?search=${encodeURIComponent(q)}&limit=12`);
      } catch (err) {
        found = [];
        info(err.message);
      }
      if (mine !== seq) return;
      clear(results, found.length ? found.map((e) => h('li', {},
        h('a', {href: '#', onclick: (ev) => {
          ev.preventDefault();
          pick(e);
        }}, e.name, h('span', {class: 'muted'}, ` ${e.type} · degree ${e.degree}`))))
        : h('li', {class: 'muted'}, 'no entity by that name'));
      results.hidden = false;
    }, 200);
  });
  input.addEventListener('keydown', async (e) => {
    if (e.key !== 'Enter') return;
    e.preventDefault();
    const first = results.querySelector('a');
    if (first) first.click();
  });
  input.addEventListener('blur', () => setTimeout(() => {
    results.hidden = true;
  }, 200));
}

export function initGraph() {
  const redraw = () => {
    drawing = drawGraph();
  };
  document.getElementById('graph-reload').addEventListener('click', redraw);
  document.getElementById('graph-level').addEventListener('change', redraw);
  document.getElementById('graph-fit').addEventListener('click', () => cy && cy.fit(undefined, 30));
  const zoom = (factor) => {
    if (!cy) return;
    const c = {x: cy.width() / 2, y: cy.height() / 2};
    cy.zoom({level: cy.zoom() * factor, renderedPosition: c});
  };
  document.getElementById('graph-zoom-in').addEventListener('click', () => zoom(1.25));
  document.getElementById('graph-zoom-out').addEventListener('click', () => zoom(0.8));
  initSearch();
  onExpand(async (id) => {
    if (location.hash !== '#/graph') location.hash = '#/graph';
    await ensureDrawn();
    expand(id, {focus: true});
  });
  onOpen((target) => {
    if (cy && target.kind === 'entity' && location.hash === '#/graph') select(target.id);
  });
}

function ensureDrawn() {
  if (!drawing) drawing = drawGraph();
  return drawing;
}

export function showGraph() {
  if (cy) cy.resize();
  ensureDrawn();
}
