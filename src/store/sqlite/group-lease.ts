/**
 * The fair lease among groups for SQLite (docs/FAIRNESS.md §4), inside the
 * write transaction, which holds the write lock throughout: what it reads
 * cannot change before it writes. Only the restricted path of lease.ts comes
 * here, when a kind it may take has a group_clocks row.
 *
 * Per kind with groups, a lease reads a bounded number of rows however many
 * groups and jobs wait: the parked groups whose wake time has come (at most
 * GROUP_WAKES_PER_LEASE), the candidates of group_candidates in (finish tag,
 * key) order with each one's leasable count capped at the lease's share (at
 * most candidateBudget(max) rows), the ungrouped group's row and count, and
 * then each planned group's first jobs in lease order. planGroupLease decides;
 * candidates that cannot give a job are parked (candidateVerdict), and the
 * taken groups' rows and the kind's virtual time are written with the leases.
 *
 * Also here: every insert of a ready row (insertReady), which counts a
 * grouped job in its group, the end of a lease of a group (groupLeaseEnded),
 * and the reaper's pass that forgets idle group rows (forgetIdleGroups).
 */

import { planGroupLease, virtualTimeRebase, NO_GROUP_RULES, type GroupCandidate, type GroupLeasePlan } from '../../core/fair-share.js';
import { candidateBudget, candidateVerdict, GROUP_FORGET_BATCH, GROUP_WAKES_PER_LEASE, holdAfterLease } from '../../core/group-transitions.js';
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
import type { Statements } from './queries.js';
import type { LeaseBindings } from './lease-statements.js';
import type { LeaseRow } from './rows.js';

/** A ready row's values (SQL.readyInsert). */
export interface ReadyValues {
  readonly tenant: string;
  readonly kind: string;
  readonly groupKey: string;
  readonly priority: number;
  readonly runAfter: number;
  readonly seq: number;
  readonly deadlineAt: number | null;
  readonly attempts: number;
  readonly epoch: number;
}

/**
 * A queued job's ready row. A job with a group also counts in its group's row (`queued`: 1 for a job that
 * became ready, 0 for one that moved within its group) and marks its kind as having groups; a job without
 * one writes nothing more, so kinds without groups pay nothing here.
 */
export function insertReady(st: Statements, row: ReadyValues, queued: 0 | 1): void {
  st.readyInsert.run(row);
  if (row.groupKey === '') return;
  st.groupClockEnsure.run({ tenant: row.tenant, kind: row.kind });
  st.groupReadyAdded.run({ tenant: row.tenant, kind: row.kind, groupKey: row.groupKey, n: queued });
}

/** Ready rows of a group left other than by a lease (cancel, a queued deadline). */
export function readyRemoved(st: Statements, tenant: string, kind: string, groupKey: string, n: number): void {
  if (groupKey !== '' && n > 0) st.groupReadyRemoved.run({ tenant, kind, groupKey, n });
}

/** A lease ended (complete, fail, expiry); `leaseGroup` is its job_leases.group_key, null for a lease of the plain path. */
export function groupLeaseEnded(st: Statements, tenant: string, kind: string, leaseGroup: string | null | undefined): void {
  if (leaseGroup !== null && leaseGroup !== undefined) st.groupFinished.run({ tenant, kind, groupKey: leaseGroup });
}

/** The tenant's kinds with groups within reach of a kinds filter (null: every kind). */
export function groupedKinds(st: Statements, tenant: string, kinds: readonly string[] | null): Map<string, GroupedKind> {
  const rows = st.groupClocks.all({ tenant }) as { kind: string; virtual_time: number; group_rules: string | null }[];
  const grouped = new Map<string, GroupedKind>();
  for (const row of rows) {
    if (kinds !== null && !kinds.includes(row.kind)) continue;
    grouped.set(row.kind, { kind: row.kind, virtualTime: row.virtual_time, rules: decodeGroupRules(row.group_rules) ?? NO_GROUP_RULES });
  }
  return grouped;
}

/** The candidates of a kind with groups for a lease of up to `max` of its jobs; parks those that cannot give one. */
function candidatesOf(st: Statements, tenant: string, grouped: GroupedKind, max: number, now: number): GroupCandidate[] {
  const kind = grouped.kind;
  st.groupWake.run({ tenant, kind, now, limit: GROUP_WAKES_PER_LEASE });
  const rows = st.groupCandidates.all({ tenant, kind, now, max, budget: candidateBudget(max) }) as (GroupStateColumns & { leasable: number; queued: number })[];
  const taken: GroupCandidate[] = [];
  for (const row of rows) {
    if (taken.length >= max) break;
    const state = groupStateOf(row);
    const earliest =
      row.leasable > 0 ? null : ((st.groupEarliest.get({ tenant, kind, groupKey: row.group_key, now }) as { run_after: number | null }).run_after ?? null);
    const verdict = candidateVerdict(state, grouped.rules, now, row.leasable, earliest);
    if (verdict.kind === 'take') taken.push({ state, available: verdict.available });
    else {
      const hold = { slotHeld: verdict.hold.slotHeld ? 1 : 0, wakeAt: verdict.hold.wakeAt };
      st.groupPark.run({ tenant, kind, groupKey: row.group_key, ...hold, running: row.running, queued: row.queued });
    }
  }
  const ungrouped = st.groupUngrouped.get({ tenant, kind, now, max }) as GroupStateColumns & { leasable: number };
  if (ungrouped.leasable > 0) taken.push({ state: groupStateOf(ungrouped), available: ungrouped.leasable });
  return taken;
}

