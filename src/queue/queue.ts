/**
 * leasehold as a library: a Queue is the application's handle on the job
 * store, for one tenant (and, with `owner`, one producer's own jobs). Each
 * call is the engine's operation (src/engine/), the one the HTTP route
 * calls: the same validation (the route's own schemas, call-checks.ts), kind
 * rules, idempotency, size limits, backpressure, scoping and error codes,
 * without HTTP — no Fastify, no keys. The Queue acts as its tenant's admin,
 * or as a producer when opened with an owner.
 *
 * Workers in the same process (`new Worker({ queue })`) lease, renew,
 * checkpoint and complete through `queue.workerTransport`, on the store
 * without the routes (direct-worker.ts), with the same functions the routes
 * call. An application that also serves the HTTP API registers
 * `leaseholdRoutes` (http-front.ts) over the same Queue.
 */

import { createHash } from 'node:crypto';
import { LeaseholdIntegrityError } from '../client/errors.js';
import type { JobResultBody } from '../client/types.js';
import { systemClock, type Clock } from '../core/clock.js';
import { essenceOf, isMediaType } from '../core/media-type.js';
import type { Role } from '../core/states.js';
import { createApiKey } from '../engine/api-keys.js';
import { resolveConfig, type CoordinatorConfig, type CoordinatorConfigInput } from '../engine/config.js';
import type { EngineContext } from '../engine/context.js';
import { enqueueAnswer, enqueueOne, prepareInTransaction, settleEnqueue } from '../engine/enqueue.js';
import { enqueueMany } from '../engine/enqueue-batch.js';
import { LeaseholdError } from '../core/errors.js';
import { asLeaseholdError } from '../engine/error-translation.js';
import { cancelJob, reconcileJob, requeueJob } from '../engine/job-actions.js';
import { getJob, jobAttempts, jobResult, listJobs, waitForJob } from '../engine/jobs.js';
import { putKind, setKindPaused } from '../engine/kinds.js';
import { SILENT_LOGGER } from '../engine/logger.js';
import { tenantStats } from '../engine/operator.js';
import type { Principal } from '../engine/principal.js';
import { deleteSchedule, listSchedules, putSchedule } from '../engine/schedules.js';
import { createServices, type QueueServices } from '../engine/services.js';
import {
  EnqueueBatchRequest,
  EnqueueRequest,
  JobListQuery,
  KindDefinition,
  KindParams,
  LIMITS,
  ReconcileRequest,
  RequeueRequest,
  ScheduleDefinition,
  ScheduleListQuery,
  ScheduleParams,
  WAIT_END_STATUSES,
  type Attempt,
  type EnqueueBatchResult,
  type EnqueueResponse,
  type Job,
  type JobList,
  type Kind,
  type ReconcileOutcomeName,
  type Schedule,
  type ScheduleList,
  type Stats,
} from '../protocol/schemas.js';
import type { EnqueueOutcome, EnqueueParams, Store } from '../store/store.js';
import type { Database as SqliteHandle } from 'better-sqlite3';
import type pg from 'pg';
import { partCheck } from './call-checks.js';
import { DirectWorkerTransport } from './direct-worker.js';
import { wireFields, type KindPayloads, type QueueJob } from './queue-job.js';

export type { KindPayloads, QueueJob } from './queue-job.js';

/** How the opened backend enqueues inside an application's own transaction (open-queue.ts builds it). */
export interface TransactionalEnqueue {
  readonly sqlite?: (db: SqliteHandle, params: EnqueueParams) => EnqueueOutcome;
  readonly pg?: (client: pg.ClientBase, params: EnqueueParams) => Promise<EnqueueOutcome>;
}

function isSqliteHandle(tx: SqliteHandle | pg.ClientBase): tx is SqliteHandle {
  return typeof (tx as SqliteHandle).prepare === 'function' && typeof (tx as SqliteHandle).inTransaction === 'boolean';
}

const checkEnqueue = partCheck<EnqueueRequest>(EnqueueRequest);
const checkBatch = partCheck<EnqueueBatchRequest>(EnqueueBatchRequest);
const checkListQuery = partCheck<JobListQuery>(JobListQuery, 'querystring');
const checkRequeue = partCheck<RequeueRequest>(RequeueRequest);
const checkReconcile = partCheck<ReconcileRequest>(ReconcileRequest);
const checkKindName = partCheck<KindParams>(KindParams, 'params');
const checkKindDefinition = partCheck<KindDefinition>(KindDefinition);
const checkScheduleName = partCheck<ScheduleParams>(ScheduleParams, 'params');
const checkScheduleDefinition = partCheck<ScheduleDefinition>(ScheduleDefinition);
const checkScheduleQuery = partCheck<ScheduleListQuery>(ScheduleListQuery, 'querystring');

