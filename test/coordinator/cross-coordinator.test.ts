/**
 * Two coordinators over one database, as on two hosts: a long poll parked on
 * coordinator A wakes at once when work becomes available through
 * coordinator B — an enqueue, or a retry that is due at once. The re-check
 * interval is set far beyond waitMs, so only the store's cross-process
 * wake-up can deliver the job: LISTEN/NOTIFY on PostgreSQL, PRAGMA
 * data_version polling on SQLite (two connections to one file). Runs on
 * every backend.
 */

import { performance } from 'node:perf_hooks';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildCoordinator } from '../../src/coordinator/app.js';
import { backends, bearer, drainAfterAll, enqueue, lease, post, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { listenersUp } from '../support/pg-listeners.js';
import { observingLeases } from '../support/observing-leases.js';

const WAIT_MS = 30_000;
/** "At once": far below WAIT_MS, with room for a loaded two-core machine. */
const PROMPT_MS = 5_000;

describe.each(backends)('HTTP contract ($name)', (backend) => {
  let h: Harness;
  let a: FastifyInstance;
  let b: FastifyInstance;
  let emptyLeases: (() => void)[] = [];
  drainAfterAll(backend);

  beforeEach(async () => {
    // Every poll leases (no reuse of an empty lease), so each park shows as an empty lease.
    const config = { leaseRecheckMs: 60_000, reaperIntervalMs: 0, emptyLeaseReuseMs: 0 };
    h = await startCoordinator(config, { backend });
    // A is built here over the harness's store, watched so the test knows when A's poll has parked.
    a = await buildCoordinator({ store: observingLeases(h.store, () => emptyLeases.shift()?.()), logger: false, config });
    b = await h.openPeer();
    if (h.backend === 'postgres') await listenersUp(2);
  });
  afterEach(async () => {
    emptyLeases = [];
    await a.close();
    await h.close();
  });

  function longPollOn(app: FastifyInstance, workerId: string): Promise<LightMyRequestResponse> {
    return app.inject({ method: 'POST', url: '/lease', headers: bearer(h.keys.worker), payload: { workerId, waitMs: WAIT_MS } });
  }

  /**
   * Starts a long poll on A and resolves once its first lease attempt found
   * nothing: from then on only a wake-up can deliver a job before WAIT_MS
   * (the re-check interval is longer). A notification arriving between that
   * attempt and the wait is not lost (LeaseWaiters' generation counter).
   */
  async function parkedPollOnA(): Promise<{ readonly answer: Promise<LightMyRequestResponse> }> {
    const empty = new Promise<void>((resolve) => emptyLeases.push(resolve));
    const answer = longPollOn(a, 'on-a');
    await empty;
    // Wrapped: an async function returning the bare promise would wait for the poll to end.
    return { answer };
  }

  describe('two coordinators over one database', () => {
    it('wakes a long poll on coordinator A at once when a job is enqueued through coordinator B', async () => {
      const { answer: poll } = await parkedPollOnA();
      const started = performance.now();
      const enqueued = await enqueue(b, h.keys.producer, { kind: 'email', payload: { via: 'b' } });
      expect(enqueued.statusCode).toBe(202);
      const response = await poll;
      const elapsed = performance.now() - started;
      expect(response.statusCode).toBe(200);
      expect((response.json() as { jobs: { id: string }[] }).jobs.map((j) => j.id)).toEqual([(enqueued.json() as { id: string }).id]);
      expect(elapsed).toBeLessThan(PROMPT_MS);
    });

    it('wakes a long poll on coordinator A at once when coordinator B schedules a retry that is due now', async () => {
      await b.inject({ method: 'PUT', url: '/kinds/flaky', headers: bearer(h.keys.admin), payload: { backoff: { baseMs: 1, maxMs: 1 } } });
      const id = ((await enqueue(b, h.keys.producer, { kind: 'flaky', payload: {} })).json() as { id: string }).id;
      const [first] = await lease(b, h.keys.worker, { workerId: 'on-b' });
      expect(first?.id).toBe(id);

      const { answer: poll } = await parkedPollOnA();
      const started = performance.now();
      const failed = await post(b, h.keys.worker, `/jobs/${id}/fail`, { token: first?.token, error: { code: 'flaky' } });
      expect(failed.json()).toMatchObject({ status: 'queued' });
      const response = await poll;
      expect(performance.now() - started).toBeLessThan(PROMPT_MS);
      expect(response.statusCode).toBe(200);
      expect((response.json() as { jobs: { id: string; attempt: number }[] }).jobs).toMatchObject([{ id, attempt: 2 }]);
    });
  });
});
