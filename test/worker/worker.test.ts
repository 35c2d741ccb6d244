/**
 * The worker runtime against a real coordinator (random port, fresh SQLite
 * file): retries until success, permanent failures, a lost lease aborting the
 * handler without a completion, cancellation, graceful shutdown in both its
 * forms, coalesced completions, and riding out a coordinator restart.
 */

import { afterEach, describe, expect, it, vi } from 'vitest';
import { Worker, type WorkerSettings } from '../../src/worker/worker.js';
import { JobAbortedError, PermanentJobError } from '../../src/worker/job-errors.js';
import { BinaryResult } from '../../src/worker/binary-result.js';
import type { HandlerMap, JobContext } from '../../src/worker/handler.js';
import type { WorkerLogger } from '../../src/worker/logger.js';
import { waitFor } from '../support/wait-for.js';
import { LeaseholdApiError } from '../../src/client/errors.js';
import { startLiveCoordinator, type LiveCoordinator } from '../client/live-coordinator.js';

const FAST_RETRY = { baseMs: 20, maxMs: 200 };
const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function coordinator(): Promise<LiveCoordinator> {
  const live = await startLiveCoordinator({ defaultBackoff: { baseMs: 5, maxMs: 20 } });
  cleanups.push(() => live.close());
  return live;
}

function startWorker(live: LiveCoordinator, handlers: HandlerMap, options: Partial<WorkerSettings> = {}): { worker: Worker; running: Promise<void> } {
  const worker = new Worker({ client: live.client('worker'), handlers, concurrency: 4, waitMs: 1_000, retry: FAST_RETRY, ...options });
  const running = worker.run();
  cleanups.push(async () => {
    await worker.stop({ graceMs: 0 });
    await running.catch(() => undefined);
  });
  return { worker, running };
}

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

function untilAborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    signal.addEventListener('abort', () => resolve(signal.reason), { once: true });
  });
}

function recordingLogger(): WorkerLogger & { messages: string[] } {
  const messages: string[] = [];
  const record = (_fields: Record<string, unknown>, message: string): void => {
    messages.push(message);
  };
  return { messages, debug: record, info: record, warn: record, error: record };
}

