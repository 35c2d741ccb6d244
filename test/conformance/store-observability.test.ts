/**
 * Conformance: what GET /metrics reads from a store besides stats — the
 * database size, and when a leased job became available (its wait). Runs
 * against every backend in test/support/backends.ts.
 */

import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { backends, enqueue, ERROR, leaseOne, useBackend } from './harness.js';

describe.each(backends)('store conformance ($label): database size and availability time', (factory) => {
  const backend = useBackend(factory);

  it('databaseSize is a positive byte count that grows with stored payloads', async () => {
    const store = backend.store;
    const before = await store.databaseSize();
    expect(Number.isInteger(before)).toBe(true);
    expect(before).toBeGreaterThan(0);
    // Random text: PostgreSQL compresses a repeated one to almost nothing.
    for (let i = 0; i < 10; i++) await enqueue(store, `size-${i}`, { payload: { blob: randomBytes(100_000).toString('hex') }, payloadBytes: 200_011 });
    expect(await store.databaseSize()).toBeGreaterThan(before + 1_000_000);
  });

  it('a leased job carries when it became available: its enqueue time, then the retry time after a failure', async () => {
    const store = backend.store;
    const before = await store.now();
    const job = await enqueue(store, 'available');
    expect(job.runAfter).toBeGreaterThanOrEqual(before);
    const first = await leaseOne(store);
    expect(first.availableAt).toBe(job.runAfter);
    const failed = await store.jobFail({ tenant: job.tenant, id: job.id, token: first.token, error: ERROR, retryable: true, backoff: { baseMs: 1, maxMs: 1 } });
    expect(failed).toMatchObject({ kind: 'failed', status: 'queued' });
    const runAfter = failed.kind === 'failed' ? failed.runAfter : null;
    if (runAfter === null) throw new Error('a retry without a run-after time');
    const second = await leaseOne(store);
    expect(second.availableAt).toBe(runAfter);
  });
});
