/**
 * A Worker over a Queue leases, renews, checkpoints, declares effects and
 * completes on the store through the engine, without HTTP: on SQLite
 * and on PostgreSQL, the same outcomes and the same refusal codes as over
 * HTTP (fencing after a lease expired and the job was leased again, the
 * kind's checkpoint and result limits, cancellation seen by the handler,
 * renewal). On
 * SQLite, a job enqueued by another process on the same file wakes an idle
 * worker within milliseconds (PRAGMA data_version, no polling of the jobs table).
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaseholdApiError } from '../../src/client/errors.js';
import { LeaseholdError, openQueue, Queue, Worker, type KindPayloads } from '../../src/index.js';
import type { JobContext } from '../../src/worker/handler.js';
import { httpOverQueue } from '../support/queue-http.js';
import { waitFor } from '../support/wait-for.js';
import { queueTargets } from '../support/queue-targets.js';

const targets = queueTargets('direct');

/** Resolves when called; for a handler to say it has reached a point. */
function signalled<T = void>(): { readonly promise: Promise<T>; readonly fire: (value: T) => void } {
  let fire!: (value: T) => void;
  const promise = new Promise<T>((resolve) => {
    fire = resolve;
  });
  return { promise, fire };
}

async function refusal(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => new Error('the call was accepted'),
    (error: unknown) => error,
  );
}

