// One job: its fields, payload (pretty-printed, cut when large), attempt
// timeline, last error with its failure class, the jobs it depends on and
// those that depend on it (links), checkpoint, progress, result summary with
// its checksum and a download, and the actions its state allows.

import { api } from './api.js';
import { confirmDialog, runOne } from './bulk.js';
import { announce, clear, formatBytes, formatTime, h, prettyJson, statusBadge } from './dom.js';

const PAYLOAD_SHOWN = 10_000;

function jsonBlock(label, value, testId) {
  const shown = prettyJson(value, PAYLOAD_SHOWN);
  const pre = h('pre', { class: 'json', 'data-testid': testId, tabindex: '0', 'aria-label': label }, shown.text);
  if (!shown.truncated) return pre;
  const more = h('button', { type: 'button' }, `Show all ${shown.length} characters`);
  more.addEventListener('click', () => {
    pre.textContent = prettyJson(value, Infinity).text;
    more.remove();
  });
  return h('div', {}, pre, h('p', { class: 'note' }, `Cut at ${PAYLOAD_SHOWN} of ${shown.length} characters. `, more));
}

// Parents and children as links to their own pages; the children are the first 100 (GET /jobs/{id} bounds them).
function jobLinks(ids, testId, none) {
  if (ids.length === 0) return h('p', { class: 'note' }, none);
  return h('ul', { class: 'job-links', 'data-testid': testId }, ids.map((jobId) => h('li', {}, h('a', { href: `#/jobs/${encodeURIComponent(jobId)}`, class: 'mono' }, jobId))));
}

function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.flatMap(([name, value]) => [h('dt', {}, name), h('dd', {}, value)]));
}

function timeline(attempts) {
  if (attempts.length === 0) return h('p', { class: 'note' }, 'No attempts yet.');
  return h(
    'ol',
    { class: 'timeline', 'data-testid': 'attempts' },
    attempts.map((a) =>
      h(
        'li',
        { class: `outcome-${a.outcome ?? 'running'}` },
        h('strong', {}, `#${a.attempt}`),
        ` ${a.outcome ?? 'running'}`,
        a.errorCode === null ? '' : [' · ', h('code', {}, a.errorCode)],
        h('div', { class: 'note' }, `worker ${a.workerId} · epoch ${a.epoch} · ${formatTime(a.startedAt)} → ${a.endedAt === null ? 'now' : formatTime(a.endedAt)}`),
      ),
    ),
  );
}

async function download(id, contentType) {
  try {
    const response = await api.raw(`/jobs/${encodeURIComponent(id)}/result`);
    const url = URL.createObjectURL(new Blob([await response.arrayBuffer()], { type: 'application/octet-stream' }));
    const link = h('a', { href: url, download: `${id}.result` });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
    announce(`Downloaded the result (${contentType}).`);
  } catch (error) {
    announce(`Could not download: ${error.message}`, 'error');
  }
}

function actionsFor(job, reload) {
  const buttons = [];
  const run = async (action, outcome) => {
    const label = action === 'reconcile' ? `reconcile as ${outcome}` : action;
    if (!(await confirmDialog(`${label} this job?`, `This will ${label} job ${job.id}.`))) return;
    try {
      await runOne(job.id, action, outcome);
      announce(`Done: ${label}.`);
    } catch (error) {
      announce(`Failed: ${error.message}`, 'error');
    }
    await reload();
  };
  const button = (text, testId, onclick) => {
    const el = h('button', { type: 'button', 'data-testid': testId }, text);
    el.addEventListener('click', onclick);
    return el;
  };
  if (job.status === 'dead') buttons.push(button('Requeue', 'requeue', () => run('requeue')));
  if (job.status === 'queued' || job.status === 'waiting' || (job.status === 'running' && !job.cancelRequested)) buttons.push(button('Cancel', 'cancel', () => run('cancel')));
  if (job.status === 'unknown') {
    for (const outcome of ['requeue', 'succeeded', 'dead']) buttons.push(button(`Reconcile as ${outcome}`, `reconcile-${outcome}`, () => run('reconcile', outcome)));
  }
  return buttons.length === 0 ? null : h('div', { class: 'actions', role: 'group', 'aria-label': 'Actions' }, buttons);
}

