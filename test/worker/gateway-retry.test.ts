/**
 * Behind a load balancer a worker also meets the balancer's own answers: 502
 * when the coordinator it picked died, 504 when it timed out. Those are
 * retried like a lost connection; a coordinator's 500 and its 4xx answers are
 * not.
 */

import { describe, expect, it } from 'vitest';
import { LeaseholdApiError } from '../../src/client/errors.js';
import { ManualClock } from '../../src/core/clock.js';
import { isWorthRetrying, withRetry } from '../../src/worker/retry.js';

const options = { policy: { baseMs: 1, maxMs: 2 }, clock: new ManualClock(), random: () => 0, sleep: async () => undefined };

describe('withRetry behind a load balancer', () => {
  it('retries a gateway 502 and 504 until the coordinator answers', async () => {
    let calls = 0;
    const value = await withRetry(async () => {
      calls += 1;
      if (calls === 1) throw new LeaseholdApiError(502, 'http_502', 'POST /lease answered 502', undefined);
      if (calls === 2) throw new LeaseholdApiError(504, 'http_504', 'POST /lease answered 504', undefined);
      return 'leased';
    }, options);
    expect(value).toBe('leased');
    expect(calls).toBe(3);
  });

  it('does not retry a 500 or a refusal', async () => {
    for (const refused of [
      new LeaseholdApiError(500, 'internal_error', 'internal error', undefined),
      new LeaseholdApiError(409, 'stale_lease', 'stale', undefined),
    ]) {
      let calls = 0;
      const error = await withRetry(async () => {
        calls += 1;
        throw refused;
      }, options).catch((e: unknown) => e);
      expect(error).toBe(refused);
      expect(calls).toBe(1);
    }
    expect(isWorthRetrying(new LeaseholdApiError(501, 'http_501', 'x', undefined))).toBe(false);
  });
});
