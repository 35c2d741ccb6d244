/**
 * Recurring schedules in the library mode, over a SQLite file and a
 * PostgreSQL schema: putSchedule, listSchedules and deleteSchedule on a
 * Queue answer as the HTTP routes do (errors thrown as LeaseholdError with
 * the same codes), and two Queues over one database, each with its own
 * scheduler on a shared fake clock, enqueue every occurrence once.
 */

import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/core/clock.js';
import { LeaseholdError, openQueue, type Queue } from '../../src/index.js';
import { queueTargets } from '../support/queue-targets.js';

const MINUTE = 60_000;

const targets = queueTargets('queue-schedules');

describe.each(targets)('Queue schedules ($name)', (target) => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
  });

  async function twoQueues(clock: ManualClock): Promise<[Queue, Queue]> {
    const created = target.create();
    cleanups.push(created.cleanup);
    const open = async (): Promise<Queue> => {
      const queue = await openQueue({ db: created.db, scheduleClock: clock, config: { schedulerMaxSleepMs: 0, reaperIntervalMs: 0 } });
      cleanups.push(() => queue.close());
      return queue;
    };
    const a = await open();
    return [a, await open()];
  }

  it('sets, lists and deletes schedules, and refuses bad ones with the API codes', async () => {
    const clock = new ManualClock(Date.parse('2026-06-01T12:00:10Z'));
    const [queue] = await twoQueues(clock);
    const saved = await queue.putSchedule('digest', { kind: 'report', payload: { pages: 1 }, cron: '0 8 * * MON', timezone: 'Europe/Berlin' });
    // 2026-06-01 is a Monday, past 08:00 in Berlin: next Monday, 08:00 CEST.
    expect(saved).toMatchObject({ name: 'digest', nextAt: '2026-06-08T06:00:00.000Z', lastAt: null, overlap: 'skip', catchUp: 0 });
    expect((await queue.listSchedules()).schedules.map((s) => s.name)).toEqual(['digest']);
    const refused = await queue.putSchedule('digest', { kind: 'report', payload: null, cron: '0 8 * * FUNDAY' }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(LeaseholdError);
    expect(refused).toMatchObject({ code: 'invalid_request' });
    expect((refused as Error).message).toContain('body/cron');
    const zone = await queue
      .putSchedule('digest', { kind: 'report', payload: null, cron: '@daily', timezone: 'Nowhere/Land' })
      .catch((error: unknown) => error);
    expect((zone as Error).message).toContain('body/timezone');
    expect((await queue.deleteSchedule('digest')).name).toBe('digest');
    await expect(queue.deleteSchedule('digest')).rejects.toMatchObject({ code: 'not_found' });
    expect((await queue.listSchedules()).schedules).toEqual([]);
  });

  it('enqueues each occurrence once with two Queues over one database', async () => {
    const start = Date.parse('2026-06-01T12:00:10Z');
    const clock = new ManualClock(start);
    const [a, b] = await twoQueues(clock);
    await a.putSchedule('every-minute', { kind: 'tick', payload: {}, cron: '* * * * *', overlap: 'allow' });
    expect((await b.listSchedules()).schedules.map((s) => s.name)).toEqual(['every-minute']);
    let boundary = start - (start % MINUTE);
    for (let i = 0; i < 12; i++) {
      boundary += MINUTE;
      clock.set(boundary + (i % 3) * 100);
      await Promise.all([a.services.ctx.scheduler.tick(), b.services.ctx.scheduler.tick()]);
    }
    const jobs = (await a.list({ kind: 'tick', limit: 100 })).jobs;
    expect(jobs).toHaveLength(12);
    const [schedule] = (await b.listSchedules()).schedules;
    expect(schedule).toMatchObject({ lastAt: new Date(boundary).toISOString(), nextAt: new Date(boundary + MINUTE).toISOString() });
    expect(jobs.map((j) => j.id)).toContain(schedule?.lastJobId);
  });
});
