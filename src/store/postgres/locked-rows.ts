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
import { bind, type NamedQuery } from './sql-fragments.js';

/** A job row plus the transaction's clock in milliseconds. */
export type LockedRow = JobRow & { readonly now_ms: number };

export async function lockJob(tx: TxClient, id: string, tenant: string, owner: string | null): Promise<LockedRow | undefined> {
  return (await tx.query<LockedRow>(bind(Q.JOB_LOCK, [id, tenant, owner]))).rows[0];
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
