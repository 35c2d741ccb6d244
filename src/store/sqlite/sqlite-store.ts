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
 */

import Database, { type Database as Db, type Statement } from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { canonicalJson } from '../../core/canonical-json.js';
import { systemClock, type Clock } from '../../core/clock.js';
import { systemRandom, type Random } from '../../core/random.js';
import { StoreUnavailableError } from '../../core/errors.js';
import { expiryClassOf, failureClassOf } from '../../core/failure-classes.js';
import { crashPoint } from '../../core/fault-points.js';
import { newJobId, newLeaseToken, sha256Hex } from '../../core/ids.js';
import { JOB_STATUSES, type JobStatus } from '../../core/states.js';
import {
  decideCancel,
  decideCompletion,
  decideFailure,
  decideLeaseExpiry,
  decideRenew,
  decideRequeue,
  holdsLiveLease,
} from '../../core/transitions.js';
import type {
  ApiKeyInsertParams,
  ApiKeyRecord,
  AttemptRecord,
  CancelOutcome,
  CheckpointParams,
  CompleteOutcome,
  CompleteParams,
  EnqueueOutcome,
  EnqueueParams,
  FailOutcome,
  FailParams,
  JobPage,
  JobListParams,
  JobRecord,
  JobRef,
  KindRecord,
  KindUpsertParams,
  LeasedJob,
  LeaseParams,
  ReapOutcome,
  ReconcileOutcome,
  ReconcileParams,
  RenewOutcome,
  RenewParams,
  RequeueOutcome,
  RequeueParams,
  FinishedListener,
  Store,
  TenantStats,
  TokenOutcome,
  TokenParams,
} from '../store.js';
import { distinctAvailability, type Availability, type AvailabilityListener } from '../store.js';
import { CURSOR_SECRET_NAME, newCursorSecret, openCursor, sealCursor } from '../list-cursor.js';
import { GroupCommit } from './group-commit.js';
import { MIGRATIONS } from './migrations.js';
import { SQL, type QueryName } from './queries.js';
import { StatsReader, type StatsRows } from './stats-reader.js';
import { NextDueReader } from './next-due.js';
import { RetentionStatements, retentionBindings, VACUUM_STEPS_PER_BATCH } from './retention.js';
import type { NextDue, NextDueParams } from '../next-due.js';
import { NO_KIND_RETENTION, type JobPurgeCountParams, type JobPurgeOutcome, type JobPurgeParams } from '../retention.js';
import { FinishedListeners, finishedByCompletion, finishedByFailure, finishedByOperator, reapFinishedSome } from '../finished-jobs.js';
import {
  toApiKeyRecord,
  toAttemptRecord,
  toJobListItem,
  toJobRecord,
  toKindRecord,
  toSnapshot,
  type ApiKeyRow,
  type AttemptRow,
  type JobListRow,
  type JobRow,
  type SnapshotRow,
  type JobWithResultRow,
  type KindRow,
  type LeasedRow,
} from './rows.js';

export interface SqliteStoreOptions {
  readonly path: string;
  readonly clock?: Clock;
  /** Backoff jitter; Math.random when absent. */
  readonly random?: Random;
  /** How long a write waits for another process's write lock before answering store_unavailable. */
  readonly busyTimeoutMs?: number;
  /** How often to look for commits made by other processes while someone watches for work. */
  readonly crossProcessPollMs?: number;
  /** Open read-only (inspection tools). */
  readonly readonly?: boolean;
}

/** SQLite result codes that mean "cannot reach or write the database now", not a bug. */
const UNAVAILABLE_CODES = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|CANTOPEN|PROTOCOL|NOMEM|CORRUPT|NOTADB|PERM)/;

function isUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && UNAVAILABLE_CODES.test(code)) return true;
  return error instanceof TypeError && /database connection is not open/.test(error.message);
}

function translate(error: unknown): unknown {
  if (error instanceof StoreUnavailableError) return error;
  if (isUnavailable(error) || (error instanceof Error && error.message === 'store is closed')) {
    return new StoreUnavailableError('the job store is unavailable', error);
  }
  return error;
}

const LEASE_EXPIRED_MESSAGE = 'the lease expired before the worker completed or failed the job';
const DEADLINE_MESSAGE = 'the job passed its overall deadline';

type Statements = { readonly [K in QueryName]: Statement };

