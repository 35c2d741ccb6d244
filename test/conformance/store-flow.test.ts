/**
 * Per-kind flow control on every backend: a paused kind is never leased (with
 * or without a kinds filter) while other kinds flow, maxConcurrent holds
 * across two stores over one database (two coordinators) under concurrent
 * leases, a rate admits `limit` leases per window and says when it admits
 * again, and jobNextDue tells a parked poll what it waits for.
 */

import { describe, expect, it } from 'vitest';
import type { KindRate } from '../../src/store/flow-limits.js';
import type { Availability, Store } from '../../src/store/store.js';
import { kindParams } from '../support/kind-records.js';
import { backends, enqueue, enqueueParams, expireLease, leaseParams, shortenLease, TENANT, useBackend, waitUntilStoreTimePasses } from './harness.js';

async function register(store: Store, kind: string, limits: { maxConcurrent?: number | null; rate?: KindRate | null } = {}): Promise<void> {
  await store.kindUpsert({ ...kindParams(TENANT, kind, null), ...limits });
}

async function fill(store: Store, kind: string, count: number): Promise<void> {
  await store.jobEnqueueMany(Array.from({ length: count }, (_, i) => enqueueParams(`${kind}-${i}`, { kind })));
}

describe.each(backends)('store conformance ($label): per-kind flow control', (factory) => {
  const backend = useBackend(factory);

  it('never leases a paused kind, with or without a kinds filter, while other kinds flow; enqueues still succeed', async () => {
    const store = backend.store;
    await register(store, 'paused');
    await register(store, 'free');
    const paused = await store.kindSetPaused({ tenant: TENANT, kind: 'paused', paused: true });
    expect(paused).toMatchObject({ kind: 'paused', paused: true });
    // Higher priority, so an unguarded lease would take it first.
    await store.jobEnqueueMany(Array.from({ length: 5 }, (_, i) => enqueueParams(`p${i}`, { kind: 'paused', priority: 10 })));
    await fill(store, 'free', 3);
    const leased = [
      ...(await store.jobLease(leaseParams({ max: 10 }))),
      ...(await store.jobLease(leaseParams({ max: 10, kinds: ['paused', 'free'] }))),
      ...(await store.jobLease(leaseParams({ max: 10, kinds: ['paused'] }))),
    ];
    expect(leased.map((job) => job.kind)).toEqual(['free', 'free', 'free']);
    expect(await store.jobNextDue({ tenant: TENANT })).toBeNull();
    expect(await store.jobNextDue({ tenant: TENANT, kinds: ['paused'] })).toBeNull();
    // Registering the kind again keeps it paused; listing shows it.
    await register(store, 'paused', { maxConcurrent: 3 });
    expect((await store.kindList({ tenant: TENANT })).map((k) => [k.kind, k.paused, k.maxConcurrent])).toEqual([
      ['free', false, null],
      ['paused', true, 3],
    ]);
    expect(await store.jobLease(leaseParams({ max: 10 }))).toEqual([]);
    const resumed = await store.kindSetPaused({ tenant: TENANT, kind: 'paused', paused: false });
    expect(resumed?.paused).toBe(false);
    expect((await store.jobLease(leaseParams({ max: 10 }))).map((job) => job.kind)).toEqual(['paused', 'paused', 'paused']);
    expect(await store.kindSetPaused({ tenant: TENANT, kind: 'unknown', paused: true })).toBeNull();
    expect(await store.kindSetPaused({ tenant: 'tenant-b', kind: 'free', paused: true })).toBeNull();
  });

  it('announces a resumed kind and a changed registration as available, so parked polls lease', async () => {
    const store = backend.store;
    const heard: (Availability | null)[] = [];
    const unwatch = store.watchAvailable((available) => heard.push(available));
    try {
      await register(store, 'k');
      await store.kindSetPaused({ tenant: TENANT, kind: 'k', paused: true });
      const beforeResume = heard.length;
      await store.kindSetPaused({ tenant: TENANT, kind: 'k', paused: false });
      expect(heard.slice(beforeResume)).toContainEqual({ tenant: TENANT, kind: 'k' });
    } finally {
      unwatch();
    }
  });

  it('holds maxConcurrent: no more live leases than the limit, and a finished or expired lease frees its slot', async () => {
    const store = backend.store;
    await register(store, 'limited', { maxConcurrent: 2 });
    await fill(store, 'limited', 6);
    await fill(store, 'other', 4);
    const first = await store.jobLease(leaseParams({ max: 10, kinds: ['limited'] }));
    expect(first).toHaveLength(2);
    // Without a filter the other kind flows, the limited one gives nothing more.
    const any = await store.jobLease(leaseParams({ max: 10 }));
    expect(any.map((job) => job.kind).sort()).toEqual(['other', 'other', 'other', 'other']);
    expect(await store.jobLease(leaseParams({ max: 10, kinds: ['limited'] }))).toEqual([]);
    const due = await store.jobNextDue({ tenant: TENANT, kinds: ['limited'] });
    expect(due).toMatchObject({ slotHeld: true, runAfter: null });
    const [a, b] = first;
    if (a === undefined || b === undefined) throw new Error('two leases expected');
    expect(await store.jobComplete({ tenant: TENANT, id: a.id, token: a.token })).toEqual({ kind: 'completed', replayed: false });
    const next = await store.jobLease(leaseParams({ max: 10 }));
    expect(next).toHaveLength(1);
    await expireLease(store, await shortenLease(store, b));
    expect(await store.jobLease(leaseParams({ max: 10, kinds: ['limited'] }))).toHaveLength(1);
    expect(await store.jobLease(leaseParams({ max: 10, kinds: ['limited'] }))).toEqual([]);
    // Lifting the limit lets the rest go: 6 jobs, one succeeded, two running (the expired one was requeued).
    await register(store, 'limited', { maxConcurrent: null });
    expect(await store.jobLease(leaseParams({ max: 10, kinds: ['limited'] }))).toHaveLength(3);
  });

  it('holds maxConcurrent across two stores over one database under concurrent leases', async () => {
    const store = backend.store;
    const peer = await backend.instance.openPeer();
    await register(store, 'limited', { maxConcurrent: 3 });
    await fill(store, 'limited', 30);
    const calls = Array.from({ length: 40 }, (_, i) =>
      (i % 2 === 0 ? store : peer).jobLease(leaseParams({ workerId: `w${i}`, max: 2, ...(i % 3 === 0 ? {} : { kinds: ['limited'] }) })),
    );
    const leased = (await Promise.all(calls)).flat();
    expect(leased).toHaveLength(3);
    expect(new Set(leased.map((job) => job.id)).size).toBe(3);
  });

  it('admits `limit` leases per rate window and names when the window admits again', async () => {
    const store = backend.store;
    const perMs = 1_500;
    await register(store, 'rated', { rate: { limit: 3, perMs } });
    await fill(store, 'rated', 10);
    const start = await store.now();
    const first = [...(await store.jobLease(leaseParams({ max: 2 }))), ...(await store.jobLease(leaseParams({ max: 5, kinds: ['rated'] })))];
    expect(first).toHaveLength(3);
    expect(await store.jobLease(leaseParams({ max: 5 }))).toEqual([]);
    const due = await store.jobNextDue({ tenant: TENANT });
    expect(due?.slotHeld).toBeUndefined();
    expect(due?.runAfter).toBeGreaterThanOrEqual(start + perMs - 50);
    expect(due?.runAfter).toBeLessThanOrEqual(start + perMs + 500);
    expect(due?.inMs).toBeGreaterThan(0);
    expect(due?.inMs).toBeLessThanOrEqual(perMs);
    await waitUntilStoreTimePasses(store, due?.runAfter ?? 0);
    expect(await store.jobLease(leaseParams({ max: 10 }))).toHaveLength(3);
    expect(await store.jobLease(leaseParams({ max: 10 }))).toEqual([]);
  });

  it('costs an unrestricted kind nothing from another kind\u2019s limit: it leases its whole batch', async () => {
    const store = backend.store;
    await register(store, 'limited', { maxConcurrent: 1 });
    await fill(store, 'limited', 5);
    await enqueue(store, 'free-0', { kind: 'free' });
    await enqueue(store, 'free-1', { kind: 'free' });
    const leased = await store.jobLease(leaseParams({ max: 10 }));
    expect(leased.map((job) => job.kind).sort()).toEqual(['free', 'free', 'limited']);
    expect(await store.jobLease(leaseParams({ max: 10, kinds: ['free', 'limited'] }))).toEqual([]);
  });
});
