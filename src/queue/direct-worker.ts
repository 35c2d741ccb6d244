/**
 * The direct worker transport: what a `Worker` over a library Queue calls to
 * lease, renew, checkpoint, declare an effect, complete and fail, on the
 * Queue's store and services without HTTP (no Fastify, no JSON text, no
 * keys). Each call is the engine's lease-protocol.ts function, the
 * one its route calls, so the kind rules, fencing, refusal codes, waiter
 * wake-ups, events and metrics are the HTTP API's by construction.
 *
 * What the route adds and this adds too: the body is checked against the
 * same compiled TypeBox schema (a bad one is `invalid_request`), and values
 * that came from handlers (a result, a checkpoint's state, progress) are
 * turned into JSON values as the wire would turn them (toJSON, dropped
 * undefined fields), so what is stored, and its checksum, is the same. A
 * refusal throws LeaseholdError with the code and status the HTTP API
 * answers. What it leaves out: authentication (the Queue is its tenant's
 * admin), admission's per-key caps (one process's
 * own workers, bounded by their concurrency) and the HTTP body limits (the
 * kind's result and checkpoint limits still apply).
 *
 * Group commit: concurrent leases and completions of all the process's
 * workers reach the store together, which commits what arrived in one turn
 * in one transaction (SQLite's GroupCommit, PostgreSQL's statement
 * batcher); the Worker's CompletionBatcher sends its completions as one
 * completeMany, one transaction. A lease with nothing available parks in the
 * Queue's LeaseWaiters, woken by the store's availability signal (this
 * process's writes at once, another process's commit on the same SQLite
 * file through PRAGMA data_version, PostgreSQL's NOTIFY); the worker's stop
 * signal ends the wait.
 */

import { asLeaseholdError } from '../engine/error-translation.js';
import { SILENT_LOGGER } from '../engine/logger.js';
import { bodyCheck } from './call-checks.js';
import {
  completeJob,
  completeJobs,
  completeJobsAndLease,
  failJob,
  leaseJobs,
  markEffectStarted,
  renewLease,
  saveCheckpoint,
  type LeaseWaitScope,
} from '../engine/lease-protocol.js';
import type { EngineContext } from '../engine/context.js';
import { toWireLeasedJob } from '../engine/wire.js';
import {
  CheckpointRequest,
  CompleteManyRequest,
  type CompleteManyResponse,
  type CompleteManyResult,
  CompleteRequest,
  type CompleteResponse,
  FailRequest,
  type FailResponse,
  LeaseRequest,
  type LeaseResponse,
  RenewRequest,
  type RenewResponse,
  TokenRequest,
} from '../protocol/schemas.js';
import type { WorkerCallOptions, WorkerCalls } from '../protocol/worker-calls.js';

const checkLease = bodyCheck(LeaseRequest);
const checkRenew = bodyCheck(RenewRequest);
const checkComplete = bodyCheck(CompleteRequest);
const checkCompleteMany = bodyCheck(CompleteManyRequest);
const checkFail = bodyCheck(FailRequest);
const checkToken = bodyCheck(TokenRequest);
const checkCheckpoint = bodyCheck(CheckpointRequest);

/**
 * A handler's value as the wire carries it: what JSON.stringify then JSON.parse make of it (a Date
 * becomes its text, undefined fields go, NaN becomes null). Strings, booleans, null and finite numbers
 * are that already. Throws as JSON.stringify does (a BigInt, a cycle), as the HTTP client would.
 */
