/**
 * Enqueue, in one place for every path. prepareEnqueue turns one validated
 * request into the store's EnqueueParams: the tenant's kind rules
 * (allowlist, payload schema, payload size), the defaults (attempts,
 * deadline), and the idempotency hash over the canonical request body, so a
 * job enqueued by any path under the same key compares equal. What follows
 * the store's answer (the event, the refusal, the acceptance count) is
 * recordEnqueues and settleEnqueue, for POST /jobs and the library's
 * enqueue (enqueueOne), the batch (enqueue-batch.ts), a library's
 * enqueueInTransaction (prepareInTransaction) and the scheduler.
 */

import { canonicalJson } from '../core/canonical-json.js';
import { parseRfc3339 } from '../core/clock.js';
import { duplicateJobError, LeaseholdError } from '../core/errors.js';
import { sha256Hex } from '../core/ids.js';
import { LIMITS, STORABLE_KEY_PATTERN } from '../protocol/limits.js';
import type { EnqueueRequest, EnqueueResponse } from '../protocol/schemas.js';
import { mayHandOff } from '../store/enqueue-paths.js';
import type { EnqueueOutcome, EnqueueParams } from '../store/store.js';
import { crashPoint } from '../core/fault-points.js';
import type { Principal } from './principal.js';
import { describePayloadError, type TenantKinds } from './kind-registry.js';
import type { EngineContext } from './context.js';
import { toWireJob } from './wire.js';

/** The batch schema's rule for a key's text (protocol/limits.ts), for the header, which no schema checks. */
const STORABLE_KEY = new RegExp(STORABLE_KEY_PATTERN, 'u');

/** The Idempotency-Key header by the rules of `EnqueueBatchItem.idempotencyKey`, with messages that name the header. */
export function requireIdempotencyKey(value: string | string[] | undefined): string {
  const key = Array.isArray(value) ? value[0] : value;
  if (key === undefined || key.trim().length === 0) {
    throw new LeaseholdError('idempotency_key_required');
  }
  if (key.length > LIMITS.idempotencyKeyLength) {
    throw new LeaseholdError('invalid_request', `headers/idempotency-key must be at most ${LIMITS.idempotencyKeyLength} characters`);
  }
  if (!STORABLE_KEY.test(key)) {
    throw new LeaseholdError('invalid_request', 'headers/idempotency-key must not contain NUL or unpaired surrogates');
  }
  return key;
}

/**
 * canonicalJson(body), built around the payload's canonical text that was
 * computed anyway for its size, so a large payload is serialized once.
 */
export function canonicalRequestText(body: Readonly<Record<string, unknown>>, payloadText: string): string {
  const parts: string[] = [];
  for (const key of Object.keys(body).sort()) {
    const value = body[key];
    if (value === undefined) continue;
    parts.push(`${JSON.stringify(key)}:${key === 'payload' ? payloadText : canonicalJson(value)}`);
  }
  return `{${parts.join(',')}}`;
}

export async function prepareEnqueue(ctx: EngineContext, principal: Principal, request: EnqueueRequest, idempotencyKey: string): Promise<EnqueueParams> {
  return prepareEnqueueWith(await ctx.kinds.forTenant(principal.tenant), ctx, principal, request, idempotencyKey);
}

