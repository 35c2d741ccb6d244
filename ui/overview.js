// The overview: GET /stats every 2 s (a few counters, no job scan), drawn as
// count tiles and charts over the last hour. The history is what this tab has
// seen since it opened (kept while you move between pages); throughput is the
// change in finished counts between two samples. The acceptance and
// completion ratios come from the SLI counters of GET /metrics (since the
// coordinator started), read every 15 s, with the busiest groups' waiting and
// running jobs (docs/FAIRNESS.md). The registered kinds (GET /kinds) are
// listed with their limits and a Pause / Resume button each.

import { api } from './api.js';
import { lineChart } from './charts.js';
import { announce, clear, formatAge, formatBytes, h } from './dom.js';

const POLL_MS = 2000;
const KIND_POLL_MS = 10_000;
const SLI_POLL_MS = 15_000;
/** The completion objective of docs/alerts.yml. */
const COMPLETION_OBJECTIVE = 0.99;
const HOUR_MS = 3_600_000;
const KIND_SAMPLE = 1000;
const STATUSES = ['waiting', 'queued', 'running', 'succeeded', 'dead', 'cancelled', 'unknown'];

/** [{ at, stats }], oldest first, at most an hour. */
const history = [];

function record(stats) {
  const at = Date.now();
  history.push({ at, stats });
  while (history.length > 0 && history[0].at < at - HOUR_MS) history.shift();
}

function rate(pick) {
  const points = [];
  for (let i = 1; i < history.length; i += 1) {
    const before = history[i - 1];
    const after = history[i];
    const minutes = (after.at - before.at) / 60_000;
    if (minutes > 0) points.push([after.at, Math.max(0, pick(after.stats) - pick(before.stats)) / minutes]);
  }
  return points;
}

function level(pick) {
  return history.map(({ at, stats }) => [at, pick(stats)]);
}

function tile(label, id, link) {
  const body = [h('span', { class: 'tile-label' }, label), h('span', { class: 'tile-value', 'data-testid': id }, '–')];
  return link === undefined ? h('div', { class: 'tile' }, body) : h('a', { class: 'tile', href: link }, body);
}

/** Sums of the SLI counters in a Prometheus text exposition: { acceptanceGood, acceptanceValid, completionGood, completionAll }. */
export function sliCounters(text) {
  const sums = { acceptanceGood: 0, acceptanceValid: 0, completionGood: 0, completionAll: 0 };
  for (const line of text.split('\n')) {
    const match = /^(leasehold_sli_\w+)(?:\{([^}]*)\})? ([0-9.eE+-]+)$/.exec(line);
    if (match === null) continue;
    const value = Number(match[3]);
    if (!Number.isFinite(value)) continue;
    if (match[1] === 'leasehold_sli_acceptance_good_total') sums.acceptanceGood += value;
    else if (match[1] === 'leasehold_sli_acceptance_valid_total') sums.acceptanceValid += value;
    else if (match[1] === 'leasehold_sli_completion_total') {
      sums.completionAll += value;
      if (/(^|,)outcome="good"/.test(match[2] ?? '')) sums.completionGood += value;
    }
  }
  return sums;
}

/** `name="value"` pairs of a sample's labels, unescaped. */
function labelsOf(text) {
  const labels = {};
  for (const [, name, value] of (text ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
    labels[name] = value.replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
  }
  return labels;
}

/**
 * The per-group gauges of GET /metrics (leasehold_group_jobs_waiting and _running): the busiest groups of each
 * tenant, and the rest summed under kind and group `*`. Rows of { kind, group, waiting, running }, busiest first.
 */
export function groupGauges(text) {
  const rows = new Map();
  for (const line of text.split('\n')) {
    const match = /^leasehold_group_jobs_(waiting|running)\{([^}]*)\} ([0-9.eE+-]+)$/.exec(line);
    if (match === null) continue;
    const labels = labelsOf(match[2]);
    const key = `${labels.kind}\u0000${labels.group}`;
    const row = rows.get(key) ?? { kind: labels.kind ?? '', group: labels.group ?? '', waiting: 0, running: 0 };
    row[match[1]] += Number(match[3]) || 0;
    rows.set(key, row);
  }
  return [...rows.values()].sort((a, b) => b.waiting + b.running - (a.waiting + a.running));
}

function renderGroups(box, rows) {
  clear(box);
  if (rows.length === 0) return;
  box.append(
    h('h2', {}, 'Busiest groups'),
    h(
      'div',
      { class: 'scroll' },
      h(
        'table',
        { class: 'grid-table', 'data-testid': 'groups' },
        h('thead', {}, h('tr', {}, ['kind', 'group', 'waiting', 'running'].map((name) => h('th', { scope: 'col' }, name)))),
        h(
          'tbody',
          {},
          rows.map((row) =>
            row.group === '*'
              ? h('tr', {}, h('th', { scope: 'row', colspan: '2' }, 'all other groups'), h('td', { class: 'num' }, String(row.waiting)), h('td', { class: 'num' }, String(row.running)))
              : h('tr', {}, h('th', { scope: 'row' }, row.kind), h('td', {}, row.group), h('td', { class: 'num' }, String(row.waiting)), h('td', { class: 'num' }, String(row.running))),
          ),
        ),
      ),
    ),
  );
}

