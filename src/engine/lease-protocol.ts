/**
 * The worker's lease protocol as functions over the shared services: lease
 * (with its long-poll wait), renew, effect, checkpoint, complete (one or
 * many) and fail. The routes in src/coordinator/routes/lease.ts and completion.ts are
 * these functions behind HTTP (body schema, authentication, admission), and a
 * library Queue's direct worker transport (src/queue/direct-worker.ts) calls
 * the same functions without a route. So the kind rules (result and
 * checkpoint limits, backoff, lease length), the fencing by token, the
 * explanation of a refusal, the wake-ups of waiters, the events and metrics
 * and the crash points are written once for both.
 *
 * The token is the authority: each call is scoped by tenant only, and the
 * store accepts it only under the job's current, unexpired lease. A refused
 * call throws LeaseholdError with the code the HTTP API answers
 * (stale_lease, cancelled, deadline_exceeded, not_found: 409/404).
 *
 * Inputs are assumed to have passed the protocol's body schemas
 * (src/protocol/leases.ts); the direct transport checks them with the same
 * compiled schemas as the routes.
 */

import { performance } from 'node:perf_hooks';
import type { Logger } from './logger.js';
import type { BackoffPolicy } from '../core/backoff.js';
import { canonicalJson } from '../core/canonical-json.js';
import { toRfc3339 } from '../core/clock.js';
import { LeaseholdError } from '../core/errors.js';
import { crashPoint } from '../core/fault-points.js';
import { isJobId } from '../core/ids.js';
import { isMediaType } from '../core/media-type.js';
import type {
  CarriedLease,
  CheckpointRequest,
  CompleteManyRequest,
  CompleteManyResult,
  CompleteRequest,
  CompleteResponse,
  FailRequest,
  FailResponse,
  LeaseRequest,
  RenewRequest,
  RenewResponse,
} from '../protocol/schemas.js';
import type { CompleteOutcome, CompleteParams, LeasedJob, LeaseParams, LeaseWithNextDue } from '../store/store.js';
import { waiterGroup, type HandoffTarget } from './lease-waiters.js';
import type { EngineContext } from './context.js';
import { explainRejection, rejection } from './rejections.js';
import { checkCheckpointSize, maxResultBytesFor, resultInput } from './worker-writes.js';

/** Progress is for display; a larger value belongs in a checkpoint or the result. */
export const MAX_PROGRESS_BYTES = 4096;

/** Where the events of a call are logged: the request's logger over HTTP, the Queue's in a library. */
export type ProtocolLog = Pick<Logger, 'info'>;

/**
 * What ends a parked lease wait early: the client went away (HTTP) or the worker stops (library).
 * Opened only when the lease found nothing and the caller asked to wait; released when the wait ends.
 */
export interface LeaseWaitScope {
  readonly signal: AbortSignal;
  release(): void;
}

export interface LeaseAnswer {
  readonly jobs: readonly LeasedJob[];
  /** How long the call was held before these jobs were leased (ms). */
  readonly waitedMs: number;
}

/**
 * Leases up to `max` jobs; when none is available and `waitMs` > 0, parks in
 * LeaseWaiters: the store's availability notification for the tenant and a
 * kind it asked for wakes it at once, and its group's timer wakes it when the
 * earliest delayed job or retry it could lease becomes due (the next due time
 * that jobLeaseWithNextDue answers with each empty lease; nothing announces those). Between the two it issues
 * no query. A kind's limits (store/flow-limits.ts) are enforced by the store;
 * a poll they hold back waits for a job of its tenant to finish (a
 * maxConcurrent slot) or for its rate window to admit (the due timer), and a
 * resume or a changed limit announces the kind like new work. Answers no jobs
 * when the wait ends empty.
 */
