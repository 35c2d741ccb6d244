/**
 * The typed client against a real coordinator listening on a random port over
 * a fresh SQLite file: every method once, the error classes, and the result
 * checksum check (against a real HTTP server that lies about its ETag).
 */

import { createServer, type Server } from 'node:http';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaseholdClient } from '../../src/client/leasehold-client.js';
import { LeaseholdApiError, LeaseholdIntegrityError, LeaseholdNetworkError, isRetryableError } from '../../src/client/errors.js';
import { insertKey, startLiveCoordinator, type LiveCoordinator } from './live-coordinator.js';

let live: LiveCoordinator;
let admin: LeaseholdClient;
let worker: LeaseholdClient;
let producer: LeaseholdClient;

beforeAll(async () => {
  live = await startLiveCoordinator();
  admin = live.client('admin');
  worker = live.client('worker');
  producer = live.client('producer');
});

afterAll(async () => {
  await live.close();
});

async function leaseOne(kind: string, leaseMs = 30_000) {
  const jobs = await worker.lease({ workerId: 'client-test', kinds: [kind], max: 1, leaseMs, waitMs: 2_000 });
  expect(jobs).toHaveLength(1);
  const job = jobs[0];
  if (job === undefined) throw new Error('no job');
  return job;
}

describe('client: producing and reading', () => {
  it('enqueues, replays the same idempotency key, and refuses a changed body', async () => {
    const first = await producer.enqueue({ kind: 'c-enqueue', payload: { a: 1, b: 2 } }, { idempotencyKey: 'k-1' });
    expect(first.replayed).toBe(false);
    expect(first.job.status).toBe('queued');
    expect(first.retryAfterSeconds).toBeGreaterThanOrEqual(1);

    const again = await producer.enqueue({ kind: 'c-enqueue', payload: { b: 2, a: 1 } }, { idempotencyKey: 'k-1' });
    expect(again.replayed).toBe(true);
    expect(again.job.id).toBe(first.job.id);

    const conflict = await producer.enqueue({ kind: 'c-enqueue', payload: { a: 2 } }, { idempotencyKey: 'k-1' }).catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(LeaseholdApiError);
    expect((conflict as LeaseholdApiError).status).toBe(409);
    expect((conflict as LeaseholdApiError).code).toBe('idempotency_conflict');
  });

  it("gets and lists jobs, and hides another user's job as 404", async () => {
    const { job } = await producer.enqueue({ kind: 'c-list', payload: { n: 1 } });
    expect((await producer.getJob(job.id)).id).toBe(job.id);
    const page = await producer.listJobs({ kind: 'c-list', status: 'queued', limit: 10 });
    expect(page.jobs.map((j) => j.id)).toContain(job.id);

    const other = live.client('producer2');
    const hidden = await other.getJob(job.id).catch((e: unknown) => e);
    expect(hidden).toBeInstanceOf(LeaseholdApiError);
    expect((hidden as LeaseholdApiError).status).toBe(404);
  });

  it('enqueues a batch with per-job results', async () => {
    const answer = await producer.enqueueBatch([
      { idempotencyKey: 'b-1', kind: 'c-batch', payload: 1 },
      { idempotencyKey: 'b-2', kind: 'c-batch', payload: 2 },
    ]);
    expect(answer.results).toHaveLength(2);
    const page = await producer.listJobs({ kind: 'c-batch' });
    expect(page.jobs).toHaveLength(2);
  });
});

