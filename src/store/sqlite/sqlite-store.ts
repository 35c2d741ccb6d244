/**
 * The embedded default backend: one SQLite file in WAL mode with
 * synchronous=FULL, so a commit is on disk when it returns. Writes go through
 * GroupCommit (one transaction and one fsync for everything that arrived
 * together); reads run directly on the WAL snapshot.
 *
 * Several processes on one host may open the same file (an API process and
 * worker processes of an application): every write takes the database's write
 * lock with BEGIN IMMEDIATE and waits up to busyTimeoutMs for it, and changes
 * made by another process are noticed through PRAGMA data_version.
 *
 * The class holds the connection and delegates each operation to the module
 * for its role, run inside the write transaction: enqueue.ts, lease.ts,
 * guarded-statements.ts (renew, checkpoint, effect), lease-endings.ts
 * (complete, fail) and operator-actions.ts (requeue, cancel, reconcile, the
 * reaper) — the same files as the PostgreSQL backend's.
 */

import type { Database as Db } from 'better-sqlite3';
import { systemClock, type Clock } from '../../core/clock.js';
import { systemRandom, type Random } from '../../core/random.js';
import { StoreUnavailableError } from '../../core/errors.js';
import type * as S from '../store.js';
import { distinctAvailability } from '../store.js';
import { listPage, openCursor } from '../list-cursor.js';
import { finishedByCompletion, finishedByFailure, finishedByOperator, reapFinishedSome } from '../finished-jobs.js';
import { CommitSignal, sharedFilesOf, Watchers } from './availability.js';
import { flowEffects, type FlowEffects } from './dependencies.js';
import { enqueueInTx, enqueueOnConnection } from './enqueue.js';
import { groupCommitWriter, loadCursorSecret, openDatabase, prepareStatements } from './database.js';
import { translate } from './errors.js';
import type { GroupCommit } from './group-commit.js';
import { markEffectStarted, renewLease, storeCheckpoint } from './guarded-statements.js';
import { completeInTx, failInTx } from './lease-endings.js';
import { cancelInTx, reapInTx, reconcileInTx, requeueInTx } from './operator-actions.js';
import { setKindPausedInTx, upsertKindInTx } from './kinds.js';
import { leaseInTx } from './lease.js';
import { NewJobCounts } from './new-job-counts.js';
import { LeaseStatements } from './lease-statements.js';
import type { Statements } from './queries.js';
import { kindFlowState, type KindFlowColumns } from '../row-records.js';
import { StatsReader } from './stats-reader.js';
import { ScheduleStatements } from './schedules.js';
import type * as Sch from '../schedules.js';
import { NextDueReader } from './next-due.js';
import { RetentionStatements, VACUUM_STEPS_PER_BATCH } from './retention.js';
import type { NextDue, NextDueParams } from '../next-due.js';
import type { JobPurgeCountParams, JobPurgeOutcome, JobPurgeParams } from '../retention.js';
import { toApiKeyRecord, toAttemptRecord, toJobListItem, toJobRecord, toKindRecord, toTenantStats } from './rows.js';
import type { ApiKeyRow, AttemptRow, JobListRow, JobRow, JobWithResultRow, KindRow } from './rows.js';

export interface SqliteStoreOptions {
  readonly path: string;
  readonly clock?: Clock;
  /** Backoff jitter; Math.random when absent. */
  readonly random?: Random;
  /** How long a write waits for another process's write lock before answering store_unavailable. */
  readonly busyTimeoutMs?: number;
  /** How often to look for commits made by other processes while someone watches for work. */
  readonly crossProcessPollMs?: number;
  /**
   * Hear other processes' commits as they happen (availability.ts): write the commit signal file (`<db>-signal`)
   * after each commit, and watch it and the -wal file. The library sets it: its workers and application share a
   * file across processes. A coordinator alone on its file would only pay for hearing its own writes, so it is
   * off by default.
   */
  readonly watchWalFile?: boolean;
  /** Open read-only (inspection tools). */
  readonly readonly?: boolean;
}

