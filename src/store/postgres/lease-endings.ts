/**
 * Ends leases in PostgreSQL: a batch of completions decided item by item on
 * locked rows, one failure, or a batch of expired leases, all applied by one
 * JOB_END_LEASES statement (queries.ts) whose every code, message and class
 * is a bound parameter. The decide* functions of core/transitions.ts decide;
 * the table in src/store/lease-endings.ts says what each ending stores. Jobs
 * with children or a concurrency key then move those in the same
 * transaction (dependencies.ts).
 */

import { crashPoint } from '../../core/fault-points.js';
import { isJobId, sha256Hex } from '../../core/ids.js';
import type { Random } from '../../core/random.js';
import { decideCompletion, decideFailure, decideLeaseExpiry, decideResultSize, type JobSnapshot } from '../../core/transitions.js';
import { expiryEnding, failureEnding, lastErrorColumns, resultTooLargeEnding, SUCCEEDED, type Ending, type LeaseEnding } from '../lease-endings.js';
import type { CompleteOutcome, CompleteParams, FailOutcome, FailParams, ReapOutcome } from '../store.js';
import { settleEnded, type EndedJob, type FlowEffects } from './dependencies.js';
import { lockJob, lockRunningJobs, type LockedRow } from './locked-rows.js';
import type { TxClient } from './database.js';
import * as Q from './queries.js';
import { toSnapshot } from './rows.js';
import { bind } from './sql-fragments.js';

/** One row of JOB_END_LEASES. */
export interface EndLease {
  readonly id: string;
  readonly token: string;
  readonly ending: LeaseEnding;
  /** For 'queued': when it may run again; null means now. */
  readonly runAfter: number | null;
  readonly result: { readonly contentType: string; readonly body: Buffer } | null;
}

/** An ending's status and last error, as the single-row statements bind them (after the job's id). */
export function endingColumns(ending: Ending): readonly unknown[] {
  const columns = lastErrorColumns(ending);
  return [ending.status, columns.code, columns.message, columns.errorClass];
}

/** The moved rows' tenant and status; a guarded statement that matches fewer rows than decided throws. */
export interface MovedRow {
  readonly id: string;
  readonly tenant: string;
  readonly status: string;
}

/** Applies lease endings with JOB_END_LEASES; `live` says whether the leases must be live (complete, fail) or expired (reaper). */
export async function endLeases(tx: TxClient, endings: readonly EndLease[], live: boolean): Promise<readonly MovedRow[]> {
  if (endings.length === 0) return [];
  const withResult = endings.filter((e) => e.result !== null);
  const errors = endings.map((e) => lastErrorColumns(e.ending));
  const moved = await tx.query<{ id: string; tenant: string; status: string }>(
    bind(Q.JOB_END_LEASES, [
      endings.map((e) => e.id),
      endings.map((e) => e.token),
      endings.map((e) => e.ending.status),
      endings.map((e) => e.ending.outcome),
      errors.map((e) => e.code),
      errors.map((e) => e.message),
      endings.map((e) => e.runAfter),
      endings.map((e) => e.ending.attemptCode),
      live,
      withResult.map((e) => e.id),
      withResult.map((e) => e.result?.contentType ?? ''),
      withResult.map((e) => e.result?.body ?? Buffer.alloc(0)),
      withResult.map((e) => (e.result === null ? '' : sha256Hex(e.result.body))),
      errors.map((e) => e.errorClass),
    ]),
  );
  if (moved.rows.length !== endings.length) {
    throw new Error(`guarded update matched ${moved.rows.length} of ${endings.length} rows; the snapshot and the guard disagree`);
  }
  return moved.rows;
}

/** The moved jobs with what their end moves next (their locked rows say whether they have children or a key). */
export function endedJobs(rows: readonly LockedRow[], moved: readonly MovedRow[]): EndedJob[] {
  const byId = new Map(rows.map((row) => [row.id, row]));
  return moved.flatMap((m) => {
    const row = byId.get(m.id);
    return row === undefined
      ? []
      : [{ id: m.id, tenant: row.tenant, kind: row.kind, status: m.status, concurrency_key: row.concurrency_key, has_children: row.has_children }];
  });
}

/**
 * Completions decided in order on locked rows (a job completed twice in one batch, a result over its limit, or
 * a job with children or a key, whose end moves other jobs in this transaction).
 */
