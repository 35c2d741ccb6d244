/**
 * The scenarios of docs/FAIRNESS.md §5 with real parts, on every backend: a
 * coordinator listening on a random port and the worker runtime
 * (src/worker) leasing over HTTP with 4 slots, jobs of 10 ms, every job run
 * once. Scaled down from the simulation's, with the bounds each one exists
 * for:
 *
 *   skew        a heavy group of 1,200 jobs, then a light group of 10 once the
 *               heavy ones run: the light group's first job starts within 2%
 *               of the makespan of its enqueue, its last within 10%.
 *   trickle     a heavy backlog of 400, and one light job every 40 ms: each
 *               light job starts within a tenth of the heavy backlog's time.
 *   sybil       one customer's 160 jobs over 16 groups of weight 1/16 each
 *               against an honest group's 160 of weight 1: the honest group
 *               gets about half the starts, not 1/17 of them.
 *   heavy-idle  steady (330 jobs) and returning (40) share the slots until
 *               returning drains; steady runs alone; returning comes back
 *               with 100 jobs and gets about half, not every slot until it
 *               has "caught up" (an idle group banks nothing).
 *
 * Shares are counted in the order the handlers started, so they do not
 * depend on the machine's speed; the wait bounds are fractions of the
 * scenario's own makespan.
 */

import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaseholdClient } from '../../src/client/leasehold-client.js';
import type { JobContext } from '../../src/worker/handler.js';
import { Worker } from '../../src/worker/worker.js';
import { waitFor } from '../support/wait-for.js';
import { backends, drainAfterAll, startCoordinator, type Harness } from '../support/http-fixtures.js';

const JOB_MS = 10;
const SLOTS = 4;
const KIND = 'report';

/** One handler start: the job's group (from its payload, and as its lease told the handler) and when (performance.now()). */
interface Start {
  readonly group: string;
  readonly told: string | null;
  readonly i: number;
  readonly at: number;
}

interface Deployment {
  readonly admin: LeaseholdClient;
  /** Enqueues `count` jobs of `group`, numbered from `from`; resolves at their 202 with performance.now(). */
  enqueue(group: string, from: number, count: number): Promise<number>;
  /** Enqueues these jobs in this order, in requests of 1,000. */
  enqueueAll(jobs: readonly (readonly [group: string, i: number])[]): Promise<void>;
  /** Handler starts in the order they happened. */
  readonly starts: Start[];
  finished(): number;
  lastFinish(): number;
}

/** The share of `group` among `starts`. */
function shareOf(starts: readonly Start[], group: (name: string) => boolean): number {
  return starts.filter((start) => group(start.group)).length / starts.length;
}