export class SqliteStore implements S.Store {
  readonly backend = 'sqlite' as const;
  private readonly statements: Statements;
  /** The lease statements, prepared on first use per kind count and max. */
  private readonly leases: LeaseStatements;
  private readonly writer: GroupCommit;
  private readonly statsReader: StatsReader;
  private readonly watchers: Watchers;
  /** Tells the other processes on the file of each commit (library mode); null when no one else is expected. */
  private readonly signal: CommitSignal | null;
  private readonly stopHearingCommits: () => void;
  private closed = false;
  private readonly cursorSecret: Buffer;
  private readonly nextDue: NextDueReader;
  private readonly retention: RetentionStatements;
  private readonly schedules: ScheduleStatements;
  /** What the write transaction's new jobs add to the counter rows, applied by the group commit before COMMIT. */
  private readonly newJobs = new NewJobCounts();

  private constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    crossProcessPollMs: number,
    watchWalFile: boolean,
    busyTimeoutMs: number,
    private readonly random: Random,
  ) {
    this.statsReader = new StatsReader(db.name, busyTimeoutMs);
    this.statements = prepareStatements(db);
    this.leases = new LeaseStatements(db);
    this.nextDue = new NextDueReader(db);
    this.retention = new RetentionStatements(db);
    this.schedules = new ScheduleStatements(db);
    const shared = watchWalFile && !db.memory ? sharedFilesOf(db.name) : null;
    // Created before anything watches it, so every store of the file can watch it from its first wait.
    this.signal = shared === null || db.readonly ? null : new CommitSignal(shared.signal);
    this.watchers = new Watchers(() => db.pragma('data_version', { simple: true }) as number, crossProcessPollMs, shared);
    this.cursorSecret = loadCursorSecret(db, this.statements);
    const newJobs = this.newJobs;
    const deferred = { apply: () => newJobs.apply(this.statements), discard: () => newJobs.discard() };
    this.writer = groupCommitWriter(db, clock, busyTimeoutMs, deferred, () => this.signal?.send());
    this.stopHearingCommits = this.signal?.hear(() => this.writer.lockMayBeFree()) ?? (() => undefined);
  }

  static open(options: SqliteStoreOptions): SqliteStore {
    const clock = options.clock ?? systemClock;
    const busyTimeoutMs = Math.max(0, Math.floor(options.busyTimeoutMs ?? 5000));
    const db = openDatabase({ path: options.path, readonly: options.readonly ?? false, busyTimeoutMs, clock });
    return new SqliteStore(db, clock, options.crossProcessPollMs ?? 50, options.watchWalFile ?? false, busyTimeoutMs, options.random ?? systemRandom);
  }

  async now(): Promise<number> {
    return this.clock.now();
  }

  async ping(): Promise<void> {
    this.read(() => this.db.prepare('SELECT 1').get());
  }

  queueWaitMs(): number {
    return this.writer.oldestWaitMs();
  }

  /**
   * Enqueue inside an application's own transaction on its own handle to this file (enqueue.ts); once the
   * transaction has committed (better-sqlite3 commits before the next turn), this store's watchers hear of it.
   */
  enqueueOnConnection(db: Db, params: S.EnqueueParams): S.EnqueueOutcome {
    const outcome = enqueueOnConnection(db, params, this.clock.now());
    setImmediate(() => {
      this.watchers.noticeOtherCommits();
      this.signal?.send();
    });
    return outcome;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.watchers.close();
    this.writer.close();
    this.stopHearingCommits();
    this.signal?.close();
    this.db.close();
    await this.statsReader.close();
  }

  // --- keys and kinds -------------------------------------------------------

  apiKeyInsert(params: S.ApiKeyInsertParams): Promise<S.ApiKeyRecord> {
    return this.write((now) => {
      this.statements.apiKeyInsert.run({ ...params, now });
      return { ...params, createdAt: now, revokedAt: null };
    });
  }

  async apiKeyFindByHash(keyHash: string): Promise<S.ApiKeyRecord | null> {
    const row = this.read(() => this.statements.apiKeyByHash.get(keyHash) as ApiKeyRow | undefined);
    return row === undefined ? null : toApiKeyRecord(row);
  }

  async apiKeyList(params: { readonly tenant: string }): Promise<readonly S.ApiKeyRecord[]> {
    return this.read(() => (this.statements.apiKeyList.all(params.tenant) as ApiKeyRow[]).map(toApiKeyRecord));
  }

  apiKeyRevoke(params: { readonly id: string }): Promise<boolean> {
    return this.write((now) => this.statements.apiKeyRevoke.run(now, params.id).changes === 1);
  }

  kindUpsert(params: S.KindUpsertParams): Promise<S.KindRecord> {
    // A new limit (or none) may admit jobs that were held back: parked polls of the kind lease again.
    return this.writeAnnouncing((now, available) => {
      const record = upsertKindInTx(this.statements, params, now);
      available.push({ tenant: params.tenant, kind: params.kind });
      return record;
    });
  }

  kindSetPaused(params: S.KindPauseParams): Promise<S.KindRecord | null> {
    return this.writeAnnouncing((_now, available) => {
      const record = setKindPausedInTx(this.statements, params);
      if (record !== null && !params.paused) available.push({ tenant: params.tenant, kind: params.kind });
      return record;
    });
  }

  async kindGet(params: { readonly tenant: string; readonly kind: string }): Promise<S.KindRecord | null> {
    const row = this.read(() => this.statements.kindGet.get(params.tenant, params.kind) as KindRow | undefined);
    return row === undefined ? null : toKindRecord(row);
  }

  async kindList(params: { readonly tenant: string }): Promise<readonly S.KindRecord[]> {
    const rows = this.read(() => this.statements.kindList.all(params.tenant) as KindRow[]);
    return rows.map(toKindRecord);
  }

  // --- schedules --------------------------------------------------------------

  scheduleUpsert(params: Sch.ScheduleUpsertParams): Promise<Sch.ScheduleUpsertOutcome> {
    return this.write(() => this.schedules.upsert(params));
  }

  async scheduleGet(params: { readonly tenant: string; readonly name: string }): Promise<Sch.ScheduleRecord | null> {
    return this.read(() => this.schedules.get(params.tenant, params.name));
  }

  async scheduleList(params: Sch.ScheduleListParams): Promise<readonly Sch.ScheduleRecord[]> {
    return this.read(() => this.schedules.list(params));
  }

  scheduleDelete(params: { readonly tenant: string; readonly name: string }): Promise<boolean> {
    return this.write(() => this.schedules.delete(params.tenant, params.name));
  }

  async scheduleDue(params: Sch.ScheduleDueParams): Promise<readonly Sch.ScheduleRecord[]> {
    return this.read(() => this.schedules.due(params));
  }

  async scheduleEarliest(): Promise<number | null> {
    return this.read(() => this.schedules.earliest());
  }

  scheduleFire(params: Sch.ScheduleFireParams): Promise<Sch.ScheduleFireOutcome> {
    return this.write((now) => this.schedules.fire(this.statements, this.newJobs, params, now), distinctAvailability(params.jobs));
  }

  // --- enqueue and reads ----------------------------------------------------

  jobEnqueue(params: S.EnqueueParams): Promise<S.EnqueueOutcome> {
    return this.write((now) => enqueueInTx(this.statements, this.newJobs, params, now), [{ tenant: params.tenant, kind: params.kind }]);
  }

  jobEnqueueMany(params: readonly S.EnqueueParams[]): Promise<readonly S.EnqueueOutcome[]> {
    return this.write((now) => params.map((p) => enqueueInTx(this.statements, this.newJobs, p, now)), distinctAvailability(params));
  }

  async jobGet(params: S.JobRef): Promise<S.JobRecord | null> {
    const row = this.read(
      () =>
        this.statements.jobGet.get({ id: params.id, tenant: params.scope.tenant, owner: params.scope.owner ?? null }) as
          | JobWithResultRow
          | undefined,
    );
    return row === undefined ? null : toJobRecord(row);
  }

  async jobList(params: S.JobListParams): Promise<S.JobPage> {
    const cursor = params.cursor === undefined ? null : openCursor(this.cursorSecret, params, params.cursor);
    const owner = params.scope.owner ?? null;
    const status = params.status ?? null;
    const statement =
      status !== null ? this.statements.jobListByStatus : owner !== null ? this.statements.jobListByOwner : this.statements.jobListByTenant;
    const rows = this.read(
      () =>
        statement.all({
          tenant: params.scope.tenant,
          ...(status !== null ? { status } : {}),
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
      const job = this.statements.jobGet.get({ id: params.id, tenant: params.scope.tenant, owner: params.scope.owner ?? null }) as
        | JobRow
        | undefined;
      if (job === undefined) return null;
      return (this.statements.attemptList.all(job.seq) as AttemptRow[]).map(toAttemptRecord);
    });
  }

  // --- the lease protocol ---------------------------------------------------

  async jobLease(params: S.LeaseParams): Promise<readonly S.LeasedJob[]> {
    let reapEnded = false;
    const leased = await this.writeFlow((now, effects) => {
      // Expired leases of every tenant are settled here (one indexed probe), so an expired job is claimable at once.
      reapEnded = reapFinishedSome(reapInTx(this.statements, now, effects));
      return leaseInTx(this.statements, this.leases, params, now);
    });
    if (reapEnded) this.watchers.announceFinished(null);
    return leased;
  }

  jobRenew(params: S.RenewParams): Promise<S.RenewOutcome> {
    return this.write((now) => renewLease(this.statements, params, now));
  }

  async jobComplete(params: S.CompleteParams): Promise<S.CompleteOutcome> {
    const outcome = await this.writeFlow((now, effects) => completeInTx(this.statements, params, now, effects));
    this.watchers.announceFinished(finishedByCompletion([params], [outcome]));
    return outcome;
  }

  async jobCompleteMany(params: readonly S.CompleteParams[]): Promise<readonly S.CompleteOutcome[]> {
    const outcomes = await this.writeFlow((now, effects) => params.map((p) => completeInTx(this.statements, p, now, effects)));
    this.watchers.announceFinished(finishedByCompletion(params, outcomes));
    return outcomes;
  }

  async jobFail(params: S.FailParams): Promise<S.FailOutcome> {
    const outcome = await this.writeFlow((now, effects) => failInTx(this.statements, params, this.random, now, effects));
    this.watchers.announceFinished(finishedByFailure(params, outcome));
    return outcome;
  }

  jobCheckpoint(params: S.CheckpointParams): Promise<S.TokenOutcome> {
    return this.write((now) => storeCheckpoint(this.statements, params, now));
  }

  jobMarkEffectStarted(params: S.TokenParams): Promise<S.TokenOutcome> {
    return this.write((now) => markEffectStarted(this.statements, params, now));
  }

  // --- operator actions -----------------------------------------------------

  jobRequeue(params: S.RequeueParams): Promise<S.RequeueOutcome> {
    return this.writeFlow((now, effects) => requeueInTx(this.statements, params, now, effects));
  }

  async jobCancel(params: S.JobRef): Promise<S.CancelOutcome> {
    const outcome = await this.writeFlow((now, effects) => cancelInTx(this.statements, params, now, effects));
    this.watchers.announceFinished(finishedByOperator(params, outcome));
    return outcome;
  }

  async jobReconcile(params: S.ReconcileParams): Promise<S.ReconcileOutcome> {
    const outcome = await this.writeFlow((now, effects) => reconcileInTx(this.statements, params, now, effects));
    this.watchers.announceFinished(finishedByOperator(params, outcome));
    return outcome;
  }

  async jobReapExpired(): Promise<S.ReapOutcome> {
    const counts = await this.writeFlow((now, effects) => reapInTx(this.statements, now, effects));
    if (reapFinishedSome(counts)) this.watchers.announceFinished(null);
    return counts;
  }

  /** Scans every job of the tenant, so it runs on the reader thread's own connection, off the event loop (stats-reader.ts). */
  async jobNextDue(params: NextDueParams): Promise<NextDue | null> {
    return this.read(() => this.nextDue.read(params, this.clock.now(), () => (this.statements.kindFlowState.all({ tenant: params.tenant }) as KindFlowColumns[]).map(kindFlowState)));
  }

  async jobPurge(params: JobPurgeParams): Promise<JobPurgeOutcome> {
    const deleted = await this.write((now) => this.retention.purge(params, now));
    for (let step = 0; deleted > 0 && step < VACUUM_STEPS_PER_BATCH; step++) if (!(await this.write(() => this.retention.vacuumStep()))) break;
    return { deleted };
  }

  async jobPurgeCount(params: JobPurgeCountParams): Promise<number> {
    return this.read(() => this.retention.count(params, this.clock.now()));
  }

  async reclaimSpace(): Promise<boolean> {
    return false;
  }

  async stats(params: { readonly tenant: string }): Promise<S.TenantStats> {
    if (this.closed) throw new StoreUnavailableError('the job store is closed');
    const now = this.clock.now();
    return toTenantStats(await this.statsReader.read(params.tenant, now), now);
  }

  async databaseSize(): Promise<number> {
    return this.read(() => (this.statements.databaseSize.get() as { bytes: number }).bytes);
  }

  watchAvailable(listener: S.AvailabilityListener): () => void {
    return this.watchers.watchAvailable(listener);
  }

  watchFinished(listener: S.FinishedListener): () => void {
    return this.watchers.watchFinished(listener);
  }

  // --- plumbing -------------------------------------------------------------

  /** `queuedJobs`: what the write makes available, announced as soon as it is queued (enqueue). */
  private write<T>(operation: (now: number) => T, queuedJobs: readonly S.Availability[] = []): Promise<T> {
    const promise = this.writer.run(operation);
    // Listeners hear of the write as soon as it is queued, not after its commit: a lease a woken
    // long poll asks for now is queued behind it, so it runs in the same transaction (or a later
    // one) and sees the new job. A job enqueued onto an idle queue is committed and leased with
    // one fsync, and neither answer leaves before that commit.
    for (const available of queuedJobs) this.watchers.announceAvailable(available);
    return promise;
  }

  /**
   * A write that learns inside its transaction which jobs it makes available (a retry, requeue,
   * reconcile or expiry reads the job's kind there); they are announced once it has committed.
   * The list is started afresh each time the operation runs (group commit may run it again alone).
   */
  private writeAnnouncing<T>(operation: (now: number, available: S.Availability[]) => T): Promise<T> {
    let available: S.Availability[] = [];
    const promise = this.writer.run((now) => {
      available = [];
      return operation(now, available);
    });
    promise.then(
      () => {
        for (const job of distinctAvailability(available)) this.watchers.announceAvailable(job);
      },
      () => undefined,
    );
    return promise;
  }

  /**
   * writeAnnouncing for the writes that may move other jobs (dependencies.ts): the jobs it made available are
   * announced, and when it ended waiting jobs (dependency_failed) every waiter for a finished job looks again.
   */
  private async writeFlow<T>(operation: (now: number, effects: FlowEffects) => T): Promise<T> {
    let cascaded = false;
    const result = await this.writeAnnouncing((now, available) => {
      const effects = flowEffects(available);
      const value = operation(now, effects);
      cascaded = effects.cascaded;
      return value;
    });
    if (cascaded) this.watchers.announceFinished(null);
    return result;
  }

  private read<T>(operation: () => T): T {
    if (this.closed) throw new StoreUnavailableError('the job store is closed');
    try {
      return operation();
    } catch (error) {
      throw translate(error);
    }
  }
}
