/**
 * What both backends share of the fair lease among groups (docs/FAIRNESS.md):
 * a kind's rules as stored, a group row as read, and the merge of a lease's
 * streams. The plan itself is core/fair-share.ts planGroupLease, and what each
 * event writes into a group row core/group-transitions.ts; each backend's
 * group-lease.ts reads the rows and applies the answers.
 *
 * A lease that reaches several kinds, some with groups, takes from each kind a
 * stream of jobs: a kind with groups its fair plan (up to what the kind's own
 * limits allow, flow-limits.ts leaseAllowance), a kind without its ready jobs
 * in lease order. The streams are merged by their heads in lease order
 * (priority, then run_after, then enqueue order), so a kind's own order is
 * kept and kinds compete as they do without groups; a kind with groups then
 * takes the first k jobs of its plan, which is its plan for k (a plan's prefix
 * is the plan of a smaller lease).
 */

import { canonicalJson } from '../core/canonical-json.js';
import { LeaseholdError } from '../core/errors.js';
import {
  groupKeyOf,
  isGroupName,
  isGroupStateForgettable,
  newGroupState,
  NO_GROUP_RULES,
  parseGroupRules,
  type GroupLimitsConfig,
  type GroupRules,
  type GroupState,
} from '../core/fair-share.js';
import { holdAfterLease } from '../core/group-transitions.js';
import type { EnqueueParams } from './job-records.js';

/** The stored group key of a job to enqueue ('' without a group); a name the API would refuse is refused here too. */
export function enqueuedGroupKey(params: Pick<EnqueueParams, 'group'>): string {
  if (params.group !== undefined && params.group !== null && !isGroupName(params.group)) {
    throw new LeaseholdError('invalid_request', 'body/group must be a string of 1 to 255 characters');
  }
  return groupKeyOf(params.group);
}

/** A kind's `groups` as the API carries it: only what is set. */
export function groupRulesConfig(rules: GroupRules): GroupLimitsConfig {
  return {
    ...(rules.maxConcurrent === null ? {} : { maxConcurrent: rules.maxConcurrent }),
    ...(rules.rate === null ? {} : { rate: { limit: rules.rate.limit, perMs: rules.rate.perMs } }),
    ...(rules.weights.size === 0 ? {} : { weights: Object.fromEntries(rules.weights) }),
  };
}

/** A kind's rules as the kinds row stores them: canonical JSON of groupRulesConfig, or NULL for none. */
export function encodeGroupRules(rules: GroupRules | null | undefined): string | null {
  return rules === null || rules === undefined ? null : canonicalJson(groupRulesConfig(rules));
}

/** The stored rules back (PostgreSQL's json column arrives parsed); a row the store did not write is a bug. */
export function decodeGroupRules(stored: unknown): GroupRules | null {
  if (stored === null || stored === undefined) return null;
  const config = (typeof stored === 'string' ? JSON.parse(stored) : stored) as GroupLimitsConfig;
  const parsed = parseGroupRules(config);
  if (!parsed.ok) throw new Error(`stored group rules are invalid: ${parsed.problems.join('; ')}`);
  return parsed.rules;
}

/** A group row as the lease reads it (numbers may arrive as strings from PostgreSQL's bigint; NULLs from a LEFT JOIN that found none). */
export interface GroupStateColumns {
  readonly group_key: string;
  readonly finish_tag: number | string | null;
  readonly running: number | string | null;
  readonly window_start: number | string | null;
  readonly window_count: number | string | null;
}

export function groupStateOf(row: GroupStateColumns): GroupState {
  if (row.finish_tag === null) return newGroupState(row.group_key);
  return {
    group: row.group_key,
    finishTag: Number(row.finish_tag),
    running: Number(row.running ?? 0),
    windowStart: row.window_start === null ? null : Number(row.window_start),
    windowCount: Number(row.window_count ?? 0),
  };
}

/** A kind with groups as a lease reads it: its virtual time and rules (NO rules stored: no limits, weight 1 each). */
export interface GroupedKind {
  readonly kind: string;
  readonly virtualTime: number;
  readonly rules: GroupRules;
}

/** A ready row a lease may take, with the group it belongs to. */
export interface PickedRow {
  readonly seq: number;
  readonly kind: string;
  readonly group_key: string;
  readonly priority: number;
  readonly run_after: number;
}

function leasesBefore(a: PickedRow, b: PickedRow): boolean {
  if (a.priority !== b.priority) return a.priority > b.priority;
  if (a.run_after !== b.run_after) return a.run_after < b.run_after;
  return a.seq < b.seq;
}

