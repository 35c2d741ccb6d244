/**
 * The worker: one lease loop per process that keeps up to `concurrency`
 * handlers busy. Each lease request asks for as many jobs as there are free
 * slots and long-polls (`waitMs`), so an idle worker is woken by new work at
 * once without polling, and a busy one gets many jobs per round trip.
 *
 * Shutdown never resets a lease. `stop()` stops leasing at once, lets the
 * running handlers finish within the grace period (their results are still
 * completed), then aborts the signals of the rest and leaves those jobs to
 * their leases: the coordinator hands them out again when they expire.
 */

import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { LeaseholdClient } from '../client/leasehold-client.js';
import { systemClock, type Clock } from '../core/clock.js';
import { crashPoint } from '../core/fault-points.js';
import { LIMITS } from '../protocol/limits.js';
import type { CarriedLease, LeasedJob } from '../protocol/schemas.js';
import type { WorkerCalls } from '../protocol/worker-calls.js';
import { CompletionBatcher } from './completion-batcher.js';
import type { Handler, HandlerMap } from './handler.js';
import { JobAbortedError } from './job-errors.js';
import { JobRun, type JobRunDeps } from './job-run.js';
import { errorFields, silentLogger, type WorkerLogger } from './logger.js';
import { DEFAULT_RETRY, sleep, withRetry, type RetryPolicy } from './retry.js';

/**
 * A library Queue as the worker sees it: its direct transport (leases, renewals, checkpoints, effects and
 * completions on the store, without HTTP), and (for types only) its kinds' payloads.
 */
export interface WorkerQueue<Kinds> {
  readonly workerTransport: WorkerCalls;
  readonly kinds?: Kinds;
}

/** What the worker leases through: a client of a coordinator over HTTP, or a library Queue (on its store). */
export type WorkerSource<Kinds> =
  | { readonly client: LeaseholdClient; readonly queue?: undefined }
  | { readonly queue: WorkerQueue<Kinds>; readonly client?: undefined };

/** Handlers by kind; with a Queue's kind map, each handler's payload is typed by its kind. */
export type TypedHandlers<Kinds> = { readonly [N in keyof Kinds & string]?: Handler<Kinds[N]> };

export type WorkerOptions<Kinds = Record<string, unknown>> = WorkerSource<Kinds> &
  WorkerSettings & { readonly handlers: string extends keyof Kinds ? HandlerMap : TypedHandlers<Kinds> };

export interface WorkerSettings {
  /** Shown in attempt history; default `<hostname>-<pid>-<random>`. */
  readonly workerId?: string;
  /** Handlers running at once. Default 8. */
  readonly concurrency?: number;
  /** Lease length requested for every job; renewed every third of it. Default 30 s. */
  readonly leaseMs?: number;
  /** Long-poll wait of each lease request. Default 10 s. */
  readonly waitMs?: number;
  /** Default grace period of stop(). Default 10 s. */
  readonly shutdownGraceMs?: number;
  readonly logger?: WorkerLogger;
  readonly retry?: RetryPolicy;
  readonly clock?: Clock;
  readonly random?: () => number;
  /** Redacted from error messages sent to the coordinator (e.g. the API key). */
  readonly secrets?: readonly string[];
}

export class Worker<Kinds = Record<string, unknown>> {
  readonly workerId: string;
  private readonly client: WorkerCalls;
  private readonly handlers: HandlerMap;
  /** The kinds it has handlers for: every lease it asks for names them. */
  private readonly kinds: string[];
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly waitMs: number;
  private readonly graceMs: number;
  private readonly logger: WorkerLogger;
  private readonly deps: JobRunDeps;
  private readonly batcher: CompletionBatcher;
  private readonly leaseAbort = new AbortController();
  /** Runs whose handler has not returned: each holds a slot. */
  private readonly active = new Map<JobRun, Promise<void>>();
  /** Runs whose outcome has not been answered yet. */
  private readonly unsettled = new Set<Promise<void>>();
  private wake: (() => void) | undefined;
  /** The loop's own lease call is out. */
  private leasing = false;
  /** A lease carried by a batch of completions is out (LeaseRider). */
  private riding = false;
  private stopping = false;
  private loopDone: Promise<void> | undefined;
  private running: Promise<void> | undefined;
  private stopped: Promise<void> | undefined;

