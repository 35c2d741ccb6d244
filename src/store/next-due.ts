/**
 * The store's answer to "when could a parked long poll next lease something
 * that nobody will announce?": the earliest runAfter among a tenant's queued
 * jobs of some kinds (a delayed job, or a retry waiting out its backoff). The
 * coordinator sets one timer to it instead of re-running the lease query on an
 * interval (src/engine/lease-waiters.ts).
 */

import { holdReason, type KindFlowState } from './flow-limits.js';

export interface NextDueParams {
  readonly tenant: string;
  /** Only these kinds; every kind when absent or empty. */
  readonly kinds?: readonly string[];
}

export interface NextDue {
  /**
   * The earliest runAfter of a queued job a lease could take (its deadline has not passed), by the store's
   * clock; for a rate-limited kind no earlier than when its window admits again. null when the only jobs wait
   * for a slot (slotHeld).
   */
  readonly runAfter: number | null;
  /** How long from now, by the store's clock, until it is due; 0 when it is due already; null with runAfter. */
  readonly inMs: number | null;
  /** Some of those jobs wait for a maxConcurrent slot: a job of the tenant that finishes may free one. */
  readonly slotHeld?: true;
}

/**
 * The answer for a tenant with restricted kinds (flow-limits.ts), from what each backend read:
 * `others`, the earliest runAfter among the kinds asked for that are not restricted; `firsts`, each
 * restricted kind's earliest runAfter. A paused kind does not count, a kind at its maxConcurrent sets
 * slotHeld, a kind at its rate counts from when its window admits again.
 */
export function restrictedNextDue(
  others: number | null,
  states: readonly KindFlowState[],
  firsts: ReadonlyMap<string, number | null>,
  now: number,
): NextDue | null {
  let runAfter = others;
  let slotHeld = false;
  for (const state of states) {
    const hold = holdReason(state, now);
    const first = firsts.get(state.kind) ?? null;
    if (hold?.kind === 'paused' || first === null) continue;
    if (hold?.kind === 'slot') slotHeld = true;
    else {
      const at = hold === null ? first : Math.max(first, hold.admitsAt);
      runAfter = runAfter === null ? at : Math.min(runAfter, at);
    }
  }
  return nextDue(runAfter, slotHeld, now);
}

export function nextDue(runAfter: number | null, slotHeld: boolean, now: number): NextDue | null {
  if (runAfter === null && !slotHeld) return null;
  return { runAfter, inMs: runAfter === null ? null : Math.max(0, runAfter - now), ...(slotHeld ? { slotHeld: true as const } : {}) };
}

/**
 * restrictedNextDue with kinds that have groups (group-lease.ts groupedKindDue): each such kind's first time is
 * what its groups wait for, under its own flow rules when it has any; a group waiting for a slot sets slotHeld.
 */
export function groupedNextDue(
  others: number | null,
  states: readonly KindFlowState[],
  firsts: ReadonlyMap<string, number | null>,
  grouped: ReadonlyMap<string, { readonly first: number | null; readonly slotHeld: boolean }>,
  now: number,
): NextDue | null {
  const all = [...states];
  const merged = new Map(firsts);
  let slotHeld = false;
  for (const [kind, due] of grouped) {
    merged.set(kind, due.first);
    if (due.slotHeld) slotHeld = true;
    if (!states.some((state) => state.kind === kind)) {
      all.push({ kind, paused: false, maxConcurrent: null, rate: null, running: 0, windowStart: null, windowCount: 0 });
    }
  }
  const answer = restrictedNextDue(others, all, merged, now);
  return slotHeld ? nextDue(answer?.runAfter ?? null, true, now) : answer;
}
