/**
 * PostgreSQL: retention batches (src/store/retention.ts), mirroring
 * src/store/sqlite/retention.ts. One transaction per batch: pick up to `limit`
 * finished jobs oldest first from job_endings (status, finished_at), locking
 * them with SKIP LOCKED so an operator's concurrent requeue of a dead job is
 * never waited for (the re-checked WHERE drops a job whose status changed),
 * then delete their attempts, result, dependency edges and the jobs, each
 * statement taking what it deletes out of the counters (counter-triggers.ts).
 * A finished parent whose children still wait (a requeued child counts a dead
 * parent as pending) is kept until they no longer do. Freed space is
 * reclaimed by autovacuum (the settings that matter are in docs/SCALING.md).
 */

import { statisticsStale } from './statistics.js';
import { NO_KIND_RETENTION, type JobPurgeCountParams, type JobPurgeParams, type KindRetention } from '../retention.js';
import type { PgDatabase } from './database.js';
import { countJobs, countSums, jobTerms } from './counter-triggers.js';
import { bind, endingDelete, ms, namedQuery } from './sql-fragments.js';

const PERIOD = `COALESCE(CASE WHEN NOT $3::boolean THEN NULL WHEN $1 = 'succeeded' THEN k.retention_succeeded_ms
    WHEN $1 = 'cancelled' THEN k.retention_cancelled_ms ELSE k.retention_dead_ms END, $2::bigint)`;

// $6 (the earliest cutoff any kind could have) bounds the index walk; the joined kind row decides each job.
// A parent's waiting children are looked up by a scalar subquery, run per row for parents only: as a NOT EXISTS
// the planner hashed it, which would read every waiting job once a parent is in the batch.
// The walk is job_endings_finished (status, finished_at), each ended job's row of job_endings; jobs has no index
// on its status (migration 14), and the row there is re-checked (a requeue that committed meanwhile moved it).
const MATCHING = `FROM job_endings e JOIN jobs j ON j.seq = e.seq AND j.status = e.status LEFT JOIN kinds k ON k.tenant = j.tenant AND k.kind = j.kind
  WHERE e.status = $1 AND e.finished_at <= now() - $6::bigint * interval '1 millisecond'
    AND e.finished_at <= now() - ${PERIOD} * interval '1 millisecond'
    AND ($4::text IS NULL OR j.tenant = $4) AND ($5::text IS NULL OR j.kind = $5)
    AND (NOT j.has_children OR (SELECT count(*) FROM (SELECT 1 FROM job_dependencies d JOIN jobs c ON c.id = d.child_id
      WHERE d.parent_id = j.id AND c.status = 'waiting' LIMIT 1) AS w) = 0)`;

export const JOB_PURGE_SHORTEST_PERIOD = namedQuery(
  'lh_job_purge_shortest_period',
  `SELECT MIN(CASE $1 WHEN 'succeeded' THEN retention_succeeded_ms WHEN 'cancelled' THEN retention_cancelled_ms
     ELSE retention_dead_ms END)::float8 AS shortest FROM kinds`,
);

export const JOB_PURGE_SELECT = namedQuery('lh_job_purge_select', `SELECT j.id ${MATCHING} ORDER BY e.finished_at LIMIT $7 FOR UPDATE OF j SKIP LOCKED`);

export const JOB_PURGE_COUNT = namedQuery('lh_job_purge_count', `SELECT COUNT(*)::int AS n ${MATCHING}`);

export const JOB_PURGE_ATTEMPTS = namedQuery(
  'lh_job_purge_attempts',
  `WITH gone AS (
     DELETE FROM job_attempts a USING jobs j WHERE j.id = ANY($1::uuid[]) AND a.job_seq = j.seq
     RETURNING j.tenant, a.ended_at, ${ms('a.ended_at')}::bigint - ${ms('a.started_at')}::bigint AS run_ms
   )
   ${countSums(`SELECT tenant, -1 AS ended_attempts, -run_ms AS attempt_run_ms, 0 AS result_bytes FROM gone WHERE ended_at IS NOT NULL`)}`,
);
export const JOB_PURGE_RESULTS = namedQuery(
  'lh_job_purge_results',
  `WITH gone AS (
     DELETE FROM job_results r USING jobs j WHERE r.job_id = ANY($1::uuid[]) AND j.id = r.job_id RETURNING j.tenant, r.size_bytes
   )
   ${countSums(`SELECT tenant, 0 AS ended_attempts, 0 AS attempt_run_ms, -size_bytes AS result_bytes FROM gone`)}`,
);
export const JOB_PURGE_DEPENDENCIES = namedQuery(
  'lh_job_purge_dependencies',
  `DELETE FROM job_dependencies WHERE parent_id = ANY($1::uuid[]) OR child_id = ANY($1::uuid[])`,
);
export const JOB_PURGE_JOBS = namedQuery(
  'lh_job_purge_jobs',
  `WITH gone AS (DELETE FROM jobs WHERE id = ANY($1::uuid[]) RETURNING *), unended AS (${endingDelete('gone')})
   ${countJobs([jobTerms('gone', '-')])}`,
);

