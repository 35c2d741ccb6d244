/**
 * Failure classes: why an attempt or a job ended the way it did, as a stable
 * code beside the error code. The error code is whatever ended the attempt
 * (a worker's own code such as `smtp_timeout`, or the queue's such as
 * `lease_expired`); the class says which rule of the queue applied to it, so
 * an operator can tell "dead because the worker said permanent" from "dead
 * because attempts ran out" without knowing every worker's codes.
 *
 * Each class is decided by the same decide* function that decides the
 * transition, and stored with the job's last error.
 */

import type { JobStatus } from './states.js';
import type { ExpiryDecision, FailureDecision } from './transitions.js';

export const FAILURE_CLASSES = {
  transient: 'a retryable failure with attempts left: queued again after backoff',
  permanent: 'the worker failed the attempt with retryable: false (a permanent error, or stored input the handler cannot use): dead at once',
  attempts_exhausted: 'a retryable failure on the last allowed attempt: dead',
  lease_expired: 'the lease ran out before the worker completed or failed the job; the attempt counts: queued again, or dead on the last attempt',
  deadline_exceeded: 'the job passed its overall deadline, or its next retry would have: dead, never leased again',
  result_too_large: "the result was larger than the kind's maxResultBytes: dead, no result stored",
  effect_unknown: 'the attempt ended (lease expiry or failure) after the handler declared an external effect: unknown until an admin reconciles it',
  cancelled: 'cancelled on request',
  reconciled_dead: 'an admin reconciled an unknown job as dead',
  dependency_failed: 'a parent the job depends on (dependsOn) ended dead or cancelled: dead without an attempt, and so are its own waiting children',
} as const;

export type FailureClass = keyof typeof FAILURE_CLASSES;

export const FAILURE_CLASS_NAMES = Object.keys(FAILURE_CLASSES) as readonly FailureClass[];

export function isFailureClass(value: unknown): value is FailureClass {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(FAILURE_CLASSES, value);
}

/** The class of a failure that decideFailure let through (not a reject or a replay). */
export function failureClassOf(decision: Extract<FailureDecision, { kind: 'retry' | 'dead' | 'cancelled' | 'unknown' }>): FailureClass {
  switch (decision.kind) {
    case 'retry':
      return 'transient';
    case 'cancelled':
      return 'cancelled';
    case 'unknown':
      return 'effect_unknown';
    case 'dead':
      return decision.code;
  }
}

/** The class of a lease expiry. */
export function expiryClassOf(decision: ExpiryDecision): FailureClass {
  switch (decision.kind) {
    case 'requeue':
      return 'lease_expired';
    case 'cancelled':
      return 'cancelled';
    case 'unknown':
      return 'effect_unknown';
    case 'dead':
      return decision.code;
  }
}

/**
 * The best reading of a last error stored without a class (a row written
 * before the class was recorded). The queue's own codes name their class; a
 * worker's code is judged by where the job ended.
 */
export function inferFailureClass(job: { readonly status: JobStatus; readonly attempts: number; readonly maxAttempts: number }, code: string): FailureClass {
  if (isFailureClass(code) && code !== 'transient' && code !== 'permanent') return code;
  if (job.status === 'unknown') return 'effect_unknown';
  if (job.status === 'cancelled') return 'cancelled';
  if (job.status === 'dead') return job.attempts >= job.maxAttempts ? 'attempts_exhausted' : 'permanent';
  return 'transient';
}
