/**
 * Fair shares among the groups of one kind: how many of a lease's jobs each
 * group gets, decided by start-time fair queuing (SFQ) over a few small rows
 * a backend stores. Pure and deterministic: integers only, no clock (the
 * store passes `now` from its own), no randomness. docs/FAIRNESS.md explains
 * the model and shows the simulation that checks it.
 *
 * The model. A kind keeps a virtual time V; each group keeps the finish tag F
 * of its last leased job. A group's next job starts at S = max(F, V) and
 * finishes at S + cost, where cost = VIRTUAL_COST_PER_JOB / weight. A lease
 * takes the job with the smallest S, again and again, and V becomes the
 * start tag of the job it took last. A group that was idle (or held by its
 * own limits) has F < V and so starts at V, level with the groups that kept
 * working: it banks no credit. Ties go to the smaller stored F, then the
 * smaller group key (code point order).
 *
 * Within one lease a candidate's start tags are s, s + c, s + 2c, … with
 * s = max(F, V) fixed for the whole lease (V only reaches s when the group
 * is taken), so the plan equals merging those sequences and keeping the
 * `max` smallest by (tag, F, group key): a backend may compute it in SQL
 * (generate_series) instead of calling planGroupLease.
 *
 * What a backend reads, however many groups and jobs wait: the kind's V;
 * at most `max` candidate group rows from an index on
 * (tenant, kind, finish_tag, group_key) that holds only groups with
 * leasable jobs and no hold (groupHold; a group comes back when a job of it
 * finishes or its rate window or first delayed job comes due); for each
 * candidate the count of its leasable jobs, capped at `max`; then the planned
 * number of each group's jobs in lease order (priority DESC, run_after, seq).
 * `max` candidates suffice: each can give at least one job, so a lease takes
 * `max` jobs whenever that many are leasable. In all, O(max) group rows and
 * O(max²) index entries at most, as the kinds-filter lease reads O(max × kinds).
 *
 * Sybils: the guarantee is per group. A customer who spreads its jobs over
 * 100 groups gets 100 shares unless the kind's weights say otherwise
 * (weights of 0.01 on each make the 100 weigh one share together).
 */

import { type RateWindow, rateWindowAt } from './rate-window.js';

/** The longest group name, in UTF-16 code units. */
export const GROUP_MAX_LENGTH = 255;

/**
 * The group key of jobs enqueued without a group: the empty string, which no
 * group name can be (names have 1 to 255 characters). Stored as is in a
 * NOT NULL column, so unique indexes need no NULL handling on either backend.
 */
export const UNGROUPED = '';

/** The virtual cost of one job to a group of weight 1; a group of weight w pays round(this / w). */
export const VIRTUAL_COST_PER_JOB = 1_000_000;
export const DEFAULT_GROUP_WEIGHT = 1;
export const MIN_GROUP_WEIGHT = 0.01;
export const MAX_GROUP_WEIGHT = 1_000;
/** Most entries in a kind's `groups.weights`. */
export const MAX_GROUP_WEIGHTS = 10_000;
/** The same bounds as a kind's own maxConcurrent and rate. */
export const MAX_GROUP_CONCURRENCY = 1_000_000;
export const MAX_GROUP_RATE_LIMIT = 1_000_000;
export const MAX_GROUP_RATE_PER_MS = 24 * 60 * 60_000;

/**
 * When V reaches this, the store subtracts V from V and from every finish
 * tag of the kind (rebaseFinishTag), in the lease's transaction. Tags then
 * stay exact in a double and in a 64-bit column: a plan adds at most
 * max × 10⁸ to V. At weight 1 a rebase comes once per 4.5 × 10⁹ jobs.
 */
export const VIRTUAL_TIME_REBASE_AT = 2 ** 52;

export interface GroupRate {
  readonly limit: number;
  readonly perMs: number;
}

/** A kind's `groups` as PUT /kinds/{k} carries it. */
export interface GroupLimitsConfig {
  readonly maxConcurrent?: number;
  readonly rate?: GroupRate;
  readonly weights?: Readonly<Record<string, number>>;
}

/** A kind's group rules, validated: limits that apply to each group separately, and the weights. */
export interface GroupRules {
  readonly maxConcurrent: number | null;
  readonly rate: GroupRate | null;
  /** Weight by group key; a group not named weighs DEFAULT_GROUP_WEIGHT. UNGROUPED may be named. */
  readonly weights: ReadonlyMap<string, number>;
}