export async function leaseJobs(
  ctx: EngineContext,
  log: ProtocolLog,
  tenant: string,
  body: LeaseRequest,
  openWait: () => LeaseWaitScope,
): Promise<LeaseAnswer> {
  const params = await leaseParamsOf(ctx, tenant, body);
  const max = params.max;
  // The lease starts no earlier than this much after the call arrived: the worker places it on its clock by that.
  const arrivedAt = performance.now();
  let waitedMs = 0;
  let generation = ctx.waiters.generation(tenant);
  let finished = ctx.waiters.finishedGeneration();
  const waitMs = body.waitMs ?? 0;
  let answer = await leaseOrKnown(ctx, tenant, body.kinds, params, generation, waitMs > 0);
  let jobs: readonly LeasedJob[] = answer.jobs;
  if (jobs.length === 0 && waitMs > 0) {
    const group = waiterGroup(body.kinds);
    const deadline = performance.now() + waitMs;
    const scope = openWait();
    try {
      const recheckMs = ctx.config.leaseRecheckMs ?? Number.POSITIVE_INFINITY;
      // An enqueue of a job this poll could take may lease it to the poll itself (LeaseWaiters.claim).
      const target: HandoffTarget = { workerId: params.workerId, leaseMs: params.leaseMs, job: null, claimedAt: 0 };
      while (jobs.length === 0) {
        // Read with (or right after) the empty lease: a job that became due in between is answered as due now (0).
        const next = answer.nextDue ?? null;
        const dueInMs = next?.inMs ?? null;
        // A poll held back by a kind's maxConcurrent also wakes when a job of its tenant finishes (a slot may be free).
        const slotSeen = next?.slotHeld === true ? finished : null;
        const remaining = deadline - performance.now();
        if (remaining <= 0) {
          // This poll ends; its group's other members still need the due time it found.
          ctx.waiters.schedule(tenant, body.kinds, dueInMs);
          break;
        }
        const result = await ctx.waiters.wait(tenant, body.kinds, Math.min(remaining, recheckMs), generation, scope.signal, dueInMs, slotSeen, target);
        if (result === 'aborted') break;
        if (result === 'handed' && target.job !== null) {
          jobs = [target.job];
          waitedMs = Math.floor(target.claimedAt - arrivedAt);
          break;
        }
        // The poll's time is up and nothing was announced or came due: nothing to look for.
        if (result === 'timeout' && performance.now() >= deadline) break;
        generation = ctx.waiters.generation(tenant);
        finished = ctx.waiters.finishedGeneration();
        waitedMs = Math.floor(performance.now() - arrivedAt);
        answer = await leaseOrKnown(ctx, tenant, body.kinds, params, generation, false);
        jobs = answer.jobs;
        // A full batch may mean more work is waiting, and a due wake-up that leased took the group's timer
        // with it: pass the wake-up on (the next member leases or sets the timer to the next due job).
        if ((result === 'woken' && jobs.length === max) || (result === 'due' && jobs.length > 0)) ctx.waiters.wakeNext(tenant, group);
      }
    } finally {
      scope.release();
    }
  }
  ctx.events.leased(log, tenant, params.workerId, params.leaseMs, jobs);
  if (jobs.length > 0) crashPoint('lease.after-commit');
  return { jobs, waitedMs };
}

/**
 * Leases, and remembers what the lease left for the group's next polls (LeaseWaiters.noteLeft); or, for a poll
 * that may wait (`mayPark`), answers nothing at once when the group's last lease left nothing and nothing was
 * announced to the tenant since (knownLeft), so the poll parks without a store call.
 */
async function leaseOrKnown(
  ctx: EngineContext,
  tenant: string,
  kinds: readonly string[] | undefined,
  params: LeaseParams,
  generation: number,
  mayPark: boolean,
): Promise<LeaseWithNextDue> {
  const known = mayPark ? ctx.waiters.knownLeft(tenant, kinds) : undefined;
  if (known !== undefined) return { jobs: [], nextDue: known };
  const answer = await ctx.store.jobLeaseWithNextDue(params);
  if (answer.nextDue !== undefined) ctx.waiters.noteLeft(tenant, kinds, generation, answer.nextDue);
  return answer;
}

/** The store's lease of a worker's request: the kind's lease duration unless it names one, one job unless it says. */
async function leaseParamsOf(ctx: EngineContext, tenant: string, body: CarriedLease): Promise<LeaseParams> {
  return {
    tenant,
    workerId: body.workerId,
    leaseMs: body.leaseMs ?? (await defaultLeaseMs(ctx, tenant, body.kinds)),
    max: body.max ?? 1,
    ...(body.kinds === undefined || body.kinds.length === 0 ? {} : { kinds: body.kinds }),
  };
}

/** A registered kind's lease duration when the worker leases exactly that kind; the default otherwise. */
async function defaultLeaseMs(ctx: EngineContext, tenant: string, kinds: readonly string[] | undefined): Promise<number> {
  if (kinds?.length === 1 && kinds[0] !== undefined) {
    const registered = (await ctx.kinds.forTenant(tenant)).byName.get(kinds[0]);
    if (registered !== undefined) return registered.record.leaseMs;
  }
  return ctx.config.defaultLeaseMs;
}

function requireJobId(id: string): void {
  if (!isJobId(id)) throw new LeaseholdError('not_found', 'job not found');
}

