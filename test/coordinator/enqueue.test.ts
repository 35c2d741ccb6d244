/**
 * POST /jobs: the 202 contract, idempotency by key and canonical body, and
 * the kinds rule for tenants without registered kinds. Runs on every backend.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/core/canonical-json.js';
import { canonicalRequestText } from '../../src/engine/enqueue.js';
import { backends, bearer, drainAfterAll, enqueue, errorCode, get, startCoordinator, type Harness } from '../support/http-fixtures.js';

interface WireJob {
  id: string;
  status: string;
  kind: string;
  attempts: number;
  maxAttempts: number;
  runAfter: string;
  createdAt: string;
  result: unknown;
}

describe.each(backends)('HTTP contract ($name)', (backend) => {
  let h: Harness;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({ pollIntervalSeconds: 2 }, { backend });
  });
  afterEach(async () => {
    await h.close();
  });

  describe('POST /jobs', () => {
    it('answers 202 with the job, Location and Retry-After', async () => {
      const response = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: { to: 'x' }, maxAttempts: 3, priority: 5 });
      expect(response.statusCode).toBe(202);
      const job = response.json() as WireJob;
      expect(job).toMatchObject({ kind: 'email', status: 'queued', attempts: 0, maxAttempts: 3, result: null });
      expect(response.headers['location']).toBe(`/jobs/${job.id}`);
      expect(response.headers['retry-after']).toBe('2');
      expect(response.headers['idempotent-replayed']).toBeUndefined();
      expect(job.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      const read = (await get(h.app, h.keys.producer, `/jobs/${job.id}`)).json() as WireJob;
      expect(read.id).toBe(job.id);
    });

    it('uses the coordinator default maxAttempts and honours runAfter', async () => {
      const runAfter = '2099-01-01T00:00:00.000Z';
      const job = (await enqueue(h.app, h.keys.producer, { kind: 'email', payload: 1, runAfter })).json() as WireJob;
      expect(job.maxAttempts).toBe(5);
      expect(job.runAfter).toBe(runAfter);
      const offset = (await enqueue(h.app, h.keys.producer, { kind: 'email', payload: 1, runAfter: '2099-01-01T02:00:00+02:00' })).json() as WireJob;
      expect(offset.runAfter).toBe(runAfter);
    });

    it('requires the Idempotency-Key header', async () => {
      const response = await h.app.inject({ method: 'POST', url: '/jobs', headers: bearer(h.keys.producer), payload: { kind: 'k', payload: {} } });
      expect(response.statusCode).toBe(400);
      expect(errorCode(response)).toBe('idempotency_key_required');
      const blank = await enqueue(h.app, h.keys.producer, { kind: 'k', payload: {} }, '  ');
      expect(errorCode(blank)).toBe('idempotency_key_required');
      const long = await enqueue(h.app, h.keys.producer, { kind: 'k', payload: {} }, 'x'.repeat(256));
      expect(long.statusCode).toBe(400);
    });

    it('replays the same key with the same canonical body: same id, header set, no new job', async () => {
      const first = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: { a: 1, b: [1, { c: 2, d: 3 }] } }, 'same');
      const again = await enqueue(h.app, h.keys.producer, { payload: { b: [1, { d: 3, c: 2 }], a: 1 }, kind: 'email' }, 'same');
      expect(again.statusCode).toBe(202);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect((again.json() as WireJob).id).toBe((first.json() as WireJob).id);
      expect(again.headers['location']).toBe(first.headers['location']);
      const list = (await get(h.app, h.keys.producer, '/jobs')).json() as { jobs: WireJob[] };
      expect(list.jobs).toHaveLength(1);
    });

    it('answers 409 idempotency_conflict for the same key with a different body', async () => {
      await enqueue(h.app, h.keys.producer, { kind: 'email', payload: { a: 1 } }, 'k1');
      for (const body of [
        { kind: 'email', payload: { a: 2 } },
        { kind: 'email', payload: { a: 1 }, priority: 1 },
        { kind: 'sms', payload: { a: 1 } },
      ]) {
        const response = await enqueue(h.app, h.keys.producer, body, 'k1');
        expect(response.statusCode).toBe(409);
        expect(errorCode(response)).toBe('idempotency_conflict');
      }
    });

    it('keeps idempotency keys per user: the same key from another producer is a new job', async () => {
      const a = (await enqueue(h.app, h.keys.producer, { kind: 'email', payload: 1 }, 'shared')).json() as WireJob;
      const b = await enqueue(h.app, h.keys.producer2, { kind: 'email', payload: 2 }, 'shared');
      expect(b.statusCode).toBe(202);
      expect((b.json() as WireJob).id).not.toBe(a.id);
    });

    it('accepts any kind while the tenant has registered none, and only registered kinds after', async () => {
      expect((await enqueue(h.app, h.keys.producer, { kind: 'anything', payload: null })).statusCode).toBe(202);
      const put = await h.app.inject({ method: 'PUT', url: '/kinds/email', headers: bearer(h.keys.admin), payload: {} });
      expect(put.statusCode).toBe(200);
      const unknown = await enqueue(h.app, h.keys.producer, { kind: 'anything', payload: null });
      expect(unknown.statusCode).toBe(400);
      expect(errorCode(unknown)).toBe('unknown_kind');
      expect((await enqueue(h.app, h.keys.producer, { kind: 'email', payload: null })).statusCode).toBe(202);
    });
  });

  describe('requireRegisteredKinds', () => {
    it('refuses every kind of a tenant that registered none', async () => {
      const strict = await startCoordinator({ requireRegisteredKinds: true }, { backend });
      try {
        const response = await enqueue(strict.app, strict.keys.producer, { kind: 'email', payload: {} });
        expect(response.statusCode).toBe(400);
        expect(errorCode(response)).toBe('unknown_kind');
      } finally {
        await strict.close();
      }
    });
  });
});

describe('canonicalRequestText', () => {
  it('equals canonicalJson of the whole body', () => {
    const bodies = [
      { kind: 'k', payload: { z: 1, a: [{ y: 2, b: 1 }] }, priority: 3, maxAttempts: 2 },
      { payload: 'x', kind: 'k' },
      { kind: 'k', payload: null, runAfter: '2026-01-01T00:00:00Z' },
    ];
    for (const body of bodies) expect(canonicalRequestText(body, canonicalJson(body.payload))).toBe(canonicalJson(body));
  });
});