export class SqliteStore implements Store {
  readonly backend = 'sqlite' as const;
  private readonly statements: Statements;
  private readonly writer: GroupCommit;
  private readonly statsReader: StatsReader;
  private readonly listeners = new Set<AvailabilityListener>();
  private readonly finished = new FinishedListeners();
  private dataVersion = 0;
  private pollTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly cursorSecret: Buffer;
  private readonly nextDue: NextDueReader;
  private readonly retention: RetentionStatements;

  private constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly crossProcessPollMs: number,
    busyTimeoutMs: number,
    private readonly random: Random,
  ) {
    this.statsReader = new StatsReader(db.name, busyTimeoutMs);
    this.nextDue = new NextDueReader(db);
    this.retention = new RetentionStatements(db);
    this.statements = Object.fromEntries(
      Object.entries(SQL).map(([name, text]) => [name, db.prepare(text)]),
    ) as unknown as Statements;
    this.cursorSecret = this.loadCursorSecret();
    const waitNot = db.prepare('PRAGMA busy_timeout = 0');
    const waitAgain = db.prepare(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
    this.writer = new GroupCommit({
      db,
      now: () => this.clock.now(),
      translateError: translate,
      isFatal: isUnavailable,
      // The wait for another process's write lock happens between tries, off the event loop; reads keep the busy timeout.
      beginWithoutWaiting: () => {
        waitNot.get();
        try {
          db.exec('BEGIN IMMEDIATE');
        } finally {
          waitAgain.get();
        }
      },
      isBusy: (error) => /^SQLITE_BUSY/.test(String((error as { code?: unknown } | null)?.code)),
      lockWaitMs: busyTimeoutMs,
    });
  }

  static open(options: SqliteStoreOptions): SqliteStore {
    const clock = options.clock ?? systemClock;
    const busyTimeoutMs = Math.max(0, Math.floor(options.busyTimeoutMs ?? 5000));
    let db: Db;
    try {
      if (!options.readonly) mkdirSync(dirname(options.path), { recursive: true });
      db = new Database(options.path, { readonly: options.readonly ?? false });
      db.pragma(`busy_timeout = ${busyTimeoutMs}`);
      if (!options.readonly) {
        // A new database returns the pages retention frees to the file system (retention.ts); only settable before any table exists.
        if (db.prepare('SELECT count(*) AS n FROM sqlite_master').pluck().get() === 0) db.pragma('auto_vacuum = INCREMENTAL');
        db.pragma('journal_mode = WAL');
        // FULL: the WAL is fsynced at every commit, so an acknowledged write survives power loss.
        db.pragma('synchronous = FULL');
      }
      db.pragma('foreign_keys = ON');
      db.function('lh_token', { deterministic: false }, () => newLeaseToken());
      if (!options.readonly) migrate(db, clock);
    } catch (error) {
      throw translate(error);
    }
    return new SqliteStore(db, clock, options.crossProcessPollMs ?? 50, busyTimeoutMs, options.random ?? systemRandom);
  }

  async now(): Promise<number> {
    return this.clock.now();
  }

  /** The database's cursor secret, created by the first store to open it (a read-only store that finds none seals for itself). */
  private loadCursorSecret(): Buffer {
    const get = (): Buffer | undefined => (this.statements.secretGet.get(CURSOR_SECRET_NAME) as { secret: Buffer } | undefined)?.secret;
    const found = get();
    if (found !== undefined) return found;
    if (this.db.readonly) return newCursorSecret();
    this.statements.secretInsert.run(CURSOR_SECRET_NAME, newCursorSecret());
    return get() ?? newCursorSecret();
  }

  async ping(): Promise<void> {
    this.read(() => this.db.prepare('SELECT 1').get());
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopPolling();
    this.listeners.clear();
    this.finished.clear();
    this.writer.close();
    this.db.close();
    await this.statsReader.close();
  }

  // --- keys and kinds -------------------------------------------------------

  apiKeyInsert(params: ApiKeyInsertParams): Promise<ApiKeyRecord> {
    return this.write((now) => {
      this.statements.apiKeyInsert.run({ ...params, now });
      return { ...params, createdAt: now, revokedAt: null };
    });
  }

  async apiKeyFindByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    const row = this.read(() => this.statements.apiKeyByHash.get(keyHash) as ApiKeyRow | undefined);
    return row === undefined ? null : toApiKeyRecord(row);
  }

  apiKeyRevoke(params: { readonly id: string }): Promise<boolean> {
    return this.write((now) => this.statements.apiKeyRevoke.run(now, params.id).changes === 1);
  }

  kindUpsert(params: KindUpsertParams): Promise<KindRecord> {
    const retention = params.retention ?? NO_KIND_RETENTION;
    return this.write((now) => {
      this.statements.kindUpsert.run({
        tenant: params.tenant,
        kind: params.kind,
        payloadSchema: params.payloadSchema === undefined || params.payloadSchema === null ? null : canonicalJson(params.payloadSchema),
        maxPayloadBytes: params.maxPayloadBytes,
        maxAttempts: params.maxAttempts,
        leaseMs: params.leaseMs,
        backoffBaseMs: params.backoff.baseMs,
        backoffMaxMs: params.backoff.maxMs,
        deadlineMs: params.deadlineMs,
        maxResultBytes: params.maxResultBytes,
        maxCheckpointBytes: params.maxCheckpointBytes,
        ...retentionBindings(retention),
        now,
      });
      return { ...params, retention, updatedAt: now };
    });
  }

  async kindGet(params: { readonly tenant: string; readonly kind: string }): Promise<KindRecord | null> {
    const row = this.read(() => this.statements.kindGet.get(params.tenant, params.kind) as KindRow | undefined);
    return row === undefined ? null : toKindRecord(row);
  }

  async kindList(params: { readonly tenant: string }): Promise<readonly KindRecord[]> {
    const rows = this.read(() => this.statements.kindList.all(params.tenant) as KindRow[]);
    return rows.map(toKindRecord);
  }

  // --- enqueue and reads ----------------------------------------------------

  jobEnqueue(params: EnqueueParams): Promise<EnqueueOutcome> {
    return this.write((now) => this.enqueueInTransaction(params, now), [{ tenant: params.tenant, kind: params.kind }]);
  }

  jobEnqueueMany(params: readonly EnqueueParams[]): Promise<readonly EnqueueOutcome[]> {
    return this.write((now) => params.map((p) => this.enqueueInTransaction(p, now)), distinctAvailability(params));
  }

  async jobGet(params: JobRef): Promise<JobRecord | null> {
    const row = this.read(
      () =>
        this.statements.jobGetById.get({ id: params.id, tenant: params.scope.tenant, owner: params.scope.owner ?? null }) as
          | JobWithResultRow
          | undefined,
    );
    return row === undefined ? null : toJobRecord(row);
  }

  async jobList(params: JobListParams): Promise<JobPage> {
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
    const page = rows.slice(0, params.limit);
    const last = page[page.length - 1];
    return {
      jobs: page.map(toJobListItem),
      nextCursor: rows.length > params.limit && last !== undefined ? sealCursor(this.cursorSecret, params, last.seq) : null,
    };
  }

  async jobAttempts(params: JobRef): Promise<readonly AttemptRecord[] | null> {
    return this.read(() => {
      const job = this.statements.jobGetById.get({ id: params.id, tenant: params.scope.tenant, owner: params.scope.owner ?? null }) as
        | JobRow
        | undefined;
      if (job === undefined) return null;
      return (this.statements.attemptList.all(job.seq) as AttemptRow[]).map(toAttemptRecord);
    });
  }

  // --- the lease protocol ---------------------------------------------------

  async jobLease(params: LeaseParams): Promise<readonly LeasedJob[]> {
    let reapEnded = false;
    const leased = await this.writeAnnouncing((now, available) => {
      // Expired leases of every tenant are settled here (one indexed probe), so an expired job is claimable at once.
      reapEnded = reapFinishedSome(this.reapInTransaction(now, available));
      const kinds = params.kinds !== undefined && params.kinds.length > 0 ? params.kinds : null;
      const bindings = { tenant: params.tenant, workerId: params.workerId, leaseMs: params.leaseMs, max: params.max, now };
      const rows = (
        kinds === null
          ? this.statements.jobLeaseAnyKind.all(bindings)
          : this.statements.jobLeaseKinds.all({ ...bindings, kinds: JSON.stringify(kinds) })
      ) as LeasedRow[];
      rows.sort((a, b) => b.priority - a.priority || a.run_after - b.run_after || a.seq - b.seq);
      return rows.map((row) => {
        this.statements.attemptInsert.run(row.seq, row.epoch, row.attempts, params.workerId, now);
        return {
          id: row.id,
          kind: row.kind,
          payload: JSON.parse(row.payload) as unknown,
          attempt: row.attempts,
          maxAttempts: row.max_attempts,
          epoch: row.epoch,
          token: row.lease_token,
          leaseExpiresAt: row.lease_expires_at,
          deadlineAt: row.deadline_at,
          checkpoint:
            row.checkpoint_step === null
              ? null
              : { step: row.checkpoint_step, state: row.checkpoint_state === null ? null : (JSON.parse(row.checkpoint_state) as unknown) },
        };
      });
    });
    if (reapEnded) this.finished.emit(null);
    return leased;
  }

  jobRenew(params: RenewParams): Promise<RenewOutcome> {
    return this.write((now): RenewOutcome => {
      const row = this.snapshot(params.tenant, params.id);
      if (row === undefined) return { kind: 'rejected', code: 'not_found' };
      const decision = decideRenew(toSnapshot(row), params.token, params.leaseMs, now);
      if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
      const progress = params.progress === undefined ? null : canonicalJson(params.progress);
      const before = progress === null ? 0 : this.mutableBytes(row.seq);
      this.expectOne(
        this.statements.jobRenew.run({ seq: row.seq, token: params.token, leaseExpiresAt: decision.leaseExpiresAt, progress, now }).changes,
      );
      if (progress !== null) this.countStorageChange(row.tenant, row.seq, before);
      return { kind: 'renewed', leaseExpiresAt: decision.leaseExpiresAt };
    });
  }

  async jobComplete(params: CompleteParams): Promise<CompleteOutcome> {
    const outcome = await this.write((now) => this.completeInTransaction(params, now));
    this.finished.emit(finishedByCompletion([params], [outcome]));
    return outcome;
  }

  async jobCompleteMany(params: readonly CompleteParams[]): Promise<readonly CompleteOutcome[]> {
    const outcomes = await this.write((now) => params.map((p) => this.completeInTransaction(p, now)));
    this.finished.emit(finishedByCompletion(params, outcomes));
    return outcomes;
  }

  async jobFail(params: FailParams): Promise<FailOutcome> {
    const outcome = await this.writeAnnouncing((now, available): FailOutcome => {
      const row = this.snapshot(params.tenant, params.id);
      if (row === undefined) return { kind: 'rejected', code: 'not_found' };
      const decision = decideFailure(toSnapshot(row), params.token, { retryable: params.retryable, backoff: params.backoff, random: this.random }, now);
      const base = { seq: row.seq, token: params.token, now, code: params.error.code, message: params.error.message };
      switch (decision.kind) {
        case 'reject':
          return { kind: 'rejected', code: decision.code };
        case 'replay':
          return {
            kind: 'failed',
            status: row.status as 'queued' | 'dead' | 'cancelled' | 'unknown',
            runAfter: row.status === 'queued' ? row.run_after : null,
            replayed: true,
          };
        case 'retry':
          this.expectOne(this.statements.jobRetry.run({ ...base, runAfter: decision.runAfter }).changes);
          this.endAttempt(row, now, 'failed', params.error.code);
          available.push({ tenant: row.tenant, kind: row.kind });
          return { kind: 'failed', status: 'queued', runAfter: decision.runAfter, replayed: false };
        case 'cancelled':
        case 'unknown':
        case 'dead': {
          const status = decision.kind;
          this.expectOne(this.statements.jobDeadFromRunning.run({ ...base, status, outcome: 'failed', errorClass: failureClassOf(decision) }).changes);
          this.endAttempt(row, now, 'failed', params.error.code);
          return { kind: 'failed', status, runAfter: null, replayed: false };
        }
      }
    });
    this.finished.emit(finishedByFailure(params, outcome));
    return outcome;
  }

  jobCheckpoint(params: CheckpointParams): Promise<TokenOutcome> {
    return this.write((now) =>
      this.withLiveLease(params, now, (row) => {
        const before = this.mutableBytes(row.seq);
        const changes = this.statements.jobCheckpoint.run({
          seq: row.seq,
          token: params.token,
          now,
          step: params.checkpoint.step,
          state: canonicalJson(params.checkpoint.state ?? null),
        }).changes;
        if (changes === 1) this.countStorageChange(row.tenant, row.seq, before);
        return changes;
      }),
    );
  }

  private mutableBytes(seq: number): number {
    return (this.statements.jobMutableBytes.get(seq) as { bytes: number } | undefined)?.bytes ?? 0;
  }

  /** Checkpoint state and progress count in the tenant's storage, like payloads and results. */
  private countStorageChange(tenant: string, seq: number, before: number): void {
    const delta = this.mutableBytes(seq) - before;
    if (delta !== 0) this.statements.counterAddStorage.run(tenant, delta);
  }

  jobMarkEffectStarted(params: TokenParams): Promise<TokenOutcome> {
    return this.write((now) =>
      this.withLiveLease(params, now, (row) => this.statements.jobEffectStarted.run({ seq: row.seq, token: params.token, now }).changes),
    );
  }

  // --- operator actions -----------------------------------------------------

  jobRequeue(params: RequeueParams): Promise<RequeueOutcome> {
    return this.writeAnnouncing((now, available): RequeueOutcome => {
      const row = this.scopedRow(params);
      if (row === undefined) return { kind: 'rejected', code: 'not_found' };
      const decision = decideRequeue(toSnapshot(row));
      if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
      this.expectOne(
        this.statements.jobRequeue.run({ seq: row.seq, now, maxAttempts: params.maxAttempts ?? row.max_attempts, fromStatus: 'dead' }).changes,
      );
      available.push({ tenant: row.tenant, kind: row.kind });
      return { kind: 'requeued', job: this.reload(row.seq) };
    });
  }

  async jobCancel(params: JobRef): Promise<CancelOutcome> {
    const outcome = await this.write((now): CancelOutcome => {
      const row = this.scopedRow(params);
      if (row === undefined) return { kind: 'rejected', code: 'not_found' };
      if (row.status === 'cancelled') return { kind: 'cancelled', job: this.reload(row.seq) };
      const decision = decideCancel(toSnapshot(row));
      switch (decision.kind) {
        case 'already_terminal':
          return { kind: 'rejected', code: 'invalid_state' };
        case 'cancel_now':
          this.expectOne(this.statements.jobCancelNow.run({ seq: row.seq, now }).changes);
          return { kind: 'cancelled', job: this.reload(row.seq) };
        case 'mark_running':
          this.expectOne(this.statements.jobCancelRequest.run({ seq: row.seq }).changes);
          return { kind: 'cancel_requested', job: this.reload(row.seq) };
      }
    });
    this.finished.emit(finishedByOperator(params, outcome));
    return outcome;
  }

  async jobReconcile(params: ReconcileParams): Promise<ReconcileOutcome> {
    const outcome = await this.writeAnnouncing((now, available): ReconcileOutcome => {
      const row = this.scopedRow(params);
      if (row === undefined) return { kind: 'rejected', code: 'not_found' };
      if (row.status !== 'unknown') return { kind: 'rejected', code: 'not_unknown' };
      const bindings = { seq: row.seq, now };
      if (params.outcome === 'succeeded') this.expectOne(this.statements.jobReconcileSucceeded.run(bindings).changes);
      else if (params.outcome === 'dead') this.expectOne(this.statements.jobReconcileDead.run(bindings).changes);
      else {
        this.expectOne(this.statements.jobRequeue.run({ ...bindings, maxAttempts: row.max_attempts, fromStatus: 'unknown' }).changes);
        available.push({ tenant: row.tenant, kind: row.kind });
      }
      return { kind: 'reconciled', job: this.reload(row.seq) };
    });
    this.finished.emit(finishedByOperator(params, outcome));
    return outcome;
  }

  async jobReapExpired(): Promise<ReapOutcome> {
    const counts = await this.writeAnnouncing((now, available) => this.reapInTransaction(now, available));
    if (reapFinishedSome(counts)) this.finished.emit(null);
    return counts;
  }

  /** Scans every job of the tenant, so it runs on the reader thread's own connection, off the event loop (stats-reader.ts). */
  async jobNextDue(params: NextDueParams): Promise<NextDue | null> {
    return this.read(() => this.nextDue.read(params, this.clock.now()));
  }

  async jobPurge(params: JobPurgeParams): Promise<JobPurgeOutcome> {
    const deleted = await this.write((now) => this.retention.purge(params, now));
    for (let step = 0; deleted > 0 && step < VACUUM_STEPS_PER_BATCH; step++) if (!(await this.write(() => this.retention.vacuumStep()))) break;
    return { deleted };
  }

  async jobPurgeCount(params: JobPurgeCountParams): Promise<number> {
    return this.read(() => this.retention.count(params, this.clock.now()));
  }

  async stats(params: { readonly tenant: string }): Promise<TenantStats> {
    if (this.closed) throw new StoreUnavailableError('the job store is closed');
    const now = this.clock.now();
    return toTenantStats(await this.statsReader.read(params.tenant, now), now);
  }

  watchAvailable(listener: AvailabilityListener): () => void {
    this.listeners.add(listener);
    this.startPolling();
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0 && this.finished.size === 0) this.stopPolling();
    };
  }

  watchFinished(listener: FinishedListener): () => void {
    const remove = this.finished.add(listener);
    // Another process's commit is seen through data_version, which says nothing about which jobs changed.
    this.startPolling();
    return () => {
      remove();
      if (this.listeners.size === 0 && this.finished.size === 0) this.stopPolling();
    };
  }

  // --- inside a transaction -------------------------------------------------

  private enqueueInTransaction(params: EnqueueParams, now: number): EnqueueOutcome {
    const existing = this.statements.jobByIdempotencyKey.get(params.tenant, params.owner, params.idempotencyKey) as
      | { id: string; request_hash: string }
      | undefined;
    if (existing !== undefined) {
      if (existing.request_hash !== params.requestHash) return { kind: 'conflict', existingJobId: existing.id };
      return { kind: 'replayed', job: this.reloadById(existing.id) };
    }
    const id = newJobId(now);
    const runAfter = params.runAfter ?? now;
    this.statements.jobInsert.run({
      id,
      tenant: params.tenant,
      owner: params.owner,
      idempotencyKey: params.idempotencyKey,
      requestHash: params.requestHash,
      kind: params.kind,
      payload: params.payloadJson ?? canonicalJson(params.payload ?? null),
      payloadBytes: params.payloadBytes,
      maxAttempts: params.maxAttempts,
      priority: params.priority,
      runAfter,
      deadlineMs: params.deadlineMs,
      deadlineAt: params.deadlineMs === null ? null : now + params.deadlineMs,
      now,
    });
    this.statements.counterAddStorage.run(params.tenant, params.payloadBytes);
    crashPoint('enqueue.before-commit');
    // Built from what was inserted rather than read back: enqueue is the hottest write.
    const job: JobRecord = {
      id,
      tenant: params.tenant,
      owner: params.owner,
      kind: params.kind,
      payload: params.payload ?? null,
      status: 'queued',
      attempts: 0,
      maxAttempts: params.maxAttempts,
      priority: params.priority,
      runAfter,
      deadlineAt: params.deadlineMs === null ? null : now + params.deadlineMs,
      leaseOwner: null,
      leaseExpiresAt: null,
      epoch: 0,
      createdAt: now,
      startedAt: null,
      finishedAt: null,
      lastError: null,
      progress: null,
      cancelRequested: false,
      effectStartedAt: null,
      checkpoint: null,
      result: null,
    };
    return { kind: 'created', job };
  }

  private completeInTransaction(params: CompleteParams, now: number): CompleteOutcome {
    const row = this.snapshot(params.tenant, params.id);
    if (row === undefined) return { kind: 'rejected', code: 'not_found' };
    const decision = decideCompletion(toSnapshot(row), params.token, now);
    if (decision.kind === 'replay') return { kind: 'completed', replayed: true };
    if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
    const result = params.result;
    if (result !== undefined && params.maxResultBytes !== undefined && result.body.length > params.maxResultBytes) {
      this.expectOne(
        this.statements.jobDeadFromRunning.run({
          seq: row.seq,
          token: params.token,
          now,
          status: 'dead',
          outcome: 'failed',
          code: 'result_too_large',
          message: `the result is ${result.body.length} bytes; the kind allows ${params.maxResultBytes}`,
          errorClass: 'result_too_large',
        }).changes,
      );
      this.endAttempt(row, now, 'failed', 'result_too_large');
      return { kind: 'result_too_large' };
    }
    this.expectOne(this.statements.jobSucceed.run({ seq: row.seq, token: params.token, now }).changes);
    if (result !== undefined) {
      this.statements.resultInsert.run(row.seq, result.contentType, result.body, sha256Hex(result.body), result.body.length);
      this.statements.counterAddStorage.run(row.tenant, result.body.length);
    }
    crashPoint('complete.inside-transaction');
    this.endAttempt(row, now, 'succeeded', null);
    return { kind: 'completed', replayed: false };
  }

  /** Applies due expiries; the (tenant, kind) of every job returned to the queue goes into `available`. */
  private reapInTransaction(now: number, available: Availability[]): ReapOutcome {
    const counts = { requeued: 0, dead: 0, unknown: 0, cancelled: 0, deadlineExpired: 0 };
    const expired = this.statements.jobsExpiredLeases.all(now) as SnapshotRow[];
    for (const row of expired) {
      const decision = decideLeaseExpiry(toSnapshot(row), now);
      const bindings = { seq: row.seq, token: row.lease_token, now, errorClass: expiryClassOf(decision) };
      this.statements.counterAddExpiration.run(row.tenant);
      switch (decision.kind) {
        case 'requeue':
          this.expectOne(this.statements.jobExpireToQueued.run({ ...bindings, message: LEASE_EXPIRED_MESSAGE }).changes);
          this.endAttempt(row, now, 'expired', 'lease_expired');
          available.push({ tenant: row.tenant, kind: row.kind });
          counts.requeued++;
          break;
        case 'unknown':
          this.expectOne(
            this.statements.jobExpireToEnd.run({
              ...bindings,
              status: 'unknown',
              outcome: 'expired',
              code: 'effect_unknown',
              message: 'the lease expired after the handler started an external effect; reconcile it',
            }).changes,
          );
          this.endAttempt(row, now, 'expired', 'lease_expired');
          counts.unknown++;
          break;
        case 'cancelled':
          this.expectOne(
            this.statements.jobExpireToEnd.run({ ...bindings, status: 'cancelled', outcome: 'cancelled', code: 'cancelled', message: 'cancelled by request' })
              .changes,
          );
          this.endAttempt(row, now, 'cancelled', 'cancelled');
          counts.cancelled++;
          break;
        case 'dead': {
          const message = decision.code === 'deadline_exceeded' ? DEADLINE_MESSAGE : LEASE_EXPIRED_MESSAGE;
          const outcome = decision.code === 'deadline_exceeded' ? 'deadline' : 'expired';
          this.expectOne(this.statements.jobExpireToEnd.run({ ...bindings, status: 'dead', outcome, code: decision.code, message }).changes);
          this.endAttempt(row, now, outcome, decision.code);
          counts.dead++;
          break;
        }
      }
    }
    for (const row of this.statements.jobsQueuedPastDeadline.all(now) as { seq: number }[]) {
      counts.deadlineExpired += this.statements.jobQueuedDeadline.run({ seq: row.seq, now, message: DEADLINE_MESSAGE }).changes;
    }
    return counts;
  }

  private withLiveLease(params: TokenParams, now: number, apply: (row: SnapshotRow) => number): TokenOutcome {
    const row = this.snapshot(params.tenant, params.id);
    if (row === undefined) return { kind: 'rejected', code: 'not_found' };
    const snapshot = toSnapshot(row);
    if (!holdsLiveLease(snapshot, params.token, now)) return { kind: 'rejected', code: 'stale_lease' };
    if (snapshot.deadlineAt !== null && snapshot.deadlineAt <= now) return { kind: 'rejected', code: 'deadline_exceeded' };
    this.expectOne(apply(row));
    return { kind: 'ok' };
  }

  private endAttempt(row: SnapshotRow, now: number, outcome: string, errorCode: string | null): void {
    this.statements.attemptEnd.run(now, outcome, errorCode, row.seq, row.epoch);
  }

  private snapshot(tenant: string, id: string): SnapshotRow | undefined {
    return this.statements.jobSnapshot.get(id, tenant) as SnapshotRow | undefined;
  }

  private scopedRow(ref: JobRef): JobRow | undefined {
    return this.statements.jobGetById.get({ id: ref.id, tenant: ref.scope.tenant, owner: ref.scope.owner ?? null }) as JobRow | undefined;
  }

  private reload(seq: number): JobRecord {
    return toJobRecord(this.statements.jobGetBySeq.get(seq) as JobWithResultRow);
  }

  private reloadById(id: string): JobRecord {
    return toJobRecord(this.statements.jobGetByIdUnscoped.get(id) as JobWithResultRow);
  }

  /** A guarded statement that matched nothing after its decision allowed it means a broken invariant. */
  private expectOne(changes: number): void {
    if (changes !== 1) throw new Error(`guarded update matched ${changes} rows; the snapshot and the guard disagree`);
  }

  // --- plumbing -------------------------------------------------------------

  /** `queuedJobs`: what the write makes available, announced as soon as it is queued (enqueue). */
  private write<T>(operation: (now: number) => T, queuedJobs: readonly Availability[] = []): Promise<T> {
    const promise = this.writer.run(operation);
    // Listeners hear of the write as soon as it is queued, not after its commit: a lease a woken
    // long poll asks for now is queued behind it, so it runs in the same transaction (or a later
    // one) and sees the new job. A job enqueued onto an idle queue is committed and leased with
    // one fsync, and neither answer leaves before that commit.
    for (const available of queuedJobs) this.notify(available);
    return promise;
  }

  /**
   * A write that learns inside its transaction which jobs it makes available (a retry, requeue,
   * reconcile or expiry reads the job's kind there); they are announced once it has committed.
   * The list is started afresh each time the operation runs (group commit may run it again alone).
   */
  private writeAnnouncing<T>(operation: (now: number, available: Availability[]) => T): Promise<T> {
    let available: Availability[] = [];
    const promise = this.writer.run((now) => {
      available = [];
      return operation(now, available);
    });
    promise.then(
      () => {
        for (const job of distinctAvailability(available)) this.notify(job);
      },
      () => undefined,
    );
    return promise;
  }

  private read<T>(operation: () => T): T {
    if (this.closed) throw new StoreUnavailableError('the job store is closed');
    try {
      return operation();
    } catch (error) {
      throw translate(error);
    }
  }

  private notify(available: Availability | null): void {
    for (const listener of this.listeners) listener(available);
  }

  private startPolling(): void {
    if (this.pollTimer !== null || this.closed) return;
    this.dataVersion = this.readDataVersion();
    this.pollTimer = setInterval(() => {
      const version = this.readDataVersion();
      // data_version changes only when another connection committed. It says nothing of what was
      // committed, so whose jobs became available is unknown: every group of waiters looks.
      if (version !== this.dataVersion) {
        this.dataVersion = version;
        this.notify(null);
        this.finished.emit(null);
      }
    }, this.crossProcessPollMs);
    this.pollTimer.unref();
  }

  private stopPolling(): void {
    if (this.pollTimer !== null) clearInterval(this.pollTimer);
    this.pollTimer = null;
  }

  private readDataVersion(): number {
    try {
      return this.db.pragma('data_version', { simple: true }) as number;
    } catch {
      return this.dataVersion;
    }
  }
}

