/**
 * SQLite: the earliest runAfter of a tenant's leasable queued jobs of some
 * kinds (src/store/next-due.ts). Served by job_ready's primary key (tenant,
 * kind, priority DESC, run_after, seq): a skip scan visits each (kind,
 * priority) group of the named kinds (READY_GROUPS) and reads its first row,
 * the group's earliest, so the answer costs the same whatever other kinds
 * have queued and however many jobs a group holds. Without a kinds filter the
 * skip scan starts from each distinct queued kind of the tenant.
 *
 * Due jobs are not excluded: the caller asks right after a lease found
 * nothing, so a due job seen here became available since and the answer 0
 * sends the caller back to lease (no gap between the lease and this read in
 * which a job could become due unseen). The deadline test mirrors the lease's.
 *
 * A tenant's restricted kinds (flow-limits.ts) are answered one by one: a
 * paused kind's jobs never count, a kind at its maxConcurrent sets slotHeld
 * (a finishing job wakes the poll, not a timer), and a kind at its rate counts
 * from when its window admits again. A kind with groups is answered from its
 * group rows (group-lease.ts groupedKindDue): a candidate is due now, a parked
 * group at its wake time, a group at its maxConcurrent sets slotHeld. Other
 * kinds are answered as above.
 */

import type { Database, Statement } from 'better-sqlite3';
import { inReach, kindsFilter, type KindFlowState } from '../flow-limits.js';
import { groupedKindDue, groupStateOf, type GroupedDueFacts, type GroupStateColumns } from '../group-lease.js';
import { groupedNextDue, nextDue, type NextDue, type NextDueParams } from '../next-due.js';
import { groupedKinds } from './group-lease.js';
import { QUEUED_KINDS, READY_GROUPS, type Statements } from './queries.js';

/** The earliest leasable ready row of a (kind, priority) group: its first row not past its deadline. */
const FIRST_OF_GROUP = `(SELECT r.run_after FROM job_ready r WHERE r.tenant = @tenant AND r.kind = g.kind AND r.group_key = g.group_key
    AND r.priority = g.priority
    AND (r.deadline_at IS NULL OR r.deadline_at > @now) ORDER BY r.run_after LIMIT 1)`;

const EARLIEST = `SELECT MIN(${FIRST_OF_GROUP}) AS run_after FROM g WHERE g.priority IS NOT NULL`;

export const NEXT_DUE_SQL = {
  jobNextDueKinds: `WITH RECURSIVE k(kind) AS (SELECT DISTINCT value FROM json_each(@kinds)), ${READY_GROUPS}
    ${EARLIEST}`,
  jobNextDueAnyKind: `${QUEUED_KINDS}, ${READY_GROUPS}
    ${EARLIEST}`,
  /** jobNextDueAnyKind without the restricted kinds (@except, a JSON array), which are answered one by one. */
  jobNextDueAnyKindExcept: `${QUEUED_KINDS.replace(
    'FROM k WHERE k.kind IS NOT NULL)',
    'FROM k WHERE k.kind IS NOT NULL), kx(kind) AS (SELECT kind FROM k WHERE kind IS NOT NULL AND kind NOT IN (SELECT value FROM json_each(@except)))',
  )}, ${READY_GROUPS.replaceAll('FROM k WHERE k.kind IS NOT NULL', 'FROM kx k')}
    ${EARLIEST}`,
} as const;

export class NextDueReader {
  private readonly kinds: Statement;
  private readonly anyKind: Statement;
  private readonly anyKindExcept: Statement;

  constructor(
    db: Database,
    private readonly st: Statements,
  ) {
    this.kinds = db.prepare(NEXT_DUE_SQL.jobNextDueKinds);
    this.anyKind = db.prepare(NEXT_DUE_SQL.jobNextDueAnyKind);
    this.anyKindExcept = db.prepare(NEXT_DUE_SQL.jobNextDueAnyKindExcept);
  }

  /** `flowStates`: the tenant's restricted kinds (KIND_FLOW_STATE). */
  read(params: NextDueParams, now: number, flowStates: () => readonly KindFlowState[]): NextDue | null {
    const kinds = kindsFilter(params.kinds);
    const states = inReach(flowStates(), kinds);
    const grouped = groupedKinds(this.st, params.tenant, kinds);
    if (states.length === 0 && grouped.size === 0) {
      const row = (
        kinds === null ? this.anyKind.get({ tenant: params.tenant, now }) : this.kinds.get({ tenant: params.tenant, now, kinds: JSON.stringify(kinds) })
      ) as { run_after: number | null } | undefined;
      return nextDue(row?.run_after ?? null, false, now);
    }
    const restricted = new Set([...states.map((state) => state.kind), ...grouped.keys()]);
    const others =
      kinds === null
        ? this.first(this.anyKindExcept, { tenant: params.tenant, now, except: JSON.stringify([...restricted]) })
        : this.first(this.kinds, { tenant: params.tenant, now, kinds: JSON.stringify(kinds.filter((kind) => !restricted.has(kind))) });
    const firsts = new Map(states.map((state) => [state.kind, this.first(this.kinds, { tenant: params.tenant, now, kinds: JSON.stringify([state.kind]) })]));
    const dues = new Map([...grouped.values()].map((kind) => [kind.kind, groupedKindDue(this.groupFacts(params.tenant, kind.kind, now), kind.rules, now)]));
    return groupedNextDue(others, states, firsts, dues, now);
  }

  /** What a kind with groups waits for: its group rows' candidates, wake times and slot holds, and its ungrouped jobs. */
  private groupFacts(tenant: string, kind: string, now: number): GroupedDueFacts {
    const rows = this.st.groupNextDue.get({ tenant, kind }) as { candidate: number; wake_at: number | null; slot_held: number };
    const ungrouped = this.st.groupUngrouped.get({ tenant, kind, now, max: 1 }) as GroupStateColumns;
    const first = this.st.groupEarliest.get({ tenant, kind, groupKey: '', now }) as { run_after: number | null };
    return {
      candidate: rows.candidate === 1,
      wakeAt: rows.wake_at,
      slotHeld: rows.slot_held === 1,
      ungroupedFirst: first.run_after,
      ungrouped: groupStateOf(ungrouped),
    };
  }

  private first(statement: Statement, bindings: Record<string, unknown>): number | null {
    return (statement.get(bindings) as { run_after: number | null } | undefined)?.run_after ?? null;
  }
}
