/**
 * What each event does to a group's stored row (docs/FAIRNESS.md §4), decided
 * here once for both backends; each backend applies the answer in guarded
 * statements. A group row holds its GroupState (core/fair-share.ts) and three
 * columns that say whether it is a lease candidate: `queued` (its ready jobs),
 * `slotHeld` (at groups.maxConcurrent until one of its jobs ends) and `wakeAt`
 * (out of the candidate index until then: a full rate window, or only delayed
 * jobs). The candidate index holds the rows with queued > 0, no slot held and
 * no wake time, ordered by (finish tag, key), so a lease reads the few groups
 * that can give it a job first, however many groups wait.
 *
 * The events:
 * - a ready job of the group appears (enqueue, retry, requeue, release):
 *   queued + 1 and the wake time cleared, so the lease looks again (a group
 *   that is still held parks again at that lease: candidateVerdict);
 * - a ready job leaves other than by a lease (cancel, deadline): queued − 1;
 * - a lease takes jobs: the plan's new state (planGroupLease), queued − taken,
 *   and the hold columns of that state (holdAfterLease);
 * - a job of the group leaves running (complete, fail, expiry): running − 1 and
 *   the slot hold lifted (groupAfterFinish);
 * - the kind's rules change: every hold of the kind lifted, to be decided
 *   again under the new rules;
 * - the reaper finds the row idle (nothing queued or running) and saying
 *   nothing a new row would not (fair-share.ts isGroupStateForgettable): the
 *   row is deleted, guarded by the values it was decided on, so the table
 *   holds only the groups active recently.
 *
 * The ungrouped group (key '') of a grouped kind has a state row but no queued
 * count: its ready rows are probed directly at each lease (one index seek), so
 * that enqueues without a group never write a group row.
 */

import { groupHold, type GroupRules, type GroupState } from './fair-share.js';

/** How long a candidate whose only ready jobs are past their deadline stays out of the index (the reaper ends them meanwhile). */
export const GROUP_RECHECK_MS = 1_000;

/** Whether a group row is out of the candidate index, and until when. */
export interface GroupHoldColumns {
  readonly slotHeld: boolean;
  readonly wakeAt: number | null;
}

export const NOT_HELD: GroupHoldColumns = Object.freeze({ slotHeld: false, wakeAt: null });

/** The hold columns of a group's state after a lease: held at its slot limit, or parked until its rate window admits. */
export function holdAfterLease(state: GroupState, rules: GroupRules, now: number): GroupHoldColumns {
  const hold = groupHold(state, rules, now);
  if (hold.kind === 'slot') return { slotHeld: true, wakeAt: null };
  if (hold.kind === 'rate') return { slotHeld: false, wakeAt: hold.admitsAt };
  return NOT_HELD;
}

/**
 * A candidate row as the lease read it, with how many of its jobs are leasable now (capped by the store) and the
 * earliest run_after among its ready jobs not past their deadline: take it, or park it out of the index.
 */
export type CandidateVerdict = { readonly kind: 'take'; readonly available: number } | { readonly kind: 'park'; readonly hold: GroupHoldColumns };

export function candidateVerdict(state: GroupState, rules: GroupRules, now: number, leasable: number, earliest: number | null): CandidateVerdict {
  const hold = holdAfterLease(state, rules, now);
  if (hold.slotHeld || hold.wakeAt !== null) return { kind: 'park', hold };
  if (leasable > 0) return { kind: 'take', available: leasable };
  // Only delayed jobs: back when the first comes due. None that a lease could take: look again a little later.
  return { kind: 'park', hold: { slotHeld: false, wakeAt: earliest === null ? now + GROUP_RECHECK_MS : Math.max(earliest, now + 1) } };
}

/** Most idle group rows one reaper pass looks at (and forgets those it may). */
export const GROUP_FORGET_BATCH = 200;

/** Most parked rows whose wake time has come that one lease puts back into the candidate index. */
export const GROUP_WAKES_PER_LEASE = 256;

/** Most candidate rows one lease examines, for a lease of up to `max` jobs: the bound on what it reads of the group table. */
export function candidateBudget(max: number): number {
  return 4 * max + 32;
}
