/**
 * POST /complete carrying the worker's next lease (`lease`), on every
 * backend: the completions commit first and the lease runs after them (a
 * maxConcurrent slot that a completion frees is leased in the same request),
 * the leased jobs are fenced like any lease (epoch raised, fresh token that
 * completes them, an old token refused), a carried lease never waits and
 * takes no `waitMs`, honours its kinds filter and its tenant, and a request
 * without `lease` answers as before, without `jobs`.
 */

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  backends,
  bearer,
  drainAfterAll,
  enqueue,
  errorCode,
  lease,
  post,
  putKind,
  startCoordinator,
  type Harness,
  type LeasedWire,
} from '../support/http-fixtures.js';

interface CarriedAnswer {
  results: Array<{ id: string; status: string; code?: string }>;
  jobs?: LeasedWire[];
}

async function enqueueJobs(h: Harness, kind: string, count: number, key = h.keys.producer): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    const response = await enqueue(h.app, key, { kind, payload: { i } });
    expect(response.statusCode, response.body).toBe(202);
    ids.push((response.json() as { id: string }).id);
  }
  return ids;
}

describe.each(backends)('POST /complete with a carried lease ($name)', (backend) => {
  let h: Harness;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({}, { backend });
  });
  afterEach(async () => {
    await h.close();
  });

  it('completes first, then leases: the slot a completion frees is leased in the same request, fenced like any lease', async () => {
    expect((await putKind(h.app, h.keys.admin, 'mail', { maxConcurrent: 1 })).statusCode).toBe(200);
    const [first, second] = await enqueueJobs(h, 'mail', 2);
    const [running] = await lease(h.app, h.keys.worker, { kinds: ['mail'], max: 2 });
    // The kind's one slot is taken: nothing more leases until that job ends.
    expect(running?.id).toBe(first);
    expect(await lease(h.app, h.keys.worker, { kinds: ['mail'], max: 2 })).toEqual([]);

    const answer = await post(h.app, h.keys.worker, '/complete', {
      completions: [{ id: first, token: running?.token, result: { sent: true } }],
      lease: { workerId: 'w1', kinds: ['mail'], max: 2 },
    });
    expect(answer.statusCode, answer.body).toBe(200);
    const body = answer.json() as CarriedAnswer;
    expect(body.results).toEqual([{ id: first, status: 'succeeded' }]);
    expect(body.jobs?.map((job) => job.id)).toEqual([second]);
    const next = body.jobs?.[0] as LeasedWire;
    expect(next.attempt).toBe(1);
    expect(next.epoch).toBe(1);
    expect(next.token).not.toBe(running?.token);

    // The carried lease's token is the live one: the old token of another job does not complete it, its own does.
    const stale = await post(h.app, h.keys.worker, `/jobs/${second}/complete`, { token: running?.token });
    expect(stale.statusCode).toBe(409);
    const done = await post(h.app, h.keys.worker, `/jobs/${second}/complete`, { token: next.token });
    expect(done.statusCode, done.body).toBe(200);
    const job = await h.app.inject({ method: 'GET', url: `/jobs/${second}`, headers: bearer(h.keys.admin) });
    expect((job.json() as { status: string; epoch: number; attempts: number }).status).toBe('succeeded');
  });

  it('answers no jobs at once when none is available, and keeps to its kinds and its tenant', async () => {
    await enqueueJobs(h, 'other', 2);
    await enqueueJobs(h, 'mail', 1, h.keys.otherProducer);
    const [id] = await enqueueJobs(h, 'mail', 1);
    const [job] = await lease(h.app, h.keys.worker, { kinds: ['mail'] });
    expect(job?.id).toBe(id);
    const started = performance.now();
    const answer = await post(h.app, h.keys.worker, '/complete', {
      completions: [{ id, token: job?.token }],
      lease: { workerId: 'w1', kinds: ['mail'], max: 5 },
    });
    expect(answer.statusCode, answer.body).toBe(200);
    // Not parked: a carried lease has no wait (a parked one would hold the request for the default wait).
    expect(performance.now() - started).toBeLessThan(2_000);
    expect((answer.json() as CarriedAnswer).jobs).toEqual([]);
  });

  it("asks the store only when the group's last lease may be out of date: none after a lease that left nothing, one once a job is announced", async () => {
    // PostgreSQL: the LISTEN the coordinator started takes effect with a look for every poll, which would make the memory out of date.
    await (h.store as Partial<{ listening(): Promise<void> }>).listening?.();
    let storeLeases = 0;
    const carry = h.store.jobCompleteManyThenLease.bind(h.store);
    h.store.jobCompleteManyThenLease = (completions, params) => {
      storeLeases += 1;
      return carry(completions, params);
    };
    const [a, b] = await enqueueJobs(h, 'mail', 2);
    const taken = await lease(h.app, h.keys.worker, { kinds: ['mail'], max: 5 });
    expect(taken.map((job) => job.id)).toEqual([a, b]);
    const completeCarrying = async (index: number): Promise<CarriedAnswer> => {
      const job = taken[index] as LeasedWire;
      const answer = await post(h.app, h.keys.worker, '/complete', {
        completions: [{ id: job.id, token: job.token }],
        lease: { workerId: 'w1', kinds: ['mail'], max: 5 },
      });
      expect(answer.statusCode, answer.body).toBe(200);
      return answer.json() as CarriedAnswer;
    };
    // That lease took every job the group could: nothing was announced since, so nothing is asked.
    const none = await completeCarrying(0);
    expect(none.results).toEqual([{ id: a, status: 'succeeded' }]);
    expect(none.jobs).toEqual([]);
    expect(storeLeases).toBe(0);
    // A job enqueued since is announced to the tenant: the next carried lease asks the store, and takes it.
    const [c] = await enqueueJobs(h, 'mail', 1);
    const next = await completeCarrying(1);
    expect(next.results).toEqual([{ id: b, status: 'succeeded' }]);
    expect(next.jobs?.map((job) => job.id)).toEqual([c]);
    expect(storeLeases).toBe(1);
  });

  it('answers without jobs when no lease is carried, and refuses a carried lease that asks to wait or names no worker', async () => {
    const [id] = await enqueueJobs(h, 'mail', 1);
    const [job] = await lease(h.app, h.keys.worker, { kinds: ['mail'] });
    const withWait = await post(h.app, h.keys.worker, '/complete', {
      completions: [{ id, token: job?.token }],
      lease: { workerId: 'w1', waitMs: 1_000 },
    });
    expect(withWait.statusCode).toBe(400);
    expect(errorCode(withWait)).toBe('invalid_request');
    const noWorker = await post(h.app, h.keys.worker, '/complete', { completions: [{ id, token: job?.token }], lease: { max: 1 } });
    expect(noWorker.statusCode).toBe(400);
    expect(errorCode(noWorker)).toBe('invalid_request');
    // Refused as a whole: the completion did not happen, and goes through alone now.
    const plain = await post(h.app, h.keys.worker, '/complete', { completions: [{ id, token: job?.token }] });
    expect(plain.statusCode, plain.body).toBe(200);
    expect(plain.json()).toEqual({ results: [{ id, status: 'succeeded' }] });
  });

  it('needs a worker or admin key like the rest of the protocol', async () => {
    const [id] = await enqueueJobs(h, 'mail', 1);
    const [job] = await lease(h.app, h.keys.worker, { kinds: ['mail'] });
    const answer = await post(h.app, h.keys.producer, '/complete', { completions: [{ id, token: job?.token }], lease: { workerId: 'w1' } });
    expect(answer.statusCode).toBe(403);
  });
});
