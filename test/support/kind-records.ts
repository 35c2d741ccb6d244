/**
 * A kind registration as the store takes it, with small limits, for tests
 * that store a kind directly (bypassing PUT /kinds/{kind} and its checks).
 */

import type { KindUpsertParams } from '../../src/store/store.js';

export function kindParams(tenant: string, kind: string, payloadSchema: unknown): KindUpsertParams {
  return {
    tenant,
    kind,
    payloadSchema,
    maxPayloadBytes: 1024,
    maxAttempts: 3,
    leaseMs: 1_000,
    backoff: { baseMs: 1, maxMs: 1 },
    deadlineMs: null,
    maxResultBytes: 1024,
    maxCheckpointBytes: 1024,
  };
}
