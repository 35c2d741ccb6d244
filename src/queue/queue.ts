/**
 * leasehold as a library: a Queue is the application's handle on the job
 * store, for one tenant (and, with `owner`, one producer's own jobs). Its
 * enqueues call the functions of POST /jobs without the route; its other
 * calls go through the coordinator's own routes, run in process (Fastify's
 * inject, no socket): the same validation, kind rules,
 * idempotency, size limits, backpressure, scoping and error codes as over
 * HTTP, from the same code. The Queue's keys exist only in this process's
 * memory, and its coordinator never listens.
 *
 * Workers in the same process (`new Worker({ queue })`) lease, renew,
 * checkpoint and complete through `queue.workerTransport`, on the store
 * without the routes (direct-worker.ts), with the same functions the routes
 * call. An application that also serves the HTTP API registers
 * `leaseholdRoutes` (http-front.ts) over the same Queue.
 */

import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { LeaseholdApiError } from '../client/errors.js';
import { LeaseholdClient } from '../client/leasehold-client.js';
import type { Exchange, RawResponse } from '../client/transport.js';
import type { JobResultBody } from '../client/types.js';
import { ERROR_CODES, LeaseholdError, type ErrorCode } from '../core/errors.js';
import { buildCoordinator } from '../coordinator/app.js';
import { Principal } from '../engine/principal.js';
import { resolveConfig, type CoordinatorConfig, type CoordinatorConfigInput } from '../engine/config.js';
import { createApiKey } from '../engine/api-keys.js';
import type { Role } from '../core/states.js';
import type { Clock } from '../core/clock.js';
import { createServices, type QueueServices } from '../engine/services.js';
import type { Attempt, EnqueueBatchItem, EnqueueBatchResult, EnqueueResponse, Job, JobList, JobListQuery, Kind, KindDefinition, ReconcileOutcomeName, Schedule, ScheduleDefinition, ScheduleList, ScheduleListQuery, Stats } from '../protocol/schemas.js';
import type { EnqueueOutcome, EnqueueParams, Store } from '../store/store.js';
import type { Database as SqliteHandle } from 'better-sqlite3';
import type pg from 'pg';
import { EnqueueRequest } from '../protocol/schemas.js';
import { enqueueOne, isRefused, prepareEnqueueWith, refusalOf, requireIdempotencyKey, type AcceptedOutcome } from '../engine/enqueue.js';
import { describeValidationError } from '../coordinator/error-handler.js';
import { validatorCompiler } from '../engine/validation.js';
import { toWireJob } from '../engine/wire.js';
import { DirectWorkerTransport } from './direct-worker.js';

/** Payload types by kind name; `Record<string, unknown>` accepts any kind and payload. */
export type KindPayloads = Record<string, unknown>;

/** The fields of a QueueJob that differ from the wire's item of POST /jobs/batch, or that want a word here. */
interface QueueJobFields<Kinds extends KindPayloads, N extends keyof Kinds & string> {
  readonly kind: N;
  readonly payload: Kinds[N];
  /** Required: the same key with the same job returns the existing job; with another job, idempotency_conflict. */
  readonly idempotencyKey: EnqueueBatchItem['idempotencyKey'];
  /** Not before this time (RFC 3339 text or a Date). */
  readonly runAfter?: EnqueueBatchItem['runAfter'] | Date;
  /** Parent job ids: the job waits until all have succeeded, and is dead with dependency_failed when one ends dead or cancelled. */
  readonly dependsOn?: Readonly<NonNullable<EnqueueBatchItem['dependsOn']>>;
}

/**
 * One job to enqueue: an item of POST /jobs/batch (the fields of POST /jobs with the idempotency key beside
 * them), taken from the protocol's type, with the payload typed by its kind. A field added to the wire is a
 * field here.
 */
export type QueueJob<Kinds extends KindPayloads, Name extends keyof Kinds & string = keyof Kinds & string> = {
  [N in Name]: QueueJobFields<Kinds, N> & Readonly<Omit<EnqueueBatchItem, keyof QueueJobFields<Kinds, N>>>;
}[Name];

/** How the opened backend enqueues inside an application's own transaction (open-queue.ts builds it). */
export interface TransactionalEnqueue {
  readonly sqlite?: (db: SqliteHandle, params: EnqueueParams) => EnqueueOutcome;
  readonly pg?: (client: pg.ClientBase, params: EnqueueParams) => Promise<EnqueueOutcome>;
}

