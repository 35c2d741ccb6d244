/**
 * The edges of src/core/ that the store-level tests pass over: each
 * comparison at its boundary (equal times, the last attempt, a retry landing
 * exactly on the deadline), each guard with its null, and the small helpers
 * (ids, clock, errors, states, crash points). Written against the mutants
 * `npm run mutation` left alive; docs/RELIABILITY.md §11 lists what remains.
 */

import { describe, expect, it } from 'vitest';
import { backoffDelayMs, DEFAULT_BACKOFF } from '../../src/core/backoff.js';
import { canonicalJson } from '../../src/core/canonical-json.js';
import { ManualClock, parseRfc3339, systemClock, toRfc3339, toRfc3339OrNull } from '../../src/core/clock.js';
import { ERROR_CODES, isErrorCode, JOB_FAILURE_CODES, LeaseholdError, StoreUnavailableError } from '../../src/core/errors.js';
import { FAILURE_CLASSES, inferFailureClass, isFailureClass } from '../../src/core/failure-classes.js';
import { armedCrashPoint, parseCrashSetting } from '../../src/core/fault-points.js';
import { constantTimeEqual, hashApiKey, isJobId, newApiKey, newJobId, newLeaseToken, sha256Hex } from '../../src/core/ids.js';
import { systemRandom } from '../../src/core/random.js';
import { isJobStatus, isRole, JOB_STATUSES } from '../../src/core/states.js';
import {
  decideCompletion,
  decideFailure,
  decideLeaseExpiry,
  decideRenew,
  decideRequeue,
  holdsLiveLease,
  isPastDeadline,
  type JobSnapshot,
} from '../../src/core/transitions.js';

import { NOW, policy, running } from '../support/job-snapshots.js';

describe('lease and deadline guards', () => {
  it('holds a lease only while running, under the same token, strictly before expiry', () => {
    expect(holdsLiveLease(running, 'tok', NOW)).toBe(true);
    expect(holdsLiveLease(running, 'tok', NOW + 99)).toBe(true);
    expect(holdsLiveLease(running, 'tok', NOW + 100)).toBe(false);
    expect(holdsLiveLease({ ...running, status: 'queued' }, 'tok', NOW)).toBe(false);
    expect(holdsLiveLease({ ...running, leaseToken: null }, 'tok', NOW)).toBe(false);
    // Before the epoch a null expiry compares as 0 > now: the null check itself must refuse it.
    expect(holdsLiveLease({ ...running, leaseExpiresAt: null }, 'tok', -10)).toBe(false);
  });

  it('is past the deadline from the deadline on, never without one', () => {
    expect(isPastDeadline({ deadlineAt: NOW }, NOW)).toBe(true);
    expect(isPastDeadline({ deadlineAt: NOW + 1 }, NOW)).toBe(false);
    expect(isPastDeadline({ deadlineAt: null }, NOW)).toBe(false);
  });
});

