/**
 * Conformance: retention batches (jobPurge, jobPurgeCount) and the due time of
 * delayed jobs (jobNextDue). A kind whose retention is 1 ms stands for "older
 * than its period" and the 7-day default for "younger", so nothing depends on
 * how fast the machine is. Purged jobs are gone with their attempts and
 * results (the foreign keys from job_attempts and job_results would refuse
 * the delete otherwise); unknown, queued and running jobs stay; a batch never
 * deletes more than its limit; an idempotency key is free again once its job
 * is purged. Runs against every backend in test/support/backends.ts.
 */

import { describe, expect, it } from 'vitest';
import { PURGEABLE_STATUSES, type JobPurgeParams } from '../../src/store/retention.js';
import type { JobRecord, Store } from '../../src/store/store.js';
import {
  backends,
  enqueue,
  enqueueParams,
  ERROR,
  HOUR_BACKOFF,
  leaseOne,
  leaseParams,
  shortenLease,
  TENANT,
  useBackend,
  waitUntilStoreTimePasses,
} from './harness.js';

const WEEK_MS = 7 * 24 * 3_600_000;
const SHORT = { succeededMs: 1, cancelledMs: 1, deadMs: 1 };

function kindParams(kind: string, retention?: typeof SHORT) {
  return {
    tenant: TENANT,
    kind,
    payloadSchema: null,
    maxPayloadBytes: 1024,
    maxAttempts: 3,
    leaseMs: 30_000,
    backoff: { baseMs: 1, maxMs: 1 },
    deadlineMs: null,
    maxResultBytes: 1024,
    maxCheckpointBytes: 1024,
    ...(retention === undefined ? {} : { retention }),
  };
}

/** One job of `kind` in each state: succeeded (with a result), cancelled, dead, unknown, queued, running. */
async function jobsInEveryState(store: Store, kind: string): Promise<Record<string, JobRecord>> {
  const [succeeded, dead, unknown, running] = [
    await enqueue(store, `${kind}-succeeded`, { kind }),
    await enqueue(store, `${kind}-dead`, { kind }),
    await enqueue(store, `${kind}-unknown`, { kind }),
    await enqueue(store, `${kind}-running`, { kind }),
  ];
  const leases = await store.jobLease(leaseParams({ kinds: [kind], max: 4 }));
  const tokenOf = (job: JobRecord): string => leases.find((l) => l.id === job.id)?.token ?? '';
  const body = Buffer.from('a result');
  await store.jobComplete({ tenant: TENANT, id: succeeded.id, token: tokenOf(succeeded), result: { contentType: 'text/plain', body } });
  await store.jobFail({ tenant: TENANT, id: dead.id, token: tokenOf(dead), error: ERROR, retryable: false, backoff: HOUR_BACKOFF });
  await store.jobMarkEffectStarted({ tenant: TENANT, id: unknown.id, token: tokenOf(unknown) });
  const lease = leases.find((l) => l.id === unknown.id);
  if (lease === undefined) throw new Error('the unknown-to-be job was not leased');
  await waitUntilStoreTimePasses(store, (await shortenLease(store, lease)).leaseExpiresAt);
  await store.jobReapExpired();
  const cancelled = await enqueue(store, `${kind}-cancelled`, { kind });
  await store.jobCancel({ scope: { tenant: TENANT }, id: cancelled.id });
  const queued = await enqueue(store, `${kind}-queued`, { kind, runAfter: (await store.now()) + 3_600_000 });
  return { succeeded, cancelled, dead, unknown, queued, running };
}

async function statusOf(store: Store, id: string): Promise<string | null> {
  return (await store.jobGet({ scope: { tenant: TENANT }, id }))?.status ?? null;
}

