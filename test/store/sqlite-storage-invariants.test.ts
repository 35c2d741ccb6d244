/**
 * SQLite (migration 14): the ready and lease tables agree with the job rows
 * after every kind of write. A queued job has exactly one of a ready row
 * (that repeats its row's lease order, deadline, attempts and epoch) or a
 * lease row (the attempt after its row's last: epoch and attempt one more);
 * no other job has either; every attempt row is an ended attempt and they
 * number the job's epoch; results belong to succeeded jobs. The checks are
 * the fault harness's (test/faults/fault-harness.ts inspectDatabase), run here
 * after each step of a history that takes every transition.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import type { EnqueueParams, LeasedJob } from '../../src/store/store.js';
import { inspectDatabase } from '../faults/fault-harness.js';

const TENANT = 't';
let dir: string;
let path: string;
let clock: ManualClock;
let store: SqliteStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'lh-storage-invariants-'));
  path = join(dir, 'jobs.db');
  clock = new ManualClock(1_000_000);
  store = SqliteStore.open({ path, clock, random: () => 0 });
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

function params(key: string, overrides: Partial<EnqueueParams> = {}): EnqueueParams {
  return {
    tenant: TENANT,
    owner: 'u',
    idempotencyKey: key,
    requestHash: key,
    kind: 'k',
    payload: { key },
    maxAttempts: 2,
    priority: 0,
    runAfter: null,
    deadlineMs: null,
    payloadBytes: 10,
    ...overrides,
  };
}

async function created(key: string, overrides: Partial<EnqueueParams> = {}): Promise<string> {
  const outcome = await store.jobEnqueue(params(key, overrides));
  if (outcome.kind !== 'created') throw new Error(`${key}: ${outcome.kind}`);
  return outcome.job.id;
}

function expectConsistent(step: string): void {
  expect(inspectDatabase(path).halfWritten, step).toEqual([]);
}

async function lease(max: number, kinds?: string[]): Promise<LeasedJob[]> {
  return [...(await store.jobLease({ tenant: TENANT, workerId: 'w', leaseMs: 1_000, max, ...(kinds === undefined ? {} : { kinds }) }))];
}

const ERROR = { code: 'e', message: 'm' };
const BACKOFF = { baseMs: 1, maxMs: 1 };

it('keeps the ready and lease tables in step with the job rows through every transition', async () => {
  const parent = await created('parent', { priority: 9 });
  const child = await created('child', { dependsOn: [parent] });
  await created('keyed-1', { concurrencyKey: 'c' });
  await created('keyed-2', { concurrencyKey: 'c' });
  await created('delayed', { runAfter: clock.now() + 60_000 });
  await created('deadline', { deadlineMs: 5 });
  const deduped = await created('deduped', { dedupe: { key: 'd', mode: 'extend', ttlMs: 10_000 }, runAfter: clock.now() + 100 });
  await store.jobEnqueueMany(Array.from({ length: 6 }, (_, i) => params(`plain-${i}`, { kind: i % 2 === 0 ? 'k' : 'other', priority: i % 3 })));
  expectConsistent('enqueue');

  // A dedupe extend moves the holder's run-after, and with it its ready row.
  expect((await store.jobEnqueue(params('deduped-again', { dedupe: { key: 'd', mode: 'extend', ttlMs: 10_000 } }))).kind).toBe('deduplicated');
  expect(await store.jobGet({ scope: { tenant: TENANT }, id: deduped })).toMatchObject({ runAfter: clock.now() + 10_000 });
  expectConsistent('dedupe extend');

  const filtered = await lease(2, ['other']);
  const first = await lease(4);
  expect(first[0]?.id).toBe(parent);
  expectConsistent('leases with and without a kinds filter');

  // A batch completion (the parent: its child is released), a retry, a failure to dead, progress and a checkpoint.
  const [a, b, c, d] = first as [LeasedJob, LeasedJob, LeasedJob, LeasedJob];
  await store.jobRenew({ tenant: TENANT, id: b.id, token: b.token, leaseMs: 1_000, progress: { p: 1 } });
  await store.jobCheckpoint({ tenant: TENANT, id: b.id, token: b.token, checkpoint: { step: 1, state: { s: 1 } } });
  await store.jobCompleteMany(
    [a, b].map((job) => ({ tenant: TENANT, id: job.id, token: job.token, result: { contentType: 'text/plain', body: Buffer.from('r') } })),
  );
  expect(await store.jobGet({ scope: { tenant: TENANT }, id: child })).toMatchObject({ status: 'queued' });
  await store.jobFail({ tenant: TENANT, id: c.id, token: c.token, error: ERROR, retryable: true, backoff: BACKOFF });
  await store.jobFail({ tenant: TENANT, id: d.id, token: d.token, error: ERROR, retryable: false, backoff: BACKOFF });
  expectConsistent('completions and failures');

  // A cancel of a queued job and of a running one, a declared effect, then expiries and the queued deadline.
  const queuedOne = (await store.jobList({ scope: { tenant: TENANT }, status: 'queued', limit: 1 })).jobs[0];
  if (queuedOne === undefined) throw new Error('no queued job');
  expect((await store.jobCancel({ scope: { tenant: TENANT }, id: queuedOne.id })).kind).toBe('cancelled');
  const [e, f] = filtered as [LeasedJob, LeasedJob];
  expect((await store.jobCancel({ scope: { tenant: TENANT }, id: e.id })).kind).toBe('cancel_requested');
  await store.jobMarkEffectStarted({ tenant: TENANT, id: f.id, token: f.token });
  expectConsistent('cancels and an effect');
  clock.advance(2_000);
  expect(await store.jobReapExpired()).toMatchObject({ cancelled: 1, unknown: 1, deadlineExpired: 1 });
  expectConsistent('expiries and a queued deadline');

  // Requeue of the dead job, reconcile of the unknown one, and more leases until only the two delayed jobs are left.
  const dead = (await store.jobList({ scope: { tenant: TENANT }, status: 'dead', limit: 10 })).jobs.find((job) => job.lastError?.code === 'e');
  if (dead === undefined) throw new Error('no dead job');
  expect((await store.jobRequeue({ scope: { tenant: TENANT }, id: dead.id })).kind).toBe('requeued');
  expect((await store.jobReconcile({ scope: { tenant: TENANT }, id: f.id, outcome: 'requeue' })).kind).toBe('reconciled');
  expectConsistent('requeue and reconcile');
  for (let round = 0; round < 10; round++) {
    const leased = await lease(3);
    if (leased.length === 0) break;
    // With results: the harness's checks expect one for every succeeded job.
    await store.jobCompleteMany(
      leased.map((job) => ({ tenant: TENANT, id: job.id, token: job.token, result: { contentType: 'text/plain', body: Buffer.from('r') } })),
    );
    expectConsistent(`round ${round}`);
  }
  expect((await store.stats({ tenant: TENANT })).counts).toMatchObject({ queued: 2, running: 0, waiting: 0 });

  // Retention deletes the finished jobs with their attempts and results.
  for (const status of ['succeeded', 'dead', 'cancelled'] as const) await store.jobPurge({ status, olderThanMs: 0, kindRetention: false, limit: 100 });
  expectConsistent('retention');
  expect((await store.stats({ tenant: TENANT })).counts).toMatchObject({ queued: 2, succeeded: 0, dead: 0, cancelled: 0 });
});
