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
 * (availability.ts). The reads are its base class's (store-reads.ts).
 */

import { forgetIdleGroups } from './group-lease.js';
import type { IdleGroupCursor } from '../group-lease.js';
import type pg from 'pg';
import { isJobId } from '../../core/ids.js';
import { systemRandom, type Random } from '../../core/random.js';
import { decideResultSize } from '../../core/transitions.js';
import type * as S from '../store.js';
import { distinctAvailability } from '../store.js';
import { finishedByCompletion, finishedByFailure, finishedByOperator, reapFinishedSome } from '../finished-jobs.js';
import { Watchers } from './availability.js';
import * as C from './catalog-queries.js';
import { openDatabase, type PgDatabase, type TxClient } from './database.js';
import { enqueueOnClient, hasFlow, insertJobs, insertLeasedJob, prepareEnqueue, type PreparedEnqueue } from './enqueue.js';
import { mayHandOff } from '../enqueue-paths.js';
import { completeDistinct, completeOne, markEffectStarted, renewLease, storeCheckpoint } from './guarded-statements.js';
import { setKindPaused, upsertKind } from './kinds.js';
import { kindsFilter } from '../flow-limits.js';
import { Leases, type LeaseAnswer } from './lease.js';
import { nextDue } from '../next-due.js';
import { completeLockedInTx, failInTx } from './lease-endings.js';
import { dropSchema } from './migrate.js';
import { cancelInTx, reapInTx, reconcileInTx, requeueInTx, type ReapCounts } from './operator-actions.js';
import { flowEffects, type FlowEffects } from './dependencies.js';
import { translatePgError } from './errors.js';
import { deleteSchedule, fireInTx, upsertSchedule } from './schedules.js';
import type * as Sch from '../schedules.js';
import { purgeBatch, vacuumWhenAutovacuumOff } from './retention.js';
import type { JobPurgeOutcome, JobPurgeParams } from '../retention.js';
import { toApiKeyRecord, type ApiKeyRow } from './rows.js';
import { StatementBatcher } from './statement-batcher.js';
import { StoreReads } from './store-reads.js';

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
  /**
   * Open half the pool before connect() returns, each connection with the statements of enqueue, lease and
   * completion prepared and planned, and keep those connections open while idle (warm-up.ts); `serve` does.
   */
  readonly warm?: boolean;
  /** PostgreSQL's own now() is the only clock; a Clock cannot be injected. */
  readonly clock?: never;
  /** Backoff jitter; Math.random when absent. */
  readonly random?: Random;
}

/** Most single enqueues folded into one statement. */
const ENQUEUE_BATCH = 500;

/** How many expired leases one reaper transaction handles. */
const REAP_BATCH = 500;

export class PostgresStore extends StoreReads implements S.Store {
  readonly backend = 'postgres' as const;
  private readonly watchers: Watchers;
  /** Concurrent single enqueues share statements (and WAL flushes). */
  private readonly enqueuer: StatementBatcher<PreparedEnqueue, S.EnqueueOutcome>;
  private closed = false;
  private readonly leases: Leases;
  /** Where the reaper's next pass over idle group rows starts (group-lease.ts forgetIdleGroups). */
  private idleGroups: IdleGroupCursor = null;
  private readonly schema: string;

  private constructor(
    db: PgDatabase,
    connection: { readonly connectionString: string; readonly schema: string },
    poolSize: number,
    cursorSecret: Buffer,
    private readonly random: Random,
  ) {
    super(db, cursorSecret);
    this.schema = connection.schema;
    this.watchers = new Watchers(db, connection);
    this.leases = new Leases(db);
    // Half the pool, so batched enqueues leave connections for leases and completions.
    this.enqueuer = new StatementBatcher((items) => this.insert(items), Math.max(1, Math.floor(poolSize / 2)), ENQUEUE_BATCH);
  }

  static async connect(options: PostgresStoreOptions): Promise<PostgresStore> {
    const opened = await openDatabase(options);
    const { db, connectionString, schema, poolSize, cursorSecret } = opened;
    return new PostgresStore(db, { connectionString, schema }, poolSize, cursorSecret, options.random ?? systemRandom);
  }

  /** Drops a schema and everything in it (test isolation). */
  static async dropSchema(options: { readonly connectionString: string; readonly schema: string }): Promise<void> {
    await dropSchema(options.connectionString, options.schema).catch((error: unknown) => {
      throw translatePgError(error);
    });
  }

