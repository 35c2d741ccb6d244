/**
 * PostgreSQL: the earliest runAfter of a tenant's leasable queued jobs of some
 * kinds (src/store/next-due.ts), mirroring src/store/sqlite/next-due.ts.
 * Served by job_ready_order (tenant, kind, priority DESC, run_after, seq):
 * per kind, one index seek per distinct priority (firstReady); without a
 * kinds filter a recursive skip scan visits each distinct queued kind of the
 * tenant once (PostgreSQL has no skip scan of its own).
 *
 * Due jobs are not excluded, for the reason the SQLite file gives: a due job
 * seen right after an empty lease became available since, and 0 sends the
 * caller back to lease.
 *
 * Both statements also say whether a kind they cover is restricted or has
 * groups (probes of kinds_flow and group_clocks); only then are those kinds
 * read (KIND_FLOW_STATE, GROUP_KINDS) and answered one by one, as in the
 * SQLite file.
 */

import { NO_GROUP_RULES } from '../../core/fair-share.js';
import { decodeGroupRules, groupedKindDue, groupStateOf, type GroupedDueFacts, type GroupStateColumns } from '../group-lease.js';
import { groupedNextDue, type NextDue, type NextDueParams } from '../next-due.js';
import { inReach, kindsFilter } from '../flow-limits.js';
import { kindFlowState, type KindFlowColumns } from '../row-records.js';
import type { PgDatabase } from './database.js';
import { GROUP_EARLIEST, GROUP_KINDS, GROUP_NEXT_DUE, GROUP_UNGROUPED, KIND_FLOW_STATE, NOW } from './queries.js';
import { bind, firstReady, ms, namedQuery, NOW_MS, QUEUED_KINDS, RESTRICTED_KIND as RESTRICTED } from './sql-fragments.js';

const FIRST_OF_KIND = firstReady('k.kind', '(r.deadline_at IS NULL OR r.deadline_at > now())');

export const JOB_NEXT_DUE_KINDS = namedQuery(
  'lh_job_next_due_kinds',
  `SELECT ${ms(`MIN(${FIRST_OF_KIND})`)} AS run_after, ${NOW_MS},
          (EXISTS (SELECT 1 FROM kinds WHERE tenant = $1 AND kind = ANY($2::text[]) AND ${RESTRICTED})
            OR EXISTS (SELECT 1 FROM group_clocks WHERE tenant = $1 AND kind = ANY($2::text[]))) AS restricted
     FROM (SELECT DISTINCT unnest($2::text[]) AS kind) k`,
);

/** The first runAfter of each of some kinds ($2), for restricted kinds answered one by one. */
export const JOB_NEXT_DUE_EACH = namedQuery(
  'lh_job_next_due_each',
  `SELECT k.kind, ${ms(FIRST_OF_KIND)} AS run_after FROM (SELECT DISTINCT unnest($2::text[]) AS kind) k`,
);

export const JOB_NEXT_DUE_ANY_KIND = namedQuery(
  'lh_job_next_due_any_kind',
  `${QUEUED_KINDS}
   SELECT ${ms(`MIN(${FIRST_OF_KIND})`)} AS run_after, ${NOW_MS},
          (EXISTS (SELECT 1 FROM kinds WHERE tenant = $1 AND ${RESTRICTED}) OR EXISTS (SELECT 1 FROM group_clocks WHERE tenant = $1)) AS restricted
     FROM k WHERE k.kind IS NOT NULL`,
);

/** JOB_NEXT_DUE_ANY_KIND without the restricted kinds ($2), which are answered one by one. */
export const JOB_NEXT_DUE_ANY_KIND_EXCEPT = namedQuery(
  'lh_job_next_due_any_kind_except',
  `${QUEUED_KINDS}
   SELECT ${ms(`MIN(${FIRST_OF_KIND})`)} AS run_after FROM k WHERE k.kind IS NOT NULL AND k.kind <> ALL($2::text[])`,
);

export async function readNextDue(db: PgDatabase, params: NextDueParams): Promise<NextDue | null> {
  const kinds = kindsFilter(params.kinds);
  const query = kinds === null ? bind(JOB_NEXT_DUE_ANY_KIND, [params.tenant]) : bind(JOB_NEXT_DUE_KINDS, [params.tenant, kinds]);
  const row = (await db.query<{ run_after: number | null; now_ms: number; restricted: boolean | null }>(query)).rows[0];
  if (row?.restricted === true) return readRestricted(db, params.tenant, kinds);
  if (row === undefined || row.run_after === null) return null;
  return { runAfter: row.run_after, inMs: Math.max(0, row.run_after - row.now_ms) };
}

async function readRestricted(db: PgDatabase, tenant: string, kinds: readonly string[] | null): Promise<NextDue | null> {
  const stateRows = (await db.query<KindFlowColumns & { now_ms: number }>(bind(KIND_FLOW_STATE, [tenant]))).rows;
  const now = stateRows[0]?.now_ms ?? (await db.query<{ now_ms: number }>(bind(NOW, []))).rows[0]?.now_ms ?? 0;
  const states = inReach(stateRows.map(kindFlowState), kinds);
  const groupRows = (await db.query<{ kind: string; group_rules: unknown }>(bind(GROUP_KINDS, [tenant, kinds]))).rows;
  const restricted = [...new Set([...states.map((state) => state.kind), ...groupRows.map((row) => row.kind)])];
  const rest =
    kinds === null
      ? bind(JOB_NEXT_DUE_ANY_KIND_EXCEPT, [tenant, restricted])
      : bind(JOB_NEXT_DUE_KINDS, [tenant, kinds.filter((kind) => !restricted.includes(kind))]);
  const others = (await db.query<{ run_after: number | null }>(rest)).rows[0]?.run_after ?? null;
  const firsts = new Map(
    (await db.query<{ kind: string; run_after: number | null }>(bind(JOB_NEXT_DUE_EACH, [tenant, restricted]))).rows.map((r) => [r.kind, r.run_after]),
  );
  const dues = new Map<string, { first: number | null; slotHeld: boolean }>();
  for (const row of groupRows) {
    const rules = decodeGroupRules(row.group_rules) ?? NO_GROUP_RULES;
    dues.set(row.kind, groupedKindDue(await groupFacts(db, tenant, row.kind), rules, now));
  }
  return groupedNextDue(others, states, firsts, dues, now);
}

/** What a kind with groups waits for: its group rows' candidates, wake times and slot holds, and its ungrouped jobs. */
async function groupFacts(db: PgDatabase, tenant: string, kind: string): Promise<GroupedDueFacts> {
  const facts = (await db.query<{ candidate: boolean; wake_at: number | null; slot_held: boolean }>(bind(GROUP_NEXT_DUE, [tenant, kind]))).rows[0];
  const ungrouped = (await db.query<GroupStateColumns>(bind(GROUP_UNGROUPED, [tenant, kind, 1]))).rows[0];
  const first = (await db.query<{ run_after: number | null }>(bind(GROUP_EARLIEST, [tenant, kind, '']))).rows[0];
  return {
    candidate: facts?.candidate === true,
    wakeAt: facts?.wake_at ?? null,
    slotHeld: facts?.slot_held === true,
    ungroupedFirst: first?.run_after ?? null,
    ungrouped: groupStateOf(ungrouped ?? { group_key: '', finish_tag: null, running: null, window_start: null, window_count: null }),
  };
}
