/**
 * The dedupe and unique keys of an enqueue for SQLite, inside its write
 * transaction (which holds the database's write lock, so a holder read here
 * cannot change before the statement that acts on it). core/dedupe.ts
 * decides; this module reads each key's holder (one entry of its unique
 * index, migration 13) and applies the answer: a fold into the dedupe key's
 * holder, a refusal naming the unique key's holder, or, for a new job, the
 * release of the keys by holders that no longer keep them. A release is
 * applied only once neither key answered, so a refused request changes nothing.
 */

import { decideDedupe, decideUnique, dedupeUntilOf } from '../../core/dedupe.js';
import type { JobStatus } from '../../core/states.js';
import type { EnqueueOutcome, EnqueueParams } from '../store.js';
import type { CounterMoves } from './counter-moves.js';
import { expectOne, reloadJobById } from './locked-rows.js';
import { insertReady } from './group-lease.js';
import type { Statements } from './queries.js';

interface DedupeHolderRow {
  readonly seq: number;
  readonly id: string;
  readonly tenant: string;
  readonly kind: string;
  readonly group_key: string;
  readonly priority: number;
  readonly status: JobStatus;
  readonly epoch: number;
  readonly created_at: number;
  readonly run_after: number;
  readonly dedupe_until: number;
  readonly payload_bytes: number;
}

interface UniqueHolderRow {
  readonly seq: number;
  readonly id: string;
  readonly status: JobStatus;
  readonly finished_at: number | null;
}

/** The key columns of a job the enqueue inserts (all null for a job without keys). */
export interface KeyColumns {
  readonly dedupeKey: string | null;
  readonly dedupeUntil: number | null;
  readonly uniqueKey: string | null;
}

export function keyColumns(params: EnqueueParams, now: number): KeyColumns {
  return {
    dedupeKey: params.dedupe?.key ?? null,
    dedupeUntil: params.dedupe === undefined ? null : dedupeUntilOf(params.dedupe, now),
    uniqueKey: params.unique?.key ?? null,
  };
}

function moveReadyRow(st: Statements, holder: DedupeHolderRow, runAfter: number): void {
  const key = { tenant: holder.tenant, kind: holder.kind, groupKey: holder.group_key, priority: holder.priority, seq: holder.seq };
  const ready = st.readyDelete.get({ ...key, runAfter: holder.run_after }) as { deadline_at: number | null; attempts: number; epoch: number } | undefined;
  if (ready === undefined) throw new Error('a queued dedupe holder has no ready row');
  // The same group's job again: its queued count stays, and a parked group looks at the new run-after at the next lease.
  insertReady(st, { ...key, runAfter, deadlineAt: ready.deadline_at, attempts: ready.attempts, epoch: ready.epoch }, 0);
}

/**
 * The answer the keys give the request (deduplicated into the dedupe key's holder, or duplicate of the unique
 * key's holder), or null when it creates a job: then the keys are free for that job to take.
 */
export function resolveEnqueueKeys(st: Statements, moves: CounterMoves, params: EnqueueParams, payload: string, now: number): EnqueueOutcome | null {
  const scope = { tenant: params.tenant, owner: params.owner, kind: params.kind };
  // The guarded writes that free the keys for the new job, applied once neither key answered.
  const releases: (() => void)[] = [];
  if (params.dedupe !== undefined) {
    const key = params.dedupe.key;
    const holder = st.jobDedupeHolder.get({ ...scope, key }) as DedupeHolderRow | undefined;
    if (holder !== undefined) {
      const decision = decideDedupe(
        { status: holder.status, epoch: holder.epoch, createdAt: holder.created_at, runAfter: holder.run_after, dedupeUntil: holder.dedupe_until },
        params.dedupe,
        now,
      );
      if (decision.kind === 'merge') {
        // drop changes nothing: the holder is answered as it is.
        if (decision.replacePayload || decision.runAfter !== holder.run_after || decision.dedupeUntil !== holder.dedupe_until) {
          const merged = st.jobDedupeMerge.all({
            seq: holder.seq,
            key,
            replace: decision.replacePayload ? 1 : 0,
            payload,
            payloadBytes: params.payloadBytes,
            runAfter: decision.runAfter,
            dedupeUntil: decision.dedupeUntil,
            now,
          }) as { status: JobStatus; run_after: number }[];
          expectOne(merged.length);
          // A queued holder's ready row moves with its run_after (it is part of the row's key).
          const after = merged[0];
          if (after !== undefined && after.status === 'queued' && after.run_after !== holder.run_after) moveReadyRow(st, holder, after.run_after);
          // The payload counts toward the tenant's storage like any payload (tenant_counters.storage_bytes).
          const delta = decision.replacePayload ? params.payloadBytes - holder.payload_bytes : 0;
          if (delta !== 0) moves.storage(params.tenant, delta);
        }
        return { kind: 'deduplicated', job: reloadJobById(st, holder.id) };
      }
      releases.push(() => expectOne(st.jobDedupeRelease.run({ seq: holder.seq, key, now }).changes));
    }
  }
  if (params.unique !== undefined) {
    const { key, forMs } = params.unique;
    const holder = st.jobUniqueHolder.get({ ...scope, key }) as UniqueHolderRow | undefined;
    if (holder !== undefined) {
      if (decideUnique({ status: holder.status, finishedAt: holder.finished_at }, { forMs }, now).kind === 'refuse') {
        return { kind: 'duplicate', job: reloadJobById(st, holder.id) };
      }
      releases.push(() => expectOne(st.jobUniqueRelease.run({ seq: holder.seq, key, forMs, now }).changes));
    }
  }
  for (const release of releases) release();
  return null;
}
