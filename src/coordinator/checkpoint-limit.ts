/**
 * The checkpoint state limit: a checkpoint is stored with its job and handed
 * to every later lease, so it is capped like a payload — the kind's
 * `maxCheckpointBytes`, or the coordinator's `maxCheckpointBytes` for an
 * unregistered kind — and a larger one answers 413 before anything is
 * written. Installed as a hook on the checkpoint route; the job's kind is
 * read only when the state is larger than the smallest limit that could apply.
 */

import type { FastifyRequest } from 'fastify';
import { canonicalJson } from '../core/canonical-json.js';
import { LeaseholdError } from '../core/errors.js';
import { isJobId } from '../core/ids.js';
import { principalOf } from './auth.js';
import type { CoordinatorApp, RouteContext } from './route-context.js';

export const CHECKPOINT_ROUTE = '/jobs/:id/checkpoint';

export function installCheckpointLimit(app: CoordinatorApp, ctx: RouteContext): void {
  app.addHook('preHandler', async (request: FastifyRequest) => {
    if (request.routeOptions.url !== CHECKPOINT_ROUTE) return;
    const body = request.body as { readonly state?: unknown } | undefined;
    const bytes = Buffer.byteLength(canonicalJson(body?.state ?? null), 'utf8');
    const tenant = principalOf(request).tenant;
    const kinds = await ctx.kinds.forTenant(tenant);
    const fallback = ctx.config.maxCheckpointBytes;
    if (bytes <= Math.min(fallback, kinds.smallestMaxCheckpointBytes ?? fallback)) return;
    const id = (request.params as { readonly id?: string }).id ?? '';
    const job = isJobId(id) ? await ctx.store.jobGet({ scope: { tenant }, id }) : null;
    if (job === null) return; // The route answers not_found.
    const limit = kinds.byName.get(job.kind)?.record.maxCheckpointBytes ?? fallback;
    if (bytes > limit) {
      throw new LeaseholdError('payload_too_large', `the checkpoint state is ${bytes} bytes of JSON; kind "${job.kind}" allows ${limit}`);
    }
  });
}