  queueWaitMs(): number {
    return Math.max(this.enqueuer.oldestWaitMs(), this.db.oldestWaitMs());
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.watchers.close();
    await this.db.close();
  }

  // --- keys and kinds -------------------------------------------------------

  async apiKeyInsert(params: S.ApiKeyInsertParams): Promise<S.ApiKeyRecord> {
    const values = [params.id, params.tenant, params.user, params.role, params.keyHash];
    return toApiKeyRecord(await this.one<ApiKeyRow>(C.API_KEY_INSERT, values));
  }

  async apiKeyRevoke(params: { readonly id: string }): Promise<boolean> {
    return (await this.first<{ id: string }>(C.API_KEY_REVOKE, [params.id])) !== undefined;
  }

  async kindUpsert(params: S.KindUpsertParams): Promise<S.KindRecord> {
    const record = await upsertKind(this.db, params);
    // A new limit (or none) may admit jobs that were held back: parked polls of the kind lease again.
    this.watchers.announceAvailable([{ tenant: params.tenant, kind: params.kind }]);
    return record;
  }

  async kindSetPaused(params: S.KindPauseParams): Promise<S.KindRecord | null> {
    const record = await setKindPaused(this.db, params);
    if (record !== null && !params.paused) this.watchers.announceAvailable([{ tenant: params.tenant, kind: params.kind }]);
    return record;
  }

  // --- schedules --------------------------------------------------------------

  scheduleUpsert(params: Sch.ScheduleUpsertParams): Promise<Sch.ScheduleUpsertOutcome> {
    return upsertSchedule(this.db, params);
  }

  scheduleDelete(params: { readonly tenant: string; readonly name: string }): Promise<boolean> {
    return deleteSchedule(this.db, params.tenant, params.name);
  }

  async scheduleFire(params: Sch.ScheduleFireParams): Promise<Sch.ScheduleFireOutcome> {
    const fired = await this.db.transaction((tx) => fireInTx(tx, params));
    if (fired.kind === 'stale') return fired;
    this.watchers.announceAvailable(fired.available);
    return { kind: 'fired', outcomes: fired.outcomes };
  }

  // --- enqueue and reads ----------------------------------------------------

  async jobEnqueue(params: S.EnqueueParams): Promise<S.EnqueueOutcome> {
    const item = prepareEnqueue(params);
    // A job with parents or a key needs its own transaction (enqueue.ts); the others share statements.
    if (!hasFlow(item)) return this.enqueuer.submit(item);
    const [outcome] = await this.insert([item]);
    if (outcome === undefined) throw new Error('an enqueue returned no outcome');
    return outcome;
  }

  async jobEnqueueLeased(params: S.EnqueueParams, lease: S.HandoffLease): Promise<S.EnqueueLeasedOutcome> {
    if (!mayHandOff(params)) return { outcome: await this.jobEnqueue(params), leased: null };
    const { outcome, leased, available } = await insertLeasedJob(this.db, prepareEnqueue(params), lease);
    this.watchers.announceAvailable(available);
    return { outcome, leased };
  }

  async jobEnqueueMany(params: readonly S.EnqueueParams[]): Promise<readonly S.EnqueueOutcome[]> {
    return this.insert(params.map(prepareEnqueue));
  }

  // --- the lease protocol ---------------------------------------------------

  async jobLease(params: S.LeaseParams): Promise<readonly S.LeasedJob[]> {
    return (await this.leaseSettlingDue(params)).jobs;
  }

  async jobLeaseWithNextDue(params: S.LeaseParams): Promise<S.LeaseWithNextDue> {
    const { jobs, last } = await this.leaseSettlingDue(params);
    if (jobs.length >= params.max) return { jobs };
    // The common lease statement read what is left; after the restricted path, ask.
    const left = last.left;
    const due = left === undefined ? await this.jobNextDue(params) : nextDue(left.runAfter, false, left.now);
    return { jobs, nextDue: due };
  }

