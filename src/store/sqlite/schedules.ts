/**
 * SQLite: recurring schedules (src/store/schedules.ts). scheduleFire runs in
 * the write transaction, which holds the database's write lock, so reading
 * the row's next_at, enqueueing and moving the row on cannot interleave with
 * another process's pass over the same schedule.
 */

import type { Database, Statement } from 'better-sqlite3';
import {
  outcomeJobId,
  type ScheduleDueParams,
  type ScheduleFireOutcome,
  type ScheduleFireParams,
  type ScheduleListParams,
  type ScheduleRecord,
  type ScheduleUpsertOutcome,
  type ScheduleUpsertParams,
} from '../schedules.js';
import { enqueueInTx } from './enqueue.js';
import type { CounterMoves } from './counter-moves.js';
import type { Statements } from './queries.js';

const COLUMNS = `tenant, name, owner, kind, payload, cron, timezone, overlap, catch_up, next_at, last_at, last_job_id, created_at, updated_at`;

export const SCHEDULE_SQL = {
  scheduleCount: `SELECT COUNT(*) AS n FROM schedules WHERE tenant = ?`,
  scheduleUpsert: `INSERT INTO schedules (tenant, name, owner, kind, payload, payload_bytes, cron, timezone, overlap, catch_up, next_at, created_at, updated_at)
    VALUES (@tenant, @name, @owner, @kind, @payload, @payloadBytes, @cron, @timezone, @overlap, @catchUp, @nextAt, @now, @now)
    ON CONFLICT (tenant, name) DO UPDATE SET owner = excluded.owner, kind = excluded.kind, payload = excluded.payload,
      payload_bytes = excluded.payload_bytes, cron = excluded.cron, timezone = excluded.timezone, overlap = excluded.overlap,
      catch_up = excluded.catch_up, next_at = excluded.next_at, updated_at = excluded.updated_at`,
  scheduleGet: `SELECT ${COLUMNS} FROM schedules WHERE tenant = ? AND name = ?`,
  scheduleList: `SELECT ${COLUMNS} FROM schedules WHERE tenant = @tenant AND name > @after ORDER BY name LIMIT @limit`,
  scheduleDelete: `DELETE FROM schedules WHERE tenant = ? AND name = ?`,
  // Every due row is numbered within its tenant, so a batch holds at most @perTenant of one tenant's.
  scheduleDue: `SELECT ${COLUMNS} FROM (
      SELECT s.*, row_number() OVER (PARTITION BY tenant ORDER BY next_at, name) AS rank
        FROM schedules s WHERE next_at IS NOT NULL AND next_at <= @now
    ) WHERE rank <= @perTenant ORDER BY next_at, tenant, name LIMIT @limit`,
  scheduleEarliest: `SELECT MIN(next_at) AS at FROM schedules WHERE next_at IS NOT NULL`,
  scheduleNextAt: `SELECT next_at FROM schedules WHERE tenant = ? AND name = ?`,
  scheduleAdvance: `UPDATE schedules SET next_at = @nextAt, last_at = COALESCE(@lastAt, last_at), last_job_id = COALESCE(@lastJobId, last_job_id)
    WHERE tenant = @tenant AND name = @name AND next_at = @expectedNextAt`,
} as const;

interface ScheduleRow {
  tenant: string;
  name: string;
  owner: string;
  kind: string;
  payload: string;
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
    payload: JSON.parse(row.payload) as unknown,
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

export class ScheduleStatements {
  private readonly st: { readonly [K in keyof typeof SCHEDULE_SQL]: Statement };

  constructor(db: Database) {
    this.st = Object.fromEntries(Object.entries(SCHEDULE_SQL).map(([name, text]) => [name, db.prepare(text)])) as unknown as ScheduleStatements['st'];
  }

  /** In the write transaction. */
  upsert(params: ScheduleUpsertParams): ScheduleUpsertOutcome {
    const existing = this.st.scheduleNextAt.get(params.tenant, params.name);
    if (existing === undefined) {
      const count = (this.st.scheduleCount.get(params.tenant) as { n: number }).n;
      if (count >= params.maxPerTenant) return { kind: 'too_many', count };
    }
    this.st.scheduleUpsert.run({
      tenant: params.tenant,
      name: params.name,
      owner: params.owner,
      kind: params.kind,
      payload: params.payloadJson,
      payloadBytes: Buffer.byteLength(params.payloadJson, 'utf8'),
      cron: params.cron,
      timezone: params.timezone,
      overlap: params.overlap,
      catchUp: params.catchUp,
      nextAt: params.nextAt,
      now: params.now,
    });
    const saved = this.get(params.tenant, params.name);
    if (saved === null) throw new Error('a schedule just saved cannot be read');
    return { kind: 'saved', schedule: saved };
  }

  get(tenant: string, name: string): ScheduleRecord | null {
    const row = this.st.scheduleGet.get(tenant, name) as ScheduleRow | undefined;
    return row === undefined ? null : toScheduleRecord(row);
  }

  list(params: ScheduleListParams): ScheduleRecord[] {
    return (this.st.scheduleList.all({ tenant: params.tenant, after: params.after ?? '', limit: params.limit }) as ScheduleRow[]).map(toScheduleRecord);
  }

  /** In the write transaction. */
  delete(tenant: string, name: string): boolean {
    return this.st.scheduleDelete.run(tenant, name).changes === 1;
  }

  due(params: ScheduleDueParams): ScheduleRecord[] {
    return (this.st.scheduleDue.all({ now: params.now, perTenant: params.perTenant, limit: params.limit }) as ScheduleRow[]).map(toScheduleRecord);
  }

  earliest(): number | null {
    return (this.st.scheduleEarliest.get() as { at: number | null }).at;
  }

  /** In the write transaction: the guard, the jobs and the move happen together or not at all. */
  fire(statements: Statements, counts: CounterMoves, params: ScheduleFireParams, now: number): ScheduleFireOutcome {
    const row = this.st.scheduleNextAt.get(params.tenant, params.name) as { next_at: number | null } | undefined;
    if (row === undefined || row.next_at !== params.expectedNextAt) return { kind: 'stale' };
    const outcomes = params.jobs.map((job) => enqueueInTx(statements, counts, job, now));
    const last = outcomes.at(-1);
    this.st.scheduleAdvance.run({
      tenant: params.tenant,
      name: params.name,
      expectedNextAt: params.expectedNextAt,
      nextAt: params.nextAt,
      lastAt: last === undefined ? null : params.lastAt,
      lastJobId: last === undefined ? null : outcomeJobId(last),
    });
    return { kind: 'fired', outcomes };
  }
}
