/** Dead jobs for operator tests: enqueued with one attempt, leased and failed for good. */

import { expect } from 'vitest';
import type { LeaseholdClient } from '../../src/client/leasehold-client.js';

export const DEAD_JOB_WORKER = 'operator-test-worker';

/** Enqueues `count` one-attempt jobs of `kind` and fails each with `code` and `message`; answers their ids. */
export async function deadJobs(producer: LeaseholdClient, worker: LeaseholdClient, kind: string, count: number, code: string, message: string, payload: unknown = {}): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) ids.push((await producer.enqueue({ kind, payload, maxAttempts: 1 })).job.id);
  const leased = await worker.lease({ workerId: DEAD_JOB_WORKER, kinds: [kind], max: count });
  expect(leased).toHaveLength(count);
  for (const job of leased) await worker.fail(job.id, { token: job.token, error: { code, message }, retryable: false });
  return ids;
}
