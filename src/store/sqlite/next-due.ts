/**
 * SQLite: the earliest runAfter of a tenant's leasable queued jobs of some
 * kinds (src/store/next-due.ts). Served by jobs_delayed (tenant, kind,
 * run_after) WHERE status = 'queued': one index seek per kind, so the answer
 * costs the same whatever other kinds have queued. Without a kinds filter a
 * skip scan visits each distinct queued kind of the tenant once.
 *
 * Due jobs are not excluded: the caller asks right after a lease found
 * nothing, so a due job seen here became available since and the answer 0
 * sends the caller back to lease (no gap between the lease and this read in
 * which a job could become due unseen). The deadline test mirrors the lease's.
 */

import type { Database, Statement } from 'better-sqlite3';
import type { NextDue, NextDueParams } from '../next-due.js';

const FIRST_OF_KIND = `(SELECT j.run_after FROM jobs j WHERE j.tenant = @tenant AND j.kind = k.kind AND j.status = 'queued'
    AND (j.deadline_at IS NULL OR j.deadline_at > @now) ORDER BY j.run_after LIMIT 1)`;

export const NEXT_DUE_SQL = {
  jobNextDueKinds: `SELECT MIN(${FIRST_OF_KIND}) AS run_after FROM (SELECT DISTINCT value AS kind FROM json_each(@kinds)) k`,
  jobNextDueAnyKind: `WITH RECURSIVE k(kind) AS (
      SELECT (SELECT MIN(kind) FROM jobs WHERE tenant = @tenant AND status = 'queued')
      UNION ALL
      SELECT (SELECT MIN(kind) FROM jobs WHERE tenant = @tenant AND status = 'queued' AND kind > k.kind) FROM k WHERE k.kind IS NOT NULL)
    SELECT MIN(${FIRST_OF_KIND}) AS run_after FROM k WHERE k.kind IS NOT NULL`,
} as const;

export class NextDueReader {
  private readonly kinds: Statement;
  private readonly anyKind: Statement;

  constructor(db: Database) {
    this.kinds = db.prepare(NEXT_DUE_SQL.jobNextDueKinds);
    this.anyKind = db.prepare(NEXT_DUE_SQL.jobNextDueAnyKind);
  }

  read(params: NextDueParams, now: number): NextDue | null {
    const kinds = params.kinds !== undefined && params.kinds.length > 0 ? params.kinds : null;
    const row = (
      kinds === null
        ? this.anyKind.get({ tenant: params.tenant, now })
        : this.kinds.get({ tenant: params.tenant, now, kinds: JSON.stringify(kinds) })
    ) as { run_after: number | null } | undefined;
    const runAfter = row?.run_after ?? null;
    return runAfter === null ? null : { runAfter, inMs: Math.max(0, runAfter - now) };
  }
}
