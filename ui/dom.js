// DOM helpers. Everything shown goes in as text nodes or attributes set one by
// one: payloads, error messages, kinds and worker ids are untrusted, and no
// string from the API is ever parsed as HTML.

const SVG_NS = 'http://www.w3.org/2000/svg';

function setProps(el, props) {
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (value === true) el.setAttribute(name, '');
    else el.setAttribute(name, String(value));
  }
}

function appendAll(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** An element: h('td', { class: 'x' }, 'text', otherNode). */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  appendAll(el, children);
  return el;
}

/** An SVG element, the same way. */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setProps(el, props);
  appendAll(el, children);
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

/** Shows a message in the live region (read out by screen readers). */
export function announce(text, kind = 'info') {
  const box = document.getElementById('status');
  if (box === null) return;
  box.textContent = text;
  box.dataset.kind = kind;
  box.classList.add('shown');
  clearTimeout(announce.timer);
  announce.timer = setTimeout(() => box.classList.remove('shown'), 6000);
}

export function formatAge(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const seconds = ms / 1000;
  if (seconds < 90) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  const minutes = seconds / 60;
  if (minutes < 90) return `${Math.round(minutes)} min`;
  const hours = minutes / 60;
  return hours < 48 ? `${hours.toFixed(1)} h` : `${Math.round(hours / 24)} d`;
}

export function formatTime(iso) {
  if (iso === null || iso === undefined) return '–';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

export function formatBytes(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 ** 2) return `${(bytes / 1024).toFixed(1)} KiB`;
  if (bytes < 1024 ** 3) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
}

/** Pretty JSON, cut at `max` characters; `truncated` says whether it was. */
export function prettyJson(value, max) {
  let text;
  try {
    text = JSON.stringify(value, null, 2) ?? 'null';
  } catch {
    text = String(value);
  }
  return text.length > max ? { text: text.slice(0, max), truncated: true, length: text.length } : { text, truncated: false, length: text.length };
}

export function statusBadge(status) {
  return h('span', { class: `badge status-${status}` }, status);
}
