// Calls to tfslurmd's REST API, with its bearer token.
//
// The token is asked for only when the service wants one: the first call that
// answers 401 opens a small form (one form, however many calls are waiting),
// the token is kept in localStorage and sent as "Authorization: Bearer ..." on
// every call after. A refused token asks again; a dismissed form is not
// reopened by polling, only by the "Enter token" button.
import { askForToken } from './dialogs.js';

const TOKEN_KEY = 'tfslurm.token';

export class ApiError extends Error {
  // status: HTTP status (0: no answer); code: the API's error code;
  // fields: [{field, reason}] for bad input.
  constructor(status, code, message, fields = []) {
    super(message);
    this.status = status;
    this.code = code;
    this.fields = fields;
  }
}

export function token() {
  try {
    return localStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

export function setToken(value) {
  try {
    if (value) localStorage.setItem(TOKEN_KEY, value);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    // Private mode without storage: the token lasts for this page only.
  }
  tokenListeners.forEach((f) => f());
}

const tokenListeners = new Set();
export function onTokenChange(f) {
  tokenListeners.add(f);
}

let pendingPrompt = null; // the open token form, shared by every waiting call
let promptDismissed = false;

async function obtainToken(refused) {
  if (!pendingPrompt) {
    pendingPrompt = askForToken({ refused }).finally(() => {
      pendingPrompt = null;
    });
  }
  const value = await pendingPrompt;
  if (!value) {
    promptDismissed = true;
    return false;
  }
  promptDismissed = false;
  setToken(value);
  return true;
}

// Opens the token form on request (the banner's button), then retries.
export async function promptForToken() {
  promptDismissed = false;
  return obtainToken(Boolean(token()));
}

// request('GET', '/experiments') -> parsed JSON; {text: true} -> string.
// Throws ApiError with the service's message.
export async function request(method, path, { body, text = false } = {}) {
  for (let attempt = 0; ; attempt++) {
    const sent = token();
    const headers = { Accept: text ? 'text/plain, */*' : 'application/json' };
    if (sent) headers.Authorization = `Bearer ${sent}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res;
    try {
      res = await fetch(path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: 'no-store',
      });
    } catch (e) {
      throw new ApiError(0, 'unreachable', `cannot reach tfslurmd (${e.message}); retrying`);
    }
    if (res.status === 401) {
      const err = await errorFrom(res);
      // Another call may have stored a new token meanwhile: retry with it.
      if (token() !== sent && attempt < 3) continue;
      if (promptDismissed || attempt >= 3) throw err;
      if (await obtainToken(Boolean(sent))) continue;
      throw err;
    }
    if (!res.ok) throw await errorFrom(res);
    if (text) return res.text();
    const type = res.headers.get('Content-Type') || '';
    return type.includes('json') ? res.json() : res.text();
  }
}

async function errorFrom(res) {
  let body = '';
  try {
    body = await res.text();
    const e = JSON.parse(body).error;
    if (e && e.message) return new ApiError(res.status, e.code || '', e.message, e.fields || []);
  } catch {
    // not the API's JSON error shape
  }
  const detail = body.trim().slice(0, 300);
  return new ApiError(res.status, '', `HTTP ${res.status} ${res.statusText}${detail ? `: ${detail}` : ''}`);
}

export const getJson = (path) => request('GET', path);
export const getText = (path) => request('GET', path, { text: true });