export const NO_GROUP_RULES: GroupRules = Object.freeze({ maxConcurrent: null, rate: null, weights: new Map<string, number>() });

/** What a backend stores per (tenant, kind, group). */
export interface GroupState {
  readonly group: string;
  /** Virtual finish tag of the group's last leased job; 0 before its first. */
  readonly finishTag: number;
  /** Live leases of the group. */
  readonly running: number;
  /** The group's rate window: its start and the leases it admitted; null before the first. */
  readonly windowStart: number | null;
  readonly windowCount: number;
}

/** Is this a group name a job may carry (1 to 255 UTF-16 code units)? */
export function isGroupName(value: unknown): value is string {
  return typeof value === 'string' && value.length >= 1 && value.length <= GROUP_MAX_LENGTH;
}

/** The stored key of a job's group: its name, or UNGROUPED without one. */
export function groupKeyOf(group: string | null | undefined): string {
  return group === null || group === undefined ? UNGROUPED : group;
}

/** The state of a group that has no row yet (or whose row was forgotten). */
export function newGroupState(group: string): GroupState {
  return { group, finishTag: 0, running: 0, windowStart: null, windowCount: 0 };
}

function isBoundedInteger(value: number, max: number): boolean {
  return Number.isSafeInteger(value) && value >= 1 && value <= max;
}

export type GroupRulesResult = { readonly ok: true; readonly rules: GroupRules } | { readonly ok: false; readonly problems: readonly string[] };

/** Validates a kind's `groups` and freezes it; every problem is listed. */
export function parseGroupRules(config: GroupLimitsConfig): GroupRulesResult {
  const problems: string[] = [];
  if (config.maxConcurrent !== undefined && !isBoundedInteger(config.maxConcurrent, MAX_GROUP_CONCURRENCY)) {
    problems.push(`groups.maxConcurrent must be an integer from 1 to ${MAX_GROUP_CONCURRENCY}`);
  }
  if (config.rate !== undefined) {
    if (!isBoundedInteger(config.rate.limit, MAX_GROUP_RATE_LIMIT)) problems.push(`groups.rate.limit must be an integer from 1 to ${MAX_GROUP_RATE_LIMIT}`);
    if (!isBoundedInteger(config.rate.perMs, MAX_GROUP_RATE_PER_MS)) problems.push(`groups.rate.perMs must be an integer from 1 to ${MAX_GROUP_RATE_PER_MS}`);
  }
  const entries = Object.entries(config.weights ?? {});
  if (entries.length > MAX_GROUP_WEIGHTS) problems.push(`groups.weights may name at most ${MAX_GROUP_WEIGHTS} groups`);
  for (const [group, weight] of entries) {
    if (group !== UNGROUPED && !isGroupName(group)) problems.push(`groups.weights: a group name has at most ${GROUP_MAX_LENGTH} characters`);
    if (!Number.isFinite(weight) || weight < MIN_GROUP_WEIGHT || weight > MAX_GROUP_WEIGHT) {
      problems.push(`groups.weights[${JSON.stringify(group.slice(0, 40))}] must be a number from ${MIN_GROUP_WEIGHT} to ${MAX_GROUP_WEIGHT}`);
    }
  }
  if (problems.length > 0) return { ok: false, problems };
  const rate = config.rate === undefined ? null : Object.freeze({ limit: config.rate.limit, perMs: config.rate.perMs });
  const rules: GroupRules = { maxConcurrent: config.maxConcurrent ?? null, rate, weights: new Map(entries) };
  return { ok: true, rules: Object.freeze(rules) };
}

/** The virtual cost of one job of `group`: VIRTUAL_COST_PER_JOB over its weight, rounded, at least 1. */
export function groupJobCost(rules: GroupRules, group: string): number {
  const weight = rules.weights.get(group) ?? DEFAULT_GROUP_WEIGHT;
  return Math.max(1, Math.round(VIRTUAL_COST_PER_JOB / weight));
}

/** The group's rate window in effect at `now` (rate-window.ts); a group without a rate has none, so a fresh one. */
export function currentGroupWindow(state: GroupState, rules: GroupRules, now: number): RateWindow {
  if (rules.rate === null) return { start: now, count: 0 };
  return rateWindowAt(state, rules.rate.perMs, now);
}

/** How many more jobs the group's own limits let it start now (Infinity without limits). */
export function groupRoom(state: GroupState, rules: GroupRules, now: number): number {
  let room = Number.POSITIVE_INFINITY;
  if (rules.maxConcurrent !== null) room = Math.min(room, rules.maxConcurrent - state.running);
  if (rules.rate !== null) room = Math.min(room, rules.rate.limit - currentGroupWindow(state, rules, now).count);
  return Math.max(0, room);
}

