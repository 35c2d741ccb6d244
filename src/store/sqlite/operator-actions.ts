/**
 * The transactions an operator or the reaper starts, inside the write
 * transaction: requeue, cancel, reconcile, and applying expired leases and
 * passed deadlines. Each decides with the pure functions of
 * core/transitions.ts, takes what it stores from src/store/lease-endings.ts,
 * and applies it with a guarded statement. The (tenant, kind) of every job
 * that becomes available goes into `available`, announced after the commit.
 */

import { decideCancel, decideLeaseExpiry, decideReconcile, decideRequeue } from '../../core/transitions.js';
import { CANCELLED_NOW, cancelOutcome, expiryEnding, lastErrorColumns, QUEUED_DEADLINE, reconcileEnding } from '../lease-endings.js';
import type { Availability, CancelOutcome, JobRef, ReapOutcome, ReconcileOutcome, ReconcileParams, RequeueOutcome, RequeueParams } from '../store.js';
import { endLease } from './lease-endings.js';
import { expectOne, lockScoped, reloadJob } from './locked-rows.js';
import type { Statements } from './queries.js';
import { toSnapshot, type SnapshotRow } from './rows.js';

export function requeueInTx(st: Statements, params: RequeueParams, now: number, available: Availability[]): RequeueOutcome {
  const row = lockScoped(st, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideRequeue(toSnapshot(row));
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  expectOne(st.jobRequeue.run({ seq: row.seq, now, maxAttempts: params.maxAttempts ?? row.max_attempts, fromStatus: 'dead' }).changes);
  available.push({ tenant: row.tenant, kind: row.kind });
  return { kind: 'requeued', job: reloadJob(st, row.seq) };
}

export function cancelInTx(st: Statements, params: JobRef, now: number): CancelOutcome {
  const row = lockScoped(st, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideCancel(toSnapshot(row));
  if (decision.kind === 'already_terminal') return { kind: 'rejected', code: 'invalid_state' };
  if (decision.kind === 'cancel_now') {
    expectOne(st.jobCancelNow.run({ seq: row.seq, now, status: CANCELLED_NOW.status, ...lastErrorColumns(CANCELLED_NOW) }).changes);
  } else if (decision.kind === 'mark_running') expectOne(st.jobCancelRequest.run({ seq: row.seq }).changes);
  return cancelOutcome(decision, reloadJob(st, row.seq));
}

export function reconcileInTx(st: Statements, params: ReconcileParams, now: number, available: Availability[]): ReconcileOutcome {
  const row = lockScoped(st, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideReconcile(toSnapshot(row), params.outcome);
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  if (decision.kind === 'requeue') {
    expectOne(st.jobRequeue.run({ seq: row.seq, now, maxAttempts: row.max_attempts, fromStatus: 'unknown' }).changes);
    available.push({ tenant: row.tenant, kind: row.kind });
  } else {
    const ending = reconcileEnding(decision);
    expectOne(st.jobReconcile.run({ seq: row.seq, now, status: ending.status, ...lastErrorColumns(ending) }).changes);
  }
  return { kind: 'reconciled', job: reloadJob(st, row.seq) };
}

/** Applies due expiries and passed deadlines of every tenant; requeued jobs' (tenant, kind) go into `available`. */
export function reapInTx(st: Statements, now: number, available: Availability[]): ReapOutcome {
  const counts = { requeued: 0, dead: 0, unknown: 0, cancelled: 0, deadlineExpired: 0 };
  for (const row of st.jobsExpiredLeases.all(now) as SnapshotRow[]) {
    const decision = decideLeaseExpiry(toSnapshot(row), now);
    st.counterAddExpirations.run(row.tenant);
    endLease(st, row, row.lease_token ?? '', expiryEnding(decision), now, { live: false });
    if (decision.kind === 'requeue') {
      available.push({ tenant: row.tenant, kind: row.kind });
      counts.requeued++;
    } else counts[decision.kind]++;
  }
  counts.deadlineExpired = st.jobQueuedDeadline.run({ now, status: QUEUED_DEADLINE.status, ...lastErrorColumns(QUEUED_DEADLINE) }).changes;
  return counts;
}
