/**
 * The job contract of issue 3 over HTTP: results with checksums, deadlines,
 * the unknown state and reconcile, checkpoints, cancellation, attempt
 * history and progress. Runs on every backend: time is a ManualClock on
 * SQLite and the server's clock on PostgreSQL (h.time waits for it), so a
 * test that needs a lease to run out holds a long lease while it works under
 * it and then shortens it with a renew, and deadlines and backoffs are short.
 */
import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { backends, bearer, drainAfterAll, enqueue, errorCode, get, lease, post, startCoordinator, type Harness } from '../support/http-fixtures.js';

const BACKOFF_MS = 100;
/** The shortest lease the API grants (LIMITS.minLeaseMs). */
const SHORT_LEASE_MS = 100;

describe.each(backends)('HTTP contract ($name)', (backend) => {
  let h: Harness;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({ defaultBackoff: { baseMs: BACKOFF_MS, maxMs: BACKOFF_MS } }, { backend, manualClock: true });
  });
  afterEach(async () => {
    await h.close();
  });

  async function runningJob(body: Record<string, unknown> = {}, leaseBody: Record<string, unknown> = {}) {
    const id = ((await enqueue(h.app, h.keys.producer, { kind: 'work', payload: { n: 1 }, ...body })).json() as { id: string }).id;
    const [leased] = await lease(h.app, h.keys.worker, { leaseMs: 30_000, ...leaseBody });
    expect(leased?.id).toBe(id);
    return { id, token: leased?.token ?? '', leased };
  }

  /** Lets a live lease run out now: renewed to the shortest lease, then that much store time passes. */
  async function expireLease(id: string, token: string): Promise<void> {
    const renewed = await post(h.app, h.keys.worker, `/jobs/${id}/renew`, { token, leaseMs: SHORT_LEASE_MS });
    expect(renewed.statusCode).toBe(200);
    await h.time.advance(SHORT_LEASE_MS + 1);
  }

  async function status(id: string): Promise<string> {
    return ((await get(h.app, h.keys.admin, `/jobs/${id}`)).json() as { status: string }).status;
  }

  describe('GET /jobs/{id}/result', () => {
    it('answers result_not_ready before success, then the bytes with ETag and Repr-Digest', async () => {
      const { id, token } = await runningJob();
      const early = await get(h.app, h.keys.producer, `/jobs/${id}/result`);
      expect(early.statusCode).toBe(404);
      expect(errorCode(early)).toBe('result_not_ready');

      await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token, result: { total: 3, items: ['a'] } });
      const response = await get(h.app, h.keys.producer, `/jobs/${id}/result`);
      expect(response.statusCode).toBe(200);
      expect(response.headers['content-type']).toBe('application/json');
      expect(response.body).toBe('{"items":["a"],"total":3}');
      const digest = createHash('sha256').update(response.rawPayload).digest();
      expect(response.headers['etag']).toBe(`"${digest.toString('hex')}"`);
      expect(response.headers['repr-digest']).toBe(`sha-256=:${digest.toString('base64')}:`);

      const cached = await h.app.inject({
        method: 'GET',
        url: `/jobs/${id}/result`,
        headers: { ...bearer(h.keys.producer), 'if-none-match': String(response.headers['etag']) },
      });
      expect(cached.statusCode).toBe(304);
      expect(cached.body).toBe('');
    });

    it("answers 404 for another user's or tenant's result, not 403", async () => {
      const { id, token } = await runningJob();
      await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token, result: 1 });
      for (const key of [h.keys.producer2, h.keys.otherProducer, h.keys.otherAdmin]) {
        const response = await get(h.app, key, `/jobs/${id}/result`);
        expect(response.statusCode).toBe(404);
        expect(errorCode(response)).toBe('not_found');
      }
      expect((await get(h.app, h.keys.worker, `/jobs/${id}/result`)).statusCode).toBe(403);
    });

    it('stores bytes with their content type', async () => {
      const { id, token } = await runningJob();
      const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff, 0x10]);
      const both = await post(h.app, h.keys.worker, `/jobs/${id}/complete`, {
        token,
        result: 1,
        resultBytes: { contentType: 'image/png', base64: bytes.toString('base64') },
      });
      expect(both.statusCode).toBe(400);
      const done = await post(h.app, h.keys.worker, `/jobs/${id}/complete`, {
        token,
        resultBytes: { contentType: 'image/png', base64: bytes.toString('base64') },
      });
      expect(done.statusCode).toBe(200);
      const response = await get(h.app, h.keys.producer, `/jobs/${id}/result`);
      expect(response.headers['content-type']).toBe('image/png');
      expect(Buffer.compare(response.rawPayload, bytes)).toBe(0);
      expect(response.headers['etag']).toBe(`"${createHash('sha256').update(bytes).digest('hex')}"`);
      expect(((await get(h.app, h.keys.producer, `/jobs/${id}`)).json() as { result: unknown }).result).toBeNull();
    });

    it('answers 204 for a job that succeeded without a result', async () => {
      const { id, token } = await runningJob();
      await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token });
      expect((await get(h.app, h.keys.producer, `/jobs/${id}/result`)).statusCode).toBe(204);
    });
  });

  describe('deadlines', () => {
    it('answers 409 deadline_exceeded to a complete after the deadline and stores nothing', async () => {
      const { id, token } = await runningJob({ deadlineMs: 1000 }, { leaseMs: 10_000 });
      // From after the lease, so past the deadline (counted from acceptance) whatever the machine's speed.
      await h.time.advance(1001);
      const response = await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token, result: 'late' });
      expect(response.statusCode).toBe(409);
      expect(errorCode(response)).toBe('deadline_exceeded');
      const renew = await post(h.app, h.keys.worker, `/jobs/${id}/renew`, { token });
      expect(errorCode(renew)).toBe('deadline_exceeded');
      expect(await status(id)).not.toBe('succeeded');
      expect(errorCode(await get(h.app, h.keys.producer, `/jobs/${id}/result`))).toBe('result_not_ready');
    });

    it('never leases a job past its deadline; it becomes dead with deadline_exceeded', async () => {
      const id = ((await enqueue(h.app, h.keys.producer, { kind: 'work', payload: 1, deadlineMs: 300 })).json() as { id: string }).id;
      await h.time.advance(301);
      expect(await lease(h.app, h.keys.worker, { max: 10 })).toEqual([]);
      await h.store.jobReapExpired();
      const job = (await get(h.app, h.keys.admin, `/jobs/${id}`)).json() as { status: string; lastError: { code: string } };
      expect(job).toMatchObject({ status: 'dead', lastError: { code: 'deadline_exceeded' } });
    });
  });

  describe('the unknown state', () => {
    it('turns a job whose lease expired after effect into unknown, never retries it, and lets an admin reconcile it', async () => {
      const { id, token } = await runningJob({ maxAttempts: 5 });
      const effect = await post(h.app, h.keys.worker, `/jobs/${id}/effect`, { token });
      expect(effect.statusCode).toBe(200);
      expect(effect.json()).toEqual({ ok: true });
      expect(errorCode(await post(h.app, h.keys.worker, `/jobs/${id}/effect`, { token: 'forged' }))).toBe('stale_lease');
      await expireLease(id, token);
      expect(await lease(h.app, h.keys.worker, { max: 10 })).toEqual([]);
      expect(await status(id)).toBe('unknown');
      // Well past any retry's backoff: a job wrongly requeued would be leasable by now.
      await h.time.advance(5 * BACKOFF_MS);
      await h.store.jobReapExpired();
      expect(await lease(h.app, h.keys.worker, { max: 10 })).toEqual([]);
      expect(await status(id)).toBe('unknown');

      expect((await post(h.app, h.keys.producer, `/jobs/${id}/reconcile`, { outcome: 'requeue' })).statusCode).toBe(403);
      const reconciled = await post(h.app, h.keys.admin, `/jobs/${id}/reconcile`, { outcome: 'requeue' });
      expect(reconciled.statusCode).toBe(200);
      expect((reconciled.json() as { status: string }).status).toBe('queued');
      const again = await post(h.app, h.keys.admin, `/jobs/${id}/reconcile`, { outcome: 'succeeded' });
      expect(again.statusCode).toBe(409);
      expect(errorCode(again)).toBe('not_unknown');
      expect((await post(h.app, h.keys.admin, `/jobs/${id}/reconcile`, { outcome: 'maybe' })).statusCode).toBe(400);
    });
  });

  describe('checkpoints', () => {
    it('stores the latest step under the live lease and hands it to the next lease', async () => {
      const { id, token } = await runningJob();
      expect((await post(h.app, h.keys.worker, `/jobs/${id}/checkpoint`, { token, step: 1, state: { rows: 100 } })).statusCode).toBe(200);
      expect((await post(h.app, h.keys.worker, `/jobs/${id}/checkpoint`, { token, step: 2, state: { rows: 200 } })).statusCode).toBe(200);
      const stale = await post(h.app, h.keys.worker, `/jobs/${id}/checkpoint`, { token: 'forged', step: 3, state: null });
      expect(stale.statusCode).toBe(409);
      await expireLease(id, token);
      const [resumed] = await lease(h.app, h.keys.worker);
      expect(resumed?.id).toBe(id);
      expect((resumed as unknown as { checkpoint: unknown }).checkpoint).toEqual({ step: 2, state: { rows: 200 } });
      const late = await post(h.app, h.keys.worker, `/jobs/${id}/checkpoint`, { token, step: 9, state: null });
      expect(errorCode(late)).toBe('stale_lease');
    });
  });

  describe('cancellation', () => {
    it('cancels a queued job at once and marks a running one, whose next renew answers 409 cancelled', async () => {
      const queued = ((await enqueue(h.app, h.keys.producer, { kind: 'work', payload: 'q' })).json() as { id: string }).id;
      expect((await post(h.app, h.keys.producer2, `/jobs/${queued}/cancel`)).statusCode).toBe(404);
      expect((await post(h.app, h.keys.worker, `/jobs/${queued}/cancel`)).statusCode).toBe(403);
      const cancelled = await post(h.app, h.keys.producer, `/jobs/${queued}/cancel`);
      expect(cancelled.statusCode).toBe(200);
      expect((cancelled.json() as { status: string }).status).toBe('cancelled');
      expect(await lease(h.app, h.keys.worker)).toEqual([]);

      const { id, token } = await runningJob();
      const marked = await post(h.app, h.keys.admin, `/jobs/${id}/cancel`, {});
      expect(marked.statusCode).toBe(200);
      expect(marked.json()).toMatchObject({ status: 'running', cancelRequested: true });
      const renew = await post(h.app, h.keys.worker, `/jobs/${id}/renew`, { token });
      expect(renew.statusCode).toBe(409);
      expect(errorCode(renew)).toBe('cancelled');
      // The worker's answer to that 409: a fail with its still-live token ends the job cancelled at once.
      const acknowledged = await post(h.app, h.keys.worker, `/jobs/${id}/fail`, { token, error: { code: 'cancelled', message: 'aborted' }, retryable: false });
      expect(acknowledged.json()).toEqual({ status: 'cancelled' });
      const job = (await get(h.app, h.keys.producer, `/jobs/${id}`)).json() as { status: string; lastError: unknown };
      expect(job).toMatchObject({ status: 'cancelled', lastError: { code: 'cancelled', class: 'cancelled' } });

      // Cancelling a cancelled job again is harmless.
      const ended = await post(h.app, h.keys.producer, `/jobs/${queued}/cancel`);
      expect(ended.statusCode).toBe(200);
      expect((ended.json() as { status: string }).status).toBe('cancelled');
    });

    it('answers 409 invalid_state for a job that already succeeded', async () => {
      const { id, token } = await runningJob();
      await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token });
      const response = await post(h.app, h.keys.producer, `/jobs/${id}/cancel`);
      expect(response.statusCode).toBe(409);
      expect(errorCode(response)).toBe('invalid_state');
    });
  });

  describe('attempt history and progress', () => {
    it('records one row per attempt with worker, epoch, outcome and error code', async () => {
      const { id, token } = await runningJob({}, { workerId: 'alpha' });
      await post(h.app, h.keys.worker, `/jobs/${id}/fail`, { token, error: { code: 'flaky' } });
      await h.time.advance(BACKOFF_MS + 1);
      const [second] = await lease(h.app, h.keys.worker, { workerId: 'beta' });
      await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token: second?.token });
      const response = await get(h.app, h.keys.producer, `/jobs/${id}/attempts`);
      expect(response.statusCode).toBe(200);
      const { attempts } = response.json() as { attempts: Record<string, unknown>[] };
      expect(attempts).toHaveLength(2);
      expect(attempts[0]).toMatchObject({ attempt: 1, epoch: 1, workerId: 'alpha', outcome: 'failed', errorCode: 'flaky' });
      expect(attempts[1]).toMatchObject({ attempt: 2, epoch: 2, workerId: 'beta', outcome: 'succeeded', errorCode: null });
      expect(typeof attempts[1]?.['endedAt']).toBe('string');
      expect((await get(h.app, h.keys.producer2, `/jobs/${id}/attempts`)).statusCode).toBe(404);
    });

    it('stores progress sent with a renew and shows it on the job; refuses a large one', async () => {
      const { id, token } = await runningJob();
      const renew = await post(h.app, h.keys.worker, `/jobs/${id}/renew`, { token, progress: { done: 2, total: 5 } });
      expect(renew.statusCode).toBe(200);
      expect(((await get(h.app, h.keys.producer, `/jobs/${id}`)).json() as { progress: unknown }).progress).toEqual({ done: 2, total: 5 });
      const big = await post(h.app, h.keys.worker, `/jobs/${id}/renew`, { token, progress: 'x'.repeat(5000) });
      expect(big.statusCode).toBe(413);
      expect(errorCode(big)).toBe('payload_too_large');
    });
  });
});
