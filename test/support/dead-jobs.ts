/** Jobs for operator tests: dead ones (one attempt, failed for good) and unknown ones (failed after declaring an effect). */

import { expect } from 'vitest';
import type { LeaseholdClient } from '../../src/client/leasehold-client.js';

export const DEAD_JOB_WORKER = 'operator-test-worker';

/** Enqueues `count` one-attempt jobs of `kind` and fails each with `code` and `message`; answers their ids. */
export async function deadJobs(
  producer: LeaseholdClient,
  worker: LeaseholdClient,
  kind: string,
  count: number,
  code: string,
  message: string,
  payload: unknown = {},
): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) ids.push((await producer.enqueue({ kind, payload, maxAttempts: 1 })).job.id);
  const leased = await worker.lease({ workerId: DEAD_JOB_WORKER, kinds: [kind], max: count });
  expect(leased).toHaveLength(count);
  for (const job of leased) await worker.fail(job.id, { token: job.token, error: { code, message }, retryable: false });
  return ids;
}

/** Jobs in `unknown`: each attempt declares an external effect, then fails, so nobody knows whether the effect happened. */
export async function unknownJobs(producer: LeaseholdClient, worker: LeaseholdClient, kind: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) ids.push((await producer.enqueue({ kind, payload: { i }, maxAttempts: 1 })).job.id);
  const leased = await worker.lease({ workerId: DEAD_JOB_WORKER, kinds: [kind], max: count });
  expect(leased).toHaveLength(count);
  for (const job of leased) {
    await worker.effectStarted(job.id, job.token);
    const answer = await worker.fail(job.id, {
      token: job.token,
      error: { code: 'charge_timeout', message: 'the payment provider did not answer' },
      retryable: false,
    });
    expect(answer.status).toBe('unknown');
  }
  return ids;
}