export interface QueueSettings {
  /** The tenant whose jobs this Queue enqueues and sees. Default 'default'. */
  readonly tenant?: string;
  /** When set, jobs are enqueued as this user's and only its own jobs are visible, as for a producer key. */
  readonly owner?: string;
  /** The same settings as `leasehold serve`'s config file (kinds rules, backpressure, limits). */
  readonly config?: CoordinatorConfigInput;
  /** The clock recurring schedules are computed against; the store's own when absent (tests pass a fake one). */
  readonly scheduleClock?: Clock;
}

/** An engine call, its failure as the LeaseholdError the HTTP API's answer would carry (a store fault: store_unavailable). */
async function engineCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw asLeaseholdError(error);
  }
}

/** A stored result as the HTTP API serves it: a value that is not a media type is bytes; JSON is parsed. */
function resultBody(id: string, result: { readonly contentType: string; readonly body: Buffer; readonly checksum: string }): JobResultBody {
  const checksum = createHash('sha256').update(result.body).digest('hex');
  if (checksum !== result.checksum) throw new LeaseholdIntegrityError('checksum_mismatch', `result of job ${id} does not match its checksum`);
  const contentType = isMediaType(result.contentType) ? result.contentType : 'application/octet-stream';
  const essence = isMediaType(contentType) ? essenceOf(contentType) : '';
  const isJson = essence === 'application/json' || essence.endsWith('+json');
  return {
    contentType,
    body: result.body,
    checksum,
    value: isJson && result.body.length > 0 ? (JSON.parse(result.body.toString('utf8')) as unknown) : undefined,
  };
}

export class Queue<Kinds extends KindPayloads = KindPayloads> {
  /** Types only (never set): the payload type of each kind, for `new Worker({ queue, handlers })`. */
  declare readonly kinds?: Kinds;
  /**
   * What `new Worker({ queue })` leases, renews, checkpoints and completes through: on the store, without
   * HTTP, with the engine's lease-protocol functions the routes call too (direct-worker.ts).
   */
  readonly workerTransport: DirectWorkerTransport;
  private closing: Promise<void> | undefined;
  private readonly ctx: EngineContext;

  private constructor(
    readonly store: Store,
    readonly tenant: string,
    readonly owner: string | undefined,
    /** Shared with every HTTP front registered over this Queue (http-front.ts). */
    readonly services: QueueServices,
    readonly config: CoordinatorConfig,
    /** Who this Queue acts as for its jobs: a producer with `owner`, else its tenant's admin. */
    private readonly principal: Principal,
    /** Who this Queue acts as for the admin's calls (requeue, reconcile, stats, kinds, schedules). */
    private readonly admin: Principal,
    private readonly closeStore: (() => Promise<void>) | undefined,
    private readonly transactional: TransactionalEnqueue,
  ) {
    this.ctx = services.ctx;
    this.workerTransport = new DirectWorkerTransport(services.ctx, tenant);
  }

  /** A Queue over an open store; `closeStore` runs at close() when the Queue owns the store. */
  static async over<Kinds extends KindPayloads>(
    store: Store,
    settings: QueueSettings = {},
    closeStore?: () => Promise<void>,
    transactional: TransactionalEnqueue = {},
  ): Promise<Queue<Kinds>> {
    const tenant = settings.tenant ?? 'default';
    const config = resolveConfig(settings.config ?? {});
    const user = settings.owner ?? 'library';
    const admin: Principal = Object.freeze({ keyId: 'library-admin', tenant, user, role: 'admin' });
    const principal: Principal = settings.owner === undefined ? admin : Object.freeze({ keyId: 'library-producer', tenant, user, role: 'producer' });
    // A library has no logger of its own yet: the reaper's and the scheduler's lines go nowhere.
    const services = createServices(store, config, SILENT_LOGGER, settings.scheduleClock === undefined ? {} : { scheduleClock: settings.scheduleClock });
    try {
      // An enqueue inside the application's transaction cannot wait: it uses the kinds as last loaded.
      await services.ctx.kinds.forTenant(tenant);
    } catch (error) {
      await services.close();
      throw error;
    }
    return new Queue<Kinds>(store, tenant, settings.owner, services, config, principal, admin, closeStore, transactional);
  }

  /**
   * POST /jobs, without the route: the job as stored (the existing one for a replayed key, and for a dedupe key
   * that folded the job into an existing one, with `deduplicated: true`). A unique key whose job keeps it throws
   * LeaseholdError duplicate_job with `details.jobId`.
   */
  enqueue(job: QueueJob<Kinds>): Promise<EnqueueResponse> {
    return this.accepting(async () => {
      const { idempotencyKey, request } = this.requestOf(job);
      return enqueueAnswer(await enqueueOne(this.ctx, this.principal, request, idempotencyKey));
    });
  }

