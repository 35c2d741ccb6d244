/**
 * POST /jobs/batch (per-job answers, one transaction, idempotent per key) and
 * backpressure: 503 overloaded with Retry-After on enqueue only, while reads,
 * leases and completions keep answering. Runs on every backend.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { retryAfterSeconds } from '../../src/engine/backpressure.js';
import { backends, bearer, drainAfterAll, enqueue, errorCode, get, lease, post, startCoordinator, type Harness } from '../support/http-fixtures.js';

interface BatchResult {
  idempotencyKey: string;
  status: number;
  replayed?: boolean;
  job?: { id: string; kind: string };
  error?: { code: string };
}

function batch(harness: Harness, jobs: unknown[], key = harness.keys.producer) {
  return harness.app.inject({ method: 'POST', url: '/jobs/batch', headers: bearer(key), payload: { jobs } });
}

describe.each(backends)('HTTP contract ($name)', (backend) => {
  let h: Harness | undefined;
  drainAfterAll(backend);
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  describe('POST /jobs/batch', () => {
    it('enqueues many jobs with per-job answers, replays and conflicts', async () => {
      h = await startCoordinator({}, { backend });
      await h.app.inject({
        method: 'PUT',
        url: '/kinds/email',
        headers: bearer(h.keys.admin),
        payload: { payloadSchema: { type: 'object', required: ['to'] } },
      });
      await enqueue(h.app, h.keys.producer, { kind: 'email', payload: { to: 'x' } }, 'single');
      const response = await batch(h, [
        { idempotencyKey: 'a', kind: 'email', payload: { to: 'a' } },
        { idempotencyKey: 'b', kind: 'sms', payload: {} },
        { idempotencyKey: 'c', kind: 'email', payload: {} },
        { idempotencyKey: 'single', kind: 'email', payload: { to: 'x' } },
        { idempotencyKey: 'single', kind: 'email', payload: { to: 'changed' } },
        { idempotencyKey: 'd', kind: 'email', payload: { to: 'd' }, priority: 3 },
      ]);
      expect(response.statusCode).toBe(200);
      const { results } = response.json() as { results: BatchResult[] };
      expect(results.map((r) => [r.idempotencyKey, r.status, r.error?.code ?? null])).toEqual([
        ['a', 202, null],
        ['b', 400, 'unknown_kind'],
        ['c', 400, 'invalid_payload'],
        ['single', 202, null],
        ['single', 409, 'idempotency_conflict'],
        ['d', 202, null],
      ]);
      expect(results[0]?.replayed).toBe(false);
      expect(results[3]?.replayed).toBe(true);

      const again = (await batch(h, [{ idempotencyKey: 'a', kind: 'email', payload: { to: 'a' } }])).json() as { results: BatchResult[] };
      expect(again.results[0]).toMatchObject({ status: 202, replayed: true, job: { id: results[0]?.job?.id } });
      const list = (await get(h.app, h.keys.producer, '/jobs')).json() as { jobs: unknown[] };
      expect(list.jobs).toHaveLength(3);
    });

    it('shares idempotency with POST /jobs under the same key and body', async () => {
      h = await startCoordinator({}, { backend });
      const single = (await enqueue(h.app, h.keys.producer, { kind: 'k', payload: [1, 2] }, 'same')).json() as { id: string };
      const { results } = (await batch(h, [{ idempotencyKey: 'same', kind: 'k', payload: [1, 2] }])).json() as { results: BatchResult[] };
      expect(results[0]).toMatchObject({ status: 202, replayed: true, job: { id: single.id } });
    });

    it('refuses an empty batch, more than 1000 jobs, and items without a key', async () => {
      h = await startCoordinator({}, { backend });
      expect((await batch(h, [])).statusCode).toBe(400);
      const many = Array.from({ length: 1001 }, (_, i) => ({ idempotencyKey: `k${i}`, kind: 'k', payload: i }));
      expect((await batch(h, many)).statusCode).toBe(400);
      expect((await batch(h, [{ kind: 'k', payload: 1 }])).statusCode).toBe(400);
      expect((await batch(h, [{ idempotencyKey: 'x', kind: 'k', payload: 1 }], h.keys.worker)).statusCode).toBe(403);
    });

    it('accepts 1000 jobs in one request', async () => {
      h = await startCoordinator({}, { backend });
      const jobs = Array.from({ length: 1000 }, (_, i) => ({ idempotencyKey: `k${i}`, kind: 'k', payload: { i } }));
      const response = await batch(h, jobs);
      expect(response.statusCode).toBe(200);
      const { results } = response.json() as { results: BatchResult[] };
      expect(results.filter((r) => r.status === 202)).toHaveLength(1000);
      expect(new Set(results.map((r) => r.job?.id)).size).toBe(1000);
    });
  });

  describe('backpressure', () => {
    it('answers 503 overloaded with Retry-After at the pending limit while reads, leases and completions go on', async () => {
      h = await startCoordinator({ backpressure: { maxPendingJobs: 3, statsCacheMs: 60_000 } }, { backend });
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const response = await enqueue(h.app, h.keys.producer, { kind: 'k', payload: i });
        expect(response.statusCode).toBe(202);
        ids.push((response.json() as { id: string }).id);
      }
      const refused = await enqueue(h.app, h.keys.producer, { kind: 'k', payload: 4 });
      expect(refused.statusCode).toBe(503);
      expect(errorCode(refused)).toBe('overloaded');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      const refusedBatch = await batch(h, [{ idempotencyKey: 'b1', kind: 'k', payload: 1 }]);
      expect(refusedBatch.statusCode).toBe(503);

      // Other tenants are not affected, and nothing else slows down.
      expect((await enqueue(h.app, h.keys.otherProducer, { kind: 'k', payload: 1 })).statusCode).toBe(202);
      expect((await get(h.app, h.keys.producer, `/jobs/${ids[0]}`)).statusCode).toBe(200);
      const leased = await lease(h.app, h.keys.worker, { max: 3 });
      expect(leased).toHaveLength(3);
      for (const job of leased) expect((await post(h.app, h.keys.worker, `/jobs/${job.id}/complete`, { token: job.token })).statusCode).toBe(200);
      expect((await get(h.app, h.keys.admin, '/stats')).statusCode).toBe(200);
    });

    it('accepts again once the queue drained and the snapshot is refreshed', async () => {
      h = await startCoordinator({ backpressure: { maxPendingJobs: 1, statsCacheMs: 0 } }, { backend });
      expect((await enqueue(h.app, h.keys.producer, { kind: 'k', payload: 1 })).statusCode).toBe(202);
      expect((await enqueue(h.app, h.keys.producer, { kind: 'k', payload: 2 })).statusCode).toBe(503);
      const [job] = await lease(h.app, h.keys.worker);
      await post(h.app, h.keys.worker, `/jobs/${job?.id}/complete`, { token: job?.token });
      expect((await enqueue(h.app, h.keys.producer, { kind: 'k', payload: 2 })).statusCode).toBe(202);
    });

    it('enforces the storage budget', async () => {
      h = await startCoordinator({ backpressure: { maxStorageBytes: 100, statsCacheMs: 0 } }, { backend });
      expect((await enqueue(h.app, h.keys.producer, { kind: 'k', payload: 'x'.repeat(50) })).statusCode).toBe(202);
      const refused = await enqueue(h.app, h.keys.producer, { kind: 'k', payload: 'y'.repeat(60) });
      expect(refused.statusCode).toBe(503);
      expect(errorCode(refused)).toBe('overloaded');
    });
  });
});

describe('retryAfterSeconds', () => {
  it('derives Retry-After from the drain rate', () => {
    expect(retryAfterSeconds(100, 50)).toBe(2);
    expect(retryAfterSeconds(1, 1000)).toBe(1);
    expect(retryAfterSeconds(10_000, 1)).toBe(60);
    expect(retryAfterSeconds(5, null)).toBe(60);
    expect(retryAfterSeconds(5, 0)).toBe(60);
  });
});