/** A job as the wire carries it: `runAfter` as RFC 3339 text, `dependsOn` as a plain array. */
function wireFields<Kinds extends KindPayloads>(
  job: QueueJob<Kinds>,
): Omit<QueueJob<Kinds>, 'runAfter' | 'dependsOn'> & { readonly runAfter?: string; readonly dependsOn?: string[] } {
  const { runAfter, dependsOn, ...fields } = job;
  return {
    ...fields,
    ...(runAfter === undefined ? {} : { runAfter: runAfter instanceof Date ? runAfter.toISOString() : runAfter }),
    ...(dependsOn === undefined ? {} : { dependsOn: [...dependsOn] }),
  };
}

/** A job the enqueue answers with, flagged when a dedupe key folded the request into it. */
function answerOf(outcome: AcceptedOutcome): EnqueueResponse {
  return outcome.kind === 'deduplicated' ? { ...toWireJob(outcome.job), deduplicated: true } : toWireJob(outcome.job);
}

function isSqliteHandle(tx: SqliteHandle | pg.ClientBase): tx is SqliteHandle {
  return typeof (tx as SqliteHandle).prepare === 'function' && typeof (tx as SqliteHandle).inTransaction === 'boolean';
}

/** The enqueue body's schema, compiled as the coordinator compiles it for POST /jobs. */
const validateEnqueueRequest = validatorCompiler()({ schema: EnqueueRequest, httpPart: 'body' }) as ((value: unknown) => boolean) & {
  errors?: Parameters<typeof describeValidationError>[0][] | null;
};

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

/** A failed call: the code and status of the HTTP API's error with the same cause. */
function toLeaseholdError(error: unknown): unknown {
  if (!(error instanceof LeaseholdApiError)) return error;
  const code: ErrorCode = Object.hasOwn(ERROR_CODES, error.code) ? (error.code as ErrorCode) : 'internal_error';
  return new LeaseholdError(code, error.message, {
    ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
    ...(error.details === undefined ? {} : { details: error.details }),
    cause: error,
  });
}

async function rethrowing<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (error) {
    throw toLeaseholdError(error);
  }
}

/** One exchange through the app's router, in process; an abort answers at once (the call's answer is dropped). */
function injector(app: FastifyInstance, counted: () => void): (request: Exchange) => Promise<RawResponse> {
  return async (request) => {
    counted();
    const { signal } = request;
    if (signal?.aborted === true) throw signal.reason;
    const answer = app
      .inject({ method: request.method, url: request.path, headers: request.headers, ...(request.body === undefined ? {} : { payload: request.body }) })
      .then((response): RawResponse => {
        const headers: Record<string, string> = {};
        for (const [name, value] of Object.entries(response.headers)) {
          if (value !== undefined) headers[name.toLowerCase()] = Array.isArray(value) ? String(value[0]) : String(value);
        }
        return { status: response.statusCode, headers, body: response.rawPayload };
      });
    if (signal === undefined) return answer;
    return new Promise<RawResponse>((resolve, reject) => {
      const onAbort = (): void => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      answer.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
    });
  };
}

export class Queue<Kinds extends KindPayloads = KindPayloads> {
  /** Types only (never set): the payload type of each kind, for `new Worker({ queue, handlers })`. */
  declare readonly kinds?: Kinds;
  /**
   * What `new Worker({ queue })` leases, renews, checkpoints and completes through: on the store, without
   * HTTP, with the coordinator's own functions for each call (direct-worker.ts).
   */
  readonly workerTransport: DirectWorkerTransport;
  /** The HTTP API's calls as the tenant's admin, through the in-process routes (Fastify's inject). */
  readonly workerClient: LeaseholdClient;
  private closing: Promise<void> | undefined;

  private constructor(
    readonly store: Store,
    readonly tenant: string,
    readonly owner: string | undefined,
    /** The coordinator every call goes through; never listening. */
    private readonly app: FastifyInstance,
    /** Shared with every HTTP front registered over this Queue (http-front.ts). */
    readonly services: QueueServices,
    readonly config: CoordinatorConfig,
    private readonly producer: LeaseholdClient,
    private readonly admin: LeaseholdClient,
    private readonly closeStore: (() => Promise<void>) | undefined,
    private readonly transactional: TransactionalEnqueue,
    /** Who this Queue enqueues as, for the enqueues that do not go through its coordinator. */
    private readonly principal: Principal,
    private readonly injects: { count: number },
  ) {
    this.workerClient = admin;
    this.workerTransport = new DirectWorkerTransport(services.ctx, tenant);
  }

