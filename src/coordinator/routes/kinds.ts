/**
 * The tenant's kind registry: PUT /kinds/{kind} (admin) registers or replaces
 * a kind with every default filled in, GET /kinds lists them. A payload schema
 * is compiled before it is stored, so a schema Ajv cannot use is refused here
 * rather than at the first enqueue. POST /kinds/{kind}/pause and /resume
 * (admin) stop and restart its leasing; the store enforces both and the
 * kind's maxConcurrent and rate inside the lease transaction (flow-limits.ts).
 */

import { LeaseholdError } from '../../core/errors.js';
import { KindDefinition, KindList, KindParams, KindPauseRequest, Kind } from '../../protocol/schemas.js';
import { principalOf } from '../auth.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';
import { toWireKind } from '../../engine/wire.js';
import { emptyBodyAsObject } from './jobs.js';

/** A kind the tenant has not registered (another tenant's answers the same). */
const KIND_NOT_FOUND = 'kind not found';

export function registerKindRoutes(app: CoordinatorApp, ctx: EngineContext): void {
  app.put(
    '/kinds/:kind',
    {
      config: { roles: ['admin'] },
      preValidation: emptyBodyAsObject,
      schema: {
        summary: 'Register or replace a kind (admin)',
        description:
          'Omitted fields take the coordinator defaults. Once a tenant registers any kind, enqueueing an unregistered kind answers 400 unknown_kind.',
        tags: ['kinds'],
        params: KindParams,
        body: KindDefinition,
        response: { 200: Kind, ...errorResponses() },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const body = request.body;
      const payloadSchema = body.payloadSchema ?? null;
      const validate = payloadSchema === null ? null : await ctx.kinds.compile(payloadSchema);
      const backoff = body.backoff ?? ctx.config.defaultBackoff;
      if (backoff.maxMs < backoff.baseMs) throw new LeaseholdError('invalid_request', 'body/backoff/maxMs must be >= body/backoff/baseMs');
      await refuseBeyondKindCap(ctx, principal.tenant, request.params.kind);
      const record = await ctx.store.kindUpsert({
        tenant: principal.tenant,
        kind: request.params.kind,
        payloadSchema,
        maxPayloadBytes: body.maxPayloadBytes ?? ctx.config.bodyLimitBytes,
        maxAttempts: body.maxAttempts ?? ctx.config.defaultMaxAttempts,
        leaseMs: body.leaseMs ?? ctx.config.defaultLeaseMs,
        backoff: { baseMs: backoff.baseMs, maxMs: backoff.maxMs },
        deadlineMs: body.deadlineMs ?? null,
        maxResultBytes: body.maxResultBytes ?? ctx.config.bodyLimitBytes,
        maxCheckpointBytes: body.maxCheckpointBytes ?? ctx.config.maxCheckpointBytes,
        retention: {
          succeededMs: body.retention?.succeededMs ?? null,
          cancelledMs: body.retention?.cancelledMs ?? null,
          deadMs: body.retention?.deadMs ?? null,
        },
        maxConcurrent: body.maxConcurrent ?? null,
        rate: body.rate === undefined || body.rate === null ? null : { limit: body.rate.limit, perMs: body.rate.perMs },
      });
      ctx.kinds.remember(record, validate);
      ctx.kinds.invalidate(principal.tenant);
      return toWireKind(record, ctx.config.retention);
    },
  );

  app.get(
    '/kinds/:kind',
    {
      config: { roles: ['producer', 'worker', 'admin'] },
      schema: {
        summary: 'One registered kind',
        tags: ['kinds'],
        params: KindParams,
        response: { 200: Kind, ...errorResponses(404) },
      },
    },
    async (request) => {
      const kind = await ctx.store.kindGet({ tenant: principalOf(request).tenant, kind: request.params.kind });
      if (kind === null) throw new LeaseholdError('not_found', KIND_NOT_FOUND);
      return toWireKind(kind, ctx.config.retention);
    },
  );

  for (const action of ['pause', 'resume'] as const) {
    app.post(
      `/kinds/:kind/${action}`,
      {
        config: { roles: ['admin'] },
        preValidation: emptyBodyAsObject,
        schema: {
          summary: action === 'pause' ? 'Pause a kind: its jobs are not leased until it is resumed (admin)' : 'Resume a paused kind (admin)',
          description:
            action === 'pause'
              ? 'Enqueues still succeed and running jobs finish; no lease, with or without a kinds filter, takes its jobs. Pausing a paused kind answers it as it is.'
              : 'Parked long polls that could lease the kind are woken at once. Resuming a kind that is not paused answers it as it is.',
          tags: ['kinds'],
          params: KindParams,
          body: KindPauseRequest,
          response: { 200: Kind, ...errorResponses(404) },
        },
      },
      async (request) => {
        const tenant = principalOf(request).tenant;
        const record = await ctx.store.kindSetPaused({ tenant, kind: request.params.kind, paused: action === 'pause' });
        if (record === null) throw new LeaseholdError('not_found', KIND_NOT_FOUND);
        ctx.kinds.invalidate(tenant);
        return toWireKind(record, ctx.config.retention);
      },
    );
  }

  app.get(
    '/kinds',
    {
      config: { roles: ['producer', 'worker', 'admin'] },
      schema: {
        summary: "The tenant's registered kinds",
        tags: ['kinds'],
        response: { 200: KindList, ...errorResponses() },
      },
    },
    async (request) => {
      const kinds = await ctx.store.kindList({ tenant: principalOf(request).tenant });
      return { kinds: kinds.map((kind) => toWireKind(kind, ctx.config.retention)) };
    },
  );
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
