/**
 * The transition function. Each exported `decide*` looks at a snapshot of one
 * job (read inside the store's write transaction) plus the request, and says
 * what must happen. Stores apply the decision in the same transaction with a
 * statement guarded by the same conditions, so nothing else sets a status.
 *
 * Times are milliseconds since the epoch read from the store's clock, never a
 * worker's.
 */

import { backoffDelayMs, type BackoffPolicy } from './backoff.js';
import type { JobStatus } from './states.js';

/** The fields of a job that transitions depend on. */
export interface JobSnapshot {
  readonly status: JobStatus;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly leaseToken: string | null;
  readonly leaseExpiresAt: number | null;
  readonly deadlineAt: number | null;
  readonly effectStartedAt: number | null;
  readonly cancelRequested: boolean;
  /** Outcome of the attempt that `leaseToken` belongs to, once it ended. */
  readonly lastOutcome: AttemptOutcome | null;
}

export const ATTEMPT_OUTCOMES = ['succeeded', 'failed', 'expired', 'cancelled', 'deadline'] as const;
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

/** Is `token` the live lease of this job at `now`? */
export function holdsLiveLease(job: JobSnapshot, token: string, now: number): boolean {
  return job.status === 'running' && job.leaseToken !== null && job.leaseToken === token && job.leaseExpiresAt !== null && job.leaseExpiresAt > now;
}

export function isPastDeadline(job: Pick<JobSnapshot, 'deadlineAt'>, now: number): boolean {
  return job.deadlineAt !== null && job.deadlineAt <= now;
}

export type CompletionDecision =
  | { readonly kind: 'commit' }
  /** The same token already completed this job: answer success, change nothing. */
  | { readonly kind: 'replay' }
  | { readonly kind: 'reject'; readonly code: 'stale_lease' | 'deadline_exceeded' | 'cancelled' };

export function decideCompletion(job: JobSnapshot, token: string, now: number): CompletionDecision {
  if (job.status === 'succeeded' && job.leaseToken === token && job.lastOutcome === 'succeeded') {
    return { kind: 'replay' };
  }
  // Leases never outlive the deadline, so a current token past it is reported as the deadline, not as staleness.
  if (job.status === 'running' && job.leaseToken === token && isPastDeadline(job, now)) {
    return { kind: 'reject', code: 'deadline_exceeded' };
  }
  if (!holdsLiveLease(job, token, now)) return { kind: 'reject', code: 'stale_lease' };
  return { kind: 'commit' };
}

export interface FailureInput {
  readonly retryable: boolean;
  readonly backoff: BackoffPolicy;
  readonly random: () => number;
}

export type FailureDecision =
  | { readonly kind: 'retry'; readonly runAfter: number }
  | { readonly kind: 'dead'; readonly code: 'attempts_exhausted' | 'permanent' | 'deadline_exceeded' }
  /** A cancel was requested while the job ran: the failure ends it instead of a retry. */
  | { readonly kind: 'cancelled' }
  /** The handler declared an external effect and then failed: the effect may have happened. */
  | { readonly kind: 'unknown' }
  | { readonly kind: 'replay' }
  | { readonly kind: 'reject'; readonly code: 'stale_lease' };

export function decideFailure(job: JobSnapshot, token: string, input: FailureInput, now: number): FailureDecision {
  if (job.leaseToken === token && job.lastOutcome === 'failed' && job.status !== 'running' && job.status !== 'succeeded') {
    return { kind: 'replay' };
  }
  if (!holdsLiveLease(job, token, now)) return { kind: 'reject', code: 'stale_lease' };
  // As at lease expiry, a declared effect comes first: even a cancelled job must show that the effect may have happened.
  if (job.effectStartedAt !== null) return { kind: 'unknown' };
  if (job.cancelRequested) return { kind: 'cancelled' };
  if (!input.retryable) return { kind: 'dead', code: 'permanent' };
  if (job.attempts >= job.maxAttempts) return { kind: 'dead', code: 'attempts_exhausted' };
  const runAfter = now + backoffDelayMs(job.attempts, input.backoff, input.random);
  if (job.deadlineAt !== null && runAfter >= job.deadlineAt) return { kind: 'dead', code: 'deadline_exceeded' };
  return { kind: 'retry', runAfter };
}

export type ExpiryDecision =
  | { readonly kind: 'requeue' }
  | { readonly kind: 'dead'; readonly code: 'lease_expired' | 'deadline_exceeded' }
  | { readonly kind: 'cancelled' }
  | { readonly kind: 'unknown' };

