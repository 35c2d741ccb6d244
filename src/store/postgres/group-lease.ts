/**
 * The fair lease among groups for PostgreSQL (docs/FAIRNESS.md §4), mirroring
 * src/store/sqlite/group-lease.ts, inside the restricted path's transaction
 * (lease.ts). The kinds' group_clocks rows are locked first (GROUP_CLOCKS, in
 * kind order), so two coordinators' fair leases of one kind take turns and
 * each reads the group rows the other committed. Per kind with groups a lease
 * reads a bounded number of rows however many groups and jobs wait: at most
 * GROUP_WAKES_PER_LEASE parked rows woken, at most candidateBudget(max)
 * candidates (group_candidates, each with its leasable count capped), the
 * ungrouped group, then each planned group's first jobs (locked, SKIP LOCKED).
 * Writes to group rows go in key order, as the enqueues' counts do, so a lease
 * and an enqueue do not wait for each other in a cycle (a deadlock that still
 * happens is retried by database.ts).
 *
 * The statements that move ready rows and end leases keep the group rows in
 * CTEs of their own (group-queries.ts readyCounted, readyUncounted, leasesFreed);
 * the reaper forgets idle group rows (forgetIdleGroups).
 */

import { newLeaseToken } from '../../core/ids.js';
import { compareGroupKeys, planGroupLease, virtualTimeRebase, NO_GROUP_RULES, type GroupCandidate, type GroupLeasePlan } from '../../core/fair-share.js';
import {
  candidateBudget,
  candidateVerdict,
  GROUP_FORGET_BATCH,
  GROUP_WAKES_PER_LEASE,
  holdAfterLease,
  type GroupHoldColumns,
} from '../../core/group-transitions.js';
import type { LeaseCap } from '../flow-limits.js';
import {
  decodeGroupRules,
  groupStateOf,
  isIdleGroupForgettable,
  mergeLeaseStreams,
  rowsOfPicks,
  type GroupedKind,
  type GroupStateColumns,
  type IdleGroupColumns,
  type IdleGroupCursor,
  type PickedRow,
} from '../group-lease.js';
import type { PgDatabase, TxClient } from './database.js';
import * as Q from './queries.js';
import type { JobRow } from './rows.js';
import { bind } from './sql-fragments.js';

/** The tenant's kinds with groups within reach of a kinds filter (null: every kind), their clock rows locked. */
export async function groupedKinds(tx: TxClient, tenant: string, kinds: readonly string[] | null): Promise<Map<string, GroupedKind>> {
  const rows = (await tx.query<{ kind: string; virtual_time: number; group_rules: unknown }>(bind(Q.GROUP_CLOCKS, [tenant, kinds]))).rows;
  return new Map(
    rows.map((row) => [row.kind, { kind: row.kind, virtualTime: Number(row.virtual_time), rules: decodeGroupRules(row.group_rules) ?? NO_GROUP_RULES }]),
  );
}

type Picked = PickedRow & { readonly ready_ctid: string };

interface Park {
  readonly group: string;
  readonly hold: GroupHoldColumns;
  /** The counts the park was decided on (GROUP_PARK's guard). */
  readonly running: number;
  readonly queued: number;
}

async function pick(tx: TxClient, tenant: string, kind: string, group: string, n: number): Promise<Picked[]> {
  return (await tx.query<Picked>(bind(Q.GROUP_PICK, [tenant, kind, group, n]))).rows;
}

/** The candidates of a kind with groups for a lease of up to `max` of its jobs, and the groups to park. */
async function candidatesOf(tx: TxClient, tenant: string, grouped: GroupedKind, max: number, now: number): Promise<{ taken: GroupCandidate[]; parks: Park[] }> {
  const kind = grouped.kind;
  await tx.query(bind(Q.GROUP_WAKE, [tenant, kind, now, GROUP_WAKES_PER_LEASE]));
  type Row = GroupStateColumns & { leasable: number; running: number; queued: number };
  const rows = (await tx.query<Row>(bind(Q.GROUP_CANDIDATES, [tenant, kind, max, candidateBudget(max)]))).rows;
  const taken: GroupCandidate[] = [];
  const parks: Park[] = [];
  for (const row of rows) {
    if (taken.length >= max) break;
    const state = groupStateOf(row);
    const earliest =
      row.leasable > 0
        ? null
        : ((await tx.query<{ run_after: number | null }>(bind(Q.GROUP_EARLIEST, [tenant, kind, row.group_key]))).rows[0]?.run_after ?? null);
    const verdict = candidateVerdict(state, grouped.rules, now, row.leasable, earliest);
    if (verdict.kind === 'take') taken.push({ state, available: verdict.available });
    else parks.push({ group: row.group_key, hold: verdict.hold, running: row.running, queued: row.queued });
  }
  const ungrouped = (await tx.query<GroupStateColumns & { leasable: number }>(bind(Q.GROUP_UNGROUPED, [tenant, kind, max]))).rows[0];
  if (ungrouped !== undefined && ungrouped.leasable > 0) taken.push({ state: groupStateOf(ungrouped), available: ungrouped.leasable });
  return { taken, parks };
}

/** One kind with groups: its plan for up to `cap` jobs and the rows it picks, the plan shortened if a pick found fewer (a row locked meanwhile). */
async function planKind(tx: TxClient, tenant: string, grouped: GroupedKind, cap: number, now: number) {
  const { taken, parks } = await candidatesOf(tx, tenant, grouped, cap, now);
  let candidates = taken;
  let plan = planGroupLease({ virtualTime: grouped.virtualTime, rules: grouped.rules, candidates, max: cap, now });
  const byGroup = new Map<string, Picked[]>();
  for (const [group, n] of plan.taken) byGroup.set(group, await pick(tx, tenant, grouped.kind, group, n));
  if ([...plan.taken].some(([group, n]) => (byGroup.get(group)?.length ?? 0) < n)) {
    candidates = candidates.map((c) =>
      plan.taken.has(c.state.group) ? { ...c, available: Math.min(c.available, byGroup.get(c.state.group)?.length ?? 0) } : c,
    );
    plan = planGroupLease({ virtualTime: grouped.virtualTime, rules: grouped.rules, candidates, max: cap, now });
  }
  return { candidates, parks, stream: rowsOfPicks(plan.picks, byGroup) };
}

