/**
 * Steps used inside a transaction by the operations that decide in code: lock
 * a job's row and read its snapshot with the transaction's now(), apply a
 * guarded statement that must match exactly the rows decided on, re-read a
 * job after changing it. A guarded statement that matches fewer rows than the
 * decision allowed means the snapshot and the guard disagree: a bug, thrown.
 */

import type { JobRecord } from '../store.js';
import type { TxClient } from './database.js';
import * as Q from './queries.js';
import { toJobRecord, type JobRow } from './rows.js';
import { bind, namedQuery, readyRowOf, type NamedQuery } from './sql-fragments.js';

/** A job row plus the transaction's clock in milliseconds. */
export type LockedRow = JobRow & { readonly now_ms: number };

/**
 * A queued job's ready row, locked: a lease that has not taken it yet never will while this transaction lasts
 * (leases skip locked rows), and one that took it first has committed by the time this answers (nothing).
 */
export const READY_ROW_LOCK = namedQuery(
  'lh_ready_row_lock',
  `SELECT 1 AS locked FROM jobs j JOIN job_ready r ON ${readyRowOf('r', 'j')} WHERE j.id = $1 FOR UPDATE OF r`,
);

/**
 * The job's row locked, then read with its lease. The read is a statement of its own: JOB_LOCK may have waited
 * for another transaction that ended the lease, and its own snapshot (which still shows that lease) is older
 * than the row it locked. A lease does not lock the jobs row, so a job read as queued may be taken by one until
 * its ready row is locked too; if a lease took it first, the job is read again (it runs).
 */
export async function lockJob(tx: TxClient, id: string, tenant: string, owner: string | null): Promise<LockedRow | undefined> {
  if ((await tx.query(bind(Q.JOB_LOCK, [id, tenant, owner]))).rowCount !== 1) return undefined;
  const row = (await tx.query<LockedRow>(bind(Q.JOB_PEEK, [id, tenant]))).rows[0];
  if (row?.status !== 'queued') return row;
  if ((await tx.query(bind(READY_ROW_LOCK, [row.id]))).rowCount === 1) return row;
  return (await tx.query<LockedRow>(bind(Q.JOB_PEEK, [id, tenant]))).rows[0];
}

/** Jobs' rows locked in id order, then read with their leases (as lockJob, without the ready rows: for jobs that must be running). */
export async function lockRunningJobs(tx: TxClient, ids: readonly string[]): Promise<LockedRow[]> {
  await tx.query(bind(Q.JOB_LOCK_MANY, [ids]));
  return (await tx.query<LockedRow>(bind(Q.JOB_PEEK_MANY, [ids]))).rows;
}

export async function reloadJob(tx: TxClient, row: JobRow): Promise<JobRecord> {
  const fresh = (await tx.query<JobRow>(bind(Q.JOB_GET, [row.id, row.tenant, null]))).rows[0];
  if (fresh === undefined) throw new Error('a locked job vanished');
  return toJobRecord(fresh);
}

export async function expectOne(tx: TxClient, query: NamedQuery, values: readonly unknown[]): Promise<void> {
  const result = await tx.query(bind(query, values));
  if (result.rowCount !== 1) throw new Error(`guarded update matched ${result.rowCount ?? 0} rows; the snapshot and the guard disagree`);
}
