/**
 * Conformance: dedupe keys (core/dedupe.ts). While the job that holds a key
 * has never been leased and its window is open, an enqueue with the key is
 * folded into it: drop answers it as it is, replace replaces its payload in
 * place, extend also pushes its runAfter (and its window) out to now + ttlMs,
 * never past its creation + maxDelayMs. Afterwards a new job takes the key.
 * Runs against every backend in test/support/backends.ts.
 */

import { describe, expect, it } from 'vitest';
import type { DedupeRequest } from '../../src/core/dedupe.js';
import type { EnqueueOutcome, EnqueueParams, JobRecord, Store } from '../../src/store/store.js';
import { backends, enqueue, enqueueParams, getJob, leaseOne, OWNER, TENANT, useBackend, waitUntilStoreTimePasses } from './harness.js';

const HOUR = 3_600_000;

function withDedupe(key: string, dedupe: DedupeRequest, overrides: Partial<EnqueueParams> = {}): EnqueueParams {
  return enqueueParams(key, { dedupe, ...overrides });
}

async function deduplicated(store: Store, params: EnqueueParams): Promise<JobRecord> {
  const outcome = await store.jobEnqueue(params);
  if (outcome.kind !== 'deduplicated') throw new Error(`expected deduplicated, got ${outcome.kind}`);
  return outcome.job;
}

async function jobCount(store: Store): Promise<number> {
  return (await store.jobList({ scope: { tenant: TENANT }, limit: 100 })).jobs.length;
}

