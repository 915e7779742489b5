// Communities: the hierarchy (level 0 is the coarsest; each community splits into finer ones at
// the next level) or one level's communities, largest first, each opening its report.

import {api} from './api.js';
import {openDetail} from './detail.js';
import {clear, communityColour, errorBox, h, shorten} from './dom.js';

let all = null;

function row(c, children) {
  const subs = children && children.length ? ` · ${children.length} sub-communities` : '';
  const r = c.report;
  const title = r ? r.title || 'untitled' : 'no report';
  const head = h('div', {class: 'community-row'},
                 h('span', {class: 'swatch', style: {background: communityColour(c.id)}}),
                 h('a', {href: '#', class: 'community-link', dataset: {community: c.id},
                         onclick: (e) => {
                           e.preventDefault();
                           openDetail({kind: 'community', id: c.id});
                         }}, title),
                 h('span', {class: 'muted'},
                   ` · level ${c.level} · ${c.size} entities` +
                   (r && r.rating !== null ? ` · rating ${r.rating}` : '') + subs),
                 r && r.summary ? h('div', {class: 'summary'}, shorten(r.summary, 260)) : null);
  if (!children || !children.length) return h('li', {}, head);
  return h('li', {}, h('details', {}, h('summary', {}, head), h('ul', {class: 'tree'}, children)));
}

function bySize(a, b) {
  return b.size - a.size || a.id - b.id;
}

function render() {
  const view = document.getElementById('community-view').value;
  const list = document.getElementById('community-list');
  if (!all) return;
  if (view === 'tree') {
    const kids = new Map();
    for (const c of all) {
      if (c.parent === null) continue;
      if (!kids.has(c.parent)) kids.set(c.parent, []);
      kids.get(c.parent).push(c);
    }
    const build = (c) => row(c, (kids.get(c.id) || []).sort(bySize).map(build));
    clear(list, h('ul', {class: 'tree'}, all.filter((c) => c.parent === null).sort(bySize).map(build)));
  } else {
    const level = Number(view);
    clear(list, h('ul', {class: 'flat'}, all.filter((c) => c.level === level).sort(bySize)
      .map((c) => row(c, null))));
  }
}

async function load() {
  const info = document.getElementById('community-info');
  try {
    all = await api('/v1/communities');
  } catch (err) {
    clear(document.getElementById('community-list'), errorBox(err));
    return;
  }
  const levels = [...new Set(all.map((c) => c.level))].sort((a, b) => a - b);
  const select = document.getElementById('community-view');
  const current = select.value || 'tree';
  clear(select, h('option', {value: 'tree'}, 'hierarchy'),
        levels.map((l) => h('option', {value: String(l)},
                            `level ${l} (${all.filter((c) => c.level === l).length})`)));
  select.value = [...select.options].some((o) => o.value === current) ? current : 'tree';
  info.textContent = `${all.length} communities on ${levels.length} levels; level 0 is the ` +
                     'coarsest. Click one for its report.';
  render();
}

export function initCommunities() {
  document.getElementById('community-view').addEventListener('change', render);
}

export function showCommunities() {
  load();
}
