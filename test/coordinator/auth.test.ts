/**
 * Identity at the HTTP boundary: 401 for missing, malformed, unknown and
 * revoked keys; 403 for a role that may not call a route; 404 — never 403 —
 * for another tenant's or another user's job. Runs on every backend.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hashApiKey, newApiKey } from '../../src/core/ids.js';
import { backends, bearer, drainAfterAll, enqueue, errorCode, get, lease, post, startCoordinator, waitFor, type Harness } from '../support/http-fixtures.js';

describe.each(backends)('HTTP contract ($name)', (backend) => {
  let h: Harness;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({ authCacheMs: 0 }, { backend });
  });
  afterEach(async () => {
    await h.close();
  });

  async function enqueueAsProducer(): Promise<string> {
    const response = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: { to: 'a@example.com' } });
    expect(response.statusCode).toBe(202);
    return (response.json() as { id: string }).id;
  }

  describe('authentication', () => {
    it('answers 401 unauthorized without a key, with a malformed header, an unknown key or a revoked key', async () => {
      const id = await enqueueAsProducer();
      const revokedKey = newApiKey();
      await h.store.apiKeyInsert({ id: 'revoked-key', tenant: 't1', user: 'alice', role: 'producer', keyHash: hashApiKey(revokedKey) });
      expect(await h.store.apiKeyRevoke({ id: 'revoked-key' })).toBe(true);

      const headers: Record<string, string>[] = [
        {},
        { authorization: h.keys.producer },
        { authorization: `Basic ${h.keys.producer}` },
        { authorization: 'Bearer ' },
        bearer(newApiKey()),
        bearer(revokedKey),
      ];
      for (const header of headers) {
        const response = await h.app.inject({ method: 'GET', url: `/jobs/${id}`, headers: header });
        expect(response.statusCode).toBe(401);
        expect(errorCode(response)).toBe('unauthorized');
      }
    });

    it('needs no key for /healthz and /openapi.json', async () => {
      expect((await h.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      expect((await h.app.inject({ method: 'GET', url: '/openapi.json' })).statusCode).toBe(200);
    });

    it('accepts the scheme name in any case', async () => {
      const id = await enqueueAsProducer();
      const response = await h.app.inject({ method: 'GET', url: `/jobs/${id}`, headers: { authorization: `bearer ${h.keys.producer}` } });
      expect(response.statusCode).toBe(200);
    });
  });

  describe('key cache', () => {
    it('stops accepting a revoked key within authCacheMs', async () => {
      const cached = await startCoordinator({ authCacheMs: 100 }, { backend });
      try {
        const key = newApiKey();
        await cached.store.apiKeyInsert({ id: 'soon-revoked', tenant: 't1', user: 'carol', role: 'admin', keyHash: hashApiKey(key) });
        expect((await get(cached.app, key, '/stats')).statusCode).toBe(200);
        await cached.store.apiKeyRevoke({ id: 'soon-revoked' });
        await waitFor(async () => (await get(cached.app, key, '/stats')).statusCode === 401, 2_000);
      } finally {
        await cached.close();
      }
    });
  });

  describe('roles', () => {
    it('answers 403 forbidden when a role calls a route it may not', async () => {
      const id = await enqueueAsProducer();
      const cases: [string, 'GET' | 'POST', string, unknown][] = [
        [h.keys.worker, 'POST', '/jobs', { kind: 'email', payload: {} }],
        [h.keys.worker, 'GET', `/jobs/${id}`, undefined],
        [h.keys.worker, 'GET', '/jobs', undefined],
        [h.keys.producer, 'POST', '/lease', { workerId: 'w' }],
        [h.keys.producer, 'POST', `/jobs/${id}/complete`, { token: 'x' }],
        [h.keys.producer, 'POST', `/jobs/${id}/fail`, { token: 'x', error: { code: 'e' } }],
        [h.keys.producer, 'POST', `/jobs/${id}/renew`, { token: 'x' }],
        [h.keys.producer, 'POST', '/complete', { completions: [{ id, token: 'x' }] }],
        [h.keys.producer, 'POST', `/jobs/${id}/requeue`, {}],
        [h.keys.worker, 'POST', `/jobs/${id}/requeue`, {}],
        [h.keys.producer, 'GET', '/stats', undefined],
        [h.keys.worker, 'GET', '/stats', undefined],
      ];
      for (const [key, method, url, payload] of cases) {
        const response = await h.app.inject({
          method,
          url,
          headers: { ...bearer(key), 'idempotency-key': 'k' },
          ...(payload === undefined ? {} : { payload: payload as object }),
        });
        expect({ method, url, status: response.statusCode }).toEqual({ method, url, status: 403 });
        expect(errorCode(response)).toBe('forbidden');
      }
    });

    it('lets an admin read every job of its tenant and see stats', async () => {
      const id = await enqueueAsProducer();
      expect((await get(h.app, h.keys.admin, `/jobs/${id}`)).statusCode).toBe(200);
      const stats = await get(h.app, h.keys.admin, '/stats');
      expect(stats.statusCode).toBe(200);
      expect((stats.json() as { counts: Record<string, number> }).counts['queued']).toBe(1);
    });
  });

  describe('scoping', () => {
    it("answers 404 for another user's and another tenant's job, exactly as for a missing id", async () => {
      const id = await enqueueAsProducer();
      const missing = await get(h.app, h.keys.producer, '/jobs/01900000-0000-7000-8000-000000000000');
      expect(missing.statusCode).toBe(404);
      for (const key of [h.keys.producer2, h.keys.otherProducer, h.keys.otherAdmin]) {
        const response = await get(h.app, key, `/jobs/${id}`);
        expect(response.statusCode).toBe(404);
        expect(response.json()).toEqual(missing.json());
      }
    });

    it("lists only the producer's own jobs, and the whole tenant for an admin", async () => {
      await enqueueAsProducer();
      await enqueue(h.app, h.keys.producer2, { kind: 'email', payload: { n: 2 } });
      await enqueue(h.app, h.keys.otherProducer, { kind: 'email', payload: { n: 3 } });
      const own = (await get(h.app, h.keys.producer, '/jobs')).json() as { jobs: unknown[] };
      const tenant = (await get(h.app, h.keys.admin, '/jobs')).json() as { jobs: unknown[] };
      expect(own.jobs).toHaveLength(1);
      expect(tenant.jobs).toHaveLength(2);
    });

    it("does not let another tenant's worker lease, complete, fail or requeue a job", async () => {
      const id = await enqueueAsProducer();
      expect(await lease(h.app, h.keys.otherWorker, { max: 10 })).toEqual([]);
      const [leased] = await lease(h.app, h.keys.worker);
      expect(leased?.id).toBe(id);
      const token = leased?.token ?? '';
      const complete = await post(h.app, h.keys.otherWorker, `/jobs/${id}/complete`, { token });
      expect(complete.statusCode).toBe(404);
      const fail = await post(h.app, h.keys.otherWorker, `/jobs/${id}/fail`, { token, error: { code: 'x' } });
      expect(fail.statusCode).toBe(404);
      const renew = await post(h.app, h.keys.otherWorker, `/jobs/${id}/renew`, { token });
      expect(renew.statusCode).toBe(404);
      const requeue = await post(h.app, h.keys.otherAdmin, `/jobs/${id}/requeue`, {});
      expect(requeue.statusCode).toBe(404);
      // The job is untouched and still completes under its own tenant.
      expect((await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token })).statusCode).toBe(200);
    });
  });
});
