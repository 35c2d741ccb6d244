/**
 * PostgreSQL: recurring schedules (src/store/schedules.ts), mirroring
 * src/store/sqlite/schedules.ts. scheduleFire locks the schedule's row
 * (SELECT … FOR UPDATE), so of several coordinators serving one occurrence
 * the first moves next_at on and the others, once the lock is theirs, find
 * it moved and write nothing. A new schedule takes a transaction-scoped
 * advisory lock on its tenant before counting, so the cap holds under
 * concurrent PUTs.
 */

import {
  outcomeJobId,
  type ScheduleDueParams,
  type ScheduleFireParams,
  type ScheduleListParams,
  type ScheduleRecord,
  type ScheduleUpsertOutcome,
  type ScheduleUpsertParams,
} from '../schedules.js';
import type { Availability, EnqueueOutcome } from '../store.js';
import type { PgDatabase, TxClient } from './database.js';
import { insertJobs, prepareEnqueue } from './enqueue.js';
import { bind, namedQuery } from './sql-fragments.js';

const COLUMNS = `tenant, name, owner, kind, payload, cron, timezone, overlap, catch_up, next_at::float8 AS next_at, last_at::float8 AS last_at,
  last_job_id::text AS last_job_id, created_at::float8 AS created_at, updated_at::float8 AS updated_at`;

export const SCHEDULE_LOCK_TENANT = namedQuery('lh_schedule_lock_tenant', `SELECT pg_advisory_xact_lock(hashtextextended('leasehold.schedules.' || $1, 0))`);

export const SCHEDULE_COUNT = namedQuery('lh_schedule_count', `SELECT COUNT(*)::int AS n FROM schedules WHERE tenant = $1`);

export const SCHEDULE_UPSERT = namedQuery(
  'lh_schedule_upsert',
  `INSERT INTO schedules AS s (tenant, name, owner, kind, payload, payload_bytes, cron, timezone, overlap, catch_up, next_at, created_at, updated_at)
   VALUES ($1, $2, $3, $4, $5::json, $6, $7, $8, $9, $10, $11, $12, $12)
   ON CONFLICT (tenant, name) DO UPDATE SET owner = EXCLUDED.owner, kind = EXCLUDED.kind, payload = EXCLUDED.payload,
     payload_bytes = EXCLUDED.payload_bytes, cron = EXCLUDED.cron, timezone = EXCLUDED.timezone, overlap = EXCLUDED.overlap,
     catch_up = EXCLUDED.catch_up, next_at = EXCLUDED.next_at, updated_at = EXCLUDED.updated_at
   RETURNING ${COLUMNS}`,
);

export const SCHEDULE_GET = namedQuery('lh_schedule_get', `SELECT ${COLUMNS} FROM schedules WHERE tenant = $1 AND name = $2`);

export const SCHEDULE_LIST = namedQuery('lh_schedule_list', `SELECT ${COLUMNS} FROM schedules WHERE tenant = $1 AND name > $2 ORDER BY name LIMIT $3`);

export const SCHEDULE_DELETE = namedQuery('lh_schedule_delete', `DELETE FROM schedules WHERE tenant = $1 AND name = $2 RETURNING name`);

/** Every due row is numbered within its tenant, so a batch holds at most $2 of one tenant's. */
export const SCHEDULE_DUE = namedQuery(
  'lh_schedule_due',
  `SELECT ${COLUMNS} FROM (
     SELECT s.*, row_number() OVER (PARTITION BY tenant ORDER BY next_at, name) AS rank
       FROM schedules s WHERE next_at IS NOT NULL AND next_at <= $1
   ) due WHERE rank <= $2 ORDER BY next_at, tenant, name LIMIT $3`,
);

export const SCHEDULE_EARLIEST = namedQuery('lh_schedule_earliest', `SELECT MIN(next_at)::float8 AS at FROM schedules WHERE next_at IS NOT NULL`);

export const SCHEDULE_LOCK = namedQuery('lh_schedule_lock', `SELECT next_at::float8 AS next_at FROM schedules WHERE tenant = $1 AND name = $2 FOR UPDATE`);

export const SCHEDULE_ADVANCE = namedQuery(
  'lh_schedule_advance',
  `UPDATE schedules SET next_at = $3, last_at = COALESCE($4, last_at), last_job_id = COALESCE($5::uuid, last_job_id)
    WHERE tenant = $1 AND name = $2`,
);

