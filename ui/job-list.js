// The job list: filters (status, kind, error code, creation time), search by
// id, pages by the API's cursors, and actions on a selection or on everything
// the filter matches. The filter lives in the URL's fragment (never the key).

import { api, query } from './api.js';
import { ACTION_STATUSES, runOnFilter, runOnSelection } from './bulk.js';
import { announce, clear, formatTime, h, statusBadge } from './dom.js';

const PAGE_SIZE = 50;
const BULK_LIMIT = 1000;
const STATUSES = ['waiting', 'queued', 'running', 'succeeded', 'dead', 'cancelled', 'unknown'];
const FILTER_FIELDS = ['status', 'kind', 'errorCode', 'createdAfter', 'createdBefore'];

/** datetime-local value ↔ RFC 3339. */
function toIso(local) {
  if (local === '') return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}
function toLocal(iso) {
  if (iso === undefined) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

function field(label, control) {
  return h('label', { class: 'field' }, h('span', {}, label), control);
}

/** The filter form, and a function that fills the kind field's suggestions once GET /kinds answers. */
function filterForm(filter) {
  const status = h('select', { name: 'status' }, h('option', { value: '' }, 'any'), STATUSES.map((s) => h('option', { value: s, selected: filter.status === s }, s)));
  const kindList = h('datalist', { id: 'kind-options' });
  const form = h(
    'form',
    { class: 'filters', role: 'search', 'aria-label': 'Filter jobs' },
    field('Status', status),
    field('Kind', h('input', { name: 'kind', list: 'kind-options', value: filter.kind ?? '', autocomplete: 'off', maxlength: 128 })),
    kindList,
    field('Error code', h('input', { name: 'errorCode', value: filter.errorCode ?? '', autocomplete: 'off', maxlength: 128 })),
    field('Created after', h('input', { name: 'createdAfter', type: 'datetime-local', value: toLocal(filter.createdAfter) })),
    field('Created before', h('input', { name: 'createdBefore', type: 'datetime-local', value: toLocal(filter.createdBefore) })),
    h('button', { type: 'submit', class: 'primary' }, 'Filter'),
    h('a', { href: '#/jobs', class: 'button' }, 'Clear'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const next = {
      status: data.get('status') || undefined,
      kind: String(data.get('kind') ?? '').trim() || undefined,
      errorCode: String(data.get('errorCode') ?? '').trim() || undefined,
      createdAfter: toIso(String(data.get('createdAfter') ?? '')),
      createdBefore: toIso(String(data.get('createdBefore') ?? '')),
    };
    location.hash = `#/jobs${query(next)}`;
  });
  return { form, suggestKinds: (kinds) => kindList.replaceChildren(...kinds.map((kind) => h('option', { value: kind }))) };
}

function searchForm() {
  const input = h('input', { name: 'id', placeholder: 'job id', autocomplete: 'off', maxlength: 64, 'aria-label': 'Job id' });
  const form = h('form', { class: 'search', role: 'search', 'aria-label': 'Find a job by id' }, input, h('button', { type: 'submit' }, 'Open'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const id = input.value.trim();
    if (id !== '') location.hash = `#/jobs/${encodeURIComponent(id)}`;
  });
  return form;
}

function errorCell(job) {
  if (job.lastError === null) return h('td', {}, '');
  return h('td', { class: 'error-cell' }, h('code', {}, job.lastError.code), ' ', h('span', { class: 'class' }, job.lastError.class), h('div', { class: 'message' }, job.lastError.message.slice(0, 200)));
}

export function renderJobList(main, params) {
  const filter = Object.fromEntries(FILTER_FIELDS.map((name) => [name, params.get(name) ?? undefined]).filter(([, v]) => v !== undefined && v !== ''));
  const cursors = [undefined];
  let page = { jobs: [], nextCursor: null };
  const selected = new Set();
  const tableBox = h('div', { class: 'scroll' });
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  const formBox = h('div');
  const bulkAction = h('select', { name: 'action', 'aria-label': 'Action' }, h('option', { value: 'requeue' }, 'requeue'), h('option', { value: 'cancel' }, 'cancel'), h('option', { value: 'reconcile' }, 'reconcile'));
  const outcome = h('select', { name: 'outcome', 'aria-label': 'Reconcile as' }, ['requeue', 'succeeded', 'dead'].map((o) => h('option', { value: o }, `as ${o}`)));
  const onSelection = h('button', { type: 'button', 'data-testid': 'apply-selected' }, 'Apply to selected');
  const onFilter = h('button', { type: 'button', 'data-testid': 'apply-matching' }, 'Apply to all matching');
  const actions = h('div', { class: 'actions', role: 'group', 'aria-label': 'Actions' }, bulkAction, outcome, onSelection, onFilter);
  main.append(h('h1', {}, 'Jobs'), searchForm(), formBox, actions, tableBox, pager);
  let stopped = false;

  const { form, suggestKinds } = filterForm(filter);
  formBox.append(form);
  api
    .get('/kinds')
    .then((answer) => suggestKinds(answer.kinds.map((k) => k.kind)))
    .catch(() => undefined); // Suggestions only: the field takes any kind.

  function renderTable() {
    const allBox = h('input', { type: 'checkbox', 'aria-label': 'Select all on this page', checked: page.jobs.length > 0 && page.jobs.every((j) => selected.has(j.id)) });
    allBox.addEventListener('change', () => {
      for (const job of page.jobs) allBox.checked ? selected.add(job.id) : selected.delete(job.id);
      renderTable();
    });
    const rows = page.jobs.map((job) => {
      const box = h('input', { type: 'checkbox', 'aria-label': `Select ${job.id}`, checked: selected.has(job.id) });
      box.addEventListener('change', () => (box.checked ? selected.add(job.id) : selected.delete(job.id)));
      return h(
        'tr',
        { 'data-id': job.id },
        h('td', {}, box),
        h('td', {}, h('a', { href: `#/jobs/${encodeURIComponent(job.id)}`, class: 'mono' }, job.id)),
        h('td', {}, job.kind),
        h('td', {}, statusBadge(job.status)),
        h('td', { class: 'num' }, `${job.attempts}/${job.maxAttempts}`),
        h('td', {}, formatTime(job.createdAt)),
        errorCell(job),
      );
    });
    const table = h(
      'table',
      { class: 'grid-table jobs', 'data-testid': 'job-table' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, allBox), ['id', 'kind', 'status', 'attempts', 'created', 'last error'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows),
    );
    const empty = page.jobs.length === 0 ? h('p', { class: 'note' }, page.nextCursor === null ? 'No jobs match.' : 'No matches among the rows read; Older reads further.') : null;
    clear(tableBox).append(table, empty ?? '');
    const older = h('button', { type: 'button', disabled: page.nextCursor === null }, 'Older →');
    older.addEventListener('click', () => {
      cursors.push(page.nextCursor);
      void load();
    });
    const newer = h('button', { type: 'button', disabled: cursors.length <= 1 }, '← Newer');
    newer.addEventListener('click', () => {
      cursors.pop();
      void load();
    });
    clear(pager).append(newer, h('span', {}, `page ${cursors.length}`), older);
  }

  async function load() {
    try {
      page = await api.get(`/jobs${query({ ...filter, limit: PAGE_SIZE, cursor: cursors.at(-1) })}`);
      if (!stopped) renderTable();
    } catch (error) {
      if (!stopped) clear(tableBox).append(h('p', { class: 'error', role: 'alert' }, `Could not list jobs: ${error.message}`));
    }
  }

  async function act(run) {
    try {
      const answer = await run();
      if (answer.declined) return;
      if (!answer.asked) announce(`No job here is in a state that ${bulkAction.value} applies to (${ACTION_STATUSES[bulkAction.value].join(', ')}).`, 'warn');
      else announce(`Matched ${answer.matched}, changed ${answer.changed}.`);
      selected.clear();
      await load();
    } catch (error) {
      announce(`Failed: ${error.message}`, 'error');
    }
  }
  onSelection.addEventListener('click', () => act(() => runOnSelection(page.jobs.filter((j) => selected.has(j.id)), bulkAction.value, outcome.value)));
  onFilter.addEventListener('click', () => act(() => runOnFilter(filter, bulkAction.value, outcome.value, BULK_LIMIT)));

  void load();
  return () => {
    stopped = true;
  };
}
