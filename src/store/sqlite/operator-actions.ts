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
import type { CounterMoves } from './counter-moves.js';
import { readyRemoved } from './group-lease.js';
import { becameQueued, restartDecision, settleEnded, type FlowEffects, type FlowRow } from './dependencies.js';
import { endLease } from './lease-endings.js';
import { expectOne, lockScoped, reloadJob } from './locked-rows.js';
import type { Statements } from './queries.js';
import { countedJob, toSnapshot, type JobRow, type SnapshotRow } from './rows.js';

/**
 * dead (requeue) or unknown (reconcile → requeue) back with a fresh budget: queued, or waiting when a parent has
 * not succeeded (a parent still dead or cancelled counts as pending: requeue it first) or its key's turn is another's.
 */
function restart(
  st: Statements,
  moves: CounterMoves,
  row: JobRow,
  now: number,
  maxAttempts: number,
  fromStatus: 'dead' | 'unknown',
  effects: FlowEffects,
): void {
  const { decision, pendingParents } = restartDecision(st, row);
  const restarted = st.jobRequeue.all({
    seq: row.seq,
    now,
    maxAttempts,
    fromStatus,
    status: decision.kind,
    pendingParents: decision.kind === 'waiting' ? pendingParents : 0,
  }) as Parameters<typeof becameQueued>[2][];
  expectOne(restarted.length);
  for (const job of restarted) {
    if (decision.kind === 'queued') becameQueued(st, moves, job, fromStatus, row.finished_at);
    else moves.moved(countedJob({ ...job, finished_at: row.finished_at }, fromStatus), countedJob(job, 'waiting'));
  }
  if (decision.kind === 'queued') effects.available.push({ tenant: row.tenant, kind: row.kind });
}

export function requeueInTx(st: Statements, moves: CounterMoves, params: RequeueParams, now: number, effects: FlowEffects): RequeueOutcome {
  const row = lockScoped(st, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideRequeue(toSnapshot(row));
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  restart(st, moves, row, now, params.maxAttempts ?? row.max_attempts, 'dead', effects);
  return { kind: 'requeued', job: reloadJob(st, row.seq) };
}

export function cancelInTx(st: Statements, moves: CounterMoves, params: JobRef, now: number, effects: FlowEffects): CancelOutcome {
  const row = lockScoped(st, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideCancel(toSnapshot(row));
  if (decision.kind === 'already_terminal') return { kind: 'rejected', code: 'invalid_state' };
  if (decision.kind === 'cancel_now') {
    expectOne(st.jobCancelNow.run({ seq: row.seq, now, status: CANCELLED_NOW.status, ...lastErrorColumns(CANCELLED_NOW) }).changes);
    if (row.status === 'queued') {
      const key = { tenant: row.tenant, kind: row.kind, groupKey: row.group_key, priority: row.priority, runAfter: row.run_after, seq: row.seq };
      if (st.readyDelete.get(key) === undefined) throw new Error('a queued job has no ready row');
      readyRemoved(st, row.tenant, row.kind, row.group_key, 1);
    }
    moves.moved(countedJob(row, row.status), countedJob({ ...row, finished_at: now }, CANCELLED_NOW.status));
    settleEnded(st, moves, [{ ...row, status: CANCELLED_NOW.status }], now, effects);
  } else if (decision.kind === 'mark_running') expectOne(st.leaseCancelRequest.run({ seq: row.seq }).changes);
  return cancelOutcome(decision, reloadJob(st, row.seq));
}

export function reconcileInTx(st: Statements, moves: CounterMoves, params: ReconcileParams, now: number, effects: FlowEffects): ReconcileOutcome {
  const row = lockScoped(st, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideReconcile(toSnapshot(row), params.outcome);
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  if (decision.kind === 'requeue') restart(st, moves, row, now, row.max_attempts, 'unknown', effects);
  else {
    const ending = reconcileEnding(decision);
    expectOne(st.jobReconcile.run({ seq: row.seq, now, status: ending.status, ...lastErrorColumns(ending) }).changes);
    moves.moved(countedJob(row, 'unknown'), countedJob({ ...row, finished_at: now }, ending.status));
    settleEnded(st, moves, [{ ...row, status: ending.status }], now, effects);
  }
  return { kind: 'reconciled', job: reloadJob(st, row.seq) };
}

/** Applies due expiries and passed deadlines of every tenant; requeued jobs' (tenant, kind) go into `effects.available`. */
export function reapInTx(st: Statements, moves: CounterMoves, now: number, effects: FlowEffects): ReapOutcome {
  const counts = { requeued: 0, dead: 0, unknown: 0, cancelled: 0, deadlineExpired: 0 };
  for (const row of st.jobsExpiredLeases.all(now) as SnapshotRow[]) {
    const decision = decideLeaseExpiry(toSnapshot(row), now);
    moves.leaseExpired(row.tenant);
    endLease(st, moves, row, row.lease_token ?? '', expiryEnding(decision), now, { live: false, effects });
    if (decision.kind === 'requeue') {
      effects.available.push({ tenant: row.tenant, kind: row.kind });
      counts.requeued++;
    } else counts[decision.kind]++;
  }
  const past = st.readyPastDeadline.all({ now }) as { seq: number; tenant: string; kind: string; group_key: string }[];
  if (past.length === 0) return counts;
  for (const row of past) readyRemoved(st, row.tenant, row.kind, row.group_key, 1);
  const seqs = JSON.stringify(past.map((row) => row.seq));
  const expired = st.jobQueuedDeadline.all({ now, seqs, status: QUEUED_DEADLINE.status, ...lastErrorColumns(QUEUED_DEADLINE) }) as FlowRow[];
  if (expired.length !== past.length) throw new Error(`${past.length} ready rows past their deadline, ${expired.length} queued jobs ended`);
  for (const job of expired) moves.moved(countedJob({ ...job, finished_at: null }, 'queued'), countedJob(job, job.status));
  counts.deadlineExpired = expired.length;
  settleEnded(st, moves, expired, now, effects);
  return counts;
}
