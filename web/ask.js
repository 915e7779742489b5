// Ask: a question, a method (auto by default), the answer streamed as it is written, then
// rendered with its citations, each of which opens in the side panel: the cited passage
// highlighted in its document when the citation has character spans, else what it cites.

import {stream} from './api.js';
import {citationKey, citationLabel, citationPassage, citationTarget, renderAnswer, spanLabel}
  from './answer.js';
import {openDetail} from './detail.js';
import {clear, errorBox, h} from './dom.js';

let running = null;

function openCitation(c) {
  const target = citationPassage(c) || citationTarget(c);
  if (target) openDetail(target);
}

function describe(result, seconds) {
  const parts = [`method: ${result.method}`];
  if (result.route) parts.push(`chosen by the router: ${result.route.reason}`);
  parts.push(result.llm ? 'written by the model' : 'extractive (no model)');
  if (result.method === 'lazy' && result.stats) {
    const s = result.stats;
    parts.push(`${s.calls} calls (${s.relevance_calls} relevance, ${s.passages_relevant} of ` +
               `${s.passages_tested} passages relevant, stop: ${s.stop})`);
  }
  parts.push(`${seconds.toFixed(1)} s`);
  return parts.join(' · ');
}

function sources(result) {
  const cites = result.citations || [];
  if (!cites.length) return h('p', {class: 'muted'}, 'No citations.');
  return h('div', {class: 'sources'}, h('h4', {}, `Sources (${cites.length})`),
           h('ol', {}, cites.map((c) => {
             const target = citationPassage(c) || citationTarget(c);
             const spans = c.spans || [];
             const label = `[${citationKey(c)}] ${citationLabel(c)}` +
                           (spans.length ? ` · ${spanLabel(spans[0], c.document_id)}` : '');
             return h('li', {}, target ? h('a', {
               href: '#', class: 'source-link', dataset: {cite: citationKey(c)},
               onclick: (e) => {
                 e.preventDefault();
                 openCitation(c);
               },
             }, label) : label);
           })));
}

// DRIFT's research: the follow-up questions asked, as a tree under the primer, collapsed.
function followUps(result) {
  const actions = (result.actions || []).filter((a) => a.depth > 0);
  if (!actions.length) return null;
  const children = new Map();
  for (const a of actions) {
    const list = children.get(a.parent) || [];
    list.push(a);
    children.set(a.parent, list);
  }
  const item = (a) => {
    const state = a.outcome === 'ok' ? `score ${a.score}` : a.outcome.replace('_', ' ');
    const kids = children.get(a.id) || [];
    return h('li', {}, h('span', {class: 'follow-up'}, a.query), ' ',
             h('span', {class: 'muted'}, `(${state})`),
             kids.length ? h('ul', {}, kids.map(item)) : null);
  };
  const roots = actions.filter((a) => !actions.some((p) => p.id === a.parent));
  const s = result.stats || {};
  return h('details', {class: 'drift-followups'},
           h('summary', {}, `Follow-ups (${actions.length}) · ${s.calls} of at most ` +
                            `${s.max_calls} model calls`),
           h('ul', {}, roots.map(item)));
}

async function ask(question, method) {
  if (running) running.abort();
  const controller = new AbortController();
  running = controller;
  const state = document.getElementById('ask-state');
  const text = h('div', {class: 'answer-text streaming'});
  const meta = h('p', {class: 'muted meta'}, 'thinking…');
  const card = h('article', {class: 'answer'}, h('h3', {class: 'question'}, question), meta, text);
  document.getElementById('answers').prepend(card);
  state.textContent = 'answering…';
  const started = performance.now();
  let streamed = '';
  let result = null;
  let failure = null;
  try {
    await stream('/v1/query', {
      body: {question, method, stream: true},
      signal: controller.signal,
      onEvent: (event, data) => {
        if (event === 'delta') {
          streamed += data.text || '';
          text.textContent = streamed;
        } else if (event === 'result') {
          result = data;
        } else if (event === 'error') {
          failure = new Error(data.error ? data.error.message : 'the query failed');
        }
      },
    });
  } catch (err) {
    failure = err.name === 'AbortError' ? new Error('stopped: another question was asked') : err;
  }
  if (running === controller) {
    running = null;
    state.textContent = '';
  }
  text.classList.remove('streaming');
  if (failure || !result) {
    meta.textContent = '';
    card.append(errorBox(failure || new Error('the answer stream ended without a result')));
    return;
  }
  card.dataset.method = result.method;
  meta.textContent = describe(result, (performance.now() - started) / 1000);
  text.replaceWith(renderAnswer(result.answer, result.citations, openCitation));
  card.append(sources(result));
  const research = followUps(result);
  if (research) card.append(research);
}

export function initAsk() {
  const form = document.getElementById('ask-form');
  const question = document.getElementById('question');
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = question.value.trim();
    if (q) ask(q, document.getElementById('method').value);
  });
  question.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
}

export function showAsk() {
  document.getElementById('question').focus();
}