function asJson(value: unknown): unknown {
  if (value === undefined || value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  const text = JSON.stringify(value) as string | undefined;
  return text === undefined ? undefined : (JSON.parse(text) as unknown);
}

/** Without the undefined-valued optional field, as a JSON body would arrive. */
function withJson<T extends object, K extends keyof T & string>(body: T, key: K): T {
  if (!(key in body)) return body;
  const value = asJson(body[key]);
  const { [key]: _dropped, ...rest } = body;
  return (value === undefined ? rest : { ...rest, [key]: value }) as T;
}

/** The Queue has no logger of its own yet: events are counted in its metrics, and their lines go nowhere. */
const SILENT_LOG = SILENT_LOGGER;

const NEVER = new AbortController().signal;

export class DirectWorkerTransport implements WorkerCalls {
  constructor(
    private readonly ctx: EngineContext,
    /** Every call is scoped to this tenant, the Queue's own (it acts as the tenant's admin). */
    private readonly tenant: string,
  ) {}

  private async call<T>(options: WorkerCallOptions | undefined, run: () => Promise<T>): Promise<T> {
    const signal = options?.signal;
    if (signal?.aborted === true) throw signal.reason;
    try {
      return await run();
    } catch (error) {
      throw asLeaseholdError(error);
    }
  }

  leaseResponse(request: LeaseRequest, options?: WorkerCallOptions): Promise<LeaseResponse> {
    return this.call(options, async () => {
      checkLease(request);
      // The worker's stop aborts its call's signal: a parked wait answers with no jobs.
      const openWait = (): LeaseWaitScope => ({ signal: options?.signal ?? NEVER, release: () => undefined });
      const answer = await leaseJobs(this.ctx, SILENT_LOG, this.tenant, request, openWait);
      return { jobs: answer.jobs.map(toWireLeasedJob), waitedMs: answer.waitedMs };
    });
  }

  // The handler's values become JSON before the call, so an unserializable one throws as JSON.stringify does.
  async renew(id: string, request: RenewRequest, options?: WorkerCallOptions): Promise<RenewResponse> {
    const body = withJson(request, 'progress');
    return this.call(options, async () => {
      checkRenew(body);
      return renewLease(this.ctx, this.tenant, id, body);
    });
  }

  async complete(id: string, request: CompleteRequest, options?: WorkerCallOptions): Promise<CompleteResponse> {
    const body = withJson(request, 'result');
    return this.call(options, async () => {
      checkComplete(body);
      return completeJob(this.ctx, SILENT_LOG, this.tenant, id, body);
    });
  }

  async completeMany(completions: CompleteManyRequest['completions'], options?: WorkerCallOptions): Promise<CompleteManyResult[]> {
    const items = completions.map((item) => withJson(item, 'result'));
    return this.call(options, async () => {
      checkCompleteMany({ completions: items });
      return completeJobs(this.ctx, SILENT_LOG, this.tenant, items);
    });
  }

  async completeAndLease(request: CompleteManyRequest, options?: WorkerCallOptions): Promise<CompleteManyResponse> {
    const body = { ...request, completions: request.completions.map((item) => withJson(item, 'result')) };
    return this.call(options, async () => {
      checkCompleteMany(body);
      if (body.lease === undefined) return { results: await completeJobs(this.ctx, SILENT_LOG, this.tenant, body.completions) };
      const { results, jobs } = await completeJobsAndLease(this.ctx, SILENT_LOG, this.tenant, body.completions, body.lease);
      return { results, jobs: jobs.map(toWireLeasedJob) };
    });
  }

  fail(id: string, request: FailRequest, options?: WorkerCallOptions): Promise<FailResponse> {
    return this.call(options, async () => {
      checkFail(request);
      return failJob(this.ctx, SILENT_LOG, this.tenant, id, request);
    });
  }

  effectStarted(id: string, token: string, options?: WorkerCallOptions): Promise<void> {
    return this.call(options, async () => {
      checkToken({ token });
      await markEffectStarted(this.ctx, this.tenant, id, token);
    });
  }

  async checkpoint(id: string, request: CheckpointRequest, options?: WorkerCallOptions): Promise<void> {
    const body = withJson(request, 'state');
    return this.call(options, async () => {
      checkCheckpoint(body);
      await saveCheckpoint(this.ctx, this.tenant, id, body);
    });
  }
}
