/**
 * An enqueue handing its job to a poll parked for its kind, on every backend
 * (Store.jobEnqueueLeased): the job is leased in the enqueue's own statement
 * (PostgreSQL) or transaction (SQLite), and the poll answers it without a
 * lease of its own, fenced like any lease (epoch 1, a token that completes
 * it), with the counters showing it running. A paused kind's job is queued
 * instead of handed, and a replayed enqueue hands nothing.
 */

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { backends, drainAfterAll, enqueue, get, lease, post, putKind, type Harness, type LeasedWire, startCoordinator } from '../support/http-fixtures.js';

describe.each(backends)('an enqueue handing its job to a parked poll ($name)', (backend) => {
  let h: Harness;
  /** Store leases (jobLeaseWithNextDue) so far, and a hook called after each empty one: the poll then parks. */
  let storeLeases = 0;
  let leasesRunning = 0;
  let onEmpty: () => void = () => undefined;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({ leaseRecheckMs: 60_000 }, { backend });
    storeLeases = 0;
    const leaseWithNextDue = h.store.jobLeaseWithNextDue.bind(h.store);
    h.store.jobLeaseWithNextDue = async (params) => {
      storeLeases += 1;
      leasesRunning += 1;
      try {
        const answer = await leaseWithNextDue(params);
        if (answer.jobs.length === 0) onEmpty();
        return answer;
      } finally {
        leasesRunning -= 1;
      }
    };
  });
  afterEach(async () => {
    await h.close();
  });

  /**
   * A long poll for `kinds`, once it has parked: its lease found nothing, the LISTEN its park started (PostgreSQL)
   * is in effect, and the wake-up of every poll that this sends has been answered by another lease that found
   * nothing, with no lease left running.
   */
  async function parkedPoll(kinds: string[], waitMs = 10_000): Promise<{ readonly answer: Promise<LeasedWire[]> }> {
    const empty = new Promise<void>((resolve) => {
      onEmpty = resolve;
    });
    const poll = lease(h.app, h.keys.worker, { kinds, max: 3, waitMs });
    await empty;
    await (h.store as Partial<{ listening(): Promise<void> }>).listening?.();
    for (;;) {
      const seen = storeLeases;
      await new Promise((resolve) => setImmediate(resolve));
      // Wrapped: an async function that returned the promise itself would wait for it.
      if (leasesRunning === 0 && storeLeases === seen) return { answer: poll };
    }
  }

  const counts = async (): Promise<Record<string, number>> => ((await get(h.app, h.keys.admin, '/stats')).json() as { counts: Record<string, number> }).counts;

  it('gives the parked poll the job, fenced like any lease, without a lease of its own', async () => {
    const poll = (await parkedPoll(['mail'])).answer;
    const leasesBefore = storeLeases;
    const enqueued = await enqueue(h.app, h.keys.producer, { kind: 'mail', payload: { to: 'a' } });
    expect(enqueued.statusCode, enqueued.body).toBe(202);
    const id = (enqueued.json() as { id: string }).id;
    const [job, ...rest] = await poll;
    expect(rest).toEqual([]);
    expect(job).toMatchObject({ id, kind: 'mail', payload: { to: 'a' }, attempt: 1, epoch: 1 });
    expect(storeLeases - leasesBefore).toBe(0);
    expect(await counts()).toMatchObject({ queued: 0, running: 1 });
    expect((await get(h.app, h.keys.admin, `/jobs/${id}`)).json()).toMatchObject({ status: 'running', attempts: 1 });
    // The lease is the job's only one: its token completes the job once.
    const done = await post(h.app, h.keys.worker, `/jobs/${id}/complete`, { token: job?.token });
    expect(done.statusCode, done.body).toBe(200);
    expect(await counts()).toMatchObject({ queued: 0, running: 0, succeeded: 1 });
    // Nothing is left queued for the next poll.
    expect(await lease(h.app, h.keys.worker, { kinds: ['mail'], max: 3 })).toEqual([]);
  });

  it("queues a paused kind's job instead of handing it, and the poll goes on waiting", async () => {
    expect((await putKind(h.app, h.keys.admin, 'mail', {})).statusCode).toBe(200);
    expect((await post(h.app, h.keys.admin, '/kinds/mail/pause', {})).statusCode).toBe(200);
    const poll = (await parkedPoll(['mail'], 1_000)).answer;
    const enqueued = await enqueue(h.app, h.keys.producer, { kind: 'mail', payload: {} });
    const id = (enqueued.json() as { id: string }).id;
    expect(await poll).toEqual([]);
    expect((await get(h.app, h.keys.admin, `/jobs/${id}`)).json()).toMatchObject({ status: 'queued', attempts: 0 });
    expect(await counts()).toMatchObject({ queued: 1, running: 0 });
    // Resumed, the job leases as any queued job.
    expect((await post(h.app, h.keys.admin, '/kinds/mail/resume', {})).statusCode).toBe(200);
    expect((await lease(h.app, h.keys.worker, { kinds: ['mail'] })).map((job) => job.id)).toEqual([id]);
  });

  it('hands nothing for a replayed enqueue: no job is created, and the poll goes on waiting', async () => {
    const first = await enqueue(h.app, h.keys.producer, { kind: 'mail', payload: {} }, 'the-key');
    const id = (first.json() as { id: string }).id;
    expect((await lease(h.app, h.keys.worker, { kinds: ['mail'] })).map((job) => job.id)).toEqual([id]);
    const poll = (await parkedPoll(['mail'], 1_000)).answer;
    const replay = await enqueue(h.app, h.keys.producer, { kind: 'mail', payload: {} }, 'the-key');
    expect(replay.statusCode, replay.body).toBe(202);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect((replay.json() as { id: string }).id).toBe(id);
    expect(await poll).toEqual([]);
    expect(await counts()).toMatchObject({ queued: 0, running: 1 });
  });
});
