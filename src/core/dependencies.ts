/**
 * Job dependencies (dependsOn) and per-key ordering (concurrencyKey), decided
 * once for both backends. Both hold a job in `waiting`, outside the queued
 * indexes a lease walks, until its turn: every parent has succeeded, and it
 * is the earliest unfinished job of its (tenant, kind, concurrencyKey) with no
 * other job of that key queued or running. So a lease never reads a waiting
 * job, and one key's jobs run one at a time in enqueue order without the
 * lease doing anything (docs/design/kinds.md §12.4, §12.5).
 *
 * Stores read the facts inside the write transaction (the key's two index
 * probes under the key's lock on PostgreSQL), ask these functions, and apply
 * the answer with a guarded statement.
 */

import type { JobStatus } from './states.js';

/** Most parents one job may name. */
export const MAX_DEPENDS_ON = 100;
/** Longest concurrencyKey, in UTF-16 code units. */
export const CONCURRENCY_KEY_MAX_LENGTH = 255;
/** Most children GET /jobs/{id} lists (the earliest enqueued). */
export const MAX_LISTED_CHILDREN = 100;

/** What the store knows about a job's key, or null for a job without one. */
export interface KeyFacts {
  /** A job of the key enqueued before this one still holds its turn (queued, waiting or running). */
  readonly earlierHolder: boolean;
  /** Another job of the key is queued or running. */
  readonly otherActive: boolean;
}

/** Whether the key lets the job run now: no key, or no earlier holder and nobody else active. */
export function hasKeyTurn(key: KeyFacts | null): boolean {
  return key === null || (!key.earlierHolder && !key.otherActive);
}

/** Does a job in this status hold its key's turn? The final statuses (succeeded, dead, cancelled, unknown) pass it on. */
export function holdsKeyTurn(status: JobStatus): boolean {
  return status === 'queued' || status === 'waiting' || status === 'running';
}

export interface StartFacts {
  /** Parents that have not succeeded. */
  readonly pendingParents: number;
  /** A parent has already ended dead or cancelled (an enqueue; a requeue counts such a parent as pending). */
  readonly failedParent: boolean;
  readonly key: KeyFacts | null;
}

export type StartDecision = { readonly kind: 'queued' } | { readonly kind: 'waiting' } | { readonly kind: 'dependency_failed' };

/**
 * The status a job starts in (an enqueue with dependsOn or a concurrencyKey, a requeue or a reconcile's requeue
 * of such a job). A parent already dead or cancelled makes the job dead at once, as if the parent had ended
 * after the enqueue: the answer does not depend on which of the two committed first.
 */
export function decideStart(facts: StartFacts): StartDecision {
  if (facts.failedParent) return { kind: 'dependency_failed' };
  if (facts.pendingParents > 0 || !hasKeyTurn(facts.key)) return { kind: 'waiting' };
  return { kind: 'queued' };
}

export type ParentEndDecision =
  /** Each waiting child has one pending parent fewer. */
  | { readonly kind: 'satisfied' }
  /** Each waiting child ends dead with dependency_failed, and so on down. */
  | { readonly kind: 'failed' }
  /** unknown: the children wait for the operator's reconcile. */
  | { readonly kind: 'none' };

/** What a parent reaching `status` means for its waiting children. */
export function decideParentEnd(status: JobStatus): ParentEndDecision {
  if (status === 'succeeded') return { kind: 'satisfied' };
  if (status === 'dead' || status === 'cancelled') return { kind: 'failed' };
  return { kind: 'none' };
}

export interface ReleaseFacts {
  readonly status: JobStatus;
  readonly pendingParents: number;
  readonly key: KeyFacts | null;
}

export type ReleaseDecision = { readonly kind: 'release' } | { readonly kind: 'keep_waiting' };

/** A waiting job becomes queued when no parent is pending and the key's turn is its own. */
export function decideRelease(facts: ReleaseFacts): ReleaseDecision {
  if (facts.status !== 'waiting' || facts.pendingParents > 0 || !hasKeyTurn(facts.key)) return { kind: 'keep_waiting' };
  return { kind: 'release' };
}