describe('client: the worker calls', () => {
  it('returns [] when nothing is available (204)', async () => {
    expect(await worker.lease({ workerId: 'client-test', kinds: ['c-nothing'], waitMs: 0 })).toEqual([]);
  });

  it('aborts a parked long poll when its signal fires', async () => {
    const controller = new AbortController();
    const started = performance.now();
    const leasing = worker.lease({ workerId: 'client-test', kinds: ['c-parked'], waitMs: 10_000 }, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error('stop now')), 50);
    await expect(leasing).rejects.toThrow('stop now');
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('leases, renews, completes, and reads the result with a verified checksum', async () => {
    const { job } = await producer.enqueue({ kind: 'c-complete', payload: { x: 1 } });
    const leased = await leaseOne('c-complete');
    expect(leased.id).toBe(job.id);
    expect(leased.attempt).toBe(1);
    const renewed = await worker.renew(leased.id, { token: leased.token, leaseMs: 20_000, progress: { done: 1, total: 2 } });
    expect(Date.parse(renewed.leaseExpiresAt)).toBeGreaterThan(Date.now());
    expect((await producer.getJob(job.id)).progress).toEqual({ done: 1, total: 2 });

    await worker.complete(leased.id, { token: leased.token, result: { ok: true, n: 42 } });
    // The same complete again changes nothing and still answers 200.
    await worker.complete(leased.id, { token: leased.token, result: { ok: true, n: 42 } });

    const result = await producer.getResult(job.id);
    expect(result.value).toEqual({ n: 42, ok: true });
    expect(result.checksum).toBe(createHash('sha256').update(result.body).digest('hex'));
    expect((await producer.getJob(job.id)).status).toBe('succeeded');
  });

  it('completes many jobs in one request', async () => {
    for (let i = 0; i < 3; i++) await producer.enqueue({ kind: 'c-many', payload: i });
    const jobs = await worker.lease({ workerId: 'client-test', kinds: ['c-many'], max: 3, waitMs: 1_000 });
    expect(jobs).toHaveLength(3);
    const results = await worker.completeMany(jobs.map((j) => ({ id: j.id, token: j.token, result: j.payload })));
    expect(results.map((r) => r.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    const stale = await worker.complete(jobs[0]?.id ?? '', { token: 'not-the-token' }).catch((e: unknown) => e);
    expect((stale as LeaseholdApiError).code).toBe('stale_lease');
  });

  it('fails into dead, shows the attempts, and an admin requeues', async () => {
    const { job } = await producer.enqueue({ kind: 'c-fail', payload: null, maxAttempts: 1 });
    const leased = await leaseOne('c-fail');
    const failed = await worker.fail(leased.id, { token: leased.token, error: { code: 'boom', message: 'it broke' } });
    expect(failed.status).toBe('dead');
    const attempts = await admin.attempts(job.id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]?.errorCode).toBe('boom');
    const requeued = await admin.requeue(job.id);
    expect(requeued.status).toBe('queued');
  });

  it('stores a checkpoint and hands it to the next lease', async () => {
    await producer.enqueue({ kind: 'c-checkpoint', payload: null, maxAttempts: 3 });
    const first = await leaseOne('c-checkpoint', 300);
    await worker.checkpoint(first.id, { token: first.token, step: 2, state: { cursor: 'abc' } });
    // The lease runs out (the reaper requeues the job), and the next lease resumes from the checkpoint.
    const second = await leaseOne('c-checkpoint');
    expect(second.id).toBe(first.id);
    expect(second.attempt).toBe(2);
    expect(second.checkpoint).toEqual({ step: 2, state: { cursor: 'abc' } });
  });

  it('records an effect; an expired lease then makes the job unknown, and an admin reconciles it', async () => {
    const { job } = await producer.enqueue({ kind: 'c-effect', payload: null });
    const leased = await leaseOne('c-effect', 200);
    await worker.effectStarted(leased.id, leased.token);
    const deadline = Date.now() + 10_000;
    while ((await admin.getJob(job.id)).status !== 'unknown') {
      if (Date.now() > deadline) throw new Error('job never became unknown');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    const reconciled = await admin.reconcile(job.id, 'succeeded');
    expect(reconciled.status).toBe('succeeded');
  });

  it('cancels a queued job', async () => {
    const { job } = await producer.enqueue({ kind: 'c-cancel', payload: null });
    expect((await producer.cancel(job.id)).status).toBe('cancelled');
  });
});

describe('client: admin and system calls', () => {
  it('registers and lists kinds, reads stats and health', async () => {
    // Another tenant: registering a kind turns a tenant's kinds into an allowlist.
    const otherAdmin = live.client(await insertKey(live.store, 't-kinds', 'root', 'admin'));
    const kind = await otherAdmin.putKind('c-kind', { maxAttempts: 4, leaseMs: 5_000 });
    expect(kind.kind).toBe('c-kind');
    expect(kind.maxAttempts).toBe(4);
    expect((await otherAdmin.listKinds()).map((k) => k.kind)).toEqual(['c-kind']);
    const refused = await otherAdmin.enqueue({ kind: 'c-unregistered', payload: null }).catch((e: unknown) => e);
    expect((refused as LeaseholdApiError).code).toBe('unknown_kind');
    const stats = await admin.stats();
    // The tenant's counts as the store itself reports them (no other test in this file runs meanwhile).
    expect(stats.counts).toEqual((await live.store.stats({ tenant: 't1' })).counts);
    expect((await admin.health()).status).toBe('ok');
  });
});

describe('client: errors', () => {
  it('turns a bad key into a 401 LeaseholdApiError whose message does not contain the key', async () => {
    const key = 'lh_this-is-not-a-real-key-000000000000';
    const client = new LeaseholdClient({ baseUrl: live.url, apiKey: key });
    try {
      const error = await client.stats().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LeaseholdApiError);
      expect((error as LeaseholdApiError).status).toBe(401);
      expect((error as LeaseholdApiError).code).toBe('unauthorized');
      expect(isRetryableError(error)).toBe(false);
      expect(String((error as Error).message)).not.toContain(key);
    } finally {
      await client.close();
    }
  });

  it('turns a refused connection into a retryable LeaseholdNetworkError without secrets', async () => {
    const key = 'lh_secret-key-that-must-not-leak-0000000';
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const client = new LeaseholdClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: key });
    try {
      const error = await client.renew('some-id', { token: 'tok-secret-123456' }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LeaseholdNetworkError);
      expect(isRetryableError(error)).toBe(true);
      expect((error as Error).message).not.toContain(key);
      expect((error as Error).message).not.toContain('tok-secret-123456');
    } finally {
      await client.close();
    }
  });

  it('throws LeaseholdIntegrityError when a result does not match its ETag', async () => {
    const body = '{"value":1}';
    const server: Server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', etag: `"${'0'.repeat(64)}"` });
      response.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const client = new LeaseholdClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'k' });
    try {
      const error = await client.getResult('any').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LeaseholdIntegrityError);
      expect((error as LeaseholdIntegrityError).code).toBe('checksum_mismatch');
    } finally {
      await client.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('accepts a result only when its bytes match every checksum header it came with', async () => {
    const original = Buffer.from('{"value":1}');
    const sha = createHash('sha256').update(original).digest();
    const etag = `"${sha.toString('hex')}"`;
    const digest = `sha-256=:${sha.toString('base64')}:`;
    // What an intermediary could do to the answer: change the bytes, or the digest header, or drop both headers.
    const answers: Record<string, { body: Buffer; headers: Record<string, string> }> = {
      '/jobs/intact/result': { body: original, headers: { etag, 'repr-digest': digest } },
      '/jobs/body-changed/result': { body: Buffer.from('{"value":2}'), headers: { etag, 'repr-digest': digest } },
      '/jobs/digest-changed/result': { body: original, headers: { etag, 'repr-digest': `sha-256=:${Buffer.alloc(32).toString('base64')}:` } },
      '/jobs/unchecked/result': { body: original, headers: {} },
    };
    const server: Server = createServer((request, response) => {
      const answer = answers[request.url ?? ''];
      response.writeHead(answer === undefined ? 404 : 200, { 'content-type': 'application/json', ...(answer?.headers ?? {}) });
      response.end(answer?.body ?? '{"error":{"code":"not_found","message":"no"}}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    const client = new LeaseholdClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'k' });
    try {
      expect((await client.getResult('intact')).value).toEqual({ value: 1 });
      const codes = await Promise.all(
        ['body-changed', 'digest-changed', 'unchecked'].map((id) =>
          client.getResult(id).then(
            () => 'accepted',
            (error: unknown) => (error instanceof LeaseholdIntegrityError ? error.code : String(error)),
          ),
        ),
      );
      expect(codes).toEqual(['checksum_mismatch', 'checksum_mismatch', 'checksum_missing']);
    } finally {
      await client.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('reads a 404 result_not_ready before the job succeeded', async () => {
    const { job } = await producer.enqueue({ kind: 'c-not-ready', payload: null });
    const error = await producer.getResult(job.id).catch((e: unknown) => e);
    expect((error as LeaseholdApiError).code).toBe('result_not_ready');
  });
});
