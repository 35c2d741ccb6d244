/**
 * The PostgreSQL Store, for several coordinators on several hosts over one
 * database. PostgreSQL's now() is the only clock. Transitions are decided by
 * the pure functions in core/transitions.ts and applied by statements whose
 * WHERE clause repeats the fencing condition (queries.ts); the hot paths
 * (enqueue, lease, renew, single complete, checkpoint) are one guarded
 * statement each, and when such a statement matches nothing the store reads
 * the row and lets the decide function name the reason. Work that needs a
 * decision made in code (fail with its backoff, batches, the reaper, operator
 * actions) locks the rows with SELECT … FOR UPDATE first.
 *
 * Long polls across coordinators wake through LISTEN/NOTIFY
 * (availability-listener.ts).
 */

import { canonicalJson } from '../../core/canonical-json.js';
import { crashPoint } from '../../core/fault-points.js';
import { isJobId, newLeaseToken } from '../../core/ids.js';
import { systemRandom, type Random } from '../../core/random.js';
import { JOB_STATUSES, type JobStatus } from '../../core/states.js';
import { decideFailure } from '../../core/transitions.js';
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
  FinishedJob,
  FinishedListener,
  JobListParams,
  JobPage,
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
  Store,
  TenantStats,
  TokenOutcome,
  TokenParams,
} from '../store.js';
import type { Availability, AvailabilityListener as OnAvailable } from '../store.js';
import { CURSOR_SECRET_NAME, newCursorSecret, openCursor, sealCursor } from '../list-cursor.js';
import { AvailabilityListener } from './availability-listener.js';
import * as C from './catalog-queries.js';
import { CoalescedNotifier } from './coalesced-notifier.js';
import { FinishedListenerConnection, FinishedSender } from './finished-channel.js';
import { FinishedListeners, finishedByCompletion, finishedByFailure, finishedByOperator, reapFinishedSome } from '../finished-jobs.js';
import { insertJobs, prepareEnqueue, type PreparedEnqueue } from './enqueue.js';
import { completeDistinct, completeOne, markEffectStarted, renewLease, storeCheckpoint } from './guarded-statements.js';
import { completeBatch, failDecisionRow } from './lease-endings.js';
import { endLeases, lockJob, type LockedRow } from './locked-rows.js';
import { assertSchemaName, dropSchema, migrate, type MigrationReport } from './migrate.js';
import { cancelInTx, reapInTx, reconcileInTx, requeueInTx, type Announced, type ReapCounts } from './operator-actions.js';
import { clientConfig, PgDatabase, splitConnectionString } from './pg-database.js';
import { pgTarget, translatePgConnectError, translatePgError } from './pg-errors.js';
import * as Q from './queries.js';
import { readNextDue } from './next-due.js';
import { purgeBatch, purgeCount, retentionValues } from './retention.js';
import type { NextDue, NextDueParams } from '../next-due.js';
import { NO_KIND_RETENTION, type JobPurgeCountParams, type JobPurgeOutcome, type JobPurgeParams } from '../retention.js';
import {
  toApiKeyRecord,
  toAttemptRecord,
  toJobListItem,
  toJobRecord,
  toKindRecord,
  toLeasedJob,
  toSnapshot,
  type ApiKeyRow,
  type AttemptRow,
  type JobListRow,
  type JobRow,
  type KindRow,
} from './row-mapping.js';
import { bind, bindUnplanned, type NamedQuery } from './sql-fragments.js';
import { StatementBatcher } from './statement-batcher.js';

export interface PostgresStoreOptions {
  /**
   * A libpq-style URL. Two query parameters of our own are read and removed
   * before pg sees it, so one `--db` string can say everything:
   * `schema=NAME` and `pool_size=N` (the options below win over them).
   */
  readonly connectionString: string;
  /** Connections in the pool (the LISTEN connection is extra); 10 when absent. */
  readonly poolSize?: number;
  /** A schema to create (if missing) and use for every table; `public` when absent. */
  readonly schema?: string;
  /** PostgreSQL's own now() is the only clock; a Clock cannot be injected. */
  readonly clock?: never;
  /** Backoff jitter; Math.random when absent. */
  readonly random?: Random;
}

/** Most single enqueues folded into one statement. */
const ENQUEUE_BATCH = 500;

/** How many expired leases one reaper transaction handles. */
const REAP_BATCH = 500;

