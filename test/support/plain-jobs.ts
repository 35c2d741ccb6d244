/**
 * The plan tests' jobs: one tenant's plain jobs of a kind, numbered, with no
 * delay, deadline, key or dependency, so each test seeds only what it reads.
 */

import type { EnqueueParams } from '../../src/store/store.js';

export function plainJob(tenant: string, kind: string, i: number): EnqueueParams {
  const key = `${kind}-${i}`;
  return {
    tenant,
    owner: 'u',
    idempotencyKey: key,
    requestHash: key,
    kind,
    payload: { i },
    maxAttempts: 3,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 8,
  };
}