  /**
   * Leases; when the statement says expiries or deadlines are due, settles them and leases again for the room left.
   * A lease that fails announces its kinds to its tenant: concurrent leases skipped the rows it had locked, and the next due time
   * they read counts no due job (lease-queries.ts), so they may have parked beside rows that are queued again.
   */
  private async leaseSettlingDue(params: S.LeaseParams): Promise<{ readonly jobs: readonly S.LeasedJob[]; readonly last: LeaseAnswer }> {
    try {
      const first = await this.leases.lease(params);
      const room = params.max - first.jobs.length;
      if (!first.due) return { jobs: first.jobs, last: first };
      // Expired leases or passed deadlines are due (in any tenant): settle them, so that a job whose lease ran
      // out is claimable at once, and lease again for the room the first statement left.
      await this.reap();
      if (room <= 0) return { jobs: first.jobs, last: first };
      const second = await this.leases.lease({ ...params, max: room });
      return { jobs: [...first.jobs, ...second.jobs], last: second };
    } catch (error) {
      // The rows it may have locked are of its tenant and kinds: wake those, not every waiter, so that failures
      // under load (a pool that cannot hand out a connection) do not set off a lease by every parked poll.
      const kinds = kindsFilter(params.kinds);
      if (kinds === null) this.watchers.announceEveryone();
      else this.watchers.announceAvailable(kinds.map((kind) => ({ tenant: params.tenant, kind })));
      throw error;
    }
  }

  async jobPurge(params: JobPurgeParams): Promise<JobPurgeOutcome> {
    return { deleted: await purgeBatch(this.db, params) };
  }

  async reclaimSpace(): Promise<boolean> {
    return vacuumWhenAutovacuumOff(this.db);
  }

