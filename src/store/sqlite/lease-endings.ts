/**
 * Ends leases inside the write transaction: completions (one or a batch, in
 * order, so a job completed twice in one batch sees its own first completion)
 * and failures. decideCompletion, decideResultSize and decideFailure decide;
 * the table in src/store/lease-endings.ts says what each ending stores. The
 * guarded statement leaseEnd removes the lease row under its token (live, or
 * run out for the reaper) and answers the attempt that ended; the job's row
 * then takes its ending with the attempt's values (jobEnd), the attempt's row
 * is written once, a retried job gets its ready row back, and the counter
 * rows move (counter-moves.ts). A job with children or a concurrency key then
 * moves those in the same transaction (dependencies.ts).
 */

import { crashPoint } from '../../core/fault-points.js';
import { sha256Hex } from '../../core/ids.js';
import type { Random } from '../../core/random.js';
import { decideCompletion, decideFailure, decideResultSize } from '../../core/transitions.js';
import { failureEnding, lastErrorColumns, resultTooLargeEnding, SUCCEEDED, type LeaseEnding } from '../lease-endings.js';
import type { CompleteOutcome, CompleteParams, FailOutcome, FailParams } from '../store.js';
import type { CounterMoves } from './counter-moves.js';
import { settleEnded, type FlowEffects } from './dependencies.js';
import { groupLeaseEnded, insertReady } from './group-lease.js';
import { expectOne, lockJob } from './locked-rows.js';
import type { Statements } from './queries.js';
import { countedJob, toSnapshot, type SnapshotRow } from './rows.js';

/** The attempt a lease row held (SQL.leaseEnd). */
interface EndedLease {
  readonly epoch: number;
  readonly attempt: number;
  readonly worker_id: string;
  readonly started_at: number;
  readonly cancel_requested: number;
  readonly effect_started_at: number | null;
  /** The group the lease counted against (group-lease.ts); null for a lease of the plain path. */
  readonly group_key: string | null;
}

/**
 * Applies `ending` to a running job under `token`, then what it means for its children and its key's next job;
 * `live`: the lease must be live (complete, fail) or expired (reaper).
 */
export function endLease(
  st: Statements,
  moves: CounterMoves,
  row: SnapshotRow,
  token: string,
  ending: LeaseEnding,
  now: number,
  options: { readonly live: boolean; readonly runAfter?: number; readonly effects: FlowEffects },
): void {
  const lease = st.leaseEnd.get({ seq: row.seq, token, now, live: options.live ? 1 : 0 }) as EndedLease | undefined;
  if (lease === undefined) throw new Error('guarded lease end matched no lease; the snapshot and the guard disagree');
  groupLeaseEnded(st, row.tenant, row.kind, lease.group_key);
  const queued = ending.status === 'queued';
  const runAfter = queued ? (options.runAfter ?? now) : row.run_after;
  const attempt = { seq: row.seq, epoch: lease.epoch, attempt: lease.attempt, workerId: lease.worker_id, startedAt: lease.started_at, now };
  expectOne(
    st.jobEnd.run({
      ...attempt,
      token,
      status: ending.status,
      outcome: ending.outcome,
      runAfter,
      cancelRequested: lease.cancel_requested,
      effectStartedAt: lease.effect_started_at,
      ...lastErrorColumns(ending),
    }).changes,
  );
  st.attemptInsert.run({ ...attempt, outcome: ending.outcome, attemptCode: ending.attemptCode });
  if (queued) {
    const ready = { tenant: row.tenant, kind: row.kind, groupKey: row.group_key, priority: row.priority, runAfter, seq: row.seq };
    insertReady(st, { ...ready, deadlineAt: row.deadline_at, attempts: lease.attempt, epoch: lease.epoch }, 1);
  }
  // row.started_at is the first start (the job's own, or this attempt's when it is the first).
  moves.moved(countedJob(row, 'running'), countedJob({ ...row, finished_at: queued ? row.finished_at : now }, ending.status));
  moves.attemptEnded(row.tenant, now - lease.started_at);
  settleEnded(st, moves, [{ ...row, status: ending.status }], now, options.effects);
}

export function completeInTx(st: Statements, moves: CounterMoves, params: CompleteParams, now: number, effects: FlowEffects): CompleteOutcome {
  const row = lockJob(st, params.id, params.tenant);
  if (row === undefined) return { kind: 'rejected', code: 'not_found' };
  const decision = decideCompletion(toSnapshot(row), params.token, now);
  if (decision.kind === 'replay') return { kind: 'completed', replayed: true };
  if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
  const result = params.result;
  const size = decideResultSize(result?.body.length ?? null, params.maxResultBytes);
  if (size.kind === 'too_large') {
    endLease(st, moves, row, params.token, resultTooLargeEnding(size), now, { live: true, effects });
    return { kind: 'result_too_large' };
  }
  // The job is marked succeeded before its result is inserted (the schema's trigger requires it).
  endLease(st, moves, row, params.token, SUCCEEDED, now, { live: true, effects });
  if (result !== undefined) {
    st.resultInsert.run(row.seq, result.contentType, result.body, sha256Hex(result.body), result.body.length);
    moves.storage(row.tenant, result.body.length);
  }
  crashPoint('complete.inside-transaction');
  return { kind: 'completed', replayed: false };
}

