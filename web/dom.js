// Small DOM helpers: every text goes in as text, never as HTML.

// h('a', {class: 'x', onclick: f}, 'text', child, ...) -> element
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function errorBox(err) {
  return h('div', {class: 'error'}, err && err.message ? err.message : String(err));
}

export function shorten(text, n) {
  const s = String(text || '');
  return s.length > n ? `${s.slice(0, n).trimEnd()}…` : s;
}

export function number(n) {
  return typeof n === 'number' ? n.toLocaleString('en') : String(n ?? '');
}

// The colour of community `id` (stable across pages), grey for none.
const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
                 '#ff9da7', '#9c755f', '#86bcb6', '#8cd17d', '#d37295', '#a0cbe8', '#ffbe7d',
                 '#499894', '#d4a6c8'];
export function communityColour(id) {
  if (id === null || id === undefined) return '#b5b5b5';
  const n = Number(id);
  const x = Math.imul(n ^ (n >>> 7), 2654435761) >>> 0;
  return PALETTE[x % PALETTE.length];
}
