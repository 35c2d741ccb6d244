/**
 * Retention, beside the reaper: a timer that deletes finished jobs past their
 * retention period (a kind's own, else the coordinator's `retention`), status
 * by status, in store transactions of `retentionBatchSize` jobs. Between two
 * batches it yields to the event loop, so the queue's own writes go between
 * them; on SQLite every batch is a group commit of its own and holds the write
 * lock only for that batch (docs/SCALING.md has the figure). The timer is
 * periodic-task.ts: runs never overlap, a failed one is logged.
 * purgeJobs is the same loop for POST /jobs/purge, bounded per request.
 */

import type { Logger } from './logger.js';
import { PURGEABLE_STATUSES, retentionField, type PurgeableStatus, type RetentionPeriods } from '../store/retention.js';
import type { Store } from '../store/store.js';
import { startPeriodicTask, type PeriodicTask } from './periodic-task.js';

/** stop() ends a run in progress after its current batch. */
export type Retention = PeriodicTask;

export interface PurgeScope {
  /** Per status: jobs that finished at least this long ago. */
  readonly olderThanMs: (status: PurgeableStatus) => number;
  readonly statuses: readonly PurgeableStatus[];
  /** True for the automatic run: a kind's own period replaces olderThanMs. */
  readonly kindRetention: boolean;
  readonly tenant?: string;
  readonly kind?: string;
  readonly batchSize: number;
  /** The most jobs to delete before answering; Infinity for the automatic run. */
  readonly maxJobs: number;
  readonly stopped?: () => boolean;
}

/** Deletes batch after batch; `more` when it stopped at maxJobs (or was stopped) with a full last batch. */
export async function purgeJobs(store: Store, scope: PurgeScope): Promise<{ deleted: number; more: boolean }> {
  let deleted = 0;
  for (const status of scope.statuses) {
    for (;;) {
      if (scope.stopped?.() === true) return { deleted, more: true };
      const limit = Math.min(scope.batchSize, scope.maxJobs - deleted);
      if (limit <= 0) return { deleted, more: true };
      const batch = await store.jobPurge({
        status,
        olderThanMs: scope.olderThanMs(status),
        kindRetention: scope.kindRetention,
        limit,
        ...(scope.tenant === undefined ? {} : { tenant: scope.tenant }),
        ...(scope.kind === undefined ? {} : { kind: scope.kind }),
      });
      deleted += batch.deleted;
      if (batch.deleted < limit) break;
      // Other requests' writes go first between two batches.
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  return { deleted, more: false };
}

export function startRetention(options: {
  readonly store: Store;
  readonly intervalMs: number;
  readonly periods: RetentionPeriods;
  readonly batchSize: number;
  readonly log: Logger;
}): Retention {
  return startPeriodicTask({
    intervalMs: options.intervalMs,
    log: options.log,
    failure: 'retention run failed',
    run: async (stopped) => {
      const { deleted } = await purgeJobs(options.store, {
        olderThanMs: (status) => options.periods[retentionField(status)],
        statuses: PURGEABLE_STATUSES,
        kindRetention: true,
        batchSize: options.batchSize,
        maxJobs: Number.POSITIVE_INFINITY,
        stopped,
      });
      if (deleted > 0) options.log.debug({ deleted }, 'retention deleted finished jobs');
      if (stopped()) return;
      if (await options.store.reclaimSpace()) options.log.debug('retention vacuumed the queue tables (the server runs no autovacuum)');
    },
  });
}
