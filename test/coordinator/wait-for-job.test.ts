/**
 * GET /jobs/{id}?waitMs: a parked read answers within 20 ms of the job's
 * completion (on the same coordinator on both backends, and on PostgreSQL
 * also when another coordinator completes it), answers at waitMs with the job
 * as it is, reads the store only when told to (no timer), and each tenant's
 * parked waits are bounded.
 */

import { performance } from 'node:perf_hooks';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildCoordinator } from '../../src/coordinator/app.js';
import { FinishWaiters } from '../../src/engine/finish-waiters.js';
import { LeaseholdError } from '../../src/core/errors.js';
import type { Store } from '../../src/store/store.js';
import { backends, bearer, drainAfterAll, enqueue, errorCode, lease, post, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { listenersUp } from '../support/pg-listeners.js';

/** The bound: from the completion's answer to the waiting read's answer. */
const PROMPT_MS = 20;
/**
 * The bound is a latency on two cores shared with another test file and the PostgreSQL server: a neighbour's
 * burst has made one try 22.7 ms (a CI run). A second and third try absorb such a burst; a build whose
 * waiter misses the bound (answers at a timer or at waitMs) misses it on every try.
 */
const PROMPT_TRIES = { retry: 2 } as const;

/** The same store, counting jobGet calls and telling the test after each one. */
function countingReads(store: Store, onRead: (count: number) => void): Store {
  let reads = 0;
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property === 'jobGet') {
        return async (...args: Parameters<Store['jobGet']>) => {
          const job = await target.jobGet(...args);
          reads += 1;
          onRead(reads);
          return job;
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe.each(backends)('GET /jobs/{id}?waitMs ($name)', (backend) => {
  let h: Harness;
  let a: FastifyInstance;
  let reads = 0;
  let onRead: ((count: number) => void) | undefined;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({}, { backend });
    reads = 0;
    a = await buildCoordinator({
      store: countingReads(h.store, (count) => {
        reads = count;
        onRead?.(count);
      }),
      logger: false,
      config: { reaperIntervalMs: 0 },
    });
  });
  afterEach(async () => {
    onRead = undefined;
    await a.close();
    await h.close();
  });

  async function runningJob(): Promise<{ id: string; token: string }> {
    const id = ((await enqueue(h.app, h.keys.producer, { kind: 'email', payload: {} })).json() as { id: string }).id;
    const [leased] = await lease(h.app, h.keys.worker, { workerId: 'w' });
    expect(leased?.id).toBe(id);
    // Warm: the first answer of a route pays for compiling its serializer, which is not what the bound measures.
    await a.inject({ method: 'GET', url: `/jobs/${id}`, headers: bearer(h.keys.producer) });
    return { id, token: leased?.token ?? '' };
  }

  /** Starts a wait on A and resolves once it has parked: its first read and the read after parking are done. */
  async function parkedWait(id: string, waitMs: number): Promise<{ readonly answer: Promise<LightMyRequestResponse> }> {
    const base = reads;
    const parked = new Promise<void>((resolve) => {
      onRead = (count) => {
        if (count >= base + 2) resolve();
      };
    });
    const answer = a.inject({ method: 'GET', url: `/jobs/${id}?waitMs=${waitMs}`, headers: bearer(h.keys.producer) });
    await parked;
    return { answer };
  }

  it(`answers within ${PROMPT_MS} ms of a completion on the same coordinator`, PROMPT_TRIES, async () => {
    const { id, token } = await runningJob();
    const { answer } = await parkedWait(id, 30_000);
    const completed = await post(a, h.keys.worker, `/jobs/${id}/complete`, { token, result: { ok: true } });
    const committed = performance.now();
    expect(completed.statusCode).toBe(200);
    const response = await answer;
    expect(performance.now() - committed).toBeLessThan(PROMPT_MS);
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ id, status: 'succeeded', result: { ok: true } });
  });

  it('answers when a job fails for good or is cancelled', async () => {
    const { id, token } = await runningJob();
    const { answer } = await parkedWait(id, 30_000);
    await post(a, h.keys.worker, `/jobs/${id}/fail`, { token, error: { code: 'nope' }, retryable: false });
    expect((await answer).json()).toMatchObject({ id, status: 'dead' });

    const queued = (
      (await enqueue(h.app, h.keys.producer, { kind: 'later', payload: {}, runAfter: new Date(Date.now() + 3_600_000).toISOString() })).json() as { id: string }
    ).id;
    const { answer: second } = await parkedWait(queued, 30_000);
    await post(a, h.keys.producer, `/jobs/${queued}/cancel`);
    expect((await second).json()).toMatchObject({ id: queued, status: 'cancelled' });
  });

  it('answers after waitMs with the job as it is, having read the store only when parking and at the end', async () => {
    const { id } = await runningJob();
    const base = reads;
    const started = performance.now();
    const response = await a.inject({ method: 'GET', url: `/jobs/${id}?waitMs=400`, headers: bearer(h.keys.producer) });
    expect(performance.now() - started).toBeGreaterThanOrEqual(390);
    expect(response.json()).toMatchObject({ id, status: 'running' });
    // First read, the re-check after parking, the read at the timeout: nothing on a timer in between
    // (on PostgreSQL one more when the finished channel's LISTEN takes effect, which says "look again").
    expect(reads - base).toBeGreaterThanOrEqual(3);
    expect(reads - base).toBeLessThanOrEqual(backend.name === 'postgres' ? 4 : 3);
  });

  it('answers at once for a finished job, and refuses a waitMs over 60 s', async () => {
    const { id, token } = await runningJob();
    await post(a, h.keys.worker, `/jobs/${id}/complete`, { token });
    const started = performance.now();
    expect((await a.inject({ method: 'GET', url: `/jobs/${id}?waitMs=60000`, headers: bearer(h.keys.producer) })).json()).toMatchObject({
      status: 'succeeded',
    });
    expect(performance.now() - started).toBeLessThan(1_000);
    const tooLong = await a.inject({ method: 'GET', url: `/jobs/${id}?waitMs=60001`, headers: bearer(h.keys.producer) });
    expect(tooLong.statusCode).toBe(400);
    expect(errorCode(tooLong)).toBe('invalid_request');
    const other = await a.inject({ method: 'GET', url: `/jobs/${id}?waitMs=10`, headers: bearer(h.keys.otherProducer) });
    expect(other.statusCode).toBe(404);
  });

  it('bounds the parked waits of one tenant and leaves other tenants alone', async () => {
    const waiters = new FinishWaiters(h.store, 2);
    const gone = new AbortController();
    const never = async (): Promise<boolean> => false;
    const first = waiters.wait('t1', 'x', 30_000, gone.signal, never);
    const second = waiters.wait('t1', 'y', 30_000, gone.signal, never);
    expect(() => waiters.wait('t1', 'z', 30_000, gone.signal, never)).toThrow(LeaseholdError);
    try {
      waiters.wait('t1', 'z', 30_000, gone.signal, never);
    } catch (error) {
      expect(error).toMatchObject({ code: 'overloaded', retryAfterSeconds: 1 });
    }
    const elsewhere = waiters.wait('t2', 'x', 30_000, gone.signal, never);
    expect(waiters.size).toBe(3);
    gone.abort();
    expect(await Promise.all([first, second, elsewhere])).toEqual(['aborted', 'aborted', 'aborted']);
    // Freed slots can be used again.
    const again = waiters.wait('t1', 'z', 5, new AbortController().signal, never);
    expect(await again).toBe('timeout');
    waiters.close();
  });

  it.runIf(backend.name === 'postgres')(`answers within ${PROMPT_MS} ms of a completion made by another coordinator`, PROMPT_TRIES, async () => {
    const b = await h.openPeer();
    const { id, token } = await runningJob();
    const { answer } = await parkedWait(id, 30_000);
    await listenersUp(1);
    const completed = await post(b, h.keys.worker, `/jobs/${id}/complete`, { token, result: { via: 'b' } });
    const committed = performance.now();
    expect(completed.statusCode).toBe(200);
    const response = await answer;
    expect(performance.now() - committed).toBeLessThan(PROMPT_MS);
    expect(response.json()).toMatchObject({ id, status: 'succeeded', result: { via: 'b' } });
  });
});
