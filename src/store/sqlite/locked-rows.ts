/**
 * Steps used inside the write transaction (GroupCommit's BEGIN IMMEDIATE holds
 * the database's write lock, so every row read there is as good as locked):
 * read a job's snapshot, apply a guarded statement that must match exactly
 * the row decided on, re-read it after changing it. A
 * guarded statement that matches nothing after its decision allowed it means
 * the snapshot and the guard disagree: a bug, thrown.
 */

import type { JobRecord, JobRef } from '../store.js';
import type { CounterMoves } from './counter-moves.js';
import type { Statements } from './queries.js';
import { toJobRecord, type JobRow, type JobWithResultRow, type SnapshotRow } from './rows.js';

export function lockJob(st: Statements, id: string, tenant: string): SnapshotRow | undefined {
  return st.jobLock.get(id, tenant) as SnapshotRow | undefined;
}

export function lockScoped(st: Statements, ref: JobRef): JobRow | undefined {
  return st.jobGet.get({ id: ref.id, tenant: ref.scope.tenant, owner: ref.scope.owner ?? null }) as JobRow | undefined;
}

export function reloadJob(st: Statements, seq: number): JobRecord {
  return toJobRecord(st.jobGetBySeq.get(seq) as JobWithResultRow);
}

export function reloadJobById(st: Statements, id: string): JobRecord {
  return toJobRecord(st.jobGetByIdUnscoped.get(id) as JobWithResultRow);
}

export function expectOne(changes: number): void {
  if (changes !== 1) throw new Error(`guarded update matched ${changes} rows; the snapshot and the guard disagree`);
}

function mutableBytes(st: Statements, seq: number): number {
  return (st.jobMutableBytes.get(seq) as { bytes: number } | undefined)?.bytes ?? 0;
}

/**
 * Runs a write that may change a job's checkpoint state or progress, and moves
 * the tenant's storage counter by the change: they count like payloads and results.
 */
export function countingStorage(st: Statements, moves: CounterMoves, row: Pick<SnapshotRow, 'seq' | 'tenant'>, write: () => number): number {
  const before = mutableBytes(st, row.seq);
  const changes = write();
  const delta = mutableBytes(st, row.seq) - before;
  if (changes === 1 && delta !== 0) moves.storage(row.tenant, delta);
  return changes;
}
