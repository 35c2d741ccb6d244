/**
 * Per-kind flow control, decided in one place for both backends: a kind may be
 * paused (never leased), limited to `maxConcurrent` live leases across every
 * worker and coordinator of its tenant, and limited to `rate.limit` leases
 * started per window of `rate.perMs`. The store reads a restricted kind's rules
 * and state inside the lease transaction (the kinds row locked on PostgreSQL,
 * the write lock held on SQLite) and asks leaseAllowance how many of its jobs
 * this lease may take; kinds without rules never reach this file.
 *
 * The rate uses fixed windows on a grid (core/rate-window.ts): each admits
 * `limit` leases; over any run of whole windows no more than `limit` leases
 * start per `perMs`; two windows that meet may start up to 2 × limit within one
 * `perMs` around their border (docs/design/kinds.md §12.2, per-kind limits).
 */

import { type RateWindow, rateWindowAt } from '../core/rate-window.js';

export interface KindRate {
  readonly limit: number;
  readonly perMs: number;
}

/** What a kind says about its flow; a kind with none of these is unrestricted and costs the lease nothing. */
export interface KindFlowRules {
  readonly paused: boolean;
  readonly maxConcurrent: number | null;
  readonly rate: KindRate | null;
}

/** A restricted kind as a lease transaction reads it. */
export interface KindFlowState extends KindFlowRules {
  readonly kind: string;
  /** Live leases of the kind (running jobs), after this transaction's expiries. */
  readonly running: number;
  /** The current rate window's start and the leases it has admitted; null before the first. */
  readonly windowStart: number | null;
  readonly windowCount: number;
}

export function isRestricted(rules: KindFlowRules): boolean {
  return rules.paused || rules.maxConcurrent !== null || rules.rate !== null;
}

/** The window in effect at `now` (core/rate-window.ts); a kind without a rate has none, so a fresh one. */
export function currentWindow(state: KindFlowState, now: number): RateWindow {
  if (state.rate === null) return { start: now, count: 0 };
  return rateWindowAt(state, state.rate.perMs, now);
}

/** How many of the kind's jobs a lease of up to `max` may take now: 0 while paused, at its concurrency or its rate. */
export function leaseAllowance(state: KindFlowState, max: number, now: number): number {
  if (state.paused) return 0;
  let allowance = max;
  if (state.maxConcurrent !== null) allowance = Math.min(allowance, state.maxConcurrent - state.running);
  if (state.rate !== null) allowance = Math.min(allowance, state.rate.limit - currentWindow(state, now).count);
  return Math.max(0, allowance);
}

/** The window to store after `leased` jobs of the kind were leased at `now` (only for rate-limited kinds that leased). */
export function windowAfter(state: KindFlowState, leased: number, now: number): { readonly start: number; readonly count: number } {
  const window = currentWindow(state, now);
  return { start: window.start, count: window.count + leased };
}

/**
 * Why a restricted kind's available jobs are not leased now, for a parked long poll: 'paused' (only a resume
 * wakes it), 'slot' (a job of the kind finishing frees one), or the time its rate window admits again.
 */
export type HoldReason = { readonly kind: 'paused' } | { readonly kind: 'slot' } | { readonly kind: 'rate'; readonly admitsAt: number } | null;

export function holdReason(state: KindFlowState, now: number): HoldReason {
  if (state.paused) return { kind: 'paused' };
  if (state.maxConcurrent !== null && state.running >= state.maxConcurrent) return { kind: 'slot' };
  if (state.rate !== null) {
    const window = currentWindow(state, now);
    if (window.count >= state.rate.limit) return { kind: 'rate', admitsAt: window.start + state.rate.perMs };
  }
  return null;
}

/** How many of the leased jobs are of each kind (to move the rate windows). */
export function countByKind(jobs: readonly { readonly kind: string }[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const job of jobs) counts.set(job.kind, (counts.get(job.kind) ?? 0) + 1);
  return counts;
}

/** A lease's or a waiter's kinds filter without duplicates; null (every kind) when absent or empty. */
export function kindsFilter(kinds: readonly string[] | undefined): string[] | null {
  return kinds !== undefined && kinds.length > 0 ? [...new Set(kinds)] : null;
}

/** The restricted kinds within reach of a kinds filter (null: every kind). */
export function inReach(states: readonly KindFlowState[], kinds: readonly string[] | null): KindFlowState[] {
  return kinds === null ? [...states] : states.filter((state) => kinds.includes(state.kind));
}

/** Most distinct queued kinds a restricted lease without a kinds filter walks. */
export const MAX_QUEUED_KINDS = 1_000;

/** A kind a restricted lease walks, with how many of its jobs it may take. */
export interface LeaseCap {
  readonly kind: string;
  readonly cap: number;
}

/**
 * What a restricted lease of up to `max` may take of each candidate kind, in the candidates' order: an
 * unrestricted kind up to `max`, a restricted one what leaseAllowance gives; kinds allowed nothing are left out.
 */
export function leaseCaps(candidates: readonly string[], restricted: ReadonlyMap<string, KindFlowState>, max: number, now: number): LeaseCap[] {
  const caps: LeaseCap[] = [];
  for (const kind of candidates) {
    const state = restricted.get(kind);
    const cap = state === undefined ? max : leaseAllowance(state, max, now);
    if (cap > 0) caps.push({ kind, cap });
  }
  return caps;
}

/** The rate windows a restricted lease moves: each rate-limited kind it leased jobs of, with its window after them. */
export function windowsMoved(
  leased: readonly { readonly kind: string }[],
  restricted: ReadonlyMap<string, KindFlowState>,
  now: number,
): { readonly kind: string; readonly start: number; readonly count: number }[] {
  const moved: { kind: string; start: number; count: number }[] = [];
  for (const [kind, count] of countByKind(leased)) {
    const state = restricted.get(kind);
    if (state === undefined || state.rate === null) continue;
    moved.push({ kind, ...windowAfter(state, count, now) });
  }
  return moved;
}
