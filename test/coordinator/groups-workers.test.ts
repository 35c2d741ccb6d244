/**
 * The skew scenario of docs/FAIRNESS.md §5 with real parts, on every backend:
 * a coordinator listening on a random port, the worker runtime (src/worker)
 * leasing over HTTP with 4 slots, a heavy group of 800 jobs of 10 ms each,
 * then a light group of 10 jobs enqueued once the heavy ones are running.
 * The light group's first job starts within 2% of the makespan of its
 * enqueue (in plain lease order it would wait for the whole heavy backlog),
 * and every job runs once.
 */

import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaseholdClient } from '../../src/client/leasehold-client.js';
import type { JobContext } from '../../src/worker/handler.js';
import { Worker } from '../../src/worker/worker.js';
import { waitFor } from '../support/wait-for.js';
import { backends, drainAfterAll, startCoordinator, type Harness } from '../support/http-fixtures.js';

const HEAVY = 800;
const LIGHT = 10;
const JOB_MS = 10;
const SLOTS = 4;

describe.each(backends)('the skew scenario with real workers over HTTP ($name)', (backend) => {
  let h: Harness | undefined;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  drainAfterAll(backend);

  afterEach(async () => {
    await worker?.stop({ graceMs: 0 });
    await running?.catch(() => undefined);
    await h?.close();
    h = undefined;
    worker = undefined;
  });

  it('starts the light group’s first job within 2% of the makespan of its enqueue', { timeout: 60_000 }, async () => {
    h = await startCoordinator({}, { backend });
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const address = h.app.server.address();
    if (typeof address !== 'object' || address === null) throw new Error('no port');
    const client = (key: string): LeaseholdClient => new LeaseholdClient({ baseUrl: `http://127.0.0.1:${address.port}`, apiKey: key, connections: 8 });
    const producer = client(h.keys.producer);

    const started = new Map<string, number>();
    let finished = 0;
    let lastFinish = 0;
    worker = new Worker({
      client: client(h.keys.worker),
      concurrency: SLOTS,
      waitMs: 1_000,
      handlers: {
        report: async (ctx: JobContext) => {
          const { group, i } = ctx.payload as { group: string; i: number };
          started.set(`${group}-${i}`, performance.now());
          await new Promise((resolve) => setTimeout(resolve, JOB_MS));
          finished += 1;
          lastFinish = performance.now();
          return null;
        },
      },
    });
    running = worker.run();

    const begin = performance.now();
    const batch = (group: string, from: number, count: number) =>
      producer.enqueueBatch(
        Array.from({ length: count }, (_, n) => ({ kind: 'report', payload: { group, i: from + n }, group, idempotencyKey: `${group}-${from + n}` })),
      );
    await batch('heavy', 0, HEAVY);
    await waitFor('the heavy group to be running', async () => started.size >= SLOTS, { timeoutMs: 10_000, intervalMs: 5 });
    const lightEnqueued = performance.now();
    await batch('light', 0, LIGHT);
    await waitFor('every job to finish', async () => finished >= HEAVY + LIGHT, { timeoutMs: 50_000, intervalMs: 20 });

    const makespan = lastFinish - begin;
    const lightStarts = [...started].filter(([key]) => key.startsWith('light-')).map(([, at]) => at);
    expect(lightStarts).toHaveLength(LIGHT);
    const firstLightWait = Math.min(...lightStarts) - lightEnqueued;
    expect(firstLightWait, `first light job after ${firstLightWait.toFixed(1)} ms of a ${makespan.toFixed(0)} ms makespan`).toBeLessThanOrEqual(
      0.02 * makespan,
    );
    // And the light group is done long before the heavy one: it shares the slots instead of queueing behind.
    expect(Math.max(...lightStarts) - lightEnqueued).toBeLessThan(0.1 * makespan);
    expect(started.size).toBe(HEAVY + LIGHT);
  });
});
