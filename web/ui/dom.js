import { visibleText } from './format.js';

// A tiny DOM builder. Text always goes in as text nodes (never innerHTML), so
// nothing from the API can become markup, and through visibleText, so no
// control or bidi character in it acts on the page (format.js).
//   h('a', {href: '#/', class: 'x', onclick: fn}, 'text', child, [more])
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = Array.isArray(value) ? value.filter(Boolean).join(' ') : value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(visibleText(String(c))));
  }
}

// Replaces el's children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// Re-renders `el` only when `data` changed since the last call, so that
// polling does not reset what the user is looking at (scroll, selection).
const lastRendered = new WeakMap();
export function renderIfChanged(el, data, render) {
  const key = JSON.stringify(data);
  if (lastRendered.get(el) === key) return false;
  lastRendered.set(el, key);
  fill(el, render(data));
  return true;
}
