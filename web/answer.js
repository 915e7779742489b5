// An answer's text as HTML elements: paragraphs, "- " lists, **bold**, _italic_, and citation
// markers ([E12], [S1, S2], [Data: Reports (49, 55)]) turned into links to what they cite: the
// cited passage in its document when the citation has spans, else the item itself.

import {h} from './dom.js';

// What a citation of a query result opens: {kind, id, ...} or null.
export function citationTarget(c) {
  if (!c || typeof c !== 'object') return null;
  if (c.community !== undefined) return {kind: 'community', id: c.community};
  if (c.chunk_id) return {kind: 'chunk', id: c.chunk_id};
  const r = c.ref || {};
  if (r.entity !== undefined) return {kind: 'entity', id: r.entity};
  if (r.relationship !== undefined)
    return {kind: 'relationship', id: r.relationship, source: r.source, target: r.target};
  if (r.community !== undefined) return {kind: 'community', id: r.community};
  if (r.chunk_id) return {kind: 'chunk', id: r.chunk_id};
  return null;
}

// What a citation with character spans opens: the document of its best span at that passage,
// the citation's spans in that document highlighted; null when it has none. `cited` keeps what
// it cites (an entity, a report, a chunk) one click away.
export function citationPassage(c) {
  const spans = c && Array.isArray(c.spans) ? c.spans : [];
  if (!spans.length) return null;
  const doc = spans[0].document_id;
  return {
    kind: 'passage', id: doc, cite: citationKey(c), claim: c.claim || '',
    spans: spans.filter((s) => s.document_id === doc),
    elsewhere: spans.filter((s) => s.document_id !== doc),
    cited: citationTarget(c), citedLabel: citationLabel(c),
  };
}

// "part1.txt chars 10234–10391" of a span (code points into the document's text), without the
// document when it is `known`.
export function spanLabel(s, known) {
  const where = `chars ${s.start}–${s.end}`;
  return s.document_id === known ? where : `${s.title || s.document_id} ${where}`;
}

// The label of a citation in the source list.
export function citationLabel(c) {
  if (c.community !== undefined)
    return `community ${c.community} (level ${c.level}): ${c.title || 'untitled'}`;
  if (c.chunk_id) return `chunk ${c.chunk_index} of ${c.document_id}`;
  return c.source || c.id || '';
}

// The marker a citation is written as in an answer: "E12", "S1", or the community number.
export function citationKey(c) {
  return c.community !== undefined ? String(c.community) : String(c.id);
}

function citeLink(key, byKey, open) {
  const c = byKey.get(key);
  if (!c) return document.createTextNode(key);
  return h('a', {
    href: '#', class: 'cite', title: citationLabel(c), dataset: {cite: key},
    onclick: (e) => {
      e.preventDefault();
      open(c);
    },
  }, key);
}

// Inline text: **bold**, _italic_ and citation markers.
function inline(text, byKey, open) {
  const out = [];
  // [Data: Reports (1, 2, +more)] or [E1] / [S1, S2] / [E1][R2]
  const pattern = /\[Data:\s*([A-Za-z]+)\s*\(([^)\]]*)\)\]|\[((?:[A-Z]{1,2}\d+)(?:\s*,\s*[A-Z]{1,2}\d+)*)\]|\*\*([^*]+)\*\*|(?<![A-Za-z0-9])_([^_]+)_(?![A-Za-z0-9])/g;
  let last = 0;
  for (const m of text.matchAll(pattern)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1] !== undefined) {
      const span = h('span', {class: 'cites'}, `[Data: ${m[1]} (`);
      const ids = m[2].split(',').map((s) => s.trim()).filter(Boolean);
      ids.forEach((id, i) => {
        if (i) span.append(', ');
        span.append(/^\d+$/.test(id) && m[1].toLowerCase() === 'reports' ? citeLink(id, byKey, open)
                                                                        : id);
      });
      span.append(')]');
      out.push(span);
    } else if (m[3] !== undefined) {
      const span = h('span', {class: 'cites'}, '[');
      m[3].split(',').map((s) => s.trim()).forEach((id, i) => {
        if (i) span.append(', ');
        span.append(citeLink(id, byKey, open));
      });
      span.append(']');
      out.push(span);
    } else if (m[4] !== undefined) {
      out.push(h('strong', {}, m[4]));
    } else {
      out.push(h('em', {}, m[5]));
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

export function renderAnswer(text, citations, open) {
  const byKey = new Map();
  for (const c of citations || []) byKey.set(citationKey(c), c);
  const root = h('div', {class: 'answer-text'});
  let list = null;
  for (const para of String(text || '').split(/\n{2,}/)) {
    list = null;
    let p = null;
    for (const line of para.split('\n')) {
      const item = /^\s*[-*]\s+(.*)$/.exec(line);
      if (item) {
        p = null;
        if (!list) {
          list = h('ul');
          root.append(list);
        }
        list.append(h('li', {}, inline(item[1], byKey, open)));
      } else if (line.trim()) {
        list = null;
        if (p) p.append(h('br'));
        else {
          p = h('p');
          root.append(p);
        }
        p.append(...inline(line, byKey, open));
      }
    }
  }
  return root;
}
