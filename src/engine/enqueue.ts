/**
 * Turns one validated enqueue request into the store's EnqueueParams: applies
 * the tenant's kind rules (allowlist, payload schema, payload size), the
 * defaults (attempts, deadline), and computes the idempotency hash over the
 * canonical request body. Shared by POST /jobs and POST /jobs/batch, so a job
 * enqueued either way under the same key compares equal.
 */

import { canonicalJson } from '../core/canonical-json.js';
import { parseRfc3339 } from '../core/clock.js';
import { duplicateJobError, LeaseholdError } from '../core/errors.js';
import { sha256Hex } from '../core/ids.js';
import { LIMITS, STORABLE_KEY_PATTERN } from '../protocol/limits.js';
import type { EnqueueRequest } from '../protocol/schemas.js';
import type { EnqueueOutcome, EnqueueParams } from '../store/store.js';
import { crashPoint } from '../core/fault-points.js';
import { Principal } from './principal.js';
import { describePayloadError, type TenantKinds } from './kind-registry.js';
import type { EngineContext } from './context.js';

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

export async function prepareEnqueue(
  ctx: EngineContext,
  principal: Principal,
  request: EnqueueRequest,
  idempotencyKey: string,
): Promise<EnqueueParams> {
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

/**
 * POST /jobs, after the body is parsed and the caller known: the kind rules, backpressure, the store, and
 * the counting of what was accepted. The route and a library Queue's enqueue() both call this.
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
  const outcome = await ctx.store.jobEnqueue(params);
  crashPoint('enqueue.after-commit');
  if (isRefused(outcome)) throw refusalOf(outcome);
  ctx.events.enqueued(principal.tenant, outcome, params.payloadBytes);
  if (outcome.kind === 'created') ctx.backpressure.recordAccepted(principal.tenant, 1, params.payloadBytes);
  return outcome;
}