/** Extends the lease (and replaces the stored progress when given) while the token is the live lease. */
export async function renewLease(ctx: EngineContext, tenant: string, id: string, body: RenewRequest): Promise<RenewResponse> {
  if (body.progress !== undefined && Buffer.byteLength(canonicalJson(body.progress), 'utf8') > MAX_PROGRESS_BYTES) {
    throw new LeaseholdError('payload_too_large', `progress must be at most ${MAX_PROGRESS_BYTES} bytes of JSON`);
  }
  requireJobId(id);
  const outcome = await ctx.store.jobRenew({
    tenant,
    id,
    token: body.token,
    leaseMs: body.leaseMs ?? ctx.config.defaultLeaseMs,
    ...(body.progress === undefined ? {} : { progress: body.progress }),
  });
  if (outcome.kind === 'rejected') throw await rejection(ctx, tenant, id, outcome.code);
  return { leaseExpiresAt: toRfc3339(outcome.leaseExpiresAt) };
}

/** Declares that the handler starts an external effect: if this lease then expires, the job becomes unknown. */
export async function markEffectStarted(ctx: EngineContext, tenant: string, id: string, token: string): Promise<void> {
  requireJobId(id);
  const outcome = await ctx.store.jobMarkEffectStarted({ tenant, id, token });
  if (outcome.kind === 'rejected') throw await rejection(ctx, tenant, id, outcome.code);
}

/**
 * Stores the step and its state under the live lease. The state is capped like a payload — the kind's
 * `maxCheckpointBytes`, or the coordinator's `maxCheckpointBytes` for an unregistered kind — and a larger
 * one is refused (payload_too_large) before anything is written; the job's kind is read only when the
 * state is larger than the smallest limit that could apply.
 */
export async function saveCheckpoint(ctx: EngineContext, tenant: string, id: string, body: CheckpointRequest): Promise<void> {
  requireJobId(id);
  await checkCheckpointSize(ctx, tenant, id, body.state);
  const outcome = await ctx.store.jobCheckpoint({ tenant, id, token: body.token, checkpoint: { step: body.step, state: body.state } });
  if (outcome.kind === 'rejected') throw await rejection(ctx, tenant, id, outcome.code);
}

type CompletionInput = CompleteManyRequest['completions'][number];

async function completeParams(ctx: EngineContext, tenant: string, { id, token, result, resultBytes }: CompletionInput): Promise<CompleteParams> {
  const input = resultInput(result, resultBytes);
  const maxResultBytes = await maxResultBytesFor(ctx, tenant, id, input);
  return {
    tenant,
    id,
    token,
    ...(input === undefined ? {} : { result: input }),
    ...(maxResultBytes === undefined ? {} : { maxResultBytes }),
  };
}

/**
 * Commits the result and marks the job succeeded under the current lease; a result larger than the
 * job's kind allows makes it dead with result_too_large (answered as status `dead`, since that is
 * committed). The same complete again answers the same and changes nothing.
 */
export async function completeJob(ctx: EngineContext, log: ProtocolLog, tenant: string, id: string, body: CompleteRequest): Promise<CompleteResponse> {
  requireJobId(id);
  const params = await completeParams(ctx, tenant, { ...body, id });
  const outcome = await ctx.store.jobComplete(params);
  ctx.events.completed(log, tenant, id, outcome, params.result?.body.length ?? 0);
  crashPoint('complete.after-commit');
  if (outcome.kind === 'rejected') throw await rejection(ctx, tenant, id, outcome.code);
  return { id, status: outcome.kind === 'completed' ? 'succeeded' : 'dead' };
}

/**
 * Many completions in one store transaction (one group commit). Per item, in order: `succeeded`; `dead`
 * with code result_too_large; or `rejected` with the code the single call would answer (an item whose
 * content type is not a media type is refused alone with invalid_request, like an item with a stale token).
 */
export function completeJobs(ctx: EngineContext, log: ProtocolLog, tenant: string, all: readonly CompletionInput[]): Promise<CompleteManyResult[]> {
  return completeBatch(ctx, log, tenant, all, (params) => ctx.store.jobCompleteMany(params));
}

