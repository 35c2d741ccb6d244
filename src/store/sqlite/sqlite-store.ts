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
 * reaper) — the same files as the PostgreSQL backend's. The reads are its
 * base class's (store-reads.ts).
 */

import type { Database as Db } from 'better-sqlite3';
import { systemClock, type Clock } from '../../core/clock.js';
import { systemRandom, type Random } from '../../core/random.js';
import type * as S from '../store.js';
import { distinctAvailability } from '../store.js';
import { finishedByCompletion, finishedByFailure, finishedByOperator, reapFinishedSome } from '../finished-jobs.js';
import { CommitSignal, sharedFilesOf, Watchers } from './availability.js';
import { flowEffects, type FlowEffects } from './dependencies.js';
import { enqueueInTx, enqueueLeasedInTx, enqueueOnConnection } from './enqueue.js';
import { mayHandOff } from '../enqueue-paths.js';
import { groupCommitWriter, openDatabase } from './database.js';
import type { GroupCommit } from './group-commit.js';
import { markEffectStarted, renewLease, storeCheckpoint } from './guarded-statements.js';
import { completeInTx, completeManyInTx, failInTx } from './lease-endings.js';
import { cancelInTx, reapInTx, reconcileInTx, requeueInTx } from './operator-actions.js';
import { forgetIdleGroups } from './group-lease.js';
import type { IdleGroupCursor } from '../group-lease.js';
import { setKindPausedInTx, upsertKindInTx } from './kinds.js';
import { leaseInTx } from './lease.js';
import { CounterMoves } from './counter-moves.js';
import { LeaseStatements } from './lease-statements.js';
import type * as Sch from '../schedules.js';
import { VACUUM_STEPS_PER_BATCH } from './retention.js';
import type { JobPurgeOutcome, JobPurgeParams } from '../retention.js';
import { StoreReads } from './store-reads.js';

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

export class SqliteStore extends StoreReads implements S.Store {
  readonly backend = 'sqlite' as const;
  /** The lease statements, prepared on first use per kind count and max. */
  private readonly leases: LeaseStatements;
  private readonly writer: GroupCommit;
  private readonly watchers: Watchers;
  /** Tells the other processes on the file of each commit (library mode); null when no one else is expected. */
  private readonly signal: CommitSignal | null;
  private readonly stopHearingCommits: () => void;
  /** What the write transaction moves in the counter rows, applied by the group commit before COMMIT. */
  private readonly moves = new CounterMoves(this.statements);
  /** Where the reaper's next pass over idle group rows starts (group-lease.ts forgetIdleGroups). */
  private idleGroups: IdleGroupCursor = null;

