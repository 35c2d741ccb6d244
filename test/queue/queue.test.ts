/**
 * The library mode: openQueue over a SQLite file and over a PostgreSQL
 * schema, its calls answering as the HTTP API does (the same rules and error
 * codes, thrown as LeaseholdError), a Worker leasing in process, waitFor woken
 * by the store, and owners seeing only their own jobs.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { LeaseholdError, openQueue, Queue, Worker, type KindPayloads } from '../../src/index.js';
import { queueTargets } from '../support/queue-targets.js';

const targets = queueTargets('queue');

type Kinds = { email: { to: string }; report: { pages: number } };

describe.each(targets)('openQueue ($name)', (target) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  async function open<K extends KindPayloads = Kinds>(db: string, owner?: string): Promise<Queue<K>> {
    const queue = await openQueue<K>({ db, ...(owner === undefined ? {} : { owner }) });
    cleanups.push(() => queue.close());
    return queue;
  }

  function database(): string {
    const created = target.create();
    cleanups.unshift(created.cleanup);
    return created.db;
  }

  it('enqueues idempotently and refuses with the HTTP API’s codes, as LeaseholdError', async () => {
    const queue = await open(database());
    const job = await queue.enqueue({ kind: 'email', payload: { to: 'a@example.com' }, idempotencyKey: 'k1' });
    expect(job).toMatchObject({ kind: 'email', status: 'queued', attempts: 0 });
    const again = await queue.enqueue({ kind: 'email', payload: { to: 'a@example.com' }, idempotencyKey: 'k1' });
    expect(again.id).toBe(job.id);
    const conflict = await queue.enqueue({ kind: 'email', payload: { to: 'b@example.com' }, idempotencyKey: 'k1' }).catch((error: unknown) => error);
    expect(conflict).toBeInstanceOf(LeaseholdError);
    expect(conflict).toMatchObject({ code: 'idempotency_conflict', status: 409 });

    await queue.putKind('report', { payloadSchema: { type: 'object', properties: { pages: { type: 'integer', minimum: 1 } }, required: ['pages'] } });
    const invalid = await queue.enqueue({ kind: 'report', payload: { pages: 0 }, idempotencyKey: 'r0' }).catch((error: unknown) => error);
    expect(invalid).toMatchObject({ code: 'invalid_payload' });
    // With a kind registered, unregistered kinds are refused, as over HTTP.
    const unknown = await queue.enqueue({ kind: 'email', payload: { to: 'c@example.com' }, idempotencyKey: 'k2' }).catch((error: unknown) => error);
    expect(unknown).toMatchObject({ code: 'unknown_kind' });
    expect((await queue.get(job.id)).id).toBe(job.id);
    expect(await queue.get('00000000-0000-7000-8000-000000000000').catch((error: unknown) => error)).toMatchObject({ code: 'not_found' });
  });

  it('runs jobs with a Worker in process, each handler told its job’s group; waitFor wakes on the job finishing; the result, attempts and stats match', async () => {
    const queue = await open(database());
    const [first, second] = await queue.enqueueMany([
      { kind: 'report', payload: { pages: 3 }, idempotencyKey: 'r1', group: 'acme' },
      { kind: 'email', payload: { to: 'x@example.com' }, idempotencyKey: 'e1' },
    ]);
    const emailGroups: (string | null)[] = [];
    const worker = new Worker({
      queue,
      concurrency: 2,
      waitMs: 1_000,
      handlers: {
        report: (ctx) => ({ pages: ctx.payload.pages, printed: true, group: ctx.group }),
        email: (ctx) => {
          emailGroups.push(ctx.group);
          if (ctx.payload.to.startsWith('x')) throw Object.assign(new Error('no such mailbox'), { code: 'mailbox_missing', retryable: false });
          return null;
        },
      },
    });
    const running = worker.run();
    try {
      const report = await queue.waitFor(first?.job?.id ?? '', { timeoutMs: 20_000 });
      expect(report.status).toBe('succeeded');
      const result = await queue.result(report.id);
      expect(JSON.parse(result.body.toString('utf8'))).toEqual({ pages: 3, printed: true, group: 'acme' });
      expect(report.group).toBe('acme');
      const email = await queue.waitFor(second?.job?.id ?? '', { timeoutMs: 20_000 });
      expect(email).toMatchObject({ status: 'dead', lastError: { code: 'mailbox_missing' } });
      expect(await queue.attempts(email.id)).toHaveLength(1);
      expect(emailGroups).toEqual([null]);
      const requeued = await queue.requeue(email.id);
      expect(requeued.status).toBe('queued');
      const stats = await queue.stats();
      expect(stats.counts.succeeded).toBe(1);
    } finally {
      await worker.stop({ graceMs: 0 });
      await running;
    }
    expect(await queue.reconcile(first?.job?.id ?? '', 'dead').catch((error: unknown) => error)).toMatchObject({ code: 'not_unknown' });
  });

  it('shows an owner only its own jobs: another owner’s job is not found', async () => {
    const db = database();
    const alice = await open(db, 'alice');
    const bob = await open(db, 'bob');
    const job = await alice.enqueue({ kind: 'email', payload: { to: 'a@example.com' }, idempotencyKey: 'same-key' });
    expect(await bob.get(job.id).catch((error: unknown) => error)).toMatchObject({ code: 'not_found' });
    // Keys are per owner: bob's same key is a job of his own.
    const bobs = await bob.enqueue({ kind: 'email', payload: { to: 'b@example.com' }, idempotencyKey: 'same-key' });
    expect(bobs.id).not.toBe(job.id);
    expect((await alice.list()).jobs.map((j) => j.id)).toEqual([job.id]);
  });

  it('cancels a queued job, and two Queues on one database see each other’s jobs', async () => {
    const db = database();
    const one = await open(db);
    const two = await open(db);
    const job = await one.enqueue({ kind: 'email', payload: { to: 'z@example.com' }, idempotencyKey: 'c1', runAfter: new Date(Date.now() + 3_600_000) });
    expect((await two.cancel(job.id)).status).toBe('cancelled');
    expect((await one.get(job.id)).status).toBe('cancelled');
  });
});