describe.each(backends)('the fair-share scenarios with real workers over HTTP ($name)', (backend) => {
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

  async function deploy(): Promise<Deployment> {
    h = await startCoordinator({}, { backend });
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const address = h.app.server.address();
    if (typeof address !== 'object' || address === null) throw new Error('no port');
    const client = (key: string): LeaseholdClient => new LeaseholdClient({ baseUrl: `http://127.0.0.1:${address.port}`, apiKey: key, connections: 8 });
    const producer = client(h.keys.producer);
    const starts: Start[] = [];
    let finished = 0;
    let lastFinish = 0;
    worker = new Worker({
      client: client(h.keys.worker),
      concurrency: SLOTS,
      waitMs: 1_000,
      handlers: {
        [KIND]: async (ctx: JobContext) => {
          const { group, i } = ctx.payload as { group: string; i: number };
          starts.push({ group, told: ctx.group, i, at: performance.now() });
          await new Promise((resolve) => setTimeout(resolve, JOB_MS));
          finished += 1;
          lastFinish = performance.now();
          return null;
        },
      },
    });
    running = worker.run();
    const enqueueAll = async (jobs: readonly (readonly [string, number])[]): Promise<void> => {
      // POST /jobs/batch takes at most 1,000 jobs.
      for (let from = 0; from < jobs.length; from += 1_000) {
        await producer.enqueueBatch(
          jobs.slice(from, from + 1_000).map(([group, i]) => ({ kind: KIND, payload: { group, i }, group, idempotencyKey: `${group}-${i}` })),
        );
      }
    };
    return {
      admin: client(h.keys.admin),
      async enqueue(group, from, count) {
        await enqueueAll(Array.from({ length: count }, (_, n) => [group, from + n] as const));
        return performance.now();
      },
      enqueueAll,
      starts,
      finished: () => finished,
      lastFinish: () => lastFinish,
    };
  }

  /** Enqueues `count` jobs of group heavy and waits until they fill the slots; answers when it began. */
  async function heavyRunning(d: Deployment, count: number): Promise<number> {
    const begin = performance.now();
    await d.enqueue('heavy', 0, count);
    await waitFor('the heavy group to be running', async () => d.starts.length >= SLOTS, { timeoutMs: 10_000, intervalMs: 5 });
    return begin;
  }

  async function allFinished(d: Deployment, total: number): Promise<void> {
    await waitFor('every job to finish', async () => d.finished() >= total, { timeoutMs: 50_000, intervalMs: 20 });
    expect(d.starts).toHaveLength(total);
    expect(new Set(d.starts.map((s) => `${s.group}-${s.i}`)).size).toBe(total);
    expect(d.starts.filter((s) => s.told !== s.group)).toEqual([]);
  }

  it('skew: starts the light group’s first job within 2% of the makespan of its enqueue', { timeout: 60_000 }, async () => {
    const HEAVY = 1_200;
    const LIGHT = 10;
    const d = await deploy();
    const begin = await heavyRunning(d, HEAVY);
    const lightSent = performance.now();
    await d.enqueue('light', 0, LIGHT);
    await allFinished(d, HEAVY + LIGHT);

    const makespan = d.lastFinish() - begin;
    const lightStarts = d.starts.filter((s) => s.group === 'light').map((s) => s.at);
    const firstLightWait = Math.min(...lightStarts) - lightSent;
    expect(firstLightWait, `first light job after ${firstLightWait.toFixed(1)} ms of a ${makespan.toFixed(0)} ms makespan`).toBeLessThanOrEqual(
      0.02 * makespan,
    );
    // And the light group is done long before the heavy one: it shares the slots instead of queueing behind.
    expect(Math.max(...lightStarts) - lightSent).toBeLessThan(0.1 * makespan);
  });

  it('trickle: each light job starts within a tenth of the heavy backlog’s time', { timeout: 60_000 }, async () => {
    const HEAVY = 400;
    const LIGHT = 10;
    const d = await deploy();
    const begin = await heavyRunning(d, HEAVY);
    const sent: number[] = [];
    for (let i = 0; i < LIGHT; i++) {
      sent.push(performance.now());
      await d.enqueue('light', i, 1);
      await new Promise((resolve) => setTimeout(resolve, 40));
    }
    await allFinished(d, HEAVY + LIGHT);

    const makespan = d.lastFinish() - begin;
    const waits = d.starts.filter((s) => s.group === 'light').map((s) => s.at - (sent[s.i] ?? Number.NaN));
    // In plain lease order each would wait for the heavy jobs queued before it: most of the makespan.
    expect(Math.max(...waits), `light waits ${waits.map((w) => w.toFixed(0)).join(', ')} ms of a ${makespan.toFixed(0)} ms makespan`).toBeLessThan(
      0.1 * makespan,
    );
  });

  it('sybil: a customer spread over 16 groups weighing 1/16 each gets about one share against an honest group', { timeout: 60_000 }, async () => {
    const SYBILS = 16;
    const PER_SYBIL = 10;
    const HONEST = SYBILS * PER_SYBIL;
    const d = await deploy();
    const weights = Object.fromEntries(Array.from({ length: SYBILS }, (_, g) => [`sybil-${g}`, 1 / SYBILS]));
    await d.admin.putKind(KIND, { maxAttempts: 3, groups: { weights } });
    // One request: every job is queued before the first lease, as in the simulation.
    const sybilJobs = Array.from({ length: HONEST }, (_, n) => [`sybil-${n % SYBILS}`, Math.floor(n / SYBILS)] as const);
    await d.enqueueAll([...sybilJobs, ...Array.from({ length: HONEST }, (_, i) => ['honest', i] as const)]);
    await allFinished(d, 2 * HONEST);

    // Until either customer has started its last job. The sybil groups' first jobs each start at V (one per
    // group, whatever its weight; docs/FAIRNESS.md §2), which the window includes.
    const lastOf = (sybil: boolean): number => d.starts.findLastIndex((s) => s.group.startsWith('sybil-') === sybil);
    const window = d.starts.slice(0, Math.min(lastOf(true), lastOf(false)) + 1);
    const honest = shareOf(window, (group) => group === 'honest');
    expect(window.length).toBeGreaterThan(HONEST / 2);
    expect(honest, `honest share ${(100 * honest).toFixed(1)}% of ${window.length} starts`).toBeGreaterThan(0.4);
    expect(honest).toBeLessThan(0.6);
  });

  it('heavy-idle: a group that comes back after idling gets about half, not the slots it did not use', { timeout: 60_000 }, async () => {
    const STEADY = 330;
    const FIRST = 40;
    const RETURN = 100;
    const d = await deploy();
    await d.enqueue('steady', 0, STEADY);
    await d.enqueue('returning', 0, FIRST);
    await waitFor('the returning group to drain', async () => d.starts.filter((s) => s.group === 'returning').length >= FIRST, {
      timeoutMs: 20_000,
      intervalMs: 5,
    });
    // Steady runs alone for a while: about 60 of its jobs.
    const alone = d.starts.length;
    await waitFor('steady to run alone', async () => d.starts.length >= alone + 60, { timeoutMs: 20_000, intervalMs: 5 });
    const back = d.starts.length;
    await d.enqueue('returning', FIRST, RETURN);
    await allFinished(d, STEADY + FIRST + RETURN);

    const after = d.starts.slice(back);
    const window = after.slice(0, after.findLastIndex((s) => s.group === 'returning') + 1);
    const returning = shareOf(window, (group) => group === 'returning');
    // With banked credit it would take every slot until level: a share near 100% of its first 60 starts.
    expect(returning, `returning share ${(100 * returning).toFixed(1)}% of ${window.length} starts`).toBeLessThan(0.6);
    expect(returning).toBeGreaterThan(0.4);
  });
});
