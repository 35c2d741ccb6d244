/**
 * What a principal does to one job beyond reading it: cancel (owner or
 * admin), and the admin's requeue of a dead job and reconcile of an unknown
 * one. Each is one guarded store transition; its refusal (invalid_state,
 * not_dead, not_unknown) is a LeaseholdError, and what it applied is counted
 * and logged (job-events.ts). Scoped like every lookup: another tenant's or
 * user's job is not_found.
 */

import { LeaseholdError } from '../core/errors.js';
import { isJobId } from '../core/ids.js';
import type { Job, ReconcileOutcomeName } from '../protocol/schemas.js';
import type { EngineContext } from './context.js';
import type { Logger } from './logger.js';
import { scopeOf, type Principal } from './principal.js';
import { toWireJob } from './wire.js';

export async function cancelJob(ctx: EngineContext, log: Logger, principal: Principal, id: string): Promise<Job> {
  if (!isJobId(id)) throw new LeaseholdError('not_found');
  const outcome = await ctx.store.jobCancel({ scope: scopeOf(principal), id });
  ctx.events.cancelled(log, principal.tenant, outcome);
  if (outcome.kind === 'rejected') throw new LeaseholdError(outcome.code);
  return toWireJob(outcome.job);
}

/** A dead job back in the queue with a fresh attempt budget (`maxAttempts` when given). */
export async function requeueJob(ctx: EngineContext, log: Logger, principal: Principal, id: string, options: { readonly maxAttempts?: number }): Promise<Job> {
  if (!isJobId(id)) throw new LeaseholdError('not_found');
  const outcome = await ctx.store.jobRequeue({
    scope: scopeOf(principal),
    id,
    ...(options.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }),
  });
  if (outcome.kind === 'rejected') throw new LeaseholdError(outcome.code);
  ctx.events.requeued(log, principal.tenant, outcome.job);
  return toWireJob(outcome.job);
}

/** An unknown job resolved: succeeded or dead end it, requeue puts it back with a fresh attempt budget. */
export async function reconcileJob(ctx: EngineContext, log: Logger, principal: Principal, id: string, outcomeName: ReconcileOutcomeName): Promise<Job> {
  if (!isJobId(id)) throw new LeaseholdError('not_found');
  const outcome = await ctx.store.jobReconcile({ scope: scopeOf(principal), id, outcome: outcomeName });
  if (outcome.kind === 'reconciled') ctx.events.reconciled(log, principal.tenant, outcome.job, outcomeName);
  if (outcome.kind === 'rejected') throw new LeaseholdError(outcome.code);
  return toWireJob(outcome.job);
}