  /** An enqueue call, counted in the acceptance SLI by the status its HTTP request would have answered. */
  private async accepting<T>(call: () => Promise<T>): Promise<T> {
    try {
      const answer = await engineCall(call);
      this.ctx.metrics.acceptance(this.tenant, 202);
      return answer;
    } catch (error) {
      this.countRefusal(error);
      throw error;
    }
  }

  /** The body of POST /jobs for `job`, checked against its schema as the route checks it. */
  private requestOf(job: QueueJob<Kinds>): { readonly idempotencyKey: string; readonly request: EnqueueRequest } {
    const { idempotencyKey, ...request } = wireFields(job);
    return { idempotencyKey, request: checkEnqueue(request) };
  }

  /**
   * Enqueues inside the application's own transaction, so the job exists if and only if that transaction
   * commits (a rollback leaves no job and no reserved idempotency key). With better-sqlite3, `tx` is the
   * application's Database on the same file, called inside its `db.transaction(() => …)`, and the call is
   * synchronous. With pg, `tx` is the client of the application's `BEGIN … COMMIT` on the same database,
   * and the call returns a promise. The same rules as enqueue(); the kind rules and the backpressure
   * snapshot are those last loaded (at most `kindCacheMs` and `statsCacheMs` old), since it cannot wait.
   * Its job counts as accepted (metrics, backpressure) when the store answers, as enqueue()'s does.
   */
  enqueueInTransaction(tx: SqliteHandle, job: QueueJob<Kinds>): EnqueueResponse;
  enqueueInTransaction(tx: pg.ClientBase, job: QueueJob<Kinds>): Promise<EnqueueResponse>;
  enqueueInTransaction(tx: SqliteHandle | pg.ClientBase, job: QueueJob<Kinds>): EnqueueResponse | Promise<EnqueueResponse> {
    const { sqlite, pg: onClient } = this.transactional;
    if (isSqliteHandle(tx) && sqlite === undefined) throw new TypeError('this Queue is not on SQLite: pass the pg client of your transaction');
    if (!isSqliteHandle(tx) && onClient === undefined)
      throw new TypeError('this Queue is not on PostgreSQL: pass the better-sqlite3 Database of your transaction');
    try {
      const { idempotencyKey, request } = this.requestOf(job);
      const params = prepareInTransaction(this.ctx, this.principal, request, idempotencyKey);
      if (isSqliteHandle(tx)) return this.settled(params, (sqlite as NonNullable<typeof sqlite>)(tx, params));
      return (onClient as NonNullable<typeof onClient>)(tx, params)
        .then((outcome) => this.settled(params, outcome))
        .catch((error: unknown) => {
          this.countRefusal(error);
          throw error;
        });
    } catch (error) {
      this.countRefusal(error);
      throw error;
    }
  }

  /** The store's answer to an enqueue in the application's transaction: recorded (engine), counted, answered; a refusal thrown. */
  private settled(params: EnqueueParams, outcome: EnqueueOutcome): EnqueueResponse {
    const answer = enqueueAnswer(settleEnqueue(this.ctx, this.tenant, params, outcome));
    this.ctx.metrics.acceptance(this.tenant, 202);
    return answer;
  }

  /** A refused enqueue in the acceptance SLI: by its code's status (a client's 4xx is not counted), else as a 500. */
  private countRefusal(error: unknown): void {
    this.ctx.metrics.acceptance(this.tenant, error instanceof LeaseholdError ? error.status : 500);
  }

  /** POST /jobs/batch: up to 1,000 jobs in one transaction; one result per job, in order. */
  enqueueMany(jobs: readonly QueueJob<Kinds>[]): Promise<readonly EnqueueBatchResult[]> {
    return this.accepting(async () => {
      const body = checkBatch({ jobs: jobs.map(wireFields) });
      return enqueueMany(this.ctx, this.principal, body.jobs);
    });
  }

  get(id: string): Promise<Job> {
    return engineCall(() => getJob(this.ctx, this.principal, id));
  }

  list(filter: JobListQuery = {}): Promise<JobList> {
    return engineCall(() => listJobs(this.ctx, this.principal, checkListQuery(filter)));
  }

  /** The result's bytes and content type, after checking its SHA-256 checksum. */
  result(id: string): Promise<JobResultBody> {
    return engineCall(async () => {
      const result = await jobResult(this.ctx, this.principal, id);
      if (result === null) throw new LeaseholdIntegrityError('checksum_missing', `job ${id} succeeded without a result`);
      return resultBody(id, result);
    });
  }