/**
 * A batch of completions with the decisions of completeInTx, applied by one statement per step for the jobs that
 * succeed: their snapshots, the guarded lease ends, the job ends and the attempt rows (then each result, and the
 * counter moves once per commit). A batch that names a job twice, or jobs of more than one tenant, is completed
 * one at a time in its order, so a second completion of a job sees the first.
 */
export function completeManyInTx(st: Statements, moves: CounterMoves, params: readonly CompleteParams[], now: number, effects: FlowEffects): CompleteOutcome[] {
  const tenant = params[0]?.tenant;
  if (params.length < 2 || params.some((p) => p.tenant !== tenant) || new Set(params.map((p) => p.id)).size !== params.length) {
    return params.map((p) => completeInTx(st, moves, p, now, effects));
  }
  const rows = new Map((st.jobLockMany.all({ ids: JSON.stringify(params.map((p) => p.id)), tenant }) as (SnapshotRow & { i: number })[]).map((r) => [r.i, r]));
  const outcomes: CompleteOutcome[] = [];
  const succeeding: { readonly row: SnapshotRow; readonly params: CompleteParams }[] = [];
  params.forEach((p, i) => {
    const row = rows.get(i);
    if (row === undefined) return void outcomes.push({ kind: 'rejected', code: 'not_found' });
    const decision = decideCompletion(toSnapshot(row), p.token, now);
    if (decision.kind === 'replay') return void outcomes.push({ kind: 'completed', replayed: true });
    if (decision.kind === 'reject') return void outcomes.push({ kind: 'rejected', code: decision.code });
    const size = decideResultSize(p.result?.body.length ?? null, p.maxResultBytes);
    if (size.kind === 'too_large') {
      endLease(st, moves, row, p.token, resultTooLargeEnding(size), now, { live: true, effects });
      return void outcomes.push({ kind: 'result_too_large' });
    }
    succeeding.push({ row, params: p });
    outcomes.push({ kind: 'completed', replayed: false });
  });
  if (succeeding.length > 0) succeedAll(st, moves, succeeding, now, effects);
  crashPoint('complete.inside-transaction');
  return outcomes;
}

/**
 * The successes of a batch: one guarded statement ends their leases, one their jobs, one writes their attempts.
 * The attempts that end are the snapshots' (a running job's epoch, attempt, worker, start, effect mark and cancel
 * request are its lease row's), read in this write transaction; the lease ends must remove every one of them.
 */
function succeedAll(
  st: Statements,
  moves: CounterMoves,
  jobs: readonly { readonly row: SnapshotRow; readonly params: CompleteParams }[],
  now: number,
  effects: FlowEffects,
): void {
  const ended = st.leaseEndMany.run({ rows: JSON.stringify(jobs.map(({ row, params }) => [row.seq, params.token])), now }).changes;
  if (ended !== jobs.length) throw new Error(`guarded lease ends matched ${ended} of ${jobs.length}; the snapshots and the guard disagree`);
  const rows = JSON.stringify(
    jobs.map(({ row, params }) => [
      row.seq,
      row.epoch,
      row.attempts,
      row.lease_owner,
      params.token,
      row.attempt_started_at,
      row.cancel_requested,
      row.effect_started_at,
    ]),
  );
  const ending = { status: SUCCEEDED.status, outcome: SUCCEEDED.outcome };
  const changed = st.jobEndMany.run({ rows, now, ...ending, ...lastErrorColumns(SUCCEEDED) }).changes;
  if (changed !== jobs.length) throw new Error(`job ends matched ${changed} of ${jobs.length}; the snapshots and the guard disagree`);
  st.attemptInsertMany.run({ rows, now, outcome: SUCCEEDED.outcome, attemptCode: SUCCEEDED.attemptCode });
  for (const { row, params } of jobs) {
    // Each result after its job is succeeded (the schema's trigger requires it).
    const result = params.result;
    if (result !== undefined) {
      st.resultInsert.run(row.seq, result.contentType, result.body, sha256Hex(result.body), result.body.length);
      moves.storage(row.tenant, result.body.length);
    }
    moves.moved(countedJob(row, 'running'), countedJob({ ...row, finished_at: now }, SUCCEEDED.status));
    moves.attemptEnded(row.tenant, now - (row.attempt_started_at ?? now));
    groupLeaseEnded(st, row.tenant, row.kind, row.lease_group);
  }
  settleEnded(
    st,
    moves,
    jobs.map(({ row }) => ({ ...row, status: SUCCEEDED.status })),
    now,
    effects,
  );
}

/** A worker's fail; a retry puts the job's (tenant, kind) into `effects.available`. */
export function failInTx(st: Statements, moves: CounterMoves, params: FailParams, random: Random, now: number, effects: FlowEffects): FailOutcome {
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
  endLease(st, moves, row, params.token, ending, now, runAfter === null ? { live: true, effects } : { live: true, runAfter, effects });
  if (runAfter !== null) effects.available.push({ tenant: row.tenant, kind: row.kind });
  return {
    kind: 'failed',
    status: ending.status as 'queued' | 'dead' | 'cancelled' | 'unknown',
    runAfter,
    replayed: false,
    failureClass: ending.lastError?.class ?? null,
  };
}