export class PostgresStore implements Store {
  readonly backend = 'postgres' as const;
  private readonly listeners = new Set<OnAvailable>();
  private listener: AvailabilityListener | null = null;
  private readonly notifier: CoalescedNotifier;
  private readonly finished = new FinishedListeners();
  private finishedListener: FinishedListenerConnection | null = null;
  private readonly finishedSender: FinishedSender;
  /** Concurrent single enqueues share statements (and WAL flushes). */
  private readonly enqueuer: StatementBatcher<PreparedEnqueue, EnqueueOutcome>;
  private closed = false;

  private constructor(
    private readonly db: PgDatabase,
    private readonly options: { readonly connectionString: string; readonly schema: string },
    /** NOTIFY channel: one per schema, so test schemas do not wake each other. */
    private readonly channel: string,
    poolSize: number,
    /** Seals list cursors; one row of the schema, so every coordinator on it opens every other's cursors. */
    private readonly cursorSecret: Buffer,
    private readonly random: Random,
  ) {
    this.notifier = new CoalescedNotifier((payloads) => this.db.query(bind(Q.NOTIFY, [this.channel, payloads])));
    this.finishedSender = new FinishedSender((payloads) => this.db.query(bind(Q.NOTIFY_FINISHED, [this.finishedChannel, payloads])));
    // Half the pool, so batched enqueues leave connections for leases and completions.
    this.enqueuer = new StatementBatcher((items) => this.insert(items), Math.max(1, Math.floor(poolSize / 2)), ENQUEUE_BATCH);
  }

  static async connect(options: PostgresStoreOptions): Promise<PostgresStore> {
    const fromUrl = splitConnectionString(options.connectionString);
    const connectionString = fromUrl.connectionString;
    const schema = options.schema ?? fromUrl.schema ?? 'public';
    assertSchemaName(schema);
    const poolSize = options.poolSize ?? fromUrl.poolSize ?? 10;
    if (!Number.isInteger(poolSize) || poolSize < 1) throw new Error('poolSize must be a positive integer');
    let db = new PgDatabase({ connectionString, schema, poolSize });
    try {
      const client = await db.pool.connect();
      let report: MigrationReport;
      try {
        report = await migrate(client, schema);
      } finally {
        client.release();
      }
      // A success answer must mean a durable commit, whatever the server's default.
      if (report.synchronousCommit === 'off') {
        await db.close();
        db = new PgDatabase({ connectionString, schema, poolSize, forceSynchronousCommit: true });
      }
      await db.query(bind(C.SECRET_INSERT, [CURSOR_SECRET_NAME, newCursorSecret()]));
    } catch (error) {
      await db.close().catch(() => undefined);
      throw translatePgConnectError(error, pgTarget(connectionString, schema));
    }
    let cursorSecret: Buffer | undefined;
    try {
      cursorSecret = (await db.query<{ secret: Buffer }>(bind(C.SECRET_GET, [CURSOR_SECRET_NAME]))).rows[0]?.secret;
    } catch (error) {
      await db.close().catch(() => undefined);
      throw translatePgError(error);
    }
    if (cursorSecret === undefined) {
      await db.close();
      throw new Error('store_secrets has no list cursor secret after inserting one');
    }
    return new PostgresStore(db, { connectionString, schema }, `lh_available_${schema}`.slice(0, 63), poolSize, cursorSecret, options.random ?? systemRandom);
  }

  /** Drops a schema and everything in it (test isolation). */
  static async dropSchema(options: { readonly connectionString: string; readonly schema: string }): Promise<void> {
    try {
      await dropSchema(options.connectionString, options.schema);
    } catch (error) {
      throw translatePgError(error);
    }
  }

  async now(): Promise<number> {
    const result = await this.db.query<{ now_ms: number }>(bind(Q.NOW, []));
    return result.rows[0]?.now_ms ?? 0;
  }

  async ping(): Promise<void> {
    await this.db.query({ text: 'SELECT 1' });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.notifier.close();
    this.finishedSender.close();
    this.listeners.clear();
    this.finished.clear();
    await this.listener?.stop();
    await this.finishedListener?.stop();
    await this.db.close();
  }

  // --- keys and kinds -------------------------------------------------------

  async apiKeyInsert(params: ApiKeyInsertParams): Promise<ApiKeyRecord> {
    const values = [params.id, params.tenant, params.user, params.role, params.keyHash];
    return toApiKeyRecord(await this.one<ApiKeyRow>(C.API_KEY_INSERT, values));
  }

