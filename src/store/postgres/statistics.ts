/**
 * The planner's statistics of `jobs`, kept fresh by the store. The lease
 * statements have two indexes to choose from for a kinds filter: the per-kind
 * available index, which reads O(max) rows, and the tenant's available index,
 * which reads every queued job of the other kinds on the way. Before the
 * table is first analyzed (a new queue, and any queue on a server whose
 * autovacuum is off, where nothing analyzes it) both look equally cheap, and
 * the planner took the tenant's index: 10,731 rows read and filtered out for
 * a lease of 16, a 12 ms statement (logged by auto_explain during the
 * embedded bench).
 *
 * So the reaper's tick (every second by default) compares the pages `jobs`
 * has on disk with the pages its statistics were made from, and analyzes it
 * when the table has more than doubled since (a new queue's first look is at
 * two pages, a few dozen jobs). The size comes from the table's file, so the
 * check sees every commit at once, where the statistics views lag by up to
 * PostgreSQL's flush interval. A new queue's plans are made while its tables
 * are nearly empty (sequential scans of `jobs` to join the picked jobs and to
 * find the completed ones) and stay cached until an ANALYZE invalidates them,
 * so until then every lease and completion scans every job the queue has
 * run. The rule is growth, not churn: every ANALYZE invalidates the cached
 * plans of every statement that reads `jobs`, in every connection, and
 * replanning the hot statements cost a busy queue more CPU than the scans it
 * prevents (PostgreSQL's own rule, 50 rows plus a tenth of the table changed,
 * analyzed a queue of steady size every few hundred jobs). A growing table is
 * analyzed a logarithmic number of times; one of steady size, whose plans
 * already use its indexes, not again (retention.ts's upkeep keeps the
 * statistics of every queue table fresh by churn once a minute when
 * autovacuum is off).
 * ANALYZE reads a sample (30,000 rows at the default statistics target)
 * whatever the table's size and blocks neither reads nor writes. One
 * coordinator at a time runs it (a transaction-level advisory lock); the
 * others skip that tick.
 */

import type { PgDatabase } from './database.js';
import { bind, namedQuery } from './sql-fragments.js';

export const JOBS_STATISTICS_SIZE = namedQuery(
  'lh_jobs_statistics_size',
  `SELECT (pg_relation_size(c.oid) / current_setting('block_size')::int)::float8 AS pages, c.relpages::float8 AS analyzed
     FROM pg_class c WHERE c.oid = 'jobs'::regclass`,
);

export const JOBS_ANALYZE_LOCK = namedQuery(
  'lh_jobs_analyze_lock',
  `SELECT pg_try_advisory_xact_lock(hashtext(current_schema() || '.lh_analyze_jobs')) AS locked`,
);

const JOBS_ANALYZE = 'ANALYZE jobs';

/** Least time between two looks at the statistics' age. */
export const STATISTICS_CHECK_MS = 1_000;

/** PostgreSQL autovacuum's rule: `changed` rows since the last ANALYZE of a table of `rows` make its statistics stale. */
export function statisticsStale(changed: number, rows: number): boolean {
  return changed > 50 + 0.1 * rows;
}

/** Whether a table of `pages` pages has outgrown the statistics made when it had `analyzed` (the reaper's rule above). */
export function statisticsOutgrown(pages: number, analyzed: number): boolean {
  return pages > 1 + 2 * analyzed;
}

export class JobsStatistics {
  private nextCheckAt = 0;
  private checking = false;

  constructor(private readonly db: PgDatabase) {}

  /** Analyzes `jobs` when its statistics are stale and no other coordinator is at it; true when it did. */
  async refresh(): Promise<boolean> {
    const now = performance.now();
    if (this.checking || now < this.nextCheckAt) return false;
    this.nextCheckAt = now + STATISTICS_CHECK_MS;
    this.checking = true;
    try {
      const size = (await this.db.query<{ pages: number; analyzed: number }>(bind(JOBS_STATISTICS_SIZE, []))).rows[0];
      if (size === undefined || !statisticsOutgrown(size.pages, size.analyzed)) return false;
      return await this.db.transaction(async (tx) => {
        if ((await tx.query<{ locked: boolean }>(bind(JOBS_ANALYZE_LOCK, []))).rows[0]?.locked !== true) return false;
        await tx.query({ text: JOBS_ANALYZE });
        return true;
      });
    } finally {
      this.checking = false;
    }
  }
}
