/**
 * The pure parts of the worker: how a thrown value becomes the stored
 * `{code, message}`, and the retry policy (which errors, how long, when to
 * give up). A manual clock and a fixed random make the delays exact.
 */

import { describe, expect, it } from 'vitest';
import { LeaseholdApiError, LeaseholdNetworkError, parseRetryAfter } from '../../src/client/errors.js';
import { ManualClock } from '../../src/core/clock.js';
import { describeFailure, PermanentJobError } from '../../src/worker/job-errors.js';
import { withRetry } from '../../src/worker/retry.js';

describe('describeFailure', () => {
  it('keeps a valid string code, defaults to handler_error, and honours retryable: false', () => {
    expect(describeFailure(Object.assign(new Error('x'), { code: 'upstream_timeout' }), [])).toEqual({
      code: 'upstream_timeout',
      message: 'x',
      retryable: true,
    });
    expect(describeFailure(new Error('x'), []).code).toBe('handler_error');
    expect(describeFailure(Object.assign(new Error('x'), { code: 42 }), []).code).toBe('handler_error');
    expect(describeFailure(Object.assign(new Error('x'), { code: 'has spaces' }), []).code).toBe('handler_error');
    expect(describeFailure(new PermanentJobError('bad input', 'bad_input'), [])).toEqual({ code: 'bad_input', message: 'bad input', retryable: false });
    expect(describeFailure(Object.assign(new Error('y'), { retryable: false }), []).retryable).toBe(false);
  });

  it('sends one line without the stack, control characters or known secrets, truncated', () => {
    const secret = 'lh_supersecretapikey123';
    const error = new Error(`failed with ${secret}\u0007 here\n    at f (file.js:1:1)`);
    const { message } = describeFailure(error, [secret]);
    expect(message).toBe('failed with [redacted]  here');
    expect(describeFailure(new Error('z'.repeat(5_000)), []).message.length).toBeLessThanOrEqual(1_000);
    expect(describeFailure('plain string', []).message).toBe('plain string');
    expect(describeFailure(undefined, []).message).toContain('non-error value thrown');
  });
});

describe('parseRetryAfter', () => {
  it('reads seconds and HTTP dates', () => {
    expect(parseRetryAfter('3', 0)).toBe(3);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 0)).toBe(10);
    expect(parseRetryAfter('soon', 0)).toBeUndefined();
    expect(parseRetryAfter(undefined, 0)).toBeUndefined();
  });
});

describe('withRetry', () => {
  const network = (): LeaseholdNetworkError => new LeaseholdNetworkError('POST /lease failed: ECONNREFUSED', 'ECONNREFUSED', undefined);

  it('retries network errors and 503s, not other API errors', async () => {
    let calls = 0;
    const value = await withRetry(
      async () => {
        calls += 1;
        if (calls === 1) throw network();
        if (calls === 2) throw new LeaseholdApiError(503, 'store_unavailable', 'down', undefined);
        return 'ok';
      },
      { policy: { baseMs: 1, maxMs: 2 }, clock: new ManualClock(), random: () => 0, sleep: async () => undefined },
    );
    expect(value).toBe('ok');
    expect(calls).toBe(3);

    let refused = 0;
    const error = await withRetry(
      async () => {
        refused += 1;
        throw new LeaseholdApiError(409, 'stale_lease', 'stale', undefined);
      },
      { policy: { baseMs: 1, maxMs: 2 }, clock: new ManualClock(), random: () => 0 },
    ).catch((e: unknown) => e);
    expect((error as LeaseholdApiError).code).toBe('stale_lease');
    expect(refused).toBe(1);
  });

  it('grows delays exponentially under the cap, honours Retry-After, and gives up before the horizon', async () => {
    const clock = new ManualClock(0);
    const delays: number[] = [];
    let calls = 0;
    const error = await withRetry(
      async () => {
        calls += 1;
        throw calls === 3 ? new LeaseholdApiError(503, 'overloaded', 'busy', 1) : network();
      },
      {
        policy: { baseMs: 1, maxMs: 8 },
        clock,
        // Just under 1: the full-jitter draw at the top of its range.
        random: () => 0.999,
        giveUpAt: () => 1_000 + 20,
        onRetry: (_error, delayMs) => delays.push(delayMs),
        sleep: async (ms) => clock.advance(ms),
      },
    ).catch((e: unknown) => e);
    // Caps 1, 2, 4, 8 drawn at the top: 0, 1, then Retry-After's 1 s wins over 3, then 7, 7 … until the horizon.
    expect(delays.slice(0, 3)).toEqual([0, 1, 1_000]);
    expect(delays.slice(3).every((d) => d === 7)).toBe(true);
    expect(clock.now()).toBeLessThan(1_020);
    expect(error).toBeInstanceOf(LeaseholdNetworkError);
  });

  it("stops doubling at 2^20 whatever maxMs allows (a job's own backoff goes to 2^30)", async () => {
    const delays: number[] = [];
    let calls = 0;
    await withRetry(
      async () => {
        calls += 1;
        if (calls <= 23) throw network();
        return 'ok';
      },
      {
        policy: { baseMs: 1, maxMs: 2 ** 40 },
        clock: new ManualClock(0),
        random: () => 0.5,
        onRetry: (_error, delayMs) => delays.push(delayMs),
        sleep: async () => undefined,
      },
    );
    expect(delays.slice(19)).toEqual([2 ** 18, 2 ** 19, 2 ** 19, 2 ** 19]);
  });
});
