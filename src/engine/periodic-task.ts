/**
 * A timer that runs one background task of the coordinator (the reaper,
 * retention) every `intervalMs`: runs never overlap (a tick while one is in
 * progress is skipped), a failed run is logged and the next tick tries again,
 * and stop() waits for a run in progress. An interval of 0 runs nothing.
 */

import type { Logger } from './logger.js';

export interface PeriodicTask {
  /** Stops the timer (the run in progress sees `stopped()` turn true) and waits for a run in progress. */
  stop(): Promise<void>;
}

export function startPeriodicTask(options: {
  readonly intervalMs: number;
  readonly log: Logger;
  /** What a failed run logs. */
  readonly failure: string;
  readonly run: (stopped: () => boolean) => Promise<void>;
}): PeriodicTask {
  let running: Promise<void> | null = null;
  let stopped = false;
  const isStopped = (): boolean => stopped;

  const tick = (): void => {
    if (running !== null || stopped) return;
    running = options
      .run(isStopped)
      .catch((error: unknown) => {
        options.log.warn({ err: error }, options.failure);
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
