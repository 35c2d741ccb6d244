/**
 * PostgreSQL: the earliest runAfter of a tenant's leasable queued jobs of some
 * kinds (src/store/next-due.ts), mirroring src/store/sqlite/next-due.ts.
 * Served by jobs_delayed (tenant, kind, run_after) WHERE status = 'queued':
 * one index seek per kind; without a kinds filter a recursive skip scan
 * visits each distinct queued kind of the tenant once (PostgreSQL has no
 * skip scan of its own).
 *
 * Due jobs are not excluded, for the reason the SQLite file gives: a due job
 * seen right after an empty lease became available since, and 0 sends the
 * caller back to lease.
 */

import type { NextDue, NextDueParams } from '../next-due.js';
import type { PgDatabase } from './database.js';
import { bind, ms, namedQuery, NOW_MS } from './sql-fragments.js';

const FIRST_OF_KIND = `(SELECT j.run_after FROM jobs j WHERE j.tenant = $1 AND j.kind = k.kind AND j.status = 'queued'
    AND (j.deadline_at IS NULL OR j.deadline_at > now()) ORDER BY j.run_after LIMIT 1)`;

export const JOB_NEXT_DUE_KINDS = namedQuery(
  'lh_job_next_due_kinds',
  `SELECT ${ms(`MIN(${FIRST_OF_KIND})`)} AS run_after, ${NOW_MS} FROM (SELECT DISTINCT unnest($2::text[]) AS kind) k`,
);

export const JOB_NEXT_DUE_ANY_KIND = namedQuery(
  'lh_job_next_due_any_kind',
  `WITH RECURSIVE k(kind) AS (
     SELECT (SELECT MIN(kind) FROM jobs WHERE tenant = $1 AND status = 'queued')
     UNION ALL
     SELECT (SELECT MIN(kind) FROM jobs WHERE tenant = $1 AND status = 'queued' AND kind > k.kind) FROM k WHERE k.kind IS NOT NULL)
   SELECT ${ms(`MIN(${FIRST_OF_KIND})`)} AS run_after, ${NOW_MS} FROM k WHERE k.kind IS NOT NULL`,
);

export async function readNextDue(db: PgDatabase, params: NextDueParams): Promise<NextDue | null> {
  const kinds = params.kinds !== undefined && params.kinds.length > 0 ? [...params.kinds] : null;
  const query = kinds === null ? bind(JOB_NEXT_DUE_ANY_KIND, [params.tenant]) : bind(JOB_NEXT_DUE_KINDS, [params.tenant, kinds]);
  const row = (await db.query<{ run_after: number | null; now_ms: number }>(query)).rows[0];
  if (row === undefined || row.run_after === null) return null;
  return { runAfter: row.run_after, inMs: Math.max(0, row.run_after - row.now_ms) };
}