function ratio(good, all) {
  return all === 0 ? '–' : `${((good / all) * 100).toFixed(2)} %`;
}

/**
 * The tiles are built once and their figures replaced in place, so a tile
 * link that has the keyboard focus keeps it across refreshes; the charts
 * (nothing focusable in them) are drawn again.
 */
function statsView(box) {
  const tiles = h(
    'div',
    {},
    h('section', { class: 'tiles', 'aria-label': 'Jobs by status' }, STATUSES.map((status) => tile(status, `count-${status}`, `#/jobs?status=${status}`))),
    h(
      'section',
      { class: 'tiles', 'aria-label': 'Health' },
      tile('oldest available', 'oldest-available'),
      tile('lease expiries', 'lease-expirations'),
      tile('acceptance', 'acceptance-ratio'),
      tile(`completion (objective ${COMPLETION_OBJECTIVE * 100} %)`, 'completion-ratio'),
      tile('mean wait', 'mean-wait'),
      tile('mean attempt', 'mean-attempt'),
      tile('storage', 'storage'),
    ),
  );
  const charts = h('section', { class: 'charts', 'aria-label': 'The last hour' });
  let shown = false;
  const set = (id, text) => {
    const el = tiles.querySelector(`[data-testid="${id}"]`);
    if (el !== null && el.textContent !== text) el.textContent = text;
  };
  const showSli = (sums) => {
    set('acceptance-ratio', ratio(sums.acceptanceGood, sums.acceptanceValid));
    set('completion-ratio', ratio(sums.completionGood, sums.completionAll));
    const completion = tiles.querySelector('[data-testid="completion-ratio"]')?.parentElement;
    completion?.classList.toggle('below-objective', sums.completionAll > 0 && sums.completionGood / sums.completionAll < COMPLETION_OBJECTIVE);
  };
  const showStats = (stats) => {
    if (!shown) {
      clear(box).append(tiles, charts);
      shown = true;
    }
    const counts = stats.counts;
    for (const status of STATUSES) set(`count-${status}`, String(counts[status] ?? 0));
    set('oldest-available', formatAge(stats.oldestAvailableAgeMs));
    set('lease-expirations', String(stats.leaseExpirations));
    set('mean-wait', formatAge(stats.meanWaitMs));
    set('mean-attempt', formatAge(stats.meanAttemptRunMs));
    set('storage', formatBytes(stats.storageBytes));
    const now = Date.now();
    const window = { from: now - HOUR_MS, to: now };
    clear(charts).append(
      lineChart({ title: 'Throughput (jobs per minute)', unit: '/min', window, series: [{ name: 'succeeded', points: rate((x) => x.counts.succeeded ?? 0) }, { name: 'dead', points: rate((x) => x.counts.dead ?? 0) }] }),
      lineChart({ title: 'Queue depth', window, series: [{ name: 'queued', points: level((x) => x.counts.queued ?? 0) }, { name: 'running', points: level((x) => x.counts.running ?? 0) }] }),
      lineChart({ title: 'Dead jobs and lease expiries', window, series: [{ name: 'dead', points: level((x) => x.counts.dead ?? 0) }, { name: 'lease expiries', points: level((x) => x.leaseExpirations) }, { name: 'unknown', points: level((x) => x.counts.unknown ?? 0) }] }),
    );
  };
  return { showSli, showStats };
}

function renderKinds(box, jobs) {
  const byKind = new Map();
  for (const job of jobs) {
    const row = byKind.get(job.kind) ?? Object.fromEntries(STATUSES.map((status) => [status, 0]));
    row[job.status] += 1;
    byKind.set(job.kind, row);
  }
  const kinds = [...byKind.keys()].sort();
  clear(box).append(
    h('h2', {}, 'By kind'),
    h('p', { class: 'note' }, `Among the newest ${jobs.length} jobs.`),
    h(
      'div',
      { class: 'scroll' },
      h(
        'table',
        { class: 'grid-table' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'kind'), STATUSES.map((status) => h('th', { scope: 'col', class: 'num' }, status)))),
        h(
          'tbody',
          {},
          kinds.map((kind) =>
            h(
              'tr',
              {},
              h('th', { scope: 'row' }, h('a', { href: `#/jobs?kind=${encodeURIComponent(kind)}` }, kind)),
              STATUSES.map((status) => h('td', { class: 'num' }, String(byKind.get(kind)[status]))),
            ),
          ),
        ),
      ),
    ),
  );
}

