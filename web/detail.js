// The side panel: one entity, relationship, community report, passage or document, opened from
// any page (a citation, a graph node, a list), or a citation's passage highlighted in its
// document. It keeps a history for its back button.

import {api} from './api.js';
import {clear, communityColour, errorBox, h, shorten} from './dom.js';

const panel = () => document.getElementById('detail');
const body = () => document.getElementById('detail-body');
const history = [];
const listeners = [];

// Called with each target opened: (target) => void. The graph page follows the entities.
export function onOpen(f) {
  listeners.push(f);
}

export function initDetail() {
  document.getElementById('detail-close').addEventListener('click', closeDetail);
  document.getElementById('detail-back').addEventListener('click', () => {
    history.pop();
    const previous = history.pop();
    if (previous) openDetail(previous);
    else closeDetail();
  });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && !document.querySelector('dialog[open]')) closeDetail();
  });
}

export function closeDetail() {
  history.length = 0;
  panel().hidden = true;
  document.body.classList.remove('with-detail');
}

// target: {kind: entity|relationship|community|chunk|document, id, ...}
export async function openDetail(target) {
  history.push(target);
  document.getElementById('detail-back').disabled = history.length < 2;
  panel().hidden = false;
  document.body.classList.add('with-detail');
  const el = body();
  el.dataset.kind = target.kind;
  el.dataset.id = String(target.id);
  clear(el, h('p', {class: 'muted'}, 'Loading…'));
  try {
    const render = RENDER[target.kind];
    const content = await render(target);
    if (history[history.length - 1] !== target) return;  // another one was opened meanwhile
    clear(el, content);
  } catch (err) {
    if (history[history.length - 1] === target) clear(el, errorBox(err));
  }
  for (const f of listeners) f(target);
}

function link(text, target, attrs = {}) {
  return h('a', {
    href: '#', ...attrs,
    onclick: (e) => {
      e.preventDefault();
      openDetail(target);
    },
  }, text);
}

export function entityLink(ref) {
  return link(ref.name || `entity ${ref.id}`, {kind: 'entity', id: ref.id},
              {class: 'entity-link', dataset: {entity: ref.id}});
}

// Long text cut at `n` characters, with a button for the rest.
function clamped(text, n) {
  const p = h('p', {class: 'description'}, shorten(text, n));
  if (text.length <= n) return p;
  return h('div', {}, p, h('button', {type: 'button', class: 'quiet small', onclick: (e) => {
    p.textContent = text;
    e.target.remove();
  }}, 'Show all of it'));
}

function section(title, ...content) {
  return h('section', {class: 'detail-section'}, h('h4', {}, title), ...content);
}

function passage(chunk) {
  return h('li', {class: 'passage'},
           link(`${chunk.document_id} · chunk ${chunk.index}`, {kind: 'chunk', id: chunk.id}),
           h('blockquote', {}, shorten(chunk.text, 420)));
}

const expandHandlers = [];
export function onExpand(f) {
  expandHandlers.push(f);
}

async function renderEntity(t) {
  const e = await api(`/v1/entities/${encodeURIComponent(t.id)}?neighbours=40&chunks=6`);
  const out = [
    h('div', {class: 'kind'}, 'entity'),
    h('h2', {class: 'entity-name'}, e.name),
    h('p', {class: 'muted'}, [e.type || 'untyped', ` · degree ${e.degree}`,
                              ` · in ${e.frequency} passages`]),
  ];
  if (e.aliases && e.aliases.length)
    out.push(h('p', {class: 'muted'}, `Also: ${e.aliases.join(', ')}`));
  out.push(clamped(e.description || '(no description)', 900));
  out.push(h('div', {class: 'row'},
             h('button', {type: 'button', class: 'expand-button',
                          onclick: () => expandHandlers.forEach((f) => f(e.id))},
               'Show neighbours in the graph')));
  const nb = h('ul', {class: 'neighbours'});
  for (const n of e.neighbours) {
    nb.append(h('li', {}, entityLink(n.entity), ' ',
                link('↔', {kind: 'relationship', id: n.id, source: e.id, target: n.entity.id},
                     {title: 'the relationship', class: 'rel-link'}),
                h('div', {class: 'muted small'}, shorten(n.description, 200))));
  }
  out.push(section(`Neighbours (${e.neighbours.length} of ${e.neighbours_total})`,
                   e.neighbours.length ? nb : h('p', {class: 'muted'}, 'none')));
  const cs = h('ul', {class: 'communities'});
  for (const c of e.communities) {
    cs.append(h('li', {},
                h('span', {class: 'swatch', style: {background: communityColour(c.id)}}),
                link(`level ${c.level} · community ${c.id}`, {kind: 'community', id: c.id}),
                h('span', {class: 'muted'}, ` (${c.size} entities)`)));
  }
  out.push(section('Communities', e.communities.length ? cs : h('p', {class: 'muted'}, 'none')));
  out.push(section(`Source passages (${e.chunks.length} of ${e.chunks_total})`,
                   h('ul', {class: 'passages'}, e.chunks.map(passage))));
  return out;
}

