/**
 * Conformance, backoff jitter: each store draws the jitter of a retry from
 * its injected random source, and stores runAfter = the failure's time + the
 * computed delay, to the millisecond. A draw of 0 retries at once; the largest
 * draw below 1 waits one millisecond less than the cap, min(maxMs, baseMs·2^(attempt-1)).
 */

import { describe, expect, it } from 'vitest';
import { backoffDelayMs, type BackoffPolicy } from '../../src/core/backoff.js';
import type { Store } from '../../src/store/store.js';
import { backends, enqueue, ERROR, getJob, leaseOne, TENANT, useBackend } from './harness.js';

/** First retry's cap: baseMs (1 h). Second: min(maxMs, 2 h) = maxMs (1.5 h). */
const POLICY: BackoffPolicy = { baseMs: 3_600_000, maxMs: 5_400_000 };
const LARGEST_BELOW_ONE = 1 - 2 ** -53;

describe.each(backends)('store conformance ($label): backoff jitter', (factory) => {
  const backend = useBackend(factory);

  /** Fails the job's live lease as retryable; answers the stored runAfter and the attempt's end time. */
  async function failRetryable(store: Store, id: string, token: string): Promise<{ runAfter: number; failedAt: number }> {
    const before = await store.now();
    const outcome = await store.jobFail({ tenant: TENANT, id, token, error: ERROR, retryable: true, backoff: POLICY });
    const after = await store.now();
    if (outcome.kind !== 'failed' || outcome.status !== 'queued' || outcome.runAfter === null) {
      throw new Error(`expected a retry, got ${JSON.stringify(outcome)}`);
    }
    const attempts = (await store.jobAttempts({ scope: { tenant: TENANT }, id })) ?? [];
    const failedAt = attempts.at(-1)?.endedAt ?? null;
    if (failedAt === null) throw new Error('the failed attempt has no end time');
    expect(failedAt).toBeGreaterThanOrEqual(before);
    expect(failedAt).toBeLessThanOrEqual(after);
    expect((await getJob(store, id)).runAfter).toBe(outcome.runAfter);
    return { runAfter: outcome.runAfter, failedAt };
  }

  it.each([
    { draw: 0, delay: 0 },
    { draw: 0.25, delay: 900_000 },
    { draw: 0.5, delay: 1_800_000 },
    { draw: LARGEST_BELOW_ONE, delay: 3_599_999 },
  ])('stores runAfter exactly $delay ms after the failure when the random source draws $draw', async ({ draw, delay }) => {
    const store = backend.store;
    expect(backoffDelayMs(1, POLICY, () => draw)).toBe(delay);
    backend.instance.random.set(draw);
    const job = await enqueue(store, 'k', { maxAttempts: 3 });
    const lease = await leaseOne(store);
    const { runAfter, failedAt } = await failRetryable(store, job.id, lease.token);
    expect(runAfter - failedAt).toBe(delay);
  });

  it('bounds a later retry by maxMs, and a draw of 0 makes the job leasable at once', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { maxAttempts: 3 });
    backend.instance.random.set(0);
    const first = await failRetryable(store, job.id, (await leaseOne(store)).token);
    expect(first.runAfter).toBe(first.failedAt);
    backend.instance.random.set(LARGEST_BELOW_ONE);
    const second = await failRetryable(store, job.id, (await leaseOne(store)).token);
    expect(second.runAfter - second.failedAt).toBe(POLICY.maxMs - 1);
  });
});
