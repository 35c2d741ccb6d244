/**
 * Crash boundaries of the coordinator, on every backend: a `leasehold serve`
 * process armed with one fault-injection point SIGKILLs itself there, the
 * caller sees the connection drop, and a clean coordinator started over the
 * same database must show the state the boundary promises. The caller (this
 * process, speaking HTTP as a producer or a worker would) then retries as the
 * protocol tells it to, and the retry must come out right.
 *
 * Every test checks that the process died by SIGKILL, so a point that was not
 * reached fails the test instead of passing unharmed. One test file per
 * backend calls describeCoordinatorBoundaries, so the two run in parallel.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseholdApiError, LeaseholdNetworkError, type LeaseholdClient } from '../../src/client/index.js';
import { waitFor } from '../support/wait-for.js';
import type { StoreBackend } from '../../src/store/store.js';
import { startCrashDeployment, type CrashDeployment } from './crash-deployment.js';

/** The call dies with the connection, and the coordinator died by its own SIGKILL. */
async function expectCrash(deployment: CrashDeployment, call: Promise<unknown>): Promise<void> {
  await expect(call).rejects.toBeInstanceOf(LeaseholdNetworkError);
  expect(await deployment.coordinator.exited).toBe('SIGKILL');
}

async function leaseOne(
  client: LeaseholdClient,
  kind: string,
  workerId: string,
  leaseMs: number,
): Promise<{ id: string; token: string; attempt: number; epoch: number }> {
  const [job] = await client.lease({ workerId, kinds: [kind], leaseMs, max: 1, waitMs: 10_000 });
  if (job === undefined) throw new Error(`no ${kind} job to lease`);
  return job;
}

