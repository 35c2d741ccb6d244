/**
 * The transactions an operator or the reaper starts, each run inside one
 * PostgreSQL transaction on rows locked first: requeue, cancel, reconcile, and
 * applying expired leases and passed deadlines. Each decides with the pure
 * functions of core/transitions.ts and applies with a guarded statement.
 * Callers announce the jobs in `effects.available` (NOTIFY) after the
 * commit; a job that ends moves its children and its key's next job
 * (dependencies.ts).
 */

import { decideCancel, decideReconcile, decideRequeue } from '../../core/transitions.js';
import { CANCELLED_NOW, cancelOutcome, QUEUED_DEADLINE, reconcileEnding } from '../lease-endings.js';
import {
  distinctAvailability,
  type CancelOutcome,
  type JobRef,
  type ReapOutcome,
  type ReconcileOutcome,
  type ReconcileParams,
  type RequeueOutcome,
  type RequeueParams,
} from '../store.js';
import { restartDecision, settleEnded, type FlowEffects, type FlowRow } from './dependencies.js';
import { endedJobs, endingColumns, endLeases, reapBatch } from './lease-endings.js';
import { expectOne, lockJob, reloadJob, type LockedRow } from './locked-rows.js';
import type { TxClient } from './database.js';
import * as Q from './queries.js';
import { toSnapshot } from './rows.js';
import { bind } from './sql-fragments.js';

function lockScoped(tx: TxClient, ref: JobRef): Promise<LockedRow | undefined> {
  return lockJob(tx, ref.id, ref.scope.tenant, ref.scope.owner ?? null);
}

/**
 * dead (requeue) or unknown (reconcile → requeue) back with a fresh budget: queued, or waiting when a parent has
 * not succeeded (a parent still dead or cancelled counts as pending: requeue it first) or its key's turn is another's.
 */
async function restart(tx: TxClient, row: LockedRow, maxAttempts: number, fromStatus: 'dead' | 'unknown', effects: FlowEffects): Promise<void> {
  const { decision, pendingParents } = await restartDecision(tx, row);
  await expectOne(tx, Q.JOB_REQUEUE, [row.id, maxAttempts, fromStatus, decision.kind, decision.kind === 'waiting' ? pendingParents : 0]);
  if (decision.kind === 'queued') effects.available.push({ tenant: row.tenant, kind: row.kind });
}

export async function requeueInTx(tx: TxClient, params: RequeueParams, effects: FlowEffects): Promise<RequeueOutcome> {
  const row = await lockScoped(tx, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideRequeue(toSnapshot(row));
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  await restart(tx, row, params.maxAttempts ?? row.max_attempts, 'dead', effects);
  return { kind: 'requeued', job: await reloadJob(tx, row) };
}

export async function cancelInTx(tx: TxClient, params: JobRef, effects: FlowEffects): Promise<CancelOutcome> {
  const row = await lockScoped(tx, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideCancel(toSnapshot(row));
  if (decision.kind === 'already_terminal') return { kind: 'rejected', code: 'invalid_state' };
  if (decision.kind === 'cancel_now') {
    await expectOne(tx, Q.JOB_CANCEL_NOW, [row.id, ...endingColumns(CANCELLED_NOW)]);
    await settleEnded(tx, [{ ...row, status: CANCELLED_NOW.status }], effects);
  } else if (decision.kind === 'mark_running') await expectOne(tx, Q.JOB_CANCEL_REQUEST, [row.id]);
  return cancelOutcome(decision, await reloadJob(tx, row));
}

export async function reconcileInTx(tx: TxClient, params: ReconcileParams, effects: FlowEffects): Promise<ReconcileOutcome> {
  const row = await lockScoped(tx, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideReconcile(toSnapshot(row), params.outcome);
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  if (decision.kind === 'requeue') await restart(tx, row, row.max_attempts, 'unknown', effects);
  else {
    const ending = reconcileEnding(decision);
    await expectOne(tx, Q.JOB_RECONCILE, [row.id, ...endingColumns(ending)]);
    await settleEnded(tx, [{ ...row, status: ending.status }], effects);
  }
  return { kind: 'reconciled', job: await reloadJob(tx, row) };
}

export type ReapCounts = ReapOutcome & {
  /** Expired leases handled; a full batch means there may be more. */
  readonly leases: number;
};

/** One batch of expired leases and queued jobs past their deadline, of one tenant or all. */
export async function reapInTx(tx: TxClient, tenant: string | null, batchSize: number, effects: FlowEffects): Promise<ReapCounts> {
  const rows = (await tx.query<LockedRow>(bind(Q.JOBS_EXPIRED_LEASES, [tenant, batchSize]))).rows;
  const batch = reapBatch(rows);
  const requeued = new Set(batch.endings.filter((e) => e.ending.status === 'queued').map((e) => e.id));
  const moved = await endLeases(tx, batch.endings, false);
  if (moved.length > 0) await tx.query(bind(Q.COUNTER_ADD_EXPIRATIONS, [moved.map((m) => m.tenant)]));
  await settleEnded(tx, endedJobs(rows, moved), effects);
  const deadlines = (await tx.query<FlowRow>(bind(Q.JOB_QUEUED_DEADLINE, [tenant, batchSize, ...endingColumns(QUEUED_DEADLINE)]))).rows;
  await settleEnded(tx, deadlines, effects);
  effects.available.push(...distinctAvailability(rows.filter((row) => requeued.has(row.id))));
  return { ...batch.counts, deadlineExpired: deadlines.length, leases: rows.length };
}
