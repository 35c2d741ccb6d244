/**
 * POST /lease as a long poll: new work wakes a parked request at once (the
 * re-check interval is set far beyond the test so only the wake-up can
 * deliver the job), an empty wait ends in 204 without a body, a kinds filter
 * is respected, and closing the app ends parked requests. Runs on every
 * backend; test/coordinator/cross-coordinator.test.ts wakes a long poll on
 * one coordinator from another.
 */
import { performance } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { request as httpRequest } from 'node:http';
import { buildCoordinator } from '../../src/coordinator/app.js';
import { backends, bearer, drainAfterAll, enqueue, get, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { observingLeases } from '../support/observing-leases.js';

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each(backends)('HTTP contract ($name)', (backend) => {
  let h: Harness;
  /** The coordinator the long polls go to, over a store that counts empty leases. */
  let app: FastifyInstance;
  let emptyLeases = 0;
  let onEmpty: () => void = () => undefined;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({ leaseRecheckMs: 60_000 }, { backend });
    emptyLeases = 0;
    const store = observingLeases(h.store, () => {
      emptyLeases += 1;
      onEmpty();
    });
    // Every poll leases (no reuse of an empty lease), so each park shows as an empty lease.
    app = await buildCoordinator({ store, logger: false, config: { leaseRecheckMs: 60_000, reaperIntervalMs: 0, emptyLeaseReuseMs: 0 } });
  });
  afterEach(async () => {
    await app.close();
    await h.close();
  });

  function longPoll(body: Record<string, unknown>) {
    return app.inject({ method: 'POST', url: '/lease', headers: bearer(h.keys.worker), payload: { workerId: 'w', ...body } });
  }

  /**
   * Resolves once `count` leases in all have found nothing: each such poll is parked from then on, and a
   * notification after it is not lost (LeaseWaiters' generation counter).
   */
  function parked(count: number): Promise<void> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (emptyLeases >= count) resolve();
      };
      onEmpty = check;
      check();
    });
  }

  describe('long poll', () => {
    it('is woken by an enqueue well before waitMs', async () => {
      const pending = longPoll({ waitMs: 20_000 });
      await parked(1);
      // From the moment the poll is parked: what is measured is the wake-up, not the first (empty) lease.
      const started = performance.now();
      const enqueued = await enqueue(h.app, h.keys.producer, { kind: 'email', payload: { n: 1 } });
      const response = await pending;
      const elapsed = performance.now() - started;
      expect(response.statusCode).toBe(200);
      expect((response.json() as { jobs: { id: string }[] }).jobs.map((j) => j.id)).toEqual([(enqueued.json() as { id: string }).id]);
      expect(elapsed).toBeLessThan(5_000);
    });

    it('reports how long it held the request (waitedMs): 0 when jobs were there, at least the wait when woken', async () => {
      await enqueue(h.app, h.keys.producer, { kind: 'email', payload: { n: 0 } });
      const immediate = await longPoll({ waitMs: 20_000 });
      expect(immediate.json()).toMatchObject({ waitedMs: 0 });

      const started = performance.now();
      const pending = longPoll({ waitMs: 20_000 });
      // The request arrived before it parked, so it was held at least from the park to the enqueue.
      await parked(1);
      // The wait being measured is the point of this test, so time has to pass.
      await tick(150);
      await enqueue(h.app, h.keys.producer, { kind: 'email', payload: { n: 1 } });
      const woken = await pending;
      const elapsed = performance.now() - started;
      const { waitedMs } = woken.json() as { waitedMs: number };
      // 150 less a timer firing up to 1 ms early and waitedMs rounding down.
      expect(waitedMs).toBeGreaterThanOrEqual(148);
      expect(waitedMs).toBeLessThanOrEqual(elapsed);
    });

    it('wakes as many waiters as there are new jobs, each getting its own job', async () => {
      const polls = Array.from({ length: 4 }, (_, i) => longPoll({ waitMs: 20_000, workerId: `w${i}` }));
      await parked(4);
      await Promise.all(Array.from({ length: 4 }, (_, i) => enqueue(h.app, h.keys.producer, { kind: 'email', payload: i })));
      const responses = await Promise.all(polls);
      const ids = responses.map((r) => (r.json() as { jobs: { id: string }[] }).jobs[0]?.id);
      expect(responses.map((r) => r.statusCode)).toEqual([200, 200, 200, 200]);
      expect(new Set(ids).size).toBe(4);
    });

    it('answers 204 without a body when nothing arrives', async () => {
      const started = performance.now();
      const response = await longPoll({ waitMs: 200 });
      expect(response.statusCode).toBe(204);
      expect(response.body).toBe('');
      expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    });

    it('answers 204 at once when waitMs is absent', async () => {
      const response = await longPoll({});
      expect(response.statusCode).toBe(204);
    });

    it('only takes jobs of the kinds it asked for', async () => {
      const pending = longPoll({ waitMs: 1_000, kinds: ['sms'] });
      await parked(1);
      await enqueue(h.app, h.keys.producer, { kind: 'email', payload: 1 });
      expect((await pending).statusCode).toBe(204);
      const before = emptyLeases;
      const sms = longPoll({ waitMs: 20_000, kinds: ['sms'] });
      await parked(before + 1);
      await enqueue(h.app, h.keys.producer, { kind: 'sms', payload: 2 });
      const response = await sms;
      expect((response.json() as { jobs: { kind: string }[] }).jobs.map((j) => j.kind)).toEqual(['sms']);
    });

    it('ends parked requests when the app closes', async () => {
      const pending = longPoll({ waitMs: 30_000 });
      await parked(1);
      const started = performance.now();
      await app.close();
      const response = await pending;
      expect(response.statusCode).toBe(204);
      expect(performance.now() - started).toBeLessThan(5_000);
    });

    it('stops waiting when the client disconnects, so it never takes a job nobody will run', async () => {
      const address = await app.listen({ port: 0, host: '127.0.0.1' });
      const { hostname, port } = new URL(address);
      // The server's end of the connection closing is what aborts the parked request.
      const serverSideClosed = new Promise<void>((resolve) => app.server.once('connection', (socket) => socket.once('close', () => resolve())));
      const req = httpRequest({ hostname, port, method: 'POST', path: '/lease', headers: { ...bearer(h.keys.worker), 'content-type': 'application/json' } });
      req.on('error', () => undefined);
      req.end(JSON.stringify({ workerId: 'ghost', waitMs: 30_000 }));
      await parked(1);
      req.destroy();
      await serverSideClosed;
      const id = ((await enqueue(h.app, h.keys.producer, { kind: 'email', payload: 1 })).json() as { id: string }).id;
      // Had the ghost's poll taken the job, it would be running; a live poll gets it instead.
      const live = await longPoll({ waitMs: 5_000, workerId: 'live' });
      expect((live.json() as { jobs: { id: string; attempt: number }[] }).jobs.map((j) => [j.id, j.attempt])).toEqual([[id, 1]]);
      const job = (await get(h.app, h.keys.admin, `/jobs/${id}`)).json() as { status: string; attempts: number };
      expect(job).toMatchObject({ status: 'running', attempts: 1 });
    });
  });
});