  /** Calls served through the in-process routes so far (diagnostics: a Worker's calls are not among them). */
  get inProcessRequests(): number {
    return this.injects.count;
  }

  /** A Queue over an open store; `closeStore` runs at close() when the Queue owns the store. */
  static async over<Kinds extends KindPayloads>(
    store: Store,
    settings: QueueSettings = {},
    closeStore?: () => Promise<void>,
    transactional: TransactionalEnqueue = {},
  ): Promise<Queue<Kinds>> {
    const tenant = settings.tenant ?? 'default';
    const input = settings.config ?? {};
    const config = resolveConfig(input);
    const key = (): string => `lhq_${randomBytes(24).toString('base64url')}`;
    const adminKey = key();
    const producerKey = key();
    const user = settings.owner ?? 'library';
    const keys = new Map<string, Principal>([
      [adminKey, Object.freeze({ keyId: 'in-process-admin', tenant, user, role: 'admin' })],
      [producerKey, Object.freeze({ keyId: 'in-process-producer', tenant, user, role: 'producer' })],
    ]);
    // A library has no logger of its own yet: the reaper's is silent.
    const services = createServices(store, config, pino({ level: 'silent' }), settings.scheduleClock === undefined ? {} : { scheduleClock: settings.scheduleClock });
    const app = await buildCoordinator({ store, logger: false, config: input, services, inProcessKeys: keys });
    await app.ready();
    const injects = { count: 0 };
    const dispatch = injector(app, () => injects.count++);
    const client = (apiKey: string): LeaseholdClient => new LeaseholdClient({ baseUrl: 'http://in-process', apiKey, dispatch });
    // An enqueue inside the application's transaction cannot wait: it uses the kinds as last loaded.
    await services.ctx.kinds.forTenant(tenant);
    const enqueuer = keys.get(settings.owner === undefined ? adminKey : producerKey) as Principal;
    return new Queue<Kinds>(store, tenant, settings.owner, app, services, config, client(settings.owner === undefined ? adminKey : producerKey), client(adminKey), closeStore, transactional, enqueuer, injects);
  }

  /**
   * POST /jobs, without the route: the job as stored (the existing one for a replayed key, and for a dedupe key
   * that folded the job into an existing one, with `deduplicated: true`). A unique key whose job keeps it throws
   * LeaseholdError duplicate_job with `details.jobId`.
   */
  async enqueue(job: QueueJob<Kinds>): Promise<EnqueueResponse> {
    const { idempotencyKey, request } = this.requestOf(job);
    return answerOf(await enqueueOne(this.services.ctx, this.principal, request, idempotencyKey));
  }

  /** The body of POST /jobs for `job`, checked against its schema as the route checks it. */
  private requestOf(job: QueueJob<Kinds>): { readonly idempotencyKey: string; readonly request: EnqueueRequest } {
    const { idempotencyKey, ...request } = wireFields(job);
    if (!validateEnqueueRequest(request)) throw new LeaseholdError('invalid_request', describeValidationError(validateEnqueueRequest.errors?.[0] ?? undefined, 'job'));
    return { idempotencyKey, request: request as EnqueueRequest };
  }

  /**
   * Enqueues inside the application's own transaction, so the job exists if and only if that transaction
   * commits (a rollback leaves no job and no reserved idempotency key). With better-sqlite3, `tx` is the
   * application's Database on the same file, called inside its `db.transaction(() => …)`, and the call is
   * synchronous. With pg, `tx` is the client of the application's `BEGIN … COMMIT` on the same database,
   * and the call returns a promise. The same rules as enqueue(); the kind rules and the backpressure
   * snapshot are those last loaded (at most `kindCacheMs` and `statsCacheMs` old), since it cannot wait.
   */
  enqueueInTransaction(tx: SqliteHandle, job: QueueJob<Kinds>): EnqueueResponse;
  enqueueInTransaction(tx: pg.ClientBase, job: QueueJob<Kinds>): Promise<EnqueueResponse>;
  enqueueInTransaction(tx: SqliteHandle | pg.ClientBase, job: QueueJob<Kinds>): EnqueueResponse | Promise<EnqueueResponse> {
    const params = this.prepareHere(job);
    if (isSqliteHandle(tx)) {
      if (this.transactional.sqlite === undefined) throw new TypeError('this Queue is not on SQLite: pass the pg client of your transaction');
      return this.answer(this.transactional.sqlite(tx, params));
    }
    if (this.transactional.pg === undefined) throw new TypeError('this Queue is not on PostgreSQL: pass the better-sqlite3 Database of your transaction');
    return this.transactional.pg(tx, params).then((outcome) => this.answer(outcome));
  }