/** prepareEnqueue with the tenant's kinds at hand (synchronous). */
export function prepareEnqueueWith(
  tenantKinds: TenantKinds,
  ctx: Pick<EngineContext, 'config'>,
  principal: Principal,
  request: EnqueueRequest,
  idempotencyKey: string,
): EnqueueParams {
  const kind = tenantKinds.byName.get(request.kind);
  if (kind === undefined && (ctx.config.requireRegisteredKinds || tenantKinds.byName.size > 0)) {
    throw new LeaseholdError('unknown_kind', `kind "${request.kind}" is not registered for this tenant`);
  }
  const payloadText = canonicalJson(request.payload);
  const payloadBytes = Buffer.byteLength(payloadText, 'utf8');
  if (kind !== undefined) {
    if (payloadBytes > kind.record.maxPayloadBytes) {
      throw new LeaseholdError('payload_too_large', `the payload is ${payloadBytes} bytes; kind "${request.kind}" allows ${kind.record.maxPayloadBytes}`);
    }
    if (kind.validate !== null && !kind.validate(request.payload)) {
      throw new LeaseholdError('invalid_payload', describePayloadError(kind.validate.errors));
    }
  }
  let runAfter: number | null = null;
  if (request.runAfter !== undefined) {
    runAfter = parseRfc3339(request.runAfter);
    if (runAfter === null) throw new LeaseholdError('invalid_request', 'body/runAfter must be an RFC 3339 timestamp');
  }
  return {
    tenant: principal.tenant,
    owner: principal.user,
    idempotencyKey,
    requestHash: sha256Hex(canonicalRequestText(request as Readonly<Record<string, unknown>>, payloadText)),
    kind: request.kind,
    payload: request.payload,
    maxAttempts: request.maxAttempts ?? kind?.record.maxAttempts ?? ctx.config.defaultMaxAttempts,
    priority: request.priority ?? 0,
    runAfter,
    deadlineMs: request.deadlineMs ?? kind?.record.deadlineMs ?? null,
    payloadBytes,
    payloadJson: payloadText,
    ...(request.dependsOn === undefined || request.dependsOn.length === 0 ? {} : { dependsOn: request.dependsOn }),
    // A producer sees only its own jobs, so only those can be its parents (another's is unknown).
    ...(principal.role === 'producer' ? { dependsOnOwner: principal.user } : {}),
    ...(request.concurrencyKey === undefined ? {} : { concurrencyKey: request.concurrencyKey }),
    ...(request.group === undefined ? {} : { group: request.group }),
    ...(request.dedupe === undefined ? {} : { dedupe: request.dedupe }),
    ...(request.unique === undefined ? {} : { unique: request.unique }),
  };
}

/** The outcomes that refuse the request: a conflicting idempotency key, or a unique key's holder. */
export type RefusedOutcome = Extract<EnqueueOutcome, { kind: 'conflict' } | { kind: 'duplicate' }>;
/** The outcomes that answer with a job: created, replayed (Idempotent-Replayed) or deduplicated (Deduplicated). */
export type AcceptedOutcome = Exclude<EnqueueOutcome, RefusedOutcome>;

export function isRefused(outcome: EnqueueOutcome): outcome is RefusedOutcome {
  return outcome.kind === 'conflict' || outcome.kind === 'duplicate';
}

/** The error a refused enqueue answers: idempotency_conflict, or duplicate_job naming the unique key's holder. */
export function refusalOf(outcome: RefusedOutcome): LeaseholdError {
  return outcome.kind === 'conflict' ? new LeaseholdError('idempotency_conflict') : duplicateJobError(outcome.job.id);
}

/** An enqueue the store answered: what it was given and what it answered. */
export interface StoredEnqueue {
  readonly params: EnqueueParams;
  readonly outcome: EnqueueOutcome;
}

/**
 * What follows every enqueue the store answered, on every path (POST /jobs and the library's enqueue, the
 * batch, enqueueInTransaction, the scheduler): each job answered with one (created, replayed, deduplicated) is
 * an enqueued event, and the created ones, with their payload bytes, count toward backpressure's snapshot and
 * the acceptance SLI. A refused one (a conflicting idempotency key, a unique key's holder) is neither.
 */
export function recordEnqueues(ctx: Pick<EngineContext, 'events' | 'backpressure'>, tenant: string, stored: readonly StoredEnqueue[]): void {
  let created = 0;
  let createdBytes = 0;
  for (const { params, outcome } of stored) {
    if (isRefused(outcome)) continue;
    ctx.events.enqueued(tenant, outcome, params.payloadBytes);
    if (outcome.kind === 'created') {
      created += 1;
      createdBytes += params.payloadBytes;
    }
  }
  if (created > 0) ctx.backpressure.recordAccepted(tenant, created, createdBytes);
}