  async jobRenew(params: S.RenewParams): Promise<S.RenewOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    return renewLease(this.db, params);
  }

  async jobComplete(params: S.CompleteParams): Promise<S.CompleteOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    if (resultTooLarge(params)) {
      // Rare: the locked path decides first, then ends the job dead.
      const [outcome] = await this.jobCompleteMany([params]);
      if (outcome === undefined) throw new Error('complete returned no outcome');
      return outcome;
    }
    const outcome = await completeOne(this.db, params);
    if (outcome.kind !== 'locked') return this.finishing([params], outcome);
    // A job with children or a key: its end moves other jobs in the same transaction.
    return this.finishing([params], (await this.completeLocked([params]))[0] ?? { kind: 'rejected', code: 'not_found' });
  }

  async jobCompleteMany(params: readonly S.CompleteParams[]): Promise<readonly S.CompleteOutcome[]> {
    if (params.length === 0) return [];
    // The common batch (each job once, every result within its limit) is one statement.
    const distinct = new Set(params.map((p) => p.id)).size === params.length;
    if (distinct && !params.some(resultTooLarge)) {
      const fast = await completeDistinct(this.db, params);
      const locked = params.filter((_, i) => fast[i]?.kind === 'locked');
      if (locked.length === 0) return this.finishing(params, fast as readonly S.CompleteOutcome[]);
      // Jobs with children or a key end on the locked path, whose transaction moves those.
      const lockedOutcomes = await this.completeLocked(locked);
      let next = 0;
      const merged = fast.map(
        (outcome): S.CompleteOutcome => (outcome.kind === 'locked' ? (lockedOutcomes[next++] ?? { kind: 'rejected', code: 'not_found' }) : outcome),
      );
      return this.finishing(params, merged);
    }
    // Otherwise decide item by item, in order, on locked rows.
    return this.finishing(params, await this.completeLocked(params));
  }

  async jobCompleteManyThenLease(completions: readonly S.CompleteParams[], lease: S.LeaseParams): Promise<S.CompleteThenLease> {
    const outcomes = await this.jobCompleteMany(completions);
    return { outcomes, jobs: await this.jobLease(lease) };
  }

  private async completeLocked(params: readonly S.CompleteParams[]): Promise<readonly S.CompleteOutcome[]> {
    return this.flowing((tx, effects) => completeLockedInTx(tx, params, effects));
  }

  async jobFail(params: S.FailParams): Promise<S.FailOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    const { outcome, kind } = await this.flowing((tx, effects) => failInTx(tx, params, this.random, effects));
    if (outcome.kind === 'failed' && outcome.status === 'queued' && !outcome.replayed) this.watchers.announceAvailable([{ tenant: params.tenant, kind }]);
    this.watchers.announceFinished(finishedByFailure(params, outcome));
    return outcome;
  }

  async jobCheckpoint(params: S.CheckpointParams): Promise<S.TokenOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    return storeCheckpoint(this.db, params);
  }

  async jobMarkEffectStarted(params: S.TokenParams): Promise<S.TokenOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    return markEffectStarted(this.db, params);
  }

  // --- operator actions -----------------------------------------------------

  async jobRequeue(params: S.RequeueParams): Promise<S.RequeueOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    return this.flowing((tx, effects) => requeueInTx(tx, params, effects));
  }

  async jobCancel(params: S.JobRef): Promise<S.CancelOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    const outcome = await this.flowing((tx, effects) => cancelInTx(tx, params, effects));
    this.watchers.announceFinished(finishedByOperator(params, outcome));
    return outcome;
  }

  async jobReconcile(params: S.ReconcileParams): Promise<S.ReconcileOutcome> {
    if (!isJobId(params.id)) return { kind: 'rejected', code: 'not_found' };
    const outcome = await this.flowing((tx, effects) => reconcileInTx(tx, params, effects));
    this.watchers.announceFinished(finishedByOperator(params, outcome));
    return outcome;
  }

  async jobReapExpired(): Promise<S.ReapOutcome> {
    const total = { requeued: 0, dead: 0, unknown: 0, cancelled: 0, deadlineExpired: 0 };
    // Bounded, so one call cannot run forever while leases keep expiring.
    for (let round = 0; round < 20; round++) {
      const counts = await this.reap();
      for (const key of Object.keys(total) as (keyof typeof total)[]) total[key] += counts[key];
      if (counts.leases < REAP_BATCH && counts.deadlineExpired < REAP_BATCH) break;
    }
    // A bounded pass over idle group rows, going on from where the last one stopped.
    this.idleGroups = (await forgetIdleGroups(this.db, this.idleGroups)).next;
    return total;
  }

  watchAvailable(listener: S.AvailabilityListener): () => void {
    return this.watchers.watchAvailable(listener);
  }

  watchFinished(listener: S.FinishedListener): () => void {
    return this.watchers.watchFinished(listener);
  }

  /** Resolves once the LISTEN that watchAvailable started is in effect (at once if nothing watches). */
  listening(): Promise<void> {
    return this.watchers.listening();
  }

  // --- helpers --------------------------------------------------------------

  /** Applies due lease expiries and passed deadlines of every tenant, one batch, in one transaction. */
  private async reap(): Promise<ReapCounts> {
    const counts = await this.flowing((tx, effects) => reapInTx(tx, null, REAP_BATCH, effects));
    if (reapFinishedSome(counts)) this.watchers.announceFinished(null);
    return counts;
  }

  private finishing<T extends readonly S.CompleteOutcome[]>(params: readonly S.CompleteParams[], outcomes: T): T;
  private finishing(params: readonly S.CompleteParams[], outcome: S.CompleteOutcome): S.CompleteOutcome;
  private finishing(
    params: readonly S.CompleteParams[],
    outcome: S.CompleteOutcome | readonly S.CompleteOutcome[],
  ): S.CompleteOutcome | readonly S.CompleteOutcome[] {
    this.watchers.announceFinished(finishedByCompletion(params, Array.isArray(outcome) ? outcome : [outcome as S.CompleteOutcome]));
    return outcome;
  }

  /** Enqueue inside the application's own transaction on its own connection (a library Queue's enqueueInTransaction). */
  enqueueOnClient(client: pg.ClientBase, params: S.EnqueueParams): Promise<S.EnqueueOutcome> {
    return enqueueOnClient(client, this.schema, (available) => this.watchers.availableNotification(available), params);
  }

  private async insert(items: readonly PreparedEnqueue[]): Promise<readonly S.EnqueueOutcome[]> {
    // A job with parents or a key locks them and inserts row by row: one transaction for the whole batch.
    const inserted = items.some(hasFlow) ? await this.db.transaction((tx) => insertJobs(tx, items)) : await insertJobs(this.db, items);
    this.watchers.announceAvailable(inserted.available);
    return inserted.outcomes;
  }

  /**
   * A transaction whose write may move other jobs (dependencies.ts): once it commits, the jobs it made available
   * are announced, and when it ended waiting jobs (dependency_failed) every waiter for a finished job looks again.
   */
  private async flowing<T>(work: (tx: TxClient, effects: FlowEffects) => Promise<T>): Promise<T> {
    let effects = flowEffects();
    const result = await this.db.transaction((tx) => {
      effects = flowEffects();
      return work(tx, effects);
    });
    this.watchers.announceAvailable(distinctAvailability(effects.available));
    if (effects.cascaded) this.watchers.announceFinished(null);
    return result;
  }
}

function resultTooLarge(params: S.CompleteParams): boolean {
  return decideResultSize(params.result?.body.length ?? null, params.maxResultBytes).kind === 'too_large';
}
