/**
 * Leasing: POST /lease (a long poll), and the calls a worker makes under a
 * lease while it runs: renew (with progress), effect and checkpoint.
 *
 * When nothing is available and the worker asked to wait, the request parks
 * in LeaseWaiters: the store's availability notification for its tenant and a
 * kind it asked for wakes it at once, and its group's timer wakes it when the
 * earliest delayed job or retry it could lease becomes due (jobNextDue, read
 * after each empty lease; nothing announces those). Between the two it issues
 * no query. A kind's limits (store/flow-limits.ts) are enforced by the store;
 * a poll they hold back waits for a job of its tenant to finish (a
 * maxConcurrent slot) or for its rate window to admit (the due timer), and a
 * resume or a changed limit announces the kind like new work. It answers 204 without a body when the wait ends empty, and stops
 * waiting when the client disconnects or the coordinator closes.
 */

import { performance } from 'node:perf_hooks';
import { Type } from '@sinclair/typebox';
import { canonicalJson } from '../../core/canonical-json.js';
import { toRfc3339 } from '../../core/clock.js';
import { LeaseholdError } from '../../core/errors.js';
import { crashPoint } from '../../core/fault-points.js';
import { isJobId } from '../../core/ids.js';
import {
  CheckpointRequest,
  IdParams,
  LeaseRequest,
  LeaseResponse,
  OkResponse,
  RenewRequest,
  RenewResponse,
  TokenRequest,
} from '../../protocol/schemas.js';
import type { LeasedJob, LeaseParams } from '../../store/store.js';
import { principalOf } from '../auth.js';
import { waiterGroup } from '../lease-waiters.js';
import { errorResponses, type CoordinatorApp, type RouteContext } from '../route-context.js';
import { toWireLeasedJob } from '../wire.js';
import { rejection } from './rejections.js';

/** Progress is for display; a larger value belongs in a checkpoint or the result. */
export const MAX_PROGRESS_BYTES = 4096;

export function registerLeaseRoutes(app: CoordinatorApp, ctx: RouteContext): void {
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
      const body = request.body;
      const max = body.max ?? 1;
      const params: LeaseParams = {
        tenant: principal.tenant,
        workerId: body.workerId,
        leaseMs: body.leaseMs ?? (await defaultLeaseMs(ctx, principal.tenant, body.kinds)),
        max,
        ...(body.kinds === undefined || body.kinds.length === 0 ? {} : { kinds: body.kinds }),
      };
      // The lease starts no earlier than this much after the request arrived: the worker places it on its clock by that.
      const arrivedAt = performance.now();
      let waitedMs = 0;
      let generation = ctx.waiters.generation(principal.tenant);
      let finished = ctx.waiters.finishedGeneration();
      let jobs: readonly LeasedJob[] = await ctx.store.jobLease(params);
      const waitMs = body.waitMs ?? 0;
      if (jobs.length === 0 && waitMs > 0) {
        const group = waiterGroup(body.kinds);
        const deadline = performance.now() + waitMs;
        const gone = new AbortController();
        const onClose = (): void => gone.abort();
        reply.raw.once('close', onClose);
        try {
          const nextDue = { tenant: principal.tenant, ...(params.kinds === undefined ? {} : { kinds: params.kinds }) };
          const recheckMs = ctx.config.leaseRecheckMs ?? Number.POSITIVE_INFINITY;
          while (jobs.length === 0) {
            // Read after the empty lease: a job that became due in between is answered as due now (0).
            const next = await ctx.store.jobNextDue(nextDue);
            const dueInMs = next?.inMs ?? null;
            const slotSeen = next?.slotHeld === true ? finished : null;
            const remaining = deadline - performance.now();
            if (remaining <= 0) {
              // This poll ends; its group's other members still need the due time it found.
              ctx.waiters.schedule(principal.tenant, body.kinds, dueInMs);
              break;
            }
            const result = await ctx.waiters.wait(principal.tenant, body.kinds, Math.min(remaining, recheckMs), generation, gone.signal, dueInMs, slotSeen);
            if (result === 'aborted') break;
            // The poll's time is up and nothing was announced or came due: nothing to look for.
            if (result === 'timeout' && performance.now() >= deadline) break;
            generation = ctx.waiters.generation(principal.tenant);
            finished = ctx.waiters.finishedGeneration();
            waitedMs = Math.floor(performance.now() - arrivedAt);
            jobs = await ctx.store.jobLease(params);
            // A full batch may mean more work is waiting, and a due wake-up that leased took the group's timer
            // with it: pass the wake-up on (the next member leases or sets the timer to the next due job).
            if ((result === 'woken' && jobs.length === max) || (result === 'due' && jobs.length > 0)) ctx.waiters.wakeNext(principal.tenant, group);
          }
        } finally {
          reply.raw.off('close', onClose);
        }
      }
      ctx.events.leased(request.log, principal.tenant, params.workerId, params.leaseMs, jobs);
      if (jobs.length === 0) return reply.code(204).send(null);
      crashPoint('lease.after-commit');
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
    async (request) => {
      const principal = principalOf(request);
      const body = request.body;
      if (body.progress !== undefined && Buffer.byteLength(canonicalJson(body.progress), 'utf8') > MAX_PROGRESS_BYTES) {
        throw new LeaseholdError('payload_too_large', `progress must be at most ${MAX_PROGRESS_BYTES} bytes of JSON`);
      }
      if (!isJobId(request.params.id)) throw new LeaseholdError('not_found', 'job not found');
      const outcome = await ctx.store.jobRenew({
        tenant: principal.tenant,
        id: request.params.id,
        token: body.token,
        leaseMs: body.leaseMs ?? ctx.config.defaultLeaseMs,
        ...(body.progress === undefined ? {} : { progress: body.progress }),
      });
      if (outcome.kind === 'rejected') throw await rejection(ctx, principal.tenant, request.params.id, outcome.code);
      return { leaseExpiresAt: toRfc3339(outcome.leaseExpiresAt) };
    },
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
      const principal = principalOf(request);
      const id = request.params.id;
      if (!isJobId(id)) throw new LeaseholdError('not_found', 'job not found');
      const outcome = await ctx.store.jobMarkEffectStarted({ tenant: principal.tenant, id, token: request.body.token });
      if (outcome.kind === 'rejected') throw await rejection(ctx, principal.tenant, id, outcome.code);
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
      const principal = principalOf(request);
      const id = request.params.id;
      if (!isJobId(id)) throw new LeaseholdError('not_found', 'job not found');
      const body = request.body;
      const outcome = await ctx.store.jobCheckpoint({ tenant: principal.tenant, id, token: body.token, checkpoint: { step: body.step, state: body.state } });
      if (outcome.kind === 'rejected') throw await rejection(ctx, principal.tenant, id, outcome.code);
      return { ok: true as const };
    },
  );
}

/** A registered kind's lease duration when the worker leases exactly that kind; the default otherwise. */
async function defaultLeaseMs(ctx: RouteContext, tenant: string, kinds: readonly string[] | undefined): Promise<number> {
  if (kinds?.length === 1 && kinds[0] !== undefined) {
    const registered = (await ctx.kinds.forTenant(tenant)).byName.get(kinds[0]);
    if (registered !== undefined) return registered.record.leaseMs;
  }
  return ctx.config.defaultLeaseMs;
}
