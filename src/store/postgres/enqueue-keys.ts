/**
 * The dedupe and unique keys of an enqueue for PostgreSQL, inside the
 * enqueue's transaction. core/dedupe.ts decides; this module reads each key's
 * holder (one entry of its unique index, migration 13, with the transaction's
 * clock) and applies the answer with a statement that restates it: a fold
 * into the dedupe key's holder, a refusal naming the unique key's holder, or,
 * for a new job, the release of the keys by holders that no longer keep them.
 * A release is applied only once neither key answered, so a refused request
 * changes nothing.
 *
 * Nothing is locked before the holder is read. What keeps two enqueues of one
 * key from both creating a job is the unique index: the second insert waits
 * for the first transaction, finds the key taken, and inserts nothing; the
 * enqueue then reads the holder again (enqueue.ts). A guarded write that
 * matches nothing (a lease took the holder, an operator requeued it, another
 * enqueue released its key first) answers `moved`, with the same effect.
 */

import { decideDedupe, decideUnique } from '../../core/dedupe.js';
import type { QueryConfig } from 'pg';
import type { EnqueueOutcome, EnqueueParams, JobRecord } from '../store.js';
import type { PgDatabase } from './database.js';
import { lockJob } from './locked-rows.js';
import * as Q from './queries.js';
import { toJobRecord, toStatus, type JobRow } from './rows.js';
import { bind } from './sql-fragments.js';

type Db = Pick<PgDatabase, 'query'>;

export type KeysAnswer =
  /** Folded into the dedupe key's holder, or refused for the unique key's holder. */
  | { readonly kind: 'answered'; readonly outcome: EnqueueOutcome }
  /** The keys are free for the job about to be inserted (any holder that no longer keeps one has released it). */
  | { readonly kind: 'free' }
  /** A holder changed between the read and the write: read again. */
  | { readonly kind: 'moved' };

interface DedupeHolderRow {
  readonly id: string;
  readonly status: string;
  readonly epoch: number;
  readonly created_at: number;
  readonly run_after: number;
  readonly dedupe_until: number;
  readonly now_ms: number;
}

interface UniqueHolderRow {
  readonly id: string;
  readonly status: string;
  readonly finished_at: number | null;
  readonly now_ms: number;
}

/**
 * The insert's bindings of the keys ($19 to $21 of JOB_INSERT_FLOW). The dedupe window is bound as its length
 * (core/dedupe.ts dedupeUntilOf: now + ttlMs), since its start is the server's now().
 */
export function keyBindings(params: EnqueueParams): readonly [string | null, number | null, string | null] {
  return [params.dedupe?.key ?? null, params.dedupe?.ttlMs ?? null, params.unique?.key ?? null];
}

async function readJob(db: Db, params: EnqueueParams, id: string): Promise<JobRecord> {
  const row = (await db.query<JobRow>(bind(Q.JOB_GET, [id, params.tenant, params.owner]))).rows[0];
  if (row === undefined) throw new Error('a key holder read in this transaction cannot be read');
  return toJobRecord(row);
}

/** What the keys answer the request, inside its transaction; `payload` is its canonical text. */
export async function resolveEnqueueKeys(db: Db, params: EnqueueParams, payload: string): Promise<KeysAnswer> {
  const scope = [params.tenant, params.owner, params.kind] as const;
  // The guarded writes that free the keys for the new job, applied once neither key answered.
  const releases: QueryConfig[] = [];
  if (params.dedupe !== undefined) {
    const dedupe = params.dedupe;
    const holder = (await db.query<DedupeHolderRow>(bind(Q.JOB_DEDUPE_HOLDER, [...scope, dedupe.key]))).rows[0];
    if (holder !== undefined) {
      const facts = {
        status: toStatus(holder.status),
        epoch: holder.epoch,
        createdAt: holder.created_at,
        runAfter: holder.run_after,
        dedupeUntil: holder.dedupe_until,
      };
      const decision = decideDedupe(facts, dedupe, holder.now_ms);
      if (decision.kind === 'merge') {
        // drop changes nothing: the holder is answered as it is.
        if (decision.replacePayload || decision.runAfter !== holder.run_after || decision.dedupeUntil !== holder.dedupe_until) {
          // The holder's row and its ready row locked first, so that the merge statement reads them with a snapshot
          // taken after any other merge or lease of the holder committed (the merge replaces the ready row).
          if ((await lockJob(db, holder.id, params.tenant, params.owner)) === undefined) return { kind: 'moved' };
          const merged = await db.query(
            bind(Q.JOB_DEDUPE_MERGE, [holder.id, dedupe.key, decision.replacePayload, payload, params.payloadBytes, decision.runAfter, decision.dedupeUntil]),
          );
          if (merged.rowCount !== 1) return { kind: 'moved' };
        }
        return { kind: 'answered', outcome: { kind: 'deduplicated', job: await readJob(db, params, holder.id) } };
      }
      releases.push(bind(Q.JOB_DEDUPE_RELEASE, [holder.id, dedupe.key]));
    }
  }
  if (params.unique !== undefined) {
    const { key, forMs } = params.unique;
    const holder = (await db.query<UniqueHolderRow>(bind(Q.JOB_UNIQUE_HOLDER, [...scope, key]))).rows[0];
    if (holder !== undefined) {
      if (decideUnique({ status: toStatus(holder.status), finishedAt: holder.finished_at }, { forMs }, holder.now_ms).kind === 'refuse') {
        return { kind: 'answered', outcome: { kind: 'duplicate', job: await readJob(db, params, holder.id) } };
      }
      releases.push(bind(Q.JOB_UNIQUE_RELEASE, [holder.id, key, forMs]));
    }
  }
  for (const release of releases) {
    if ((await db.query(release)).rowCount !== 1) return { kind: 'moved' };
  }
  return { kind: 'free' };
}
