/**
 * The tenant's kind registry: PUT /kinds/{kind} (admin) registers or replaces
 * a kind with every default filled in, GET /kinds lists them. A payload schema
 * is compiled before it is stored, so a schema Ajv cannot use is refused here
 * rather than at the first enqueue.
 */

import { LeaseholdError } from '../../core/errors.js';
import { KindDefinition, KindList, KindParams, Kind } from '../../protocol/schemas.js';
import { principalOf } from '../auth.js';
import { errorResponses, type CoordinatorApp, type RouteContext } from '../route-context.js';
import { toWireKind } from '../wire.js';
import { emptyBodyAsObject } from './jobs.js';

export function registerKindRoutes(app: CoordinatorApp, ctx: RouteContext): void {
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
      });
      ctx.kinds.remember(record, validate);
      ctx.kinds.invalidate(principal.tenant);
      return toWireKind(record, ctx.config.retention);
    },
  );

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
async function refuseBeyondKindCap(ctx: RouteContext, tenant: string, kind: string): Promise<void> {
  const existing = (await ctx.kinds.forTenant(tenant)).byName;
  if (existing.size < ctx.config.maxKindsPerTenant || existing.has(kind)) return;
  throw new LeaseholdError(
    'invalid_request',
    `the tenant already has ${existing.size} kinds, the most this coordinator allows (maxKindsPerTenant); replace an existing kind instead`,
  );
}
