/**
 * Retry delays: exponential with full jitter. Full jitter (a uniform draw in
 * [0, cap)) spreads retries of jobs that failed together, so a dependency that
 * recovers is not hit by all of them at the same instant. The same formula
 * times a job's next attempt (transitions.ts, with the kind's policy) and a
 * worker's retry of a coordinator call (worker/retry.ts, with its own).
 */

export interface BackoffPolicy {
  readonly baseMs: number;
  readonly maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = Object.freeze({ baseMs: 1_000, maxMs: 5 * 60_000 });

/** The doublings of a job's retry delay: beyond them it stops growing even below maxMs. */
export const JOB_BACKOFF_DOUBLINGS = 30;

/**
 * Delay before attempt number `attempt + 1`, where `attempt` (1-based) is the one that just failed: a uniform
 * draw below baseMs × 2^(attempt − 1), that power capped at `maxDoublings` and the product at maxMs.
 */
export function backoffDelayMs(attempt: number, policy: BackoffPolicy, random: () => number, maxDoublings = JOB_BACKOFF_DOUBLINGS): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), maxDoublings);
  const cap = Math.min(policy.maxMs, policy.baseMs * 2 ** exponent);
  return Math.floor(random() * cap);
}
