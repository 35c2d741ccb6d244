/**
 * Ends leases inside the write transaction: completions (one or a batch, in
 * order, so a job completed twice in one batch sees its own first completion)
 * and failures. decideCompletion, decideResultSize and decideFailure decide;
 * the table in src/store/lease-endings.ts says what each ending stores; one
 * guarded statement (jobEndLease) applies it with every value bound. A job
 * with children or a concurrency key then moves those in the same
 * transaction (dependencies.ts).
 */

import { crashPoint } from '../../core/fault-points.js';
import { sha256Hex } from '../../core/ids.js';
import type { Random } from '../../core/random.js';
import { decideCompletion, decideFailure, decideResultSize } from '../../core/transitions.js';
import { failureEnding, lastErrorColumns, resultTooLargeEnding, SUCCEEDED, type LeaseEnding } from '../lease-endings.js';
import type { CompleteOutcome, CompleteParams, FailOutcome, FailParams } from '../store.js';
import { settleEnded, type FlowEffects } from './dependencies.js';
import { endAttempt, expectOne, lockJob } from './locked-rows.js';
import type { Statements } from './queries.js';
import { toSnapshot, type SnapshotRow } from './rows.js';

/**
 * Applies `ending` to a running job under `token`, then what it means for its children and its key's next job;
 * `live`: the lease must be live (complete, fail) or expired (reaper).
 */
export function endLease(
  st: Statements,
  row: SnapshotRow,
  token: string,
  ending: LeaseEnding,
  now: number,
  options: { readonly live: boolean; readonly runAfter?: number; readonly effects: FlowEffects },
): void {
  const bindings = { seq: row.seq, token, now, live: options.live ? 1 : 0, status: ending.status, outcome: ending.outcome };
  expectOne(st.jobEndLease.run({ ...bindings, runAfter: options.runAfter ?? null, ...lastErrorColumns(ending) }).changes);
  endAttempt(st, row, now, ending.outcome, ending.attemptCode);
  settleEnded(st, [{ ...row, status: ending.status }], now, options.effects);
}

export function completeInTx(st: Statements, params: CompleteParams, now: number, effects: FlowEffects): CompleteOutcome {
  const row = lockJob(st, params.id, params.tenant);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideCompletion(toSnapshot(row), params.token, now);
  if (decision.kind === 'replay') return { kind: 'completed', replayed: true };
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  const result = params.result;
  const size = decideResultSize(result?.body.length ?? null, params.maxResultBytes);
  if (size.kind === 'too_large') {
    endLease(st, row, params.token, resultTooLargeEnding(size), now, { live: true, effects });
    return { kind: 'result_too_large' };
  }
  // The job is marked succeeded before its result is inserted (the schema's trigger requires it).
  endLease(st, row, params.token, SUCCEEDED, now, { live: true, effects });
  if (result !== undefined) {
    st.resultInsert.run(row.seq, result.contentType, result.body, sha256Hex(result.body), result.body.length);
    st.counterAddStorage.run(row.tenant, result.body.length);
  }
  crashPoint('complete.inside-transaction');
  return { kind: 'completed', replayed: false };
}

/** A worker's fail; a retry puts the job's (tenant, kind) into `effects.available`. */
export function failInTx(st: Statements, params: FailParams, random: Random, now: number, effects: FlowEffects): FailOutcome {
  const row = lockJob(st, params.id, params.tenant);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideFailure(toSnapshot(row), params.token, { retryable: params.retryable, backoff: params.backoff, random }, now);
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  if (decision.kind === 'replay') {
    const status = row.status as 'queued' | 'dead' | 'cancelled' | 'unknown';
    return { kind: 'failed', status, runAfter: status === 'queued' ? row.run_after : null, replayed: true, failureClass: null };
  }
  const ending = failureEnding(decision, params.error);
  const runAfter = decision.kind === 'retry' ? decision.runAfter : null;
  endLease(st, row, params.token, ending, now, runAfter === null ? { live: true, effects } : { live: true, runAfter, effects });
  if (runAfter !== null) effects.available.push({ tenant: row.tenant, kind: row.kind });
  return {
    kind: 'failed',
    status: ending.status as 'queued' | 'dead' | 'cancelled' | 'unknown',
    runAfter,
    replayed: false,
    failureClass: ending.lastError?.class ?? null,
  };
}
