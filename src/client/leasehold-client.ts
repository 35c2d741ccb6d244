/**
 * The typed HTTP client: one method per coordinator endpoint, bodies typed
 * from the wire schemas in src/protocol. It keeps a pool of keep-alive
 * connections (undici) because workers and benchmarks call it tens of
 * thousands of times a second; a fresh TCP connection per call would cost
 * more than the call. The exchange itself is in transport.ts.
 *
 * The client does not retry. Retrying is a policy that depends on the call
 * (a completion is worth retrying only while its lease lives), so it belongs
 * to the caller; errors say whether a retry is safe (`isRetryableError`).
 */

import { createHash, randomUUID } from 'node:crypto';
import { Pool } from 'undici';
import { systemClock } from '../core/clock.js';
import { LIMITS } from '../protocol/limits.js';
import { WAIT_END_STATUSES } from '../protocol/wait-ends.js';
import type {
  Attempt,
  AttemptList,
  BulkRequest,
  BulkResponse,
  CancelRequest,
  CheckpointRequest,
  CompleteManyRequest,
  CompleteManyResponse,
  CompleteManyResult,
  CompleteRequest,
  CompleteResponse,
  EnqueueBatchItem,
  EnqueueBatchResponse,
  EnqueueRequest,
  EnqueueResponse,
  FailRequest,
  FailResponse,
  Job,
  JobDetail,
  JobList,
  JobListQuery,
  HealthResponse,
  Kind,
  KindDefinition,
  KindList,
  LeaseRequest,
  LeaseResponse,
  LeasedJob,
  ReconcileOutcomeName,
  ReconcileRequest,
  RenewRequest,
  RenewResponse,
  RequeueRequest,
  Schedule,
  ScheduleDefinition,
  ScheduleList,
  ScheduleListQuery,
  Stats,
  TokenRequest,
} from '../protocol/schemas.js';
import type { PurgeRequest, PurgeResponse } from '../protocol/retention.js';
import type { WorkerCalls } from '../protocol/worker-calls.js';
import { LeaseholdIntegrityError, LeaseholdNetworkError, parseRetryAfter } from './errors.js';
import { apiError, describeNetworkCode, header, networkCode, parseJson } from './responses.js';
import { exchange, type Exchange, type RawResponse } from './transport.js';
import type { EnqueueResult, JobResultBody } from './types.js';

export interface LeaseholdClientOptions {
  /** e.g. http://127.0.0.1:8080 (a path prefix is kept). */
  readonly baseUrl: string;
  readonly apiKey: string;
  /** Per request, on top of any long-poll wait. Default 30 s. */
  readonly timeoutMs?: number;
  /** Keep-alive connections in the pool. Default 64. */
  readonly connections?: number;
  /**
   * Sends each exchange somewhere other than a socket (a library Queue's own
   * coordinator, in process); no connection pool is opened then.
   */
  readonly dispatch?: (request: Exchange) => Promise<RawResponse>;
}

export interface CallOptions {
  readonly signal?: AbortSignal;
}

type Method = Exchange['method'];

export class LeaseholdClient implements WorkerCalls {
  private readonly send: (request: Exchange) => Promise<RawResponse>;
  private readonly pool: Pool | undefined;
  private readonly prefix: string;
  private readonly origin: string;
  private readonly authorization: string;
  private readonly timeoutMs: number;
  private closed = false;

  constructor(options: LeaseholdClientOptions) {
    const url = parseBaseUrl(options.baseUrl);
    this.origin = url.origin;
    this.prefix = url.pathname.replace(/\/+$/, '');
    this.authorization = `Bearer ${options.apiKey}`;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    const pool =
      options.dispatch === undefined
        ? new Pool(url.origin, { connections: options.connections ?? 64, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 120_000 })
        : undefined;
    this.pool = pool;
    this.send = options.dispatch ?? ((request) => exchange(pool as Pool, request));
  }

  /** Closes the connection pool; in-flight requests finish first. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool?.close();
  }

  // ---- producers ----

  /**
   * POST /jobs. The idempotency key defaults to a random one, which makes the
   * call safe to retry only if the caller keeps the key: pass your own for that.
   */
  async enqueue(request: EnqueueRequest, options: CallOptions & { readonly idempotencyKey?: string } = {}): Promise<EnqueueResult> {
    const key = options.idempotencyKey ?? randomUUID();
    const response = await this.call('POST', '/jobs', request, { ...options, headers: { 'idempotency-key': key } });
    const replayed = header(response, 'idempotent-replayed') === 'true';
    const { deduplicated, ...job } = parseJson<EnqueueResponse>(response);
    return { job, replayed, deduplicated: deduplicated === true, retryAfterSeconds: parseRetryAfter(response.headers['retry-after'], systemClock.now()) };
  }