  async apiKeyFindByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    const row = await this.first<ApiKeyRow>(C.API_KEY_BY_HASH, [keyHash]);
    return row === undefined ? null : toApiKeyRecord(row);
  }

  async apiKeyRevoke(params: { readonly id: string }): Promise<boolean> {
    return (await this.first<{ id: string }>(C.API_KEY_REVOKE, [params.id])) !== undefined;
  }

  async kindUpsert(params: KindUpsertParams): Promise<KindRecord> {
    const schema = params.payloadSchema === undefined || params.payloadSchema === null ? null : canonicalJson(params.payloadSchema);
    const values = [
      params.tenant, params.kind, schema, params.maxPayloadBytes, params.maxAttempts, params.leaseMs,
      params.backoff.baseMs, params.backoff.maxMs, params.deadlineMs, params.maxResultBytes, params.maxCheckpointBytes,
      ...retentionValues(params.retention ?? NO_KIND_RETENTION),
    ];
    return toKindRecord(await this.one<KindRow>(C.KIND_UPSERT, values));
  }

  async kindGet(params: { readonly tenant: string; readonly kind: string }): Promise<KindRecord | null> {
    const row = await this.first<KindRow>(C.KIND_GET, [params.tenant, params.kind]);
    return row === undefined ? null : toKindRecord(row);
  }

  async kindList(params: { readonly tenant: string }): Promise<readonly KindRecord[]> {
    return (await this.db.query<KindRow>(bind(C.KIND_LIST, [params.tenant]))).rows.map(toKindRecord);
  }

  // --- enqueue and reads ----------------------------------------------------

  async jobEnqueue(params: EnqueueParams): Promise<EnqueueOutcome> {
    return this.enqueuer.submit(prepareEnqueue(params));
  }

  async jobEnqueueMany(params: readonly EnqueueParams[]): Promise<readonly EnqueueOutcome[]> {
    return this.insert(params.map(prepareEnqueue));
  }

  async jobGet(params: JobRef): Promise<JobRecord | null> {
    if (!isJobId(params.id)) return null;
    const row = await this.first<JobRow>(Q.JOB_GET, [params.id, params.scope.tenant, params.scope.owner ?? null]);
    return row === undefined ? null : toJobRecord(row);
  }

  async jobList(params: JobListParams): Promise<JobPage> {
    const cursor = params.cursor === undefined ? null : openCursor(this.cursorSecret, params, params.cursor);
    const values = [params.scope.tenant, params.scope.owner ?? null, params.status ?? null, params.kind ?? null, cursor, params.limit + 1];
    const rows = (await this.db.query<JobListRow>(bindUnplanned(C.JOB_LIST, values))).rows;
    const page = rows.slice(0, params.limit);
    const last = page[page.length - 1];
    return {
      jobs: page.map(toJobListItem),
      nextCursor: rows.length > params.limit && last !== undefined ? sealCursor(this.cursorSecret, params, last.seq) : null,
    };
  }

  async jobAttempts(params: JobRef): Promise<readonly AttemptRecord[] | null> {
    if ((await this.jobGet(params)) === null) return null;
    return (await this.db.query<AttemptRow>(bind(C.ATTEMPT_LIST, [params.id]))).rows.map(toAttemptRecord);
  }

  // --- the lease protocol ---------------------------------------------------

  async jobLease(params: LeaseParams): Promise<readonly LeasedJob[]> {
    const due = await this.first<{ due: boolean }>(Q.DUE_PROBE, []);
    if (due?.due === true) await this.reap();
    const tokens = Array.from({ length: params.max }, () => newLeaseToken());
    const base = [params.tenant, params.max, tokens, params.workerId, params.leaseMs];
    const kinds = params.kinds !== undefined && params.kinds.length > 0 ? [...params.kinds] : null;
    const query = kinds === null ? bind(Q.JOB_LEASE_ANY_KIND, base) : bind(Q.JOB_LEASE_KINDS, [...base, kinds]);
    return (await this.db.query<JobRow>(query)).rows.map(toLeasedJob);
  }

  async jobNextDue(params: NextDueParams): Promise<NextDue | null> {
    return readNextDue(this.db, params);
  }

  async jobPurge(params: JobPurgeParams): Promise<JobPurgeOutcome> {
    return { deleted: await purgeBatch(this.db, params) };
  }

  async jobPurgeCount(params: JobPurgeCountParams): Promise<number> {
    return purgeCount(this.db, params);
  }

  async jobRenew(params: RenewParams): Promise<RenewOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    return renewLease(this.db, params);
  }

  async jobComplete(params: CompleteParams): Promise<CompleteOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    if (resultTooLarge(params)) {
      // Rare: the locked path decides first, then ends the job dead.
      const [outcome] = await this.jobCompleteMany([params]);
      if (outcome === undefined) throw new Error('complete returned no outcome');
      return outcome;
    }
    return this.finishing([params], await completeOne(this.db, params));
  }

  async jobCompleteMany(params: readonly CompleteParams[]): Promise<readonly CompleteOutcome[]> {
    if (params.length === 0) return [];
    // The common batch (each job once, every result within its limit) is one statement.
    const distinct = new Set(params.map((p) => p.id)).size === params.length;
    if (distinct && !params.some(resultTooLarge)) return this.finishing(params, await completeDistinct(this.db, params));
    // Otherwise decide item by item, in order, on locked rows.
    const outcomes = await this.db.transaction(async (tx) => {
      const ids = [...new Set(params.map((p) => p.id).filter(isJobId))];
      const rows = (await tx.query<LockedRow>(bind(Q.JOB_LOCK_MANY, [ids]))).rows;
      const batch = completeBatch(params, rows);
      await endLeases(tx, batch.endings, true);
      crashPoint('complete.inside-transaction');
      return batch.outcomes;
    });
    return this.finishing(params, outcomes);
  }

  async jobFail(params: FailParams): Promise<FailOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    let kind = '';
    const outcome = await this.db.transaction(async (tx): Promise<FailOutcome> => {
      const row = await lockJob(tx, params.id, params.tenant, null);
      if (row === undefined) return { kind: 'rejected', code: 'not_found' };
      const input = { retryable: params.retryable, backoff: params.backoff, random: this.random };
      const decision = decideFailure(toSnapshot(row), params.token, input, row.now_ms);
      if (decision.kind === 'reject') return { kind: 'rejected', code: decision.code };
      if (decision.kind === 'replay') {
        const status = row.status as 'queued' | 'dead' | 'cancelled' | 'unknown';
        return { kind: 'failed', status, runAfter: status === 'queued' ? row.run_after : null, replayed: true };
      }
      const ending = failDecisionRow(row, params, decision);
      await endLeases(tx, [ending], true);
      const status = ending.status as 'queued' | 'dead' | 'cancelled' | 'unknown';
      kind = row.kind;
      return { kind: 'failed', status, runAfter: ending.runAfter, replayed: false };
    });
    if (outcome.kind === 'failed' && outcome.status === 'queued' && !outcome.replayed) this.announce([{ tenant: params.tenant, kind }]);
    this.announceFinished(finishedByFailure(params, outcome));
    return outcome;
  }

  async jobCheckpoint(params: CheckpointParams): Promise<TokenOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    return storeCheckpoint(this.db, params);
  }

  async jobMarkEffectStarted(params: TokenParams): Promise<TokenOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    return markEffectStarted(this.db, params);
  }

  // --- operator actions -----------------------------------------------------

  async jobRequeue(params: RequeueParams): Promise<RequeueOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    return this.announced(await this.db.transaction((tx) => requeueInTx(tx, params)));
  }

  async jobCancel(params: JobRef): Promise<CancelOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    const outcome = await this.db.transaction((tx) => cancelInTx(tx, params));
    this.announceFinished(finishedByOperator(params, outcome));
    return outcome;
  }

  async jobReconcile(params: ReconcileParams): Promise<ReconcileOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    const outcome = this.announced(await this.db.transaction((tx) => reconcileInTx(tx, params)));
    this.announceFinished(finishedByOperator(params, outcome));
    return outcome;
  }

  async jobReapExpired(): Promise<ReapOutcome> {
    const total = { requeued: 0, dead: 0, unknown: 0, cancelled: 0, deadlineExpired: 0 };
    // Bounded, so one call cannot run forever while leases keep expiring.
    for (let round = 0; round < 20; round++) {
      const counts = await this.reap();
      total.requeued += counts.requeued;
      total.dead += counts.dead;
      total.unknown += counts.unknown;
      total.cancelled += counts.cancelled;
      total.deadlineExpired += counts.deadlineExpired;
      if (counts.leases < REAP_BATCH && counts.deadlineExpired < REAP_BATCH) break;
    }
    return total;
  }

  async stats(params: { readonly tenant: string }): Promise<TenantStats> {
    const row = await this.one<{
      counts: Record<string, number>;
      mean_wait: number | null;
      mean_run: number | null;
      mean_completion: number | null;
      mean_attempt_run: number | null;
      oldest_age: number | null;
      storage_bytes: number;
      lease_expirations: number;
    }>(C.STATS, [params.tenant]);
    const counts = Object.fromEntries(JOB_STATUSES.map((s) => [s, Number(row.counts[s] ?? 0)])) as Record<JobStatus, number>;
    return {
      counts,
      meanWaitMs: row.mean_wait,
      meanRunMs: row.mean_run,
      meanAttemptRunMs: row.mean_attempt_run,
      meanTimeToCompletionMs: row.mean_completion,
      leaseExpirations: row.lease_expirations,
      oldestAvailableAgeMs: row.oldest_age === null ? null : Math.max(0, row.oldest_age),
      storageBytes: row.storage_bytes,
    };
  }

  watchAvailable(listener: OnAvailable): () => void {
    this.listeners.add(listener);
    if (this.listener === null && !this.closed) {
      this.listener = new AvailabilityListener({
        clientConfig: clientConfig(this.options),
        channel: this.channel,
        onAvailable: (available) => this.wake(available),
      });
      void this.listener.start();
    }
    return () => {
      this.listeners.delete(listener);
    };
  }

  watchFinished(listener: FinishedListener): () => void {
    const remove = this.finished.add(listener);
    if (this.finishedListener === null && !this.closed) {
      this.finishedListener = new FinishedListenerConnection({
        clientConfig: clientConfig(this.options),
        channel: this.finishedChannel,
        onFinished: (job) => this.finished.emit(job === null ? null : [job]),
      });
      void this.finishedListener.start();
    }
    return remove;
  }

  /** Resolves once the LISTEN that watchAvailable started is in effect (at once if nothing watches). */
  listening(): Promise<void> {
    return this.listener?.ready ?? Promise.resolve();
  }

  // --- helpers --------------------------------------------------------------

  /** Applies due lease expiries and passed deadlines of every tenant, one batch, in one transaction. */
  private async reap(): Promise<ReapCounts> {
    const counts = this.announced(await this.db.transaction((tx) => reapInTx(tx, null, REAP_BATCH)));
    if (reapFinishedSome(counts)) this.announceFinished(null);
    return counts;
  }

  /** NOTIFY channel of finished jobs (finished-channel.ts), one per schema like the availability channel. */
  private get finishedChannel(): string {
    return `lh_finished_${this.options.schema}`.slice(0, 63);
  }

  private finishing<T extends readonly CompleteOutcome[]>(params: readonly CompleteParams[], outcomes: T): T;
  private finishing(params: readonly CompleteParams[], outcome: CompleteOutcome): CompleteOutcome;
  private finishing(params: readonly CompleteParams[], outcome: CompleteOutcome | readonly CompleteOutcome[]): CompleteOutcome | readonly CompleteOutcome[] {
    this.announceFinished(finishedByCompletion(params, Array.isArray(outcome) ? outcome : [outcome as CompleteOutcome]));
    return outcome;
  }

  /** Jobs ended here (after the commit): this process's watchers now, other coordinators' through NOTIFY. */
  private announceFinished(jobs: readonly FinishedJob[] | null): void {
    if (jobs !== null && jobs.length === 0) return;
    this.finished.emit(jobs);
    this.finishedSender.add(jobs);
  }

  private async insert(items: readonly PreparedEnqueue[]): Promise<readonly EnqueueOutcome[]> {
    const inserted = await insertJobs(this.db, items);
    this.announce(inserted.available);
    return inserted.outcomes;
  }

  private async first<R extends object>(query: NamedQuery, values: readonly unknown[]): Promise<R | undefined> {
    return (await this.db.query<R & Record<string, unknown>>(bind(query, values))).rows[0];
  }

  private async one<R extends object>(query: NamedQuery, values: readonly unknown[]): Promise<R> {
    const row = await this.first<R>(query, values);
    if (row === undefined) throw new Error('a statement that always returns a row returned none');
    return row;
  }

  /** New work committed here: wake this process's waiters now, other coordinators' through NOTIFY. */
  private announce(jobs: readonly Availability[]): void {
    for (const available of jobs) {
      this.wake(available);
      this.notifier.poke(available);
    }
  }

  private announced<T>(result: Announced<T>): T {
    this.announce(result.wakes);
    return result.outcome;
  }

  private wake(available: Availability | null): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(available);
      } catch {
        // A listener's failure is its own; the others still need waking.
      }
    }
  }
}

function resultTooLarge(params: CompleteParams): boolean {
  return params.result !== undefined && params.maxResultBytes !== undefined && params.result.body.length > params.maxResultBytes;
}
