/**
 * The wake-up of a long poll with a kinds filter travels by the event path
 * alone, beside another kind's backlog: the parked poll has no due time (the
 * store answers none for its kinds), no re-check and no reaper run, so
 * nothing but the store's announcement can start its one lease; an enqueue
 * through another coordinator (LISTEN/NOTIFY on PostgreSQL, the commit signal
 * on SQLite) or through its own (whose own NOTIFY, coming back, wakes nobody)
 * costs that poll's group exactly one lease statement. Runs on every backend.
 */

import { performance } from 'node:perf_hooks';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildCoordinator } from '../../src/coordinator/app.js';
import type { LeaseParams, LeaseWithNextDue, Store } from '../../src/store/store.js';
import { backends, bearer, drainAfterAll, enqueue, post, startCoordinator, type Harness } from '../support/http-fixtures.js';
import { listenersUp } from '../support/pg-listeners.js';

const WAIT_MS = 30_000;
/** "At once": far below WAIT_MS, with room for a loaded two-core machine. */
const PROMPT_MS = 5_000;
const BACKLOG = 2_000;

/** Lease calls of the polled coordinator, and each empty lease's answer as it resolves (the poll parks in that turn). */
class Leases {
  calls = 0;
  private parked: ((answer: LeaseWithNextDue) => void)[] = [];
  wrap(store: Store): Store {
    return new Proxy(store, {
      get: (target, property, receiver) => {
        if (property === 'jobLeaseWithNextDue') {
          return async (params: LeaseParams) => {
            this.calls += 1;
            const answer = await target.jobLeaseWithNextDue(params);
            if (answer.jobs.length === 0) this.parked.shift()?.(answer);
            return answer;
          };
        }
        const value: unknown = Reflect.get(target, property, receiver);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }
  /** Resolves with the answer of the next empty lease. */
  nextPark(): Promise<LeaseWithNextDue> {
    return new Promise((resolve) => this.parked.push(resolve));
  }
}

describe.each(backends)('the wake path of a kinds-filtered long poll ($name)', (backend) => {
  let h: Harness;
  let polled: FastifyInstance;
  let peer: FastifyInstance;
  let leases: Leases;
  drainAfterAll(backend);

  beforeEach(async () => {
    // No re-check, no reaper; every poll leases (emptyLeaseReuseMs 0), so each park is seen.
    const config = { reaperIntervalMs: 0, emptyLeaseReuseMs: 0 };
    h = await startCoordinator(config, { backend });
    leases = new Leases();
    polled = await buildCoordinator({ store: leases.wrap(h.store), logger: false, config });
    peer = await h.openPeer(config);
    if (h.backend === 'postgres') await listenersUp(2);
    const jobs = Array.from({ length: BACKLOG }, (_, i) => ({ kind: 'other', payload: { i }, idempotencyKey: `other-${i}` }));
    for (let from = 0; from < BACKLOG; from += 500) {
      expect((await post(peer, h.keys.producer, '/jobs/batch', { jobs: jobs.slice(from, from + 500) })).statusCode).toBe(200);
    }
  });
  afterEach(async () => {
    await polled.close();
    await h.close();
  });

  /** A poll for kind `wake` on the polled coordinator, once parked with no due time: only an announcement can wake it. */
  async function parkedPoll(): Promise<{ readonly answer: Promise<LightMyRequestResponse>; readonly leasesAtPark: number }> {
    const park = leases.nextPark();
    const answer = polled.inject({
      method: 'POST',
      url: '/lease',
      headers: bearer(h.keys.worker),
      payload: { workerId: 'w', kinds: ['wake'], waitMs: WAIT_MS },
    });
    const parkedWith = await park;
    // Nothing of kind `wake` is queued: no due timer is set, whatever the other kind has queued.
    expect(parkedWith.nextDue).toBeNull();
    return { answer, leasesAtPark: leases.calls };
  }

  for (const through of ['another coordinator', 'the same coordinator'] as const) {
    it(`starts the job enqueued through ${through} with one lease, at once`, async () => {
      const { answer, leasesAtPark } = await parkedPoll();
      const started = performance.now();
      const enqueued = await enqueue(through === 'another coordinator' ? peer : polled, h.keys.producer, { kind: 'wake', payload: {} });
      expect(enqueued.statusCode).toBe(202);
      const response = await answer;
      expect(performance.now() - started).toBeLessThan(PROMPT_MS);
      expect((response.json() as { jobs: { id: string }[] }).jobs.map((j) => j.id)).toEqual([(enqueued.json() as { id: string }).id]);
      // The announcement's one wake-up: a second (the coordinator's own NOTIFY heard back) or a timer would add leases.
      expect(leases.calls - leasesAtPark).toBe(1);
    });
  }
});
