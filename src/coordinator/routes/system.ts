/**
 * Operational routes: tenant stats (admin), the health check and the OpenAPI
 * document (both public: load balancers and code generators carry no key).
 */

import { Type } from '@sinclair/typebox';
import { ERRORS, StoreUnavailableError } from '../../core/errors.js';
import { HealthResponse, Stats } from '../../protocol/schemas.js';
import { principalOf } from '../auth.js';
import { errorResponses, PUBLIC_ERRORS, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';
import { tenantStats } from '../../engine/operator.js';

export function registerSystemRoutes(app: CoordinatorApp, ctx: EngineContext): void {
  app.get(
    '/stats',
    {
      config: { roles: ['admin'] },
      schema: {
        summary: "The tenant's queue statistics (admin)",
        tags: ['system'],
        response: { 200: Stats, ...errorResponses() },
      },
    },
    async (request) => tenantStats(ctx, principalOf(request)),
  );

  app.get(
    '/healthz',
    {
      config: { public: true },
      schema: {
        summary: 'Health check: answers 200 when the store answers',
        tags: ['system'],
        security: [],
        response: { 200: HealthResponse, ...PUBLIC_ERRORS },
      },
    },
    async () => {
      try {
        await ctx.store.ping();
      } catch (error) {
        throw new StoreUnavailableError(ERRORS.store_unavailable.message, error);
      }
      return { status: 'ok' as const, backend: ctx.store.backend };
    },
  );

  app.get(
    '/openapi.json',
    {
      config: { public: true },
      schema: {
        summary: 'This API as an OpenAPI 3.1 document',
        tags: ['system'],
        security: [],
        response: { 200: Type.Object({}, { additionalProperties: true }), ...PUBLIC_ERRORS },
      },
    },
    async () => app.swagger(),
  );
}
