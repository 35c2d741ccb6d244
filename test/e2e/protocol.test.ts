/**
 * The lease protocol end to end: each test starts a real `leasehold serve`
 * process on a random port over a fresh SQLite file and talks to it over HTTP;
 * workers are real processes, and a crash is a SIGKILL.
 */

import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ROOT, startWorker, type RunningProcess } from '../../bench/processes.js';
import { LeaseholdApiError, type LeaseholdClient } from '../../src/client/index.js';
import { waitFor } from '../support/wait-for.js';
import { startCluster, type Cluster } from './cluster.js';

const HANDLERS = join(ROOT, 'dist', 'test', 'fixtures', 'handlers.js');

async function apiError(promise: Promise<unknown>): Promise<LeaseholdApiError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof LeaseholdApiError) return error;
    throw error;
  }
  throw new Error('expected the call to fail');
}

let cluster: Cluster;
let admin: LeaseholdClient;
let worker: LeaseholdClient;
const workers: RunningProcess[] = [];

beforeEach(async () => {
  cluster = await startCluster();
  admin = cluster.client(cluster.keys.admin);
  worker = cluster.client(cluster.keys.worker);
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop('SIGKILL')));
  await cluster.stop();
});

describe('leasing', () => {
  it('gives each of 50 jobs to exactly one of 200 concurrent lease requests', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 50; i++) ids.add((await admin.enqueue({ kind: 'race', payload: { i } }, { idempotencyKey: `r${i}` })).job.id);
    const answers = await Promise.all(Array.from({ length: 200 }, (_, i) => worker.lease({ workerId: `w${i}`, max: 1, leaseMs: 60_000 })));
    const leased = answers.flat();
    expect(leased).toHaveLength(50);
    expect(new Set(leased.map((j) => j.id))).toEqual(ids);
    expect(new Set(leased.map((j) => j.token)).size).toBe(50);
    expect(leased.every((j) => j.epoch === 1 && j.attempt === 1)).toBe(true);
  });

  it('answers 204 after waitMs when nothing is available, and wakes a waiting lease at once on enqueue', async () => {
    expect(await worker.lease({ workerId: 'idle', waitMs: 100 })).toEqual([]);
    const waiting = worker.lease({ workerId: 'waiter', waitMs: 20_000 });
    const started = Date.now();
    await admin.enqueue({ kind: 'wake', payload: {} }, { idempotencyKey: 'wake' });
    const [job] = await waiting;
    expect(job?.kind).toBe('wake');
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

describe('idempotent enqueue', () => {
  it('returns the same job for the same key and body, and 409 for a different body', async () => {
    const first = await admin.enqueue({ kind: 'mail', payload: { to: 'a', n: 1 } }, { idempotencyKey: 'same' });
    const again = await admin.enqueue({ payload: { n: 1, to: 'a' }, kind: 'mail' }, { idempotencyKey: 'same' });
    expect(again.job.id).toBe(first.job.id);
    expect(again.replayed).toBe(true);
    expect(first.replayed).toBe(false);
    const conflict = await apiError(admin.enqueue({ kind: 'mail', payload: { to: 'b' } }, { idempotencyKey: 'same' }));
    expect(conflict.status).toBe(409);
    expect(conflict.code).toBe('idempotency_conflict');
    expect((await admin.listJobs()).jobs).toHaveLength(1);
  });
});

describe('crashes and stale workers', () => {
  it('lets another worker finish a job whose worker was SIGKILLed mid-job, after the lease expires', async () => {
    const markers = join(cluster.dir, 'markers');
    mkdirSync(markers);
    const env = { MARKER_DIR: markers };
    const first = startWorker({
      url: cluster.url,
      key: cluster.keys.worker,
      handlers: HANDLERS,
      concurrency: 1,
      workerId: 'doomed',
      extraArgs: ['--lease-ms', '1000'],
      env,
    });
    workers.push(first);
    const { job } = await admin.enqueue({ kind: 'crash-once', payload: {} }, { idempotencyKey: 'crash' });
    await waitFor('the handler to start', () => existsSync(join(markers, job.id)));
    first.child.kill('SIGKILL');
    await first.exited;
    const second = startWorker({
      url: cluster.url,
      key: cluster.keys.worker,
      handlers: HANDLERS,
      concurrency: 1,
      workerId: 'rescuer',
      extraArgs: ['--lease-ms', '1000'],
      env,
    });
    workers.push(second);
    const done = await waitFor('the job to succeed', async () => {
      const current = await admin.getJob(job.id);
      return current.status === 'succeeded' ? current : null;
    });
    expect(done.attempts).toBe(2);
    expect(done.result).toEqual({ pid: second.child.pid });
    const attempts = await admin.attempts(job.id);
    expect(attempts.map((a) => [a.workerId, a.outcome])).toEqual([
      ['doomed', 'expired'],
      ['rescuer', 'succeeded'],
    ]);
  });

  it("rejects a slow worker's late complete with 409 and keeps the other worker's result", async () => {
    const { job } = await admin.enqueue({ kind: 'slow', payload: {} }, { idempotencyKey: 'slow' });
    const [slow] = await worker.lease({ workerId: 'slow', leaseMs: 200 });
    const [fast] = await waitFor('the lease to expire and the job to be leased again', async () => {
      const jobs = await worker.lease({ workerId: 'fast', leaseMs: 60_000, waitMs: 500 });
      return jobs.length > 0 ? jobs : null;
    });
    expect(fast?.id).toBe(job.id);
    expect(fast!.epoch).toBe(slow!.epoch + 1);
    await worker.complete(job.id, { token: fast!.token, result: { by: 'fast' } });
    const late = await apiError(worker.complete(job.id, { token: slow!.token, result: { by: 'slow' } }));
    expect(late.status).toBe(409);
    expect(late.code).toBe('stale_lease');
    const renew = await apiError(worker.renew(job.id, { token: slow!.token }));
    expect(renew.code).toBe('stale_lease');
    const final = await admin.getJob(job.id);
    expect(final.status).toBe('succeeded');
    expect(final.result).toEqual({ by: 'fast' });
  });
});

describe('retries', () => {
  it('runs a job that fails twice and then succeeds', async () => {
    await admin.putKind('flaky', { backoff: { baseMs: 10, maxMs: 20 }, maxAttempts: 5 });
    const { job } = await admin.enqueue({ kind: 'flaky', payload: {} }, { idempotencyKey: 'flaky' });
    for (let attempt = 1; attempt <= 3; attempt++) {
      const [leased] = await waitFor(`attempt ${attempt} to be leased`, async () => {
        const jobs = await worker.lease({ workerId: 'w', waitMs: 1_000 });
        return jobs.length > 0 ? jobs : null;
      });
      expect(leased?.attempt).toBe(attempt);
      if (attempt < 3) {
        const failed = await worker.fail(job.id, { token: leased!.token, error: { code: 'flaky', message: `attempt ${attempt}` } });
        expect(failed.status).toBe('queued');
        // Backoff of at most 20 ms from the moment the coordinator decided, which was before now.
        const retryIn = Date.parse(failed.runAfter ?? '') - Date.now();
        expect(retryIn).toBeLessThanOrEqual(20);
        expect(retryIn).toBeGreaterThan(-10_000);
      } else {
        await worker.complete(job.id, { token: leased!.token, result: { ok: true } });
      }
    }
    const final = await admin.getJob(job.id);
    expect(final).toMatchObject({ status: 'succeeded', attempts: 3, result: { ok: true } });
  });

  it('retries into dead, lists it, and an admin requeues it with a fresh budget', async () => {
    await admin.putKind('doomed', { backoff: { baseMs: 10, maxMs: 20 } });
    const { job } = await admin.enqueue({ kind: 'doomed', payload: {}, maxAttempts: 2 }, { idempotencyKey: 'doomed' });
    for (let attempt = 1; attempt <= 2; attempt++) {
      const [leased] = await waitFor('a lease', async () => {
        const jobs = await worker.lease({ workerId: 'w', waitMs: 1_000 });
        return jobs.length > 0 ? jobs : null;
      });
      const failed = await worker.fail(job.id, { token: leased!.token, error: { code: 'upstream_down' } });
      expect(failed.status).toBe(attempt < 2 ? 'queued' : 'dead');
    }
    const dead = await admin.listJobs({ status: 'dead' });
    expect(dead.jobs.map((j) => j.id)).toEqual([job.id]);
    expect(dead.jobs[0]?.lastError?.code).toBe('upstream_down');
    const requeued = await admin.requeue(job.id);
    expect(requeued).toMatchObject({ status: 'queued', attempts: 0 });
    const notDead = await apiError(admin.requeue(job.id));
    expect(notDead).toMatchObject({ status: 409, code: 'not_dead' });
    const [again] = await worker.lease({ workerId: 'w' });
    expect(again?.id).toBe(job.id);
    await worker.complete(job.id, { token: again!.token });
    expect((await admin.getJob(job.id)).status).toBe('succeeded');
  });

  it('ignores duplicate complete and fail requests', async () => {
    const { job } = await admin.enqueue({ kind: 'dup', payload: {} }, { idempotencyKey: 'dup-c' });
    const [leased] = await worker.lease({ workerId: 'w' });
    await worker.complete(job.id, { token: leased!.token, result: { n: 1 } });
    const before = await admin.getJob(job.id);
    const again = await worker.complete(job.id, { token: leased!.token, result: { n: 2 } });
    expect(again.status).toBe('succeeded');
    expect(await admin.getJob(job.id)).toEqual(before);

    const other = await admin.enqueue({ kind: 'dup', payload: { f: 1 } }, { idempotencyKey: 'dup-f' });
    const [leasedOther] = await worker.lease({ workerId: 'w' });
    const failed = await worker.fail(other.job.id, { token: leasedOther!.token, error: { code: 'x' } });
    const snapshot = await admin.getJob(other.job.id);
    const failedAgain = await worker.fail(other.job.id, { token: leasedOther!.token, error: { code: 'x' } });
    expect(failedAgain).toEqual(failed);
    expect(await admin.getJob(other.job.id)).toEqual(snapshot);
  });
});

describe('identity', () => {
  it('answers 401 without a valid key, 403 for the wrong role, 404 for other owners and tenants', async () => {
    const anonymous = cluster.client('lh_not-a-real-key');
    expect((await apiError(anonymous.stats())).status).toBe(401);
    const noKey = await fetch(`${cluster.url}/jobs`, { method: 'GET' });
    expect(noKey.status).toBe(401);
    expect(((await noKey.json()) as { error: { code: string } }).error.code).toBe('unauthorized');

    const alice = cluster.client(cluster.keys.producer);
    const bob = cluster.client(cluster.keys.producer2);
    const eve = cluster.client(cluster.keys.otherAdmin);
    const { job } = await alice.enqueue({ kind: 'private', payload: { secret: 1 } }, { idempotencyKey: 'mine' });
    expect((await alice.getJob(job.id)).id).toBe(job.id);
    expect((await admin.getJob(job.id)).id).toBe(job.id);

    expect(await apiError(worker.enqueue({ kind: 'x', payload: {} }))).toMatchObject({ status: 403, code: 'forbidden' });
    expect(await apiError(alice.lease({ workerId: 'alice' }))).toMatchObject({ status: 403, code: 'forbidden' });
    expect(await apiError(alice.requeue(job.id))).toMatchObject({ status: 403, code: 'forbidden' });

    const missing = await apiError(bob.getJob('00000000-0000-7000-8000-000000000000'));
    const bobs = await apiError(bob.getJob(job.id));
    const eves = await apiError(eve.getJob(job.id));
    for (const error of [missing, bobs, eves]) expect(error).toMatchObject({ status: 404, code: 'not_found' });
    expect(bobs.message).toBe(missing.message);
    expect((await bob.listJobs()).jobs).toHaveLength(0);
  });
});
