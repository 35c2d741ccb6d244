/**
 * Conformance: job dependencies (dependsOn) and per-key ordering
 * (concurrencyKey) on every backend. A child is never leasable before all its
 * parents succeeded and is queued by the transaction of the last one; a
 * parent that ends dead or cancelled (or already has) makes its waiting
 * children dead with dependency_failed, down the line; a parent the enqueuer
 * cannot see is refused as unknown; one key's jobs are leased one at a time
 * in enqueue order, a retry keeps its turn, other keys run beside it, also
 * with two stores leasing and completing over one database.
 */

import { describe, expect, it } from 'vitest';
import { LeaseholdError } from '../../src/core/errors.js';
import type { EnqueueParams, JobRecord, LeasedJob, Store } from '../../src/store/store.js';
import {
  backends,
  enqueue,
  enqueueParams,
  ERROR,
  getJob,
  HOUR_BACKOFF,
  IMMEDIATE_BACKOFF,
  leaseParams,
  OWNER,
  TENANT,
  useBackend,
  waitUntilStoreTimePasses,
} from './harness.js';

const SCOPE = { tenant: TENANT };

async function statusOf(store: Store, id: string): Promise<string | undefined> {
  return (await store.jobGet({ scope: SCOPE, id }))?.status;
}

async function leaseAll(store: Store): Promise<LeasedJob[]> {
  return [...(await store.jobLease(leaseParams({ max: 100 })))];
}

async function complete(store: Store, lease: LeasedJob | undefined): Promise<void> {
  if (lease === undefined) throw new Error('no lease to complete');
  expect(await store.jobComplete({ tenant: TENANT, id: lease.id, token: lease.token })).toEqual({ kind: 'completed', replayed: false });
}

function byId(leases: readonly LeasedJob[], job: JobRecord): LeasedJob | undefined {
  return leases.find((lease) => lease.id === job.id);
}

async function refused(promise: Promise<unknown>): Promise<LeaseholdError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(LeaseholdError);
  expect((error as LeaseholdError).code).toBe('invalid_request');
  return error as LeaseholdError;
}