function limitsText(kind) {
  const parts = [];
  if (kind.maxConcurrent !== null) parts.push(`at most ${kind.maxConcurrent} at once`);
  if (kind.rate !== null) parts.push(`${kind.rate.limit} per ${formatAge(kind.rate.perMs)}`);
  const groups = kind.groups ?? null;
  if (groups !== null && groups.maxConcurrent !== undefined) parts.push(`at most ${groups.maxConcurrent} at once per group`);
  if (groups !== null && groups.rate !== undefined) parts.push(`${groups.rate.limit} per ${formatAge(groups.rate.perMs)} per group`);
  if (groups !== null && groups.weights !== undefined) parts.push(`${Object.keys(groups.weights).length} group weights`);
  return parts.length === 0 ? '–' : parts.join(', ');
}

/** The registry with a Pause or Resume button per kind; `reload` reads GET /kinds again. */
function renderRegistry(box, kinds, reload) {
  const toggle = async (kind, button) => {
    const action = kind.paused ? 'resume' : 'pause';
    button.disabled = true;
    try {
      await api.post(`/kinds/${encodeURIComponent(kind.kind)}/${action}`);
      announce(`Kind ${kind.kind} ${action === 'pause' ? 'paused' : 'resumed'}.`);
    } catch (error) {
      announce(`Could not ${action} ${kind.kind}: ${error.message}`, 'error');
    }
    await reload();
  };
  clear(box).append(
    h('h2', {}, 'Registered kinds'),
    kinds.length === 0
      ? h('p', { class: 'note' }, 'No kinds registered.')
      : h(
          'div',
          { class: 'scroll' },
          h(
            'table',
            { class: 'grid-table', 'data-testid': 'kind-registry' },
            h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'kind'), h('th', { scope: 'col' }, 'leasing'), h('th', { scope: 'col' }, 'limits'), h('th', { scope: 'col' }, ''))),
            h(
              'tbody',
              {},
              kinds.map((kind) => {
                const button = h('button', { type: 'button', 'data-kind': kind.kind, 'aria-label': `${kind.paused ? 'Resume' : 'Pause'} ${kind.kind}` }, kind.paused ? 'Resume' : 'Pause');
                button.addEventListener('click', () => void toggle(kind, button));
                return h('tr', {}, h('th', { scope: 'row' }, kind.kind), h('td', {}, kind.paused ? 'paused' : 'active'), h('td', {}, limitsText(kind)), h('td', {}, button));
              }),
            ),
          ),
        ),
  );
}

export function renderOverview(main) {
  const statsBox = h('div', { 'aria-live': 'off' }, h('p', { class: 'note' }, 'Loading…'));
  const view = statsView(statsBox);
  const kindBox = h('section', { class: 'kinds' });
  const registryBox = h('section', { class: 'kinds', 'data-testid': 'registry' });
  const groupBox = h('section', { class: 'kinds', 'data-testid': 'group-box' });
  const updated = h('p', { class: 'note', 'data-testid': 'updated' });
  main.append(h('h1', {}, 'Overview'), updated, statsBox, kindBox, groupBox, registryBox);
  let stopped = false;
  let statsTimer;
  let kindTimer;
  let sliTimer;

  async function pollStats() {
    try {
      const stats = await api.get('/stats');
      if (stopped) return;
      record(stats);
      view.showStats(stats);
      updated.textContent = `Updated ${new Date().toLocaleTimeString()} · every ${POLL_MS / 1000} s`;
    } catch (error) {
      if (!stopped) updated.textContent = `Could not read /stats: ${error.message}`;
    }
    if (!stopped) statsTimer = setTimeout(pollStats, POLL_MS);
  }

  async function pollKinds() {
    try {
      const page = await api.get(`/jobs?limit=${KIND_SAMPLE}`);
      if (!stopped) renderKinds(kindBox, page.jobs);
    } catch {
      // The status tiles show the error; this table keeps its last figures.
    }
    await loadRegistry();
    if (!stopped) kindTimer = setTimeout(pollKinds, KIND_POLL_MS);
  }

  async function loadRegistry() {
    try {
      const answer = await api.get('/kinds');
      if (!stopped) renderRegistry(registryBox, answer.kinds, loadRegistry);
    } catch {
      // As above: the table keeps what it showed.
    }
  }

  async function pollSli() {
    try {
      const text = await api.text('/metrics');
      if (!stopped) view.showSli(sliCounters(text));
      if (!stopped) renderGroups(groupBox, groupGauges(text));
    } catch {
      // A coordinator without /metrics: the ratio tiles stay at –.
    }
    if (!stopped) sliTimer = setTimeout(pollSli, SLI_POLL_MS);
  }

  void pollStats();
  void pollKinds();
  void pollSli();
  return () => {
    stopped = true;
    clearTimeout(statsTimer);
    clearTimeout(kindTimer);
    clearTimeout(sliTimer);
  };
}