/** completeJobs with the store call given: the items' checks, events and answers are the same whatever else it commits. */
async function completeBatch(
  ctx: EngineContext,
  log: ProtocolLog,
  tenant: string,
  all: readonly CompletionInput[],
  complete: (params: readonly CompleteParams[]) => Promise<readonly CompleteOutcome[]>,
): Promise<CompleteManyResult[]> {
  const refused = new Set(all.filter((item) => item.resultBytes !== undefined && !isMediaType(item.resultBytes.contentType)));
  const items = all.filter((item) => !refused.has(item));
  const params = await Promise.all(items.map((item) => completeParams(ctx, tenant, item)));
  const outcomes = await complete(params);
  params.forEach((item, index) => {
    const outcome = outcomes[index];
    if (outcome !== undefined) ctx.events.completed(log, tenant, item.id, outcome, item.result?.body.length ?? 0);
  });
  crashPoint('complete.after-commit');
  const applied = new Map(items.map((item, index) => [item, batchItemResult(item.id, outcomes[index])]));
  const results = all.map((item): CompleteManyResult => applied.get(item) ?? { id: item.id, status: 'rejected', code: 'invalid_request' });
  for (const entry of results) {
    if (entry.code === 'stale_lease') entry.code = await explainRejection(ctx, tenant, entry.id, 'stale_lease');
  }
  return results;
}

/**
 * Many completions, then the worker's next jobs in the same call (`POST /complete` with `lease`): the
 * store leases after the completions (Store.jobCompleteManyThenLease: one commit on SQLite), so a slot
 * they free (a kind's maxConcurrent) counts, and the lease never parks. A worker saves a round trip per
 * batch; when the lease finds nothing it leases on its own, with a long poll. When the group's last lease
 * left nothing and nothing was announced since (LeaseWaiters.knownLeft), only the completions go to the store.
 */
export async function completeJobsAndLease(
  ctx: EngineContext,
  log: ProtocolLog,
  tenant: string,
  all: readonly CompletionInput[],
  lease: CarriedLease,
): Promise<{ results: CompleteManyResult[]; jobs: readonly LeasedJob[] }> {
  const params = await leaseParamsOf(ctx, tenant, lease);
  let jobs: readonly LeasedJob[] = [];
  const results = await completeBatch(ctx, log, tenant, all, async (completions) => {
    // The group's last lease left nothing it could take and nothing was announced to the tenant since: the lease
    // would find nothing (a memory never stands for a poll held by maxConcurrent, whose slot a completion frees).
    // A job these completions make available is announced, so the worker's next poll leases it.
    if (ctx.waiters.knownLeft(tenant, lease.kinds) !== undefined) return ctx.store.jobCompleteMany(completions);
    const answer = await ctx.store.jobCompleteManyThenLease(completions, params);
    jobs = answer.jobs;
    return answer.outcomes;
  });
  ctx.events.leased(log, tenant, params.workerId, params.leaseMs, jobs);
  if (jobs.length > 0) crashPoint('lease.after-commit');
  return { results, jobs };
}

function batchItemResult(id: string, outcome: CompleteOutcome | undefined): CompleteManyResult {
  if (outcome === undefined) return { id, status: 'rejected', code: 'internal_error' };
  if (outcome.kind === 'completed') return { id, status: 'succeeded' };
  if (outcome.kind === 'result_too_large') return { id, status: 'dead', code: 'result_too_large' };
  return { id, status: 'rejected', code: outcome.code };
}

async function backoffFor(ctx: EngineContext, tenant: string, id: string): Promise<BackoffPolicy> {
  const kinds = await ctx.kinds.forTenant(tenant);
  if (kinds.byName.size === 0) return ctx.config.defaultBackoff;
  const job = await ctx.store.jobGet({ scope: { tenant }, id });
  return (job === null ? undefined : kinds.byName.get(job.kind)?.record.backoff) ?? ctx.config.defaultBackoff;
}

/** Error messages are shown to operators: single-line, without control characters. */
export function sanitizeMessage(message: string | undefined): string {
  return (message ?? '').replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
}

/**
 * Fails the attempt: back to queued after the kind's backoff, or dead when attempts are exhausted or
 * `retryable` is false (cancelled when a cancel was requested, unknown after a declared effect, as the
 * store's transition decides). Repeating the call changes nothing.
 */
export async function failJob(ctx: EngineContext, log: ProtocolLog, tenant: string, id: string, body: FailRequest): Promise<FailResponse> {
  requireJobId(id);
  const retryable = body.retryable ?? true;
  const outcome = await ctx.store.jobFail({
    tenant,
    id,
    token: body.token,
    error: { code: body.error.code, message: sanitizeMessage(body.error.message) },
    retryable,
    backoff: await backoffFor(ctx, tenant, id),
  });
  ctx.events.failed(log, tenant, id, body.error.code, outcome);
  if (outcome.kind === 'rejected') throw await rejection(ctx, tenant, id, outcome.code);
  return outcome.status === 'queued' && outcome.runAfter !== null
    ? { status: outcome.status, runAfter: toRfc3339(outcome.runAfter) }
    : { status: outcome.status };
}