async function renderRelationship(t) {
  const rels = await api(`/v1/relationships?entity=${encodeURIComponent(t.source)}&limit=100000`);
  const r = rels.find((x) => x.id === t.id);
  if (!r) return errorBox(`relationship ${t.id} is no longer in the index`);
  return [
    h('div', {class: 'kind'}, 'relationship'),
    h('h2', {}, entityLink(r.source), ' — ', entityLink(r.target)),
    h('p', {class: 'muted'}, `weight ${r.weight} · in ${r.frequency} passages`),
    h('p', {class: 'description'}, r.description || '(no description)'),
  ];
}

async function renderCommunity(t) {
  const c = await api(`/v1/communities/${encodeURIComponent(t.id)}`);
  const r = c.report;
  const out = [
    h('div', {class: 'kind'},
      h('span', {class: 'swatch', style: {background: communityColour(c.id)}}),
      `community ${c.id} · level ${c.level}`),
    h('h2', {class: 'report-title'}, r ? r.title || 'untitled' : 'no report'),
    h('p', {class: 'muted'}, [`${c.size} entities`,
                              r && r.rating !== null ? ` · rating ${r.rating}` : '',
                              r ? ` · ${r.generator} report` : '']),
  ];
  if (r && r.status === 'gap') out.push(h('p', {class: 'error'}, `No report: ${r.reason || ''}`));
  if (r && r.summary) out.push(clamped(r.summary, 1200));
  if (r && r.findings && r.findings.length) {
    out.push(section('Findings', h('ol', {class: 'findings'}, r.findings.map((f) =>
      h('li', {}, h('strong', {}, f.summary), h('div', {}, f.explanation))))));
  }
  if (r && r.rating_explanation) out.push(h('p', {class: 'muted'}, r.rating_explanation));
  const nav = [];
  if (c.parent !== null) nav.push(link(`parent: community ${c.parent}`, {kind: 'community', id: c.parent}));
  for (const child of c.children) {
    if (nav.length) nav.push(' · ');
    nav.push(link(`community ${child}`, {kind: 'community', id: child}));
  }
  if (nav.length) out.push(section('Hierarchy', h('p', {}, nav)));
  const members = c.members.map((m) =>
    h('li', {}, entityLink(m), h('span', {class: 'muted'}, m.type ? ` ${m.type}` : '')));
  out.push(section(`Members (${c.members.length})`, h('ul', {class: 'members'}, members)));
  if (r && r.full_content) {
    out.push(h('details', {}, h('summary', {}, 'The full report'),
               h('pre', {class: 'report'}, r.full_content)));
  }
  return out;
}

async function renderChunk(t) {
  const c = await api(`/v1/chunks/${encodeURIComponent(t.id)}`);
  return [
    h('div', {class: 'kind'}, 'source passage'),
    h('h2', {}, link(c.document_id, {kind: 'document', id: c.document_id}),
      ` · chunk ${c.index}`),
    h('p', {class: 'muted'}, `${c.tokens} tokens`),
    h('pre', {class: 'passage-text'}, c.text),
  ];
}

async function renderDocument(t) {
  const d = await api(`/v1/documents/${encodeURIComponent(t.id)}`);
  const text = h('pre', {class: 'passage-text'}, shorten(d.text, 6000));
  return [
    h('div', {class: 'kind'}, 'document'),
    h('h2', {}, d.title || d.id),
    h('p', {class: 'muted'}, `${d.id} · ${d.chunks.length} chunks · updated ${d.updated_at}`),
    text,
    d.text.length > 6000 ? h('button', {type: 'button', class: 'quiet',
                                        onclick: (e) => {
                                          text.textContent = d.text;
                                          e.target.remove();
                                        }}, 'Show all of it') : null,
    section('Chunks', h('ul', {class: 'chunks'}, d.chunks.map((c) =>
      h('li', {}, link(`chunk ${c.index}`, {kind: 'chunk', id: c.id}),
        h('span', {class: 'muted'}, ` ${c.tokens} tokens`))))),
  ];
}