  constructor(options: WorkerOptions<Kinds>) {
    const kinds = Object.keys(options.handlers);
    this.kinds = kinds;
    if (kinds.length === 0) throw new TypeError('a worker needs at least one handler');
    // The lease request names the kinds this worker can run; the protocol caps that list.
    if (kinds.length > 100) throw new RangeError('a worker can serve at most 100 kinds; split the handlers over several workers');
    this.client = options.client ?? options.queue.workerTransport;
    this.handlers = options.handlers as unknown as HandlerMap;
    this.workerId = options.workerId ?? `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.concurrency = positiveInteger('concurrency', options.concurrency ?? 8, LIMITS.maxLeaseBatch);
    this.leaseMs = positiveInteger('leaseMs', options.leaseMs ?? 30_000, LIMITS.maxLeaseMs);
    if (this.leaseMs < LIMITS.minLeaseMs) throw new RangeError(`leaseMs must be at least ${LIMITS.minLeaseMs}`);
    this.waitMs = Math.min(options.waitMs ?? 10_000, LIMITS.maxWaitMs);
    this.graceMs = options.shutdownGraceMs ?? 10_000;
    this.logger = options.logger ?? silentLogger;
    const retry = {
      policy: options.retry ?? DEFAULT_RETRY,
      clock: options.clock ?? systemClock,
      random: options.random ?? Math.random,
      onRetry: (error: unknown, delayMs: number, attempt: number) =>
        this.logger.warn({ ...errorFields(error), delayMs, attempt, workerId: this.workerId }, 'coordinator call failed; retrying'),
    };
    this.batcher = new CompletionBatcher(this.client, {
      retry,
      logger: this.logger,
      rider: { take: () => this.carriedLease(), answered: (jobs, sentAt) => this.carriedLeaseAnswered(jobs, sentAt) },
    });
    this.deps = {
      client: this.client,
      batcher: this.batcher,
      clock: retry.clock,
      retry,
      logger: this.logger,
      workerId: this.workerId,
      leaseMs: this.leaseMs,
      secrets: options.secrets ?? [],
    };
  }

  /** Handlers running now. */
  get activeCount(): number {
    return this.active.size;
  }

  /**
   * Leases and runs jobs until stop() has finished. Rejects (after stopping)
   * when the coordinator refuses the worker for good, e.g. a revoked key (401).
   */
  run(): Promise<void> {
    this.loopDone ??= this.loop();
    this.running ??= this.loopDone.then(
      async () => this.stopped,
      async (error: unknown) => {
        this.logger.error({ ...errorFields(error), workerId: this.workerId }, 'worker cannot lease; stopping');
        await this.stop();
        throw error;
      },
    );
    return this.running;
  }

  /**
   * Stops leasing at once, waits up to `graceMs` for running handlers (and
   * the delivery of their outcomes), then aborts the signals of those still
   * running. Leases are never reset. Resolves when done; calling it again
   * returns the same promise.
   */
  stop(options: { readonly graceMs?: number } = {}): Promise<void> {
    this.stopped ??= this.shutdown(options.graceMs ?? this.graceMs);
    return this.stopped;
  }

  private async loop(): Promise<void> {
    const kinds = this.kinds;
    const signal = this.leaseAbort.signal;
    while (!this.stopping) {
      const free = this.concurrency - this.active.size;
      // Finished handlers whose completions are still queued also bound new work, so a slow coordinator slows leasing.
      if (free <= 0 || this.riding || this.batcher.size >= this.concurrency * 4) {
        await this.nextWake();
        // Handlers that finish together free their slots in the same turn: let them all, then lease for all of them at once.
        await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      if (this.batcher.unsent > 0) {
        // The completions' flush is due and carries this lease (carriedLease wakes the loop either way).
        await this.nextWake();
        continue;
      }
      const sentAt = this.deps.clock.now();
      let answer: Awaited<ReturnType<WorkerCalls['leaseResponse']>>;
      this.leasing = true;
      try {
        answer = await withRetry(
          (callSignal) =>
            this.client.leaseResponse(
              { workerId: this.workerId, kinds, leaseMs: this.leaseMs, max: free, waitMs: this.waitMs },
              callSignal === undefined ? {} : { signal: callSignal },
            ),
          { ...this.deps.retry, signal },
        );
      } catch (error) {
        if (this.stopping) break;
        throw error;
      } finally {
        this.leasing = false;
      }
      const jobs = answer.jobs;
      if (jobs.length > 0) crashPoint('worker.after-claim');
      // A long poll can outlast a short lease: the lease began when the coordinator stopped holding the request, not when it was sent.
      for (const job of jobs) this.startRun(job, sentAt + answer.waitedMs);
      if (jobs.length === 0 && this.deps.clock.now() - sentAt < Math.min(this.waitMs, 50)) {
        // The coordinator answered an empty poll at once (waitMs 0, or a wake that found nothing): do not spin.
        await sleep(50, signal).catch(() => undefined);
      }
    }
  }

  /** The lease a batch of completions carries: the free slots, unless the loop is leasing or the worker stops. */
  private carriedLease(): CarriedLease | null {
    const free = this.concurrency - this.active.size;
    if (this.stopping || this.leasing || this.riding || free <= 0) {
      // A loop waiting for this flush leases on its own.
      this.signalWake();
      return null;
    }
    this.riding = true;
    return { workerId: this.workerId, kinds: this.kinds, leaseMs: this.leaseMs, max: free };
  }

  private carriedLeaseAnswered(jobs: readonly LeasedJob[], sentAt: number): void {
    this.riding = false;
    if (this.stopping) {
      // Past the point where stop() counts the running handlers: these are left to their leases, never reset.
      if (jobs.length > 0) this.logger.info({ workerId: this.workerId, jobs: jobs.length }, 'jobs leased while stopping; left to their leases');
      return;
    }
    if (jobs.length > 0) crashPoint('worker.after-claim');
    // Leased without a wait: the lease began after the request left.
    for (const job of jobs) this.startRun(job, sentAt);
    this.signalWake();
  }

  private startRun(job: LeasedJob, leaseStartBound: number): void {
    const handler = this.handlers[job.kind] as Handler<unknown> | undefined;
    const run = new JobRun(job, handler, leaseStartBound, this.deps);
    const { handlerDone, settled } = run.start();
    const slot = handlerDone.finally(() => {
      this.active.delete(run);
      this.signalWake();
    });
    this.active.set(run, slot);
    const tracked = settled.finally(() => {
      this.unsettled.delete(tracked);
      this.signalWake();
    });
    this.unsettled.add(tracked);
  }

  private nextWake(): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
    });
  }

  private signalWake(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private async shutdown(graceMs: number): Promise<void> {
    this.stopping = true;
    this.leaseAbort.abort(new JobAbortedError('shutdown', 'the worker is stopping'));
    this.signalWake();
    await this.loopDone?.catch(() => undefined);
    this.logger.info({ workerId: this.workerId, running: this.active.size, graceMs }, 'worker stopping');
    if (this.active.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const graceOver = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), graceMs);
      });
      const allDone = Promise.all([...this.active.values()]).then(() => false);
      const timedOut = await Promise.race([allDone, graceOver]);
      clearTimeout(timer);
      if (timedOut) {
        for (const run of this.active.keys()) run.abandon('shutdown', 'the shutdown grace period ended');
      }
    }
    // Outcomes of handlers that finished are still delivered; abandoned runs settle at once.
    await this.batcher.drain();
    while (this.unsettled.size > 0) await Promise.all([...this.unsettled]);
    this.logger.info({ workerId: this.workerId }, 'worker stopped');
  }
}

function positiveInteger(name: string, value: number, max: number): number {
  if (!Number.isInteger(value) || value < 1 || value > max) throw new RangeError(`${name} must be an integer from 1 to ${max}`);
  return value;
}
