/**
 * Conformance: unique keys (core/dedupe.ts decideUnique). While the job that
 * holds a key is queued, waiting, running or unknown, or finished (succeeded,
 * cancelled, dead) less than forMs ago, an enqueue with the key is refused
 * (`duplicate`, naming the holder) and changes nothing; afterwards a new job
 * takes the key. Runs against every backend in test/support/backends.ts.
 */

import { describe, expect, it } from 'vitest';
import type { UniqueRequest } from '../../src/core/dedupe.js';
import type { EnqueueParams, Store } from '../../src/store/store.js';
import { backends, enqueue, enqueueParams, getJob, leaseOne, TENANT, useBackend, waitUntilStoreTimePasses } from './harness.js';

const HOUR = 3_600_000;

function withUnique(key: string, unique: UniqueRequest, overrides: Partial<EnqueueParams> = {}): EnqueueParams {
  return enqueueParams(key, { unique, ...overrides });
}

async function expectDuplicateOf(store: Store, params: EnqueueParams, holderId: string): Promise<void> {
  const outcome = await store.jobEnqueue(params);
  expect(outcome.kind).toBe('duplicate');
  if (outcome.kind === 'duplicate') expect(outcome.job.id).toBe(holderId);
}

async function finish(store: Store, id: string): Promise<number> {
  const lease = await leaseOne(store);
  expect(lease.id).toBe(id);
  expect(await store.jobComplete({ tenant: TENANT, id, token: lease.token })).toMatchObject({ kind: 'completed' });
  const finishedAt = (await getJob(store, id)).finishedAt;
  if (finishedAt === null) throw new Error('a succeeded job without finishedAt');
  return finishedAt;
}

describe.each(backends)('store conformance ($label): unique keys', (factory) => {
  const backend = useBackend(factory);

  it('refuses a second job while the first is queued, then running, and changes nothing', async () => {
    const unique: UniqueRequest = { key: 'u1', forMs: 0 };
    const first = await enqueue(backend.store, 'k1', { unique, payload: { n: 1 } });
    await expectDuplicateOf(backend.store, withUnique('k2', unique, { payload: { n: 2 } }), first.id);
    await leaseOne(backend.store);
    await expectDuplicateOf(backend.store, withUnique('k3', unique), first.id);
    const page = await backend.store.jobList({ scope: { tenant: TENANT }, limit: 10 });
    expect(page.jobs.map((job) => job.id)).toEqual([first.id]);
    expect((await getJob(backend.store, first.id)).payload).toEqual({ n: 1 });
    // A refused key reserves no idempotency key: the same key may enqueue once the holder is gone.
    expect(await backend.store.jobEnqueue(enqueueParams('k2'))).toMatchObject({ kind: 'created' });
  });

  it('refuses while the finished holder is within forMs', async () => {
    const unique: UniqueRequest = { key: 'u1', forMs: HOUR };
    const first = await enqueue(backend.store, 'k1', { unique });
    await finish(backend.store, first.id);
    await expectDuplicateOf(backend.store, withUnique('k2', unique), first.id);
  });

  it('creates a new job once the holder finished forMs ago, and the new one holds the key', async () => {
    const unique: UniqueRequest = { key: 'u1', forMs: 200 };
    const first = await enqueue(backend.store, 'k1', { unique });
    const finishedAt = await finish(backend.store, first.id);
    await waitUntilStoreTimePasses(backend.store, finishedAt + 200);
    const second = await enqueue(backend.store, 'k2', { unique });
    expect(second.id).not.toBe(first.id);
    await expectDuplicateOf(backend.store, withUnique('k3', unique), second.id);
  });

  it('with forMs 0, a cancelled or succeeded holder frees the key at once', async () => {
    const unique: UniqueRequest = { key: 'u1', forMs: 0 };
    const first = await enqueue(backend.store, 'k1', { unique });
    expect(await backend.store.jobCancel({ scope: { tenant: TENANT }, id: first.id })).toMatchObject({ kind: 'cancelled' });
    const second = await enqueue(backend.store, 'k2', { unique });
    await finish(backend.store, second.id);
    const third = await enqueue(backend.store, 'k3', { unique });
    expect(new Set([first.id, second.id, third.id]).size).toBe(3);
  });

  it('the forMs of the request decides', async () => {
    const first = await enqueue(backend.store, 'k1', { unique: { key: 'u1', forMs: HOUR } });
    await finish(backend.store, first.id);
    await expectDuplicateOf(backend.store, withUnique('k2', { key: 'u1', forMs: HOUR }), first.id);
    expect(await backend.store.jobEnqueue(withUnique('k3', { key: 'u1', forMs: 0 }))).toMatchObject({ kind: 'created' });
  });

  it('scopes the key by tenant, owner and kind', async () => {
    const unique: UniqueRequest = { key: 'shared', forMs: HOUR };
    for (const [i, overrides] of [{}, { owner: 'user-2' }, { tenant: 'tenant-b' }, { kind: 'sms' }].entries()) {
      expect((await backend.store.jobEnqueue(withUnique(`k${i}`, unique, overrides))).kind).toBe('created');
    }
  });

  it('with a dedupe key too: folds while queued, refuses once leased', async () => {
    const keys = { dedupe: { key: 'd1', mode: 'drop', ttlMs: HOUR }, unique: { key: 'u1', forMs: 0 } } as const;
    const first = await enqueue(backend.store, 'k1', keys);
    expect(await backend.store.jobEnqueue(enqueueParams('k2', keys))).toMatchObject({ kind: 'deduplicated', job: { id: first.id } });
    await leaseOne(backend.store);
    await expectDuplicateOf(backend.store, enqueueParams('k3', keys), first.id);
  });

  it('lets the idempotency key answer first', async () => {
    const unique: UniqueRequest = { key: 'u1', forMs: HOUR };
    const first = await enqueue(backend.store, 'k1', { unique });
    expect(await backend.store.jobEnqueue(withUnique('k1', unique))).toMatchObject({ kind: 'replayed', job: { id: first.id } });
  });

  it('makes one job of many concurrent enqueues of one key, across stores', async () => {
    const peer = await backend.instance.openPeer();
    const unique: UniqueRequest = { key: 'race', forMs: HOUR };
    const outcomes = await Promise.all(Array.from({ length: 24 }, (_, i) => (i % 2 === 0 ? backend.store : peer).jobEnqueue(withUnique(`k${i}`, unique))));
    const created = outcomes.filter((o) => o.kind === 'created');
    expect(created).toHaveLength(1);
    const holder = created[0]?.kind === 'created' ? created[0].job.id : '';
    expect(outcomes.filter((o) => o.kind === 'duplicate' && o.job.id === holder)).toHaveLength(23);
  });

  it('makes one new job of concurrent enqueues after the holder freed the key', async () => {
    const unique: UniqueRequest = { key: 'race', forMs: 0 };
    const first = await enqueue(backend.store, 'k0', { unique });
    await finish(backend.store, first.id);
    const peer = await backend.instance.openPeer();
    const outcomes = await Promise.all(Array.from({ length: 16 }, (_, i) => (i % 2 === 0 ? backend.store : peer).jobEnqueue(withUnique(`k${i + 1}`, unique))));
    expect(outcomes.filter((o) => o.kind === 'created')).toHaveLength(1);
    expect(outcomes.filter((o) => o.kind === 'duplicate')).toHaveLength(15);
  });
});
