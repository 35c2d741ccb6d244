import { describe, expect, it } from 'vitest';
import { backoffDelayMs } from '../../src/core/backoff.js';
import { canonicalJson } from '../../src/core/canonical-json.js';
import { parseRfc3339 } from '../../src/core/clock.js';
import { JOB_STATUSES } from '../../src/core/states.js';
import {
  decideCancel,
  decideCompletion,
  decideFailure,
  decideLeaseExpiry,
  decideLiveLeaseWrite,
  decideReconcile,
  decideRenew,
  decideResultSize,
} from '../../src/core/transitions.js';

import { NOW, policy, running } from '../support/job-snapshots.js';

describe('decideCompletion', () => {
  it('commits only under the live token', () => {
    expect(decideCompletion(running, 'tok', NOW)).toEqual({ kind: 'commit' });
    expect(decideCompletion(running, 'other', NOW)).toEqual({ kind: 'reject', code: 'stale_lease' });
    expect(decideCompletion(running, 'tok', NOW + 100)).toEqual({ kind: 'reject', code: 'stale_lease' });
  });
  it('replays a completion by the same token and refuses one past the deadline', () => {
    expect(decideCompletion({ ...running, status: 'succeeded', lastOutcome: 'succeeded' }, 'tok', NOW)).toEqual({ kind: 'replay' });
    expect(decideCompletion({ ...running, deadlineAt: NOW }, 'tok', NOW)).toEqual({ kind: 'reject', code: 'deadline_exceeded' });
    expect(decideCompletion({ ...running, deadlineAt: NOW - 1, leaseExpiresAt: NOW - 1 }, 'tok', NOW)).toEqual({
      kind: 'reject',
      code: 'deadline_exceeded',
    });
  });
});

describe('decideFailure', () => {
  it('retries with backoff, then dies when attempts are exhausted', () => {
    expect(decideFailure(running, 'tok', policy, NOW)).toEqual({ kind: 'retry', runAfter: NOW + 50 });
    expect(decideFailure({ ...running, attempts: 3 }, 'tok', policy, NOW)).toEqual({ kind: 'dead', code: 'attempts_exhausted' });
    expect(decideFailure(running, 'tok', { ...policy, retryable: false }, NOW)).toEqual({ kind: 'dead', code: 'permanent' });
  });
  it('dies instead of retrying past the deadline, and replays a repeated failure', () => {
    expect(decideFailure({ ...running, deadlineAt: NOW + 10 }, 'tok', policy, NOW)).toEqual({ kind: 'dead', code: 'deadline_exceeded' });
    expect(decideFailure({ ...running, status: 'queued', lastOutcome: 'failed' }, 'tok', policy, NOW)).toEqual({ kind: 'replay' });
    expect(decideFailure(running, 'old', policy, NOW)).toEqual({ kind: 'reject', code: 'stale_lease' });
  });
  it('never retries a failure after the handler declared an external effect', () => {
    expect(decideFailure({ ...running, effectStartedAt: NOW - 5 }, 'tok', policy, NOW)).toEqual({ kind: 'unknown' });
    // A cancel does not hide a declared effect, on fail as on lease expiry.
    expect(decideFailure({ ...running, effectStartedAt: NOW - 5, cancelRequested: true }, 'tok', policy, NOW)).toEqual({ kind: 'unknown' });
    expect(decideLeaseExpiry({ ...running, effectStartedAt: NOW - 5, cancelRequested: true }, NOW)).toEqual({ kind: 'unknown' });
    expect(decideFailure({ ...running, cancelRequested: true }, 'tok', policy, NOW)).toEqual({ kind: 'cancelled' });
  });
});

describe('decideLeaseExpiry', () => {
  it('requeues, kills on the last attempt, and never retries a started effect', () => {
    expect(decideLeaseExpiry(running, NOW)).toEqual({ kind: 'requeue' });
    expect(decideLeaseExpiry({ ...running, attempts: 3 }, NOW)).toEqual({ kind: 'dead', code: 'lease_expired' });
    expect(decideLeaseExpiry({ ...running, effectStartedAt: NOW - 1 }, NOW)).toEqual({ kind: 'unknown' });
    expect(decideLeaseExpiry({ ...running, cancelRequested: true }, NOW)).toEqual({ kind: 'cancelled' });
  });
});