describe.each(backends)('store conformance ($label): dedupe keys', (factory) => {
  const backend = useBackend(factory);

  it('drop: answers the holder as it is, with no new job', async () => {
    const drop: DedupeRequest = { key: 'd1', mode: 'drop', ttlMs: HOUR };
    const first = await enqueue(backend.store, 'k1', { dedupe: drop, payload: { n: 1 } });
    const again = await deduplicated(backend.store, withDedupe('k2', drop, { payload: { n: 2 }, requestHash: 'other' }));
    expect(again).toMatchObject({ id: first.id, payload: { n: 1 }, status: 'queued', runAfter: first.runAfter });
    expect(await jobCount(backend.store)).toBe(1);
  });

  it('replace: replaces the payload and keeps the place in the queue', async () => {
    const replace: DedupeRequest = { key: 'd1', mode: 'replace', ttlMs: HOUR };
    const first = await enqueue(backend.store, 'k1', { dedupe: replace, payload: { n: 1 }, priority: 3, payloadBytes: 7 });
    const statsBefore = await backend.store.stats({ tenant: TENANT });
    const again = await deduplicated(backend.store, withDedupe('k2', replace, { payload: { n: 2, more: 'x' }, payloadBytes: 20, priority: 9 }));
    expect(again).toMatchObject({ id: first.id, payload: { n: 2, more: 'x' }, priority: 3, runAfter: first.runAfter, createdAt: first.createdAt });
    expect((await getJob(backend.store, first.id)).payload).toEqual({ n: 2, more: 'x' });
    // The replaced payload counts toward the tenant's storage in place of the old one.
    expect((await backend.store.stats({ tenant: TENANT })).storageBytes).toBe(statsBefore.storageBytes + 13);
    expect(await jobCount(backend.store)).toBe(1);
    // Still leased first among later jobs of the same priority: its place did not move.
    await enqueue(backend.store, 'k3', { priority: 3 });
    expect((await leaseOne(backend.store)).id).toBe(first.id);
  });

  it('extend: replaces the payload and pushes runAfter out to now + ttlMs', async () => {
    const extend: DedupeRequest = { key: 'd1', mode: 'extend', ttlMs: 60_000, maxDelayMs: HOUR };
    const first = await enqueue(backend.store, 'k1', { dedupe: extend, payload: { n: 1 } });
    expect(first.runAfter).toBe(first.createdAt);
    const before = await backend.store.now();
    const again = await deduplicated(backend.store, withDedupe('k2', extend, { payload: { n: 2 } }));
    const after = await backend.store.now();
    expect(again).toMatchObject({ id: first.id, payload: { n: 2 }, createdAt: first.createdAt });
    expect(again.runAfter).toBeGreaterThanOrEqual(before + 60_000);
    expect(again.runAfter).toBeLessThanOrEqual(after + 60_000);
    expect(await backend.store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 30_000, max: 1 })).toEqual([]);
  });

  it('extend: never pushes runAfter past the first enqueue + maxDelayMs, nor pulls it in', async () => {
    const first = await enqueue(backend.store, 'k1', { dedupe: { key: 'd1', mode: 'extend', ttlMs: 60_000, maxDelayMs: 1_000 } });
    const capped = await deduplicated(backend.store, withDedupe('k2', { key: 'd1', mode: 'extend', ttlMs: 60_000, maxDelayMs: 1_000 }));
    expect(capped.runAfter).toBe(first.createdAt + 1_000);
    // A shorter push leaves the later runAfter where it is.
    const later = await enqueue(backend.store, 'k3', { dedupe: { key: 'd2', mode: 'extend', ttlMs: 60_000 }, runAfter: first.createdAt + HOUR });
    const shorter = await deduplicated(backend.store, withDedupe('k4', { key: 'd2', mode: 'extend', ttlMs: 60_000 }));
    expect(shorter.runAfter).toBe(later.runAfter);
  });

  it('extend: each duplicate moves the window, so a late duplicate inside it still folds', async () => {
    const extend: DedupeRequest = { key: 'd1', mode: 'extend', ttlMs: 2_000, maxDelayMs: HOUR };
    const first = await enqueue(backend.store, 'k1', { dedupe: extend });
    await waitUntilStoreTimePasses(backend.store, first.createdAt + 1_000);
    const moved = await deduplicated(backend.store, withDedupe('k2', extend));
    // Past the first window (createdAt + ttlMs), inside the one the duplicate opened (about a second more).
    await waitUntilStoreTimePasses(backend.store, first.createdAt + 2_000);
    const late = await deduplicated(backend.store, withDedupe('k3', extend));
    expect(late.id).toBe(first.id);
    expect(late.runAfter).toBeGreaterThan(moved.runAfter);
    expect(await jobCount(backend.store)).toBe(1);
  });

  it('after ttlMs a new job takes the key; the old one stays queued', async () => {
    const drop: DedupeRequest = { key: 'd1', mode: 'drop', ttlMs: 200 };
    const first = await enqueue(backend.store, 'k1', { dedupe: drop });
    await waitUntilStoreTimePasses(backend.store, first.createdAt + 200);
    const second = await enqueue(backend.store, 'k2', { dedupe: drop });
    expect(second.id).not.toBe(first.id);
    expect((await getJob(backend.store, first.id)).status).toBe('queued');
    // The new job holds the key now.
    const third = await deduplicated(backend.store, withDedupe('k3', { ...drop, ttlMs: HOUR }));
    expect(third.id).toBe(second.id);
  });

  it('after the holder is leased (or finished) a new job takes the key', async () => {
    const drop: DedupeRequest = { key: 'd1', mode: 'replace', ttlMs: HOUR };
    const first = await enqueue(backend.store, 'k1', { dedupe: drop });
    const lease = await leaseOne(backend.store);
    const second = await enqueue(backend.store, 'k2', { dedupe: drop, payload: { n: 2 } });
    expect(second.id).not.toBe(first.id);
    expect((await getJob(backend.store, first.id)).payload).toEqual(first.payload);
    // A retry puts the first job back in the queue; the key stays with the second.
    await backend.store.jobFail({
      tenant: TENANT,
      id: first.id,
      token: lease.token,
      error: { code: 'x', message: 'y' },
      retryable: true,
      backoff: { baseMs: 1, maxMs: 1 },
    });
    expect((await deduplicated(backend.store, withDedupe('k3', drop, { payload: { n: 3 } }))).id).toBe(second.id);
    expect((await getJob(backend.store, first.id)).payload).toEqual(first.payload);
  });

  it('folds into a waiting job that has not run', async () => {
    const parent = await enqueue(backend.store, 'parent', { runAfter: (await backend.store.now()) + HOUR });
    const replace: DedupeRequest = { key: 'd1', mode: 'replace', ttlMs: HOUR };
    const child = await enqueue(backend.store, 'k1', { dedupe: replace, dependsOn: [parent.id] });
    expect(child.status).toBe('waiting');
    const again = await deduplicated(backend.store, withDedupe('k2', replace, { payload: { n: 2 } }));
    expect(again).toMatchObject({ id: child.id, status: 'waiting', payload: { n: 2 }, dependsOn: [parent.id] });
  });

  it('scopes the key by tenant, owner and kind', async () => {
    const drop: DedupeRequest = { key: 'shared', mode: 'drop', ttlMs: HOUR };
    const ids = new Set<string>();
    for (const overrides of [{}, { owner: 'user-2' }, { tenant: 'tenant-b' }, { kind: 'sms' }]) {
      const outcome = await backend.store.jobEnqueue(withDedupe(`k-${ids.size}`, drop, overrides));
      expect(outcome.kind).toBe('created');
      if (outcome.kind === 'created') ids.add(outcome.job.id);
    }
    expect(ids.size).toBe(4);
    expect((await deduplicated(backend.store, withDedupe('again', drop, { owner: OWNER }))).owner).toBe(OWNER);
  });

  it('lets the idempotency key answer first: a replay is a replay', async () => {
    const drop: DedupeRequest = { key: 'd1', mode: 'drop', ttlMs: HOUR };
    const first = await enqueue(backend.store, 'k1', { dedupe: drop });
    expect(await backend.store.jobEnqueue(withDedupe('k1', drop))).toMatchObject({ kind: 'replayed', job: { id: first.id } });
    expect(await backend.store.jobEnqueue(withDedupe('k1', drop, { requestHash: 'changed' }))).toEqual({ kind: 'conflict', existingJobId: first.id });
  });

  it('folds the items of one batch into the first that holds the key', async () => {
    const replace: DedupeRequest = { key: 'd1', mode: 'replace', ttlMs: HOUR };
    const outcomes = await backend.store.jobEnqueueMany([
      withDedupe('b1', replace, { payload: { n: 1 } }),
      enqueueParams('b2'),
      withDedupe('b3', replace, { payload: { n: 3 } }),
    ]);
    expect(outcomes.map((o: EnqueueOutcome) => o.kind)).toEqual(['created', 'created', 'deduplicated']);
    const [held, , folded] = outcomes;
    if (held?.kind !== 'created' || folded?.kind !== 'deduplicated') throw new Error('unreachable');
    expect(folded.job).toMatchObject({ id: held.job.id, payload: { n: 3 } });
  });

  it('makes one job of many concurrent enqueues of one key, across stores', async () => {
    const peer = await backend.instance.openPeer();
    for (const mode of ['drop', 'replace', 'extend'] as const) {
      const dedupe: DedupeRequest = { key: `race-${mode}`, mode, ttlMs: HOUR };
      const outcomes = await Promise.all(
        Array.from({ length: 24 }, (_, i) => (i % 2 === 0 ? backend.store : peer).jobEnqueue(withDedupe(`${mode}-${i}`, dedupe, { payload: { i } }))),
      );
      const created = outcomes.filter((o) => o.kind === 'created');
      expect(created, mode).toHaveLength(1);
      expect(
        outcomes.filter((o) => o.kind === 'deduplicated'),
        mode,
      ).toHaveLength(23);
      const ids = new Set(outcomes.map((o) => (o.kind === 'created' || o.kind === 'deduplicated' ? o.job.id : '')));
      expect(ids.size, mode).toBe(1);
    }
    expect(await jobCount(backend.store)).toBe(3);
  });
});
