/**
 * Recurring schedules on every backend: the routes (PUT, GET, DELETE, their
 * validation, tenant scoping, the per-tenant cap and paging), and the
 * scheduler driven by a fake clock — each occurrence enqueued exactly once by
 * several coordinators over one database ticking at the same moment across
 * many minute boundaries, catch-up after downtime, the overlap rule, a
 * daylight-saving night, and GET showing the next and last occurrence. The
 * clock is the scheduler's (a ManualClock given to every coordinator), so no
 * test waits for a real minute; the stores keep their own clocks.
 */

import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { buildCoordinator } from '../../src/coordinator/app.js';
import { resolveConfig, type CoordinatorConfigInput } from '../../src/engine/config.js';
import { createServices, type QueueServices } from '../../src/engine/services.js';
import { ManualClock } from '../../src/core/clock.js';
import type { Schedule, ScheduleList } from '../../src/protocol/schemas.js';
import type { JobListItem, Store } from '../../src/store/store.js';
import { backends, bearer, createKey, drainAfterAll, type BackendFactory } from '../support/http-fixtures.js';

const MINUTE = 60_000;
const START = Date.parse('2026-03-02T10:00:30Z');

interface World {
  readonly clock: ManualClock;
  readonly stores: readonly Store[];
  readonly services: readonly QueueServices[];
  readonly apps: readonly FastifyInstance[];
  readonly admin: string;
  readonly otherAdmin: string;
  readonly producer: string;
  /** Every coordinator runs one scheduler pass at once; resolves when all have ended. */
  tickAll(): Promise<void>;
  put(name: string, body: Record<string, unknown>, key?: string): Promise<LightMyRequestResponse>;
  list(key?: string, query?: string): Promise<ScheduleList>;
  schedule(name: string): Promise<Schedule | undefined>;
  jobs(): Promise<JobListItem[]>;
  close(): Promise<void>;
}

async function openWorld(backend: BackendFactory, coordinators: number, config: CoordinatorConfigInput = {}, clock = new ManualClock(START)): Promise<World> {
  const instance = await backend.create();
  const input: CoordinatorConfigInput = { reaperIntervalMs: 0, schedulerMaxSleepMs: 0, kindCacheMs: 0, ...config };
  const resolved = resolveConfig(input);
  const stores = [instance.store, ...(await Promise.all(Array.from({ length: coordinators - 1 }, () => instance.openPeer())))];
  const [admin, otherAdmin, producer] = await Promise.all([
    createKey(instance.store, 't1', 'root', 'admin'),
    createKey(instance.store, 't2', 'root', 'admin'),
    createKey(instance.store, 't1', 'alice', 'producer'),
  ]);
  const log = pino({ level: 'silent' });
  const services = stores.map((store) => createServices(store, resolved, log, { scheduleClock: clock }));
  const apps = await Promise.all(stores.map((store, i) => buildCoordinator({ store, logger: false, config: input, services: services[i] as QueueServices })));
  const app = apps[0] as FastifyInstance;
  const world: World = {
    clock,
    stores,
    services,
    apps,
    admin,
    otherAdmin,
    producer,
    async tickAll() {
      await Promise.all(services.map((s) => s.ctx.scheduler.tick()));
    },
    put: (name, body, key = admin) => app.inject({ method: 'PUT', url: `/schedules/${encodeURIComponent(name)}`, headers: bearer(key), payload: body }),
    async list(key = admin, query = '') {
      const response = await app.inject({ method: 'GET', url: `/schedules${query}`, headers: bearer(key) });
      expect(response.statusCode, response.body).toBe(200);
      return response.json<ScheduleList>();
    },
    async schedule(name) {
      return (await world.list()).schedules.find((s) => s.name === name);
    },
    async jobs() {
      return [...(await instance.store.jobList({ scope: { tenant: 't1' }, limit: 1000 })).jobs];
    },
    async close() {
      for (const each of apps) await each.close();
      for (const each of services) {
        await each.stopWaiting();
        await each.close();
      }
      await instance.cleanup();
    },
  };
  return world;
}