function pick(st: Statements, tenant: string, kind: string, groupKey: string, n: number, now: number): PickedRow[] {
  return st.groupPick.all({ tenant, kind, groupKey, n, now }) as PickedRow[];
}

/** Writes a plan that took jobs: each taken group's row with its hold, and the kind's virtual time (rebased when due). */
function applyPlan(st: Statements, tenant: string, grouped: GroupedKind, plan: GroupLeasePlan, now: number): void {
  const kind = grouped.kind;
  for (const state of plan.groups) {
    const hold = holdAfterLease(state, grouped.rules, now);
    st.groupLeased.run({
      tenant,
      kind,
      groupKey: state.group,
      finishTag: state.finishTag,
      leased: plan.taken.get(state.group) ?? 0,
      windowStart: state.windowStart,
      windowCount: state.windowCount,
      slotHeld: hold.slotHeld ? 1 : 0,
      wakeAt: hold.wakeAt,
      // The ungrouped group keeps no queued count.
      taken: state.group === '' ? 0 : (plan.taken.get(state.group) ?? 0),
    });
  }
  const by = virtualTimeRebase(plan.virtualTime);
  if (by > 0) st.groupRebase.run({ tenant, kind, by });
  st.groupClockSet.run({ tenant, kind, virtualTime: plan.virtualTime - by });
}

/**
 * The restricted path's lease when some of its kinds have groups: each capped kind gives a stream (a kind with
 * groups its fair plan, one without its ready jobs in lease order), the streams are merged (group-lease.ts), each
 * kind with groups keeps the plan of what it gave, and one statement takes the rows. The caller deletes the
 * ready rows (lease.ts taken) and moves the rate windows.
 */
export function leaseWithGroups(st: Statements, bindings: LeaseBindings, caps: readonly LeaseCap[], grouped: ReadonlyMap<string, GroupedKind>): LeaseRow[] {
  const { tenant, now } = bindings;
  const streams: PickedRow[][] = [];
  const planned = new Map<string, { readonly grouped: GroupedKind; readonly candidates: GroupCandidate[] }>();
  for (const { kind, cap } of caps) {
    const ofKind = grouped.get(kind);
    if (ofKind === undefined) {
      streams.push(pick(st, tenant, kind, '', cap, now));
      continue;
    }
    const candidates = candidatesOf(st, tenant, ofKind, cap, now);
    const plan = planGroupLease({ virtualTime: ofKind.virtualTime, rules: ofKind.rules, candidates, max: cap, now });
    const byGroup = new Map([...plan.taken].map(([group, n]) => [group, pick(st, tenant, kind, group, n, now)]));
    streams.push(rowsOfPicks(plan.picks, byGroup));
    planned.set(kind, { grouped: ofKind, candidates });
  }
  const chosen = mergeLeaseStreams(streams, bindings.max);
  for (const [kind, { grouped: ofKind, candidates }] of planned) {
    const taken = chosen.filter((row) => row.kind === kind).length;
    if (taken === 0) continue;
    applyPlan(st, tenant, ofKind, planGroupLease({ virtualTime: ofKind.virtualTime, rules: ofKind.rules, candidates, max: taken, now }), now);
  }
  if (chosen.length === 0) return [];
  const rows = JSON.stringify(
    chosen.map((row) => [row.kind, row.group_key, row.priority, row.run_after, row.seq, planned.has(row.kind) ? row.group_key : null]),
  );
  const leased = st.groupLeaseInsert.all({ ...bindings, rows }) as LeaseRow[];
  if (leased.length !== chosen.length) throw new Error(`the fair lease chose ${chosen.length} jobs but took ${leased.length}`);
  return leased;
}

/**
 * One reaper pass over idle group rows (nothing queued or running) from `after`: forgets those that say nothing a
 * new row would not (isIdleGroupForgettable), each by a guarded delete; answers where the next pass goes on from.
 */
export function forgetIdleGroups(st: Statements, now: number, after: IdleGroupCursor): { readonly forgotten: number; readonly next: IdleGroupCursor } {
  const from = { tenant: after?.tenant ?? '', kind: after?.kind ?? '', groupKey: after?.group ?? '' };
  const rows = st.groupIdle.all({ ...from, limit: GROUP_FORGET_BATCH }) as IdleGroupColumns[];
  let forgotten = 0;
  for (const row of rows) {
    if (!isIdleGroupForgettable(row, now)) continue;
    const key = { tenant: row.tenant, kind: row.kind, groupKey: row.group_key };
    forgotten += st.groupForget.run({ ...key, finishTag: row.finish_tag, windowCount: row.window_count, windowStart: row.window_start }).changes;
  }
  const last = rows[rows.length - 1];
  return { forgotten, next: rows.length < GROUP_FORGET_BATCH || last === undefined ? null : { tenant: last.tenant, kind: last.kind, group: last.group_key } };
}