describe('decisions at their edges', () => {
  it('replays a completion only for a succeeded job, the same token and a succeeded last attempt', () => {
    const done: JobSnapshot = { ...running, status: 'succeeded', lastOutcome: 'succeeded' };
    expect(decideCompletion(done, 'tok', NOW)).toEqual({ kind: 'replay' });
    expect(decideCompletion(done, 'other', NOW)).toEqual({ kind: 'reject', code: 'stale_lease' });
    expect(decideCompletion({ ...done, lastOutcome: 'expired' }, 'tok', NOW)).toEqual({ kind: 'reject', code: 'stale_lease' });
    expect(decideCompletion({ ...running, lastOutcome: 'succeeded' }, 'tok', NOW)).toEqual({ kind: 'commit' });
    // Past the deadline, only the current token hears "deadline"; another token is stale.
    expect(decideCompletion({ ...running, deadlineAt: NOW }, 'other', NOW)).toEqual({ kind: 'reject', code: 'stale_lease' });
    expect(decideCompletion({ ...running, status: 'queued', deadlineAt: NOW }, 'tok', NOW)).toEqual({ kind: 'reject', code: 'stale_lease' });
  });

  it('replays a failure only for an ended attempt of the same token that failed', () => {
    const failed: JobSnapshot = { ...running, status: 'queued', lastOutcome: 'failed' };
    expect(decideFailure(failed, 'tok', policy, NOW)).toEqual({ kind: 'replay' });
    expect(decideFailure({ ...failed, status: 'dead' }, 'tok', policy, NOW)).toEqual({ kind: 'replay' });
    expect(decideFailure(failed, 'other', policy, NOW)).toEqual({ kind: 'reject', code: 'stale_lease' });
    expect(decideFailure({ ...failed, lastOutcome: 'expired' }, 'tok', policy, NOW)).toEqual({ kind: 'reject', code: 'stale_lease' });
    expect(decideFailure({ ...failed, status: 'succeeded' }, 'tok', policy, NOW)).toEqual({ kind: 'reject', code: 'stale_lease' });
    // A running job whose previous attempt failed is failed anew, not replayed.
    expect(decideFailure({ ...running, lastOutcome: 'failed' }, 'tok', policy, NOW)).toEqual({ kind: 'retry', runAfter: NOW + 50 });
  });

  it('retries up to the last attempt and dies on it; a retry landing on the deadline dies', () => {
    expect(decideFailure({ ...running, attempts: 2 }, 'tok', policy, NOW)).toEqual({ kind: 'retry', runAfter: NOW + 100 });
    expect(decideFailure({ ...running, attempts: 3 }, 'tok', policy, NOW)).toEqual({ kind: 'dead', code: 'attempts_exhausted' });
    expect(decideFailure({ ...running, attempts: 4 }, 'tok', policy, NOW)).toEqual({ kind: 'dead', code: 'attempts_exhausted' });
    // runAfter = NOW + 50: on the deadline is dead, one ms before it is a retry.
    expect(decideFailure({ ...running, deadlineAt: NOW + 50 }, 'tok', policy, NOW)).toEqual({ kind: 'dead', code: 'deadline_exceeded' });
    expect(decideFailure({ ...running, deadlineAt: NOW + 51 }, 'tok', policy, NOW)).toEqual({ kind: 'retry', runAfter: NOW + 50 });
    expect(decideFailure({ ...running, cancelRequested: true }, 'tok', { ...policy, retryable: false }, NOW)).toEqual({ kind: 'cancelled' });
  });

  it('expires a lease into the deadline first, then the last attempt, then a requeue', () => {
    expect(decideLeaseExpiry({ ...running, deadlineAt: NOW }, NOW)).toEqual({ kind: 'dead', code: 'deadline_exceeded' });
    expect(decideLeaseExpiry({ ...running, deadlineAt: NOW + 1 }, NOW)).toEqual({ kind: 'requeue' });
    expect(decideLeaseExpiry({ ...running, attempts: 3, deadlineAt: NOW }, NOW)).toEqual({ kind: 'dead', code: 'deadline_exceeded' });
    expect(decideLeaseExpiry({ ...running, attempts: 2 }, NOW)).toEqual({ kind: 'requeue' });
    expect(decideLeaseExpiry({ ...running, attempts: 4 }, NOW)).toEqual({ kind: 'dead', code: 'lease_expired' });
    expect(decideLeaseExpiry({ ...running, cancelRequested: true, deadlineAt: NOW }, NOW)).toEqual({ kind: 'cancelled' });
  });

  it('renews a live lease by leaseMs, capped by a later or earlier deadline, and refuses otherwise', () => {
    expect(decideRenew({ ...running, deadlineAt: NOW + 10_000 }, 'tok', 500, NOW)).toEqual({ kind: 'renew', leaseExpiresAt: NOW + 500 });
    expect(decideRenew({ ...running, deadlineAt: NOW + 500 }, 'tok', 500, NOW)).toEqual({ kind: 'renew', leaseExpiresAt: NOW + 500 });
    expect(decideRenew(running, 'other', 500, NOW)).toEqual({ kind: 'reject', code: 'stale_lease' });
    expect(decideRenew(running, 'tok', 500, NOW + 100)).toEqual({ kind: 'reject', code: 'stale_lease' });
    expect(decideRenew({ ...running, deadlineAt: NOW }, 'tok', 500, NOW)).toEqual({ kind: 'reject', code: 'deadline_exceeded' });
  });

  it('requeues only a dead job', () => {
    expect(decideRequeue({ status: 'dead' })).toEqual({ kind: 'requeue' });
    for (const status of JOB_STATUSES.filter((s) => s !== 'dead')) expect(decideRequeue({ status })).toEqual({ kind: 'reject', code: 'not_dead' });
  });
});

describe('backoff', () => {
  it('uses the base delay for attempt 0 and 1, doubles after, and stops doubling at 2^30', () => {
    const p = { baseMs: 100, maxMs: 1_000_000 };
    expect(backoffDelayMs(0, p, () => 0.999)).toBe(99);
    expect(backoffDelayMs(1, p, () => 0.999)).toBe(99);
    expect(backoffDelayMs(2, p, () => 0.999)).toBe(199);
    const huge = { baseMs: 1, maxMs: 2 ** 40 };
    expect(backoffDelayMs(31, huge, () => 0.5)).toBe(2 ** 29);
    expect(backoffDelayMs(50, huge, () => 0.5)).toBe(2 ** 29);
  });

  it('defaults to 1 s doubling up to 5 min, frozen', () => {
    expect(DEFAULT_BACKOFF).toEqual({ baseMs: 1_000, maxMs: 300_000 });
    expect(Object.isFrozen(DEFAULT_BACKOFF)).toBe(true);
  });
});

