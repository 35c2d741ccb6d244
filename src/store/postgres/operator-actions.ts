/**
 * The transactions an operator or the reaper starts, each run inside one
 * PostgreSQL transaction on rows locked first: requeue, cancel, reconcile, and
 * applying expired leases and passed deadlines. Each decides with the pure
 * functions of core/transitions.ts and applies with a guarded statement.
 * Callers announce the jobs in `wakes` (NOTIFY) after the commit.
 */

import { decideCancel, decideRequeue } from '../../core/transitions.js';
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
import { reapBatch } from './lease-endings.js';
import { endLeases, expectOne, lockJob, reloadJob, type LockedRow } from './locked-rows.js';
import type { TxClient } from './pg-database.js';
import * as Q from './queries.js';
import { toSnapshot } from './row-mapping.js';
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
  // Cancelling twice answers like the first time.
  if (row.status === 'cancelled') return { kind: 'cancelled', job: await reloadJob(tx, row) };
  const decision = decideCancel(toSnapshot(row));
  switch (decision.kind) {
    case 'already_terminal':
      return { kind: 'rejected', code: 'invalid_state' };
    case 'cancel_now':
      await expectOne(tx, Q.JOB_CANCEL_NOW, [row.id]);
      return { kind: 'cancelled', job: await reloadJob(tx, row) };
    case 'mark_running':
      await expectOne(tx, Q.JOB_CANCEL_REQUEST, [row.id]);
      return { kind: 'cancel_requested', job: await reloadJob(tx, row) };
  }
}

export async function reconcileInTx(tx: TxClient, params: ReconcileParams): Promise<Announced<ReconcileOutcome>> {
  const row = await lockScoped(tx, params);
  if (row === undefined) return { outcome: { kind: 'rejected', code: 'not_found' }, wakes: [] };
  if (row.status !== 'unknown') return { outcome: { kind: 'rejected', code: 'not_unknown' }, wakes: [] };
  switch (params.outcome) {
    case 'succeeded':
      await expectOne(tx, Q.JOB_RECONCILE_SUCCEEDED, [row.id]);
      break;
    case 'dead':
      await expectOne(tx, Q.JOB_RECONCILE_DEAD, [row.id]);
      break;
    case 'requeue':
      // Back to queued with a fresh attempt budget, as a requeue of a dead job.
      await expectOne(tx, Q.JOB_REQUEUE, [row.id, row.max_attempts, 'unknown']);
      break;
  }
  return { outcome: { kind: 'reconciled', job: await reloadJob(tx, row) }, wakes: params.outcome === 'requeue' ? [{ tenant: row.tenant, kind: row.kind }] : [] };
}

export type ReapCounts = ReapOutcome & {
  /** Expired leases handled; a full batch means there may be more. */
  readonly leases: number;
};

const DEADLINE_MESSAGE = 'the job passed its overall deadline';

/** One batch of expired leases and queued jobs past their deadline, of one tenant or all. */
export async function reapInTx(tx: TxClient, tenant: string | null, batchSize: number): Promise<Announced<ReapCounts>> {
  const rows = (await tx.query<LockedRow>(bind(Q.EXPIRED_LEASES_LOCK, [tenant, batchSize]))).rows;
  const batch = reapBatch(rows);
  const requeued = new Set(batch.endings.filter((e) => e.status === 'queued').map((e) => e.id));
  const moved = await endLeases(tx, batch.endings, false);
  if (moved.length > 0) await tx.query(bind(Q.COUNTER_ADD_EXPIRATIONS, [moved.map((m) => m.tenant)]));
  const deadlines = await tx.query(bind(Q.QUEUED_PAST_DEADLINE, [tenant, DEADLINE_MESSAGE, batchSize]));
  return {
    outcome: { ...batch.counts, deadlineExpired: deadlines.rowCount ?? 0, leases: rows.length },
    wakes: distinctAvailability(rows.filter((row) => requeued.has(row.id))),
  };
}
