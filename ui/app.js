// The dashboard's shell: sign-in with an admin key (kept in sessionStorage),
// the router over the URL fragment (#/, #/jobs?…, #/jobs/<id>), and the
// navigation. Each page returns a function that stops its polling.

import { api, ApiError, session } from './api.js';
import { clear, h } from './dom.js';
import { renderJobList } from './job-list.js';
import { renderJobPage } from './job-page.js';
import { renderOverview } from './overview.js';

const main = document.getElementById('main');
const nav = document.getElementById('nav');
let stopPage = () => {};

function renderSignIn(message) {
  nav.hidden = true;
  const input = h('input', { type: 'password', name: 'key', id: 'key', required: true, autocomplete: 'off', spellcheck: 'false', maxlength: 256 });
  const problem = h('p', { class: 'error', role: 'alert' }, message ?? '');
  const form = h(
    'form',
    { class: 'sign-in', 'aria-label': 'Sign in' },
    h('h1', {}, 'Sign in'),
    h('p', {}, 'An admin API key (', h('code', {}, 'leasehold keys create --role admin'), '). It stays in this tab and is sent only in the Authorization header.'),
    h('label', { for: 'key' }, 'Admin key'),
    input,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in'),
    problem,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    session.signIn(input.value.trim());
    try {
      await api.get('/stats');
      route();
    } catch (error) {
      session.signOut();
      problem.textContent = error instanceof ApiError && error.status === 403 ? 'That key is not an admin key.' : `Sign-in failed: ${error.message}`;
    }
  });
  clear(main).append(form);
  input.focus();
}

function route() {
  // The skip link's target is not a page.
  if (location.hash === '#main') {
    main.focus();
    return;
  }
  stopPage();
  stopPage = () => {};
  if (session.key() === null) {
    renderSignIn();
    return;
  }
  nav.hidden = false;
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, search = ''] = hash.split('?', 2);
  const params = new URLSearchParams(search);
  for (const link of nav.querySelectorAll('a')) link.toggleAttribute('aria-current', link.getAttribute('href') === `#${hash}`);
  clear(main);
  const jobMatch = /^\/jobs\/([^/]+)$/.exec(path);
  if (jobMatch !== null) stopPage = renderJobPage(main, decodeURIComponent(jobMatch[1]));
  else if (path === '/jobs') stopPage = renderJobList(main, params);
  else stopPage = renderOverview(main);
}

document.getElementById('sign-out').addEventListener('click', () => {
  session.signOut();
  route();
});
window.addEventListener('leasehold:signed-out', () => {
  stopPage();
  stopPage = () => {};
  renderSignIn('The key was refused (revoked or unknown); sign in again.');
});
window.addEventListener('hashchange', route);
route();
