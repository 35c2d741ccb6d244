/**
 * The admin's operations over many jobs: the tenant's stats, a bulk action
 * over what a filter selects (bulk-actions.ts), and purging finished jobs.
 * A purge deletes the tenant's finished jobs that finished at least
 * `olderThanMs` ago, whatever their kind's retention says, in retention
 * batches and at most PURGE_BATCHES_PER_REQUEST batches per call (1,000 jobs
 * by default), so no call runs long; `more: true` asks the caller to call
 * again (`leasehold purge` does, showing progress). `dryRun` counts instead.
 * `unknown` jobs are never purged: they wait for an operator's reconcile.
 */

import type { BulkRequest, BulkResponse } from '../protocol/operator.js';
import type { PurgeRequest, PurgeResponse } from '../protocol/retention.js';
import type { Stats } from '../protocol/schemas.js';
import { PURGEABLE_STATUSES } from '../store/retention.js';
import { runBulkAction } from './bulk-actions.js';
import type { EngineContext } from './context.js';
import { scopeOf, type Principal } from './principal.js';
import { purgeJobs } from './retention.js';
import { toWireStats } from './wire.js';

/** Batches of retentionBatchSize jobs one purge deletes at most. */
export const PURGE_BATCHES_PER_REQUEST = 10;

export async function tenantStats(ctx: EngineContext, principal: Principal): Promise<Stats> {
  return toWireStats(await ctx.store.stats({ tenant: principal.tenant }));
}

export function bulkAction(ctx: EngineContext, principal: Principal, request: BulkRequest): Promise<BulkResponse> {
  return runBulkAction(ctx.store, scopeOf(principal), request);
}

export async function purgeFinished(ctx: EngineContext, principal: Principal, request: PurgeRequest): Promise<PurgeResponse> {
  const statuses = request.statuses ?? PURGEABLE_STATUSES;
  const filter = { tenant: principal.tenant, kindRetention: false, ...(request.kind === undefined ? {} : { kind: request.kind }) };
  if (request.dryRun === true) {
    let matched = 0;
    for (const status of statuses) matched += await ctx.store.jobPurgeCount({ ...filter, status, olderThanMs: request.olderThanMs });
    return { deleted: 0, matched, more: false };
  }
  return purgeJobs(ctx.store, {
    ...filter,
    olderThanMs: () => request.olderThanMs,
    statuses,
    batchSize: ctx.config.retentionBatchSize,
    maxJobs: PURGE_BATCHES_PER_REQUEST * ctx.config.retentionBatchSize,
  });
}
