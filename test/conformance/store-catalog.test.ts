/**
 * Conformance, part 4: API keys, kinds, stats, wake-ups for long polls, the
 * clock, and the migration lists of the two backends. Runs against every
 * backend in test/support/backends.ts.
 */

import { describe, expect, it } from 'vitest';
import { hashApiKey, newApiKey } from '../../src/core/ids.js';
import { JOB_STATUSES } from '../../src/core/states.js';
import { MIGRATIONS as POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PostgresStore } from '../../src/store/postgres/postgres-store.js';
import { MIGRATIONS as SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import type { KindUpsertParams, LeasedJob, Store } from '../../src/store/store.js';
import { backends, enqueue, ERROR, getJob, IMMEDIATE_BACKOFF, leaseOne, TENANT, useBackend } from './harness.js';

function kind(name: string, overrides: Partial<KindUpsertParams> = {}): KindUpsertParams {
  return {
    tenant: TENANT,
    kind: name,
    payloadSchema: { type: 'object', required: ['to'], properties: { to: { type: 'string' } } },
    maxPayloadBytes: 4096,
    maxAttempts: 5,
    leaseMs: 30_000,
    backoff: { baseMs: 1_000, maxMs: 60_000 },
    deadlineMs: null,
    maxResultBytes: 65_536,
    maxCheckpointBytes: 8_192,
    ...overrides,
  };
}

/**
 * Resolves on the first wake-up that comes after the watcher is fully set up;
 * rejects if none comes in time. PostgreSQL's listener wakes everyone once
 * when its LISTEN takes effect (notifications sent before reached nobody), so
 * that wake-up is awaited and not counted: what is counted must come from the
 * write under test (a local write, or another store's NOTIFY).
 */
async function nextWake(store: Store, timeoutMs = 5_000): Promise<{ readonly woke: Promise<void>; readonly stop: () => void }> {
  let armed = false;
  let heard = (): void => undefined;
  const stop = store.watchAvailable(() => {
    if (armed) heard();
  });
  if (store instanceof PostgresStore) await store.listening();
  // The LISTEN-time wake-up is delivered synchronously with the listening promise; it is behind us now.
  armed = true;
  const woke = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no wake-up within the timeout')), timeoutMs);
    heard = () => {
      clearTimeout(timer);
      resolve();
    };
  });
  return { woke, stop };
}