/** The kinds-table values ($12..$14 of lh_kind_upsert) of a kind's retention periods. */
export function retentionValues(retention: KindRetention = NO_KIND_RETENTION): (number | null)[] {
  return [retention.succeededMs, retention.cancelledMs, retention.deadMs];
}

async function values(db: PgDatabase, params: JobPurgeCountParams): Promise<unknown[]> {
  let shortest = params.olderThanMs;
  if (params.kindRetention) {
    const row = (await db.query<{ shortest: number | null }>(bind(JOB_PURGE_SHORTEST_PERIOD, [params.status]))).rows[0];
    if (row?.shortest != null) shortest = Math.min(shortest, row.shortest);
  }
  return [params.status, params.olderThanMs, params.kindRetention, params.tenant ?? null, params.kind ?? null, shortest];
}

export async function purgeBatch(db: PgDatabase, params: JobPurgeParams): Promise<number> {
  const bound = [...(await values(db, params)), params.limit];
  return db.transaction(async (tx) => {
    const ids = (await tx.query<{ id: string }>(bind(JOB_PURGE_SELECT, bound))).rows.map((row) => row.id);
    if (ids.length === 0) return 0;
    await tx.query(bind(JOB_PURGE_ATTEMPTS, [ids]));
    await tx.query(bind(JOB_PURGE_RESULTS, [ids]));
    await tx.query(bind(JOB_PURGE_DEPENDENCIES, [ids]));
    await tx.query(bind(JOB_PURGE_JOBS, [ids]));
    return ids.length;
  });
}

export async function purgeCount(db: PgDatabase, params: JobPurgeCountParams): Promise<number> {
  return (await db.query<{ n: number }>(bind(JOB_PURGE_COUNT, await values(db, params)))).rows[0]?.n ?? 0;
}

export const AUTOVACUUM_ON = namedQuery('lh_autovacuum_on', `SELECT current_setting('autovacuum') = 'on' AS on`);

/**
 * The tables whose rows every transition rewrites or retention deletes. Plain
 * VACUUM takes a lock that conflicts with neither reads nor writes; SKIP_LOCKED
 * passes over a table another session is vacuuming (another coordinator).
 */
export const QUEUE_TABLES = [
  'jobs',
  'job_ready',
  'job_leases',
  'job_endings',
  'job_attempts',
  'job_results',
  'job_counters',
  'tenant_sums',
  'tenant_counters',
] as const;

/**
 * Which of the queue's tables have dead rows to vacuum, and which have changed enough since their last ANALYZE
 * for the planner's statistics to be stale (the rule of statistics.ts). An idle queue has neither, so its
 * retention tick reads these counters and nothing else: an ANALYZE samples up to 30,000 rows whether or not
 * anything changed, which made an idle coordinator's server use a tenth of a core now and then.
 */
export const QUEUE_TABLES_UPKEEP = namedQuery(
  'lh_queue_tables_upkeep',
  `SELECT c.relname AS name, s.n_dead_tup > 0 AS dead,
          s.n_mod_since_analyze::float8 AS changed, greatest(c.reltuples, 0)::float8 AS rows
     FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
    WHERE s.relid = ANY (ARRAY[${QUEUE_TABLES.map((table) => `'${table}'::regclass`).join(', ')}])`,
);

/**
 * Vacuums the queue's tables that have dead rows, and analyzes those whose statistics are stale, when the
 * server's autovacuum is off (true when it did either): without it, the space of deleted and rewritten rows is
 * never reused and the database grows whatever the retention. With autovacuum on, nothing.
 */
export async function vacuumWhenAutovacuumOff(db: PgDatabase): Promise<boolean> {
  if ((await db.query<{ on: boolean }>(bind(AUTOVACUUM_ON, []))).rows[0]?.on !== false) return false;
  const tables = (await db.query<{ name: string; dead: boolean; changed: number; rows: number }>(bind(QUEUE_TABLES_UPKEEP, []))).rows;
  // Names from QUEUE_TABLES only, so they need no quoting.
  const vacuum = tables.filter((table) => table.dead).map((table) => table.name);
  const analyze = tables.filter((table) => statisticsStale(table.changed, table.rows)).map((table) => table.name);
  if (vacuum.length === 0 && analyze.length === 0) return false;
  await db.withClient(async (client) => {
    // The pool's statement_timeout (30 s) is for the queue's own statements; a vacuum of a large table may take longer.
    await client.query('SET statement_timeout = 0');
    try {
      if (vacuum.length > 0) await client.query(`VACUUM (SKIP_LOCKED) ${vacuum.join(', ')}`);
      if (analyze.length > 0) await client.query(`ANALYZE (SKIP_LOCKED) ${analyze.join(', ')}`);
    } finally {
      await client.query('RESET statement_timeout');
    }
  });
  return true;
}