// The UTF-16 index (a JavaScript string's unit) of each code point of `text`, and its length
// last: citation offsets count code points, and a character outside the Basic Multilingual
// Plane (an emoji) is two units in a JavaScript string.
function utf16Offsets(text) {
  const at = [];
  let i = 0;
  for (const ch of text) {
    at.push(i);
    i += ch.length;
  }
  at.push(i);
  return at;
}

// The spans' [start, end) code point ranges, in order, overlapping ones joined.
function joinedRanges(spans, length) {
  const ranges = spans
    .map((s) => [Math.max(0, s.start), Math.min(length, s.end)])
    .filter(([a, b]) => a < b)
    .sort((x, y) => x[0] - y[0]);
  const out = [];
  for (const r of ranges) {
    const last = out[out.length - 1];
    if (last && r[0] <= last[1]) last[1] = Math.max(last[1], r[1]);
    else out.push(r);
  }
  return out;
}

// The document's text with the ranges marked: [pre, the first mark].
function markedText(text, ranges, cite) {
  const at = utf16Offsets(text);
  const pre = h('pre', {class: 'passage-text document-text'});
  let last = 0;
  let first = null;
  for (const [a, b] of ranges) {
    if (at[a] > last) pre.append(text.slice(last, at[a]));
    const mark = h('mark', {class: 'cited', dataset: {start: a, end: b, cite}},
                   text.slice(at[a], at[b]));
    first = first || mark;
    pre.append(mark);
    last = at[b];
  }
  if (last < text.length) pre.append(text.slice(last));
  return [pre, first];
}

// A citation's passage(s) highlighted in its document (target from answer.js citationPassage).
async function renderPassage(t) {
  let d = null;
  let failure = null;
  try {
    d = await api(`/v1/documents/${encodeURIComponent(t.id)}/text`);
  } catch (err) {
    failure = err;  // shown under the heading: what the citation names stays one click away
  }
  const out = [
    h('div', {class: 'kind'}, `cited passage [${t.cite}]`),
    h('h2', {}, d ? link(d.title || d.id, {kind: 'document', id: d.id}) : t.id),
    h('p', {class: 'muted'}, t.spans.map((s) => `chars ${s.start}–${s.end} (${s.precision})`)
      .join(' · ')),
  ];
  if (t.claim) out.push(h('blockquote', {class: 'claim'}, t.claim));
  if (t.cited) {
    out.push(h('p', {}, 'Cites ', link(t.citedLabel || t.cited.kind, t.cited,
                                        {class: 'cited-item'})));
  }
  if (failure) {
    out.push(errorBox(failure));
    return out;
  }
  if (d.note) out.push(h('p', {class: 'warning'}, d.note));
  const hashes = new Set(t.spans.map((s) => s.content_hash).filter(Boolean));
  if (hashes.size && !hashes.has(d.content_hash)) {
    out.push(h('p', {class: 'warning'}, 'The document was indexed again since this answer: ' +
                                        'the highlighted characters may not be the cited ones.'));
  }
  const elsewhere = t.elsewhere || [];
  if (elsewhere.length) {
    const docs = [...new Set(elsewhere.map((s) => s.document_id))];
    out.push(section('Also cited in', h('ul', {}, docs.map((id) => {
      const spans = elsewhere.filter((s) => s.document_id === id);
      const where = spans.map((s) => `chars ${s.start}–${s.end}`).join(', ');
      return h('li', {}, link(`${spans[0].title || id} ${where}`,
                              {...t, id, spans, elsewhere: []}));
    }))));
  }
  const [pre, first] = markedText(d.text, joinedRanges(t.spans, d.characters), t.cite);
  out.push(pre);
  // Once the panel shows it: the first highlight in the middle of the text's own scroll box,
  // the heading, claim and links kept in view above it.
  if (first) {
    requestAnimationFrame(() => {
      if (!first.isConnected) return;
      pre.scrollTop = Math.max(0, first.offsetTop - (pre.clientHeight - first.offsetHeight) / 2);
    });
  }
  return out;
}

const RENDER = {
  entity: renderEntity,
  relationship: renderRelationship,
  community: renderCommunity,
  chunk: renderChunk,
  document: renderDocument,
  passage: renderPassage,
};
