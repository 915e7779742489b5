// Talking to grag serve: JSON calls and Server-Sent Events over fetch (EventSource cannot send
// the Authorization header), with the API key asked for when the server wants one.

const KEY_STORE = 'grag.apiKey';
const WORKSPACE_STORE = 'grag.workspace';

export class ApiError extends Error {
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

export function apiKey() {
  try {
    return localStorage.getItem(KEY_STORE) || '';
  } catch {
    return '';
  }
}

function setApiKey(key) {
  try {
    if (key) localStorage.setItem(KEY_STORE, key);
    else localStorage.removeItem(KEY_STORE);
  } catch {
    // storage refused (private mode): the key lives for this page only
  }
  sessionKey = key;
}

let sessionKey = apiKey();

// The workspace the page works on ("default": the server's own project). Every /v1 call but
// the workspace list goes to /v1/workspaces/NAME/... for another one.
let currentWorkspace = (() => {
  try {
    return localStorage.getItem(WORKSPACE_STORE) || 'default';
  } catch {
    return 'default';
  }
})();

export function workspace() {
  return currentWorkspace;
}

export function setWorkspace(name) {
  currentWorkspace = name || 'default';
  try {
    localStorage.setItem(WORKSPACE_STORE, currentWorkspace);
  } catch {
    // storage refused: for this page only
  }
}

function inWorkspace(path) {
  if (currentWorkspace === 'default' || !path.startsWith('/v1/') ||
      path.startsWith('/v1/workspaces')) {
    return path;
  }
  return `/v1/workspaces/${encodeURIComponent(currentWorkspace)}${path.slice(3)}`;
}
let keyPrompt = null;  // one dialog for every request refused at once
export let keyRequired = false;

// Shows the key dialog; resolves true when a key was given.
export function askForKey(message) {
  if (keyPrompt) return keyPrompt;
  const dialog = document.getElementById('key-dialog');
  const input = document.getElementById('key-input');
  document.getElementById('key-message').textContent = message;
  input.value = '';
  keyPrompt = new Promise((resolve) => {
    dialog.addEventListener('close', () => {
      keyPrompt = null;
      if (dialog.returnValue === 'forget') {
        setApiKey('');
        resolve(false);
      } else if (dialog.returnValue === 'ok' && input.value.trim()) {
        setApiKey(input.value.trim());
        resolve(true);
      } else {
        resolve(false);
      }
    }, {once: true});
    dialog.showModal();
    input.focus();
  });
  return keyPrompt;
}

function headers(extra) {
  const h = new Headers(extra || {});
  if (sessionKey) h.set('Authorization', `Bearer ${sessionKey}`);
  return h;
}

async function errorOf(response) {
  let type = 'http_error';
  let message = `HTTP ${response.status}`;
  try {
    const body = await response.json();
    if (body && body.error) {
      type = body.error.type || type;
      message = body.error.message || message;
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, type, message);
}

// fetch() with the key; a 401 asks for the key and tries again.
async function send(path, init = {}) {
  for (;;) {
    const response = await fetch(inWorkspace(path), {...init, headers: headers(init.headers)});
    if (response.status !== 401) return response;
    keyRequired = true;
    document.getElementById('key-button').hidden = false;
    const given = await askForKey(sessionKey ? 'The server refused this API key. Enter another.'
                                             : 'This server needs an API key (server.api_keys).');
    if (!given) throw await errorOf(response);
  }
}

// A JSON call: the parsed body, or an ApiError carrying the server's message.
export async function api(path, {method = 'GET', body, form} = {}) {
  const init = {method};
  if (form) {
    init.body = form;
  } else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = {'Content-Type': 'application/json'};
  }
  const response = await send(path, init);
  if (!response.ok) throw await errorOf(response);
  if (response.status === 204) return null;
  return response.json();
}

// Reads Server-Sent Events from `path` (POST with `body`, else GET), calling onEvent(name, data)
// with each event's parsed JSON data. Resolves when the stream ends.
export async function stream(path, {body, onEvent, signal} = {}) {
  const init = {method: body === undefined ? 'GET' : 'POST', signal};
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = {'Content-Type': 'application/json', Accept: 'text/event-stream'};
  } else {
    init.headers = {Accept: 'text/event-stream'};
  }
  const response = await send(path, init);
  if (!response.ok) throw await errorOf(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  const dispatch = (block) => {
    let event = 'message';
    const data = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;  // a comment: keep-alive
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (!data.length) return;
    let parsed;
    try {
      parsed = JSON.parse(data.join('\n'));
    } catch {
      parsed = data.join('\n');
    }
    onEvent(event, parsed);
  };
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n/g, '\n');
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      dispatch(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
    }
  }
  if (buffer.trim()) dispatch(buffer);
}

export function forgetKeyAndAsk() {
  return askForKey('Enter the API key to use (it is kept in this browser).');
}
