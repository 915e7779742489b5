// Documents: what is indexed, uploads into the input folder, deletions, and index jobs with
// their progress streamed from the server (the running job is followed when the page opens).

import {api, stream} from './api.js';
import {openDetail} from './detail.js';
import {clear, errorBox, h, number} from './dom.js';

let following = null;  // the id of the job whose events are being read

function message(text, isError = false) {
  const el = document.getElementById('doc-message');
  el.textContent = text;
  el.classList.toggle('error', isError);
}

async function loadDocuments() {
  const rows = document.getElementById('doc-rows');
  let docs;
  try {
    docs = await api('/v1/documents');
  } catch (err) {
    clear(rows, h('tr', {}, h('td', {colspan: 5}, errorBox(err))));
    return;
  }
  if (!docs.length) {
    clear(rows, h('tr', {}, h('td', {colspan: 5, class: 'muted'},
                              'Nothing indexed yet: add documents, then index.')));
    return;
  }
  clear(rows, docs.map((d) => h('tr', {dataset: {doc: d.id}},
    h('td', {}, h('a', {href: '#', onclick: (e) => {
      e.preventDefault();
      openDetail({kind: 'document', id: d.id});
    }}, d.id)),
    h('td', {}, d.title || ''),
    h('td', {class: 'num'}, number(d.chunks)),
    h('td', {class: 'muted'}, d.updated_at || ''),
    h('td', {}, h('button', {type: 'button', class: 'quiet delete', onclick: () => remove(d.id)},
                  'Delete')))));
}

async function remove(id) {
  if (!confirm(`Delete ${id} from the input folder? The next index job drops it from the index.`))
    return;
  try {
    await api(`/v1/documents/${encodeURIComponent(id)}`, {method: 'DELETE'});
    message(`Deleted ${id} from the input folder: index now to drop it from the index.`);
  } catch (err) {
    message(err.message, true);
  }
}

async function upload(e) {
  e.preventDefault();
  const input = document.getElementById('upload-file');
  if (!input.files.length) {
    message('Choose one or more files first.', true);
    return;
  }
  const saved = [];
  for (const file of input.files) {
    const form = new FormData();
    form.append('file', file, file.name);
    try {
      const r = await api('/v1/documents', {method: 'POST', form});
      saved.push(r.id);
    } catch (err) {
      message(`${file.name}: ${err.message}`, true);
      return;
    }
  }
  input.value = '';
  message(`Saved ${saved.join(', ')} in the input folder: index now to add ${
    saved.length > 1 ? 'them' : 'it'} to the index.`);
}

async function paste(e) {
  e.preventDefault();
  const body = {text: document.getElementById('paste-text').value};
  const id = document.getElementById('paste-id').value.trim();
  const title = document.getElementById('paste-title').value.trim();
  if (id) body.id = id;
  if (title) body.title = title;
  try {
    const r = await api('/v1/documents', {method: 'POST', body});
    e.target.reset();
    message(`Saved ${r.id} in the input folder: index now to add it to the index.`);
  } catch (err) {
    message(err.message, true);
  }
}

function renderJob(job) {
  const el = document.getElementById('job');
  el.dataset.state = job.state;
  el.dataset.jobId = String(job.id);
  const pct = job.total > 0 ? Math.min(100, (100 * job.done) / job.total) : null;
  const lines = [
    h('div', {}, h('strong', {}, `Job ${job.id}: ${job.state}`),
      job.stage ? ` · ${job.stage}` : ''),
    h('progress', {max: 100, value: job.state === 'running' ? pct ?? undefined : 100}),
    h('div', {class: 'muted small'},
      [job.total > 0 ? `${number(job.done)} of ${number(job.total)}` : '',
       ` · ${number(job.llm_calls || 0)} LLM calls`,
       ` · ${(job.elapsed_seconds || 0).toFixed(1)} s`,
       job.stage_eta_seconds ? ` · about ${Math.round(job.stage_eta_seconds)} s left in this stage`
                             : ''].join('')),
  ];
  if (job.error) lines.push(h('div', {class: 'error'}, job.error.message || String(job.error)));
  if (job.summary && job.state !== 'running') {
    const s = job.summary;
    const d = s.documents || {};
    const facts = [`documents: ${number(d.added || 0)} added, ${number(d.changed || 0)} changed, ` +
                   `${number(d.removed || 0)} removed, ${number(d.unchanged || 0)} unchanged`];
    if (s.chunks) facts.push(`${number(s.chunks.total)} chunks`);
    facts.push(`${number(s.entities)} entities`, `${number(s.relationships)} relationships`);
    lines.push(h('div', {class: 'muted small summary'}, facts.join(' · ')));
  }
  clear(el, lines);
  document.getElementById('cancel-button').hidden = job.state !== 'running';
  document.getElementById('index-button').disabled = job.state === 'running';
}

async function follow(job) {
  renderJob(job);
  if (job.state !== 'running' || following === job.id) return;
  following = job.id;
  let last = job;
  try {
    await stream(`/v1/jobs/${job.id}/events`, {
      onEvent: (event, data) => {
        if (event === 'progress' || event === 'done') {
          last = data;
          renderJob(data);
        }
      },
    });
  } catch (err) {
    clear(document.getElementById('job'), errorBox(err));
  }
  if (following === job.id) following = null;
  if (last.state !== 'running') loadDocuments();
}

async function startIndex() {
  try {
    const job = await api('/v1/index', {method: 'POST', body: {}});
    follow(job);
  } catch (err) {
    clear(document.getElementById('job'), errorBox(err));
  }
}

async function cancel() {
  const id = Number(document.getElementById('job').dataset.jobId || following);
  if (!id) return;
  try {
    await api(`/v1/jobs/${id}`, {method: 'DELETE'});
  } catch (err) {
    message(err.message, true);
  }
}

async function loadJobs() {
  try {
    const jobs = await api('/v1/jobs');
    if (jobs.length) follow(jobs[0]);
  } catch {
    // an older server without the listing: nothing to follow
  }
}

export function initDocuments() {
  document.getElementById('upload-form').addEventListener('submit', upload);
  document.getElementById('paste-form').addEventListener('submit', paste);
  document.getElementById('index-button').addEventListener('click', startIndex);
  document.getElementById('cancel-button').addEventListener('click', cancel);
}

export function showDocuments() {
  loadDocuments();
  loadJobs();
}