describe('canonical JSON', () => {
  it('keeps null, scalars and arrays as they are, and sorts nested keys', () => {
    expect(canonicalJson(null)).toBe('null');
    expect(canonicalJson('s')).toBe('"s"');
    expect(canonicalJson({ b: [{ d: 1, c: null }], a: 1 })).toBe('{"a":1,"b":[{"c":null,"d":1}]}');
  });
});

describe('clock', () => {
  it('reads the system clock, and a manual clock from 2026-01-01 that moves only by hand', () => {
    const before = Date.now();
    const read = systemClock.now();
    expect(read).toBeGreaterThanOrEqual(before);
    expect(read).toBeLessThanOrEqual(Date.now());
    const clock = new ManualClock();
    expect(clock.now()).toBe(Date.UTC(2026, 0, 1));
    clock.advance(250);
    expect(clock.now()).toBe(Date.UTC(2026, 0, 1) + 250);
    clock.set(7);
    expect(clock.now()).toBe(7);
    expect(new ManualClock(42).now()).toBe(42);
  });

  it('formats RFC 3339 and parses only full timestamps with an offset', () => {
    expect(toRfc3339(Date.UTC(2026, 0, 2, 3, 4, 5, 6))).toBe('2026-01-02T03:04:05.006Z');
    expect(toRfc3339OrNull(null)).toBeNull();
    expect(toRfc3339OrNull(0)).toBe('1970-01-01T00:00:00.000Z');
    expect(parseRfc3339('2026-01-01T02:00:00+02:00')).toBe(Date.UTC(2026, 0, 1));
    expect(parseRfc3339('2026-01-01t00:00:00.123456789z')).toBe(Date.UTC(2026, 0, 1) + 123);
    expect(parseRfc3339('2026-01-01 00:00:00Z')).toBe(Date.UTC(2026, 0, 1));
    expect(parseRfc3339('2026-01-01T00:00:00')).toBeNull();
    expect(parseRfc3339('2026-01-01T00:00:00.1234567890Z')).toBeNull();
    expect(parseRfc3339('x2026-01-01T00:00:00Z')).toBeNull();
    // An expanded year that Date.parse accepts: only the anchored pattern refuses it.
    expect(parseRfc3339('+002026-01-01T00:00:00Z')).toBeNull();
    expect(parseRfc3339('2026-01-01T00:00:00Zx')).toBeNull();
    expect(parseRfc3339('2026-13-45T00:00:00Z')).toBeNull();
  });
});

describe('errors, states and classes', () => {
  it('knows a failure class only by its own name, never by an object that prints as one', () => {
    expect(isFailureClass('transient')).toBe(true);
    expect(isFailureClass(['transient'])).toBe(false);
    expect(isFailureClass('toString')).toBe(false);
    expect(isFailureClass(undefined)).toBe(false);
  });

  it('draws the system random in [0, 1), not always the same', () => {
    const draws = Array.from({ length: 100 }, () => systemRandom());
    for (const draw of draws) {
      expect(draw).toBeGreaterThanOrEqual(0);
      expect(draw).toBeLessThan(1);
    }
    expect(new Set(draws).size).toBeGreaterThan(90);
  });

  it('gives each error its status, a 503 store error a 1 s Retry-After, and keeps the cause', () => {
    const cause = new Error('disk');
    const error = new LeaseholdError('stale_lease', 'gone', { retryAfterSeconds: 3, cause });
    expect(error).toMatchObject({ name: 'LeaseholdError', code: 'stale_lease', status: 409, message: 'gone', retryAfterSeconds: 3, cause });
    expect(new LeaseholdError('not_found', 'x').cause).toBeUndefined();
    // No own `cause` at all without one, so a logged error carries no empty cause field.
    expect(Object.hasOwn(new LeaseholdError('not_found', 'x'), 'cause')).toBe(false);
    expect(new LeaseholdError('not_found', 'x').retryAfterSeconds).toBeUndefined();
    const unavailable = new StoreUnavailableError(undefined, cause);
    expect(unavailable).toMatchObject({
      name: 'StoreUnavailableError',
      code: 'store_unavailable',
      status: 503,
      retryAfterSeconds: 1,
      cause,
      message: 'the job store is unavailable',
    });
    expect(unavailable).toBeInstanceOf(LeaseholdError);
    expect(isErrorCode('stale_lease')).toBe(true);
    expect(isErrorCode('toString')).toBe(false);
    expect(isErrorCode(409)).toBe(false);
    // An array would pass a property lookup by its string form.
    expect(isErrorCode(['stale_lease'])).toBe(false);
    expect(Object.keys(ERROR_CODES).length).toBeGreaterThan(20);
  });

  it('reads a stored worker code named like a class by where the job ended', () => {
    expect(inferFailureClass({ status: 'dead', attempts: 3, maxAttempts: 3 }, 'transient')).toBe('attempts_exhausted');
    expect(inferFailureClass({ status: 'dead', attempts: 1, maxAttempts: 3 }, 'permanent')).toBe('permanent');
    expect(inferFailureClass({ status: 'queued', attempts: 1, maxAttempts: 3 }, 'lease_expired')).toBe('lease_expired');
  });

  it('describes every failure class and queue failure code in words', () => {
    for (const text of [...Object.values(FAILURE_CLASSES), ...Object.values(JOB_FAILURE_CODES)]) expect(text.length).toBeGreaterThan(10);
    expect(Object.keys(JOB_FAILURE_CODES).sort()).toEqual([
      'cancelled',
      'deadline_exceeded',
      'dependency_failed',
      'effect_unknown',
      'lease_expired',
      'reconciled_dead',
      'result_too_large',
    ]);
  });

  it('knows the statuses and the roles', () => {
    expect(JOB_STATUSES).toEqual(['queued', 'running', 'succeeded', 'dead', 'unknown', 'cancelled', 'waiting']);
    expect(isJobStatus('unknown')).toBe(true);
    expect(isJobStatus('bogus')).toBe(false);
    expect(isJobStatus(1)).toBe(false);
    expect(isRole('worker')).toBe(true);
    expect(isRole('root')).toBe(false);
    expect(isRole(null)).toBe(false);
  });
});