describe.each(backends)('store conformance ($label): dependencies', (factory) => {
  const backend = useBackend(factory);

  it('keeps a child waiting until every parent succeeded, and queues it in the transaction of the last', async () => {
    const store = backend.store;
    const a = await enqueue(store, 'a');
    const b = await enqueue(store, 'b');
    const child = await enqueue(store, 'child', { kind: 'report', dependsOn: [b.id, a.id] });
    expect(child).toMatchObject({ status: 'waiting', dependsOn: [a.id, b.id], children: [] });
    expect(await getJob(store, child.id)).toMatchObject({ status: 'waiting', dependsOn: [a.id, b.id] });
    expect((await getJob(store, a.id)).children).toEqual([child.id]);
    expect((await store.stats(SCOPE)).counts).toMatchObject({ waiting: 1, queued: 2 });

    const leases = await leaseAll(store);
    expect(leases.map((l) => l.id).sort()).toEqual([a.id, b.id].sort());
    await complete(store, byId(leases, a));
    expect(await statusOf(store, child.id)).toBe('waiting');
    expect(await leaseAll(store)).toEqual([]);

    const heard: unknown[] = [];
    const unwatch = store.watchAvailable((available) => heard.push(available));
    try {
      await complete(store, byId(leases, b));
      expect(await statusOf(store, child.id)).toBe('queued');
      expect(heard).toContainEqual({ tenant: TENANT, kind: 'report' });
    } finally {
      unwatch();
    }
    const [leased] = await leaseAll(store);
    expect(leased?.id).toBe(child.id);
    expect(leased?.availableAt).toBeGreaterThanOrEqual(child.createdAt);
  });

  it('lists the first 100 children of a job, in enqueue order', async () => {
    const store = backend.store;
    const parent = await enqueue(store, 'parent');
    const outcomes = await store.jobEnqueueMany(Array.from({ length: 101 }, (_, i) => enqueueParams(`child-${i}`, { dependsOn: [parent.id] })));
    const ids = outcomes.map((o) => (o.kind === 'created' ? o.job.id : ''));
    expect((await getJob(store, parent.id)).children).toEqual(ids.slice(0, 100));
  });

  it('releases children through a batch completion too', async () => {
    const store = backend.store;
    const parents = [await enqueue(store, 'p1'), await enqueue(store, 'p2'), await enqueue(store, 'p3')];
    const child = await enqueue(store, 'child', { dependsOn: parents.map((p) => p.id) });
    const leases = await leaseAll(store);
    expect(leases).toHaveLength(3);
    const outcomes = await store.jobCompleteMany(leases.map((l) => ({ tenant: TENANT, id: l.id, token: l.token })));
    expect(outcomes.every((o) => o.kind === 'completed')).toBe(true);
    expect(await statusOf(store, child.id)).toBe('queued');
  });

  it('ends waiting children dead with dependency_failed when a parent dies, and their own children too', async () => {
    const store = backend.store;
    const root = await enqueue(store, 'root');
    const other = await enqueue(store, 'other');
    const child = await enqueue(store, 'child', { dependsOn: [root.id, other.id] });
    const grandchild = await enqueue(store, 'grandchild', { dependsOn: [child.id] });
    const sibling = await enqueue(store, 'sibling', { dependsOn: [other.id] });
    const finished: unknown[] = [];
    const unwatch = store.watchFinished((job) => finished.push(job));
    try {
      const leases = await leaseAll(store);
      const lease = byId(leases, root);
      if (lease === undefined) throw new Error('root not leased');
      await store.jobFail({ tenant: TENANT, id: root.id, token: lease.token, error: ERROR, retryable: false, backoff: HOUR_BACKOFF });
    } finally {
      unwatch();
    }
    for (const job of [child, grandchild]) {
      expect(await getJob(store, job.id)).toMatchObject({
        status: 'dead',
        attempts: 0,
        lastError: { code: 'dependency_failed', class: 'dependency_failed' },
      });
    }
    expect((await getJob(store, child.id)).finishedAt).not.toBeNull();
    // The job the others wait for still runs; its other child is untouched.
    expect(await statusOf(store, sibling.id)).toBe('waiting');
    expect(finished.length).toBeGreaterThan(0);
    expect((await store.stats(SCOPE)).counts).toMatchObject({ waiting: 1, dead: 3, running: 1 });
  });

  it('fails the children of a cancelled parent, and cancels a waiting job, failing its own children', async () => {
    const store = backend.store;
    const parent = await enqueue(store, 'parent', { runAfter: (await store.now()) + 3_600_000 });
    const child = await enqueue(store, 'child', { dependsOn: [parent.id] });
    const grandchild = await enqueue(store, 'grandchild', { dependsOn: [child.id] });
    const cancelled = await store.jobCancel({ scope: SCOPE, id: child.id });
    expect(cancelled).toMatchObject({ kind: 'cancelled', job: { status: 'cancelled' } });
    expect(await getJob(store, grandchild.id)).toMatchObject({ status: 'dead', lastError: { code: 'dependency_failed' } });
    // The parent is not touched by its child's cancel; cancelling it fails its other waiting children.
    const second = await enqueue(store, 'second', { dependsOn: [parent.id] });
    expect(await store.jobCancel({ scope: SCOPE, id: parent.id })).toMatchObject({ kind: 'cancelled' });
    expect(await getJob(store, second.id)).toMatchObject({ status: 'dead', lastError: { code: 'dependency_failed' } });
  });

  it('judges parents already finished at enqueue: succeeded counts, dead or cancelled makes the child dead at once', async () => {
    const store = backend.store;
    const done = await enqueue(store, 'done');
    const doomed = await enqueue(store, 'doomed');
    const leases = await leaseAll(store);
    await complete(store, byId(leases, done));
    const doomedLease = byId(leases, doomed);
    if (doomedLease === undefined) throw new Error('not leased');
    await store.jobFail({ tenant: TENANT, id: doomed.id, token: doomedLease.token, error: ERROR, retryable: false, backoff: HOUR_BACKOFF });

    const ready = await enqueue(store, 'ready', { dependsOn: [done.id] });
    expect(ready).toMatchObject({ status: 'queued', dependsOn: [done.id] });
    const dead = await enqueue(store, 'dead', { dependsOn: [done.id, doomed.id] });
    expect(dead).toMatchObject({ status: 'dead', lastError: { code: 'dependency_failed', class: 'dependency_failed' } });
    expect(await getJob(store, dead.id)).toMatchObject({ status: 'dead', lastError: { code: 'dependency_failed' } });
    expect((await leaseAll(store)).map((l) => l.id)).toEqual([ready.id]);
    // A replay of the same key answers the same job, whatever the parents did since.
    const replay = await store.jobEnqueue(enqueueParams('dead', { dependsOn: [done.id, doomed.id] }));
    expect(replay).toMatchObject({ kind: 'replayed', job: { id: dead.id, status: 'dead' } });
  });

  it('refuses a parent that is unknown, of another tenant or of another owner, without telling them apart', async () => {
    const store = backend.store;
    const mine = await enqueue(store, 'mine');
    const foreignTenant = await enqueue(store, 'theirs', { tenant: 'tenant-b' });
    const otherOwner = await enqueue(store, 'other-owner', { owner: 'user-2' });
    const messages = new Set<string>();
    for (const dependsOn of [['00000000-0000-4000-8000-000000000000'], ['not-a-job-id'], [mine.id, foreignTenant.id]]) {
      messages.add((await refused(store.jobEnqueue(enqueueParams('child', { dependsOn })))).message);
    }
    // A producer sees only its own jobs; an admin (no dependsOnOwner) all of the tenant's.
    messages.add((await refused(store.jobEnqueue(enqueueParams('child', { dependsOn: [otherOwner.id], dependsOnOwner: OWNER })))).message);
    expect(messages.size).toBe(1);
    expect(await enqueue(store, 'child', { dependsOn: [mine.id, otherOwner.id] })).toMatchObject({ status: 'waiting' });
    // The batch is one transaction: an item with an unknown parent enqueues nothing of it.
    const batch: EnqueueParams[] = [enqueueParams('batch-1'), enqueueParams('batch-2', { dependsOn: [foreignTenant.id] })];
    await refused(store.jobEnqueueMany(batch));
    expect((await store.jobEnqueue(enqueueParams('batch-1'))).kind).toBe('created');
    // Nothing was marked or linked by the refused enqueues.
    expect((await getJob(store, mine.id)).children).toHaveLength(1);
  });

  it('requeues a dependency_failed child to wait again for its parents, after its parent is requeued', async () => {
    const store = backend.store;
    const parent = await enqueue(store, 'parent', { maxAttempts: 1 });
    const child = await enqueue(store, 'child', { dependsOn: [parent.id] });
    const [lease] = await leaseAll(store);
    if (lease === undefined) throw new Error('not leased');
    await store.jobFail({ tenant: TENANT, id: parent.id, token: lease.token, error: ERROR, retryable: false, backoff: HOUR_BACKOFF });
    expect(await statusOf(store, child.id)).toBe('dead');
    // While the parent is still dead, the requeued child waits for it (it is not failed again).
    expect(await store.jobRequeue({ scope: SCOPE, id: child.id })).toMatchObject({ kind: 'requeued', job: { status: 'waiting' } });
    expect(await store.jobRequeue({ scope: SCOPE, id: parent.id })).toMatchObject({ kind: 'requeued', job: { status: 'queued' } });
    const [again] = await leaseAll(store);
    expect(again?.id).toBe(parent.id);
    await complete(store, again);
    expect(await statusOf(store, child.id)).toBe('queued');
  });

  it('keeps a finished parent from retention while a child still waits on it', async () => {
    const store = backend.store;
    const parent = await enqueue(store, 'parent', { maxAttempts: 1 });
    const child = await enqueue(store, 'child', { dependsOn: [parent.id] });
    const [lease] = await leaseAll(store);
    if (lease === undefined) throw new Error('not leased');
    await store.jobFail({ tenant: TENANT, id: parent.id, token: lease.token, error: ERROR, retryable: false, backoff: HOUR_BACKOFF });
    await store.jobRequeue({ scope: SCOPE, id: child.id });
    await waitUntilStoreTimePasses(store, (await store.now()) + 2);
    const purge = { status: 'dead' as const, olderThanMs: 0, kindRetention: false, tenant: TENANT, limit: 100 };
    expect(await store.jobPurgeCount(purge)).toBe(0);
    expect(await store.jobPurge(purge)).toEqual({ deleted: 0 });
    expect(await statusOf(store, parent.id)).toBe('dead');
    // Once the child no longer waits, both go, with their edge.
    await store.jobCancel({ scope: SCOPE, id: child.id });
    expect(await store.jobPurge(purge)).toEqual({ deleted: 1 });
    expect(await store.jobPurge({ ...purge, status: 'cancelled' })).toEqual({ deleted: 1 });
    expect(await statusOf(store, parent.id)).toBeUndefined();
  });
});

