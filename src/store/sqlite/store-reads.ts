/**
 * The SQLite store's reads: API keys, kinds, schedules, jobs and their
 * listings and attempts, the next due time, purge counts, stats and the
 * file's size. They run on the store's connection outside any write
 * transaction, on the last commit's WAL snapshot (a group commit batch runs
 * inside one synchronous call, so no read sees half of one); the stats run on
 * the reader thread's own connection (stats-reader.ts). SqliteStore
 * (sqlite-store.ts) adds the writes; postgres/store-reads.ts is the same on
 * PostgreSQL.
 */

import type { Database as Db } from 'better-sqlite3';
import type { Clock } from '../../core/clock.js';
import { StoreUnavailableError } from '../../core/errors.js';
import { groupStatsOf, type GroupStats } from '../group-lease.js';
import { listPage, openCursor } from '../list-cursor.js';
import type { NextDue, NextDueParams } from '../next-due.js';
import type { JobPurgeCountParams } from '../retention.js';
import { kindFlowState, type KindFlowColumns } from '../row-records.js';
import type * as Sch from '../schedules.js';
import type * as S from '../store.js';
import { loadCursorSecret, prepareStatements } from './database.js';
import { translate } from './errors.js';
import { NextDueReader } from './next-due.js';
import type { Statements } from './queries.js';
import { RetentionStatements } from './retention.js';
import { toApiKeyRecord, toAttemptRecord, toJobListItem, toJobRecord, toKindRecord, toTenantStats } from './rows.js';
import type { ApiKeyRow, AttemptRow, JobListRow, JobRow, JobWithResultRow, KindRow } from './rows.js';
import { ScheduleStatements } from './schedules.js';
import { StatsReader } from './stats-reader.js';

export abstract class StoreReads {
  protected readonly statements: Statements;
  protected readonly schedules: ScheduleStatements;
  protected readonly nextDue: NextDueReader;
  protected readonly retention: RetentionStatements;
  protected readonly statsReader: StatsReader;
  private readonly cursorSecret: Buffer;
  protected closed = false;

  protected constructor(
    protected readonly db: Db,
    protected readonly clock: Clock,
    busyTimeoutMs: number,
  ) {
    this.statsReader = new StatsReader(db.name, busyTimeoutMs);
    this.statements = prepareStatements(db);
    this.nextDue = new NextDueReader(db, this.statements);
    this.retention = new RetentionStatements(db);
    this.schedules = new ScheduleStatements(db);
    this.cursorSecret = loadCursorSecret(db, this.statements);
  }

  async ping(): Promise<void> {
    this.read(() => this.db.prepare('SELECT 1').get());
  }

  async apiKeyFindByHash(keyHash: string): Promise<S.ApiKeyRecord | null> {
    const row = this.read(() => this.statements.apiKeyByHash.get(keyHash) as ApiKeyRow | undefined);
    return row === undefined ? null : toApiKeyRecord(row);
  }

  async apiKeyList(params: { readonly tenant: string }): Promise<readonly S.ApiKeyRecord[]> {
    return this.read(() => (this.statements.apiKeyList.all(params.tenant) as ApiKeyRow[]).map(toApiKeyRecord));
  }

  async kindGet(params: { readonly tenant: string; readonly kind: string }): Promise<S.KindRecord | null> {
    const row = this.read(() => this.statements.kindGet.get(params.tenant, params.kind) as KindRow | undefined);
    return row === undefined ? null : toKindRecord(row);
  }

  async kindList(params: { readonly tenant: string }): Promise<readonly S.KindRecord[]> {
    const rows = this.read(() => this.statements.kindList.all(params.tenant) as KindRow[]);
    return rows.map(toKindRecord);
  }

  async scheduleGet(params: { readonly tenant: string; readonly name: string }): Promise<Sch.ScheduleRecord | null> {
    return this.read(() => this.schedules.get(params.tenant, params.name));
  }