describe.each(backends)('store conformance ($label): retention', (factory) => {
  const backend = useBackend(factory);

  it("deletes finished jobs past their kind's period with attempts and results, and keeps younger, unknown and unfinished ones", async () => {
    const store = backend.store;
    await store.kindUpsert(kindParams('short', SHORT));
    expect((await store.kindGet({ tenant: TENANT, kind: 'short' }))?.retention).toEqual(SHORT);
    const old = await jobsInEveryState(store, 'short');
    const young = await jobsInEveryState(store, 'long');
    await waitUntilStoreTimePasses(store, (await store.now()) + 2);
    const automatic = (status: (typeof PURGEABLE_STATUSES)[number]): JobPurgeParams => ({ status, olderThanMs: WEEK_MS, kindRetention: true, limit: 500 });
    let counted = 0;
    for (const status of PURGEABLE_STATUSES) counted += await store.jobPurgeCount(automatic(status));
    expect(counted).toBe(3);
    for (const status of PURGEABLE_STATUSES) expect(await store.jobPurge(automatic(status))).toEqual({ deleted: 1 });
    for (const name of ['succeeded', 'cancelled', 'dead']) {
      const id = old[name]?.id ?? '';
      expect(await statusOf(store, id)).toBeNull();
      expect(await store.jobAttempts({ scope: { tenant: TENANT }, id })).toBeNull();
    }
    expect(await statusOf(store, old['unknown']?.id ?? '')).toBe('unknown');
    expect(await statusOf(store, old['queued']?.id ?? '')).toBe('queued');
    expect(await statusOf(store, old['running']?.id ?? '')).toBe('running');
    for (const [name, job] of Object.entries(young)) expect(await statusOf(store, job.id)).toBe(name);
    // The young succeeded job keeps its result and attempts.
    expect((await store.jobGet({ scope: { tenant: TENANT }, id: young['succeeded']?.id ?? '' }))?.result?.body.toString()).toBe('a result');
    expect(await store.jobAttempts({ scope: { tenant: TENANT }, id: young['succeeded']?.id ?? '' })).toHaveLength(1);

    // By hand (no kind periods): everything finished at least 0 ms ago, never unknown; an hour spares all.
    const byHand = (status: (typeof PURGEABLE_STATUSES)[number], olderThanMs: number): JobPurgeParams => ({
      status,
      olderThanMs,
      kindRetention: false,
      tenant: TENANT,
      limit: 500,
    });
    for (const status of PURGEABLE_STATUSES) expect(await store.jobPurge(byHand(status, 3_600_000))).toEqual({ deleted: 0 });
    for (const status of PURGEABLE_STATUSES) expect(await store.jobPurge(byHand(status, 0))).toEqual({ deleted: 1 });
    expect(await statusOf(store, young['unknown']?.id ?? '')).toBe('unknown');
    expect((await store.stats({ tenant: TENANT })).counts).toMatchObject({ succeeded: 0, cancelled: 0, dead: 0, unknown: 2, queued: 2, running: 2 });
  });

  it('deletes at most `limit` jobs per call, only of the tenant and kind asked for', async () => {
    const store = backend.store;
    for (let i = 0; i < 7; i++) {
      await enqueue(store, `a-${i}`, { kind: 'a' });
      await enqueue(store, `b-${i}`, { kind: 'b' });
      await store.jobEnqueue(enqueueParams(`other-${i}`, { tenant: 'tenant-b', kind: 'a' }));
    }
    for (const tenant of [TENANT, 'tenant-b']) {
      for (const lease of await store.jobLease(leaseParams({ tenant, max: 14 }))) {
        expect(await store.jobComplete({ tenant, id: lease.id, token: lease.token })).toMatchObject({ kind: 'completed' });
      }
    }
    const params: JobPurgeParams = { status: 'succeeded', olderThanMs: 0, kindRetention: false, tenant: TENANT, kind: 'a', limit: 3 };
    expect(await store.jobPurgeCount(params)).toBe(7);
    const batches: number[] = [];
    for (;;) {
      const { deleted } = await store.jobPurge(params);
      batches.push(deleted);
      if (deleted < params.limit) break;
    }
    expect(batches).toEqual([3, 3, 1]);
    const remaining = await store.stats({ tenant: TENANT });
    expect(remaining.counts.succeeded).toBe(7);
    expect((await store.stats({ tenant: 'tenant-b' })).counts.succeeded).toBe(7);
  });

  it('frees the idempotency key of a purged job, which stays reserved until then', async () => {
    const store = backend.store;
    const first = await enqueue(store, 'reused');
    const lease = await leaseOne(store);
    await store.jobComplete({ tenant: TENANT, id: lease.id, token: lease.token });
    const again = await store.jobEnqueue(enqueueParams('reused', { requestHash: 'another request' }));
    expect(again).toEqual({ kind: 'conflict', existingJobId: first.id });
    expect(await store.jobPurge({ status: 'succeeded', olderThanMs: 0, kindRetention: false, limit: 10 })).toEqual({ deleted: 1 });
    const reused = await store.jobEnqueue(enqueueParams('reused', { requestHash: 'another request' }));
    expect(reused.kind).toBe('created');
    if (reused.kind === 'created') expect(reused.job.id).not.toBe(first.id);
  });

  it('measures a job that died again after a requeue from its last end, not its first', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'twice-dead', { maxAttempts: 1 });
    const first = await leaseOne(store);
    await store.jobFail({ tenant: TENANT, id: job.id, token: first.token, error: ERROR, retryable: false, backoff: HOUR_BACKOFF });
    const firstEnd = (await store.jobGet({ scope: { tenant: TENANT }, id: job.id }))?.finishedAt ?? 0;
    await waitUntilStoreTimePasses(store, firstEnd + 400);
    expect((await store.jobRequeue({ scope: { tenant: TENANT }, id: job.id })).kind).toBe('requeued');
    const second = await leaseOne(store);
    await store.jobFail({ tenant: TENANT, id: job.id, token: second.token, error: ERROR, retryable: false, backoff: HOUR_BACKOFF });
    // A cutoff between the two ends: the job ended after it, so it stays.
    const olderThanMs = (await store.now()) - (firstEnd + 200);
    expect(await store.jobPurgeCount({ status: 'dead', olderThanMs, kindRetention: false })).toBe(0);
    expect(await store.jobPurge({ status: 'dead', olderThanMs, kindRetention: false, limit: 10 })).toEqual({ deleted: 0 });
    expect(await statusOf(store, job.id)).toBe('dead');
    expect(await store.jobPurge({ status: 'dead', olderThanMs: 0, kindRetention: false, limit: 10 })).toEqual({ deleted: 1 });
  });

  it("takes the purged jobs' payload and result bytes off the tenant's storage", async () => {
    const store = backend.store;
    await enqueue(store, 'stored', { payloadBytes: 32 });
    const lease = await leaseOne(store);
    await store.jobComplete({ tenant: TENANT, id: lease.id, token: lease.token, result: { contentType: 'text/plain', body: Buffer.alloc(100) } });
    expect((await store.stats({ tenant: TENANT })).storageBytes).toBeGreaterThan(0);
    await store.jobPurge({ status: 'succeeded', olderThanMs: 0, kindRetention: false, limit: 10 });
    expect((await store.stats({ tenant: TENANT })).storageBytes).toBe(0);
  });
});