describe.each(backends)('store conformance ($label): per-key ordering', (factory) => {
  const backend = useBackend(factory);

  it('leases one job of a key at a time in enqueue order, keeps the turn across a retry, and runs other keys beside it', async () => {
    const store = backend.store;
    const a1 = await enqueue(store, 'a1', { concurrencyKey: 'a', priority: 5 });
    const a2 = await enqueue(store, 'a2', { concurrencyKey: 'a', priority: 9 });
    const a3 = await enqueue(store, 'a3', { concurrencyKey: 'a' });
    const b1 = await enqueue(store, 'b1', { concurrencyKey: 'b' });
    // The same key in another kind is another key.
    const c1 = await enqueue(store, 'c1', { concurrencyKey: 'a', kind: 'sms' });
    const plain = await enqueue(store, 'plain');
    expect([a1.status, a2.status, a3.status, b1.status, c1.status, plain.status]).toEqual(['queued', 'waiting', 'waiting', 'queued', 'queued', 'queued']);
    expect(a1.concurrencyKey).toBe('a');
    const first = await leaseAll(store);
    expect(first.map((l) => l.id).sort()).toEqual([a1.id, b1.id, c1.id, plain.id].sort());

    await complete(store, byId(first, a1));
    expect(await statusOf(store, a2.id)).toBe('queued');
    expect(await statusOf(store, a3.id)).toBe('waiting');
    const [second] = await leaseAll(store);
    expect(second?.id).toBe(a2.id);
    if (second === undefined) throw new Error('a2 not leased');
    // A retry keeps the key's turn: a3 does not start while a2 is queued again.
    const failed = await store.jobFail({ tenant: TENANT, id: a2.id, token: second.token, error: ERROR, retryable: true, backoff: IMMEDIATE_BACKOFF });
    expect(failed).toMatchObject({ kind: 'failed', status: 'queued' });
    expect(await statusOf(store, a3.id)).toBe('waiting');
    const [retry] = await leaseAll(store);
    expect(retry?.id).toBe(a2.id);
    if (retry === undefined) throw new Error('a2 not leased again');
    // Dead (not a retry) passes the turn on.
    await store.jobFail({ tenant: TENANT, id: a2.id, token: retry.token, error: ERROR, retryable: false, backoff: HOUR_BACKOFF });
    expect((await leaseAll(store)).map((l) => l.id)).toEqual([a3.id]);
  });

  it('starts a keyed job only when it is its key\u2019s head and its parents are done', async () => {
    const store = backend.store;
    const parent = await enqueue(store, 'parent', { kind: 'setup' });
    const head = await enqueue(store, 'head', { concurrencyKey: 'k', dependsOn: [parent.id] });
    const next = await enqueue(store, 'next', { concurrencyKey: 'k' });
    expect([head.status, next.status]).toEqual(['waiting', 'waiting']);
    // The key's head waits on its parent, so the next job of the key waits behind it.
    const [parentLease, ...rest] = await leaseAll(store);
    expect(parentLease?.id).toBe(parent.id);
    expect(rest).toEqual([]);
    await complete(store, parentLease);
    const [headLease] = await leaseAll(store);
    expect(headLease?.id).toBe(head.id);
    expect(await statusOf(store, next.id)).toBe('waiting');
    // Cancelling a waiting job of the key is an end too: the order goes on.
    const third = await enqueue(store, 'third', { concurrencyKey: 'k' });
    await store.jobCancel({ scope: SCOPE, id: next.id });
    expect(await statusOf(store, third.id)).toBe('waiting');
    await complete(store, headLease);
    expect((await leaseAll(store)).map((l) => l.id)).toEqual([third.id]);
  });

  it('requeues a dead keyed job behind the key\u2019s running job', async () => {
    const store = backend.store;
    const first = await enqueue(store, 'first', { concurrencyKey: 'k' });
    const second = await enqueue(store, 'second', { concurrencyKey: 'k' });
    const [lease] = await leaseAll(store);
    if (lease === undefined) throw new Error('not leased');
    await store.jobFail({ tenant: TENANT, id: first.id, token: lease.token, error: ERROR, retryable: false, backoff: HOUR_BACKOFF });
    const [secondLease] = await leaseAll(store);
    expect(secondLease?.id).toBe(second.id);
    expect(await store.jobRequeue({ scope: SCOPE, id: first.id })).toMatchObject({ job: { status: 'waiting' } });
    expect(await leaseAll(store)).toEqual([]);
    await complete(store, secondLease);
    expect((await leaseAll(store)).map((l) => l.id)).toEqual([first.id]);
  });

  it('holds one live lease per key in enqueue order with two stores enqueueing, leasing and completing at once', async () => {
    const store = backend.store;
    const peer = await backend.instance.openPeer();
    const stores = [store, peer];
    const keys = ['k0', 'k1', 'k2'];
    const perKey = 8;
    // Enqueued concurrently from both stores; each key's order is the order its jobs were accepted.
    await Promise.all(
      keys.flatMap((key) =>
        Array.from({ length: perKey }, (_, i) =>
          (stores[i % 2] as Store).jobEnqueue(enqueueParams(`${key}-${i}`, { concurrencyKey: key, payload: { key, i } })),
        ),
      ),
    );
    // A listing is newest first (by the store's sequence): reversed, it is the order of acceptance.
    const accepted = [...(await store.jobList({ scope: SCOPE, limit: 1000 })).jobs].reverse();
    const order = new Map(keys.map((key) => [key, accepted.filter((j) => j.concurrencyKey === key).map((j) => j.id)]));
    const started = new Map<string, string[]>(keys.map((key) => [key, []]));
    let done = 0;
    while (done < keys.length * perKey) {
      const leases = (await Promise.all(stores.map((s, i) => s.jobLease(leaseParams({ workerId: `w${i}`, max: 10 }))))).flat();
      expect(leases.length).toBeGreaterThan(0);
      const live = new Map<string, number>();
      for (const lease of leases) {
        const key = (lease.payload as { key: string }).key;
        live.set(key, (live.get(key) ?? 0) + 1);
        started.get(key)?.push(lease.id);
      }
      for (const count of live.values()) expect(count).toBe(1);
      await Promise.all(leases.map((lease, i) => (stores[i % 2] as Store).jobComplete({ tenant: TENANT, id: lease.id, token: lease.token })));
      done += leases.length;
    }
    for (const key of keys) expect(started.get(key)).toEqual(order.get(key));
  });
});