/**
 * Why a group may not start a job now: 'slot' (at maxConcurrent until one of its jobs finishes) or 'rate'
 * (its window is full until `admitsAt`). A held group leaves the candidate index; the others are not held back.
 */
export type GroupHold = { readonly kind: 'none' } | { readonly kind: 'slot' } | { readonly kind: 'rate'; readonly admitsAt: number };

export function groupHold(state: GroupState, rules: GroupRules, now: number): GroupHold {
  if (rules.maxConcurrent !== null && state.running >= rules.maxConcurrent) return { kind: 'slot' };
  if (rules.rate !== null) {
    const window = currentGroupWindow(state, rules, now);
    if (window.count >= rules.rate.limit) return { kind: 'rate', admitsAt: window.start + rules.rate.perMs };
  }
  return { kind: 'none' };
}

/** The group after one of its running jobs left `running` (completed, failed, expired, cancelled). */
export function groupAfterFinish(state: GroupState): GroupState {
  return { ...state, running: Math.max(0, state.running - 1) };
}

/**
 * May the store delete this group's row once it has no queued job? Yes when the row says nothing a fresh one
 * would not: nothing running, a finish tag not ahead of V (max(F, V) = V either way) and no open rate window.
 */
export function isGroupStateForgettable(state: GroupState, virtualTime: number, rules: GroupRules, now: number): boolean {
  return state.running === 0 && state.finishTag <= virtualTime && currentGroupWindow(state, rules, now).count === 0;
}

/** What to subtract from V and from each finish tag of the kind now: V itself once it reaches VIRTUAL_TIME_REBASE_AT, else 0. */
export function virtualTimeRebase(virtualTime: number): number {
  return virtualTime >= VIRTUAL_TIME_REBASE_AT ? virtualTime : 0;
}

/** A finish tag after a rebase by `by`; tags behind V become 0, which is still behind the new V. */
export function rebaseFinishTag(finishTag: number, by: number): number {
  return Math.max(0, finishTag - by);
}

/** Orders group keys by code point, as PostgreSQL's COLLATE "C" and SQLite's BINARY order UTF-8 text. */
export function compareGroupKeys(a: string, b: string): number {
  const ai = a[Symbol.iterator]();
  const bi = b[Symbol.iterator]();
  for (;;) {
    const x = ai.next();
    const y = bi.next();
    if (x.done === true || y.done === true) return x.done === true ? (y.done === true ? 0 : -1) : 1;
    const difference = (x.value.codePointAt(0) ?? 0) - (y.value.codePointAt(0) ?? 0);
    if (difference !== 0) return difference;
  }
}

/** A group a lease may take from: its stored state and how many of its jobs are leasable now (the store may cap it at max). */
export interface GroupCandidate {
  readonly state: GroupState;
  readonly available: number;
}

export interface GroupLeaseInput {
  /** The kind's V. */
  readonly virtualTime: number;
  readonly rules: GroupRules;
  /** At most `max` of them suffice (the module comment says which); any order. */
  readonly candidates: readonly GroupCandidate[];
  /** The most jobs the lease may take: the worker's max after the kind's own limits. */
  readonly max: number;
  readonly now: number;
}

/** One job of the plan: which group it comes from and its virtual start and finish. */
export interface GroupPick {
  readonly group: string;
  readonly startTag: number;
  readonly finishTag: number;
}

export interface GroupLeasePlan {
  /** In lease order: ascending start tag. */
  readonly picks: readonly GroupPick[];
  /** The kind's V after the lease: the start tag of its last pick, or V unchanged. */
  readonly virtualTime: number;
  /** The new state of each group the lease took from, in order of first pick; other rows do not change. */
  readonly groups: readonly GroupState[];
  /** Jobs taken per group key. */
  readonly taken: ReadonlyMap<string, number>;
}

interface Lane {
  readonly state: GroupState;
  readonly cost: number;
  readonly room: number;
  nextStart: number;
  taken: number;
}

/** Does lane `a` go before lane `b`: smaller next start tag, then smaller stored finish tag, then smaller key. */
function goesBefore(a: Lane, b: Lane): boolean {
  if (a.nextStart !== b.nextStart) return a.nextStart < b.nextStart;
  if (a.state.finishTag !== b.state.finishTag) return a.state.finishTag < b.state.finishTag;
  return compareGroupKeys(a.state.group, b.state.group) < 0;
}