/** Writes a kind's parks and the plan of what it gave, in key order, and its virtual time (rebased when due). */
async function applyPlan(tx: TxClient, tenant: string, grouped: GroupedKind, plan: GroupLeasePlan | null, parks: readonly Park[], now: number): Promise<void> {
  const kind = grouped.kind;
  const writes: { group: string; write: () => Promise<unknown> }[] = parks.map((park) => ({
    group: park.group,
    write: () => tx.query(bind(Q.GROUP_PARK, [tenant, kind, park.group, park.hold.slotHeld, park.hold.wakeAt, park.running, park.queued])),
  }));
  for (const state of plan?.groups ?? []) {
    const hold = holdAfterLease(state, grouped.rules, now);
    // The ungrouped group keeps no queued count.
    const taken = state.group === '' ? 0 : (plan?.taken.get(state.group) ?? 0);
    const leased = plan?.taken.get(state.group) ?? 0;
    const values = [tenant, kind, state.group, state.finishTag, leased, state.windowStart, state.windowCount, hold.slotHeld, hold.wakeAt, taken];
    writes.push({ group: state.group, write: () => tx.query(bind(Q.GROUP_LEASED, values)) });
  }
  writes.sort((a, b) => compareGroupKeys(a.group, b.group));
  for (const { write } of writes) await write();
  if (plan === null || plan.picks.length === 0) return;
  const by = virtualTimeRebase(plan.virtualTime);
  if (by > 0) await tx.query(bind(Q.GROUP_REBASE, [tenant, kind, by]));
  await tx.query(bind(Q.GROUP_CLOCK_SET, [tenant, kind, plan.virtualTime - by]));
}

/**
 * The restricted path's lease when some of its kinds have groups (as SQLite's leaseWithGroups): each capped kind
 * gives a stream, the streams are merged (group-lease.ts), each kind with groups keeps the plan of what it gave,
 * and one statement takes the rows. `base`: $1 tenant, $2 max, $3 tokens, $4 worker, $5 lease ms.
 */
export async function leaseWithGroups(
  tx: TxClient,
  base: readonly unknown[],
  tenant: string,
  max: number,
  caps: readonly LeaseCap[],
  grouped: ReadonlyMap<string, GroupedKind>,
  now: number,
): Promise<JobRow[]> {
  const streams: Picked[][] = [];
  const planned = new Map<string, { readonly grouped: GroupedKind; readonly candidates: GroupCandidate[]; readonly parks: Park[] }>();
  for (const { kind, cap } of caps) {
    const ofKind = grouped.get(kind);
    if (ofKind === undefined) {
      streams.push(await pick(tx, tenant, kind, '', cap));
      continue;
    }
    const { candidates, parks, stream } = await planKind(tx, tenant, ofKind, cap, now);
    streams.push(stream);
    planned.set(kind, { grouped: ofKind, candidates, parks });
  }
  const chosen = mergeLeaseStreams(streams, max);
  for (const [kind, { grouped: ofKind, candidates, parks }] of planned) {
    const taken = chosen.filter((row) => row.kind === kind).length;
    const plan = taken === 0 ? null : planGroupLease({ virtualTime: ofKind.virtualTime, rules: ofKind.rules, candidates, max: taken, now });
    await applyPlan(tx, tenant, ofKind, plan, parks, now);
  }
  if (chosen.length === 0) return [];
  const tokens = chosen.map(() => newLeaseToken());
  const values = [
    tenant,
    tokens,
    base[3],
    base[4],
    chosen.map((row) => row.ready_ctid),
    chosen.map((row) => row.seq),
    chosen.map((row) => (planned.has(row.kind) ? row.group_key : null)),
  ];
  const rows = (await tx.query<JobRow>(bind(Q.GROUP_LEASE_INSERT, values))).rows;
  if (rows.length !== chosen.length) throw new Error(`the fair lease chose ${chosen.length} jobs but took ${rows.length}`);
  return rows;
}

/**
 * One reaper pass over idle group rows (nothing queued or running) from `after`, as SQLite's: forgets those that
 * say nothing a new row would not, each by a guarded delete (a row an enqueue or a lease moved since stays).
 */
export async function forgetIdleGroups(db: PgDatabase, after: IdleGroupCursor): Promise<{ readonly forgotten: number; readonly next: IdleGroupCursor }> {
  const from = [after?.tenant ?? '', after?.kind ?? '', after?.group ?? '', GROUP_FORGET_BATCH];
  const rows = (await db.query<IdleGroupColumns & { now_ms: number }>(bind(Q.GROUP_IDLE, from))).rows;
  let forgotten = 0;
  for (const row of rows) {
    if (!isIdleGroupForgettable(row, row.now_ms)) continue;
    const values = [row.tenant, row.kind, row.group_key, row.finish_tag, row.window_count, row.window_start];
    forgotten += (await db.query(bind(Q.GROUP_FORGET, values))).rowCount ?? 0;
  }
  const last = rows[rows.length - 1];
  return { forgotten, next: rows.length < GROUP_FORGET_BATCH || last === undefined ? null : { tenant: last.tenant, kind: last.kind, group: last.group_key } };
}
