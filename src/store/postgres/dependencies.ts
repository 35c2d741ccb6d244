/**
 * Dependencies and per-key ordering for PostgreSQL, inside the transaction
 * of the write that starts or ends a job (mirroring src/store/sqlite/dependencies.ts).
 * core/dependencies.ts decides; this module reads the facts and applies each
 * answer with a guarded statement (queries.ts).
 *
 * What makes the facts hold until the statement acts on them:
 * - a parent's row: an enqueue locks its parents (JOB_PARENTS_MARK) and a
 *   job's end locks its own row first, so a child is either seen by its
 *   parent's end or sees that end;
 * - a key's turn: everything that reads a key's turn and acts on it takes the
 *   key's transaction-scoped advisory lock first (JOB_KEY_LOCK), and reads
 *   after it with a fresh snapshot (READ COMMITTED), so it sees what the
 *   previous holder committed.
 *
 * A job without children or a key costs nothing here: its row already says
 * so (has_children, concurrency_key), and no statement runs.
 */

import { decideParentEnd, decideRelease, decideStart, holdsKeyTurn, type KeyFacts, type StartDecision } from '../../core/dependencies.js';
import { DEPENDENCY_FAILED, lastErrorColumns } from '../lease-endings.js';
import type { Availability } from '../store.js';
import type { TxClient } from './database.js';
import { expectOne } from './locked-rows.js';
import * as Q from './queries.js';
import { toStatus } from './rows.js';
import { bind } from './sql-fragments.js';

/** A job as the flow statements return it (FLOW_COLUMNS). */
export interface FlowRow {
  readonly id: string;
  readonly seq: number;
  readonly tenant: string;
  readonly kind: string;
  readonly status: string;
  readonly pending_parents: number;
  readonly concurrency_key: string | null;
  readonly has_children: boolean;
}

/** What a job's end needs to know about it, with the status it has just reached. */
export type EndedJob = Pick<FlowRow, 'id' | 'tenant' | 'kind' | 'status' | 'concurrency_key' | 'has_children'>;

/** What the transaction's flow moves did besides its own jobs: jobs made available, jobs ended (dependency_failed). */
export interface FlowEffects {
  readonly available: Availability[];
  cascaded: boolean;
}

export function flowEffects(): FlowEffects {
  return { available: [], cascaded: false };
}

/** Above every seq: a job not inserted yet comes after every other. */
const AFTER_EVERY_JOB = Number.MAX_SAFE_INTEGER;

export async function lockKey(tx: TxClient, job: { readonly tenant: string; readonly kind: string }, key: string): Promise<void> {
  await tx.query(bind(Q.JOB_KEY_LOCK, [job.tenant, job.kind, key]));
}

/** The key's lock and its two probes for the job `seq` (AFTER_EVERY_JOB for one not inserted yet); null without a key. */
export async function keyFacts(
  tx: TxClient,
  job: { readonly tenant: string; readonly kind: string; readonly key: string | null; readonly seq?: number },
): Promise<KeyFacts | null> {
  if (job.key === null) return null;
  await lockKey(tx, job, job.key);
  const row = (
    await tx.query<{ earlier_holder: boolean; other_active: boolean }>(bind(Q.JOB_KEY_FACTS, [job.tenant, job.kind, job.key, job.seq ?? AFTER_EVERY_JOB]))
  ).rows[0];
  return { earlierHolder: row?.earlier_holder === true, otherActive: row?.other_active === true };
}

/** A restarted job (requeue, reconcile's requeue): its parents not yet succeeded and its key's turn. Never dependency_failed. */
export async function restartDecision(
  tx: TxClient,
  job: { readonly id: string; readonly seq: number; readonly tenant: string; readonly kind: string; readonly concurrency_key: string | null },
): Promise<{ readonly decision: Exclude<StartDecision, { kind: 'dependency_failed' }>; readonly pendingParents: number }> {
  const pendingParents = (await tx.query<{ n: number }>(bind(Q.JOB_PENDING_PARENTS, [job.id]))).rows[0]?.n ?? 0;
  const decision = decideStart({ pendingParents, failedParent: false, key: await keyFacts(tx, { ...job, key: job.concurrency_key }) });
  return { decision: decision.kind === 'waiting' ? decision : { kind: 'queued' }, pendingParents };
}

async function tryRelease(tx: TxClient, job: FlowRow, effects: FlowEffects): Promise<void> {
  const key = await keyFacts(tx, { tenant: job.tenant, kind: job.kind, key: job.concurrency_key, seq: job.seq });
  if (decideRelease({ status: toStatus(job.status), pendingParents: job.pending_parents, key }).kind !== 'release') return;
  await expectOne(tx, Q.JOB_RELEASE, [job.id]);
  effects.available.push({ tenant: job.tenant, kind: job.kind });
}

/** After `ended` reached their statuses in this transaction: their children and their keys' next jobs move. */
export async function settleEnded(tx: TxClient, ended: readonly EndedJob[], effects: FlowEffects): Promise<void> {
  const work = ended.filter((job) => job.has_children || job.concurrency_key !== null);
  for (let job = work.pop(); job !== undefined; job = work.pop()) {
    const status = toStatus(job.status);
    if (job.has_children) {
      const effect = decideParentEnd(status);
      if (effect.kind === 'satisfied') {
        for (const child of (await tx.query<FlowRow>(bind(Q.JOB_DEPENDENCY_SATISFY, [job.id]))).rows) await tryRelease(tx, child, effects);
      } else if (effect.kind === 'failed') {
        const error = lastErrorColumns(DEPENDENCY_FAILED);
        const failed = (await tx.query<FlowRow>(bind(Q.JOB_DEPENDENCY_FAIL, [job.id, DEPENDENCY_FAILED.status, error.code, error.message, error.errorClass])))
          .rows;
        if (failed.length > 0) effects.cascaded = true;
        work.push(...failed);
      }
    }
    if (job.concurrency_key !== null && !holdsKeyTurn(status)) {
      await lockKey(tx, job, job.concurrency_key);
      const head = (await tx.query<FlowRow>(bind(Q.JOB_KEY_HEAD, [job.tenant, job.kind, job.concurrency_key]))).rows[0];
      if (head !== undefined) await tryRelease(tx, head, effects);
    }
  }
}
