/**
 * The reaper: a timer that asks the store to apply due lease expiries and
 * deadlines across all tenants. Leases also expire lazily inside every lease
 * transaction, so the reaper exists for queues nobody is leasing from (their
 * jobs must still reach `dead` or `unknown`, and their stats must be right).
 * Runs never overlap; a failed run is logged and the next tick tries again.
 */

import type { Logger } from './logger.js';
import type { ReapOutcome, Store } from '../store/store.js';
import type { JobEvents } from './job-events.js';
import { startPeriodicTask, type PeriodicTask } from './periodic-task.js';

export type Reaper = PeriodicTask;

export function startReaper(options: {
  readonly store: Store;
  readonly intervalMs: number;
  readonly log: Logger;
  /** Counts and logs what each run applied. */
  readonly events?: JobEvents;
}): Reaper {
  return startPeriodicTask({
    intervalMs: options.intervalMs,
    log: options.log,
    failure: 'reaper run failed',
    run: async () => {
      const outcome: ReapOutcome = await options.store.jobReapExpired();
      options.events?.reaped(options.log, outcome);
    },
  });
}