export async function completeLockedInTx(tx: TxClient, params: readonly CompleteParams[], effects: FlowEffects): Promise<CompleteOutcome[]> {
  const ids = [...new Set(params.map((p) => p.id).filter(isJobId))];
  const rows = await lockRunningJobs(tx, ids);
  const batch = completeBatch(params, rows);
  const moved = await endLeases(tx, batch.endings, true);
  await settleEnded(tx, endedJobs(rows, moved), effects);
  crashPoint('complete.inside-transaction');
  return batch.outcomes;
}

export function completeBatch(
  params: readonly CompleteParams[],
  rows: readonly LockedRow[],
): { readonly outcomes: CompleteOutcome[]; readonly endings: EndLease[] } {
  // Snapshots are updated as decisions are made, so a job completed twice in
  // one batch sees its own first completion (and is answered as a replay).
  const snapshots = new Map<string, { row: LockedRow; snapshot: JobSnapshot }>(rows.map((row) => [row.id, { row, snapshot: toSnapshot(row) }]));
  const outcomes: CompleteOutcome[] = [];
  const endings: EndLease[] = [];
  for (const p of params) {
    const entry = snapshots.get(p.id);
    if (entry === undefined || entry.row.tenant !== p.tenant) {
      outcomes.push({ kind: 'rejected', code: 'not_found' });
      continue;
    }
    const decision = decideCompletion(entry.snapshot, p.token, entry.row.now_ms);
    if (decision.kind !== 'commit') {
      outcomes.push(decision.kind === 'replay' ? { kind: 'completed', replayed: true } : { kind: 'rejected', code: decision.code });
      continue;
    }
    const result = p.result ?? null;
    const size = decideResultSize(result?.body.length ?? null, p.maxResultBytes);
    const ending = size.kind === 'too_large' ? resultTooLargeEnding(size) : SUCCEEDED;
    endings.push({ id: p.id, token: p.token, ending, runAfter: null, result: size.kind === 'too_large' ? null : result });
    entry.snapshot = { ...entry.snapshot, status: ending.status, lastOutcome: ending.outcome };
    outcomes.push(size.kind === 'too_large' ? { kind: 'result_too_large' } : { kind: 'completed', replayed: false });
  }
  return { outcomes, endings };
}

/** A worker's fail on its locked row; `kind` is the job's kind, for the announcement of a retry. */
export async function failInTx(
  tx: TxClient,
  params: FailParams,
  random: Random,
  effects: FlowEffects,
): Promise<{ readonly outcome: FailOutcome; readonly kind: string }> {
  const row = await lockJob(tx, params.id, params.tenant, null);
  if (row === undefined) return { outcome: { kind: 'rejected', code: 'not_found' }, kind: '' };
  const decision = decideFailure(toSnapshot(row), params.token, { retryable: params.retryable, backoff: params.backoff, random }, row.now_ms);
  if (decision.kind === 'reject') return { outcome: { kind: 'rejected', code: decision.code }, kind: row.kind };
  if (decision.kind === 'replay') {
    const status = row.status as 'queued' | 'dead' | 'cancelled' | 'unknown';
    return { outcome: { kind: 'failed', status, runAfter: status === 'queued' ? row.run_after : null, replayed: true, failureClass: null }, kind: row.kind };
  }
  const ending = failureEnding(decision, params.error);
  const runAfter = decision.kind === 'retry' ? decision.runAfter : null;
  const moved = await endLeases(tx, [{ id: row.id, token: params.token, ending, runAfter, result: null }], true);
  await settleEnded(tx, endedJobs([row], moved), effects);
  const status = ending.status as 'queued' | 'dead' | 'cancelled' | 'unknown';
  return { outcome: { kind: 'failed', status, runAfter, replayed: false, failureClass: ending.lastError?.class ?? null }, kind: row.kind };
}

/** Endings for leases that ran out, with decideLeaseExpiry deciding each. */
export function reapBatch(rows: readonly LockedRow[]): { readonly endings: EndLease[]; readonly counts: Omit<ReapOutcome, 'deadlineExpired'> } {
  const counts = { requeued: 0, dead: 0, unknown: 0, cancelled: 0 };
  const endings = rows.map((row): EndLease => {
    const decision = decideLeaseExpiry(toSnapshot(row), row.now_ms);
    counts[decision.kind === 'requeue' ? 'requeued' : decision.kind]++;
    return { id: row.id, token: row.lease_token ?? '', ending: expiryEnding(decision), runAfter: null, result: null };
  });
  return { endings, counts };
}
