/**
 * The store's answer to "when could a parked long poll next lease something
 * that nobody will announce?": the earliest runAfter among a tenant's queued
 * jobs of some kinds (a delayed job, or a retry waiting out its backoff). The
 * coordinator sets one timer to it instead of re-running the lease query on an
 * interval (src/coordinator/lease-waiters.ts).
 */

export interface NextDueParams {
  readonly tenant: string;
  /** Only these kinds; every kind when absent or empty. */
  readonly kinds?: readonly string[];
}

export interface NextDue {
  /**
   * The earliest runAfter of a queued job a lease could take (its deadline has not passed), by the store's
   * clock; for a rate-limited kind no earlier than when its window admits again. null when the only jobs wait
   * for a slot (slotHeld).
   */
  readonly runAfter: number | null;
  /** How long from now, by the store's clock, until it is due; 0 when it is due already; null with runAfter. */
  readonly inMs: number | null;
  /** Some of those jobs wait for a maxConcurrent slot: a job of the tenant that finishes may free one. */
  readonly slotHeld?: true;
}