/** One enqueue's answer from the store, recorded (recordEnqueues): its job, or the refusal thrown. */
export function settleEnqueue(
  ctx: Pick<EngineContext, 'events' | 'backpressure'>,
  tenant: string,
  params: EnqueueParams,
  outcome: EnqueueOutcome,
): AcceptedOutcome {
  recordEnqueues(ctx, tenant, [{ params, outcome }]);
  if (isRefused(outcome)) throw refusalOf(outcome);
  return outcome;
}

/** The job an enqueue answers with, flagged when a dedupe key folded the request into it. */
export function enqueueAnswer(outcome: AcceptedOutcome): EnqueueResponse {
  return outcome.kind === 'deduplicated' ? { ...toWireJob(outcome.job), deduplicated: true } : toWireJob(outcome.job);
}

/**
 * POST /jobs, after the body is parsed and the caller known: the kind rules, backpressure, the store, and
 * what follows it (settleEnqueue). The route and a library Queue's enqueue() both call this.
 */
export async function enqueueOne(
  ctx: EngineContext,
  principal: Principal,
  request: EnqueueRequest,
  idempotencyKeyHeader: string | string[] | undefined,
): Promise<AcceptedOutcome> {
  const key = requireIdempotencyKey(idempotencyKeyHeader);
  const params = await prepareEnqueue(ctx, principal, request, key);
  await ctx.backpressure.check(principal.tenant, 1, params.payloadBytes);
  const outcome = await enqueueOrHandOff(ctx, params);
  crashPoint('enqueue.after-commit');
  return settleEnqueue(ctx, principal.tenant, params, outcome);
}

/**
 * The store's enqueue; a job available now whose kind a parked poll of its tenant waits for, with nothing queued
 * before it (LeaseWaiters.claim), is leased to that poll in the same statement where the store can
 * (jobEnqueueLeased), so the poll's answer needs no lease of its own after the enqueue's commit.
 */
async function enqueueOrHandOff(ctx: EngineContext, params: EnqueueParams): Promise<EnqueueOutcome> {
  const store = ctx.store;
  const claim = store.jobEnqueueLeased === undefined || !mayHandOff(params) ? null : ctx.waiters.claim(params.tenant, params.kind);
  if (claim === null || store.jobEnqueueLeased === undefined) return store.jobEnqueue(params);
  let handed = false;
  try {
    const answer = await store.jobEnqueueLeased(params, claim.target);
    claim.target.job = answer.leased;
    handed = answer.leased !== null;
    return answer.outcome;
  } finally {
    claim.end(handed ? 'handed' : 'woken');
  }
}

/**
 * An enqueue inside the caller's own transaction, before the store: the same checks as enqueueOne, at once,
 * with the kind rules and the backpressure snapshot as last loaded (it cannot wait for either). The caller
 * hands the store's answer to settleEnqueue. Its counting happens when the store answers, inside the
 * transaction: a job whose transaction then rolls back was counted as accepted, which backpressure's next
 * snapshot corrects.
 */
export function prepareInTransaction(ctx: EngineContext, principal: Principal, request: EnqueueRequest, idempotencyKey: string): EnqueueParams {
  const key = requireIdempotencyKey(idempotencyKey);
  const kinds = ctx.kinds.loadedForTenant(principal.tenant);
  if (kinds === undefined) throw new LeaseholdError('store_unavailable', 'the kinds of this tenant are not loaded yet; retry');
  const params = prepareEnqueueWith(kinds, ctx, principal, request, key);
  ctx.backpressure.checkSnapshot(principal.tenant, 1, params.payloadBytes);
  return params;
}
