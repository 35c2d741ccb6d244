/**
 * The PostgreSQL store's reads: the server's clock, API keys, kinds,
 * schedules, jobs and their listings and attempts, the next due time, purge
 * counts, stats and the database's size, each one statement on the pool
 * outside any transaction. PostgresStore (postgres-store.ts) adds the writes;
 * sqlite/store-reads.ts is the same on SQLite.
 */

import { isJobId } from '../../core/ids.js';
import { groupStatsOf, type GroupStats } from '../group-lease.js';
import { listPage, openCursor } from '../list-cursor.js';
import type { NextDue, NextDueParams } from '../next-due.js';
import type { JobPurgeCountParams } from '../retention.js';
import type * as Sch from '../schedules.js';
import type * as S from '../store.js';
import * as C from './catalog-queries.js';
import type { PgDatabase } from './database.js';
import { readNextDue } from './next-due.js';
import * as Q from './queries.js';
import { purgeCount } from './retention.js';
import {
  toApiKeyRecord,
  toAttemptRecord,
  toJobListItem,
  toJobRecord,
  toKindRecord,
  toTenantStats,
  type ApiKeyRow,
  type AttemptRow,
  type JobListRow,
  type JobRow,
  type KindRow,
  type StatsRow,
} from './rows.js';
import { dueSchedules, earliestSchedule, getSchedule, listSchedules } from './schedules.js';
import { bind, bindUnplanned, type NamedQuery } from './sql-fragments.js';

export abstract class StoreReads {
  protected constructor(
    protected readonly db: PgDatabase,
    /** Seals list cursors; one row of the schema, so every coordinator on it opens every other's cursors. */
    private readonly cursorSecret: Buffer,
  ) {}

  async now(): Promise<number> {
    const result = await this.db.query<{ now_ms: number }>(bind(Q.NOW, []));
    return result.rows[0]?.now_ms ?? 0;
  }

  async ping(): Promise<void> {
    await this.db.query({ text: 'SELECT 1' });
  }

  async apiKeyFindByHash(keyHash: string): Promise<S.ApiKeyRecord | null> {
    const row = await this.first<ApiKeyRow>(C.API_KEY_BY_HASH, [keyHash]);
    return row === undefined ? null : toApiKeyRecord(row);
  }

  async apiKeyList(params: { readonly tenant: string }): Promise<readonly S.ApiKeyRecord[]> {
    return (await this.db.query<ApiKeyRow>(bind(C.API_KEY_LIST, [params.tenant]))).rows.map(toApiKeyRecord);
  }

  async kindGet(params: { readonly tenant: string; readonly kind: string }): Promise<S.KindRecord | null> {
    const row = await this.first<KindRow>(C.KIND_GET, [params.tenant, params.kind]);
    return row === undefined ? null : toKindRecord(row);
  }

  async kindList(params: { readonly tenant: string }): Promise<readonly S.KindRecord[]> {
    return (await this.db.query<KindRow>(bind(C.KIND_LIST, [params.tenant]))).rows.map(toKindRecord);
  }

  scheduleGet(params: { readonly tenant: string; readonly name: string }): Promise<Sch.ScheduleRecord | null> {
    return getSchedule(this.db, params.tenant, params.name);
  }

  scheduleList(params: Sch.ScheduleListParams): Promise<readonly Sch.ScheduleRecord[]> {
    return listSchedules(this.db, params);
  }

  scheduleDue(params: Sch.ScheduleDueParams): Promise<readonly Sch.ScheduleRecord[]> {
    return dueSchedules(this.db, params);
  }

  scheduleEarliest(): Promise<number | null> {
    return earliestSchedule(this.db);
  }

  async jobGet(params: S.JobRef): Promise<S.JobRecord | null> {
    if (!isJobId(params.id)) return null;
    const row = await this.first<JobRow>(Q.JOB_GET, [params.id, params.scope.tenant, params.scope.owner ?? null]);
    return row === undefined ? null : toJobRecord(row);
  }

  async jobList(params: S.JobListParams): Promise<S.JobPage> {
    const cursor = params.cursor === undefined ? null : openCursor(this.cursorSecret, params, params.cursor);
    const owner = params.scope.owner ?? null;
    const kind = params.kind ?? null;
    const rows =
      params.status === 'queued'
        ? (await this.db.query<JobListRow>(bind(C.JOB_LIST_QUEUED, [params.scope.tenant, owner, kind, cursor, params.limit + 1]))).rows
        : (await this.db.query<JobListRow>(bindUnplanned(C.JOB_LIST, [params.scope.tenant, owner, params.status ?? null, kind, cursor, params.limit + 1])))
            .rows;
    return listPage(this.cursorSecret, params, rows, toJobListItem);
  }

  async jobAttempts(params: S.JobRef): Promise<readonly S.AttemptRecord[] | null> {
    if ((await this.jobGet(params)) === null) return null;
    return (await this.db.query<AttemptRow>(bind(C.ATTEMPT_LIST, [params.id]))).rows.map(toAttemptRecord);
  }

  async jobNextDue(params: NextDueParams): Promise<NextDue | null> {
    return readNextDue(this.db, params);
  }

  async jobPurgeCount(params: JobPurgeCountParams): Promise<number> {
    return purgeCount(this.db, params);
  }

  async databaseSize(): Promise<number> {
    return (await this.one<{ bytes: number }>(C.DATABASE_SIZE, [])).bytes;
  }

  async groupStats(params: { readonly tenant: string; readonly limit: number }): Promise<GroupStats> {
    type Top = { kind: string; group_key: string; queued: number; running: number };
    const top = (await this.db.query<Top>(bind(Q.GROUP_TOP, [params.tenant, params.limit]))).rows;
    return groupStatsOf(top, await this.first<{ groups: number; queued: number; running: number }>(Q.GROUP_TOTALS, [params.tenant]));
  }

  async stats(params: { readonly tenant: string }): Promise<S.TenantStats> {
    return toTenantStats(await this.one<StatsRow>(C.STATS, [params.tenant]));
  }

  protected async first<R extends object>(query: NamedQuery, values: readonly unknown[]): Promise<R | undefined> {
    return (await this.db.query<R & Record<string, unknown>>(bind(query, values))).rows[0];
  }

  protected async one<R extends object>(query: NamedQuery, values: readonly unknown[]): Promise<R> {
    const row = await this.first<R>(query, values);
    if (row === undefined) throw new Error('a statement that always returns a row returned none');
    return row;
  }
}