export function describeCoordinatorBoundaries(backend: StoreBackend): void {
  describe(`coordinator crash boundaries (${backend})`, () => {
    let d: CrashDeployment;

    beforeAll(async () => {
      d = await startCrashDeployment(backend);
    });

    afterAll(async () => {
      await d?.stop();
    });

    it('before the enqueue commit: no job exists; the retry with the same key creates it once', async () => {
      await d.serve('enqueue.before-commit');
      const kind = 'enqueue-before';
      await expectCrash(d, d.client(d.keys.producer).enqueue({ kind, payload: { n: 1 } }, { idempotencyKey: 'before-1' }));

      await d.serve();
      const producer = d.client(d.keys.producer);
      expect((await producer.listJobs({ kind })).jobs).toHaveLength(0);
      const retry = await producer.enqueue({ kind, payload: { n: 1 } }, { idempotencyKey: 'before-1' });
      expect(retry.replayed).toBe(false);
      const again = await producer.enqueue({ kind, payload: { n: 1 } }, { idempotencyKey: 'before-1' });
      expect(again).toMatchObject({ replayed: true, job: { id: retry.job.id } });
      expect((await producer.listJobs({ kind })).jobs.map((j) => j.id)).toEqual([retry.job.id]);
    });

    it('after the enqueue commit, before the 202: the job exists and the retry returns it', async () => {
      await d.serve('enqueue.after-commit');
      const kind = 'enqueue-after';
      await expectCrash(d, d.client(d.keys.producer).enqueue({ kind, payload: { n: 2 } }, { idempotencyKey: 'after-1' }));

      await d.serve();
      const producer = d.client(d.keys.producer);
      const committed = (await producer.listJobs({ kind })).jobs;
      expect(committed).toHaveLength(1);
      const retry = await producer.enqueue({ kind, payload: { n: 2 } }, { idempotencyKey: 'after-1' });
      expect(retry).toMatchObject({ replayed: true, job: { id: committed[0]?.id, status: 'queued' } });
      expect((await producer.listJobs({ kind })).jobs).toHaveLength(1);
    });

    it('after the claim commit, before the worker hears of it: the lease expires and another attempt claims the job', async () => {
      await d.serve('lease.after-commit');
      const kind = 'lease-after';
      const { job } = await d.client(d.keys.producer).enqueue({ kind, payload: {} }, { idempotencyKey: 'lease-1' });
      await expectCrash(d, d.client(d.keys.worker).lease({ workerId: 'lost-claim', kinds: [kind], leaseMs: 1000, max: 1 }));

      await d.serve();
      const admin = d.client(d.keys.admin);
      // The claim was committed: attempt 1 under epoch 1, held by a worker that never heard of it.
      expect(await admin.getJob(job.id)).toMatchObject({ attempts: 1, epoch: 1 });
      const second = await leaseOne(d.client(d.keys.worker), kind, 'second', 30_000);
      expect(second).toMatchObject({ id: job.id, attempt: 2, epoch: 2 });
      await d.client(d.keys.worker).complete(job.id, { token: second.token, result: { by: 'second' } });
      expect(await admin.getJob(job.id)).toMatchObject({ status: 'succeeded', result: { by: 'second' } });
      expect((await admin.attempts(job.id)).map((a) => [a.workerId, a.outcome])).toEqual([
        ['lost-claim', 'expired'],
        ['second', 'succeeded'],
      ]);
    });

    it('inside the result-and-success transaction: neither is committed; the retried complete commits both once', async () => {
      await d.serve('complete.inside-transaction');
      const kind = 'complete-inside';
      const { job } = await d.client(d.keys.producer).enqueue({ kind, payload: {} }, { idempotencyKey: 'inside-1' });
      const leased = await leaseOne(d.client(d.keys.worker), kind, 'inside', 30_000);
      // The same item twice takes the locked, multi-statement path on PostgreSQL: one transaction, open at the crash.
      const item = { id: job.id, token: leased.token, result: { answer: 42 } };
      await expectCrash(d, d.client(d.keys.worker).completeMany([item, item]));

      await d.serve();
      const admin = d.client(d.keys.admin);
      expect(await admin.getJob(job.id)).toMatchObject({ status: 'running', result: null, epoch: 1 });
      expect(await d.resultRows(job.id)).toBe(0);
      // The lease outlived the restart: the worker's retry under the same token commits.
      expect(await d.client(d.keys.worker).completeMany([item])).toEqual([{ id: job.id, status: 'succeeded' }]);
      expect(await admin.getJob(job.id)).toMatchObject({ status: 'succeeded', result: { answer: 42 } });
      expect(await d.resultRows(job.id)).toBe(1);
    });

    it('after the complete commit, before the worker hears of it: succeeded with one result; the retried complete answers 200', async () => {
      await d.serve('complete.after-commit');
      const kind = 'complete-after';
      const { job } = await d.client(d.keys.producer).enqueue({ kind, payload: {} }, { idempotencyKey: 'after-complete-1' });
      const leased = await leaseOne(d.client(d.keys.worker), kind, 'after', 30_000);
      const item = { id: job.id, token: leased.token, result: { answer: 7 } };
      await expectCrash(d, d.client(d.keys.worker).completeMany([item]));

      await d.serve();
      const admin = d.client(d.keys.admin);
      expect(await admin.getJob(job.id)).toMatchObject({ status: 'succeeded', result: { answer: 7 } });
      expect(await d.resultRows(job.id)).toBe(1);
      const worker = d.client(d.keys.worker);
      expect(await worker.completeMany([item])).toEqual([{ id: job.id, status: 'succeeded' }]);
      expect(await worker.complete(job.id, { token: leased.token, result: { answer: 7 } })).toEqual({ id: job.id, status: 'succeeded' });
      expect(await d.resultRows(job.id)).toBe(1);
      expect((await admin.attempts(job.id)).map((a) => a.outcome)).toEqual(['succeeded']);
    });

    it('a stale worker completing after reassignment: 409 stale_lease, its bytes discarded', async () => {
      await d.serve();
      const kind = 'stale';
      const { job } = await d.client(d.keys.producer).enqueue({ kind, payload: {} }, { idempotencyKey: 'stale-1' });
      const worker = d.client(d.keys.worker);
      const stale = await leaseOne(worker, kind, 'paused', 200);
      // The paused worker's lease runs out; the reaper requeues the job and the next worker claims it.
      const fresh = await waitFor('the job to be claimed again', () => leaseOne(worker, kind, 'fresh', 30_000), { timeoutMs: 15_000 });
      expect(fresh).toMatchObject({ id: job.id, epoch: 2 });

      const staleBytes = { contentType: 'application/octet-stream', base64: Buffer.from('stale bytes').toString('base64') };
      const refused = await worker.complete(job.id, { token: stale.token, resultBytes: staleBytes }).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(LeaseholdApiError);
      expect(refused).toMatchObject({ status: 409, code: 'stale_lease' });
      expect(await d.resultRows(job.id)).toBe(0);

      const freshBytes = { contentType: 'application/octet-stream', base64: Buffer.from('fresh bytes').toString('base64') };
      expect(await worker.complete(job.id, { token: fresh.token, resultBytes: freshBytes })).toEqual({ id: job.id, status: 'succeeded' });
      // Still refused after the job succeeded, and the stored bytes are the fresh worker's.
      await expect(worker.complete(job.id, { token: stale.token, resultBytes: staleBytes })).rejects.toMatchObject({ status: 409 });
      const result = await d.client(d.keys.admin).getResult(job.id);
      expect(result.body.toString()).toBe('fresh bytes');
      expect(await d.resultRows(job.id)).toBe(1);
    });

    it('answered no request with a 5xx: no coordinator logged a warning or an error', () => {
      expect(d.coordinatorWarnings()).toEqual([]);
    });
  });
}