/** Up to `max` rows from the streams, each stream's in its own order, the next always the best head in lease order. */
export function mergeLeaseStreams<R extends PickedRow>(streams: readonly (readonly R[])[], max: number): R[] {
  const next = streams.map(() => 0);
  const merged: R[] = [];
  while (merged.length < max) {
    let best = -1;
    streams.forEach((stream, i) => {
      const head = stream[next[i] ?? 0];
      const current = best < 0 ? undefined : streams[best]?.[next[best] ?? 0];
      if (head !== undefined && (current === undefined || leasesBefore(head, current))) best = i;
    });
    if (best < 0) break;
    const row = streams[best]?.[next[best] ?? 0];
    if (row === undefined) break;
    merged.push(row);
    next[best] = (next[best] ?? 0) + 1;
  }
  return merged;
}

/** The rows a plan's picks take, in pick order: each pick the next of its group's rows (given in lease order). */
export function rowsOfPicks<R extends PickedRow>(picks: readonly { readonly group: string }[], byGroup: ReadonlyMap<string, readonly R[]>): R[] {
  const used = new Map<string, number>();
  return picks.map((pick) => {
    const index = used.get(pick.group) ?? 0;
    used.set(pick.group, index + 1);
    const row = byGroup.get(pick.group)?.[index];
    if (row === undefined) throw new Error(`the plan took more jobs of group ${JSON.stringify(pick.group)} than it could pick`);
    return row;
  });
}

/** What a kind with groups says to a parked long poll, as each backend reads it (next-due.ts). */
export interface GroupedDueFacts {
  /** Some group is a lease candidate: due now, unless the kind's own limits hold it. */
  readonly candidate: boolean;
  /** The earliest wake time of a parked group with queued jobs. */
  readonly wakeAt: number | null;
  /** Some group with queued jobs waits for one of its jobs to end. */
  readonly slotHeld: boolean;
  /** The ungrouped group's earliest ready job not past its deadline, and its row. */
  readonly ungroupedFirst: number | null;
  readonly ungrouped: GroupState;
}

/** When the kind may next lease something by its groups (null: nothing it waits for by time), and whether a slot holds some. */
export function groupedKindDue(facts: GroupedDueFacts, rules: GroupRules, now: number): { readonly first: number | null; readonly slotHeld: boolean } {
  const times: number[] = [];
  if (facts.candidate) times.push(now);
  if (facts.wakeAt !== null) times.push(facts.wakeAt);
  let slotHeld = facts.slotHeld;
  if (facts.ungroupedFirst !== null) {
    const hold = holdAfterLease(facts.ungrouped, rules, now);
    if (hold.slotHeld) slotHeld = true;
    else times.push(Math.max(facts.ungroupedFirst, hold.wakeAt ?? facts.ungroupedFirst));
  }
  return { first: times.length === 0 ? null : Math.min(...times), slotHeld };
}

/** One group's jobs as GET /metrics shows them (group rows' queued and running counts). */
export interface GroupGauge {
  readonly kind: string;
  readonly group: string;
  readonly waiting: number;
  readonly running: number;
}

/**
 * A tenant's groups with jobs waiting or running: the `limit` with the most, and the rest summed, so a scrape's
 * series stay bounded however many groups there are. The jobs without a group are not among them (the tenant's
 * own gauges count every job).
 */
export interface GroupStats {
  readonly top: readonly GroupGauge[];
  readonly rest: { readonly groups: number; readonly waiting: number; readonly running: number };
}

/** GroupStats from the top rows and the tenant's totals as a backend read them. */
export function groupStatsOf(
  top: readonly { readonly kind: string; readonly group_key: string; readonly queued: number | string; readonly running: number | string }[],
  totals: { readonly groups: number | string; readonly queued: number | string; readonly running: number | string } | undefined,
): GroupStats {
  const gauges = top.map((row) => ({ kind: row.kind, group: row.group_key, waiting: Number(row.queued), running: Number(row.running) }));
  const sum = (pick: (gauge: GroupGauge) => number): number => gauges.reduce((total, gauge) => total + pick(gauge), 0);
  return {
    top: gauges,
    rest: {
      groups: Math.max(0, Number(totals?.groups ?? 0) - gauges.length),
      waiting: Math.max(0, Number(totals?.queued ?? 0) - sum((g) => g.waiting)),
      running: Math.max(0, Number(totals?.running ?? 0) - sum((g) => g.running)),
    },
  };
}

/** An idle group row as the reaper reads it (GROUP_IDLE), with its kind's virtual time and rules. */
export interface IdleGroupColumns extends GroupStateColumns {
  readonly tenant: string;
  readonly kind: string;
  readonly virtual_time: number | string;
  readonly group_rules: unknown;
}

/** Whether the reaper may delete an idle group row now (fair-share.ts isGroupStateForgettable). */
export function isIdleGroupForgettable(row: IdleGroupColumns, now: number): boolean {
  return isGroupStateForgettable(groupStateOf(row), Number(row.virtual_time), decodeGroupRules(row.group_rules) ?? NO_GROUP_RULES, now);
}

/** Where the reaper's walk of idle group rows goes on from: after this key, or from the start. */
export type IdleGroupCursor = { readonly tenant: string; readonly kind: string; readonly group: string } | null;