  /** What POST /jobs checks before the store, here and synchronously. */
  private prepareHere(job: QueueJob<Kinds>): EnqueueParams {
    const { idempotencyKey, request } = this.requestOf(job);
    const key = requireIdempotencyKey(idempotencyKey);
    const kinds = this.services.ctx.kinds.loadedForTenant(this.tenant);
    if (kinds === undefined) throw new LeaseholdError('store_unavailable', 'the kinds of this tenant are not loaded yet; retry');
    const params = prepareEnqueueWith(kinds, this.services.ctx, this.principal, request, key);
    this.services.ctx.backpressure.checkSnapshot(this.tenant, 1, params.payloadBytes);
    return params;
  }

  private answer(outcome: EnqueueOutcome): EnqueueResponse {
    if (isRefused(outcome)) throw refusalOf(outcome);
    return answerOf(outcome);
  }

  /** POST /jobs/batch: up to 1,000 jobs in one transaction; one result per job, in order. */
  async enqueueMany(jobs: readonly QueueJob<Kinds>[]): Promise<readonly EnqueueBatchResult[]> {
    const items = jobs.map(wireFields);
    return (await rethrowing(this.producer.enqueueBatch(items as Parameters<LeaseholdClient['enqueueBatch']>[0]))).results;
  }

  get(id: string): Promise<Job> {
    return rethrowing(this.producer.getJob(id));
  }

  list(filter: JobListQuery = {}): Promise<JobList> {
    return rethrowing(this.producer.listJobs(filter));
  }

  /** The result's bytes and content type, after checking its SHA-256 checksum. */
  result(id: string): Promise<JobResultBody> {
    return rethrowing(this.producer.getResult(id));
  }

  attempts(id: string): Promise<Attempt[]> {
    return rethrowing(this.producer.attempts(id));
  }

  cancel(id: string): Promise<Job> {
    return rethrowing(this.producer.cancel(id));
  }

  requeue(id: string, options: { readonly maxAttempts?: number } = {}): Promise<Job> {
    return rethrowing(this.admin.requeue(id, options));
  }

  reconcile(id: string, outcome: ReconcileOutcomeName): Promise<Job> {
    return rethrowing(this.admin.reconcile(id, outcome));
  }

  stats(): Promise<Stats> {
    return rethrowing(this.admin.stats());
  }

  /** PUT /kinds/{kind}; the kinds are loaded again before it answers, so enqueueInTransaction sees the new rules. */
  async putKind(name: keyof Kinds & string, spec: KindDefinition): Promise<Kind> {
    const kind = await rethrowing(this.admin.putKind(name, spec));
    await this.services.ctx.kinds.forTenant(this.tenant);
    return kind;
  }

  /**
   * PUT /schedules/{name}: each occurrence of `spec.cron` in `spec.timezone` enqueues one job of
   * `spec.kind`, exactly once however many Queues and coordinators serve the database.
   */
  putSchedule(name: string, spec: ScheduleDefinition): Promise<Schedule> {
    return rethrowing(this.admin.putSchedule(name, spec));
  }

  /** GET /schedules: one page, by name, with each schedule's next and last occurrence. */
  listSchedules(query: ScheduleListQuery = {}): Promise<ScheduleList> {
    return rethrowing(this.admin.listSchedules(query));
  }

  /** DELETE /schedules/{name}: the schedule as it was; the jobs it enqueued stay. */
  deleteSchedule(name: string): Promise<Schedule> {
    return rethrowing(this.admin.deleteSchedule(name));
  }

  /**
   * POST /kinds/{kind}/pause: no lease (a Worker's, or one over HTTP on the same database) takes the kind's
   * jobs until resumeKind; enqueues still succeed and running jobs finish. An unknown kind throws not_found.
   */
  pauseKind(name: keyof Kinds & string): Promise<Kind> {
    return rethrowing(this.admin.pauseKind(name));
  }

  /** POST /kinds/{kind}/resume: leases take the kind's jobs again, and parked polls are woken at once. */
  resumeKind(name: keyof Kinds & string): Promise<Kind> {
    return rethrowing(this.admin.resumeKind(name));
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
    return rethrowing(this.producer.waitForJob(id, options));
  }

  /** Parked waits and long polls answer; then the store closes if this Queue opened it. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.services.stopWaiting();
      await this.app.close();
      await this.services.close();
      await this.closeStore?.();
    })();
    return this.closing;
  }
}
