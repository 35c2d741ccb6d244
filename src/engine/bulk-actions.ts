/**
 * POST /jobs/bulk: one operator action on every job a filter selects, up to a
 * limit. It walks the filtered listing in pages of BULK_BATCH and applies the
 * same store transition as the single-job route to each job, so each change
 * is its own guarded statement: a job that moved since it was listed is
 * counted as matched and left alone, and a crash mid-way leaves every job
 * either moved or not. Scoped to the admin's tenant exactly like the
 * single-job actions.
 */

import { LeaseholdError } from '../core/errors.js';
import type { JobStatus } from '../core/states.js';
import type { BulkAction, BulkRequest, BulkResponse } from '../protocol/operator.js';
import { OPERATOR_LIMITS } from '../protocol/operator.js';
import type { JobListItem, JobScope, ReconcileOutcomeName, Store } from '../store/store.js';
import { listFilteredJobs } from './job-filter.js';

/** Jobs listed and changed per store page: bounds the work between two awaits on the event loop. */
export const BULK_BATCH = 100;

/** The statuses from which each action moves a job. */
export const BULK_ACTION_STATUSES: Readonly<Record<BulkAction, readonly JobStatus[]>> = {
  requeue: ['dead'],
  reconcile: ['unknown'],
  cancel: ['waiting', 'queued', 'running'],
};

function statusesFor(request: BulkRequest): readonly JobStatus[] {
  const allowed = BULK_ACTION_STATUSES[request.action];
  const wanted = request.filter.status;
  if (wanted === undefined) return allowed;
  if (!allowed.includes(wanted)) {
    throw new LeaseholdError('invalid_request', `${request.action} applies to ${allowed.join(' or ')} jobs; the filter selects ${wanted} jobs`);
  }
  return [wanted];
}

function reconcileOutcome(request: BulkRequest): ReconcileOutcomeName | undefined {
  if (request.action !== 'reconcile') {
    if (request.outcome !== undefined) throw new LeaseholdError('invalid_request', 'outcome is only for the reconcile action');
    return undefined;
  }
  if (request.outcome === undefined) throw new LeaseholdError('invalid_request', 'reconcile needs an outcome: succeeded, dead or requeue');
  return request.outcome;
}

/** Applies the action to one listed job; true when the job moved. */
async function applyOne(store: Store, scope: JobScope, action: BulkAction, outcome: ReconcileOutcomeName | undefined, job: JobListItem): Promise<boolean> {
  const ref = { scope, id: job.id };
  switch (action) {
    case 'requeue':
      return (await store.jobRequeue(ref)).kind === 'requeued';
    case 'reconcile':
      return (await store.jobReconcile({ ...ref, outcome: outcome ?? 'requeue' })).kind !== 'rejected';
    case 'cancel': {
      const answer = await store.jobCancel(ref);
      // A running job already marked for cancellation is matched but does not change again.
      return answer.kind === 'cancelled' || (answer.kind === 'cancel_requested' && !job.cancelRequested);
    }
  }
}

export async function runBulkAction(store: Store, scope: JobScope, request: BulkRequest): Promise<BulkResponse> {
  const statuses = statusesFor(request);
  const outcome = reconcileOutcome(request);
  const limit = request.limit ?? OPERATOR_LIMITS.defaultBulkLimit;
  let matched = 0;
  let changed = 0;
  for (const status of statuses) {
    let cursor: string | undefined;
    do {
      const page = await listFilteredJobs(store, { scope, filter: { ...request.filter, status }, limit: Math.min(BULK_BATCH, limit - matched), cursor });
      for (const job of page.jobs) {
        matched += 1;
        if (request.dryRun !== true && (await applyOne(store, scope, request.action, outcome, job))) changed += 1;
      }
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined && matched < limit);
    if (matched >= limit) break;
  }
  return { matched, changed };
}