  /** POST /jobs/batch: up to 1,000 jobs in one transaction, each with its own idempotency key. */
  async enqueueBatch(jobs: readonly EnqueueBatchItem[], options: CallOptions = {}): Promise<EnqueueBatchResponse> {
    const response = await this.call('POST', '/jobs/batch', { jobs }, { ...options, extraTimeoutMs: this.timeoutMs });
    return parseJson<EnqueueBatchResponse>(response);
  }

  async getJob(id: string, options: CallOptions = {}): Promise<Job> {
    return parseJson<Job>(await this.call('GET', `/jobs/${encodeURIComponent(id)}`, undefined, options));
  }

  /**
   * Waits until the job is succeeded, dead, cancelled or unknown, or
   * `timeoutMs` passes (default 60 s), with `GET /jobs/{id}?waitMs` long polls
   * of at most 60 s each; resolves with the job as it is then: check `status`.
   */
  async waitForJob(id: string, options: CallOptions & { readonly timeoutMs?: number } = {}): Promise<Job> {
    const deadline = systemClock.now() + Math.max(0, options.timeoutMs ?? LIMITS.maxWaitMs);
    for (;;) {
      const waitMs = Math.max(0, Math.min(LIMITS.maxWaitMs, deadline - systemClock.now()));
      const path = `/jobs/${encodeURIComponent(id)}?waitMs=${Math.floor(waitMs)}`;
      const job = parseJson<Job>(await this.call('GET', path, undefined, { ...options, extraTimeoutMs: waitMs }));
      if (WAIT_END_STATUSES.includes(job.status) || systemClock.now() >= deadline) return job;
    }
  }

