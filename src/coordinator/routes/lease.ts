/**
 * Leasing: POST /lease (a long poll), and the calls a worker makes under a
 * lease while it runs: renew (with progress), effect and checkpoint. What
 * each call does is lease-protocol.ts (shared with the library's direct
 * worker transport); a route adds the body schema, the roles and, for the
 * long poll, the end of the wait when the client disconnects. An empty wait
 * answers 204 without a body.
 */

import { Type } from '@sinclair/typebox';
import { CheckpointRequest, IdParams, LeaseRequest, LeaseResponse, OkResponse, RenewRequest, RenewResponse, TokenRequest } from '../../protocol/schemas.js';
import { principalOf } from '../auth.js';
import { leaseJobs, markEffectStarted, renewLease, saveCheckpoint, type LeaseWaitScope } from '../../engine/lease-protocol.js';
import { errorResponses, type CoordinatorApp } from '../route-context.js';
import type { EngineContext } from '../../engine/context.js';
import { toWireLeasedJob } from '../../engine/wire.js';

export function registerLeaseRoutes(app: CoordinatorApp, ctx: EngineContext): void {
  app.post(
    '/lease',
    {
      config: { roles: ['worker', 'admin'] },
      schema: {
        summary: 'Lease available jobs (long poll)',
        description: 'Answers 200 with up to `max` jobs, or 204 without a body when none became available within `waitMs`.',
        tags: ['lease'],
        body: LeaseRequest,
        response: { 200: LeaseResponse, 204: Type.Null({ description: 'Nothing available' }), ...errorResponses() },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      // A parked poll ends when the client goes away.
      const openWait = (): LeaseWaitScope => {
        const gone = new AbortController();
        const onClose = (): void => gone.abort();
        reply.raw.once('close', onClose);
        return { signal: gone.signal, release: () => reply.raw.off('close', onClose) };
      };
      const { jobs, waitedMs } = await leaseJobs(ctx, request.log, principal.tenant, request.body, openWait);
      if (jobs.length === 0) return reply.code(204).send(null);
      return { jobs: jobs.map(toWireLeasedJob), waitedMs };
    },
  );

  app.post(
    '/jobs/:id/renew',
    {
      config: { roles: ['worker', 'admin'] },
      schema: {
        summary: 'Extend a lease (optionally reporting progress)',
        description: 'Only while the token is the current lease and unexpired; otherwise 409 stale_lease (or cancelled, deadline_exceeded).',
        tags: ['lease'],
        params: IdParams,
        body: RenewRequest,
        response: { 200: RenewResponse, ...errorResponses(404, 409, 413) },
      },
    },
    async (request) => renewLease(ctx, principalOf(request).tenant, request.params.id, request.body),
  );

  app.post(
    '/jobs/:id/effect',
    {
      config: { roles: ['worker', 'admin'] },
      schema: {
        summary: 'Declare that the handler starts an external side effect',
        description:
          'Call before an effect the queue cannot fence. If this lease then expires, the job becomes unknown and is never retried automatically; an admin reconciles it.',
        tags: ['lease'],
        params: IdParams,
        body: TokenRequest,
        response: { 200: OkResponse, ...errorResponses(404, 409) },
      },
    },
    async (request) => {
      await markEffectStarted(ctx, principalOf(request).tenant, request.params.id, request.body.token);
      return { ok: true as const };
    },
  );

  app.post(
    '/jobs/:id/checkpoint',
    {
      config: { roles: ['worker', 'admin'] },
      schema: {
        summary: 'Store the latest step and its state',
        description: 'Only under the live lease. The next lease of the job carries the checkpoint, so a restarted job resumes where it stopped.',
        tags: ['lease'],
        params: IdParams,
        body: CheckpointRequest,
        response: { 200: OkResponse, ...errorResponses(404, 409, 413) },
      },
    },
    async (request) => {
      await saveCheckpoint(ctx, principalOf(request).tenant, request.params.id, request.body);
      return { ok: true as const };
    },
  );
}