describe.each(backends)('store conformance ($label): next due', (factory) => {
  const backend = useBackend(factory);

  it("answers the earliest runAfter of the tenant's queued jobs of the kinds asked for, and null when none", async () => {
    const store = backend.store;
    expect(await store.jobNextDue({ tenant: TENANT })).toBeNull();
    const now = await store.now();
    await enqueue(store, 'a-late', { kind: 'a', runAfter: now + 60_000 });
    await enqueue(store, 'a-soon', { kind: 'a', runAfter: now + 30_000 });
    await enqueue(store, 'b-sooner', { kind: 'b', runAfter: now + 10_000 });
    await store.jobEnqueue(enqueueParams('other', { tenant: 'tenant-b', kind: 'a', runAfter: now + 1_000 }));
    const a = await store.jobNextDue({ tenant: TENANT, kinds: ['a'] });
    expect(a?.runAfter).toBe(now + 30_000);
    expect(a?.inMs).toBeGreaterThan(25_000);
    expect(a?.inMs).toBeLessThanOrEqual(30_000);
    expect((await store.jobNextDue({ tenant: TENANT, kinds: ['a', 'b', 'a'] }))?.runAfter).toBe(now + 10_000);
    expect((await store.jobNextDue({ tenant: TENANT }))?.runAfter).toBe(now + 10_000);
    expect(await store.jobNextDue({ tenant: TENANT, kinds: ['c'] })).toBeNull();
    // A job due already answers 0: the caller leases at once.
    await enqueue(store, 'c-now', { kind: 'c' });
    expect((await store.jobNextDue({ tenant: TENANT, kinds: ['c'] }))?.inMs).toBe(0);
    // Leased jobs are not queued: nothing is due for them.
    await store.jobLease(leaseParams({ kinds: ['c'] }));
    expect(await store.jobNextDue({ tenant: TENANT, kinds: ['c'] })).toBeNull();
  });
});