  async scheduleList(params: Sch.ScheduleListParams): Promise<readonly Sch.ScheduleRecord[]> {
    return this.read(() => this.schedules.list(params));
  }

  async scheduleDue(params: Sch.ScheduleDueParams): Promise<readonly Sch.ScheduleRecord[]> {
    return this.read(() => this.schedules.due(params));
  }

  async scheduleEarliest(): Promise<number | null> {
    return this.read(() => this.schedules.earliest());
  }

  async jobGet(params: S.JobRef): Promise<S.JobRecord | null> {
    const row = this.read(
      () => this.statements.jobGet.get({ id: params.id, tenant: params.scope.tenant, owner: params.scope.owner ?? null }) as JobWithResultRow | undefined,
    );
    return row === undefined ? null : toJobRecord(row);
  }

  async jobList(params: S.JobListParams): Promise<S.JobPage> {
    const cursor = params.cursor === undefined ? null : openCursor(this.cursorSecret, params, params.cursor);
    const owner = params.scope.owner ?? null;
    const status = params.status ?? null;
    // Queued and running jobs are listed from their own tables (migration 14); ended and waiting ones by jobs_by_status_ended.
    const statement =
      status === 'queued'
        ? this.statements.jobListQueued
        : status === 'running'
          ? this.statements.jobListRunning
          : status !== null
            ? this.statements.jobListByStatus
            : owner !== null
              ? this.statements.jobListByOwner
              : this.statements.jobListByTenant;
    const rows = this.read(
      () =>
        statement.all({
          tenant: params.scope.tenant,
          ...(status !== null && status !== 'queued' && status !== 'running' ? { status } : {}),
          ...(status !== null || owner !== null ? { owner } : {}),
          kind: params.kind ?? null,
          cursor: cursor ?? Number.MAX_SAFE_INTEGER,
          limit: params.limit + 1,
        }) as JobListRow[],
    );
    return listPage(this.cursorSecret, params, rows, toJobListItem);
  }

  async jobAttempts(params: S.JobRef): Promise<readonly S.AttemptRecord[] | null> {
    return this.read(() => {
      const job = this.statements.jobGet.get({ id: params.id, tenant: params.scope.tenant, owner: params.scope.owner ?? null }) as JobRow | undefined;
      if (job === undefined) return null;
      return (this.statements.attemptList.all({ seq: job.seq }) as AttemptRow[]).map(toAttemptRecord);
    });
  }

  /** Scans every job of the tenant, so it runs on the reader thread's own connection, off the event loop (stats-reader.ts). */
  async jobNextDue(params: NextDueParams): Promise<NextDue | null> {
    return this.read(() =>
      this.nextDue.read(params, this.clock.now(), () => (this.statements.kindFlowState.all({ tenant: params.tenant }) as KindFlowColumns[]).map(kindFlowState)),
    );
  }

  async jobPurgeCount(params: JobPurgeCountParams): Promise<number> {
    return this.read(() => this.retention.count(params, this.clock.now()));
  }

  async stats(params: { readonly tenant: string }): Promise<S.TenantStats> {
    if (this.closed) throw new StoreUnavailableError('the job store is closed');
    const now = this.clock.now();
    return toTenantStats(await this.statsReader.read(params.tenant, now), now);
  }

  async databaseSize(): Promise<number> {
    return this.read(() => (this.statements.databaseSize.get() as { bytes: number }).bytes);
  }

  async groupStats(params: { readonly tenant: string; readonly limit: number }): Promise<GroupStats> {
    return this.read(() =>
      groupStatsOf(
        this.statements.groupTop.all(params) as { kind: string; group_key: string; queued: number; running: number }[],
        this.statements.groupTotals.get({ tenant: params.tenant }) as { groups: number; queued: number; running: number },
      ),
    );
  }

  protected read<T>(operation: () => T): T {
    if (this.closed) throw new StoreUnavailableError('the job store is closed');
    try {
      return operation();
    } catch (error) {
      throw translate(error);
    }
  }
}
