/**
 * The transactions an operator or the reaper starts, inside the write
 * transaction: requeue, cancel, reconcile, and applying expired leases and
 * passed deadlines. Each decides with the pure functions of
 * core/transitions.ts, takes what it stores from src/store/lease-endings.ts,
 * and applies it with a guarded statement. The (tenant, kind) of every job
 * that becomes available goes into `effects.available`, announced after the
 * commit; a job that ends moves its children and its key's next job
 * (dependencies.ts).
 */

import { decideCancel, decideLeaseExpiry, decideReconcile, decideRequeue } from '../../core/transitions.js';
import { CANCELLED_NOW, cancelOutcome, expiryEnding, lastErrorColumns, QUEUED_DEADLINE, reconcileEnding } from '../lease-endings.js';
import type { CancelOutcome, JobRef, ReapOutcome, ReconcileOutcome, ReconcileParams, RequeueOutcome, RequeueParams } from '../store.js';
import { restartDecision, settleEnded, type FlowEffects, type FlowRow } from './dependencies.js';
import { endLease } from './lease-endings.js';
import { expectOne, lockScoped, reloadJob } from './locked-rows.js';
import type { Statements } from './queries.js';
import { toSnapshot, type JobRow, type SnapshotRow } from './rows.js';

/**
 * dead (requeue) or unknown (reconcile → requeue) back with a fresh budget: queued, or waiting when a parent has
 * not succeeded (a parent still dead or cancelled counts as pending: requeue it first) or its key's turn is another's.
 */
function restart(st: Statements, row: JobRow, now: number, maxAttempts: number, fromStatus: 'dead' | 'unknown', effects: FlowEffects): void {
  const { decision, pendingParents } = restartDecision(st, row);
  expectOne(
    st.jobRequeue.run({ seq: row.seq, now, maxAttempts, fromStatus, status: decision.kind, pendingParents: decision.kind === 'waiting' ? pendingParents : 0 })
      .changes,
  );
  if (decision.kind === 'queued') effects.available.push({ tenant: row.tenant, kind: row.kind });
}

export function requeueInTx(st: Statements, params: RequeueParams, now: number, effects: FlowEffects): RequeueOutcome {
  const row = lockScoped(st, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideRequeue(toSnapshot(row));
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  restart(st, row, now, params.maxAttempts ?? row.max_attempts, 'dead', effects);
  return { kind: 'requeued', job: reloadJob(st, row.seq) };
}

export function cancelInTx(st: Statements, params: JobRef, now: number, effects: FlowEffects): CancelOutcome {
  const row = lockScoped(st, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideCancel(toSnapshot(row));
  if (decision.kind === 'already_terminal') return { kind: 'rejected', code: 'invalid_state' };
  if (decision.kind === 'cancel_now') {
    expectOne(st.jobCancelNow.run({ seq: row.seq, now, status: CANCELLED_NOW.status, ...lastErrorColumns(CANCELLED_NOW) }).changes);
    settleEnded(st, [{ ...row, status: CANCELLED_NOW.status }], now, effects);
  } else if (decision.kind === 'mark_running') expectOne(st.jobCancelRequest.run({ seq: row.seq }).changes);
  return cancelOutcome(decision, reloadJob(st, row.seq));
}

export function reconcileInTx(st: Statements, params: ReconcileParams, now: number, effects: FlowEffects): ReconcileOutcome {
  const row = lockScoped(st, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideReconcile(toSnapshot(row), params.outcome);
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  if (decision.kind === 'requeue') restart(st, row, now, row.max_attempts, 'unknown', effects);
  else {
    const ending = reconcileEnding(decision);
    expectOne(st.jobReconcile.run({ seq: row.seq, now, status: ending.status, ...lastErrorColumns(ending) }).changes);
    settleEnded(st, [{ ...row, status: ending.status }], now, effects);
  }
  return { kind: 'reconciled', job: reloadJob(st, row.seq) };
}

/** Applies due expiries and passed deadlines of every tenant; requeued jobs' (tenant, kind) go into `effects.available`. */
export function reapInTx(st: Statements, now: number, effects: FlowEffects): ReapOutcome {
  const counts = { requeued: 0, dead: 0, unknown: 0, cancelled: 0, deadlineExpired: 0 };
  for (const row of st.jobsExpiredLeases.all(now) as SnapshotRow[]) {
    const decision = decideLeaseExpiry(toSnapshot(row), now);
    st.counterAddExpirations.run(row.tenant);
    endLease(st, row, row.lease_token ?? '', expiryEnding(decision), now, { live: false, effects });
    if (decision.kind === 'requeue') {
      effects.available.push({ tenant: row.tenant, kind: row.kind });
      counts.requeued++;
    } else counts[decision.kind]++;
  }
  const expired = st.jobQueuedDeadline.all({ now, status: QUEUED_DEADLINE.status, ...lastErrorColumns(QUEUED_DEADLINE) }) as FlowRow[];
  counts.deadlineExpired = expired.length;
  settleEnded(st, expired, now, effects);
  return counts;
}
