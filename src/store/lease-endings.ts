/**
 * What each way a job can end writes, decided once for every backend: the
 * status, the outcome stored on the job and its attempt, and the last error
 * (code, message, failure class). The decide* functions of core/transitions.ts
 * say which ending applies; these functions say what it stores; each backend
 * binds the result into its guarded statement as parameters, so no error
 * code, message or failure class is written in SQL.
 */

import { JOB_FAILURE_CODES } from '../core/errors.js';
import { expiryClassOf, failureClassOf } from '../core/failure-classes.js';
import type { JobStatus } from '../core/states.js';
import type { AttemptOutcome, CancelDecision, ExpiryDecision, FailureDecision, ReconcileDecision, ResultSizeDecision } from '../core/transitions.js';
import type { CancelOutcome, JobError, JobRecord, StoredJobError } from './store.js';

export interface Ending {
  readonly status: JobStatus;
  /** The job's last_outcome and its attempt's outcome; null when no attempt ends (a queued job). */
  readonly outcome: AttemptOutcome | null;
  /** The job's last error; null clears it. */
  readonly lastError: StoredJobError | null;
  /** The error code stored on the ending attempt. */
  readonly attemptCode: string | null;
}

/** An ending whose status is one a lease can end in (complete, fail, expiry). */
export type LeaseEnding = Ending & { readonly status: 'succeeded' | 'queued' | 'dead' | 'cancelled' | 'unknown'; readonly outcome: AttemptOutcome };

/** An ending that ends no attempt: a queued job's (deadline, cancel) or a reconcile's. */
export type NoAttemptEnding = Ending & { readonly outcome: null };

function queueError(code: keyof typeof JOB_FAILURE_CODES & StoredJobError['class']): StoredJobError {
  return { code, message: JOB_FAILURE_CODES[code], class: code };
}

export const SUCCEEDED: LeaseEnding = Object.freeze({ status: 'succeeded', outcome: 'succeeded', lastError: null, attemptCode: null });

/** complete with a result over the kind's limit: dead, the sizes in the message. */
export function resultTooLargeEnding(size: Extract<ResultSizeDecision, { kind: 'too_large' }>): LeaseEnding {
  return {
    status: 'dead',
    outcome: 'failed',
    lastError: {
      code: 'result_too_large',
      message: `the result is ${size.bytes} bytes; the kind allows ${size.maxBytes}`,
      class: 'result_too_large',
    },
    attemptCode: 'result_too_large',
  };
}

/** A worker's fail that decideFailure let through: the worker's own code and message, the queue's class. */
export function failureEnding(decision: Extract<FailureDecision, { kind: 'retry' | 'dead' | 'cancelled' | 'unknown' }>, error: JobError): LeaseEnding {
  return {
    status: decision.kind === 'retry' ? 'queued' : decision.kind,
    outcome: 'failed',
    lastError: { code: error.code, message: error.message, class: failureClassOf(decision) },
    attemptCode: error.code,
  };
}

/** A lease that ran out, as decideLeaseExpiry decided. */
export function expiryEnding(decision: ExpiryDecision): LeaseEnding {
  const error = (code: keyof typeof JOB_FAILURE_CODES): StoredJobError => ({ code, message: JOB_FAILURE_CODES[code], class: expiryClassOf(decision) });
  switch (decision.kind) {
    case 'requeue':
      return { status: 'queued', outcome: 'expired', lastError: error('lease_expired'), attemptCode: 'lease_expired' };
    case 'unknown':
      return { status: 'unknown', outcome: 'expired', lastError: error('effect_unknown'), attemptCode: 'lease_expired' };
    case 'cancelled':
      return { status: 'cancelled', outcome: 'cancelled', lastError: error('cancelled'), attemptCode: 'cancelled' };
    case 'dead':
      return {
        status: 'dead',
        outcome: decision.code === 'deadline_exceeded' ? 'deadline' : 'expired',
        lastError: error(decision.code),
        attemptCode: decision.code,
      };
  }
}

/** A queued job whose deadline passed: dead, never leased again. */
export const QUEUED_DEADLINE: NoAttemptEnding = Object.freeze({ status: 'dead', outcome: null, lastError: queueError('deadline_exceeded'), attemptCode: null });

/** A cancel of a queued job (decideCancel's cancel_now). */
export const CANCELLED_NOW: NoAttemptEnding = Object.freeze({ status: 'cancelled', outcome: null, lastError: queueError('cancelled'), attemptCode: null });

/** A waiting job whose parent ended dead or cancelled (core/dependencies.ts decideParentEnd): dead without an attempt. */
export const DEPENDENCY_FAILED: NoAttemptEnding = Object.freeze({
  status: 'dead',
  outcome: null,
  lastError: queueError('dependency_failed'),
  attemptCode: null,
});

/** A cancel's answer once its decision is applied, with the job as it now stands. */
export function cancelOutcome(decision: Exclude<CancelDecision, { kind: 'already_terminal' }>, job: JobRecord): CancelOutcome {
  return { kind: decision.kind === 'mark_running' ? 'cancel_requested' : 'cancelled', job };
}

/** An unknown job reconciled as succeeded or dead (a requeue is not an ending: it clears nothing). */
export function reconcileEnding(decision: Extract<ReconcileDecision, { kind: 'succeeded' | 'dead' }>): NoAttemptEnding {
  return decision.kind === 'succeeded'
    ? { status: 'succeeded', outcome: null, lastError: null, attemptCode: null }
    : { status: 'dead', outcome: null, lastError: queueError('reconciled_dead'), attemptCode: null };
}

/** The last-error columns of an ending, as both backends bind them. */
export function lastErrorColumns(ending: Ending): { readonly code: string | null; readonly message: string | null; readonly errorClass: string | null } {
  const error = ending.lastError;
  return { code: error?.code ?? null, message: error?.message ?? null, errorClass: error?.class ?? null };
}
