/**
 * How a refused token call is explained to the worker. The store reports
 * `stale_lease` whenever the token is not a live lease; since leases are
 * capped at the job's deadline, a call after the deadline looks the same to
 * it. The worker deserves the real reason (it decides whether to abort or
 * just stop), so a stale rejection of a job whose deadline has passed is
 * answered as `deadline_exceeded`. Both are 409 and nothing was stored.
 */

import { LeaseholdError } from '../core/errors.js';
import type { EngineContext } from './context.js';

export type RejectionCode = 'stale_lease' | 'cancelled' | 'deadline_exceeded' | 'not_found';

export async function explainRejection(ctx: EngineContext, tenant: string, id: string, code: RejectionCode): Promise<RejectionCode> {
  if (code !== 'stale_lease') return code;
  const job = await ctx.store.jobGet({ scope: { tenant }, id });
  if (job === null || job.deadlineAt === null) return code;
  return job.deadlineAt <= (await ctx.store.now()) ? 'deadline_exceeded' : code;
}

export async function rejection(ctx: EngineContext, tenant: string, id: string, code: RejectionCode): Promise<LeaseholdError> {
  const explained = await explainRejection(ctx, tenant, id, code);
  return new LeaseholdError(explained);
}
