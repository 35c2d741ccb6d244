/**
 * Deduplication (`dedupe`) and unique jobs (`unique`) at enqueue, decided once
 * for both backends. A key is held by at most one job of its (tenant, owner,
 * kind), which a unique index on each backend enforces; the store reads the
 * holder inside the enqueue's transaction, asks these functions, and applies
 * the answer with a guarded statement that restates it (docs/design/enqueue.md §7.1):
 *
 * - a dedupe key's holder takes the new request in (drop, replace, extend)
 *   while it has never been leased (queued or waiting at epoch 0) and its
 *   window is open; otherwise it gives the key up and a new job takes it;
 * - a unique key's holder refuses the new request (duplicate_job) until it
 *   has finished (succeeded, cancelled or dead) at least forMs ago; then it
 *   gives the key up and a new job takes it.
 */

import { isPurgeableStatus, type JobStatus } from './states.js';

export const DEDUPE_MODES = ['drop', 'replace', 'extend'] as const;
export type DedupeMode = (typeof DEDUPE_MODES)[number];

/** Longest dedupe or unique key, in UTF-16 code units (as idempotency keys). */
export const DEDUPE_KEY_MAX_LENGTH = 255;
/** Longest dedupe window (ttlMs) and longest debounce (maxDelayMs): 30 days. */
export const MAX_DEDUPE_MS = 30 * 24 * 60 * 60_000;
/** Longest time a finished job keeps its unique key (forMs): 365 days, as the longest deadline. */
export const MAX_UNIQUE_FOR_MS = 365 * 24 * 60 * 60_000;

export interface DedupeRequest {
  readonly key: string;
  readonly mode: DedupeMode;
  /** The window: a new holder takes duplicates for this long; `extend` moves the window and runAfter to now + ttlMs. */
  readonly ttlMs: number;
  /** `extend` never moves runAfter (or the window) past the holder's creation plus this; no bound when absent. */
  readonly maxDelayMs?: number;
}

export interface UniqueRequest {
  readonly key: string;
  /** How long after it finished the holder still refuses a new job with its key (0: only while unfinished). */
  readonly forMs: number;
}

/** Does the request name a dedupe or a unique key? Then its store takes the path that reads their holders. */
export function hasEnqueueKeys(request: { readonly dedupe?: DedupeRequest; readonly unique?: UniqueRequest }): boolean {
  return request.dedupe !== undefined || request.unique !== undefined;
}

/** The job that holds a dedupe key, as the store read it. */
export interface DedupeHolder {
  readonly status: JobStatus;
  /** Rises with every lease and never goes back: 0 means never leased. */
  readonly epoch: number;
  readonly createdAt: number;
  readonly runAfter: number;
  /** The end of its window: it takes duplicates while now is before this. */
  readonly dedupeUntil: number;
}

export type DedupeDecision =
  /** Fold the request into the holder: its payload replaced or not, its runAfter and window moved to at least these. */
  | { readonly kind: 'merge'; readonly replacePayload: boolean; readonly runAfter: number; readonly dedupeUntil: number }
  /** The holder takes no more duplicates: it gives the key up, and the request creates a job that holds it. */
  | { readonly kind: 'release' };

/** Does the holder still take duplicates? Never leased (queued or waiting at epoch 0), and inside its window. */
export function takesDuplicates(holder: Pick<DedupeHolder, 'status' | 'epoch' | 'dedupeUntil'>, now: number): boolean {
  return (holder.status === 'queued' || holder.status === 'waiting') && holder.epoch === 0 && now < holder.dedupeUntil;
}

/**
 * What a request with a dedupe key does to the key's holder. `drop` leaves the holder as it is; `replace`
 * replaces its payload; `extend` replaces it too and pushes its runAfter and its window out to now + ttlMs, never
 * past its creation + maxDelayMs, and never earlier than they already are.
 */
export function decideDedupe(holder: DedupeHolder, request: DedupeRequest, now: number): DedupeDecision {
  if (!takesDuplicates(holder, now)) return { kind: 'release' };
  if (request.mode !== 'extend') {
    return { kind: 'merge', replacePayload: request.mode === 'replace', runAfter: holder.runAfter, dedupeUntil: holder.dedupeUntil };
  }
  const cap = request.maxDelayMs === undefined ? Number.POSITIVE_INFINITY : holder.createdAt + request.maxDelayMs;
  const pushed = Math.min(now + request.ttlMs, cap);
  return { kind: 'merge', replacePayload: true, runAfter: Math.max(holder.runAfter, pushed), dedupeUntil: Math.max(holder.dedupeUntil, pushed) };
}

/** The window of a job created with a dedupe key. */
export function dedupeUntilOf(request: DedupeRequest, now: number): number {
  return now + request.ttlMs;
}

/** The job that holds a unique key, as the store read it. */
export interface UniqueHolder {
  readonly status: JobStatus;
  readonly finishedAt: number | null;
}

export type UniqueDecision =
  /** The request is refused with duplicate_job, naming the holder. */
  | { readonly kind: 'refuse' }
  /** The holder finished at least forMs ago: it gives the key up, and the request creates a job that holds it. */
  | { readonly kind: 'release' };

/**
 * Finished means succeeded, cancelled or dead (the statuses retention deletes); a job in `unknown` waits for an
 * operator's reconcile, which may run it again, so it keeps its key like a queued, waiting or running one.
 */
export function decideUnique(holder: UniqueHolder, request: Pick<UniqueRequest, 'forMs'>, now: number): UniqueDecision {
  if (!isPurgeableStatus(holder.status) || holder.finishedAt === null) return { kind: 'refuse' };
  return now < holder.finishedAt + request.forMs ? { kind: 'refuse' } : { kind: 'release' };
}