interface ScheduleRow {
  tenant: string;
  name: string;
  owner: string;
  kind: string;
  payload: unknown;
  cron: string;
  timezone: string;
  overlap: 'skip' | 'allow';
  catch_up: number;
  next_at: number | null;
  last_at: number | null;
  last_job_id: string | null;
  created_at: number;
  updated_at: number;
}

function toScheduleRecord(row: ScheduleRow): ScheduleRecord {
  return {
    tenant: row.tenant,
    name: row.name,
    owner: row.owner,
    kind: row.kind,
    payload: row.payload,
    cron: row.cron,
    timezone: row.timezone,
    overlap: row.overlap,
    catchUp: row.catch_up,
    nextAt: row.next_at,
    lastAt: row.last_at,
    lastJobId: row.last_job_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export async function upsertSchedule(db: PgDatabase, params: ScheduleUpsertParams): Promise<ScheduleUpsertOutcome> {
  return db.transaction(async (tx) => {
    const existing = await tx.query(bind(SCHEDULE_GET, [params.tenant, params.name]));
    if (existing.rows.length === 0) {
      await tx.query(bind(SCHEDULE_LOCK_TENANT, [params.tenant]));
      const count = (await tx.query<{ n: number }>(bind(SCHEDULE_COUNT, [params.tenant]))).rows[0]?.n ?? 0;
      if (count >= params.maxPerTenant) return { kind: 'too_many', count };
    }
    const saved = await tx.query<ScheduleRow>(
      bind(SCHEDULE_UPSERT, [
        params.tenant,
        params.name,
        params.owner,
        params.kind,
        params.payloadJson,
        Buffer.byteLength(params.payloadJson, 'utf8'),
        params.cron,
        params.timezone,
        params.overlap,
        params.catchUp,
        params.nextAt,
        params.now,
      ]),
    );
    const row = saved.rows[0];
    if (row === undefined) throw new Error('a schedule upsert returned no row');
    return { kind: 'saved', schedule: toScheduleRecord(row) };
  });
}

export async function getSchedule(db: PgDatabase, tenant: string, name: string): Promise<ScheduleRecord | null> {
  const row = (await db.query<ScheduleRow>(bind(SCHEDULE_GET, [tenant, name]))).rows[0];
  return row === undefined ? null : toScheduleRecord(row);
}

export async function listSchedules(db: PgDatabase, params: ScheduleListParams): Promise<ScheduleRecord[]> {
  return (await db.query<ScheduleRow>(bind(SCHEDULE_LIST, [params.tenant, params.after ?? '', params.limit]))).rows.map(toScheduleRecord);
}

export async function deleteSchedule(db: PgDatabase, tenant: string, name: string): Promise<boolean> {
  return (await db.query(bind(SCHEDULE_DELETE, [tenant, name]))).rows.length === 1;
}

export async function dueSchedules(db: PgDatabase, params: ScheduleDueParams): Promise<ScheduleRecord[]> {
  return (await db.query<ScheduleRow>(bind(SCHEDULE_DUE, [params.now, params.perTenant, params.limit]))).rows.map(toScheduleRecord);
}

export async function earliestSchedule(db: PgDatabase): Promise<number | null> {
  return (await db.query<{ at: number | null }>(bind(SCHEDULE_EARLIEST, []))).rows[0]?.at ?? null;
}

export type FiredInTx =
  | { readonly kind: 'fired'; readonly outcomes: readonly EnqueueOutcome[]; readonly available: readonly Availability[] }
  | { readonly kind: 'stale' };

/** In one transaction: the guard on the locked row, the jobs, and the move. */
export async function fireInTx(tx: TxClient, params: ScheduleFireParams): Promise<FiredInTx> {
  const row = (await tx.query<{ next_at: number | null }>(bind(SCHEDULE_LOCK, [params.tenant, params.name]))).rows[0];
  if (row === undefined || row.next_at !== params.expectedNextAt) return { kind: 'stale' };
  const inserted = await insertJobs(tx, params.jobs.map(prepareEnqueue));
  const last = inserted.outcomes.at(-1);
  await tx.query(
    bind(SCHEDULE_ADVANCE, [
      params.tenant,
      params.name,
      params.nextAt,
      last === undefined ? null : params.lastAt,
      last === undefined ? null : outcomeJobId(last),
    ]),
  );
  return { kind: 'fired', outcomes: inserted.outcomes, available: inserted.available };
}
