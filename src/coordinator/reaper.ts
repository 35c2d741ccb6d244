/**
 * The reaper: a timer that asks the store to apply due lease expiries and
 * deadlines across all tenants. Leases also expire lazily inside every lease
 * transaction, so the reaper exists for queues nobody is leasing from (their
 * jobs must still reach `dead` or `unknown`, and their stats must be right).
 * Runs never overlap; a failed run is logged and the next tick tries again.
 */

import type { FastifyBaseLogger } from 'fastify';
import type { ReapOutcome, Store } from '../store/store.js';
import type { JobEvents } from './job-events.js';

export interface Reaper {
  /** Stops the timer and waits for a run in progress. */
  stop(): Promise<void>;
}

export function startReaper(options: {
  readonly store: Store;
  readonly intervalMs: number;
  readonly log: FastifyBaseLogger;
  /** Counts and logs what each run applied. */
  readonly events?: JobEvents;
}): Reaper {
  let running: Promise<void> | null = null;
  let stopped = false;

  const tick = (): void => {
    if (running !== null || stopped) return;
    running = options.store
      .jobReapExpired()
      .then((outcome: ReapOutcome) => options.events?.reaped(options.log, outcome))
      .catch((error: unknown) => {
        options.log.warn({ err: error }, 'reaper run failed');
      })
      .finally(() => {
        running = null;
      });
  };

  const timer = options.intervalMs > 0 ? setInterval(tick, options.intervalMs) : null;
  timer?.unref();

  return {
    async stop() {
      stopped = true;
      if (timer !== null) clearInterval(timer);
      if (running !== null) await running;
    },
  };
}
