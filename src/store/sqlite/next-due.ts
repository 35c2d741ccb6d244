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
 *
 * A tenant's restricted kinds (flow-limits.ts) are answered one by one: a
 * paused kind's jobs never count, a kind at its maxConcurrent sets slotHeld
 * (a finishing job wakes the poll, not a timer), and a kind at its rate counts
 * from when its window admits again. Other kinds are answered as above.
 */

import type { Database, Statement } from 'better-sqlite3';
import { inReach, kindsFilter, type KindFlowState } from '../flow-limits.js';
import { nextDue, restrictedNextDue, type NextDue, type NextDueParams } from '../next-due.js';
import { QUEUED_KINDS } from './queries.js';

const FIRST_OF_KIND = `(SELECT j.run_after FROM jobs j WHERE j.tenant = @tenant AND j.kind = k.kind AND j.status = 'queued'
    AND (j.deadline_at IS NULL OR j.deadline_at > @now) ORDER BY j.run_after LIMIT 1)`;

export const NEXT_DUE_SQL = {
  jobNextDueKinds: `SELECT MIN(${FIRST_OF_KIND}) AS run_after FROM (SELECT DISTINCT value AS kind FROM json_each(@kinds)) k`,
  jobNextDueAnyKind: `${QUEUED_KINDS}
    SELECT MIN(${FIRST_OF_KIND}) AS run_after FROM k WHERE k.kind IS NOT NULL`,
  /** jobNextDueAnyKind without the restricted kinds (@except, a JSON array), which are answered one by one. */
  jobNextDueAnyKindExcept: `${QUEUED_KINDS}
    SELECT MIN(${FIRST_OF_KIND}) AS run_after FROM k WHERE k.kind IS NOT NULL AND k.kind NOT IN (SELECT value FROM json_each(@except))`,
} as const;

export class NextDueReader {
  private readonly kinds: Statement;
  private readonly anyKind: Statement;
  private readonly anyKindExcept: Statement;

  constructor(db: Database) {
    this.kinds = db.prepare(NEXT_DUE_SQL.jobNextDueKinds);
    this.anyKind = db.prepare(NEXT_DUE_SQL.jobNextDueAnyKind);
    this.anyKindExcept = db.prepare(NEXT_DUE_SQL.jobNextDueAnyKindExcept);
  }

  /** `flowStates`: the tenant's restricted kinds (KIND_FLOW_STATE). */
  read(params: NextDueParams, now: number, flowStates: () => readonly KindFlowState[]): NextDue | null {
    const kinds = kindsFilter(params.kinds);
    const states = inReach(flowStates(), kinds);
    if (states.length === 0) {
      const row = (
        kinds === null ? this.anyKind.get({ tenant: params.tenant, now }) : this.kinds.get({ tenant: params.tenant, now, kinds: JSON.stringify(kinds) })
      ) as { run_after: number | null } | undefined;
      return nextDue(row?.run_after ?? null, false, now);
    }
    const restricted = new Set(states.map((state) => state.kind));
    const others =
      kinds === null
        ? this.first(this.anyKindExcept, { tenant: params.tenant, now, except: JSON.stringify([...restricted]) })
        : this.first(this.kinds, { tenant: params.tenant, now, kinds: JSON.stringify(kinds.filter((kind) => !restricted.has(kind))) });
    const firsts = new Map(states.map((state) => [state.kind, this.first(this.kinds, { tenant: params.tenant, now, kinds: JSON.stringify([state.kind]) })]));
    return restrictedNextDue(others, states, firsts, now);
  }

  private first(statement: Statement, bindings: Record<string, unknown>): number | null {
    return (statement.get(bindings) as { run_after: number | null } | undefined)?.run_after ?? null;
  }
}