  async listJobs(query: JobListQuery = {}, options: CallOptions = {}): Promise<JobList> {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) {
      if (value !== undefined) search.set(name, String(value));
    }
    const qs = search.toString();
    return parseJson<JobList>(await this.call('GET', qs === '' ? '/jobs' : `/jobs?${qs}`, undefined, options));
  }

  /**
   * GET /jobs/{id}/result. Verifies the body's SHA-256 against the ETag and
   * the Repr-Digest header and throws LeaseholdIntegrityError on a mismatch.
   */
  async getResult(id: string, options: CallOptions = {}): Promise<JobResultBody> {
    const response = await this.call('GET', `/jobs/${encodeURIComponent(id)}/result`, undefined, options);
    const digest = createHash('sha256').update(response.body);
    const hex = digest.copy().digest('hex');
    const etag = header(response, 'etag');
    const reprDigest = header(response, 'repr-digest');
    if (etag === undefined && reprDigest === undefined) {
      throw new LeaseholdIntegrityError('checksum_missing', `result of job ${id} came without an ETag or Repr-Digest`);
    }
    if (etag !== undefined) {
      const tagged = etag
        .replace(/^W\//, '')
        .replace(/^"|"$/g, '')
        .replace(/^sha-?256[:=]/i, '')
        .toLowerCase();
      if (tagged !== hex) throw new LeaseholdIntegrityError('checksum_mismatch', `result of job ${id} does not match its ETag`);
    }
    if (reprDigest !== undefined) {
      const match = /sha-256=:([A-Za-z0-9+/=]+):/.exec(reprDigest);
      if (match === null || match[1] !== digest.digest('base64')) {
        throw new LeaseholdIntegrityError('checksum_mismatch', `result of job ${id} does not match its Repr-Digest`);
      }
    }
    const contentType = header(response, 'content-type') ?? 'application/octet-stream';
    const isJson = /^application\/([\w.+-]+\+)?json\b/i.test(contentType);
    return {
      contentType,
      body: response.body,
      checksum: hex,
      value: isJson && response.body.length > 0 ? (JSON.parse(response.body.toString('utf8')) as unknown) : undefined,
    };
  }

  async attempts(id: string, options: CallOptions = {}): Promise<Attempt[]> {
    const body = parseJson<AttemptList>(await this.call('GET', `/jobs/${encodeURIComponent(id)}/attempts`, undefined, options));
    return body.attempts;
  }

  async cancel(id: string, options: CallOptions = {}): Promise<Job> {
    const body: CancelRequest = {};
    return parseJson<Job>(await this.call('POST', `/jobs/${encodeURIComponent(id)}/cancel`, body, options));
  }

  // ---- workers ----

  /** POST /lease. An empty array when the coordinator answered 204 (nothing within waitMs). */
  async lease(request: LeaseRequest, options: CallOptions = {}): Promise<LeasedJob[]> {
    return (await this.leaseResponse(request, options)).jobs;
  }

  /** POST /lease, the whole answer: the jobs and how long the coordinator held the request first (`waitedMs`). */
  async leaseResponse(request: LeaseRequest, options: CallOptions = {}): Promise<LeaseResponse> {
    const response = await this.call('POST', '/lease', request, { ...options, extraTimeoutMs: request.waitMs ?? 0 });
    if (response.status === 204) return { jobs: [], waitedMs: request.waitMs ?? 0 };
    return parseJson<LeaseResponse>(response);
  }

  async renew(id: string, request: RenewRequest, options: CallOptions = {}): Promise<RenewResponse> {
    return parseJson<RenewResponse>(await this.call('POST', `/jobs/${encodeURIComponent(id)}/renew`, request, options));
  }

  /** `result` is JSON; `resultBytes` ({contentType, base64}) carries any other content. */
  async complete(id: string, request: CompleteRequest, options: CallOptions = {}): Promise<CompleteResponse> {
    return parseJson<CompleteResponse>(await this.call('POST', `/jobs/${encodeURIComponent(id)}/complete`, request, options));
  }

  /** POST /complete: many completions in one request and one transaction; per-item results. */
  async completeMany(completions: CompleteManyRequest['completions'], options: CallOptions = {}): Promise<CompleteManyResult[]> {
    return parseJson<CompleteManyResponse>(await this.call('POST', '/complete', { completions }, options)).results;
  }

  /** POST /complete with `lease`: completes the batch, then leases up to `lease.max` jobs (never waiting) in the same request. */
  async completeAndLease(request: CompleteManyRequest, options: CallOptions = {}): Promise<CompleteManyResponse> {
    return parseJson<CompleteManyResponse>(await this.call('POST', '/complete', request, options));
  }

  async fail(id: string, request: FailRequest, options: CallOptions = {}): Promise<FailResponse> {
    return parseJson<FailResponse>(await this.call('POST', `/jobs/${encodeURIComponent(id)}/fail`, request, options));
  }

  /** POST /jobs/{id}/effect: declares an external side effect under this lease. */
  async effectStarted(id: string, token: string, options: CallOptions = {}): Promise<void> {
    const body: TokenRequest = { token };
    await this.call('POST', `/jobs/${encodeURIComponent(id)}/effect`, body, options);
  }

  async checkpoint(id: string, request: CheckpointRequest, options: CallOptions = {}): Promise<void> {
    await this.call('POST', `/jobs/${encodeURIComponent(id)}/checkpoint`, request, options);
  }

  // ---- admin ----

  async requeue(id: string, request: RequeueRequest = {}, options: CallOptions = {}): Promise<Job> {
    return parseJson<Job>(await this.call('POST', `/jobs/${encodeURIComponent(id)}/requeue`, request, options));
  }

  async reconcile(id: string, outcome: ReconcileOutcomeName, options: CallOptions = {}): Promise<Job> {
    const body: ReconcileRequest = { outcome };
    return parseJson<Job>(await this.call('POST', `/jobs/${encodeURIComponent(id)}/reconcile`, body, options));
  }

  /** POST /jobs/bulk: requeue, cancel or reconcile every job a filter selects (dryRun only counts). */
  async bulk(request: BulkRequest, options: CallOptions = {}): Promise<BulkResponse> {
    return parseJson<BulkResponse>(await this.call('POST', '/jobs/bulk', request, options));
  }

  /** GET /jobs/{id}/detail: the job with its payload, checkpoint, result checksum and attempts. */
  async jobDetail(id: string, options: CallOptions = {}): Promise<JobDetail> {
    return parseJson<JobDetail>(await this.call('GET', `/jobs/${encodeURIComponent(id)}/detail`, undefined, options));
  }

  async putKind(kind: string, definition: KindDefinition, options: CallOptions = {}): Promise<Kind> {
    return parseJson<Kind>(await this.call('PUT', `/kinds/${encodeURIComponent(kind)}`, definition, options));
  }

  async listKinds(options: CallOptions = {}): Promise<Kind[]> {
    return parseJson<KindList>(await this.call('GET', '/kinds', undefined, options)).kinds;
  }

  /** Admin: sets or replaces the recurring schedule `name`. */
  async putSchedule(name: string, definition: ScheduleDefinition, options: CallOptions = {}): Promise<Schedule> {
    return parseJson<Schedule>(await this.call('PUT', `/schedules/${encodeURIComponent(name)}`, definition, options));
  }

  /** Admin: one page of the tenant's schedules by name; pass `nextCursor` back as `cursor` for the next. */
  async listSchedules(query: ScheduleListQuery = {}, options: CallOptions = {}): Promise<ScheduleList> {
    const search = new URLSearchParams();
    if (query.limit !== undefined) search.set('limit', String(query.limit));
    if (query.cursor !== undefined) search.set('cursor', query.cursor);
    const qs = search.toString();
    return parseJson<ScheduleList>(await this.call('GET', qs === '' ? '/schedules' : `/schedules?${qs}`, undefined, options));
  }

  /** Admin: deletes the schedule `name` (its jobs stay) and answers it as it was. */
  async deleteSchedule(name: string, options: CallOptions = {}): Promise<Schedule> {
    return parseJson<Schedule>(await this.call('DELETE', `/schedules/${encodeURIComponent(name)}`, undefined, options));
  }

  /** One kind of the tenant, with its limits and whether it is paused. */
  async getKind(kind: string, options: CallOptions = {}): Promise<Kind> {
    return parseJson<Kind>(await this.call('GET', `/kinds/${encodeURIComponent(kind)}`, undefined, options));
  }

  /** Admin: the kind's jobs are not leased until resumeKind; enqueues still succeed and running jobs finish. */
  async pauseKind(kind: string, options: CallOptions = {}): Promise<Kind> {
    return parseJson<Kind>(await this.call('POST', `/kinds/${encodeURIComponent(kind)}/pause`, {}, options));
  }

  /** Admin: leases take the kind's jobs again; parked long polls are woken. */
  async resumeKind(kind: string, options: CallOptions = {}): Promise<Kind> {
    return parseJson<Kind>(await this.call('POST', `/kinds/${encodeURIComponent(kind)}/resume`, {}, options));
  }

  /** Admin: deletes up to a bounded number of the tenant's finished jobs; call again while `more` is true. */
  async purge(request: PurgeRequest, options: CallOptions = {}): Promise<PurgeResponse> {
    return parseJson<PurgeResponse>(await this.call('POST', '/jobs/purge', request, options));
  }

  async stats(options: CallOptions = {}): Promise<Stats> {
    return parseJson<Stats>(await this.call('GET', '/stats', undefined, options));
  }

  async health(options: CallOptions = {}): Promise<HealthResponse> {
    return parseJson<HealthResponse>(await this.call('GET', '/healthz', undefined, options));
  }

  // ---- transport ----

  private async call(
    method: Method,
    path: string,
    body: unknown,
    options: CallOptions & { readonly headers?: Record<string, string>; readonly extraTimeoutMs?: number },
  ): Promise<RawResponse> {
    const headers: Record<string, string> =
      options.headers === undefined ? { authorization: this.authorization } : { authorization: this.authorization, ...options.headers };
    let payload: string | undefined;
    if (body !== undefined) {
      payload = JSON.stringify(body);
      headers['content-type'] = 'application/json';
    }
    let response: RawResponse;
    try {
      response = await this.send({
        method,
        path: this.prefix + path,
        headers,
        body: payload,
        signal: options.signal,
        timeoutMs: this.timeoutMs + (options.extraTimeoutMs ?? 0),
      });
    } catch (error) {
      if (options.signal?.aborted === true) throw options.signal.reason ?? error;
      const code = networkCode(error);
      throw new LeaseholdNetworkError(`${method} ${path.split('?')[0] ?? path} to ${this.origin} failed: ${describeNetworkCode(code)}`, code, error);
    }
    if (response.status >= 400) throw apiError(method, path, response);
    return response;
  }
}

/** The coordinator's URL, or a TypeError that shows the value and how to write it (`127.0.0.1:8080` lacks its scheme). */
export function parseBaseUrl(value: string): URL {
  const shown = JSON.stringify(value.slice(0, 200));
  const hint =
    /^[\w.-]+:\d+(\/|$)/.test(value) || !value.includes('://')
      ? `; write it with its scheme, e.g. http://${value.replace(/^\/+/, '') || '127.0.0.1:8080'}`
      : '';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw Object.assign(new TypeError(`the coordinator URL ${shown} is not a URL${hint}`), { code: 'invalid_url' });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw Object.assign(new TypeError(`the coordinator URL ${shown} is not an http:// or https:// URL${hint}`), { code: 'invalid_url' });
  }
  return url;
}