/**
 * The lease's plan: up to `max` picks in SFQ order among the candidates, each group within its own
 * maxConcurrent and rate window and its available jobs; a group with no room is skipped, never blocks another.
 */
export function planGroupLease(input: GroupLeaseInput): GroupLeasePlan {
  const { rules, now, virtualTime } = input;
  const max = Math.max(0, Math.floor(input.max));
  const lanes: Lane[] = [];
  const seen = new Set<string>();
  for (const candidate of input.candidates) {
    const { state } = candidate;
    if (seen.has(state.group)) throw new Error(`group ${JSON.stringify(state.group)} is a lease candidate twice`);
    seen.add(state.group);
    const room = Math.min(Math.floor(candidate.available), groupRoom(state, rules, now), max);
    if (room <= 0) continue;
    lanes.push({ state, cost: groupJobCost(rules, state.group), room, nextStart: Math.max(state.finishTag, virtualTime), taken: 0 });
  }
  const picks: GroupPick[] = [];
  const order: Lane[] = [];
  while (picks.length < max) {
    let best: Lane | undefined;
    for (const lane of lanes) if (lane.taken < lane.room && (best === undefined || goesBefore(lane, best))) best = lane;
    if (best === undefined) break;
    const finishTag = best.nextStart + best.cost;
    picks.push({ group: best.state.group, startTag: best.nextStart, finishTag });
    if (best.taken === 0) order.push(best);
    best.taken += 1;
    best.nextStart = finishTag;
  }
  const groups = order.map((lane): GroupState => {
    const window = rules.rate === null ? { start: lane.state.windowStart, count: lane.state.windowCount } : currentGroupWindow(lane.state, rules, now);
    return {
      group: lane.state.group,
      finishTag: lane.nextStart,
      running: lane.state.running + lane.taken,
      windowStart: window.start,
      windowCount: rules.rate === null ? window.count : window.count + lane.taken,
    };
  });
  const last = picks[picks.length - 1];
  return {
    picks,
    virtualTime: last === undefined ? virtualTime : last.startTag,
    groups,
    taken: new Map(order.map((lane) => [lane.state.group, lane.taken])),
  };
}

/** What the fair lease needs of a queued job. */
export interface QueuedGroupJob {
  readonly group: string;
  readonly priority: number;
  readonly runAfter: number;
  /** Enqueue order. */
  readonly seq: number;
}

/** The lease order within a group: higher priority first, then earlier runAfter, then earlier enqueue. */
export function compareLeaseOrder(a: QueuedGroupJob, b: QueuedGroupJob): number {
  if (a.priority !== b.priority) return b.priority - a.priority;
  if (a.runAfter !== b.runAfter) return a.runAfter - b.runAfter;
  return a.seq - b.seq;
}

export interface GroupJobsLeaseInput<J extends QueuedGroupJob> extends Omit<GroupLeaseInput, 'candidates'> {
  /** Each candidate group with its leasable jobs (any order; the best `max` are enough). */
  readonly candidates: readonly { readonly state: GroupState; readonly jobs: readonly J[] }[];
}

export interface GroupJobsLease<J extends QueuedGroupJob> {
  readonly plan: GroupLeasePlan;
  /** The jobs the lease takes, in plan order; within a group in lease order. */
  readonly jobs: readonly J[];
}

/** planGroupLease over candidates given with their jobs, and the jobs it takes: each group's best, priority first. */
export function decideGroupLease<J extends QueuedGroupJob>(input: GroupJobsLeaseInput<J>): GroupJobsLease<J> {
  const queues = new Map<string, J[]>();
  for (const candidate of input.candidates) {
    const strays = candidate.jobs.filter((job) => job.group !== candidate.state.group);
    if (strays.length > 0) throw new Error(`group ${JSON.stringify(candidate.state.group)} was given a job of another group`);
    queues.set(candidate.state.group, [...candidate.jobs].sort(compareLeaseOrder));
  }
  const plan = planGroupLease({ ...input, candidates: input.candidates.map((candidate) => ({ state: candidate.state, available: candidate.jobs.length })) });
  const next = new Map<string, number>();
  const jobs = plan.picks.map((pick) => {
    const index = next.get(pick.group) ?? 0;
    next.set(pick.group, index + 1);
    const job = queues.get(pick.group)?.[index];
    if (job === undefined) throw new Error(`the plan took more jobs of ${JSON.stringify(pick.group)} than it was given`);
    return job;
  });
  return { plan, jobs };
}