describe.each(targets)('Worker over a Queue, on the store directly ($name)', (target) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  async function open<K extends KindPayloads = KindPayloads>(config: Record<string, unknown> = {}, db?: string): Promise<{ queue: Queue<K>; db: string }> {
    let path = db;
    if (path === undefined) {
      const created = target.create();
      cleanups.unshift(created.cleanup);
      path = created.db;
    }
    // A fast reaper, so an expired lease is requeued (and announced) within a few ms.
    const queue = await openQueue<K>({ db: path, config: { reaperIntervalMs: 20, ...config } });
    cleanups.push(() => queue.close());
    return { queue, db: path };
  }

  function start<K extends KindPayloads>(worker: Worker<K>): void {
    const running = worker.run();
    cleanups.push(async () => {
      await worker.stop({ graceMs: 0 });
      await running;
    });
  }

  it('runs jobs (complete, fail, checkpoint, effect, progress, renewal) on the engine, without HTTP', async () => {
    const { queue } = await open();
    const ok = await queue.enqueue({ kind: 'work', payload: { n: 1 }, idempotencyKey: 'ok' });
    const failing = await queue.enqueue({ kind: 'work', payload: { n: 2 }, idempotencyKey: 'fail', maxAttempts: 1 });
    const ended = [signalled(), signalled()];
    const worker = new Worker({
      queue,
      concurrency: 4,
      // Renewed every third of the lease: the handler below outlives two leases.
      leaseMs: 300,
      handlers: {
        work: async (ctx: JobContext<unknown>) => {
          const { n } = ctx.payload as { n: number };
          try {
            await ctx.saveCheckpoint(1, { at: new Date(0) });
            await ctx.effectStarted();
            ctx.progress({ done: 1, total: 2 });
            if (n === 2) throw Object.assign(new Error('boom'), { code: 'broken', retryable: false });
            await new Promise((resolve) => setTimeout(resolve, 700));
            return { n, at: new Date(0), dropped: undefined };
          } finally {
            ended[n - 1]?.fire();
          }
        },
      },
    });
    const running = worker.run();
    await Promise.all(ended.map((end) => end.promise));
    // stop() delivers the outcomes of finished handlers before it resolves.
    await worker.stop();
    await running;

    const done = await queue.get(ok.id);
    expect(done).toMatchObject({ status: 'succeeded', attempts: 1, progress: { done: 1, total: 2 } });
    const record = await queue.store.jobGet({ scope: { tenant: 'default' }, id: ok.id });
    expect(record?.checkpoint).toEqual({ step: 1, state: { at: '1970-01-01T00:00:00.000Z' } });
    expect(record?.effectStartedAt).not.toBeNull();
    // Stored as the wire would carry it: the Date as its JSON text, the undefined field gone; the checksum verifies.
    const result = await queue.result(ok.id);
    expect(JSON.parse(result.body.toString('utf8'))).toEqual({ at: '1970-01-01T00:00:00.000Z', n: 1 });
    expect(result.contentType).toMatch(/^application\/json/);
    // It failed for good after declaring an effect: unknown, as the store's transition decides over HTTP too.
    expect(await queue.get(failing.id)).toMatchObject({ status: 'unknown', lastError: { code: 'broken' } });
  });

  it('refuses a stale token after the lease expired and the job was leased again, with the HTTP API’s code', async () => {
    const { queue } = await open();
    const job = await queue.enqueue({ kind: 'fenced', payload: {}, idempotencyKey: 'f' });
    const transport = queue.workerTransport;
    const first = await transport.leaseResponse({ workerId: 'a', kinds: ['fenced'], leaseMs: 100, max: 1, waitMs: 0 });
    expect(first.jobs.map((leased) => leased.id)).toEqual([job.id]);
    const stale = first.jobs[0]!;
    // Woken by the reaper's requeue of the expired lease, not by a timer of ours.
    const second = await transport.leaseResponse({ workerId: 'b', kinds: ['fenced'], leaseMs: 30_000, max: 1, waitMs: 5_000 });
    expect(second.jobs[0]).toMatchObject({ id: job.id, attempt: 2 });
    expect(second.jobs[0]!.epoch).toBeGreaterThan(stale.epoch);

    const late = await refusal(transport.complete(job.id, { token: stale.token, result: { late: true } }));
    expect(late).toBeInstanceOf(LeaseholdError);
    expect(late).toMatchObject({ code: 'stale_lease', status: 409 });
    expect(await refusal(transport.renew(job.id, { token: stale.token, leaseMs: 1_000 }))).toMatchObject({ code: 'stale_lease', status: 409 });
    expect(await refusal(transport.checkpoint(job.id, { token: stale.token, step: 1, state: {} }))).toMatchObject({ code: 'stale_lease' });
    expect(await refusal(transport.fail(job.id, { token: stale.token, error: { code: 'x' } }))).toMatchObject({ code: 'stale_lease' });
    const [batched] = await transport.completeMany([{ id: job.id, token: stale.token, result: 1 }]);
    expect(batched).toEqual({ id: job.id, status: 'rejected', code: 'stale_lease' });
    // Over HTTP (leaseholdRoutes over the same Queue) the same call is refused with the same code.
    const http = await httpOverQueue(queue);
    cleanups.push(() => http.close());
    const overHttp = await refusal(http.client.complete(job.id, { token: stale.token, result: { late: true } }));
    expect(overHttp).toBeInstanceOf(LeaseholdApiError);
    expect(overHttp).toMatchObject({ code: 'stale_lease', status: 409 });

    // The live lease completes; the stale one changed nothing.
    await expect(transport.complete(job.id, { token: second.jobs[0]!.token, result: { by: 'b' } })).resolves.toEqual({ id: job.id, status: 'succeeded' });
    expect(JSON.parse((await queue.result(job.id)).body.toString('utf8'))).toEqual({ by: 'b' });
  });

  it('answers and stores as the HTTP routes do: the same results, bytes, checksums and per-item refusals', async () => {
    const { queue } = await open();
    const http = await httpOverQueue(queue);
    cleanups.push(() => http.close());
    const ways = { http: http.client, direct: queue.workerTransport };
    const stored: Record<string, { json: unknown; bytes: unknown; batch: unknown }> = {};
    for (const [name, calls] of Object.entries(ways)) {
      const ids = await Promise.all(
        ['json', 'bytes', 'bad'].map(async (which) => (await queue.enqueue({ kind: `same-${name}`, payload: {}, idempotencyKey: `${name}-${which}` })).id),
      );
      const { jobs } = await calls.leaseResponse({ workerId: name, kinds: [`same-${name}`], leaseMs: 30_000, max: 3 });
      const token = (id: string): string => jobs.find((job) => job.id === id)!.token;
      const [json, bytes, bad] = ids as [string, string, string];
      const batch = await calls.completeMany([
        { id: json, token: token(json), result: { b: [1, { d: null, c: 'é' }], a: 1 } },
        { id: bytes, token: token(bytes), resultBytes: { contentType: 'text/csv; charset=utf-8', base64: Buffer.from('a,b\n1,2\n').toString('base64') } },
        { id: bad, token: token(bad), resultBytes: { contentType: 'not a media type', base64: '' } },
      ]);
      const read = async (id: string): Promise<unknown> => {
        const result = await queue.result(id);
        return { contentType: result.contentType, body: result.body.toString('base64'), checksum: result.checksum };
      };
      stored[name] = { json: await read(json), bytes: await read(bytes), batch: batch.map((entry) => ({ status: entry.status, code: entry.code })) };
    }
    expect(stored['direct']).toEqual(stored['http']);
    expect(stored['direct']?.batch).toEqual([
      { status: 'succeeded', code: undefined },
      { status: 'succeeded', code: undefined },
      { status: 'rejected', code: 'invalid_request' },
    ]);
  });

  it('carries the next lease with completions as the HTTP route does: completed first, then leased, fenced, and a wait refused', async () => {
    const { queue } = await open();
    const http = await httpOverQueue(queue);
    cleanups.push(() => http.close());
    const ways = { http: http.client, direct: queue.workerTransport };
    for (const [name, calls] of Object.entries(ways)) {
      const kind = `carry-${name}`;
      await queue.putKind(kind, { maxConcurrent: 1 });
      const first = await queue.enqueue({ kind, payload: 1, idempotencyKey: `${name}-1` });
      const second = await queue.enqueue({ kind, payload: 2, idempotencyKey: `${name}-2` });
      const { jobs } = await calls.leaseResponse({ workerId: name, kinds: [kind], leaseMs: 30_000, max: 2 });
      expect(jobs.map((job) => job.id)).toEqual([first.id]);
      const answer = await calls.completeAndLease({
        completions: [{ id: first.id, token: jobs[0]!.token, result: { n: 1 } }],
        lease: { workerId: name, kinds: [kind], max: 2 },
      });
      expect(answer.results).toEqual([{ id: first.id, status: 'succeeded' }]);
      // The slot the completion freed is leased in the same call.
      expect(answer.jobs?.map((job) => job.id)).toEqual([second.id]);
      const next = answer.jobs![0]!;
      expect(next.epoch).toBe(1);
      await expect(calls.complete(second.id, { token: next.token })).resolves.toEqual({ id: second.id, status: 'succeeded' });
      const waiting = await refusal(
        calls.completeAndLease({
          completions: [{ id: second.id, token: next.token }],
          lease: { workerId: name, waitMs: 10 } as unknown as { workerId: string },
        }),
      );
      expect(waiting).toMatchObject({ code: 'invalid_request', status: 400 });
    }
  });

  it('caps a checkpoint at the kind’s maxCheckpointBytes and makes a result over maxResultBytes dead with result_too_large', async () => {
    const { queue } = await open();
    await queue.putKind('capped', { maxCheckpointBytes: 64, maxResultBytes: 64 });
    const job = await queue.enqueue({ kind: 'capped', payload: {}, idempotencyKey: 'c' });
    const refused = signalled<unknown>();
    const worker = new Worker({
      queue,
      handlers: {
        capped: async (ctx: JobContext<unknown>) => {
          await ctx.saveCheckpoint(1, { small: true });
          refused.fire(await refusal(ctx.saveCheckpoint(2, { big: 'x'.repeat(100) })));
          return { big: 'y'.repeat(100) };
        },
      },
    });
    start(worker);
    const error = await refused.promise;
    expect(error).toBeInstanceOf(LeaseholdError);
    expect(error).toMatchObject({ code: 'payload_too_large', status: 413 });
    const finished = await queue.waitFor(job.id, { timeoutMs: 10_000 });
    expect(finished).toMatchObject({ status: 'dead', lastError: { code: 'result_too_large' } });
    // The refused checkpoint wrote nothing: the small one is what the job keeps.
    expect((await queue.store.jobGet({ scope: { tenant: 'default' }, id: job.id }))?.checkpoint).toEqual({ step: 1, state: { small: true } });
  });

  it('renews the lease of a handler that runs longer than it', async () => {
    const { queue } = await open();
    const job = await queue.enqueue({ kind: 'slow', payload: {}, idempotencyKey: 's' });
    const transport = queue.workerTransport;
    // Renewed every third of the lease: with 500 ms a renewal may come 330 ms late (a loaded CI machine's
    // event loop) and still keep it; 200 ms left 130 ms, which a full suite on two cores sometimes took.
    const worker = new Worker({
      queue,
      leaseMs: 500,
      handlers: {
        slow: async (ctx: JobContext<unknown>) => {
          await new Promise((resolve) => setTimeout(resolve, 1_600));
          return { aborted: ctx.signal.aborted };
        },
      },
    });
    start(worker);
    const finished = await queue.waitFor(job.id, { timeoutMs: 10_000 });
    // One attempt: the renewals kept the lease, so the reaper never requeued it.
    expect(finished).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(JSON.parse((await queue.result(job.id)).body.toString('utf8'))).toEqual({ aborted: false });

    // Directly: a renewal moves the expiry on; progress over 4 KiB is refused as over HTTP.
    const other = await queue.enqueue({ kind: 'manual', payload: {}, idempotencyKey: 'm' });
    const [leased] = (await transport.leaseResponse({ workerId: 'w', kinds: ['manual'], leaseMs: 1_000, max: 1 })).jobs;
    expect(leased?.id).toBe(other.id);
    const renewed = await transport.renew(other.id, { token: leased!.token, leaseMs: 60_000 });
    expect(Date.parse(renewed.leaseExpiresAt)).toBeGreaterThan(Date.parse(leased!.leaseExpiresAt));
    expect(await refusal(transport.renew(other.id, { token: leased!.token, progress: 'p'.repeat(5_000) }))).toMatchObject({ code: 'payload_too_large' });
    // A body the protocol's schema refuses is invalid_request, as over HTTP.
    expect(await refusal(transport.renew(other.id, { token: leased!.token, leaseMs: 1 }))).toMatchObject({ code: 'invalid_request', status: 400 });
    expect(await refusal(transport.renew('not-a-job-id', { token: leased!.token }))).toMatchObject({ code: 'not_found', status: 404 });
  });

  it('aborts the handler’s signal with code cancelled when the job is cancelled, and the job ends cancelled', async () => {
    const { queue } = await open();
    const job = await queue.enqueue({ kind: 'long', payload: {}, idempotencyKey: 'l' });
    const started = signalled();
    const seen = signalled<unknown>();
    const worker = new Worker({
      queue,
      leaseMs: 300,
      handlers: {
        long: async (ctx: JobContext<unknown>) => {
          started.fire();
          await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
          seen.fire(ctx.signal.reason);
        },
      },
    });
    start(worker);
    await started.promise;
    await queue.cancel(job.id);
    expect(await seen.promise).toMatchObject({ code: 'cancelled' });
    expect(await queue.waitFor(job.id, { timeoutMs: 10_000 })).toMatchObject({ status: 'cancelled' });
  });

  it('ends a parked lease wait when the worker stops', async () => {
    const { queue } = await open();
    const worker = new Worker({ queue, waitMs: 60_000, handlers: { never: async () => undefined } });
    const running = worker.run();
    await waitFor('the worker to park', () => queue.services.ctx.waiters.size > 0);
    const stoppedAt = performance.now();
    await worker.stop();
    await running;
    expect(performance.now() - stoppedAt).toBeLessThan(2_000);
    expect(queue.services.ctx.waiters.size).toBe(0);
  });

  if (target.name === 'sqlite') {
    it('wakes an idle worker within milliseconds when another process enqueues on the same file', async () => {
      // A slow reaper: its writes would also notice the other process's commit, and it must not be what wakes the worker.
      const { queue, db } = await open({ reaperIntervalMs: 60_000 });
      const startedAt = signalled<number>();
      const worker = new Worker({
        queue,
        // A long poll: were the wake-up a timeout, it would come 30 s later.
        waitMs: 30_000,
        handlers: { ping: async () => startedAt.fire(Date.now()) },
      });
      start(worker);
      await waitFor('the worker to park', () => queue.services.ctx.waiters.size > 0);

      const child = enqueuer(db);
      cleanups.push(async () => {
        child.process.kill();
      });
      await child.line('ready');
      child.process.stdin?.write('go\n');
      const enqueuedAt = Number((await child.line('enqueued')).split(' ')[1]);
      const latency = (await startedAt.promise) - enqueuedAt;
      // data_version is read every 2 ms while something waits; the bound leaves room for a loaded machine.
      expect(latency).toBeLessThan(250);
      expect(latency).toBeGreaterThanOrEqual(0);
    });
  }
});

