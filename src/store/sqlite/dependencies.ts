/**
 * Dependencies and per-key ordering for SQLite, inside the write transaction
 * (which holds the database's write lock, so the facts read here cannot
 * change before the guarded statement that acts on them). core/dependencies.ts
 * decides; this module reads the facts and applies each answer:
 *
 * - a job's start (enqueue, requeue): decideStart over its parents and its key;
 * - a job's end: decideParentEnd for its waiting children (one pending parent
 *   fewer, released at none; or dead with dependency_failed, and so on down),
 *   and, when a keyed job passes its turn on, decideRelease for the key's
 *   earliest job still holding a turn.
 *
 * A job without children or a key costs nothing here: its snapshot already
 * says so (has_children, concurrency_key), and no statement runs.
 */

import { decideParentEnd, decideRelease, decideStart, holdsKeyTurn, type KeyFacts, type StartDecision } from '../../core/dependencies.js';
import type { JobStatus } from '../../core/states.js';
import { DEPENDENCY_FAILED, lastErrorColumns } from '../lease-endings.js';
import type { Availability } from '../store.js';
import type { CounterMoves } from './counter-moves.js';
import { insertReady } from './group-lease.js';
import { expectOne } from './locked-rows.js';
import type { Statements } from './queries.js';
import { countedJob } from './rows.js';

/** A job as the flow statements return it. */
export interface FlowRow {
  readonly seq: number;
  readonly tenant: string;
  readonly kind: string;
  readonly status: JobStatus;
  readonly pending_parents: number;
  readonly concurrency_key: string | null;
  readonly has_children: number;
  readonly created_at: number;
  readonly started_at: number | null;
  readonly finished_at: number | null;
}

/** A released job's row (SQL.jobRelease), with what its ready row holds. */
interface ReleasedRow {
  readonly seq: number;
  readonly tenant: string;
  readonly kind: string;
  readonly group_key: string;
  readonly priority: number;
  readonly run_after: number;
  readonly deadline_at: number | null;
  readonly attempts: number;
  readonly epoch: number;
  readonly created_at: number;
  readonly started_at: number | null;
  readonly finished_at: number | null;
}

/** A job that became queued (a release, a requeue): its ready row, and its counter move from `from`. */
export function becameQueued(st: Statements, moves: CounterMoves, row: ReleasedRow, from: FlowRow['status'], fromFinishedAt: number | null): void {
  const ready = { tenant: row.tenant, kind: row.kind, groupKey: row.group_key, priority: row.priority, runAfter: row.run_after, seq: row.seq };
  insertReady(st, { ...ready, deadlineAt: row.deadline_at, attempts: row.attempts, epoch: row.epoch }, 1);
  moves.moved(countedJob({ ...row, finished_at: fromFinishedAt }, from), countedJob(row, 'queued'));
}

/** What a job's end needs to know about it, with the status it has just reached. */
export type EndedJob = Pick<FlowRow, 'seq' | 'tenant' | 'kind' | 'status' | 'concurrency_key' | 'has_children'>;

/** What the transaction's flow moves did besides its own job: jobs made available, jobs ended (dependency_failed). */
export interface FlowEffects {
  readonly available: Availability[];
  cascaded: boolean;
}

export function flowEffects(available: Availability[]): FlowEffects {
  return { available, cascaded: false };
}

/** The largest seq SQLite assigns is below this: a job not inserted yet comes after every other. */
const AFTER_EVERY_JOB = Number.MAX_SAFE_INTEGER;

/** The key's two probes for the job `seq` (AFTER_EVERY_JOB for one not inserted yet); null without a key. */
export function keyFacts(
  st: Statements,
  job: { readonly tenant: string; readonly kind: string; readonly key: string | null; readonly seq?: number },
): KeyFacts | null {
  if (job.key === null) return null;
  const row = st.jobKeyFacts.get({ tenant: job.tenant, kind: job.kind, key: job.key, seq: job.seq ?? AFTER_EVERY_JOB }) as {
    earlier_holder: number;
    other_active: number;
  };
  return { earlierHolder: row.earlier_holder === 1, otherActive: row.other_active === 1 };
}

/** A restarted job (requeue, reconcile's requeue): its parents not yet succeeded and its key's turn. Never dependency_failed. */
export function restartDecision(
  st: Statements,
  job: { readonly seq: number; readonly tenant: string; readonly kind: string; readonly concurrency_key: string | null },
): {
  readonly decision: Exclude<StartDecision, { kind: 'dependency_failed' }>;
  readonly pendingParents: number;
} {
  const pendingParents = (st.jobPendingParents.get(job.seq) as { n: number }).n;
  const decision = decideStart({ pendingParents, failedParent: false, key: keyFacts(st, { ...job, key: job.concurrency_key }) });
  return { decision: decision.kind === 'waiting' ? decision : { kind: 'queued' }, pendingParents };
}

function tryRelease(st: Statements, moves: CounterMoves, job: FlowRow, now: number, effects: FlowEffects): void {
  const key = keyFacts(st, { tenant: job.tenant, kind: job.kind, key: job.concurrency_key, seq: job.seq });
  if (decideRelease({ status: job.status, pendingParents: job.pending_parents, key }).kind !== 'release') return;
  const released = st.jobRelease.all({ seq: job.seq, now }) as ReleasedRow[];
  expectOne(released.length);
  for (const row of released) becameQueued(st, moves, row, 'waiting', row.finished_at);
  effects.available.push({ tenant: job.tenant, kind: job.kind });
}

/** After `ended` reached their statuses in this transaction: their children and their keys' next jobs move. */
export function settleEnded(st: Statements, moves: CounterMoves, ended: readonly EndedJob[], now: number, effects: FlowEffects): void {
  const work = ended.filter((job) => job.has_children === 1 || job.concurrency_key !== null);
  for (let job = work.pop(); job !== undefined; job = work.pop()) {
    if (job.has_children === 1) {
      const effect = decideParentEnd(job.status);
      if (effect.kind === 'satisfied') {
        for (const child of st.jobDependencySatisfy.all({ parent: job.seq }) as FlowRow[]) tryRelease(st, moves, child, now, effects);
      } else if (effect.kind === 'failed') {
        const failed = st.jobDependencyFail.all({
          parent: job.seq,
          now,
          status: DEPENDENCY_FAILED.status,
          ...lastErrorColumns(DEPENDENCY_FAILED),
        }) as FlowRow[];
        if (failed.length > 0) effects.cascaded = true;
        for (const child of failed) moves.moved(countedJob({ ...child, finished_at: null }, 'waiting'), countedJob(child, child.status));
        work.push(...failed);
      }
    }
    if (job.concurrency_key !== null && !holdsKeyTurn(job.status)) {
      const head = st.jobKeyHead.get({ tenant: job.tenant, kind: job.kind, key: job.concurrency_key }) as FlowRow | undefined;
      if (head !== undefined) tryRelease(st, moves, head, now, effects);
    }
  }
}
