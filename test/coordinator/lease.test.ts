/**
 * The worker side over HTTP: lease, renew, complete (single and batch), fail
 * and requeue, on their happy and stale paths; repeated calls change nothing;
 * the reaper returns expired leases. Runs on every backend: time is a
 * ManualClock on SQLite and the server's clock on PostgreSQL (h.time waits
 * for it), so leases and backoffs here are short and the checks on times are
 * bounds taken from the store's clock before and after the call.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { backends, drainAfterAll, enqueue, errorCode, get, lease, post, startCoordinator, waitFor, type Harness } from '../support/http-fixtures.js';

const BACKOFF_MS = 200;

interface WireJob {
  id: string;
  status: string;
  attempts: number;
  maxAttempts: number;
  finishedAt: string | null;
  lastError: { code: string; message: string } | null;
  result: unknown;
  epoch: number;
}

describe.each(backends)('HTTP contract ($name)', (backend) => {
  let h: Harness;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({ defaultBackoff: { baseMs: BACKOFF_MS, maxMs: BACKOFF_MS } }, { backend, manualClock: true });
  });
  afterEach(async () => {
    await h.close();
  });

  async function newJob(body: Record<string, unknown> = {}): Promise<string> {
    const response = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: { n: 1 }, ...body });
    expect(response.statusCode).toBe(202);
    return (response.json() as { id: string }).id;
  }

  async function readJob(id: string): Promise<WireJob> {
    return (await get(h.app, h.keys.admin, `/jobs/${id}`)).json() as WireJob;
  }

  describe('lease and complete', () => {
    it('leases with epoch and token, completes with a result, and a repeated complete changes nothing', async () => {
      const id = await newJob();
      const before = await h.time.now();
      const [leased] = await lease(h.app, h.keys.worker, { leaseMs: 5000 });
      const after = await h.time.now();
      expect(leased).toMatchObject({ id, kind: 'email', payload: { n: 1 }, attempt: 1, epoch: 1 });
      expect(Date.parse(leased?.leaseExpiresAt ?? '')).toBeGreaterThanOrEqual(before + 5000);
      expect(Date.parse(leased?.leaseExpiresAt ?? '')).toBeLessThanOrEqual(after + 5000);
      expect(leased?.token.length).toBeGreaterThanOrEqual(16);
      expect(await lease(h.app, h.keys.worker)).toEqual([]);

      const first = await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token: leased?.token, result: { b: 2, a: 1 } });
      expect(first.statusCode).toBe(200);
      expect(first.json()).toEqual({ id, status: 'succeeded' });
      const done = await readJob(id);
      expect(done).toMatchObject({ status: 'succeeded', attempts: 1, result: { a: 1, b: 2 } });

      await h.time.advance(100);
      const again = await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token: leased?.token, result: { other: true } });
      expect(again.statusCode).toBe(200);
      expect(await readJob(id)).toEqual(done);
    });

    it("rejects a late complete with 409 stale_lease and keeps the other worker's result", async () => {
      const id = await newJob();
      const [slow] = await lease(h.app, h.keys.worker, { leaseMs: 100, workerId: 'slow' });
      await h.time.advance(101);
      const [fast] = await lease(h.app, h.keys.worker, { leaseMs: 1000, workerId: 'fast' });
      expect(fast?.id).toBe(id);
      expect(fast?.epoch).toBe(2);
      expect(fast?.token).not.toBe(slow?.token);

      const late = await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token: slow?.token, result: 'slow' });
      expect(late.statusCode).toBe(409);
      expect(errorCode(late)).toBe('stale_lease');
      expect((await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token: fast?.token, result: 'fast' })).statusCode).toBe(200);
      const lateAgain = await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token: slow?.token, result: 'slow' });
      expect(lateAgain.statusCode).toBe(409);
      expect(await readJob(id)).toMatchObject({ status: 'succeeded', result: 'fast', attempts: 2 });
    });

    it('answers 404 for completing a job that does not exist', async () => {
      const response = await post(h.app, h.keys.worker, '/jobs/01900000-0000-7000-8000-000000000000/complete', { token: 'abc' });
      expect(response.statusCode).toBe(404);
      expect(errorCode(response)).toBe('not_found');
    });

    it('completes a batch with per-item outcomes', async () => {
      const ids = [await newJob(), await newJob(), await newJob()];
      const leased = await lease(h.app, h.keys.worker, { max: 3 });
      expect(leased).toHaveLength(3);
      const [a, b, c] = leased;
      const response = await post(h.app, h.keys.worker, '/complete', {
        completions: [
          { id: a?.id, token: a?.token, result: 1 },
          { id: b?.id, token: 'not-the-token' },
          { id: '01900000-0000-7000-8000-000000000000', token: 'x' },
          { id: c?.id, token: c?.token },
          { id: a?.id, token: a?.token, result: 1 },
        ],
      });
      expect(response.statusCode).toBe(200);
      expect(response.json()).toEqual({
        results: [
          { id: a?.id, status: 'succeeded' },
          { id: b?.id, status: 'rejected', code: 'stale_lease' },
          { id: '01900000-0000-7000-8000-000000000000', status: 'rejected', code: 'not_found' },
          { id: c?.id, status: 'succeeded' },
          { id: a?.id, status: 'succeeded' },
        ],
      });
      const statuses = await Promise.all(ids.map(async (id) => (await readJob(id)).status));
      expect(statuses.sort()).toEqual(['running', 'succeeded', 'succeeded']);
    });

    it('refuses an empty or oversized batch', async () => {
      expect((await post(h.app, h.keys.worker, '/complete', { completions: [] })).statusCode).toBe(400);
      const many = Array.from({ length: 1001 }, () => ({ id: 'x', token: 'y' }));
      expect((await post(h.app, h.keys.worker, '/complete', { completions: many })).statusCode).toBe(400);
    });
  });

  describe('renew', () => {
    it('extends a live lease and rejects a stale or expired one', async () => {
      const id = await newJob();
      const [leased] = await lease(h.app, h.keys.worker, { leaseMs: 1000 });
      await h.time.advance(200);
      const before = await h.time.now();
      const renewed = await post(h.app, h.keys.worker, `/jobs/${id}/renew`, { token: leased?.token, leaseMs: 1000 });
      const after = await h.time.now();
      expect(renewed.statusCode).toBe(200);
      const expiresAt = Date.parse((renewed.json() as { leaseExpiresAt: string }).leaseExpiresAt);
      // Counted from the renewal, so later than the first lease's expiry.
      expect(expiresAt).toBeGreaterThanOrEqual(before + 1000);
      expect(expiresAt).toBeLessThanOrEqual(after + 1000);
      expect(expiresAt).toBeGreaterThan(Date.parse(leased?.leaseExpiresAt ?? ''));

      const wrong = await post(h.app, h.keys.worker, `/jobs/${id}/renew`, { token: 'forged-token' });
      expect(wrong.statusCode).toBe(409);
      expect(errorCode(wrong)).toBe('stale_lease');

      await h.time.advance(1001);
      const expired = await post(h.app, h.keys.worker, `/jobs/${id}/renew`, { token: leased?.token });
      expect(expired.statusCode).toBe(409);
      expect(errorCode(expired)).toBe('stale_lease');
    });
  });

  describe('fail', () => {
    it('requeues a retryable failure with backoff, and repeating the fail changes nothing', async () => {
      const id = await newJob({ maxAttempts: 3 });
      const [leased] = await lease(h.app, h.keys.worker);
      const body = { token: leased?.token, error: { code: 'smtp_down', message: 'line one\nline two' } };
      const before = await h.time.now();
      const failed = await post(h.app, h.keys.worker, `/jobs/${id}/fail`, body);
      const afterFail = await h.time.now();
      expect(failed.statusCode).toBe(200);
      const answer = failed.json() as { status: string; runAfter: string };
      expect(answer.status).toBe('queued');
      expect(Date.parse(answer.runAfter)).toBeGreaterThanOrEqual(before);
      expect(Date.parse(answer.runAfter)).toBeLessThan(afterFail + BACKOFF_MS);
      const after = await readJob(id);
      expect(after).toMatchObject({ status: 'queued', attempts: 1, lastError: { code: 'smtp_down', message: 'line one line two' } });

      const repeated = await post(h.app, h.keys.worker, `/jobs/${id}/fail`, body);
      expect(repeated.statusCode).toBe(200);
      expect((repeated.json() as { status: string }).status).toBe('queued');
      expect(await readJob(id)).toEqual(after);
    });

    it('kills a job on a permanent failure and rejects a stale fail', async () => {
      const id = await newJob();
      const [leased] = await lease(h.app, h.keys.worker);
      const stale = await post(h.app, h.keys.worker, `/jobs/${id}/fail`, { token: 'forged', error: { code: 'x' } });
      expect(stale.statusCode).toBe(409);
      expect(errorCode(stale)).toBe('stale_lease');
      const dead = await post(h.app, h.keys.worker, `/jobs/${id}/fail`, { token: leased?.token, error: { code: 'bad_input' }, retryable: false });
      expect(dead.json()).toEqual({ status: 'dead' });
      expect(await readJob(id)).toMatchObject({ status: 'dead', lastError: { code: 'bad_input' } });
    });

    it('retries into dead, then an admin requeues with a fresh budget; requeue of a live job is 409 not_dead', async () => {
      const id = await newJob({ maxAttempts: 2 });
      for (let attempt = 1; attempt <= 2; attempt++) {
        const [leased] = await lease(h.app, h.keys.worker);
        expect(leased?.attempt).toBe(attempt);
        await post(h.app, h.keys.worker, `/jobs/${id}/fail`, { token: leased?.token, error: { code: 'flaky' } });
        await h.time.advance(BACKOFF_MS + 1);
      }
      expect(await readJob(id)).toMatchObject({ status: 'dead', attempts: 2 });
      expect(await lease(h.app, h.keys.worker)).toEqual([]);

      const requeued = await post(h.app, h.keys.admin, `/jobs/${id}/requeue`);
      expect(requeued.statusCode).toBe(200);
      expect(requeued.json()).toMatchObject({ id, status: 'queued' });
      const [again] = await lease(h.app, h.keys.worker);
      expect(again?.id).toBe(id);
      const notDead = await post(h.app, h.keys.admin, `/jobs/${id}/requeue`, {});
      expect(notDead.statusCode).toBe(409);
      expect(errorCode(notDead)).toBe('not_dead');
      const missing = await post(h.app, h.keys.admin, '/jobs/01900000-0000-7000-8000-000000000000/requeue', {});
      expect(missing.statusCode).toBe(404);
    });
  });

  describe('reaper', () => {
    it('returns an expired lease to the queue, counting the attempt', async () => {
      await h.close();
      h = await startCoordinator({ reaperIntervalMs: 20 }, { backend, manualClock: true });
      const id = await newJob({ maxAttempts: 1 });
      await lease(h.app, h.keys.worker, { leaseMs: 100 });
      await h.time.advance(101);
      await waitFor(async () => (await readJob(id)).status === 'dead');
      expect(await readJob(id)).toMatchObject({ status: 'dead', attempts: 1, lastError: { code: 'lease_expired' } });
    });
  });
});