function migrate(db: Db, clock: Clock): void {
  db.exec('BEGIN IMMEDIATE');
  try {
    db.exec(SQL.migrationsTable);
    const applied = new Set((db.prepare(SQL.migrationsApplied).all() as { version: number }[]).map((r) => r.version));
    for (const migration of MIGRATIONS) {
      if (applied.has(migration.version)) continue;
      db.exec(migration.sql);
      db.prepare(SQL.migrationRecord).run(migration.version, migration.name, clock.now());
    }
    db.exec('COMMIT');
  } catch (error) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw error;
  }
}


function toTenantStats(rows: StatsRows, now: number): TenantStats {
  const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, 0])) as Record<JobStatus, number>;
  for (const row of rows.counts) counts[row.status as JobStatus] = row.n;
  const oldest = rows.oldest?.oldest ?? null;
  return {
    counts,
    meanWaitMs: rows.times?.mean_wait ?? null,
    meanRunMs: rows.times?.mean_run ?? null,
    meanAttemptRunMs: rows.attemptTimes?.mean_attempt_run ?? null,
    meanTimeToCompletionMs: rows.times?.mean_completion ?? null,
    leaseExpirations: rows.counters?.lease_expirations ?? 0,
    oldestAvailableAgeMs: oldest === null ? null : Math.max(0, now - oldest),
    storageBytes: rows.counters?.storage_bytes ?? 0,
  };
}
