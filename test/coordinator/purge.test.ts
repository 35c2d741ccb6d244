/**
 * Retention through the coordinator: POST /jobs/purge (admin only; deletes the
 * tenant's finished jobs older than olderThanMs in bounded requests that say
 * `more`; a dry run counts; unknown jobs and other tenants stay; an
 * idempotency key is free again after its job is purged), a kind's
 * `retention` on PUT /kinds, and the coordinator's own periodic retention run.
 * Runs on every backend through app.inject().
 */

import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { CoordinatorConfigInput } from '../../src/engine/config.js';
import { backends, bearer, drainAfterAll, enqueue, get, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { waitFor } from '../support/wait-for.js';

interface PurgeAnswer {
  deleted: number;
  matched?: number;
  more: boolean;
}

describe.each(backends)('POST /jobs/purge and retention ($name)', (backend) => {
  let h: Harness | undefined;
  drainAfterAll(backend);
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  async function start(config: CoordinatorConfigInput = {}): Promise<Harness> {
    h = await startCoordinator({ reaperIntervalMs: 0, retentionIntervalMs: 0, ...config }, { backend });
    return h;
  }

  function purge(app: FastifyInstance, key: string, body: Record<string, unknown>) {
    return app.inject({ method: 'POST', url: '/jobs/purge', headers: bearer(key), payload: body });
  }

  /** Enqueues `count` jobs of `kind` through the API and completes them; answers their ids. */
  async function succeeded(harness: Harness, kind: string, count: number, producer = harness.keys.producer, worker = harness.keys.worker): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) ids.push(((await enqueue(harness.app, producer, { kind, payload: { i } })).json() as { id: string }).id);
    const leased = await harness.app.inject({ method: 'POST', url: '/lease', headers: bearer(worker), payload: { workerId: 'w', kinds: [kind], max: 100 } });
    for (const job of (leased.json() as { jobs: { id: string; token: string }[] }).jobs) {
      const done = await harness.app.inject({ method: 'POST', url: `/jobs/${job.id}/complete`, headers: bearer(worker), payload: { token: job.token } });
      expect(done.statusCode).toBe(200);
    }
    return ids;
  }

  it('deletes finished jobs by hand in bounded requests, counts on a dry run, and spares other tenants and unfinished jobs', async () => {
    const harness = await start({ retentionBatchSize: 2 });
    const ids = await succeeded(harness, 'report', 25);
    const others = await succeeded(harness, 'report', 3, harness.keys.otherProducer, harness.keys.otherWorker);
    const waiting = (await enqueue(harness.app, harness.keys.producer, { kind: 'report', payload: {} })).json() as { id: string };

    expect((await purge(harness.app, harness.keys.worker, { olderThanMs: 0 })).statusCode).toBe(403);
    expect((await purge(harness.app, harness.keys.admin, { olderThanMs: -1 })).statusCode).toBe(400);
    expect((await purge(harness.app, harness.keys.admin, { olderThanMs: 0, statuses: ['unknown'] })).statusCode).toBe(400);

    const dry = await purge(harness.app, harness.keys.admin, { olderThanMs: 0, dryRun: true });
    expect(dry.json()).toEqual({ deleted: 0, matched: 25, more: false });
    expect((await purge(harness.app, harness.keys.admin, { olderThanMs: 3_600_000 })).json()).toEqual({ deleted: 0, more: false });

    // Ten batches of two per request: 20, then the last 5.
    const first = (await purge(harness.app, harness.keys.admin, { olderThanMs: 0, statuses: ['succeeded'], kind: 'report' })).json() as PurgeAnswer;
    expect(first).toEqual({ deleted: 20, more: true });
    const second = (await purge(harness.app, harness.keys.admin, { olderThanMs: 0 })).json() as PurgeAnswer;
    expect(second).toEqual({ deleted: 5, more: false });

    for (const id of ids.slice(0, 3)) expect((await get(harness.app, harness.keys.admin, `/jobs/${id}`)).statusCode).toBe(404);
    for (const id of others) expect((await get(harness.app, harness.keys.otherAdmin, `/jobs/${id}`)).statusCode).toBe(200);
    expect((await get(harness.app, harness.keys.admin, `/jobs/${waiting.id}`)).statusCode).toBe(200);
  });

  it('lets an idempotency key be used again for a new job once its job is purged', async () => {
    const harness = await start();
    const key = 'nightly-report-2026-12-01';
    const first = await enqueue(harness.app, harness.keys.producer, { kind: 'nightly', payload: { v: 1 } }, key);
    const leased = await harness.app.inject({ method: 'POST', url: '/lease', headers: bearer(harness.keys.worker), payload: { workerId: 'w' } });
    const job = (leased.json() as { jobs: { id: string; token: string }[] }).jobs[0];
    await harness.app.inject({ method: 'POST', url: `/jobs/${job?.id ?? ''}/complete`, headers: bearer(harness.keys.worker), payload: { token: job?.token } });
    // Reserved while the job exists: another body under the same key is refused.
    expect((await enqueue(harness.app, harness.keys.producer, { kind: 'nightly', payload: { v: 2 } }, key)).statusCode).toBe(409);
    expect(((await purge(harness.app, harness.keys.admin, { olderThanMs: 0 })).json() as PurgeAnswer).deleted).toBe(1);
    const again = await enqueue(harness.app, harness.keys.producer, { kind: 'nightly', payload: { v: 2 } }, key);
    expect(again.statusCode).toBe(202);
    expect((again.json() as { id: string }).id).not.toBe((first.json() as { id: string }).id);
  });

  it("deletes on its own timer the finished jobs past their kind's retention, and shows the periods in effect", async () => {
    const harness = await start({ retentionIntervalMs: 20 });
    const put = await harness.app.inject({
      method: 'PUT',
      url: '/kinds/ephemeral',
      headers: bearer(harness.keys.admin),
      payload: { retention: { succeededMs: 1 } },
    });
    expect(put.statusCode).toBe(200);
    expect((put.json() as { retention: unknown }).retention).toEqual({ succeededMs: 1, cancelledMs: 7 * 86_400_000, deadMs: 30 * 86_400_000 });
    // A tenant that registers kinds enqueues only registered ones; this one keeps the defaults.
    expect((await harness.app.inject({ method: 'PUT', url: '/kinds/durable', headers: bearer(harness.keys.admin), payload: {} })).statusCode).toBe(200);
    const [gone] = await succeeded(harness, 'ephemeral', 1);
    const [kept] = await succeeded(harness, 'durable', 1);
    await waitFor('the ephemeral job to be deleted', async () => (await get(harness.app, harness.keys.admin, `/jobs/${gone ?? ''}`)).statusCode === 404);
    expect((await get(harness.app, harness.keys.admin, `/jobs/${kept ?? ''}`)).statusCode).toBe(200);
  });
});
