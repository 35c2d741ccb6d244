/**
 * Retry delays: exponential with full jitter. Full jitter (a uniform draw in
 * [0, cap)) spreads retries of jobs that failed together, so a dependency that
 * recovers is not hit by all of them at the same instant.
 */

export interface BackoffPolicy {
  readonly baseMs: number;
  readonly maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = Object.freeze({ baseMs: 1_000, maxMs: 5 * 60_000 });

/** Delay before attempt number `attempt + 1`, where `attempt` (1-based) is the one that just failed. */
export function backoffDelayMs(attempt: number, policy: BackoffPolicy, random: () => number): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 30);
  const cap = Math.min(policy.maxMs, policy.baseMs * 2 ** exponent);
  return Math.floor(random() * cap);
}
