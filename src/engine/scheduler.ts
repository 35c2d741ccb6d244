/**
 * The scheduler: enqueues the occurrences of recurring schedules
 * (src/store/schedules.ts, src/core/cron.ts). Every coordinator and every
 * library Queue runs one over its store; they need no leader, because each
 * occurrence's job has the occurrence in its idempotency key and the store's
 * scheduleFire moves a schedule on only from the nextAt the pass read.
 *
 * A pass reads the due schedules of every tenant in batches of BATCH with at
 * most PER_TENANT of one tenant per batch (so one tenant's thousand schedules
 * due at the same minute hold another tenant's up by one batch, not by a
 * thousand fires), fires each, and then sleeps until the earliest nextAt of
 * any schedule — one timer, never a poll — but at most `maxSleepMs`, so that
 * schedules set through another coordinator are noticed. A PUT or DELETE here
 * replans the timer at once.
 *
 * What a pass enqueues for one schedule (dueOccurrences in core/cron.ts): the
 * most recent due occurrence when the pass is at most ON_TIME_MS late for it,
 * and the last `catchUp` older ones. With overlap "skip" it enqueues at most
 * the latest of those, and none while the job of the last occurrence it
 * enqueued is still queued or running. An occurrence whose job cannot be
 * prepared (the kind is no longer registered, the payload no longer fits its
 * schema) is logged and passed over.
 */

import type { Logger } from './logger.js';
import type { Clock } from '../core/clock.js';
import { dueOccurrences, parseCron } from '../core/cron.js';
import { scheduleJobKey, type ScheduleRecord } from '../store/schedules.js';
import type { EnqueueParams, Store } from '../store/store.js';
import type { Principal } from './principal.js';
import type { CoordinatorConfig } from './config.js';
import { prepareEnqueueWith, recordEnqueues } from './enqueue.js';
import type { Backpressure } from './backpressure.js';
import type { JobEvents } from './job-events.js';
import type { KindRegistry } from './kind-registry.js';
import type { SchedulerHandle } from './context.js';

/** Due schedules read and fired together. */
export const SCHEDULER_BATCH = 100;
/** At most this many of one tenant's schedules in one batch. */
export const SCHEDULER_PER_TENANT = 10;
/** Batches per pass; more waits for the next pass, which follows at once. */
const MAX_BATCHES_PER_PASS = 50;
/** How long to wait before looking again when a pass left due schedules it could not fire (a store error). */
const RETRY_MS = 1_000;

export interface SchedulerOptions {
  readonly store: Store;
  readonly config: CoordinatorConfig;
  readonly kinds: KindRegistry;
  readonly events: JobEvents;
  readonly backpressure: Backpressure;
  readonly log: Logger;
  /** The clock occurrences are judged by; the store's own (store.now()) when absent. */
  readonly clock?: Clock;
}

