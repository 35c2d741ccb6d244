/**
 * Retention: finished jobs (succeeded, cancelled, dead) are deleted, with
 * their attempts and results, once they have been finished longer than a
 * period set per kind or by default. `unknown` jobs wait for an operator and
 * are never deleted automatically. Each jobPurge call deletes at most `limit`
 * jobs in one short transaction, so a purge of millions of rows is many small
 * commits that other writes interleave with (docs/SCALING.md).
 *
 * A job's idempotency key stays reserved while the job exists; once the job
 * is purged the key may be used again for a new job.
 */

import type { PurgeableStatus } from '../core/states.js';

export { PURGEABLE_STATUSES, type PurgeableStatus } from '../core/states.js';

/** How long jobs of each finished status are kept, in ms after they finished. */
export interface RetentionPeriods {
  readonly succeededMs: number;
  readonly cancelledMs: number;
  readonly deadMs: number;
}

/** A kind's own periods; null keeps the coordinator's default for that status. */
export type KindRetention = { readonly [K in keyof RetentionPeriods]: number | null };

const DAY_MS = 24 * 60 * 60 * 1000;

export const DEFAULT_RETENTION: RetentionPeriods = Object.freeze({ succeededMs: 7 * DAY_MS, cancelledMs: 7 * DAY_MS, deadMs: 30 * DAY_MS });

export const NO_KIND_RETENTION: KindRetention = Object.freeze({ succeededMs: null, cancelledMs: null, deadMs: null });

/** The field of RetentionPeriods that holds a status's period. */
export function retentionField(status: PurgeableStatus): keyof RetentionPeriods {
  return status === 'succeeded' ? 'succeededMs' : status === 'cancelled' ? 'cancelledMs' : 'deadMs';
}

export interface JobPurgeParams {
  readonly status: PurgeableStatus;
  /** Jobs that finished at least this long ago, by the store's clock. */
  readonly olderThanMs: number;
  /** When true, a registered kind's own period for `status` replaces olderThanMs (the coordinator's retention run). */
  readonly kindRetention: boolean;
  /** Only this tenant's jobs; every tenant's when absent. */
  readonly tenant?: string;
  readonly kind?: string;
  /** The most jobs one call deletes, in one transaction. */
  readonly limit: number;
}

export type JobPurgeCountParams = Omit<JobPurgeParams, 'limit'>;

export interface JobPurgeOutcome {
  readonly deleted: number;
}
