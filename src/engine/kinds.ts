/**
 * The tenant's kind registry: put registers or replaces a kind with every
 * default filled in, get and list read them, pause and resume stop and
 * restart its leasing (the store enforces both, and the kind's
 * maxConcurrent and rate, inside the lease transaction: flow-limits.ts). A
 * payload schema is compiled before it is stored, so a schema Ajv cannot use
 * is refused here rather than at the first enqueue. Each change invalidates
 * the registry's cache of the tenant's kinds.
 */

import { LeaseholdError } from '../core/errors.js';
import { parseGroupRules, type GroupRules } from '../core/fair-share.js';
import type { Kind, KindDefinition } from '../protocol/schemas.js';
import type { EngineContext } from './context.js';
import type { Principal } from './principal.js';
import { toWireKind } from './wire.js';

/** A kind the tenant has not registered (another tenant's answers the same). */
const KIND_NOT_FOUND = 'kind not found';

export async function putKind(ctx: EngineContext, principal: Principal, kind: string, definition: KindDefinition): Promise<Kind> {
  const payloadSchema = definition.payloadSchema ?? null;
  const validate = payloadSchema === null ? null : await ctx.kinds.compile(payloadSchema);
  const backoff = definition.backoff ?? ctx.config.defaultBackoff;
  if (backoff.maxMs < backoff.baseMs) throw new LeaseholdError('invalid_request', 'body/backoff/maxMs must be >= body/backoff/baseMs');
  const groups = groupRulesOf(definition);
  await refuseBeyondKindCap(ctx, principal.tenant, kind);
  const record = await ctx.store.kindUpsert({
    tenant: principal.tenant,
    kind,
    payloadSchema,
    maxPayloadBytes: definition.maxPayloadBytes ?? ctx.config.bodyLimitBytes,
    maxAttempts: definition.maxAttempts ?? ctx.config.defaultMaxAttempts,
    leaseMs: definition.leaseMs ?? ctx.config.defaultLeaseMs,
    backoff: { baseMs: backoff.baseMs, maxMs: backoff.maxMs },
    deadlineMs: definition.deadlineMs ?? null,
    maxResultBytes: definition.maxResultBytes ?? ctx.config.bodyLimitBytes,
    maxCheckpointBytes: definition.maxCheckpointBytes ?? ctx.config.maxCheckpointBytes,
    retention: {
      succeededMs: definition.retention?.succeededMs ?? null,
      cancelledMs: definition.retention?.cancelledMs ?? null,
      deadMs: definition.retention?.deadMs ?? null,
    },
    maxConcurrent: definition.maxConcurrent ?? null,
    rate: definition.rate === undefined || definition.rate === null ? null : { limit: definition.rate.limit, perMs: definition.rate.perMs },
    groups,
  });
  ctx.kinds.remember(record, validate);
  ctx.kinds.invalidate(principal.tenant);
  return toWireKind(record, ctx.config.retention);
}

/** The kind's groups, validated by core's parseGroupRules (which also bounds the weights' keys); null for none. */
function groupRulesOf(definition: KindDefinition): GroupRules | null {
  if (definition.groups === undefined || definition.groups === null) return null;
  const parsed = parseGroupRules(definition.groups);
  if (!parsed.ok) throw new LeaseholdError('invalid_request', `body/groups: ${parsed.problems.slice(0, 5).join('; ')}`);
  return parsed.rules;
}

export async function getKind(ctx: EngineContext, principal: Principal, kind: string): Promise<Kind> {
  const record = await ctx.store.kindGet({ tenant: principal.tenant, kind });
  if (record === null) throw new LeaseholdError('not_found', KIND_NOT_FOUND);
  return toWireKind(record, ctx.config.retention);
}

/** Pausing a paused kind, or resuming one that is not, answers it as it is. */
export async function setKindPaused(ctx: EngineContext, principal: Principal, kind: string, paused: boolean): Promise<Kind> {
  const record = await ctx.store.kindSetPaused({ tenant: principal.tenant, kind, paused });
  if (record === null) throw new LeaseholdError('not_found', KIND_NOT_FOUND);
  ctx.kinds.invalidate(principal.tenant);
  return toWireKind(record, ctx.config.retention);
}

export async function listKinds(ctx: EngineContext, principal: Principal): Promise<Kind[]> {
  const kinds = await ctx.store.kindList({ tenant: principal.tenant });
  return kinds.map((kind) => toWireKind(kind, ctx.config.retention));
}

/**
 * A tenant registers at most `maxKindsPerTenant` kinds: each one is a compiled
 * validator in every coordinator and a row read on every registry refresh.
 * Replacing a kind is always allowed. Two registrations racing past the cap
 * can exceed it by the number of concurrent requests, not more.
 */
async function refuseBeyondKindCap(ctx: EngineContext, tenant: string, kind: string): Promise<void> {
  const existing = (await ctx.kinds.forTenant(tenant)).byName;
  if (existing.size < ctx.config.maxKindsPerTenant || existing.has(kind)) return;
  throw new LeaseholdError(
    'invalid_request',
    `the tenant already has ${existing.size} kinds, the most this coordinator allows (maxKindsPerTenant); replace an existing kind instead`,
  );
}
