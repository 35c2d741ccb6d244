/**
 * Per-kind limits and pause over HTTP, on every backend: PUT /kinds/{kind}
 * takes maxConcurrent and rate (bad values are 400 invalid_request naming the
 * field), POST /kinds/{kind}/pause and /resume are admin-only and
 * tenant-scoped, a paused kind answers 204 while another kind flows, a resume
 * and a freed maxConcurrent slot wake a parked long poll (the re-check is set
 * far beyond the test, so only the wake-up can deliver), and a rate holds
 * within 10% over a run of long polls.
 */

import { performance } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildCoordinator } from '../../src/coordinator/app.js';
import {
  backends,
  bearer,
  drainAfterAll,
  enqueue,
  errorCode,
  get,
  lease,
  post,
  putKind,
  startCoordinator,
  type Harness,
  type LeasedWire,
} from '../support/http-fixtures.js';
import { observingLeases } from '../support/observing-leases.js';

/** Hand-overs of the one maxConcurrent slot in the freed-slot test: one to warm up, four counted. */
const HAND_OVERS = 5;

describe.each(backends)('per-kind flow control over HTTP ($name)', (backend) => {
  let h: Harness;
  /** The coordinator the long polls go to, over a store that reports each parked poll. */
  let app: FastifyInstance;
  let parkedPolls = 0;
  let onParked: () => void = () => undefined;
  drainAfterAll(backend);

  beforeEach(async () => {
    h = await startCoordinator({ leaseRecheckMs: 60_000 }, { backend });
    parkedPolls = 0;
    const store = observingLeases(h.store, () => {
      parkedPolls += 1;
      onParked();
    });
    // Every poll leases (no reuse of an empty lease), so each park shows as an empty lease.
    app = await buildCoordinator({ store, logger: false, config: { leaseRecheckMs: 60_000, reaperIntervalMs: 0, emptyLeaseReuseMs: 0 } });
  });
  afterEach(async () => {
    await app.close();
    await h.close();
  });

  /** Resolves once `count` polls in all have found nothing and parked. */
  function parked(count: number): Promise<void> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (parkedPolls >= count) resolve();
      };
      onParked = check;
      check();
    });
  }

  function longPoll(body: Record<string, unknown>) {
    return app.inject({ method: 'POST', url: '/lease', headers: bearer(h.keys.worker), payload: { workerId: 'w', ...body } });
  }

  it('stores maxConcurrent and rate, answers them with paused, and refuses bad values naming the field', async () => {
    const saved = await putKind(h.app, h.keys.admin, 'sms', { maxConcurrent: 2, rate: { limit: 5, perMs: 1_000 } });
    expect(saved.statusCode).toBe(200);
    expect(saved.json()).toMatchObject({ kind: 'sms', maxConcurrent: 2, rate: { limit: 5, perMs: 1_000 }, paused: false });
    expect((await get(h.app, h.keys.producer, '/kinds/sms')).json()).toMatchObject({ maxConcurrent: 2, rate: { limit: 5, perMs: 1_000 } });
    const cleared = await putKind(h.app, h.keys.admin, 'sms', { maxConcurrent: null, rate: null });
    expect(cleared.json()).toMatchObject({ maxConcurrent: null, rate: null });
    for (const [body, field] of [
      [{ maxConcurrent: 0 }, 'maxConcurrent'],
      [{ maxConcurrent: 1.5 }, 'maxConcurrent'],
      [{ maxConcurrent: 'two' }, 'maxConcurrent'],
      [{ rate: { limit: 0, perMs: 1_000 } }, 'rate/limit'],
      [{ rate: { limit: 5 } }, 'rate'],
      [{ rate: { limit: 5, perMs: 0 } }, 'rate/perMs'],
      [{ rate: { limit: 5, perMs: 1_000, burst: 2 } }, 'rate'],
      [{ rate: 10 }, 'rate'],
    ] as const) {
      const refused = await putKind(h.app, h.keys.admin, 'sms', body);
      expect(refused.statusCode, JSON.stringify(body)).toBe(400);
      expect(errorCode(refused)).toBe('invalid_request');
      expect((refused.json() as { error: { message: string } }).error.message, JSON.stringify(body)).toContain(field);
    }
  });

  it('pauses and resumes only as an admin of the kind\u2019s tenant; an unknown kind is 404', async () => {
    await putKind(h.app, h.keys.admin, 'sms', {});
    expect((await post(h.app, h.keys.producer, '/kinds/sms/pause')).statusCode).toBe(403);
    expect((await post(h.app, h.keys.worker, '/kinds/sms/pause')).statusCode).toBe(403);
    const foreign = await post(h.app, h.keys.otherAdmin, '/kinds/sms/pause');
    expect(foreign.statusCode).toBe(404);
    expect(errorCode(foreign)).toBe('not_found');
    expect(errorCode(await post(h.app, h.keys.admin, '/kinds/nope/resume'))).toBe('not_found');
    expect(errorCode(await get(h.app, h.keys.admin, '/kinds/nope'))).toBe('not_found');
    const paused = await post(h.app, h.keys.admin, '/kinds/sms/pause', {});
    expect(paused.statusCode).toBe(200);
    expect(paused.json()).toMatchObject({ kind: 'sms', paused: true });
    expect((await get(h.app, h.keys.worker, '/kinds/sms')).json()).toMatchObject({ paused: true });
    expect(((await get(h.app, h.keys.admin, '/kinds')).json() as { kinds: { paused: boolean }[] }).kinds.map((k) => k.paused)).toEqual([true]);
    // Pausing again answers the kind as it is; a body with fields is refused.
    expect((await post(h.app, h.keys.admin, '/kinds/sms/pause')).json()).toMatchObject({ paused: true });
    expect((await post(h.app, h.keys.admin, '/kinds/sms/pause', { now: true })).statusCode).toBe(400);
    expect((await post(h.app, h.keys.admin, '/kinds/sms/resume')).json()).toMatchObject({ paused: false });
  });

  it('never leases a paused kind while another flows; enqueues still succeed; a resume wakes a parked poll', async () => {
    await putKind(h.app, h.keys.admin, 'sms', {});
    await putKind(h.app, h.keys.admin, 'email', {});
    await post(h.app, h.keys.admin, '/kinds/sms/pause');
    const held = await enqueue(h.app, h.keys.producer, { kind: 'sms', payload: {}, priority: 5 });
    expect(held.statusCode).toBe(202);
    await enqueue(h.app, h.keys.producer, { kind: 'email', payload: {} });
    expect((await lease(app, h.keys.worker, { max: 10 })).map((job) => job.kind)).toEqual(['email']);
    expect(await lease(app, h.keys.worker, { max: 10, kinds: ['sms'] })).toEqual([]);
    const pending = longPoll({ waitMs: 20_000, max: 10 });
    await parked(1);
    const resumedAt = performance.now();
    expect((await post(h.app, h.keys.admin, '/kinds/sms/resume')).statusCode).toBe(200);
    const response = await pending;
    expect(response.statusCode).toBe(200);
    expect((response.json() as { jobs: LeasedWire[] }).jobs.map((job) => job.id)).toEqual([(held.json() as { id: string }).id]);
    expect(performance.now() - resumedAt).toBeLessThan(2_000);
  });

  it('wakes a poll that maxConcurrent held back when a slot frees, and the freed slot is used within 20 ms', async () => {
    await putKind(h.app, h.keys.admin, 'sms', { maxConcurrent: 1 });
    const ids: string[] = [];
    for (let n = 0; n < HAND_OVERS + 1; n++) ids.push(((await enqueue(h.app, h.keys.producer, { kind: 'sms', payload: { n } })).json() as { id: string }).id);
    const [first] = await lease(app, h.keys.worker, { max: 5, kinds: ['sms'] });
    if (first === undefined) throw new Error('expected a lease');
    expect(first.id).toBe(ids[0]);
    let running: LeasedWire = first;
    const gaps: number[] = [];
    // The first hand-over also prepares the restricted path's statements on its connections, so it is not counted.
    for (const expected of ids.slice(1)) {
      const polls = parkedPolls;
      const pending = longPoll({ waitMs: 20_000, max: 5 });
      await parked(polls + 1);
      const done = await post(h.app, h.keys.worker, `/jobs/${running.id}/complete`, { token: running.token });
      expect(done.statusCode).toBe(200);
      const response = await pending;
      expect(response.statusCode).toBe(200);
      const [next] = (response.json() as { jobs: LeasedWire[] }).jobs;
      if (next === undefined) throw new Error('expected the next job');
      expect(next.id).toBe(expected);
      // By the store's clock: from the running job's commit to the next one's lease.
      const finishedAt = Date.parse(((await get(h.app, h.keys.admin, `/jobs/${running.id}`)).json() as { finishedAt: string }).finishedAt);
      const startedAt = Date.parse(((await get(h.app, h.keys.admin, `/jobs/${next.id}`)).json() as { startedAt: string }).startedAt);
      gaps.push(startedAt - finishedAt);
      running = next;
    }
    const counted = gaps.slice(1);
    expect(counted).toHaveLength(HAND_OVERS - 1);
    console.log(`freed-slot hand-overs (${h.backend}), ms from the commit to the next lease: ${counted.join(', ')}`);
    for (const gap of counted) {
      expect(gap).toBeGreaterThanOrEqual(0);
      // Each poll was woken by the completion: the re-check is a minute away and the poll's own wait 20 s.
      expect(gap).toBeLessThan(2_000);
    }
    // The median of the four counted hand-overs, so that one slow moment of a loaded machine does not decide.
    const sorted = [...counted].sort((a, b) => a - b);
    expect(((sorted[1] ?? 0) + (sorted[2] ?? 0)) / 2).toBeLessThan(20);
  });

  it('holds a rate within 10% over a run of long polls, each window woken by its due timer', async () => {
    // 24 windows on SQLite; PostgreSQL shares flow-limits.ts and differs only in the lock and the clock (now()), so 16 cover it.
    // One window's jobs are 4% (6% on PostgreSQL) of the expected count, so a window more or less at either end stays within
    // the 10%. The windows lie on a grid, so a window woken late on a loaded machine does not push the later ones back.
    const runMs = h.backend === 'sqlite' ? 6_000 : 4_000;
    const rate = { limit: 5, perMs: 250 };
    await putKind(h.app, h.keys.admin, 'rated', { rate });
    const admin = h.app;
    for (let from = 0; from < 300; from += 100) {
      const jobs = Array.from({ length: 100 }, (_, i) => ({ idempotencyKey: `r-${from + i}`, kind: 'rated', payload: { n: from + i } }));
      expect((await admin.inject({ method: 'POST', url: '/jobs/batch', headers: bearer(h.keys.producer), payload: { jobs } })).statusCode).toBeLessThan(300);
    }
    const leasedAt: number[] = [];
    let stop = false;
    const poller = async (): Promise<void> => {
      while (!stop) {
        const response = await longPoll({ waitMs: 2_000, max: 4, kinds: ['rated'] });
        const at = performance.now();
        if (response.statusCode === 200) for (const _ of (response.json() as { jobs: unknown[] }).jobs) leasedAt.push(at);
      }
    };
    const pollers = Array.from({ length: 4 }, () => poller());
    const started = performance.now();
    await new Promise((resolve) => setTimeout(resolve, runMs + 200));
    stop = true;
    await Promise.all(pollers);
    const first = Math.min(...leasedAt.filter((at) => at >= started));
    const within = leasedAt.filter((at) => at >= first && at < first + runMs).length;
    const expected = (runMs / rate.perMs) * rate.limit;
    expect(within).toBeGreaterThanOrEqual(expected * 0.9);
    expect(within).toBeLessThanOrEqual(expected * 1.1);
  }, 30_000);
});