describe.each(backends)('store conformance ($label): catalog, stats and wake-ups', (factory) => {
  const backend = useBackend(factory);

  it('stores API keys by hash, finds them, and revokes them once', async () => {
    const store = backend.store;
    const key = newApiKey();
    const inserted = await store.apiKeyInsert({ id: 'key-1', tenant: TENANT, user: 'alice', role: 'producer', keyHash: hashApiKey(key) });
    const now = await store.now();
    expect(inserted).toMatchObject({ id: 'key-1', tenant: TENANT, user: 'alice', role: 'producer', keyHash: hashApiKey(key), revokedAt: null });
    expect(inserted.createdAt).toBeLessThanOrEqual(now);
    expect(await store.apiKeyFindByHash(hashApiKey(key))).toEqual(inserted);
    expect(await store.apiKeyFindByHash(hashApiKey(newApiKey()))).toBeNull();
    expect(await store.apiKeyRevoke({ id: 'key-1' })).toBe(true);
    expect(await store.apiKeyRevoke({ id: 'key-1' })).toBe(false);
    expect(await store.apiKeyRevoke({ id: 'no-such-key' })).toBe(false);
    expect((await store.apiKeyFindByHash(hashApiKey(key)))?.revokedAt).not.toBeNull();
  });

  it("lists a tenant's keys oldest first, revoked ones included, and no other tenant's", async () => {
    const store = backend.store;
    await store.apiKeyInsert({ id: 'key-a', tenant: TENANT, user: 'alice', role: 'admin', keyHash: hashApiKey(newApiKey()) });
    await store.apiKeyInsert({ id: 'key-b', tenant: 'tenant-b', user: 'bob', role: 'worker', keyHash: hashApiKey(newApiKey()) });
    await store.apiKeyInsert({ id: 'key-c', tenant: TENANT, user: 'carol', role: 'worker', keyHash: hashApiKey(newApiKey()) });
    await store.apiKeyRevoke({ id: 'key-c' });
    const listed = await store.apiKeyList({ tenant: TENANT });
    expect(listed.map((k) => [k.id, k.user, k.revokedAt === null])).toEqual([
      ['key-a', 'alice', true],
      ['key-c', 'carol', false],
    ]);
    expect(await store.apiKeyList({ tenant: 'nobody' })).toEqual([]);
  });

  it('upserts, reads and lists kinds per tenant', async () => {
    const store = backend.store;
    const created = await store.kindUpsert(kind('sms'));
    expect(created).toMatchObject({ ...kind('sms') });
    await store.kindUpsert(kind('email', { payloadSchema: null, deadlineMs: 86_400_000 }));
    await store.kindUpsert(kind('other-tenant', { tenant: 'tenant-b' }));
    const updated = await store.kindUpsert(kind('sms', { maxAttempts: 9, backoff: { baseMs: 5, maxMs: 50 } }));
    expect(updated).toMatchObject({ maxAttempts: 9, backoff: { baseMs: 5, maxMs: 50 } });
    expect(updated.updatedAt).toBeGreaterThanOrEqual(created.updatedAt);
    expect(await store.kindGet({ tenant: TENANT, kind: 'sms' })).toEqual(updated);
    expect(await store.kindGet({ tenant: TENANT, kind: 'email' })).toMatchObject({ payloadSchema: null, deadlineMs: 86_400_000 });
    expect(await store.kindGet({ tenant: 'tenant-b', kind: 'sms' })).toBeNull();
    expect((await store.kindList({ tenant: TENANT })).map((k) => k.kind)).toEqual(['email', 'sms']);
    expect(await store.kindList({ tenant: 'tenant-c' })).toEqual([]);
  });

  it('counts jobs by status and measures waits, runs, age and storage', async () => {
    const store = backend.store;
    const empty = await store.stats({ tenant: TENANT });
    expect(empty).toEqual({
      counts: Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])),
      meanWaitMs: null,
      meanRunMs: null,
      meanAttemptRunMs: null,
      meanTimeToCompletionMs: null,
      leaseExpirations: 0,
      oldestAvailableAgeMs: null,
      storageBytes: 0,
    });
    const a = await enqueue(store, 'a', { payloadBytes: 100 });
    await enqueue(store, 'b', { payloadBytes: 50 });
    await enqueue(store, 'c', { payloadBytes: 25 });
    await enqueue(store, 'later', { payloadBytes: 5, runAfter: (await store.now()) + 60_000 });
    await enqueue(store, 'elsewhere', { tenant: 'tenant-b', payloadBytes: 1_000 });
    const first = await leaseOne(store);
    expect(first.id).toBe(a.id);
    await store.jobComplete({ tenant: TENANT, id: first.id, token: first.token, result: { contentType: 'text/plain', body: Buffer.alloc(10) } });
    const second = await leaseOne(store);
    await store.jobFail({ tenant: TENANT, id: second.id, token: second.token, error: ERROR, retryable: false, backoff: IMMEDIATE_BACKOFF });
    const third = await leaseOne(store);
    const stats = await store.stats({ tenant: TENANT });
    expect(stats.counts).toEqual({ queued: 1, running: 1, succeeded: 1, dead: 1, unknown: 0, cancelled: 0, waiting: 0 });
    // The mean wait of the three jobs that started, from their own timestamps.
    const started = await Promise.all([a.id, second.id, third.id].map((id) => getJob(store, id)));
    const waits = started.map((job) => (job.startedAt ?? Number.NaN) - job.createdAt);
    expect(stats.meanWaitMs).toBeCloseTo(waits.reduce((sum, wait) => sum + wait, 0) / waits.length, 3);
    const done = await getJob(store, a.id);
    expect(stats.meanRunMs).toBe((done.finishedAt ?? 0) - (done.startedAt ?? 0));
    expect(stats.oldestAvailableAgeMs).toBeNull();
    expect(stats.storageBytes).toBe(100 + 50 + 25 + 5 + 10);
    expect(stats.leaseExpirations).toBe(0);
  });

  it('separates the mean run time of attempts from the mean time to completion', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'retried');
    const first = await leaseOne(store);
    await store.jobFail({ tenant: TENANT, id: first.id, token: first.token, error: ERROR, retryable: true, backoff: IMMEDIATE_BACKOFF });
    const second = await leaseOne(store);
    await store.jobComplete({ tenant: TENANT, id: second.id, token: second.token });
    const other = await enqueue(store, 'running');
    await leaseOne(store); // a running attempt has not ended: it is not counted
    const attempts = (await store.jobAttempts({ scope: { tenant: TENANT }, id: job.id })) ?? [];
    expect(attempts).toHaveLength(2);
    const done = await getJob(store, job.id);
    const stats = await store.stats({ tenant: TENANT });
    const attemptMean = attempts.reduce((sum, a) => sum + ((a.endedAt ?? 0) - a.startedAt), 0) / attempts.length;
    expect(stats.meanAttemptRunMs ?? -1).toBeCloseTo(attemptMean, 6);
    expect(stats.meanTimeToCompletionMs).toBe((done.finishedAt ?? 0) - done.createdAt);
    expect(stats.meanRunMs).toBe((done.finishedAt ?? 0) - (done.startedAt ?? 0));
    expect(other.id).not.toBe(job.id);
  });

  it('reports the age of the oldest available job', async () => {
    const store = backend.store;
    const now = await store.now();
    await enqueue(store, 'old', { runAfter: now - 10_000 });
    await enqueue(store, 'new');
    const stats = await store.stats({ tenant: TENANT });
    expect(stats.oldestAvailableAgeMs ?? 0).toBeGreaterThanOrEqual(10_000);
    expect(stats.oldestAvailableAgeMs ?? Infinity).toBeLessThan(70_000);
  });

  it('wakes a watcher when an enqueue is written', async () => {
    const store = backend.store;
    const { woke, stop } = await nextWake(store);
    await enqueue(store, 'k');
    await woke;
    stop();
  });

  it('lets a lease asked for from the wake-up see the job that caused it', async () => {
    const store = backend.store;
    // A wake-up may also come for nothing (PostgreSQL wakes watchers when LISTEN takes effect); only a lease that finds work ends the wait.
    let stop = (): void => undefined;
    const leased = new Promise<readonly LeasedJob[]>((resolve, reject) => {
      stop = store.watchAvailable(() => {
        store.jobLease({ tenant: TENANT, workerId: 'woken', leaseMs: 30_000, max: 1 }).then((jobs) => {
          if (jobs.length > 0) resolve(jobs);
        }, reject);
      });
    });
    const job = await enqueue(store, 'k');
    const jobs = await leased;
    stop();
    expect(jobs.map((j) => j.id)).toEqual([job.id]);
  });

  it('wakes a watcher on another store over the same database (another coordinator)', async () => {
    const peer = await backend.instance.openPeer();
    const { woke, stop } = await nextWake(peer);
    // Only the peer's NOTIFY listener (PostgreSQL) or its data_version poll (SQLite) can wake it.
    await enqueue(backend.store, 'k-peer');
    await woke;
    stop();
    expect((await peer.jobLease({ tenant: TENANT, workerId: 'peer', leaseMs: 30_000, max: 100 })).length).toBeGreaterThan(0);
  });

  it('wakes a watcher when a failed job is requeued', async () => {
    const store = backend.store;
    const job = await enqueue(store, 'k', { maxAttempts: 1 });
    const lease = await leaseOne(store);
    await store.jobFail({ tenant: TENANT, id: job.id, token: lease.token, error: ERROR, retryable: true, backoff: IMMEDIATE_BACKOFF });
    const { woke, stop } = await nextWake(store);
    await store.jobRequeue({ scope: { tenant: TENANT }, id: job.id });
    await woke;
    stop();
  });

  it('answers ping and reads its clock near the wall clock', async () => {
    await backend.store.ping();
    const now = await backend.store.now();
    expect(Number.isInteger(now)).toBe(true);
    expect(Math.abs(now - Date.now())).toBeLessThan(60_000);
  });
});

describe('migrations', () => {
  it('lists the same versions and names for SQLite and PostgreSQL', () => {
    const shape = (list: readonly { version: number; name: string }[]): [number, string][] => list.map((m) => [m.version, m.name]);
    expect(shape(POSTGRES_MIGRATIONS)).toEqual(shape(SQLITE_MIGRATIONS));
    expect(SQLITE_MIGRATIONS[0]).toMatchObject({ version: 1, name: 'initial' });
    const versions = SQLITE_MIGRATIONS.map((m) => m.version);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    expect(new Set(versions).size).toBe(versions.length);
  });
});