  private constructor(
    db: Db,
    clock: Clock,
    crossProcessPollMs: number,
    watchWalFile: boolean,
    busyTimeoutMs: number,
    private readonly random: Random,
  ) {
    super(db, clock, busyTimeoutMs);
    this.leases = new LeaseStatements(db);
    const shared = watchWalFile && !db.memory ? sharedFilesOf(db.name) : null;
    // Created before anything watches it, so every store of the file can watch it from its first wait.
    this.signal = shared === null || db.readonly ? null : new CommitSignal(shared.signal);
    this.watchers = new Watchers(() => db.pragma('data_version', { simple: true }) as number, crossProcessPollMs, shared);
    this.writer = groupCommitWriter(db, clock, busyTimeoutMs, this.moves, () => this.signal?.send());
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

  // --- schedules --------------------------------------------------------------

  scheduleUpsert(params: Sch.ScheduleUpsertParams): Promise<Sch.ScheduleUpsertOutcome> {
    return this.write(() => this.schedules.upsert(params));
  }

  scheduleDelete(params: { readonly tenant: string; readonly name: string }): Promise<boolean> {
    return this.write(() => this.schedules.delete(params.tenant, params.name));
  }

  scheduleFire(params: Sch.ScheduleFireParams): Promise<Sch.ScheduleFireOutcome> {
    return this.write((now) => this.schedules.fire(this.statements, this.moves, params, now), distinctAvailability(params.jobs));
  }

  // --- enqueue and reads ----------------------------------------------------

  jobEnqueue(params: S.EnqueueParams): Promise<S.EnqueueOutcome> {
    return this.write((now) => enqueueInTx(this.statements, this.moves, params, now), [{ tenant: params.tenant, kind: params.kind }]);
  }

  /** The enqueue and the job's lease in one transaction; a job left queued (a held kind) is announced after the commit. */
  jobEnqueueLeased(params: S.EnqueueParams, lease: S.HandoffLease): Promise<S.EnqueueLeasedOutcome> {
    if (!mayHandOff(params)) return this.jobEnqueue(params).then((outcome) => ({ outcome, leased: null }));
    return this.writeAnnouncing((now, available) => {
      const answer = enqueueLeasedInTx(this.statements, this.moves, params, lease, now);
      if (answer.outcome.kind === 'created' && answer.leased === null) available.push({ tenant: params.tenant, kind: params.kind });
      return answer;
    });
  }

  jobEnqueueMany(params: readonly S.EnqueueParams[]): Promise<readonly S.EnqueueOutcome[]> {
    return this.write((now) => params.map((p) => enqueueInTx(this.statements, this.moves, p, now)), distinctAvailability(params));
  }

  // --- the lease protocol ---------------------------------------------------

  async jobLease(params: S.LeaseParams): Promise<readonly S.LeasedJob[]> {
    let reapEnded = false;
    const leased = await this.writeFlow((now, effects) => {
      // Expired leases of every tenant are settled here (one indexed probe), so an expired job is claimable at once.
      reapEnded = reapFinishedSome(reapInTx(this.statements, this.moves, now, effects));
      return leaseInTx(this.statements, this.leases, this.moves, params, now);
    });
    if (reapEnded) this.watchers.announceFinished(null);
    return leased;
  }

  async jobLeaseWithNextDue(params: S.LeaseParams): Promise<S.LeaseWithNextDue> {
    const jobs = await this.jobLease(params);
    // Two reads in this process, no round trip to save: the next due job is read after the lease's commit.
    return jobs.length >= params.max ? { jobs } : { jobs, nextDue: await this.jobNextDue(params) };
  }

  jobRenew(params: S.RenewParams): Promise<S.RenewOutcome> {
    return this.write((now) => renewLease(this.statements, this.moves, params, now));
  }

  async jobComplete(params: S.CompleteParams): Promise<S.CompleteOutcome> {
    const outcome = await this.writeFlow((now, effects) => completeInTx(this.statements, this.moves, params, now, effects));
    this.watchers.announceFinished(finishedByCompletion([params], [outcome]));
    return outcome;
  }

  async jobCompleteMany(params: readonly S.CompleteParams[]): Promise<readonly S.CompleteOutcome[]> {
    const outcomes = await this.writeFlow((now, effects) => completeManyInTx(this.statements, this.moves, params, now, effects));
    this.watchers.announceFinished(finishedByCompletion(params, outcomes));
    return outcomes;
  }

  async jobCompleteManyThenLease(completions: readonly S.CompleteParams[], lease: S.LeaseParams): Promise<S.CompleteThenLease> {
    let reapEnded = false;
    const answer = await this.writeFlow((now, effects) => {
      const outcomes = completeManyInTx(this.statements, this.moves, completions, now, effects);
      reapEnded = reapFinishedSome(reapInTx(this.statements, this.moves, now, effects));
      return { outcomes, jobs: leaseInTx(this.statements, this.leases, this.moves, lease, now) };
    });
    this.watchers.announceFinished(finishedByCompletion(completions, answer.outcomes));
    if (reapEnded) this.watchers.announceFinished(null);
    return answer;
  }

  async jobFail(params: S.FailParams): Promise<S.FailOutcome> {
    const outcome = await this.writeFlow((now, effects) => failInTx(this.statements, this.moves, params, this.random, now, effects));
    this.watchers.announceFinished(finishedByFailure(params, outcome));
    return outcome;
  }

  jobCheckpoint(params: S.CheckpointParams): Promise<S.TokenOutcome> {
    return this.write((now) => storeCheckpoint(this.statements, this.moves, params, now));
  }

  jobMarkEffectStarted(params: S.TokenParams): Promise<S.TokenOutcome> {
    return this.write((now) => markEffectStarted(this.statements, params, now));
  }

  // --- operator actions -----------------------------------------------------

  jobRequeue(params: S.RequeueParams): Promise<S.RequeueOutcome> {
    return this.writeFlow((now, effects) => requeueInTx(this.statements, this.moves, params, now, effects));
  }

  async jobCancel(params: S.JobRef): Promise<S.CancelOutcome> {
    const outcome = await this.writeFlow((now, effects) => cancelInTx(this.statements, this.moves, params, now, effects));
    this.watchers.announceFinished(finishedByOperator(params, outcome));
    return outcome;
  }

  async jobReconcile(params: S.ReconcileParams): Promise<S.ReconcileOutcome> {
    const outcome = await this.writeFlow((now, effects) => reconcileInTx(this.statements, this.moves, params, now, effects));
    this.watchers.announceFinished(finishedByOperator(params, outcome));
    return outcome;
  }

  async jobReapExpired(): Promise<S.ReapOutcome> {
    const counts = await this.writeFlow((now, effects) => reapInTx(this.statements, this.moves, now, effects));
    if (reapFinishedSome(counts)) this.watchers.announceFinished(null);
    // A bounded pass over idle group rows, in a write of its own, going on from where the last one stopped.
    this.idleGroups = (await this.write((now) => forgetIdleGroups(this.statements, now, this.idleGroups))).next;
    return counts;
  }

  async jobPurge(params: JobPurgeParams): Promise<JobPurgeOutcome> {
    const deleted = await this.write((now) => this.retention.purge(params, now, this.moves));
    for (let step = 0; deleted > 0 && step < VACUUM_STEPS_PER_BATCH; step++) if (!(await this.write(() => this.retention.vacuumStep()))) break;
    return { deleted };
  }

  async reclaimSpace(): Promise<boolean> {
    return false;
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
}