describe('ids and secrets', () => {
  it('lays out job ids as UUIDv7: the time first, version 7, variant 10', () => {
    const id = newJobId(0x0123456789ab);
    expect(id).toMatch(/^01234567-89ab-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(isJobId(id)).toBe(true);
    expect(newJobId(1) < newJobId(2)).toBe(true);
    expect(isJobId(`x${id}`)).toBe(false);
    expect(isJobId(`${id}x`)).toBe(false);
    expect(isJobId(id.toUpperCase())).toBe(false);
  });

  it('keeps the random bits beside the version and variant bits of a job id random', () => {
    // 1,000 ids of the same millisecond: every hex digit after the time takes more than one value.
    const ids = Array.from({ length: 1_000 }, () => newJobId(7).replaceAll('-', ''));
    for (let digit = 12; digit < 32; digit++) {
      if (digit === 12) continue; // the version digit, always 7
      const seen = new Set(ids.map((id) => id[digit]));
      expect(seen.size, `hex digit ${digit}`).toBeGreaterThan(digit === 16 ? 1 : 8);
    }
    for (const id of ids) expect('89ab').toContain(id[16]);
  });

  it('draws tokens and keys that never repeat, across refills of the random pool', () => {
    const tokens = Array.from({ length: 600 }, () => newLeaseToken());
    expect(new Set(tokens).size).toBe(600);
    for (const token of tokens) expect(token).toMatch(/^[A-Za-z0-9_-]{24}$/);
    const ids = Array.from({ length: 600 }, () => newJobId(5));
    expect(new Set(ids).size).toBe(600);
    const key = newApiKey();
    expect(key).toMatch(/^lh_[A-Za-z0-9_-]{32}$/);
    expect(newApiKey()).not.toBe(key);
  });

  it('hashes with SHA-256 and compares in constant time', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Hex(new Uint8Array([97, 98, 99]))).toBe(sha256Hex('abc'));
    expect(hashApiKey('abc')).toBe(sha256Hex('abc'));
    expect(constantTimeEqual('same', 'same')).toBe(true);
    expect(constantTimeEqual('same', 'sane')).toBe(false);
    expect(constantTimeEqual('same', 'same!')).toBe(false);
  });
});

describe('crash points', () => {
  it('dies at exactly the n-th pass of an armed point, and never at another point', () => {
    let deaths: string[] = [];
    const pass = armedCrashPoint(parseCrashSetting('lease.after-commit:2,complete.after-commit'), () => deaths.push('died'));
    pass('enqueue.after-commit');
    pass('lease.after-commit');
    expect(deaths).toEqual([]);
    pass('lease.after-commit');
    expect(deaths).toEqual(['died']);
    pass('lease.after-commit');
    expect(deaths).toEqual(['died']);
    deaths = [];
    pass('complete.after-commit');
    expect(deaths).toEqual(['died']);
  });
});
