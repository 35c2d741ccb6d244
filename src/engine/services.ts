/**
 * What every front of the queue shares over one store: the kind registry,
 * the long-poll and finish waiters, backpressure, the reaper, retention and the scheduler, wired to
 * the store's wake-ups. A coordinator builds them for itself; a library
 * Queue (src/queue/) builds them once and serves its calls and any HTTP
 * front registered on it from the same instance.
 */

import type { Logger } from './logger.js';
import type { Store } from '../store/store.js';
import { Backpressure } from './backpressure.js';
import type { CoordinatorConfig } from './config.js';
import { FinishWaiters } from './finish-waiters.js';
import { KindRegistry } from './kind-registry.js';
import { LeaseWaiters } from './lease-waiters.js';
import { JobEvents } from './job-events.js';
import { CoordinatorMetrics } from './metrics.js';
import { startReaper } from './reaper.js';
import { startRetention } from './retention.js';
import type { EngineContext } from './context.js';
import { Scheduler } from './scheduler.js';
import type { Clock } from '../core/clock.js';

/** Parked GET /jobs/{id}?waitMs requests per tenant before the next answers 503 overloaded (docs/design/http-api.md, waiting for an outcome). */
export const MAX_FINISH_WAITS_PER_TENANT = 1_000;

export interface QueueServices {
  readonly ctx: EngineContext;
  /** Parked long polls answer at once; the reaper stops. Safe to call twice. */
  stopWaiting(): Promise<void>;
  /** Releases what the services hold (after stopWaiting). The store stays open. */
  close(): Promise<void>;
}

export interface ServiceOptions {
  /** The clock recurring schedules are computed against; the store's own when absent (tests pass a fake one). */
  readonly scheduleClock?: Clock;
}

export function createServices(store: Store, config: CoordinatorConfig, log: Logger, options: ServiceOptions = {}): QueueServices {
  // Polls held back by a kind's maxConcurrent wake when a job of their tenant finishes (lease-waiters.ts).
  const waiters = new LeaseWaiters((onFreed) => store.watchFinished((job) => onFreed(job === null ? null : job.tenant)), config.emptyLeaseReuseMs);
  const metrics = new CoordinatorMetrics();
  const kinds = new KindRegistry(store, config.kindCacheMs, { maxSchemaBytes: config.maxSchemaBytes });
  const backpressure = new Backpressure(store, config.backpressure);
  const events = new JobEvents(metrics);
  const scheduler = new Scheduler({
    store,
    config,
    kinds,
    events,
    backpressure,
    log,
    ...(options.scheduleClock === undefined ? {} : { clock: options.scheduleClock }),
  });
  const ctx: EngineContext = {
    store,
    config,
    kinds,
    waiters,
    finishWaiters: new FinishWaiters(store, MAX_FINISH_WAITS_PER_TENANT),
    backpressure,
    metrics,
    events,
    scheduler,
  };
  // The store announces every job that becomes available (the reaper's requeues too) with its tenant and kind.
  const unwatch = store.watchAvailable((available) => waiters.notify(available));
  const reaper = startReaper({ store, intervalMs: config.reaperIntervalMs, log, events: ctx.events });
  const retention = startRetention({ store, intervalMs: config.retentionIntervalMs, periods: config.retention, batchSize: config.retentionBatchSize, log });
  scheduler.start();
  let stopped: Promise<void> | undefined;
  let closed: Promise<void> | undefined;
  const stopWaiting = (): Promise<void> => {
    stopped ??= (async () => {
      waiters.close();
      ctx.finishWaiters.close();
      await reaper.stop();
      await retention.stop();
      await scheduler.stop();
    })();
    return stopped;
  };
  return {
    ctx,
    stopWaiting,
    close() {
      closed ??= (async () => {
        await stopWaiting();
        unwatch();
        metrics.close();
        await ctx.kinds.close();
      })();
      return closed;
    },
  };
}