/** A second process with its own Queue on the file: enqueues one job when told, and says when it called enqueue. */
function enqueuer(db: string): { readonly process: ChildProcess; line(prefix: string): Promise<string> } {
  const library = pathToFileURL(resolve(import.meta.dirname, '../../dist/src/index.js')).href;
  const script = `
    import { createInterface } from 'node:readline';
    const { openQueue } = await import(${JSON.stringify(library)});
    const queue = await openQueue({ db: ${JSON.stringify(db)} });
    console.log('ready');
    for await (const line of createInterface({ input: process.stdin })) {
      if (line === 'go') {
        // The moment before the call: the other process may start the job before this await resumes.
        const calledAt = Date.now();
        await queue.enqueue({ kind: 'ping', payload: {}, idempotencyKey: 'from-another-process' });
        console.log('enqueued ' + calledAt);
      }
    }
    await queue.close();
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  const seen: string[] = [];
  const waiting: { prefix: string; resolve: (line: string) => void }[] = [];
  lines.on('line', (line) => {
    const index = waiting.findIndex((entry) => line.startsWith(entry.prefix));
    if (index >= 0) waiting.splice(index, 1)[0]!.resolve(line);
    else seen.push(line);
  });
  return {
    process: child,
    line(prefix) {
      const earlier = seen.findIndex((line) => line.startsWith(prefix));
      if (earlier >= 0) return Promise.resolve(seen.splice(earlier, 1)[0]!);
      return new Promise((resolve, reject) => {
        waiting.push({ prefix, resolve });
        child.once('exit', (code) => reject(new Error(`the enqueuing process exited (${code}) before "${prefix}"`)));
      });
    },
  };
}