describe('decideRenew', () => {
  it('extends a live lease but never past the deadline', () => {
    expect(decideRenew(running, 'tok', 500, NOW)).toEqual({ kind: 'renew', leaseExpiresAt: NOW + 500 });
    expect(decideRenew({ ...running, deadlineAt: NOW + 50 }, 'tok', 500, NOW)).toEqual({ kind: 'renew', leaseExpiresAt: NOW + 50 });
    expect(decideRenew({ ...running, cancelRequested: true }, 'tok', 500, NOW)).toEqual({ kind: 'reject', code: 'cancelled' });
  });
});

describe('decideCancel', () => {
  it('cancels a queued job now, marks a running one, repeats a cancel, and refuses other ends', () => {
    expect(decideCancel({ status: 'queued' })).toEqual({ kind: 'cancel_now' });
    expect(decideCancel({ status: 'waiting' })).toEqual({ kind: 'cancel_now' });
    expect(decideCancel({ status: 'running' })).toEqual({ kind: 'mark_running' });
    expect(decideCancel({ status: 'cancelled' })).toEqual({ kind: 'already_cancelled' });
    for (const status of ['succeeded', 'dead', 'unknown'] as const) expect(decideCancel({ status })).toEqual({ kind: 'already_terminal' });
  });
});

describe('decideReconcile', () => {
  it('applies the verdict to an unknown job only', () => {
    for (const outcome of ['succeeded', 'dead', 'requeue'] as const) {
      expect(decideReconcile({ status: 'unknown' }, outcome)).toEqual({ kind: outcome });
      for (const status of JOB_STATUSES.filter((s) => s !== 'unknown')) {
        expect(decideReconcile({ status }, outcome)).toEqual({ kind: 'reject', code: 'not_unknown' });
      }
    }
  });
});

describe('decideLiveLeaseWrite', () => {
  it('applies under a live lease before the deadline', () => {
    expect(decideLiveLeaseWrite(running, 'tok', NOW)).toEqual({ kind: 'apply' });
    expect(decideLiveLeaseWrite(running, 'other', NOW)).toEqual({ kind: 'reject', code: 'stale_lease' });
    expect(decideLiveLeaseWrite(running, 'tok', NOW + 100)).toEqual({ kind: 'reject', code: 'stale_lease' });
    expect(decideLiveLeaseWrite({ ...running, status: 'succeeded' }, 'tok', NOW)).toEqual({ kind: 'reject', code: 'stale_lease' });
    expect(decideLiveLeaseWrite({ ...running, deadlineAt: NOW }, 'tok', NOW)).toEqual({ kind: 'reject', code: 'deadline_exceeded' });
    // A cancel request does not stop a checkpoint: the worker hears of it on its next renew.
    expect(decideLiveLeaseWrite({ ...running, cancelRequested: true }, 'tok', NOW)).toEqual({ kind: 'apply' });
  });
});

describe('decideResultSize', () => {
  it('lets a result up to the limit through, and no result or no limit always', () => {
    expect(decideResultSize(10, 10)).toEqual({ kind: 'fits' });
    expect(decideResultSize(11, 10)).toEqual({ kind: 'too_large', bytes: 11, maxBytes: 10 });
    expect(decideResultSize(null, 10)).toEqual({ kind: 'fits' });
    expect(decideResultSize(1_000_000, undefined)).toEqual({ kind: 'fits' });
  });
});

describe('backoff and helpers', () => {
  it('grows exponentially up to the cap with full jitter', () => {
    const p = { baseMs: 100, maxMs: 1000 };
    expect(backoffDelayMs(1, p, () => 0.999)).toBe(99);
    expect(backoffDelayMs(3, p, () => 0.999)).toBe(399);
    expect(backoffDelayMs(10, p, () => 0.999)).toBe(999);
    expect(backoffDelayMs(3, p, () => 0)).toBe(0);
  });
  it('sorts keys for the canonical form and parses only RFC 3339', () => {
    expect(canonicalJson({ b: 1, a: { d: 2, c: [3, { f: 1, e: 2 }] } })).toBe('{"a":{"c":[3,{"e":2,"f":1}],"d":2},"b":1}');
    // A payload parsed from JSON can own a "__proto__" key; it is data and must survive canonicalization.
    expect(canonicalJson(JSON.parse('{"z":1,"__proto__":{"x":1},"a":null}'))).toBe('{"__proto__":{"x":1},"a":null,"z":1}');
    expect(canonicalJson([null, 'x', 1.5, true])).toBe('[null,"x",1.5,true]');
    expect(parseRfc3339('2026-01-01T00:00:00Z')).toBe(Date.UTC(2026, 0, 1));
    expect(parseRfc3339('2026-01-01')).toBeNull();
    expect(parseRfc3339('yesterday')).toBeNull();
  });
});
