/**
 * The tenant's kind registry over HTTP: PUT /kinds/{kind} (admin) registers
 * or replaces a kind, GET /kinds and /kinds/{kind} read them, POST
 * /kinds/{kind}/pause and /resume (admin) stop and restart its leasing; the
 * engine's functions (engine/kinds.ts) do each.
 */

import { KindDefinition, KindList, KindParams, KindPauseRequest, Kind } from '../../protocol/schemas.js';
import { principalOf } from '../auth.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';
import { getKind, listKinds, putKind, setKindPaused } from '../../engine/kinds.js';
import { emptyBodyAsObject } from './jobs.js';

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
    async (request) => putKind(ctx, principalOf(request), request.params.kind, request.body),
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
    async (request) => getKind(ctx, principalOf(request), request.params.kind),
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
      async (request) => setKindPaused(ctx, principalOf(request), request.params.kind, action === 'pause'),
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
    async (request) => ({ kinds: await listKinds(ctx, principalOf(request)) }),
  );
}
