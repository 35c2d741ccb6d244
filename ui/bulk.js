// Confirmations and the actions on many jobs: on a selection (one call per
// job, the same as on the job page) or on everything a filter matches
// (POST /jobs/bulk, first as a dry run so the confirmation can say how many
// jobs it will touch).

import { api } from './api.js';
import { h } from './dom.js';

export const ACTION_STATUSES = { requeue: ['dead'], reconcile: ['unknown'], cancel: ['waiting', 'queued', 'running'] };

/** A modal <dialog>: resolves true on Confirm, false on Cancel or Escape. */
export function confirmDialog(title, message) {
  return new Promise((resolve) => {
    const confirm = h('button', { type: 'submit', value: 'yes', class: 'primary', 'data-testid': 'confirm' }, 'Confirm');
    const dialog = h(
      'dialog',
      { class: 'confirm', 'aria-labelledby': 'confirm-title' },
      h(
        'form',
        { method: 'dialog' },
        h('h2', { id: 'confirm-title' }, title),
        h('p', { 'data-testid': 'confirm-message' }, message),
        h('div', { class: 'buttons' }, h('button', { type: 'submit', value: 'no' }, 'Cancel'), confirm),
      ),
    );
    dialog.addEventListener('close', () => {
      resolve(dialog.returnValue === 'yes');
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
    confirm.focus();
  });
}

function describe(action, outcome) {
  return action === 'reconcile' ? `reconcile (as ${outcome})` : action;
}

/** One job's action, as the single-job routes take it. */
export function runOne(id, action, outcome) {
  const path = `/jobs/${encodeURIComponent(id)}/${action}`;
  return api.post(path, action === 'reconcile' ? { outcome } : {});
}

/** The action on each selected job that is in a state it applies to; answers { matched, changed }. */
export async function runOnSelection(jobs, action, outcome) {
  const eligible = jobs.filter((job) => ACTION_STATUSES[action].includes(job.status));
  if (eligible.length === 0) return { matched: 0, changed: 0, asked: false };
  const ok = await confirmDialog(`${describe(action, outcome)} ${eligible.length} selected job${eligible.length === 1 ? '' : 's'}?`, `This will ${describe(action, outcome)} ${eligible.length} of the ${jobs.length} selected jobs.`);
  if (!ok) return { matched: eligible.length, changed: 0, asked: true, declined: true };
  let changed = 0;
  for (const job of eligible) {
    try {
      await runOne(job.id, action, outcome);
      changed += 1;
    } catch {
      // Moved meanwhile (409) or gone (404): counted as matched, not changed.
    }
  }
  return { matched: eligible.length, changed, asked: true };
}

/** The action on everything the filter matches: a dry run for the count, a confirmation, then the run. */
export async function runOnFilter(filter, action, outcome, limit) {
  const body = { action, filter, limit, ...(action === 'reconcile' ? { outcome } : {}) };
  const dry = await api.post('/jobs/bulk', { ...body, dryRun: true });
  if (dry.matched === 0) return { matched: 0, changed: 0, asked: false };
  const capped = dry.matched >= limit ? ` (the limit; run it again for more)` : '';
  const ok = await confirmDialog(`${describe(action, outcome)} every matching job?`, `This will ${describe(action, outcome)} ${dry.matched} job${dry.matched === 1 ? '' : 's'}${capped}.`);
  if (!ok) return { ...dry, asked: true, declined: true };
  return { ...(await api.post('/jobs/bulk', body)), asked: true };
}
