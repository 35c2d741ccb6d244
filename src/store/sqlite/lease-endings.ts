/**
 * Ends leases inside the write transaction: completions (one or a batch, in
 * order, so a job completed twice in one batch sees its own first completion)
 * and failures. decideCompletion, decideResultSize and decideFailure decide;
 * the table in src/store/lease-endings.ts says what each ending stores; one
 * guarded statement (jobEndLease) applies it with every value bound.
 */

import { crashPoint } from '../../core/fault-points.js';
import { sha256Hex } from '../../core/ids.js';
import type { Random } from '../../core/random.js';
import { decideCompletion, decideFailure, decideResultSize } from '../../core/transitions.js';
import { failureEnding, lastErrorColumns, resultTooLargeEnding, SUCCEEDED, type LeaseEnding } from '../lease-endings.js';
import type { Availability, CompleteOutcome, CompleteParams, FailOutcome, FailParams } from '../store.js';
import { endAttempt, expectOne, lockJob } from './locked-rows.js';
import type { Statements } from './queries.js';
import { toSnapshot, type SnapshotRow } from './rows.js';

/** Applies `ending` to a running job under `token`; `live`: the lease must be live (complete, fail) or expired (reaper). */
export function endLease(
  st: Statements,
  row: SnapshotRow,
  token: string,
  ending: LeaseEnding,
  now: number,
  options: { readonly live: boolean; readonly runAfter?: number },
): void {
  const bindings = { seq: row.seq, token, now, live: options.live ? 1 : 0, status: ending.status, outcome: ending.outcome };
  expectOne(st.jobEndLease.run({ ...bindings, runAfter: options.runAfter ?? null, ...lastErrorColumns(ending) }).changes);
  endAttempt(st, row, now, ending.outcome, ending.attemptCode);
}

export function completeInTx(st: Statements, params: CompleteParams, now: number): CompleteOutcome {
  const row = lockJob(st, params.id, params.tenant);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideCompletion(toSnapshot(row), params.token, now);
  if (decision.kind === 'replay') return { kind: 'completed', replayed: true };
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  const result = params.result;
  const size = decideResultSize(result?.body.length ?? null, params.maxResultBytes);
  if (size.kind === 'too_large') {
    endLease(st, row, params.token, resultTooLargeEnding(size), now, { live: true });
    return { kind: 'result_too_large' };
  }
  // The job is marked succeeded before its result is inserted (the schema's trigger requires it).
  endLease(st, row, params.token, SUCCEEDED, now, { live: true });
  if (result !== undefined) {
    st.resultInsert.run(row.seq, result.contentType, result.body, sha256Hex(result.body), result.body.length);
    st.counterAddStorage.run(row.tenant, result.body.length);
  }
  crashPoint('complete.inside-transaction');
  return { kind: 'completed', replayed: false };
}

/** A worker's fail; a retry puts the job's (tenant, kind) into `available`. */
export function failInTx(st: Statements, params: FailParams, random: Random, now: number, available: Availability[]): FailOutcome {
  const row = lockJob(st, params.id, params.tenant);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideFailure(toSnapshot(row), params.token, { retryable: params.retryable, backoff: params.backoff, random }, now);
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  if (decision.kind === 'replay') {
    const status = row.status as 'queued' | 'dead' | 'cancelled' | 'unknown';
    return { kind: 'failed', status, runAfter: status === 'queued' ? row.run_after : null, replayed: true };
  }
  const ending = failureEnding(decision, params.error);
  const runAfter = decision.kind === 'retry' ? decision.runAfter : null;
  endLease(st, row, params.token, ending, now, runAfter === null ? { live: true } : { live: true, runAfter });
  if (runAfter !== null) available.push({ tenant: row.tenant, kind: row.kind });
  return { kind: 'failed', status: ending.status as 'queued' | 'dead' | 'cancelled' | 'unknown', runAfter, replayed: false };
}