  attempts(id: string): Promise<Attempt[]> {
    return engineCall(() => jobAttempts(this.ctx, this.principal, id));
  }

  cancel(id: string): Promise<Job> {
    return engineCall(() => cancelJob(this.ctx, SILENT_LOGGER, this.principal, id));
  }

  requeue(id: string, options: { readonly maxAttempts?: number } = {}): Promise<Job> {
    return engineCall(() => requeueJob(this.ctx, SILENT_LOGGER, this.admin, id, checkRequeue(options)));
  }

  reconcile(id: string, outcome: ReconcileOutcomeName): Promise<Job> {
    return engineCall(() => reconcileJob(this.ctx, SILENT_LOGGER, this.admin, id, checkReconcile({ outcome }).outcome));
  }

  stats(): Promise<Stats> {
    return engineCall(() => tenantStats(this.ctx, this.admin));
  }

  /** PUT /kinds/{kind}; the kinds are loaded again before it answers, so enqueueInTransaction sees the new rules. */
  putKind(name: keyof Kinds & string, spec: KindDefinition): Promise<Kind> {
    return engineCall(async () => {
      const kind = await putKind(this.ctx, this.admin, checkKindName({ kind: name }).kind, checkKindDefinition(spec));
      await this.ctx.kinds.forTenant(this.tenant);
      return kind;
    });
  }

  /**
   * PUT /schedules/{name}: each occurrence of `spec.cron` in `spec.timezone` enqueues one job of
   * `spec.kind`, exactly once however many Queues and coordinators serve the database.
   */
  putSchedule(name: string, spec: ScheduleDefinition): Promise<Schedule> {
    return engineCall(() => putSchedule(this.ctx, this.admin, checkScheduleName({ name }).name, checkScheduleDefinition(spec)));
  }

  /** GET /schedules: one page, by name, with each schedule's next and last occurrence. */
  listSchedules(query: ScheduleListQuery = {}): Promise<ScheduleList> {
    return engineCall(() => listSchedules(this.ctx, this.admin, checkScheduleQuery(query)));
  }

  /** DELETE /schedules/{name}: the schedule as it was; the jobs it enqueued stay. */
  deleteSchedule(name: string): Promise<Schedule> {
    return engineCall(() => deleteSchedule(this.ctx, this.admin, checkScheduleName({ name }).name));
  }

  /**
   * POST /kinds/{kind}/pause: no lease (a Worker's, or one over HTTP on the same database) takes the kind's
   * jobs until resumeKind; enqueues still succeed and running jobs finish. An unknown kind throws not_found.
   */
  pauseKind(name: keyof Kinds & string): Promise<Kind> {
    return engineCall(() => setKindPaused(this.ctx, this.admin, checkKindName({ kind: name }).kind, true));
  }

  /** POST /kinds/{kind}/resume: leases take the kind's jobs again, and parked polls are woken at once. */
  resumeKind(name: keyof Kinds & string): Promise<Kind> {
    return engineCall(() => setKindPaused(this.ctx, this.admin, checkKindName({ kind: name }).kind, false));
  }

  /**
   * A key of this Queue's tenant for the HTTP API (leaseholdRoutes, or `leasehold serve` on the same
   * database), e.g. for workers in another language; returned in clear once, stored hashed.
   */
  createApiKey(role: Role, user: string = this.owner ?? 'library'): Promise<{ id: string; key: string }> {
    return createApiKey(this.store, { tenant: this.tenant, user, role });
  }

  /**
   * Resolves when the job is succeeded, dead, cancelled or unknown, woken by
   * the store's own signal (never a timer on the jobs table), or when
   * `timeoutMs` passes (default 60 s) with the job as it is then: check `status`.
   */
  waitFor(id: string, options: { readonly timeoutMs?: number } = {}): Promise<Job> {
    return engineCall(async () => {
      const deadline = systemClock.now() + Math.max(0, options.timeoutMs ?? LIMITS.maxWaitMs);
      const never = new AbortController().signal;
      for (;;) {
        const waitMs = Math.floor(Math.max(0, Math.min(LIMITS.maxWaitMs, deadline - systemClock.now())));
        const job = await waitForJob(this.ctx, this.principal, id, waitMs, never);
        if (WAIT_END_STATUSES.includes(job.status) || systemClock.now() >= deadline) return job;
      }
    });
  }

  /** Parked waits and long polls answer; then the store closes if this Queue opened it. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.services.stopWaiting();
      await this.services.close();
      await this.closeStore?.();
    })();
    return this.closing;
  }
}
