// The API as the dashboard calls it. The admin key lives in sessionStorage
// (gone when the tab closes) and travels only in the Authorization header; it
// is never put in a URL, so it cannot reach a log, a referrer or history.

const KEY_ITEM = 'leasehold.adminKey';
/** The coordinator's path prefix: whatever comes before /ui. */
const BASE = location.pathname.replace(/\/ui(\/.*)?$/, '');

export const session = {
  key: () => sessionStorage.getItem(KEY_ITEM),
  signIn: (key) => sessionStorage.setItem(KEY_ITEM, key),
  signOut: () => sessionStorage.removeItem(KEY_ITEM),
};

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function send(method, path, body, raw) {
  const key = session.key();
  if (key === null) throw new ApiError(401, 'unauthorized', 'not signed in');
  const headers = { authorization: `Bearer ${key}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  let response;
  try {
    response = await fetch(BASE + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer' });
  } catch {
    throw new ApiError(0, 'network', 'the coordinator did not answer');
  }
  if (response.status === 401) {
    session.signOut();
    window.dispatchEvent(new Event('leasehold:signed-out'));
  }
  if (response.ok && raw) return response;
  const text = await response.text();
  let json = null;
  try {
    json = text === '' ? null : JSON.parse(text);
  } catch {
    json = null;
  }
  if (!response.ok) throw new ApiError(response.status, json?.error?.code ?? 'http_error', json?.error?.message ?? `HTTP ${response.status}`);
  return json;
}

export const api = {
  get: (path) => send('GET', path),
  post: (path, body) => send('POST', path, body ?? {}),
  raw: (path) => send('GET', path, undefined, true),
  text: async (path) => (await send('GET', path, undefined, true)).text(),
};

/** A query string from the set fields of an object. */
export function query(fields) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(fields)) if (value !== undefined && value !== null && value !== '') search.set(name, String(value));
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}