describe('worker', () => {
  it('retries a job that fails twice and then succeeds', async () => {
    const live = await coordinator();
    const seen: number[] = [];
    startWorker(live, {
      flaky: (ctx: JobContext) => {
        seen.push(ctx.attempt);
        if (ctx.attempt < 3) throw Object.assign(new Error(`dependency down\n    at secret/stack.js:1:1`), { code: 'dependency_down' });
        return { attempt: ctx.attempt };
      },
    });
    const producer = live.client('producer');
    const { job } = await producer.enqueue({ kind: 'flaky', payload: {}, maxAttempts: 5 });
    const done = await waitFor('the job to succeed', async () => {
      const current = await producer.getJob(job.id);
      return current.status === 'succeeded' ? current : undefined;
    });
    expect(seen).toEqual([1, 2, 3]);
    expect(done.result).toEqual({ attempt: 3 });
    const attempts = await live.client('admin').attempts(job.id);
    expect(attempts.map((a) => a.outcome)).toEqual(['failed', 'failed', 'succeeded']);
    expect(attempts.map((a) => a.errorCode)).toEqual(['dependency_down', 'dependency_down', null]);
  });

  it('completes a job it got after a long poll that outlasted its lease length (the lease starts when the coordinator leases, not when the poll was sent)', async () => {
    const live = await coordinator();
    const leaseMs = 300;
    const logger = recordingLogger();
    const { worker } = startWorker(live, { quick: () => ({ ok: true }) }, { leaseMs, waitMs: 5_000, logger });
    // The worker's poll has to be parked for longer than a lease before the job arrives: that elapsed time is the subject.
    await new Promise((resolve) => setTimeout(resolve, leaseMs * 3));
    expect(worker.activeCount).toBe(0);
    const producer = live.client('producer');
    const { job } = await producer.enqueue({ kind: 'quick', payload: {}, maxAttempts: 3 });
    const done = await waitFor('the job to succeed', async () => {
      const current = await producer.getJob(job.id);
      return current.status === 'succeeded' ? current : undefined;
    });
    expect(done.attempts).toBe(1);
    expect((await live.client('admin').attempts(job.id)).map((a) => a.outcome)).toEqual(['succeeded']);
    expect(logger.messages).not.toContain('completion not delivered; the lease will decide');
  });

  it('sends a permanent failure as dead at once, with a one-line message and no stack', async () => {
    const live = await coordinator();
    startWorker(live, {
      strict: () => {
        throw new PermanentJobError('input is not valid\n    at handler.js:10:5', 'bad_input');
      },
    });
    const producer = live.client('producer');
    const { job } = await producer.enqueue({ kind: 'strict', payload: {}, maxAttempts: 5 });
    const dead = await waitFor('the job to be dead', async () => {
      const current = await producer.getJob(job.id);
      return current.status === 'dead' ? current : undefined;
    });
    expect(dead.attempts).toBe(1);
    expect(dead.lastError).toEqual({ code: 'bad_input', message: 'input is not valid', class: 'permanent' });
  });

  it('aborts the handler when a renewal is refused (stale lease) and does not complete that attempt', async () => {
    const live = await coordinator();
    const reasons: unknown[] = [];
    startWorker(
      live,
      {
        paused: async (ctx: JobContext) => {
          if (ctx.attempt === 1) {
            // A worker paused past its lease (a long GC, a stopped VM): the lease runs out meanwhile.
            const until = Date.now() + 700;
            while (Date.now() < until) {
              /* blocking on purpose */
            }
            reasons.push(await untilAborted(ctx.signal));
            return { from: 'the paused attempt' };
          }
          return { from: `attempt ${ctx.attempt}` };
        },
      },
      { leaseMs: 300 },
    );
    const producer = live.client('producer');
    const { job } = await producer.enqueue({ kind: 'paused', payload: {}, maxAttempts: 5 });
    const done = await waitFor('the job to succeed', async () => {
      const current = await producer.getJob(job.id);
      return current.status === 'succeeded' ? current : undefined;
    });
    await waitFor('the paused attempt to be aborted', () => reasons.length === 1);
    expect(reasons[0]).toBeInstanceOf(JobAbortedError);
    expect((reasons[0] as JobAbortedError).code).toBe('stale_lease');
    // The paused attempt's result never reached the coordinator; a later attempt's did.
    expect(done.result).not.toEqual({ from: 'the paused attempt' });
    const attempts = await live.client('admin').attempts(job.id);
    expect(attempts[0]?.outcome).toBe('expired');
    expect(attempts[attempts.length - 1]?.outcome).toBe('succeeded');
  });

  it('cancelling a running job aborts its handler, and the worker ends the job cancelled at once with its live token', async () => {
    const live = await coordinator();
    const started = deferred<string>();
    const reason = deferred<unknown>();
    startWorker(
      live,
      {
        long: async (ctx: JobContext) => {
          started.resolve(ctx.id);
          reason.resolve(await untilAborted(ctx.signal));
          return { finished: true };
        },
      },
      // Renewed every second: the cancel is seen within about a second, while the lease itself
      // would only run out at least two seconds after the cancel.
      { leaseMs: 3_000 },
    );
    const producer = live.client('producer');
    const { job } = await producer.enqueue({ kind: 'long', payload: {} });
    await started.promise;
    await producer.cancel(job.id);
    const aborted = await reason.promise;
    expect((aborted as JobAbortedError).code).toBe('cancelled');
    const final = await waitFor('the cancelled job to end', async () => {
      const current = await producer.getJob(job.id);
      return current.status === 'running' ? undefined : current;
    });
    expect(final.status).toBe('cancelled');
    expect(final.result).toBeNull();
    expect(final.lastError).toMatchObject({ code: 'cancelled', class: 'cancelled' });
    // Ended by the worker's fail under the live token (outcome `failed`), not by the lease running out
    // (which would record the outcome `cancelled`).
    const attempts = await live.client('admin').attempts(job.id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ outcome: 'failed', errorCode: 'cancelled' });
  });

  it('sends progress with the next renewal and completes with a binary result', async () => {
    const live = await coordinator();
    const gate = deferred();
    startWorker(
      live,
      {
        render: async (ctx: JobContext) => {
          ctx.progress({ done: 1, total: 2 });
          await gate.promise;
          return new BinaryResult(Buffer.from('rendered bytes'), 'text/plain');
        },
      },
      { leaseMs: 1_000 },
    );
    const producer = live.client('producer');
    const { job } = await producer.enqueue({ kind: 'render', payload: {} });
    await waitFor('progress to arrive', async () => JSON.stringify((await producer.getJob(job.id)).progress) === '{"done":1,"total":2}');
    gate.resolve();
    await waitFor('the job to succeed', async () => (await producer.getJob(job.id)).status === 'succeeded');
    const result = await producer.getResult(job.id);
    expect(result.contentType).toMatch(/^text\/plain/);
    expect(result.body.toString()).toBe('rendered bytes');
  });

  it('on stop, lets a running handler finish and complete, and leases nothing new', async () => {
    const live = await coordinator();
    const started = deferred();
    const gate = deferred();
    const { worker, running } = startWorker(
      live,
      {
        slow: async () => {
          started.resolve();
          await gate.promise;
          return { ok: true };
        },
      },
      { concurrency: 1 },
    );
    const producer = live.client('producer');
    const { job: first } = await producer.enqueue({ kind: 'slow', payload: 1 });
    await started.promise;
    const { job: second } = await producer.enqueue({ kind: 'slow', payload: 2 });
    let stopped = false;
    const stopping = worker.stop({ graceMs: 10_000 }).then(() => {
      stopped = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(stopped).toBe(false);
    gate.resolve();
    await stopping;
    await running;
    expect((await producer.getJob(first.id)).status).toBe('succeeded');
    const untouched = await producer.getJob(second.id);
    expect(untouched.status).toBe('queued');
    expect(untouched.attempts).toBe(0);
  });

  it('after the grace period, aborts the handler and leaves its lease alone', async () => {
    const live = await coordinator();
    const started = deferred();
    const reason = deferred<unknown>();
    const { worker } = startWorker(live, {
      stuck: async (ctx: JobContext) => {
        started.resolve();
        reason.resolve(await untilAborted(ctx.signal));
        throw new Error('gave up because of the abort');
      },
    });
    const producer = live.client('producer');
    const { job } = await producer.enqueue({ kind: 'stuck', payload: {} });
    await started.promise;
    const before = await producer.getJob(job.id);
    await worker.stop({ graceMs: 100 });
    expect(((await reason.promise) as JobAbortedError).code).toBe('shutdown');
    // Give a stray fail request time to arrive, were one sent.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const after = await producer.getJob(job.id);
    expect(after.status).toBe('running');
    expect(after.epoch).toBe(before.epoch);
    expect(after.attempts).toBe(1);
    expect((await live.client('admin').attempts(job.id))[0]?.outcome).toBeNull();
  });

  it('coalesces the completions of jobs that finish together into few requests', async () => {
    const live = await coordinator();
    const client = live.client('worker');
    const many = vi.spyOn(client, 'completeMany');
    const carrying = vi.spyOn(client, 'completeAndLease');
    const single = vi.spyOn(client, 'complete');
    const worker = new Worker({ client, handlers: { noop: () => undefined }, concurrency: 50, waitMs: 1_000, retry: FAST_RETRY });
    const producer = live.client('producer');
    await producer.enqueueBatch(Array.from({ length: 50 }, (_, i) => ({ idempotencyKey: `n-${i}`, kind: 'noop', payload: i })));
    const running = worker.run();
    cleanups.push(async () => {
      await worker.stop({ graceMs: 0 });
      await running;
    });
    await waitFor('all 50 jobs to succeed', async () => (await live.client('admin').stats()).counts['succeeded'] === 50);
    expect(single).not.toHaveBeenCalled();
    const completed =
      many.mock.calls.reduce((sum, call) => sum + call[0].length, 0) + carrying.mock.calls.reduce((sum, call) => sum + call[0].completions.length, 0);
    expect(completed).toBe(50);
    expect(many.mock.calls.length + carrying.mock.calls.length).toBeLessThan(10);
  });

  it('leases its next jobs with its completions (one request), each job run once under its own lease', async () => {
    const live = await coordinator();
    const client = live.client('worker');
    const carrying = vi.spyOn(client, 'completeAndLease');
    const polls = vi.spyOn(client, 'leaseResponse');
    const runs = new Map<string, number>();
    const worker = new Worker({
      client,
      handlers: {
        step: (ctx: JobContext) => {
          runs.set(ctx.id, (runs.get(ctx.id) ?? 0) + 1);
          return { fence: ctx.fence };
        },
      },
      concurrency: 4,
      waitMs: 1_000,
      retry: FAST_RETRY,
    });
    const producer = live.client('producer');
    await producer.enqueueBatch(Array.from({ length: 200 }, (_, i) => ({ idempotencyKey: `s-${i}`, kind: 'step', payload: i })));
    const running = worker.run();
    cleanups.push(async () => {
      await worker.stop({ graceMs: 0 });
      await running;
    });
    await waitFor('all 200 jobs to succeed', async () => (await live.client('admin').stats()).counts['succeeded'] === 200);
    const answers = await Promise.all(carrying.mock.results.map((result) => result.value as ReturnType<typeof client.completeAndLease>));
    const carried = answers.reduce((sum, answer) => sum + (answer.jobs?.length ?? 0), 0);
    // With 4 slots and 200 jobs queued, freed slots are filled by the completions' requests, not by polls of their own.
    expect(carried).toBeGreaterThan(100);
    expect(polls.mock.calls.length).toBeLessThan(carrying.mock.calls.length);
    for (const call of carrying.mock.calls) expect(call[0].lease).toMatchObject({ workerId: worker.workerId, kinds: ['step'] });
    expect(runs.size).toBe(200);
    expect([...runs.values()].every((count) => count === 1)).toBe(true);
  });

  it('sends its completions alone to a coordinator that refuses a lease with them, and leases on its own', async () => {
    const live = await coordinator();
    const client = live.client('worker');
    const carrying = vi
      .spyOn(client, 'completeAndLease')
      .mockRejectedValue(new LeaseholdApiError(400, 'invalid_request', 'body must NOT have additional properties', undefined));
    const many = vi.spyOn(client, 'completeMany');
    const logger = recordingLogger();
    const worker = new Worker({ client, handlers: { step: () => null }, concurrency: 2, waitMs: 1_000, retry: FAST_RETRY, logger });
    const producer = live.client('producer');
    await producer.enqueueBatch(Array.from({ length: 20 }, (_, i) => ({ idempotencyKey: `r-${i}`, kind: 'step', payload: i })));
    const running = worker.run();
    cleanups.push(async () => {
      await worker.stop({ graceMs: 0 });
      await running;
    });
    await waitFor('all 20 jobs to succeed', async () => (await live.client('admin').stats()).counts['succeeded'] === 20);
    // Refused once, then never offered again.
    expect(carrying).toHaveBeenCalledTimes(1);
    expect(many.mock.calls.reduce((sum, call) => sum + call[0].length, 0)).toBe(20);
    expect(logger.messages).toContain('the coordinator does not take a lease with completions; sending them alone');
  });

  it('stops and rejects run() when the coordinator refuses its key', async () => {
    const live = await coordinator();
    const worker = new Worker({ client: live.client('lh_revoked-or-mistyped-key-00000000'), handlers: { any: () => null }, retry: FAST_RETRY });
    const error = await worker.run().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseholdApiError);
    expect((error as LeaseholdApiError).status).toBe(401);
  });

  it('rides out a coordinator restart: the completion and the lease loop retry until it is back', async () => {
    const live = await coordinator();
    const logger = recordingLogger();
    const started = deferred();
    const gate = deferred();
    const handlerReturned = deferred();
    startWorker(
      live,
      {
        net: async (ctx: JobContext) => {
          if (ctx.payload === 'first') {
            started.resolve();
            await gate.promise;
            handlerReturned.resolve();
          }
          return { payload: ctx.payload };
        },
      },
      { logger, leaseMs: 20_000 },
    );
    const producer = live.client('producer');
    const { job: first } = await producer.enqueue({ kind: 'net', payload: 'first' });
    await started.promise;
    await live.stop();
    gate.resolve();
    await handlerReturned.promise;
    await waitFor('a retried call', () => logger.messages.includes('coordinator call failed; retrying'));
    await live.restart();
    await waitFor('the first job to succeed', async () => (await producer.getJob(first.id)).status === 'succeeded');
    const { job: second } = await producer.enqueue({ kind: 'net', payload: 'second' });
    const done = await waitFor('the second job to succeed', async () => {
      const current = await producer.getJob(second.id);
      return current.status === 'succeeded' ? current : undefined;
    });
    expect(done.result).toEqual({ payload: 'second' });
  });
});
