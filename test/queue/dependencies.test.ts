/**
 * Dependencies and per-key ordering in the library mode (openQueue with
 * in-process Workers), over a SQLite file and a PostgreSQL schema. A ledger of
 * handler starts and stops proves what the store promises: a child's handler
 * starts only after every parent's handler has stopped with success, a
 * parent's permanent failure makes the child dead with dependency_failed
 * without running it, and one key's jobs run one at a time in enqueue order
 * while other keys run in parallel, with two Workers of several slots each.
 */

import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaseholdError, openQueue, PermanentJobError, Worker, type Queue } from '../../src/index.js';
import { queueTargets } from '../support/queue-targets.js';

const targets = queueTargets('queue-deps');

type Kinds = { step: { name: string; fail?: boolean }; keyed: { key: string; n: number } };

interface Entry {
  readonly name: string;
  readonly at: number;
  readonly edge: 'start' | 'stop';
}

describe.each(targets)('openQueue dependencies and per-key ordering ($name)', (target) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  async function open(db?: string): Promise<{ queue: Queue<Kinds>; db: string }> {
    const created = db === undefined ? target.create() : { db, cleanup: async () => undefined };
    cleanups.push(created.cleanup);
    const queue = await openQueue<Kinds>({ db: created.db });
    cleanups.push(() => queue.close());
    return { queue, db: created.db };
  }

  /** Workers over `queue` whose handlers write the ledger; stopped at cleanup. */
  function workers(queue: Queue<Kinds>, count: number, ledger: Entry[], workMs: number): void {
    let clock = 0;
    // A logical clock, so that two entries of one millisecond still order.
    const note = (name: string, edge: Entry['edge']): void => void ledger.push({ name, at: clock++, edge });
    for (let i = 0; i < count; i++) {
      const worker = new Worker({
        queue,
        concurrency: 4,
        waitMs: 1_000,
        handlers: {
          step: async (ctx) => {
            note(ctx.payload.name, 'start');
            await new Promise((resolve) => setTimeout(resolve, workMs));
            note(ctx.payload.name, 'stop');
            if (ctx.payload.fail === true) throw new PermanentJobError(`${ctx.payload.name} fails`);
            return null;
          },
          keyed: async (ctx) => {
            const name = `${ctx.payload.key}:${ctx.payload.n}`;
            note(name, 'start');
            await new Promise((resolve) => setTimeout(resolve, workMs));
            note(name, 'stop');
            return null;
          },
        },
      });
      const run = worker.run();
      cleanups.push(async () => {
        await worker.stop({ graceMs: 0 });
        await run;
      });
    }
  }

  const at = (ledger: readonly Entry[], name: string, edge: Entry['edge']): number => ledger.find((e) => e.name === name && e.edge === edge)?.at ?? Number.NaN;

  it('starts a child only after all its parents succeeded, and never when one fails', async () => {
    const { queue } = await open();
    const ledger: Entry[] = [];
    const a = await queue.enqueue({ kind: 'step', payload: { name: 'a' }, idempotencyKey: 'a' });
    const b = await queue.enqueue({ kind: 'step', payload: { name: 'b' }, idempotencyKey: 'b' });
    const bad = await queue.enqueue({ kind: 'step', payload: { name: 'bad', fail: true }, idempotencyKey: 'bad' });
    const child = await queue.enqueue({ kind: 'step', payload: { name: 'child' }, idempotencyKey: 'child', dependsOn: [a.id, b.id] });
    const doomed = await queue.enqueue({ kind: 'step', payload: { name: 'doomed' }, idempotencyKey: 'doomed', dependsOn: [a.id, bad.id] });
    expect([child.status, doomed.status]).toEqual(['waiting', 'waiting']);
    workers(queue, 2, ledger, 15);
    expect((await queue.waitFor(child.id, { timeoutMs: 20_000 })).status).toBe('succeeded');
    expect(await queue.waitFor(doomed.id, { timeoutMs: 20_000 })).toMatchObject({ status: 'dead', lastError: { code: 'dependency_failed' } });
    expect(at(ledger, 'child', 'start')).toBeGreaterThan(Math.max(at(ledger, 'a', 'stop'), at(ledger, 'b', 'stop')));
    expect(ledger.some((e) => e.name === 'doomed')).toBe(false);
    expect((await queue.get(a.id)).children).toEqual([child.id, doomed.id]);
    // An unknown parent is refused before anything is stored.
    const refused = await queue
      .enqueue({ kind: 'step', payload: { name: 'x' }, idempotencyKey: 'x', dependsOn: ['00000000-0000-4000-8000-000000000000'] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LeaseholdError);
    expect(refused).toMatchObject({ code: 'invalid_request' });
  });

  it('runs one key\u2019s jobs one at a time in enqueue order while other keys run in parallel', async () => {
    const { queue } = await open();
    const ledger: Entry[] = [];
    const keys = ['k0', 'k1', 'k2', 'k3'];
    const perKey = 5;
    const jobs = keys.flatMap((key) =>
      Array.from({ length: perKey }, (_, n) => ({ kind: 'keyed' as const, payload: { key, n }, idempotencyKey: `${key}-${n}`, concurrencyKey: key })),
    );
    // Interleaved keys, one batch: each key's jobs in the order n = 0, 1, …
    const answers = await queue.enqueueMany([...jobs].sort((x, y) => x.payload.n - y.payload.n));
    expect(answers.every((answer) => answer.status === 202)).toBe(true);
    workers(queue, 2, ledger, 10);
    for (const answer of answers) expect((await queue.waitFor(answer.job?.id ?? '', { timeoutMs: 30_000 })).status).toBe('succeeded');
    let running = 0;
    let most = 0;
    const live = new Map<string, number>();
    for (const entry of ledger) {
      const key = entry.name.split(':')[0] ?? '';
      const now = (live.get(key) ?? 0) + (entry.edge === 'start' ? 1 : -1);
      live.set(key, now);
      expect(now, `${entry.name} ${entry.edge}`).toBeLessThanOrEqual(1);
      running += entry.edge === 'start' ? 1 : -1;
      most = Math.max(most, running);
    }
    for (const key of keys) {
      const starts = ledger.filter((e) => e.edge === 'start' && e.name.startsWith(`${key}:`)).map((e) => Number(e.name.split(':')[1]));
      expect(starts).toEqual(Array.from({ length: perKey }, (_, n) => n));
    }
    expect(most).toBeGreaterThan(1);
  });

  it.runIf(target.name === 'sqlite')('takes dependsOn and concurrencyKey in enqueueInTransaction', async () => {
    const { queue, db: path } = await open();
    const parent = await queue.enqueue({ kind: 'step', payload: { name: 'p' }, idempotencyKey: 'p' });
    const db = new Database(path);
    cleanups.push(async () => void db.close());
    const child = db.transaction(() =>
      queue.enqueueInTransaction(db, { kind: 'keyed', payload: { key: 'k', n: 0 }, idempotencyKey: 'tx-child', dependsOn: [parent.id], concurrencyKey: 'k' }),
    )();
    expect(child).toMatchObject({ status: 'waiting', dependsOn: [parent.id], concurrencyKey: 'k' });
  });
});
