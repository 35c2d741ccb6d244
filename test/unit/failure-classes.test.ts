/**
 * Failure classes are decided by the same decisions as the transitions, and
 * a last error stored without a class (a row from before migration 2) is read
 * with the class its code and the job's state imply.
 */
import { describe, expect, it } from 'vitest';
import { expiryClassOf, FAILURE_CLASS_NAMES, failureClassOf, inferFailureClass } from '../../src/core/failure-classes.js';
import { decideFailure, decideLeaseExpiry, type JobSnapshot } from '../../src/core/transitions.js';

const running: JobSnapshot = {
  status: 'running',
  attempts: 1,
  maxAttempts: 3,
  leaseToken: 't',
  leaseExpiresAt: 2_000,
  deadlineAt: null,
  effectStartedAt: null,
  cancelRequested: false,
  lastOutcome: null,
};
const backoff = { baseMs: 100, maxMs: 100 };

function failClass(job: Partial<JobSnapshot>, retryable = true, random = () => 0.5): string {
  const decision = decideFailure({ ...running, ...job }, 't', { retryable, backoff, random }, 1_000);
  if (decision.kind === 'reject' || decision.kind === 'replay') throw new Error(`no class for ${decision.kind}`);
  return failureClassOf(decision);
}

describe('failure classes', () => {
  it('classifies every failure decision', () => {
    expect(failClass({})).toBe('transient');
    expect(failClass({}, false)).toBe('permanent');
    expect(failClass({ attempts: 3 })).toBe('attempts_exhausted');
    expect(failClass({ deadlineAt: 1_010 })).toBe('deadline_exceeded');
    expect(failClass({ cancelRequested: true })).toBe('cancelled');
    expect(failClass({ effectStartedAt: 900 }, false)).toBe('effect_unknown');
  });

  it('classifies every lease expiry', () => {
    const expired = { ...running, leaseExpiresAt: 500 };
    expect(expiryClassOf(decideLeaseExpiry(expired, 1_000))).toBe('lease_expired');
    expect(expiryClassOf(decideLeaseExpiry({ ...expired, attempts: 3 }, 1_000))).toBe('lease_expired');
    expect(expiryClassOf(decideLeaseExpiry({ ...expired, deadlineAt: 800 }, 1_000))).toBe('deadline_exceeded');
    expect(expiryClassOf(decideLeaseExpiry({ ...expired, cancelRequested: true }, 1_000))).toBe('cancelled');
    expect(expiryClassOf(decideLeaseExpiry({ ...expired, effectStartedAt: 600 }, 1_000))).toBe('effect_unknown');
  });

  it('infers the class of a last error stored without one', () => {
    const job = { status: 'dead' as const, attempts: 1, maxAttempts: 3 };
    expect(inferFailureClass(job, 'lease_expired')).toBe('lease_expired');
    expect(inferFailureClass(job, 'reconciled_dead')).toBe('reconciled_dead');
    expect(inferFailureClass(job, 'dependency_failed')).toBe('dependency_failed');
    expect(inferFailureClass(job, 'smtp_down')).toBe('permanent');
    expect(inferFailureClass({ ...job, attempts: 3 }, 'smtp_down')).toBe('attempts_exhausted');
    expect(inferFailureClass({ ...job, status: 'queued' }, 'smtp_down')).toBe('transient');
    expect(inferFailureClass({ ...job, status: 'unknown' }, 'smtp_down')).toBe('effect_unknown');
    expect(inferFailureClass({ ...job, status: 'cancelled' }, 'aborted')).toBe('cancelled');
    // A worker's code that happens to be a class name never promotes itself to "transient" or "permanent".
    expect(inferFailureClass({ ...job, status: 'queued' }, 'permanent')).toBe('transient');
    expect(FAILURE_CLASS_NAMES).toHaveLength(10);
  });
});