export function renderJobPage(main, id) {
  const box = h('div', {}, h('p', { class: 'note' }, 'Loading…'));
  main.append(h('p', {}, h('a', { href: '#/jobs' }, '← Jobs')), box);
  let stopped = false;

  async function load() {
    let detail;
    try {
      detail = await api.get(`/jobs/${encodeURIComponent(id)}/detail`);
    } catch (error) {
      if (!stopped) clear(box).append(h('h1', {}, 'Job'), h('p', { class: 'error', role: 'alert' }, error.status === 404 ? `No job ${id}.` : `Could not read the job: ${error.message}`));
      return;
    }
    if (stopped) return;
    const { job, payload, checkpoint, result, attempts } = detail;
    clear(box).append(
      h('h1', { class: 'job-title' }, h('span', { class: 'mono' }, job.id), ' ', statusBadge(job.status), job.cancelRequested ? h('span', { class: 'badge' }, 'cancel requested') : ''),
      actionsFor(job, load) ?? '',
      facts([
        ['kind', job.kind],
        ['status', h('span', { 'data-testid': 'job-status' }, job.status)],
        ['attempts', `${job.attempts} of ${job.maxAttempts}`],
        ['priority', String(job.priority)],
        ['epoch', String(job.epoch)],
        ['created', formatTime(job.createdAt)],
        ['run after', formatTime(job.runAfter)],
        ['started', formatTime(job.startedAt)],
        ['finished', formatTime(job.finishedAt)],
        ['deadline', formatTime(job.deadlineAt)],
        ['concurrency key', job.concurrencyKey === null ? '—' : h('code', { 'data-testid': 'concurrency-key' }, job.concurrencyKey)],
      ]),
      h('h2', {}, 'Depends on'),
      jobLinks(job.dependsOn, 'parents', 'No parents.'),
      h('h2', {}, 'Needed by'),
      jobLinks(job.children, 'children', 'No job depends on this one.'),
      job.children.length >= 100 ? h('p', { class: 'note' }, 'The first 100 are shown.') : '',
      h('h2', {}, 'Last error'),
      job.lastError === null
        ? h('p', { class: 'note' }, 'None.')
        : h('div', { class: 'last-error', 'data-testid': 'last-error' }, h('p', {}, h('code', {}, job.lastError.code), ' · failure class ', h('strong', {}, job.lastError.class)), h('pre', { class: 'message' }, job.lastError.message)),
      h('h2', {}, 'Attempts'),
      timeline(attempts),
      h('h2', {}, 'Payload'),
      jsonBlock('Payload', payload, 'payload'),
      h('h2', {}, 'Progress'),
      job.progress === null ? h('p', { class: 'note' }, 'None reported.') : jsonBlock('Progress', job.progress, 'progress'),
      h('h2', {}, 'Checkpoint'),
      checkpoint === null ? h('p', { class: 'note' }, 'None.') : h('div', {}, h('p', {}, `step ${checkpoint.step}`), jsonBlock('Checkpoint state', checkpoint.state, 'checkpoint')),
      h('h2', {}, 'Result'),
      result === null
        ? h('p', { class: 'note' }, job.status === 'succeeded' ? 'Succeeded without a result.' : 'None yet.')
        : h(
            'div',
            {},
            facts([
              ['content type', result.contentType],
              ['size', formatBytes(result.bytes)],
              ['SHA-256', h('code', { 'data-testid': 'checksum', class: 'mono wrap' }, result.checksum)],
            ]),
            (() => {
              const button = h('button', { type: 'button' }, 'Download result');
              button.addEventListener('click', () => download(job.id, result.contentType));
              return button;
            })(),
            job.result === null || job.result === undefined ? '' : jsonBlock('Result', job.result, 'result'),
          ),
    );
  }

  void load();
  return () => {
    stopped = true;
  };
}
