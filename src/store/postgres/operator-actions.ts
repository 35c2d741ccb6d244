/**
 * The transactions an operator or the reaper starts, each run inside one
 * PostgreSQL transaction on rows locked first: requeue, cancel, reconcile, and
 * applying expired leases and passed deadlines. Each decides with the pure
 * functions of core/transitions.ts and applies with a guarded statement.
 * Callers announce the jobs in `wakes` (NOTIFY) after the commit.
 */

import { decideCancel, decideReconcile, decideRequeue } from '../../core/transitions.js';
import { CANCELLED_NOW, cancelOutcome, QUEUED_DEADLINE, reconcileEnding } from '../lease-endings.js';
import {
  distinctAvailability,
  type Availability,
  type CancelOutcome,
  type JobRef,
  type ReapOutcome,
  type ReconcileOutcome,
  type ReconcileParams,
  type RequeueOutcome,
  type RequeueParams,
} from '../store.js';
import { endingColumns, endLeases, reapBatch } from './lease-endings.js';
import { expectOne, lockJob, reloadJob, type LockedRow } from './locked-rows.js';
import type { TxClient } from './database.js';
import * as Q from './queries.js';
import { toSnapshot } from './rows.js';
import { bind } from './sql-fragments.js';

export interface Announced<T> {
  readonly outcome: T;
  /** The (tenant, kind) of jobs that became available: tell waiting long polls once this commits. */
  readonly wakes: readonly Availability[];
}

function lockScoped(tx: TxClient, ref: JobRef): Promise<LockedRow | undefined> {
  return lockJob(tx, ref.id, ref.scope.tenant, ref.scope.owner ?? null);
}

export async function requeueInTx(tx: TxClient, params: RequeueParams): Promise<Announced<RequeueOutcome>> {
  const row = await lockScoped(tx, params);
  if (row === undefined) return { outcome: { kind: 'rejected', code: 'not_found' }, wakes: [] };
  const decision = decideRequeue(toSnapshot(row));
  if (decision.kind === 'reject') return { outcome: { kind: 'rejected', code: decision.code }, wakes: [] };
  await expectOne(tx, Q.JOB_REQUEUE, [row.id, params.maxAttempts ?? row.max_attempts, 'dead']);
  return { outcome: { kind: 'requeued', job: await reloadJob(tx, row) }, wakes: [{ tenant: row.tenant, kind: row.kind }] };
}

export async function cancelInTx(tx: TxClient, params: JobRef): Promise<CancelOutcome> {
  const row = await lockScoped(tx, params);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideCancel(toSnapshot(row));
  if (decision.kind === 'already_terminal') return { kind: 'rejected', code: 'invalid_state' };
  if (decision.kind === 'cancel_now') await expectOne(tx, Q.JOB_CANCEL_NOW, [row.id, ...endingColumns(CANCELLED_NOW)]);
  else if (decision.kind === 'mark_running') await expectOne(tx, Q.JOB_CANCEL_REQUEST, [row.id]);
  return cancelOutcome(decision, await reloadJob(tx, row));
}

export async function reconcileInTx(tx: TxClient, params: ReconcileParams): Promise<Announced<ReconcileOutcome>> {
  const row = await lockScoped(tx, params);
  if (row === undefined) return { outcome: { kind: 'rejected', code: 'not_found' }, wakes: [] };
  const decision = decideReconcile(toSnapshot(row), params.outcome);
  if (decision.kind === 'reject') return { outcome: { kind: 'rejected', code: decision.code }, wakes: [] };
  if (decision.kind === 'requeue') await expectOne(tx, Q.JOB_REQUEUE, [row.id, row.max_attempts, 'unknown']);
  else await expectOne(tx, Q.JOB_RECONCILE, [row.id, ...endingColumns(reconcileEnding(decision))]);
  return { outcome: { kind: 'reconciled', job: await reloadJob(tx, row) }, wakes: decision.kind === 'requeue' ? [{ tenant: row.tenant, kind: row.kind }] : [] };
}

export type ReapCounts = ReapOutcome & {
  /** Expired leases handled; a full batch means there may be more. */
  readonly leases: number;
};

/** One batch of expired leases and queued jobs past their deadline, of one tenant or all. */
export async function reapInTx(tx: TxClient, tenant: string | null, batchSize: number): Promise<Announced<ReapCounts>> {
  const rows = (await tx.query<LockedRow>(bind(Q.JOBS_EXPIRED_LEASES, [tenant, batchSize]))).rows;
  const batch = reapBatch(rows);
  const requeued = new Set(batch.endings.filter((e) => e.ending.status === 'queued').map((e) => e.id));
  const moved = await endLeases(tx, batch.endings, false);
  if (moved.length > 0) await tx.query(bind(Q.COUNTER_ADD_EXPIRATIONS, [moved.map((m) => m.tenant)]));
  const deadlines = await tx.query(bind(Q.JOB_QUEUED_DEADLINE, [tenant, batchSize, ...endingColumns(QUEUED_DEADLINE)]));
  return {
    outcome: { ...batch.counts, deadlineExpired: deadlines.rowCount ?? 0, leases: rows.length },
    wakes: distinctAvailability(rows.filter((row) => requeued.has(row.id))),
  };
}
