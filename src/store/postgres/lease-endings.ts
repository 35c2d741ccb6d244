/**
 * Turns decisions that end a lease into rows for JOB_END_LEASES (queries.ts):
 * a batch of completions, one failure, or a batch of expired leases. Pure: it
 * reads locked snapshots and returns what to write, so the same code decides
 * for one job or a thousand. The codes and messages stored match the SQLite
 * backend, so both answer `GET /jobs/{id}` alike.
 */

import { JOB_FAILURE_CODES } from '../../core/errors.js';
import { expiryClassOf, failureClassOf, type FailureClass } from '../../core/failure-classes.js';
import {
  decideCompletion,
  decideLeaseExpiry,
  type AttemptOutcome,
  type FailureDecision,
  type JobSnapshot,
} from '../../core/transitions.js';
import type { CompleteOutcome, CompleteParams, FailParams, ReapOutcome } from '../store.js';
import { toSnapshot, type JobRow } from './row-mapping.js';

export interface EndLease {
  readonly id: string;
  readonly token: string;
  readonly status: 'succeeded' | 'queued' | 'dead' | 'cancelled' | 'unknown';
  readonly outcome: AttemptOutcome;
  /** Stored as the job's last error; null clears it. */
  readonly code: string | null;
  readonly message: string | null;
  /** The failure class stored with the last error; null with a null code. */
  readonly errorClass: FailureClass | null;
  /** For 'queued': when it may run again; null means now. */
  readonly runAfter: number | null;
  /** Stored on the attempt row. */
  readonly attemptCode: string | null;
  readonly result: { readonly contentType: string; readonly body: Buffer } | null;
}

type SnapshotRow = JobRow & { readonly now_ms: number };

export function completeBatch(
  params: readonly CompleteParams[],
  rows: readonly SnapshotRow[],
): { readonly outcomes: CompleteOutcome[]; readonly endings: EndLease[] } {
  // Snapshots are updated as decisions are made, so a job completed twice in
  // one batch sees its own first completion (and is answered as a replay).
  const snapshots = new Map<string, { row: SnapshotRow; snapshot: JobSnapshot }>(
    rows.map((row) => [row.id, { row, snapshot: toSnapshot(row) }]),
  );
  const outcomes: CompleteOutcome[] = [];
  const endings: EndLease[] = [];
  for (const p of params) {
    const entry = snapshots.get(p.id);
    if (entry === undefined || entry.row.tenant !== p.tenant) {
      outcomes.push({ kind: 'rejected', code: 'not_found' });
      continue;
    }
    const decision = decideCompletion(entry.snapshot, p.token, entry.row.now_ms);
    if (decision.kind === 'replay') {
      outcomes.push({ kind: 'completed', replayed: true });
      continue;
    }
    if (decision.kind === 'reject') {
      outcomes.push({ kind: 'rejected', code: decision.code });
      continue;
    }
    const result = p.result ?? null;
    if (result !== null && p.maxResultBytes !== undefined && result.body.length > p.maxResultBytes) {
      endings.push({
        id: p.id,
        token: p.token,
        status: 'dead',
        outcome: 'failed',
        code: 'result_too_large',
        message: `the result is ${result.body.length} bytes; the kind allows ${p.maxResultBytes}`,
        errorClass: 'result_too_large',
        runAfter: null,
        attemptCode: 'result_too_large',
        result: null,
      });
      entry.snapshot = { ...entry.snapshot, status: 'dead', lastOutcome: 'failed' };
      outcomes.push({ kind: 'result_too_large' });
      continue;
    }
    endings.push({
      id: p.id,
      token: p.token,
      status: 'succeeded',
      outcome: 'succeeded',
      code: null,
      message: null,
      errorClass: null,
      runAfter: null,
      attemptCode: null,
      result,
    });
    entry.snapshot = { ...entry.snapshot, status: 'succeeded', lastOutcome: 'succeeded' };
    outcomes.push({ kind: 'completed', replayed: false });
  }
  return { outcomes, endings };
}

/** The ending for a failure that decideFailure allowed (retry, dead, cancelled, or unknown after a declared effect). */
export function failDecisionRow(
  row: JobRow,
  params: FailParams,
  decision: Extract<FailureDecision, { kind: 'retry' | 'dead' | 'cancelled' | 'unknown' }>,
): EndLease {
  const status = decision.kind === 'retry' ? 'queued' : decision.kind;
  return {
    id: row.id,
    token: params.token,
    status,
    outcome: 'failed',
    code: params.error.code,
    message: params.error.message,
    errorClass: failureClassOf(decision),
    runAfter: decision.kind === 'retry' ? decision.runAfter : null,
    attemptCode: params.error.code,
    result: null,
  };
}

const EFFECT_UNKNOWN_MESSAGE = 'the lease expired after the handler started an external effect; reconcile it';

/** Endings for leases that ran out, with decideLeaseExpiry deciding each. */
export function reapBatch(rows: readonly SnapshotRow[]): {
  readonly endings: EndLease[];
  readonly counts: Omit<ReapOutcome, 'deadlineExpired'>;
} {
  const counts = { requeued: 0, dead: 0, unknown: 0, cancelled: 0 };
  const endings = rows.map((row): EndLease => {
    const decision = decideLeaseExpiry(toSnapshot(row), row.now_ms);
    const base = { id: row.id, token: row.lease_token ?? '', runAfter: null, result: null, errorClass: expiryClassOf(decision) };
    switch (decision.kind) {
      case 'requeue':
        counts.requeued++;
        return { ...base, status: 'queued', outcome: 'expired', code: 'lease_expired', message: JOB_FAILURE_CODES.lease_expired, attemptCode: 'lease_expired' };
      case 'unknown':
        counts.unknown++;
        return { ...base, status: 'unknown', outcome: 'expired', code: 'effect_unknown', message: EFFECT_UNKNOWN_MESSAGE, attemptCode: 'lease_expired' };
      case 'cancelled':
        counts.cancelled++;
        return { ...base, status: 'cancelled', outcome: 'cancelled', code: 'cancelled', message: 'cancelled by request', attemptCode: 'cancelled' };
      case 'dead':
        counts.dead++;
        return decision.code === 'deadline_exceeded'
          ? { ...base, status: 'dead', outcome: 'deadline', code: 'deadline_exceeded', message: JOB_FAILURE_CODES.deadline_exceeded, attemptCode: 'deadline_exceeded' }
          : { ...base, status: 'dead', outcome: 'expired', code: 'lease_expired', message: JOB_FAILURE_CODES.lease_expired, attemptCode: 'lease_expired' };
    }
  });
  return { endings, counts };
}