async function mustPut(w: World, name: string, body: Record<string, unknown>): Promise<Schedule> {
  const response = await w.put(name, body);
  expect(response.statusCode, response.body).toBe(200);
  return response.json<Schedule>();
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** The real clock moved by `shift` ms: timers run for real, and a minute boundary can be made to come soon. */
class ShiftedClock extends ManualClock {
  shift = 0;
  override now(): number {
    return Date.now() + this.shift;
  }
}

describe.each(backends)('recurring schedules ($label)', (backend) => {
  drainAfterAll(backend);
  let world: World | undefined;
  afterEach(async () => {
    await world?.close();
    world = undefined;
  });

  describe('routes', () => {
    it('sets a schedule and answers it with its next occurrence; GET lists it, DELETE removes it', async () => {
      const w = (world = await openWorld(backend, 1));
      const saved = await mustPut(w, 'nightly', {
        kind: 'report',
        payload: { n: 1 },
        cron: '0 3 * * *',
        timezone: 'Europe/Berlin',
        overlap: 'allow',
        catchUp: 2,
      });
      expect(saved).toMatchObject({
        name: 'nightly',
        kind: 'report',
        payload: { n: 1 },
        cron: '0 3 * * *',
        timezone: 'Europe/Berlin',
        overlap: 'allow',
        catchUp: 2,
        // 03:00 CET on 2026-03-03
        nextAt: '2026-03-03T02:00:00.000Z',
        lastAt: null,
        lastJobId: null,
      });
      // Defaults: UTC, skip, no catch-up.
      const defaults = await mustPut(w, 'hourly', { kind: 'report', payload: null, cron: '@hourly' });
      expect(defaults).toMatchObject({ timezone: 'UTC', overlap: 'skip', catchUp: 0, nextAt: '2026-03-02T11:00:00.000Z' });
      expect((await w.list()).schedules.map((s) => s.name)).toEqual(['hourly', 'nightly']);

      // Replacing keeps the schedule and computes its next occurrence afresh.
      const replaced = await mustPut(w, 'nightly', { kind: 'report', payload: { n: 2 }, cron: '*/5 * * * *' });
      expect(replaced).toMatchObject({ payload: { n: 2 }, nextAt: '2026-03-02T10:05:00.000Z', createdAt: saved.createdAt });

      const deleted = await w.apps[0]?.inject({ method: 'DELETE', url: '/schedules/nightly', headers: bearer(w.admin) });
      expect(deleted?.statusCode).toBe(200);
      expect(deleted?.json<Schedule>().name).toBe('nightly');
      expect((await w.list()).schedules.map((s) => s.name)).toEqual(['hourly']);
      const again = await w.apps[0]?.inject({ method: 'DELETE', url: '/schedules/nightly', headers: bearer(w.admin) });
      expect(again?.statusCode).toBe(404);
      expect(again?.json()).toMatchObject({ error: { code: 'not_found' } });
    });

    it("keeps tenants apart: another tenant's schedule is a 404 and never listed", async () => {
      const w = (world = await openWorld(backend, 1));
      await mustPut(w, 'mine', { kind: 'k', payload: 1, cron: '* * * * *' });
      expect((await w.list(w.otherAdmin)).schedules).toEqual([]);
      const theirs = await w.apps[0]?.inject({ method: 'DELETE', url: '/schedules/mine', headers: bearer(w.otherAdmin) });
      expect(theirs?.statusCode).toBe(404);
      // The same name in the other tenant is another schedule.
      expect((await w.put('mine', { kind: 'k', payload: 2, cron: '@daily' }, w.otherAdmin)).statusCode).toBe(200);
      expect((await w.list()).schedules.map((s) => s.payload)).toEqual([1]);
      expect((await w.list(w.otherAdmin)).schedules.map((s) => s.payload)).toEqual([2]);
      // Admins only.
      expect((await w.put('p', { kind: 'k', payload: 1, cron: '* * * * *' }, w.producer)).statusCode).toBe(403);
      expect((await w.apps[0]?.inject({ method: 'GET', url: '/schedules', headers: bearer(w.producer) }))?.statusCode).toBe(403);
    });

    describe('validation', () => {
      // Every case leaves nothing stored, so the cases share one coordinator.
      let shared: World | undefined;
      afterAll(async () => {
        await shared?.close();
      });
      it.each([
        ['a bad cron', 'ok', { cron: '61 * * * *' }, 'body/cron'],
        ['a cron of four fields', 'ok', { cron: '* * * *' }, 'body/cron'],
        ['a cron that never matches', 'ok', { cron: '0 0 30 2 *' }, 'body/cron'],
        ['an unknown time zone', 'ok', { timezone: 'Mars/Olympus_Mons' }, 'body/timezone'],
        ['a bad overlap', 'ok', { overlap: 'sometimes' }, 'body/overlap'],
        ['a negative catchUp', 'ok', { catchUp: -1 }, 'body/catchUp'],
        ['too large a catchUp', 'ok', { catchUp: 101 }, 'body/catchUp'],
        ['a missing kind', 'ok', { kind: undefined }, 'body/kind'],
        ['an unknown field', 'ok', { extra: 1 }, 'body/extra'],
        ['a bad name', '-bad', {}, 'params/name'],
        ['a name with a space', 'a b', {}, 'params/name'],
        ['too long a name', 'n'.repeat(129), {}, 'params/name'],
      ])('answers 400 invalid_request naming the field for %s', async (_label, name, change, field) => {
        shared ??= await openWorld(backend, 1);
        const w = shared;
        const body: Record<string, unknown> = { kind: 'k', payload: {}, cron: '* * * * *', ...change };
        for (const [key, value] of Object.entries(body)) if (value === undefined) delete body[key];
        const response = await w.put(name, body);
        expect(response.statusCode, response.body).toBe(400);
        const error = response.json<{ error: { code: string; message: string } }>().error;
        expect(error.code).toBe('invalid_request');
        expect(error.message).toContain(field);
        expect((await w.list()).schedules).toEqual([]);
      });
    });

    it("applies the kind's rules to the payload, as an enqueue would", async () => {
      const w = (world = await openWorld(backend, 1));
      const kind = await w.apps[0]?.inject({
        method: 'PUT',
        url: '/kinds/mail',
        headers: bearer(w.admin),
        payload: { payloadSchema: { type: 'object', required: ['to'] }, maxPayloadBytes: 64 },
      });
      expect(kind?.statusCode).toBe(200);
      expect((await w.put('s', { kind: 'mail', payload: {}, cron: '@daily' })).json()).toMatchObject({ error: { code: 'invalid_payload' } });
      expect((await w.put('s', { kind: 'mail', payload: { to: 'x'.repeat(100) }, cron: '@daily' })).statusCode).toBe(413);
      expect((await w.put('s', { kind: 'other', payload: {}, cron: '@daily' })).json()).toMatchObject({ error: { code: 'unknown_kind' } });
      expect((await w.put('s', { kind: 'mail', payload: { to: 'a@b' }, cron: '@daily' })).statusCode).toBe(200);
    });

    it('caps the schedules of a tenant, pages the list, and lets a full tenant replace one', async () => {
      const w = (world = await openWorld(backend, 1, { maxSchedulesPerTenant: 3 }));
      for (const name of ['a', 'b', 'c']) await mustPut(w, name, { kind: 'k', payload: null, cron: '@daily' });
      const refused = await w.put('d', { kind: 'k', payload: null, cron: '@daily' });
      expect(refused.statusCode).toBe(400);
      expect(refused.json()).toMatchObject({ error: { code: 'invalid_request' } });
      expect(refused.json<{ error: { message: string } }>().error.message).toContain('maxSchedulesPerTenant');
      expect((await w.put('a', { kind: 'k', payload: 1, cron: '@daily' })).statusCode).toBe(200);
      // The other tenant has its own allowance.
      expect((await w.put('d', { kind: 'k', payload: null, cron: '@daily' }, w.otherAdmin)).statusCode).toBe(200);

      const first = await w.list(w.admin, '?limit=2');
      expect(first.schedules.map((s) => s.name)).toEqual(['a', 'b']);
      expect(first.nextCursor).toBe('b');
      const second = await w.list(w.admin, `?limit=2&cursor=${first.nextCursor ?? ''}`);
      expect(second.schedules.map((s) => s.name)).toEqual(['c']);
      expect(second.nextCursor).toBeNull();
      const bad = await w.apps[0]?.inject({ method: 'GET', url: '/schedules?limit=5000', headers: bearer(w.admin) });
      expect(bad?.statusCode).toBe(400);
    });
  });

  describe('the scheduler', () => {
    it('enqueues each occurrence exactly once with several coordinators ticking at the same moment, minute after minute', async () => {
      const coordinators = backend.name === 'postgres' ? 4 : 2;
      const w = (world = await openWorld(backend, coordinators));
      const names = ['m1', 'm2', 'm3'];
      for (const name of names) await mustPut(w, name, { kind: 'tick', payload: { name }, cron: '* * * * *', overlap: 'allow' });
      const minutes = 30;
      let boundary = START - (START % MINUTE);
      for (let i = 1; i <= minutes; i++) {
        boundary += MINUTE;
        // Across the boundary: every coordinator ticks just before it (nothing is due), then at it or a little after.
        w.clock.set(boundary - 1);
        await w.tickAll();
        w.clock.set(boundary + (i % 4) * 250);
        await w.tickAll();
      }
      const jobs = await w.jobs();
      expect(jobs).toHaveLength(minutes * names.length);
      for (const name of names) {
        const schedule = await w.schedule(name);
        expect(schedule?.lastAt).toBe(iso(boundary));
        expect(schedule?.nextAt).toBe(iso(boundary + MINUTE));
        expect(jobs.map((j) => j.id)).toContain(schedule?.lastJobId);
      }
      // A pass that comes again finds nothing left to do.
      await w.tickAll();
      expect(await w.jobs()).toHaveLength(minutes * names.length);
    });

    it('after downtime, catchUp 0 enqueues only the current occurrence and catchUp N the last N missed ones too', async () => {
      const w = (world = await openWorld(backend, 1));
      await mustPut(w, 'none', { kind: 'none', payload: null, cron: '* * * * *', overlap: 'allow', catchUp: 0 });
      await mustPut(w, 'three', { kind: 'three', payload: null, cron: '* * * * *', overlap: 'allow', catchUp: 3 });
      await mustPut(w, 'daily', { kind: 'daily', payload: null, cron: '0 3 * * *', overlap: 'allow', catchUp: 0 });
      // Ten minutes without a pass, then one, five seconds after the minute.
      const tenth = START - (START % MINUTE) + 10 * MINUTE;
      w.clock.set(tenth + 5_000);
      await w.tickAll();
      const kinds = (await w.jobs()).map((j) => j.kind).sort();
      expect(kinds).toEqual(['none', 'three', 'three', 'three', 'three']);
      expect((await w.schedule('none'))?.nextAt).toBe(iso(tenth + MINUTE));
      expect((await w.schedule('three'))?.lastAt).toBe(iso(tenth));
      // 03:00 passed five hours ago with nobody serving it: missed, skipped, and due again tomorrow.
      w.clock.set(Date.parse('2026-03-03T08:00:00Z'));
      await w.tickAll();
      expect((await w.jobs()).filter((j) => j.kind === 'daily')).toEqual([]);
      expect((await w.schedule('daily'))?.nextAt).toBe('2026-03-04T03:00:00.000Z');
    });

    it('overlap "skip" enqueues nothing while the last occurrence is queued or running; "allow" does', async () => {
      const w = (world = await openWorld(backend, 1));
      const store = w.stores[0] as Store;
      await mustPut(w, 'skip', { kind: 'skip', payload: null, cron: '* * * * *', overlap: 'skip' });
      await mustPut(w, 'allow', { kind: 'allow', payload: null, cron: '* * * * *', overlap: 'allow' });
      let minute = START - (START % MINUTE);
      const tickAt = async (): Promise<void> => {
        minute += MINUTE;
        w.clock.set(minute);
        await w.tickAll();
      };
      const count = async (kind: string): Promise<number> => (await w.jobs()).filter((j) => j.kind === kind).length;

      await tickAt();
      expect([await count('skip'), await count('allow')]).toEqual([1, 1]);
      await tickAt(); // the first skip job is still queued
      expect([await count('skip'), await count('allow')]).toEqual([1, 2]);
      const [leased] = await store.jobLease({ tenant: 't1', workerId: 'w', kinds: ['skip'], leaseMs: 60_000, max: 1 });
      if (leased === undefined) throw new Error('nothing to lease');
      await tickAt(); // running
      expect(await count('skip')).toBe(1);
      expect((await w.schedule('skip'))?.nextAt).toBe(iso(minute + MINUTE));
      expect((await store.jobComplete({ tenant: 't1', id: leased.id, token: leased.token })).kind).toBe('completed');
      await tickAt(); // finished: the next occurrence is enqueued
      expect([await count('skip'), await count('allow')]).toEqual([2, 4]);
      const skip = await w.schedule('skip');
      expect(skip?.lastAt).toBe(iso(minute));
      expect(skip?.lastJobId).not.toBe(leased.id);
    });

    it('runs a time skipped by daylight saving once, at the next valid time, and moves on by local time', async () => {
      const w = (world = await openWorld(backend, 1));
      w.clock.set(Date.parse('2026-03-07T12:00:00Z'));
      const saved = await mustPut(w, 'dst', { kind: 'dst', payload: null, cron: '30 2 * * *', timezone: 'America/New_York' });
      // 02:30 does not exist on 2026-03-08 in New York: 03:00 EDT.
      expect(saved.nextAt).toBe('2026-03-08T07:00:00.000Z');
      w.clock.set(Date.parse('2026-03-08T07:00:00Z'));
      await w.tickAll();
      await w.tickAll();
      expect(await w.jobs()).toHaveLength(1);
      const after = await w.schedule('dst');
      expect(after).toMatchObject({ lastAt: '2026-03-08T07:00:00.000Z', nextAt: '2026-03-09T06:30:00.000Z' });
    });

    it('runs a time repeated by daylight saving once, at its first instant (Europe/Berlin, fall back)', async () => {
      const w = (world = await openWorld(backend, 2));
      w.clock.set(Date.parse('2026-10-24T12:00:00Z'));
      const saved = await mustPut(w, 'fall', { kind: 'fall', payload: null, cron: '30 2 * * *', timezone: 'Europe/Berlin', overlap: 'allow' });
      // 02:30 comes twice on 2026-10-25: 02:30 CEST (00:30Z), then 02:30 CET (01:30Z).
      expect(saved.nextAt).toBe('2026-10-25T00:30:00.000Z');
      for (const instant of ['2026-10-25T00:30:00Z', '2026-10-25T01:00:00Z', '2026-10-25T01:30:00Z', '2026-10-25T01:31:00Z']) {
        w.clock.set(Date.parse(instant));
        await w.tickAll();
      }
      expect(await w.jobs()).toHaveLength(1);
      expect(await w.schedule('fall')).toMatchObject({ lastAt: '2026-10-25T00:30:00.000Z', nextAt: '2026-10-26T01:30:00.000Z' });
    });

    it('wakes by its own timer at the next occurrence, not by polling', async () => {
      const clock = new ShiftedClock();
      const w = (world = await openWorld(backend, 1, { schedulerMaxSleepMs: 60_000 }, clock));
      // The scheduler's clock reads 2.5 s before a minute boundary: room for the PUT on a loaded machine.
      clock.shift = MINUTE - 2_500 - (Date.now() % MINUTE);
      const store = w.stores[0] as Store;
      let passes = 0;
      const scheduleDue = store.scheduleDue.bind(store);
      store.scheduleDue = (params) => {
        passes++;
        return scheduleDue(params);
      };
      const enqueued = new Promise<number>((resolve) => {
        const unwatch = store.watchAvailable((available) => {
          if (available?.kind === 'timer') {
            unwatch();
            resolve(clock.now());
          }
        });
      });
      const saved = await mustPut(w, 'soon', { kind: 'timer', payload: null, cron: '* * * * *' });
      const due = Date.parse(saved.nextAt ?? '');
      expect(due - clock.now()).toBeLessThan(2_500);
      const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no job within 10 s')), 10_000));
      const at = await Promise.race([enqueued, timeout]);
      expect(at).toBeGreaterThanOrEqual(due);
      // SQLite announces a write when it is queued: the pass that made it has committed once a later pass ran.
      await w.services[0]?.ctx.scheduler.tick();
      expect(await w.jobs()).toHaveLength(1);
      // The start, the PUT, the timer (two reads: the due schedule, then none) and the tick above: five reads.
      // A timer that fires a millisecond early adds a pass that finds nothing due and sleeps the rest; a poll
      // would read hundreds of times in these 2.5 s.
      expect(passes).toBeLessThanOrEqual(8);
      expect((await w.schedule('soon'))?.nextAt).toBe(iso(due + MINUTE));
    });

    it('serves other tenants in the same batch as one tenant with many due schedules', async () => {
      const w = (world = await openWorld(backend, 1, { maxSchedulesPerTenant: 1_000 }));
      const store = w.stores[0] as Store;
      const now = (await w.services[0]?.ctx.scheduler.now()) ?? START;
      const upsert = (tenant: string, name: string, nextAt: number) =>
        store.scheduleUpsert({
          tenant,
          name,
          owner: 'root',
          kind: 'k',
          payload: null,
          payloadJson: 'null',
          cron: '* * * * *',
          timezone: 'UTC',
          overlap: 'allow',
          catchUp: 0,
          nextAt,
          now,
          maxPerTenant: 1_000,
        });
      for (let i = 0; i < 150; i += 50)
        await Promise.all(Array.from({ length: 50 }, (_, j) => upsert('t1', `s${String(i + j).padStart(3, '0')}`, START - 10 * MINUTE)));
      await upsert('t2', 'late', START - MINUTE);
      const batch = await store.scheduleDue({ now: START, limit: 100, perTenant: 10 });
      expect(batch.filter((s) => s.tenant === 't1')).toHaveLength(10);
      expect(batch.map((s) => `${s.tenant}/${s.name}`)).toContain('t2/late');
      expect(await store.scheduleEarliest()).toBe(START - 10 * MINUTE);
      // A pass fires them all, in bounded batches.
      w.clock.set(START - (START % MINUTE) + 5_000);
      await w.tickAll();
      expect(await store.scheduleDue({ now: START, limit: 100, perTenant: 10 })).toEqual([]);
    });

    it('passes over an occurrence whose job the kind rules now refuse, and keeps going', async () => {
      const w = (world = await openWorld(backend, 1));
      await mustPut(w, 's', { kind: 'mail', payload: { to: 1 }, cron: '* * * * *' });
      const kind = await w.apps[0]?.inject({
        method: 'PUT',
        url: '/kinds/mail',
        headers: bearer(w.admin),
        payload: { payloadSchema: { type: 'object', properties: { to: { type: 'string' } } } },
      });
      expect(kind?.statusCode).toBe(200);
      const next = START - (START % MINUTE) + MINUTE;
      w.clock.set(next);
      await w.tickAll();
      expect(await w.jobs()).toEqual([]);
      expect((await w.schedule('s'))?.nextAt).toBe(iso(next + MINUTE));
    });
  });
});