export class Scheduler implements SchedulerHandle {
  private chain: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly options: SchedulerOptions) {}

  /** The time schedules are computed against. */
  now(): Promise<number> {
    return this.options.clock === undefined ? this.options.store.now() : Promise.resolve(this.options.clock.now());
  }

  /** Starts the timer (nothing when schedulerMaxSleepMs is 0). */
  start(): void {
    if (this.options.config.schedulerMaxSleepMs > 0) this.schedule(0);
  }

  /**
   * Runs one pass after any pass in progress, and resolves when it has ended
   * (a failure is logged, never thrown). Tests with a fake clock call it
   * directly; the timer calls it too.
   */
  tick(): Promise<void> {
    const pass = this.chain.then(async () => {
      if (this.stopped) return;
      const timed = this.options.config.schedulerMaxSleepMs > 0;
      let delay = this.options.config.schedulerMaxSleepMs;
      try {
        const more = await this.pass();
        if (timed) delay = more ? 0 : await this.untilEarliest();
      } catch (error) {
        this.options.log.warn({ err: error }, 'scheduler pass failed');
        delay = Math.min(delay, RETRY_MS);
      }
      if (timed) this.schedule(delay);
    });
    this.chain = pass;
    return pass;
  }

  /** A schedule was set or deleted through this coordinator: plan the timer again. */
  poke(): void {
    if (this.options.config.schedulerMaxSleepMs > 0 && !this.stopped) void this.tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.chain;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.tick();
    }, delayMs);
    this.timer.unref();
  }

  private async untilEarliest(): Promise<number> {
    const max = this.options.config.schedulerMaxSleepMs;
    const earliest = await this.options.store.scheduleEarliest();
    if (earliest === null) return max;
    const wait = earliest - (await this.now());
    // Still due after a pass: a fire failed; look again shortly rather than at once.
    return wait <= 0 ? Math.min(max, RETRY_MS) : Math.min(max, wait);
  }

  /** One pass over what is due now; true when it stopped with due schedules left. */
  private async pass(): Promise<boolean> {
    const now = await this.now();
    for (let batch = 0; batch < MAX_BATCHES_PER_PASS; batch++) {
      if (this.stopped) return false;
      const due = await this.options.store.scheduleDue({ now, limit: SCHEDULER_BATCH, perTenant: SCHEDULER_PER_TENANT });
      if (due.length === 0) return false;
      const results = await Promise.allSettled(due.map((schedule) => this.fire(schedule, now)));
      const failed = results.filter((r) => r.status === 'rejected');
      for (const failure of failed) this.options.log.warn({ err: (failure as PromiseRejectedResult).reason }, 'a schedule could not be fired');
      // A failed fire leaves its schedule due; the next batch would read it again at once. A short batch
      // does not mean nothing is left: the per-tenant cap shortens it while one tenant has more due.
      if (failed.length > 0) return false;
      await new Promise((resolve) => setImmediate(resolve));
    }
    return true;
  }

  private async fire(schedule: ScheduleRecord, now: number): Promise<void> {
    const { store, log } = this.options;
    const expectedNextAt = schedule.nextAt;
    if (expectedNextAt === null) return;
    const parsed = parseCron(schedule.cron);
    if (!parsed.ok) {
      // Stored expressions were parsed when they were set; one that no longer parses is never due again.
      log.warn({ tenant: schedule.tenant, schedule: schedule.name }, 'a stored cron expression does not parse');
      await store.scheduleFire({ tenant: schedule.tenant, name: schedule.name, expectedNextAt, nextAt: null, jobs: [], lastAt: null });
      return;
    }
    const due = dueOccurrences(parsed.cron, schedule.timezone, { nextAt: expectedNextAt, now, catchUp: schedule.catchUp });
    let occurrences = due.enqueue;
    if (schedule.overlap === 'skip' && occurrences.length > 0) {
      occurrences = occurrences.slice(-1);
      if (await this.previousStillLive(schedule)) occurrences = [];
    }
    let jobs: EnqueueParams[] = [];
    if (occurrences.length > 0) {
      try {
        const kinds = await this.options.kinds.forTenant(schedule.tenant);
        const principal: Principal = { keyId: `schedule:${schedule.name}`, tenant: schedule.tenant, user: schedule.owner, role: 'admin' };
        jobs = occurrences.map((occurrence) =>
          prepareEnqueueWith(kinds, this.options, principal, { kind: schedule.kind, payload: schedule.payload }, scheduleJobKey(schedule.name, occurrence)),
        );
      } catch (error) {
        log.warn({ err: error, tenant: schedule.tenant, schedule: schedule.name }, 'a schedule\u2019s job was refused; its occurrences are passed over');
        occurrences = [];
      }
    }
    const outcome = await store.scheduleFire({
      tenant: schedule.tenant,
      name: schedule.name,
      expectedNextAt,
      nextAt: due.next,
      jobs,
      lastAt: occurrences.at(-1) ?? null,
    });
    if (outcome.kind === 'stale') return;
    recordEnqueues(
      this.options,
      schedule.tenant,
      jobs.flatMap((params, i) => {
        const enqueued = outcome.outcomes[i];
        return enqueued === undefined ? [] : [{ params, outcome: enqueued }];
      }),
    );
  }

  /** The job of the last occurrence enqueued is still queued or running. */
  private async previousStillLive(schedule: ScheduleRecord): Promise<boolean> {
    if (schedule.lastJobId === null) return false;
    const job = await this.options.store.jobGet({ scope: { tenant: schedule.tenant }, id: schedule.lastJobId });
    return job !== null && (job.status === 'queued' || job.status === 'running');
  }
}
