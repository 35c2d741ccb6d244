/**
 * Per-kind limits and pause in the library mode (openQueue with an in-process
 * Worker), over a SQLite file and a PostgreSQL schema: putKind's
 * maxConcurrent holds the Worker's handlers to the limit whatever its
 * concurrency, pauseKind stops a kind while another runs (its enqueues still
 * succeed), and resumeKind lets the Worker's parked poll take the jobs at once.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { LeaseholdError, openQueue, Worker, type Queue } from '../../src/index.js';
import { queueTargets } from '../support/queue-targets.js';

const targets = queueTargets('queue-flow');

type Kinds = { limited: { n: number }; free: { n: number } };

describe.each(targets)('openQueue flow control ($name)', (target) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  async function open(): Promise<Queue<Kinds>> {
    const created = target.create();
    cleanups.push(created.cleanup);
    const queue = await openQueue<Kinds>({ db: created.db });
    cleanups.push(() => queue.close());
    return queue;
  }

  async function untilAll(queue: Queue<Kinds>, ids: readonly string[], status: string): Promise<void> {
    for (const id of ids) expect((await queue.waitFor(id, { timeoutMs: 20_000 })).status).toBe(status);
  }

  it('holds a Worker of concurrency 6 to maxConcurrent 2', async () => {
    const queue = await open();
    expect((await queue.putKind('limited', { maxConcurrent: 2 })).maxConcurrent).toBe(2);
    let running = 0;
    let most = 0;
    const worker = new Worker({
      queue,
      concurrency: 6,
      waitMs: 1_000,
      handlers: {
        limited: async () => {
          most = Math.max(most, ++running);
          await new Promise((resolve) => setTimeout(resolve, 20));
          running--;
          return null;
        },
        free: () => null,
      },
    });
    const run = worker.run();
    try {
      const answers = await queue.enqueueMany(Array.from({ length: 16 }, (_, n) => ({ kind: 'limited' as const, payload: { n }, idempotencyKey: `l${n}` })));
      await untilAll(
        queue,
        answers.map((a) => a.job?.id ?? ''),
        'succeeded',
      );
      expect(most).toBe(2);
    } finally {
      await worker.stop({ graceMs: 0 });
      await run;
    }
  });

  it('never runs a paused kind while another runs, and resumeKind wakes the Worker at once', async () => {
    const queue = await open();
    await queue.putKind('limited', {});
    await queue.putKind('free', {});
    expect((await queue.pauseKind('limited')).paused).toBe(true);
    const ran: string[] = [];
    const worker = new Worker({
      queue,
      concurrency: 2,
      waitMs: 30_000,
      handlers: {
        limited: (ctx) => {
          ran.push(`limited-${ctx.payload.n}`);
          return null;
        },
        free: (ctx) => {
          ran.push(`free-${ctx.payload.n}`);
          return null;
        },
      },
    });
    const run = worker.run();
    try {
      const held = await queue.enqueue({ kind: 'limited', payload: { n: 1 }, idempotencyKey: 'held' });
      const free = await queue.enqueue({ kind: 'free', payload: { n: 1 }, idempotencyKey: 'free' });
      await untilAll(queue, [free.id], 'succeeded');
      expect(ran).toEqual(['free-1']);
      expect((await queue.waitFor(held.id, { timeoutMs: 200 })).status).toBe('queued');
      const resumedAt = Date.now();
      expect((await queue.resumeKind('limited')).paused).toBe(false);
      await untilAll(queue, [held.id], 'succeeded');
      // The Worker's poll waits up to 30 s: only the resume's wake-up can deliver this soon.
      expect(Date.now() - resumedAt).toBeLessThan(5_000);
      expect(ran).toEqual(['free-1', 'limited-1']);
    } finally {
      await worker.stop({ graceMs: 0 });
      await run;
    }
    const unknown = await queue.pauseKind('nope' as 'limited').catch((error: unknown) => error);
    expect(unknown).toBeInstanceOf(LeaseholdError);
    expect(unknown).toMatchObject({ code: 'not_found' });
  });
});