/** What happens to a running job whose lease ran out. The expired attempt counts. */
export function decideLeaseExpiry(job: JobSnapshot, now: number): ExpiryDecision {
  // An external effect may have happened: a retry could do it twice.
  if (job.effectStartedAt !== null) return { kind: 'unknown' };
  if (job.cancelRequested) return { kind: 'cancelled' };
  if (isPastDeadline(job, now)) return { kind: 'dead', code: 'deadline_exceeded' };
  if (job.attempts >= job.maxAttempts) return { kind: 'dead', code: 'lease_expired' };
  return { kind: 'requeue' };
}

export type RenewDecision =
  | { readonly kind: 'renew'; readonly leaseExpiresAt: number }
  | { readonly kind: 'reject'; readonly code: 'stale_lease' | 'cancelled' | 'deadline_exceeded' };

export function decideRenew(job: JobSnapshot, token: string, leaseMs: number, now: number): RenewDecision {
  if (!holdsLiveLease(job, token, now)) return { kind: 'reject', code: 'stale_lease' };
  if (job.cancelRequested) return { kind: 'reject', code: 'cancelled' };
  if (isPastDeadline(job, now)) return { kind: 'reject', code: 'deadline_exceeded' };
  const leaseExpiresAt = job.deadlineAt === null ? now + leaseMs : Math.min(now + leaseMs, job.deadlineAt);
  return { kind: 'renew', leaseExpiresAt };
}

export type RequeueDecision = { readonly kind: 'requeue' } | { readonly kind: 'reject'; readonly code: 'not_dead' };

export function decideRequeue(job: Pick<JobSnapshot, 'status'>): RequeueDecision {
  return job.status === 'dead' ? { kind: 'requeue' } : { kind: 'reject', code: 'not_dead' };
}

export type CancelDecision =
  | { readonly kind: 'cancel_now' }
  | { readonly kind: 'mark_running' }
  /** Cancelling twice answers like the first time, and changes nothing. */
  | { readonly kind: 'already_cancelled' }
  | { readonly kind: 'already_terminal' };

export function decideCancel(job: Pick<JobSnapshot, 'status'>): CancelDecision {
  // An unknown job is resolved by an operator's reconcile, not by a cancel.
  if (job.status === 'queued' || job.status === 'waiting') return { kind: 'cancel_now' };
  if (job.status === 'running') return { kind: 'mark_running' };
  if (job.status === 'cancelled') return { kind: 'already_cancelled' };
  return { kind: 'already_terminal' };
}

export type ReconcileDecision =
  | { readonly kind: 'succeeded' }
  | { readonly kind: 'dead' }
  /** Back to queued with a fresh attempt budget, as a requeue of a dead job. */
  | { readonly kind: 'requeue' }
  | { readonly kind: 'reject'; readonly code: 'not_unknown' };

/** An operator's verdict on a job whose external effect may or may not have happened. */
export function decideReconcile(job: Pick<JobSnapshot, 'status'>, outcome: 'succeeded' | 'dead' | 'requeue'): ReconcileDecision {
  if (job.status !== 'unknown') return { kind: 'reject', code: 'not_unknown' };
  return { kind: outcome };
}

export type LiveLeaseDecision = { readonly kind: 'apply' } | { readonly kind: 'reject'; readonly code: 'stale_lease' | 'deadline_exceeded' };

/**
 * The writes a worker makes under its lease without ending it (a checkpoint,
 * the effect mark): a live lease before the deadline. Leases never outlive the
 * deadline, so a live token past it is reported as the deadline.
 */
export function decideLiveLeaseWrite(job: JobSnapshot, token: string, now: number): LiveLeaseDecision {
  if (!holdsLiveLease(job, token, now)) return { kind: 'reject', code: 'stale_lease' };
  if (isPastDeadline(job, now)) return { kind: 'reject', code: 'deadline_exceeded' };
  return { kind: 'apply' };
}

export type ResultSizeDecision =
  | { readonly kind: 'fits' }
  /** The job ends dead with result_too_large and no result is stored. */
  | { readonly kind: 'too_large'; readonly bytes: number; readonly maxBytes: number };

/** A completion's result against the kind's maxResultBytes; no result, or no limit, always fits. */
export function decideResultSize(resultBytes: number | null, maxResultBytes: number | undefined): ResultSizeDecision {
  if (resultBytes === null || maxResultBytes === undefined || resultBytes <= maxResultBytes) return { kind: 'fits' };
  return { kind: 'too_large', bytes: resultBytes, maxBytes: maxResultBytes };
}
