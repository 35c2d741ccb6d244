/**
 * What every engine operation runs against: the store and the services built
 * once over it (services.ts) — kind registry, long-poll and finish waiters,
 * backpressure, metrics, the job events and the scheduler. The HTTP routes
 * and a library Queue hold the same context and call the same operations.
 */

import type { Store } from '../store/store.js';
import type { Backpressure } from './backpressure.js';
import type { CoordinatorConfig } from './config.js';
import type { FinishWaiters } from './finish-waiters.js';
import type { JobEvents } from './job-events.js';
import type { KindRegistry } from './kind-registry.js';
import type { LeaseWaiters } from './lease-waiters.js';
import type { CoordinatorMetrics } from './metrics.js';

export interface EngineContext {
  readonly store: Store;
  readonly config: CoordinatorConfig;
  readonly kinds: KindRegistry;
  readonly waiters: LeaseWaiters;
  /** Parked waits for a job to finish (GET /jobs/{id}?waitMs, Queue.waitFor). */
  readonly finishWaiters: FinishWaiters;
  readonly backpressure: Backpressure;
  readonly metrics: CoordinatorMetrics;
  /** Counts and logs the transitions the engine applies (job-events.ts). */
  readonly events: JobEvents;
  /** Recurring schedules: the clock they are computed against, and the timer a change replans (scheduler.ts). */
  readonly scheduler: SchedulerHandle;
}

/** What engine operations and tests use of the scheduler (scheduler.ts). */
export interface SchedulerHandle {
  /** The time schedules are computed against. */
  now(): Promise<number>;
  /** A schedule changed here: plan the timer again. */
  poke(): void;
  /** One pass now, after any in progress. */
  tick(): Promise<void>;
}
